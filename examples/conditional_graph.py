"""A graph whose shape depends on the data: a branch chosen by the input values.

    python examples/conditional_graph.py [--engine reference]

f(x) = sum(x * x) * w        if sum(x) > 0
       sum(sin(x) * w)       otherwise
Each call records only the branch that ran, so backward() differentiates exactly that branch. For two inputs,
one per branch, this prints the recorded graph's nodes and checks the gradients against finite differences,
then shows the two graphs and their diff (written as DOT/SVG and a TensorBoard log under --plot-dir).
"""
import numpy as np

from _common import parse_args, check_close, finite_difference, show_graphs


def f(dg, x, w):
    if float(x.sum()) > 0:                       # a Python `if` on the data: no special graph construct needed
        return (x * x).sum() * w, "x*x branch"
    return (dg.sin(x) * w).sum(), "sin branch"


def node_names(y):
    names, stack, seen = [], [y.grad_fn], set()
    while stack:
        node = stack.pop()
        if node is None or id(node) in seen:
            continue
        seen.add(id(node))
        names.append(node.name())
        stack.extend(nxt for nxt, _ in node.next_functions)
    return names


def main():
    args = parse_args(__doc__.splitlines()[0])
    dg = args.dg
    w0 = 1.5
    outputs, labels = [], []
    for x0 in ([0.5, -0.2, 1.0], [-0.5, -0.3, 0.4]):
        x = dg.tensor(x0, dtype=dg.float64, requires_grad=True)
        w = dg.tensor(w0, dtype=dg.float64, requires_grad=True)
        y, branch = f(dg, x, w)
        y.backward()
        print(f"x = {x0}: took the {branch}, y = {y.item():.6f}")
        print(f"  recorded nodes: {', '.join(node_names(y))}")

        def y_of_x(v):
            return f(dg, dg.tensor(v, dtype=dg.float64), dg.tensor(w0, dtype=dg.float64))[0].item()

        def y_of_w(v):
            return f(dg, dg.tensor(x0, dtype=dg.float64), dg.tensor(float(v[0]), dtype=dg.float64))[0].item()

        check_close("dy/dx", x.grad.tolist(), finite_difference(y_of_x, x0))
        check_close("dy/dw", [w.grad.item()], finite_difference(y_of_w, [w0]))
        expected = 2 * np.array(x0) * w0 if branch == "x*x branch" else np.cos(x0) * w0
        assert np.allclose(x.grad.tolist(), expected)
        outputs.append(y)
        labels.append(f"x = {x0}")
    show_graphs(args, "conditional_graph", outputs, labels)


if __name__ == "__main__":
    main()
