"""Static replay of one-element programs on floats (Note [Scalar replay] in csrc/bindings/capture_bind.cpp, Note
[One-element kernels] in csrc/dyngrad/kernels/elementwise.cpp), on both engines: every output and .grad is compared
with eager mode's, bitwise, over many calls and values; programs it does not cover (broadcasting, another dtype, an
op it lacks, a value guard, a given root gradient) run as before. The reference engine has no scalar replay: the
same programs give the same results there."""
import numpy as np
import pytest

from helpers import assert_bitwise_equal as assert_same


def natives(compiled):
    return [v.native() for group in compiled._program.groups.values() for v in group]


def scalar_runs(compiled):
    return sum(getattr(n, "scalar_runs", 0) for n in natives(compiled) if n is not None)


def has_scalar(dg):
    return hasattr(dg._C, "_ReplayProgram") and hasattr(dg._C._ReplayProgram, "scalar_runs")


def leaf(dg, value, shape=(1,), dtype=np.float32):
    return dg.tensor(np.full(shape, value, dtype), requires_grad=True)


OPS = {
    "mul-add-tanh": lambda y, a, b: (y * a + b).tanh(),
    "sub-sigmoid": lambda y, a, b: (y - b).sigmoid() * a,
    "exp-neg-sub": lambda y, a, b: (-(y * a) - b).exp() * b,
    "mixed": lambda y, a, b: (((y * y - a) * b).tanh() + (y * b).sigmoid()).tanh(),
    "div-relu": lambda y, a, b: (((y - b).relu() + (y / a).tanh()) / b).tanh(),
}


def program(dg, a, b, body, rounds, shape=(1,)):
    def f(x):
        y = x
        for _ in range(rounds):
            y = body(y, a, b)
        y.sum().backward()
        return y
    return f


def compare(dg, body, rounds=12, shape=(1,), calls=None, values=None, expect_scalar=True):
    rng = np.random.default_rng(7)
    a0, b0 = rng.standard_normal(2).astype(np.float32)
    ac, bc, ae, be = leaf(dg, a0, shape), leaf(dg, b0, shape), leaf(dg, a0, shape), leaf(dg, b0, shape)
    compiled = dg.compile(program(dg, ac, bc, body, rounds), mode="reduce-overhead")
    eager = program(dg, ae, be, body, rounds)
    values = values if values is not None else rng.standard_normal(calls or 40).astype(np.float32) * 2
    for v in values:
        xc, xe = dg.tensor(np.full(shape, v, np.float32)), dg.tensor(np.full(shape, v, np.float32))
        out_c, out_e = compiled(xc), eager(xe)
        assert_same(out_c, out_e)
        assert out_c.requires_grad == out_e.requires_grad
        assert out_c.grad_fn.name() == out_e.grad_fn.name()
        for p, q in ((ac, ae), (bc, be)):
            assert_same(p.grad, q.grad)
    if has_scalar(dg):
        assert (scalar_runs(compiled) > 0) == expect_scalar
    return compiled, (ac, bc), (ae, be)


@pytest.mark.parametrize("name", list(OPS))
def test_one_element_programs_match_eager_bitwise(dg, name):
    """Outputs and accumulated .grad equal eager mode's bits at every call (40 values, 12 rounds of each body)."""
    compiled, _, _ = compare(dg, OPS[name])
    if has_scalar(dg):
        assert scalar_runs(compiled) == 38   # the first call records, the second plans and learns the shapes


def test_special_values_match_eager(dg):
    """Signed zeros, infinities, NaN and huge values through tanh, exp and sigmoid: the kernels' bits."""
    specials = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e30, -1e30, 1e-40, 88.7, -88.7], np.float32)
    compare(dg, OPS["mixed"], rounds=3, values=np.concatenate([specials, specials]))
    compare(dg, OPS["exp-neg-sub"], rounds=3, values=np.concatenate([specials, specials]))
    compare(dg, OPS["div-relu"], rounds=3, values=np.concatenate([specials, specials]))


