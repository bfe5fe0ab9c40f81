"""complex64 / complex128 in the neural-net and reduction families on both engines: convolutions (direct and
transposed, 1-d to 3-d), unfold/fold, and the ops issue 22 found refusing or wrong on complex tensors; values
against the mathematics (numpy), against torch where installed, and gradients (gradcheck in complex128, .grad of
a real loss against torch's conjugate-Wirtinger one) (Note [Complex convolutions] in _api/ops/conv.py)."""
import numpy as np
import pytest


def cvalues(shape, seed=0):
    rng = np.random.default_rng(seed)
    return rng.standard_normal(shape) + 1j * rng.standard_normal(shape)


def close(got, want, dtype_name):
    tol = 2e-4 if dtype_name == "complex64" else 1e-10
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=tol, atol=tol)


def np_conv1d(x, w, b=None, stride=1, padding=0, dilation=1, groups=1):
    """Cross-correlation by the definition: out[n, o, l] = sum_{c, k} x[n, g*C/G + c, l*s + k*d - p] w[o, c, k]."""
    n, c, length = x.shape
    o, cg, k = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (padding, padding)))
    lo = (length + 2 * padding - dilation * (k - 1) - 1) // stride + 1
    out = np.zeros((n, o, lo), dtype=np.result_type(x, w))
    og = o // groups
    for oc in range(o):
        g = oc // og
        for t in range(lo):
            window = xp[:, g * cg:(g + 1) * cg, t * stride:t * stride + dilation * (k - 1) + 1:dilation]
            out[:, oc, t] = np.einsum("nck,ck->n", window, w[oc])
    return out if b is None else out + b[None, :, None]


def np_conv_transpose1d(x, w, stride=1, padding=0):
    """The adjoint of np_conv1d in x (groups 1): each input position scatters a weight-sized patch."""
    n, cin, length = x.shape
    _, cout, k = w.shape
    full = np.zeros((n, cout, (length - 1) * stride + k), dtype=np.result_type(x, w))
    for t in range(length):
        full[:, :, t * stride:t * stride + k] += np.einsum("nc,cok->nok", x[:, :, t], w)
    return full[:, :, padding:full.shape[2] - padding]


CONVS = {
    "conv1d": ((2, 4, 7), (6, 2, 3), 6, dict(stride=2, padding=1, dilation=1, groups=2)),
    "conv2d": ((2, 2, 5, 6), (3, 2, 2, 3), 3, dict(stride=(1, 2), padding=1, dilation=(2, 1))),
    "conv3d": ((1, 2, 4, 4, 3), (2, 1, 3, 1, 3), 2, dict(stride=1, padding="same", groups=2)),
    "conv_transpose1d": ((2, 4, 5), (4, 3, 3), 6, dict(stride=2, padding=1, output_padding=1, groups=2)),
    "conv_transpose2d": ((1, 2, 3, 4), (2, 3, 2, 2), 3, dict(stride=2, padding=(0, 1), dilation=2)),
    "conv_transpose3d": ((1, 2, 2, 3, 2), (2, 2, 2, 1, 2), 2, dict(stride=(1, 2, 1))),
}


def _conv_args(name, seed=0, bias=True):
    xs, ws, bs, kw = CONVS[name]
    return cvalues(xs, seed), cvalues(ws, seed + 1), cvalues((bs,), seed + 2) if bias else None, kw


def test_conv1d_is_the_complex_correlation(dg):
    """Against the definition, so the imaginary parts of input and weight both count (the bug this fixes: the
    kernel dropped them)."""
    x, w, b = cvalues((2, 4, 9), 0), cvalues((6, 2, 3), 1), cvalues((6,), 2)
    for dtype in ("complex64", "complex128"):
        t = lambda a: dg.tensor(a, dtype=getattr(dg, dtype))
        got = dg.nn.functional.conv1d(t(x), t(w), t(b), stride=2, padding=1, dilation=2, groups=2)
        assert got.dtype.name == dtype
        close(got.numpy(), np_conv1d(x, w, b, stride=2, padding=1, dilation=2, groups=2), dtype)
        got = dg.nn.functional.conv_transpose1d(t(x[:, :2]), t(w[:2]), stride=2, padding=1)
        close(got.numpy(), np_conv_transpose1d(x[:, :2], w[:2], stride=2, padding=1), dtype)


