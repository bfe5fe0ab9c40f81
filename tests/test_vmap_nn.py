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


# ----- per-sample losses, folded into N ----------------------------------------------------------------------------
@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
def test_per_sample_losses(dg, reduction):
    F = _F(dg)
    x, y, z, t = _r(B, 2, 4), _r(B, 2, 4), _r(B, 2, 4), np.sign(_r(B, 2))
    labels = RNG.integers(0, 4, (B, 2))
    multi = np.where(RNG.uniform(size=(B, 2, 4)) > 0.5, RNG.integers(0, 4, (B, 2, 4)), -1)
    check(dg, lambda a, b, c: F.cosine_embedding_loss(a, b, c, 0.1, reduction=reduction), [x, y, t], grad=(0, 1))
    check(dg, lambda a, b, c: F.cosine_embedding_loss(a, b, c, reduction=reduction), [x[:, 0], y[0, 0], t[:, 0]],
          (0, None, 0), grad=(0,))
    check(dg, lambda a, b, c: F.triplet_margin_loss(a, b, c, swap=True, reduction=reduction), [x, y, z],
          grad=(0, 1, 2))
    check(dg, lambda a, b, c: dg.triplet_margin_loss(a, b, c, 1.0, 2, 1e-6, False, {"none": 0, "mean": 1,
                                                                                    "sum": 2}[reduction]),
          [x[:, 0], y[:, 0], z[0, 0]], (0, 0, None), grad=(0,))
    check(dg, lambda a, c: F.multi_margin_loss(a, c, p=2, reduction=reduction), [x, labels], grad=(0,))
    check(dg, lambda a, c, w: F.multi_margin_loss(a, c, weight=w, reduction=reduction), [x[:, 0], labels[:, 0],
                                                                                         _pos(4)], (0, 0, None))
    check(dg, lambda a, c, w: F.multi_margin_loss(a, c, margin=0.5, weight=w, reduction=reduction),
          [x, labels, _pos(B, 4)], grad=(0, 2))                        # per-row class weights
    check(dg, lambda a, c, w: F.multi_margin_loss(a, c, p=2, weight=w, reduction=reduction),
          [x[0, 0], labels[:, 0], _pos(B, 4)], (None, 0, 0), grad=(0, 2))
    check(dg, lambda a, c, w: F.multilabel_soft_margin_loss(a, c, w, reduction=reduction),
          [x, (RNG.uniform(size=(2, 4)) > 0.5) * 1.0, _pos(B, 4)], (0, None, 0), grad=(0, 2))
    check(dg, lambda a, c, w: F.multilabel_soft_margin_loss(a, c, w, reduction=reduction),
          [x[:, 0], (RNG.uniform(size=(B, 4)) > 0.5) * 1.0, _pos(B, 4)], 0, grad=(0, 2))
    check(dg, lambda a, c: F.multilabel_margin_loss(a, c, reduction=reduction), [x, multi], grad=(0,))
    check(dg, lambda a, c, w: F.multilabel_soft_margin_loss(a, c, w, reduction=reduction),
          [x, (RNG.uniform(size=(B, 2, 4)) > 0.5) * 1.0, _pos(4)], (0, 0, None), grad=(0,))


def test_triplet_margin_with_a_distance_function(dg):
    F = _F(dg)
    x, y, z = _r(B, 2, 4), _r(B, 2, 4), _r(2, 4)

    def l1(a, b):
        return (a - b).abs().sum(-1)
    check(dg, lambda a, b, c: F.triplet_margin_with_distance_loss(a, b, c, distance_function=l1, swap=True),
          [x, y, z], (0, 0, None), grad=(0, 1))
    check(dg, lambda a, b, c: F.triplet_margin_with_distance_loss(a, b, c, distance_function=l1,
                                                                  reduction="none"), [x, y[0], z], (0, None, None))
    check(dg, lambda a, b, c: F.triplet_margin_with_distance_loss(a, b, c, margin=0.5), [x, y, z], (0, 0, None),
          grad=(0, 1))


