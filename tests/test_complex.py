"""complex64 / complex128 on both engines: creation, printing, promotion (against torch over every pair of dtypes),
real/imag/view_as_real/view_as_complex as views of one memory, the complex ops against numpy and torch, and their
gradients in torch's convention (gradcheck over real and imaginary perturbations; .grad of a real loss against
torch's) (Note [Complex dtypes] in csrc/dyngrad/dtype.h, Note [Complex gradients] in csrc/dyngrad/derivatives.cpp)."""
import numpy as np
import pytest

NAMES = ["bool", "uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16", "float32", "float64",
         "complex64", "complex128"]


def cvalues(shape, seed=0, away_from=None):
    """complex128 values, normal real and imaginary parts; `away_from` keeps |z - c| > 0.3 for each c given."""
    rng = np.random.default_rng(seed)
    z = rng.standard_normal(shape) + 1j * rng.standard_normal(shape)
    for c in away_from or ():
        near = np.abs(z - c) < 0.3
        z = np.where(near, z + 0.6, z)
    return z


def close(got, want, dtype_name):
    tol = 2e-5 if dtype_name == "complex64" else 1e-11
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=tol, atol=tol)


# ----- dtypes, creation, printing ------------------------------------------------------------------------------

def test_dtype_objects(dg):
    assert dg.cfloat is dg.complex64 and dg.cdouble is dg.complex128
    for name, size in (("complex64", 8), ("complex128", 16)):
        d = getattr(dg, name)
        assert repr(d) == f"dyngrad.{name}" and d.is_complex and not d.is_floating_point and d.itemsize == size
    assert not dg.float32.is_complex
    with pytest.raises(TypeError, match="complex32"):
        dg.zeros(2, dtype="complex32")


def test_creation(dg):
    x = dg.tensor([1 + 2j, 3 - 4j])
    assert x.dtype is dg.complex64 and x.is_complex() and dg.is_complex(x)
    assert x.tolist() == [1 + 2j, 3 - 4j] and x[1].item() == 3 - 4j
    assert dg.tensor(np.array([1j], dtype=np.complex128)).dtype is dg.complex128
    shared = np.array([1 + 1j, 2 + 2j], dtype=np.complex64)
    t = dg.from_numpy(shared)
    shared[0] = 5j
    assert t.dtype is dg.complex64 and t[0].item() == 5j and t.numpy().dtype == np.complex64
    assert dg.zeros(2, dtype=dg.complex128).tolist() == [0j, 0j]
    assert dg.full((2,), 1 + 1j).dtype is dg.complex64
    assert dg.tensor([1.0, 2.0]).to(dg.complex64).tolist() == [1 + 0j, 2 + 0j]
    with pytest.warns(UserWarning, match="Casting complex values to real discards the imaginary part"):
        assert dg.tensor([1 + 5j]).to(dg.float64).tolist() == [1.0]    # the real part, with torch's warning
    assert dg.tensor([0 + 1j, 0j]).to(dg.bool).tolist() == [True, False]
    assert dg.complex(dg.tensor([1.0]), dg.tensor([2.0])).tolist() == [1 + 2j]
    p = dg.polar(dg.tensor([2.0], dtype=dg.float64), dg.tensor([np.pi / 2], dtype=dg.float64))
    assert p.dtype is dg.complex128 and abs(p.item() - 2j) < 1e-15
    with pytest.raises(RuntimeError, match="complex: expected both inputs"):
        dg.complex(dg.tensor([1.0]), dg.tensor([1.0], dtype=dg.float64))
    with pytest.raises(TypeError, match="can't convert complex"):
        dg.tensor([1j], dtype=dg.float32)


def test_fill_and_writes_into_real_tensors(dg):
    z = dg.zeros(2, dtype=dg.complex64)
    assert z.fill_(1 + 2j).tolist() == [1 + 2j] * 2 and z.fill_(dg.tensor(3 - 1j)).tolist() == [3 - 1j] * 2
    h = dg.zeros(3, dtype=dg.complex128, requires_grad=True)
    filled = h.clone().fill_(2j)                  # recorded: the old values get no gradient
    assert filled.tolist() == [2j] * 3 and filled.grad_fn is not None
    filled.real.sum().backward()
    assert h.grad.tolist() == [0j] * 3
    r = dg.zeros(2)
    with pytest.raises(RuntimeError, match=r"fill_: value \(1\+2j\) cannot be converted to float32"):
        r.fill_(1 + 2j)                           # a Python complex must fit, as torch
    assert r.fill_(1 + 0j).tolist() == [1.0, 1.0]
    # a complex tensor written into a real one keeps the real part, with torch's warning, on every path
    for write in (lambda: r.fill_(dg.tensor(5 + 1j)), lambda: r.copy_(dg.tensor([1 + 1j, 2])),
                  lambda: r.__setitem__(0, dg.tensor(7 + 1j))):
        with pytest.warns(UserWarning, match="discards the imaginary part"):
            write()
    assert r.tolist() == [7.0, 2.0]


