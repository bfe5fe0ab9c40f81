"""dyngrad.masked (torch.masked): every function with mask=, on both engines, against numpy where the definition is
short, torch where installed, and finite differences (the gradient reaches the kept elements only)."""
import importlib
import math

import numpy as np
import pytest

from helpers import check_op, check_torch, draw_inputs, seed_of

# a mask with a fully masked row (row 0) and a fully kept one (row 2), and one that broadcasts over rows
MASK = np.array([[False, False, False, False], [True, False, True, True], [True, True, True, True]])
ROW_MASK = np.array([True, False, True, True])


def kept(x, mask, fill):
    return np.where(mask, x, fill)


def np_var(x, mask, axis, ddof):
    count = mask.sum(axis, keepdims=True)
    mean = kept(x, mask, 0).sum(axis, keepdims=True) / count
    total = kept((x - mean) ** 2, mask, 0).sum(axis)
    return total / np.maximum(count.squeeze(axis) - ddof, 0)


def np_softmax(x, mask, axis):
    e = np.exp(kept(x, mask, -np.inf) - kept(x, mask, -np.inf).max(axis, keepdims=True))
    return e / e.sum(axis, keepdims=True)


# name, fn(m, x, mask), numpy oracle(x, mask) or None, mask, gradient checked
CASES = [
    ("sum", lambda m, x, k: m.masked.sum(x, 1, mask=k), lambda x, k: kept(x, k, 0).sum(1), MASK, True),
    ("sum_all", lambda m, x, k: m.masked.sum(x, mask=k), lambda x, k: kept(x, k, 0).sum(), MASK, True),
    ("sum_keepdim", lambda m, x, k: m.masked.sum(x, (0, 1), keepdim=True, mask=k),
     lambda x, k: kept(x, k, 0).sum((0, 1), keepdims=True), ROW_MASK, True),
    ("prod", lambda m, x, k: m.masked.prod(x, 1, mask=k), lambda x, k: kept(x, k, 1).prod(1), MASK, True),
    ("cumsum", lambda m, x, k: m.masked.cumsum(x, 1, mask=k), lambda x, k: kept(x, k, 0).cumsum(1), MASK, True),
    ("cumprod", lambda m, x, k: m.masked.cumprod(x, 1, mask=k), lambda x, k: kept(x, k, 1).cumprod(1), MASK, True),
    ("amax", lambda m, x, k: m.masked.amax(x, 1, mask=k), lambda x, k: kept(x, k, -np.inf).max(1), MASK, False),
    ("amax_kept_rows", lambda m, x, k: m.masked.amax(x, 1, mask=k), lambda x, k: kept(x, k, -np.inf).max(1),
     ROW_MASK, True),
    ("amin", lambda m, x, k: m.masked.amin(x, 0, mask=k), lambda x, k: kept(x, k, np.inf).min(0), ROW_MASK, False),
    ("argmax", lambda m, x, k: m.masked.argmax(x, 1, mask=k),
     lambda x, k: kept(x, k, -np.inf).argmax(1).astype(x.dtype), ROW_MASK, False),
    ("argmin", lambda m, x, k: m.masked.argmin(x, 1, mask=k),
     lambda x, k: kept(x, k, np.inf).argmin(1).astype(x.dtype), ROW_MASK, False),
    ("mean", lambda m, x, k: m.masked.mean(x, 1, mask=k), lambda x, k: kept(x, k, 0).sum(1) / k.sum(1), MASK, False),
    ("mean_kept_rows", lambda m, x, k: m.masked.mean(x, 1, mask=k),
     lambda x, k: kept(x, k, 0).sum(1) / np.broadcast_to(k, x.shape).sum(1), ROW_MASK, True),
    ("median", lambda m, x, k: m.masked.median(x, 1, mask=k),
     lambda x, k: np.nanmedian(kept(x, k, np.nan), 1), ROW_MASK, False),
    ("logsumexp", lambda m, x, k: m.masked.logsumexp(x, 1, mask=k),
     lambda x, k: np.log(np.exp(kept(x, k, -np.inf)).sum(1)), ROW_MASK, True),
    ("norm", lambda m, x, k: m.masked.norm(x, 2.0, 1, mask=k),
     lambda x, k: np.sqrt((kept(x, k, 0) ** 2).sum(1)), ROW_MASK, True),
    ("norm_inf", lambda m, x, k: m.masked.norm(x, math.inf, 1, mask=k),
     lambda x, k: np.abs(kept(x, k, 0)).max(1), ROW_MASK, False),
    ("var", lambda m, x, k: m.masked.var(x, 1, mask=k), lambda x, k: np_var(x, np.broadcast_to(k, x.shape), 1, 1),
     ROW_MASK, True),
    ("var_correction0", lambda m, x, k: m.masked.var(x, 1, correction=0, mask=k),
     lambda x, k: np_var(x, np.broadcast_to(k, x.shape), 1, 0), ROW_MASK, True),
    ("std", lambda m, x, k: m.masked.std(x, 1, unbiased=False, mask=k),
     lambda x, k: np.sqrt(np_var(x, np.broadcast_to(k, x.shape), 1, 0)), ROW_MASK, True),
    ("softmax", lambda m, x, k: m.masked.softmax(x, 1, mask=k), lambda x, k: np_softmax(x, k, 1), ROW_MASK, True),
    ("log_softmax", lambda m, x, k: m.masked.log_softmax(x, 1, mask=k),
     lambda x, k: np.log(np_softmax(x, np.broadcast_to(k, x.shape), 1)), ROW_MASK, False),
    ("softmin", lambda m, x, k: m.masked.softmin(x, 1, mask=k), lambda x, k: np_softmax(-x, k, 1), ROW_MASK, True),
    ("normalize", lambda m, x, k: m.masked.normalize(x, 2.0, 1, mask=k),
     lambda x, k: kept(x, k, 0) / np.sqrt((kept(x, k, 0) ** 2).sum(1, keepdims=True)), ROW_MASK, True),
    ("logaddexp", lambda m, x, k: m.masked.logaddexp(x, x * 2, input_mask=k, other_mask=k),
     lambda x, k: np.logaddexp(kept(x, k, -np.inf), kept(2 * x, k, -np.inf)), ROW_MASK, False),
]
IDS = [c[0] for c in CASES]


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_masked_against_numpy_and_gradcheck(dg, case):
    name, fn, oracle, mask, grad = case
    def numpy_oracle(x, k):
        with np.errstate(invalid="ignore", divide="ignore"):     # fully masked rows: 0/0 and log(0), as torch
            return oracle(x, np.broadcast_to(k, x.shape))
    check_op(dg, [(3, 4), mask], fn, numpy_oracle, name=f"masked.{name}", grad=grad, noncontig=False)


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_masked_matches_torch(dg, case):
    torch = pytest.importorskip("torch")
    del torch
    name, fn, _, mask, grad = case
    arrays = draw_inputs([np.zeros((3, 4)), mask], seed_of("masked", name))
    arrays[0] = np.random.default_rng(seed_of("masked", name)).standard_normal((3, 4))
    check_torch(dg, fn, arrays, [0] if grad else [], name=f"masked.{name}")


