"""Convolutions against torch, on both engines: F.conv1d/conv2d/conv_transpose1d/conv_transpose2d/unfold/fold
(forward and the gradients of input, weight and bias over a grid of small configurations, gradcheck and
gradgradcheck in float64, torch's exception types) and the modules Conv1d/Conv2d/ConvTranspose1d/ConvTranspose2d/
Fold/Unfold (state_dict names and shapes, repr, init, padding modes, output_size)."""
import math

import numpy as np
import pytest

torch = pytest.importorskip("torch")
TF = torch.nn.functional

RNG = np.random.default_rng(1234)


def rnd(*shape):
    return RNG.standard_normal(shape)


# name, function, input shape, weight shape, bias length (or None), keyword arguments
CONV_CASES = [
    ("c2d_plain", "conv2d", (2, 3, 6, 5), (4, 3, 3, 3), 4, {}),
    ("c2d_stride_pad", "conv2d", (2, 3, 7, 6), (4, 3, 3, 2), 4, dict(stride=(2, 1), padding=(1, 2))),
    ("c2d_dilation", "conv2d", (1, 2, 8, 7), (3, 2, 3, 2), None, dict(dilation=(2, 3), padding=1)),
    ("c2d_groups", "conv2d", (2, 4, 5, 5), (6, 2, 3, 3), 6, dict(groups=2, stride=2)),
    ("c2d_depthwise", "conv2d", (2, 3, 5, 6), (6, 1, 2, 2), 6, dict(groups=3, dilation=2)),
    ("c2d_same_odd", "conv2d", (2, 2, 5, 6), (3, 2, 3, 3), 3, dict(padding="same")),
    ("c2d_same_even", "conv2d", (2, 2, 5, 6), (3, 2, 2, 4), None, dict(padding="same")),
    ("c2d_same_dil", "conv2d", (1, 4, 6, 6), (4, 2, 2, 3), 4, dict(padding="same", dilation=(3, 2), groups=2)),
    ("c2d_valid", "conv2d", (2, 2, 5, 6), (3, 2, 3, 2), 3, dict(padding="valid")),
    ("c2d_unbatched", "conv2d", (3, 5, 5), (2, 3, 2, 2), 2, dict(padding=1)),
    ("c2d_1x1", "conv2d", (2, 4, 3, 3), (5, 4, 1, 1), 5, {}),
    # Note [conv2d as one product]: a batch of odd-sized maps, LeNet's 5x5 kernels with padding
    ("c2d_batch_lenet", "conv2d", (5, 3, 13, 11), (7, 3, 5, 5), 7, dict(padding=2)),
    ("c2d_batch_wide", "conv2d", (3, 2, 7, 6), (10, 2, 3, 3), 10, dict(padding=1)),  # 10 filters: N products
    ("c2d_batch_all", "conv2d", (3, 4, 9, 8), (6, 2, 3, 2), None, dict(stride=(2, 3), padding=(1, 2), dilation=(2, 1),
                                                                     groups=2)),
    ("c1d_plain", "conv1d", (2, 3, 9), (4, 3, 3), 4, {}),
    ("c1d_all", "conv1d", (2, 4, 11), (6, 2, 3), 6, dict(stride=2, padding=2, dilation=2, groups=2)),
    ("c1d_same", "conv1d", (2, 3, 7), (2, 3, 4), None, dict(padding="same", dilation=1)),
    ("c1d_tuple", "conv1d", (2, 3, 7), (2, 3, 2), 2, dict(stride=(2,), padding=(1,))),
    ("c1d_unbatched", "conv1d", (3, 8), (2, 3, 3), 2, dict(padding="same")),
    ("ct2d_plain", "conv_transpose2d", (2, 3, 4, 5), (3, 2, 3, 3), 2, {}),
    ("ct2d_stride", "conv_transpose2d", (2, 4, 3, 4), (4, 3, 3, 2), 6,
     dict(stride=(2, 3), padding=(1, 0), output_padding=(1, 2), groups=2)),
    ("ct2d_dilation", "conv_transpose2d", (1, 2, 3, 3), (2, 2, 2, 3), None, dict(dilation=(2, 1), padding=1)),
    # output_padding >= stride is allowed while it is < dilation
    ("ct2d_outpad_dil", "conv_transpose2d", (2, 2, 4, 3), (2, 3, 3, 2), 3,
     dict(stride=1, padding=(2, 0), output_padding=(1, 1), dilation=(3, 2))),
    ("ct2d_unbatched", "conv_transpose2d", (2, 3, 3), (2, 2, 2, 2), 2, dict(stride=2)),
    ("ct1d_plain", "conv_transpose1d", (2, 3, 5), (3, 2, 3), 2, {}),
    ("ct1d_all", "conv_transpose1d", (2, 4, 5), (4, 1, 3), 2,
     dict(stride=3, padding=1, output_padding=2, groups=2, dilation=2)),
    ("ct1d_unbatched", "conv_transpose1d", (3, 4), (3, 2, 2), None, dict(stride=2, padding=1)),
]

