"""Regressions of the failure classes PyTorch's OpInfo samples found (scripts/opinfo_report.py, docs/opinfo.md),
each on both engines, with torch's behaviour as the expectation."""
import pickle

import numpy as np
import pytest

# Every 0-d result used to come back with shape (1,): np.ascontiguousarray returns at least one dimension, and the
# host-computed ops, pickling, default_collate and some samplers went through it.
ZERO_DIM = [
    ("special.bessel_j0", lambda m: m.special.bessel_j0(m.tensor(0.5))),
    ("special.airy_ai", lambda m: m.special.airy_ai(m.tensor(0.5))),
    ("special.modified_bessel_k1", lambda m: m.special.modified_bessel_k1(m.tensor(0.5))),
    ("special.chebyshev_polynomial_t", lambda m: m.special.chebyshev_polynomial_t(m.tensor(0.5), m.tensor(3.0))),
    ("special.hermite_polynomial_h", lambda m: m.special.hermite_polynomial_h(m.tensor(0.5), 2)),
    ("igamma", lambda m: m.igamma(m.tensor(1.5), m.tensor(2.0))),
    ("igammac", lambda m: m.igammac(m.tensor(1.5), m.tensor(2.0))),
    ("poisson", lambda m: m.poisson(m.tensor(3.0))),
    ("pickle", lambda m: pickle.loads(pickle.dumps(m.tensor(1.5)))),
    ("Gamma.sample", lambda m: m.distributions.Gamma(m.tensor(2.0), m.tensor(1.0)).sample()),
    ("VonMises.sample", lambda m: m.distributions.VonMises(m.tensor(0.0), m.tensor(1.0)).sample()),
]


@pytest.mark.parametrize("name,fn", ZERO_DIM, ids=[z[0] for z in ZERO_DIM])
def test_zero_dim_inputs_give_zero_dim_results(dg, name, fn):
    assert tuple(fn(dg).shape) == (), name


def test_default_collate_of_zero_dim_arrays_stacks_to_one_dim(dg):
    from importlib import import_module
    collate = import_module(dg.__name__ + ".utils.data").default_collate
    assert tuple(collate([np.array(1.0), np.array(2.0)]).shape) == (2,)


def test_special_zero_dim_values_match_one_element_values(dg):
    x = dg.tensor([0.25, 1.5])
    for name in ("bessel_j0", "bessel_y1", "modified_bessel_i0", "spherical_bessel_j0"):
        fn = getattr(dg.special, name)
        np.testing.assert_allclose([fn(x[0]).item(), fn(x[1]).item()], fn(x).numpy(), rtol=1e-6)


@pytest.mark.parametrize("name", ["quantile", "nanquantile"])
def test_quantile_is_differentiable_in_q(dg, name):
    """rank = q (n - 1) moves the interpolation weight: d quantile / d q = (above - below) (n - 1), as torch's."""
    from helpers import check_op
    check_op(dg, [(7,), (3,)], lambda m, x, q: getattr(m, name)(x, q), name=name, low=0.05, high=0.95,
             noncontig=False)
    check_op(dg, [(2, 6), (2,)], lambda m, x, q: getattr(m, name)(x, q, dim=1, keepdim=True), name=name,
             low=0.05, high=0.95, noncontig=False)


def test_nanquantile_q_gradient_is_zero_on_an_all_nan_slice(dg):
    x = dg.tensor([[1.0, 5.0, float("nan")], [float("nan")] * 3], requires_grad=True)
    q = dg.tensor([0.3, 0.9], requires_grad=True)
    gx, gq = dg.autograd.grad(dg.nanquantile(x, q, dim=1).nan_to_num().sum(), [x, q])
    np.testing.assert_allclose(gq.numpy(), [4.0, 4.0])    # (5 - 1) (count - 1 = 1) from row 0, 0 from row 1
    np.testing.assert_allclose(gx.numpy(), [[0.8, 1.2, 0.0], [0.0, 0.0, 0.0]], rtol=1e-6)