def test_conv2d_is_linear_over_the_complex_numbers(dg):
    """conv(i x, w) = i conv(x, w) and conv(x, i w) = i conv(x, w): true only if the imaginary parts are used."""
    x, w, _, kw = _conv_args("conv2d", 3, bias=False)
    f = dg.nn.functional.conv2d
    t = lambda a: dg.tensor(a, dtype=dg.complex128)
    base = f(t(x), t(w), **kw).numpy()
    close(f(t(1j * x), t(w), **kw).numpy(), 1j * base, "complex128")
    close(f(t(x), t(1j * w), **kw).numpy(), 1j * base, "complex128")
    real = f(dg.tensor(x.real), dg.tensor(w.real), **kw).numpy()
    close(f(t(x.real + 0j), t(w.real + 0j), **kw).numpy(), real, "complex64")


@pytest.mark.parametrize("name", list(CONVS))
def test_conv_gradcheck(dg, name):
    x, w, b, kw = _conv_args(name, 4)
    f = getattr(dg.nn.functional, name)
    args = [dg.tensor(a, dtype=dg.complex128, requires_grad=True) for a in (x, w, b)]
    assert dg.autograd.gradcheck(lambda p, q, r: f(p, q, r, **kw), args)


@pytest.mark.parametrize("name", list(CONVS))
@pytest.mark.parametrize("dtype", ["complex64", "complex128"])
def test_conv_as_torch(dg, name, dtype):
    torch = pytest.importorskip("torch")
    x, w, b, kw = _conv_args(name, 5)
    g = cvalues(getattr(torch.nn.functional, name)(*(torch.tensor(a) for a in (x, w, b)), **kw).shape, 9)
    ours = [dg.tensor(a, dtype=getattr(dg, dtype), requires_grad=True) for a in (x, w, b)]
    theirs = [torch.tensor(a, dtype=getattr(torch, dtype), requires_grad=True) for a in (x, w, b)]
    out = getattr(dg.nn.functional, name)(*ours, **kw)
    tout = getattr(torch.nn.functional, name)(*theirs, **kw)
    close(out.detach().numpy(), tout.detach().numpy(), dtype)
    (out * dg.tensor(g, dtype=out.dtype)).real.sum().backward()
    (tout * torch.tensor(g, dtype=tout.dtype)).real.sum().backward()
    for a, ta in zip(ours, theirs):
        close(a.grad.numpy(), ta.grad.numpy(), dtype)


def test_conv_modules_take_complex_parameters(dg):
    """nn.Conv2d(dtype=complex64) with a padding mode: the layer's path (its padding, then the convolution)."""
    conv = dg.nn.Conv2d(2, 3, 3, padding=1, padding_mode="circular", dtype=dg.complex64)
    x = dg.tensor(cvalues((1, 2, 4, 4), 6), dtype=dg.complex64)
    out = conv(x)
    assert out.dtype is dg.complex64 and out.shape == (1, 3, 4, 4)
    xp = np.pad(x.numpy(), ((0, 0), (0, 0), (1, 1), (1, 1)), mode="wrap")
    want = dg.nn.functional.conv2d(dg.tensor(xp), conv.weight, conv.bias).detach().numpy()
    close(out.detach().numpy(), want, "complex64")


def test_unfold_fold(dg):
    x = cvalues((2, 3, 4, 5), 7)
    t = dg.tensor(x, dtype=dg.complex128, requires_grad=True)
    cols = dg.nn.functional.unfold(t, (2, 3), padding=1, stride=(1, 2))
    real = dg.nn.functional.unfold(dg.tensor(x.real), (2, 3), padding=1, stride=(1, 2)).numpy()
    imag = dg.nn.functional.unfold(dg.tensor(x.imag), (2, 3), padding=1, stride=(1, 2)).numpy()
    assert cols.dtype is dg.complex128
    close(cols.detach().numpy(), real + 1j * imag, "complex128")
    back = dg.nn.functional.fold(cols, (4, 5), (2, 3), padding=1, stride=(1, 2))
    ones = dg.nn.functional.fold(dg.nn.functional.unfold(dg.ones(2, 3, 4, 5, dtype=dg.float64), (2, 3), padding=1,
                                                         stride=(1, 2)), (4, 5), (2, 3), padding=1, stride=(1, 2))
    close(back.detach().numpy(), x * ones.numpy(), "complex128")         # fold(unfold(x)) = x * overlap count
    assert dg.autograd.gradcheck(lambda a: dg.nn.functional.unfold(a, 2, stride=2), (t,))
    assert dg.autograd.gradcheck(lambda a: dg.nn.functional.fold(a, (3, 3), 2), (cols[:, :12, :4].detach()
                                                                                   .requires_grad_(),))


