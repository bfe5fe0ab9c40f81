"""Forward-mode AD (jvp) of linalg's factorisations and the functions built on them, on both engines.

Each row of CASES is (input kinds, fn(m, *inputs), checks), `m` the engine module or torch (the calls are torch's
API). An input kind is (letter, *shape): "r" float64, "c" complex128, "pd" / "pdc" a Hermitian positive-definite
float64 / complex128 matrix (stack), "lu" / "luc" a matrix whose LU pivots are unambiguous. The checks:
  fd       the jvp against central finite differences of fn (a real step along the tangent, the R-linear derivative)
  torch    against torch.func.jvp (skipped without torch)
  adjoint  Re<u, J v> = Re<J^H u, v> with J^H u from func.vjp (the reverse derivative)
The factorisations' outputs that are defined only up to a gauge (the signs or phases of eigen- and singular vectors,
the columns past k of a full_matrices SVD) enter through functions that do not see it: |V|^2, U Vh, U diag(S) Vh.
Functions of a Hermitian input take it through x + x^H (or x x^H + n I) where their formula reads the whole matrix
and the derivative is then the same for every triangle the forward reads; rows marked "raw" pass an arbitrary tangent
and compare with torch only (torch's formulas take the whole tangent, as ours).
"""
import zlib

import numpy as np
import pytest

STEP = 1e-6
# torch.cholesky is deprecated (a warning, as torch's); Tensor.mH has no vmap rule (hessian's vmap loops over it)
pytestmark = [pytest.mark.filterwarnings("ignore:cholesky is deprecated"),
              pytest.mark.filterwarnings("ignore:vmap. there is no batching rule for mH")]
ALL = ("fd", "torch", "adjoint")


def _abs2(m, x):
    """|x|^2 elementwise: blind to the phase (sign) of each column."""
    return m.real(x * x.conj())


def _pd(m, x):
    """x x^H + n I: Hermitian positive-definite, a smooth function of any x."""
    return x @ x.mH + x.shape[-1] * m.eye(x.shape[-1], dtype=x.dtype)


def _herm(m, x):
    return x + x.mH


def _svd_sym(m, x, full):
    U, S, Vh = m.linalg.svd(x, full_matrices=full)
    k = S.shape[-1]
    U, Vh = U[..., :, :k], Vh[..., :k, :]
    return U @ Vh, _abs2(m, U), _abs2(m, Vh), S


def _cholesky_solve(m, b, x, upper):
    L = m.linalg.cholesky(_pd(m, x), upper=upper)
    return m.cholesky_solve(b, L, upper=upper)


def _lu_solve(m, x, b):
    LU, piv = m.linalg.lu_factor(x)
    return m.linalg.lu_solve(LU, piv, b)


