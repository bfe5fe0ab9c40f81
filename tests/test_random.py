"""Generators and random sampling (issues 10 and 14): dyngrad.Generator, default_generator, get/set_rng_state,
dyngrad.random, generator= on every random op and in utils.data, and multinomial, poisson, randint_like,
random_, exponential_, geometric_, cauchy_, log_normal_.

The numbers are each engine's own (docs/design.md): the tests check reproducibility, independence of a Generator
from the global stream, state round trips, statistics on moderate samples with fixed seeds, and torch's error
types. Note [Generators as swapped core states] in python/dyngrad/_api/generator.py.
"""
import copy
import pickle

import numpy as np
import pytest


def _np(t):
    return np.array(t.tolist())


# Every random op with generator=: name, then a draw given the engine and a generator (None: the global one).
DRAWS = [
    ("rand", lambda dg, g: dg.rand(3, 4, generator=g)),
    ("randn", lambda dg, g: dg.randn(5, generator=g, dtype=dg.float64)),
    ("randint", lambda dg, g: dg.randint(-3, 9, (6,), generator=g)),
    ("randperm", lambda dg, g: dg.randperm(9, generator=g)),
    ("normal_numbers", lambda dg, g: dg.normal(2.0, 3.0, (4,), generator=g)),
    ("normal_tensors", lambda dg, g: dg.normal(dg.zeros(2, 3), dg.ones(3), generator=g)),
    ("normal_mean", lambda dg, g: dg.normal(dg.zeros(4), generator=g)),
    ("bernoulli", lambda dg, g: dg.bernoulli(dg.full((8,), 0.5), generator=g)),
    ("Tensor.bernoulli", lambda dg, g: dg.full((8,), 0.3).bernoulli(generator=g)),
    ("rand_like", lambda dg, g: dg.rand_like(dg.zeros(2, 2), generator=g)),
    ("randn_like", lambda dg, g: dg.randn_like(dg.zeros(2, 2), generator=g)),
    ("randint_like", lambda dg, g: dg.randint_like(dg.zeros(5), 2, 7, generator=g)),
    ("multinomial", lambda dg, g: dg.multinomial(dg.tensor([1.0, 2.0, 0.0, 4.0]), 3, generator=g)),
    ("multinomial_2d", lambda dg, g: dg.tensor([[1.0, 1.0], [3.0, 1.0]]).multinomial(5, True, generator=g)),
    ("poisson", lambda dg, g: dg.poisson(dg.tensor([0.5, 4.0, 60.0]), g)),
    ("binomial", lambda dg, g: dg.binomial(dg.tensor([3.0, 10.0, 100.0]), dg.tensor([0.5]), generator=g)),
    ("uniform_", lambda dg, g: dg.empty(6).uniform_(-2, 3, generator=g)),
    ("normal_", lambda dg, g: dg.empty(6).normal_(1, 2, generator=g)),
    ("bernoulli_", lambda dg, g: dg.empty(6).bernoulli_(0.4, generator=g)),
    ("random_", lambda dg, g: dg.empty(6, dtype=dg.int64).random_(generator=g)),
    ("random_to", lambda dg, g: dg.empty(6).random_(10, generator=g)),
    ("random_from_to", lambda dg, g: dg.empty(6, dtype=dg.int32).random_(-5, 5, generator=g)),
    ("exponential_", lambda dg, g: dg.empty(6).exponential_(2.0, generator=g)),
    ("geometric_", lambda dg, g: dg.empty(6).geometric_(0.3, generator=g)),
    ("cauchy_", lambda dg, g: dg.empty(6).cauchy_(generator=g)),
    ("log_normal_", lambda dg, g: dg.empty(6).log_normal_(generator=g)),
    ("rrelu", lambda dg, g: dg.rrelu(dg.full((6,), -1.0), training=True, generator=g)),
    ("rrelu_", lambda dg, g: dg.rrelu_(dg.full((6,), -1.0), training=True, generator=g)),
    ("init.uniform_", lambda dg, g: dg.nn.init.uniform_(dg.empty(2, 3), -1, 1, generator=g)),
    ("init.normal_", lambda dg, g: dg.nn.init.normal_(dg.empty(2, 3), generator=g)),
    ("init.xavier_uniform_", lambda dg, g: dg.nn.init.xavier_uniform_(dg.empty(2, 3), generator=g)),
    ("init.xavier_normal_", lambda dg, g: dg.nn.init.xavier_normal_(dg.empty(2, 3), generator=g)),
    ("init.kaiming_uniform_", lambda dg, g: dg.nn.init.kaiming_uniform_(dg.empty(2, 3), generator=g)),
    ("init.kaiming_normal_", lambda dg, g: dg.nn.init.kaiming_normal_(dg.empty(2, 3), generator=g)),
]