# name, function, input shape, positional arguments, keyword arguments
WINDOW_CASES = [
    ("unfold_plain", "unfold", (2, 3, 5, 6), ((2, 3),), {}),
    ("unfold_all", "unfold", (2, 2, 7, 6), (3,), dict(dilation=(2, 1), padding=(1, 2), stride=(2, 3))),
    ("unfold_unbatched", "unfold", (3, 5, 5), (2,), dict(stride=2)),
    ("fold_plain", "fold", (2, 3 * 4, 20), ((5, 6), 2), {}),
    ("fold_all", "fold", (2, 2 * 6, 9), ((5, 6), (2, 3)), dict(dilation=(2, 1), padding=1, stride=2)),
    ("fold_unbatched", "fold", (4 * 4, 9), (4, 2), dict(stride=1, dilation=1)),
]


def _run(lib, fn, arrays, args, kwargs, requires_grad=True):
    tensors = [None if a is None else lib.tensor(a, requires_grad=requires_grad) for a in arrays]
    F = lib.nn.functional
    return tensors, getattr(F, fn)(*tensors, *args, **kwargs)


def _compare(dg, fn, arrays, args=(), kwargs=None, rtol=1e-9, atol=1e-10):
    kwargs = kwargs or {}
    td, od = _run(dg, fn, arrays, args, kwargs)
    tt, ot = _run(torch, fn, arrays, args, kwargs)
    assert tuple(od.shape) == tuple(ot.shape)
    np.testing.assert_allclose(od.detach().numpy(), ot.detach().numpy(), rtol=rtol, atol=atol)
    g = rnd(*ot.shape).astype(arrays[0].dtype)
    od.backward(dg.tensor(g))
    ot.backward(torch.tensor(g))
    for a, b in zip(td, tt):
        if a is not None:
            np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=rtol, atol=atol)


@pytest.mark.parametrize("name,fn,xs,ws,bias,kwargs", CONV_CASES, ids=[c[0] for c in CONV_CASES])
def test_conv_against_torch(dg, name, fn, xs, ws, bias, kwargs):
    arrays = [rnd(*xs), rnd(*ws), None if bias is None else rnd(bias)]
    _compare(dg, fn, arrays, (), kwargs)


@pytest.mark.parametrize("name,fn,xs,args,kwargs", WINDOW_CASES, ids=[c[0] for c in WINDOW_CASES])
def test_unfold_fold_against_torch(dg, name, fn, xs, args, kwargs):
    _compare(dg, fn, [rnd(*xs)], args, kwargs)


@pytest.mark.parametrize("fn,xs,ws,kwargs", [
    ("conv2d", (2, 4, 6, 6), (4, 2, 3, 3), dict(groups=2, padding="same", dilation=2)),
    ("conv_transpose2d", (2, 4, 3, 3), (4, 2, 3, 3), dict(stride=2, output_padding=1, groups=2)),
])
def test_float32(dg, fn, xs, ws, kwargs):
    _compare(dg, fn, [rnd(*xs).astype(np.float32), rnd(*ws).astype(np.float32), rnd(ws[0] if fn == "conv2d" else
             ws[1] * kwargs["groups"]).astype(np.float32)], (), kwargs, rtol=1e-4, atol=1e-4)


