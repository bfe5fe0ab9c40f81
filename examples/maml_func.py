"""MAML's inner loop with function transforms: functional_call and func.grad, vmapped over the meta-batch.

    python examples/maml_func.py [--engine reference] [--smoke]

The model is an nn.Module (an MLP on the sine-wave tasks of examples/maml_sine.py: y = A sin(x + phase), 10
support and 10 query points a task) whose parameters are a dict handed to `func.functional_call`. One task's
adaptation is a few plain gradient steps on its support points, each `func.grad` of the support loss with respect
to that dict; the steps stay in the graph (func.grad's result carries the history of parameters that require grad:
Note [Composing transforms] in dyngrad/func), so the query loss after them is a function of the initial
parameters. `func.vmap(adapt_and_score, in_dims=(None, 0, 0, 0, 0))` runs every task of the meta-batch in one call
and the mean query loss's backward is the meta-gradient, through the inner steps (second derivatives). The first
meta-gradient is checked against the explicit loop over the tasks (each adapted by `autograd.grad(...,
create_graph=True)` on the module itself; OK or MISMATCH), and both are timed. Prints, after meta-training, the
loss after adaptation on held-out tasks from the meta-learned and from a random initialisation.
"""
import copy
import math
import time

import numpy as np

from _common import parse_args, progress, set_postfix, log


def sample_tasks(rng, count, n):
    """count tasks: support and query inputs (count, n, 1) and targets, float32."""
    amplitude = rng.uniform(0.5, 3.0, (count, 1, 1))
    phase = rng.uniform(0, math.pi, (count, 1, 1))
    x = rng.uniform(-5, 5, (count, 2 * n, 1))
    y = amplitude * np.sin(x + phase)
    as32 = lambda a: a.astype(np.float32)  # noqa: E731
    return as32(x[:, :n]), as32(y[:, :n]), as32(x[:, n:]), as32(y[:, n:])


def main():
    args = parse_args(__doc__.splitlines()[0], lambda p: p.add_argument("--iterations", type=int, default=1500))
    dg = args.dg
    nn, F, func = dg.nn, dg.nn.functional, dg.func
    rng = np.random.default_rng(args.seed)
    n, inner_lr, inner_steps = 10, 0.01, 2
    meta_batch, width = (4, 16) if args.smoke else (8, 40)
    model = nn.Sequential(nn.Linear(1, width), nn.ReLU(), nn.Linear(width, width), nn.ReLU(), nn.Linear(width, 1))
    random_model = copy.deepcopy(model)
    params = dict(model.named_parameters())

    def support_loss(p, x, y):
        return F.mse_loss(func.functional_call(model, p, (x,)), y)

    def adapt(p, xs, ys):
        for _ in range(inner_steps):
            grads = func.grad(support_loss)(p, xs, ys)
            p = {name: w - inner_lr * grads[name] for name, w in p.items()}
        return p

    def adapt_and_score(p, xs, ys, xq, yq):
        return F.mse_loss(func.functional_call(model, adapt(p, xs, ys), (xq,)), yq)
    meta_batched = func.vmap(adapt_and_score, in_dims=(None, 0, 0, 0, 0))

    def looped(p, tasks):
        """The explicit loop: each task adapted on the module's own tensors by autograd.grad(create_graph=True)."""
        losses = []
        for xs, ys, xq, yq in zip(*tasks):
            fast = dict(p)
            for _ in range(inner_steps):
                names = list(fast)
                out = func.functional_call(model, fast, (xs,))
                grads = dg.autograd.grad(F.mse_loss(out, ys), [fast[k] for k in names], create_graph=True)
                fast = {k: fast[k] - inner_lr * g for k, g in zip(names, grads)}
            losses.append(F.mse_loss(func.functional_call(model, fast, (xq,)), yq))
        return dg.stack(losses)

    # the check: the meta-gradient by vmap against the loop over tasks
    tasks = [dg.tensor(a) for a in sample_tasks(rng, meta_batch, n)]
    meta_batched(params, *tasks), looped(params, tasks)          # warm-up: the timings below are of a second call
    t0 = time.perf_counter()
    by_vmap = dg.autograd.grad(meta_batched(params, *tasks).mean(), list(params.values()))
    t_vmap = time.perf_counter() - t0
    t0 = time.perf_counter()
    by_loop = dg.autograd.grad(looped(params, tasks).mean(), list(params.values()))
    t_loop = time.perf_counter() - t0
    err = max(float(np.max(np.abs(a.numpy() - b.numpy()))) for a, b in zip(by_vmap, by_loop))
    scale = max(float(np.max(np.abs(b.numpy()))) for b in by_loop)
    print(f"meta-gradient over {meta_batch} tasks ({inner_steps} inner steps each): vmap {t_vmap * 1e3:.1f} ms, "
          f"loop {t_loop * 1e3:.1f} ms ({t_loop / t_vmap:.1f}x); max difference {err:.1e} (of {scale:.1e}) "
          f"{'OK' if err <= 1e-4 * max(1.0, scale) else 'MISMATCH'}")

    opt = dg.optim.Adam(list(params.values()), lr=1e-3)
    iterations = 3 if args.smoke else args.iterations
    start = time.perf_counter()
    bar = progress(range(iterations), desc=f"maml ({args.engine})", enabled=not args.smoke)
    for it in bar:
        opt.zero_grad()
        meta_loss = meta_batched(params, *[dg.tensor(a) for a in sample_tasks(rng, meta_batch, n)]).mean()
        meta_loss.backward()
        opt.step()
        set_postfix(bar, meta_loss=meta_loss.item())
        if (it + 1) % 500 == 0:
            log(bar, f"iteration {it + 1:5d}  meta loss {meta_loss.item():.3f}")
    held_out = [dg.tensor(a) for a in sample_tasks(np.random.default_rng(10_000), 4 if args.smoke else 100, n)]
    scores = {name: meta_batched(dict(m.named_parameters()), *held_out).mean().item()
              for name, m in (("meta-learned", model), ("random", random_model))}
    print(f"loss after {inner_steps} adaptation steps on {len(held_out[0])} new tasks: meta-learned initialisation "
          f"{scores['meta-learned']:.3f}, random initialisation {scores['random']:.3f} "
          f"({time.perf_counter() - start:.1f} s on the {args.engine} engine)")


if __name__ == "__main__":
    main()
