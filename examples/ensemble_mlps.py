"""An ensemble of MLPs trained as one: stack_module_state + vmap(functional_call) run every member in one call.

    python examples/ensemble_mlps.py [--engine reference] [--smoke]

Ten small MLPs with different initialisations learn the same 2-D two-spirals task. Their parameters are stacked
(`func.stack_module_state`: one tensor per parameter with the members along dim 0) and one
`func.vmap(functional_call, in_dims=(0, 0, None))` computes every member's predictions on the batch; the summed
loss's backward gives every member its own gradient, and one optimizer steps the stacked tensors. The first
forward is checked against running each member by itself (OK or MISMATCH). Prints each member's and the
ensemble's (mean of the members' probabilities) test accuracy.
"""
import copy
import time

import numpy as np

from _common import parse_args, progress, set_postfix, log


def spirals(rng, n):
    """Two interleaved spirals in the plane, labels 0 and 1, with a little noise."""
    t = np.sqrt(rng.uniform(0, 1, n)) * 3 * np.pi
    label = rng.integers(0, 2, n)
    sign = np.where(label == 0, 1.0, -1.0)
    x = np.stack([sign * t * np.cos(t), sign * t * np.sin(t)], 1) / (3 * np.pi) + rng.normal(0, 0.03, (n, 2))
    return x.astype(np.float32), label.astype(np.int64)


def main():
    args = parse_args(__doc__.splitlines()[0], lambda p: p.add_argument("--steps", type=int, default=1500))
    dg = args.dg
    nn, F, func = dg.nn, dg.nn.functional, dg.func
    rng = np.random.default_rng(args.seed)
    members = 3 if args.smoke else 10
    models = [nn.Sequential(nn.Linear(2, 32), nn.Tanh(), nn.Linear(32, 32), nn.Tanh(), nn.Linear(32, 2))
              for _ in range(members)]
    params, buffers = func.stack_module_state(models)
    skeleton = copy.deepcopy(models[0])

    def run(p, b, x):
        return func.functional_call(skeleton, (p, b), (x,))
    ensemble = func.vmap(run, in_dims=(0, 0, None))

    x_train, y_train = spirals(rng, 64 if args.smoke else 1000)
    x, y = dg.tensor(x_train), dg.tensor(y_train)
    first = ensemble(params, buffers, x)
    err = max(float(np.max(np.abs(first[i].detach().numpy() - models[i](x).detach().numpy())))
              for i in range(members))
    print(f"{members} members in one vmap against each run by itself: max difference {err:.1e} "
          f"{'OK' if err < 1e-5 else 'MISMATCH'}")

    opt = dg.optim.Adam(list(params.values()), lr=1e-2)
    steps = 3 if args.smoke else args.steps
    start = time.perf_counter()
    bar = progress(range(steps), desc=f"ensemble ({args.engine})", enabled=not args.smoke)
    for step in bar:
        opt.zero_grad()
        logits = ensemble(params, buffers, x)                     # (members, n, 2)
        loss = F.cross_entropy(logits.reshape(-1, 2), y.repeat(members), reduction="sum") / len(y_train)
        loss.backward()                                            # each member's gradient in its slice
        opt.step()
        set_postfix(bar, loss=loss.item() / members)
        if (step + 1) % 500 == 0:
            log(bar, f"step {step + 1:5d}  mean member loss {loss.item() / members:.4f}")
    x_test, y_test = spirals(np.random.default_rng(1000), 200 if args.smoke else 2000)
    with dg.no_grad():
        probs = ensemble(params, buffers, dg.tensor(x_test)).softmax(-1).numpy()
    each = [np.mean(probs[i].argmax(1) == y_test) for i in range(members)]
    together = np.mean(probs.mean(0).argmax(1) == y_test)
    print(f"test accuracy: members {' '.join(f'{a:.3f}' for a in each)}; ensemble {together:.3f} "
          f"({time.perf_counter() - start:.1f} s of training on the {args.engine} engine)")


if __name__ == "__main__":
    main()
