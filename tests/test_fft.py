"""dyngrad.fft (python/dyngrad/_api/ops/fft.py, Note [FFT over the real layout]) on both engines:
- the argument handling (n/s, dim, norm) as pure functions of shapes, against torch's rules;
- every transform of torch.fft over the layout (complex numbers as a trailing dim of 2) against numpy.fft, with
  padding and trimming, and against torch (values and gradients, torch's complex convention); gradcheck and
  gradgradcheck in float64;
- the public functions with complex tensors in and out (view_as_real / view_as_complex at the boundary) against
  numpy and torch (values, gradients, gradcheck with complex inputs and outputs); fftfreq, rfftfreq, fftshift,
  ifftshift; stft (return_complex either way) and istft."""
import importlib
import warnings
import zlib

import numpy as np
import pytest

def fftmod(dg):
    return importlib.import_module(f"{dg.__name__}._api.ops.fft")


def pairs(z):
    return np.ascontiguousarray(np.stack([z.real, z.imag], -1))


def complex_of(a):
    return a[..., 0] + 1j * a[..., 1]


# ----- the plans -------------------------------------------------------------------------------------------------

PLANS = [  # (name, shape, size_arg, dim_arg) -> (dims, sizes)
    ("fft", (3, 4), None, None, (1,), (4,)),
    ("fft", (3, 4), 6, 0, (0,), (6,)),
    ("irfft", (3, 4), None, None, (1,), (6,)),
    ("irfft", (3, 4), 7, -2, (0,), (7,)),
    ("hfft", (5,), None, -1, (0,), (8,)),
    ("fft2", (2, 3, 4), None, None, (1, 2), (3, 4)),
    ("fft2", (2, 3, 4), (5, 6), None, (1, 2), (5, 6)),
    ("irfft2", (2, 3, 4), None, (0, 1), (0, 1), (2, 4)),
    ("fftn", (2, 3, 4), None, None, (0, 1, 2), (2, 3, 4)),
    ("fftn", (2, 3, 4), (5,), None, (2,), (5,)),
    ("fftn", (2, 3, 4), (-1, 5), None, (1, 2), (3, 5)),
    ("fftn", (2, 3, 4), None, (2, 0), (2, 0), (4, 2)),
    ("fftn", (2, 3, 4), None, (), (), ()),
    ("irfftn", (3, 4), (-1, -1), None, (0, 1), (3, 6)),
    ("irfftn", (3, 4), None, None, (0, 1), (3, 6)),
    ("rfftn", (3, 4), (2, 9), (1, 0), (1, 0), (2, 9)),
    ("hfftn", (3, 4), None, 0, (0,), (4,)),
]


@pytest.mark.parametrize("name,shape,size_arg,dim_arg,dims,sizes", PLANS)
def test_plans(dg, name, shape, size_arg, dim_arg, dims, sizes):
    plan = fftmod(dg).plan_for(name, shape, size_arg, dim_arg)
    assert plan.dims == dims and plan.sizes == sizes


@pytest.mark.parametrize("name,shape,size_arg,dim_arg,dims,sizes", PLANS)
def test_plans_give_torch_shapes(name, shape, size_arg, dim_arg, dims, sizes):
    """The planned result shapes are torch's (the plans above, run through torch.fft)."""
    torch = pytest.importorskip("torch")
    import dyngrad
    mod = fftmod(dyngrad)
    kernel = mod.TRANSFORMS[name][0]
    x = torch.zeros(shape, dtype=torch.complex128 if mod.TRANSFORMS[name][3] else torch.float64)
    kwargs = {} if dim_arg is None else {"dim": dim_arg}
    if size_arg is not None:
        kwargs["n" if mod.TRANSFORMS[name][2] == "1" else "s"] = size_arg
    want = tuple(getattr(torch.fft, name)(x, **kwargs).shape)
    plan = mod.plan_for(name, shape, size_arg, dim_arg)
    got = mod.result_shape(shape, plan, kernel) if plan.dims else shape
    assert got == want


PLAN_ERRORS = [
    ("fft", (3, 4), 0, None, RuntimeError, r"fft\.fft: invalid number of data points \(0\) specified\."),
    ("irfft", (1,), None, None, RuntimeError, r"fft\.irfft: invalid number of data points \(0\) specified\."),
    ("rfft", (3,), -1, None, RuntimeError, r"fft\.rfft: invalid number of data points \(-1\) specified\."),
    ("fft", (), None, None, IndexError, r"fft\.fft: dimension specified as -1 but the tensor has no dimensions\."),
    ("fft", (3, 4), None, 2, IndexError, r"fft\.fft: dim 2 is out of range for a tensor of 2 dimensions"),
    ("fft2", (4,), None, None, IndexError, r"fft\.fft2: dim -2 is out of range"),
    ("fftn", (3, 4), (2, 3, 4), None, RuntimeError, r"fft\.fftn: got s with 3 values, but the input has only 2"),
    ("fftn", (3, 4), (2,), (0, 1), RuntimeError, r"fft\.fftn: when given, dim and s must have the same length"),
    ("fftn", (3, 4), None, (0, -2), RuntimeError, r"fft\.fftn: FFT dims must be unique"),
    ("rfftn", (3, 4), None, (), RuntimeError, r"fft\.rfftn: must transform at least one dim\."),
    ("irfftn", (3, 4), None, (), RuntimeError, r"fft\.irfftn: must transform at least one dim\."),
    ("fft", (3,), 2.0, None, TypeError, r"fft\.fft: expected an int as n, got float"),
    ("fftn", (3,), [2.5], None, TypeError, r"fft\.fftn: expected an int as s, got float"),
]


@pytest.mark.parametrize("name,shape,size_arg,dim_arg,exc,message", PLAN_ERRORS)
def test_plan_errors(dg, name, shape, size_arg, dim_arg, exc, message):
    with pytest.raises(exc, match=message):
        fftmod(dg).plan_for(name, shape, size_arg, dim_arg)


