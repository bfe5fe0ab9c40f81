"""torch.linalg's eig, LU and LDL families and the rest of the factorisations and solvers beyond test_ops_linalg
(python/dyngrad/_api/ops/linalg.py, the numpy code in _api/host/linalg.py): eig/eigvals, the LU family, solve_ex,
matrix_exp, householder_product/orgqr, the LDL family, tensorinv, tensorsolve, vander. One table of cases, each run
on both engines: the forward against torch 2.13, the gradients against torch's and by gradcheck in float64. Then
the integer outputs (pivots, info), the errors (torch's exception types), out= and the missing complex dtype.
"""
import warnings

import numpy as np
import pytest

from helpers import builtin_base, quiet

torch = pytest.importorskip("torch")


def _rng(seed):
    return np.random.default_rng(seed)


def wc(*shape, seed=0):
    """Well-conditioned square matrices: normal entries plus n on the diagonal."""
    n = shape[-1]
    return _rng(seed).standard_normal(shape) + n * np.eye(n)


def normal(*shape, seed=1):
    return _rng(seed).standard_normal(shape)


def real_spectrum(*shape, seed=2):
    """Non-symmetric matrices with well-separated real eigenvalues: S diag(1..n) S^-1."""
    n = shape[-1]
    s = wc(*shape, seed=seed)
    d = np.diag(np.arange(1.0, n + 1) * 1.5)
    return s @ d @ np.linalg.inv(s)


def sym(*shape, seed=3):
    a = normal(*shape, seed=seed)
    return a + np.swapaxes(a, -1, -2)


def lower(*shape, seed=6):
    """Cholesky-like factors: lower triangular with a positive diagonal well away from zero."""
    n = shape[-1]
    return np.tril(normal(*shape, seed=seed)) + n * np.eye(n)


def upper(*shape, seed=8):
    return np.swapaxes(lower(*shape, seed=seed), -1, -2).copy()


def sign_fixed(V):
    """Eigenvectors with the sign that makes each column's largest entry positive (a gauge both sides share)."""
    idx = np.argmax(np.abs(V), axis=-2)[..., None, :]
    return V * np.sign(np.take_along_axis(V, idx, axis=-2))


def as_real(t):
    """torch's complex outputs of eig as real arrays (their imaginary parts are zero on these inputs)."""
    if t.is_complex():
        assert torch.all(t.imag == 0)
        return t.real
    return t


