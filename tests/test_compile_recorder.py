"""The C++ recorder of dyngrad.compile (Note [Recording in C++] in csrc/bindings/capture_record.cpp) against its
definition, the Python recorder (capture.Recorder with capture.NATIVE_RECORDER off): for a set of programs both
record the same variants, field by field (steps' functions, templates, results, lines, loop specs; externals, slot
counts, outputs), and the compiled program then gives eager mode's results. The reference engine records in
Python only, so these tests run on the C++ engine."""
import warnings

import numpy as np
import pytest

import dyngrad as dg
from dyngrad._api import capture

from helpers import assert_bitwise_equal

pytestmark = pytest.mark.skipif(capture._RecorderCore is None, reason="the engine has no C++ recorder")


def same(a, b, where="template"):
    """a and b are the same template: equal values of the same types, tensors and functions by identity."""
    assert type(a) is type(b), (where, a, b)
    if type(a) is capture.Slot:
        assert a.i == b.i, where
    elif type(a) is capture.Seq:
        assert a.kind is b.kind, where
        same(a.items, b.items, where)
    elif type(a) is capture.ArrayConstant:
        assert a.by_ref == b.by_ref and (a.source is b.source if a.by_ref else True), where
        assert a.array.dtype == b.array.dtype and a.array.shape == b.array.shape, where
        assert a.array.tobytes() == b.array.tobytes(), where
    elif isinstance(a, (tuple, list)):
        assert len(a) == len(b), where
        for x, y in zip(a, b):
            same(x, y, where)
    elif isinstance(a, dict):
        assert list(a) == list(b), where
        for k in a:
            same(a[k], b[k], where)
    elif isinstance(a, np.ndarray):
        assert a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes(), where
    elif isinstance(a, dg.Tensor) or callable(a) or isinstance(a, type):
        assert a is b, where
    elif isinstance(a, float) and a != a:
        assert b != b, where
    else:
        assert a == b, where


def same_variant(v, w):
    assert len(v.steps) == len(w.steps), ([s.name for s in v.steps], [s.name for s in w.steps])
    for k, (s, t) in enumerate(zip(v.steps, w.steps)):
        where = f"step {k} ({s.name})"
        assert s.fn is t.fn and s.name == t.name, where
        same(s.args, t.args, where + " args")
        same(s.kwargs, t.kwargs, where + " kwargs")
        same(s.result, t.result, where + " result")
        assert s.line == t.line, (where, s.line, t.line)
        assert s.out == t.out, where
        same(s.native, t.native, where + " native")
        assert type(s.plan) is type(t.plan), where
        if isinstance(s.plan, str):
            assert s.plan == t.plan, where
    assert sorted(v.externals) == sorted(w.externals)
    for i in v.externals:
        assert v.externals[i] is w.externals[i]
    assert v.n_slots == w.n_slots and v.n_args == w.n_args
    same(v.output, w.output, "output")
    assert v.eager_reason == w.eager_reason


def assert_tree_equal(a, b):
    if isinstance(a, dg.Tensor):
        assert_bitwise_equal(a, b)
    elif isinstance(a, (tuple, list)):
        assert type(a) is type(b) and len(a) == len(b)
        for x, y in zip(a, b):
            assert_tree_equal(x, y)
    elif isinstance(a, dict):
        assert list(a) == list(b)
        for k in a:
            assert_tree_equal(a[k], b[k])
    else:
        assert a == b


def variants(compiled):
    return [v for group in compiled._program.groups.values() for v in group]


def record_both(monkeypatch, fn, make_inputs, calls=1):
    """Compiles fn twice, one recorded by each recorder, calls both `calls` times on the same inputs; returns the
    two lists of variants and the outputs of each."""
    results = {}
    for native in (False, True):
        monkeypatch.setattr(capture, "NATIVE_RECORDER", native)
        compiled = dg.compile(fn, mode="reduce-overhead")
        dg.manual_seed(0)
        outs = [compiled(*make_inputs(i)) for i in range(calls)]
        results[native] = (variants(compiled), outs)
    return results[False], results[True]


def chain(x):
    y = x
    for _ in range(5):
        y = (y * 0.5 + 0.25).tanh()
    y.sum().backward()
    return y


def branchy(x, n):
    y = x * 2
    if bool((y.sum() > 0).item()):
        y = y.exp()
    for _ in range(int(y.detach().max().item() > 1) + n):
        y = y + 1
    return y, {"half": y / 2, "n": n}, [y.relu()]


def with_arrays(x):
    a = np.arange(3, dtype=np.float32)
    view = dg.from_numpy(a) * x                         # an array the program makes: replayed as a copy
    outside = dg.from_numpy(OUTSIDE) + x                # an array held outside: by reference
    values = (x * 2)._numpy_view()                      # an array result, compared bitwise
    return view + outside + float(values.sum()), x.split(1), x.max(0)


