"""The digits examples' shared part: scikit-learn's bundled 8x8 digits, split and scaled, and the training loop."""
import time

import numpy as np

from _common import progress, set_postfix, save_plot, log


def load_digits_split(smoke, seed=0):
    """(x_train, y_train, x_test, y_test) as numpy float32 / int64; pixel values scaled to [0, 1]."""
    from sklearn.datasets import load_digits
    digits = load_digits()
    x = (digits.images / 16.0).astype(np.float32)
    y = digits.target.astype(np.int64)
    order = np.random.default_rng(seed).permutation(len(y))
    x, y = x[order], y[order]
    n_test = 360
    x_train, y_train, x_test, y_test = x[n_test:], y[n_test:], x[:n_test], y[:n_test]
    if smoke:
        x_train, y_train, x_test, y_test = x_train[:128], y_train[:128], x_test[:64], y_test[:64]
    return x_train, y_train, x_test, y_test


def train_classifier(args, model, x_train, y_train, x_test, y_test, epochs, lr, batch_size=32, name="digits"):
    dg = args.dg
    nn, data = dg.nn, dg.utils.data
    loader = data.DataLoader(data.TensorDataset(dg.tensor(x_train), dg.tensor(y_train)), batch_size=batch_size,
                             shuffle=True, seed=args.seed)
    opt = dg.optim.Adam(model.parameters(), lr=lr)
    sched = dg.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=epochs)
    loss_fn = nn.CrossEntropyLoss()
    losses, accuracies = [], []
    start = time.perf_counter()
    bar = progress(range(epochs), desc=f"{name} ({args.engine})", enabled=not args.smoke)
    for epoch in bar:
        model.train()
        total, count = 0.0, 0
        for xb, yb in loader:
            opt.zero_grad()
            loss = loss_fn(model(xb), yb)
            loss.backward()
            opt.step()
            total += loss.item() * len(yb)
            count += len(yb)
        sched.step()
        losses.append(total / count)
        accuracies.append(evaluate(dg, model, x_test, y_test))
        set_postfix(bar, loss=losses[-1], test_acc=accuracies[-1])
        log(bar, f"epoch {epoch + 1:3d}  train loss {losses[-1]:.4f}  test accuracy {accuracies[-1]:.2%}")
    seconds = time.perf_counter() - start
    print(f"final test accuracy {accuracies[-1]:.2%} ({len(y_test)} held-out digits), training time {seconds:.1f} s "
          f"on the {args.engine} engine")

    def draw(plt):
        ax = plt.gca()
        ax.plot(range(1, epochs + 1), losses, label="train loss")
        ax.set_xlabel("epoch")
        ax.set_ylabel("cross-entropy")
        ax2 = ax.twinx()
        ax2.plot(range(1, epochs + 1), accuracies, color="tab:orange", label="test accuracy")
        ax2.set_ylabel("test accuracy")
        plt.title(f"{name} on the {args.engine} engine")

    save_plot(args, f"{name}.png", draw)
    return accuracies[-1]


def evaluate(dg, model, x, y):
    model.eval()
    with dg.no_grad():
        pred = model(dg.tensor(x)).argmax(dim=1).numpy()
    return float((pred == y).mean())
