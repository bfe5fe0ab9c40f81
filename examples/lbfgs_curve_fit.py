"""Fit a damped oscillation with L-BFGS and a strong-Wolfe line search (full-batch, second-order-like steps).

    python examples/lbfgs_curve_fit.py [--engine reference] [--smoke]

Data: y = a exp(-b x) cos(c x + d) + noise on [0, 6] with (a, b, c, d) = (2.0, 0.4, 3.0, 0.5). The model is the
same formula with four float64 parameters started away from the truth; every LBFGS.step(closure) runs up to
max_iter L-BFGS iterations, each with a line search that calls the closure as often as it needs. The fitted
parameters must land within 2% of the truth, and when PyTorch is installed the same run with torch.optim.LBFGS
(same data, same start) is repeated and the two parameter trajectories must agree (printed as OK / MISMATCH).
"""
import numpy as np

from _common import parse_args, save_plot

TRUE = np.array([2.0, 0.4, 3.0, 0.5])
START = np.array([1.5, 0.3, 2.8, 0.3])


def fit(lib, x_np, y_np, steps, history_size):
    """Run `steps` LBFGS steps with module `lib` (dyngrad, dyngrad.reference or torch); return the parameters
    after each step and the final loss."""
    x, y = lib.tensor(x_np), lib.tensor(y_np)
    w = lib.nn.Parameter(lib.tensor(START.copy()))
    opt = lib.optim.LBFGS([w], lr=1.0, max_iter=20, history_size=history_size, line_search_fn="strong_wolfe")

    def closure():
        opt.zero_grad()
        pred = w[0] * lib.exp(-w[1] * x) * lib.cos(w[2] * x + w[3])
        loss = ((pred - y) ** 2).mean()
        loss.backward()
        return loss

    trajectory = []
    for _ in range(steps):
        opt.step(closure)
        trajectory.append(w.detach().numpy().copy())
    return trajectory, float(closure().detach()), opt.state[w]["func_evals"]


def main():
    args = parse_args(__doc__.splitlines()[0])
    dg = args.dg
    rng = np.random.default_rng(args.seed)
    n = 60 if args.smoke else 400
    x_np = np.linspace(0.0, 6.0, n)
    y_np = TRUE[0] * np.exp(-TRUE[1] * x_np) * np.cos(TRUE[2] * x_np + TRUE[3]) + 0.02 * rng.standard_normal(n)
    steps = 3 if args.smoke else 5

    trajectory, loss, evals = fit(dg, x_np, y_np, steps, history_size=10)
    w = trajectory[-1]
    print(f"{args.engine}: fitted (a, b, c, d) = {np.round(w, 4).tolist()} after {evals} closure calls, "
          f"mse {loss:.3e} (noise variance {0.02 ** 2:.1e})")
    rel = np.abs(w - TRUE) / np.abs(TRUE)
    if rel.max() > 0.02:
        raise SystemExit(f"the fit missed the true parameters {TRUE.tolist()}: relative errors {rel.round(3)}")

    try:
        import torch
    except ImportError:
        print("(PyTorch is not installed: no comparison)")
    else:
        theirs, torch_loss, torch_evals = fit(torch, x_np, y_np, steps, history_size=10)
        err = max(float(np.max(np.abs(a - b))) for a, b in zip(trajectory, theirs))
        status = "OK" if err < 1e-8 and evals == torch_evals else "MISMATCH"
        print(f"torch.optim.LBFGS: {torch_evals} closure calls, mse {torch_loss:.3e}; largest parameter "
              f"difference over the {steps} steps {err:.1e} {status}")
        if status != "OK":
            raise SystemExit("dyngrad's LBFGS does not follow torch's")

    def draw(plt):
        plt.plot(x_np, y_np, ".", ms=3, label="data")
        pred = w[0] * np.exp(-w[1] * x_np) * np.cos(w[2] * x_np + w[3])
        plt.plot(x_np, pred, label="LBFGS fit")
        plt.legend()
        plt.title("damped oscillation fitted with LBFGS (strong Wolfe)")
    save_plot(args, "lbfgs_curve_fit.png", draw)


if __name__ == "__main__":
    main()
