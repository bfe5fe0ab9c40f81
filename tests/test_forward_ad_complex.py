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
    "det_real": ([("rI", 3, 3)], lambda m, a: m.linalg.det(a)),
    "inv_real": ([("rI", 3, 3)], lambda m, a: m.linalg.inv(a)),
    "solve_real": ([("rI", 2, 3, 3), _r(3)], lambda m, a, b: m.linalg.solve(a, b)),
    "slogdet_logabs": ([_mat(2, 3, 3)], lambda m, a: m.linalg.slogdet(a)[1]),
    "slogdet_sign": ([_mat(3, 3)], lambda m, a: m.linalg.slogdet(a)[0]),
    "slogdet_real": ([("rI", 3, 3)], lambda m, a: m.linalg.slogdet(a)[1] * m.linalg.slogdet(a)[0]),
    "logdet": ([_mat(3, 3)], lambda m, a: m.logdet(a)),
    "solve_triangular_upper": ([_mat(3, 3), _c(3, 2)],
                               lambda m, a, b: m.linalg.solve_triangular(a, b, upper=True)),
    "solve_triangular_lower_unit": ([_mat(3, 3), _c(3, 2)],
                                    lambda m, a, b: m.linalg.solve_triangular(a, b, upper=False,
                                                                             unitriangular=True)),
    "solve_triangular_real_right": ([("rI", 3, 3), _r(2, 3)],
                                    lambda m, a, b: m.linalg.solve_triangular(a, b, upper=True, left=False)),
    "fft": ([_c(6)], lambda m, z: m.fft.fft(z)),
    "fft2": ([_c(2, 3, 4)], lambda m, z: m.fft.fft2(z, norm="ortho")),
    "hfft_ihfft": ([_c(4)], lambda m, z: m.fft.ihfft(m.fft.hfft(z, 6))),
    "ifft": ([_c(6)], lambda m, z: m.fft.ifft(z)),
    # shape and indexing ops move complex tangents as they are
    "reshape_transpose": ([_c(2, 6)], lambda m, a: a.reshape(3, 4).transpose(0, 1)),
    "index_select": ([_c(5, 2)], lambda m, a: a[m.tensor([4, 0, 2])]),
    "cat_stack": ([_c(2, 3), _c(2, 3)], lambda m, a, b: m.stack([m.cat([a, b], 0), m.cat([b, a], 0)])),
    "flip_roll": ([_c(2, 3)], lambda m, a: m.roll(m.flip(a, [1]), 1, 0)),
    "triu": ([_c(3, 3)], lambda m, a: m.triu(a)),
    # composites of the above
    "kron": ([_c(2, 2), _c(2, 3)], lambda m, a, b: m.kron(a, b)),
    "tensordot": ([_c(2, 3), _c(3, 2)], lambda m, a, b: m.tensordot(a, b, dims=([1], [0]))),
    "cross": ([_c(2, 3), _c(2, 3)], lambda m, a, b: m.linalg.cross(a, b)),
    "cov": ([_c(2, 5)], lambda m, a: m.cov(a)),
    "trapezoid_diff": ([_c(5)], lambda m, a: m.trapezoid(a) * m.diff(a)),
    "linear": ([_c(2, 3), _c(4, 3)], lambda m, a, w: m.nn.functional.linear(a, w)),
    "normalize": ([_c(2, 3)], lambda m, a: m.nn.functional.normalize(a, dim=-1)),
    "matrix_norm_fro": ([_c(3, 3)], lambda m, a: m.linalg.matrix_norm(a, "fro")),
    "stft": ([_c(12)], lambda m, a: m.stft(a, 4, return_complex=True, window=m.ones(4, dtype=m.float64))),
    "fftn_fftshift": ([_c(3, 4)], lambda m, a: m.fft.fftshift(m.fft.fftn(a))),
    "var_mean": ([_c(5)], lambda m, a: m.var_mean(a)[0] + m.var_mean(a)[1]),
    "addmm_complex_coefficients": ([_c(2, 3), _c(3, 2), _c(2, 2)],
                                   lambda m, a, b, x: m.addmm(x, a, b, beta=0.5j, alpha=2)),
    "matrix_power": ([_c(3, 3)], lambda m, a: m.linalg.matrix_power(a, 3)),
    "inv_ex": ([_mat(3, 3)], lambda m, a: m.linalg.inv_ex(a)[0]),
    "index_put_scatter_add": ([_c(4), _c(2), _c(3)], lambda m, a, b, c: a.index_put((m.tensor([0, 2]),), b)
                              .scatter_add(0, m.tensor([0, 0, 2]), c).gather(0, m.tensor([3, 0, 0]))),
    "pad": ([_c(2, 3)], lambda m, a: m.nn.functional.pad(a, (1, 2))),
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
        else:                            # cI / rI: the identity plus a small complex / real perturbation
            n = shape[-1]
            noise = rng.standard_normal(shape) + (1j * rng.standard_normal(shape) if kind == "cI" else 0)
            out.append(np.eye(n) + 0.3 * noise)
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