@pytest.mark.parametrize("name,draw", DRAWS, ids=[d[0] for d in DRAWS])
def test_generator_reproducible_and_independent(dg, name, draw):
    # the same seed, the same numbers
    a = _np(draw(dg, dg.Generator().manual_seed(7)))
    b = _np(draw(dg, dg.Generator().manual_seed(7)))
    np.testing.assert_array_equal(a, b)
    # drawing with g leaves the global stream where it was, and moves g on
    dg.manual_seed(123)
    before = _np(dg.get_rng_state())
    g = dg.Generator().manual_seed(7)
    g_before = _np(g.get_state())
    draw(dg, g)
    np.testing.assert_array_equal(_np(dg.get_rng_state()), before)
    assert (_np(g.get_state()) != g_before).any()
    # a Generator seeded with s draws what the global generator draws after manual_seed(s)
    dg.manual_seed(7)
    np.testing.assert_array_equal(_np(draw(dg, None)), a)
    # and the default generator, passed explicitly, is the global stream
    dg.manual_seed(7)
    np.testing.assert_array_equal(_np(draw(dg, dg.default_generator)), a)


def test_generator_object(dg):
    g = dg.Generator()
    assert g.initial_seed() == 67280421310721 and str(g.device) == "cpu"
    assert dg.Generator(device="cpu").manual_seed(3) is not None
    assert g.manual_seed(5) is g and g.initial_seed() == 5
    assert g.manual_seed(-1).initial_seed() == 2 ** 64 - 1          # negatives wrap to uint64, as torch
    s = g.seed()
    assert isinstance(s, int) and g.initial_seed() == s
    # state round trip: a uint8 tensor, restored on this or another Generator
    state = g.get_state()
    assert state.dtype is dg.uint8 and state.ndim == 1
    x = _np(dg.rand(5, generator=g))
    assert g.set_state(state) is g
    np.testing.assert_array_equal(_np(dg.rand(5, generator=g)), x)
    h = dg.Generator().set_state(state)
    assert h.initial_seed() == s
    np.testing.assert_array_equal(_np(dg.rand(5, generator=h)), x)
    # clone_state, pickle and deepcopy carry the state
    for twin in (g.clone_state(), pickle.loads(pickle.dumps(g)), copy.deepcopy(g)):
        assert isinstance(twin, dg.Generator) and twin is not g
        np.testing.assert_array_equal(_np(dg.randn(4, generator=twin)), _np(dg.randn(4, generator=g.clone_state())))