# (id, fn(m, *tensors) -> tensor or tuple, input arrays, differentiable input positions)
CASES = [
    ("lu_square", lambda m, A: tuple(m.linalg.lu(A)), [wc(3, 3)], (0,)),
    ("lu_batch", lambda m, A: tuple(m.linalg.lu(A)), [normal(2, 4, 4)], (0,)),
    ("lu_wide", lambda m, A: tuple(m.linalg.lu(A)), [normal(3, 5)], (0,)),
    ("lu_tall", lambda m, A: tuple(m.linalg.lu(A)), [normal(2, 5, 3)], (0,)),
    ("lu_factor", lambda m, A: m.linalg.lu_factor(A).LU, [normal(2, 3, 3)], (0,)),
    ("lu_factor_tall", lambda m, A: m.linalg.lu_factor(A).LU, [normal(4, 2)], (0,)),
    ("lu_factor_ex", lambda m, A: m.linalg.lu_factor_ex(A).LU, [normal(2, 4)], (0,)),
    ("lu_unpack", lambda m, A: tuple(m.lu_unpack(*m.linalg.lu_factor(A)))[1:], [normal(2, 4, 3)], (0,)),
    ("lu_solve", lambda m, A, B: m.linalg.lu_solve(*m.linalg.lu_factor(A), B), [wc(2, 3, 3), normal(2, 3, 2)],
     (0, 1)),
    ("lu_solve_adjoint", lambda m, A, B: m.linalg.lu_solve(*m.linalg.lu_factor(A), B, adjoint=True),
     [wc(3, 3), normal(3, 2)], (0, 1)),
    ("lu_solve_right", lambda m, A, B: m.linalg.lu_solve(*m.linalg.lu_factor(A), B, left=False),
     [wc(3, 3), normal(2, 2, 3)], (0, 1)),
    ("lu_solve_right_adjoint", lambda m, A, B: m.linalg.lu_solve(*m.linalg.lu_factor(A), B, left=False,
                                                                 adjoint=True), [wc(3, 3), normal(2, 3)], (0, 1)),
    ("lu_solve_packed", lambda m, LU, B: m.linalg.lu_solve(LU, m.linalg.lu_factor(LU.detach()).pivots, B),
     [wc(3, 3), normal(3, 1)], (0, 1)),
    ("torch_lu", quiet(lambda m, A: m.lu(A)[0]), [normal(3, 3)], (0,)),
    ("torch_lu_solve", quiet(lambda m, A, b: m.lu_solve(b, *m.lu(A))), [wc(3, 3), normal(3, 2)], (0, 1)),
    ("solve_ex", lambda m, A, B: m.linalg.solve_ex(A, B).result, [wc(2, 3, 3), normal(2, 3)], (0, 1)),
    ("solve_ex_right", lambda m, A, B: m.linalg.solve_ex(A, B, left=False).result, [wc(3, 3), normal(2, 3)],
     (0, 1)),
    ("matrix_exp", lambda m, A: m.linalg.matrix_exp(A), [normal(2, 3, 3)], (0,)),
    ("matrix_exp_scaled", lambda m, A: m.matrix_exp(A), [4 * normal(3, 3, seed=5)], (0,)),
    ("matrix_exp_method", lambda m, A: A.matrix_exp(), [normal(1, 2, 2)], (0,)),
    ("householder_product", lambda m, A, tau: m.linalg.householder_product(A, tau), [normal(2, 5, 3), normal(2, 2)],
     (0, 1)),
    ("orgqr", lambda m, A, tau: m.orgqr(A, tau), [normal(4, 4), normal(4)], (0, 1)),
    ("ormqr", lambda m, A, tau, C: m.ormqr(A, tau, C), [normal(2, 5, 3), normal(2, 3), normal(2, 5, 2)], (0, 1, 2)),
    ("ormqr_transpose", lambda m, A, tau, C: m.ormqr(A, tau, C, transpose=True), [normal(4, 2), normal(2),
                                                                                   normal(4, 3)], (0, 1, 2)),
    ("ormqr_wider_other", lambda m, A, tau, C: m.ormqr(A, tau, C), [normal(5, 3), normal(3), normal(5, 4)], (0, 1, 2)),
    ("ormqr_right", lambda m, A, tau, C: A.ormqr(tau, C, left=False),
     [normal(4, 3), normal(3), normal(2, 4)], (0, 1, 2)),
    ("ormqr_right_transpose", lambda m, A, tau, C: m.ormqr(A, tau, C, False, True), [normal(4, 4), normal(4),
                                                                                     normal(3, 4)], (0, 1, 2)),
    ("cholesky_solve", lambda m, B, L: m.cholesky_solve(B, L), [normal(2, 3, 2), lower(3, 3)], (0, 1)),
    ("cholesky_solve_upper", lambda m, B, L: B.cholesky_solve(L, upper=True), [normal(3, 1), upper(2, 3, 3)],
     (0, 1)),
    ("cholesky_inverse", lambda m, L: m.cholesky_inverse(L), [lower(2, 3, 3)], (0,)),
    ("cholesky_inverse_upper", lambda m, L: L.cholesky_inverse(upper=True), [upper(3, 3)], (0,)),
    ("triangular_solve", quiet(lambda m, b, A: tuple(m.triangular_solve(b, A))), [normal(2, 3, 2), wc(2, 3, 3)],
     (0, 1)),
    ("triangular_solve_options", quiet(lambda m, b, A: m.triangular_solve(b, A, False, True, True).solution),
     [normal(3, 2), wc(3, 3)], (0, 1)),
    ("eig", lambda m, A: tuple(m.linalg.eig(A)), [real_spectrum(3, 3)], (0,)),
    ("eig_batch", lambda m, A: tuple(m.linalg.eig(A)), [real_spectrum(2, 4, 4)], (0,)),
    ("eigvals", lambda m, A: m.linalg.eigvals(A), [real_spectrum(2, 3, 3, seed=7)], (0,)),
    ("tensorinv", lambda m, A: m.linalg.tensorinv(A, ind=1), [wc(4, 4).reshape(4, 2, 2)], (0,)),
    ("tensorinv_2", lambda m, A: m.linalg.tensorinv(A), [wc(6, 6).reshape(2, 3, 6)], (0,)),
    ("tensorsolve", lambda m, A, B: m.linalg.tensorsolve(A, B), [wc(6, 6).reshape(2, 3, 6), normal(2, 3)],
     (0, 1)),
    ("tensorsolve_dims", lambda m, A, B: m.linalg.tensorsolve(A, B, dims=(0,)),
     [wc(6, 6).reshape(2, 3, 6).transpose(2, 0, 1).copy(), normal(2, 3)], (0, 1)),
    ("linalg_vander", lambda m, x: m.linalg.vander(x), [normal(2, 3)], (0,)),
    ("linalg_vander_N", lambda m, x: m.linalg.vander(x, N=5), [normal(4)], (0,)),
    ("vander", lambda m, x: m.vander(x), [normal(4)], (0,)),
    ("vander_increasing", lambda m, x: m.vander(x, N=3, increasing=True), [normal(3)], (0,)),
]