def test_gaussian_nll_loss(dg):
    F = _F(dg)
    x, y = _r(B, 2, 4), _r(B, 2, 4)
    check(dg, lambda a, b, v: F.gaussian_nll_loss(a, b, v), [x, y, _pos(B, 2, 4)], grad=(0, 1, 2))
    check(dg, lambda a, b, v: F.gaussian_nll_loss(a, b, v, full=True, reduction="sum"), [x, y, _pos(B, 2)],
          grad=(0, 2))                                                     # one variance per row of the last dim
    check(dg, lambda a, b, v: F.gaussian_nll_loss(a, b, v, reduction="none"), [x, y[0], _pos(2, 1)],
          (0, None, None), grad=(0,))                                      # size 1 in one dim
    check(dg, lambda a, b: F.gaussian_nll_loss(a, b, 0.7), [x, y], grad=(0,))


@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
def test_ctc_loss(dg, reduction):
    F = _F(dg)
    t_len, n, c, s = 6, 2, 4, 3
    lp = _r(B, t_len, n, c)
    targets = RNG.integers(1, c, (B, n, s))
    il = np.array([[6, 5], [4, 6], [6, 6]])
    tl = np.array([[3, 2], [1, 3], [2, 2]])

    def fn(a, b, i, j):
        return F.ctc_loss(a.log_softmax(-1), b, i, j, reduction=reduction)
    check(dg, fn, [lp, targets, il, tl], grad=(0,))
    check(dg, fn, [lp, targets[0], il[0], tl], (0, None, None, 0), grad=(0,))
    # unbatched rows: (T, C) log-probabilities, (S,) targets, 0-d lengths
    check(dg, fn, [lp[:, :, 0], targets[:, 0], il[:, 0], tl[:, 0]], grad=(0,))
    check(dg, lambda a, b, i, j: dg.ctc_loss(a.log_softmax(-1), b, i, j, 0, 1, True), [lp, targets, il, tl],
          grad=(0,))
    # lengths as Python lists (shared by the rows), and 0-d ones as ints
    check(dg, lambda a, b: F.ctc_loss(a.log_softmax(-1), b, [6, 5], [3, 1], reduction=reduction), [lp, targets],
          grad=(0,))
    check(dg, lambda a, b: F.ctc_loss(a.log_softmax(-1), b, 5, 2, reduction=reduction),
          [lp[:, :, 0], targets[:, 0]], grad=(0,))
    # concatenated targets: each row's own lengths split its (sum of lengths,) vector
    flat = RNG.integers(1, c, (B, 5))
    check(dg, lambda a, b, j: F.ctc_loss(a.log_softmax(-1), b, [6, 6], j, reduction=reduction),
          [lp, flat, np.array([[3, 2], [1, 3], [0, 4]])], grad=(0,))


# ----- sampling, unpooling, bags --------------------------------------------------------------------------------
def test_grid_sample_and_affine_grid(dg):
    F = _F(dg)
    img, grid = _r(B, 2, 3, 5, 5), RNG.uniform(-1, 1, (B, 2, 4, 4, 2))
    check(dg, lambda a, g: F.grid_sample(a, g, align_corners=False), [img, grid], grad=(0, 1))
    check(dg, lambda a, g: F.grid_sample(a, g, mode="nearest", align_corners=True), [img[0], grid], (None, 0))
    check(dg, lambda a, g: F.grid_sample(a, g, padding_mode="border", align_corners=False), [img, grid[0]],
          (0, None), grad=(0,))
    check(dg, lambda th: F.affine_grid(th, (2, 3, 4, 5), align_corners=False), [_r(B, 2, 2, 3)], grad=(0,))
    check(dg, lambda th: F.affine_grid(th, [1, 3, 2, 3, 4], align_corners=True), [_r(B, 1, 3, 4)], grad=(0,))


@pytest.mark.parametrize("spatial", [1, 2, 3])
def test_max_unpool(dg, spatial):
    F = _F(dg)
    pool, unpool = getattr(F, f"max_pool{spatial}d"), getattr(F, f"max_unpool{spatial}d")
    x = _r(B, 2, 3, *(4,) * spatial)

    def fn(a):
        values, idx = pool(a, 2, return_indices=True)
        return unpool(values, idx, 2), unpool(values, idx, 2, output_size=(5,) * spatial)
    check(dg, fn, [x], grad=(0,))
    check(dg, fn, [x[:, 0]], grad=(0,))
    values, idx = pool(_tensor(dg, x[0]), 2, return_indices=True)
    vals = _r(B, *values.shape)
    check(dg, lambda v, i: unpool(v, i, 2, output_size=(2, 3) + (4,) * spatial), [vals, idx.numpy()], (0, None),
          grad=(0,))


