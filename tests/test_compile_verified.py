"""dyngrad.compile's verified replay (mode="verified", Note [Verified replay] in python/dyngrad/_api/capture.py), on
both engines: the program's Python runs at every call, each op checked against the recordings, so every result
equals eager mode's while Python flips branches, prints, counts, reads self.training, steps optimisers or changes
its model; compiler.programs() counts the calls that followed a recording (hits) and those that left it (misses,
with the op and the line)."""
import pickle
import warnings

import numpy as np
import pytest

from helpers import array_tensor, assert_bitwise_equal


def verified(dg, fn, **kwargs):
    return dg.compile(fn, mode="verified", **kwargs)


t = array_tensor
assert_same = assert_bitwise_equal


def test_the_ways_to_ask_for_it(dg, monkeypatch):
    def f(x):
        return x * 2
    assert dg.compile(f) is f                                   # the default runs eagerly (Note [Two modes of compile])
    for compiled in (dg.compile(f, mode="verified"), dg.compile(f, options={"verify": True})):
        assert compiled(t(dg, [1.0])).item() == 2.0 and compiled.compile_stats.mode == "verified"
    monkeypatch.setenv("DYNGRAD_COMPILE_VERIFY", "1")
    assert dg.compile(f).compile_stats.mode == "verified"
    assert dg.compile(f, mode="reduce-overhead").compile_stats.mode == "static"
    assert dg.compile(f, disable=True) is f


def test_data_dependent_branch(dg):
    def f(x):
        y = x.tanh() * 3
        if y.sum() > 0:
            return (y * y).sum(0)
        return (y - 1).exp().sum(0)
    compiled = verified(dg, f)
    for v in ([[1., 2.]], [[2., 1.]], [[-3., 1.]], [[-1., -1.]], [[4., 0.]], [[-2., 0.5]]):
        x, y = t(dg, v, requires_grad=True), t(dg, v, requires_grad=True)
        out, ref = compiled(x), f(y)
        assert_same(out, ref)
        out.sum().backward()
        ref.sum().backward()
        assert_same(x.grad, y.grad)
    stats = compiled.compile_stats
    assert (stats.calls, stats.variants, stats.hits, stats.misses) == (6, 2, 4, 1)
    (reason, line), = stats.guard_misses
    assert "item returned False where the recording has 'True'" in reason and line.startswith("test_compile_verified")


def test_print_and_python_counters_run_at_every_call(dg, capsys):
    """What static replay's contract gives up: Python that touches no tensor, and Python state the guards cannot
    see, behave as in eager mode. The counter changes the program every other call; each change is a miss (the op
    and line where Python left the recording), then a recorded variant and hits."""
    counter = [0]

    def f(x):
        counter[0] += 1
        print("call", counter[0])
        y = x * 2
        if counter[0] % 2 == 0:
            y = y + 1
        return y, counter[0]
    compiled = verified(dg, f)
    results = [compiled(t(dg, [1.0])) for _ in range(6)]
    assert [(y.item(), n) for y, n in results] == [(2.0, 1), (3.0, 2), (2.0, 3), (3.0, 4), (2.0, 5), (3.0, 6)]
    assert capsys.readouterr().out.split("\n")[:6] == [f"call {i}" for i in range(1, 7)]
    stats = compiled.compile_stats
    assert (stats.variants, stats.hits, stats.misses) == (2, 4, 1)
    reason, line = stats.guard_misses[0]
    assert reason.startswith("the program issued scalar_operand where the recording has") and \
        line.startswith("test_compile_verified.py:")