def test_jacobians_refuse_complex_inputs_and_outputs(dg):
    """jacfwd, jacrev and hessian refuse complex inputs and outputs, as torch.func's (a function of complex numbers
    has one complex Jacobian only if it is holomorphic); jvp and vjp take them."""
    z = dg.tensor([0.3 + 0.4j, -0.7 + 0.2j])
    x = dg.tensor([0.3, -0.7])
    for jac in (dg.func.jacfwd, dg.func.jacrev):
        name = jac.__name__
        with pytest.raises(RuntimeError, match=f"{name}: Expected all inputs to be real but received complex tensor "
                                               "at flattened input idx: 1"):
            jac(lambda a, b: a * b, argnums=(0, 1))(x, z)
        with pytest.raises(RuntimeError, match=f"{name}: Expected all outputs to be real but received complex"):
            jac(lambda a: dg.exp(a * 1j))(x)
    with pytest.raises(RuntimeError, match="Expected all inputs to be real"):
        dg.func.hessian(lambda a: dg.abs(a).sum())(z)


def test_func_grad_and_vjp_of_complex_inputs(dg):
    """func.grad / func.vjp of complex inputs follow torch's convention (dL/dx + i dL/dy for a real loss L; a
    cotangent u of a holomorphic f gives conj(f'(z)) u). They gave zeros before: the stand-in leaf of a complex
    input did not require grad."""
    z = np.array([0.3 + 0.4j, -0.7 + 0.2j])
    g = dg.func.grad(lambda a: (dg.real(a * a) + dg.abs(a) ** 3).sum())(dg.tensor(z))
    np.testing.assert_allclose(_as_numpy(g), 2 * np.conj(z) + 3 * np.abs(z) * z, rtol=1e-12)
    u = np.array([1 + 0j, 1j])
    (gz,) = dg.func.vjp(lambda a: a * a, dg.tensor(z))[1](dg.tensor(u))
    np.testing.assert_allclose(_as_numpy(gz), np.conj(2 * z) * u, rtol=1e-12)


def test_hessian_of_a_real_function_of_complex_inputs(dg):
    """jvp of func.grad (forward over reverse) of a real function of complex z, against finite differences of the
    gradient (torch's convention: grad = dL/dx + i dL/dy)."""
    z = np.array([0.3 + 0.4j, -0.7 + 0.2j])
    v = np.array([0.5 - 1.0j, 0.25 + 0.75j])

    def loss(a):
        return (dg.abs(dg.sin(a)) ** 3).sum() + dg.real(a * a).sum()

    grad = dg.func.grad(loss)
    _, hv = dg.func.jvp(grad, (dg.tensor(z),), (dg.tensor(v),))
    expected = (_as_numpy(grad(dg.tensor(z + STEP * v))) - _as_numpy(grad(dg.tensor(z - STEP * v)))) / (2 * STEP)
    assert np.abs(expected).min() > 0.1
    np.testing.assert_allclose(_as_numpy(hv), expected, rtol=1e-6, atol=1e-8)