def test_norm_argument(dg):
    mod = fftmod(dg)
    assert mod.norm_arg(None, "fft") == "backward"
    assert [mod.norm_arg(n, "fft") for n in mod.NORMS] == list(mod.NORMS)
    with pytest.raises(RuntimeError, match=r'fft\.ifft: invalid normalization mode: "bad"'):
        mod.norm_arg("bad", "ifft")


# ----- the transforms over the layout against numpy --------------------------------------------------------------

def numpy_transform(name, z, size_arg, dim_arg, norm):
    """The transform by numpy.fft, with numpy's spelling of torch's arguments (hfft2/hfftn and ihfft2/ihfftn,
    which numpy lacks, by their definitions: the inverse real transform of the conjugate, scaled the other way)."""
    other = {"backward": "forward", "forward": "backward", "ortho": "ortho", None: "forward"}
    style = {"1": "1", "2": "2", "n": "n"}[name[-1] if name[-1] in "2n" else "1"]
    kwargs = {"norm": norm}
    if style == "1":
        kwargs["axis"] = -1 if dim_arg is None else dim_arg
        if size_arg is not None:
            kwargs["n"] = size_arg
    else:
        kwargs["axes"] = (-2, -1) if dim_arg is None and style == "2" else dim_arg
        if kwargs["axes"] is None and size_arg is not None:      # torch's rule; numpy 2 wants it spelt out
            kwargs["axes"] = tuple(range(z.ndim - len(size_arg), z.ndim))
        if size_arg is not None:
            kwargs["s"] = size_arg
    if name in ("hfft2", "hfftn"):
        kwargs["norm"] = other[norm]
        return np.fft.irfftn(np.conj(z), **kwargs)
    if name in ("ihfft2", "ihfftn"):
        kwargs["norm"] = other[norm]
        return np.conj(np.fft.rfftn(z, **kwargs))
    if name in ("fft2", "ifft2", "rfft2", "irfft2"):
        return getattr(np.fft, name[:-1] + "n")(z, **kwargs)
    return getattr(np.fft, name)(z, **kwargs)


CASES = [  # (name, shape of the input, n or s, dim)
    ("fft", (3, 8), None, None), ("fft", (3, 8), 5, 0), ("fft", (3, 7), 11, -1),
    ("ifft", (4, 6), None, 0), ("ifft", (4, 6), 4, None),
    ("fft2", (2, 5, 6), None, None), ("fft2", (5, 6), (3, 8), None), ("ifft2", (5, 6), None, (1, 0)),
    ("fftn", (2, 3, 5), None, None), ("fftn", (2, 3, 5), (4, 4), (0, 2)), ("ifftn", (4, 3), (-1, 7), None),
    ("rfft", (3, 8), None, None), ("rfft", (3, 9), 12, -1), ("rfft", (6, 2), 5, 0),
    ("irfft", (3, 5), None, None), ("irfft", (3, 5), 9, -1), ("irfft", (3, 5), 4, None), ("irfft", (4, 2), 7, 0),
    ("rfft2", (4, 6), None, None), ("rfft2", (2, 4, 5), (3, 7), None), ("irfft2", (4, 5), None, None),
    ("irfft2", (4, 5), (6, 9), None), ("rfftn", (3, 4, 6), None, None), ("rfftn", (3, 4, 6), (5, 3), (2, 0)),
    ("irfftn", (3, 4, 5), None, None), ("irfftn", (3, 4, 5), (2, 7), (0, 2)),
    ("hfft", (3, 5), None, None), ("hfft", (3, 5), 9, -1), ("hfft", (5, 2), 6, 0),
    ("ihfft", (3, 8), None, None), ("ihfft", (3, 7), 5, -1),
    ("hfft2", (4, 5), None, None), ("hfft2", (4, 5), (3, 7), None), ("ihfft2", (4, 6), None, None),
    ("hfftn", (3, 4, 5), None, None), ("hfftn", (3, 4, 5), (2, 6), (0, 2)), ("ihfftn", (3, 4, 6), None, None),
]


@pytest.mark.parametrize("norm", [None, "ortho", "forward"])
@pytest.mark.parametrize("name,shape,size_arg,dim_arg", CASES)
def test_layout_transforms_against_numpy(dg, name, shape, size_arg, dim_arg, norm):
    mod = fftmod(dg)
    rng = np.random.default_rng(zlib.crc32(repr((name, shape, size_arg, dim_arg)).encode()))
    complex_input, complex_result = mod.TRANSFORMS[name][3], mod.TRANSFORMS[name][4]
    z = rng.standard_normal(shape) + (1j * rng.standard_normal(shape) if complex_input else 0)
    x = dg.tensor(pairs(z) if complex_input else z)
    out = mod.transform_layout(name, x, size_arg, dim_arg, norm).numpy()
    want = numpy_transform(name, z, size_arg, dim_arg, norm)
    got = complex_of(out) if complex_result else out
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-10 * max(1.0, np.abs(want).max()))
    # float32 in, float32 out, to float32 accuracy
    x32 = dg.tensor((pairs(z) if complex_input else z).astype(np.float32))
    out32 = mod.transform_layout(name, x32, size_arg, dim_arg, norm).numpy()
    assert out32.dtype == np.float32
    got32 = complex_of(out32) if complex_result else out32
    z32 = z.real.astype(np.float32) + (1j * z.imag.astype(np.float32) if complex_input else 0)
    want32 = numpy_transform(name, z32.astype(np.complex128) if complex_input else z32.astype(np.float64),
                             size_arg, dim_arg, norm)
    np.testing.assert_allclose(got32, want32, rtol=1e-4, atol=1e-5 * max(1.0, np.abs(want32).max()))