# ----- norms and distances: |z|, never z * z ---------------------------------------------------------------------

NORMS = [
    ("norm2", lambda dg, x: dg.norm(x), lambda z: np.sqrt((np.abs(z) ** 2).sum())),
    ("norm_p3_dim", lambda dg, x: dg.norm(x, 3, dim=1), lambda z: (np.abs(z) ** 3).sum(1) ** (1 / 3)),
    ("norm_p1", lambda dg, x: x.norm(1, dim=0, keepdim=True), lambda z: np.abs(z).sum(0, keepdims=True)),
    ("norm_inf", lambda dg, x: dg.norm(x, float("inf")), lambda z: np.abs(z).max()),
    ("norm_0", lambda dg, x: dg.norm(x, 0, dim=1), lambda z: (z != 0).sum(1).astype(float)),
    ("norm_fro", lambda dg, x: dg.norm(x, "fro", dim=(0, 1)), lambda z: np.linalg.norm(z, "fro")),
    ("norm_nuc", lambda dg, x: dg.norm(x, "nuc"), lambda z: np.linalg.svd(z, compute_uv=False).sum()),
    ("normalize", lambda dg, x: dg.nn.functional.normalize(x, dim=1),
     lambda z: z / np.sqrt((np.abs(z) ** 2).sum(1, keepdims=True))),
    ("pairwise_distance", lambda dg, x: dg.nn.functional.pairwise_distance(x, x.flip(0)),
     lambda z: np.sqrt((np.abs(z - z[::-1] + 1e-6) ** 2).sum(1))),
    ("dist", lambda dg, x: dg.dist(x, x.flip(1), 3), lambda z: (np.abs(z - z[:, ::-1]) ** 3).sum() ** (1 / 3)),
    ("vecdot", lambda dg, x: dg.linalg.vecdot(x, x.flip(0)), lambda z: (np.conj(z) * z[::-1]).sum(-1)),
    ("renorm", lambda dg, x: dg.renorm(x, 2, 0, 1.5),
     lambda z: z * np.minimum(1, 1.5 / (np.sqrt((np.abs(z) ** 2).sum(1, keepdims=True)) + 1e-7))),
]


@pytest.mark.parametrize("name, fn, np_fn", NORMS, ids=[n[0] for n in NORMS])
@pytest.mark.parametrize("dtype", ["complex64", "complex128"])
def test_norms_of_complex(dg, name, fn, np_fn, dtype):
    z = cvalues((3, 4), 11)
    got = fn(dg, dg.tensor(z, dtype=getattr(dg, dtype)))
    want = np.asarray(np_fn(z))
    real = {"complex64": "float32", "complex128": "float64"}[dtype]
    assert got.dtype.name == (dtype if np.iscomplexobj(want) else real)     # a norm is real, as torch's
    close(got.numpy(), want, dtype)


@pytest.mark.parametrize("name, fn, np_fn", [n for n in NORMS if n[0] != "norm_0"],
                         ids=[n[0] for n in NORMS if n[0] != "norm_0"])
def test_norms_of_complex_gradcheck(dg, name, fn, np_fn):
    x = dg.tensor(cvalues((3, 4), 12), dtype=dg.complex128, requires_grad=True)
    assert dg.autograd.gradcheck(lambda a: fn(dg, a), (x,))


@pytest.mark.parametrize("name, fn, np_fn", NORMS, ids=[n[0] for n in NORMS])
def test_norms_of_complex_as_torch(dg, name, fn, np_fn):
    torch = pytest.importorskip("torch")
    z = cvalues((3, 4), 13)
    x = dg.tensor(z, dtype=dg.complex128, requires_grad=True)
    tx = torch.tensor(z, dtype=torch.complex128, requires_grad=True)
    out, tout = fn(dg, x), fn(torch, tx)
    assert out.dtype.name == str(tout.dtype).split(".")[1]
    close(out.detach().numpy(), tout.detach().numpy(), "complex128")
    if name != "norm_0":
        g = cvalues(tuple(tout.shape), 14)
        (out * dg.tensor(g if out.dtype.is_complex else g.real)).real.sum().backward()
        (tout * torch.tensor(g if tout.is_complex() else g.real)).real.sum().backward()
        close(x.grad.numpy(), tx.grad.numpy(), "complex128")


