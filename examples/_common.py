"""What the examples share: the --engine / --smoke / --plot-dir flags, a progress bar, finite differences, plots."""
import argparse
import glob
import importlib
import os
import sys

import numpy as np

# after a dev build (scripts/dev_build.sh puts _C into python/dyngrad), python examples/NAME.py uses that build;
# otherwise the pip-installed package (a clone's python/dyngrad without _C cannot be imported)
_REPO_PACKAGE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "python", "dyngrad")
if glob.glob(os.path.join(_REPO_PACKAGE, "_C*")) and os.path.dirname(_REPO_PACKAGE) not in sys.path:
    sys.path.insert(0, os.path.dirname(_REPO_PACKAGE))


def parse_args(description, extra=None):
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--engine", choices=["cpp", "reference"], default="cpp",
                        help="the C++ engine (dyngrad) or the pure-numpy reference (dyngrad.reference)")
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, a few seconds (used by the test suite)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--plot-dir", default=".", help="where PNG plots go (needs matplotlib; not in --smoke)")
    if extra is not None:
        extra(parser)
    args = parser.parse_args()
    args.dg = importlib.import_module("dyngrad" if args.engine == "cpp" else "dyngrad.reference")
    args.dg.manual_seed(args.seed)
    return args


def progress(iterable, desc, total=None, enabled=True):
    """tqdm when it is installed (and we are not in --smoke mode), else the plain iterable."""
    if enabled:
        try:
            from tqdm import tqdm
            return tqdm(iterable, desc=desc, total=total, leave=False)
        except ImportError:
            pass
    return iterable


def log(bar, message):
    """Print a line without breaking the progress bar."""
    (bar.write if hasattr(bar, "write") else print)(message)


def set_postfix(bar, **values):
    if hasattr(bar, "set_postfix"):
        bar.set_postfix({k: f"{v:.4g}" for k, v in values.items()})


def finite_difference(f, x, eps=1e-6):
    """Central differences of the scalar function f at the numpy array x (float64)."""
    x = np.array(x, dtype=np.float64)
    grad = np.zeros_like(x)
    for i in range(x.size):
        up, down = x.copy(), x.copy()
        up.flat[i] += eps
        down.flat[i] -= eps
        grad.flat[i] = (f(up) - f(down)) / (2 * eps)
    return grad


def check_close(name, analytic, numeric, tol=1e-6):
    err = float(np.max(np.abs(np.asarray(analytic) - np.asarray(numeric)) / (1 + np.abs(numeric))))
    status = "OK" if err < tol else "MISMATCH"
    print(f"  {name}: autograd {np.round(analytic, 6).tolist()} | finite differences "
          f"{np.round(numeric, 6).tolist()} | max rel. error {err:.1e} {status}")
    if err >= tol:
        raise SystemExit(f"{name}: the gradient does not match finite differences")
    return err


def save_plot(args, filename, draw):
    """Call draw(plt) and save a PNG, if matplotlib is installed and we are not in --smoke mode."""
    if args.smoke:
        return
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("(matplotlib is not installed: no plot)")
        return
    fig = plt.figure(figsize=(6, 4))
    draw(plt)
    path = os.path.join(args.plot_dir, filename)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    print(f"plot saved to {path}")


def show_graphs(args, name, outputs, labels, params=None, collapse_chains=None):
    """Print the structure of the graphs that two inputs built and their diff. Unless --smoke, also write each
    graph and the diff as DOT (and SVG when Graphviz is installed) and into a TensorBoard log (when tensorboardX
    is installed), all under --plot-dir. collapse_chains=k: a loop of more than k passes is drawn as its first and
    last pass around a summary node (each pass is a cluster either way)."""
    dg = args.dg
    recorder = dg.viz.GraphRecorder(params=params)
    signatures = [recorder.record(y) for y in outputs]
    for label, sig in zip(labels, signatures):
        print(f"  graph for {label}: {sig!r}")
    difference = dg.viz.diff(signatures[0], signatures[1])
    print("  " + str(difference).replace("\n", "\n  "))
    if args.smoke:
        return
    os.makedirs(args.plot_dir, exist_ok=True)        # --plot-dir need not exist yet
    sources = [dg.viz.to_dot(y, params=params, collapse_chains=collapse_chains) for y in outputs] + [
        difference.to_dot()]
    no_svg = None                           # why no SVG could be drawn: said once, not once per graph
    for suffix, source in zip(("input0", "input1", "diff"), sources):
        path = os.path.join(args.plot_dir, f"{name}_{suffix}.dot")
        with open(path, "w") as f:
            f.write(source)
        if no_svg is None:
            try:
                dg.viz.render(source, path=path[:-4] + ".svg")
                print(f"graph saved to {path} and {path[:-4]}.svg")
                continue
            except RuntimeError as e:
                no_svg = str(e)
        print(f"graph saved to {path}")
    if no_svg:
        print(f"(no SVG: {no_svg})")
    try:
        from tensorboardX import SummaryWriter
    except ImportError:
        print("(tensorboardX is not installed: no TensorBoard log)")
        return
    writer = SummaryWriter(os.path.join(args.plot_dir, "runs", name))
    for step, y in enumerate(outputs):
        dg.viz.add_graph(writer, y, params=params, step=step)
        writer.add_scalar("output", y.item(), step)
    writer.close()
    print(f"TensorBoard log in {writer.logdir}: tensorboard --logdir {os.path.join(args.plot_dir, 'runs')}")
