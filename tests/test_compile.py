"""dyngrad.compile's static replay (mode="reduce-overhead" / fullgraph=True, Note [Two modes of compile] in
python/dyngrad/_api/compiling.py), on both engines: every result is compared with eager mode's (equal), across
branch flips, loop counts, sequence lengths, trees, dropout, train/eval, grad mode and optimiser loops; guard misses,
the variant limit, and what a recording keeps alive."""
import gc
import warnings
import weakref

import numpy as np
import pytest

from helpers import array_tensor, assert_bitwise_equal, square_function


def static(dg, fn, **kwargs):
    return dg.compile(fn, mode="reduce-overhead", **kwargs)


t = array_tensor
assert_same = assert_bitwise_equal


def run_both(dg, fn, inputs_list, grads=True):
    """Calls the compiled fn and fn itself on fresh copies of each input list; compares outputs and gradients."""
    compiled = static(dg, fn)
    for values in inputs_list:
        xs = [t(dg, v, requires_grad=grads) for v in values]
        ys = [t(dg, v, requires_grad=grads) for v in values]
        out, expected = compiled(*xs), fn(*ys)
        assert_same(out, expected)
        if grads:
            out.sum().backward()
            expected.sum().backward()
            for x, y in zip(xs, ys):
                assert_same(x.grad, y.grad)
    return compiled.compile_stats


def test_branch_flips(dg):
    def f(x):
        y = x.tanh() * 3
        if y.sum() > 0:            # bool(tensor): a guard
            return (y * y).sum(0)
        return (y - 1).exp().sum(0)
    stats = run_both(dg, f, [[[1., 2.]], [[2., 1.]], [[-3., 1.]], [[-1., -1.]], [[4., 0.]], [[-2., 0.5]]])
    assert stats.variants == 2 and stats.replays == 4
    (reason, line), = stats.guard_misses
    assert "item returned False" in reason and line.startswith("test_compile.py:")


def test_loop_counts(dg):
    def f(x, n):
        y = x
        for _ in range(int(n.sum())):    # a count read from a tensor: a guard
            y = y * 0.5 + 1
        return y
    compiled = static(dg, f)
    for k in (1, 3, 3, 1, 2, 3):
        x, n = t(dg, [1., 2., 3.]), t(dg, [k], dtype=np.int64)
        assert_same(compiled(x, n), f(x, n))
    assert compiled.compile_stats.variants == 3 and compiled.compile_stats.replays == 3


def test_python_number_arguments_are_guarded_by_value(dg):
    def f(x, scale, n):
        for _ in range(n):
            x = x * scale
        return x
    compiled = static(dg, f)
    for scale, n in ((2.0, 1), (2.0, 1), (3.0, 1), (2.0, 2), (3.0, 1)):
        x = t(dg, [1., 2.])
        assert_same(compiled(x, scale, n), f(x, scale, n))
    stats = compiled.compile_stats
    assert stats.variants == 3 and stats.replays == 2
    assert "scale" in stats.guard_misses[0][0] or "args[1]" in stats.guard_misses[0][0]


def test_sequence_lengths(dg):
    """A recurrent loop over the sequence: each length is a variant (an entry guard on the shape)."""
    rng = np.random.default_rng(0)
    w = t(dg, rng.standard_normal((4, 4)) * 0.3, requires_grad=True)

    def f(xs):
        h = dg.zeros(4)
        for i in range(xs.shape[0]):
            h = (xs[i] + h @ w).tanh()
        return h.sum()
    compiled = static(dg, f)
    for n in (3, 5, 3, 5, 2):
        seq = rng.standard_normal((n, 4)).astype(np.float32)
        w.grad = None
        out = compiled(dg.tensor(seq))
        out.backward()
        g1 = w.grad.clone()
        w.grad = None
        ref = f(dg.tensor(seq))
        ref.backward()
        assert_same(out, ref)
        assert_same(g1, w.grad)
    assert compiled.compile_stats.variants == 3 and compiled.compile_stats.replays == 2


