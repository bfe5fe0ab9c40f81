"""Batching rules of the nn.functional-class ops and of torch.masked (the vmapA section of
python/dyngrad/_api/ops/vmap.py), on both engines: beyond tests/test_vmap_coverage.py's one sample per op (its
first argument batched), the other operands batched too (masks, targets, weights), rows with and without their own
N, and gradients through vmap against the loop's; torch.func.vmap where torch is installed.
"""
import importlib

import numpy as np
import pytest

B = 3
RNG = np.random.default_rng(7)


def _r(*shape):
    return RNG.standard_normal(shape)


def _pos(*shape):
    return np.abs(RNG.standard_normal(shape)) + 0.5


def _vm(dg):
    return importlib.import_module(dg.__name__ + "._api.ops.vmap")


def _tensor(dg, a):
    a = np.asarray(a)
    if a.dtype == bool:
        return dg.tensor(a)
    if a.dtype.kind in "iu":
        return dg.tensor(a, dtype=dg.int64)
    if a.dtype.kind == "c":
        return dg.complex(dg.tensor(a.real.copy()), dg.tensor(a.imag.copy()))
    return dg.tensor(a, dtype=dg.float64)


def _np(t):
    t = t.detach()
    if t.is_complex():
        return t.numpy().astype(np.complex128) if not hasattr(t, "real") else (
            np.asarray(t.real.numpy()) + 1j * np.asarray(t.imag.numpy()))
    return t.numpy()


def _leaves(out):
    if isinstance(out, (tuple, list)):
        return [x for o in out for x in _leaves(o)]
    return [out]


def check(dg, fn, arrays, in_dims=0, grad=(), rtol=1e-9, atol=1e-11):
    """vmap(fn)(*arrays) equals the stacked loop over the rows, with no fallback; for the argument positions in
    `grad`, the gradient of a weighted sum of the outputs through vmap equals the loop's."""
    vm = _vm(dg)
    dims = in_dims if isinstance(in_dims, tuple) else (in_dims,) * len(arrays)

    def fresh():
        ts = [_tensor(dg, a) for a in arrays]
        for k in grad:
            ts[k].requires_grad_(True)
        return ts
    tensors = fresh()
    vm.FALLBACKS.clear()
    got = dg.vmap(fn, in_dims=dims)(*tensors)
    assert not vm.FALLBACKS, f"the fallback loop ran for {sorted(set(vm.FALLBACKS))}"
    loop_in = fresh()
    rows = [fn(*[t if d is None else t.select(d, i) for t, d in zip(loop_in, dims)]) for i in range(B)]
    g_leaves = _leaves(got)
    weights = []
    for k, g in enumerate(g_leaves):
        want = np.stack([_np(_leaves(r)[k]) for r in rows])
        assert tuple(g.shape) == want.shape, (k, tuple(g.shape), want.shape)
        assert g.dtype == _leaves(rows[0])[k].dtype, (k, g.dtype, _leaves(rows[0])[k].dtype)
        np.testing.assert_allclose(_np(g), want, rtol=rtol, atol=atol, equal_nan=True)
        weights.append(RNG.standard_normal(want.shape) if want.dtype.kind == "f" else None)
    if not grad:
        return
    total = sum((g * _tensor(dg, w)).sum() for g, w in zip(g_leaves, weights) if w is not None)
    total.backward()
    loop_total = sum((_leaves(r)[k] * _tensor(dg, weights[k][i])).sum()
                     for i, r in enumerate(rows) for k in range(len(g_leaves)) if weights[k] is not None)
    loop_total.backward()
    for k in grad:
        np.testing.assert_allclose(_np(tensors[k].grad), _np(loop_in[k].grad), rtol=rtol, atol=atol)


def _F(dg):
    return dg.nn.functional


# ----- torch.masked -----------------------------------------------------------------------------------------------
_MASKED_REDUCE = ["sum", "prod", "amax", "amin", "mean", "logsumexp", "norm", "var", "std"]
_MASKED_ONE = ["cumsum", "cumprod", "median", "softmax", "log_softmax", "softmin"]