def test_global_generator(dg):
    assert isinstance(dg.default_generator, dg.Generator)
    assert dg.manual_seed(11) is dg.default_generator and dg.initial_seed() == 11
    a = _np(dg.rand(4))
    assert dg.default_generator.manual_seed(11) is dg.default_generator
    np.testing.assert_array_equal(_np(dg.rand(4)), a)
    state = dg.get_rng_state()
    np.testing.assert_array_equal(_np(state), _np(dg.default_generator.get_state()))
    b = _np(dg.randn(3))
    dg.set_rng_state(state)
    np.testing.assert_array_equal(_np(dg.randn(3)), b)
    # dyngrad.random: torch.random's names
    r = dg.random
    assert r.manual_seed(4) is dg.default_generator and r.initial_seed() == 4
    np.testing.assert_array_equal(_np(r.get_rng_state()), _np(dg.get_rng_state()))
    s = r.seed()
    assert dg.initial_seed() == s
    state = r.get_rng_state()
    with r.fork_rng():
        dg.rand(10)
        dg.manual_seed(99)
    np.testing.assert_array_equal(_np(dg.get_rng_state()), _np(state))
    with r.fork_rng(enabled=False):
        dg.rand(1)
    assert (_np(dg.get_rng_state()) != _np(state)).any()
    with pytest.raises(RuntimeError):
        with r.fork_rng(devices=[0]):
            pass
    assert r.thread_safe_generator() is None


def test_state_errors(dg):
    torch = pytest.importorskip("torch")
    for m in (dg, torch):
        g = m.Generator()
        with pytest.raises(TypeError):
            g.set_state([1, 2])
        with pytest.raises(TypeError):
            g.set_state(m.zeros(len(g.get_state())))              # float, not uint8
        with pytest.raises(RuntimeError):
            g.set_state(m.zeros(3, dtype=m.uint8))
        if m is dg:                                    # a state of the right size that is no generator's
            with pytest.raises(RuntimeError):
                g.set_state(m.zeros(len(g.get_state()), dtype=m.uint8))
        for bad in (1.5, True, "a"):
            with pytest.raises(RuntimeError):
                g.manual_seed(bad)
        with pytest.raises(ValueError):
            g.manual_seed(2 ** 64)
        with pytest.raises(TypeError):
            m.rand(3, generator=3)
        with pytest.raises(RuntimeError):
            m.Generator("meta")


def test_states_move_between_engines(cpp, ref):
    """Both engines run one algorithm (Note [One random stream for both engines]): a state taken on one engine
    continues the same stream on the other. Each engine's Generator objects are still its own: a reference
    Generator is not a generator of the C++ engine."""
    source = ref.Generator().manual_seed(11)
    ref.rand(5, generator=source)
    target = cpp.Generator().set_state(cpp.tensor(source.get_state().tolist(), dtype=cpp.uint8))
    assert np.array_equal(cpp.rand(7, generator=target, dtype=cpp.float64).numpy(),
                          ref.rand(7, generator=source, dtype=ref.float64).numpy())
    with pytest.raises(TypeError):
        cpp.rand(2, generator=ref.Generator())


# ----- statistics on moderate samples (fixed seeds, generous tolerances) ---------------------------------------

N = 20000


def _sample(dg, fill, dtype=None, seed=0):
    t = dg.empty(N, dtype=dtype or dg.float64)
    return _np(fill(t, dg.Generator().manual_seed(seed)))


def test_continuous_fills_statistics(dg):
    x = _sample(dg, lambda t, g: t.exponential_(2.0, generator=g))
    assert x.min() >= 0 and abs(x.mean() - 0.5) < 0.03 and abs(x.var() - 0.25) < 0.03
    x = _sample(dg, lambda t, g: t.cauchy_(1.0, 2.0, generator=g))    # no mean: median and quartiles
    q1, med, q3 = np.percentile(x, [25, 50, 75])
    assert abs(med - 1.0) < 0.1 and abs(q1 - (-1.0)) < 0.15 and abs(q3 - 3.0) < 0.15
    x = _sample(dg, lambda t, g: t.log_normal_(0.5, 0.25, generator=g))
    assert x.min() > 0 and abs(np.log(x).mean() - 0.5) < 0.01 and abs(np.log(x).std() - 0.25) < 0.01
    x = _sample(dg, lambda t, g: t.uniform_(-1, 3, generator=g))
    assert -1 <= x.min() and x.max() < 3 and abs(x.mean() - 1) < 0.05 and abs(x.var() - 16 / 12) < 0.05
    x = _sample(dg, lambda t, g: t.normal_(-2, 0.5, generator=g))
    assert abs(x.mean() + 2) < 0.02 and abs(x.std() - 0.5) < 0.02
    x = _sample(dg, lambda t, g: t.bernoulli_(0.3, generator=g))
    assert set(np.unique(x)) <= {0.0, 1.0} and abs(x.mean() - 0.3) < 0.02
    for dtype in (dg.float32, dg.float16):          # the fills in narrower dtypes stay in range
        x = _sample(dg, lambda t, g: t.exponential_(generator=g), dtype)
        assert np.isfinite(x).all() and x.min() >= 0


