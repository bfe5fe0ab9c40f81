"""A basic dynamic graph: y = a * x * x + b * x + c, recorded as it runs, and its gradients.

    python examples/basic_graph.py [--engine reference]

Prints the graph that backward() walks (grad_fn names) and checks dy/da, dy/dx, ... against finite differences.
"""
import numpy as np

from _common import parse_args, check_close, finite_difference


def main():
    args = parse_args(__doc__.splitlines()[0])
    dg = args.dg
    values = {"a": 2.0, "x": 3.0, "b": -1.0, "c": 0.5}

    def f(a, x, b, c):
        return a * x * x + b * x + c

    leaves = {k: dg.tensor(v, dtype=dg.float64, requires_grad=True) for k, v in values.items()}
    y = f(**leaves)
    print(f"y = a*x*x + b*x + c = {y.item()} (engine: {args.engine})")
    print("graph, from the output back to the leaves (a tree view: shared nodes appear once per use):")
    names = {id(t): k for k, t in leaves.items()}
    stack = [(y.grad_fn, 1)]
    while stack:
        node, depth = stack.pop()
        label = node.name()
        if label == "AccumulateGrad":
            label += f" -> {names.get(id(node.variable), '?')}.grad"
        print("  " * depth + label)
        stack.extend((nxt, depth + 1) for nxt, _ in reversed(node.next_functions) if nxt is not None)
    y.backward()
    print("gradients:")
    for name, leaf in leaves.items():
        def as_function(v, name=name):
            return f(**{**values, name: float(v[0])})
        check_close(f"dy/d{name}", [leaf.grad.item()], finite_difference(as_function, [values[name]]))
    # by hand: dy/da = x^2, dy/dx = 2ax + b, dy/db = x, dy/dc = 1
    assert np.allclose([leaves[k].grad.item() for k in "axbc"], [9.0, 11.0, 3.0, 1.0])


if __name__ == "__main__":
    main()