CASES = {
    # cholesky
    "cholesky": ([("r", 2, 3, 3)], lambda m, x: m.linalg.cholesky(_pd(m, x)), ALL),
    "cholesky_complex": ([("c", 3, 3)], lambda m, x: m.linalg.cholesky(_pd(m, x)), ALL),
    "cholesky_upper": ([("r", 3, 3)], lambda m, x: m.linalg.cholesky(_pd(m, x), upper=True), ALL),
    "cholesky_upper_complex": ([("c", 2, 3, 3)], lambda m, x: m.linalg.cholesky(_pd(m, x), upper=True), ALL),
    "cholesky_ex": ([("c", 3, 3)], lambda m, x: m.linalg.cholesky_ex(_pd(m, x)).L, ALL),
    "torch_cholesky": ([("r", 3, 3)], lambda m, x: m.cholesky(_pd(m, x), upper=True), ("fd", "adjoint")),  # torch: no fwd AD
    "cholesky_raw": ([("pd", 4, 4)], lambda m, x: m.linalg.cholesky(x), ("torch",)),
    "cholesky_raw_complex": ([("pdc", 3, 3)], lambda m, x: m.linalg.cholesky(x, upper=True), ("torch",)),
    # qr
    "qr_tall": ([("r", 2, 5, 3)], lambda m, x: m.linalg.qr(x), ALL),
    "qr_wide": ([("r", 3, 5)], lambda m, x: m.linalg.qr(x), ALL),
    "qr_square_complex": ([("c", 2, 3, 3)], lambda m, x: m.linalg.qr(x), ALL),
    "qr_tall_complex": ([("c", 4, 3)], lambda m, x: m.linalg.qr(x), ALL),
    "qr_wide_complex": ([("c", 3, 4)], lambda m, x: m.linalg.qr(x), ALL),
    "qr_complete_wide": ([("r", 3, 5)], lambda m, x: m.linalg.qr(x, mode="complete"), ALL),
    "qr_complete_square": ([("c", 3, 3)], lambda m, x: m.linalg.qr(x, mode="complete"), ALL),
    # eigh / eigvalsh
    "eigh": ([("r", 2, 4, 4)], lambda m, x: (lambda w, V: (w, _abs2(m, V)))(*m.linalg.eigh(_herm(m, x))), ALL),
    "eigh_complex": ([("c", 3, 3)], lambda m, x: (lambda w, V: (w, _abs2(m, V)))(*m.linalg.eigh(_herm(m, x))),
                     ALL),
    "eigh_upper": ([("c", 3, 3)], lambda m, x: (lambda w, V: (w, _abs2(m, V)))(
        *m.linalg.eigh(_herm(m, x), UPLO="U")), ALL),
    "eigh_projector": ([("c", 4, 4)], lambda m, x: (lambda V: V[..., :, :2] @ V[..., :, :2].mH)(
        m.linalg.eigh(_herm(m, x)).eigenvectors), ALL),
    "eigvalsh": ([("r", 3, 3)], lambda m, x: m.linalg.eigvalsh(_herm(m, x)), ALL),
    "eigvalsh_complex": ([("c", 2, 3, 3)], lambda m, x: m.linalg.eigvalsh(_herm(m, x), UPLO="U"), ALL),
    "eigh_raw": ([("pd", 3, 3)], lambda m, x: m.linalg.eigh(x).eigenvalues, ("torch",)),
    # svd
    "svd_tall": ([("r", 2, 5, 3)], lambda m, x: _svd_sym(m, x, False), ALL),
    "svd_wide": ([("r", 3, 5)], lambda m, x: _svd_sym(m, x, False), ALL),
    "svd_square_complex": ([("c", 3, 3)], lambda m, x: _svd_sym(m, x, False), ALL),
    "svd_tall_complex": ([("c", 2, 4, 3)], lambda m, x: _svd_sym(m, x, False), ALL),
    "svd_wide_complex": ([("c", 3, 4)], lambda m, x: _svd_sym(m, x, False), ALL),
    "svd_full_tall": ([("r", 5, 3)], lambda m, x: _svd_sym(m, x, True), ALL),
    "svd_full_wide_complex": ([("c", 3, 5)], lambda m, x: _svd_sym(m, x, True), ALL),
    "svd_reconstruct": ([("c", 4, 3)], lambda m, x: (lambda U, S, Vh: (U * S.unsqueeze(-2)) @ Vh)(
        *m.linalg.svd(x, full_matrices=False)), ALL),
    "torch_svd": ([("r", 4, 3)], lambda m, x: (lambda U, S, V: (U @ V.mH, S))(*m.svd(x)), ALL),
    "svdvals": ([("r", 2, 3, 4)], lambda m, x: m.linalg.svdvals(x), ALL),
    "svdvals_complex": ([("c", 4, 3)], lambda m, x: m.linalg.svdvals(x), ALL),
    # pinv / lstsq
    "pinv_tall": ([("r", 5, 3)], lambda m, x: m.linalg.pinv(x), ALL),
    "pinv_wide": ([("r", 2, 3, 5)], lambda m, x: m.linalg.pinv(x), ALL),
    "pinv_complex": ([("c", 3, 4)], lambda m, x: m.linalg.pinv(x), ALL),
    "pinv_hermitian": ([("c", 3, 3)], lambda m, x: m.linalg.pinv(_herm(m, x), hermitian=True), ALL),
    "pinverse": ([("r", 4, 3)], lambda m, x: m.pinverse(x), ALL),
    "lstsq": ([("r", 5, 3), ("r", 5, 2)], lambda m, a, b: m.linalg.lstsq(a, b).solution, ALL),
    "lstsq_complex": ([("c", 4, 3), ("c", 4, 2)], lambda m, a, b: m.linalg.lstsq(a, b).solution, ALL),
    "lstsq_gelsd": ([("r", 5, 3), ("r", 5, 2)], lambda m, a, b: m.linalg.lstsq(a, b, driver="gelsd")[:2], ALL),
    "svd_lowrank": ([("r", 6, 4)], lambda m, x: (m.manual_seed(0), m.svd_lowrank(x, q=3)[1])[1], ("fd", "adjoint")),
    # eig / eigvals
    "eigvals": ([("r", 2, 4, 4)], lambda m, x: m.linalg.eigvals(x), ALL),
    "eigvals_complex": ([("c", 3, 3)], lambda m, x: m.linalg.eigvals(x), ALL),
    "eig": ([("r", 3, 3)], lambda m, x: (lambda w, V: (w, _abs2(m, V)))(*m.linalg.eig(x)), ALL),
    "eig_complex": ([("c", 2, 3, 3)], lambda m, x: (lambda w, V: (w, _abs2(m, V)))(*m.linalg.eig(x)), ALL),
    "eig_reconstruct": ([("c", 3, 3)], lambda m, x: (lambda w, V: (V * w.unsqueeze(-2)) @ m.linalg.inv(V))(
        *m.linalg.eig(x)), ALL),
    # lu
    "lu_square": ([("lu", 2, 3, 3)], lambda m, x: m.linalg.lu(x)[1:], ALL),
    "lu_tall": ([("lu", 5, 3)], lambda m, x: m.linalg.lu(x)[1:], ALL),
    "lu_wide": ([("lu", 3, 5)], lambda m, x: m.linalg.lu(x)[1:], ALL),
    "lu_complex": ([("luc", 3, 4)], lambda m, x: m.linalg.lu(x)[1:], ALL),
    "lu_factor": ([("lu", 4, 4)], lambda m, x: m.linalg.lu_factor(x).LU, ALL),
    "lu_factor_ex_complex": ([("luc", 4, 3)], lambda m, x: m.linalg.lu_factor_ex(x).LU, ALL),
    "lu_solve": ([("lu", 3, 3), ("r", 3, 2)], _lu_solve, ALL),
    "solve_ex": ([("r", 3, 3), ("r", 3, 2)], lambda m, a, b: m.linalg.solve_ex(a, b).result, ALL),
    # matrix_exp
    "matrix_exp": ([("r", 2, 3, 3)], lambda m, x: m.linalg.matrix_exp(x), ALL),
    "matrix_exp_complex": ([("c", 3, 3)], lambda m, x: m.linalg.matrix_exp(x), ALL),
    "matrix_exp_torch_name": ([("r", 4, 4)], lambda m, x: m.matrix_exp(x), ALL),
    # cholesky_solve / cholesky_inverse
    "cholesky_solve": ([("r", 3, 2), ("r", 3, 3)], lambda m, b, x: _cholesky_solve(m, b, x, False), ALL),
    "cholesky_solve_upper_complex": ([("c", 2, 3, 2), ("c", 2, 3, 3)],
                                     lambda m, b, x: _cholesky_solve(m, b, x, True), ALL),
    "cholesky_solve_raw": ([("r", 3, 2), ("pd", 3, 3)], lambda m, b, a: m.cholesky_solve(b, a), ("torch",)),
    # torch 2.13's cholesky_inverse jvp disagrees with its own finite differences (real and complex; its backward
    # agrees): checked against those and the vjp only
    "cholesky_inverse": ([("r", 2, 3, 3)], lambda m, x: m.cholesky_inverse(m.linalg.cholesky(_pd(m, x))),
                         ("fd", "adjoint")),
    "cholesky_inverse_complex": ([("c", 3, 3)], lambda m, x: m.cholesky_inverse(m.linalg.cholesky(_pd(m, x))),
                                 ("fd", "adjoint")),
    # norms and cond over the singular values
    "matrix_norm_nuc": ([("r", 2, 3, 4)], lambda m, x: m.linalg.matrix_norm(x, "nuc"), ALL),
    "matrix_norm_2": ([("c", 3, 3)], lambda m, x: m.linalg.matrix_norm(x, 2), ALL),
    "matrix_norm_-2": ([("r", 4, 3)], lambda m, x: m.linalg.matrix_norm(x, -2), ALL),
    "norm_nuc": ([("r", 3, 4, 2)], lambda m, x: m.norm(x, "nuc", dim=(0, 2)), ALL),
    "norm_nuc_complex": ([("c", 3, 3)], lambda m, x: m.norm(x, "nuc"), ALL),
    "linalg_norm_nuc_keepdim": ([("r", 3, 3)], lambda m, x: m.linalg.norm(x, "nuc", keepdim=True), ALL),
    "cond": ([("r", 2, 3, 3)], lambda m, x: m.linalg.cond(x), ALL),
    "cond_fro": ([("c", 3, 3)], lambda m, x: m.linalg.cond(x, "fro"), ALL),
    "cond_nuc_-2": ([("r", 3, 3)], lambda m, x: (m.linalg.cond(x, "nuc"), m.linalg.cond(x, -2)), ALL),
}


