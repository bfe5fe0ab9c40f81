"""Meta-learning (MAML) on sine waves: the inner gradient step is part of the graph that the outer step differentiates.

    python examples/maml_sine.py [--engine reference] [--smoke]

Each task is a sine wave y = A sin(x + phase) with A in [0.5, 3] and phase in [0, pi]; a model sees 10 points of a
new task, takes one gradient step on them, and is judged on 10 other points of the same task. MAML learns the
initial weights from which that one step works best: the inner step is taken with `autograd.grad(...,
create_graph=True)`, so the adapted weights are functions of the initial ones, and the outer loss's backward runs
through the inner gradient (second derivatives). The model is written functionally (weights passed in), so the
adapted weights are ordinary tensors of the graph. Prints the post-adaptation loss on held-out tasks for the
meta-learned initialisation and for a random one.
"""
import math
import time

import numpy as np

from _common import parse_args, progress, set_postfix, log


def forward(dg, weights, x):
    w1, b1, w2, b2, w3, b3 = weights
    h = dg.relu(x @ w1 + b1)
    h = dg.relu(h @ w2 + b2)
    return h @ w3 + b3


def init_weights(dg, rng, width):
    shapes = [(1, width), (width,), (width, width), (width,), (width, 1), (1,)]
    weights = []
    for shape in shapes:
        scale = math.sqrt(2.0 / shape[0]) if len(shape) == 2 else 0.0
        weights.append(dg.tensor(rng.normal(0, 1, size=shape) * scale, dtype=dg.float32, requires_grad=True))
    return weights


def sample_task(rng, n):
    amplitude, phase = rng.uniform(0.5, 3.0), rng.uniform(0, math.pi)
    x = rng.uniform(-5, 5, size=(2 * n, 1))
    return x, amplitude * np.sin(x + phase)


def adapted_loss(dg, weights, task, n, inner_lr, create_graph):
    """The loss on a task's query points after one gradient step on its support points."""
    x, y = (dg.tensor(a, dtype=dg.float32) for a in task)
    support = dg.nn.functional.mse_loss(forward(dg, weights, x[:n]), y[:n])
    grads = dg.autograd.grad(support, weights, create_graph=create_graph)
    fast = [w - inner_lr * g for w, g in zip(weights, grads)]
    return dg.nn.functional.mse_loss(forward(dg, fast, x[n:]), y[n:])


def main():
    args = parse_args(__doc__.splitlines()[0], lambda p: p.add_argument("--iterations", type=int, default=2000))
    dg = args.dg
    rng = np.random.default_rng(args.seed)
    n, inner_lr, meta_batch, width = 10, 0.01, 4, 40
    weights = init_weights(dg, rng, width)
    random_init = [w.detach().clone().requires_grad_(True) for w in weights]
    opt = dg.optim.Adam(weights, lr=1e-3)
    iterations = 3 if args.smoke else args.iterations
    start = time.perf_counter()
    bar = progress(range(iterations), desc=f"maml ({args.engine})", enabled=not args.smoke)
    for it in bar:
        opt.zero_grad()
        meta_loss = sum(adapted_loss(dg, weights, sample_task(rng, n), n, inner_lr, True)
                        for _ in range(meta_batch)) / meta_batch
        meta_loss.backward()                  # through the inner gradient step: second derivatives
        opt.step()
        set_postfix(bar, meta_loss=meta_loss.item())
        if (it + 1) % 500 == 0:
            log(bar, f"iteration {it + 1:5d}  meta loss {meta_loss.item():.3f}")
    held_out = [sample_task(np.random.default_rng(10_000 + i), n) for i in range(3 if args.smoke else 100)]
    scores = {name: np.mean([adapted_loss(dg, w, task, n, inner_lr, False).item() for task in held_out])
              for name, w in (("meta-learned", weights), ("random", random_init))}
    print(f"loss after one adaptation step on {len(held_out)} new tasks: meta-learned initialisation "
          f"{scores['meta-learned']:.3f}, random initialisation {scores['random']:.3f} "
          f"({time.perf_counter() - start:.1f} s on the {args.engine} engine)")


if __name__ == "__main__":
    main()