# small shapes: finite differences cost one forward per input element
GRADCHECK_CASES = [
    ("conv2d", (1, 2, 4, 4), (2, 1, 2, 2), 2, dict(groups=2, dilation=(2, 1), padding=(1, 0))),
    ("conv2d", (2, 4, 3), (2, 2, 2, 2), None, dict(padding="same")),
    ("conv2d", (3, 2, 5, 4), (2, 2, 3, 2), 2, dict(stride=(2, 1), padding=(1, 2), dilation=(1, 2))),
    ("conv2d", (3, 4, 4, 3), (4, 2, 2, 3), 4, dict(groups=2, padding=1)),
    ("conv2d", (2, 1, 4, 3), (9, 1, 2, 2), 9, dict(padding=1)),
    ("conv1d", (1, 2, 6), (2, 2, 3), 2, dict(stride=2, padding="valid", dilation=2)),
    ("conv_transpose2d", (1, 2, 3, 2), (2, 2, 2, 2), 4, dict(stride=2, padding=1, output_padding=1, groups=2)),
    ("conv_transpose1d", (1, 2, 4), (2, 1, 3), 1, dict(stride=1, dilation=2, output_padding=1)),
]


@pytest.mark.parametrize("fn,xs,ws,bias,kwargs", GRADCHECK_CASES, ids=[f"{c[0]}-{i}" for i, c in
                                                                       enumerate(GRADCHECK_CASES)])
def test_gradcheck(dg, fn, xs, ws, bias, kwargs):
    f = getattr(dg.nn.functional, fn)
    inputs = [dg.tensor(rnd(*xs), requires_grad=True), dg.tensor(rnd(*ws), requires_grad=True)]
    if bias is not None:
        inputs.append(dg.tensor(rnd(bias), requires_grad=True))
    assert dg.autograd.gradcheck(lambda *t: f(*t, **kwargs), inputs)


@pytest.mark.parametrize("fn,xs,ws,kwargs", [
    ("conv2d", (1, 2, 3, 3), (2, 1, 2, 2), dict(groups=2, padding=1)),
    ("conv2d", (1, 2, 3, 3), (2, 2, 2, 2), dict(padding=1, stride=(2, 1))),   # Note [conv2d's common call]
    ("conv2d", (3, 2, 4, 3), (2, 2, 2, 2), dict(padding=(1, 0), dilation=(1, 2))),  # a batch: one product
    ("conv_transpose2d", (1, 1, 2, 2), (1, 2, 2, 2), dict(stride=2)),
])
def test_gradgradcheck(dg, fn, xs, ws, kwargs):
    f = getattr(dg.nn.functional, fn)
    inputs = [dg.tensor(rnd(*xs), requires_grad=True), dg.tensor(rnd(*ws), requires_grad=True)]
    assert dg.autograd.gradgradcheck(lambda *t: f(*t, **kwargs), inputs)


def test_fold_of_transposed_columns(dg):
    """fold reads columns whose rows are contiguous in place whatever their order (Note [Columns layout] in
    kernels/conv.cpp): columns stored (C*kh*kw, N, L) fold to what their contiguous copy folds to."""
    F = dg.nn.functional
    for length, kwargs in ((25, dict(padding=(1, 0))), (4, dict(padding=(0, 1), stride=(1, 2), dilation=(2, 1)))):
        stored = rnd(2 * 3 * 2, 4, length)             # (C*kh*kw, N, L) for C=2, kernel (3, 2), N=4
        cols = dg.tensor(stored).permute(1, 0, 2)      # (N, C*kh*kw, L), not contiguous
        assert not cols.is_contiguous()
        expected = F.fold(dg.tensor(np.ascontiguousarray(stored.transpose(1, 0, 2))), (5, 6), (3, 2), **kwargs)
        np.testing.assert_array_equal(F.fold(cols, (5, 6), (3, 2), **kwargs).numpy(), expected.numpy())


def _fold_numpy(cols, out_hw, k, pad, stride, dil):
    """col2im by definition, in float64: (N, C*kh*kw, L) -> (N, C, H, W)."""
    (H, W), (kh, kw), (ph, pw), (sh, sw), (dh, dw) = out_hw, k, pad, stride, dil
    N, rows, _ = cols.shape
    C = rows // (kh * kw)
    OH, OW = (H + 2 * ph - dh * (kh - 1) - 1) // sh + 1, (W + 2 * pw - dw * (kw - 1) - 1) // sw + 1
    out = np.zeros((N, C, H + 2 * ph, W + 2 * pw))
    blocks = cols.astype(np.float64).reshape(N, C, kh, kw, OH, OW)
    for i in range(kh):
        for j in range(kw):
            out[:, :, i * dh:i * dh + sh * (OH - 1) + 1:sh, j * dw:j * dw + sw * (OW - 1) + 1:sw] += blocks[:, :, i, j]
    return out[:, :, ph:ph + H, pw:pw + W]