# ----- gradients -------------------------------------------------------------------------------------------------

GRAD_CASES = [("fft", (3, 8), 5, 0), ("ifft", (4, 6), 4, None), ("fft2", (5, 6), (3, 8), None),
              ("ifftn", (4, 3), (-1, 7), None), ("rfft", (3, 9), 12, -1), ("rfft", (6, 2), 5, 0),
              ("irfft", (3, 5), None, None), ("irfft", (3, 5), 4, None), ("irfft2", (4, 5), (6, 9), None),
              ("rfftn", (3, 4, 6), (5, 3), (2, 0)), ("irfftn", (3, 4, 5), (2, 7), (0, 2)), ("hfft", (3, 5), 9, -1),
              ("ihfft", (3, 7), 5, -1), ("hfft2", (4, 5), (3, 7), None), ("ihfft2", (4, 6), None, None),
              ("hfftn", (3, 4, 5), (2, 6), (0, 2)), ("ihfftn", (3, 4, 6), None, None)]


@pytest.mark.parametrize("norm", [None, "ortho", "forward"])
@pytest.mark.parametrize("name,shape,size_arg,dim_arg", GRAD_CASES)
def test_layout_gradcheck(dg, name, shape, size_arg, dim_arg, norm):
    mod = fftmod(dg)
    rng = np.random.default_rng(1)
    full = shape + ((2,) if mod.TRANSFORMS[name][3] else ())
    x = dg.tensor(rng.standard_normal(full), requires_grad=True)
    fn = lambda t: mod.transform_layout(name, t, size_arg, dim_arg, norm)  # noqa: E731
    assert dg.autograd.gradcheck(fn, (x,), eps=1e-6, atol=1e-6, rtol=1e-5)


@pytest.mark.parametrize("name,shape,size_arg,dim_arg", [("fft", (3, 8), 5, 0), ("rfft", (3, 9), 12, -1),
                                                         ("irfft", (3, 5), 9, -1), ("hfftn", (3, 4, 5), (2, 6), (0, 2)),
                                                         ("ihfft", (3, 7), 5, -1)])
def test_layout_gradgradcheck(dg, name, shape, size_arg, dim_arg):
    mod = fftmod(dg)
    rng = np.random.default_rng(2)
    full = shape + ((2,) if mod.TRANSFORMS[name][3] else ())
    x = dg.tensor(rng.standard_normal(full), requires_grad=True)
    fn = lambda t: mod.transform_layout(name, t, size_arg, dim_arg, "ortho")  # noqa: E731
    assert dg.autograd.gradgradcheck(fn, (x,), eps=1e-6, atol=1e-6, rtol=1e-5)


@pytest.mark.parametrize("norm", [None, "ortho", "forward"])
@pytest.mark.parametrize("name,shape,size_arg,dim_arg", CASES)
def test_layout_transforms_against_torch(dg, name, shape, size_arg, dim_arg, norm):
    """Values and gradients against torch.fft with complex tensors: the layout's gradient (dL/dre, dL/dim) is
    torch's .grad of the complex input, viewed as real."""
    torch = pytest.importorskip("torch")
    mod = fftmod(dg)
    _, _, style, complex_input, complex_result = mod.TRANSFORMS[name]
    rng = np.random.default_rng(3)
    z = rng.standard_normal(shape) + (1j * rng.standard_normal(shape) if complex_input else 0)
    tz = torch.tensor(z, requires_grad=True)
    kwargs = {"norm": norm}
    if dim_arg is not None:
        kwargs["dim"] = dim_arg
    if size_arg is not None:
        kwargs["n" if style == "1" else "s"] = size_arg
    tout = getattr(torch.fft, name)(tz, **kwargs)
    tout_real = torch.view_as_real(tout.resolve_conj()) if complex_result else tout
    w = rng.standard_normal(tuple(tout_real.shape))
    (tout_real * torch.tensor(w)).sum().backward()

    x = dg.tensor(pairs(z) if complex_input else z, requires_grad=True)
    out = mod.transform_layout(name, x, size_arg, dim_arg, norm)
    np.testing.assert_allclose(out.detach().numpy(), tout_real.detach().numpy(), rtol=1e-10, atol=1e-10)
    (out * dg.tensor(w)).sum().backward()
    want = torch.view_as_real(tz.grad.resolve_conj()).numpy() if complex_input else tz.grad.numpy()
    np.testing.assert_allclose(x.grad.numpy(), want, rtol=1e-10, atol=1e-10)


# ----- the public functions --------------------------------------------------------------------------------------

REAL_RESULTS = ["irfft", "irfft2", "irfftn", "hfft", "hfft2", "hfftn"]