def test_printing_as_torch(dg):
    torch = pytest.importorskip("torch")
    for values, name in (([1 + 2j, 3 - 4j], "complex64"), ([0.5 - 0.25j, -1e-5 + 3j], "complex128"),
                         ([[1j, 2], [-3.5j, 0]], "complex64"), ([1e10 + 1j], "complex64")):
        assert repr(dg.tensor(values, dtype=getattr(dg, name))).replace("dyngrad", "torch") == \
            repr(torch.tensor(values, dtype=getattr(torch, name)))
    assert repr(dg.tensor(2 - 1j)) == repr(torch.tensor(2 - 1j))


@pytest.mark.parametrize("a", NAMES)
def test_promotion_as_torch(dg, a):
    """result_type of every pair (tensors with dims, 0-d tensors, Python numbers) and promote_types, as torch."""
    torch = pytest.importorskip("torch")
    for b in NAMES:
        assert dg.promote_types(getattr(dg, a), getattr(dg, b)).name == \
            str(torch.promote_types(getattr(torch, a), getattr(torch, b))).split(".")[1]
        for shape_a, shape_b in (((2,), (2,)), ((2,), ()), ((), (2,))):
            want = str(torch.result_type(torch.zeros(shape_a, dtype=getattr(torch, a)),
                                         torch.zeros(shape_b, dtype=getattr(torch, b)))).split(".")[1]
            x, y = dg.zeros(shape_a, dtype=getattr(dg, a)), dg.zeros(shape_b, dtype=getattr(dg, b))
            if want == "complex32":      # a float16 tensor with a complex 0-d one: refused here
                with pytest.raises(TypeError, match="complex32"):
                    dg.result_type(x, y)
                continue
            assert dg.result_type(x, y).name == want, (a, shape_a, b, shape_b)
            if a != "bool" or b != "bool":
                assert (x + y).dtype.name == want, (a, shape_a, b, shape_b)
    for number in (1j, 2.5, 3, True):
        try:
            want = str(torch.result_type(torch.zeros(2, dtype=getattr(torch, a)), number)).split(".")[1]
        except RuntimeError:
            continue
        if want == "complex32":      # float16 * 1j: refused here (no complex32)
            with pytest.raises(TypeError, match="complex32"):
                dg.result_type(dg.zeros(2, dtype=getattr(dg, a)), number)
            continue
        assert dg.result_type(dg.zeros(2, dtype=getattr(dg, a)), number).name == want, (a, number)
        if want.startswith("complex") and a != "bool":
            assert (dg.ones(2, dtype=getattr(dg, a)) * number).dtype.name == want


# ----- views ---------------------------------------------------------------------------------------------------

def test_assigning_real_and_imag(dg):
    """z.real = v and z.imag = v copy into the part (tensors broadcast, numbers fill), as torch; a real tensor's
    .real is itself and it has no .imag; into a tensor with history the write is recorded."""
    z = dg.tensor([1 + 2j, 3 - 4j], dtype=dg.complex128)
    z.real = dg.tensor([5.0, 6.0], dtype=dg.float64)
    z.imag = 7
    assert z.tolist() == [5 + 7j, 6 + 7j]
    x = dg.tensor([1.0, 2.0])
    x.real = dg.tensor(9.0)
    assert x.tolist() == [9.0, 9.0]
    with pytest.raises(RuntimeError, match="imag: not implemented"):
        x.imag = 1.0
    a = dg.tensor([1 + 1j, 2 - 1j], dtype=dg.complex128, requires_grad=True)
    b = dg.tensor([3.0, 4.0], dtype=dg.float64, requires_grad=True)
    with pytest.raises(RuntimeError, match="leaf"):
        a.real = b
    c = a * 1
    c.imag = b                                    # into a tensor with history: recorded, as torch
    assert c.tolist() == [1 + 3j, 2 + 4j]
    (c.abs() ** 2).sum().backward()
    assert a.grad.tolist() == [2 + 0j, 4 + 0j] and b.grad.tolist() == [6.0, 8.0]


def _writes_into_real_views(dg, x):
    y = x * 2
    y.real.mul_(3)
    y.imag[0].add_(y.real[1])                     # a view of a view: the root is y
    dg.view_as_real(y)[1, 0, 1].mul_(5)
    return y


def test_inplace_writes_into_real_views_with_history(dg):
    """real, imag and view_as_real of a complex tensor with history take in-place writes: the base's history is
    a put into its (real, imag) pairs. Gradients against float64 finite differences (gradcheck) and torch."""
    x = dg.tensor([[1 + 2j, 3 - 1j], [0.5j, 2]], dtype=dg.complex128, requires_grad=True)
    assert dg.autograd.gradcheck(lambda x: _writes_into_real_views(dg, x).abs() ** 2, (x,))
    y = _writes_into_real_views(dg, x)
    (y.abs() ** 2).sum().backward()
    assert y.tolist() == [[6 + 4j, 18 + 10j], [5j, 12]]
    torch = pytest.importorskip("torch")
    tx = torch.tensor(x.detach().numpy(), requires_grad=True)
    ty = _writes_into_real_views(torch, tx)
    (ty.abs() ** 2).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-12)