def test_recursion_over_trees(dg):
    """A tree of nested tuples as the argument: its structure is an entry guard."""
    w = dg.tensor(np.array([[0.5, -0.25], [0.75, 0.5]], np.float32), requires_grad=True)

    def encode(tree):
        if isinstance(tree, tuple):
            left, right = encode(tree[0]), encode(tree[1])
            return ((left + right) @ w).tanh()
        return tree

    def f(tree):
        return encode(tree).sum()
    compiled = static(dg, f)

    def leaf(i):
        return dg.tensor(np.array([i, 1.0 - i], np.float32))
    trees = [lambda: (leaf(1), (leaf(2), leaf(3))), lambda: ((leaf(1), leaf(2)), leaf(3)),
             lambda: (leaf(1), (leaf(2), leaf(3))), lambda: ((leaf(4), leaf(5)), (leaf(6), leaf(7)))]
    for make in trees:
        w.grad = None
        out = compiled(make())
        out.backward()
        g = w.grad.clone()
        w.grad = None
        ref = f(make())
        ref.backward()
        assert_same(out, ref)
        assert_same(g, w.grad)
    assert compiled.compile_stats.variants == 3 and compiled.compile_stats.replays == 1


def test_dropout_draws_fresh_numbers_in_eager_order(dg):
    model = dg.nn.Sequential(dg.nn.Linear(8, 8), dg.nn.Dropout(0.5), dg.nn.ReLU())
    compiled = dg.compile(model, mode="reduce-overhead")
    assert compiled._orig_mod is model
    x = t(dg, np.ones((4, 8)))
    outs = []
    for seed in (1, 2, 1):
        dg.manual_seed(seed)
        out = compiled(x)
        dg.manual_seed(seed)
        assert_same(out, model(x))
        outs.append(out.detach().numpy().copy())
    assert not np.array_equal(outs[0], outs[1]) and np.array_equal(outs[0], outs[2])
    assert compiled.compile_stats.variants == 1 and compiled.compile_stats.replays == 2


def test_train_eval_and_grad_mode_switch_variants(dg):
    model = dg.nn.Sequential(dg.nn.Linear(3, 4), dg.nn.Dropout(0.5), dg.nn.Linear(4, 1))
    compiled = dg.compile(model, mode="reduce-overhead")
    x = t(dg, [[1., 2., 3.], [0., -1., 2.]])
    for training, grad in ((True, True), (False, True), (True, True), (False, False), (False, True)):
        model.train(training)
        dg.manual_seed(5)
        with dg.set_grad_enabled(grad):
            out = compiled(x)
        dg.manual_seed(5)
        with dg.set_grad_enabled(grad):
            ref = model(x)
        assert_same(out, ref)
        assert out.requires_grad == grad and out.requires_grad == ref.requires_grad
    stats = compiled.compile_stats
    assert stats.variants == 3 and stats.replays == 2
    assert any("module" in reason and "changed" in reason for reason, _ in stats.guard_misses)
    assert any("grad mode" in reason for reason, _ in stats.guard_misses)


def make_mlp(dg, seed=0):
    dg.manual_seed(seed)
    return dg.nn.Sequential(dg.nn.Linear(6, 16), dg.nn.ReLU(), dg.nn.Linear(16, 3))


def copy_params(dg, src, dst):
    with dg.no_grad():
        for p, q in zip(src.parameters(), dst.parameters()):
            q.copy_(p)


@pytest.mark.parametrize("optimizer", ["SGD", "SGD-momentum", "Adam"])
def test_training_step_with_optimizer(dg, optimizer):
    """forward, backward and optimizer.step() in one compiled step: the parameters follow eager mode exactly."""
    make = {"SGD": lambda ps: dg.optim.SGD(ps, lr=0.1),
            "SGD-momentum": lambda ps: dg.optim.SGD(ps, lr=0.1, momentum=0.9),
            "Adam": lambda ps: dg.optim.Adam(ps, lr=0.01)}[optimizer]
    model_c, model_e = make_mlp(dg), make_mlp(dg)
    copy_params(dg, model_e, model_c)
    opt_c, opt_e = make(model_c.parameters()), make(model_e.parameters())

    def step_c(x, y):
        opt_c.zero_grad()
        loss = dg.nn.functional.cross_entropy(model_c(x), y)
        loss.backward()
        opt_c.step()
        return loss

    def step_e(x, y):
        opt_e.zero_grad()
        loss = dg.nn.functional.cross_entropy(model_e(x), y)
        loss.backward()
        opt_e.step()
        return loss
    compiled = static(dg, step_c)
    rng = np.random.default_rng(1)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)       # no recompile_limit warning
        for _ in range(12):
            x = rng.standard_normal((5, 6)).astype(np.float32)
            y = rng.integers(0, 3, 5)
            lc = compiled(dg.tensor(x), dg.tensor(y))
            le = step_e(dg.tensor(x), dg.tensor(y))
            assert_same(lc, le)
    for p, q in zip(model_c.parameters(), model_e.parameters()):
        assert_same(p, q)
    stats = compiled.compile_stats
    if optimizer == "SGD":
        assert stats.variants <= 2 and stats.replays >= 10
    else:       # the first step creates the state buffers: a second variant (Adam's step count is a tensor, Note
        assert stats.variants <= 3 and stats.replays >= 9 and stats.eager_calls == 0   # [Step counts in tensors])


