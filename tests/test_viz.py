"""Issue 5, seeing the dynamic graph, on both engines: DOT export parsed back, rendering (where Graphviz is
installed), TensorBoard event files read back, GraphRecorder / diff on the conditional and loop examples' models,
and a 100,000-node graph exported without recursion."""
import glob
import importlib
import json
import os
import re
import shutil
import struct
import subprocess
import sys

import numpy as np
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HAVE_DOT = shutil.which("dot") is not None


def leaf(dg, values):
    return dg.tensor(np.asarray(values, dtype=np.float64), requires_grad=True)


NODE = re.compile(r'^\s+(\w+) \[(.*)\];$')
EDGE = re.compile(r'^\s+(\w+) -> (\w+)(?: \[(.*)\])?;$')
ATTR = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')


def parse_dot(src):
    """{id: {attr: value}}, [(src, dst, {attr: value})] from the DOT that to_dot writes; every line must parse."""
    lines = src.strip().splitlines()
    assert lines[0].startswith("digraph ") and lines[0].endswith("{") and lines[-1] == "}"
    nodes, edges = {}, []
    for line in lines[1:-1]:
        if line.strip().startswith(("graph ", "node ", "edge ", "subgraph cluster_")):   # clusters: parse_clusters
            continue
        m = EDGE.match(line)
        if m:
            edges.append((m.group(1), m.group(2), dict(ATTR.findall(m.group(3) or ""))))
            continue
        m = NODE.match(line)
        assert m, f"unparsed DOT line: {line!r}"
        nodes[m.group(1)] = {k: v.replace("\\n", "\n").replace('\\"', '"') for k, v in ATTR.findall(m.group(2))}
    for a, b, _ in edges:
        assert a in nodes and b in nodes, (a, b)
    return nodes, edges


# ----- DOT ----------------------------------------------------------------------------------------------------
def test_to_dot_nodes_edges_labels(dg):
    a = leaf(dg, [1.0, 2.0, 3.0])
    b = leaf(dg, [4.0, 5.0, 6.0])
    y = a * b + a                             # Add(Mul(a, b), a)
    nodes, edges = parse_dot(dg.viz.to_dot(y, params={"a": a, "b": b}))
    labels = sorted(n["label"].split("\n")[0] for n in nodes.values())
    assert labels == ["AddBackward", "MulBackward", "a", "b", "output"]
    assert len(edges) == 5                    # a->Mul, b->Mul, Mul->Add, a->Add, Add->output
    by_label = {n["label"].split("\n")[0]: k for k, n in nodes.items()}
    pairs = sorted((nodes[s]["label"].split("\n")[0], nodes[d]["label"].split("\n")[0]) for s, d, _ in edges)
    assert pairs == [("AddBackward", "output"), ("MulBackward", "AddBackward"), ("a", "AddBackward"),
                     ("a", "MulBackward"), ("b", "MulBackward")]
    mul = nodes[by_label["MulBackward"]]["label"].split("\n")
    assert mul[1] == "(3,) float64" and mul[2] == f"test_viz.py:{_line('y = a * b + a')}"
    assert nodes[by_label["a"]]["label"] == "a\n(3,) float64"
    assert nodes[by_label["a"]]["fillcolor"] == "lightblue"


def _line(text):
    with open(__file__) as f:
        for number, line in enumerate(f, 1):
            if line.strip().startswith(text):
                return number
    raise AssertionError(text)


def test_to_dot_counts_match_the_graph(dg):
    """Node and edge counts of the DOT equal those of the graph walk, for a model with parameter names."""
    dg.manual_seed(0)
    model = dg.nn.Sequential(dg.nn.Linear(4, 8), dg.nn.Tanh(), dg.nn.Linear(8, 3))
    loss = dg.nn.functional.cross_entropy(model(dg.randn(5, 4)), dg.tensor([0, 1, 2, 0, 1]))
    g = dg.autograd.graph.walk(loss)
    nodes, edges = parse_dot(dg.viz.to_dot(loss, params=model))
    assert len(nodes) == len(g.nodes) + 1 and len(edges) == len(g.edges) + 1     # + the output node
    names = sorted(n["label"].split("\n")[0] for n in nodes.values() if n["fillcolor"] == "lightblue")
    assert names == ["0.bias", "0.weight", "2.bias", "2.weight"]
    saved = sum(len(node.saved_tensors_info()) for node in g.nodes)
    nodes_s, edges_s = parse_dot(dg.viz.to_dot(loss, params=model, show_saved=True))
    assert saved > 0 and len(nodes_s) == len(nodes) + saved and len(edges_s) == len(edges) + saved
    assert sum(n["fillcolor"] == "orange" for n in nodes_s.values()) == saved