def test_norm_dtype_argument_of_complex(dg):
    x = dg.tensor(cvalues((2, 3), 15), dtype=dg.complex64)
    assert dg.norm(x, 2, dtype=dg.complex128).dtype is dg.float64
    with pytest.raises(RuntimeError, match="complex dtype"):
        dg.norm(x, 2, dtype=dg.float64)


# ----- padding, factories, assert_close: no complex value through an integer or real path ----------------------

def test_constant_padding_of_complex(dg):
    x = dg.tensor(cvalues((2, 3), 16), dtype=dg.complex64)
    out = dg.constant_pad_nd(x, (1, 2), 1 + 2j)
    assert out.dtype is dg.complex64
    close(out.numpy(), np.pad(x.numpy(), ((0, 0), (1, 2)), constant_values=1 + 2j), "complex64")
    # F.pad's value 1.5 on a complex tensor is 1.5 (it went through int() and padded 1)
    close(dg.nn.functional.pad(x, (1, 0), value=1.5).numpy()[:, 0], [1.5, 1.5], "complex64")
    with pytest.raises(TypeError, match="pad: expected a number as value, got complex"):
        dg.nn.functional.pad(x, (1, 1), value=1j)                      # F.pad's value is a float, as torch's
    with pytest.raises(RuntimeError, match="imaginary part"):
        dg.constant_pad_nd(dg.ones(2), (1, 1), 1 + 2j)
    assert dg.constant_pad_nd(dg.ones(2), (1, 1), 2 + 0j).tolist() == [2.0, 1.0, 1.0, 2.0]
    t = dg.tensor(cvalues((2, 3), 17), dtype=dg.complex128, requires_grad=True)
    assert dg.autograd.gradcheck(lambda a: dg.constant_pad_nd(a, (1, 1, 0, 1), 3j), (t,))


def test_complex_factories_are_not_truncated(dg):
    """logspace/range fill a complex dtype with its values, not truncated ones as an integer dtype's."""
    assert dg.logspace(0, -3, 2, dtype=dg.complex64).tolist() == pytest.approx([1, 1e-3])
    assert dg.logspace(-1.5, 3.2, 3, base=2.5, dtype=dg.complex128).tolist() == pytest.approx(
        list(2.5 ** np.linspace(-1.5, 3.2, 3)))
    assert dg.logspace(0, -3, 2, dtype=dg.int64).tolist() == [1, 0]             # integers do truncate (torch)


def test_assert_close_keeps_the_imaginary_part(dg):
    with pytest.raises(AssertionError):
        dg.testing.assert_close(dg.tensor([1.0]), dg.tensor([1 + 1j]), check_dtype=False)
    dg.testing.assert_close(dg.tensor([1.0]), dg.tensor([1 + 0j]), check_dtype=False)


# ----- pointwise and scans torch has for complex tensors ----------------------------------------------------------

def _np_logaddexp(a, b):
    """torch's complex logaddexp: hi + log1p(exp(lo - hi)), hi the operand of the larger real part (b on ties)."""
    first = a.real > b.real
    hi, lo = np.where(first, a, b), np.where(first, b, a)
    return hi + np.log1p(np.exp(lo - hi))


def _np_logcumsumexp(z, d):
    """torch's sequential scan, out_k = logaddexp(z_k, out_{k-1}) (its branch of the imaginary part)."""
    z = np.moveaxis(z, d, 0)
    out = np.empty_like(z)
    for k in range(z.shape[0]):
        out[k] = z[k] if k == 0 else _np_logaddexp(z[k], out[k - 1])
    return np.moveaxis(out, 0, d)


