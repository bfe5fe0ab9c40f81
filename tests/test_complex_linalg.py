"""torch.linalg on complex matrices (python/dyngrad/_api/ops/linalg.py): the forwards against numpy (and torch where
installed), the gradients by gradcheck/gradgradcheck in complex128 (losses invariant to the eigen/singular vectors'
phases where the decomposition fixes them only up to one), against torch's, on both engines; and linalg.eig of real
matrices whose spectrum is complex.
"""
import numpy as np
import pytest

try:
    import torch
except ImportError:          # the torch comparisons skip; the rest runs
    torch = None

needs_torch = pytest.mark.skipif(torch is None, reason="torch is not installed")


def cmat(*shape, seed=0, shift=True):
    """Complex matrices, well conditioned (n on the diagonal) when shift."""
    rng = np.random.default_rng(seed)
    a = rng.standard_normal(shape) + 1j * rng.standard_normal(shape)
    if shift:
        a = a + shape[-1] * np.eye(shape[-1])
    return a


def herm_pd(*shape, seed=0):
    a = cmat(*shape, seed=seed, shift=False)
    return a @ np.conj(np.swapaxes(a, -1, -2)) + shape[-1] * np.eye(shape[-1])


def leaf(dg, a, grad=True):
    return dg.tensor(a, dtype=dg.complex128, requires_grad=grad)


def check_grads(dg, fn, *arrays, gradgrad=True):
    inputs = [leaf(dg, a) for a in arrays]
    assert dg.autograd.gradcheck(fn, inputs, eps=1e-6, atol=1e-5, rtol=1e-4)
    if gradgrad:
        assert dg.autograd.gradgradcheck(fn, inputs, eps=1e-6, atol=1e-4, rtol=1e-3)


def torch_grads(fn_dg, fn_t, dg, *arrays):
    """The gradients of the real loss sum(|out|^2 + Re(out)) on both sides, for the same inputs."""
    xs = [leaf(dg, a) for a in arrays]
    ts = [torch.tensor(a, dtype=torch.complex128, requires_grad=True) for a in arrays]

    def loss(out, m):
        outs = out if isinstance(out, (tuple, list)) else (out,)
        total = 0
        for o in outs:
            total = total + (m.abs(o) ** 2).sum() + (m.real(o) if o.dtype.is_complex else o).sum()
        return total
    loss(fn_dg(*xs), dg).backward()
    loss(fn_t(*ts), torch).backward()
    for x, t in zip(xs, ts):
        np.testing.assert_allclose(x.grad.numpy(), t.grad.resolve_conj().numpy(), rtol=1e-7, atol=1e-9)


# ---- inv, solve, det, slogdet ---------------------------------------------------------------------------------

def test_inv_solve_det_forward(dg):
    a, b = cmat(2, 3, 3), cmat(2, 3, 2, seed=1, shift=False)
    A, B = dg.tensor(a), dg.tensor(b)
    np.testing.assert_allclose(dg.linalg.inv(A).numpy(), np.linalg.inv(a), rtol=1e-12)
    np.testing.assert_allclose(dg.linalg.solve(A, B).numpy(), np.linalg.solve(a, b), rtol=1e-12)
    np.testing.assert_allclose(dg.linalg.solve(A, dg.tensor(b[..., 0])).numpy(), np.linalg.solve(a, b[..., :1])[..., 0],
                               rtol=1e-12)
    np.testing.assert_allclose(dg.linalg.det(A).numpy(), np.linalg.det(a), rtol=1e-12)
    sign, logabs = dg.linalg.slogdet(A)
    want = np.linalg.slogdet(a)
    assert sign.dtype == dg.complex128 and logabs.dtype == dg.float64
    np.testing.assert_allclose(sign.numpy(), want[0], rtol=1e-12)
    np.testing.assert_allclose(logabs.numpy(), want[1], rtol=1e-12)
    assert dg.linalg.inv(dg.tensor(a, dtype=dg.complex64)).dtype == dg.complex64
    with pytest.raises(dg.linalg.LinAlgError):
        dg.linalg.inv(dg.tensor(np.array([[1, 1j], [1j, -1]])))      # singular: det = -1 - i^2 = 0


@pytest.mark.parametrize("name", ["inv", "det", "slogdet", "solve", "solve_right", "solve_triangular"])
def test_inv_solve_det_gradcheck(dg, name):
    a, b = cmat(2, 3, 3), cmat(2, 3, 2, seed=1, shift=False)
    fns = {
        "inv": (lambda A: dg.linalg.inv(A), (a,)),
        "det": (lambda A: dg.linalg.det(A), (a,)),
        "slogdet": (lambda A: tuple(dg.linalg.slogdet(A)), (a,)),
        "solve": (lambda A, B: dg.linalg.solve(A, B), (a, b)),
        "solve_right": (lambda A, B: dg.linalg.solve(A, B, left=False), (a, np.swapaxes(b, -1, -2))),
        "solve_triangular": (lambda A, B: dg.linalg.solve_triangular(A, B, upper=True), (a, b)),
    }
    fn, arrays = fns[name]
    check_grads(dg, fn, *arrays)