@pytest.mark.parametrize("name", _MASKED_REDUCE)
def test_masked_reductions_with_batched_masks(dg, name):
    op = getattr(dg.masked, name)
    x, m = _r(B, 3, 4), RNG.uniform(size=(B, 3, 4)) > 0.3
    check(dg, lambda a, k: op(a, mask=k), [x, m], grad=(0,) if name not in ("amax", "amin") else ())
    check(dg, lambda a, k: op(a, dim=1, mask=k), [x, m])
    check(dg, lambda a, k: op(a, dim=(0, -1), keepdim=True, mask=k), [x, m])
    check(dg, lambda a, k: op(a, dim=-1, mask=k), [x, m[0, 0]], (0, None))   # an unbatched mask that broadcasts
    check(dg, lambda a, k: op(a, dim=0, mask=k), [x[0], m], (None, 0))       # only the mask batched
    check(dg, lambda a: op(a, dim=1), [x], grad=(0,) if name not in ("amax", "amin") else ())


@pytest.mark.parametrize("name", _MASKED_ONE + ["normalize"])
def test_masked_one_dim_ops_with_batched_masks(dg, name):
    op = getattr(dg.masked, name)
    x, m = _r(B, 3, 4), RNG.uniform(size=(B, 3, 4)) > 0.3
    m[:, :, 0] = True                              # no fully masked slice (median of it is nan, as the loop's)
    if name == "normalize":
        check(dg, lambda a, k: op(a, 2.0, 1, mask=k), [x, m], grad=(0,))
        check(dg, lambda a, k: op(a, 1.0, -1, mask=k), [x, m[0]], (0, None))
        return
    check(dg, lambda a, k: op(a, 1, mask=k), [x, m], grad=(0,) if name != "median" else ())
    check(dg, lambda a, k: op(a, -2, mask=k), [x, m[0]], (0, None))
    check(dg, lambda a, k: op(a, 0, mask=k), [x[0], m], (None, 0))


@pytest.mark.parametrize("name", ["argmax", "argmin"])
def test_masked_argmax_over_the_flattened_row(dg, name):
    op = getattr(dg.masked, name)
    x, m = _r(B, 3, 4), RNG.uniform(size=(B, 3, 4)) > 0.3
    check(dg, lambda a, k: op(a, mask=k), [x, m])
    check(dg, lambda a, k: op(a, 1, keepdim=True, mask=k), [x, m])
    check(dg, lambda a, k: op(a, None, mask=k), [x, m[0]], (0, None))


def test_masked_logaddexp_with_two_masks(dg):
    x, y = _r(B, 3, 4), _r(4)
    mx, my = RNG.uniform(size=(B, 3, 4)) > 0.3, RNG.uniform(size=(B, 4)) > 0.3
    check(dg, lambda a, b, p, q: dg.masked.logaddexp(a, b, input_mask=p, other_mask=q), [x, y, mx, my],
          (0, None, 0, 0), grad=(0, 1))


# ----- losses with the aten rows' int reductions --------------------------------------------------------------------
@pytest.mark.parametrize("reduction", [0, 1, 2])
def test_aten_losses_with_int_reductions(dg, reduction):
    x, y, t = _r(B, 2, 4), _r(B, 2, 4), np.sign(_r(B, 2, 4))
    check(dg, lambda a, b: dg.kl_div(a, b, reduction), [x, _pos(B, 2, 4)], grad=(0, 1))
    check(dg, lambda a, b: dg.binary_cross_entropy_with_logits(a, b, reduction=reduction),
          [x, RNG.uniform(size=(2, 4))], (0, None), grad=(0,))
    check(dg, lambda a, b, c: dg.margin_ranking_loss(a, b, c, 0.1, reduction), [x, y, t], grad=(0, 1))
    check(dg, lambda a, c: dg.hinge_embedding_loss(a, c, 1.0, reduction), [x, t], grad=(0,))
    check(dg, lambda a, b: dg.poisson_nll_loss(a, b, True, True, 1e-8, reduction), [x, _pos(B, 2, 4) * 3],
          grad=(0,))


# ----- layers ------------------------------------------------------------------------------------------------------
def test_prelu(dg):
    x = _r(B, 2, 3, 4)
    check(dg, lambda a, w: dg.prelu(a, w), [x, _pos(3)], (0, None), grad=(0, 1))
    check(dg, lambda a, w: _F(dg).prelu(a, w), [x, _pos(1)], (0, None), grad=(0, 1))
    check(dg, lambda a, w: dg.prelu(a, w), [x, _pos(B, 3)], 0, grad=(0, 1))            # per-sample weights
    check(dg, lambda a, w: dg.prelu(a, w), [x[:, 0], _pos(B, 1)], (0, 0), grad=(0, 1))
    check(dg, lambda a, w: dg.prelu(a, w), [x[:, 0, 0], _pos(1)], (0, None))           # a 1-D row, one weight


