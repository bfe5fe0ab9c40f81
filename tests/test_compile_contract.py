"""The contract of dyngrad.compile (issue 20, docs/compile.md), in every mode that records (static replay, check,
verified) and on both engines: each program below is run compiled and eagerly side by side over several calls, and
every result, gradient and parameter is compared bitwise. The programs are the issue's "done when" list (random
trees, optimisers with an LR scheduler, train/eval and grad-mode switches with BatchNorm and dropout), a fuzzer of
random programs that read values into Python and state outside their arguments, and what a recording keeps alive."""
import gc
import tracemalloc
import warnings
import weakref

import numpy as np
import pytest

from helpers import array_tensor as t, assert_bitwise_equal as assert_same

MODES = ["reduce-overhead", "check", "verified"]


def twins(dg, make, seed=0):
    """Two identical copies of make()'s model (the same initial parameters)."""
    dg.manual_seed(seed)
    a = make()
    dg.manual_seed(seed)
    return a, make()


def assert_params_same(a, b):
    for p, q in zip(a.parameters(), b.parameters()):
        assert_same(p, q)
        assert (p.grad is None) == (q.grad is None)
        if p.grad is not None:
            assert_same(p.grad, q.grad)


def random_tree(rng, depth=0):
    if depth >= 3 or rng.random() < 0.35:
        return int(rng.integers(0, 5))
    return (random_tree(rng, depth + 1), random_tree(rng, depth + 1))