def test_to_dot_several_roots_and_multiple_outputs(dg):
    x = leaf(dg, [[1.0, 2.0], [3.0, 4.0]])
    parts = dg.split(x * 2, 1, dim=0)         # two outputs of one graph
    nodes, edges = parse_dot(dg.viz.to_dot(parts[0], parts[1]))
    assert sum(n["label"].startswith("output") for n in nodes.values()) == 2
    assert len(dg.autograd.graph.walk(parts[0], parts[1]).nodes) + 2 == len(nodes)


@pytest.mark.skipif(not HAVE_DOT, reason="Graphviz's dot program is not installed")
def test_dot_program_parses_our_dot(dg, tmp_path):
    """Graphviz itself reads the DOT back with the same node and edge counts."""
    a = leaf(dg, [1.0, 2.0])
    y = (a.exp() * a).sum()
    src = dg.viz.to_dot(y, show_saved=True)
    nodes, edges = parse_dot(src)
    out = subprocess.run(["dot", "-Tjson"], input=src.encode(), capture_output=True, check=True).stdout
    parsed = json.loads(out)
    assert len(parsed["objects"]) == len(nodes) and len(parsed["edges"]) == len(edges)


@pytest.mark.skipif(not HAVE_DOT, reason="Graphviz's dot program is not installed")
def test_render_svg_and_png(dg, tmp_path):
    a = leaf(dg, [1.0, 2.0])
    y = (a * a).sum()
    svg = dg.viz.render(y, path=str(tmp_path / "g.svg"), params={"a": a})
    text = open(svg).read()
    assert "<svg" in text and "MulBackward" in text and ">a<" in text
    png = dg.viz.render(y, path=str(tmp_path / "g.png"))
    assert open(png, "rb").read(8) == b"\x89PNG\r\n\x1a\n"
    diff_svg = dg.viz.render(dg.viz.diff(dg.viz.signature(y), dg.viz.signature(a.sum())).to_dot(),
                             path=str(tmp_path / "d.svg"))
    assert "<svg" in open(diff_svg).read()


def test_render_without_graphviz_says_how_to_install(dg, tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "graphviz", None)            # `import graphviz` fails
    monkeypatch.setattr(shutil, "which", lambda name: None)       # and no dot program
    y = (leaf(dg, [1.0]) * 2).sum()
    with pytest.raises(RuntimeError, match=r"render: neither the graphviz Python package nor the `dot` program is "
                       r"installed\..*apt-get install graphviz.*pip install graphviz"):
        dg.viz.render(y, path=str(tmp_path / "g.svg"))
    assert dg.viz.to_dot(y).startswith("digraph")                 # to_dot needs neither


def test_render_refuses_huge_graphs_unless_collapsed(dg, tmp_path):
    x = leaf(dg, [1.0])
    y = x
    for _ in range(60):
        y = y * 1.5
    with pytest.raises(ValueError, match=r"render: the graph has 62 nodes, more than max_nodes=50.*collapse_chains"):
        dg.viz.render(y, path=str(tmp_path / "g.svg"), max_nodes=50)
    if HAVE_DOT:
        dg.viz.render(y, path=str(tmp_path / "g.svg"), max_nodes=50, collapse_chains=5)
        assert "60 nodes collapsed" in open(tmp_path / "g.svg").read()


def test_collapse_chains_keeps_branches(dg):
    """Only runs of single-input ops collapse; a node with two op inputs stays, and so does the graph's shape."""
    x = leaf(dg, [1.0])
    w = leaf(dg, [2.0])
    left, right = x, x
    for _ in range(30):
        left = left * 1.1
    for _ in range(3):
        right = right + 1.0
    y = left * right * w                    # Mul(Mul(left, right), w)
    nodes, edges = parse_dot(dg.viz.to_dot(y, collapse_chains=10))
    summaries = [n["label"] for n in nodes.values() if n["fillcolor"] == "lightyellow"]
    assert summaries == ["30 nodes collapsed\nMulBackward x30"]
    # x, w, summary, 3 Adds, 2 Muls, output
    assert len(nodes) == 2 + 1 + 3 + 2 + 1
    assert len(edges) == len({(s, d) for s, d, _ in edges})