# Note [Padded image rows] (kernels/conv.cpp): the vector paths (float32, stride 1; col2im also dilation 1 and at
# most 16 kernel columns) and the scalar ones, rows of one and of several vectors, with and without padding
@pytest.mark.parametrize("out_hw,k,pad,stride,dil", [
    ((14, 14), (5, 5), (0, 0), (1, 1), (1, 1)),     # LeNet's second map: one vector per row
    ((28, 28), (5, 5), (2, 2), (1, 1), (1, 1)),     # its first: two
    ((7, 37), (3, 4), (1, 2), (1, 1), (1, 1)),      # rows of 3 vectors, odd sizes
    ((6, 21), (2, 18), (1, 3), (1, 1), (1, 1)),     # 18 kernel columns: col2im's scalar loop
    ((9, 8), (3, 2), (1, 0), (2, 1), (1, 2)),       # stride and dilation: scalar loops
])
def test_float32_fold_unfold_paths(dg, out_hw, k, pad, stride, dil):
    F = dg.nn.functional
    x = rnd(3, 2, *out_hw).astype(np.float32)
    kwargs = dict(padding=pad, stride=stride, dilation=dil)
    cols = F.unfold(dg.tensor(x), k, **kwargs).numpy()
    expected_cols = TF.unfold(torch.tensor(x), k, **kwargs).numpy()
    np.testing.assert_array_equal(cols, expected_cols)       # a copy: exact
    g = rnd(*cols.shape).astype(np.float32)
    folded = F.fold(dg.tensor(g), out_hw, k, **kwargs).numpy()
    np.testing.assert_allclose(folded, _fold_numpy(g, out_hw, k, pad, stride, dil), rtol=1e-5, atol=1e-5)
    # conv2d's (C*kh*kw, N, L) layout folds to the same values
    moved = dg.tensor(np.ascontiguousarray(g.transpose(1, 0, 2))).permute(1, 0, 2)
    np.testing.assert_array_equal(F.fold(moved, out_hw, k, **kwargs).numpy(), folded)


def test_unfold_fold_gradcheck(dg):
    F = dg.nn.functional
    x = dg.tensor(rnd(1, 2, 4, 3), requires_grad=True)
    assert dg.autograd.gradcheck(lambda t: F.unfold(t, 2, dilation=(1, 2), padding=1, stride=(2, 1)), [x])
    c = dg.tensor(rnd(1, 2 * 4, 6), requires_grad=True)
    assert dg.autograd.gradcheck(lambda t: F.fold(t, (4, 5), 2, padding=(0, 1), stride=(2, 2)), [c])
    assert dg.autograd.gradgradcheck(lambda t: F.fold(t, (4, 5), 2, padding=(0, 1), stride=(2, 2)), [c])


def test_top_level_names_and_node_name(dg):
    x, w = dg.tensor(rnd(1, 2, 4, 4), requires_grad=True), dg.tensor(rnd(3, 2, 2, 2))
    for f in (dg.conv2d, dg.nn.functional.conv2d):
        assert f(x, w).grad_fn.name() == "ConvolutionBackward"
    assert dg.conv1d(x[0, :, 0], w[:, :, 0]).shape == (3, 3)
    assert dg.conv_transpose2d(x, w.transpose(0, 1)).shape == (1, 3, 5, 5)
    assert dg.conv_transpose1d(x[0, :, 0], w[:, :, 0].transpose(0, 1)).shape == (3, 5)
    assert dg.nn.functional.unfold(x, 2).grad_fn.name() == "Im2ColBackward"


@pytest.mark.parametrize("fn,xs,ws,kwargs", [
    ("conv2d", (2, 3, 5, 5), (4, 3, 2, 2), dict(padding=1)),
    ("conv2d", (2, 4, 5, 5), (4, 2, 3, 3), dict(groups=2, padding="same")),
    ("conv_transpose1d", (2, 3, 4), (3, 2, 3), dict(stride=2)),
])
def test_integer_inputs(dg, fn, xs, ws, kwargs):
    """torch convolves int64 tensors on the CPU; so do we (in float64, exact at these sizes)."""
    x, w = RNG.integers(-50, 50, xs), RNG.integers(-50, 50, ws)
    out = getattr(dg.nn.functional, fn)(dg.tensor(x), dg.tensor(w), **kwargs)
    ref = getattr(TF, fn)(torch.tensor(x), torch.tensor(w), **kwargs)
    assert out.dtype == dg.int64
    np.testing.assert_array_equal(out.numpy(), ref.numpy())