def test_fractional_max_pool(dg):
    F = _F(dg)
    x = _r(B, 2, 3, 7, 7)
    samples = RNG.uniform(size=(B, 2, 3, 2))
    check(dg, lambda a, u: F.fractional_max_pool2d(a, 2, output_size=3, _random_samples=u), [x, samples],
          grad=(0,))
    check(dg, lambda a, u: F.fractional_max_pool2d_with_indices(a, 2, output_size=3, _random_samples=u),
          [x, samples[0]], (0, None), grad=(0,))
    check(dg, lambda a, u: F.fractional_max_pool3d(a, 2, output_ratio=0.5, _random_samples=u),
          [_r(B, 2, 1, 5, 5, 5), RNG.uniform(size=(B, 2, 1, 3))], grad=(0,))
    # the windows drawn inside vmap: each value is the max of the row's input at its index
    vm = _vm(dg)
    vm.FALLBACKS.clear()
    xt = _tensor(dg, x)
    values, idx = dg.vmap(lambda a: F.fractional_max_pool2d(a, 2, output_size=3, return_indices=True),
                          randomness="different")(xt)
    assert not vm.FALLBACKS and tuple(values.shape) == (B, 2, 3, 3, 3)
    flat = x.reshape(B, 2, 3, 49)
    np.testing.assert_array_equal(values.numpy(), np.take_along_axis(flat, idx.numpy().reshape(B, 2, 3, 9), -1)
                                  .reshape(B, 2, 3, 3, 3))


def test_embedding_bag(dg):
    F = _F(dg)
    w = _r(10, 3)
    idx = RNG.integers(0, 10, (B, 7))
    offsets = np.array([0, 2, 2, 5])
    boffsets = np.array([[0, 3, 4, 6], [0, 1, 2, 3], [0, 0, 7, 7]])
    for mode in ("sum", "mean", "max"):
        check(dg, lambda i, o, v: F.embedding_bag(i, v, o, mode=mode), [idx, offsets, w], (0, None, None),
              grad=(2,))
        check(dg, lambda i, o, v: F.embedding_bag(i, v, o, mode=mode, padding_idx=3), [idx, boffsets, w],
              (0, 0, None), grad=(2,))
        check(dg, lambda i, v: F.embedding_bag(i, v, mode=mode), [idx.reshape(B, 1, 7), w], (0, None), grad=(1,))
    check(dg, lambda i, o, v: F.embedding_bag(i, v, o, include_last_offset=True), [idx, np.array([0, 3, 7]), w],
          (0, None, None), grad=(2,))
    check(dg, lambda i, o, v, p: F.embedding_bag(i, v, o, mode="sum", per_sample_weights=p),
          [idx, offsets, w, _r(B, 7)], (0, None, None, 0), grad=(2, 3))


# ----- batch and instance norm ----------------------------------------------------------------------------------
@pytest.mark.parametrize("kind", ["batch", "instance"])
def test_norms_with_running_statistics(dg, kind):
    F = _F(dg)
    op = F.batch_norm if kind == "batch" else F.instance_norm
    x = _r(B, 4, 3, 5)
    w, b, rm, rv = _pos(3), _r(3), _r(3), _pos(3)

    def run(batched):
        stats = [_tensor(dg, rm), _tensor(dg, rv)]
        xt, wt, bt = _tensor(dg, x).requires_grad_(), _tensor(dg, w).requires_grad_(), _tensor(dg, b)
        if kind == "batch":
            def f(a):
                return op(a, stats[0], stats[1], wt, bt, True, 0.2)
        else:
            def f(a):
                return op(a, stats[0], stats[1], wt, bt, True, 0.2)
        vm = _vm(dg)
        vm.FALLBACKS.clear()
        out = dg.vmap(f)(xt) if batched else dg.stack([f(xt[i]) for i in range(B)])
        if batched:
            assert not vm.FALLBACKS, vm.FALLBACKS
        (out * _tensor(dg, np.linspace(-1, 1, out.numel()).reshape(tuple(out.shape)))).sum().backward()
        return out.detach().numpy(), stats[0].numpy(), stats[1].numpy(), xt.grad.numpy(), wt.grad.numpy()
    for got, want in zip(run(True), run(False)):
        np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-11)
    # eval (the running statistics used), a batched weight, no statistics at all
    check(dg, lambda a, m, v, s: op(a, m, v, s, None, False) if kind == "batch" else
          op(a, m, v, s, None, use_input_stats=False), [x, rm, rv, _pos(B, 3)], (0, None, None, 0), grad=(0, 3))
    check(dg, lambda a, s, t: op(a, None, None, s, t, True), [x, _pos(B, 3), _r(3)], (0, 0, None), grad=(0, 1, 2))