# torch.vander's own backward fails (it modifies a tensor it saved): those rows are checked by gradcheck alone
TORCH_CANNOT = {"vander", "vander_increasing"}


def _run(m, case, arrays, requires_grad=False):
    _, fn, _, _ = case
    if m is torch:
        tensors = [torch.tensor(a, requires_grad=requires_grad) for a in arrays]
    else:
        tensors = [m.tensor(a, dtype=m.float64, requires_grad=requires_grad) for a in arrays]
    out = fn(m, *tensors)
    return tensors, out if isinstance(out, tuple) else (out,)


def _values(outs, eig):
    vals = [as_real(o).detach().numpy() if isinstance(o, torch.Tensor) else o.detach().numpy() for o in outs]
    if eig and len(vals) == 2:
        vals[1] = sign_fixed(vals[1])
    return vals


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_forward_matches_torch(dg, case):
    arrays = case[2]
    _, mine = _run(dg, case, arrays)
    _, theirs = _run(torch, case, arrays)
    eig = case[0].startswith("eig")
    for a, b in zip(_values(mine, eig), _values(theirs, eig)):
        assert a.shape == b.shape
        np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-10)


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_gradients_match_torch_and_gradcheck(dg, case):
    name, fn, arrays, diff = case
    weights = None
    results = []
    for m in (dg,) if name in TORCH_CANNOT else (dg, torch):
        tensors, outs = _run(m, case, arrays, requires_grad=True)
        if weights is None:
            weights = [_rng(11 + i).standard_normal(tuple(o.shape)) for i, o in enumerate(outs)]
        if name.startswith("eig") and len(outs) == 2:       # the sign gauge of the vectors, from the forward
            signs = np.sign(np.take_along_axis(_values(outs, False)[1],
                                               np.argmax(np.abs(_values(outs, False)[1]), axis=-2)[..., None, :],
                                               axis=-2))
            weights = [weights[0], _rng(12).standard_normal(tuple(outs[1].shape)) * signs]
        loss = 0
        for o, w in zip(outs, weights):
            o = as_real(o) if m is torch else (o.real if o.dtype.is_complex else o)   # eig's: complex
            loss = loss + (o * (torch.tensor(w) if m is torch else dg.tensor(w, dtype=dg.float64))).sum()
        loss.backward()
        results.append([tensors[i].grad.numpy() for i in diff])
    for a, b in zip(*results[:2]) if len(results) == 2 else ():
        np.testing.assert_allclose(a, b, rtol=1e-7, atol=1e-9)
    inputs = [dg.tensor(a, dtype=dg.float64, requires_grad=(i in diff)) for i, a in enumerate(arrays)]
    fn = GRADCHECK_VIA.get(name, fn)
    assert dg.autograd.gradcheck(lambda *t: fn(dg, *t), tuple(inputs))