def test_loop_counts_and_python_number_arguments(dg):
    """A count read from a tensor and a Python number argument: each new program is recorded once, then hit; the
    number is checked where an op receives it, not by value at the entry."""
    def f(x, n, scale):
        y = x
        for _ in range(int(n.sum())):
            y = y * scale + 1
        return y
    compiled = verified(dg, f)
    for k, scale in ((1, 0.5), (3, 0.5), (3, 0.5), (1, 0.5), (2, 0.5), (3, 0.5), (3, 2.0), (3, 2.0)):
        x, n = t(dg, [1., 2., 3.]), t(dg, [k], dtype=np.int64)
        assert_same(compiled(x, n, scale), f(x, n, scale))
    stats = compiled.compile_stats
    assert (stats.variants, stats.hits) == (4, 4)
    assert any("= 2.0 where the recording has 0.5" in reason for reason, _ in stats.guard_misses)


def test_sequence_lengths(dg):
    """An RNN over sequences of changing length (shapes read in Python): one variant per length."""
    w = t(dg, np.full((3, 3), 0.1), requires_grad=True)

    def f(seq):
        h = dg.zeros(3)
        for i in range(seq.shape[0]):
            h = (seq[i] + h @ w).tanh()
        return h.sum()
    compiled = verified(dg, f)
    for n in (3, 5, 3, 5, 4):
        seq = np.arange(n * 3, dtype=np.float32).reshape(n, 3) / 10
        w.grad = None
        out = compiled(dg.tensor(seq))
        out.backward()
        g = w.grad.clone()
        w.grad = None
        ref = f(dg.tensor(seq))
        ref.backward()
        assert_same(out, ref)
        assert_same(g, w.grad)
    assert compiled.compile_stats.variants == 3 and compiled.compile_stats.hits == 2


def gated_module(dg):
    """A module whose forward reads self.training in Python."""
    class Gated(dg.nn.Module):
        def __init__(self):
            super().__init__()
            self.linear = dg.nn.Linear(3, 2)

        def forward(self, x):
            y = self.linear(x)
            if self.training:
                y = y * 0.5
            return y.relu()
    return Gated()


def test_training_flag_read_in_python(dg):
    model = gated_module(dg)
    compiled = dg.compile(model, mode="verified")
    assert compiled._orig_mod is model
    x = t(dg, [[1., 2., 3.], [0., -1., 2.]])
    for training in (True, True, False, False, True, False):
        model.train(training)
        assert_same(compiled(x), model(x))
    stats = compiled.compile_stats
    assert (stats.variants, stats.hits) == (2, 4)


def test_grad_mode_and_dropout(dg):
    model = dg.nn.Sequential(dg.nn.Linear(3, 4), dg.nn.Dropout(0.5), dg.nn.Linear(4, 1))
    compiled = dg.compile(model, mode="verified")
    x = t(dg, [[1., 2., 3.], [0., -1., 2.]])
    outs = []
    for seed, grad in ((1, True), (2, True), (1, False), (1, True)):
        dg.manual_seed(seed)
        with dg.set_grad_enabled(grad):
            out = compiled(x)
        dg.manual_seed(seed)
        with dg.set_grad_enabled(grad):
            assert_same(out, model(x))
        assert out.requires_grad == grad
        outs.append(out.detach().numpy().copy())
    assert not np.array_equal(outs[0], outs[1]) and np.array_equal(outs[0], outs[3])
    assert compiled.compile_stats.variants == 2 and compiled.compile_stats.hits == 2


def make_mlp(dg, seed=0):
    dg.manual_seed(seed)
    return dg.nn.Sequential(dg.nn.Linear(6, 16), dg.nn.ReLU(), dg.nn.Linear(16, 3))