def test_batch_norm_with_batched_buffers(dg):
    """An ensemble's running statistics (batched buffers): each row's update goes to its own buffer."""
    F = _F(dg)
    x, rm, rv = _r(B, 4, 3), _r(B, 3), _pos(B, 3)
    rm_t, rv_t = _tensor(dg, rm), _tensor(dg, rv)
    vm = _vm(dg)
    vm.FALLBACKS.clear()
    out = dg.vmap(lambda a, m, v: F.batch_norm(a, m, v, training=True, momentum=0.3))(_tensor(dg, x), rm_t, rv_t)
    assert not vm.FALLBACKS
    for i in range(B):
        m, v = _tensor(dg, rm[i]), _tensor(dg, rv[i])
        want = F.batch_norm(_tensor(dg, x[i]), m, v, training=True, momentum=0.3)
        np.testing.assert_allclose(out[i].numpy(), want.numpy(), rtol=1e-9, atol=1e-11)
        np.testing.assert_allclose(rm_t[i].numpy(), m.numpy(), rtol=1e-9, atol=1e-11)
        np.testing.assert_allclose(rv_t[i].numpy(), v.numpy(), rtol=1e-9, atol=1e-11)


# ----- attention, linear_cross_entropy -----------------------------------------------------------------------------
def test_multi_head_attention_forward(dg):
    F = _F(dg)
    e, h, n, length, s = 4, 2, 2, 3, 5
    inw, inb, outw, outb = _r(3 * e, e), _r(3 * e), _r(e, e), _r(e)
    q, k = _r(B, length, n, e), _r(B, s, n, e)

    def mha(a, kv, w, kpm=None, mask=None, need=True, avg=True):
        return F.multi_head_attention_forward(a, kv, kv, e, h, w, _tensor(dg, inb), None, None, False, 0.0,
                                              _tensor(dg, outw), _tensor(dg, outb), key_padding_mask=kpm,
                                              need_weights=need, attn_mask=mask, average_attn_weights=avg)
    check(dg, lambda a, kv, w: mha(a, kv, w), [q, k, inw], (0, 0, None), grad=(0, 1, 2))
    check(dg, lambda a, kv, w: mha(a, kv, w, avg=False), [q, k[0], inw], (0, None, None), grad=(0, 2))
    check(dg, lambda a, kv, w: mha(a, kv, w, need=False)[0], [q[:, :, 0], k[:, :, 0], inw], (0, 0, None),
          grad=(0, 1))
    check(dg, lambda a, kv, w, m: mha(a, kv, w, mask=m, avg=False), [q[:, :, 0], k[:, :, 0], inw,
                                                                      _r(B, h, length, s)], (0, 0, None, 0),
          grad=(0, 1))                                       # unbatched rows, a per-head mask, per-head weights
    kpm = RNG.uniform(size=(B, n, s)) > 0.7
    kpm[..., 0] = False
    mask = RNG.uniform(size=(length, s)) > 0.8
    check(dg, lambda a, kv, w, p, m: mha(a, kv, w, kpm=p, mask=m), [q, k, inw, kpm, mask], (0, 0, None, 0, None),
          grad=(0,))
    check(dg, lambda a, kv, w, m: mha(a, kv, w, mask=m), [q, k, inw, _r(B, length, s)], (0, 0, None, 0))
    check(dg, lambda a, kv, w, m: mha(a, kv, w, mask=m), [q, k, inw, _r(B, n * h, length, s)], (0, 0, None, 0))