def test_variant_limit_then_eager_with_one_warning(dg):
    def f(x):
        return x * int(x.sum())
    compiled = static(dg, f)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for k in range(12):
            x = t(dg, [float(k)])
            assert_same(compiled(x), f(x))
    messages = [str(w.message) for w in caught if "recompile_limit" in str(w.message)]
    assert len(messages) == 1 and "test_compile.py:" in messages[0] and "item returned" in messages[0]
    stats = compiled.compile_stats
    assert stats.variants == 8 and stats.eager_calls == 4 and len(stats.guard_misses) == 11
    assert stats in dg.compiler.programs()


def test_recompile_limit_argument(dg):
    compiled = dg.compile(lambda x, n: x * n, fullgraph=True, recompile_limit=2)
    with pytest.warns(RuntimeWarning, match="recompile_limit"):
        for n in range(4):
            assert compiled(t(dg, [1.0]), n).item() == n
    assert compiled.compile_stats.variants == 2 and compiled.compile_stats.eager_calls == 2


def test_externals_are_read_by_reference_and_inplace_updates_replay(dg):
    """A closed-over tensor is not a frozen constant: writes to it between calls are seen; an in-place update in the
    program happens at every call, as in eager mode."""
    w = t(dg, [1., 2.])
    total = dg.zeros(2)

    def f(x):
        total.add_(x * w)
        return total * 1
    compiled = static(dg, f)
    for k in range(4):
        with dg.no_grad():
            w.mul_(2)
        out = compiled(t(dg, [1., float(k)]))
    w2, total2 = t(dg, [1., 2.]), dg.zeros(2)
    for k in range(4):
        w2.mul_(2)
        total2.add_(t(dg, [1., float(k)]) * w2)
    assert_same(out, total2)
    assert_same(total, total2)
    assert compiled.compile_stats.replays == 3


def test_python_side_effects_run_only_while_recording(dg):
    """The contract of static replay (jax.jit's): Python that touches no tensor runs when a variant is recorded."""
    calls = []

    def f(x):
        calls.append(1)
        assert dg.compiler.is_compiling()
        return x + 1
    compiled = static(dg, f)
    for _ in range(3):
        assert compiled(t(dg, [1.0])).item() == 2.0
    assert len(calls) == 1 and not dg.compiler.is_compiling()


def test_module_compile_in_place(dg):
    model = dg.nn.Linear(3, 2)
    assert model.compile(mode="reduce-overhead") is None
    x = t(dg, [[1., 2., 3.]])
    expected = model._call_impl(x)
    for _ in range(3):
        assert_same(model(x), expected)
    assert model._compiled_call.stats.replays == 2


def test_errors_propagate_as_in_eager_mode(dg):
    def f(x):
        return x @ x
    compiled = static(dg, f)
    with pytest.raises(RuntimeError, match="matmul"):
        compiled(t(dg, [[1., 2., 3.]]))
    assert compiled(t(dg, [[1., 2.], [3., 4.]])).shape == (2, 2)


def test_no_leaks_when_variants_are_dropped(dg):
    w = t(dg, [1., 2.])
    w_ref = weakref.ref(w)

    def make():
        held = w

        def f(x):
            return x * held
        return f
    compiled = static(dg, make())
    x = t(dg, [3., 4.])
    out = compiled(x)
    out = compiled(x)
    out_ref, x_ref = weakref.ref(out), weakref.ref(x)
    del out, x
    gc.collect()
    assert out_ref() is None and x_ref() is None          # a recording keeps no argument or output alive
    del w
    gc.collect()
    assert w_ref() is not None                            # the recording reads the external by reference
    dg.compiler.reset()
    del compiled
    gc.collect()
    assert w_ref() is None                                # dropping the variants drops it


def test_default_mode_runs_eagerly(dg):
    def f(x):
        return x * 2
    assert dg.compile(f) is f and dg.compile(f, mode="max-autotune") is f
    assert dg.compile(f, fullgraph=True, disable=True) is f