def test_discrete_fills_statistics(dg):
    p = 0.3
    for dtype in (dg.float64, dg.int64, dg.int32):
        x = _sample(dg, lambda t, g: t.geometric_(p, generator=g), dtype)
        assert x.min() >= 1 and (x == np.round(x)).all()
        assert abs(x.mean() - 1 / p) < 0.1 and abs(x.var() - (1 - p) / p ** 2) < 0.6
        assert abs((x == 1).mean() - p) < 0.02            # P(X = 1) = p: the support starts at 1
    x = _sample(dg, lambda t, g: t.random_(3, 9, generator=g), dg.int64)
    assert set(np.unique(x)) == set(range(3, 9)) and abs(x.mean() - 5.5) < 0.05
    x = _sample(dg, lambda t, g: t.random_(4, generator=g))
    assert set(np.unique(x)) == {0.0, 1.0, 2.0, 3.0}
    x = _sample(dg, lambda t, g: t.random_(generator=g), dg.float32)
    assert x.min() >= 0 and x.max() <= 2 ** 24 and (x == np.round(x)).all() and x.max() > 2 ** 23
    x = _sample(dg, lambda t, g: t.random_(generator=g), dg.int8)
    assert x.min() >= 0 and x.max() <= 127 and x.max() > 120
    x = _sample(dg, lambda t, g: t.random_(generator=g), dg.uint8)
    assert x.min() >= 0 and x.max() == 255
    x = _sample(dg, lambda t, g: t.random_(generator=g), dg.bool)
    assert set(np.unique(x)) == {False, True}
    x = _sample(dg, lambda t, g: t.random_(-2 ** 63, None, generator=g), dg.int64)   # the whole int64 range
    assert (x < -2 ** 62).any() and (x > 2 ** 62).any()
    x = _sample(dg, lambda t, g: t.random_(2 ** 63 - 3, None, generator=g), dg.int64)
    assert set(np.unique(x)) == {2 ** 63 - 3, 2 ** 63 - 2, 2 ** 63 - 1}
    x = _np(dg.randint_like(dg.zeros(N, dtype=dg.int32), 5, generator=dg.Generator().manual_seed(1)))
    assert set(np.unique(x)) == set(range(5))
    assert dg.randint_like(dg.zeros(3, dtype=dg.int32), 5).dtype is dg.int32
    assert dg.randint_like(dg.zeros(3), 5, dtype=dg.int64).dtype is dg.int64


def test_poisson_statistics(dg):
    g = dg.Generator().manual_seed(3)
    for lam in (0.0, 0.7, 4.0, 250.0):
        x = _np(dg.poisson(dg.full((N,), lam, dtype=dg.float64), generator=g))
        assert x.min() >= 0 and (x == np.round(x)).all()
        assert abs(x.mean() - lam) < 0.05 * max(lam, 1) and abs(x.var() - lam) < 0.1 * max(lam, 1)
    rate = dg.tensor([[1.0, 2.0]], requires_grad=True)
    y = dg.poisson(rate)
    assert y.dtype is dg.float32 and tuple(y.shape) == (1, 2)
    (y * 3).sum().backward()                      # torch: PoissonBackward, a zero gradient
    assert y.grad_fn.name() == "PoissonBackward" and rate.grad.tolist() == [[0.0, 0.0]]
    with dg.no_grad():
        assert not dg.poisson(rate).requires_grad