POINTWISE = [
    ("sinc", lambda dg, a, b: dg.sinc(a), lambda a, b: np.sinc(a)),
    ("logaddexp", lambda dg, a, b: dg.logaddexp(a, b), _np_logaddexp),
    ("ldexp", lambda dg, a, b: dg.ldexp(a, b.real), lambda a, b: a * 2.0 ** b.real),
    ("logcumsumexp0", lambda dg, a, b: dg.logcumsumexp(a * 3, 0), lambda a, b: _np_logcumsumexp(a * 3, 0)),
    ("logcumsumexp1", lambda dg, a, b: dg.logcumsumexp(a * 3, 1), lambda a, b: _np_logcumsumexp(a * 3, 1)),
]


@pytest.mark.parametrize("name, fn, np_fn", POINTWISE, ids=[p[0] for p in POINTWISE])
@pytest.mark.parametrize("dtype", ["complex64", "complex128"])
def test_complex_pointwise_and_scans(dg, name, fn, np_fn, dtype):
    a, b = cvalues((4, 7), 21), cvalues((4, 7), 22)
    a[1, 2] = 0                                  # sinc's removable point
    t = lambda v: dg.tensor(v, dtype=getattr(dg, dtype))
    got = fn(dg, t(a), t(b))
    assert got.dtype.name == dtype
    close(got.numpy(), np_fn(a.astype(dtype).astype(complex), b.astype(dtype).astype(complex)), dtype)


@pytest.mark.parametrize("name, fn, np_fn", POINTWISE, ids=[p[0] for p in POINTWISE])
def test_complex_pointwise_and_scans_gradcheck(dg, name, fn, np_fn):
    a = dg.tensor(cvalues((3, 5), 23), dtype=dg.complex128, requires_grad=True)
    b = dg.tensor(cvalues((3, 5), 24), dtype=dg.complex128, requires_grad=name == "logaddexp")
    assert dg.autograd.gradcheck(lambda p, q: fn(dg, p, q), (a, b))


@pytest.mark.parametrize("name, fn, np_fn", POINTWISE, ids=[p[0] for p in POINTWISE])
def test_complex_pointwise_and_scans_as_torch(dg, name, fn, np_fn):
    torch = pytest.importorskip("torch")
    a, b = cvalues((4, 9), 25) * 2, cvalues((4, 9), 26) * 2
    a[0, 0] = 0
    x, tx = dg.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)
    y, ty = dg.tensor(b, requires_grad=name == "logaddexp"), torch.tensor(b, requires_grad=name == "logaddexp")
    out, tout = fn(dg, x, y), fn(torch, tx, ty)
    close(out.detach().numpy(), tout.detach().numpy(), "complex128")
    g = cvalues(tuple(tout.shape), 27)
    (out * dg.tensor(g)).real.sum().backward()
    (tout * torch.tensor(g)).real.sum().backward()
    close(x.grad.numpy(), tx.grad.numpy(), "complex128")


def test_complex_logaddexp_at_infinities(dg):
    inf = float("inf")
    a = dg.tensor([complex(-inf, 1), complex(-inf, 1), 1 + 2j], dtype=dg.complex128)
    b = dg.tensor([complex(-inf, 2), 3 + 1j, complex(-inf, 5)], dtype=dg.complex128)
    assert dg.logaddexp(a, b).tolist() == [complex(-inf, 2), 3 + 1j, 1 + 2j]       # torch's values
    x = dg.tensor([complex(-inf, 0), 1 + 1j], dtype=dg.complex128, requires_grad=True)
    dg.logaddexp(x, dg.tensor([complex(-inf, 0), complex(-inf, 0)], dtype=dg.complex128)).real.sum().backward()
    assert not np.isnan(x.grad.numpy()).any()
    # a long scan stays finite and equals the log of the running sum (mod 2 pi i) where exp does not overflow
    z = cvalues((300,), 28)
    out = dg.logcumsumexp(dg.tensor(z), 0).numpy()
    np.testing.assert_allclose(np.exp(out), np.cumsum(np.exp(z)), rtol=1e-9)


