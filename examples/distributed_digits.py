"""Data-parallel training over MPI: the digits MLP (or CNN) on N processes, same accuracy as on one.

    mpiexec -n 2 python examples/distributed_digits.py [--engine reference] [--model cnn] [--smoke]
    python examples/distributed_digits.py            # one process: the same script, world size 1

Every rank builds the model, wraps it in DistributedDataParallel (which copies rank 0's parameters to the others)
and trains on its own share of each epoch (DistributedSampler). The global batch is --batch-size split evenly over
the ranks, and backward averages the gradients across ranks, so each step is the step one process would take on
the whole batch: the accuracy does not depend on the number of ranks. Needs `pip install 'dyngrad[distributed]'`
and scikit-learn (the digits).
"""
import time

import numpy as np

from _common import parse_args
from _digits import load_digits_split, evaluate


def build(nn, kind):
    if kind == "mlp":
        return nn.Sequential(nn.Flatten(), nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 64), nn.ReLU(),
                             nn.Linear(64, 10))
    return nn.Sequential(
        nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(128, 64), nn.ReLU(), nn.Linear(64, 10))


def main():
    def extra(p):
        p.add_argument("--model", choices=["mlp", "cnn"], default="mlp")
        p.add_argument("--epochs", type=int, default=30)
        p.add_argument("--batch-size", type=int, default=32, help="the global batch, split over the ranks")
    args = parse_args(__doc__.splitlines()[0], extra)
    dg = args.dg
    nn, data, dist = dg.nn, dg.utils.data, dg.distributed
    dist.init_process_group(backend="mpi")
    rank, world = dist.get_rank(), dist.get_world_size()
    if args.batch_size % world:
        raise SystemExit(f"--batch-size {args.batch_size} must be divisible by the number of ranks ({world})")
    say = print if rank == 0 else (lambda *a, **k: None)

    x_train, y_train, x_test, y_test = load_digits_split(args.smoke, args.seed)
    if args.model == "cnn":
        x_train, x_test = x_train[:, None], x_test[:, None]
    dataset = data.TensorDataset(dg.tensor(x_train), dg.tensor(y_train))
    sampler = data.DistributedSampler(dataset, shuffle=True, seed=args.seed)
    loader = data.DataLoader(dataset, batch_size=args.batch_size // world, sampler=sampler)

    dg.manual_seed(args.seed + rank)       # different on purpose: DDP starts every rank from rank 0's parameters
    model = nn.parallel.DistributedDataParallel(build(nn, args.model))
    opt = dg.optim.Adam(model.parameters(), lr=3e-3)
    epochs = 1 if args.smoke else args.epochs
    sched = dg.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=epochs)
    loss_fn = nn.CrossEntropyLoss()
    say(f"{world} rank(s), {args.model}, global batch {args.batch_size} ({args.batch_size // world} per rank), "
        f"{len(loader)} steps per epoch, {args.engine} engine")
    start = time.perf_counter()
    for epoch in range(epochs):
        sampler.set_epoch(epoch)           # a new shuffle each epoch, the same on every rank
        model.train()
        total = dg.zeros(2, dtype=dg.float64)
        for xb, yb in loader:
            opt.zero_grad()
            loss = loss_fn(model(xb), yb)
            loss.backward()                # gradients are averaged over the ranks here
            opt.step()
            total += dg.tensor([loss.item() * len(yb), len(yb)], dtype=dg.float64)
        dist.all_reduce(total)             # the epoch's mean loss over all ranks' samples
        sched.step()
        accuracy = evaluate(dg, model.module, x_test, y_test)
        say(f"epoch {epoch + 1:3d}  train loss {total[0].item() / total[1].item():.4f}  "
            f"test accuracy {accuracy:.2%}")
    seconds = time.perf_counter() - start

    # the replicas never drifted apart: every rank holds rank 0's parameters, bit for bit
    flat = dg.cat([p.detach().reshape(-1) for p in model.parameters()])
    reference = flat.clone()
    dist.broadcast(reference, src=0)
    difference = dg.tensor([float((flat - reference).abs().max().item())])
    dist.all_reduce(difference, op=dist.ReduceOp.MAX)
    say(f"final test accuracy {accuracy:.2%} ({len(y_test)} held-out digits) on {world} rank(s), training time "
        f"{seconds:.1f} s; largest parameter difference between ranks {difference.item():g}")
    if difference.item() != 0:
        raise SystemExit("the replicas differ")
    if not args.smoke and accuracy < 0.95:
        raise SystemExit(f"test accuracy {accuracy:.2%} is below the 95% target")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