def chain(dg, n):
    y = leaf(dg, [1.0])
    for _ in range(n):
        y = y * 1.0001
    return y


def test_hundred_thousand_node_graph_exports(dg):
    # the pure-Python engine builds graphs slowly: 20,000 nodes there, still far beyond any recursion limit
    n = 100_000 if dg.__name__ == "dyngrad" else 20_000
    src = dg.viz.to_dot(chain(dg, n))
    assert src.count(" -> ") == n + 1 and src.count("MulBackward") == n


def test_long_chain_collapses_to_a_summary(dg):
    nodes, edges = parse_dot(dg.viz.to_dot(chain(dg, 5000), collapse_chains=100))
    assert sorted(n["label"] for n in nodes.values()) == ["5000 nodes collapsed\nMulBackward x5000",
                                                          "leaf\n(1,) float64", "output\n(1,) float64"]
    assert len(edges) == 2


# ----- TensorBoard ----------------------------------------------------------------------------------------------
def read_events(path):
    """The Event protos of a TensorBoard event file (TFRecord: length, crc, data, crc), with tensorboardX's protos."""
    from tensorboardX.proto import event_pb2
    events = []
    with open(path, "rb") as f:
        data = f.read()
    pos = 0
    while pos < len(data):
        (length,) = struct.unpack("<Q", data[pos:pos + 8])
        events.append(event_pb2.Event.FromString(data[pos + 12:pos + 12 + length]))
        pos += 12 + length + 4
    return events


def conditional_and_loop():
    sys.path.insert(0, os.path.join(ROOT, "examples"))
    try:
        return importlib.import_module("conditional_graph"), importlib.import_module("loop_graph")
    finally:
        sys.path.pop(0)


def test_add_graph_writes_each_steps_graph(dg, tmp_path):
    pytest.importorskip("tensorboardX")
    from tensorboardX import SummaryWriter
    cond, _ = conditional_and_loop()
    w = leaf(dg, 1.5)
    writer = SummaryWriter(str(tmp_path))
    graphs = {}
    for step, x0 in enumerate(([0.5, -0.2, 1.0], [-0.5, -0.3, 0.4])):
        y, branch = cond.f(dg, leaf(dg, x0), w)
        tag = dg.viz.add_graph(writer, y, params={"w": w}, step=step)
        graphs[tag] = dg.autograd.graph.walk(y)
        writer.add_scalar("loss", y.item(), step)
    writer.close()
    assert list(graphs) == ["graph at step 0", "graph at step 1"]

    (event_file,) = glob.glob(str(tmp_path / "events.out.tfevents.*"))
    events = read_events(event_file)
    from tensorboardX.proto import graph_pb2
    run_graphs = [graph_pb2.GraphDef.FromString(e.graph_def) for e in events if e.graph_def]
    assert len(run_graphs) == 2
    ops = sorted(n.op for n in run_graphs[1].node)
    expected = [("Parameter" if node.variable is w else "Leaf") if node.name() == "AccumulateGrad" else node.name()
                for node in graphs["graph at step 1"].nodes]
    assert ops == sorted(expected + ["Output"])
    assert "SinBackward" in ops and "SinBackward" not in [n.op for n in run_graphs[0].node]
    params = [n for n in run_graphs[0].node if n.op == "Parameter"]
    assert [n.name for n in params] == ["w"] and params[0].attr["parameter"].s == b"w"
    muls = [n for n in run_graphs[0].node if n.op == "MulBackward"]       # x * x, then sum * w
    assert sorted([d.size for d in n.attr["_output_shapes"].list.shape[0].dim] for n in muls) == [[], [3]]
    mul = muls[0]
    assert mul.attr["call_site"].s.decode().startswith(os.path.join(ROOT, "examples", "conditional_graph.py:"))
    names = {n.name for n in run_graphs[0].node}
    for node in run_graphs[0].node:
        assert all(inp.split(":")[0] in names for inp in node.input)
    tagged = [v for e in events if e.HasField("summary") for v in e.summary.value
              if v.metadata.plugin_data.plugin_name == "graph_run_metadata_graph"]
    assert [v.tag for v in tagged] == ["graph at step 0", "graph at step 1"]
    scalars = [v.simple_value for e in events if e.HasField("summary") for v in e.summary.value if v.tag == "loss"]
    assert len(scalars) == 2