def test_masked_without_mask_is_the_plain_op(dg):
    x = dg.tensor([[1.0, -2.0, 3.0], [0.5, 4.0, -1.0]])
    np.testing.assert_allclose(dg.masked.sum(x, 1).numpy(), x.sum(1).numpy())
    np.testing.assert_allclose(dg.masked.softmax(x, 0).numpy(), x.softmax(0).numpy())
    np.testing.assert_allclose(dg.masked.var(x, 1).numpy(), x.var(1).numpy(), rtol=1e-6)


def test_masked_integer_sum_is_int64_and_amax_uses_the_dtype_minimum(dg):
    x = dg.tensor([[1, 2], [3, 4]], dtype=dg.int32)
    mask = dg.tensor([[True, False], [False, False]])
    s = dg.masked.sum(x, 1, mask=mask)
    assert s.dtype == dg.int64 and s.tolist() == [1, 0]
    assert dg.masked.amax(x, 1, mask=mask).tolist() == [1, -2 ** 31]


def test_masked_bad_arguments_name_the_op(dg):
    x = dg.ones(2, 3)
    with pytest.raises(IndexError, match="masked.sum.*mask"):
        dg.masked.sum(x, mask=dg.ones(1, 2, 3, dtype=dg.bool))
    with pytest.raises(IndexError, match="masked.amax.*Dimension out of range"):
        dg.masked.amax(x, 2, mask=dg.ones(2, 3, dtype=dg.bool))
    with pytest.raises(RuntimeError, match="masked.sum.*appears multiple times"):
        dg.masked.sum(x, (1, -1), mask=dg.ones(2, 3, dtype=dg.bool))
    with pytest.raises(ValueError, match="masked.mean.*floating point"):
        dg.masked.mean(dg.ones(2, dtype=dg.int64), mask=dg.ones(2, dtype=dg.bool))
    with pytest.raises(TypeError, match="masked.sum.*mask"):
        dg.masked.sum(x, mask=[True, False, True])


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_masked_under_vmap_is_the_loop(dg, case):
    """Every masked function under dyngrad.func.vmap (Note [One dispatch wrapper]: masked.* go through the wrapper
    that hands them to vmap's dispatcher; before, a BatchedTensor reached the core and pybind refused it) gives the
    stack of its per-sample calls, the mask batched with the input, by its batching rule (Note [torch.masked's
    rules] in _api/ops/vmap.py), not the loop."""
    name, fn, _, mask, _ = case
    rng = np.random.default_rng(seed_of("masked_vmap", name))
    x = rng.standard_normal((5, 3, 4))
    masks = np.broadcast_to(mask, (5,) + mask.shape) & (rng.uniform(size=(5,) + mask.shape) < 0.8)
    xs, ks = dg.tensor(x), dg.tensor(np.ascontiguousarray(masks))
    vm = importlib.import_module(dg.__name__ + "._api.ops.vmap")
    vm.FALLBACKS.clear()
    batched = dg.func.vmap(lambda a, k: fn(dg, a, k))(xs, ks)
    assert not vm.FALLBACKS, f"the fallback loop ran for {sorted(set(vm.FALLBACKS))}"
    looped = dg.stack([fn(dg, xs[i], ks[i]) for i in range(5)])
    assert batched.shape == looped.shape and batched.dtype == looped.dtype
    np.testing.assert_allclose(batched.numpy(), looped.numpy(), rtol=1e-12, equal_nan=True)