def test_zero_dim_and_2d_elements(dg):
    compare(dg, OPS["mul-add-tanh"], shape=(), calls=6)
    compare(dg, OPS["mul-add-tanh"], shape=(1, 1), calls=6)


def test_user_holds_outputs_across_calls(dg):
    """Each call returns a fresh tensor: outputs kept in a Python list are not overwritten by later calls."""
    a, b = leaf(dg, 0.5), leaf(dg, 0.1)
    compiled = dg.compile(program(dg, a, b, OPS["mul-add-tanh"], 5), mode="reduce-overhead")
    kept = [compiled(dg.tensor(np.array([v], np.float32))) for v in (0.1, 0.2, 0.3, 0.4, 0.5)]
    again = [program(dg, leaf(dg, 0.5), leaf(dg, 0.1), OPS["mul-add-tanh"], 5)(dg.tensor(np.array([v], np.float32)))
             for v in (0.1, 0.2, 0.3, 0.4, 0.5)]
    for k, e in zip(kept, again):
        assert_same(k, e)
    assert len({id(k) for k in kept}) == 5
    if has_scalar(dg):
        assert scalar_runs(compiled) == 3


def test_grad_held_and_zeroed_between_calls(dg):
    """A .grad the user holds is accumulated into in place, as eagerly; a .grad set to None starts afresh."""
    for compiled_mode in (True, False):
        a, b = leaf(dg, 0.5), leaf(dg, 0.1)
        f = program(dg, a, b, OPS["mul-add-tanh"], 4)
        g = dg.compile(f, mode="reduce-overhead") if compiled_mode else f
        held = []
        for i in range(6):
            g(dg.tensor(np.array([0.3 + i], np.float32)))
            held.append(a.grad)
            if i == 3:
                a.grad = None
        if compiled_mode:
            got = [h.detach().numpy().copy() for h in held]
            ids = [id(h) for h in held]
        else:
            want = [h.detach().numpy().copy() for h in held]
            want_ids = [id(h) for h in held]
    assert all(np.array_equal(x, y) for x, y in zip(got, want))
    assert [i == ids[0] for i in ids] == [i == want_ids[0] for i in want_ids]


def test_external_changed_between_calls_is_read(dg):
    """A closed-over leaf written in place between calls is read again (no constant folded into the floats)."""
    ac, bc, ae, be = leaf(dg, 0.5), leaf(dg, 0.1), leaf(dg, 0.5), leaf(dg, 0.1)
    compiled = dg.compile(program(dg, ac, bc, OPS["mul-add-tanh"], 6), mode="reduce-overhead")
    eager = program(dg, ae, be, OPS["mul-add-tanh"], 6)
    for i in range(6):
        with dg.no_grad():
            for p in (ac, ae):
                p.mul_(0.9)
        assert_same(compiled(dg.tensor(np.array([0.2], np.float32))), eager(dg.tensor(np.array([0.2], np.float32))))
        assert_same(ac.grad, ae.grad)
        assert_same(bc.grad, be.grad)
    if has_scalar(dg):
        assert scalar_runs(compiled) == 4


def test_not_covered_runs_as_before(dg):
    """Broadcasting, float64, an op outside the set, a requires_grad flip: same results, no scalar run."""
    compare(dg, lambda y, a, b: (y * a + b).tanh(), shape=(2,), calls=5, expect_scalar=False)
    compare(dg, lambda y, a, b: (y * a + b).sin() * a, calls=5, expect_scalar=False)

    a64, b64 = leaf(dg, 0.5, dtype=np.float64), leaf(dg, 0.1, dtype=np.float64)
    c = dg.compile(program(dg, a64, b64, OPS["mul-add-tanh"], 3), mode="reduce-overhead")
    for v in (0.1, 0.2, 0.3, 0.4):
        c(dg.tensor(np.array([v], np.float64)))
    if has_scalar(dg):
        assert scalar_runs(c) == 0

    # the leaf stops requiring grad: the planned backward (and so the scalar program) is not taken
    a, b, ae, be = leaf(dg, 0.5), leaf(dg, 0.1), leaf(dg, 0.5), leaf(dg, 0.1)
    compiled = dg.compile(program(dg, a, b, OPS["mul-add-tanh"], 3), mode="reduce-overhead")
    eager = program(dg, ae, be, OPS["mul-add-tanh"], 3)
    for i in range(5):
        if i == 3:
            a.requires_grad_(False)
            ae.requires_grad_(False)
        assert_same(compiled(dg.tensor(np.array([0.2], np.float32))), eager(dg.tensor(np.array([0.2], np.float32))))
        assert_same(b.grad, be.grad)
    if has_scalar(dg):
        assert scalar_runs(compiled) == 1