def test_det_at_a_singular_matrix(dg):
    """The gradient of det where A is singular: conj(adj(A))^T, through the SVD."""
    a = cmat(3, 3, shift=False)
    a[:, 2] = a[:, 0] * (1 - 2j)
    check_grads(dg, lambda A: dg.linalg.det(A), a, gradgrad=False)


@needs_torch
def test_inv_solve_det_grads_as_torch(dg):
    a, b = cmat(2, 3, 3), cmat(2, 3, 2, seed=1, shift=False)
    L = torch.linalg
    torch_grads(lambda A: dg.linalg.inv(A), lambda A: L.inv(A), dg, a)
    torch_grads(lambda A: dg.linalg.det(A), lambda A: L.det(A), dg, a)
    torch_grads(lambda A: tuple(dg.linalg.slogdet(A)), lambda A: tuple(L.slogdet(A)), dg, a)
    torch_grads(lambda A, B: dg.linalg.solve(A, B), lambda A, B: L.solve(A, B), dg, a, b)


# ---- eig ------------------------------------------------------------------------------------------------------

def _phase_free(V):
    """A loss of eigenvectors that does not depend on their phases: |V|^2 elementwise (as V conj(V): abs's second
    derivative at complex numbers is not what this file tests)."""
    return (V * V.conj()).real


def rotation_like(n, seed=0):
    """A real matrix with complex eigenvalues (distinct): a block-rotation spectrum under a similarity."""
    rng = np.random.default_rng(seed)
    s = rng.standard_normal((n, n)) + n * np.eye(n)
    d = np.zeros((n, n))
    for k in range(0, n - 1, 2):
        d[k:k + 2, k:k + 2] = [[k + 1.0, -(k + 2.0)], [k + 2.0, k + 1.0]]
    if n % 2:
        d[-1, -1] = -3.0
    return s @ d @ np.linalg.inv(s)


def test_eig_of_real_matrix_with_complex_spectrum(dg):
    a = rotation_like(4)
    w, V = dg.linalg.eig(dg.tensor(a))
    assert w.dtype == dg.complex128 and V.dtype == dg.complex128
    np.testing.assert_allclose(np.sort_complex(w.numpy()), np.sort_complex(np.linalg.eigvals(a)), rtol=1e-10)
    np.testing.assert_allclose(a @ V.numpy(), V.numpy() * w.numpy()[None, :], atol=1e-10)
    assert dg.linalg.eigvals(dg.tensor(a, dtype=dg.float32)).dtype == dg.complex64
    # the gradient reaching the real input is real (the real part of the complex formula's), and checks out
    A = dg.tensor(a, requires_grad=True)
    assert dg.autograd.gradcheck(lambda X: dg.linalg.eigvals(X), [A])
    assert dg.autograd.gradcheck(lambda X: _phase_free(dg.linalg.eig(X)[1]), [A])
    assert dg.autograd.gradgradcheck(lambda X: dg.linalg.eigvals(X), [A])
    dg.linalg.eigvals(A).real.sum().backward()
    assert A.grad.dtype == dg.float64


def test_eig_of_complex_matrix(dg):
    a = cmat(2, 3, 3, shift=False)
    w, V = dg.linalg.eig(dg.tensor(a))
    np.testing.assert_allclose(np.einsum("...ij,...jk->...ik", a, V.numpy()), V.numpy() * w.numpy()[..., None, :],
                               atol=1e-10)
    check_grads(dg, lambda A: dg.linalg.eigvals(A), a)
    check_grads(dg, lambda A: _phase_free(dg.linalg.eig(A)[1]), a, gradgrad=False)


def test_eig_phase_dependent_loss_is_refused(dg):
    A = leaf(dg, cmat(3, 3, shift=False))
    with pytest.raises(RuntimeError, match="phase"):
        dg.linalg.eig(A)[1].real.sum().backward()


@needs_torch
def test_eig_grads_as_torch(dg):
    for a in (cmat(3, 3, shift=False), rotation_like(4).astype(complex)):
        torch_grads(lambda A: (dg.linalg.eigvals(A), _phase_free(dg.linalg.eig(A)[1])),
                    lambda A: (torch.linalg.eigvals(A), _phase_free(torch.linalg.eig(A)[1])), dg, a)
    a = rotation_like(4)                    # a real input: torch's real gradient
    X, T = dg.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)
    (dg.linalg.eigvals(X).real * dg.tensor([1.0, 2, 3, 4])).sum().backward()
    w = torch.linalg.eigvals(T)
    order = np.argsort(dg.linalg.eigvals(dg.tensor(a)).numpy())
    t_order = np.argsort(w.detach().numpy())
    weights = np.empty(4)
    weights[t_order] = np.array([1.0, 2, 3, 4])[order]      # the same weight on the same eigenvalue
    (w.real * torch.tensor(weights)).sum().backward()
    np.testing.assert_allclose(X.grad.numpy(), T.grad.numpy(), rtol=1e-8, atol=1e-10)