@pytest.mark.parametrize("name", REAL_RESULTS)
def test_public_real_results_against_torch(dg, name):
    """Real inputs (a complex signal with zero imaginary part, as torch promotes them) and complex ones: values
    and gradients."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(4)
    real = rng.standard_normal((3, 4, 5))
    for a, kwargs in [(a, kwargs) for a in (real, real + 1j * rng.standard_normal(real.shape))
                      for kwargs in ({}, {"norm": "ortho"}, {"dim": 0} if name.endswith("fft") else {"dim": (0, 2)})]:
        t = torch.tensor(a, requires_grad=True)
        tout = getattr(torch.fft, name)(t, **kwargs)
        w = rng.standard_normal(tuple(tout.shape))
        (tout * torch.tensor(w)).sum().backward()
        x = dg.tensor(a, requires_grad=True)
        out = getattr(dg.fft, name)(x, **kwargs)
        assert out.dtype == dg.float64 and tuple(out.shape) == tuple(tout.shape)
        np.testing.assert_allclose(out.detach().numpy(), tout.detach().numpy(), rtol=1e-10, atol=1e-10)
        (out * dg.tensor(w)).sum().backward()
        np.testing.assert_allclose(x.grad.numpy(), t.grad.resolve_conj().numpy(), rtol=1e-10, atol=1e-10)


def test_public_dtypes_and_out(dg):
    ints = dg.fft.irfft(dg.tensor([1, 2, 3]))
    assert ints.dtype == dg.float32
    np.testing.assert_allclose(ints.numpy(), np.fft.irfft([1, 2, 3]), rtol=1e-6, atol=1e-6)
    f32 = dg.fft.hfft(dg.tensor(np.ones(4, dtype=np.float32)), n=5)
    assert f32.dtype == dg.float32 and tuple(f32.shape) == (5,)
    out = dg.empty(3, 4, dtype=dg.float64)
    got = dg.fft.irfft(dg.tensor(np.ones((3, 3))), out=out)
    assert got is out
    np.testing.assert_allclose(out.numpy(), np.fft.irfft(np.ones((3, 3))))
    with pytest.raises(RuntimeError, match=r"fft\.irfft: unsupported dtype float16"):
        dg.fft.irfft(dg.ones(4, dtype=dg.float16))
    with pytest.raises(RuntimeError, match=r'fft\.hfft: invalid normalization mode: "both"'):
        dg.fft.hfft(dg.ones(4), norm="both")


COMPLEX_RESULTS = ["fft", "ifft", "fft2", "ifft2", "fftn", "ifftn", "rfft", "rfft2", "rfftn", "ihfft", "ihfft2",
                   "ihfftn"]
# (kwargs of the call): the defaults, a norm, and n/s with dim (padding along one dim, trimming along another)
PUBLIC_CALLS = {"1": ({}, {"norm": "ortho"}, {"n": 7, "dim": 0}, {"n": 3, "norm": "forward"}),
                "2": ({}, {"norm": "forward"}, {"s": (5, 3), "dim": (0, 2)}),
                "n": ({}, {"norm": "ortho"}, {"s": (2, 6)}, {"dim": (2, 0), "s": (3, 4)})}


def _complex_signal(rng, shape, complex_input):
    return rng.standard_normal(shape) + (1j * rng.standard_normal(shape) if complex_input else 0)


def test_public_transforms_are_the_table_rows(dg):
    assert sorted(COMPLEX_RESULTS) == sorted(fftmod(dg).COMPLEX_RESULTS)
    for name in fftmod(dg).TRANSFORMS:
        assert callable(getattr(dg.fft, name)), name


@pytest.mark.parametrize("name", COMPLEX_RESULTS)
def test_public_complex_results_against_numpy(dg, name):
    """Complex tensors in (a real one for rfft*/ihfft*) and out, float64 and float32, against numpy.fft."""
    _, _, style, complex_input, _ = fftmod(dg).TRANSFORMS[name]
    rng = np.random.default_rng(zlib.crc32(name.encode()))
    z = _complex_signal(rng, (4, 3, 5), complex_input)
    for kwargs in PUBLIC_CALLS[style]:
        want = numpy_transform(name, z, kwargs.get("n", kwargs.get("s")), kwargs.get("dim"), kwargs.get("norm"))
        out = getattr(dg.fft, name)(dg.tensor(z), **kwargs)
        assert out.dtype == dg.complex128 and tuple(out.shape) == want.shape, (kwargs, out.shape, want.shape)
        np.testing.assert_allclose(out.numpy(), want, rtol=1e-10, atol=1e-10, err_msg=str(kwargs))
        out32 = getattr(dg.fft, name)(dg.tensor(z.astype(np.complex64 if complex_input else np.float32)), **kwargs)
        assert out32.dtype == dg.complex64
        np.testing.assert_allclose(out32.numpy(), want, rtol=1e-4, atol=1e-4, err_msg=str(kwargs))


@pytest.mark.parametrize("name", COMPLEX_RESULTS)
def test_public_complex_results_against_torch(dg, name):
    """Values and .grad of a real loss of the complex result (torch's convention for complex gradients)."""
    torch = pytest.importorskip("torch")
    _, _, style, complex_input, _ = fftmod(dg).TRANSFORMS[name]
    rng = np.random.default_rng(zlib.crc32(name.encode()) + 1)
    z = _complex_signal(rng, (4, 3, 5), complex_input)
    for kwargs in PUBLIC_CALLS[style]:
        t = torch.tensor(z, requires_grad=True)
        tout = getattr(torch.fft, name)(t, **kwargs)
        w = _complex_signal(rng, tuple(tout.shape), True)
        # |out|^2 weighted plus a real part against w: both the modulus and the phase reach the gradient
        (tout.abs() ** 2 + (tout * torch.tensor(w)).real).sum().backward()
        x = dg.tensor(z, requires_grad=True)
        out = getattr(dg.fft, name)(x, **kwargs)
        np.testing.assert_allclose(out.detach().numpy(), tout.detach().resolve_conj().numpy(), rtol=1e-10,
                                   atol=1e-10)
        (out.abs() ** 2 + (out * dg.tensor(w)).real).sum().backward()
        assert x.grad.dtype == x.dtype
        np.testing.assert_allclose(x.grad.numpy(), t.grad.resolve_conj().numpy(), rtol=1e-9, atol=1e-9, err_msg=str(kwargs))


@pytest.mark.parametrize("name", COMPLEX_RESULTS + REAL_RESULTS)
def test_public_gradcheck_complex(dg, name):
    """gradcheck and gradgradcheck with complex inputs (the complex-input transforms) and complex outputs."""
    _, _, style, complex_input, _ = fftmod(dg).TRANSFORMS[name]
    rng = np.random.default_rng(zlib.crc32(name.encode()) + 2)
    z = _complex_signal(rng, (3, 4), complex_input)
    kwargs = {"norm": "ortho"} if style == "1" else {"s": (2, 5)}
    fn = getattr(dg.fft, name)
    x = dg.tensor(z, requires_grad=True)
    assert dg.autograd.gradcheck(lambda a: fn(a, **kwargs), (x,))
    assert dg.autograd.gradgradcheck(lambda a: fn(a, **kwargs), (x,))


def test_public_complex_boundary(dg):
    """Real inputs of complex transforms are promoted; complex inputs of real-input ones refused, as torch."""
    z = np.arange(6.0).reshape(2, 3)
    np.testing.assert_allclose(dg.fft.fft(dg.tensor(z)).numpy(), np.fft.fft(z), atol=1e-12)
    assert dg.fft.fft(dg.tensor([1, 2, 3])).dtype == dg.complex64
    with pytest.raises(RuntimeError, match=r"fft\.rfft: expects a real input tensor, but got complex128"):
        dg.fft.rfft(dg.tensor(z + 1j))
    with pytest.raises(RuntimeError, match=r"fft\.ihfft2: expects a real input tensor, but got complex64"):
        dg.fft.ihfft2(dg.tensor((z + 1j).astype(np.complex64)))
    # a non-contiguous complex input, and a round trip through the inverse
    c = dg.tensor((z + 1j * z[::-1]).T.copy()).t()
    np.testing.assert_allclose(dg.fft.ifft(dg.fft.fft(c)).numpy(), c.numpy(), atol=1e-12)
    np.testing.assert_allclose(dg.fft.irfftn(dg.fft.rfftn(dg.tensor(z)), s=(2, 3)).numpy(), z, atol=1e-12)
    out = dg.empty(2, 3, dtype=dg.complex128)
    assert dg.fft.fft(dg.tensor(z), out=out) is out
    np.testing.assert_allclose(out.numpy(), np.fft.fft(z), atol=1e-12)


# ----- frequencies and shifts ------------------------------------------------------------------------------------

def test_frequencies_against_torch(dg):
    torch = pytest.importorskip("torch")
    for n in (0, 1, 2, 5, 8, 9):
        for d in (1.0, 0.5, 3):
            for name in ("fftfreq", "rfftfreq"):
                got = getattr(dg.fft, name)(n, d)
                want = getattr(torch.fft, name)(n, d)
                assert got.dtype == dg.float32 and tuple(got.shape) == tuple(want.shape)
                np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-6, atol=1e-7)
    f = dg.fft.fftfreq(7, 0.1, dtype=dg.float64, requires_grad=True)
    assert f.requires_grad and f.dtype == dg.float64
    np.testing.assert_allclose(f.detach().numpy(), np.fft.fftfreq(7, 0.1), rtol=1e-15)
    with pytest.raises(RuntimeError, match=r"fft\.fftfreq: requires a floating-point dtype, got int64"):
        dg.fft.fftfreq(4, dtype=dg.int64)
    with pytest.raises(RuntimeError, match=r"fft\.rfftfreq: n must be non-negative, got -1"):
        dg.fft.rfftfreq(-1)