def test_turned_off(dg, monkeypatch):
    from dyngrad._api import capture
    if not has_scalar(dg):
        pytest.skip("the reference engine has no scalar replay")
    monkeypatch.setattr(capture, "SCALAR_REPLAY", False)
    compiled, _, _ = compare(dg, OPS["mul-add-tanh"], calls=5, expect_scalar=False)
    assert scalar_runs(compiled) == 0


def test_second_backward_through_output_raises(dg):
    a, b = leaf(dg, 0.5), leaf(dg, 0.1)
    compiled = dg.compile(program(dg, a, b, OPS["mul-add-tanh"], 3), mode="reduce-overhead")
    for v in (0.1, 0.2, 0.3):
        out = compiled(dg.tensor(np.array([v], np.float32)))
    with pytest.raises(RuntimeError, match="already freed"):
        (out * 2).sum().backward()


# ---- Note [Target checks in the loop] (csrc/bindings/capture_bind.cpp): cross_entropy's target check, in C++ ----

def _ce_step(dg, ignore_index=-100):
    dg.manual_seed(0)
    model = dg.nn.Linear(4, 3)

    def step(x, y):
        model.zero_grad()
        loss = dg.nn.functional.cross_entropy(model(x), y, ignore_index=ignore_index)
        loss.backward()
        return loss
    return model, step


@pytest.mark.parametrize("ignore_index", [-100, 1])
def test_target_check_replayed_raises_as_eagerly(dg, ignore_index):
    """Targets in range (and ignore_index) pass in the loop; one out of range raises eager mode's IndexError."""
    model_c, step_c = _ce_step(dg, ignore_index)
    model_e, step_e = _ce_step(dg, ignore_index)
    compiled = dg.compile(step_c, mode="reduce-overhead")
    rng = np.random.default_rng(1)
    x = rng.standard_normal((5, 4)).astype(np.float32)
    for _ in range(4):
        y = rng.integers(0, 3, 5)
        assert_same(compiled(dg.tensor(x), dg.tensor(y)), step_e(dg.tensor(x), dg.tensor(y)))
        for p, q in zip(model_c.parameters(), model_e.parameters()):
            assert_same(p.grad, q.grad)
    if hasattr(dg._C._ReplayProgram, "set_target_range_check"):
        assert [n.target_checks for n in natives(compiled) if n is not None] in ([1], [1, 1])   # one per variant
    for bad in ([0, 1, 2, 3, 0], [0, -1, 2, 0, 0], [0, 1, 2, 0, 2 ** 40]):
        errors = []
        for fn in (compiled, step_e):
            with pytest.raises(IndexError) as info:
                fn(dg.tensor(x), dg.tensor(np.array(bad, np.int64)))
            errors.append(str(info.value))
        assert errors[0] == errors[1]
    y = np.array([ignore_index, 0, 1, 2, 0], np.int64) if ignore_index >= 0 else np.array([-100, 0, 1, 2, 0])
    assert_same(compiled(dg.tensor(x), dg.tensor(y)), step_e(dg.tensor(x), dg.tensor(y)))


# ---- Note [Entry guards compared in place] (csrc/bindings/capture_bind.cpp) ----

