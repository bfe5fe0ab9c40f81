"""Seeing the dynamic graph (shared by both engines): Graphviz DOT, TensorBoard, and how the graph changes.

    dg.viz.to_dot(loss, params=model)            # DOT source, no dependency needed
    dg.viz.render(loss, path="graph.svg")        # through Graphviz, when installed
    dg.viz.add_graph(writer, loss, step=step)    # into a tensorboardX SummaryWriter
    with dg.viz.module_scopes(model) as scopes: loss = model(x)   # then add_graph(..., scopes=scopes): by module
    rec = dg.viz.GraphRecorder(); rec.record(loss); rec.distinct()
    print(dg.viz.diff(sig_a, sig_b))             # nodes added, removed, changed between two iterations
    dg.viz.draw_program(compiled_fn)             # DOT of what dyngrad.compile recorded: steps, guards, variants
"""
from .dot import to_dot, render  # noqa: F401
from .tensorboard import add_graph, graph_def, module_scopes  # noqa: F401
from .program import draw_program, render_program  # noqa: F401
from .recorder import GraphRecorder, GraphSignature, GraphDiff, signature, diff  # noqa: F401

__all__ = ["to_dot", "render", "add_graph", "graph_def", "module_scopes", "GraphRecorder", "GraphSignature", "GraphDiff",
           "signature", "diff", "draw_program", "render_program"]