def test_index_fill_value_gradient_counts_each_filled_slice_once(dg):
    x = dg.zeros(5, 2, requires_grad=True)
    v = dg.tensor(1.5, requires_grad=True)
    weights = dg.arange(10.0).reshape(5, 2)
    out = x.index_fill(0, dg.tensor([4, 3, 3, 4, 0]), v)
    gx, gv = dg.autograd.grad((out * weights).sum(), [x, v])
    assert gv.item() == pytest.approx(0 + 1 + 6 + 7 + 8 + 9)       # rows 0, 3, 4 once each
    np.testing.assert_array_equal(gx.numpy(), [[0, 0], [2, 3], [4, 5], [0, 0], [0, 0]])


def test_as_strided_scatter_gradient_is_the_mathematical_one(dg):
    """torch 2.13's own backward is marked expectedFailure in its OpInfo; the overwritten elements of input get
    no gradient, src gets the gradient of the places it was written to."""
    x = dg.tensor([1.0, 2.0, 3.0, 4.0], requires_grad=True)
    src = dg.tensor([7.0, 8.0], requires_grad=True)
    out = dg.as_strided_scatter(x, src, (2,), (2,), 1)
    gx, gs = dg.autograd.grad((out * dg.tensor([1.0, 2.0, 3.0, 4.0])).sum(), [x, src])
    np.testing.assert_array_equal(out.detach().numpy(), [1, 7, 3, 8])
    np.testing.assert_array_equal(gx.numpy(), [1, 0, 3, 0])
    np.testing.assert_array_equal(gs.numpy(), [2, 4])


# torch's answers to the argument cases of its OpInfo samples, each checked on torch itself where installed
ARGUMENT_CASES = [
    ("scatter int32 index", lambda m: m.zeros(3, 2).scatter(0, m.tensor([[1, 2]], dtype=m.int32), m.ones(1, 2)),
     [[0, 0], [1, 0], [0, 1]]),
    ("scatter_add int32 index",
     lambda m: m.zeros(3, 2).scatter_add(0, m.tensor([[1, 1]], dtype=m.int32), m.ones(1, 2)), [[0, 0], [1, 1], [0, 0]]),
    ("gather empty uint8 index", lambda m: m.gather(m.arange(5.0), 0, m.tensor([], dtype=m.uint8)), []),
    ("cov of one variable", lambda m: m.cov(m.tensor([[1.0, 2.0, 4.0]])), 7.0 / 3.0),
    ("corrcoef of one variable", lambda m: m.corrcoef(m.tensor([[1.0, 2.0, 4.0]])), 1.0),
    ("diff n=0 ignores prepend", lambda m: m.diff(m.tensor([[1.0, 2.0]]), n=0, dim=0, prepend=m.ones(1, 2)),
     [[1.0, 2.0]]),
    ("gradient spacing=None", lambda m: m.gradient(m.tensor([1.0, 2.0, 4.0]), spacing=None)[0], [1.0, 1.5, 2.0]),
    ("tensordot size-1 dim broadcasts",
     lambda m: m.tensordot(m.ones(3, 1), m.arange(12.0).reshape(3, 4), dims=([0, 1], [0, 1])), 66.0),
    ("tensordot size-1 dim broadcasts (b)",
     lambda m: m.tensordot(m.arange(4.0).reshape(2, 1, 2), m.ones(1, 1, 1), dims=([2, 0], [0, 1])), [[6.0]]),
    ("linalg.vander of a 0-d x", lambda m: m.linalg.vander(m.tensor(2.0), N=3), [[1.0, 2.0, 4.0]]),
    ("squeeze dim=()", lambda m: m.ones(1, 2).squeeze(()).shape, [1, 2]),
    ("arange with bools", lambda m: m.arange(False, True, True, dtype=m.float32), [0.0]),
    ("arange(True)", lambda m: m.arange(True), [0]),
]


