"""Forward-mode AD of complex functions (func.jvp, forward_ad.make_dual), on both engines.

Oracle: for f: C^n -> C^m (or from/to R), the JVP along the tangent v is the directional derivative
lim_{h -> 0} (f(z + h v) - f(z)) / h with h real: the R-linear derivative, which is what torch's forward AD computes
(for a holomorphic f it is f'(z) v; for conj it is conj(v); for abs, Re(conj(sgn z) v)). It is taken here by central
finite differences in complex128, and compared with torch.func.jvp where torch is installed.

Each row of CASES: (input kinds, fn(m, *inputs)), where an input kind is "c" (complex128) or "r" (float64) with a
shape, and `m` is the engine module (or torch: the calls are torch's API).
"""
import zlib

import numpy as np
import pytest

STEP = 1e-6


def _c(*shape):
    return ("c",) + shape


def _r(*shape):
    return ("r",) + shape


def _pos(*shape):                       # real values away from 0 (complex values with a positive real part)
    return ("c+",) + shape


def _mat(*shape):                       # a well-conditioned complex matrix (identity plus a small perturbation)
    return ("cI",) + shape


CASES = {
    # holomorphic elementwise
    "mul": ([_c(2, 3), _c(3)], lambda m, a, b: a * b),
    "add_sub": ([_c(2, 3), _c(2, 3)], lambda m, a, b: a + 2 * b - a * (1 - 2j)),
    "div": ([_c(4), _pos(4)], lambda m, a, b: a / b),
    "pow_scalar": ([_pos(5)], lambda m, a: a ** 2.5),
    "pow_complex_exponent": ([_pos(5)], lambda m, a: a ** (0.5 + 1j)),
    "pow_tensor": ([_pos(4), _c(4)], lambda m, a, b: m.pow(a, b)),
    "square": ([_c(4)], lambda m, a: m.square(a)),
    "reciprocal": ([_pos(4)], lambda m, a: m.reciprocal(a)),
    "exp": ([_c(4)], lambda m, a: m.exp(a)),
    "exp2": ([_c(4)], lambda m, a: m.exp2(a)),
    "expm1": ([_c(4)], lambda m, a: m.expm1(a)),
    "log": ([_pos(4)], lambda m, a: m.log(a)),
    "log1p": ([_pos(4)], lambda m, a: m.log1p(a)),
    "log2": ([_pos(4)], lambda m, a: m.log2(a)),
    "log10": ([_pos(4)], lambda m, a: m.log10(a)),
    "sqrt": ([_pos(4)], lambda m, a: m.sqrt(a)),
    "rsqrt": ([_pos(4)], lambda m, a: m.rsqrt(a)),
    "sin": ([_c(4)], lambda m, a: m.sin(a)),
    "cos": ([_c(4)], lambda m, a: m.cos(a)),
    "tan": ([_c(4)], lambda m, a: m.tan(a)),
    "sinh": ([_c(4)], lambda m, a: m.sinh(a)),
    "cosh": ([_c(4)], lambda m, a: m.cosh(a)),
    "tanh": ([_c(4)], lambda m, a: m.tanh(a)),
    "asin": ([_c(4)], lambda m, a: m.asin(a * 0.5)),
    "acos": ([_c(4)], lambda m, a: m.acos(a * 0.5)),
    "atan": ([_c(4)], lambda m, a: m.atan(a * 0.5)),
    "asinh": ([_c(4)], lambda m, a: m.asinh(a * 0.5)),
    "acosh": ([_pos(4)], lambda m, a: m.acosh(a + 1.5)),
    "atanh": ([_c(4)], lambda m, a: m.atanh(a * 0.5)),
    "sigmoid": ([_c(4)], lambda m, a: m.sigmoid(a)),
    "lerp": ([_c(4), _c(4), _c(4)], lambda m, a, b, w: m.lerp(a, b, w)),
    "where": ([_c(4), _c(4)], lambda m, a, b: m.where(m.tensor([True, False, True, False]), a, b)),
    # not holomorphic
    "abs": ([_c(5)], lambda m, a: m.abs(a)),
    "abs_squared": ([_c(5)], lambda m, a: m.abs(a) ** 2),
    "z_conj_z": ([_c(5)], lambda m, a: a * m.conj(a)),
    "real": ([_c(2, 3)], lambda m, a: m.real(a)),
    "imag": ([_c(2, 3)], lambda m, a: m.imag(a)),
    "real_imag_attrs": ([_c(2, 3)], lambda m, a: a.real * a.imag),
    "conj": ([_c(2, 3)], lambda m, a: m.conj(a)),
    "conj_physical": ([_c(2, 3)], lambda m, a: m.conj_physical(a)),
    "angle": ([_c(5)], lambda m, a: m.angle(a)),
    "sgn": ([_c(5)], lambda m, a: m.sgn(a)),
    "view_as_real": ([_c(2, 3)], lambda m, a: m.view_as_real(a * a)),
    "mH": ([_c(2, 3)], lambda m, a: a.mH),
    # real -> complex
    "view_as_complex": ([_r(3, 2)], lambda m, a: m.view_as_complex(a) * (1 + 1j)),
    "complex": ([_r(4), _r(4)], lambda m, x, y: m.complex(x, y) ** 2),
    "polar": ([_pos(4), _r(4)], lambda m, r, t: m.polar(r.real, t)),
    "real_to_complex_cast": ([_r(4)], lambda m, x: x.to(m.complex128) * (2 - 1j)),
    "real_times_complex": ([_r(4), _c(4)], lambda m, x, z: x * z),
    "fft_of_real": ([_r(6)], lambda m, x: m.fft.fft(x)),
    "rfft": ([_r(6)], lambda m, x: m.fft.rfft(x)),
    # complex -> real
    "irfft": ([_c(4)], lambda m, z: m.fft.irfft(z, 6)),
    "abs_sum": ([_c(3, 2)], lambda m, a: m.abs(a).sum()),
    "var": ([_c(6)], lambda m, a: m.var(a)),
    "std": ([_c(6)], lambda m, a: m.std(a)),
    "vector_norm": ([_c(6)], lambda m, a: m.linalg.vector_norm(a)),
    "matrix_norm": ([_c(3, 3)], lambda m, a: m.linalg.matrix_norm(a)),
    "complex_to_real_cast": ([_c(4)], lambda m, a: m.real(a * a).to(m.float64) * 3),
    # reductions, products, linear algebra
    "sum": ([_c(2, 3, 4)], lambda m, a: a.sum(dim=(0, 2))),
    "sum_all": ([_c(2, 3)], lambda m, a: (a * a).sum()),
    "mean": ([_c(2, 3, 4)], lambda m, a: a.mean(dim=1, keepdim=True)),
    "prod": ([_c(2, 3)], lambda m, a: a.prod(dim=1)),
    "cumsum": ([_c(2, 4)], lambda m, a: m.cumsum(a, 1)),
    "cumprod": ([_c(2, 4)], lambda m, a: m.cumprod(a, 1)),
    "logsumexp": ([_c(2, 4)], lambda m, a: m.logsumexp(a, 1)),
    "matmul": ([_c(2, 3, 4), _c(4, 5)], lambda m, a, b: m.matmul(a, b)),
    "matmul_real_complex": ([_r(3, 4), _c(4, 2)], lambda m, a, b: m.matmul(a.to(m.complex128), b)),
    "mv": ([_c(3, 4), _c(4)], lambda m, a, b: m.mv(a, b)),
    "bmm": ([_c(2, 3, 4), _c(2, 4, 2)], lambda m, a, b: m.bmm(a, b)),
    "vdot": ([_c(4), _c(4)], lambda m, a, b: m.vdot(a, b)),
    "einsum": ([_c(2, 3), _c(3, 4)], lambda m, a, b: m.einsum("ij,jk->ik", a, b)),
    "trace": ([_c(3, 3)], lambda m, a: m.trace(a)),
    "det": ([_mat(3, 3)], lambda m, a: m.linalg.det(a)),
    "inv": ([_mat(3, 3)], lambda m, a: m.linalg.inv(a)),
    "solve": ([_mat(3, 3), _c(3, 2)], lambda m, a, b: m.linalg.solve(a, b)),
    "fft": ([_c(6)], lambda m, z: m.fft.fft(z)),
    "ifft": ([_c(6)], lambda m, z: m.fft.ifft(z)),
    # shape and indexing ops move complex tangents as they are
    "reshape_transpose": ([_c(2, 6)], lambda m, a: a.reshape(3, 4).transpose(0, 1)),
    "index_select": ([_c(5, 2)], lambda m, a: a[m.tensor([4, 0, 2])]),
    "cat_stack": ([_c(2, 3), _c(2, 3)], lambda m, a, b: m.stack([m.cat([a, b], 0), m.cat([b, a], 0)])),
    "flip_roll": ([_c(2, 3)], lambda m, a: m.roll(m.flip(a, [1]), 1, 0)),
    "triu": ([_c(3, 3)], lambda m, a: m.triu(a)),
    # compositions of several of the above
    "mixed": ([_c(3), _r(3)], lambda m, z, x: m.abs(m.exp(z) * x).sum() + m.angle(z * z).mean() * 1j),
}


