"""dyngrad.utils.tensorboard.SummaryWriter (tensorboardX behind PyTorch's module path) on both engines: the event
files it writes are read back with tensorboardX's protos and a small TFRecord reader; and viz.graph_def is linear
in the number of nodes (issue 11)."""
import glob
import importlib
import struct
import time

import numpy as np
import pytest

pytest.importorskip("tensorboardX")


def _events(log_dir):
    """Every Event in the run's event files (TFRecord framing: length, crc, payload, crc)."""
    from tensorboardX.proto import event_pb2
    out = []
    for path in sorted(glob.glob(f"{log_dir}/**/events.out.tfevents.*", recursive=True)):
        data = open(path, "rb").read()
        pos = 0
        while pos < len(data):
            (n,) = struct.unpack("<Q", data[pos:pos + 8])
            out.append(event_pb2.Event.FromString(data[pos + 12:pos + 12 + n]))
            pos += 12 + n + 4
    return out


def _values(events):
    return {v.tag: (e.step, v) for e in events if e.HasField("summary") for v in e.summary.value}


def test_summary_writer_values_and_graph(dg, tmp_path):
    tb = importlib.import_module(dg.__name__ + ".utils.tensorboard")
    model = dg.nn.Sequential(dg.nn.Linear(3, 4), dg.nn.ReLU(), dg.nn.Linear(4, 1))
    x = dg.tensor(np.random.default_rng(0).normal(size=(5, 3)).astype(np.float32))
    with tb.SummaryWriter(str(tmp_path)) as writer:
        assert writer.get_logdir() == str(tmp_path)
        writer.add_scalar("loss", dg.tensor(0.25), 3)
        writer.add_scalar("lr", 0.1, 3)
        writer.add_scalars("pair", {"a": 1.0, "b": dg.tensor([2.0])}, 4)
        writer.add_histogram("w", model[0].weight, 5)
        writer.add_image("img", dg.rand(3, 8, 8), 6)
        writer.add_images("imgs", dg.rand(2, 1, 8, 8), 6)
        writer.add_text("note", "hello dyngrad", 7)
        tag = writer.add_graph(model, x)
        with pytest.raises(ValueError, match="one element"):
            writer.add_scalar("bad", dg.ones(2))
        with pytest.raises(TypeError, match="must return a Tensor"):
            writer.add_graph(lambda t: 3, x)
        with pytest.raises(RuntimeError, match="no recorded graph"):
            writer.add_graph(lambda t: t * 2, x)
    events = _events(tmp_path)
    values = _values(events)
    assert values["loss"][0] == 3 and values["loss"][1].simple_value == pytest.approx(0.25)
    assert values["lr"][1].simple_value == pytest.approx(0.1)
    hist = values["w"][1].histo
    assert hist.num == 12 and hist.min == pytest.approx(float(model[0].weight.min()))
    assert values["img"][1].image.height == 8 and values["img"][1].image.width == 8
    assert any(t.startswith("imgs") for t in values)
    assert "note/text_summary" in values
    assert any(t.startswith("pair") for t in values) or glob.glob(f"{tmp_path}/pair_*")
    graphs = [e.graph_def for e in events if e.graph_def]
    assert len(graphs) == 1 and tag in values
    from tensorboardX.proto import graph_pb2
    gd = graph_pb2.GraphDef.FromString(graphs[0])
    ops = [n.op for n in gd.node]
    assert ops.count("Parameter") == 4 and "Output" in ops          # the leaves are named after the parameters
    params = {n.attr["parameter"].s.decode() for n in gd.node if n.op == "Parameter"}
    assert params == {"0.weight", "0.bias", "2.weight", "2.bias"}


def test_graph_def_is_linear_in_nodes(dg):
    """Issue 11: naming n nodes that share a base name was O(n^2) (18 s at 16k nodes)."""
    viz = importlib.import_module(dg.__name__ + ".viz")

    def chain(n):
        y = dg.ones(2, requires_grad=True)
        for _ in range(n):
            y = y * 1.0
        return y

    def seconds(n):
        y = chain(n)
        start = time.perf_counter()
        gd = viz.graph_def(y)
        assert len(gd.node) == n + 2 and len({node.name for node in gd.node}) == n + 2
        return time.perf_counter() - start

    seconds(50)
    small, big = min(seconds(500) for _ in range(2)), min(seconds(2000) for _ in range(2))
    assert big < 10 * small + 0.05, (small, big)      # 4x the nodes: ~4x the time (quadratic would be ~16x)


def test_missing_tensorboardx_gives_a_hint(tmp_path):
    import subprocess
    import sys
    code = ("import sys; sys.modules['tensorboardX'] = None\n"
            "try:\n    import dyngrad.utils.tensorboard\nexcept ImportError as e:\n    print(e)\n")
    from helpers import subprocess_env
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         env=subprocess_env())
    assert "pip install tensorboardX" in out.stdout, out.stderr
