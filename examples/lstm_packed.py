"""Tagging variable-length sequences with a bidirectional LSTM over packed sequences, written as PyTorch code.

    python examples/lstm_packed.py [--engine reference] [--smoke]

Task (synthetic, seeded): sequences of 3 to 20 tokens from {0, ..., 5}; the tag of each position is the token
before it (0 at the first position), so the model must remember. The body below is ordinary PyTorch code (pad,
pack with enforce_sorted=False, run the LSTM, unpack, mask the padding out of the loss with ignore_index) running on
dyngrad: `torch` is the dyngrad engine chosen with --engine.
"""
import time

import numpy as np

from _common import parse_args, progress, set_postfix, save_plot, log

VOCAB = 6


def make_data(n, rng, min_len=3, max_len=20):
    seqs = [rng.integers(0, VOCAB, size=rng.integers(min_len, max_len + 1)) for _ in range(n)]
    tags = [np.concatenate([[0], s[:-1]]) for s in seqs]
    return seqs, tags


def main():
    args = parse_args(__doc__.splitlines()[0], lambda p: p.add_argument("--epochs", type=int, default=12))
    torch = args.dg                      # the rest is PyTorch code
    nn = torch.nn
    from_rnn = torch.nn.utils.rnn
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    rng = np.random.default_rng(args.seed)
    n_train, n_test = (48, 16) if args.smoke else (1200, 300)
    train_x, train_y = make_data(n_train, rng)
    test_x, test_y = make_data(n_test, rng)

    class Tagger(nn.Module):
        def __init__(self, vocab, dim=16, hidden=32):
            super().__init__()
            self.embed = nn.Embedding(vocab, dim)
            self.lstm = nn.LSTM(dim, hidden, batch_first=True, bidirectional=True)
            self.head = nn.Linear(2 * hidden, vocab)

        def forward(self, tokens, lengths):
            packed = from_rnn.pack_padded_sequence(self.embed(tokens), lengths, batch_first=True,
                                                   enforce_sorted=False)
            out, _ = self.lstm(packed)
            out, _ = from_rnn.pad_packed_sequence(out, batch_first=True, total_length=tokens.shape[1])
            return self.head(out)                                     # (N, T, vocab)

    def batch(seqs, tags):
        tokens = from_rnn.pad_sequence([torch.tensor(s) for s in seqs], batch_first=True)
        targets = from_rnn.pad_sequence([torch.tensor(t) for t in tags], batch_first=True, padding_value=-100)
        lengths = torch.tensor([len(s) for s in seqs])
        return tokens.to(device), targets.to(device), lengths

    model = Tagger(VOCAB).to(device)
    print(model)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    loss_fn = nn.CrossEntropyLoss(ignore_index=-100)
    epochs = 1 if args.smoke else args.epochs
    size = 32
    accs, losses = [], []
    start = time.perf_counter()
    bar = progress(range(epochs), desc=f"packed lstm ({args.engine})", enabled=not args.smoke)
    for epoch in bar:
        model.train()
        order = rng.permutation(n_train)
        total = 0.0
        for i in range(0, n_train, size):
            idx = order[i:i + size]
            tokens, targets, lengths = batch([train_x[j] for j in idx], [train_y[j] for j in idx])
            opt.zero_grad()
            logits = model(tokens, lengths)
            loss = loss_fn(logits.reshape(-1, VOCAB), targets.reshape(-1))
            loss.backward()
            nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            total += loss.item() * len(idx)
        model.eval()
        with torch.no_grad():
            tokens, targets, lengths = batch(test_x, test_y)
            pred = model(tokens, lengths).argmax(dim=-1)
            mask = targets != -100
            accs.append(float(((pred == targets) & mask).sum()) / float(mask.sum()))
        losses.append(total / n_train)
        set_postfix(bar, loss=losses[-1], test_acc=accs[-1])
        log(bar, f"epoch {epoch + 1:3d}  train loss {losses[-1]:.4f}  test tag accuracy {accs[-1]:.2%}")
    print(f"final test tag accuracy {accs[-1]:.2%} on {n_test} sequences of length 3..20, "
          f"{time.perf_counter() - start:.1f} s on the {args.engine} engine")
    save_plot(args, "lstm_packed.png", lambda plt: (
        plt.plot(range(1, epochs + 1), accs, marker="o"), plt.xlabel("epoch"), plt.ylabel("test tag accuracy"),
        plt.title("Bidirectional LSTM over packed sequences")))
    if not args.smoke and accs[-1] < 0.95:
        raise SystemExit(f"test tag accuracy {accs[-1]:.2%} is below the 95% target")


if __name__ == "__main__":
    main()