def test_check_mode_raises_where_python_state_diverges(dg):
    """mode="check" runs eagerly, checking each op against the recording: an unguarded Python counter that changes
    the program is reported at the op and line where it diverged, which static replay would have missed."""
    counter = [0]

    def f(x):
        counter[0] += 1
        y = x * 2
        if counter[0] % 2 == 0:         # Python state, invisible to the guards
            y = y + 1
        return y
    checked = dg.compile(f, mode="check")
    assert checked(t(dg, [1.0])).item() == 2.0
    with pytest.raises(RuntimeError, match=r"diverged from its recording at step 2: its Python issued scalar_operand "
                                           r"at test_compile.py:\d+"):
        checked(t(dg, [1.0]))
    quiet = dg.compile(f, mode="reduce-overhead")
    counter[0] = 0
    assert [quiet(t(dg, [1.0])).item() for _ in range(3)] == [2.0, 2.0, 2.0]    # the contract: recorded Python only


def test_check_mode_follows_guards_like_static_replay(dg):
    def f(x):
        return x * 2 if x.sum() > 0 else x - 1
    checked = dg.compile(f, options={"check": True})
    for v in (1.0, 2.0, -1.0, 3.0, -2.0):
        x = t(dg, [v])
        assert_same(checked(x), f(x))
    stats = checked.compile_stats
    assert stats.variants == 2 and stats.replays == 3 and len(stats.guard_misses) == 1


def test_custom_functions_and_hooks_run_eagerly_with_one_warning(dg):
    """Note [Steps that stay eager]: a custom Function's ctx or a hook cannot be replayed; the program runs eagerly,
    correctly, and says so once."""
    Square = square_function(dg)
    seen = []

    def f(x):
        y = Square.apply(x)
        y.register_hook(lambda g: seen.append(g.shape))
        z = (y * 3).sum()
        z.backward()
        return z
    compiled = static(dg, f)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(3):
            x = t(dg, [1., 2.], requires_grad=True)
            assert compiled(x).item() == 15.0 and x.grad.tolist() == [6.0, 12.0]
    assert len(seen) == 3
    assert sum("runs eagerly" in str(w.message) for w in caught) == 1
    assert compiled.compile_stats.eager_calls == 2 and compiled.compile_stats.replays == 0


def test_anomaly_mode_inside_a_compiled_step(dg):
    def f(x):
        with dg.autograd.detect_anomaly():
            y = (x * 2).sum()
            y.backward()
        return y
    compiled = static(dg, f)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")         # detect_anomaly warns that it is slow
        for _ in range(3):
            x = t(dg, [1., 2.], requires_grad=True)
            assert compiled(x).item() == 6.0 and x.grad.tolist() == [2.0, 2.0]
    assert compiled.compile_stats.replays == 2