@pytest.mark.parametrize("name,fn,expected", ARGUMENT_CASES, ids=[c[0] for c in ARGUMENT_CASES])
def test_argument_cases_as_torch(dg, name, fn, expected):
    out = fn(dg)
    values = list(out) if isinstance(out, tuple) or type(out).__name__ == "Size" else out.tolist()
    np.testing.assert_allclose(values, expected, rtol=1e-6)
    if not isinstance(expected, list):
        assert tuple(out.shape) == ()


@pytest.mark.parametrize("name,fn,expected", ARGUMENT_CASES, ids=[c[0] for c in ARGUMENT_CASES])
def test_argument_cases_are_torchs(name, fn, expected):
    torch = pytest.importorskip("torch")
    out = fn(torch)
    values = list(out) if isinstance(out, torch.Size) else out.tolist()
    np.testing.assert_allclose(values, expected, rtol=1e-6)


def test_tensordot_broadcast_gradient(dg):
    from helpers import check_op
    check_op(dg, [(3, 1), (3, 4)], lambda m, a, b: m.tensordot(a, b, dims=([0, 1], [0, 1])), name="tensordot",
             noncontig=False)


def _ldl_solve_empty(m):
    LD, pivots = m.linalg.ldl_factor(m.ones(0, 0))
    return m.linalg.ldl_solve(LD, pivots, m.ones(0, 5))


# empty inputs: a reshape to (-1, ...) of zero elements is ambiguous, so each op now names its sizes
EMPTY_CASES = [
    ("group_norm", lambda m: m.nn.functional.group_norm(m.ones(0, 2), 1), (0, 2)),
    ("batch_norm 1-D", lambda m: m.nn.functional.batch_norm(m.ones(0), m.ones(0), m.ones(0), training=True), (0,)),
    ("searchsorted (0, 0)", lambda m: m.searchsorted(m.ones(0, 0), m.ones(0, 0)), (0, 0)),
    ("searchsorted (0, 3)", lambda m: m.searchsorted(m.ones(0, 3), m.ones(0, 2)), (0, 2)),
    ("ldl_solve", _ldl_solve_empty, (0, 5)),
    ("fractional_max_pool3d", lambda m: m.nn.functional.fractional_max_pool3d(m.ones(0, 1, 4, 5, 4), (2, 2, 1),
                                                                             output_size=2), (0, 1, 2, 2, 2)),
    ("fractional_max_pool2d", lambda m: m.nn.functional.fractional_max_pool2d(m.ones(0, 1, 4, 5), 2, output_size=2),
     (0, 1, 2, 2)),
]


@pytest.mark.parametrize("name,fn,shape", EMPTY_CASES, ids=[c[0] for c in EMPTY_CASES])
def test_empty_inputs_give_empty_results(dg, name, fn, shape):
    assert tuple(fn(dg).shape) == shape


@pytest.mark.parametrize("name,fn,shape", EMPTY_CASES, ids=[c[0] for c in EMPTY_CASES])
def test_empty_results_are_torchs(name, fn, shape):
    torch = pytest.importorskip("torch")
    assert tuple(fn(torch).shape) == shape


def test_rdiv_and_constant_pad_nd(dg):
    from helpers import check_op
    x = dg.tensor([2.0, 4.0])
    np.testing.assert_allclose(x.__rdiv__(1.0).numpy(), [0.5, 0.25])
    np.testing.assert_array_equal(dg.constant_pad_nd(dg.ones(1, 2), [1, 0], 3.0).numpy(), [[3, 1, 1]])
    check_op(dg, [(2, 3)], lambda m, a: m.constant_pad_nd(a, [1, 2, 0, 1], -1.5),
             lambda a: np.pad(a, ((0, 1), (1, 2)), constant_values=-1.5), name="constant_pad_nd")


