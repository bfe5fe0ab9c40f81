"""The Hessian of a small MLP's loss with respect to all its parameters, by func.hessian and func.jacfwd(jacrev).

    python examples/hessian_mlp.py [--engine reference] [--smoke]

The parameters of a 2-layer MLP (tanh) are one flat vector theta (func.functional_call reads them back as the
module's tensors); the mean-squared loss on a small regression set is a function of theta, and its Hessian is
computed three ways: func.hessian (forward-over-reverse), func.jacfwd(func.jacrev(loss)) spelled out, and
func.jacrev(func.jacrev(loss)) (reverse-over-reverse). Each is checked against the explicit double loop: for every
parameter i, the gradient of the i-th entry of the gradient (one backward pass per row, create_graph=True), and
for a few (i, j) against central differences of the gradient. Prints the agreement (OK or MISMATCH), the timings,
and the curvature the Hessian shows (its extreme eigenvalues; a damped Newton step on the loss).
"""
import time

import numpy as np

from _common import parse_args


def main():
    args = parse_args(__doc__.splitlines()[0])
    dg = args.dg
    nn, func = dg.nn, dg.func
    rng = np.random.default_rng(args.seed)
    n_in, hidden, n = (2, 4, 16) if args.smoke else (3, 8, 64)
    dg.manual_seed(args.seed)
    model = nn.Sequential(nn.Linear(n_in, hidden), nn.Tanh(), nn.Linear(hidden, 1)).double()
    names = [k for k, _ in model.named_parameters()]
    shapes = [tuple(v.shape) for _, v in model.named_parameters()]
    sizes = [int(np.prod(s)) for s in shapes]
    theta0 = dg.cat([v.detach().reshape(-1) for _, v in model.named_parameters()])
    x = dg.tensor(rng.normal(size=(n, n_in)))
    y = dg.tensor(np.sin(rng.normal(size=(n, 1)) + x.numpy()[:, :1]))

    def loss(theta):
        params, start = {}, 0
        for k, s, size in zip(names, shapes, sizes):
            params[k] = theta[start:start + size].reshape(s)
            start += size
        return ((func.functional_call(model, params, (x,)) - y) ** 2).mean()

    p = theta0.shape[0]
    timings, results = {}, {}
    for label, make in (("func.hessian", lambda: func.hessian(loss)),
                        ("jacfwd(jacrev)", lambda: func.jacfwd(func.jacrev(loss))),
                        ("jacrev(jacrev)", lambda: func.jacrev(func.jacrev(loss)))):
        t0 = time.perf_counter()
        results[label] = make()(theta0).numpy()
        timings[label] = time.perf_counter() - t0

    # the explicit loop: one row of the Hessian per backward pass through the gradient's graph
    t0 = time.perf_counter()
    theta = theta0.detach().requires_grad_(True)
    (g,) = dg.autograd.grad(loss(theta), theta, create_graph=True)
    rows = [dg.autograd.grad(g[i], theta, retain_graph=True)[0].numpy() for i in range(p)]
    looped = np.stack(rows)
    timings["loop of backward passes"] = time.perf_counter() - t0

    # and a double loop of central differences of the gradient for a few entries
    def grad_at(t):
        t = t.detach().requires_grad_(True)
        return dg.autograd.grad(loss(t), t)[0].numpy()
    eps, worst_fd = 1e-6, 0.0
    picks = [(i, j) for i in range(0, p, max(1, p // 4)) for j in range(0, p, max(1, p // 5))]
    for i, j in picks:
        e = np.zeros(p)
        e[j] = eps
        fd = (grad_at(theta0 + dg.tensor(e))[i] - grad_at(theta0 - dg.tensor(e))[i]) / (2 * eps)
        worst_fd = max(worst_fd, abs(fd - looped[i, j]))

    ok = True
    print(f"Hessian of the loss of a {n_in}-{hidden}-1 MLP ({p} parameters, {n} samples):")
    for label, h in results.items():
        err = float(np.max(np.abs(h - looped)))
        good = err < 1e-9 and h.shape == (p, p)
        ok = ok and good
        print(f"  {label:16s} {timings[label] * 1e3:8.1f} ms  max |H - loop| {err:.1e} {'OK' if good else 'MISMATCH'}")
    sym = float(np.max(np.abs(looped - looped.T)))
    good = worst_fd < 1e-5 and sym < 1e-10
    ok = ok and good
    print(f"  loop of {p} backward passes {timings['loop of backward passes'] * 1e3:.1f} ms; symmetric to {sym:.1e}; "
          f"{len(picks)} entries against central differences to {worst_fd:.1e} {'OK' if good else 'MISMATCH'}")
    eig = np.linalg.eigvalsh(results["func.hessian"])
    print(f"  eigenvalues from {eig[0]:.3e} to {eig[-1]:.3e}")
    # a damped Newton step (the Hessian shifted to be positive definite: a descent direction), halved until the
    # loss falls
    g0 = grad_at(theta0)
    step = np.linalg.solve(results["func.hessian"] + (max(0.0, -eig[0]) + 0.1) * np.eye(p), g0)
    before, scale = float(loss(theta0)), 1.0
    after = float(loss(theta0 - dg.tensor(step)))
    while after >= before and scale > 1e-6:
        scale /= 2
        after = float(loss(theta0 - dg.tensor(scale * step)))
    print(f"  loss {before:.5f} -> {after:.5f} after one damped Newton step (scaled {scale:g}) "
          f"{'OK' if after < before else 'MISMATCH'}")
    if not ok:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