def _inputs(rng, kinds):
    out = []
    for letter, *shape in kinds:
        cplx = letter in ("c", "pdc", "luc")
        x = rng.standard_normal(shape) + (1j * rng.standard_normal(shape) if cplx else 0)
        if letter in ("pd", "pdc"):
            x = x @ np.conj(np.swapaxes(x, -1, -2)) + shape[-1] * np.eye(shape[-1])
        if letter in ("lu", "luc"):                 # a dominant first column and diagonal: clear pivots
            k = min(shape[-2], shape[-1])
            x[..., np.arange(k), np.arange(k)] += 4.0 * np.sign(np.real(x[..., np.arange(k), np.arange(k)]) + 1e-3)
        out.append(x)
    return out


def _tangents(rng, inputs):
    return [rng.standard_normal(x.shape) + (1j * rng.standard_normal(x.shape) if np.iscomplexobj(x) else 0)
            for x in inputs]


def _tuple(out):
    return tuple(out) if isinstance(out, (tuple, list)) else (out,)


def _np(t):
    return np.asarray(t.detach().resolve_conj().numpy() if hasattr(t, "resolve_conj") else t.detach().numpy())


def _run(m, fn):
    return lambda *a: _tuple(fn(m, *a))


def _rng(name, salt=0):
    return np.random.default_rng(zlib.crc32(name.encode()) + salt)