def test_tensorboard_graphs_plugin_reads_our_graphs(dg, tmp_path):
    """TensorBoard's own reader and graphs plugin list the run graph and one op graph per add_graph call."""
    pytest.importorskip("tensorboardX")
    pytest.importorskip("tensorboard")
    from tensorboard import context
    from tensorboard.backend.event_processing import data_provider, plugin_event_multiplexer
    from tensorboard.compat.proto import graph_pb2
    from tensorboard.plugins import base_plugin
    from tensorboard.plugins.graph import graphs_plugin
    from tensorboardX import SummaryWriter
    _, loop = conditional_and_loop()
    a, lr = leaf(dg, 2.0), leaf(dg, 0.05)
    writer = SummaryWriter(str(tmp_path / "run"))
    sizes = {}
    for step, a0 in enumerate((2.0, 8.0)):
        a = leaf(dg, a0)
        x, n = loop.iterate(dg, a, lr)
        tag = dg.viz.add_graph(writer, x, params={"a": a, "lr": lr}, step=step)
        sizes[tag] = len(dg.autograd.graph.walk(x).nodes) + 1
    writer.close()
    assert len(set(sizes.values())) == 2                  # two inputs, two different loop lengths

    multiplexer = plugin_event_multiplexer.EventMultiplexer()
    multiplexer.AddRunsFromDirectory(str(tmp_path))
    multiplexer.Reload()
    provider = data_provider.MultiplexerDataProvider(multiplexer, str(tmp_path))
    plugin = graphs_plugin.GraphsPlugin(base_plugin.TBContext(data_provider=provider, multiplexer=multiplexer,
                                                              logdir=str(tmp_path)))
    ctx = context.RequestContext()
    info = plugin.info_impl(ctx, "")
    assert info["run"]["run_graph"] is True
    assert {tag for tag, item in info["run"]["tags"].items() if item["op_graph"]} == set(sizes)
    from google.protobuf import text_format
    for tag, size in sizes.items():
        body, _ = plugin.graph_impl(ctx, "run", tag, is_conceptual=False, experiment="")
        graph = text_format.Parse(body, graph_pb2.GraphDef())
        assert len(graph.node) == size
        assert {"a", "lr"} <= {n.name for n in graph.node}
    body, _ = plugin.graph_impl(ctx, "run", None, is_conceptual=False, experiment="")
    assert len(text_format.Parse(body, graph_pb2.GraphDef()).node) == sizes["graph at step 1"]   # latest


def test_add_graph_needs_a_writer(dg):
    pytest.importorskip("tensorboardX")
    with pytest.raises(TypeError, match="add_graph: expected a tensorboardX SummaryWriter, got str"):
        dg.viz.add_graph("runs", (leaf(dg, [1.0]) * 2).sum())


# ----- how the graph changes ------------------------------------------------------------------------------------
def test_recorder_conditional_model_has_two_graphs(dg):
    cond, _ = conditional_and_loop()
    rec = dg.viz.GraphRecorder()
    w = leaf(dg, 1.5)
    inputs = [[0.5, -0.2, 1.0], [-0.5, -0.3, 0.4], [1.0, 1.0, 1.0], [-2.0, 0.5, 0.1], [0.3, 0.3, 0.3]]
    branches = []
    for x0 in inputs:
        y, branch = cond.f(dg, leaf(dg, x0), w)
        rec.record(y)
        branches.append(branch)
    assert rec.distinct() == 2 and len(rec) == 5
    assert rec.signatures[0] == rec.signatures[2] == rec.signatures[4]       # same branch, other values
    assert rec.signatures[1] == rec.signatures[3] != rec.signatures[0]
    d = dg.viz.diff(rec.signatures[0], rec.signatures[1])
    text = str(d)
    assert text.splitlines()[0] == (f"graph diff: {len(d.added)} nodes added, {len(d.removed)} removed, "
                                    f"{len(d.changed)} changed ({len(rec.signatures[0])} -> "
                                    f"{len(rec.signatures[1])} nodes)")
    added = {n.key[0] for n in d.added}
    removed = {n.key[0] for n in d.removed}
    assert "SinBackward" in added and "SinBackward" in text and "+ SinBackward (3,) float64 at conditional_graph.py" \
        in text
    assert "MulBackward" in removed and "- " in text
    assert not dg.viz.diff(rec.signatures[0], rec.signatures[2])
    assert "identical" in str(dg.viz.diff(rec.signatures[0], rec.signatures[2]))