# The Cholesky solvers read one triangle of the factor but, as torch's, differentiate the formula A = L L^T in all
# of L (the gradient compared with torch above); finite differences see only the triangle read, so gradcheck runs
# through tril/triu.
GRADCHECK_VIA = {
    "cholesky_solve": lambda m, B, L: m.cholesky_solve(B, m.tril(L)),
    "cholesky_solve_upper": lambda m, B, L: m.cholesky_solve(B, m.triu(L), upper=True),
    "cholesky_inverse": lambda m, L: m.cholesky_inverse(m.tril(L)),
    "cholesky_inverse_upper": lambda m, L: m.cholesky_inverse(m.triu(L), upper=True),
    # eig's complex eigenvectors have a free phase each: gradcheck (which probes every direction of a complex
    # output) needs a loss blind to it, |V|^2 (Note [Phases of complex eigenvectors])
    "eig": lambda m, A: (m.linalg.eig(A)[0], m.linalg.eig(A)[1].abs() ** 2),
    "eig_batch": lambda m, A: (m.linalg.eig(A)[0], m.linalg.eig(A)[1].abs() ** 2),
}


@pytest.mark.parametrize("name,fn,arrays", [
    ("matrix_exp", lambda m, A: m.linalg.matrix_exp(A), [normal(2, 2)]),
    ("lu", lambda m, A: m.linalg.lu(A).U, [wc(3, 3)]),
    ("eig", lambda m, A: m.linalg.eig(A).eigenvalues, [real_spectrum(3, 3)]),
    ("cholesky_solve", lambda m, B, L: m.cholesky_solve(B, m.tril(L)), [normal(3, 2), lower(3, 3)]),
])
def test_second_derivatives(dg, name, fn, arrays):
    inputs = tuple(dg.tensor(a, dtype=dg.float64, requires_grad=True) for a in arrays)
    assert dg.autograd.gradgradcheck(lambda *t: fn(dg, *t), inputs)


SINGULAR = np.array([[1.0, 2.0], [2.0, 4.0]])


def test_pivots_and_info_match_torch(dg):
    A = np.stack([wc(2, 2), SINGULAR, np.zeros((2, 2))])
    mine, theirs = dg.linalg.lu_factor_ex(dg.tensor(A)), torch.linalg.lu_factor_ex(torch.tensor(A))
    assert mine.pivots.dtype == dg.int32 and mine.info.dtype == dg.int32
    np.testing.assert_array_equal(mine.pivots.numpy(), theirs.pivots.numpy())
    np.testing.assert_array_equal(mine.info.numpy(), theirs.info.numpy())
    np.testing.assert_allclose(mine.LU.numpy(), theirs.LU.numpy())
    B = np.ones((3, 2))
    mine, theirs = dg.linalg.solve_ex(dg.tensor(A), dg.tensor(B)), torch.linalg.solve_ex(torch.tensor(A),
                                                                                       torch.tensor(B))
    np.testing.assert_array_equal(mine.info.numpy(), theirs.info.numpy())
    np.testing.assert_allclose(mine.result.numpy()[0], theirs.result.numpy()[0])
    np.testing.assert_array_equal(np.isfinite(mine.result.numpy()), np.isfinite(theirs.result.numpy()))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        mine, theirs = dg.lu(dg.tensor(SINGULAR), get_infos=True), torch.lu(torch.tensor(SINGULAR), get_infos=True)
    assert mine.info.item() == theirs.info.item() == 2


@pytest.mark.parametrize("A", [sym(3, 3), sym(2, 5, 5, seed=4), np.array([[1.0, 2, 3], [2, -1, 0], [3, 0, 4]]),
                               np.array([[0.0, 2, 3], [2, 0, 1], [3, 1, 0]]), np.array([[0.0, 1], [1, 0]])],
                         ids=["sym3", "sym5_batch", "pivot_1x1_swap", "pivot_2x2", "zero_diagonal"])