def test_binomial_statistics(dg):
    g = dg.Generator().manual_seed(4)
    for n, p in ((0.0, 0.3), (1.0, 0.3), (10.0, 0.5), (400.0, 0.05), (7.0, 0.0), (7.0, 1.0)):
        x = _np(dg.binomial(dg.full((N,), n, dtype=dg.float64), dg.full((N,), p, dtype=dg.float64), generator=g))
        assert x.min() >= 0 and x.max() <= n and (x == np.round(x)).all()
        assert abs(x.mean() - n * p) < 0.05 * max(n * p, 1) and abs(x.var() - n * p * (1 - p)) < 0.1 * max(n * p, 1)
    y = dg.binomial(dg.tensor([[2.0], [5.0]]), dg.tensor([0.5, 0.25, 1.0]))      # broadcast
    assert tuple(y.shape) == (2, 3) and y.dtype is dg.float32


def test_multinomial_statistics(dg):
    g = dg.Generator().manual_seed(5)
    w = np.array([1.0, 0.0, 3.0, 6.0])
    x = _np(dg.multinomial(dg.tensor(w), N, True, generator=g))
    assert x.shape == (N,) and x.dtype == np.int64
    freq = np.bincount(x, minlength=4) / N
    assert freq[1] == 0 and np.abs(freq - w / w.sum()).max() < 0.02
    # without replacement: no index repeats within a row; a zero weight only after every non-zero one
    rows = _np(dg.multinomial(dg.tensor(np.tile(w, (2000, 1))), 4, generator=g))
    assert rows.shape == (2000, 4)
    assert all(len(set(r)) == 4 for r in rows) and (rows[:, 3] == 1).all()
    first = np.bincount(rows[:, 0], minlength=4) / len(rows)     # the first draw follows the weights
    assert np.abs(first - w / w.sum()).max() < 0.04
    # the second draw follows the weights left: P(second = 2 | first = 3) = 3 / 4
    pick = rows[rows[:, 0] == 3]
    assert abs((pick[:, 1] == 2).mean() - 0.75) < 0.05
    # 2-D with replacement: one distribution per row
    x = _np(dg.tensor([[1.0, 0.0], [0.0, 1.0]]).multinomial(50, True, generator=g))
    assert (x[0] == 0).all() and (x[1] == 1).all()
    assert tuple(dg.multinomial(dg.ones(0, 3), 2).shape) == (0, 2)


def test_multinomial_narrow_float_inputs(dg):
    for dtype in (dg.float32, dg.float16, dg.bfloat16):
        x = _np(dg.multinomial(dg.tensor([0.2, 0.0, 0.8], dtype=dtype), 400, True))
        assert x.shape == (400,) and set(x) == {0, 2}


# ----- error types, as torch's --------------------------------------------------------------------------------