def test_inplace_writes_into_real_views_carry_tangents(dg):
    """Forward mode: a write into a real view of a dual complex tensor updates the base's tangent at the view's
    positions (it kept the old tangent: a silent wrong answer)."""
    fw = dg.autograd.forward_ad

    def f(lib, d):
        z = d * 2
        z.real.mul_(3)
        z.imag[1:].mul_(-2)
        return z
    primal = np.array([1 + 2j, 3 - 1j])
    tangent = np.array([1 + 1j, 1j])
    with fw.dual_level():
        got = fw.unpack_dual(f(dg, fw.make_dual(dg.tensor(primal), dg.tensor(tangent)))).tangent.numpy()
    assert got.tolist() == [6 + 2j, -4j]
    eps = 1e-6                                    # the map is linear: central differences are exact up to rounding
    ahead, behind = f(dg, dg.tensor(primal + eps * tangent)), f(dg, dg.tensor(primal - eps * tangent))
    fd = (ahead.numpy() - behind.numpy()) / (2 * eps)
    np.testing.assert_allclose(got, fd, rtol=1e-8, atol=1e-8)


def test_views_share_memory(dg):
    z = dg.tensor([1 + 2j, 3 - 4j, 5 + 6j], dtype=dg.complex128)
    pairs = dg.view_as_real(z)
    assert pairs.dtype is dg.float64 and tuple(pairs.shape) == (3, 2)
    pairs[0, 1] = 7.0
    assert z[0].item() == 1 + 7j
    r, i = z.real, z.imag
    r += 10.0
    i.mul_(2)
    assert z.tolist() == [11 + 14j, 13 - 8j, 15 + 12j]
    back = dg.view_as_complex(pairs)
    assert back.dtype is dg.complex128 and back.tolist() == z.tolist()
    assert dg.view_as_complex(dg.tensor([[1.0, 2.0], [3.0, 4.0]])[1]).item() == 3 + 4j
    odd = dg.view_as_real(z[1:])
    assert odd.tolist() == [[13.0, -8.0], [15.0, 12.0]]
    with pytest.raises(RuntimeError, match="view_as_complex: expected the last dimension to have stride 1"):
        dg.view_as_complex(dg.zeros(2, 3)[:, :2].T.contiguous().T)
    with pytest.raises(RuntimeError, match="view_as_complex: expected a tensor whose last dimension has size 2"):
        dg.view_as_complex(dg.zeros(3))
    with pytest.raises(RuntimeError, match="view_as_complex: expected every other stride"):
        dg.view_as_complex(dg.zeros(6)[1:5].reshape(2, 2))
    with pytest.raises(RuntimeError, match="view_as_real: expected a complex tensor"):
        dg.view_as_real(dg.zeros(2))
    with pytest.raises(RuntimeError, match="imag: not implemented"):
        dg.zeros(2).imag
    assert dg.conj(z).tolist() == [complex(v).conjugate() for v in z.tolist()]
    assert not dg.is_conj(dg.conj(z)) and dg.resolve_conj(z) is z
    w = z.clone()
    w.conj_physical_()
    assert w.tolist() == dg.conj(z).tolist()
    m = dg.tensor([[1 + 1j, 2], [3j, 4]])
    assert m.mH.tolist() == np.conj(np.array(m.tolist())).T.tolist() == m.H.tolist() == dg.adjoint(m).tolist()


# ----- ops against numpy and torch ------------------------------------------------------------------------------

def _torch_fn(name):
    """The torch twin of an op of the table, by name."""
    torch = pytest.importorskip("torch")
    return {"neg": lambda x: -x, "reciprocal": torch.reciprocal, "square": torch.square, "pow25": lambda x: x ** 2.5,
            "real": torch.real, "imag": torch.imag}.get(name) or getattr(torch, name)


