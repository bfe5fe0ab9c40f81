"""Reversing sequences with nn.Transformer (encoder-decoder, causal decoder mask, greedy decoding), as PyTorch code.

    python examples/transformer_toy.py [--engine reference] [--smoke]

Task (synthetic, seeded): sequences of 6 tokens from {1, ..., 8}; the target is the sequence reversed. The decoder
is trained with teacher forcing (its input is <bos> followed by the target shifted right, under
Transformer.generate_square_subsequent_mask) and tested by greedy decoding, one token at a time, on unseen
sequences: a test sequence counts only if all 6 tokens are right. The body below is ordinary PyTorch code running
on dyngrad: `torch` is the dyngrad engine chosen with --engine.
"""
import math
import time

import numpy as np

from _common import parse_args, progress, set_postfix, save_plot, log

LENGTH, BOS, VOCAB = 6, 0, 9                 # tokens 1..8, 0 is <bos>


def make_data(n, rng):
    src = rng.integers(1, VOCAB, size=(n, LENGTH))
    return src, src[:, ::-1].copy()


def main():
    args = parse_args(__doc__.splitlines()[0], lambda p: p.add_argument("--steps", type=int, default=250))
    torch = args.dg                      # the rest is PyTorch code
    nn = torch.nn
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    rng = np.random.default_rng(args.seed)
    steps, batch_size, n_test = (4, 16, 16) if args.smoke else (args.steps, 64, 500)

    class Reverser(nn.Module):
        def __init__(self, d_model=32, nhead=4, layers=1, ff=64):
            super().__init__()
            self.d_model = d_model
            self.embed = nn.Embedding(VOCAB, d_model)
            self.pos = nn.Embedding(LENGTH, d_model)
            self.transformer = nn.Transformer(d_model, nhead, layers, layers, ff, dropout=0.0, batch_first=True)
            self.head = nn.Linear(d_model, VOCAB)

        def encode(self, tokens):                              # (N, T) -> (N, T, d)
            positions = torch.arange(tokens.shape[1], device=tokens.device)
            return self.embed(tokens) * math.sqrt(self.d_model) + self.pos(positions)

        def forward(self, src, tgt_in):
            mask = nn.Transformer.generate_square_subsequent_mask(tgt_in.shape[1], device=device)
            out = self.transformer(self.encode(src), self.encode(tgt_in), tgt_mask=mask, tgt_is_causal=True)
            return self.head(out)                              # (N, T, VOCAB)

        @torch.no_grad()
        def greedy(self, src):
            memory = self.transformer.encoder(self.encode(src))
            out = torch.full((src.shape[0], 1), BOS, dtype=torch.long)
            for _ in range(LENGTH):
                mask = nn.Transformer.generate_square_subsequent_mask(out.shape[1])
                h = self.transformer.decoder(self.encode(out), memory, tgt_mask=mask)
                out = torch.cat([out, self.head(h[:, -1]).argmax(-1, keepdim=True)], dim=1)
            return out[:, 1:]

    model = Reverser().to(device)
    print(model.transformer.encoder.layers[0])
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    loss_fn = nn.CrossEntropyLoss()
    test_src, test_tgt = make_data(n_test, rng)
    losses, checkpoints, accs = [], [], []
    start = time.perf_counter()
    bar = progress(range(steps), desc=f"transformer ({args.engine})", enabled=not args.smoke)
    for step in bar:
        model.train()
        src, tgt = make_data(batch_size, rng)
        tgt_in = np.concatenate([np.full((batch_size, 1), BOS), tgt[:, :-1]], axis=1)
        src, tgt, tgt_in = (torch.tensor(a).to(device) for a in (src, tgt, tgt_in))
        opt.zero_grad()
        loss = loss_fn(model(src, tgt_in).reshape(-1, VOCAB), tgt.reshape(-1))
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        losses.append(loss.item())
        if (step + 1) % 50 == 0 or step + 1 == steps:
            model.eval()
            pred = model.greedy(torch.tensor(test_src)).numpy()
            accs.append(float((pred == test_tgt).all(axis=1).mean()))
            checkpoints.append(step + 1)
            set_postfix(bar, loss=losses[-1], test_acc=accs[-1])
            log(bar, f"step {step + 1:4d}  train loss {losses[-1]:.4f}  test sequences reversed exactly {accs[-1]:.2%}")
    print(f"final: {accs[-1]:.2%} of {n_test} unseen sequences reversed exactly (greedy decoding), "
          f"{time.perf_counter() - start:.1f} s on the {args.engine} engine")
    save_plot(args, "transformer_toy.png", lambda plt: (
        plt.plot(range(1, steps + 1), losses), plt.yscale("log"), plt.xlabel("step"), plt.ylabel("train loss"),
        plt.title("nn.Transformer learning to reverse sequences")))
    if not args.smoke and accs[-1] < 0.95:
        raise SystemExit(f"exact-reversal accuracy {accs[-1]:.2%} is below the 95% target")


if __name__ == "__main__":
    main()
