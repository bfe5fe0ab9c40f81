"""Train a small classifier from a Dataset read by a DataLoader with worker processes.

    python examples/dataloader_workers.py [--engine reference] [--smoke] [--workers 2]

The dataset makes each sample on demand in __getitem__ (a noisy point on one of three interleaved spirals, a
deterministic function of the index, standing in for a file decoded per sample). A DataLoader with --workers
processes (worker_init_fn reports each worker's seed, persistent_workers keeps them across epochs) shuffles and
batches it; an MLP is trained with AdamW and a OneCycleLR schedule stepped per batch. Before training, one epoch
read with the workers is checked to give exactly the batches of the same loader without workers (OK /
MISMATCH), and training must reach 90% accuracy on a held-out split (70% in --smoke mode).
"""
import time

import numpy as np

from _common import parse_args, progress, set_postfix, save_plot, log


class Spirals:
    """Sample i: (features float32 of shape (2,), class int). Built as a subclass of the engine's Dataset below."""

    classes = 3

    def __init__(self, n, seed, noise=0.15):
        self.n, self.seed, self.noise = n, seed, noise

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        if not 0 <= i < self.n:
            raise IndexError(f"sample {i} is out of range for a dataset of {self.n}")
        rng = np.random.default_rng([self.seed, i])          # the sample depends on its index only
        label = i % self.classes
        t = rng.uniform(0.1, 1.0)
        angle = 4.0 * t + label * 2 * np.pi / self.classes
        point = t * np.array([np.cos(angle), np.sin(angle)]) + self.noise * t * rng.standard_normal(2)
        return point.astype(np.float32), label


def seed_report(worker_id):
    # runs in each worker process at start-up; the engine's generator there is already seeded with info.seed
    import sys
    sys.stdout.write(f"  worker {worker_id} started\n")


def main():
    def extra(p):
        p.add_argument("--workers", type=int, default=2)
        p.add_argument("--epochs", type=int, default=30)
    args = parse_args(__doc__.splitlines()[0], extra)
    dg = args.dg
    nn, data = dg.nn, dg.utils.data

    dataset_cls = type("SpiralDataset", (Spirals, data.Dataset), {})
    n = 600 if args.smoke else 3000
    dataset = dataset_cls(n, args.seed)
    train, test = data.random_split(dataset, [0.8, 0.2], generator=np.random.default_rng(args.seed))
    epochs = 6 if args.smoke else args.epochs
    batch_size = 50

    # the workers read exactly what the main process would: compare one unshuffled epoch both ways
    plain = data.DataLoader(train, batch_size=batch_size)
    with_workers = data.DataLoader(train, batch_size=batch_size, num_workers=args.workers)
    same = all(np.array_equal(a[0].numpy(), b[0].numpy()) and a[1].tolist() == b[1].tolist()
               for a, b in zip(plain, with_workers, strict=True))
    print(f"one epoch with {args.workers} workers gives the batches of 0 workers: {'OK' if same else 'MISMATCH'}")
    if not same:
        raise SystemExit("the worker processes returned different batches")

    loader = data.DataLoader(train, batch_size=batch_size, shuffle=True, num_workers=args.workers,
                             worker_init_fn=seed_report, persistent_workers=args.workers > 0,
                             generator=np.random.default_rng(args.seed))
    test_loader = data.DataLoader(test, batch_size=200)
    model = nn.Sequential(nn.Linear(2, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 3))
    opt = dg.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=1e-4)
    sched = dg.optim.lr_scheduler.OneCycleLR(opt, max_lr=2e-2, epochs=epochs, steps_per_epoch=len(loader))

    def accuracy():
        model.eval()
        correct = total = 0
        with dg.no_grad():
            for x, y in test_loader:
                correct += int((model(x).argmax(1) == y).sum().item())
                total += len(y)
        model.train()
        return correct / total

    start = time.time()
    history = []
    bar = progress(range(epochs), "epochs", enabled=not args.smoke)
    for epoch in bar:
        total = 0.0
        for x, y in loader:
            opt.zero_grad()
            loss = nn.functional.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            sched.step()
            total += loss.item() * len(y)
        history.append(total / len(train))
        set_postfix(bar, loss=history[-1])
        if args.smoke or epoch % 5 == 4:
            log(bar, f"epoch {epoch + 1}: train loss {history[-1]:.4f}, lr {sched.get_last_lr()[0]:.2e}")
    acc = accuracy()
    print(f"{args.engine}: test accuracy {acc:.3f} after {epochs} epochs ({time.time() - start:.1f}s, "
          f"{args.workers} workers)")
    target = 0.7 if args.smoke else 0.9
    if acc < target:
        raise SystemExit(f"test accuracy {acc:.3f} is below the target {target}")
    save_plot(args, "dataloader_workers_loss.png", lambda plt: (plt.plot(history), plt.xlabel("epoch"),
                                                                plt.ylabel("train loss")))


if __name__ == "__main__":
    main()