# name, dyngrad function, numpy function, points to keep away from (poles, branch points)
UNARY = [
    ("neg", lambda dg, x: -x, np.negative, ()),
    ("exp", lambda dg, x: dg.exp(x), np.exp, ()),
    ("log", lambda dg, x: dg.log(x), np.log, (0,)),
    ("sqrt", lambda dg, x: dg.sqrt(x), np.sqrt, (0,)),
    ("rsqrt", lambda dg, x: dg.rsqrt(x), lambda z: 1 / np.sqrt(z), (0,)),
    ("sin", lambda dg, x: dg.sin(x), np.sin, ()),
    ("cos", lambda dg, x: dg.cos(x), np.cos, ()),
    ("tan", lambda dg, x: dg.tan(x), np.tan, ()),
    ("tanh", lambda dg, x: dg.tanh(x), np.tanh, ()),
    ("sinh", lambda dg, x: dg.sinh(x), np.sinh, ()),
    ("cosh", lambda dg, x: dg.cosh(x), np.cosh, ()),                     # Note [Complex hyperbolic ops]
    ("asinh", lambda dg, x: dg.asinh(x), np.arcsinh, (1j, -1j)),
    ("acosh", lambda dg, x: dg.acosh(x), np.arccosh, (1, -1)),
    ("atanh", lambda dg, x: dg.atanh(x), np.arctanh, (1, -1)),
    ("asin", lambda dg, x: dg.asin(x), np.arcsin, (1, -1)),
    ("acos", lambda dg, x: dg.acos(x), np.arccos, (1, -1)),
    ("atan", lambda dg, x: dg.atan(x), np.arctan, (1j, -1j)),
    ("sigmoid", lambda dg, x: dg.sigmoid(x), lambda z: 1 / (1 + np.exp(-z)), ()),
    ("log1p", lambda dg, x: dg.log1p(x), np.log1p, (-1,)),
    ("expm1", lambda dg, x: dg.expm1(x), np.expm1, ()),
    ("log2", lambda dg, x: dg.log2(x), np.log2, (0,)),
    ("log10", lambda dg, x: dg.log10(x), np.log10, (0,)),
    ("reciprocal", lambda dg, x: dg.reciprocal(x), lambda z: 1 / z, (0,)),
    ("square", lambda dg, x: dg.square(x), np.square, ()),
    ("pow25", lambda dg, x: x ** 2.5, lambda z: z ** 2.5, (0,)),
    ("abs", lambda dg, x: dg.abs(x), np.abs, (0,)),
    ("angle", lambda dg, x: dg.angle(x), np.angle, (0,)),
    ("sgn", lambda dg, x: dg.sgn(x), lambda z: z / np.abs(z), (0,)),
    ("conj", lambda dg, x: dg.conj(x), np.conj, ()),
    ("real", lambda dg, x: x.real, np.real, ()),
    ("imag", lambda dg, x: x.imag, np.imag, ()),
]
# branch cuts: keep the inputs off the negative real axis (log, sqrt) and the cuts of asin/acos/atan
_CUT_SAFE = {"log", "sqrt", "rsqrt", "log2", "log10", "log1p", "pow25", "asin", "acos", "atan", "asinh", "acosh",
             "atanh"}


def _inputs(name, shape, seed=0):
    away = dict((n, a) for n, _, _, a in UNARY).get(name, ())
    z = cvalues(shape, seed, away)
    if name in _CUT_SAFE:
        z = np.abs(z.real) + 0.2 + 1j * z.imag * 0.5      # right half-plane, near no cut
    return z


@pytest.mark.parametrize("name, fn, np_fn, away", UNARY, ids=[u[0] for u in UNARY])
@pytest.mark.parametrize("dtype", ["complex64", "complex128"])
def test_unary_forward(dg, name, fn, np_fn, away, dtype):
    z = _inputs(name, (3, 4))
    got = fn(dg, dg.tensor(z, dtype=getattr(dg, dtype)))
    want = np_fn(z.astype(dtype))
    real_result = name in ("abs", "angle", "real", "imag")
    assert got.dtype.name == (("float32" if dtype == "complex64" else "float64") if real_result else dtype)
    close(got.tolist(), want, dtype)


@pytest.mark.parametrize("name, fn, np_fn, away", UNARY, ids=[u[0] for u in UNARY])
def test_unary_gradcheck(dg, name, fn, np_fn, away):
    z = dg.tensor(_inputs(name, (2, 3), seed=1), dtype=dg.complex128, requires_grad=True)
    assert dg.autograd.gradcheck(lambda x: fn(dg, x), (z,))


@pytest.mark.parametrize("name, fn, np_fn, away", UNARY, ids=[u[0] for u in UNARY])
def test_unary_grad_as_torch(dg, name, fn, np_fn, away):
    """.grad of a real loss of a complex leaf is torch's (the conjugate Wirtinger convention)."""
    torch = pytest.importorskip("torch")
    z = _inputs(name, (5,), seed=2)
    w = cvalues((5,), seed=3)
    x = dg.tensor(z, dtype=dg.complex128, requires_grad=True)
    out = fn(dg, x)
    weight = dg.tensor(w if out.dtype.is_complex else w.real, dtype=out.dtype)
    (out * weight).real.sum().backward() if out.dtype.is_complex else (out * weight).sum().backward()
    tx = torch.tensor(z, dtype=torch.complex128, requires_grad=True)
    tout = _torch_fn(name)(tx).resolve_conj()
    tw = torch.tensor(w if tout.is_complex() else w.real, dtype=tout.dtype)
    ((tout * tw).real if tout.is_complex() else tout * tw).sum().backward()
    close(x.grad.tolist(), tx.grad.resolve_conj().numpy(), "complex128")


BINARY = [
    ("add", lambda dg, a, b: a + b, np.add),
    ("sub", lambda dg, a, b: a - b, np.subtract),
    ("mul", lambda dg, a, b: a * b, np.multiply),
    ("div", lambda dg, a, b: a / b, np.divide),
    ("pow", lambda dg, a, b: a ** b, np.power),
    ("matmul", lambda dg, a, b: a @ b.mT, lambda a, b: a @ b.T),
]