def test_masked_mean_and_triplet_loss_of_complex(dg):
    z = cvalues((3, 4), 29)
    mask = np.array([[True, False, True, True], [False] * 4, [True] * 4])
    got = dg.masked.mean(dg.tensor(z), 1, mask=dg.tensor(mask)).numpy()
    want = np.array([z[0, mask[0]].mean(), np.nan, z[2].mean()])
    assert np.isnan(got[1]) and np.allclose(got[[0, 2]], want[[0, 2]])
    a, p, n = (dg.tensor(cvalues((2, 5), s), dtype=dg.complex128, requires_grad=True) for s in (30, 31, 32))
    loss = dg.nn.functional.triplet_margin_loss(a, p, n, margin=3.0)
    d = lambda u, v: np.sqrt((np.abs(u - v + 1e-6) ** 2).sum(1))
    an, pn, nn_ = (t.detach().numpy() for t in (a, p, n))
    assert loss.dtype is dg.float64
    close(loss.item(), np.maximum(d(an, pn) - d(an, nn_) + 3.0, 0).mean(), "complex128")
    assert dg.autograd.gradcheck(lambda u, v, w: dg.nn.functional.triplet_margin_loss(u, v, w, margin=3.0),
                                 (a, p, n))


# ----- ops torch has no complex kernel for refuse complex tensors (Note [Ops torch refuses on complex tensors]) --
# Each gave a value before: from the real part (atan2, avg_pool's integer path, softmax's float32 cast), from numpy's
# lexicographic order of complex numbers (sort, topk, cummax, median, kthvalue, mode, unique, max, searchsorted,
# clamp in the reference engine), or a formula meant for real numbers (mse_loss's d * d, layer_norm, ...).