def test_threads_replaying_one_program_get_eager_results(dg):
    """Two threads calling one compiled program: a call that finds it replaying elsewhere runs eagerly; every result
    is the eager one."""
    import threading
    w = t(dg, [0.5, -0.5])

    def f(x):
        y = x
        for _ in range(30):
            y = (y * w + 0.1).tanh()
        return y
    compiled = static(dg, f)
    compiled(t(dg, [1., 2.]))
    errors = []

    def worker(k):
        try:
            for i in range(20):
                x = t(dg, [float(k), float(i)])
                assert_same(compiled(x), f(x))
        except Exception as e:      # reported below, with the thread's failure
            errors.append(e)
    threads = [threading.Thread(target=worker, args=(k,)) for k in range(3)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not errors, errors
    stats = compiled.compile_stats
    assert stats.replays + stats.eager_calls == 60 and stats.variants == 1


def test_replay_loop_compares_none_and_plain_values(dg):
    """Note [Results compared in the loop] (csrc/bindings/capture_bind.cpp and its twin): a step recorded as
    returning None (out=-3) or a plain value (out=-4) continues where the result is the same (type and ==) and hands
    the result back to Python where it is not."""
    program = dg._C._ReplayProgram(dg._C.Tensor)
    flag = [None, True]
    program.add(lambda: flag[0], [], [], -3, "none_step")
    program.add(lambda x: flag[1], [0], [None], -4, "value_step", True)
    program.add(dg._C.neg, [0], [None], 1, "neg")
    program.set_exported([True, True])
    slots = [t(dg, [2.0]), None]
    assert program.run(slots, 0) is None and slots[1].item() == -2.0
    flag[1] = False                                    # the value guard differs: handed back
    slots = [t(dg, [2.0]), None]
    assert program.run(slots, 0) == (1, False)
    program.materialize(slots)
    flag[0], flag[1] = 1, True                         # not None: handed back
    assert program.run([t(dg, [2.0]), None], 0) == (0, 1)
    with pytest.raises(ValueError, match="out is a slot"):
        program.add(dg._C.neg, [0], [None], -5, "neg")


def test_entry_key_in_cpp_is_the_python_key():
    """Note [Entry guards in C++]: the C++ walk builds compiling.entry_key_python's tuple element for element, over
    nested arguments, aliasing, dicts, unhashable values, modules (nested, a None parameter, buffers, eval mode) and an
    optimiser with state, so keys recorded by either compare equal and describe_key_change reads them."""
    import dyngrad as dg
    from dyngrad._api import compiling
    if not hasattr(dg._C, "_entry_key"):
        pytest.skip("this _C has no C++ entry key")
    model = dg.nn.Sequential(dg.nn.Linear(3, 4), dg.nn.BatchNorm1d(4), dg.nn.Linear(4, 2, bias=False))
    model[1].eval()
    opt = dg.optim.Adam(model.parameters(), lr=0.1, betas=(0.8, 0.9))
    x = t(dg, np.ones((5, 3), np.float32), requires_grad=True)
    opt.zero_grad()
    model(x).sum().backward()
    opt.step()                                    # state with tensors and a step number

    def step(a, b, cfg, scale=2.0):
        return (model(a) * scale).sum()

    program = dg.compile(step, mode="reduce-overhead")._program
    ref = t(dg, np.zeros((2, 2), np.float32)).mT
    cases = [((x, [x, 3, "s", None]), {"cfg": {"k": (1.5, ref)}}),
             ((x, (model, opt)), {"cfg": [[], {}], "scale": [1]}),   # an unhashable value, objects as arguments
             ((), {})]
    for args, kwargs in cases:
        got_key, got_tensors = compiling.entry_key(program, args, kwargs)
        want_key, want_tensors = compiling.entry_key_python(program, args, kwargs)
        assert got_key == want_key
        assert hash(got_key) == hash(want_key)
        assert [id(a) for a in got_tensors] == [id(b) for b in want_tensors]
    with dg.no_grad():
        assert compiling.entry_key(program, *cases[0])[0] == compiling.entry_key_python(program, *cases[0])[0]
    model[0].weight.requires_grad_(False)
    assert compiling.entry_key(program, *cases[0])[0] == compiling.entry_key_python(program, *cases[0])[0]


def test_gradient_steps_run_in_the_replay_loop(dg):
    """Note [Gradient steps in the loop]: zero_grad's reads and clears of .grad and the optimiser's reads are steps
    of the C++ loop (grad_steps counts them); a grad that is None at replay (cleared outside the program) takes the
    accessor's call, a guard miss, and every call still equals eager mode's; a non-leaf's .grad still warns."""
    model_c, model_e = make_mlp(dg), make_mlp(dg)
    copy_params(dg, model_e, model_c)
    opt_c, opt_e = dg.optim.SGD(model_c.parameters(), lr=0.1), dg.optim.SGD(model_e.parameters(), lr=0.1)

    def make_step(model, opt):
        def step(x, y):
            opt.zero_grad()
            loss = dg.nn.functional.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            return loss
        return step
    step_e = make_step(model_e, opt_e)
    compiled = static(dg, make_step(model_c, opt_c))
    rng = np.random.default_rng(2)
    for i in range(8):
        if i == 5:      # one parameter's grad is None before this call, in both
            model_c[0].bias.grad = None
            model_e[0].bias.grad = None
        x = rng.standard_normal((5, 6)).astype(np.float32)
        y = rng.integers(0, 3, 5)
        assert_same(compiled(dg.tensor(x), dg.tensor(y)), step_e(dg.tensor(x), dg.tensor(y)))
        for p, q in zip(model_c.parameters(), model_e.parameters()):
            assert_same(p, q)
            assert_same(p.grad, q.grad)
    stats = compiled.compile_stats
    assert stats.replays >= 4 and stats.misses >= 1
    natives = [v.native() for group in compiled._program.groups.values() for v in group]
    if hasattr(dg._C._ReplayProgram, "grad_steps"):           # the C++ loop (the reference engine's twin is Python)
        # zero_grad reads and clears each of the 4 grads; SGD reads them again
        assert max(n.grad_steps for n in natives if n is not None) >= 12
        # Note [Sequence arguments in the loop]: the backward's tuple and SGD's lists are built in the loop
        assert min(n.python_steps for n in natives if n is not None) == 0

    def non_leaf(x):
        y = x * 2
        y.sum().backward()
        return y.grad
    compiled = static(dg, non_leaf)
    for _ in range(3):
        with pytest.warns(UserWarning, match="non-leaf"):
            assert compiled(t(dg, [1.0, 2.0], requires_grad=True)) is None


def test_sequence_arguments_replay_in_the_loop(dg):
    """Note [Sequence arguments in the loop]: calls taking lists or tuples of tensors (cat, stack, a backward with
    explicit gradients, the same tensor twice in one list) replay equal to eager mode, and add() checks its seqs."""
    def f(x, y):
        z = dg.cat([x, y, x]) * 2
        w = dg.stack((z, z.tanh()))
        g = dg.ones_like(w)
        w.backward(g)
        return w.sum(0)
    xs = [t(dg, [0.5, 1.5], requires_grad=True), t(dg, [2.0, 0.25], requires_grad=True)]
    ys = [t(dg, [0.5, 1.5], requires_grad=True), t(dg, [2.0, 0.25], requires_grad=True)]
    compiled = static(dg, f)
    for _ in range(3):
        assert_same(compiled(*xs), f(*ys))
        for a, b in zip(xs, ys):
            assert_same(a.grad, b.grad)
    assert compiled.compile_stats.replays == 2
    if hasattr(dg._C, "_replay_seq_args"):
        natives = [v.native() for group in compiled._program.groups.values() for v in group]
        assert natives and all(n is not None and n.python_steps == 0 for n in natives)
        program = dg._C._ReplayProgram(dg._C.Tensor)
        with pytest.raises(ValueError, match="one entry per argument"):
            program.add(dg._C.neg, [0], [None], 1, "neg", None, [None, None])
        with pytest.raises(ValueError, match="both a slot and a sequence"):
            program.add(dg._C.neg, [0], [None], 1, "neg", None, [(False, [0], [None])])


G_WEIGHT = None      # a global tensor that test_state_outside_the_arguments_is_guarded rebinds


@pytest.mark.parametrize("mode", ["reduce-overhead", "check"])
def test_state_outside_the_arguments_is_guarded(dg, mode):
    """Note [State outside the arguments] (compiling.py): each of these was a silent wrong answer of static replay
    (the replay ran the recording made before the change): a global or closed-over tensor rebound, a module's
    plain tensor or Python number attribute changed, a forward hook registered after the recording, a parameter's
    .data replaced. Each now gives eager mode's result."""
    global G_WEIGHT
    G_WEIGHT = t(dg, [1., 2.])
    x = t(dg, [[1., 1.]])

    def uses_global(x):
        return x * G_WEIGHT

    def make_closure():
        v = t(dg, [1., 2.])

        def uses_cell(x):
            return x * v

        def rebind(new):
            nonlocal v
            v = new
        return uses_cell, rebind
    uses_cell, rebind = make_closure()

    class Scaled(dg.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = dg.nn.Linear(2, 2)
            self.mask = dg.ones(2)
            self.scale = 2.0

        def forward(self, x):
            return self.lin(x) * self.mask * self.scale
    model = Scaled()
    compiled = {name: dg.compile(fn, mode=mode) for name, fn in
                (("global", uses_global), ("cell", uses_cell), ("module", model))}
    eager = {"global": uses_global, "cell": uses_cell, "module": model}

    def agree():
        for name in compiled:
            assert_same(compiled[name](x), eager[name](x))
    agree()
    agree()
    G_WEIGHT = t(dg, [5., 7.])
    rebind(t(dg, [3., -1.]))
    model.mask = t(dg, [0., 1.])
    agree()
    model.scale = 5.0
    agree()
    calls = []
    handle = model.lin.register_forward_hook(lambda m, i, o: calls.append(1) or o * 2)
    agree()
    assert len(calls) == 2          # the compiled call and the eager one
    handle.remove()
    agree()
    with dg.no_grad():
        model.lin.weight.data = t(dg, np.full((2, 2), 3.0))
    agree()
    reasons = " ".join(r for r, _ in compiled["module"].compile_stats.guard_misses)
    assert "module Scaled changed" in reasons
    assert "global tensor G_WEIGHT" in compiled["global"].compile_stats.guard_misses[0][0]
    assert "closure's tensor v" in compiled["cell"].compile_stats.guard_misses[0][0]