def _assert_close(got, expected, rtol, atol, name):
    assert len(got) == len(expected), name
    for i, (g, e) in enumerate(zip(got, expected)):
        assert np.iscomplexobj(g) == np.iscomplexobj(e), f"{name}[{i}]: dtype kinds differ"
        scale = max(1.0, float(np.max(np.abs(e)))) if np.size(e) else 1.0
        np.testing.assert_allclose(g, e, rtol=rtol, atol=atol * scale, err_msg=f"{name}[{i}]")


@pytest.mark.parametrize("name", sorted(n for n in CASES if "fd" in CASES[n][2]))
def test_jvp_against_finite_differences(dg, name):
    kinds, fn, _ = CASES[name]
    rng = _rng(name)
    inputs = _inputs(rng, kinds)
    tangents = _tangents(rng, inputs)
    out, tan = dg.func.jvp(_run(dg, fn), tuple(dg.tensor(x) for x in inputs), tuple(dg.tensor(v) for v in tangents))
    for o, t in zip(out, tan):
        assert t.dtype == o.dtype and tuple(t.shape) == tuple(o.shape), name

    def at(h):
        return [_np(o) for o in _run(dg, fn)(*[dg.tensor(x + h * v) for x, v in zip(inputs, tangents)])]
    fd = [(p - q) / (2 * STEP) for p, q in zip(at(STEP), at(-STEP))]
    _assert_close([_np(t) for t in tan], fd, 1e-5, 1e-7, name)


@pytest.mark.parametrize("name", sorted(n for n in CASES if "torch" in CASES[n][2]))
def test_jvp_against_torch(dg, name):
    torch = pytest.importorskip("torch")
    kinds, fn, _ = CASES[name]
    rng = _rng(name, 1)
    inputs = _inputs(rng, kinds)
    tangents = _tangents(rng, inputs)
    _, ours = dg.func.jvp(_run(dg, fn), tuple(dg.tensor(x) for x in inputs), tuple(dg.tensor(v) for v in tangents))
    _, theirs = torch.func.jvp(_run(torch, fn), tuple(torch.tensor(x) for x in inputs),
                               tuple(torch.tensor(v) for v in tangents))
    _assert_close([_np(t) for t in ours], [_np(t) for t in theirs], 1e-8, 1e-10, name)


