"""Activation checkpointing: a deep residual MLP trained with dyngrad.utils.checkpoint, written as PyTorch code.

    python examples/checkpointing.py [--engine reference] [--smoke]

Checkpointing keeps none of the tensors a block saves for backward; the block is run again during backward to get
them back. On a define-by-run engine this is natural: the rerun is just another call. The script
1. measures the bytes the graph holds for backward (dg.autograd.graph_stats) with and without checkpointing,
2. checks that the gradients are the same either way (dropout included: the RNG state is replayed),
3. trains the checkpointed model on a toy regression task (y = sin(3 x0) + x1 x2) and prints the loss.
`torch` below is the dyngrad engine chosen with --engine.
"""
import time

import numpy as np

from _common import parse_args


def main():
    args = parse_args(__doc__.splitlines()[0], lambda p: p.add_argument("--steps", type=int, default=300))
    torch = args.dg                      # the rest is PyTorch code
    nn = torch.nn
    from_ckpt = torch.utils.checkpoint
    depth, width, batch = (4, 16, 32) if args.smoke else (12, 64, 128)
    steps = 5 if args.smoke else args.steps

    class Block(nn.Module):
        def __init__(self, width):
            super().__init__()
            self.fc1 = nn.Linear(width, width)
            self.fc2 = nn.Linear(width, width)
            self.drop = nn.Dropout(0.1)

        def forward(self, x):
            return x + self.fc2(self.drop(torch.tanh(self.fc1(x))))

    class Net(nn.Module):
        def __init__(self, depth, width, checkpointing):
            super().__init__()
            self.inp = nn.Linear(3, width)
            self.blocks = nn.ModuleList([Block(width) for _ in range(depth)])
            self.out = nn.Linear(width, 1)
            self.checkpointing = checkpointing

        def forward(self, x):
            h = self.inp(x)
            for block in self.blocks:
                h = from_ckpt.checkpoint(block, h, use_reentrant=False) if self.checkpointing else block(h)
            return self.out(h)

    rng = np.random.default_rng(args.seed)

    def data(n):
        x = rng.uniform(-1, 1, size=(n, 3)).astype(np.float32)
        y = (np.sin(3 * x[:, :1]) + x[:, 1:2] * x[:, 2:3]).astype(np.float32)
        return torch.tensor(x), torch.tensor(y)

    plain = Net(depth, width, checkpointing=False)
    ckpt = Net(depth, width, checkpointing=True)
    ckpt.load_state_dict(plain.state_dict())
    x, y = data(batch)

    # 1 and 2: the same step with and without checkpointing
    grads, saved = [], []
    for model in (plain, ckpt):
        torch.manual_seed(123)
        loss = nn.functional.mse_loss(model(x), y)
        saved.append(torch.autograd.graph_stats(loss)["saved_bytes"])
        loss.backward()
        grads.append([p.grad.numpy().copy() for p in model.parameters()])
    worst = max(float(np.abs(a - b).max()) for a, b in zip(*grads))
    print(f"bytes saved for backward: {saved[0]} without checkpointing, {saved[1]} with "
        f"({saved[1] / max(saved[0], 1):.0%})")
    print(f"largest gradient difference: {worst:.2e} " + ("OK" if worst < 1e-5 else "MISMATCH"))
    if saved[1] >= saved[0]:
        print("MISMATCH: checkpointing did not reduce the saved bytes")

    # 3: train the checkpointed model
    opt = torch.optim.Adam(ckpt.parameters(), lr=3e-3)
    start = time.perf_counter()
    for step in range(steps):
        xb, yb = data(batch)
        loss = nn.functional.mse_loss(ckpt(xb), yb)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step % max(steps // 5, 1) == 0 or step == steps - 1:
            print(f"step {step:4d}  loss {loss.item():.4f}")
    print(f"trained {steps} steps in {time.perf_counter() - start:.1f}s")


if __name__ == "__main__":
    main()
