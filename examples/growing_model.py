"""A model that changes while it trains: residual blocks are added between iterations and skipped at random.

    python examples/growing_model.py [--engine reference] [--smoke]

Regression of y = sin(3x) + 0.5 x^2 on [-2, 2]. Training starts with one hidden block; every `grow_every`
iterations a new residual block is appended, and the optimiser picks up its parameters with add_param_group
(nothing is recompiled: the next forward pass simply records a deeper graph). During training each block after
the first is skipped with probability 0.2 (stochastic depth), so consecutive iterations run different graphs.
After each growth step the gradient of the newest block is checked against finite differences in float64.
"""
import time

import numpy as np

from _common import parse_args, progress, set_postfix, save_plot, log


def main():
    def extra(p):
        p.add_argument("--iterations", type=int, default=1500)
        p.add_argument("--grow-every", type=int, default=300)
    args = parse_args(__doc__.splitlines()[0], extra)
    dg = args.dg
    nn = dg.nn
    rng = np.random.default_rng(args.seed)
    iterations, grow_every = (40, 10) if args.smoke else (args.iterations, args.grow_every)
    x_np = rng.uniform(-2, 2, size=(256, 1))
    y_np = np.sin(3 * x_np) + 0.5 * x_np ** 2
    x, y = dg.tensor(x_np), dg.tensor(y_np)          # float64 throughout, for the gradient checks
    width = 32

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(width, width)

        def forward(self, h):
            return h + dg.tanh(self.fc(h))

    class GrowingNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.inp = nn.Linear(1, width)
            self.blocks = nn.ModuleList([Block()])
            self.out = nn.Linear(width, 1)
            self.skip_prob = 0.2

        def forward(self, v, rng=None):
            h = dg.tanh(self.inp(v))
            for i, block in enumerate(self.blocks):
                if i > 0 and rng is not None and rng.random() < self.skip_prob:
                    continue                           # stochastic depth: this iteration's graph skips the block
                h = block(h)
            return self.out(h)

    model = GrowingNet().double()
    opt = dg.optim.Adam(model.parameters(), lr=3e-3)
    losses, depths = [], []
    start = time.perf_counter()
    bar = progress(range(1, iterations + 1), desc=f"growing ({args.engine})", enabled=not args.smoke)
    for it in bar:
        if it % grow_every == 0 and it < iterations:
            block = Block().double()
            with dg.no_grad():
                block.fc.weight.mul_(0.1)                # start close to the identity: the loss does not jump
            model.blocks.append(block)
            opt.add_param_group({"params": list(block.parameters())})
            log(bar, check_newest_block(dg, model, x, y))
            log(bar, f"iteration {it}: added block {len(model.blocks)}; the optimiser now has "
                  f"{len(opt.param_groups)} parameter groups")
        opt.zero_grad()
        loss = nn.functional.mse_loss(model(x, rng), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
        depths.append(len(model.blocks))
        set_postfix(bar, loss=losses[-1], blocks=len(model.blocks))
    with dg.no_grad():
        final = nn.functional.mse_loss(model(x), y).item()
    print(f"final training MSE (all blocks on) {final:.5f} with {len(model.blocks)} blocks, first-iteration loss "
          f"{losses[0]:.4f}; {time.perf_counter() - start:.1f} s on the {args.engine} engine")

    def draw(plt):
        plt.semilogy(losses, label="training loss")
        for i in range(grow_every, iterations + 1, grow_every):
            plt.axvline(i, color="gray", lw=0.5)
        plt.xlabel("iteration (grey lines: a block was added)")
        plt.ylabel("MSE")
        plt.title("a growing network")
    save_plot(args, "growing_model.png", draw)


def check_newest_block(dg, model, x, y):
    """d loss / d (a few weights of the newest block) by autograd and by central differences."""
    weight = model.blocks[-1].fc.weight
    model.zero_grad()
    dg.nn.functional.mse_loss(model(x), y).backward()
    analytic = [weight.grad[0, j].item() for j in range(3)]
    numeric = []
    for j in range(3):
        vals = []
        for sign in (1, -1):
            with dg.no_grad():
                weight[0, j] = weight[0, j].item() + sign * 1e-6
                vals.append(dg.nn.functional.mse_loss(model(x), y).item())
                weight[0, j] = weight[0, j].item() - sign * 1e-6
        numeric.append((vals[0] - vals[1]) / 2e-6)
    model.zero_grad()
    err = max(abs(a - n) / (1 + abs(n)) for a, n in zip(analytic, numeric))
    if err > 1e-6:
        raise SystemExit(f"gradient check failed: autograd {analytic} vs finite differences {numeric}")
    return (f"  gradient check on the new block: autograd {np.round(analytic, 7).tolist()} vs finite differences "
            f"{np.round(numeric, 7).tolist()} (max rel. error {err:.1e})")


if __name__ == "__main__":
    main()
