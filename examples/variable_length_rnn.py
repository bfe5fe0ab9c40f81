"""Sequence classification with an LSTM over sequences of different lengths, without padding.

    python examples/variable_length_rnn.py [--engine reference] [--smoke]

Task (synthetic, seeded): a sequence of 4 to 24 tokens from {0, 1, 2, 3}; the label is 1 if token 1 occurs more
often than token 2. The model embeds the tokens, runs an LSTM and classifies from the final hidden state. The
LSTM receives a plain Python list of sequences: the graph is built per time step for the sequences still running
(see Note [Variable-length sequences] in python/dyngrad/nn/modules/rnn.py), so there is no padding and no mask.
"""
import time

import numpy as np

from _common import parse_args, progress, set_postfix, save_plot, log


def make_data(n, rng, min_len=4, max_len=24):
    seqs, labels = [], []
    while len(seqs) < n:
        s = rng.integers(0, 4, size=rng.integers(min_len, max_len + 1))
        ones, twos = int((s == 1).sum()), int((s == 2).sum())
        if ones == twos:
            continue                      # keep the task unambiguous
        seqs.append(s.astype(np.int64))
        labels.append(int(ones > twos))
    return seqs, np.array(labels)


def main():
    args = parse_args(__doc__.splitlines()[0], lambda p: p.add_argument("--epochs", type=int, default=8))
    dg = args.dg
    nn = dg.nn
    rng = np.random.default_rng(args.seed)
    n_train, n_test = (64, 32) if args.smoke else (1000, 500)
    train_x, train_y = make_data(n_train, rng)
    test_x, test_y = make_data(n_test, rng)

    class Classifier(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = nn.Embedding(4, 8)
            self.lstm = nn.LSTM(8, 32)
            self.head = nn.Linear(32, 2)

        def forward(self, seqs):
            _, (h_n, _) = self.lstm([self.embed(dg.tensor(s)) for s in seqs])   # a list in, no padding
            return self.head(h_n[-1])

    model = Classifier()
    opt = dg.optim.Adam(model.parameters(), lr=1e-2)
    epochs = 1 if args.smoke else args.epochs
    batch = 32
    accs, losses = [], []
    start = time.perf_counter()
    bar = progress(range(epochs), desc=f"lstm ({args.engine})", enabled=not args.smoke)
    for epoch in bar:
        order = rng.permutation(n_train)
        total = 0.0
        for i in range(0, n_train, batch):
            idx = order[i:i + batch]
            opt.zero_grad()
            loss = nn.functional.cross_entropy(model([train_x[j] for j in idx]), dg.tensor(train_y[idx]))
            loss.backward()
            nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            total += loss.item() * len(idx)
        with dg.no_grad():
            pred = model(test_x).argmax(dim=1).numpy()
        accs.append(float((pred == test_y).mean()))
        losses.append(total / n_train)
        set_postfix(bar, loss=losses[-1], test_acc=accs[-1])
        log(bar, f"epoch {epoch + 1:3d}  train loss {losses[-1]:.4f}  test accuracy {accs[-1]:.2%}")
    print(f"final test accuracy {accs[-1]:.2%} on {n_test} sequences of length 4..24, "
          f"{time.perf_counter() - start:.1f} s on the {args.engine} engine")
    save_plot(args, "variable_length_rnn.png", lambda plt: (
        plt.plot(range(1, epochs + 1), accs, marker="o"), plt.xlabel("epoch"), plt.ylabel("test accuracy"),
        plt.title("LSTM over variable-length sequences")))
    if not args.smoke and accs[-1] < 0.9:
        raise SystemExit(f"test accuracy {accs[-1]:.2%} is below the 90% target")


if __name__ == "__main__":
    main()
