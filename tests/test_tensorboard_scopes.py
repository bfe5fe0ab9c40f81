"""TensorBoard graphs grouped by module, as PyTorch's add_graph groups them (issue 25: nodes were grouped by Python
function, and a Linear showed as three nodes): Note [Module scopes] in python/dyngrad/viz/tensorboard.py."""
import pytest

pytest.importorskip("tensorboardX")


def make_net(nn):
    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1 = nn.Linear(4, 8)
            self.act = nn.ReLU()
            self.fc2 = nn.Linear(8, 2)
            self.blocks = nn.Sequential(nn.Linear(2, 2), nn.Tanh())

        def forward(self, x):
            return self.blocks(self.fc2(self.act(self.fc1(x))))
    return Net()


MODULE_SCOPES = {"Net/Linear[fc1]", "Net/ReLU[act]", "Net/Linear[fc2]", "Net/Sequential[blocks]/Linear[0]",
                 "Net/Sequential[blocks]/Tanh[1]"}


def scoped_graph(dg, model, x):
    with dg.viz.module_scopes(model) as scopes:
        y = model(x)
    return dg.viz.graph_def(y, params=model, scopes=scopes)


def test_nodes_are_named_by_module_path(dg):
    gd = scoped_graph(dg, make_net(dg.nn), dg.ones(3, 4))
    ops = [n for n in gd.node if n.op not in ("Parameter", "Leaf", "Output")]
    assert {n.name.rpartition("/")[0] for n in ops} == MODULE_SCOPES
    params = {n.name for n in gd.node if n.op == "Parameter"}
    assert "Net/Linear[fc1]/weight" in params and "Net/Sequential[blocks]/Linear[0]/bias" in params
    assert len(params) == 6                               # three Linears' weight and bias


def test_a_collapsed_module_is_one_node(dg):
    """Collapsing every module scope to one box (what TensorBoard shows before a box is opened) leaves one node per
    module call, its parameters inside, and the data flowing fc1 -> act -> fc2 -> blocks."""
    gd = scoped_graph(dg, make_net(dg.nn), dg.ones(3, 4))
    box = {}
    for n in gd.node:
        scope = n.name.rpartition("/")[0]
        box[n.name] = scope if scope else n.name         # the output node stays itself
    assert set(box.values()) == MODULE_SCOPES | {"output_0"}
    edges = {(box[i.split(":")[0]], box[n.name]) for n in gd.node for i in n.input}
    edges = {(a, b) for a, b in edges if a != b}
    assert edges == {("Net/Linear[fc1]", "Net/ReLU[act]"), ("Net/ReLU[act]", "Net/Linear[fc2]"),
                     ("Net/Linear[fc2]", "Net/Sequential[blocks]/Linear[0]"),
                     ("Net/Sequential[blocks]/Linear[0]", "Net/Sequential[blocks]/Tanh[1]"),
                     ("Net/Sequential[blocks]/Tanh[1]", "output_0")}


def test_scopes_match_pytorchs_add_graph(dg):
    torch = pytest.importorskip("torch")
    pytest.importorskip("tensorboard")
    from torch.utils.tensorboard._pytorch_graph import graph
    theirs, _ = graph(make_net(torch.nn), (torch.ones(3, 4),))
    their_scopes = {n.name.rpartition("/")[0] for n in theirs.node if n.op.startswith("aten::")}
    ours = scoped_graph(dg, make_net(dg.nn), dg.ones(3, 4))
    assert {n.name.rpartition("/")[0] for n in ours.node if n.op not in ("Parameter", "Leaf", "Output")} == \
        their_scopes


def test_summary_writer_add_graph_scopes_by_module(dg, tmp_path):
    from tensorboardX.proto import event_pb2  # noqa: F401  (the writer below needs tensorboardX)
    tensorboard = pytest.importorskip(f"{dg.__name__}.utils.tensorboard")
    writer = tensorboard.SummaryWriter(str(tmp_path))
    captured = []
    original = writer._writer._get_file_writer

    class Capture:
        def __init__(self, inner):
            self.inner = inner

        def add_event(self, event, step=None, *args):
            if event.HasField("graph_def"):
                captured.append(event.graph_def)
            return self.inner.add_event(event, step, *args)

        def __getattr__(self, name):
            return getattr(self.inner, name)

    writer._writer._get_file_writer = lambda: Capture(original())
    writer.add_graph(make_net(dg.nn), dg.ones(3, 4))
    writer.close()
    from tensorboardX.proto import graph_pb2
    gd = graph_pb2.GraphDef.FromString(captured[0])
    assert {n.name.rpartition("/")[0] for n in gd.node if n.op not in ("Parameter", "Leaf", "Output")} == \
        MODULE_SCOPES


def test_a_module_called_in_a_loop_keeps_one_scope(dg):
    nn = dg.nn
    cell = nn.Linear(3, 3)

    class Loop(nn.Module):
        def __init__(self):
            super().__init__()
            self.cell = cell

        def forward(self, h):
            for _ in range(4):
                h = dg.tanh(self.cell(h))
            return h

    gd = scoped_graph(dg, Loop(), dg.ones(1, 3))
    scopes = {n.name.rpartition("/")[0] for n in gd.node if n.op not in ("Output",)}
    assert scopes == {"Loop", "Loop/Linear[cell]"}
    assert len({n.name for n in gd.node}) == len(gd.node)          # repeated ops get distinct names
    assert sum(n.op == "TanhBackward" and n.name.startswith("Loop/TanhBackward") for n in gd.node) == 4


def test_without_scopes_nodes_are_grouped_by_function(dg):
    model = make_net(dg.nn)
    gd = dg.viz.graph_def(model(dg.ones(3, 4)), params=model)
    assert all(not n.name.startswith("Net/") for n in gd.node)
    with pytest.raises(TypeError, match="module_scopes: expected a Module"):
        dg.viz.module_scopes(3)