@pytest.mark.parametrize("optimizer", ["SGD-momentum", "Adam"])
def test_training_with_an_optimizer(dg, optimizer):
    """A whole training step (zero_grad, forward, backward, step) verified at every call: the parameters follow
    eager mode bitwise."""
    make = {"SGD-momentum": lambda ps: dg.optim.SGD(ps, lr=0.1, momentum=0.9),
            "Adam": lambda ps: dg.optim.Adam(ps, lr=0.01)}[optimizer]
    model_c, model_e = make_mlp(dg), make_mlp(dg)
    opt_c, opt_e = make(model_c.parameters()), make(model_e.parameters())

    def step(model, opt, x, y):
        opt.zero_grad()
        loss = dg.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss
    compiled = verified(dg, step)
    rng = np.random.default_rng(1)
    with warnings.catch_warnings():
        warnings.simplefilter("error")              # no recompile_limit warning: the steps are hits
        for _ in range(10):
            x = rng.standard_normal((5, 6)).astype(np.float32)
            y = rng.integers(0, 3, 5)
            assert_same(compiled(model_c, opt_c, dg.tensor(x), dg.tensor(y)),
                        step(model_e, opt_e, dg.tensor(x), dg.tensor(y)))
    for p, q in zip(model_c.parameters(), model_e.parameters()):
        assert_same(p, q)
    stats = compiled.compile_stats
    assert stats.variants <= 3 and stats.hits >= 7 and stats.eager_calls == 0, stats.guard_misses


def test_a_model_changing_between_calls(dg):
    """A layer replaced, a parameter rebound, a layer added: the new tensors are not the recorded ones, so the
    call leaves its recording at the first op that reads them; results stay eager mode's."""
    model = make_mlp(dg)
    compiled = dg.compile(model, mode="verified")
    x = t(dg, np.ones((2, 6)))
    assert_same(compiled(x), model(x))
    assert_same(compiled(x), model(x))
    model[2] = dg.nn.Linear(16, 3)
    assert_same(compiled(x), model(x))
    model[0].weight = dg.nn.Parameter(model[0].weight.detach() * 2)
    assert_same(compiled(x), model(x))
    model.append(dg.nn.Tanh())
    assert_same(compiled(x), model(x))
    assert_same(compiled(x), model(x))
    stats = compiled.compile_stats
    assert stats.misses == 3 and stats.hits == 2 and stats.variants == 4
    assert "another tensor than the recorded one" in stats.guard_misses[0][0]


def test_limit_then_unrecorded_calls_with_one_warning(dg):
    def f(x):
        return x * int(x.sum())
    compiled = verified(dg, f, recompile_limit=3)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for k in range(6):
            x = t(dg, [float(k)])
            assert_same(compiled(x), f(x))
        assert_same(compiled(t(dg, [1.0])), f(t(dg, [1.0])))     # a recorded value still hits
    assert len([w for w in caught if "recompile_limit" in str(w.message)]) == 1
    stats = compiled.compile_stats
    assert (stats.variants, stats.eager_calls, stats.hits, stats.misses) == (3, 3, 1, 5)
    assert stats in dg.compiler.programs()
    d = stats.as_dict()
    assert d["mode"] == "verified" and d["hits"] == 1 and d["misses"] == 5