# Real functions of real inputs whose insides are complex: their Hessians (forward over reverse: jacfwd of jacrev)
# carry complex tangents through complex backward formulas. abs of a complex value whose phase moves reaches the
# derivative of sgn (Note [Differentiable sgn of abs] in csrc/dyngrad/derivatives.cpp).
_A = np.eye(3) + 0.3 * (np.arange(9).reshape(3, 3) % 4 - 1.5 + 1j * (np.arange(9).reshape(3, 3) % 3 - 1))
_C3 = np.array([0.5 + 1j, -0.3 + 0.2j, 1 - 0.4j])
HESSIAN_CASES = {
    "abs_of_fft": lambda m, r: (m.abs(m.fft.fft(m.sin(r))) ** 3).sum(),
    "abs_of_phase": lambda m, r: m.abs(m.exp(r * 1j) + m.tensor(_C3)).sum(),
    "abs_of_inv": lambda m, r: m.abs(m.linalg.inv(m.diag(r * 1j) + m.tensor(_A))).sum(),
    "abs_of_det": lambda m, r: m.abs(m.linalg.det(m.diag(r * 1j) + m.tensor(_A))),
    "real_of_solve": lambda m, r: m.real(m.linalg.solve(m.diag(r * 1j) + m.tensor(_A), m.tensor(_C3) * r)).sum(),
    "rfft_product": lambda m, r: m.fft.irfft(m.fft.rfft(r * r) * m.fft.rfft(r), 3).sum(),
    "view_as_real": lambda m, r: (m.view_as_real(m.exp(r * m.tensor(_C3))) ** 2).sum(),
    "angle": lambda m, r: m.angle(r * m.tensor(_C3) + 1).sum() * m.imag(m.exp(r * m.tensor(_C3))).sum(),
    "abs_of_real_det": lambda m, r: m.abs(m.linalg.det(m.diag(r) + m.tensor(_A.real))),
}


@pytest.mark.parametrize("name", sorted(HESSIAN_CASES))
def test_hessian_through_complex_intermediates(dg, name):
    f = HESSIAN_CASES[name]
    x = np.array([0.3, -0.7, 1.1])
    hessian = _as_numpy(dg.func.hessian(lambda r: f(dg, r))(dg.tensor(x)))
    grad = dg.func.grad(lambda r: f(dg, r))
    h = 1e-5
    expected = np.stack([(_as_numpy(grad(dg.tensor(x + h * e))) - _as_numpy(grad(dg.tensor(x - h * e)))) / (2 * h)
                         for e in np.eye(3)])
    np.testing.assert_allclose(hessian, expected, rtol=1e-6, atol=1e-7, err_msg=name)
    np.testing.assert_allclose(hessian, hessian.T, rtol=1e-9, atol=1e-12)


# jvp of jvp: the second-order cross term of the custom Functions' jvps (fft, det, inv, solve) comes once (Note
# [Nested levels] in csrc/dyngrad/forward_ad.h), checked by finite differences of the inner jvp
NESTED_CASES = {
    "fft": (lambda m, a: m.fft.fft(a * a), lambda: _C3),
    "ifft_of_exp": (lambda m, a: m.fft.ifft(m.exp(a)), lambda: _C3),
    "det": (lambda m, a: m.linalg.det(a), lambda: _A),
    "inv": (lambda m, a: m.linalg.inv(a), lambda: _A),
    "solve": (lambda m, a: m.linalg.solve(a, m.tensor(_A[:, :2]) * a[0, 0]), lambda: _A),
    "det_real": (lambda m, a: m.linalg.det(a), lambda: _A.real + np.eye(3)),
    "solve_real": (lambda m, a: m.linalg.solve(a, a[:, :1] * 2 + 1), lambda: _A.real + np.eye(3)),
    "slogdet": (lambda m, a: m.linalg.slogdet(a)[1] * m.linalg.slogdet(a)[0], lambda: _A),
    "solve_triangular": (lambda m, a: m.linalg.solve_triangular(a, a[:, :2], upper=False), lambda: _A),
}


@pytest.mark.parametrize("name", sorted(NESTED_CASES))
def test_jvp_of_jvp(dg, name):
    fn, make = NESTED_CASES[name]
    a = make()
    complex_ = np.iscomplexobj(a)
    rng = np.random.default_rng(zlib.crc32(name.encode()))
    u, w = (rng.standard_normal(a.shape) + (1j * rng.standard_normal(a.shape) if complex_ else 0) for _ in range(2))

    def inner(p):
        return dg.func.jvp(lambda b: fn(dg, b), (p,), (dg.tensor(u),))[1]
    _, got = dg.func.jvp(inner, (dg.tensor(a),), (dg.tensor(w),))
    expected = (_as_numpy(inner(dg.tensor(a + STEP * w))) - _as_numpy(inner(dg.tensor(a - STEP * w)))) / (2 * STEP)
    np.testing.assert_allclose(_as_numpy(got), expected, rtol=1e-6, atol=1e-8, err_msg=name)


