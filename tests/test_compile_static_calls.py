"""Static replay's call path (Note [A static call in one C++ call] and Note [Module state compared in place] in
csrc/bindings/capture_bind.cpp), on both engines: every result equal to eager mode's, bitwise, through key changes,
value-guard misses, errors inside the replay, outputs that are not one tensor; the in-place module comparison says
'same' exactly when the built key is the same. The reference engine has neither (its calls take the general path):
the same programs give the same results there."""
import numpy as np
import pytest

from helpers import assert_bitwise_equal as assert_same


def has_fast(dg):
    return hasattr(dg._C, "_ReplayProgram") and hasattr(dg._C._ReplayProgram, "call")


def twins(dg, seed=0):
    """Two equal models and SGD optimisers (one compiled, one eager)."""
    def one():
        dg.manual_seed(seed)
        model = dg.nn.Sequential(dg.nn.Linear(3, 4), dg.nn.BatchNorm1d(4), dg.nn.ReLU(), dg.nn.Linear(4, 2))
        opt = dg.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)

        def step(x, y):       # model and opt closed over: reachable, so guarded (defaults would not be)
            opt.zero_grad()
            loss = dg.nn.functional.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            return loss
        return model, opt, step
    return [one(), one()]


def data(dg, n=5, seed=0):
    rng = np.random.default_rng(seed)
    return (dg.tensor(rng.standard_normal((n, 3)).astype(np.float32)), dg.tensor(rng.integers(0, 2, n)))


def same_params(a, b):
    for p, q in zip(a.parameters(), b.parameters()):
        assert_same(p, q)
    for p, q in zip(a.buffers(), b.buffers()):
        assert_same(p, q)


def test_fast_calls_follow_every_change_of_guarded_state(dg):
    """After the first replays a call goes through the one C++ call; training flips, a new learning rate, a
    parameter replaced or frozen, a new batch size leave it for the general path, which replays or records as
    before: losses, parameters and running statistics equal eager mode's at every call."""
    (model, opt, step), (model_e, opt_e, step_e) = twins(dg)
    compiled = dg.compile(step, mode="reduce-overhead")
    x, y = data(dg)
    x6, y6 = data(dg, 6, 1)
    fast_calls = 0
    for i in range(14):
        for m in (model, model_e):
            m.train(i % 4 != 3)
        for o in (opt, opt_e):
            o.param_groups[0]["lr"] = 0.1 if i < 8 else 0.02
        if i == 10:
            for m in (model, model_e):
                m[3].bias.requires_grad_(False)
        args = (x6, y6) if i in (5, 6) else (x, y)
        assert_same(compiled(*args), step_e(*args))
        same_params(model, model_e)
        fast_calls += compiled._program.fast is not None
    if has_fast(dg):
        assert fast_calls >= 6       # the calls that repeat the last one's key
    else:
        assert compiled._program.fast is None


def test_fast_call_moves_to_a_sibling_on_a_value_miss(dg):
    """A value that flows into Python (`bool(s > 0)` in an `if`) picks the branch; through the one C++ call a miss
    moves to the sibling variant, or records it, as the general path does."""
    w = dg.tensor(np.array([0.5, -1.0, 2.0], np.float32), requires_grad=True)

    def f(x):
        s = (x * w).sum()
        if s > 0:                # bool(tensor): the guard is the bool
            out = (s * 2).tanh()
        else:
            out = (s - 1).exp()
        out.backward()
        return out
    compiled = dg.compile(f, mode="reduce-overhead")
    w_e = dg.tensor(w.detach().numpy().copy(), requires_grad=True)

    def f_e(x):
        s = (x * w_e).sum()
        out = (s * 2).tanh() if s.item() > 0 else (s - 1).exp()
        out.backward()
        return out
    signs = [1, 1, 1, -1, -1, 1, -1, 1, 1, -1, -1, -1]
    for i, sign in enumerate(signs):
        x = dg.tensor(np.array([sign, 0.1 * i, sign * 0.3], np.float32))
        assert_same(compiled(x), f_e(x))
        assert_same(w.grad, w_e.grad)
    assert compiled.compile_stats.variants == 2