def test_non_contiguous_inputs(dg):
    x, w = rnd(2, 4, 6, 5), rnd(4, 4, 2, 3)
    xd, wd = dg.tensor(x).transpose(2, 3), dg.tensor(w)[:, :, :, ::2]     # (2, 4, 5, 6) and (4, 4, 2, 2)
    xt, wt = torch.tensor(x).transpose(2, 3), torch.tensor(w)[:, :, :, ::2]
    cases = [("conv2d", (wd, wt), dict(padding=1)), ("conv2d", (wd[:, :2], wt[:, :2]), dict(dilation=2, groups=2)),
             ("conv_transpose2d", (wd.transpose(0, 1), wt.transpose(0, 1)), dict(stride=2))]
    for fn, (a, b), kwargs in cases:
        np.testing.assert_allclose(getattr(dg.nn.functional, fn)(xd, a, **kwargs).numpy(),
                                   getattr(TF, fn)(xt, b, **kwargs).numpy(), rtol=1e-10, atol=1e-10)


def test_empty_batch(dg):
    for fn, xs, ws in [("conv2d", (0, 2, 4, 4), (3, 2, 2, 2)), ("conv_transpose2d", (0, 2, 3, 3), (2, 3, 2, 2))]:
        out = getattr(dg.nn.functional, fn)(dg.zeros(*xs), dg.zeros(*ws))
        ref = getattr(TF, fn)(torch.zeros(*xs), torch.zeros(*ws))
        assert tuple(out.shape) == tuple(ref.shape)


# bad arguments: torch's exception type, and dyngrad's message names the op
ERROR_CASES = [
    ("groups_channels", "conv2d", (2, 4, 5, 5), (6, 2, 3, 3), dict(groups=3)),
    ("groups_out", "conv2d", (2, 4, 5, 5), (5, 2, 3, 3), dict(groups=2)),
    ("groups_zero", "conv2d", (2, 4, 5, 5), (6, 2, 3, 3), dict(groups=0)),
    ("same_strided", "conv2d", (2, 4, 5, 5), (6, 4, 3, 3), dict(padding="same", stride=2)),
    ("bad_padding_str", "conv2d", (2, 4, 5, 5), (6, 4, 3, 3), dict(padding="full")),
    ("weight_dims", "conv2d", (2, 4, 5, 5), (6, 4, 3), {}),
    ("input_dims", "conv2d", (5, 5), (6, 4, 3, 3), {}),
    ("input_dims_1d", "conv1d", (2, 3, 4, 5), (6, 3, 3), {}),
    ("kernel_too_big", "conv2d", (1, 4, 3, 3), (6, 4, 5, 5), {}),
    ("stride_zero", "conv2d", (1, 4, 5, 5), (6, 4, 3, 3), dict(stride=0)),
    ("padding_negative", "conv2d", (1, 4, 5, 5), (6, 4, 3, 3), dict(padding=-1)),
    ("dilation_zero", "conv1d", (1, 4, 5), (6, 4, 3), dict(dilation=0)),
    ("padding_len", "conv1d", (1, 4, 5), (6, 4, 3), dict(padding=(1, 1))),
    ("stride_float", "conv2d", (1, 4, 5, 5), (6, 4, 3, 3), dict(stride=1.5)),
    ("bias_shape", "conv2d", (1, 4, 5, 5), (6, 4, 3, 3), dict(bias=5)),
    ("dtype_mismatch", "conv2d", (1, 4, 5, 5), (6, 4, 3, 3), dict(weight_dtype=np.float32)),
    ("ct_outpad", "conv_transpose2d", (1, 4, 3, 3), (4, 3, 3, 3), dict(stride=2, output_padding=2)),
    ("ct_groups", "conv_transpose2d", (1, 4, 3, 3), (4, 3, 3, 3), dict(groups=3)),
    ("ct_channels", "conv_transpose2d", (1, 5, 3, 3), (4, 3, 3, 3), {}),
    ("ct_padding_str", "conv_transpose2d", (1, 4, 3, 3), (4, 3, 3, 3), dict(padding="same")),
    ("ct_bias", "conv_transpose2d", (1, 4, 3, 3), (4, 3, 3, 3), dict(groups=2, bias=3)),
    ("ct_too_small", "conv_transpose1d", (1, 4, 1), (4, 3, 1), dict(padding=2)),
]