def test_multi_head_attention_forward_with_dropout(dg):
    F = _F(dg)
    e, h = 4, 2
    q = _tensor(dg, np.broadcast_to(_r(1, 3, 2, e), (B, 3, 2, e)).copy())
    w, b, outw, outb = (_tensor(dg, a) for a in (_r(3 * e, e), _r(3 * e), _r(e, e), _r(e)))
    vm = _vm(dg)
    vm.FALLBACKS.clear()
    out, weights = dg.vmap(lambda a: F.multi_head_attention_forward(a, a, a, e, h, w, b, None, None, False, 0.5,
                                                                    outw, outb, training=True))(q)
    assert not vm.FALLBACKS and tuple(out.shape) == (B, 3, 2, e) and tuple(weights.shape) == (B, 2, 3, 3)
    assert not np.allclose(out[0].numpy(), out[1].numpy())          # equal rows, each its own dropout mask


def test_linear_cross_entropy(dg):
    F = _F(dg)
    x, w, b = _r(B, 2, 4), _r(5, 4), _r(5)
    y = RNG.integers(0, 5, (B, 2))
    check(dg, lambda a, v, t: F.linear_cross_entropy(a, v, t), [x, w, y], (0, None, 0), grad=(0, 1))
    check(dg, lambda a, v, t, c: F.linear_cross_entropy(a, v, t, linear_bias=c, reduction="sum",
                                                        label_smoothing=0.1), [x, _r(B, 5, 4), y, b], (0, 0, 0, None),
          grad=(0, 1, 3))
    check(dg, lambda a, v, t: F.linear_cross_entropy(a, v, t, ignore_index=2, reduction="none"),
          [x[:, 0], w, y[:, 0]], (0, None, 0), grad=(0,))
    probs = RNG.uniform(size=(B, 2, 5))
    check(dg, lambda a, v, t: F.linear_cross_entropy(a, v, t), [x, w, probs / probs.sum(-1, keepdims=True)],
          (0, None, 0), grad=(0, 1))


def test_losses_and_layers_against_torch_func_vmap(dg):
    torch = pytest.importorskip("torch")
    x, y, t = _r(B, 2, 4), _r(B, 2, 4), np.sign(_r(B, 2))
    img, grid = _r(B, 2, 3, 5, 5), RNG.uniform(-1, 1, (B, 2, 4, 4, 2))
    cases = [
        (lambda M, a, b, c: M.nn.functional.cosine_embedding_loss(a, b, c), [x, y, t]),
        (lambda M, a, b, c: M.nn.functional.triplet_margin_loss(a, b, c, swap=True), [x, y, x[::-1].copy()]),
        (lambda M, a, g: M.nn.functional.grid_sample(a, g, align_corners=False), [img, grid]),
        (lambda M, a, c: M.nn.functional.multi_margin_loss(a, c), [x, RNG.integers(0, 4, (B, 2))]),
        (lambda M, a, w: M.nn.functional.batch_norm(a, None, None, w, None, True), [x, _pos(B, 4)]),
    ]
    for fn, arrays in cases:
        got = dg.vmap(lambda *a: fn(dg, *a))(*[_tensor(dg, a) for a in arrays]).detach().numpy()
        with torch.no_grad():
            want = torch.func.vmap(lambda *a: fn(torch, *a))(*[torch.from_numpy(np.asarray(a)) for a in arrays])
        np.testing.assert_allclose(got, want.numpy(), rtol=1e-8, atol=1e-10)