OUTSIDE = np.ones(3, np.float32)


def keywords(x):
    parts = dg.split(x, 1, dim=0)
    y = dg.sum(x, dim=0, keepdim=True)
    return dg.cat(list(parts) + [y], dim=0).softmax(dim=-1)


def operators(x, w):
    """The fast paths that record (Note [Fast paths that record]): operators with tensors and numbers on either
    side, functions and methods of one and two tensors, and the ones that stay in Python (dg.add issues
    result_type first, 2 / t is four steps)."""
    y = 2 * x - 1
    y = 2 - y + x * w
    y = dg.mul(y, 3.0) + dg.add(y, w) + y.mul(w) + y.sub(0.5) + dg.tanh(y) + y.exp() + 2 / (y.abs() + 1)
    z = (y @ w.reshape(3, 1)).relu()
    return y, z, dg.maximum(y, x).sigmoid(), (x > 0.5).float() * y


LIN = dg.nn.Linear(3, 2)
LIN_NO_BIAS = dg.nn.Linear(3, 2, bias=False)


def linear_layers(x):
    """linear's fast path records mT, matmul and add (Note [Fast paths that record]); a 1-D weight stays in Python."""
    y = LIN(x) + LIN_NO_BIAS(x) + dg.nn.functional.linear(x, LIN.weight, None)
    return y.relu(), dg.nn.functional.linear(x, LIN.weight[0]), LIN(x[0])


def loss(x, y):
    """cross_entropy's fast path records its target check (bridge.validate) and the op."""
    return dg.nn.functional.cross_entropy(x, y) + dg.nn.functional.cross_entropy(x * 2, y, reduction="sum")


def dropout_step(x):
    y = dg.nn.functional.dropout(x, 0.5, training=True)
    return y + dg.randn(3)


@pytest.mark.parametrize("fn, make", [
    (chain, lambda i: (dg.tensor(np.array([0.3, -0.2], np.float32), requires_grad=True),)),
    (branchy, lambda i: (dg.tensor(np.array([0.5, -0.1, 0.7], np.float32)), 2)),
    (with_arrays, lambda i: (dg.tensor(np.array([1.0, 2.0, 3.0], np.float32)),)),
    (keywords, lambda i: (dg.tensor(np.arange(6, dtype=np.float32).reshape(2, 3)),)),
    (dropout_step, lambda i: (dg.tensor(np.ones(3, np.float32)),)),
    (operators, lambda i: (dg.tensor(np.array([0.1, 0.6, -0.4], np.float32), requires_grad=True),
                           dg.tensor(np.array([1.5, -0.5, 0.25], np.float32)))),
    (linear_layers, lambda i: (dg.tensor(np.arange(12, dtype=np.float32).reshape(4, 3) / 10, requires_grad=True),)),
    (loss, lambda i: (dg.tensor(np.arange(12, dtype=np.float32).reshape(4, 3) / 7, requires_grad=True),
                      dg.tensor(np.array([0, 2, 1, (i + 1) % 3])))),
], ids=["chain", "branchy", "arrays", "keywords", "dropout", "operators", "linear", "loss"])
def test_both_recorders_record_the_same_variant(monkeypatch, fn, make):
    (vp, outs_p), (vc, outs_c) = record_both(monkeypatch, fn, make, calls=3)
    assert len(vp) == len(vc) >= 1
    for v, w in zip(vp, vc):
        same_variant(v, w)
    dg.manual_seed(0)
    expected = [fn(*make(i)) for i in range(3)]
    for got_p, got_c, want in zip(outs_p, outs_c, expected):
        assert_tree_equal(got_c, want)
        assert_tree_equal(got_p, want)


def test_a_training_step_records_the_same_variant(monkeypatch):
    """A model, cross_entropy, a backward (planned in Python), SGD with momentum (lists of tensors)."""
    rng = np.random.default_rng(0)
    x = dg.tensor(rng.standard_normal((4, 5)).astype(np.float32))
    y = dg.tensor(rng.integers(0, 3, 4))
    got = []
    for native in (False, True):
        monkeypatch.setattr(capture, "NATIVE_RECORDER", native)
        dg.manual_seed(0)
        model = dg.nn.Sequential(dg.nn.Linear(5, 8), dg.nn.ReLU(), dg.nn.Linear(8, 3))
        opt = dg.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)

        def step(x, y):
            opt.zero_grad()
            loss = dg.nn.functional.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            return loss
        compiled = dg.compile(step, mode="reduce-overhead")
        losses = [compiled(x, y) for _ in range(4)]
        got.append((variants(compiled), losses, [p.detach() for p in model.parameters()], model))
    (vp, lp, pp, mp), (vc, lc, pc, mc) = got
    assert len(vp) == len(vc) == 2        # the first step creates the momentum buffers
    for v, w in zip(vp, vc):
        # the externals are each model's own parameters: compare the steps with the slots, not the tensors
        assert [s.name for s in v.steps] == [s.name for s in w.steps]
        for s, t in zip(v.steps, w.steps):
            assert s.fn is t.fn and s.line == t.line and s.out == t.out, s.name
            same(s.result, t.result, s.name)
            same(s.native, t.native, s.name) if s.native is None or not any(
                isinstance(c, dg.Tensor) for c in s.native[1]) else None
        assert sorted(v.externals) == sorted(w.externals) and v.n_slots == w.n_slots
    for a, b in zip(lp + pp, lc + pc):
        assert_bitwise_equal(a, b)