def _error_call(lib, fn, xs, ws, kwargs):
    kwargs = dict(kwargs)
    wdtype = kwargs.pop("weight_dtype", np.float64)
    nbias = kwargs.pop("bias", None)
    x, w = lib.tensor(rnd(*xs)), lib.tensor(rnd(*ws).astype(wdtype))
    b = None if nbias is None else lib.tensor(rnd(nbias))
    return lambda: getattr(lib.nn.functional, fn)(x, w, b, **kwargs)


@pytest.mark.parametrize("name,fn,xs,ws,kwargs", ERROR_CASES, ids=[c[0] for c in ERROR_CASES])
def test_errors_as_torch(dg, name, fn, xs, ws, kwargs):
    with pytest.raises(Exception) as expected:
        _error_call(torch, fn, xs, ws, kwargs)()
    with pytest.raises(expected.type, match=f"^{fn}: "):
        _error_call(dg, fn, xs, ws, kwargs)()


@pytest.mark.parametrize("call", [
    lambda F, t: F.unfold(t(2, 3, 3, 3), 5),                     # kernel larger than the input
    lambda F, t: F.unfold(t(5, 5), 2),                           # 2-D input (torch: IndexError)
    lambda F, t: F.unfold(t(1, 1, 1, 5, 5), 2),
    lambda F, t: F.unfold(t(2, 3, 5, 5), (2, 2, 2)),             # kernel_size of 3 numbers
    lambda F, t: F.unfold(t(2, 3, 5, 5), 2, stride=0),
    lambda F, t: F.fold(t(2, 35, 25), (5, 5), 3, padding=1),     # 35 rows not divisible by 3*3
    lambda F, t: F.fold(t(2, 36, 24), (5, 5), 3, padding=1),     # 24 blocks where 25 are made
    lambda F, t: F.fold(t(2, 36, 24, 1), (5, 5), 3, padding=1),  # 4-D input
    lambda F, t: F.fold(t(2, 36, 25), (5, 5), 3, padding=-1),
], ids=["unfold_big", "unfold_2d", "unfold_5d", "unfold_ksize", "unfold_stride", "fold_rows", "fold_blocks", "fold_4d", "fold_padding"])
def test_window_errors_as_torch(dg, call):
    with pytest.raises(Exception) as expected:
        call(TF, lambda *s: torch.tensor(rnd(*s)))
    with pytest.raises(expected.type, match="^(un)?fold: "):
        call(dg.nn.functional, lambda *s: dg.tensor(rnd(*s)))


@pytest.mark.parametrize("call", [
    lambda F, x, w: F.conv_transpose2d(x, w, stride=2 ** 62),
    lambda F, x, w: F.conv_transpose2d(x, w, dilation=2 ** 62),
    lambda F, x, w: F.conv_transpose2d(x, w, padding=2 ** 70),
    lambda F, x, w: F.conv2d(x, w.transpose(0, 1), dilation=2 ** 62),
    lambda F, x, w: F.conv2d(x, w.transpose(0, 1), padding=2 ** 62),
    lambda F, x, w: F.unfold(x, 2, dilation=2 ** 63 - 1),
], ids=["ct_stride", "ct_dilation", "ct_padding", "c_dilation", "c_padding", "unfold_dilation"])
def test_sizes_beyond_int64_raise(dg, call):
    """Sizes that overflow int64 raise an error naming the op (Note [Window geometry]), never crash."""
    with pytest.raises((RuntimeError, ValueError), match="^(conv_transpose2d|conv2d|unfold): "):
        call(dg.nn.functional, dg.zeros(1, 2, 2, 2), dg.zeros(2, 1, 2, 2))


def test_fold_core_refuses_mismatched_columns(dg):
    """The core's fold trusts nothing: columns that do not match the output are refused, not read past."""
    with pytest.raises(RuntimeError, match="fold: "):
        dg._C.fold(dg.zeros(1, 4, 3), (1, 1, 4, 4), 2, 2, 1, 1, 0, 0, 1, 1)