ERRORS = [
    lambda m: m.empty(5).random_(5, 3),
    lambda m: m.empty(5).random_(0),
    lambda m: m.empty(5).random_(1.5),
    lambda m: m.empty(5, dtype=m.uint8).random_(300),
    lambda m: m.empty(5, dtype=m.uint8).random_(-1, 5),
    lambda m: m.empty(5).exponential_(0),
    lambda m: m.empty(5, dtype=m.int64).exponential_(),
    lambda m: m.empty(5).geometric_(0),
    lambda m: m.empty(5).geometric_(1.5),
    lambda m: m.empty(5).cauchy_(0, -1),
    lambda m: m.empty(5, dtype=m.int64).cauchy_(),
    lambda m: m.empty(5).log_normal_(1, 0),
    lambda m: m.empty(5, dtype=m.int64).log_normal_(),
    lambda m: m.empty(5).uniform_(2, 1),
    lambda m: m.empty(5).normal_(0, -1),
    lambda m: m.empty(3).bernoulli_(1.5),
    lambda m: m.normal(0.0, -1.0, (3,)),
    lambda m: m.normal(m.zeros(2), m.tensor([1.0, -1.0])),
    lambda m: m.normal(m.zeros(2), -1.0),
    lambda m: m.normal(m.zeros(2), m.ones(3)),
    lambda m: m.normal(2.0),
    lambda m: m.bernoulli(m.tensor([0.5, 1.5])),
    lambda m: m.poisson(m.tensor([1.0, -1.0])),
    lambda m: m.poisson(m.tensor([1.0, float("nan")])),
    lambda m: m.poisson(m.tensor([1, 2])),
    lambda m: m.multinomial(m.tensor([1.0, 2.0]), 3),
    lambda m: m.multinomial(m.tensor([1.0, -2.0]), 1),
    lambda m: m.multinomial(m.tensor([1.0, float("inf")]), 1),
    lambda m: m.multinomial(m.tensor([1.0, float("nan")]), 1),
    lambda m: m.multinomial(m.tensor([0.0, 0.0]), 1),
    lambda m: m.multinomial(m.tensor([[1.0, 0.0], [0.0, 0.0]]), 1),
    lambda m: m.multinomial(m.ones(2, 2, 2), 1),
    lambda m: m.multinomial(m.tensor(1.0), 1),
    lambda m: m.multinomial(m.tensor([1, 2]), 1),
    lambda m: m.multinomial(m.tensor([1.0, 2.0]), 0),
    lambda m: m.multinomial(m.tensor([1.0, 2.0]), 1.0),
    lambda m: m.multinomial(m.ones(0), 1),
    lambda m: m.randint_like(m.ones(3), 5, 2),
    lambda m: m.randint_like(m.ones(3, dtype=m.int8), 200),
    lambda m: m.randint_like(m.ones(3, dtype=m.uint8), -1, 5),
    lambda m: m.binomial(m.tensor([10, 5]), m.tensor([0.5, 0.1])),
    lambda m: m.binomial(m.tensor([10.0, 5.0]), m.tensor([0.5, 0.1], dtype=m.float64)),
    lambda m: m.binomial(m.tensor([10.0, 5.0]), m.tensor([0.5, 0.1, 0.2])),
    lambda m: m.randint_like(m.ones(3)),
    lambda m: m.randperm(4, generator="g"),
]


@pytest.mark.parametrize("k", range(len(ERRORS)))
def test_error_types_match_torch(dg, k):
    torch = pytest.importorskip("torch")
    call = ERRORS[k]
    with pytest.raises(Exception) as expected:
        call(torch)
    with pytest.raises(Exception) as got:
        call(dg)
    assert isinstance(got.value, expected.type), \
        f"torch raised {expected.type.__name__}, dyngrad {type(got.value).__name__}: {got.value}"


def test_binomial_refuses_what_torch_lets_through(dg):
    """torch.binomial returns garbage (a negative count: 0; prob 1.5: count) or hangs (a nan count); dyngrad
    refuses these arguments."""
    for count, prob in (([-1.0], [0.5]), ([2.5], [0.5]), ([float("nan")], [0.5]), ([3.0], [1.5]),
                        ([3.0], [float("nan")])):
        with pytest.raises(RuntimeError):
            dg.binomial(dg.tensor(count), dg.tensor(prob))