def test_hooks_and_custom_functions_run_eagerly(dg):
    class Square(dg.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x

        @staticmethod
        def backward(ctx, g):
            x, = ctx.saved_tensors
            return 2 * x * g

    def f(x):
        return Square.apply(x).sum()
    compiled = verified(dg, f)
    for v in (1.0, 2.0, 3.0):
        x = t(dg, [v], requires_grad=True)
        compiled(x).backward()
        assert x.grad.item() == 2 * v
    assert compiled.compile_stats.eager_calls == 2


def test_errors_propagate_and_the_next_call_is_clean(dg):
    def f(x, fail):
        y = x * 2
        if fail:
            raise ValueError("user error")
        return y + 1
    compiled = verified(dg, f)
    assert compiled(t(dg, [1.0]), False).item() == 3.0
    with pytest.raises(ValueError, match="user error"):
        compiled(t(dg, [1.0]), True)
    assert not dg.compiler.is_compiling()
    assert compiled(t(dg, [1.0]), False).item() == 3.0 and (t(dg, [1.0]) * 3).item() == 3.0


# ---- Note [Verified ops in the fast paths] (csrc/bindings/fast_paths.cpp): the comparison in C++ ----
def _capture_module(dg):
    import sys
    return sys.modules[dg.__name__ + "._api.capture"]


def _python_only(dg, monkeypatch):
    """The C++ engine with its C++ comparison switched off: the Python recorder compares every call."""
    capture = _capture_module(dg)
    monkeypatch.setattr(capture, "_VerifyCursor", None)
    monkeypatch.setattr(capture, "_VerifiedFunction", None)
    monkeypatch.setattr(capture, "_plan", [None, [], 0])      # wrappers made again, without the C++ ones


def _programs_to_compare(dg):
    """Programs that flip branches, change Python numbers (1 where 1.0 was recorded, NaN), read values and grad
    mode, nest calls inside an op (cross_entropy's target check runs Python) and train."""
    w = dg.tensor(np.array([[0.5, -1.0], [2.0, 0.25]], np.float32), requires_grad=True)

    def branchy(x, scale):
        y = (x * scale + 1).tanh()
        y = 2 - y * 3
        if y.sum() > 0:
            return (y @ w).relu().sum()
        return (y.exp() - x).sum()

    def values(x, scale):
        y = (x * scale).sum()
        n = int((x > 0).sum().item())              # a value guard: the loop count
        with dg.no_grad():
            z = x * 2
        for _ in range(n):
            y = y + z.sum() * scale
        if x.grad is None:
            y = y * 1.5
        return y

    model = dg.nn.Sequential(dg.nn.Linear(2, 4), dg.nn.ReLU(), dg.nn.Linear(4, 3))
    opt = dg.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)

    def train(x, scale):
        opt.zero_grad()
        loss = dg.nn.functional.cross_entropy(model(x) * scale, dg.tensor(np.array([0, 2], np.int64)))
        loss.backward()
        opt.step()
        return loss
    return {"branchy": branchy, "values": values, "train": train}


SCALES = (0.5, 0.5, -3.0, 0.5, 1, 1.0, float("nan"), float("nan"), 0.5, -3.0)


def _run(dg, fn, compiled):
    outs = []
    for i, scale in enumerate(SCALES):
        x = dg.tensor(np.array([[0.3, -0.2], [0.1, 0.4]], np.float32) * (1 + i % 3), requires_grad=True)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            out = (compiled or fn)(x, scale)
        outs.append(out.detach().numpy().copy())
    return outs


@pytest.mark.parametrize("name", ["branchy", "values", "train"])
def test_the_cpp_comparison_gives_the_python_hits_and_misses(cpp, monkeypatch, name):
    """Results, hits, misses and their reasons are the same with the comparison in C++ as with the Python recorder
    alone, and both results equal eager mode's; the C++ side matched most calls."""
    runs = []
    for python_only in (False, True):
        with monkeypatch.context() as m:
            if python_only:
                _python_only(cpp, m)
            cpp.manual_seed(0)
            fn = _programs_to_compare(cpp)[name]
            compiled = cpp.compile(fn, mode="verified")
            outs = _run(cpp, fn, compiled)
            cpp.manual_seed(0)
            fn_eager = _programs_to_compare(cpp)[name]
            for a, b in zip(outs, _run(cpp, fn_eager, None)):
                np.testing.assert_array_equal(a, b)
            s = compiled.compile_stats
            runs.append((outs, (s.calls, s.variants, s.hits, s.misses, s.eager_calls, list(s.guard_misses)),
                         s.matched_in_cpp))
    (outs_c, stats_c, matched_c), (outs_p, stats_p, matched_p) = runs
    for a, b in zip(outs_c, outs_p):
        np.testing.assert_array_equal(a, b)
    assert stats_c == stats_p
    assert matched_p == 0 and matched_c > 0
    assert stats_c[2] >= 3          # hits: the recordings are followed