@pytest.mark.parametrize("shape,dim", [((6,), None), ((5,), None), ((2, 3), None), ((4, 5, 3), (0, 2)),
                                       ((4, 5), 1), ((4, 5), -2)])
def test_shifts_against_torch(dg, shape, dim):
    torch = pytest.importorskip("torch")
    a = np.arange(int(np.prod(shape)), dtype=np.float64).reshape(shape)
    for name in ("fftshift", "ifftshift"):
        got = getattr(dg.fft, name)(dg.tensor(a), dim)
        want = getattr(torch.fft, name)(torch.tensor(a), dim)
        np.testing.assert_array_equal(got.numpy(), want.numpy())
        back = dg.fft.ifftshift(dg.fft.fftshift(dg.tensor(a), dim), dim)
        np.testing.assert_array_equal(back.numpy(), a)


def test_shifts_of_nothing(dg):
    """A 0-d tensor or dim=() has nothing to shift: a copy (torch raises "`shifts` required" from roll)."""
    for a, dim in ((dg.tensor(3.0), None), (dg.ones(2, 3), ())):
        for name in ("fftshift", "ifftshift"):
            got = getattr(dg.fft, name)(a, dim)
            np.testing.assert_array_equal(got.numpy(), a.numpy())


def test_shift_gradient(dg):
    x = dg.tensor(np.arange(5.0), requires_grad=True)
    w = dg.tensor([1.0, 2.0, 3.0, 4.0, 5.0])
    (dg.fft.fftshift(x) * w).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), np.fft.ifftshift([1.0, 2.0, 3.0, 4.0, 5.0]))


# ----- stft ------------------------------------------------------------------------------------------------------

STFT_CASES = [  # (signal shape, keyword arguments; window: its length or None)
    ((64,), {"n_fft": 16, "window": 16}),
    ((2, 50), {"n_fft": 12, "hop_length": 5, "window": 12}),
    ((50,), {"n_fft": 16, "win_length": 10, "window": 10, "center": False}),
    ((2, 40), {"n_fft": 8, "window": 8, "pad_mode": "constant", "normalized": True}),
    ((40,), {"n_fft": 9, "hop_length": 3, "window": 9, "pad_mode": "replicate", "onesided": False}),
    ((33,), {"n_fft": 10, "window": None, "pad_mode": "circular"}),
]


def _stft_torch(torch, shape, kwargs, values, window_values):
    t = torch.tensor(values, requires_grad=True)
    w = None if window_values is None else torch.tensor(window_values, requires_grad=True)
    out = torch.view_as_real(torch.stft(t, window=w, return_complex=True, **kwargs))
    return t, w, out