@pytest.mark.parametrize("name, fn, np_fn", BINARY, ids=[b[0] for b in BINARY])
def test_binary(dg, name, fn, np_fn):
    a = cvalues((3, 4), 4)
    a = np.abs(a.real) + 0.5 + 1j * a.imag if name == "pow" else a
    b = cvalues((3, 4), 5, away_from=(0,))
    for dtype in ("complex64", "complex128"):
        got = fn(dg, dg.tensor(a, dtype=getattr(dg, dtype)), dg.tensor(b, dtype=getattr(dg, dtype)))
        assert got.dtype.name == dtype
        close(got.tolist(), np_fn(a.astype(dtype), b.astype(dtype)), dtype)
    x = dg.tensor(a, dtype=dg.complex128, requires_grad=True)
    y = dg.tensor(b, dtype=dg.complex128, requires_grad=True)
    assert dg.autograd.gradcheck(lambda p, q: fn(dg, p, q), (x, y))
    # a real operand with a complex one: the real one's gradient is the real part (torch; matmul does not promote)
    if name != "matmul":
        r = dg.tensor(np.abs(a.real) + 0.5, dtype=dg.float64, requires_grad=True)
        assert dg.autograd.gradcheck(lambda p, q: fn(dg, p, q), (r, y))


def test_mixed_gradients_as_torch(dg):
    torch = pytest.importorskip("torch")
    a, b = cvalues((3, 3), 6), cvalues((3, 3), 7)
    x = dg.tensor(a.real, dtype=dg.float64, requires_grad=True)
    z = dg.tensor(b, dtype=dg.complex128, requires_grad=True)
    loss = ((x * z + dg.exp(z) @ z).abs() ** 2).sum() + (z * 2j).imag.mean()
    loss.backward()
    tx = torch.tensor(a.real, dtype=torch.float64, requires_grad=True)
    tz = torch.tensor(b, dtype=torch.complex128, requires_grad=True)
    tloss = ((tx * tz + torch.exp(tz) @ tz).abs() ** 2).sum() + (tz * 2j).imag.mean()
    tloss.backward()
    close(loss.item(), tloss.item(), "complex128")
    assert x.grad.dtype is dg.float64 and z.grad.dtype is dg.complex128
    close(x.grad.tolist(), tx.grad.resolve_conj().numpy(), "complex128")
    close(z.grad.tolist(), tz.grad.numpy(), "complex128")


def test_reductions_and_shape_ops(dg):
    z = cvalues((2, 3, 4), 8)
    for dtype in ("complex64", "complex128"):
        t = dg.tensor(z, dtype=getattr(dg, dtype))
        close(t.sum().item(), z.sum(), dtype)
        close(t.sum(dim=1).tolist(), z.sum(1), dtype)
        close(t.mean(dim=(0, 2), keepdim=True).tolist(), z.mean((0, 2), keepdims=True), dtype)
        close(t.prod(dim=-1).tolist(), z.astype(dtype).prod(-1), dtype)
        close(t.permute(2, 0, 1).reshape(4, 6).tolist(), z.transpose(2, 0, 1).reshape(4, 6), dtype)
        close(dg.cat([t, t[:, :1]], dim=1).tolist(), np.concatenate([z, z[:, :1]], 1), dtype)
        close(t[:, [2, 0]].tolist(), z[:, [2, 0]], dtype)
        close(t[t.real > 0].tolist(), z[z.real > 0], dtype)
        close(dg.where(t.real > 0, t, 0).tolist(), np.where(z.real > 0, z, 0), dtype)
        close(t.transpose(0, 1).contiguous().flatten().tolist(), z.transpose(1, 0, 2).reshape(-1), dtype)
        close(dg.bmm(t, t.mT).tolist(), z.astype(dtype) @ z.astype(dtype).transpose(0, 2, 1), dtype)
    x = dg.tensor(z, dtype=dg.complex128, requires_grad=True)
    assert dg.autograd.gradcheck(lambda a: a.sum(dim=1), (x,))
    assert dg.autograd.gradcheck(lambda a: a.mean(), (x,))
    assert dg.autograd.gradcheck(lambda a: a[:, [2, 0]].permute(2, 0, 1) * a[0, 0, 0], (x,))
    assert dg.autograd.gradcheck(lambda a: dg.view_as_real(a[0]) * 2, (x,))
    assert dg.autograd.gradcheck(lambda a: dg.view_as_complex(a * 3), (dg.view_as_real(x).detach().requires_grad_(),))
    assert dg.autograd.gradcheck(lambda a, b: dg.complex(a, b), (x.real.detach().requires_grad_(),
                                                              x.imag.detach().requires_grad_()))


def test_complex_output_needs_a_gradient(dg):
    z = dg.tensor([1 + 1j], requires_grad=True)
    with pytest.raises(RuntimeError, match="only for real scalar outputs, but this output is complex64"):
        (z * 2).sum().backward()
    (z * 2).sum().backward(dg.tensor(1 + 0j))
    assert z.grad.tolist() == [2 + 0j]


def test_gradgradcheck(dg):
    z = dg.tensor(cvalues((2, 2), 9), dtype=dg.complex128, requires_grad=True)
    assert dg.autograd.gradgradcheck(lambda a: dg.tanh(a) * dg.exp(a) / (a + 3), (z,))
    assert dg.autograd.gradgradcheck(lambda a: dg.sigmoid(a) @ a, (z,))