def test_each_fast_path_matches_the_steps_its_python_definition_issues(cpp):
    """Note [Verified ops in the fast paths]: a fast path matches in C++ only the steps its Python definition issues
    (one op; scalar_operand then the op for a number). Each form, verified twice: the second call is a hit and every
    one of its calls was matched in C++ (a fast path that skipped or added a step would leave the recording)."""
    x = cpp.tensor(np.full((2, 2), 0.5, np.float32), requires_grad=True)
    y = cpp.tensor(np.full((2, 2), 0.25, np.float32), requires_grad=True)
    forms = {
        "x + y": lambda a, b: a + b, "x - y": lambda a, b: a - b, "x * y": lambda a, b: a * b,
        "x / y": lambda a, b: a / b, "x @ y": lambda a, b: a @ b, "x * 2.0": lambda a, b: a * 2.0,
        "x + 1": lambda a, b: a + 1, "x - 1.5": lambda a, b: a - 1.5, "x / 4": lambda a, b: a / 4,
        "2 * x": lambda a, b: 2 * a, "3 + x": lambda a, b: 3 + a, "2 - x": lambda a, b: 2 - a,
        "x.mul(y)": lambda a, b: a.mul(b), "x.mul(2.0)": lambda a, b: a.mul(2.0), "x.div(y)": lambda a, b: a.div(b),
        "x.matmul(y)": lambda a, b: a.matmul(b), "dg.mul(x, y)": lambda a, b: cpp.mul(a, b),
        "dg.matmul(x, y)": lambda a, b: cpp.matmul(a, b), "dg.maximum(x, y)": lambda a, b: cpp.maximum(a, b),
        "linear(x, y, b)": lambda a, b: cpp.nn.functional.linear(a, b, bias),
        "linear(x, y)": lambda a, b: cpp.nn.functional.linear(a, b),
        "linear(x, y, None)": lambda a, b: cpp.nn.functional.linear(a, b, None),
        "Linear module": lambda a, b: layer(a),
        "x.sum()": lambda a, b: a.sum(), "x.sum(0)": lambda a, b: a.sum(0),
        "x.sum(dim=1, keepdim=True)": lambda a, b: a.sum(dim=1, keepdim=True), "x.mean()": lambda a, b: a.mean(),
        "x.mean(1)": lambda a, b: a.mean(1), "dg.sum(x)": lambda a, b: cpp.sum(a),
        "dg.mean(x, 0)": lambda a, b: cpp.mean(a, 0), "x.sum(-1)": lambda a, b: a.sum(-1),
    }
    bias = cpp.tensor(np.array([0.5, -1.0], np.float32), requires_grad=True)
    layer = cpp.nn.Linear(2, 2)
    for name in cpp._C._fast_path_names():
        method = name.startswith("Tensor.")
        base = name[7:] if method else name
        try:
            cpp._C._VerifyTable([(getattr(cpp._C, base), base, [0], [None], 1, None, True, None)])
        except AttributeError:
            continue
        if cpp._C._VerifyTable([(getattr(cpp._C, base), base, [0], [None], 1, None, True, None)]).kinds() == [1]:
            forms[f"{name}()"] = (lambda n: (lambda a, b: getattr(a, n)()))(base) if method else \
                (lambda n: (lambda a, b: getattr(cpp, n)(a)))(base)
    assert len(forms) > 40
    for form, f in forms.items():
        compiled = cpp.compile(f, mode="verified")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            compiled(x, y)
            out = compiled(x, y)
        s = compiled.compile_stats
        assert (s.hits, s.misses) == (1, 0), (form, s.guard_misses)
        steps = list(compiled._program.groups.values())[0][0].steps
        assert s.matched_in_cpp == len(steps), (form, [st.name for st in steps])
        np.testing.assert_array_equal(out.detach().numpy(), f(x, y).detach().numpy())