def _inputs(rng, kinds):
    out = []
    for kind, *shape in kinds:
        if kind == "r":
            out.append(rng.standard_normal(shape))
        elif kind == "c":
            out.append(rng.standard_normal(shape) + 1j * rng.standard_normal(shape))
        elif kind == "c+":
            out.append(rng.uniform(0.5, 1.5, shape) + 1j * rng.uniform(-0.5, 0.5, shape))
        else:
            n = shape[-1]
            out.append(np.eye(n) + 0.3 * (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)))
    return out


def _tangents(rng, inputs):
    return [rng.standard_normal(x.shape) + (1j * rng.standard_normal(x.shape) if np.iscomplexobj(x) else 0)
            for x in inputs]


def _as_numpy(t):
    return np.asarray(t.detach().numpy())


def _finite_difference(m, fn, inputs, tangents):
    def at(h):
        return _as_numpy(fn(m, *[m.tensor(x + h * v) for x, v in zip(inputs, tangents)]))
    return (at(STEP) - at(-STEP)) / (2 * STEP)


@pytest.mark.parametrize("name", sorted(CASES))
def test_jvp_of_complex_functions(dg, name):
    kinds, fn = CASES[name]
    rng = np.random.default_rng(zlib.crc32(name.encode()))
    inputs = _inputs(rng, kinds)
    tangents = _tangents(rng, inputs)
    primals = tuple(dg.tensor(x) for x in inputs)
    out, jvp_out = dg.func.jvp(lambda *a: fn(dg, *a), primals, tuple(dg.tensor(v) for v in tangents))
    expected_out = _as_numpy(fn(dg, *primals))
    assert jvp_out.dtype == out.dtype, f"{name}: the tangent's dtype {jvp_out.dtype} is not the output's {out.dtype}"
    np.testing.assert_allclose(_as_numpy(out), expected_out, rtol=1e-12, atol=1e-14)
    expected = _finite_difference(dg, fn, inputs, tangents)
    assert np.iscomplexobj(_as_numpy(jvp_out)) == np.iscomplexobj(expected)
    np.testing.assert_allclose(_as_numpy(jvp_out), expected, rtol=1e-6, atol=1e-7, err_msg=name)