def test_nested_vmap_against_the_double_loop(dg):
    """Two levels at once (one BatchedTensor with two leading dims), operands batched at one level or both."""
    F = _F(dg)
    x, m = _tensor(dg, _r(2, B, 3, 4)), _tensor(dg, RNG.uniform(size=(2, 3, 4)) > 0.3)
    y, t = _tensor(dg, _r(B, 3, 4)), _tensor(dg, np.sign(_r(2, B, 3)))
    img, w = _tensor(dg, _r(2, B, 2, 4, 5, 5)), _tensor(dg, _r(2, 4, 3, 3, 3))
    cases = [
        (lambda a, k: dg.masked.sum(a, -1, mask=k), (x, m), (0, 0), (0, None)),       # mask: outer level only
        (lambda a, b, c: F.cosine_embedding_loss(a, b, c), (x, y, t), (0, None, 0), (0, 0, 0)),
        (lambda a, v: dg.conv_transpose2d(a, v, stride=2), (img, w), (0, 0), (0, None)),
        (lambda a, k: dg.masked.softmax(a, 1, mask=k), (x, m), (0, 0), (0, None)),
    ]
    vm = _vm(dg)
    for fn, args, outer, inner in cases:
        vm.FALLBACKS.clear()
        got = dg.vmap(dg.vmap(fn, in_dims=inner), in_dims=outer)(*args)
        assert not vm.FALLBACKS, vm.FALLBACKS
        for i in range(2):
            row = [a if d is None else a.select(d, i) for a, d in zip(args, outer)]
            for j in range(B):
                cell = [a if d is None else a.select(d, j) for a, d in zip(row, inner)]
                np.testing.assert_allclose(got[i, j].numpy(), fn(*cell).numpy(), rtol=1e-9, atol=1e-11)
    # running statistics under two levels: the rows' updates in the loop's order (outer first)
    xs = _r(2, B, 4, 3)
    stats = [[_tensor(dg, np.zeros(3)), _tensor(dg, np.ones(3))] for _ in range(2)]
    dg.vmap(dg.vmap(lambda a: F.batch_norm(a, stats[0][0], stats[0][1], training=True, momentum=0.3)))(
        _tensor(dg, xs))
    for i in range(2):
        for j in range(B):
            F.batch_norm(_tensor(dg, xs[i, j]), stats[1][0], stats[1][1], training=True, momentum=0.3)
    for got_stat, want_stat in zip(*stats):
        np.testing.assert_allclose(got_stat.numpy(), want_stat.numpy(), rtol=1e-9, atol=1e-11)


def test_batched_weights_of_bilinear_conv_tbc_embedding_bag(dg):
    """Batched weights (an ensemble, or per-sample gradients: func.grad inside vmap expands the weight to the
    batch), with no fallback, against the loop; then vmap(grad) with respect to the weight against the loop of
    grads."""
    F = _F(dg)
    check(dg, lambda a, b, w, c: dg.bilinear(a, b, w, c), [_r(B, 2, 3), _r(B, 2, 4), _r(B, 5, 3, 4), _r(5)],
          (0, 0, 0, None), grad=(0, 1, 2, 3))
    check(dg, lambda a, b, w, c: F.bilinear(a, b, w, c), [_r(3), _r(B, 4), _r(5, 3, 4), _r(B, 5)],
          (None, 0, None, 0), grad=(0, 1, 2, 3))
    check(dg, lambda a, w, c: dg.conv_tbc(a, w, c, 1), [_r(B, 5, 2, 3), _r(B, 3, 3, 4), _r(4)], (0, 0, None),
          grad=(0, 1, 2))
    check(dg, lambda a, w, c: dg.conv_tbc(a, w, c), [_r(5, 2, 3), _r(3, 3, 4), _r(B, 4)], (None, None, 0),
          grad=(0, 1, 2))
    idx = RNG.integers(0, 10, (B, 7))
    check(dg, lambda i, o, v: F.embedding_bag(i, v, o, mode="mean"), [idx, np.array([0, 2, 5]), _r(B, 10, 3)],
          (0, None, 0), grad=(2,))
    check(dg, lambda i, v: F.embedding_bag(i, v, mode="max"), [idx[0].reshape(1, 7), _r(B, 10, 3)], (None, 0),
          grad=(1,))
    for pad in (idx[0, 0], -3):                    # a padding index each row holds; a negative one
        check(dg, lambda i, o, v: F.embedding_bag(i, v, o, mode="mean", padding_idx=pad),
              [idx, np.array([0, 2, 5]), _r(B, 10, 3)], (0, None, 0), grad=(2,))
        check(dg, lambda i, v: F.embedding_bag(i, v, mode="sum", padding_idx=pad), [idx.reshape(B, 1, 7),
                                                                                     _r(B, 10, 3)], 0, grad=(1,))
    # per-sample gradients of each weight
    vm = _vm(dg)
    x1, x2, w = _tensor(dg, _r(B, 3)), _tensor(dg, _r(B, 4)), _tensor(dg, _r(5, 3, 4))
    seq, k, bias = _tensor(dg, _r(B, 5, 2, 3)), _tensor(dg, _r(3, 3, 4)), _tensor(dg, _r(4))
    table, ids = _tensor(dg, _r(10, 3)), _tensor(dg, idx.reshape(B, 1, 7))
    for loss, inputs, weight in (
            (lambda v, a, b: dg.bilinear(a, b, v).tanh().sum(), (x1, x2), w),
            (lambda v, a: dg.conv_tbc(a, v, bias, 1).tanh().sum(), (seq,), k),
            (lambda v, i: F.embedding_bag(i, v, mode="sum").tanh().sum(), (ids,), table)):
        vm.FALLBACKS.clear()
        got = dg.vmap(dg.func.grad(loss), in_dims=(None,) + (0,) * len(inputs))(weight, *inputs)
        assert not vm.FALLBACKS, sorted(set(vm.FALLBACKS))
        for i in range(B):
            want = dg.func.grad(loss)(weight, *[t[i] for t in inputs])
            np.testing.assert_allclose(got[i].numpy(), want.numpy(), rtol=1e-9, atol=1e-11)