def test_add_sub_and_atan2_functions_are_left_to_python(cpp):
    """dg.add, dg.sub and dg.atan2 (and their methods) issue result_type before the op; their fast paths match
    nothing in C++, so an `a + b` recorded where Python now calls dg.add(a, b) is a miss, as the Python recorder
    finds, and not a C++ match."""
    x = cpp.tensor(np.full((2,), 0.5, np.float32))
    flip = [False]

    def f(a):
        return cpp.add(a, a) if flip[0] else a + a
    compiled = cpp.compile(f, mode="verified")
    compiled(x), compiled(x)
    flip[0] = True
    compiled(x)
    s = compiled.compile_stats
    assert (s.hits, s.misses) == (1, 1)
    assert "issued result_type where the recording has add" in s.guard_misses[0][0]


def test_another_thread_is_not_matched_against_the_verified_call(cpp):
    """The cursor belongs to the thread of the verified call: another thread's ops run eagerly meanwhile."""
    import threading
    x = cpp.tensor(np.array([1.0, 2.0], np.float32))
    seen = []

    def other():
        seen.append((x * 3 + 1).numpy().copy())

    def f(a):
        th = threading.Thread(target=other)
        th.start()
        th.join()
        return (a * 2).tanh()
    compiled = cpp.compile(f, mode="verified")
    for _ in range(3):
        np.testing.assert_array_equal(compiled(x).numpy(), (x * 2).tanh().numpy())
    s = compiled.compile_stats
    assert (s.hits, s.misses) == (2, 0) and len(seen) == 3
    assert all(np.array_equal(v, np.array([4.0, 7.0], np.float32)) for v in seen)


@pytest.mark.parametrize("mode", ["verified", "reduce-overhead"])
def test_a_garbage_collection_inside_the_program_is_not_a_step(dg, mode):
    """dyngrad's gc callback frees cycles through C++ (_C._collect_cycles) when Python collects its oldest
    generation, which can happen in the middle of a recorded program. It was recorded as a step guarded by the
    number of objects freed, so the next call missed where nothing was collected (a hit or miss that depended on
    the gc's timing)."""
    import gc
    w = t(dg, np.ones((4, 3)), requires_grad=True)
    garbage = []

    def f(x):
        y = dg.nn.functional.linear(x, w)
        a = [y * 1.0]
        a.append(a)                     # a cycle through a tensor, for the collection to free
        garbage.append(gc.collect())
        return (y * 2).sum()
    compiled = dg.compile(f, mode=mode)
    x = t(dg, np.ones((2, 3)))
    for _ in range(3):
        assert_same(compiled(x), f(x))
    stats = compiled.compile_stats
    assert (stats.variants, stats.hits, stats.misses) == (1, 2, 0), stats.guard_misses
    steps = list(compiled._program.groups.values())[0][0].steps
    assert "_collect_cycles" not in [s.name for s in steps]


def test_a_c_function_replaced_between_calls_is_seen(dg, monkeypatch):
    """The recorder's swap of the _C surface is made once and reused (capture._swap_plan); a _C function replaced
    between calls (a monkeypatch) is found when the wrappers are put in place, and the new function is recorded.
    (softmax has no C++ fast path: eager mode calls _C.softmax too.)"""
    calls = []
    original = dg._C.softmax

    def counting(*args):
        calls.append(1)
        return original(*args)

    def f(x):
        return dg.softmax(x * 2.0, 0).sum()
    compiled = verified(dg, f)
    x = t(dg, [1.0, 2.0])
    compiled(x), compiled(x)
    monkeypatch.setattr(dg._C, "softmax", counting)
    for i in range(3):
        assert_same(compiled(x), f(x))
        assert len(calls) == 2 * (i + 1)      # the verified call and the eager one ran the new function
    monkeypatch.undo()
    assert_same(compiled(x), f(x))
    assert len(calls) == 6
    stats = compiled.compile_stats
    assert (stats.variants, stats.misses, stats.hits) == (2, 1, 4), stats.guard_misses
    assert "the program issued softmax where the recording has softmax" in stats.guard_misses[0][0]