def test_gather_of_zero_dim_inputs_and_empty_indices(dg):
    torch = pytest.importorskip("torch")
    cases = [lambda m: m.gather(m.tensor(3.0), 0, m.tensor([0])), lambda m: m.gather(m.tensor(3.0), 0, m.tensor(0)),
             lambda m: m.gather(m.tensor(3.0), 0, m.tensor([0, 0])),
             lambda m: m.gather(m.arange(5.0), 0, m.zeros(2, 0, dtype=m.int64)),
             lambda m: m.gather(m.ones(2, 3), 1, m.zeros(0, dtype=m.int64))]
    for case in cases:
        ours, theirs = case(dg), case(torch)
        assert tuple(ours.shape) == tuple(theirs.shape)
        np.testing.assert_array_equal(ours.numpy(), theirs.numpy())
    x = dg.tensor(3.0, requires_grad=True)
    dg.gather(x, 0, dg.tensor([0, 0])).sum().backward()
    assert x.grad.item() == 2.0
    y = dg.ones(2, 3, requires_grad=True)
    dg.gather(y, 1, dg.zeros(2, 0, 4, dtype=dg.int64)).sum().backward()
    np.testing.assert_array_equal(y.grad.numpy(), np.zeros((2, 3)))
    with pytest.raises(RuntimeError):
        dg.gather(dg.arange(5.0), 0, dg.zeros(2, 1, dtype=dg.int64))       # non-empty: the ranks must agree


def test_cov_divisor_in_the_weights_dtype(dg):
    # torch forms the divisor sum(w) - correction * sum(w * aweights) / sum(w) in the weights' dtype: with float32
    # aweights [1e8, 1, 1] it is exactly 0 (float32 loses the ones), so torch warns and gives inf; in float64 it
    # would be 4 and the values finite
    torch = pytest.importorskip("torch")
    x = np.array([[1.0, 4.0, -2.0], [0.5, -3.0, 2.5]])
    aw = np.array([1e8, 1.0, 1.0], np.float32)
    with pytest.warns(UserWarning, match="degrees of freedom is <= 0"):
        ours = dg.cov(dg.tensor(x), aweights=dg.tensor(aw))
    theirs = torch.cov(torch.tensor(x), aweights=torch.tensor(aw))
    np.testing.assert_array_equal(ours.numpy(), theirs.numpy())
    finite = dg.cov(dg.tensor(x), aweights=dg.tensor(aw.astype(np.float64)))
    np.testing.assert_allclose(finite.numpy(), torch.cov(torch.tensor(x), aweights=torch.tensor(aw).double()).numpy())


def test_histogramdd_edges_in_any_order_as_torch(dg):
    # torch checks no order of given edges; its binary search decides the bins (numpy would refuse them)
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(5)
    points = rng.uniform(-9, 6, (40, 2)).astype(np.float32)
    edges = [np.array([-8.5, -1.8, -4.3, -2.4], np.float32), np.array([-8.0, 3.6, -8.1, 5.0], np.float32)]
    w = rng.random(40).astype(np.float32)
    for kwargs in ({}, {"density": True}, {"weight": True}):
        kw = dict(kwargs)
        ours_w = dg.tensor(w) if kw.pop("weight", False) else None
        theirs_w = None if ours_w is None else torch.tensor(w)
        ours = dg.histogramdd(dg.tensor(points), [dg.tensor(e) for e in edges], weight=ours_w, **kw)
        theirs = torch.histogramdd(torch.tensor(points), [torch.tensor(e) for e in edges], weight=theirs_w, **kw)
        np.testing.assert_allclose(ours.hist.numpy(), theirs.hist.numpy(), rtol=1e-5)
    empty = dg.histogramdd(dg.zeros(0, 2), [dg.tensor(e) for e in edges], density=True)
    assert tuple(empty.hist.shape) == (3, 3) and np.isnan(empty.hist.numpy()).all()      # 0 / 0, as torch