def test_fast_call_that_raises_leaves_the_program_usable(dg):
    """A target out of range raises cross_entropy's error inside the replay (the loop's own target check); the
    program's lock is released and the next call replays as before."""
    (model, opt, step), (model_e, opt_e, step_e) = twins(dg)
    compiled = dg.compile(step, mode="reduce-overhead")
    x, y = data(dg)
    for _ in range(3):
        assert_same(compiled(x, y), step_e(x, y))
    bad = dg.tensor(np.array([0, 1, 7, 0, 1]))
    with pytest.raises(Exception) as compiled_error:
        compiled(x, bad)
    with pytest.raises(Exception) as eager_error:
        step_e(x, bad)
    assert type(compiled_error.value) is type(eager_error.value)
    for _ in range(3):
        assert_same(compiled(x, y), step_e(x, y))
        same_params(model, model_e)


def test_fast_call_outputs_that_are_not_one_tensor(dg):
    """A tuple and a dict of results (and an argument returned as it is) come out of the one C++ call as the
    general path decodes them."""
    a = dg.tensor(np.array([0.5, 2.0], np.float32))

    def f(x, y):
        u = x * a + y
        return {"u": u, "pair": (u.sum(), x), "n": 3}
    compiled = dg.compile(f, mode="reduce-overhead")
    for i in range(5):
        x = dg.tensor(np.array([i, -i], np.float32))
        y = dg.tensor(np.array([1.0, 0.25 * i], np.float32))
        got, want = compiled(x, y), f(x, y)
        assert set(got) == set(want) and got["n"] == 3
        assert_same(got["u"], want["u"])
        assert_same(got["pair"][0], want["pair"][0])
        assert got["pair"][1] is x


def test_module_state_compared_in_place_agrees_with_the_built_state(dg):
    """For each change of a module's guarded state (a buffer rebound, `.data` of another shape or dtype, a plain
    attribute, a hook, a parameter of a Tensor subclass with its own property), the in-place comparison says
    'same' exactly when the built key equals the recorded one, with the module state compared in place and by
    building it."""
    from dyngrad._api import compiling
    if not hasattr(dg._C, "_ReplayProgram") or not hasattr(dg._C._ReplayProgram, "set_module_state_in_place"):
        pytest.skip("the reference engine builds the key at every call")
    (model, opt, step), _ = twins(dg)
    compiled = dg.compile(step, mode="reduce-overhead")
    x, y = data(dg)
    for _ in range(3):
        compiled(x, y)
    prog = compiled._program
    key = prog.last_key

    def agrees():
        answers = []
        for in_place in (True, False):
            dg._C._ReplayProgram.set_module_state_in_place(in_place)
            try:
                answers.append(compiling.same_entry_key(prog, key, (x, y), {}) is not None)
            finally:
                dg._C._ReplayProgram.set_module_state_in_place(True)
        built, _ = compiling.entry_key(prog, (x, y), {})
        assert answers == [built == key] * 2
        return answers[0]
    assert agrees()
    bn = model[1]
    kept = bn.running_mean
    bn.running_mean = dg.zeros(4)                       # a buffer rebound
    assert not agrees()
    bn.running_mean = kept
    assert agrees()
    weight = model[0].weight
    old = weight.data
    weight.data = dg.zeros((4, 2))                      # same parameter, another shape
    assert not agrees()
    weight.data = old.double()                          # another dtype
    assert not agrees()
    weight.data = old
    assert agrees()
    model[2].inplace = True                             # a plain attribute
    assert not agrees()
    model[2].inplace = False
    assert agrees()
    model[3].note = "x"                                 # a new plain attribute
    assert not agrees()
    del model[3].note
    assert agrees()
    handle = model[0].register_forward_hook(lambda m, i, o: None)
    assert not agrees()
    handle.remove()
    assert agrees()

    class Shaped(dg.nn.Parameter):                      # a property of its own: read through the attribute
        @property
        def shape(self):
            return (99,)
    bias = model[3].bias
    model[3].bias = Shaped(bias.detach())
    assert not agrees()
    model[3].bias = bias
    assert agrees()
    # a property given to the Parameter class after the comparison has read its parameters as plain ones
    dg.nn.Parameter.dtype = property(lambda self: "another")
    try:
        assert not agrees()
    finally:
        del dg.nn.Parameter.dtype
    assert agrees()