def test_recorder_loop_model_counts_loop_lengths(dg):
    _, loop = conditional_and_loop()
    rec = dg.viz.GraphRecorder()
    lr = leaf(dg, 0.05)
    lengths = []
    for a0 in (2.0, 8.0, 0.5, 2.0, 8.0, 3.0):
        x, n = loop.iterate(dg, leaf(dg, a0), lr)
        rec.record(x)
        lengths.append(n)
    assert rec.distinct() == len(set(lengths)) >= 3
    for i, j in [(0, 3), (1, 4)]:
        assert rec.signatures[i] == rec.signatures[j]
    # the first iteration records 3 ops (x0 is a constant), every later one 5, plus the leaves a and lr
    assert [len(s) for s in rec.signatures] == [3 + 5 * (n - 1) + 2 for n in lengths]
    short, long_ = sorted(range(len(lengths)), key=lambda i: lengths[i])[0], \
        sorted(range(len(lengths)), key=lambda i: lengths[i])[-1]
    d = dg.viz.diff(rec.signatures[short], rec.signatures[long_])
    assert len(d.added) == 5 * (lengths[long_] - lengths[short]) and not d.removed and not d.changed
    assert all(n.key[1][0].endswith("loop_graph.py") for n in d.added)
    assert re.search(r"\+ \d+ x MulBackward \(\) float64 at loop_graph\.py:\d+", str(d))
    nodes, _ = parse_dot(d.to_dot())
    assert sum(n["fillcolor"] == "palegreen" for n in nodes.values()) == len(d.added)
    assert len(nodes) == len(rec.signatures[long_])


def test_signature_sees_shapes_and_lines(dg):
    def f(x):
        return (x * 2).sum()

    s1 = dg.viz.signature(f(leaf(dg, [1.0, 2.0])))
    s2 = dg.viz.signature(f(leaf(dg, [3.0, 4.0])))
    s3 = dg.viz.signature(f(leaf(dg, [1.0, 2.0, 3.0])))
    assert s1 == s2 and hash(s1) == hash(s2) and s1 != s3
    d = dg.viz.diff(s1, s3)
    assert len(d.changed) == 2 and not d.added and not d.removed      # MulBackward and the leaf changed shape
    assert "output (2,) float64 -> (3,) float64" in str(d)
    x = leaf(dg, [1.0, 2.0])
    other_line = (x * 2).sum()
    assert dg.viz.signature(other_line) != s1                         # same ops, created at another line
    nodes, edges = parse_dot(s1.to_dot())
    assert len(nodes) == len(s1) and len(edges) == 2


def test_diff_accepts_tensors(dg):
    x = leaf(dg, [1.0, 2.0])
    d = dg.viz.diff(x.sum(), x.exp().sum())
    assert [n.key[0] for n in d.added] == ["ExpBackward"]


# ----- the examples write a DOT/SVG and a TensorBoard log ----------------------------------------------------------
@pytest.mark.parametrize("engine", ["cpp", "reference"])
@pytest.mark.parametrize("name", ["conditional_graph", "loop_graph"])
def test_examples_write_graphs(name, engine, tmp_path, monkeypatch, capsys):
    """The full (not --smoke) run of each graph example, in this process (tensorboardX imports torch when it is
    installed, which a subprocess would pay again)."""
    module = dict(zip(["conditional_graph", "loop_graph"], conditional_and_loop()))[name]
    monkeypatch.setattr(sys, "argv", [name, "--engine", engine, "--plot-dir", str(tmp_path)])
    module.main()
    out = capsys.readouterr().out
    assert "graph diff:" in out and "MISMATCH" not in out
    dots = sorted(glob.glob(str(tmp_path / f"{name}_*.dot")))
    assert len(dots) == 3                                   # two inputs and their diff
    for path in dots:
        parse_dot(open(path).read())
    if HAVE_DOT:
        assert len(glob.glob(str(tmp_path / f"{name}_*.svg"))) == 3
    try:
        import tensorboardX  # noqa: F401
        assert glob.glob(str(tmp_path / "runs" / name / "events.out.tfevents.*"))
    except ImportError:
        pass