def test_multi_head_attention_forward_with_batched_weights(dg):
    F = _F(dg)
    e, h, n, length, s = 4, 2, 2, 3, 5
    q, k = _r(B, length, n, e), _r(B, s, n, e)

    def mha(a, kv, w, b, wo, bo, mask=None, separate=None):
        extra = {} if separate is None else dict(use_separate_proj_weight=True, q_proj_weight=separate[0],
                                                 k_proj_weight=separate[1], v_proj_weight=separate[2])
        return F.multi_head_attention_forward(a, kv, kv, e, h, w, b, None, None, False, 0.0, wo, bo, attn_mask=mask,
                                              **extra)
    check(dg, mha, [q, k, _r(B, 3 * e, e), _r(B, 3 * e), _r(B, e, e), _r(e)], (0, 0, 0, 0, 0, None),
          grad=(0, 1, 2, 3, 4, 5))
    check(dg, lambda a, w, wo: mha(a, a, w, None, wo, None), [q[0], _r(B, 3 * e, e), _r(e, e)], (None, 0, None),
          grad=(0, 1, 2))
    out_w = _tensor(dg, _r(e, e))
    check(dg, lambda a, kv, wq, wk, wv: mha(a, kv, None, None, out_w, None, separate=(wq, wk, wv)),
          [q[:, :, 0], k[:, :, 0], _r(B, e, e), _r(e, e), _r(B, e, e)], (0, 0, 0, None, 0), grad=(0, 2, 3, 4))
    # per-sample gradients of the in-projection weight
    vm = _vm(dg)
    w, b, wo = _tensor(dg, _r(3 * e, e)), _tensor(dg, _r(3 * e)), _tensor(dg, _r(e, e))
    xs = _tensor(dg, q)

    def loss(weight, x):
        return mha(x, x, weight, b, wo, None)[0].tanh().sum()
    vm.FALLBACKS.clear()
    got = dg.vmap(dg.func.grad(loss), in_dims=(None, 0))(w, xs)
    assert not vm.FALLBACKS, sorted(set(vm.FALLBACKS))
    for i in range(B):
        np.testing.assert_allclose(got[i].numpy(), dg.func.grad(loss)(w, xs[i]).numpy(), rtol=1e-9, atol=1e-11)


def test_an_unbatched_input_of_rank_3_against_a_batched_weight(dg):
    """matmul/linear of an unbatched (L, N, E) input and a batched weight: the input's leading dim is its own, not
    the batch's (it was broadcast against the vmap dim when L == B, silently)."""
    F = _F(dg)
    check(dg, lambda a, w: F.linear(a, w), [_r(B, 2, 4), _r(B, 5, 4)], (None, 0), grad=(0, 1))
    check(dg, lambda a, w: a @ w, [_r(B, 2, 4), _r(B, 4, 5)], (None, 0), grad=(0, 1))
    check(dg, lambda a, w: dg.matmul(a, w), [_r(2, 2, 4), _r(B, 4, 5)], (None, 0))