@pytest.mark.parametrize("name", sorted(n for n in CASES if "adjoint" in CASES[n][2]))
def test_jvp_is_the_adjoint_of_the_vjp(dg, name):
    """Re<u, J v> = Re<J^H u, v>: forward and reverse mode compute the same derivative."""
    kinds, fn, _ = CASES[name]
    rng = _rng(name, 2)
    inputs = _inputs(rng, kinds)
    tangents = _tangents(rng, inputs)
    primals = tuple(dg.tensor(x) for x in inputs)
    out, tan = dg.func.jvp(_run(dg, fn), primals, tuple(dg.tensor(v) for v in tangents))
    cot = _tangents(rng, [_np(o) for o in out])
    _, vjp_fn = dg.func.vjp(_run(dg, fn), *primals)
    back = vjp_fn(tuple(dg.tensor(u) for u in cot))
    lhs = sum(np.real(np.vdot(u, _np(t))) for u, t in zip(cot, tan))
    rhs = sum(np.real(np.vdot(_np(g), v)) for g, v in zip(back, tangents))
    assert abs(lhs) > 1e-3, name
    np.testing.assert_allclose(lhs, rhs, rtol=1e-9, atol=1e-11, err_msg=name)


# ----- transforms over the jvps: jacfwd, hessian, vmap, nested levels ----------------------------------------------

SCALAR_CASES = {      # real scalar functions of one real matrix, for hessian = jacfwd(jacrev)
    "cholesky": (3, lambda m, x: (m.linalg.cholesky(_pd(m, x)) ** 2).sum()),
    "qr": (3, lambda m, x: (lambda Q, R: (Q[..., 0, :] * R.diagonal()).sum() + (R ** 2).sum())(*m.linalg.qr(x))),
    "eigh": (3, lambda m, x: (lambda w, V: (w ** 3).sum() + (V ** 4).sum())(*m.linalg.eigh(_herm(m, x)))),
    "svd": (3, lambda m, x: (lambda U, S, Vh: (S ** 3).sum() + ((U @ Vh) ** 3).sum())(
        *m.linalg.svd(x, full_matrices=False))),
    "nuclear_norm": (3, lambda m, x: m.linalg.matrix_norm(x, "nuc") + m.norm(x * x, "nuc")),
    "pinv": (3, lambda m, x: (m.linalg.pinv(x[..., :2]) ** 2).sum()),
    "eigvals": (3, lambda m, x: m.real(m.linalg.eigvals(x) ** 2).sum()),
    "lu": (3, lambda m, x: (lambda P, L, U: (L ** 2).sum() + (U ** 3).sum())(*m.linalg.lu(x + 3 * m.eye(3,
                                                                                        dtype=x.dtype)))),
    "matrix_exp": (3, lambda m, x: (m.linalg.matrix_exp(x) ** 2).sum()),
    "cholesky_solve": (3, lambda m, x: (m.cholesky_solve(x, m.linalg.cholesky(_pd(m, x))) ** 2).sum()),
    "inv": (3, lambda m, x: (m.linalg.inv(x + 3 * m.eye(3, dtype=x.dtype)) ** 3).sum()),
    "det": (3, lambda m, x: m.linalg.det(x) ** 2 + m.linalg.slogdet(x + 3 * m.eye(3, dtype=x.dtype))[1] ** 2),
    "solve": (3, lambda m, x: (m.linalg.solve(x + 3 * m.eye(3, dtype=x.dtype), x[..., :1]) ** 3).sum()),
    "solve_triangular": (3, lambda m, x: (m.linalg.solve_triangular(x + 3 * m.eye(3, dtype=x.dtype), x,
                                                                    upper=True) ** 3).sum()),
}


@pytest.mark.parametrize("name", sorted(SCALAR_CASES))
def test_hvp_forward_over_reverse(dg, name):
    """autograd.functional.hvp runs the backward at dual inputs (forward over reverse, no graph recorded): the
    backward formulas must recompute the outputs they saved detached, or the tangent misses their dependence on the
    input. Against the Hessian (jacrev of jacrev) times v."""
    n, fn = SCALAR_CASES[name]
    rng = _rng(name, 10)
    x, v = dg.tensor(rng.standard_normal((n, n))), rng.standard_normal((n, n))
    f = lambda a: fn(dg, a)
    _, hv = dg.autograd.functional.hvp(f, x, dg.tensor(v))
    H = _np(dg.func.jacrev(dg.func.jacrev(f))(x)).reshape(n * n, n * n)
    np.testing.assert_allclose(_np(hv).reshape(-1), H @ v.reshape(-1), rtol=1e-8, atol=1e-9, err_msg=name)
    _, jg = dg.func.jvp(dg.func.grad(f), (x,), (dg.tensor(v),))
    np.testing.assert_allclose(_np(jg).reshape(-1), H @ v.reshape(-1), rtol=1e-8, atol=1e-9, err_msg=name)


