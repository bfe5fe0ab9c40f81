"""dyngrad.autograd.profiler (and the dyngrad.profiler alias) on both engines: the per-op table, input shapes,
self vs total time, backward nodes, record_function, and a Chrome trace that is valid trace-event JSON."""
import importlib
import json

import numpy as np
import pytest


def prof_mod(dg):
    return importlib.import_module(dg.__name__ + ".autograd.profiler")


def _model(dg):
    nn = dg.nn
    return nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 2))


def test_table_counts_shapes_and_times(dg):
    P = prof_mod(dg)
    model = _model(dg)
    x = dg.tensor(np.ones((4, 8), dtype=np.float32))
    with P.profile(record_shapes=True) as prof:
        with P.record_function("my_step"):
            for _ in range(3):
                loss = (model(x) * 2).sum()
            loss.backward()
    avg = {e.key: e for e in prof.key_averages()}
    assert avg["linear"].count == 6 and avg["relu"].count == 3 and avg["my_step"].count == 1
    assert avg["mul"].count == 3 and avg["sum"].count == 3            # x * 2 shows as mul, from __mul__
    assert avg["autograd::backward"].count == 1
    assert any(k.startswith("Relu") for k in avg) and any("Backward" in k for k in avg)
    step = avg["my_step"]
    assert step.cpu_time_total >= sum(avg[k].cpu_time_total for k in ("linear", "relu", "mul", "sum"))
    assert step.self_cpu_time_total < step.cpu_time_total
    for e in prof.events():
        assert e.self_cpu_time_total <= e.cpu_time_total + 1e-6 and e.cpu_time_total >= 0
    shapes = {str(e.input_shapes) for e in prof.events() if e.name == "linear"}
    assert "[[4, 8], [16, 8], [16]]" in shapes and "[[4, 16], [2, 16], [2]]" in shapes
    grouped = prof.key_averages(group_by_input_shape=True)
    assert sum(1 for e in grouped if e.key == "linear") == 2
    text = prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=5)
    lines = text.splitlines()
    for header in ("Name", "Self CPU %", "Self CPU", "CPU total", "# of Calls", "Input Shapes"):
        assert header in lines[1]
    assert len([ln for ln in lines if ln and not ln.startswith("-")]) == 1 + 5 + 1   # header, 5 rows, total
    assert prof.key_averages().table(sort_by="count").splitlines()[3].split()[0] in ("linear", "getitem")
    with pytest.raises(ValueError, match="sort_by"):
        prof.key_averages().table(sort_by="banana")
    assert "Self CPU time total" in str(prof)


def test_chrome_trace_is_valid_trace_event_json(dg, tmp_path):
    P = prof_mod(dg)
    x = dg.tensor(np.arange(6.0).reshape(2, 3), requires_grad=True)
    with P.profile(record_shapes=True) as prof:
        (x.exp() @ x.t()).sum().backward()
    path = tmp_path / "trace.json"
    prof.export_chrome_trace(str(path))
    trace = json.loads(path.read_text())
    events = [e for e in trace["traceEvents"] if e["ph"] == "X"]
    assert {"exp", "matmul", "sum", "autograd::backward"} <= {e["name"] for e in events}
    for e in events:
        assert isinstance(e["ts"], (int, float)) and e["dur"] >= 0 and "pid" in e and "tid" in e
    assert any("Input Dims" in e["args"] for e in events)


def test_profiling_leaves_no_trace_and_nests(dg):
    P = prof_mod(dg)
    before = (dg.Tensor.__add__, dg.add, dg.nn.functional.relu)
    with P.profile() as outer:
        with P.profile() as inner:
            dg.ones(2) + 1
        dg.ones(2) * 3
    assert (dg.Tensor.__add__, dg.add, dg.nn.functional.relu) == before   # the originals are back
    assert {e.key for e in inner.key_averages()} == {"ones", "add"}
    assert {e.key for e in outer.key_averages()} == {"ones", "add", "mul"}
    with P.profile(enabled=False) as off:
        dg.ones(2)
    with pytest.raises(RuntimeError, match="not run"):
        off.key_averages()
    with pytest.raises(RuntimeError, match="CPU only"):
        P.profile(use_cuda=True)

    @P.record_function("decorated")
    def work():
        return dg.ones(3).sum()

    work()                                       # no profile active: nothing recorded, still works
    with P.profile() as prof:
        work()
    assert [e.key for e in prof.key_averages()][0] == "decorated"


def test_torch_profiler_alias(dg):
    prof_pkg = importlib.import_module(dg.__name__ + ".profiler")
    with prof_pkg.profile(activities=[prof_pkg.ProfilerActivity.CPU], record_shapes=True) as prof:
        for _ in range(2):
            dg.ones(2, 2).sum()
            prof.step()
    keys = {e.key for e in prof.key_averages()}
    assert {"ones", "sum", "ProfilerStep#1", "ProfilerStep#2"} <= keys
    with pytest.raises(RuntimeError, match="CPU only"):
        prof_pkg.profile(activities=[prof_pkg.ProfilerActivity.CUDA])


def test_options_it_cannot_honour_are_refused(dg):
    """A schedule, memory, stacks, FLOPs or module hierarchy would be silently missing from the table: refused."""
    prof_pkg = importlib.import_module(dg.__name__ + ".profiler")
    sched = prof_pkg.schedule(wait=1, warmup=1, active=2)
    for kwargs in ({"schedule": sched}, {"profile_memory": True}, {"with_stack": True}, {"with_flops": True},
                   {"with_modules": True}):
        with pytest.raises(NotImplementedError, match=f"profile: {next(iter(kwargs))} is not supported"):
            prof_pkg.profile(**kwargs)