# ---- eigh, svd, qr, cholesky, pinv, lstsq, norms ----------------------------------------------------------------

def test_decompositions_forward(dg):
    a, h = cmat(2, 4, 3, shift=False), herm_pd(2, 3, 3)
    A, H = dg.tensor(a), dg.tensor(h)
    w, V = dg.linalg.eigh(H)
    assert w.dtype == dg.float64 and V.dtype == dg.complex128
    np.testing.assert_allclose(w.numpy(), np.linalg.eigvalsh(h), rtol=1e-12)
    np.testing.assert_allclose(dg.linalg.eigvalsh(H).numpy(), np.linalg.eigvalsh(h), rtol=1e-12)
    U, S, Vh = dg.linalg.svd(A, full_matrices=False)
    assert S.dtype == dg.float64
    np.testing.assert_allclose((U.numpy() * S.numpy()[..., None, :]) @ Vh.numpy(), a, atol=1e-12)
    np.testing.assert_allclose(dg.linalg.svdvals(A).numpy(), np.linalg.svd(a, compute_uv=False), rtol=1e-12)
    Q, R = dg.linalg.qr(A)
    np.testing.assert_allclose(Q.numpy() @ R.numpy(), a, atol=1e-12)
    L = dg.linalg.cholesky(H)
    np.testing.assert_allclose(L.numpy() @ np.conj(np.swapaxes(L.numpy(), -1, -2)), h, atol=1e-12)
    Uc = dg.linalg.cholesky(H, upper=True)
    np.testing.assert_allclose(np.conj(np.swapaxes(Uc.numpy(), -1, -2)) @ Uc.numpy(), h, atol=1e-12)
    np.testing.assert_allclose(dg.linalg.pinv(A).numpy(), np.linalg.pinv(a), atol=1e-12)
    np.testing.assert_allclose(dg.linalg.pinv(H, hermitian=True).numpy(), np.linalg.inv(h), atol=1e-12)
    b = cmat(2, 4, 2, seed=3, shift=False)
    sol = dg.linalg.lstsq(A, dg.tensor(b), driver="gelsd")
    want = np.linalg.lstsq(a[0], b[0], rcond=None)
    np.testing.assert_allclose(sol.solution.numpy()[0], want[0], atol=1e-12)
    assert sol.residuals.dtype == dg.float64 and sol.singular_values.dtype == dg.float64
    np.testing.assert_allclose(sol.residuals.numpy()[0], want[1], rtol=1e-10)
    x = cmat(5, seed=4, shift=False)
    for ord in (2, 1, 3, 0, float("inf"), -float("inf")):
        got = dg.linalg.vector_norm(dg.tensor(x), ord)
        assert got.dtype == dg.float64
        np.testing.assert_allclose(got.numpy(), np.linalg.norm(x, ord), rtol=1e-12)
    for ord in ("fro", "nuc", 2, -2, 1, -1, float("inf")):
        np.testing.assert_allclose(dg.linalg.matrix_norm(A, ord).numpy(),
                                   np.linalg.norm(a, ord, axis=(-2, -1)), rtol=1e-12)
    assert int(dg.linalg.matrix_rank(A)[0]) == 3
    np.testing.assert_allclose(dg.linalg.cond(A[0] if False else dg.tensor(a[0][:3])).numpy(),
                               np.linalg.cond(a[0][:3]), rtol=1e-10)


def _herm(dg, X):
    """A Hermitian positive-definite function of any matrix (gradcheck perturbs all its entries)."""
    return dg.matmul(X, X.mH) + dg.eye(X.shape[-1], dtype=X.dtype) * X.shape[-1]