@pytest.mark.parametrize("mode", MODES)
def test_tree_rnn_over_random_trees(dg, mode):
    """A TreeRNN trained over random trees: the recursion follows the tree, an argument of nested tuples (an entry
    guard on its structure). Repeated trees replay; new ones record until the limit, then run eagerly."""
    class TreeRNN(dg.nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = dg.nn.Embedding(5, 4)
            self.combine = dg.nn.Linear(8, 4)
            self.out = dg.nn.Linear(4, 2)

        def encode(self, tree, ids):
            if isinstance(tree, tuple):
                return self.combine(dg.cat([self.encode(tree[0], ids), self.encode(tree[1], ids)])).tanh()
            return self.embed(ids[tree])

        def forward(self, tree, ids, target):
            return dg.nn.functional.cross_entropy(self.out(self.encode(tree, ids)).unsqueeze(0), target)
    model_c, model_e = twins(dg, TreeRNN)
    opt_c = dg.optim.SGD(model_c.parameters(), lr=0.1, momentum=0.9)
    opt_e = dg.optim.SGD(model_e.parameters(), lr=0.1, momentum=0.9)

    def step(model, opt):
        def run(tree, ids, target):
            opt.zero_grad()
            loss = model(tree, ids, target)
            loss.backward()
            opt.step()
            return loss
        return run
    compiled = dg.compile(step(model_c, opt_c), mode=mode)
    eager = step(model_e, opt_e)
    rng = np.random.default_rng(3)
    trees = [random_tree(rng) for _ in range(4)]
    ids = dg.tensor(np.arange(5))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        for i in range(12):
            tree = trees[int(rng.integers(0, len(trees)))]
            target = dg.tensor(np.array([i % 2]))
            assert_same(compiled(tree, ids, target), eager(tree, ids, target))
            assert_params_same(model_c, model_e)
    stats = compiled.compile_stats
    assert stats.replays >= 1 and stats.variants <= 8


OPTIMIZERS = {
    "SGD-momentum+StepLR": (lambda dg, ps: dg.optim.SGD(ps, lr=0.1, momentum=0.9),
                            lambda dg, o: dg.optim.lr_scheduler.StepLR(o, 2, gamma=0.5)),
    "Adam+ExponentialLR": (lambda dg, ps: dg.optim.Adam(ps, lr=0.01),
                           lambda dg, o: dg.optim.lr_scheduler.ExponentialLR(o, 0.9)),
    "AdamW+StepLR": (lambda dg, ps: dg.optim.AdamW(ps, lr=0.01, weight_decay=0.1),
                     lambda dg, o: dg.optim.lr_scheduler.StepLR(o, 3, gamma=0.1)),
}


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("optimizer", list(OPTIMIZERS))
def test_training_with_an_lr_scheduler(dg, mode, optimizer):
    """A whole training step compiled (zero_grad, forward, backward, step) while a scheduler changes the learning
    rate between calls: the lr is an optimiser hyperparameter the entry guard compares, so a replay never runs
    with a stale lr."""
    make_opt, make_sched = OPTIMIZERS[optimizer]

    def make():
        return dg.nn.Sequential(dg.nn.Linear(4, 8), dg.nn.ReLU(), dg.nn.Linear(8, 3))
    model_c, model_e = twins(dg, make)
    opt_c, opt_e = make_opt(dg, model_c.parameters()), make_opt(dg, model_e.parameters())
    sched_c, sched_e = make_sched(dg, opt_c), make_sched(dg, opt_e)

    def step(model, opt):
        def run(x, y):
            opt.zero_grad()
            loss = dg.nn.functional.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            return loss
        return run
    compiled, eager = dg.compile(step(model_c, opt_c), mode=mode), step(model_e, opt_e)
    rng = np.random.default_rng(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        for _ in range(7):
            x, y = rng.standard_normal((5, 4)), rng.integers(0, 3, 5)
            assert_same(compiled(t(dg, x), dg.tensor(y)), eager(t(dg, x), dg.tensor(y)))
            sched_c.step()
            sched_e.step()
            assert_params_same(model_c, model_e)
    assert opt_c.param_groups[0]["lr"] == opt_e.param_groups[0]["lr"]
    if mode == "reduce-overhead":
        assert any("lr" in reason for reason, _ in compiled.compile_stats.guard_misses)


@pytest.mark.parametrize("mode", MODES)
def test_train_eval_and_grad_mode_with_batchnorm_and_dropout(dg, mode):
    """BatchNorm's running statistics are in-place updates that replay; dropout draws in eager order; train/eval
    and grad mode switch between variants; over several steps everything equals eager mode, bitwise."""
    def make():
        return dg.nn.Sequential(dg.nn.Linear(3, 6), dg.nn.BatchNorm1d(6), dg.nn.Dropout(0.3), dg.nn.Linear(6, 2))
    model_c, model_e = twins(dg, make)
    compiled = dg.compile(model_c, mode=mode)
    rng = np.random.default_rng(1)
    schedule = [(True, True), (True, True), (False, False), (True, True), (False, True), (False, False),
                (True, False), (True, True)]
    for i, (training, grad) in enumerate(schedule):
        model_c.train(training)
        model_e.train(training)
        x = rng.standard_normal((4, 3))
        xc, xe = t(dg, x, requires_grad=grad), t(dg, x, requires_grad=grad)
        with dg.set_grad_enabled(grad):
            dg.manual_seed(i)
            out_c = compiled(xc)
            dg.manual_seed(i)
            out_e = model_e(xe)
        assert_same(out_c, out_e)
        assert out_c.requires_grad == out_e.requires_grad
        if grad:
            out_c.sum().backward()
            out_e.sum().backward()
            assert_same(xc.grad, xe.grad)
        assert_params_same(model_c, model_e)
        for a, b in zip(model_c.buffers(), model_e.buffers()):
            assert_same(a, b)
    assert compiled.compile_stats.replays >= 2


def random_program(dg, rng):
    """A random program over x (an argument), a parameter w and a closed-over buffer: elementwise ops, matmuls,
    Python numbers from an argument, branches on bool(t) and loop counts from int(t), a value from .tolist(), an
    in-place update of the buffer, random numbers, and a backward. Returns make(), which builds a fresh copy of
    the program and its state (the same initial values), so the compiled and the eager copy never share state."""
    ops = []
    for _ in range(int(rng.integers(3, 9))):
        kind = rng.choice(["unary", "scale", "w", "branch", "loop", "tolist", "buffer", "randn", "reduce", "array",
                           "cell", "head"])
        ops.append((str(kind), str(rng.choice(["tanh", "exp", "relu", "sigmoid", "neg"])), int(rng.integers(1, 3))))
    w0 = rng.standard_normal((3, 3)).astype(np.float32) * 0.5

    def make():
        w = dg.tensor(w0.copy(), requires_grad=True)
        buffer = dg.zeros(3)
        refill = np.zeros(3, np.float32)       # a numpy buffer the caller refills (Note [Arrays read by reference])
        cell = [dg.ones(3)]                    # cell[0] is rebound between calls: program reads it as `bound`
        bound = cell[0]

        def rebind(value):
            nonlocal bound
            bound = cell[0] = value

        def program(x, scale):
            y = x @ w
            for kind, unary, k in ops:
                if kind == "unary":
                    y = getattr(y, unary)()
                elif kind == "scale":
                    y = y * scale
                elif kind == "w":
                    y = y @ w
                elif kind == "branch":
                    y = y * 2 if bool(y.sum() > 0) else y - 1
                elif kind == "loop":
                    for _ in range(int((y.detach().abs().sum() > 1).item()) + k):
                        y = (y * 0.5).tanh()
                elif kind == "tolist":
                    y = y + y.detach().tolist()[0][0]
                elif kind == "buffer":
                    with dg.no_grad():
                        buffer.add_(y.detach().sum(0))
                    y = y + buffer
                elif kind == "randn":
                    y = y + dg.randn(3) * 0.1
                elif kind == "array":
                    y = y * dg.from_numpy(refill)
                elif kind == "cell":
                    y = y + bound
                elif kind == "head":       # a linear of k output columns with a bias (one column: the lane dot)
                    y = y + dg.nn.functional.linear(y, w[:k], w[0, :k]).sum(-1, keepdim=True)
                else:
                    y = y.sum(0, keepdim=True) * y
            loss = (y * y).sum()
            loss.backward()
            return loss, y.detach().max(0)       # a namedtuple output (Note [Named tuples in recordings])
        program.refill, program.rebind = refill, rebind
        return program, w, buffer
    return make


@pytest.mark.parametrize("mode", MODES)
def test_random_programs_match_eager_mode(dg, mode):
    """A fuzzer of compiled programs: each random program runs compiled and eagerly on the same inputs over
    several calls (values that flip its branches and loop counts, a changing Python number, two batch sizes);
    results, gradients and the in-place updated buffer equal eager mode's, bitwise."""
    rng = np.random.default_rng(20)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        for _ in range(12):
            make = random_program(dg, rng)
            (fn_c, w_c, buf_c), (fn_e, w_e, buf_e) = make(), make()
            compiled = dg.compile(fn_c, mode=mode)
            for call in range(6):
                x = rng.standard_normal((int(rng.choice([2, 2, 4])), 3)).astype(np.float32)
                scale = float(rng.choice([0.5, 0.5, 2.0]))
                seed = int(rng.integers(0, 1000))
                w_c.grad = w_e.grad = None
                fill = rng.standard_normal(3).astype(np.float32)
                for fn in (fn_c, fn_e):
                    fn.refill[:] = fill
                    if call % 3 == 2:
                        fn.rebind(t(dg, fill * 2))
                dg.manual_seed(seed)
                loss_c, y_c = compiled(t(dg, x), scale)
                dg.manual_seed(seed)
                loss_e, y_e = fn_e(t(dg, x), scale)
                assert_same(loss_c, loss_e)
                assert_same(y_c.values, y_e.values)
                assert_same(y_c.indices, y_e.indices)
                assert_same(buf_c, buf_e)
                assert (w_c.grad is None) == (w_e.grad is None)
                if w_e.grad is not None:
                    assert_same(w_c.grad, w_e.grad)


@pytest.mark.parametrize("mode", MODES)
def test_recordings_free_nothing_held_and_leak_nothing(dg, mode):
    """A program called with 20 shapes records up to the limit, then runs eagerly; every argument, output and
    intermediate dies with the caller's references, and once the variants are dropped (compiler.reset(), the
    program deleted) the memory they held returns: a second round of 20 shapes ends where the first did. Results
    the caller still holds keep their values while later calls replay (nothing the user holds is reused)."""
    w = t(dg, np.linspace(-1, 1, 8).reshape(1, 8), requires_grad=True)
    refs = []

    def program(x):
        h = (x * w).tanh()
        refs.append(weakref.ref(h))          # runs while recording only (static), at every call (verified)
        loss = (h * h).sum()
        loss.backward()
        return loss, h

    def round_of_calls():
        compiled = dg.compile(program, mode=mode)
        held = []
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            for n in list(range(1, 21)) + [1, 2, 3]:
                x = t(dg, np.full((n, 8), 0.1 * n))
                w.grad = None
                loss, h = compiled(x)
                refs.extend([weakref.ref(x), weakref.ref(loss), weakref.ref(h)])
                held.append((n, loss, h))
        for n, loss, h in held:           # the replays after them wrote into none of these
            expected = np.tanh(np.full((n, 8), np.float32(0.1 * n)) * w.detach().numpy())
            np.testing.assert_allclose(h.detach().numpy(), expected, rtol=1e-6)
            assert abs(loss.item() - float((h.detach().numpy().astype(np.float64) ** 2).sum())) < 1e-3
        stats = compiled.compile_stats
        assert stats.variants <= 8 and stats.replays >= 2
        del held, loss, h, x
        dg.compiler.reset()
        del compiled
        gc.collect()

    round_of_calls()
    assert all(r() is None for r in refs)
    tracemalloc.start()
    try:
        gc.collect()
        start = tracemalloc.get_traced_memory()[0]
        round_of_calls()
        first = tracemalloc.get_traced_memory()[0]
        round_of_calls()
        second = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    assert all(r() is None for r in refs)
    # each round's Python objects are gone again: what is left over is the few refs and stats (not per variant)
    assert second - first < 16_000, (start, first, second)


def test_torch_api_forms(dg, monkeypatch):
    """torch's API: compile's signature (names, kinds and defaults as torch 2.13's, where torch is installed), the
    decorator forms, Module.compile, compiler.reset() and is_compiling(), DYNGRAD_COMPILE_CHECK."""
    import inspect
    params = inspect.signature(dg.compile).parameters
    assert list(params)[:1] == ["model"] and all(p.kind is p.KEYWORD_ONLY for p in list(params.values())[1:])
    for name, default in (("fullgraph", False), ("dynamic", None), ("mode", None), ("options", None),
                          ("disable", False)):
        assert params[name].default is default
    try:
        import torch
    except ImportError:
        torch = None
    if torch is not None:
        theirs = inspect.signature(torch.compile).parameters
        assert [(n, p.kind, p.default) for n, p in theirs.items()] == [(n, p.kind, p.default) for n, p in
                                                                      params.items()]
    seen = []

    @dg.compile
    def plain(x):
        return x + 1

    @dg.compile(mode="reduce-overhead")
    def static(x):
        seen.append(dg.compiler.is_compiling())
        return x * 2

    @dg.compile(fullgraph=True, recompile_limit=3)
    def full(x):
        return x - 1
    x = t(dg, [1., 2.])
    for _ in range(3):
        assert_same(plain(x), x + 1)
        assert_same(static(x), x * 2)
        assert_same(full(x), x - 1)
    assert seen == [True] and not dg.compiler.is_compiling()
    assert static.compile_stats.replays == 2 and full.compile_stats.replays == 2
    dg.compiler.reset()                  # drops every recording: the next call records again
    assert_same(static(x), x * 2)
    assert seen == [True, True] and static.compile_stats.recordings == 2     # statistics stay
    model = dg.nn.Linear(2, 2)
    assert model.compile(fullgraph=True) is None
    for _ in range(3):
        assert_same(model(x), model._call_impl(x))
    assert model._compiled_call.stats.replays == 2
    monkeypatch.setenv("DYNGRAD_COMPILE_CHECK", "1")
    counter = [1.0]

    def unguarded(x):
        return x * counter[0]          # a Python number static replay freezes: check mode reports it
    checked = dg.compile(unguarded)
    assert checked.compile_stats.mode == "check"
    checked(x)
    counter[0] = 3.0
    with pytest.raises(RuntimeError, match="diverged from its recording.*test_compile_contract.py:"):
        checked(x)


G_TABLE = None      # a global tensor test_an_argument_that_is_also_an_external passes as an argument


@pytest.mark.parametrize("mode", MODES)
def test_an_argument_that_is_also_an_external(dg, mode):
    """Note [Arguments that are also externals] (compiling.py): recorded with an argument that is also a tensor
    the program reads another way (here a module's own weight, and a global tensor), a static replay with another
    argument returned the argument where eager mode reads the weight or the global: a silent wrong answer. Such a
    variant runs eagerly now, with one warning."""
    global G_TABLE
    G_TABLE = t(dg, [1., 2.])
    lin = dg.nn.Linear(2, 2, bias=False)

    def scaled(x):
        return lin(x) + G_TABLE
    compiled = dg.compile(scaled, mode=mode)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for x in (lin.weight, G_TABLE.reshape(1, 2) * 1, lin.weight, t(dg, [[3., 4.], [5., 6.]])):
            assert_same(compiled(x), scaled(x))

        def table(x):
            return x * G_TABLE
        compiled_table = dg.compile(table, mode=mode)
        for x in (G_TABLE, t(dg, [5., 7.]), t(dg, [-1., 0.5])):
            assert_same(compiled_table(x), table(x))
    if mode != "verified":
        assert any("also a parameter, buffer or closed-over tensor" in str(w.message) for w in caught)
        assert compiled_table.compile_stats.eager_calls == 2


@pytest.mark.parametrize("mode", MODES)
def test_outputs_in_named_tuples_and_objects(dg, mode):
    """Note [Named tuples in recordings] (capture.py): a namedtuple output (max's (values, indices)) was kept as the
    recording's own object, so every replay returned the first call's tensors: a silent wrong answer. It is rebuilt
    from its slots now and replays; tensors inside another object (a dataclass) make the variant run eagerly."""
    import collections
    import dataclasses
    Pair = collections.namedtuple("Pair", "doubled count")

    @dataclasses.dataclass
    class Result:
        total: object
        n: int

    def program(x):
        return x.max(0), Pair(x * 2, 3), {"sum": x.sum()}

    def boxed(x):
        return Result(x.sum(), 1)
    compiled, compiled_boxed = dg.compile(program, mode=mode), dg.compile(boxed, mode=mode)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for v in (1.0, 2.0, -3.0, 4.0):
            x = t(dg, [[v, 2 * v], [-v, 0.5]])
            (mx, pair, d), (mx_e, pair_e, d_e) = compiled(x), program(x)
            assert type(mx) is type(mx_e) and type(pair) is Pair and pair.count == 3
            assert_same(mx.values, mx_e.values)
            assert_same(mx.indices, mx_e.indices)
            assert_same(pair.doubled, pair_e.doubled)
            assert_same(d["sum"], d_e["sum"])
            out = compiled_boxed(x)
            assert type(out) is Result and out.n == 1
            assert_same(out.total, boxed(x).total)
    if mode == "reduce-overhead":
        assert compiled.compile_stats.replays == 3
        assert compiled_boxed.compile_stats.eager_calls == 3
        assert any("inside a Result object" in str(w.message) for w in caught)


@pytest.mark.parametrize("mode", MODES)
def test_random_draws_from_a_generator(dg, mode):
    """Note [Random states set from Python] (capture.py): a draw with generator=g installs g's state, held in
    Python, in the core. Recorded, that state was a constant: every replay drew the recording's numbers again and g
    never advanced (a silent wrong answer). Such a variant runs eagerly now; the global generator's draws replay."""
    def with_generator(x, g):
        return x + dg.randn(2, generator=g)
    gen_held = dg.Generator().manual_seed(3)

    def closed_over(x):
        return x * dg.rand(2, generator=gen_held)

    def restores(x):
        state = dg.get_rng_state()
        a = dg.randn(2)
        dg.set_rng_state(state)               # a state Python holds: the same numbers again, at every call
        return x + a - dg.randn(2)
    x = t(dg, [1., 2.])
    compiled = [dg.compile(f, mode=mode) for f in (with_generator, closed_over, restores)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        g1, g2 = dg.Generator().manual_seed(1), dg.Generator().manual_seed(1)
        outs = []
        for _ in range(3):
            out = compiled[0](x, g1)
            assert_same(out, with_generator(x, g2))
            outs.append(out.numpy().copy())
        assert not np.array_equal(outs[0], outs[1])
        for seed in (5, 6, 5):
            gen_held.manual_seed(seed)
            a = compiled[1](x)
            gen_held.manual_seed(seed)
            assert_same(a, closed_over(x))
            dg.manual_seed(seed)
            b = compiled[2](x)
            dg.manual_seed(seed)
            assert_same(b, restores(x))


@pytest.mark.parametrize("mode", MODES)
def test_autocast_is_guarded(dg, mode):
    """Note [Autocast under compile] (compiling.py): recorded outside an autocast region and replayed inside one, a
    matmul ran in float32 where eager mode runs it in bfloat16; and a weight's cast taken from autocast's cache was
    an external, replayed with its old values after the weight changed. Both give eager mode's results now."""
    def matmul(x, w):
        return x @ w
    x = t(dg, [[1., 2.], [3., -4.]]) / 7
    w = t(dg, np.eye(2) / 3)
    compiled = dg.compile(matmul, mode=mode)
    compiled(x, w)
    compiled(x, w)
    with dg.autocast("cpu", dtype=dg.bfloat16):
        out, expected = compiled(x, w), matmul(x, w)
    assert out.dtype == expected.dtype == dg.bfloat16
    assert_same(out.float(), expected.float())
    lin = dg.nn.Linear(2, 2)
    compiled_lin = dg.compile(lin, mode=mode)
    with dg.autocast("cpu"):
        lin(x)                             # fills autocast's weight cache
        compiled_lin(x)
        compiled_lin(x)
    with dg.no_grad():
        lin.weight.mul_(3)
    with dg.autocast("cpu"):
        out, expected = compiled_lin(x), lin(x)
    assert_same(out.float(), expected.float())


G_BATCH = np.zeros((2, 2), np.float32)      # a global numpy buffer test_numpy_arrays_outside_the_program refills


@pytest.mark.parametrize("mode", MODES)
def test_numpy_arrays_outside_the_program(dg, mode):
    """Note [Arrays read by reference] (capture.py): a numpy array held outside the program (a global buffer the
    caller refills, an argument, a closed-over array) was replayed as a copy of its first values: a silent wrong
    answer. It is read by reference now; a converted copy or a view of it runs eagerly."""
    held = np.ones(2, np.float64)

    def shares(x):
        return x @ dg.from_numpy(G_BATCH)

    def copies(x):
        return x * dg.tensor(G_BATCH)

    def argument(x, a):
        return x * dg.tensor(a)

    def converted(x):
        return x * dg.tensor(held, dtype=dg.float32) + dg.from_numpy(G_BATCH[:, 0].copy())

    def temporary(x):
        return x + dg.tensor(np.arange(2, dtype=np.float32))      # made by the program: a copy is right
    programs = [shares, copies, argument, converted, temporary]
    compiled = [dg.compile(f, mode=mode) for f in programs]
    x = t(dg, [[1., 2.], [3., 4.]])
    a = np.array([1., 2.], np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        for k in range(4):
            G_BATCH[:] = k + np.arange(4, dtype=np.float32).reshape(2, 2)
            a[:] = [k, -k]
            held[:] = [k, 2 * k]
            for f, c in zip(programs, compiled):
                extra = (a,) if f is argument else ()
                assert_same(c(x, *extra), f(x, *extra))
    if mode == "reduce-overhead":
        assert compiled[0].compile_stats.replays == 3 and compiled[4].compile_stats.replays == 3
        assert compiled[3].compile_stats.eager_calls == 3


@pytest.mark.parametrize("mode", MODES)
def test_data_replaced_with_another_shape_or_dtype(dg, mode):
    """`p.data = t` keeps p's identity: with a new shape the program's Python (a reshape to w.shape[0], a loop over
    it) builds another program, which the replay of the old recording did not (a silent wrong answer). The shape
    and dtype of parameters, buffers and closed-over tensors are guarded."""
    lin = dg.nn.Linear(2, 2)
    w = dg.ones(2)

    def program(x):
        y = lin(x).reshape(-1, lin.weight.shape[0]).sum(1)
        return y * w.shape[0] + (x.sum() * w).sum()
    compiled = dg.compile(program, mode=mode)
    x = t(dg, [[1., 2.], [3., -4.]])
    for step in range(4):
        if step == 2:
            with dg.no_grad():
                lin.weight.data = dg.ones(4, 2)
                lin.bias.data = dg.zeros(4)
                w.data = dg.ones(3)
        assert_same(compiled(x), program(x))
    if mode == "reduce-overhead":
        assert compiled.compile_stats.variants == 2 and compiled.compile_stats.replays == 2