def test_ldl_matches_torch(dg, A):
    mine, theirs = dg.linalg.ldl_factor(dg.tensor(A)), torch.linalg.ldl_factor(torch.tensor(A))
    np.testing.assert_array_equal(mine.pivots.numpy(), theirs.pivots.numpy())
    np.testing.assert_allclose(mine.LD.numpy(), theirs.LD.numpy(), rtol=1e-12, atol=1e-12)
    B = normal(*A.shape[:-1], 2)
    X = dg.linalg.ldl_solve(mine.LD, mine.pivots, dg.tensor(B))
    np.testing.assert_allclose(X.numpy(), torch.linalg.ldl_solve(theirs.LD, theirs.pivots, torch.tensor(B)).numpy(),
                               rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(A @ X.numpy(), B, atol=1e-10)


def test_ldl_singular_and_no_derivative(dg):
    ex = dg.linalg.ldl_factor_ex(dg.zeros(2, 2))
    theirs = torch.linalg.ldl_factor_ex(torch.zeros(2, 2))
    assert ex.info.item() == theirs.info.item() == 1
    np.testing.assert_array_equal(ex.pivots.numpy(), theirs.pivots.numpy())
    with pytest.raises(dg.linalg.LinAlgError):
        dg.linalg.ldl_factor(dg.zeros(2, 2))
    A = dg.tensor(sym(3, 3), dtype=dg.float64, requires_grad=True)
    LD, piv = dg.linalg.ldl_factor(A)
    with pytest.raises(RuntimeError, match="derivative"):          # as torch: no derivative for ldl_factor
        LD.sum().backward()
    X = dg.linalg.ldl_solve(LD.detach(), piv, dg.ones(3, 1, dtype=dg.float64, requires_grad=True))
    with pytest.raises(RuntimeError, match="derivative"):
        X.sum().backward()


def test_geqrf_matches_torch_and_has_no_derivative(dg):
    A = normal(2, 5, 3)
    mine, theirs = dg.geqrf(dg.tensor(A)), torch.geqrf(torch.tensor(A))
    np.testing.assert_allclose(mine.a.numpy(), theirs.a.numpy(), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(mine.tau.numpy(), theirs.tau.numpy(), rtol=1e-12, atol=1e-12)
    Q = dg.linalg.householder_product(mine.a, mine.tau)          # geqrf feeds orgqr: Q R = A
    R = np.triu(mine.a.numpy()[..., :3, :])
    np.testing.assert_allclose(Q.numpy() @ R, A, atol=1e-12)
    with pytest.raises(NotImplementedError, match="derivative"):
        dg.geqrf(dg.tensor(A, requires_grad=True)).a.sum().backward()


def test_eig_returns_complex_tensors(dg):
    """Note [eig returns complex tensors]: complex results whatever the spectrum, as torch's."""
    rotation = dg.tensor([[0.0, -1.0], [1.0, 0.0]])
    w = dg.linalg.eigvals(rotation)
    assert w.dtype == dg.complex64
    np.testing.assert_allclose(np.sort_complex(w.numpy()), [-1j, 1j], atol=1e-6)
    w = dg.linalg.eigvals(dg.tensor(real_spectrum(3, 3), dtype=dg.float32))      # a real spectrum: still complex
    assert w.dtype == dg.complex64
    np.testing.assert_allclose(np.sort(w.numpy().real), [1.5, 3.0, 4.5], rtol=1e-5)
    np.testing.assert_array_equal(w.numpy().imag, 0)


ERRORS = [
    ("lu_factor_singular", lambda m: m.linalg.lu_factor(m.tensor(SINGULAR))),
    ("lu_factor_ex_check", lambda m: m.linalg.lu_factor_ex(m.tensor(SINGULAR), check_errors=True)),
    ("lu_no_pivot", lambda m: m.linalg.lu(m.eye(2), pivot=False)),
    ("lu_factor_int", lambda m: m.linalg.lu_factor(m.tensor([[1, 2], [3, 4]]))),
    ("lu_factor_1d", lambda m: m.linalg.lu_factor(m.tensor([1.0, 2.0]))),
    ("lu_solve_vector_B", lambda m: m.linalg.lu_solve(*m.linalg.lu_factor(m.eye(2)), m.ones(2))),
    ("lu_unpack_int64_pivots", lambda m: m.lu_unpack(m.eye(2), m.tensor([1, 2]))),
    ("lu_unpack_pivot_range", lambda m: m.lu_unpack(m.eye(2), m.tensor([5, 1], dtype=m.int32))),
    ("solve_ex_check", lambda m: m.linalg.solve_ex(m.tensor(SINGULAR), m.ones(2), check_errors=True)),
    ("matrix_exp_int", lambda m: m.linalg.matrix_exp(m.tensor([[1, 2], [3, 4]]))),
    ("matrix_exp_rect", lambda m: m.linalg.matrix_exp(m.zeros(2, 3))),
    ("householder_wide", lambda m: m.linalg.householder_product(m.zeros(3, 4), m.zeros(2))),
    ("householder_tau_long", lambda m: m.linalg.householder_product(m.zeros(4, 3), m.zeros(4))),
    ("householder_tau_batch", lambda m: m.linalg.householder_product(m.zeros(2, 4, 3), m.zeros(3))),
    ("tensorinv_ind", lambda m: m.linalg.tensorinv(m.zeros(4, 2, 2), ind=0)),
    ("tensorinv_shape", lambda m: m.linalg.tensorinv(m.zeros(4, 2, 3), ind=1)),
    ("vander_N", lambda m: m.linalg.vander(m.tensor([1.0, 2.0]), N=1)),
    ("vander_bool", lambda m: m.linalg.vander(m.tensor([True, False]))),
    ("torch_vander_2d", lambda m: m.vander(m.zeros(2, 2))),
    ("torch_vander_negative", lambda m: m.vander(m.zeros(2), N=-1)),
    ("eig_int", lambda m: m.linalg.eig(m.tensor([[1, 2], [3, 4]]))),
    ("eig_nan", lambda m: m.linalg.eig(m.full((2, 2), float("nan")))),
    ("geqrf_1d", lambda m: m.geqrf(m.ones(3))),
    ("cholesky_solve_vector", lambda m: m.cholesky_solve(m.ones(2), m.eye(2))),
    ("triangular_solve_vector", lambda m: m.triangular_solve(m.ones(2), m.eye(2))),
    ("ormqr_shapes", lambda m: m.ormqr(m.ones(4, 2), m.ones(2), m.ones(3, 3))),
    ("lu_solve_not_tensor", lambda m: m.linalg.lu_solve(*m.linalg.lu_factor(m.eye(2)), [[1.0], [1.0]])),
]


@pytest.mark.parametrize("name,call", ERRORS, ids=[e[0] for e in ERRORS])
def test_errors_have_torchs_types(dg, name, call):
    with pytest.raises(Exception) as theirs:
        call(torch)
    with pytest.raises(Exception) as mine:
        call(dg)
    assert isinstance(mine.value, builtin_base(type(theirs.value))), (type(mine.value), type(theirs.value))
    assert str(mine.value)


def test_out_and_shapes(dg):
    A = dg.tensor(wc(3, 3), dtype=dg.float64)
    LU, piv = dg.empty(0, dtype=dg.float64), dg.empty(0, dtype=dg.int32)
    res = dg.linalg.lu_factor(A, out=(LU, piv))
    assert res.LU is LU and res.pivots is piv
    np.testing.assert_allclose(LU.numpy(), torch.linalg.lu_factor(torch.tensor(wc(3, 3))).LU.numpy())
    assert tuple(dg.vander(dg.tensor([1.0, 2.0, 3.0]), N=0).shape) == (3, 0)
    assert dg.vander(dg.tensor([True, False])).dtype == dg.int64
    v = dg.vander(dg.tensor([1.0, 2.0, 3.0], dtype=dg.bfloat16))
    assert v.dtype == dg.bfloat16 and v.float().tolist() == [[1, 1, 1], [4, 2, 1], [9, 3, 1]]
    assert dg.linalg.vander(dg.tensor([1, 2, 3]), N=4).dtype == dg.int64
    np.testing.assert_array_equal(dg.linalg.vander(dg.tensor([1, 2, 3]), N=4).numpy(),
                                  torch.linalg.vander(torch.tensor([1, 2, 3]), N=4).numpy())
    assert tuple(dg.linalg.matrix_exp(dg.zeros(0, 0)).shape) == (0, 0)
    P, L, U = dg.lu_unpack(*dg.linalg.lu_factor(A), unpack_data=False)
    assert tuple(L.shape) == (0,) and tuple(P.shape) == (3, 3)
    assert dg.lu_unpack(*dg.linalg.lu_factor(A), unpack_pivots=False).P.numel() == 0
    with pytest.warns(UserWarning, match="deprecated"):
        dg.lu(A)


EMPTY = [
    ("lu_0x0", lambda m: tuple(m.linalg.lu(m.zeros(0, 0)))),
    ("lu_no_rows", lambda m: tuple(m.linalg.lu(m.zeros(2, 0, 3)))),
    ("lu_factor_no_columns", lambda m: tuple(m.linalg.lu_factor(m.zeros(3, 0)))),
    ("lu_factor_ex_0x0", lambda m: tuple(m.linalg.lu_factor_ex(m.zeros(0, 0)))),
    ("ldl_0x0", lambda m: tuple(m.linalg.ldl_factor(m.zeros(0, 0)))),
    ("householder_no_columns", lambda m: m.linalg.householder_product(m.zeros(3, 0), m.zeros(0))),
    ("householder_no_tau", lambda m: m.linalg.householder_product(m.zeros(3, 2), m.zeros(0))),
    ("matrix_exp_batch_0x0", lambda m: m.linalg.matrix_exp(m.zeros(2, 0, 0))),
    ("solve_ex_batch", lambda m: tuple(m.linalg.solve_ex(m.eye(3) + m.zeros(2, 3, 3), m.ones(3)))),
    ("lu_solve_broadcast", lambda m: m.linalg.lu_solve(*m.linalg.lu_factor(m.eye(3)), m.ones(2, 3, 1))),
]


@pytest.mark.parametrize("name,call", EMPTY, ids=[e[0] for e in EMPTY])
def test_empty_and_broadcast_shapes_as_torch(dg, name, call):
    mine, theirs = call(dg), call(torch)
    mine, theirs = (mine if isinstance(mine, tuple) else (mine,)), (theirs if isinstance(theirs, tuple) else (theirs,))
    assert [tuple(t.shape) for t in mine] == [tuple(t.shape) for t in theirs]
    assert [str(t.dtype).split(".")[-1] for t in mine] == [str(t.dtype).split(".")[-1] for t in theirs]
    for a, b in zip(mine, theirs):
        np.testing.assert_allclose(a.numpy(), b.numpy())


HALF_CALLS = [
    ("lu", lambda m, A: m.linalg.lu(A)), ("lu_factor", lambda m, A: m.linalg.lu_factor(A)),
    ("eig", lambda m, A: m.linalg.eig(A)), ("householder_product", lambda m, A: m.linalg.householder_product(A, A[0])),
    ("ldl_factor", lambda m, A: m.linalg.ldl_factor(A)), ("solve_ex", lambda m, A: m.linalg.solve_ex(A, A)),
    ("geqrf", lambda m, A: m.geqrf(A)), ("ormqr", lambda m, A: m.ormqr(A, A[0], A)),
    ("cholesky_solve", lambda m, A: m.cholesky_solve(A, A)), ("cholesky_inverse", lambda m, A: m.cholesky_inverse(A)),
    ("triangular_solve", quiet(lambda m, A: m.triangular_solve(A, A))),
    ("lu_solve", lambda m, A: m.linalg.lu_solve(A, m.tensor([1, 2, 3], dtype=m.int32), A)),
    ("vander", lambda m, A: m.linalg.vander(A[0])),
]


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_half_precision_as_torch(dg, dtype):
    """torch has no CPU kernel of these in half precision (NotImplementedError; vander: RuntimeError); matrix_exp
    computes (here through float32; torch 2.13's own float16 result overflows to inf, so the reference is float64)."""
    for name, call in HALF_CALLS:
        with pytest.raises(Exception) as theirs:
            call(torch, torch.eye(3, dtype=getattr(torch, dtype)) + 0.1)
        with pytest.raises(type(theirs.value).__mro__[1] if type(theirs.value).__module__ != "builtins"
                           else type(theirs.value)):
            call(dg, dg.eye(3, dtype=getattr(dg, dtype)) + 0.1)
    a = normal(3, 3) * 0.5
    mine = dg.linalg.matrix_exp(dg.tensor(a, dtype=getattr(dg, dtype)))
    assert mine.dtype == getattr(dg, dtype)
    theirs = torch.linalg.matrix_exp(torch.tensor(a)).numpy()
    np.testing.assert_allclose(mine.float().numpy(), theirs, rtol=2e-2, atol=2e-2)