DECOMPOSITIONS = {
    "eigvalsh": (lambda dg, X: dg.linalg.eigvalsh(_herm(dg, X)), (3, 3)),
    "eigh": (lambda dg, X: (dg.linalg.eigh(_herm(dg, X))[0], _phase_free(dg.linalg.eigh(_herm(dg, X))[1])), (3, 3)),
    "svdvals": (lambda dg, X: dg.linalg.svdvals(X), (4, 3)),
    "svd_UVh": (lambda dg, X: (lambda r: (r.S, dg.matmul(r.U, r.Vh), _phase_free(r.U)))(
        dg.linalg.svd(X, full_matrices=False)), (4, 3)),
    "svd_wide": (lambda dg, X: (lambda r: (r.S, _phase_free(r.Vh)))(dg.linalg.svd(X, full_matrices=False)), (3, 4)),
    "qr": (lambda dg, X: tuple(dg.linalg.qr(X)), (4, 3)),
    "qr_wide": (lambda dg, X: tuple(dg.linalg.qr(X)), (3, 4)),
    "cholesky": (lambda dg, X: dg.linalg.cholesky(_herm(dg, X)), (3, 3)),
    "cholesky_upper": (lambda dg, X: dg.linalg.cholesky(_herm(dg, X), upper=True), (3, 3)),
    "cholesky_ex_upper": (lambda dg, X: dg.linalg.cholesky_ex(_herm(dg, X), upper=True).L, (3, 3)),
    "pinv": (lambda dg, X: dg.linalg.pinv(X), (4, 3)),
    "pinv_hermitian": (lambda dg, X: dg.linalg.pinv(_herm(dg, X), hermitian=True), (3, 3)),
    "lstsq": (lambda dg, X: dg.linalg.lstsq(X, dg.matmul(X, dg.ones(3, 2, dtype=X.dtype)) + 1).solution, (4, 3)),
    "vector_norm": (lambda dg, X: dg.linalg.vector_norm(X), (4, 3)),
    "vector_norm_3": (lambda dg, X: dg.linalg.vector_norm(X, 3, dim=-1), (4, 3)),
    "matrix_norm_nuc": (lambda dg, X: dg.linalg.matrix_norm(X, "nuc"), (4, 3)),
    "matrix_norm_2": (lambda dg, X: dg.linalg.matrix_norm(X, 2), (4, 3)),
    "matrix_norm_1": (lambda dg, X: dg.linalg.matrix_norm(X, 1), (4, 3)),
}


@pytest.mark.parametrize("name", list(DECOMPOSITIONS))
def test_decompositions_gradcheck(dg, name):
    fn, shape = DECOMPOSITIONS[name]
    # (vector_norm_3 and matrix_norm_1 reach abs's second derivative: Note [Differentiable sgn of abs])
    check_grads(dg, lambda X: fn(dg, X), cmat(2, *shape, seed=5, shift=False), gradgrad=True)


@needs_torch
@pytest.mark.parametrize("name", list(DECOMPOSITIONS))
def test_decompositions_grads_as_torch(dg, name):
    fn, shape = DECOMPOSITIONS[name]
    torch_grads(lambda X: fn(dg, X), lambda X: fn(torch, X), dg, cmat(2, *shape, seed=5, shift=False))


def test_torch_svd_returns_v_not_vh(dg):
    """torch.svd's V is linalg.svd's Vh conjugate-transposed (input = U diag(S) V^H), not merely transposed."""
    a = cmat(2, 4, 3, seed=2, shift=False)
    for some in (True, False):
        U, S, V = dg.svd(dg.tensor(a), some=some)
        k = S.shape[-1]
        rebuilt = (U.numpy()[..., :k] * S.numpy()[..., None, :]) @ np.conj(np.swapaxes(V.numpy()[..., :k], -1, -2))
        np.testing.assert_allclose(rebuilt, a, atol=1e-12)
    check_grads(dg, lambda X: (lambda r: (r.S, dg.matmul(r.U * r.S.unsqueeze(-2).to(r.U.dtype), r.V.mH)))(
        dg.svd(X)), a)
    if torch is not None:
        fn = lambda m, X: (lambda r: (r.S, m.matmul(r.U, r.V.mH)))(m.svd(X))      # noqa: E731
        torch_grads(lambda X: fn(dg, X), lambda X: fn(torch, X), dg, a)


def test_svd_phase_dependent_loss_is_refused(dg):
    A = leaf(dg, cmat(3, 3, shift=False))
    with pytest.raises(RuntimeError, match="phase"):
        dg.linalg.svd(A)[0].real.sum().backward()
    with pytest.raises(RuntimeError, match="phase"):
        dg.linalg.eigh(_herm(dg, A))[1].real.sum().backward()


def test_matrix_exp(dg):
    a = cmat(2, 3, 3, shift=False) * 0.7
    w, v = np.linalg.eig(a)             # exp(A) = V exp(W) V^-1 (distinct eigenvalues)
    want = np.einsum("...ij,...j,...jk->...ik", v, np.exp(w), np.linalg.inv(v))
    np.testing.assert_allclose(dg.linalg.matrix_exp(dg.tensor(a)).numpy(), want, rtol=1e-10, atol=1e-12)
    check_grads(dg, lambda A: dg.linalg.matrix_exp(A), a)
    if torch is not None:
        torch_grads(lambda A: dg.linalg.matrix_exp(A), lambda A: torch.linalg.matrix_exp(A), dg, a)