@pytest.mark.parametrize("spatial", [1, 2, 3])
def test_conv_transpose(dg, spatial):
    op = getattr(dg, f"conv_transpose{spatial}d")
    k = (3,) * spatial
    x, xs = _r(B, 2, 4, *(4,) * spatial), _r(B, 4, *(4,) * spatial)
    check(dg, lambda a, w: op(a, w, stride=2, padding=1), [x, _r(4, 3, *k)], (0, None), grad=(0, 1))
    check(dg, lambda a, w, b: op(a, w, b), [xs, _r(4, 3, *k), _r(3)], (0, None, None))
    check(dg, lambda a, w, b: op(a, w, b, groups=2), [x, _r(B, 4, 1, *k), _r(B, 2)], 0, grad=(0, 1, 2))
    check(dg, lambda a, w: op(a, w), [x[0], _r(B, 4, 3, *k)], (None, 0), grad=(0, 1))


def test_conv_tbc_bilinear_unfold_pixel_unshuffle(dg):
    check(dg, lambda a, w, b: dg.conv_tbc(a, w, b, 1), [_r(B, 5, 2, 3), _r(3, 3, 4), _r(4)], (0, None, None),
          grad=(0, 1, 2))
    check(dg, lambda a, b, w: dg.bilinear(a, b, w), [_r(B, 2, 3), _r(B, 2, 4), _r(5, 3, 4)], (0, 0, None),
          grad=(0, 1, 2))
    check(dg, lambda a, b, w, c: _F(dg).bilinear(a, b, w, c), [_r(B, 3), _r(4), _r(5, 3, 4), _r(5)],
          (0, None, None, None), grad=(0, 1))
    check(dg, lambda a: (a.unfold(1, 2, 1), dg.unfold_copy(a, -1, 3, 2), a.unfold(0, 2, 2)), [_r(B, 4, 5)],
          grad=(0,))
    check(dg, lambda a: (dg.pixel_unshuffle(a, 2), _F(dg).pixel_unshuffle(a, 2)), [_r(B, 2, 1, 4, 6)], grad=(0,))


def test_stft_and_istft(dg):
    x = _r(B, 2, 16)
    check(dg, lambda a: dg.stft(a, 4, hop_length=2, return_complex=False), [x], grad=(0,))
    check(dg, lambda a: dg.stft(a, 4, hop_length=1, window=dg.ones(4, dtype=dg.float64), center=False,
                                return_complex=False), [x[:, 0]], grad=(0,))
    spec = dg.stft(_tensor(dg, x.reshape(-1, 16)), 4, hop_length=1, window=dg.ones(4, dtype=dg.float64),
                   return_complex=True)
    spec = spec.reshape((B, 2) + tuple(spec.shape[1:]))
    vm = _vm(dg)
    vm.FALLBACKS.clear()
    got = dg.vmap(lambda s: dg.istft(s, 4, hop_length=1, window=dg.ones(4, dtype=dg.float64)))(spec)
    assert not vm.FALLBACKS
    want = np.stack([dg.istft(spec[i], 4, hop_length=1, window=dg.ones(4, dtype=dg.float64)).numpy()
                     for i in range(B)])
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-9, atol=1e-11)
    np.testing.assert_allclose(got.numpy(), x, rtol=1e-9, atol=1e-9)          # the round trip


# ----- against torch.func.vmap -------------------------------------------------------------------------------------
def test_against_torch_func_vmap(dg):
    torch = pytest.importorskip("torch")
    x, m, w = _r(B, 3, 4), RNG.uniform(size=(B, 3, 4)) > 0.3, _pos(3)
    img = _r(B, 2, 3, 4, 4)
    cases = [
        (lambda M, a, k: M.masked.sum(a, 1, mask=k), [x, m]),
        (lambda M, a, k: M.masked.softmax(a, -1, mask=k), [x, m]),
        (lambda M, a, k: M.masked.var(a, mask=k), [x, m]),
        (lambda M, a, v: M.nn.functional.prelu(a, v), [img, np.broadcast_to(w, (B, 3)).copy()]),
        (lambda M, a, v: M.nn.functional.conv_transpose2d(a, v, stride=2), [img, _r(B, 3, 2, 3, 3)]),
    ]
    for fn, arrays in cases:
        got = dg.vmap(lambda *a: fn(dg, *a))(*[_tensor(dg, a) for a in arrays]).detach().numpy()
        with torch.no_grad():
            want = torch.func.vmap(lambda *a: fn(torch, *a))(*[torch.from_numpy(np.asarray(a)) for a in arrays])
        np.testing.assert_allclose(got, want.numpy(), rtol=1e-9, atol=1e-11, equal_nan=True)