@pytest.mark.parametrize("name", sorted(CASES))
def test_jvp_of_complex_functions_against_torch(dg, name):
    torch = pytest.importorskip("torch")
    kinds, fn = CASES[name]
    rng = np.random.default_rng(zlib.crc32(name.encode()) + 1)
    inputs = _inputs(rng, kinds)
    tangents = _tangents(rng, inputs)
    _, ours = dg.func.jvp(lambda *a: fn(dg, *a), tuple(dg.tensor(x) for x in inputs),
                          tuple(dg.tensor(v) for v in tangents))
    _, theirs = torch.func.jvp(lambda *a: fn(torch, *a), tuple(torch.tensor(x) for x in inputs),
                               tuple(torch.tensor(v) for v in tangents))
    assert str(ours.dtype).split(".")[-1] == str(theirs.dtype).split(".")[-1]
    np.testing.assert_allclose(_as_numpy(ours), theirs.detach().resolve_conj().numpy(), rtol=1e-10, atol=1e-12,
                               err_msg=name)


def test_make_dual_and_unpack_dual_of_a_complex_tensor(dg):
    fwAD = dg.autograd.forward_ad
    z = dg.tensor([1 + 2j, 3 - 1j])
    v = dg.tensor([1j, 1 + 0j])
    with fwAD.dual_level():
        d = fwAD.make_dual(z, v)
        primal, tangent = fwAD.unpack_dual(d)
        np.testing.assert_array_equal(_as_numpy(primal), [1 + 2j, 3 - 1j])
        np.testing.assert_array_equal(_as_numpy(tangent), [1j, 1 + 0j])
        assert tangent.dtype == dg.complex64
        y = d * d                                    # holomorphic: 2 z v
        np.testing.assert_allclose(_as_numpy(fwAD.unpack_dual(y).tangent), 2 * np.array([1 + 2j, 3 - 1j]) *
                                   np.array([1j, 1]), rtol=1e-6)
        a = dg.abs(d)                                # complex -> real: Re(conj(sgn z) v)
        assert a.dtype == dg.float32 and fwAD.unpack_dual(a).tangent.dtype == dg.float32
        # the tangent's dtype must be the primal's (a real tangent of a complex primal is refused: convert it)
        with pytest.raises(RuntimeError, match="make_dual: the tangent's dtype"):
            fwAD.make_dual(z, dg.tensor([1.0, 2.0]))
        with pytest.raises(RuntimeError, match="make_dual: the tangent's dtype"):
            fwAD.make_dual(z, v.to(dg.complex128))
        with pytest.raises(ValueError, match="make_dual: expected a floating-point or complex primal"):
            fwAD.make_dual(dg.tensor([1, 2]), dg.tensor([1, 2]))