def test_results_as_torch(dg):
    """Shapes, dtypes and in-place identity as torch's (the values differ: each engine has its own numbers)."""
    torch = pytest.importorskip("torch")
    cases = [
        lambda m: m.multinomial(m.tensor([1.0, 2.0]), 3, True),
        lambda m: m.multinomial(m.tensor([[1.0, 2.0, 3.0]] * 2, dtype=m.float64), 2),
        lambda m: m.randint_like(m.ones(2, 3), 5),
        lambda m: m.randint_like(m.ones(3, dtype=m.int32), low=2, high=5),
        lambda m: m.poisson(m.ones(2, 2, dtype=m.float64)),
        lambda m: m.empty(4, dtype=m.int64).geometric_(0.5),
        lambda m: m.empty(2, 2, dtype=m.float16).random_(),
        lambda m: m.ones(3).bernoulli(0.5),
    ]
    for case in cases:
        a, b = case(dg), case(torch)
        assert tuple(a.shape) == tuple(b.shape) and a.dtype.name == str(b.dtype).split(".")[1]
    t = dg.empty(3)
    for fill in ("random_", "exponential_", "cauchy_", "log_normal_", "uniform_", "normal_"):
        assert getattr(t, fill)() is t
    assert t.geometric_(0.5) is t and t.bernoulli_() is t
    leaf = dg.zeros(3, requires_grad=True)
    with pytest.raises(RuntimeError):              # an in-place op on a leaf that requires grad, as torch
        leaf.exponential_()


FILLS = [("uniform_", ()), ("normal_", ()), ("bernoulli_", ()), ("random_", (5,)), ("exponential_", ()),
         ("geometric_", (0.5,)), ("cauchy_", ()), ("log_normal_", ())]


@pytest.mark.parametrize("fill,args", FILLS, ids=[f[0] for f in FILLS])
def test_fill_over_history_has_zero_gradient(dg, fill, args):
    """A random fill over a value with history replaces it: the gradient to the old value is zero (torch records
    UniformBackward0 & co.), not the history's."""
    leaf = dg.ones(3, requires_grad=True)
    x = leaf * 2
    assert getattr(x, fill)(*args) is x
    (x * 3).sum().backward()
    assert leaf.grad.tolist() == [0.0, 0.0, 0.0]
    assert x.grad_fn.name() == "".join(p.capitalize() for p in fill.strip("_").split("_")) + "Backward"


# ----- utils.data with a Generator --------------------------------------------------------------------------------

def test_random_split_as_the_tutorial_writes_it(dg):
    data = dg.utils.data
    ds = list(range(10))
    dg.manual_seed(0)
    state = _np(dg.get_rng_state())
    train, test = data.random_split(ds, [0.8, 0.2], generator=dg.Generator().manual_seed(42))
    assert len(train) == 8 and len(test) == 2 and sorted(list(train) + list(test)) == ds
    again = data.random_split(ds, [0.8, 0.2], generator=dg.Generator().manual_seed(42))
    assert list(again[0]) == list(train) and list(again[1]) == list(test)
    np.testing.assert_array_equal(_np(dg.get_rng_state()), state)       # the global stream untouched
    # the default generator is the global one: manual_seed fixes the split
    dg.manual_seed(42)
    default = data.random_split(ds, [8, 2])
    assert list(default[0]) == list(train)
    with pytest.raises(TypeError):
        data.random_split(ds, [5, 5], generator="seed")


def test_dataloader_generator_is_deterministic(dg):
    data = dg.utils.data
    ds = data.TensorDataset(dg.arange(20))

    def epochs(seed, n=2):
        loader = data.DataLoader(ds, batch_size=6, shuffle=True, generator=dg.Generator().manual_seed(seed))
        return [[b[0].tolist() for b in loader] for _ in range(n)]

    a, b = epochs(3), epochs(3)
    assert a == b and a[0] != a[1]                       # the same seed, the same epochs; each epoch a new order
    assert sorted(sum(a[0], [])) == list(range(20))
    assert epochs(4)[0] != a[0]
    # the workers' base seed comes from the generator too
    s1 = data.DataLoader(ds, generator=dg.Generator().manual_seed(1))._worker_base_seed()
    s2 = data.DataLoader(ds, generator=dg.Generator().manual_seed(1))._worker_base_seed()
    assert s1 == s2 and isinstance(s1, int)
    with pytest.raises(TypeError):
        data.DataLoader(ds, shuffle=True, generator=5)