@pytest.mark.parametrize("name", sorted(SCALAR_CASES))
def test_hessian_and_jacfwd(dg, name):
    """func.hessian (forward over reverse) equals jacrev of jacrev; jacfwd of a vector function equals jacrev."""
    n, fn = SCALAR_CASES[name]
    x = dg.tensor(_rng(name, 3).standard_normal((n, n)))
    f = lambda a: fn(dg, a)
    H = dg.func.hessian(f)(x)
    H_rev = dg.func.jacrev(dg.func.jacrev(f))(x)
    np.testing.assert_allclose(_np(H), _np(H_rev), rtol=1e-8, atol=1e-9, err_msg=name)
    g = dg.func.grad(f)
    np.testing.assert_allclose(_np(dg.func.jacfwd(g)(x)), _np(H_rev), rtol=1e-8, atol=1e-9, err_msg=name)


def test_hessian_against_torch(dg):
    torch = pytest.importorskip("torch")
    for name, (n, fn) in sorted(SCALAR_CASES.items()):
        x = _rng(name, 4).standard_normal((n, n))
        ours = dg.func.hessian(lambda a: fn(dg, a))(dg.tensor(x))
        theirs = torch.func.hessian(lambda a: fn(torch, a))(torch.tensor(x))
        np.testing.assert_allclose(_np(ours), _np(theirs), rtol=1e-8, atol=1e-9, err_msg=name)


@pytest.mark.parametrize("name", ["cholesky", "qr_tall", "svd_wide_complex", "eig", "lu_tall", "matrix_exp",
                                  "pinv_wide", "cholesky_solve", "eigh_complex"])
def test_jacfwd_equals_jacrev(dg, name):
    kinds, fn, _ = CASES[name]
    inputs = [dg.tensor(x) for x in _inputs(_rng(name, 5), kinds)]
    if inputs[0].dtype.is_complex:      # jacfwd/jacrev of a complex input differ (R- vs C-linear): real parts
        base = inputs[0]
        f = lambda re: _tuple(fn(dg, dg.complex(re, dg.imag(base)), *inputs[1:]))
        f = (lambda g: lambda re: tuple(dg.real(o) if o.dtype.is_complex else o for o in g(re)))(f)
        arg = dg.real(base)
    else:
        f = lambda a: tuple(dg.real(o) if o.dtype.is_complex else o for o in _tuple(fn(dg, a, *inputs[1:])))
        arg = inputs[0]
    fwd, rev = dg.func.jacfwd(f)(arg), dg.func.jacrev(f)(arg)
    _assert_close([_np(t) for t in fwd], [_np(t) for t in rev], 1e-9, 1e-11, name)


@pytest.mark.parametrize("name", ["cholesky_complex", "qr_wide", "svd_tall", "eigvals", "lu_square",
                                  "matrix_exp", "pinv_tall", "cholesky_solve", "eigh"])
def test_vmap_of_jvp(dg, name):
    """vmap over a batch of tangents of a jvp: row b is the jvp along tangent b."""
    kinds, fn, _ = CASES[name]
    rng = _rng(name, 6)
    inputs = _inputs(rng, kinds)
    batch = np.stack([_tangents(rng, inputs)[0] for _ in range(3)])
    primals = tuple(dg.tensor(x) for x in inputs)
    rest = tuple(dg.tensor(np.zeros_like(x)) for x in inputs[1:])
    rows = dg.func.vmap(lambda v: dg.func.jvp(_run(dg, fn), primals, (v,) + rest)[1])(dg.tensor(batch))
    for b in range(batch.shape[0]):
        _, one = dg.func.jvp(_run(dg, fn), primals, (dg.tensor(batch[b]),) + rest)
        _assert_close([_np(r)[b] for r in rows], [_np(t) for t in one], 1e-10, 1e-12, name)