F_ = lambda dg: dg.nn.functional
REFUSED = [
    ("atan2", lambda dg, z: dg.atan2(z, z), "atan2: not supported for complex tensors"),
    ("atan2_core", lambda dg, z: dg._C.atan2(z, z), "atan2: not supported for complex tensors"),
    ("softmax_core", lambda dg, z: dg._C.softmax(z, 0), "softmax: not supported for complex tensors"),
    ("log_softmax_core", lambda dg, z: dg._C.log_softmax(z, 0), "log_softmax: not supported for complex tensors"),
    ("clamp_core", lambda dg, z: dg._C.clamp(z, 0.5, None), "clamp: not supported for complex tensors"),
    ("floor", lambda dg, z: dg.floor(z), "floor: not supported for complex tensors"),
    ("ceil", lambda dg, z: dg.ceil(z), "ceil: not supported for complex tensors"),
    ("trunc", lambda dg, z: dg.trunc(z), "trunc: not supported for complex tensors"),
    ("round", lambda dg, z: dg.round(z), "round: not supported for complex tensors"),
    ("heaviside", lambda dg, z: dg.heaviside(z, z), "heaviside: not supported for complex tensors"),
    ("isposinf", lambda dg, z: dg.isposinf(z), "isposinf: not supported for complex tensors"),
    ("sort", lambda dg, z: dg.sort(z), "sort: not supported for complex tensors"),
    ("argsort", lambda dg, z: dg.argsort(z), "argsort: not supported for complex tensors"),
    ("msort", lambda dg, z: dg.msort(z), "sort: not supported for complex tensors"),
    ("topk", lambda dg, z: dg.topk(z, 1), "topk: not supported for complex tensors"),
    ("cummax", lambda dg, z: dg.cummax(z, 0), "cummax: not supported for complex tensors"),
    ("cummin", lambda dg, z: dg.cummin(z, 0), "cummin: not supported for complex tensors"),
    ("kthvalue", lambda dg, z: dg.kthvalue(z, 1), "kthvalue: not supported for complex tensors"),
    ("median", lambda dg, z: dg.median(z), "median: not supported for complex tensors"),
    ("nanmedian", lambda dg, z: dg.nanmedian(z, 0), "nanmedian: not supported for complex tensors"),
    ("mode", lambda dg, z: dg.mode(z), "mode: not supported for complex tensors"),
    ("unique", lambda dg, z: dg.unique(z), "unique: not supported for complex tensors"),
    ("max", lambda dg, z: dg.max(z), "max: not supported for complex tensors"),
    ("min_dim", lambda dg, z: dg.min(z, 0), "min: not supported for complex tensors"),
    ("searchsorted", lambda dg, z: dg.searchsorted(z, z), "searchsorted: not supported for complex tensors"),
    ("bucketize", lambda dg, z: dg.bucketize(z, dg.tensor([0.0, 1.0])), "searchsorted: not supported for complex"),
    ("cosine_similarity", lambda dg, z: F_(dg).cosine_similarity(z, z, dim=0), "cosine_similarity: not supported"),
    ("avg_pool1d", lambda dg, z: F_(dg).avg_pool1d(z[None], 2), "avg_pool1d: not supported for complex tensors"),
    ("lp_pool1d", lambda dg, z: F_(dg).lp_pool1d(z[None], 2, 2), "lp_pool1d: not supported for complex tensors"),
    ("max_pool1d", lambda dg, z: F_(dg).max_pool1d(z[None], 2), "max_pool1d: not supported for complex tensors"),
    ("max_unpool1d", lambda dg, z: F_(dg).max_unpool1d(z[None], dg.tensor([[0, 2]]), 2),
     "max_unpool1d: not supported for complex tensors"),
    ("mse_loss", lambda dg, z: F_(dg).mse_loss(z, z), "mse_loss: not supported for complex tensors"),
    ("smooth_l1_loss", lambda dg, z: F_(dg).smooth_l1_loss(z, z), "smooth_l1_loss: not supported"),
    ("huber_loss", lambda dg, z: F_(dg).huber_loss(z, z), "huber_loss: not supported for complex tensors"),
    ("kl_div", lambda dg, z: F_(dg).kl_div(z, z, reduction="sum"), "kl_div: not supported for complex tensors"),
    ("nll_loss", lambda dg, z: F_(dg).nll_loss(z[None], dg.tensor([1])), "nll_loss: not supported"),
    ("layer_norm", lambda dg, z: F_(dg).layer_norm(z, (4,)), "layer_norm: not supported for complex tensors"),
    ("local_response_norm", lambda dg, z: F_(dg).local_response_norm(z[None, None], 2),
     "local_response_norm: not supported"),
    ("batch_norm", lambda dg, z: F_(dg).batch_norm(z.reshape(2, 2), None, None, training=True), "batch_norm: not supported"),
    ("glu", lambda dg, z: F_(dg).glu(z), "glu: not supported for complex tensors"),
    ("bernoulli", lambda dg, z: dg.bernoulli(z), "bernoulli: not supported for complex tensors"),
    ("masked_softmax", lambda dg, z: dg.masked.softmax(z, 0), "masked.softmax: not supported for complex"),
    ("masked_log_softmax", lambda dg, z: dg.masked.log_softmax(z, 0), "masked.log_softmax: not supported"),
    ("signbit", lambda dg, z: dg.signbit(z), "signbit: not supported for complex tensors"),
    ("floor_divide", lambda dg, z: dg.floor_divide(z, z), "floor_divide: not supported for complex tensors"),
    ("isneginf", lambda dg, z: dg.isneginf(z), "isneginf: not supported for complex tensors"),
    ("scatter_reduce_amax", lambda dg, z: z.scatter_reduce(0, dg.tensor([0, 0, 1, 1]), z, "amax"),
     "scatter_reduce: not supported for complex tensors"),
    ("clamp_min", lambda dg, z: dg.clamp_min(z, 0.0), "clamp: not supported for complex tensors"),
    ("clamp_tensors", lambda dg, z: dg.clamp(z, z, None), "clamp: not supported for complex tensors"),
    ("embedding_bag_max", lambda dg, z: F_(dg).embedding_bag(dg.tensor([0, 1]), z.reshape(4, 1), dg.tensor([0]),
                                                            mode="max"), "embedding_bag: not supported for complex"),
    ("elu_empty", lambda dg, z: F_(dg).elu(z[:0]), "lt: not supported for complex tensors"),
    ("gelu_empty", lambda dg, z: F_(dg).gelu(z[:0]), "gelu: not supported for complex tensors"),
]


@pytest.mark.parametrize("name, call, message", REFUSED, ids=[r[0] for r in REFUSED])
def test_ops_without_complex_kernels_refuse_complex(dg, name, call, message):
    z = dg.tensor([1 + 2j, 3 - 1j, -2 + 0.5j, 0.3 + 4j], dtype=dg.complex64)
    with pytest.raises(TypeError, match=message):
        call(dg, z)