@pytest.mark.filterwarnings("ignore:stft. no window was given")
@pytest.mark.parametrize("shape,kwargs", STFT_CASES)
def test_stft_against_torch(dg, shape, kwargs):
    """Values and gradients (the signal's and the window's) against torch.stft(return_complex=True) viewed as
    real, which is what return_complex=False gives."""
    torch = pytest.importorskip("torch")
    import warnings
    kwargs = dict(kwargs)
    win = kwargs.pop("window")
    rng = np.random.default_rng(5)
    values = rng.standard_normal(shape)
    window_values = None if win is None else np.hanning(win + 2)[1:-1]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t, tw, tout = _stft_torch(torch, shape, kwargs, values, window_values)
    g = rng.standard_normal(tuple(tout.shape))
    (tout * torch.tensor(g)).sum().backward()
    x = dg.tensor(values, requires_grad=True)
    w = None if win is None else dg.tensor(window_values, requires_grad=True)
    out = dg.stft(x, window=w, return_complex=False, **kwargs)
    assert tuple(out.shape) == tuple(tout.shape)
    np.testing.assert_allclose(out.detach().numpy(), tout.detach().numpy(), rtol=1e-10, atol=1e-10)
    (out * dg.tensor(g)).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), t.grad.numpy(), rtol=1e-10, atol=1e-10)
    if w is not None:
        np.testing.assert_allclose(w.grad.numpy(), tw.grad.numpy(), rtol=1e-10, atol=1e-10)
    # the method, and float32
    out32 = dg.tensor(values.astype(np.float32)).stft(window=None if w is None else w.detach().float(),
                                                      return_complex=False, **kwargs)
    assert out32.dtype == dg.float32
    np.testing.assert_allclose(out32.numpy(), tout.detach().numpy(), rtol=1e-4, atol=1e-4)


def test_stft_of_a_complex_signal_over_the_layout(dg):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(6)
    z = rng.standard_normal((2, 30)) + 1j * rng.standard_normal((2, 30))
    w = np.hanning(8)
    want = torch.view_as_real(torch.stft(torch.tensor(z), 8, hop_length=3, window=torch.tensor(w),
                                         return_complex=True)).numpy()
    got = fftmod(dg).stft_layout(dg.tensor(pairs(z)), 8, 3, None, dg.tensor(w), complex_input=True)
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-10, atol=1e-10)


STFT_ERRORS = [
    (lambda m: m.stft(m.ones(20), 4, window=m.ones(4)), RuntimeError,
     r"stft: requires the return_complex parameter be given for real inputs"),
    (lambda m: m.stft(m.ones(20, dtype=m.complex64), 4, window=m.ones(4), onesided=True, return_complex=True),
     RuntimeError, r"stft: cannot have onesided output if window or input is complex"),
    (lambda m: m.stft(m.ones(20), 4, window=m.ones(4, dtype=m.complex64), onesided=True, return_complex=True),
     RuntimeError, r"stft: cannot have onesided output if window or input is complex"),
    (lambda m: m.stft(m.ones(20), 0, window=m.ones(0), return_complex=False), RuntimeError,
     r"stft: expected 0 < n_fft <= 20"),
    (lambda m: m.stft(m.ones(20), 30, window=m.ones(30), center=False, return_complex=False), RuntimeError,
     r"stft: expected 0 < n_fft <= 20 \(the signal's length\), got n_fft=30\."),
    (lambda m: m.stft(m.ones(20), 4, hop_length=0, window=m.ones(4), return_complex=False), RuntimeError,
     r"stft: expected hop_length > 0, got hop_length=0\."),
    (lambda m: m.stft(m.ones(20), 4, win_length=6, window=m.ones(6), return_complex=False), RuntimeError,
     r"stft: expected 0 < win_length <= n_fft=4, got win_length=6\."),
    (lambda m: m.stft(m.ones(20), 4, window=m.ones(5), return_complex=False), RuntimeError,
     r"stft: expected a 1-D window of win_length=4 points, got a window of shape \(5,\)\."),
    (lambda m: m.stft(m.ones(2, 3, 20), 4, window=m.ones(4), return_complex=False), RuntimeError,
     r"stft: expected a 1-D or 2-D signal, got 3 dimensions"),
    (lambda m: m.stft(m.ones(20), 4, window=m.ones(4), pad_mode="bad", return_complex=False), NotImplementedError,
     r"pad: unrecognised padding mode 'bad'"),
]


@pytest.mark.parametrize("call,exc,message", STFT_ERRORS)
def test_stft_errors(dg, call, exc, message):
    with pytest.raises(exc, match=message):
        call(dg)


def test_stft_warns_without_a_window(dg):
    with pytest.warns(UserWarning, match=r"stft: no window was given, so a rectangular one is used"):
        dg.stft(dg.ones(20), 4, return_complex=False)


ISTFT_CASES = [  # (signal shape, keyword arguments shared by stft and istft; window length or None)
    ((64,), {"n_fft": 16, "window": 16}),
    ((2, 50), {"n_fft": 12, "hop_length": 5, "window": 12}),
    ((50,), {"n_fft": 16, "win_length": 12, "hop_length": 4, "window": 12}),
    ((50,), {"n_fft": 16, "hop_length": 4, "window": 16, "center": False}),
    ((2, 40), {"n_fft": 8, "window": 8, "normalized": True, "length": 37}),
    ((40,), {"n_fft": 9, "hop_length": 3, "window": None, "onesided": False, "length": 45}),
]