def test_jvp_tangent_dtypes(dg):
    """func.jvp converts a real tangent of a complex primal to the primal's dtype (a direction along the real
    axis), and refuses a complex tangent of a real primal: it is not a direction in the primal's space (the
    imaginary part would be dropped)."""
    z = dg.tensor([1 + 2j, 3 - 1j], dtype=dg.complex128)
    _, t = dg.func.jvp(lambda a: a * a, (z,), (dg.tensor([1.0, 0.0], dtype=dg.float64),))
    np.testing.assert_allclose(_as_numpy(t), [2 + 4j, 0], rtol=1e-12)
    with pytest.raises(RuntimeError, match="jvp.*complex tangent.*real primal"):
        dg.func.jvp(lambda a: a * a, (dg.tensor([1.0, 2.0]),), (dg.tensor([1j, 1j]),))


def test_jacfwd_of_complex_functions(dg):
    """jacfwd of f: C^n -> C^m gives the holomorphic Jacobian df/dz (the tangents along the real axis, as torch's
    jacfwd); for a real-valued f it is df/dx, the derivative along the real parts."""
    z = np.array([0.3 + 0.4j, -0.7 + 0.2j, 1.1 - 0.5j])
    jac = dg.func.jacfwd(lambda a: dg.exp(a) * a.sum())(dg.tensor(z))
    ez = np.exp(z)
    expected = np.diag(ez * z.sum()) + ez[:, None]
    np.testing.assert_allclose(_as_numpy(jac), expected, rtol=1e-12)
    jac_abs = dg.func.jacfwd(lambda a: dg.abs(a))(dg.tensor(z))
    np.testing.assert_allclose(_as_numpy(jac_abs), np.diag(z.real / np.abs(z)), rtol=1e-12)


def test_hessian_of_a_real_function_of_complex_inputs(dg):
    """hessian (forward over reverse) of a real function of complex z: Re(H conj(e_j))... checked as the
    jvp of the gradient (torch's convention: grad = dL/dx + i dL/dy) against finite differences of the gradient."""
    z = np.array([0.3 + 0.4j, -0.7 + 0.2j])
    v = np.array([0.5 - 1.0j, 0.25 + 0.75j])

    def loss(a):
        return (dg.abs(dg.sin(a)) ** 2).sum() + dg.real(a * a).sum()

    grad = dg.func.grad(loss)
    _, hv = dg.func.jvp(grad, (dg.tensor(z),), (dg.tensor(v),))
    expected = (_as_numpy(grad(dg.tensor(z + STEP * v))) - _as_numpy(grad(dg.tensor(z - STEP * v)))) / (2 * STEP)
    np.testing.assert_allclose(_as_numpy(hv), expected, rtol=1e-6, atol=1e-8)


def test_vmap_of_jvp_of_a_complex_function(dg):
    """vmap over a batch of tangents of a complex jvp: each row is the jvp of that row's tangent."""
    z = np.array([0.3 + 0.4j, -0.7 + 0.2j, 1.1 - 0.5j])
    vs = np.array([[1, 0, 0], [0, 1j, 0], [0.5, 0.5j, 1 - 1j]])

    def f(a):
        return dg.exp(a) * dg.conj(a)

    rows = dg.func.vmap(lambda v: dg.func.jvp(f, (dg.tensor(z),), (v,))[1])(dg.tensor(vs))
    expected = np.stack([np.exp(z) * np.conj(z) * v + np.exp(z) * np.conj(v) for v in vs])
    np.testing.assert_allclose(_as_numpy(rows), expected, rtol=1e-12)