@pytest.mark.parametrize("name", ["cholesky_upper", "qr_wide_complex", "svd_full_tall", "eig_complex", "lu_wide",
                                  "matrix_exp", "pinv_hermitian", "eigvalsh", "norm_nuc", "cholesky_solve"])
def test_vmap_of_jvp_over_primals_and_tangents(dg, name):
    """vmap over a batch of (primal, tangent) pairs of every input: row b is the jvp at primal b along tangent b."""
    kinds, fn, _ = CASES[name]
    rng = _rng(name, 11)
    rows = [(_inputs(rng, kinds), None) for _ in range(3)]
    rows = [(x, _tangents(rng, x)) for x, _ in rows]
    k = len(kinds)
    prim = [dg.tensor(np.stack([r[0][i] for r in rows])) for i in range(k)]
    tang = [dg.tensor(np.stack([r[1][i] for r in rows])) for i in range(k)]
    got = dg.func.vmap(lambda *a: dg.func.jvp(_run(dg, fn), a[:k], a[k:])[1])(*prim, *tang)
    for b, (x, v) in enumerate(rows):
        _, one = dg.func.jvp(_run(dg, fn), tuple(dg.tensor(a) for a in x), tuple(dg.tensor(t) for t in v))
        _assert_close([_np(r)[b] for r in got], [_np(t) for t in one], 1e-10, 1e-12, name)


@pytest.mark.parametrize("name", ["cholesky", "qr_tall_complex", "svd_square_complex", "eig", "lu_wide",
                                  "matrix_exp_complex", "pinv_complex", "cholesky_solve", "eigh"])
def test_jvp_of_jvp(dg, name):
    """Second-order forward mode (nested levels): the jvp of the jvp against finite differences of the jvp."""
    kinds, fn, _ = CASES[name]
    rng = _rng(name, 7)
    inputs = _inputs(rng, kinds)
    u, w = _tangents(rng, inputs), _tangents(rng, inputs)
    rest = tuple(dg.tensor(x) for x in inputs[1:])
    U = (dg.tensor(u[0]),) + tuple(dg.tensor(np.zeros_like(x)) for x in inputs[1:])

    def inner(a):
        return dg.func.jvp(_run(dg, fn), (a,) + rest, U)[1]
    _, got = dg.func.jvp(inner, (dg.tensor(inputs[0]),), (dg.tensor(w[0]),))
    fd = [(_np(p) - _np(q)) / (2e-5) for p, q in zip(inner(dg.tensor(inputs[0] + 1e-5 * w[0])),
                                                     inner(dg.tensor(inputs[0] - 1e-5 * w[0])))]
    _assert_close([_np(t) for t in got], fd, 1e-5, 1e-6, name)


# ----- what has no derivative, as torch ---------------------------------------------------------------------------

def test_qr_modes_without_a_derivative(dg):
    x = dg.tensor(_rng("qr_modes").standard_normal((4, 3)))
    with pytest.raises(RuntimeError, match="mode='r'"):
        dg.func.jvp(lambda a: dg.linalg.qr(a, mode="r").R, (x,), (x,))
    with pytest.raises(RuntimeError, match="mode='complete'"):
        dg.func.jvp(lambda a: dg.linalg.qr(a, mode="complete").Q, (x,), (x,))


def test_integer_outputs_have_no_tangent(dg):
    """lu_factor's pivots, linalg.lu_factor_ex's info and matrix_rank are integers: no tangent (torch's)."""
    fwAD = dg.autograd.forward_ad
    a = _inputs(_rng("int"), [("lu", 3, 3)])[0]
    with fwAD.dual_level():
        x = fwAD.make_dual(dg.tensor(a), dg.tensor(np.ones((3, 3))))
        LU, piv, info = dg.linalg.lu_factor_ex(x)
        assert fwAD.unpack_dual(LU).tangent is not None
        assert fwAD.unpack_dual(piv).tangent is None and fwAD.unpack_dual(info).tangent is None
        rank = dg.linalg.matrix_rank(x)
        assert int(rank) == 3 and fwAD.unpack_dual(rank).tangent is None