def test_in_place_comparison_reads_outside_tensors_and_leaves_autocast_to_the_built_key(dg):
    """A closed-over or global tensor is guarded by identity, shape and dtype (Note [State outside the arguments]):
    the in-place comparison reads them as the built key does; an autocast region (Note [Autocast under compile])
    it leaves to the built key."""
    from dyngrad._api import compiling
    if not hasattr(dg._C, "_entry_key_matches"):
        pytest.skip("the reference engine builds the key at every call")
    global OFFSET
    OFFSET = dg.zeros(1)
    w = dg.ones(3)

    def f(x):
        return (x * w + OFFSET).sum()
    compiled = dg.compile(f, mode="reduce-overhead")
    x = dg.arange(3.0)
    for _ in range(2):
        assert compiled(x).item() == 3.0
    prog = compiled._program

    def agrees():
        fast = compiling.same_entry_key(prog, prog.last_key, (x,), {})
        built, tensors = compiling.entry_key(prog, (x,), {})
        assert (fast is not None) == (built == prog.last_key)
        return fast is not None
    assert agrees()
    kept = w
    w = dg.full((3,), 2.0)                          # rebound: the comparison says no, the result is eager's
    assert not agrees()
    assert compiled(x).item() == 6.0 and agrees()
    w = dg.full((4,), 2.0)[:3]                      # another tensor again
    assert not agrees()
    w = kept
    OFFSET = dg.full((1,), 2.0)                     # a global the code names
    assert not agrees()
    assert compiled(x).item() == 9.0 and agrees()
    OFFSET = dg.ones(1)
    with dg.autocast("cpu", dtype=dg.bfloat16):
        assert compiling.same_entry_key(prog, prog.last_key, (x,), {}) is None


OFFSET = None


def test_entry_key_compared_in_place_agrees_with_the_built_key(dg):
    """For each change of guarded state, the in-place comparison with the last key says 'same' exactly when the
    built key equals it; the program then records or replays as with the built key (results equal eager mode's)."""
    from dyngrad._api import compiling
    if not hasattr(dg._C, "_entry_key_matches"):
        pytest.skip("the reference engine builds the key at every call")
    dg.manual_seed(0)
    model = dg.nn.Sequential(dg.nn.Linear(3, 4), dg.nn.ReLU(), dg.nn.Linear(4, 2))
    opt = dg.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)

    def step(x, y, scale=1.0, extra=None):
        opt.zero_grad()
        loss = dg.nn.functional.cross_entropy(model(x) * scale, y)
        loss.backward()
        opt.step()
        return loss
    compiled = dg.compile(step, mode="reduce-overhead")
    rng = np.random.default_rng(0)
    x = dg.tensor(rng.standard_normal((5, 3)).astype(np.float32))
    y = dg.tensor(rng.integers(0, 2, 5))
    for _ in range(3):
        compiled(x, y)
    prog = compiled._program

    def agrees(*args, **kwargs):
        key = prog.last_key
        fast = compiling.same_entry_key(prog, key, args, kwargs)
        built, tensors = compiling.entry_key(prog, args, kwargs)
        assert (fast is not None) == (built == key)
        if fast is not None:
            assert fast == tensors
        return fast is not None

    assert agrees(x, y)
    assert agrees(dg.tensor(rng.standard_normal((5, 3)).astype(np.float32)), y)   # new values, same guards
    assert not agrees(dg.tensor(rng.standard_normal((6, 3)).astype(np.float32)), y)  # a shape
    assert not agrees(x.double(), y)                                                  # a dtype
    assert not agrees(x.t().contiguous().t(), y)                                      # strides
    assert not agrees(x.detach().requires_grad_(), y)                                 # requires_grad
    assert not agrees(x, x)                                                           # aliasing / dtype
    assert not agrees(x, y, 2.0)                                                      # structure
    assert not agrees(x, y, scale=1.0)                                                # kwargs
    assert not agrees((x,), y)
    model.eval()
    assert not agrees(x, y)
    model.train()
    assert agrees(x, y)
    opt.param_groups[0]["lr"] = 0.05
    assert not agrees(x, y)
    opt.param_groups[0]["lr"] = 0.1
    assert agrees(x, y)
    old = model[0].bias
    model[0].bias = dg.nn.Parameter(old.detach().clone())
    assert not agrees(x, y)
    model[0].bias = old
    assert agrees(x, y)
    model[2].weight.requires_grad_(False)
    assert not agrees(x, y)
    model[2].weight.requires_grad_(True)
    model.add_module("extra", dg.nn.ReLU())
    assert not agrees(x, y)
    del model._modules["extra"]
    assert agrees(x, y)
    with dg.no_grad():
        assert not agrees(x, y)
    old_dtype = dg.get_default_dtype()
    dg.set_default_dtype(dg.float64)
    try:
        assert not agrees(x, y)
    finally:
        dg.set_default_dtype(old_dtype)
    assert agrees(x, y)
    # compared with eager mode through every change: the replay takes the same variants as with the built key
    dg.manual_seed(0)
    model_e = dg.nn.Sequential(dg.nn.Linear(3, 4), dg.nn.ReLU(), dg.nn.Linear(4, 2))
    for p, q in zip(model.parameters(), model_e.parameters()):
        with dg.no_grad():
            q.copy_(p)
    opt_e = dg.optim.SGD(model_e.parameters(), lr=0.1, momentum=0.9)
    opt_e.load_state_dict(opt.state_dict()) if hasattr(opt_e, "load_state_dict") else None

    def step_e(x, y, scale=1.0, extra=None):
        opt_e.zero_grad()
        loss = dg.nn.functional.cross_entropy(model_e(x) * scale, y)
        loss.backward()
        opt_e.step()
        return loss
    for i in range(8):
        for m in (model, model_e):
            m.train(i % 3 != 2)
        for o in (opt, opt_e):
            o.param_groups[0]["lr"] = 0.1 if i < 5 else 0.01
        assert_same(compiled(x, y), step_e(x, y))
        for p, q in zip(model.parameters(), model_e.parameters()):
            assert_same(p, q)