def test_recording_runs_in_cpp(monkeypatch):
    """With the C++ recorder only the steps it leaves to Python (a backward: its plan) reach record_step."""
    names = []
    original = capture.Recorder.record_step

    def counting(self, fn, name, *rest):
        names.append(name)
        return original(self, fn, name, *rest)
    monkeypatch.setattr(capture.Recorder, "record_step", counting)
    monkeypatch.setattr(capture, "NATIVE_RECORDER", True)
    compiled = dg.compile(chain, mode="reduce-overhead")
    compiled(dg.tensor(np.array([0.3], np.float32), requires_grad=True))
    assert names == ["_run_backward"]
    monkeypatch.setattr(capture, "NATIVE_RECORDER", False)
    names.clear()
    compiled = dg.compile(chain, mode="reduce-overhead")
    compiled(dg.tensor(np.array([0.3], np.float32), requires_grad=True))
    assert len(names) > 10 and "_run_backward" in names


def test_steps_that_stay_eager_are_decided_as_in_python(monkeypatch):
    """A custom Function hands the engine Python objects: both recorders mark the variant eager, naming the op and
    the user's line."""
    class Double(dg.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return g * 2

    def fn(x):
        return Double.apply(x) + 1
    reasons = []
    for native in (False, True):
        monkeypatch.setattr(capture, "NATIVE_RECORDER", native)
        compiled = dg.compile(fn, mode="reduce-overhead")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            x = dg.tensor(np.ones(2, np.float32), requires_grad=True)
            out = compiled(x)
            assert_bitwise_equal(out, fn(x))
        reasons.append([v.eager_reason for v in variants(compiled)])
    assert reasons[0] == reasons[1] and reasons[0][0] is not None
    assert reasons[0][0][1].startswith("test_compile_recorder.py:")


def test_user_line_in_cpp_is_the_python_one():
    capture._native_setup()

    def inner():
        return capture.user_line(), capture._user_line_py()
    a, b = inner()
    assert a == b and a.startswith("test_compile_recorder.py:")


def test_a_call_that_raises_records_no_step(monkeypatch):
    """The program catches an op's error: the step is not recorded, by either recorder, nor are its arrays."""
    def fn(x):
        try:
            dg.from_numpy(np.zeros((2, 2), np.float32)) @ x     # (2, 2) @ (3,): an error
        except Exception:
            pass
        return x + 1
    (vp, _), (vc, _) = record_both(monkeypatch, fn, lambda i: (dg.tensor(np.ones(3, np.float32)),))
    for v, w in zip(vp, vc):
        same_variant(v, w)


def test_a_target_out_of_range_raises_while_recording(monkeypatch):
    """The target check runs while recording, through either recorder, and raises its error."""
    for native in (False, True):
        monkeypatch.setattr(capture, "NATIVE_RECORDER", native)
        compiled = dg.compile(loss, mode="reduce-overhead")
        with pytest.raises(IndexError, match="out of range for 3 classes"):
            compiled(dg.tensor(np.ones((2, 3), np.float32)), dg.tensor(np.array([0, 3])))


def test_a_replaced_core_function_is_recorded_as_itself(monkeypatch):
    """A _C function replaced by Python (a monkeypatch) is not the one a fast path would record: the fast path
    leaves the call to the Python definition, which calls the replacement, and the step names it."""
    calls = []
    original = dg._C.mul

    def mul(a, b):
        calls.append(1)
        return original(a, b)
    monkeypatch.setattr(capture, "NATIVE_RECORDER", True)
    monkeypatch.setattr(dg._C, "mul", mul)
    compiled = dg.compile(lambda x: x * x + 1, mode="reduce-overhead")
    x = dg.tensor(np.array([1.0, 2.0], np.float32))
    assert_bitwise_equal(compiled(x), x * x + 1)
    steps = variants(compiled)[0].steps
    assert steps[0].name == "mul" and steps[0].fn is mul and calls
    assert steps[-1].name == "add" and steps[-1].fn is capture._C_BINDINGS["add"]