# ----- modules -------------------------------------------------------------------------------------------------

MODULES = [
    ("Conv1d", (4, 6, 3), dict(stride=2, padding=1, dilation=2, groups=2, bias=False), (2, 4, 9)),
    ("Conv1d", (3, 4, 4), dict(padding="same", padding_mode="replicate"), (3, 7)),
    ("Conv1d", (3, 4, 3), dict(padding=2, padding_mode="circular"), (2, 3, 5)),
    ("Conv2d", (4, 6, (3, 2)), dict(padding="same", padding_mode="reflect", dilation=(1, 2)), (2, 4, 6, 7)),
    ("Conv2d", (4, 6, (3, 2)), dict(padding=(1, 2), padding_mode="circular", groups=2), (2, 4, 5, 6)),
    ("Conv2d", (4, 2, 3), dict(padding=(2, 1), padding_mode="reflect"), (4, 5, 5)),
    ("Conv2d", (4, 8, 3), dict(padding="valid", groups=4, stride=(2, 1)), (1, 4, 6, 6)),
    ("ConvTranspose1d", (4, 6, 3), dict(stride=2, padding=1, output_padding=1, dilation=2), (2, 4, 5)),
    ("ConvTranspose2d", (4, 6, 3), dict(stride=2, output_padding=1, groups=2), (2, 4, 3, 4)),
    ("ConvTranspose2d", (4, 6, (2, 3)), dict(bias=False, dilation=(2, 1)), (4, 3, 3)),
    ("Unfold", ((2, 3),), dict(padding=1, dilation=(1, 2)), (2, 4, 6, 7)),
    ("Fold", ((4, 5), 2), dict(stride=1), (2, 12, 12)),
]


@pytest.mark.parametrize("cls,args,kwargs,xs", MODULES, ids=[f"{m[0]}-{i}" for i, m in enumerate(MODULES)])
def test_module_against_torch(dg, cls, args, kwargs, xs):
    md, mt = getattr(dg.nn, cls)(*args, **kwargs), getattr(torch.nn, cls)(*args, **kwargs)
    assert repr(md) == repr(mt)
    if hasattr(mt, "_reversed_padding_repeated_twice"):
        assert list(md._reversed_padding_repeated_twice) == list(mt._reversed_padding_repeated_twice)
    sd_t = mt.state_dict()
    assert {k: tuple(v.shape) for k, v in md.state_dict().items()} == {k: tuple(v.shape) for k, v in sd_t.items()}
    md.load_state_dict({k: dg.tensor(v.numpy()) for k, v in sd_t.items()})
    x = rnd(*xs).astype(np.float32)
    xd, xt = dg.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    od, ot = md(xd), mt(xt)
    np.testing.assert_allclose(od.detach().numpy(), ot.detach().numpy(), rtol=1e-5, atol=1e-5)
    od.sum().backward()
    ot.sum().backward()
    np.testing.assert_allclose(xd.grad.numpy(), xt.grad.numpy(), rtol=1e-5, atol=1e-5)
    for (name, p), (_, q) in zip(md.named_parameters(), mt.named_parameters()):
        np.testing.assert_allclose(p.grad.numpy(), q.grad.numpy(), rtol=1e-4, atol=1e-4, err_msg=name)


@pytest.mark.parametrize("cls,args", [("Conv1d", (3, 4, 5)), ("Conv2d", (4, 6, (3, 2))),
                                      ("ConvTranspose2d", (4, 6, 3)), ("ConvTranspose1d", (2, 3, 4))])
def test_module_init(dg, cls, args):
    """torch's init: kaiming_uniform(a=sqrt(5)) gives weights uniform in +-1/sqrt(fan_in), the bias the same."""
    dg.manual_seed(0)
    m = getattr(dg.nn, cls)(*args, groups=2 if args[0] % 2 == 0 and args[1] % 2 == 0 else 1)
    w = m.weight.detach().numpy()
    bound = 1 / math.sqrt(w.shape[1] * int(np.prod(w.shape[2:])))
    assert np.abs(w).max() <= bound and np.abs(w).max() > 0.8 * bound
    assert abs(w.std() - bound / math.sqrt(3)) < 0.3 * bound
    b = m.bias.detach().numpy()
    assert np.abs(b).max() <= bound