_GLOBAL_MODEL = None


def test_reachable_in_cpp_agrees_with_python(dg):
    """_C._reachable (the in-place guard's walk) finds what compiling._reachable finds: closure cells, the globals
    the code names, a bound method's self, the owner."""
    from dyngrad._api import compiling
    if not hasattr(dg._C, "_reachable"):
        pytest.skip("the reference engine has no C++ walk")
    global _GLOBAL_MODEL
    model = dg.nn.Linear(2, 2)
    _GLOBAL_MODEL = dg.nn.ReLU()
    opt = dg.optim.SGD(model.parameters(), lr=0.1)
    unused = 3

    def f(x):
        opt.zero_grad()
        return _GLOBAL_MODEL(model(x)) * unused

    def g(x):
        return x

    class Holder(dg.nn.Module):
        def forward(self, x):
            return model(x)
    h = Holder()
    cases = [(f, None), (g, None), (h.forward, None), (h, h), (f, model), (lambda x: _GLOBAL_MODEL(x), None)]
    for fn, owner in cases:
        assert [id(o) for o in dg._C._reachable(fn, owner)] == [id(o) for o in compiling._reachable(fn, owner)]
    _GLOBAL_MODEL = None
    assert [id(o) for o in dg._C._reachable(f, None)] == [id(o) for o in compiling._reachable(f, None)]


def test_compiled_program_inside_a_recording_or_an_eager_run(dg):
    """A compiled program called while another records (or runs eagerly in its fallback) runs as plain Python and
    is part of that program: the call path's cheap check of 'no thread records' must not skip this."""
    a = leaf(dg, 0.5)
    inner = dg.compile(lambda y: (y * a).tanh(), mode="reduce-overhead")

    def outer_fn(x):
        y = inner(x) + 1.0
        y.sum().backward()
        return y
    outer = dg.compile(outer_fn, mode="reduce-overhead")
    ae = leaf(dg, 0.5)

    def eager_fn(x):
        y = (x * ae).tanh() + 1.0
        y.sum().backward()
        return y
    for v in (0.1, 0.2, 0.3, 0.4):
        assert_same(outer(dg.tensor(np.array([v], np.float32))), eager_fn(dg.tensor(np.array([v], np.float32))))
        assert_same(a.grad, ae.grad)
    assert inner.compile_stats.replays == 0          # only ever called inside the outer program's recording
    assert outer.compile_stats.replays == 3
    # a call of the inner program on its own afterwards records and replays it as usual
    for v in (0.5, 0.6, 0.7):
        assert_same(inner(dg.tensor(np.array([v], np.float32))), (dg.tensor(np.array([v], np.float32)) * a).tanh())
    assert inner.compile_stats.replays == 2