def test_reverse_over_forward_of_a_complex_jvp(dg):
    """grad of (the real part of) a complex jvp, against torch's value worked by hand: d/dz Re(sum exp(z) v)."""
    z = np.array([0.3 + 0.4j, -0.7 + 0.2j])
    v = np.array([1 + 0j, 1j])
    g = dg.func.grad(lambda a: dg.real(dg.func.jvp(dg.exp, (a,), (dg.tensor(v),))[1]).sum())(dg.tensor(z))
    np.testing.assert_allclose(_as_numpy(g), np.conj(np.exp(z) * v), rtol=1e-12)


def test_vmap_of_jvp_of_a_complex_function(dg):
    """vmap over a batch of tangents of a complex jvp: each row is the jvp of that row's tangent."""
    z = np.array([0.3 + 0.4j, -0.7 + 0.2j, 1.1 - 0.5j])
    vs = np.array([[1, 0, 0], [0, 1j, 0], [0.5, 0.5j, 1 - 1j]])

    def f(a):
        return dg.exp(a) * dg.conj(a)

    rows = dg.func.vmap(lambda v: dg.func.jvp(f, (dg.tensor(z),), (v,))[1])(dg.tensor(vs))
    expected = np.stack([np.exp(z) * np.conj(z) * v + np.exp(z) * np.conj(v) for v in vs])
    np.testing.assert_allclose(_as_numpy(rows), expected, rtol=1e-12)


def test_vmap_of_real(dg):
    """dyngrad.real (a function and a property) is seen by vmap: jacrev's batched pass of a function that takes
    the real part of a complex intermediate reaches it with BatchedTensors."""
    z = np.array([[0.3 + 0.4j, -1 + 2j], [2 - 1j, 0.5j]])
    np.testing.assert_array_equal(_as_numpy(dg.func.vmap(dg.real)(dg.tensor(z))), z.real)
    np.testing.assert_array_equal(_as_numpy(dg.func.vmap(lambda a: a.real * 2)(dg.tensor(z))), 2 * z.real)
    x = np.array([0.3, -0.7])
    jac = dg.func.jacrev(lambda r: dg.real(dg.exp(r * (1 + 1j))))(dg.tensor(x))
    np.testing.assert_allclose(_as_numpy(jac), np.diag(np.exp(x) * (np.cos(x) - np.sin(x))), rtol=1e-12)


def test_second_derivatives_of_complex_abs(dg):
    """grad of grad of |z| (and of |f(z)|) at complex z moving in phase: it holds the derivative of sgn(z) (Note
    [Differentiable sgn of abs] in csrc/dyngrad/derivatives.cpp; the kernel sign's is zero)."""
    z = dg.tensor(np.array([0.3 + 0.4j, -1 + 2j, 0.7 - 0.1j]), requires_grad=True)
    assert dg.autograd.gradgradcheck(lambda a: dg.abs(a), (z,))
    assert dg.autograd.gradgradcheck(lambda a: dg.abs(dg.exp(a) * a) ** 3, (z,))
    # by hand: L = sum |z|, grad = sgn(z); its jvp along v is (v - sgn Re(conj(sgn) v)) / |z|
    zv, v = _as_numpy(z), np.array([1j, 1 + 0j, 0.5 - 0.5j])
    _, hv = dg.func.jvp(dg.func.grad(lambda a: dg.abs(a).sum()), (z.detach(),), (dg.tensor(v),))
    s = zv / np.abs(zv)
    np.testing.assert_allclose(_as_numpy(hv), (v - s * np.real(np.conj(s) * v)) / np.abs(zv), rtol=1e-12)


def test_linalg_spectral_values_carry_tangents(dg):
    """svdvals and eigvalsh of a dual input go through the factorisations' jvps (they once took a numpy shortcut
    that dropped the tangent silently): real and complex, against central finite differences."""
    for a in (np.eye(3) + 0.1 * np.arange(9).reshape(3, 3), np.eye(3) + 0.1j * np.arange(9).reshape(3, 3)):
        for fn in (dg.linalg.svdvals, lambda x: dg.linalg.eigvalsh(x @ x.mH)):
            _, t = dg.func.jvp(fn, (dg.tensor(a),), (dg.tensor(a),))
            fd = (fn(dg.tensor(a * (1 + 1e-6))).numpy() - fn(dg.tensor(a * (1 - 1e-6))).numpy()) / 2e-6
            assert np.abs(fd).max() > 0.1
            np.testing.assert_allclose(t.numpy(), fd, rtol=1e-6, atol=1e-8)