def test_samplers_take_a_generator(dg):
    data = dg.utils.data
    ds = list(range(12))
    samplers = [
        lambda g: data.RandomSampler(ds, generator=g),
        lambda g: data.RandomSampler(ds, replacement=True, num_samples=30, generator=g),
        lambda g: data.RandomSampler(ds, num_samples=30, generator=g),
        lambda g: data.SubsetRandomSampler([3, 5, 7, 9], generator=g),
        lambda g: data.WeightedRandomSampler([0.1, 0.0, 0.5, 2.0], 20, generator=g),
        lambda g: data.WeightedRandomSampler([0.1, 0.0, 0.5, 2.0], 3, replacement=False, generator=g),
        lambda g: data.BatchSampler(data.RandomSampler(ds, generator=g), 5, False),
    ]
    for make in samplers:
        dg.manual_seed(0)
        state = _np(dg.get_rng_state())
        a = list(make(dg.Generator().manual_seed(9)))
        assert a == list(make(dg.Generator().manual_seed(9)))
        np.testing.assert_array_equal(_np(dg.get_rng_state()), state)
        b = list(make(np.random.default_rng(9)))             # numpy generators are still accepted
        assert b == list(make(np.random.default_rng(9)))
    weighted = list(data.WeightedRandomSampler([0.1, 0.0, 0.5, 2.0], 200, generator=dg.Generator().manual_seed(2)))
    assert 1 not in weighted
    assert sorted(data.WeightedRandomSampler([1.0, 0.0, 1.0, 1.0], 3, replacement=False)) == [0, 2, 3]
    long = list(data.RandomSampler(ds, num_samples=30, generator=dg.Generator()))
    assert sorted(long[:12]) == ds and sorted(long[12:24]) == ds
    for make in samplers[:6]:
        with pytest.raises(TypeError):
            make(42)


def test_generator_draws_leave_the_global_stream(dg):
    """A draw with a Generator between two global draws does not change them (the global stream is untouched)."""
    dg.manual_seed(5)
    a = _np(dg.rand(3)), _np(dg.rand(3))
    dg.manual_seed(5)
    first = _np(dg.rand(3))
    dg.randn(100, generator=dg.Generator().manual_seed(1))
    dg.empty(10).random_(generator=dg.Generator())
    np.testing.assert_array_equal(first, a[0])
    np.testing.assert_array_equal(_np(dg.rand(3)), a[1])


class _DrawsInWorkers:
    """A dataset that draws from the engine's global generator: in a worker, seeded from the loader's base seed."""

    def __init__(self, engine):
        self.engine = engine

    def __len__(self):
        return 6

    def __getitem__(self, i):
        import importlib
        dg = importlib.import_module(self.engine)
        return float(i) + dg.rand(()).item()


def test_dataloader_workers_seeded_from_the_generator(dg):
    """Worker base seeds come from the loader's Generator: the same seed, the same draws inside the workers."""
    data = dg.utils.data

    def run(seed):
        loader = data.DataLoader(_DrawsInWorkers(dg.__name__), batch_size=2, shuffle=True, num_workers=2,
                                 generator=dg.Generator().manual_seed(seed))
        return [b.tolist() for b in loader]

    a = run(5)
    assert a == run(5) and a != run(6)
    assert sorted(int(x) for b in a for x in b) == list(range(6))


def test_random_like_factories_refuse_other_layouts(dg):
    """layout= was accepted and ignored by rand_like/randn_like/randint_like; like every factory it is refused
    unless it is the strided default (None)."""
    x = dg.ones(2, 3)
    for fn in (lambda: dg.rand_like(x, layout="sparse"), lambda: dg.randn_like(x, layout="sparse"),
               lambda: dg.randint_like(x, 5, layout="sparse")):
        with pytest.raises(RuntimeError, match="strided layout"):
            fn()
    assert tuple(dg.rand_like(x, layout=None).shape) == (2, 3)