@pytest.mark.parametrize("kwargs", [{}, {"label_smoothing": 0.1, "reduction": "sum", "ignore_index": 1},
                                    {"reduction": "none"}])
def test_cross_entropy_and_grad_mode_steps_in_the_loop(dg, kwargs):
    """Note [Grad mode steps in the loop]: cross_entropy's core call with its constants, is_grad_enabled and
    _set_grad_enabled (an optimiser step's no_grad) in the loop: eager mode's results, bitwise."""
    def build():
        dg.manual_seed(5)
        model = dg.nn.Sequential(dg.nn.Linear(4, 6), dg.nn.Tanh(), dg.nn.Linear(6, 3))
        opt = dg.optim.SGD(model.parameters(), lr=0.05, momentum=0.5)

        def step(x, y):
            opt.zero_grad()
            loss = dg.nn.functional.cross_entropy(model(x), y, **kwargs)
            loss.sum().backward()
            opt.step()
            return loss
        return model, step
    (mc, sc), (me, se) = build(), build()
    compiled = dg.compile(sc, mode="reduce-overhead")
    rng = np.random.default_rng(2)
    for _ in range(6):
        x, y = rng.standard_normal((7, 4)).astype(np.float32), rng.integers(0, 3, 7)
        assert_same(compiled(dg.tensor(x), dg.tensor(y)), se(dg.tensor(x), dg.tensor(y)))
        for p, q in zip(mc.parameters(), me.parameters()):
            assert_same(p, q)
            assert_same(p.grad, q.grad)
    assert compiled.compile_stats.replays >= 4
    assert dg.is_grad_enabled()
    if hasattr(dg._C._ReplayProgram, "direct_steps"):   # cross_entropy, is_grad_enabled, two _set_grad_enabled
        assert [n.direct_steps for n in natives(compiled) if n is not None][0] == 4


def _forward_program(a, b, rounds=8):
    def f(x):
        y = x
        for _ in range(rounds):
            y = (y * a + b).tanh() / (b - a)
        return y.sum()
    return f


@pytest.mark.parametrize("case", ["no grad anywhere", "under no_grad", "inputs require grad"])
def test_forward_only_one_element_programs(dg, case):
    """A program without a backward runs on floats where eager mode's outputs would have no history: no input
    requires grad, or grad mode is off. Where an input requires grad its outputs have a grad_fn: not on floats."""
    requires = case != "no grad anywhere"
    rng = np.random.default_rng(3)
    a0, b0 = rng.standard_normal(2).astype(np.float32)
    ac, bc = leaf(dg, a0).requires_grad_(requires), leaf(dg, b0).requires_grad_(requires)
    ae, be = leaf(dg, a0).requires_grad_(requires), leaf(dg, b0).requires_grad_(requires)
    compiled, eager = dg.compile(_forward_program(ac, bc), mode="reduce-overhead"), _forward_program(ae, be)
    for v in rng.standard_normal(8).astype(np.float32):
        xc, xe = dg.tensor(np.array([v], np.float32)), dg.tensor(np.array([v], np.float32))
        if case == "under no_grad":
            with dg.no_grad():
                out_c, out_e = compiled(xc), eager(xe)
        else:
            out_c, out_e = compiled(xc), eager(xe)
        assert_same(out_c, out_e)
        assert out_c.requires_grad == out_e.requires_grad
        assert (out_c.grad_fn is None) == (out_e.grad_fn is None)
    if case == "inputs require grad":
        out_c.backward()
        out_e.backward()
        assert_same(ac.grad, ae.grad)
    if has_scalar(dg):
        assert (scalar_runs(compiled) > 0) == (case != "inputs require grad")