def test_complex64(dg):
    a = cmat(3, 3)
    A = dg.tensor(a, dtype=dg.complex64)
    for fn, want in ((dg.linalg.inv, np.linalg.inv(a)), (dg.linalg.det, np.linalg.det(a)),
                     (dg.linalg.eigvals, None), (dg.linalg.svdvals, np.linalg.svd(a, compute_uv=False))):
        got = fn(A)
        assert got.dtype == (dg.float32 if fn is dg.linalg.svdvals else dg.complex64)
        if want is not None:
            np.testing.assert_allclose(got.numpy(), want, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("hermitian", [False, True])
def test_ldl_family(dg, hermitian):
    """linalg.ldl_factor(_ex) and ldl_solve of complex matrices: complex symmetric A = P L D L^T P^T (zsytrf), or
    with hermitian A = P L D L^H P^T (zhetrf: the diagonal's real part read, D's diagonal real); pivots chosen by
    CABS1 magnitudes as LAPACK's, so the same as torch's, 2x2 blocks included."""
    rng = np.random.default_rng(13)
    for n, scale in ((5, None), (6, [1e-3, 1, 1e-3, 2, 1e-4, 1])):
        a = rng.standard_normal((2, n, n)) + 1j * rng.standard_normal((2, n, n))
        if scale is not None:                                    # small diagonals: forces 2x2 pivots
            a = a * np.asarray(scale)
        M = a + (np.conj(np.swapaxes(a, -1, -2)) if hermitian else np.swapaxes(a, -1, -2))
        if scale is not None:
            M[..., np.arange(n), np.arange(n)] *= 1e-3
        if hermitian:
            M = M + 1j * np.diag(np.arange(n))                   # an imaginary diagonal hetrf does not read
        LD, piv, info = dg.linalg.ldl_factor_ex(dg.tensor(M), hermitian=hermitian)
        assert LD.dtype == dg.complex128 and not np.any(info.numpy())
        if hermitian:
            assert not np.any(LD.numpy()[..., np.arange(n), np.arange(n)].imag)
        b = rng.standard_normal((2, n, 3)) + 1j * rng.standard_normal((2, n, 3))
        X = dg.linalg.ldl_solve(LD, piv, dg.tensor(b), hermitian=hermitian).numpy()
        read = np.tril(M) + (np.conj(np.swapaxes(np.tril(M, -1), -1, -2)) if hermitian else
                             np.swapaxes(np.tril(M, -1), -1, -2))
        if hermitian:
            read[..., np.arange(n), np.arange(n)] = read[..., np.arange(n), np.arange(n)].real
        np.testing.assert_allclose(read @ X, b, atol=1e-10)
        LD2, piv2 = dg.linalg.ldl_factor(dg.tensor(M), hermitian=hermitian)
        np.testing.assert_array_equal(LD2.numpy(), LD.numpy())
        if torch is not None:
            tLD, tpiv, _ = torch.linalg.ldl_factor_ex(torch.tensor(M), hermitian=hermitian)
            np.testing.assert_array_equal(piv.numpy(), tpiv.numpy())
            if scale is not None:
                assert (tpiv.numpy() < 0).any()                  # the 2x2 case is exercised
            np.testing.assert_allclose(LD.numpy(), tLD.numpy(), rtol=1e-10, atol=1e-12)
            tX = torch.linalg.ldl_solve(tLD, tpiv, torch.tensor(b), hermitian=hermitian).numpy()
            np.testing.assert_allclose(X, tX, rtol=1e-9, atol=1e-11)
    with pytest.raises(RuntimeError, match="derivative"):        # no derivative, as torch
        LD, _ = dg.linalg.ldl_factor(leaf(dg, M), hermitian=hermitian)
        LD.abs().sum().backward()


def test_logdet_and_cholesky_ex(dg):
    a = cmat(2, 3, 3)
    np.testing.assert_allclose(dg.logdet(dg.tensor(a)).numpy(), np.log(np.linalg.det(a)), rtol=1e-12)
    check_grads(dg, lambda A: dg.logdet(A), a)
    if torch is not None:
        torch_grads(lambda A: dg.logdet(A), lambda A: torch.logdet(A), dg, a)
    h = herm_pd(3, 3)
    h[2, 2] = -50.0                          # not positive-definite at order 3: LAPACK's partial factor and info
    L, info = dg.linalg.cholesky_ex(dg.tensor(h))
    assert int(info) == 3
    np.testing.assert_allclose(L.numpy()[:2, :2], np.linalg.cholesky(h[:2, :2]), rtol=1e-12)
    if torch is not None:
        tL, tinfo = torch.linalg.cholesky_ex(torch.tensor(h))
        assert int(tinfo) == 3
        np.testing.assert_allclose(L.numpy(), tL.numpy(), rtol=1e-12)
    with pytest.raises(dg.linalg.LinAlgError, match="positive-definite"):
        dg.linalg.cholesky(dg.tensor(h))


CHOLESKYS = {
    "linalg.cholesky": lambda m, A: m.linalg.cholesky(A),
    "linalg.cholesky_upper": lambda m, A: m.linalg.cholesky(A, upper=True),
    "linalg.cholesky_ex": lambda m, A: m.linalg.cholesky_ex(A).L,
    "linalg.cholesky_ex_upper": lambda m, A: m.linalg.cholesky_ex(A, upper=True).L,
    "cholesky_upper": lambda m, A: m.cholesky(A, upper=True),
}


def _cholesky_vjp(dg, fn, h, g):
    A = dg.tensor(h, requires_grad=True)
    return dg.autograd.grad(fn(dg, A), A, dg.tensor(g))[0].numpy()


@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.parametrize("name", list(CHOLESKYS))
def test_cholesky_grad_along_hermitian_directions(dg, name):
    """The gradient at a Hermitian A itself (not through a Hermitian-making wrapper, which projects part of it away):
    Re<gA, E> is the derivative of Re<g, L(A)> along every Hermitian E (central differences)."""
    fn = CHOLESKYS[name]
    h, g = herm_pd(2, 3, 3, seed=3), cmat(2, 3, 3, seed=4, shift=False)
    gA = _cholesky_vjp(dg, fn, h, g)
    rng = np.random.default_rng(7)
    for _ in range(3):
        e = rng.standard_normal(h.shape) + 1j * rng.standard_normal(h.shape)
        e = e + np.conj(np.swapaxes(e, -1, -2))
        t = 1e-6
        dL = (fn(dg, dg.tensor(h + t * e)).numpy() - fn(dg, dg.tensor(h - t * e)).numpy()) / (2 * t)
        np.testing.assert_allclose(np.vdot(gA, e).real, np.vdot(g, dL).real, rtol=1e-6)


@needs_torch
@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.parametrize("dtype", ["complex128", "float64"])
@pytest.mark.parametrize("name", list(CHOLESKYS))
def test_cholesky_grad_at_a_hermitian_input_as_torch(dg, name, dtype):
    """torch's cholesky_backward exactly, the imaginary parts of P's diagonal included (its gradient at a complex A
    is not Hermitian), for the lower and the upper factor."""
    fn = CHOLESKYS[name]
    h, g = herm_pd(2, 4, 4, seed=1), cmat(2, 4, 4, seed=2, shift=False)
    if dtype == "float64":
        h, g = (h + np.conj(h)).real, g.real
    A = torch.tensor(h, requires_grad=True)
    want = torch.autograd.grad(fn(torch, A), A, torch.tensor(g))[0].numpy()
    np.testing.assert_allclose(_cholesky_vjp(dg, fn, h, g), want, rtol=1e-10, atol=1e-12)


# ---- the LU family --------------------------------------------------------------------------------------------

def test_lu_family(dg):
    a, b = cmat(2, 3, 3, shift=False), cmat(2, 3, 2, seed=1, shift=False)
    P, L, U = dg.linalg.lu(dg.tensor(a))
    np.testing.assert_allclose(P.numpy() @ L.numpy() @ U.numpy(), a, atol=1e-12)
    LU, piv = dg.linalg.lu_factor(dg.tensor(a))
    A, B = dg.tensor(a), dg.tensor(b)
    ah = np.conj(np.swapaxes(a, -1, -2))
    for left, adjoint in ((True, False), (True, True), (False, False), (False, True)):
        want = np.linalg.solve(ah if adjoint else a, b)
        rhs = B if left else dg.tensor(np.swapaxes(b, -1, -2))
        got = dg.linalg.lu_solve(LU, piv, rhs, left=left, adjoint=adjoint)
        if not left:                    # X M = B^T  <=>  X^T = M^-T B
            want = np.swapaxes(np.linalg.solve(np.swapaxes(ah if adjoint else a, -1, -2), b), -1, -2)
        np.testing.assert_allclose(got.numpy(), want, atol=1e-12)
    np.testing.assert_allclose(dg.linalg.solve_ex(A, B).result.numpy(), np.linalg.solve(a, b), atol=1e-12)
    if torch is not None:
        tLU, tpiv = torch.linalg.lu_factor(torch.tensor(a))
        np.testing.assert_array_equal(piv.numpy(), tpiv.numpy())
        np.testing.assert_allclose(LU.numpy(), tLU.numpy(), atol=1e-12)
        torch_grads(lambda X: tuple(dg.linalg.lu(X))[1:], lambda X: tuple(torch.linalg.lu(X))[1:], dg, a)
        torch_grads(lambda X, Y: dg.linalg.lu_solve(*dg.linalg.lu_factor(X), Y, adjoint=True),
                    lambda X, Y: torch.linalg.lu_solve(*torch.linalg.lu_factor(X), Y, adjoint=True), dg, a, b)
    check_grads(dg, lambda X: tuple(dg.linalg.lu(X))[1:], a)
    check_grads(dg, lambda X, Y: dg.linalg.lu_solve(*dg.linalg.lu_factor(X), Y, left=False, adjoint=True),
                a, np.swapaxes(b, -1, -2))


@pytest.mark.parametrize("upper", [False, True])
def test_cholesky_solve_and_inverse(dg, upper):
    h, b = herm_pd(2, 3, 3), cmat(2, 3, 2, seed=1, shift=False)
    c = np.linalg.cholesky(h)
    f = np.conj(np.swapaxes(c, -1, -2)) if upper else c
    np.testing.assert_allclose(dg.cholesky_solve(dg.tensor(b), dg.tensor(f), upper=upper).numpy(),
                               np.linalg.solve(h, b), atol=1e-12)
    np.testing.assert_allclose(dg.cholesky_inverse(dg.tensor(f), upper=upper).numpy(), np.linalg.inv(h),
                               atol=1e-12)
    tri = (lambda m, F: m.triu(F)) if upper else (lambda m, F: m.tril(F))
    check_grads(dg, lambda B, F: dg.cholesky_solve(B, tri(dg, F), upper=upper), b, f)
    if torch is not None:
        torch_grads(lambda B, F: dg.cholesky_solve(B, F, upper=upper),
                    lambda B, F: torch.cholesky_solve(B, F, upper=upper), dg, b, f)
        torch_grads(lambda F: dg.cholesky_inverse(F, upper=upper),
                    lambda F: torch.cholesky_inverse(F, upper=upper), dg, f[0])


def test_eig_out_needs_complex_tensors(dg):
    """A complex result is not written into a real out= tensor (torch's canCast), which would drop its imaginary
    part."""
    A = dg.tensor([[0.0, -1.0], [1.0, 0.0]])
    w, v = dg.empty(2, dtype=dg.complex64), dg.empty(2, 2, dtype=dg.complex64)
    assert dg.linalg.eig(A, out=(w, v))[0] is w
    np.testing.assert_allclose(np.sort_complex(w.numpy()), [-1j, 1j], atol=1e-6)
    with pytest.raises(RuntimeError, match="can't be cast"):
        dg.linalg.eig(A, out=(dg.empty(2), dg.empty(2, 2)))


def test_composites_over_the_solvers(dg):
    """triangular_solve (transpose is A^T, not A^H, as torch's), tensorinv and tensorsolve on complex tensors."""
    a, b = np.triu(cmat(3, 3)), cmat(3, 2, seed=1, shift=False)
    X = dg.triangular_solve(dg.tensor(b), dg.tensor(a), upper=True, transpose=True).solution
    np.testing.assert_allclose(a.T @ X.numpy(), b, atol=1e-12)
    t = cmat(6, 6).reshape(2, 3, 6)
    np.testing.assert_allclose(dg.linalg.tensorinv(dg.tensor(t), ind=2).numpy(),
                               np.linalg.tensorinv(t, ind=2), atol=1e-12)
    rhs = cmat(2, 3, seed=2, shift=False)
    np.testing.assert_allclose(dg.linalg.tensorsolve(dg.tensor(t), dg.tensor(rhs)).numpy(),
                               np.linalg.tensorsolve(t, rhs), atol=1e-12)
    check_grads(dg, lambda T, R: dg.linalg.tensorsolve(T, R), t, rhs, gradgrad=False)


# ---- geqrf, householder_product, ormqr ----------------------------------------------------------------------------

def test_householder_family(dg):
    """geqrf (zgeqrf), householder_product (H_i = I - tau_i v_i v_i^H) and ormqr (transpose = Q^H, as unmqr's 'C')
    on complex matrices: Q R = A with Q unitary, and ormqr is the product with Q or Q^H from either side."""
    a = cmat(2, 5, 3, seed=8, shift=False)
    h, tau = dg.geqrf(dg.tensor(a))
    assert h.dtype == dg.complex128 and tau.dtype == dg.complex128
    Q = dg.linalg.householder_product(h, tau).numpy()
    R = np.triu(h.numpy()[..., :3, :])
    np.testing.assert_allclose(Q @ R, a, atol=1e-12)
    np.testing.assert_allclose(np.conj(np.swapaxes(Q, -1, -2)) @ Q, np.broadcast_to(np.eye(3), (2, 3, 3)),
                               atol=1e-12)
    full = dg.linalg.householder_product(dg.cat([h, dg.zeros(2, 5, 2, dtype=h.dtype)], -1),
                                         dg.cat([tau, dg.zeros(2, 2, dtype=tau.dtype)], -1)).numpy()   # square Q
    Qh = np.conj(np.swapaxes(full, -1, -2))
    c_left, c_right = cmat(2, 5, 2, seed=9, shift=False), cmat(2, 2, 5, seed=10, shift=False)
    for left, c in ((True, c_left), (False, c_right)):
        for transpose, q in ((False, full), (True, Qh)):
            got = dg.ormqr(h, tau, dg.tensor(c), left=left, transpose=transpose).numpy()
            np.testing.assert_allclose(got, q @ c if left else c @ q, atol=1e-12)
    if torch is not None:
        th, ttau = torch.geqrf(torch.tensor(a))
        np.testing.assert_allclose(h.numpy(), th.numpy(), atol=1e-12)
        np.testing.assert_allclose(tau.numpy(), ttau.numpy(), atol=1e-12)


def test_householder_family_grads(dg):
    h, tau = dg.geqrf(dg.tensor(cmat(5, 3, seed=11, shift=False)))
    h, tau = h.numpy(), tau.numpy()
    c = cmat(5, 2, seed=12, shift=False)
    check_grads(dg, lambda A, T: dg.linalg.householder_product(A, T), h, tau, gradgrad=False)
    for transpose in (False, True):
        check_grads(dg, lambda A, T, C: dg.ormqr(A, T, C, transpose=transpose), h, tau, c, gradgrad=False)
        if torch is not None:
            torch_grads(lambda A, T, C: dg.ormqr(A, T, C, transpose=transpose),
                        lambda A, T, C: torch.ormqr(A, T, C, transpose=transpose), dg, h, tau, c)
    if torch is not None:
        torch_grads(lambda A, T: dg.linalg.householder_product(A, T),
                    lambda A, T: torch.linalg.householder_product(A, T), dg, h, tau)


# ---- svd_lowrank, pca_lowrank -------------------------------------------------------------------------------------

@pytest.mark.parametrize("shape", [(7, 5), (5, 7)])
def test_lowrank_factorisations(dg, shape):
    """svd_lowrank and pca_lowrank of complex matrices: A ~ U diag(S) V^H (V, not V^T), exact for rank <= q, with
    complex Gaussian sketches; the tall and the wide (conjugate-transposed) paths."""
    m, n = shape
    a = cmat(2, m, 2, seed=14, shift=False) @ cmat(2, 2, n, seed=15, shift=False)      # rank 2
    mu = cmat(1, n, seed=16, shift=False)
    for M in (None, mu):
        dg.manual_seed(0)
        U, S, V = dg.svd_lowrank(dg.tensor(a + (0 if M is None else mu)), q=3, M=None if M is None else dg.tensor(M))
        assert U.dtype == dg.complex128 and S.dtype == dg.float64 and V.dtype == dg.complex128
        rebuilt = (U.numpy() * S.numpy()[..., None, :]) @ np.conj(np.swapaxes(V.numpy(), -1, -2))
        np.testing.assert_allclose(rebuilt, a, atol=1e-10)
        np.testing.assert_allclose(S.numpy()[..., :2], np.linalg.svd(a, compute_uv=False)[..., :2], rtol=1e-10)
    dg.manual_seed(0)
    U, S, V = dg.pca_lowrank(dg.tensor(a), q=3)
    centred = a - a.mean(-2, keepdims=True)
    rebuilt = (U.numpy() * S.numpy()[..., None, :]) @ np.conj(np.swapaxes(V.numpy(), -1, -2))
    np.testing.assert_allclose(rebuilt, centred, atol=1e-10)

    def recon(X):
        dg.manual_seed(0)               # the same sketch at every evaluation
        U, S, V = dg.svd_lowrank(X, q=3, niter=1)
        return dg.matmul(U * S.unsqueeze(-2).to(U.dtype), V.mH)
    check_grads(dg, recon, cmat(m, n, seed=17, shift=False), gradgrad=False)     # full rank: S > 0, distinct


def test_vecdot(dg):
    """linalg.vecdot conjugates its first argument (sum(conj(x) y)), broadcasting, as torch."""
    x, y = cmat(2, 1, 4, seed=18, shift=False), cmat(3, 4, seed=19, shift=False)
    got = dg.linalg.vecdot(dg.tensor(x), dg.tensor(y))
    np.testing.assert_allclose(got.numpy(), np.sum(np.conj(x) * y, -1), rtol=1e-12)
    np.testing.assert_allclose(dg.linalg.vecdot(dg.tensor(x), dg.tensor(y), dim=0).numpy(),
                               np.sum(np.conj(x) * y, 0), rtol=1e-12)
    check_grads(dg, lambda a, b: dg.linalg.vecdot(a, b), x, y)
    if torch is not None:
        torch_grads(lambda a, b: dg.linalg.vecdot(a, b), lambda a, b: torch.linalg.vecdot(a, b), dg, x, y)