def test_hyperbolic_on_the_branch_cuts(dg):
    """Note [Complex hyperbolic ops]: on the cuts the signs of zeros pick the side, as numpy's (C99's) functions."""
    z = np.array([2 + 0j, complex(2, -0.0), complex(-2, 0.0), complex(-2, -0.0), complex(0.3, -0.0), 0.3 + 0j,
                  complex(0, -3), complex(-0.0, 3), 3j, complex(0.0, -0.5)])
    for name, np_fn in (("cosh", np.cosh), ("asinh", np.arcsinh), ("acosh", np.arccosh), ("atanh", np.arctanh)):
        got = getattr(dg, name)(dg.tensor(z, dtype=dg.complex128)).numpy()
        want = np_fn(z)
        np.testing.assert_allclose(got, want, rtol=1e-14, atol=1e-15)
        assert (np.signbit(got.imag) == np.signbit(want.imag)).all(), name
    empty = dg.zeros((0, 3), dtype=dg.complex64)        # view_as_complex of an empty tensor (its strides are any)
    assert dg.cosh(empty).shape == (0, 3) and dg.view_as_complex(dg.zeros((0, 3, 2))).shape == (0, 3)


@pytest.mark.parametrize("call, message", [
    (lambda dg, z: dg.relu(z), "relu: not supported for complex tensors"),
    (lambda dg, z: dg.erf(z), "erf: not supported for complex tensors"),
    (lambda dg, z: dg.maximum(z, z), "maximum: not supported for complex tensors"),
    (lambda dg, z: z < z, "lt: not supported for complex tensors"),
    (lambda dg, z: z.amax(), "amax: not supported for complex tensors"),
    (lambda dg, z: z.argmax(), "argmax: not supported for complex tensors"),
    (lambda dg, z: dg.sign(z), "sign: not implemented for complex tensors; use sgn"),
    (lambda dg, z: dg.lgamma(z), "lgamma: not supported for complex tensors"),
    (lambda dg, z: z @ z.real, "matmul: expected both operands to have the same dtype"),
])
def test_unsupported_ops_say_so(dg, call, message):
    z = dg.tensor([[1 + 1j, 2j], [3, -1j]])
    with pytest.raises((TypeError, RuntimeError), match=message):
        call(dg, z)


# ----- the ops issue 22's OpInfo report found refusing complex or wrong on it ----------------------------------

def test_var_std_of_complex(dg):
    """var of a complex tensor is real: E|z - E z|^2 (the real parts' variance plus the imaginary parts'), torch's."""
    z = cvalues((3, 4), 20)
    for dtype, real in (("complex64", "float32"), ("complex128", "float64")):
        t = dg.tensor(z, dtype=getattr(dg, dtype))
        v = t.var(dim=1)
        assert v.dtype.name == real
        close(v.tolist(), np.var(z, axis=1, ddof=1), dtype)
        close(dg.std(t, correction=0).item(), np.std(z), dtype)
        var, mean = dg.var_mean(t, dim=0, keepdim=True)
        assert var.dtype.name == real and mean.dtype.name == dtype and var.shape == (1, 4)
        close(mean.tolist(), z.mean(0, keepdims=True), dtype)
        s, _ = dg.std_mean(t, dim=(0, 1))
        close(s.item(), np.std(z, ddof=1), dtype)
        mv = dg.masked.var(t, 1, mask=dg.tensor(np.arange(12).reshape(3, 4) % 3 != 0))
        assert mv.dtype.name == dtype      # torch's masked.var keeps the complex dtype (imaginary part 0)
        close(mv.tolist(), [np.var(row[(np.arange(4) + 4 * i) % 3 != 0], ddof=1) for i, row in enumerate(z)],
              dtype)
    x = dg.tensor(z, dtype=dg.complex128, requires_grad=True)
    assert dg.autograd.gradcheck(lambda a: a.var(dim=0), (x,))
    assert dg.autograd.gradcheck(lambda a: dg.std(a, dim=1, correction=0), (x,))
    assert dg.autograd.gradcheck(lambda a: dg.var_mean(a, dim=1)[1], (x,))


def test_cumsum_cumprod_of_complex(dg):
    """Note [Complex scans]: cumsum over the parts, cumprod by products only (exact with zeros)."""
    z = cvalues((3, 5), 21)
    z[1, 2] = 0
    for dtype in ("complex64", "complex128"):
        t = dg.tensor(z, dtype=getattr(dg, dtype))
        for d in (0, 1, -1):
            s, p = dg.cumsum(t, d), dg.cumprod(t, dim=d)
            assert s.dtype.name == dtype and p.dtype.name == dtype
            close(s.tolist(), np.cumsum(z.astype(dtype), d), dtype)
            close(p.tolist(), np.cumprod(z.astype(dtype), d), dtype)
        assert dg.cumprod(t, 1)[1, 2:].tolist() == [0j, 0j, 0j]
        assert dg.cumsum(t[0, 0], 0).item() == t[0, 0].item()       # a 0-d tensor: itself
        assert dg.cumsum(dg.tensor([1, 2]), 0, dtype=getattr(dg, dtype)).dtype.name == dtype
    x = dg.tensor(z, dtype=dg.complex128, requires_grad=True)
    assert dg.autograd.gradcheck(lambda a: dg.cumsum(a, 1), (x,))
    assert dg.autograd.gradcheck(lambda a: dg.cumprod(a, 1), (x,))      # the zero at [1, 2] included
    assert dg.autograd.gradcheck(lambda a: dg.cumprod(a, 0), (x,))