def test_module_device_dtype(dg):
    m = dg.nn.Conv2d(2, 3, 3, device="cpu", dtype=dg.float64)
    assert m.weight.dtype == dg.float64 and m.bias.dtype == dg.float64
    assert dg.nn.ConvTranspose1d(2, 3, 3, dtype=dg.float64).weight.dtype == dg.float64
    with pytest.raises(Exception, match="cuda"):
        dg.nn.Conv1d(2, 3, 3, device="cuda")


@pytest.mark.parametrize("cls,args,kwargs", [
    ("Conv2d", (4, 6, 3), dict(groups=3)),               # in_channels not divisible
    ("Conv2d", (4, 6, 3), dict(groups=4)),               # out_channels not divisible
    ("Conv2d", (4, 6, 3), dict(groups=0)),
    ("Conv1d", (4, 6, 3), dict(padding="same", stride=2)),
    ("Conv1d", (4, 6, 3), dict(padding="full")),
    ("Conv2d", (4, 6, 3), dict(padding_mode="mirror")),
    ("ConvTranspose2d", (4, 6, 3), dict(padding_mode="reflect")),
])
def test_module_errors_as_torch(dg, cls, args, kwargs):
    with pytest.raises(Exception) as expected:
        getattr(torch.nn, cls)(*args, **kwargs)
    with pytest.raises(expected.type):
        getattr(dg.nn, cls)(*args, **kwargs)


@pytest.mark.parametrize("output_size", [(11, 12), [2, 6, 12, 11], (10, 10), (13, 10)])
def test_conv_transpose_output_size(dg, output_size):
    mt = torch.nn.ConvTranspose2d(4, 6, 3, stride=(3, 2), padding=1, dilation=(2, 1))
    md = dg.nn.ConvTranspose2d(4, 6, 3, stride=(3, 2), padding=1, dilation=(2, 1))
    md.load_state_dict({k: dg.tensor(v.numpy()) for k, v in mt.state_dict().items()})
    x = rnd(2, 4, 4, 6).astype(np.float32)
    try:
        ot = mt(torch.tensor(x), output_size=output_size)
    except Exception as e:
        with pytest.raises(type(e)):
            md(dg.tensor(x), output_size=output_size)
        return
    od = md(dg.tensor(x), output_size=output_size)
    np.testing.assert_allclose(od.detach().numpy(), ot.detach().numpy(), rtol=1e-5, atol=1e-5)


def test_module_gradcheck_padding_mode(dg):
    m = dg.nn.Conv2d(2, 2, 3, padding=(1, 2), padding_mode="reflect").double()
    x = dg.tensor(rnd(1, 2, 3, 4), requires_grad=True)
    assert dg.autograd.gradcheck(lambda t: m(t), [x])


@pytest.mark.parametrize("xs,ws,padding", [((64, 1, 28, 28), (6, 1, 5, 5), (2, 2)),     # one product
                                           ((64, 6, 14, 14), (16, 6, 5, 5), (1, 0))])   # N products
def test_lenet_conv_same_bits_at_1_and_2_threads(xs, ws, padding):
    """conv2d's forward and gradients at LeNet's sizes (large enough to split im2col, the products and col2im over
    the threads) have the same bits at 1 and 2 threads (Note [conv2d as one product] in ops_nn.cpp)."""
    import dyngrad as dg
    rng = np.random.default_rng(7)
    x0, w0 = rng.standard_normal(xs).astype(np.float32), rng.standard_normal(ws).astype(np.float32)
    b0 = rng.standard_normal(ws[0]).astype(np.float32)

    def run():
        x, w, b = (dg.tensor(a, requires_grad=True) for a in (x0, w0, b0))
        out = dg.nn.functional.conv2d(x, w, b, padding=padding)
        out.backward(dg.tensor(np.random.default_rng(8).standard_normal(tuple(out.shape)).astype(np.float32)))
        return [t.numpy() for t in (out.detach(), x.grad, w.grad, b.grad)]

    before = dg.get_num_threads()
    try:
        dg.set_num_threads(1)
        one = run()
        dg.set_num_threads(2)
        two = run()
    finally:
        dg.set_num_threads(before)
    for a, b in zip(one, two):
        np.testing.assert_array_equal(a, b)