@pytest.mark.parametrize("shape,kwargs", ISTFT_CASES)
def test_istft_layout_against_torch(dg, shape, kwargs):
    """istft over the layout: torch.istft of the complex spectrum (values, the spectrum's and the window's
    gradients), and the round trip stft -> istft giving the signal back."""
    torch = pytest.importorskip("torch")
    import warnings
    kwargs = dict(kwargs)
    win = kwargs.pop("window")
    length = kwargs.pop("length", None)
    onesided = kwargs.pop("onesided", None)
    rng = np.random.default_rng(7)
    signal = rng.standard_normal(shape)
    window_values = None if win is None else np.hanning(win + 2)[1:-1]
    tw = None if win is None else torch.tensor(window_values, requires_grad=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        spectrum = torch.stft(torch.tensor(signal), window=tw, onesided=onesided, return_complex=True, **kwargs)
        spectrum = spectrum.detach().requires_grad_(True)
        tout = torch.istft(spectrum, window=tw, onesided=onesided, length=length, **kwargs)
    g = rng.standard_normal(tuple(tout.shape))
    (tout * torch.tensor(g)).sum().backward()
    mod = fftmod(dg)
    x = dg.tensor(torch.view_as_real(spectrum.detach()).numpy(), requires_grad=True)
    w = None if win is None else dg.tensor(window_values, requires_grad=True)
    args = {k: v for k, v in kwargs.items() if k != "n_fft"}
    out = mod.istft_layout(x, kwargs["n_fft"], window=w, onesided=onesided, length=length, **args)
    assert tuple(out.shape) == tuple(tout.shape)
    np.testing.assert_allclose(out.detach().numpy(), tout.detach().numpy(), rtol=1e-10, atol=1e-10)
    if kwargs.get("center", True):     # the round trip: the signal back (past its end, what the padding made)
        k = min(out.shape[-1], signal.shape[-1])
        np.testing.assert_allclose(out.detach().numpy()[..., :k], signal[..., :k], rtol=1e-9, atol=1e-9)
    (out * dg.tensor(g)).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), torch.view_as_real(spectrum.grad).numpy(), rtol=1e-9, atol=1e-9)
    if w is not None:
        np.testing.assert_allclose(w.grad.numpy(), tw.grad.numpy(), rtol=1e-9, atol=1e-9)


def test_istft_layout_errors(dg):
    mod = fftmod(dg)
    spectrum = dg.zeros(5, 4, 2)
    with pytest.raises(RuntimeError, match=r"istft: expected 5 frequencies for n_fft=9 \(one-sided\), got 6\."):
        mod.istft_layout(dg.zeros(6, 4, 2), 9, onesided=True)
    with pytest.raises(RuntimeError, match=r"istft: the window's overlap-add envelope is 0 somewhere"):
        mod.istft_layout(spectrum, 8, hop_length=2, window=dg.zeros(8))
    with pytest.raises(RuntimeError, match=r"istft: expected 0 < hop_length <= win_length"):
        mod.istft_layout(spectrum, 8, hop_length=9)
    with pytest.raises(RuntimeError, match=r"istft: expected a spectrum of shape"):
        mod.istft_layout(dg.zeros(5, 4), 8)


