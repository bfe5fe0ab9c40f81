"""A graph whose length depends on the input: a loop that runs until a data-dependent condition holds.

    python examples/loop_graph.py [--engine reference]

Starting from x, repeat  x <- x - lr * (x^3 - a)  (an iteration towards the cube root of a) until the update is
smaller than tol, and return the final x. The number of iterations, and so the depth of the recorded graph,
depends on a and x0; backward() goes through every iteration that ran. The gradients d x_final / d a and
d x_final / d lr are checked against finite differences (with the same iteration count). The graphs of the first
two inputs and their diff are shown (and written as DOT/SVG and a TensorBoard log under --plot-dir; each drawing
groups the ops of one pass in a box "pass i" and summarises the middle passes).
"""
from _common import parse_args, check_close, finite_difference, show_graphs


def iterate(dg, a, lr, x0=1.0, tol=1e-3, max_steps=500, steps=None):
    x = dg.tensor(x0, dtype=dg.float64)
    n = 0
    while n < max_steps:
        step = lr * (x * x * x - a)
        x = x - step
        n += 1
        if (steps is None and abs(step.item()) < tol) or n == steps:
            break
    return x, n


def main():
    args = parse_args(__doc__.splitlines()[0])
    dg = args.dg
    lr0 = 0.05
    outputs, labels = [], []
    for a0 in (2.0, 8.0, 0.5):
        a = dg.tensor(a0, dtype=dg.float64, requires_grad=True)
        lr = dg.tensor(lr0, dtype=dg.float64, requires_grad=True)
        x, n = iterate(dg, a, lr)
        nodes = len(dg.viz.GraphRecorder().record(x))      # counted before backward() frees the graph
        x.backward()
        print(f"a = {a0}: {n} iterations (a graph of {nodes} nodes), x = {x.item():.6f} "
              f"(cube root {a0 ** (1 / 3):.6f})")

        def x_of_a(v):
            return iterate(dg, dg.tensor(float(v[0]), dtype=dg.float64), lr0, steps=n)[0].item()

        def x_of_lr(v):
            return iterate(dg, a0, dg.tensor(float(v[0]), dtype=dg.float64), steps=n)[0].item()

        check_close("dx/da", [a.grad.item()], finite_difference(x_of_a, [a0]))
        check_close("dx/dlr", [lr.grad.item()], finite_difference(x_of_lr, [lr0]))
        outputs.append(x)
        labels.append(f"a = {a0} ({n} iterations)")
    # 18 and 40 passes: drawn as the first and last pass around a summary of the rest (a strip otherwise)
    show_graphs(args, "loop_graph", outputs[:2], labels[:2], collapse_chains=4)


if __name__ == "__main__":
    main()