def test_logsumexp_of_complex(dg):
    z = cvalues((3, 4), 22)
    z[0] += 800                           # exp would overflow without the shift by the largest real part
    for dtype in ("complex64", "complex128"):
        t = dg.tensor(z, dtype=getattr(dg, dtype))
        got = dg.logsumexp(t, 1)
        assert got.dtype.name == dtype
        want = np.log(np.exp(z - 800 * (np.arange(3) == 0)[:, None]).sum(1)) + 800 * (np.arange(3) == 0)
        close(got.tolist(), want, dtype)
        assert dg.logsumexp(t, (0, 1), keepdim=True).shape == (1, 1)
        minus_inf = dg.tensor([complex(-np.inf, 0), complex(-np.inf, 1)], dtype=getattr(dg, dtype))
        assert dg.logsumexp(minus_inf, 0).item() == complex(-np.inf, 0)     # torch's
    x = dg.tensor(cvalues((3, 4), 23), dtype=dg.complex128, requires_grad=True)
    assert dg.autograd.gradcheck(lambda a: dg.logsumexp(a, 1), (x,))
    assert dg.autograd.gradcheck(lambda a: dg.logsumexp(a, (0, 1), keepdim=True), (x,))


def test_complex_random_numbers(dg):
    """Note [Complex random numbers]: torch's semantics (each part drawn; randn with E|z|^2 = 1)."""
    dg.manual_seed(0)
    n = 40000
    for dtype, real in ((dg.complex64, "float32"), (dg.complex128, "float64")):
        z = dg.randn(n, dtype=dtype)
        assert z.dtype is dtype
        parts = z.real.numpy(), z.imag.numpy()
        for p in parts:                       # each part N(0, 1/2): 5 standard errors of slack
            assert abs(p.mean()) < 5 * (0.5 / n) ** 0.5 and abs(p.var() - 0.5) < 5 * 0.5 * (2 / n) ** 0.5
        assert abs(np.corrcoef(*parts)[0, 1]) < 5 / n ** 0.5
        u = dg.rand(n, dtype=dtype).numpy()
        assert u.real.min() >= 0 and u.real.max() < 1 and u.imag.min() >= 0 and u.imag.max() < 1
        assert abs(u.imag.mean() - 0.5) < 5 * (1 / 12 / n) ** 0.5
        like = dg.randn_like(z[:3])
        assert like.dtype is dtype and like.shape == (3,) and dg.rand_like(z[:2]).dtype is dtype
        w = dg.zeros(n, dtype=dtype).uniform_(2, 3).numpy()
        assert w.real.min() >= 2 and w.imag.min() >= 2 and w.real.max() < 3 and w.imag.max() < 3
        v = dg.zeros(n, dtype=dtype).normal_(1.0, 2.0).numpy()
        for p in (v.real, v.imag):            # N(1, 2): std / sqrt(2) on each part
            assert abs(p.mean() - 1) < 5 * (2 / n) ** 0.5 and abs(p.std() - 2 ** 0.5) < 0.05
    with pytest.raises(RuntimeError, match="expected a floating-point or complex dtype"):
        dg.randn(2, dtype=dg.int64)


def test_alpha_and_value_on_complex(dg):
    """add/sub/rsub's alpha and addcmul/addcdiv's value may be complex (or a float) for complex tensors; a complex
    one is refused for real tensors, as torch."""
    a, b, c = cvalues((2, 3), 24), cvalues((2, 3), 25), cvalues((2, 3), 26, away_from=(0,))
    for dtype in ("complex64", "complex128"):
        x, y, w = (dg.tensor(v, dtype=getattr(dg, dtype)) for v in (a, b, c))
        close(dg.add(x, y, alpha=-3.125).tolist(), a - 3.125 * b, dtype)
        close(dg.sub(x, y, alpha=0.5 - 2j).tolist(), a - (0.5 - 2j) * b, dtype)
        close(dg.rsub(x, y, alpha=1j).tolist(), b - 1j * a, dtype)
        close(dg.addcmul(x, y, w, value=0.25).tolist(), a + 0.25 * b * c, dtype)
        close(dg.addcmul(x, y, w, value=2 + 1j).tolist(), a + (2 + 1j) * b * c, dtype)
        close(dg.addcdiv(x, y, w, value=-1j).tolist(), a - 1j * b / c, dtype)
    with pytest.raises(RuntimeError, match="alpha must not be a complex number"):
        dg.add(dg.tensor([1.0]), dg.tensor([2.0]), alpha=1j)
    with pytest.raises(RuntimeError, match="alpha must not be a floating-point number"):
        dg.add(dg.tensor([1]), dg.tensor([2]), alpha=0.5)
    x, y = (dg.tensor(v, dtype=dg.complex128, requires_grad=True) for v in (a, b))
    w = dg.tensor(c, dtype=dg.complex128, requires_grad=True)
    assert dg.autograd.gradcheck(lambda p, q: dg.sub(p, q, alpha=0.5 - 2j), (x, y))
    assert dg.autograd.gradcheck(lambda p, q, r: dg.addcdiv(p, q, r, value=2 - 1j), (x, y, w))