@pytest.mark.parametrize("shape,kwargs", ISTFT_CASES)
def test_public_stft_istft_against_torch(dg, shape, kwargs):
    """The public stft(return_complex=True) and istft on complex tensors against torch: values, the signal's,
    the spectrum's and the window's gradients; and Tensor.stft / Tensor.istft."""
    torch = pytest.importorskip("torch")
    kwargs = dict(kwargs)
    win = kwargs.pop("window")
    length = kwargs.pop("length", None)
    onesided = kwargs.pop("onesided", None)
    rng = np.random.default_rng(8)
    signal = rng.standard_normal(shape)
    window_values = np.ones(kwargs["n_fft"]) if win is None else np.hanning(win + 2)[1:-1]
    tw = torch.tensor(window_values, requires_grad=True)
    ts = torch.tensor(signal, requires_grad=True)
    tspec = torch.stft(ts, window=tw, onesided=onesided, return_complex=True, **kwargs)
    tspec_leaf = tspec.detach().requires_grad_(True)
    with warnings.catch_warnings():     # torch's about padding the tail, when length is past the signal
        warnings.simplefilter("ignore")
        tout = torch.istft(tspec_leaf, window=tw, onesided=onesided, length=length, **kwargs)
    gs = rng.standard_normal(tuple(tspec.shape)) + 1j * rng.standard_normal(tuple(tspec.shape))
    go = rng.standard_normal(tuple(tout.shape))
    ((tspec * torch.tensor(gs)).real.sum() + (tout * torch.tensor(go)).sum()).backward()

    w = dg.tensor(window_values, requires_grad=True)
    s = dg.tensor(signal, requires_grad=True)
    spec = s.stft(window=w, onesided=onesided, return_complex=True, **kwargs)
    assert spec.dtype == dg.complex128 and tuple(spec.shape) == tuple(tspec.shape)
    np.testing.assert_allclose(spec.detach().numpy(), tspec.detach().numpy(), rtol=1e-10, atol=1e-10)
    spec_leaf = spec.detach().requires_grad_(True)
    out = spec_leaf.istft(window=w, onesided=onesided, length=length, **kwargs)
    assert out.dtype == dg.float64 and tuple(out.shape) == tuple(tout.shape)
    np.testing.assert_allclose(out.detach().numpy(), tout.detach().numpy(), rtol=1e-10, atol=1e-10)
    ((spec * dg.tensor(gs)).real.sum() + (out * dg.tensor(go)).sum()).backward()
    np.testing.assert_allclose(s.grad.numpy(), ts.grad.numpy(), rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(spec_leaf.grad.numpy(), tspec_leaf.grad.numpy(), rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(w.grad.numpy(), tw.grad.numpy(), rtol=1e-9, atol=1e-9)


def test_public_stft_istft_gradcheck_and_errors(dg):
    rng = np.random.default_rng(9)
    w = dg.tensor(np.hanning(8))
    z = dg.tensor(rng.standard_normal(20) + 1j * rng.standard_normal(20), requires_grad=True)
    assert dg.autograd.gradcheck(lambda a: dg.stft(a, 8, 3, window=w), (z,))     # a complex signal: two-sided
    spec = dg.stft(dg.tensor(rng.standard_normal(20)), 8, 2, window=w, return_complex=True)
    leaf = spec.detach().requires_grad_(True)
    assert dg.autograd.gradcheck(lambda a: dg.istft(a, 8, 2, window=w, length=20), (leaf,))
    with pytest.raises(RuntimeError, match=r"istft: requires a complex-valued input tensor \(got float64\)"):
        dg.istft(dg.view_as_real(spec), 8, 2, window=w)
    with pytest.raises(RuntimeError, match=r"istft: cannot have onesided output if window or input is complex"):
        dg.istft(spec, 8, 2, window=w, return_complex=True)           # a one-sided spectrum
    two = dg.stft(dg.tensor(rng.standard_normal(20) + 0j), 8, 2, window=w)
    with pytest.raises(RuntimeError, match=r"istft: complex windows are incompatible with return_complex=False"):
        dg.istft(two, 8, 2, window=w.to(dg.complex128))


def _complex_window(n, seed=0):
    return np.hanning(n + 2)[1:-1] * np.exp(1j * np.random.default_rng(seed).uniform(0, 2, n))


def test_stft_istft_complex_round_trip(dg):
    """istft(stft(z), return_complex=True) is z for a complex signal, with a real or a complex window (its square
    w^2 makes the envelope), centred or not; a complex window makes a real signal's transform two-sided."""
    rng = np.random.default_rng(10)
    z = rng.standard_normal((2, 38)) + 1j * rng.standard_normal((2, 38))   # frames cover all 38 without centring
    for window in (np.hanning(10)[1:-1], _complex_window(8), _complex_window(6)):
        w = dg.tensor(window)
        win = len(window)
        for center in (True, False) if win == 8 else (True,):     # (a padded window vanishes at the ends)
            spec = dg.stft(dg.tensor(z), 8, 2, win_length=win, window=w, center=center)
            assert spec.dtype == dg.complex128 and spec.shape[-2] == 8
            back = dg.istft(spec, 8, 2, win_length=win, window=w, center=center, length=38, return_complex=True)
            assert back.dtype == dg.complex128
            np.testing.assert_allclose(back.numpy(), z, atol=1e-12)
    real = dg.stft(dg.tensor(z.real), 8, 2, window=dg.tensor(_complex_window(8)))   # return_complex defaults to True
    assert real.dtype == dg.complex128 and real.shape[-2] == 8
    pairs_ = dg.stft(dg.tensor(z), 8, 2, window=dg.tensor(_complex_window(8)), return_complex=False)
    np.testing.assert_array_equal(pairs_.numpy(), dg.view_as_real(dg.stft(dg.tensor(z), 8, 2,
                                  window=dg.tensor(_complex_window(8)))).numpy())


STFT_COMPLEX_CASES = {   # name: f(module, tensor) -> output; torch 2.13 accepts every one
    "complex_signal_pairs": lambda m, T, z, r, wc: m.stft(T(z), 8, 3, window=T(np.hanning(8)),
                                                          return_complex=False),
    "complex_window": lambda m, T, z, r, wc: m.stft(T(r), 8, 3, window=T(wc), normalized=True),
    "complex_window_short": lambda m, T, z, r, wc: m.stft(T(z), 8, 3, win_length=6, window=T(wc[:6])),
    "promotes_float32_signal": lambda m, T, z, r, wc: m.stft(T(r).float(), 8, 3, window=T(np.hanning(8)),
                                                             return_complex=True),
    "promotes_complex64_signal": lambda m, T, z, r, wc: m.stft(T(z).to(m.complex64), 8, 3, window=T(wc)),
    "istft_complex": lambda m, T, z, r, wc: m.istft(m.stft(T(z), 8, 2, window=T(np.hanning(8)),
                                                           return_complex=True),
                                                    8, 2, window=T(np.hanning(8)), return_complex=True, length=30),
    "istft_complex_window": lambda m, T, z, r, wc: m.istft(m.stft(T(z), 8, 2, window=T(wc)), 8, 2, window=T(wc),
                                                           return_complex=True, normalized=True),
}


@pytest.mark.parametrize("name", list(STFT_COMPLEX_CASES))
def test_stft_istft_complex_cases_against_torch(dg, name):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(11)
    z = rng.standard_normal((2, 33)) + 1j * rng.standard_normal((2, 33))
    r, wc = rng.standard_normal((2, 33)), _complex_window(8, seed=3)
    fn = STFT_COMPLEX_CASES[name]

    def run(m, T):
        leaves = []

        def leaf(a):
            t = T(a)
            t.requires_grad_(True)
            leaves.append(t)
            return t
        out = fn(m, leaf, z, r, wc)
        return out, leaves
    tout, tleaves = run(torch, torch.tensor)
    out, leaves = run(dg, dg.tensor)
    assert str(out.dtype).split(".")[-1] == str(tout.dtype).split(".")[-1]
    assert tuple(out.shape) == tuple(tout.shape)
    rtol = 1e-5 if out.dtype in (dg.complex64, dg.float32) else 1e-10
    np.testing.assert_allclose(out.detach().numpy(), tout.detach().numpy(), rtol=rtol, atol=rtol)
    g = rng.standard_normal(tuple(tout.shape)) + (1j * rng.standard_normal(tuple(tout.shape))
                                                  if tout.is_complex() else 0)
    tgrads = torch.autograd.grad(tout, tleaves, torch.tensor(g).to(tout.dtype))
    grads = dg.autograd.grad(out, leaves, dg.tensor(g).to(out.dtype))
    for a, e in zip(grads, tgrads):
        tol = 1e-5 if name.startswith("promotes") else 1e-9      # (those pass through a single-precision cast)
        np.testing.assert_allclose(a.numpy(), e.numpy(), rtol=tol, atol=tol)