@pytest.mark.parametrize("name, call, message", REFUSED, ids=[r[0] for r in REFUSED])
def test_torch_refuses_them_too(name, call, message):
    """The refusals are torch's: its complex call raises too (the oracle for the list above)."""
    torch = pytest.importorskip("torch")
    if name.endswith("_core"):
        pytest.skip("an entry point of the core, not torch's")
    z = torch.tensor([1 + 2j, 3 - 1j, -2 + 0.5j, 0.3 + 4j], dtype=torch.complex64)
    with pytest.raises((RuntimeError, NotImplementedError, TypeError)):
        call(torch, z)


def test_isinf_and_nan_to_num_of_complex(dg):
    """Each part on its own, as torch (nan_to_num returned a complex tensor unchanged, isinf all False)."""
    inf, nan = float("inf"), float("nan")
    z = dg.tensor([complex(inf, 0), complex(0, -inf), 1 + 1j, complex(nan, inf), complex(nan, 1)], dtype=dg.complex64)
    assert dg.isinf(z).tolist() == [True, True, False, True, False]
    big = float(np.finfo(np.float32).max)
    assert dg.nan_to_num(z).tolist() == [complex(big, 0), complex(0, -big), 1 + 1j, complex(0, big), 1j]
    assert dg.nan_to_num(z, nan=2.0, posinf=3.0).tolist() == [3 + 0j, complex(0, -big), 1 + 1j, 2 + 3j, 2 + 1j]
    x = dg.tensor([complex(nan, 2), 1 + 1j], dtype=dg.complex128, requires_grad=True)
    dg.nan_to_num(x).real.sum().backward()
    assert x.grad.tolist() == [0j, 1 + 0j]                  # the replaced part has a zero gradient


def test_scatter_reduce_mean_of_complex(dg):
    """A complex mean divides by the count (it went through the integers' floor division and failed)."""
    z = cvalues((3,), 33)
    for include_self, want in ((True, [(z[0] + z[1]) / 3, z[2] / 2]), (False, [(z[0] + z[1]) / 2, z[2]])):
        got = dg.zeros(2, dtype=dg.complex128).scatter_reduce(0, dg.tensor([0, 0, 1]), dg.tensor(z), "mean",
                                                             include_self=include_self)
        close(got.numpy(), want, "complex128")
    src = dg.tensor(z, requires_grad=True)
    assert dg.autograd.gradcheck(lambda s: dg.zeros(2, dtype=dg.complex128).scatter_reduce(
        0, dg.tensor([0, 0, 1]), s, "mean"), (src,))


def test_anomaly_mode_checks_complex_gradients(dg):
    """A NaN in a complex gradient is reported as in a real one (both engines skipped complex gradients)."""
    x = dg.tensor([1 + 1j, 2j], dtype=dg.complex128, requires_grad=True)
    with dg.autograd.detect_anomaly():
        y = (x * dg.tensor([float("nan"), 1.0], dtype=dg.complex128)).real.sum()
        with pytest.raises(RuntimeError, match=r"anomaly detection: MulBackward\w* returned a gradient containing "
                                               r"NaN for its input 0 \(shape \(2,\): 1 NaN, 0 Inf of 2 values\)"):
            y.backward()


def test_casting_complex_to_real_warns(dg):
    """As torch: the imaginary part is dropped with a warning (to a bool dtype, z != 0, there is none)."""
    import warnings
    z = dg.tensor([1 + 5j, 0j])
    for convert in (lambda t: t.to(dg.float32), lambda t: t.float(), lambda t: t.double(), lambda t: t.long(),
                    lambda t: t.type(dg.float64)):
        with pytest.warns(UserWarning, match="discards the imaginary part"):
            assert convert(z).tolist()[0] == 1
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert z.to(dg.bool).tolist() == [True, False] and z.to(dg.complex128).dtype is dg.complex128
        assert z.real.tolist() == [1.0, 0.0]


def test_isclose_of_complex_compares_the_modulus(dg):
    """|a - b| of the complex numbers (both parts were cast to float64, so 1+1j and 1+5j were close)."""
    nan = float("nan")
    a = dg.tensor([1 + 1j, 1 + 5j, complex(nan, 1), 1 + 1e-9j])
    b = dg.tensor([1 + 1j, 1 + 1j, complex(nan, 1), 1 + 0j])
    assert dg.isclose(a, b).tolist() == [True, False, False, True]
    assert dg.isclose(a, b, equal_nan=True).tolist() == [True, False, True, True]
    assert not dg.allclose(a[:2], b[:2]) and dg.allclose(a[:1], b[:1])