def test_full_matrices_columns_past_k_have_zero_tangent(dg):
    """The columns of a full_matrices U (rows of Vh) past k = min(m, n) are not determined by A: torch gives them a
    zero tangent, and so does dyngrad."""
    for shape in ((5, 3), (3, 5)):
        x = dg.tensor(_rng("full", shape[0]).standard_normal(shape))
        (U, S, Vh), (dU, dS, dVh) = dg.func.jvp(lambda a: tuple(dg.linalg.svd(a)), (x,), (x * 0.5 + 1,))
        assert tuple(dU.shape) == (shape[0],) * 2 and tuple(dVh.shape) == (shape[1],) * 2
        np.testing.assert_array_equal(_np(dU)[:, 3:], 0)
        np.testing.assert_array_equal(_np(dVh)[3:, :], 0)


def test_ops_torch_does_not_differentiate_refuse_forward_mode(dg):
    """geqrf and the LDL factorisation have no derivative in torch, forward mode included (NotImplementedError);
    they once returned a silent zero tangent."""
    a = _rng("noderiv").standard_normal((4, 3))
    x, s = dg.tensor(a), dg.tensor(a.T @ a + np.eye(3))
    with pytest.raises(NotImplementedError, match="forward-mode derivative for geqrf"):
        dg.func.jvp(lambda t: dg.geqrf(t).a, (x,), (x,))
    with pytest.raises(NotImplementedError, match="forward-mode derivative for linalg.ldl_factor"):
        dg.func.jvp(lambda t: dg.linalg.ldl_factor(t).LD, (s,), (s,))
    with pytest.raises(NotImplementedError, match="forward-mode derivative for linalg.ldl_factor"):
        dg.func.jvp(lambda t: dg.linalg.ldl_factor_ex(t, hermitian=True).LD, (s,), (s,))


@pytest.mark.parametrize("name", ["cholesky_upper", "qr_wide", "svd_tall", "eig", "lu_tall", "matrix_exp",
                                  "pinv_wide", "cholesky_solve", "eigh", "norm_nuc"])
def test_grad_of_jvp(dg, name):
    """Reverse over forward: the gradient of <w, J(x) v> in x, against central finite differences of it."""
    kinds, fn, _ = CASES[name]
    rng = _rng(name, 8)
    inputs = _inputs(rng, kinds)
    v, d = _tangents(rng, inputs), _tangents(rng, inputs)
    rest = tuple(dg.tensor(x) for x in inputs[1:])
    V = (dg.tensor(v[0]),) + tuple(dg.tensor(np.zeros_like(x)) for x in inputs[1:])
    out = _tuple(fn(dg, *[dg.tensor(x) for x in inputs]))
    ws = [dg.tensor(w) for w in _tangents(rng, [_np(o) for o in out])]

    def scalar(a):
        tan = dg.func.jvp(_run(dg, fn), (a,) + rest, V)[1]
        return sum(dg.real(t * w).sum() for t, w in zip(tan, ws))
    g = dg.func.grad(scalar)(dg.tensor(inputs[0]))
    fd = (float(scalar(dg.tensor(inputs[0] + 1e-5 * d[0]))) - float(scalar(dg.tensor(inputs[0] - 1e-5 * d[0])))) / 2e-5
    np.testing.assert_allclose(float(np.sum(_np(g) * d[0])), fd, rtol=1e-5, atol=1e-6, err_msg=name)


@pytest.mark.parametrize("name", ["cholesky_complex", "qr_tall", "eigh_complex", "svd_wide", "pinv_complex",
                                  "eig", "lu_square", "matrix_exp_complex", "cholesky_solve", "norm_nuc"])
def test_single_precision(dg, name):
    """float32 / complex64 tangents keep their dtype and agree with the float64 ones to single precision."""
    kinds, fn, _ = CASES[name]
    rng = _rng(name, 9)
    inputs = _inputs(rng, kinds)
    tangents = _tangents(rng, inputs)
    lo = {np.dtype("float64"): "float32", np.dtype("complex128"): "complex64"}
    _, t64 = dg.func.jvp(_run(dg, fn), tuple(dg.tensor(x) for x in inputs), tuple(dg.tensor(v) for v in tangents))
    out, t32 = dg.func.jvp(_run(dg, fn), tuple(dg.tensor(x.astype(lo[x.dtype])) for x in inputs),
                           tuple(dg.tensor(v.astype(lo[v.dtype])) for v in tangents))
    for o, t in zip(out, t32):
        assert t.dtype == o.dtype and o.dtype in (dg.float32, dg.complex64), name
    _assert_close([_np(t) for t in t32], [_np(t).astype(_np(s).dtype) for t, s in zip(t64, t32)], 1e-3, 1e-4, name)
