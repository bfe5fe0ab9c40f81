"""Draws the pictures of the user guide (docs/guide/figures/) with dyngrad.viz: the DOT source of each graph, and
an SVG of it when Graphviz is installed.

    PYTHONPATH=python python docs/guide/make_figures.py [--out DIR]

tests/test_guide.py runs this into a temporary folder and checks that the checked-in .dot files are current (the
SVGs depend on the Graphviz version, so they are only regenerated, not compared). The programs drawn here are the
ones the guide's pages show.
"""
import argparse
import glob
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
# a dev build's python/dyngrad when it has its _C (scripts/dev_build.sh); otherwise the pip-installed package: a
# clean clone's python/dyngrad has no _C and cannot be imported (CI runs this from a clean clone)
_SOURCE_TREE = os.path.join(HERE, "..", "..", "python")
if glob.glob(os.path.join(_SOURCE_TREE, "dyngrad", "_C*")):
    sys.path.insert(0, _SOURCE_TREE)

import dyngrad as dg  # noqa: E402


def basic_graph():
    """01-dynamic-graphs.md and 02-basic-graph.md: y = sum(tanh(w * x + b))."""
    x = dg.tensor([1.0, 2.0, 3.0])
    w = dg.tensor([0.5, -0.5, 0.25], requires_grad=True)
    b = dg.tensor(0.1, requires_grad=True)
    y = dg.tanh(w * x + b).sum()
    return {"basic_graph": dg.viz.to_dot(y, params={"w": w, "b": b})}


def branch(x, w):
    if x.sum() > 0:
        return (x * x).sum() * w
    return (dg.sin(x) * w).sum()


def conditional_graph():
    """03-data-chosen-graph.md: the two graphs one function records for two inputs, and their diff."""
    w = dg.tensor(1.5, requires_grad=True)
    positive = branch(dg.tensor([0.5, -0.2, 1.0], requires_grad=True), w)
    negative = branch(dg.tensor([-0.5, -0.3, 0.4], requires_grad=True), w)
    difference = dg.viz.diff(dg.viz.signature(positive), dg.viz.signature(negative))
    return {"branch_positive": dg.viz.to_dot(positive, params={"w": w}),
            "branch_negative": dg.viz.to_dot(negative, params={"w": w}),
            "branch_diff": difference.to_dot()}


def newton_sqrt(a, steps):
    x = a / 2
    for _ in range(steps):
        x = (x + a / x) / 2
    return x


def loop_graph():
    """04-loop-graph.md: Newton's iteration for sqrt(a), three passes."""
    a = dg.tensor(2.0, requires_grad=True)
    root = newton_sqrt(a, 3)
    return {"loop_graph": dg.viz.to_dot(root, params={"a": a})}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=os.path.join(HERE, "figures"), help="where the .dot and .svg files go "
                        "(default: docs/guide/figures)")
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    sources = {**basic_graph(), **conditional_graph(), **loop_graph()}
    for name, source in sources.items():
        path = os.path.join(args.out, name + ".dot")
        with open(path, "w", encoding="utf-8") as f:
            f.write(source)
        try:
            dg.viz.render(source, path=path[:-4] + ".svg")
        except RuntimeError as e:        # no Graphviz: the DOT sources are still written
            print(f"{name}: no SVG ({e})")
    print(f"wrote {len(sources)} graphs to {os.path.normpath(args.out)}")


if __name__ == "__main__":
    main()