def test_the_recorded_surface_stays_in_place(dg):
    """Note [The recorded surface stays in place] (capture.py): on the C++ engine the stand-ins stay in _C and on
    Tensor after a recording, pass eager calls straight to their functions (no recorder sees them), and show their
    functions' names and docs; taken out, the next recording puts them back, and every result is eager mode's."""
    capture = _capture_module(dg)
    if not capture._stays_in_place():
        pytest.skip("the reference engine swaps the surface per recording")
    a = t(dg, [0.5, -1.0], requires_grad=True)

    def f(x):
        y = dg.softmax(x * a, 0)
        return y.sum() + y[0].detach().item()
    compiled = verified(dg, f)
    x = t(dg, [0.3, 0.2])
    original = capture._C_BINDINGS["softmax"]
    for _ in range(2):
        assert_same(compiled(x), f(x))
        stand_in = dg._C.softmax
        assert type(stand_in).__name__ == "_VerifiedFunction" and stand_in.__wrapped__ is original
        assert stand_in.__doc__ == original.__doc__ and stand_in.__name__ == "softmax"
        assert pickle.loads(pickle.dumps(stand_in)) is stand_in    # by its qualified name, as the binding is
        assert type(dg._C.Tensor.__dict__["item"]).__name__ == "_VerifiedMethod"
        assert x.item.__self__ is x and dg._C.Tensor.item(t(dg, [2.5])) == 2.5
        assert capture._active[0] is None and capture._in_place()
        assert_same(dg.softmax(x, 0), original(x, 0))            # eager: straight to the binding
        capture._take_out_of_place()
        assert dg._C.softmax is original and not capture._in_place()
    assert_same(compiled(x), f(x))
    stats = compiled.compile_stats
    assert (stats.variants, stats.hits, stats.misses) == (1, 2, 0), stats.guard_misses
    assert stats.matched_in_cpp > 0


def test_verified_entry_keys_compared_in_place(dg, monkeypatch):
    """Note [Verified entry keys compared in place] (capture.py): a call with the last call's arguments (the same
    shapes, dtypes, requires_grad and Python values) builds no entry key on the C++ engine; another Python number
    builds the key, which is still the verified one (no new entry), and another shape is a new entry."""
    import sys
    compiling = sys.modules[dg.__name__ + "._api.compiling"]
    built = []
    entry_key = compiling.entry_key
    monkeypatch.setattr(compiling, "entry_key", lambda *a, **k: built.append(1) or entry_key(*a, **k))

    def f(x, n):
        return (x * n).sum()
    compiled = verified(dg, f)
    x = t(dg, [1.0, 2.0])
    for n in (2.0, 2.0, 2.0, 3.0, 3.0):
        assert_same(compiled(x, n), f(x, n))
    in_place = hasattr(dg._C, "_entry_key_matches")
    assert len(built) == (2 if in_place else 5)
    assert_same(compiled(t(dg, [1.0, 2.0, 3.0]), 3.0), f(t(dg, [1.0, 2.0, 3.0]), 3.0))
    stats = compiled.compile_stats
    assert (stats.variants, stats.hits, stats.misses) == (3, 3, 2), stats.guard_misses  # the shape: a key miss
    assert "scalar_operand with argument 0 = 3.0 where the recording has 2.0" in stats.guard_misses[0][0]


def test_verified_calls_leave_no_recorder_alive(dg):
    """The C++ cursor held the recorder's bound method and the recorder held the cursor: a cycle through a C++
    object that Python's gc cannot collect, which kept every verified call's recorder and slot map alive."""
    import gc
    capture = _capture_module(dg)
    a = t(dg, [0.5], requires_grad=True)

    def f(x):
        return (x * a).tanh().sum()
    compiled = verified(dg, f)
    for _ in range(4):
        compiled(t(dg, [0.3]))
    gc.collect()
    assert [o for o in gc.get_objects() if type(o) is capture.Recorder] == []
    assert compiled.compile_stats.hits == 3