def test_result_dtypes_and_values_of_complex(dg):
    """vdot conjugates its first argument; isreal tests the imaginary part; float_power of a complex operand is
    complex128; cov/corrcoef/trapezoid/cumulative_trapezoid/gradient keep the complex dtype (numpy's values)."""
    a, b = cvalues((4,), 27), cvalues((4,), 28)
    m = cvalues((3, 5), 29)
    for dtype in ("complex64", "complex128"):
        x, y, t = dg.tensor(a, dtype=getattr(dg, dtype)), dg.tensor(b, dtype=getattr(dg, dtype)), \
            dg.tensor(m, dtype=getattr(dg, dtype))
        close(dg.vdot(x, y).item(), np.vdot(a, b), dtype)
        assert dg.isreal(dg.tensor([1 + 0j, 1j, 2], dtype=getattr(dg, dtype))).tolist() == [True, False, True]
        fp = dg.float_power(x, 2)
        assert fp.dtype is dg.complex128
        close(fp.tolist(), a.astype(dtype).astype(np.complex128) ** 2, "complex64")
        c = dg.cov(t)
        assert c.dtype.name == dtype
        close(c.tolist(), np.cov(m), dtype)
        r = dg.corrcoef(t)
        want = np.corrcoef(m)
        close(r.tolist(), np.clip(want.real, -1, 1) + 1j * np.clip(want.imag, -1, 1), dtype)
        for got, want in ((dg.trapezoid(t), np.trapezoid(m) if hasattr(np, "trapezoid") else np.trapz(m)),
                          (dg.cumulative_trapezoid(t, dim=0), np.cumsum((m[1:] + m[:-1]) / 2, 0)),
                          (dg.gradient(t, dim=1)[0], np.gradient(m, axis=1))):
            assert got.dtype.name == dtype
            close(got.tolist(), want, dtype)
    x = dg.tensor(a, dtype=dg.complex128, requires_grad=True)
    y = dg.tensor(b, dtype=dg.complex128, requires_grad=True)
    t = dg.tensor(m, dtype=dg.complex128, requires_grad=True)
    assert dg.autograd.gradcheck(dg.vdot, (x, y))
    assert dg.autograd.gradcheck(dg.cov, (t,))
    assert dg.autograd.gradcheck(lambda p: dg.trapezoid(p, dim=0), (t,))


def test_products_with_float_and_complex_coefficients(dg):
    """addmv/addbmm/baddbmm took a float beta/alpha on complex tensors for an integer one and truncated it."""
    m, v, i = cvalues((3, 4), 30), cvalues((4,), 31), cvalues((3,), 32)
    b1, b2, c = cvalues((2, 3, 4), 33), cvalues((2, 4, 5), 34), cvalues((3, 5), 35)
    for dtype in ("complex64", "complex128"):
        t = lambda z: dg.tensor(z, dtype=getattr(dg, dtype))   # noqa: E731
        close(dg.addmv(t(i), t(m), t(v), beta=0.5, alpha=-1.5).tolist(), 0.5 * i - 1.5 * m @ v, dtype)
        close(dg.addbmm(t(c), t(b1), t(b2), beta=1j, alpha=0.25).tolist(),
              1j * c + 0.25 * (b1 @ b2).sum(0), dtype)
        close(dg.baddbmm(t(c), t(b1), t(b2), alpha=2 - 1j).tolist(), c + (2 - 1j) * (b1 @ b2), dtype)
    with pytest.raises(RuntimeError, match="alpha must not be a complex number"):
        dg.addmv(dg.tensor(i.real), dg.tensor(m.real), dg.tensor(v.real), alpha=1j)
    x = dg.tensor(m, dtype=dg.complex128, requires_grad=True)
    assert dg.autograd.gradcheck(lambda p: dg.addmv(dg.tensor(i), p, dg.tensor(v), beta=0.5, alpha=-1.5), (x,))


def test_lerp_and_exp2_of_complex(dg):
    a, b, w = cvalues((2, 3), 36), cvalues((2, 3), 37), cvalues((2, 3), 38) * 0.4
    for dtype in ("complex64", "complex128"):
        t = lambda z: dg.tensor(z, dtype=getattr(dg, dtype))   # noqa: E731
        close(dg.lerp(t(a), t(b), t(w)).tolist(), a + w * (b - a), dtype)
        close(dg.lerp(t(a), t(b), 0.75).tolist(), a + 0.75 * (b - a), dtype)
        close(dg.lerp(t(a), t(b), 0.25 - 1j).tolist(), a + (0.25 - 1j) * (b - a), dtype)
        close(dg.exp2(t(a)).tolist(), 2.0 ** a.astype(dtype), dtype)
    x, y, v = (dg.tensor(z, dtype=dg.complex128, requires_grad=True) for z in (a, b, w))
    assert dg.autograd.gradcheck(dg.lerp, (x, y, v))
    assert dg.autograd.gradcheck(dg.exp2, (x,))
