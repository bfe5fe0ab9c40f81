"""torch.linalg's factorisations, solvers and matrix functions with torch's signatures (and the top-level names
torch has for them): inv, det, slogdet, solve, solve_triangular, cholesky, qr, eigh, svd, pinv, lstsq, eig/eigvals,
the LU family (lu, lu_factor, lu_solve, lu_unpack), solve_ex, matrix_exp, matrix_power, householder_product with
geqrf and ormqr, the LDL family, tensorinv, tensorsolve, vander, cholesky_solve, cholesky_inverse and
triangular_solve; and the vector and matrix norms. The products are in products.py.

A factorisation has no core op: its forward runs LAPACK through numpy.linalg (numpy's wheels bundle OpenBLAS from
the same scipy-openblas family on PyPI that dyngrad's BLAS comes from), or the numpy code of host/linalg.py for what
numpy.linalg lacks (LU, LDL, the matrix exponential), inside a custom autograd.Function whose backward is the
matrix-calculus formula written with dyngrad ops, so that gradients of gradients work too (Note [Outputs in linalg
backwards]). The rest are composites of differentiable ops (lu_solve, lu_unpack, householder_product, ormqr,
tensorinv, tensorsolve, vander, triangular_solve, the norms), which then differentiate themselves. geqrf and the
LDL family have no derivative, as torch: their results carry a node whose backward raises torch's error.

Note [eig returns complex tensors]: a real matrix can have complex eigenvalues, so torch.linalg.eig/eigvals always
return complex tensors (complex64 for float32 input, complex128 for float64), whatever the spectrum; so does
dyngrad. The gradient reaching a real A is the real part of the complex formula's, as torch's.

Complex matrices: inv, det, slogdet, solve, solve_triangular, eig, eigvals (and the decompositions that pass
complex_ok=True to _matrices) take them; the formulas are the real ones with conjugate transposes (mH) where the
real ones transpose, plus the terms a complex input adds (slogdet's sign, the phases of eigen- and singular
vectors: Note [Phases of complex eigenvectors]).

Forward mode: every factorisation's Function has a jvp with torch's formula and gauge (written beside its backward;
tests/test_forward_ad_linalg.py), computed with dyngrad ops so that it composes (jvp of jvp, grad of jvp, vmap,
jacfwd, hessian). A jvp whose tangent is recorded or carries lower levels' tangents recomputes the outputs through
the Function on _jvp_primal (_again_for_jvp); a backward run at dual inputs (forward over reverse: hvp, jvp of grad)
recomputes them too (_again_for_backward), since the outputs it saved, detached, carry no tangent.
"""
import collections
import math

import numpy as np

from ... import _C
from ...autograd.function import Function, _jvp_primal, _jvp_primal_has_tangents
from .. import bridge
from ..args import (Tensor, broadcast_shapes, dtype_arg, number, shape_str, tensor_arg, to_int, type_name,
                    warn_deprecated, wrap_dim)
from ..bridge import numpy_dtype
from ..host import linalg as hl
from .products import _float_input, _scaled
from .random import randn
from .scan import cumprod


class LinAlgError(RuntimeError):
    """Raised by the linalg functions when the data make the problem unsolvable (a singular matrix, a matrix that is
    not positive-definite), as torch.linalg.LinAlgError."""


LinAlgError.__module__ = __name__.replace("._api.ops.linalg", ".linalg")     # where users reach it: dyngrad.linalg


# torch.return_types of this family: named pairs that unpack like tuples
_named = collections.namedtuple
return_slogdet = _named("slogdet", ["sign", "logabsdet"])
return_linalg_slogdet = _named("linalg_slogdet", ["sign", "logabsdet"])
return_qr = _named("qr", ["Q", "R"])
return_linalg_qr = _named("linalg_qr", ["Q", "R"])
return_linalg_eigh = _named("linalg_eigh", ["eigenvalues", "eigenvectors"])
return_svd = _named("svd", ["U", "S", "V"])
return_linalg_svd = _named("linalg_svd", ["U", "S", "Vh"])
return_linalg_inv_ex = _named("linalg_inv_ex", ["inverse", "info"])
return_linalg_cholesky_ex = _named("linalg_cholesky_ex", ["L", "info"])
return_linalg_lstsq = _named("linalg_lstsq", ["solution", "residuals", "rank", "singular_values"])


# ===== helpers ==================================================================================================


def _const(array, like):
    """A constant tensor (no history) from a numpy array, in like's dtype."""
    return bridge.share(np.array(array, dtype=numpy_dtype(like.dtype), order="C"))


def _from_np(array, dtype):
    """A new tensor holding a copy of `array` in `dtype` (a forward's result)."""
    return bridge.share(np.array(array, dtype=numpy_dtype(dtype), order="C"))


def _np(t):
    """A numpy view of t's values."""
    return bridge.view(t.detach())


def _eye(n, like):
    return _const(np.eye(n), like)


def _matrices(op, A, name="A", square=True, not_implemented=False, complex_ok=False):
    """A as a (batch of) float (or complex, if complex_ok) matrices: torch's checks in torch's order (dtype,
    dimensions, squareness)."""
    A = tensor_arg(A, op, name)
    _float_input(op, A, name, not_implemented, complex_ok)
    if A.ndim < 2:
        raise RuntimeError(f"{op}: {name} must have at least 2 dimensions, got shape {shape_str(A.shape)}.")
    if square and A.shape[-1] != A.shape[-2]:
        raise RuntimeError(f"{op}: {name} must be a batch of square matrices, got {A.shape[-2]} by {A.shape[-1]} "
                           "matrices.")
    return A


def _mH(x):
    """The conjugate transpose of the last two dims (the transpose of a real tensor)."""
    return _C.conj(_C.mT(x)) if x.dtype.is_complex else _C.mT(x)


def _conj(x):
    return _C.conj(x) if x.dtype.is_complex else x


def _real_dtype(dtype):
    """The real dtype of a complex one's parts (complex64 -> float32); a real dtype itself."""
    return {"complex64": _C.float32, "complex128": _C.float64}.get(dtype.name, dtype)


def _real_part(x):
    """Re(x), a real tensor (differentiable); x itself if real."""
    return _C.select(_C.view_as_real(x), -1, 0) if x.dtype.is_complex else x


def _i_imag(x):
    """i Im(x) as a complex tensor, (x - conj(x)) / 2 (differentiable)."""
    return _scaled(_C.sub(x, _C.conj(x)), 0.5)


# Note [Phases of complex eigenvectors] (the check in double backward): a node's phase check sees only the
# cotangent that reaches it. Once a backward is recorded (create_graph=True), the vectors' dependence on A is split
# between the original node and the one the backward recomputes (Note [Outputs in linalg backwards]); only their sum
# is phase-blind, so neither checks alone: the backward maps are linear in the cotangent and equal on both nodes,
# which makes the sum of their gradients the gradient of the summed cotangent. First-order backwards keep the check.
_phase_checks_off = [0]


def _recomputed(function, *args):
    """function.apply(*args) inside a recorded backward: its nodes skip the phase check."""
    _phase_checks_off[0] += 1
    try:
        return function.apply(*args)
    finally:
        _phase_checks_off[0] -= 1


def _differentiated(A):
    """Whether A's result must go through its Function: recorded for reverse mode, or A carries a tangent (the
    numpy shortcut would drop it silently; the Function carries it, or says it has no jvp)."""
    return _recording(A) or any(_C._get_tangent(A, level) is not None for level in _C._open_dual_levels())


def _phase_check_wanted(ctx, A):
    """Whether this backward checks phase invariance (see above); a node used by a recorded backward stops."""
    if _recording(A):
        ctx.check_phases = False
    return ctx.check_phases


def _same_float_dtype(op, A, B):
    if A.dtype is not B.dtype:
        raise RuntimeError(f"{op}: expected A and B of the same dtype, got {A.dtype.name} and {B.dtype.name}.")


def _recording(*tensors):
    """Whether a backward formula is being recorded (create_graph=True) with respect to one of `tensors`."""
    return _C.is_grad_enabled() and any(t.requires_grad for t in tensors)


def _again_for_backward(*tensors):
    """Whether a backward must recompute the forward's outputs differentiably (through the Function again) rather
    than use the detached ones it saved: when the backward is recorded (create_graph=True), or in forward over
    reverse (hvp, jvp of grad), where an input carries a tangent that the saved outputs, detached, do not."""
    return _recording(*tensors) or any(_C._get_tangent(t, level) is not None for t in tensors
                                        for level in _C._open_dual_levels())


def _again_for_jvp(ctx, *tensors):
    """Whether a jvp must recompute its primal results differentiably (through the Function again, on
    _jvp_primal(ctx, t)) rather than use the detached ones forward saved: when the tangent it returns is itself
    recorded (reverse mode) or carries the tangents of lower dual levels (Note [Nested levels])."""
    return _recording(*tensors) or _jvp_primal_has_tangents(ctx, *tensors)


def _where_batch(info):
    """The '(batch element k) ' prefix of an error about matrix k of a batch (flat index), as torch's messages."""
    flat = np.asarray(info).reshape(-1)
    k = int(np.flatnonzero(flat)[0])
    return k, (f"(batch element {k}) " if np.ndim(info) > 0 else "")


def _diag(x):
    """The diagonal of a (batch of) square matrices (differentiable)."""
    return _C.sum(_C.mul(x, _eye(x.shape[-1], x)), (-1,), False)


def _diag_embed(v):
    """Square matrices with v on their diagonal (differentiable)."""
    return _C.mul(_C.unsqueeze(v, -1), _eye(v.shape[-1], v))


def _tri(x, lower, k=0):
    """tril(x, k) (lower) or triu(x, k) of the last two dims, as a product with a constant mask."""
    m, n = x.shape[-2], x.shape[-1]
    mask = np.tril(np.ones((m, n)), k) if lower else np.triu(np.ones((m, n)), k)
    return _C.mul(x, _const(mask, x))




# Note [einsum's contraction order]: einsum contracts two operands at a time (a batched matmul after a permute and
# a reshape), choosing each time the pair whose result has the fewest elements (the first such pair on ties), and
# sums a label out as soon as neither another operand nor the output needs it. This greedy rule is opt_einsum's
# cheap default; it finds the good order of chains (ab,bc,cd->ad with a small a contracts from the small end) without
# the exponential search of an optimal order.


# ===== factorisations: numpy.linalg forwards, dyngrad backwards ==================================================
#
# Note [Outputs in linalg backwards]: the formulas below need the forward's outputs (A^-1, Q and R, U, S and V...).
# A Function saves them detached: saving the returned tensors themselves would close a reference cycle (ctx ->
# output -> its node -> ctx). When the backward is itself recorded (create_graph=True) and an input requires grad,
# it recomputes them through the Function, so that second derivatives see how they depend on the input.
# Conventions: `g` is dL/d(out); real matrices, so conjugate transposes are transposes (mT).

def _first_zero_pivot(a):
    """LAPACK getrf's info for one matrix: the 1-based index of the first exactly-zero pivot of its LU factorisation
    with partial pivoting, 0 if there is none."""
    u = np.array(a, dtype=np.result_type(a.dtype, np.float64))
    n = u.shape[-1]
    for k in range(n):
        p = k + int(np.argmax(np.abs(u[k:, k])))
        if u[p, k] == 0:
            return k + 1
        u[[k, p]] = u[[p, k]]
        u[k + 1:, k:] -= np.outer(u[k + 1:, k] / u[k, k], u[k, k:])
    return 0


def _per_matrix(factor, a, info_of_failure):
    """(factor of each matrix, LAPACK-style info) of a stack: the whole stack in one numpy call when every matrix
    succeeds; otherwise matrix by matrix, a failing one getting NaNs and info_of_failure(matrix) (> 0)."""
    info = np.zeros(a.shape[:-2], dtype=np.int64)
    try:
        return factor(a), info
    except np.linalg.LinAlgError:
        pass
    out = np.full(a.shape, np.nan, dtype=a.dtype)
    for idx in np.ndindex(*a.shape[:-2]):
        try:
            out[idx] = factor(a[idx])
        except np.linalg.LinAlgError:
            info[idx] = info_of_failure(a[idx])
    return out, info


def _lapack_inv(a):
    """(inverses, info) of a stack of matrices; a singular matrix gets NaNs and its getrf info (> 0). A matrix
    holding a NaN gets an all-NaN inverse and info 0, as torch's getrf/getri: numpy's pivot search passes over a NaN
    pivot and leaves some rows finite ([[nan, 1], [1, 3]] gave [[nan, nan], [-0.5, 0.5]])."""
    out, info = _per_matrix(np.linalg.inv, a, lambda m: _first_zero_pivot(m) or m.shape[-1])
    has_nan = np.isnan(a).any(axis=(-2, -1))
    if np.any(has_nan):
        out = np.array(out)
        out[has_nan] = np.nan
    return out, info


def _raise_singular(op, info):
    if np.any(info):
        k, where = _where_batch(info)
        raise LinAlgError(f"{op}: {where}the input matrix is singular: the diagonal element "
                          f"{int(np.asarray(info).reshape(-1)[k])} of its LU factorization is zero, so it has no "
                          "inverse.")


def _numpy_cholesky(a):
    """np.linalg.cholesky, failing as LAPACK potrf where a pivot is NaN: numpy returns partly finite factors of a
    matrix with a NaN in its lower triangle, where potrf (and torch) report it as not positive-definite."""
    L = np.linalg.cholesky(a)
    if np.isnan(np.diagonal(L, axis1=-2, axis2=-1)).any():
        raise np.linalg.LinAlgError("a NaN pivot")
    return L


def _first_non_pd_minor(m):
    """The order of the first leading minor of m that is not positive-definite (LAPACK potrf's info)."""
    for k in range(1, m.shape[-1] + 1):
        try:
            _numpy_cholesky(m[:k, :k])
        except np.linalg.LinAlgError:
            return k
    return m.shape[-1]


def _lapack_cholesky(a):
    """(lower Cholesky factors, info) of a stack of matrices, reading their lower triangles; a matrix that is not
    positive-definite gets LAPACK potrf's partial factor (_partial_cholesky) and the order of its first leading minor
    that is not (potrf's info)."""
    out, info = _per_matrix(_numpy_cholesky, a, _first_non_pd_minor)
    for idx in zip(*np.nonzero(info)) if np.ndim(info) else ([()] if info else []):
        partial, order = _partial_cholesky(a[idx])
        if order:                 # (rounding can let numpy fail where this loop succeeds: NaNs and numpy's info then)
            out[idx], info[idx] = partial, order
    return out, info


def _partial_cholesky(m):
    """LAPACK potf2 ('L') on one matrix, as torch returns a failed factorization: the columns before the first pivot
    that is not positive (or is NaN) are computed, that pivot's value is left on the diagonal and the rows below it
    keep the input's lower triangle. ([[4, nan], [nan, 3]] -> [[2, 0], [nan, nan]], info 2.) (factor, info)."""
    L = np.tril(m).astype(m.dtype, copy=True)
    with np.errstate(all="ignore"):
        for j in range(m.shape[-1]):
            row = L[j, :j]
            pivot = np.real(L[j, j] - row @ np.conj(row))     # (potrf reads the real part of a complex pivot)
            if not pivot > 0:
                L[j, j] = pivot
                return L, j + 1
            L[j, j] = np.sqrt(pivot)
            L[j + 1:, j] = (L[j + 1:, j] - L[j + 1:, :j] @ np.conj(row)) / L[j, j]
    return L, 0


def _raise_not_pd(op, info):
    if np.any(info):
        k, where = _where_batch(info)
        raise LinAlgError(f"{op}: {where}the factorization could not be completed because the input is not "
                          f"positive-definite (its leading minor of order {int(np.asarray(info).reshape(-1)[k])} is "
                          "not positive-definite).")


def _info_tensor(info):
    """LAPACK's info, as int32 (torch's dtype for it)."""
    return bridge.share(np.array(info, dtype=np.int32))


def _lapack_solve_triangular(a, b, upper, unitriangular):
    """A^-1 B reading only A's upper or lower triangle (and not its diagonal if unitriangular), as LAPACK's trsm:
    a zero on the diagonal gives infs and NaNs, not an error. A lower system is flipped into an upper one, on which
    numpy's LU solve pivots nowhere and is exactly back substitution."""
    n = a.shape[-1]
    t = np.triu(a) if upper else np.tril(a)
    idx = np.arange(n)
    if unitriangular:
        t[..., idx, idx] = 1
    if not upper:
        t, b = t[..., ::-1, ::-1], b[..., ::-1, :]
    if np.all(t[..., idx, idx] != 0):
        x = np.linalg.solve(t, b)
    else:
        x = np.zeros(np.broadcast_shapes(t.shape[:-2], b.shape[:-2]) + b.shape[-2:], dtype=b.dtype)
        with np.errstate(all="ignore"):
            for i in range(n - 1, -1, -1):
                rest = np.einsum("...j,...jk->...k", t[..., i, i + 1:], x[..., i + 1:, :])
                x[..., i, :] = (b[..., i, :] - rest) / t[..., i, i, None]
    return x[..., ::-1, :] if not upper else x


class LinalgInv(Function):
    """linalg.inv: LAPACK getrf/getri (no core op factorises a matrix)."""

    @staticmethod
    def forward(ctx, A):
        out, info = _lapack_inv(_np(A))
        _raise_singular("linalg.inv", info)
        X = _from_np(out, A.dtype)
        ctx.save_for_backward(A, X.detach())
        return X

    # X = A^-1  ->  gA = -X^T g X^T
    @staticmethod
    def backward(ctx, g):
        A, X = ctx.saved_tensors
        if _again_for_backward(A):
            X = LinalgInv.apply(A)
        Xt = _mH(X)
        return _C.neg(_C.matmul(_C.matmul(Xt, g), Xt))

    # dX = -X dA X (holomorphic: the same formula on complex matrices)
    @staticmethod
    def jvp(ctx, tA):
        A, X = ctx.saved_tensors
        if _again_for_jvp(ctx, A):
            X = LinalgInv.apply(_jvp_primal(ctx, A))
        return _C.neg(_C.matmul(_C.matmul(X, tA), X))


def _adjugate_t(A):
    """conj(adj(A))^T, the gradient of det at any matrix, singular ones included: with A = U S V^H,
    adj(A)^H = conj(det(U) det(V^H)) U diag(prod_{j != i} s_j) V^H (differentiable through the SVD; adj(A)^T for a
    real A)."""
    U, S, Vh = LinalgSvd.apply(A, False)
    sign = np.conj(np.linalg.det(_np(U)) * np.linalg.det(_np(Vh)))
    n = S.shape[-1]
    others = None
    for j in range(n):          # c_i = prod_{j != i} s_j, without dividing by a zero s_i
        factor = _C.where(bridge.share(np.arange(n) == j), _C.scalar_operand(1.0, S),
                          _C.unsqueeze(_C.select(S, -1, j), -1))
        others = factor if others is None else _C.mul(others, factor)
    if others is None:
        others = _C.mul(S, _C.scalar_operand(0.0, S))
    adj = _C.matmul(_C.mul(U, _C.to_dtype(_C.unsqueeze(others, -2), U.dtype)), Vh)
    return _C.mul(adj, _const(sign[..., None, None], A))


class LinalgDet(Function):
    """linalg.det: LAPACK getrf through numpy.linalg.det."""

    @staticmethod
    def forward(ctx, A):
        d = _from_np(np.linalg.det(_np(A)), A.dtype)
        ctx.save_for_backward(A, d.detach())
        return d

    # d = det(A)  ->  gA = g conj(d) A^-H (= g conj(adj(A))^T, which also holds where A is singular)
    @staticmethod
    def backward(ctx, g):
        A, d = ctx.saved_tensors
        g2 = _C.unsqueeze(_C.unsqueeze(g, -1), -1)
        if A.shape[-1] == 0:
            return _C.mul(A, _C.scalar_operand(0.0, A))
        if np.any(_np(d) == 0):
            return _C.mul(g2, _adjugate_t(A))
        if _again_for_backward(A):
            d = LinalgDet.apply(A)
        X = LinalgInv.apply(A) if _again_for_backward(A) else _from_np(np.linalg.inv(_np(A)), A.dtype)
        return _C.mul(_C.mul(g2, _C.unsqueeze(_C.unsqueeze(_conj(d), -1), -1)), _mH(X))

    # dd = tr(adj(A) dA) = sum_ij conj(adjugate_t(A))_ij dA_ij, which holds where A is singular too; d tr(A^-1 dA)
    # where it is not (holomorphic: no conjugation on complex matrices)
    @staticmethod
    def jvp(ctx, tA):
        A, d = ctx.saved_tensors
        if A.shape[-1] == 0:
            return _C.mul(d, _C.scalar_operand(0.0, d))
        A = _jvp_primal(ctx, A)
        if np.any(_np(d) == 0):
            return _C.sum(_C.mul(_conj(_adjugate_t(A)), tA), [-2, -1], False, None)
        if _again_for_jvp(ctx, A):
            d = LinalgDet.apply(A)
        X = LinalgInv.apply(A) if _again_for_jvp(ctx, A) else _from_np(np.linalg.inv(_np(A)), A.dtype)
        return _C.mul(d, _C.sum(_C.mul(_C.mT(X), tA), [-2, -1], False, None))


class LinalgSlogdet(Function):
    """linalg.slogdet: LAPACK getrf through numpy.linalg.slogdet; the sign is not differentiable."""

    @staticmethod
    def forward(ctx, A):
        sign, logabs = np.linalg.slogdet(_np(A))
        s, l = _from_np(sign, A.dtype), _from_np(logabs, _real_dtype(A.dtype))
        if A.dtype.is_complex:
            ctx.set_materialize_grads(False)
        else:
            ctx.mark_non_differentiable(s)
        ctx.save_for_backward(A, s.detach(), l.detach())
        return s, l

    # logabsdet = log|det A|  ->  gA = g A^-H; at a singular matrix conj(adj(A))^T / conj(det(A)), infinite as
    # torch's. For a complex A the sign s = det / |det| moves too: d log det = tr(A^-1 dA) = d logabs + i d arg, and
    # ds = i s d arg, so <g_sign, ds> = Re(conj(g_sign) i s d arg) adds -i Im(conj(g_sign) s) to g (torch's formula)
    @staticmethod
    def backward(ctx, g_sign, g):
        A, sign, logabs = ctx.saved_tensors
        if A.dtype.is_complex:
            if g is None and g_sign is None:
                return None
            g = _C.to_dtype(g, A.dtype) if g is not None else _C.full(tuple(logabs.shape), 0.0, A.dtype)
            if g_sign is not None:
                if _again_for_backward(A):
                    sign = LinalgSlogdet.apply(A)[0]
                g = _C.sub(g, _i_imag(_C.mul(_C.conj(g_sign), sign)))
        g2 = _C.unsqueeze(_C.unsqueeze(g, -1), -1)
        if np.any(np.isneginf(_np(logabs))):
            with np.errstate(all="ignore"):
                a = _np(A)
                adj = _np(_adjugate_t(A.detach()))
                inv_t = adj / np.conj(np.linalg.det(a))[..., None, None]
            return _C.mul(g2, _const(inv_t, A))
        X = LinalgInv.apply(A) if _again_for_backward(A) else _from_np(np.linalg.inv(_np(A)), A.dtype)
        return _C.mul(g2, _mH(X))

    # d log det = tr(A^-1 dA): d logabs = Re of it; a complex sign moves by s i Im of it (a real one does not)
    @staticmethod
    def jvp(ctx, tA):
        A, sign, logabs = ctx.saved_tensors
        A = _jvp_primal(ctx, A)
        if np.any(np.isneginf(_np(logabs))):       # singular: A^-T = adj(A)^T / det, infinite as the backward's
            with np.errstate(all="ignore"):
                inv_t = np.conj(_np(_adjugate_t(A.detach()))) / np.linalg.det(_np(A))[..., None, None]
            Xt = _const(inv_t, A)
        elif _again_for_jvp(ctx, A):
            Xt = _C.mT(LinalgInv.apply(A))
            sign = LinalgSlogdet.apply(A)[0]
        else:
            Xt = _from_np(np.swapaxes(np.linalg.inv(_np(A)), -1, -2), A.dtype)
        tr = _C.sum(_C.mul(Xt, tA), [-2, -1], False, None)
        if not A.dtype.is_complex:
            return None, tr
        return _C.mul(sign, _i_imag(tr)), _real_part(tr)


class LinalgSolve(Function):
    """linalg.solve for A X = B, B a batch of matrices with A's batch shape: LAPACK gesv."""

    @staticmethod
    def forward(ctx, A, B):
        try:
            out = np.linalg.solve(_np(A), _np(B))
        except np.linalg.LinAlgError:
            raise LinAlgError("linalg.solve: the solver failed because the input matrix is singular.") from None
        X = _from_np(out, A.dtype)
        ctx.save_for_backward(A, B, X.detach())
        return X

    # X = A^-1 B  ->  gB = A^-T g,  gA = -gB X^T
    @staticmethod
    def backward(ctx, g):
        A, B, X = ctx.saved_tensors
        gB = LinalgSolve.apply(_mH(A), g)
        if not ctx.needs_input_grad[0]:
            return None, gB
        if _again_for_backward(A, B):
            X = LinalgSolve.apply(A, B)
        return _C.neg(_C.matmul(gB, _mH(X))), gB

    # dX = A^-1 (dB - dA X)
    @staticmethod
    def jvp(ctx, tA, tB):
        A, B, X = ctx.saved_tensors
        A, B = _jvp_primal(ctx, A), _jvp_primal(ctx, B)
        if _again_for_jvp(ctx, A, B):
            X = LinalgSolve.apply(A, B)
        return LinalgSolve.apply(A, _C.sub(tB, _C.matmul(tA, X)))


class LinalgSolveTriangular(Function):
    """linalg.solve_triangular for A X = B (left): LAPACK trsm semantics (only A's triangle is read)."""

    @staticmethod
    def forward(ctx, A, B, upper, unitriangular):
        X = _from_np(_lapack_solve_triangular(_np(A), _np(B), upper, unitriangular), A.dtype)
        ctx.upper, ctx.unitriangular = upper, unitriangular
        ctx.save_for_backward(A, B, X.detach())
        return X

    # X = A^-1 B  ->  gB = A^-T g,  gA = -gB X^T restricted to the triangle the forward read
    @staticmethod
    def backward(ctx, g):
        A, B, X = ctx.saved_tensors
        gB = LinalgSolveTriangular.apply(_mH(A), g, not ctx.upper, ctx.unitriangular)
        if not ctx.needs_input_grad[0]:
            return None, gB, None, None
        if _again_for_backward(A, B):
            X = LinalgSolveTriangular.apply(A, B, ctx.upper, ctx.unitriangular)
        k = 1 if ctx.upper else -1
        gA = _tri(_C.neg(_C.matmul(gB, _mH(X))), not ctx.upper, k if ctx.unitriangular else 0)
        return gA, gB, None, None

    # dX = A^-1 (dB - dA X), dA restricted to the triangle the forward read
    @staticmethod
    def jvp(ctx, tA, tB, *_):
        A, B, X = ctx.saved_tensors
        A, B = _jvp_primal(ctx, A), _jvp_primal(ctx, B)
        if _again_for_jvp(ctx, A, B):
            X = LinalgSolveTriangular.apply(A, B, ctx.upper, ctx.unitriangular)
        k = 1 if ctx.upper else -1
        rhs = _C.sub(tB, _C.matmul(_tri(tA, not ctx.upper, k if ctx.unitriangular else 0), X))
        return LinalgSolveTriangular.apply(A, rhs, ctx.upper, ctx.unitriangular)


def _solve_tri(A, B, upper):
    return LinalgSolveTriangular.apply(A, B, upper, False)


class LinalgCholesky(Function):
    """linalg.cholesky: the lower factor L (A = L L^H) reading A's lower triangle, or with upper the upper factor
    U = L^H (A = U^H U) reading A's upper triangle: LAPACK potrf."""

    @staticmethod
    def forward(ctx, A, op, upper):
        # upper: potrf('U') of A is potrf('L') of A^T (the same triangle's entries), whose factor is U^T
        out, info = _lapack_cholesky(np.swapaxes(_np(A), -1, -2) if upper else _np(A))
        _raise_not_pd(op, info)
        if upper:
            out = np.swapaxes(out, -1, -2)
        F = _from_np(out, A.dtype)
        ctx.op, ctx.upper = op, upper
        ctx.save_for_backward(A, F.detach())
        return F

    # A = L L^H (torch's cholesky_backward, Iain Murray 2016):  gA = L^-H Phi L^-1,
    #   P = tril(L^H gL),  Phi = (P + tril(P, -1)^H) / 2  (Hermitian off the diagonal, the diagonal P's own halved).
    # For a real A, Phi is symmetric and so is gA. For a complex one Phi's diagonal keeps its imaginary part, so gA is
    # not Hermitian: torch's gradient, which agrees with the derivative of every Hermitian perturbation of A (the
    # skew-Hermitian rest is orthogonal to them). upper: U = L^H, so L = U^H and gL = gU^H.
    @staticmethod
    def backward(ctx, g):
        A, F = ctx.saved_tensors
        if _again_for_backward(A):
            F = LinalgCholesky.apply(A, ctx.op, ctx.upper)
        L, gL = (_mH(F), _mH(g)) if ctx.upper else (F, g)
        P = _tri(_C.matmul(_mH(L), gL), True)
        Phi = _scaled(_C.add(P, _mH(_tri(P, True, -1))), 0.5)
        Lh = _mH(L)
        Y = _solve_tri(Lh, Phi, True)                         # L^-H Phi
        gA = _mH(_solve_tri(Lh, _mH(Y), True))                # (L^-H Y^H)^H = Y L^-1
        return gA, None, None

    # dA = dL L^H + L dL^H  ->  L^-1 dA L^-H = L^-1 dL + (L^-1 dL)^H, L^-1 dL lower with a real diagonal (torch's
    # cholesky_jvp): dL = L phi(L^-1 dA L^-H), phi(X) = tril(X) with its diagonal halved. As torch, the whole of dA
    # enters (the forward reads one triangle): the derivative along Hermitian directions. upper: dU = dL^H.
    @staticmethod
    def jvp(ctx, tA, *_):
        A, F = ctx.saved_tensors
        A = _jvp_primal(ctx, A)
        if _again_for_jvp(ctx, A):
            F = LinalgCholesky.apply(A, ctx.op, ctx.upper)
        L = _mH(F) if ctx.upper else F
        Y = _solve_tri(L, tA, False)                          # L^-1 dA
        X = _mH(_solve_tri(L, _mH(Y), False))                 # Y L^-H = (L^-1 Y^H)^H
        phi = _C.sub(_tri(X, True), _scaled(_diag_embed(_diag(X)), 0.5))
        dL = _C.matmul(L, phi)
        return _mH(dL) if ctx.upper else dL


def _copyltu(M):
    """The Hermitian matrix whose strict lower triangle is M's, with the real part of M's diagonal (R's diagonal is
    real, so only Re(diag) moves it)."""
    low = _tri(M, True, -1)
    d = _diag(M)
    if M.dtype.is_complex:
        d = _C.to_dtype(_real_part(d), M.dtype)
    return _C.add(_C.add(low, _mH(low)), _diag_embed(d))


def _qr_backward_tall(gQ, gR, Q, R):
    """A = QR with m >= n (reduced): gA = (gQ + Q copyltu(M)) R^-T, M = R gR^T - gQ^T Q."""
    M = _C.sub(_C.matmul(R, _mH(gR)), _C.matmul(_mH(gQ), Q))
    B = _C.add(gQ, _C.matmul(Q, _copyltu(M)))
    return _mH(_solve_tri(R, _mH(B), True))               # B R^-T = (R^-1 B^T)^T


def _qr_jvp_tall(dA, Q, R):
    """(dQ, dR) of A = QR with m >= n (reduced): with X = Q^H dA R^-1 = Q^H dQ + dR R^-1, Q^H dQ = Om is
    skew-Hermitian and dR R^-1 upper triangular with a real diagonal (R's is real), so Om is X's strict lower triangle
    minus its conjugate transpose plus i Im(diag(X)); dR = (X - Om) R and dQ = dA R^-1 - Q (X - Om)."""
    dAR = _mH(_solve_tri(_mH(R), _mH(dA), False))             # dA R^-1 = (R^-H dA^H)^H, R^H lower
    X = _C.matmul(_mH(Q), dAR)
    low = _tri(X, True, -1)
    om = _C.sub(low, _mH(low))
    if X.dtype.is_complex:
        om = _C.add(om, _diag_embed(_i_imag(_diag(X))))
    up = _tri(_C.sub(X, om), False)                           # dR R^-1
    return _C.sub(dAR, _C.matmul(Q, up)), _C.matmul(up, R)


class LinalgQr(Function):
    """linalg.qr: LAPACK geqrf/orgqr through numpy.linalg.qr."""

    @staticmethod
    def forward(ctx, A, mode):
        a = _np(A)
        if mode == "r":
            Q, R = _from_np(np.zeros(0), A.dtype), _from_np(np.linalg.qr(a, mode="r"), A.dtype)
        else:
            q, r = np.linalg.qr(a, mode=mode)
            Q, R = _from_np(q, A.dtype), _from_np(r, A.dtype)
        ctx.mode = mode
        ctx.set_materialize_grads(False)
        ctx.save_for_backward(A, Q.detach(), R.detach())
        return Q, R

    # m >= n: _qr_backward_tall. m < n: A = [X | Y], X = Q U, Y = Q V (R = [U | V]): gY = Q gV and X's gradient is
    # the square case with gQ + Y gV^T
    @staticmethod
    def backward(ctx, gQ, gR):
        A, Q, R = ctx.saved_tensors
        m, n = A.shape[-2], A.shape[-1]
        _check_qr_differentiable(ctx.mode, m, n)
        if _again_for_backward(A):
            Q, R = LinalgQr.apply(A, ctx.mode)
        if gQ is None:
            gQ = _C.mul(Q, _C.scalar_operand(0.0, Q))
        if gR is None:
            gR = _C.mul(R, _C.scalar_operand(0.0, R))
        if m >= n:
            return _qr_backward_tall(gQ, gR, Q, R), None
        Y = _C.slice(A, -1, m, n, 1)
        U, gU = _C.slice(R, -1, 0, m, 1), _C.slice(gR, -1, 0, m, 1)
        gV = _C.slice(gR, -1, m, n, 1)
        gX = _qr_backward_tall(_C.add(gQ, _C.matmul(Y, _mH(gV))), gU, Q, U)
        return _C.cat([gX, _C.matmul(Q, gV)], -1), None

    # m >= n: _qr_jvp_tall. m < n: A = [X | Y] = Q [U | V]: X = Q U is the square case and dV = Q^H (dY - dQ V)
    @staticmethod
    def jvp(ctx, tA, _):
        A, Q, R = ctx.saved_tensors
        m, n = A.shape[-2], A.shape[-1]
        _check_qr_differentiable(ctx.mode, m, n)
        A = _jvp_primal(ctx, A)
        if _again_for_jvp(ctx, A):
            Q, R = LinalgQr.apply(A, ctx.mode)
        if m >= n:
            return _qr_jvp_tall(tA, Q, R)
        U, V = _C.slice(R, -1, 0, m, 1), _C.slice(R, -1, m, n, 1)
        dQ, dU = _qr_jvp_tall(_C.slice(tA, -1, 0, m, 1), Q, U)
        dV = _C.matmul(_mH(Q), _C.sub(_C.slice(tA, -1, m, n, 1), _C.matmul(dQ, V)))
        return dQ, _C.cat([dU, dV], -1)


def _check_qr_differentiable(mode, m, n):
    """torch's refusals of the QR derivatives (both modes of AD)."""
    if mode == "r":
        raise RuntimeError("linalg.qr: the derivative depends on Q, which is not computed when mode='r'; use "
                           "mode='reduced' to differentiate through linalg.qr.")
    if mode == "complete" and m > n:
        raise RuntimeError("linalg.qr: the QR decomposition is not differentiable when mode='complete' and A has "
                           "more rows than columns.")


def _inverse_gaps(values):
    """F_ij = 1 / (v_j - v_i) off the diagonal, 0 on it (v_i equal to v_j off the diagonal gives inf, as torch)."""
    n = values.shape[-1]
    eye = _eye(n, values)
    gaps = _C.sub(_C.unsqueeze(values, -2), _C.unsqueeze(values, -1))
    return _C.mul(_C.div(_C.scalar_operand(1.0, values), _C.add(gaps, eye)), _C.sub(_C.scalar_operand(1.0, eye), eye))


class LinalgEigh(Function):
    """linalg.eigh: LAPACK syevd through numpy.linalg.eigh, reading the UPLO triangle."""

    @staticmethod
    def forward(ctx, A, UPLO):
        w, v = np.linalg.eigh(_np(A), UPLO=UPLO)
        L, V = _from_np(w, _real_dtype(A.dtype)), _from_np(v, A.dtype)
        ctx.UPLO = UPLO
        ctx.check_phases = not _phase_checks_off[0]
        ctx.set_materialize_grads(False)
        ctx.save_for_backward(A, L.detach(), V.detach())
        return L, V

    # A = V diag(L) V^T  ->  gA = V (diag(gL) + F o skew(V^T gV)) V^T, F_ij = 1 / (L_j - L_i) off the diagonal,
    # skew(X) = (X - X^T) / 2: only V^T dV's skew part moves V, which keeps gA symmetric (as torch's)
    @staticmethod
    def backward(ctx, gL, gV):
        A, L, V = ctx.saved_tensors
        if _again_for_backward(A):
            L, V = _recomputed(LinalgEigh, A, ctx.UPLO)
        inner = None if gL is None else _C.to_dtype(_diag_embed(gL), V.dtype)
        if gV is not None:
            VtgV = _C.matmul(_mH(V), gV)
            if _phase_check_wanted(ctx, A):
                _check_phase_invariance("linalg_eigh_backward", _np(VtgV))
            term = _C.mul(_scaled(_C.sub(VtgV, _mH(VtgV)), 0.5), _inverse_gaps(L))
            inner = term if inner is None else _C.add(inner, term)
        if inner is None:
            return None, None
        return _C.matmul(_C.matmul(V, inner), _mH(V)), None

    # dP = V^H dA V: dL = Re(diag(dP)), dV = V (F o dP), F_ij = 1 / (L_j - L_i), F_ii = 0 (V^H dV has a zero
    # diagonal: torch's gauge). As torch, the whole of dA enters (the derivative along Hermitian directions).
    @staticmethod
    def jvp(ctx, tA, _):
        A, L, V = ctx.saved_tensors
        A = _jvp_primal(ctx, A)
        if _again_for_jvp(ctx, A):
            L, V = _recomputed(LinalgEigh, A, ctx.UPLO)
        dP = _C.matmul(_C.matmul(_mH(V), tA), V)
        return _real_part(_diag(dP)), _C.matmul(V, _C.mul(dP, _inverse_gaps(L)))


class LinalgSvd(Function):
    """linalg.svd: LAPACK gesdd through numpy.linalg.svd."""

    @staticmethod
    def forward(ctx, A, full_matrices):
        u, s, vh = np.linalg.svd(_np(A), full_matrices=full_matrices)
        U, S, Vh = _from_np(u, A.dtype), _from_np(s, _real_dtype(A.dtype)), _from_np(vh, A.dtype)
        ctx.full_matrices = full_matrices
        ctx.check_phases = not _phase_checks_off[0]
        ctx.set_materialize_grads(False)
        ctx.save_for_backward(A, U.detach(), S.detach(), Vh.detach())
        return U, S, Vh

    # A = U S V^T (k = min(m, n) singular values):
    #   gA = U [J S + diag(gS) + S K] V^T + (I - U U^T) gU S^-1 V^T + U S^-1 gV^T (I - V V^T),
    #   J = F o (U^T gU - gU^T U),  K = F o (V^T gV - gV^T V),  F_ij = 1 / (s_j^2 - s_i^2) off the diagonal.
    # With full_matrices, only the first k columns of U and rows of V^T count (the rest are not determined by A).
    @staticmethod
    def backward(ctx, gU, gS, gVh):
        A, U, S, Vh = ctx.saved_tensors
        if _again_for_backward(A):
            U, S, Vh = _recomputed(LinalgSvd, A, ctx.full_matrices)
        m, n = A.shape[-2], A.shape[-1]
        k = S.shape[-1]
        if ctx.full_matrices:
            U, Vh = _C.slice(U, -1, 0, k, 1), _C.slice(Vh, -2, 0, k, 1)
            gU = None if gU is None else _C.slice(gU, -1, 0, k, 1)
            gVh = None if gVh is None else _C.slice(gVh, -2, 0, k, 1)
        if gU is None and gVh is None:
            if gS is None:
                return None, None
            return _C.matmul(_C.mul(U, _C.unsqueeze(gS, -2)), Vh), None
        V = _mH(Vh)
        gV = None if gVh is None else _mH(gVh)
        F = _inverse_gaps(_C.mul(S, S))
        inner = None if gS is None else _C.to_dtype(_diag_embed(gS), U.dtype)
        if A.dtype.is_complex and _phase_check_wanted(ctx, A):
            _check_svd_phases(None if gU is None else _np(_C.matmul(_mH(U), gU)),
                              None if gV is None else _np(_C.matmul(Vh, gV)))
        s_row, s_col = _C.unsqueeze(S, -2), _C.unsqueeze(S, -1)
        inv_s = _C.div(_C.scalar_operand(1.0, S), S)
        extra = None
        if gU is not None:
            UtgU = _C.matmul(_mH(U), gU)
            J = _C.mul(F, _C.sub(UtgU, _mH(UtgU)))
            term = _C.mul(J, s_row)
            if A.dtype.is_complex:      # the phases: Im(dP_ii) = s_i Im((U^H dU)_ii - (V^H dV)_ii), put on U's side
                term = _C.add(term, _C.div(_diag_embed(_i_imag(_diag(UtgU))), s_col))
            inner = term if inner is None else _C.add(inner, term)
            if m > k:
                extra = _C.matmul(_C.mul(_C.sub(gU, _C.matmul(U, UtgU)), _C.unsqueeze(inv_s, -2)), Vh)
        if gV is not None:
            VtgV = _C.matmul(Vh, gV)
            K = _C.mul(F, _C.sub(VtgV, _mH(VtgV)))
            term = _C.mul(s_col, K)
            inner = term if inner is None else _C.add(inner, term)
            if n > k:
                gVt = _mH(gV)
                side = _C.matmul(_C.mul(U, _C.unsqueeze(inv_s, -2)), _C.sub(gVt, _C.matmul(_C.matmul(gVt, V), Vh)))
                extra = side if extra is None else _C.add(extra, side)
        gA = _C.matmul(_C.matmul(U, inner), Vh)
        return (gA if extra is None else _C.add(gA, extra)), None

    # dP = U^H dA V (k x k): dS = Re(diag(dP)); off the diagonal U^H dU = F o (dP S + S dP^H) and
    # V^H dV = F o (S dP + dP^H S), F_ij = 1 / (s_j^2 - s_i^2); the components outside U's (V's) span are
    # (I - U U^H) dA V S^-1 and (I - V V^H) dA^H U S^-1. A complex dP's Im(dP_ii) = s_i Im((U^H dU)_ii - (V^H dV)_ii)
    # is split equally between U and V (torch's gauge; only phase-blind functions of U and V have a derivative).
    # With full_matrices the columns of U (rows of Vh) past k get a zero tangent, as torch's.
    @staticmethod
    def jvp(ctx, tA, _):
        A, U, S, Vh = ctx.saved_tensors
        A = _jvp_primal(ctx, A)
        if _again_for_jvp(ctx, A):
            U, S, Vh = _recomputed(LinalgSvd, A, ctx.full_matrices)
        m, n = A.shape[-2], A.shape[-1]
        k = S.shape[-1]
        if ctx.full_matrices:
            U, Vh = _C.slice(U, -1, 0, k, 1), _C.slice(Vh, -2, 0, k, 1)
        V = _mH(Vh)
        dAV = _C.matmul(tA, V)
        dP = _C.matmul(_mH(U), dAV)
        dPh = _mH(dP)
        dS = _real_part(_diag(dP))
        F = _inverse_gaps(_C.mul(S, S))
        s_row, s_col = _C.unsqueeze(S, -2), _C.unsqueeze(S, -1)       # X * s_row = X S, s_col * X = S X
        om_u = _C.mul(F, _C.add(_C.mul(dP, s_row), _C.mul(s_col, dPh)))
        om_v = _C.mul(F, _C.add(_C.mul(s_col, dP), _C.mul(dPh, s_row)))
        if A.dtype.is_complex:
            phase = _diag_embed(_C.div(_i_imag(_diag(dP)), _scaled(S, 2.0)))
            om_u, om_v = _C.add(om_u, phase), _C.sub(om_v, phase)
        dU, dV = _C.matmul(U, om_u), _C.matmul(V, om_v)
        inv_s = _C.unsqueeze(_C.div(_C.scalar_operand(1.0, S), S), -2)
        if m > k:
            dU = _C.add(dU, _C.mul(_C.sub(dAV, _C.matmul(U, dP)), inv_s))
        if n > k:
            dAhU = _C.matmul(_mH(tA), U)
            dV = _C.add(dV, _C.mul(_C.sub(dAhU, _C.matmul(V, dPh)), inv_s))
        dVh = _mH(dV)
        if ctx.full_matrices:
            if m > k:
                dU = _C.cat([dU, _C.full(tuple(dU.shape[:-1]) + (m - k,), 0.0, dU.dtype)], -1)
            if n > k:
                dVh = _C.cat([dVh, _C.full(tuple(dVh.shape[:-2]) + (n - k, n), 0.0, dVh.dtype)], -2)
        return dU, dS, dVh


def _check_svd_phases(UhgU, VhgV):
    """Note [Phases of complex eigenvectors] for the SVD: u_i and v_i share one free phase, so a loss blind to it
    has Im(diag(U^H gU)) = -Im(diag(V^H gV)) (torch's check and error)."""
    parts = [np.imag(np.diagonal(x, axis1=-2, axis2=-1)) for x in (UhgU, VhgV) if x is not None]
    if parts and not np.allclose(sum(parts), 0, rtol=1e-2, atol=1e-2):
        raise RuntimeError("svd_backward: The singular vectors in the complex case are specified up to "
                           "multiplication by e^{i phi}. The specified loss function depends on this phase term, "
                           "making it ill-defined.")


def _pinv_numpy(a, atol, rtol, hermitian):
    """The pseudo-inverse of a stack of matrices: singular values (|eigenvalues| if hermitian) at most
    max(atol, rtol * largest) count as zero."""
    if hermitian:
        w, v = np.linalg.eigh(a)
        s = np.abs(w)
    else:
        u, s, vh = np.linalg.svd(a, full_matrices=False)
    big = np.max(s, axis=-1, initial=0.0)
    cut = np.maximum(atol, rtol * big)[..., None]
    with np.errstate(divide="ignore"):
        if hermitian:
            inv = np.where(s > cut, 1 / np.where(s > cut, w, 1), 0)
            return np.matmul(v * inv[..., None, :], np.conj(np.swapaxes(v, -1, -2)))
        inv = np.where(s > cut, 1 / np.where(s > cut, s, 1), 0)
        return np.matmul(np.conj(np.swapaxes(vh, -1, -2)) * inv[..., None, :], np.conj(np.swapaxes(u, -1, -2)))


class LinalgPinv(Function):
    """linalg.pinv: LAPACK gesdd (or syevd if hermitian) through numpy.linalg."""

    @staticmethod
    def forward(ctx, A, atol, rtol, hermitian):
        P = _from_np(_pinv_numpy(_np(A), atol, rtol, hermitian), A.dtype)
        ctx.params = (atol, rtol, hermitian)
        ctx.save_for_backward(A, P.detach())
        return P

    # P = A^+ (locally constant rank)  ->  gA = -P^T g P^T + (I - A P) g^T P P^T + P^T P g^T (I - P A)
    @staticmethod
    def backward(ctx, g):
        A, P = ctx.saved_tensors
        if _again_for_backward(A):
            P = LinalgPinv.apply(A, *ctx.params)
        Pt, gt = _mH(P), _mH(g)
        t1 = _C.neg(_C.matmul(_C.matmul(Pt, g), Pt))
        X = _C.matmul(_C.matmul(gt, P), Pt)
        t2 = _C.sub(X, _C.matmul(A, _C.matmul(P, X)))
        Z = _C.matmul(_C.matmul(Pt, P), gt)
        t3 = _C.sub(Z, _C.matmul(_C.matmul(Z, P), A))
        return _C.add(_C.add(t1, t2), t3), None, None, None

    # dP = -P dA P + P P^H dA^H (I - A P) + (I - P A) dA^H P^H P (locally constant rank; hermitian too)
    @staticmethod
    def jvp(ctx, tA, *_):
        A, P = ctx.saved_tensors
        A = _jvp_primal(ctx, A)
        if _again_for_jvp(ctx, A):
            P = LinalgPinv.apply(A, *ctx.params)
        Ph, tAh = _mH(P), _mH(tA)
        t1 = _C.neg(_C.matmul(_C.matmul(P, tA), P))
        X = _C.matmul(P, _C.matmul(Ph, tAh))
        t2 = _C.sub(X, _C.matmul(_C.matmul(X, A), P))
        Z = _C.matmul(tAh, _C.matmul(Ph, P))
        t3 = _C.sub(Z, _C.matmul(P, _C.matmul(A, Z)))
        return _C.add(_C.add(t1, t2), t3)


# ===== torch.linalg's functions over the factorisations ===========================================================

def inv(A):
    return LinalgInv.apply(_matrices("linalg.inv", A, complex_ok=True))


def inv_ex(A, *, check_errors=False):
    """(inverse, info): info > 0 marks a singular matrix (its inverse is then NaN) instead of raising, unless
    check_errors."""
    A = _matrices("linalg.inv_ex", A, complex_ok=True)
    _, info = _lapack_inv(_np(A))
    if np.any(info):
        if check_errors:
            _raise_singular("linalg.inv_ex", info)
        out, _ = _lapack_inv(_np(A))
        return return_linalg_inv_ex(_from_np(out, A.dtype), _info_tensor(info))
    return return_linalg_inv_ex(LinalgInv.apply(A), _info_tensor(info))


def inverse(input):
    return LinalgInv.apply(_matrices("linalg.inv", input, "input", complex_ok=True))


def linalg_det(A):
    return LinalgDet.apply(_matrices("linalg.det", A, complex_ok=True))


def det(input):
    return LinalgDet.apply(_matrices("linalg.det", input, "input", complex_ok=True))


def linalg_slogdet(A):
    """(sign, log|det|) of A's matrices."""
    return return_linalg_slogdet(*LinalgSlogdet.apply(_matrices("linalg.slogdet", A, complex_ok=True)))


def slogdet(input):
    return return_slogdet(*LinalgSlogdet.apply(_matrices("linalg.slogdet", input, "input", complex_ok=True)))


def logdet(input):
    """log(det(input)): NaN where the determinant is negative, -inf where it is zero; for a complex input the
    principal complex logarithm log|det| + i arg(det), as torch."""
    sign, logabs = LinalgSlogdet.apply(_matrices("logdet", input, "input", complex_ok=True))
    if sign.dtype.is_complex:
        return _C.add(_C.to_dtype(logabs, sign.dtype), _C.log(sign))
    nan = _C.scalar_operand(float("nan"), logabs)
    return _C.where(_C.compare("lt", sign, _C.scalar_operand(0.0, sign)), nan, logabs)


def _solve_operands(op, A, B, left, vectors=True):
    """A, B broadcast over their batch dims, B as a batch of matrices; whether B was a (batch of) vector(s): with
    `vectors`, B is one if it is 1-D, or if its shape is A's without the last dim."""
    A = _matrices(op, A, complex_ok=True)
    B = tensor_arg(B, op, "B")
    _float_input(op, B, "B", complex_ok=True)
    _same_float_dtype(op, A, B)
    vector = vectors and (B.ndim == 1 or (B.ndim == A.ndim - 1 and tuple(B.shape) == tuple(A.shape[:-1])))
    Bm = _C.unsqueeze(B, -1) if vector else B
    if Bm.ndim < 2:
        raise RuntimeError(f"{op}: B must have at least 1 dimension, got shape {shape_str(B.shape)}.")
    n = A.shape[-1]
    if (Bm.shape[-2] if left else Bm.shape[-1]) != n:
        raise RuntimeError(f"{op}: incompatible shapes of A and B for the equation {'AX = B' if left else 'XA = B'} "
                           f"({A.shape[-2]}x{n} and {Bm.shape[-2]}x{Bm.shape[-1]}).")
    batch = broadcast_shapes(A.shape[:-2], Bm.shape[:-2], op)
    A = _C.expand(A, tuple(batch) + tuple(A.shape[-2:])) if tuple(A.shape[:-2]) != tuple(batch) else A
    if tuple(Bm.shape[:-2]) != tuple(batch):
        Bm = _C.expand(Bm, tuple(batch) + tuple(Bm.shape[-2:]))
    return A, Bm, vector


def solve(A, B, *, left=True):
    """X with A X = B (XA = B if not left), A's matrices square and invertible."""
    op = "linalg.solve"
    A, Bm, vector = _solve_operands(op, A, B, left)
    if left:
        X = LinalgSolve.apply(A, Bm)
    else:                                     # X A = B  <=>  A^T X^T = B^T
        X = _C.mT(LinalgSolve.apply(_C.mT(A), _C.mT(Bm)))
    return _C.squeeze(X, (-1,)) if vector else X


def solve_triangular(A, B, *, upper, left=True, unitriangular=False):
    """X with A X = B (XA = B if not left), reading only A's upper or lower triangle; a zero on its diagonal gives
    infs and NaNs, not an error (LAPACK trsm)."""
    op = "linalg.solve_triangular"
    A = _matrices(op, A, complex_ok=True)
    B = tensor_arg(B, op, "B")
    _float_input(op, B, "B", complex_ok=True)
    if B.ndim < 2:
        raise RuntimeError(f"{op}: B must have at least 2 dimensions, got shape {shape_str(B.shape)}.")
    _same_float_dtype(op, A, B)
    A, B, _ = _solve_operands(op, A, B, left, vectors=False)
    upper, unitriangular = bool(upper), bool(unitriangular)
    if left:
        return LinalgSolveTriangular.apply(A, B, upper, unitriangular)
    return _C.mT(LinalgSolveTriangular.apply(_C.mT(A), _C.mT(B), not upper, unitriangular))


def _cholesky(op, A, upper):
    return LinalgCholesky.apply(A, op, upper)


def linalg_cholesky(A, *, upper=False):
    """L with A = L L^T (lower), or U = L^T with A = U^T U if upper; A symmetric positive-definite."""
    return _cholesky("linalg.cholesky", _matrices("linalg.cholesky", A, complex_ok=True), bool(upper))


def cholesky_ex(A, *, upper=False, check_errors=False):
    """(L, info): info > 0 marks a matrix that is not positive-definite (its factor is then NaN) instead of
    raising, unless check_errors."""
    op = "linalg.cholesky_ex"
    A = _matrices(op, A, complex_ok=True)
    source = _np(A) if not upper else np.swapaxes(_np(A), -1, -2)
    out, info = _lapack_cholesky(source)
    if np.any(info):
        if check_errors:
            _raise_not_pd(op, info)
        out = _from_np(out, A.dtype)
        return return_linalg_cholesky_ex(_C.mT(out) if upper else out, _info_tensor(info))
    return return_linalg_cholesky_ex(_cholesky(op, A, bool(upper)), _info_tensor(info))


def cholesky(input, upper=False):
    """Deprecated by torch in favour of linalg.cholesky."""
    A = _matrices("linalg.cholesky", input, "input", complex_ok=True)
    warn_deprecated("cholesky is deprecated in favour of linalg.cholesky; L = cholesky(A, upper) is "
                "linalg.cholesky(A, upper=upper).")
    return _cholesky("linalg.cholesky", A, bool(upper))


def linalg_qr(A, mode="reduced"):
    """(Q, R) with A = Q R; mode 'reduced' (k = min(m, n) columns of Q), 'complete' (Q square) or 'r' (R only, Q
    empty)."""
    op = "linalg.qr"
    A = _matrices(op, A, square=False, complex_ok=True)
    if mode not in ("reduced", "complete", "r"):
        raise RuntimeError(f"{op}: unrecognised mode {mode!r}; expected 'reduced' (the default), 'r' or 'complete'.")
    return return_linalg_qr(*LinalgQr.apply(A, mode))


def qr(input, some=True):
    """Deprecated by torch in favour of linalg.qr: some=True is mode 'reduced', False 'complete'."""
    A = _matrices("linalg.qr", input, "input", square=False, complex_ok=True)
    warn_deprecated("qr is deprecated in favour of linalg.qr; Q, R = qr(A, some) is linalg.qr(A, 'reduced' if some "
                "else 'complete').")
    return return_qr(*LinalgQr.apply(A, "reduced" if some else "complete"))


def _uplo(UPLO):
    if UPLO not in ("L", "U"):
        raise RuntimeError(f"linalg.eigh: expected UPLO to be 'L' or 'U', got {UPLO!r}.")
    return UPLO


def eigh(A, UPLO="L"):
    """(eigenvalues in ascending order, eigenvectors as columns) of symmetric matrices, reading the UPLO
    triangle."""
    A = _matrices("linalg.eigh", A, not_implemented=True, complex_ok=True)
    return return_linalg_eigh(*LinalgEigh.apply(A, _uplo(UPLO)))


def eigvalsh(A, UPLO="L"):
    """The eigenvalues of symmetric matrices, ascending (their gradient needs the eigenvectors)."""
    A = _matrices("linalg.eigh", A, not_implemented=True, complex_ok=True)
    UPLO = _uplo(UPLO)
    if _differentiated(A):
        return LinalgEigh.apply(A, UPLO)[0]
    return _from_np(np.linalg.eigvalsh(_np(A), UPLO=UPLO), _real_dtype(A.dtype))


def _driver(driver, op):
    if driver is not None:
        raise RuntimeError(f"{op}: driver= is only supported on CUDA (cuSOLVER); dyngrad runs on the CPU, so pass "
                           "driver=None.")


def linalg_svd(A, full_matrices=True, *, driver=None):
    """(U, S, Vh) with A = U diag(S) Vh, S descending; full_matrices gives square U and Vh."""
    op = "linalg.svd"
    A = _matrices(op, A, square=False, complex_ok=True)
    _driver(driver, op)
    return return_linalg_svd(*LinalgSvd.apply(A, bool(full_matrices)))


def _svdvals(A):
    if _differentiated(A):
        return LinalgSvd.apply(A, False)[1]
    return _from_np(np.linalg.svd(_np(A), compute_uv=False), _real_dtype(A.dtype))


def svdvals(A, *, driver=None):
    """The singular values of A's matrices, descending."""
    op = "linalg.svd"
    A = _matrices(op, A, square=False, complex_ok=True)
    _driver(driver, op)
    return _svdvals(A)


def svd(input, some=True, compute_uv=True):
    """torch.svd: (U, S, V) with input = U diag(S) V^H (V = Vh^H, the conjugate transpose of linalg.svd's Vh, not
    Vh itself); some=False gives square U and V. Without
    compute_uv, U and V are zeros of shapes (m, m) and (n, n)."""
    A = _matrices("linalg.svd", input, "input", square=False, complex_ok=True)
    if not compute_uv:
        S = _svdvals(A)
        batch, (m, n) = tuple(A.shape[:-2]), tuple(A.shape[-2:])
        return return_svd(_C.full(batch + (m, m), 0.0, A.dtype), S, _C.full(batch + (n, n), 0.0, A.dtype))
    U, S, Vh = LinalgSvd.apply(A, not some)
    return return_svd(U, S, _mH(Vh))


def _tolerance(value, op, name):
    """atol/rtol: a number, or a tensor broadcast over the batch."""
    if value is None:
        return None
    if isinstance(value, Tensor):
        return np.array(_np(value), dtype=np.float64)
    return float(number(value, op, name))


def _tolerances(A, atol, rtol, op):
    """torch's rule: without rtol, rtol is eps * max(m, n) unless atol is given (and positive), then 0."""
    atol, rtol = _tolerance(atol, op, "atol"), _tolerance(rtol, op, "rtol")
    if rtol is None:
        eps = np.finfo(numpy_dtype(A.dtype)).eps
        rtol = eps * max(A.shape[-2], A.shape[-1]) if atol is None or np.all(np.asarray(atol) <= 0) else 0.0
    return (0.0 if atol is None else atol), rtol


def pinv(A, *, atol=None, rtol=None, hermitian=False):
    """The Moore-Penrose pseudo-inverse; singular values at most max(atol, rtol * largest) count as zero."""
    op = "linalg.pinv"
    A = _matrices(op, A, square=bool(hermitian), complex_ok=True)
    atol, rtol = _tolerances(A, atol, rtol, op)
    return LinalgPinv.apply(A, atol, rtol, bool(hermitian))


def pinverse(input, rcond=1e-15):
    """torch.pinverse: pinv with rtol=rcond."""
    A = _matrices("linalg.pinv", input, "input", square=False, complex_ok=True)
    return LinalgPinv.apply(A, 0.0, float(number(rcond, "pinverse", "rcond")), False)


def matrix_rank(A, tol=None, *, atol=None, rtol=None, hermitian=False):
    """The number of singular values (|eigenvalues| if hermitian) above max(atol, rtol * largest); torch's older
    overload matrix_rank(A, tol) is atol=tol with rtol=0."""
    op = "linalg.matrix_rank"
    A = _matrices(op, A, square=bool(hermitian), complex_ok=True)
    if tol is not None:
        if atol is not None or rtol is not None:
            raise RuntimeError(f"{op}: pass either tol or atol/rtol, not both.")
        atol, rtol = tol, 0.0
    atol, rtol = _tolerances(A, atol, rtol, op)
    a = _np(A)
    s = np.abs(np.linalg.eigvalsh(a)) if hermitian else np.linalg.svd(a, compute_uv=False)
    cut = np.maximum(atol, rtol * np.max(s, axis=-1, initial=0.0))[..., None]
    return bridge.share(np.array(np.sum(s > cut, axis=-1), dtype=np.int64))


_LSTSQ_DRIVERS = ("gels", "gelsy", "gelsd", "gelss")


def lstsq(A, B, rcond=None, *, driver=None):
    """The least-squares (minimum-norm) solution X of A X = B, with the residuals (squared, for tall full-rank A
    with drivers other than the default gelsy), ranks (not for gels) and singular values (gelsd, gelss) that
    LAPACK's driver would return; empty tensors where the driver computes none. X is pinv(A) B, differentiable."""
    op = "linalg.lstsq"
    A = _matrices(op, A, square=False, complex_ok=True)
    B = tensor_arg(B, op, "B")
    _float_input(op, B, "B", complex_ok=True)
    _same_float_dtype(op, A, B)
    if driver is not None and driver not in _LSTSQ_DRIVERS:
        raise RuntimeError(f"{op}: driver must be one of {', '.join(_LSTSQ_DRIVERS)}, got {driver!r}.")
    driver = driver or "gelsy"
    vector = B.ndim == A.ndim - 1
    Bm = _C.unsqueeze(B, -1) if vector else B
    if Bm.ndim < 2 or Bm.shape[-2] != A.shape[-2]:
        raise RuntimeError(f"{op}: A and B must have the same number of rows, got shapes {shape_str(A.shape)} and "
                           f"{shape_str(B.shape)}.")
    m, n = A.shape[-2], A.shape[-1]
    cut = float(np.finfo(numpy_dtype(A.dtype)).eps * max(m, n)) if rcond is None else float(
        number(rcond, op, "rcond"))
    X = _C.matmul(LinalgPinv.apply(A, 0.0, max(cut, 0.0), False), Bm)
    s = np.linalg.svd(_np(A), compute_uv=False)
    ranks = np.sum(s > cut * np.max(s, axis=-1, initial=0.0)[..., None], axis=-1)
    empty = _C.full((0,), 0.0, _real_dtype(A.dtype))
    residuals = empty
    if driver != "gelsy" and m > n and np.all(ranks == n):
        r = _C.sub(_C.matmul(A, X), Bm)
        residuals = _C.sum(_real_part(_C.mul(_conj(r), r)), (-2,), False, None)     # |r|^2      # (..., k), k = 1 for a vector B (as torch)
    rank = bridge.share(np.array(ranks, dtype=np.int64)) if driver != "gels" else _C.full((0,), 0, _C.int64)
    sv = _from_np(s, _real_dtype(A.dtype)) if driver in ("gelsd", "gelss") else empty
    return return_linalg_lstsq(_C.squeeze(X, (-1,)) if vector else X, residuals, rank, sv)


def _matrix_power(op, A, n):
    n = to_int(n, op, "n")
    A = tensor_arg(A, op, "A")
    if A.ndim < 2:
        raise RuntimeError(f"{op}: A must have at least 2 dimensions, got shape {shape_str(A.shape)}.")
    if A.shape[-1] != A.shape[-2]:
        raise RuntimeError(f"{op}: A must be a batch of square matrices, got {A.shape[-2]} by {A.shape[-1]} "
                           "matrices.")
    if n == 0:
        eye = _const(np.broadcast_to(np.eye(A.shape[-1]), tuple(A.shape)), A)
        return _C.where(_C.full((), True, _C.bool), eye, A) if A.requires_grad else eye
    if n < 0:
        A, n = LinalgInv.apply(_matrices("linalg.inv", A, complex_ok=True)), -n
    if n == 1:
        return _C.clone(A)
    result, square = None, A                 # binary powering: A^n from the squares A, A^2, A^4, ...
    while n:
        if n & 1:
            result = square if result is None else _C.matmul(result, square)
        n >>= 1
        if n:
            square = _C.matmul(square, square)
    return result


def linalg_matrix_power(A, n):
    return _matrix_power("linalg.matrix_power", A, n)


def matrix_power(input, n):
    return _matrix_power("linalg.matrix_power", input, n)


# ===== norms (composites) =========================================================================================

def _ord_number(ord, op):
    if isinstance(ord, bool) or not isinstance(ord, (int, float, np.integer, np.floating)):
        raise TypeError(f"{op}: expected a number as ord, got {type_name(ord)}.")
    return float(ord)


def _norm_dtype(x, dtype, op):
    """x cast to dtype (a float dtype at least as wide as x's, as torch allows)."""
    if dtype is None:
        return x
    dt = dtype_arg(dtype, op)
    if x.dtype.is_complex:          # a complex input takes a complex dtype (torch's rule)
        if not dt.is_complex or np.dtype(numpy_dtype(dt)).itemsize < np.dtype(numpy_dtype(x.dtype)).itemsize:
            raise RuntimeError(f"{op}: the complex input's dtype {x.dtype.name} cannot be converted to dtype "
                               f"{dt.name}: expected a complex dtype at least as wide.")
        return x if dt is x.dtype else _C.to_dtype(x, dt)
    if not dt.is_floating_point or np.dtype(numpy_dtype(dt)).itemsize < np.dtype(numpy_dtype(x.dtype)).itemsize:
        raise RuntimeError(f"{op}: the input's dtype {x.dtype.name} cannot be converted to dtype {dt.name} without "
                           "narrowing.")
    return x if dt is x.dtype else _C.to_dtype(x, dt)


def _safe_power(s, e):
    """s ** e for s >= 0, with a zero gradient at s = 0 (where the true one is infinite), as torch's norms."""
    positive = _C.compare("gt", s, _C.scalar_operand(0.0, s))
    safe = _C.where(positive, s, _C.scalar_operand(1.0, s))
    root = _C.sqrt(safe) if e == 0.5 else _C.pow_scalar(safe, e)
    return _C.where(positive, root, _C.scalar_operand(0.0, s))


def _extreme(x, dims, keepdim, largest, op):
    """amax/amin over dims. Over an empty dim the largest is 0 (the norms of empty matrices are 0) and the smallest
    does not exist (IndexError, as torch's)."""
    if any(x.shape[d] == 0 for d in dims):
        if not largest:
            raise IndexError(f"{op}: cannot take the smallest value over an empty dimension (shape "
                             f"{shape_str(x.shape)}).")
        shape = [1 if d in dims else s for d, s in enumerate(x.shape)] if keepdim else [
            s for d, s in enumerate(x.shape) if d not in dims]
        return _C.full(tuple(shape), 0.0, x.dtype)
    return _C.amax(x, dims, keepdim) if largest else _C.amin(x, dims, keepdim)


def _zero_gradient(value, x, dims, keepdim):
    """value, recorded as a function of x with a zero gradient (torch's ord=0 norm is part of the graph)."""
    if not x.requires_grad:
        return value
    return _C.where(_C.full((), True, _C.bool), value, _C.sum(x, dims, keepdim, None))


def _vector_norm(x, p, dims, keepdim, op):
    """(sum |x|^p)^(1/p) over dims; p = 0 counts nonzeros, +-inf take the largest/smallest |x|."""
    count = math.prod(x.shape[d] for d in dims) if x.ndim else 1
    if (math.isinf(p) or p < 0) and count == 0:
        raise RuntimeError(f"{op}: cannot compute the {p:g} norm of an empty tensor: the reduction has no identity.")
    if x.dtype in (_C.float16, _C.bfloat16) and p != 0 and not math.isinf(p):
        # a half type's powers are taken and summed in float32 and the norm rounded once, as torch's: in float16
        # 300^2 already overflows, so |[300, 400]| would be inf (and F.normalize zeros)
        return _C.to_dtype(_vector_norm(_C.to_dtype(x, _C.float32), p, dims, keepdim, op), x.dtype)
    if p == 2 and not x.dtype.is_complex and len(dims) == x.ndim and x.ndim:
        # every dim of a real x: the sum of squares is one dot product of x with itself (one pass, no |x|^2
        # temporary; clip_grad_norm_'s per-gradient norms), with the same gradient 2 x
        flat = _C.reshape(x, (-1,))
        s = _C.matmul(flat, flat)
        return _safe_power(_C.reshape(s, (1,) * x.ndim) if keepdim else s, 0.5)
    if p == 2:
        square = _real_part(_C.mul(_C.conj(x), x)) if x.dtype.is_complex else _C.mul(x, x)       # |x|^2
        return _safe_power(_C.sum(square, dims, keepdim, None), 0.5)
    ax = _C.abs(x)     # (not above: the 2-norm does not need it)
    if p == 0:
        nonzero = _C.compare("ne", ax, _C.scalar_operand(0.0, ax))
        return _zero_gradient(_C.to_dtype(_C.sum(nonzero, dims, keepdim, None), ax.dtype), ax, dims, keepdim)
    if math.isinf(p):
        return _C.amax(ax, dims, keepdim) if p > 0 else _C.amin(ax, dims, keepdim)
    if p == 1:
        return _C.sum(ax, dims, keepdim, None)
    if p > 0:
        powered = _safe_power(ax, p)        # |x|^p, with a zero gradient where x = 0
        return _safe_power(_C.sum(powered, dims, keepdim, None), 1 / p)
    return _C.pow_scalar(_C.sum(_C.pow_scalar(ax, p), dims, keepdim, None), 1 / p)


def _reduce_dims(dim, ndim, op):
    """None or () -> every dim; an int or a sequence of ints, wrapped."""
    if dim is None or (isinstance(dim, (tuple, list)) and not dim):
        return tuple(range(ndim))
    dims = dim if isinstance(dim, (tuple, list)) else (dim,)
    out = tuple(wrap_dim(to_int(d, op, "dim"), ndim, op) for d in dims)
    if len(set(out)) != len(out):
        raise RuntimeError(f"{op}: dim {tuple(dims)} names a dimension more than once.")
    return out


def vector_norm(x, ord=2, dim=None, keepdim=False, *, dtype=None):
    """The vector p-norm of x over dim (every dim by default)."""
    op = "linalg.vector_norm"
    x = tensor_arg(x, op, "x")
    _float_input(op, x, "x", complex_ok=True)
    p = _ord_number(ord, op)
    x = _norm_dtype(x, dtype, op)
    return _vector_norm(x, p, _reduce_dims(dim, x.ndim, op), bool(keepdim), op)


_MATRIX_ORDS = ("fro", "nuc", 1.0, -1.0, 2.0, -2.0, math.inf, -math.inf)


def matrix_norm(A, ord="fro", dim=(-2, -1), keepdim=False, *, dtype=None):
    """The matrix norm of the matrices in dims `dim`: 'fro', 'nuc' (sum of singular values), +-2 (largest/smallest
    singular value), +-1 (largest/smallest column sum of |A|), +-inf (largest/smallest row sum)."""
    op = "linalg.matrix_norm"
    A = _matrices(op, A, square=False, complex_ok=True)
    if not isinstance(dim, (tuple, list)) or len(dim) != 2:
        raise RuntimeError(f"{op}: dim must be a 2-tuple, got {dim!r}.")
    d0, d1 = (wrap_dim(to_int(d, op, "dim"), A.ndim, op) for d in dim)
    if d0 == d1:
        raise RuntimeError(f"{op}: the two dims must be different, got {tuple(dim)}.")
    key = ord if isinstance(ord, str) else (_ord_number(ord, op) if not isinstance(ord, bool) else None)
    if key not in _MATRIX_ORDS:
        raise RuntimeError(f"{op}: order {ord} is not supported; expected 'fro', 'nuc', 1, -1, 2, -2, inf or -inf.")
    A = _norm_dtype(A, dtype, op)
    keepdim = bool(keepdim)
    if key == "fro":
        return _vector_norm(A, 2.0, (d0, d1), keepdim, op)
    if key in ("nuc", 2.0, -2.0):
        rest = [d for d in range(A.ndim) if d not in (d0, d1)]
        s = _svdvals(_C.permute(A, tuple(rest) + (d0, d1)))
        r = _C.sum(s, (-1,), False, None) if key == "nuc" else _extreme(s, (s.ndim - 1,), False, key > 0, op)
        if keepdim:
            for d in sorted((d0, d1)):
                r = _C.unsqueeze(r, d)
        return r
    rows, cols = (d0, d1) if abs(key) == 1 else (d1, d0)    # 1: sum over rows, extreme over columns
    sums = _C.sum(_C.abs(A), (rows,), True, None)
    r = _extreme(sums, (cols,), True, key > 0, op)
    return r if keepdim else _C.squeeze(r, tuple(sorted((d0, d1))))


def linalg_norm(input, ord=None, dim=None, keepdim=False, *, dtype=None):
    """A vector norm (dim an int or a 1-tuple, or ord=None over everything) or a matrix norm (dim a 2-tuple, or a
    2-D input with ord given)."""
    op = "linalg.norm"
    A = tensor_arg(input, op)
    if dim is not None:
        dims = tuple(dim) if isinstance(dim, (tuple, list)) else (dim,)
        if len(dims) == 1 and not isinstance(ord, str):
            return vector_norm(A, 2 if ord is None else ord, dims, keepdim, dtype=dtype)
        if len(dims) in (1, 2):
            return matrix_norm(A, "fro" if ord is None else ord, dim if len(dims) == 2 else dims[0], keepdim,
                               dtype=dtype)
        raise RuntimeError(f"{op}: dim must have 1 or 2 elements, got {list(dims)}.")
    if ord is None:
        return vector_norm(A, 2, None, keepdim, dtype=dtype)
    if isinstance(ord, str) or A.ndim == 2:
        return matrix_norm(A, ord, (-2, -1), keepdim, dtype=dtype)
    if A.ndim != 1:
        raise RuntimeError(f"{op}: with ord given and no dim, the input must be 1-D or 2-D, got {A.ndim}-D.")
    return vector_norm(A, ord, None, keepdim, dtype=dtype)


def cond(A, p=None):
    """The condition number in the p-norm: largest over smallest singular value for p None or 2 (smallest over
    largest for -2), else matrix_norm(A, p) * matrix_norm(A^-1, p) (inf for a singular matrix)."""
    op = "linalg.cond"
    A = _matrices(op, A, square=p not in (None, 2, -2), complex_ok=True)
    if p in (None, 2, -2):
        s = _svdvals(A)
        if s.shape[-1] == 0:
            return _C.full(tuple(s.shape[:-1]), 0.0, A.dtype)
        big, small = _C.select(s, -1, 0), _C.select(s, -1, s.shape[-1] - 1)
        return _C.div(big, small) if p != -2 else _C.div(small, big)
    _, info = _lapack_inv(_np(A))
    if np.any(info):
        singular = bridge.share(np.array(info > 0, dtype=bool))
        X = _from_np(np.nan_to_num(_lapack_inv(_np(A))[0]), A.dtype)
        r = _C.mul(matrix_norm(A, p), matrix_norm(X, p))
        return _C.where(singular, _C.scalar_operand(math.inf, r), r)
    return _C.mul(matrix_norm(A, p), matrix_norm(LinalgInv.apply(A), p))


return_linalg_eig = _named("linalg_eig", ["eigenvalues", "eigenvectors"])
return_linalg_lu = _named("linalg_lu", ["P", "L", "U"])
return_linalg_lu_factor = _named("linalg_lu_factor", ["LU", "pivots"])
return_linalg_lu_factor_ex = _named("linalg_lu_factor_ex", ["LU", "pivots", "info"])
return_lu_unpack = _named("lu_unpack", ["P", "L", "U"])
return_lu_with_info = _named("_lu_with_info", ["LU", "pivots", "info"])
return_linalg_solve_ex = _named("linalg_solve_ex", ["result", "info"])
return_linalg_ldl_factor = _named("linalg_ldl_factor", ["LD", "pivots"])
return_linalg_ldl_factor_ex = _named("linalg_ldl_factor_ex", ["LD", "pivots", "info"])


def _mm(a, b):
    return _C.matmul(a, b)


def _zeros_like(t):
    return _C.mul(t, _C.scalar_operand(0.0, t))


def _no_half(op, *tensors):
    """torch has no CPU kernel of these factorisations and solvers for float16 and bfloat16."""
    for t in tensors:
        if t.dtype.name in ("float16", "bfloat16"):
            raise NotImplementedError(f"{op}: not implemented for {t.dtype.name} on the CPU (as torch); convert to "
                                      "float32 first.")


def _bool_arg(value, op, name):
    if not isinstance(value, (bool, int, np.bool_)) or isinstance(value, float):
        raise TypeError(f"{op}: expected a bool as {name}, got {type_name(value)}.")
    return bool(value)


# ===== eig, eigvals ===============================================================================================

def _complex_dtype(dtype):
    """The complex dtype with dtype's parts (float32 -> complex64); a complex dtype itself."""
    return {"float32": _C.complex64, "float64": _C.complex128}.get(dtype.name, dtype)


def _geev(op, a):
    """(eigenvalues, eigenvectors) of a stack of real or complex matrices through LAPACK geev (numpy.linalg.eig),
    complex always (as torch's: Note [eig returns complex tensors])."""
    out = np.result_type(a.dtype, np.complex64)
    if a.size == 0:
        return np.zeros(a.shape[:-1], out), np.zeros(a.shape, out)
    if not np.isfinite(a).all():
        raise RuntimeError(f"{op}: the input should not contain infs or NaNs.")
    try:
        w, v = np.linalg.eig(a)
    except np.linalg.LinAlgError:
        raise LinAlgError(f"{op}: the eigenvalue algorithm (LAPACK geev) failed to converge.") from None
    return w.astype(out), v.astype(out)


class LinalgEig(Function):
    """linalg.eig: LAPACK geev (eigenvectors of unit norm, as torch's), complex results for real and complex A."""

    @staticmethod
    def forward(ctx, A, op):
        w, v = _geev(op, _np(A))
        dtype = _complex_dtype(A.dtype)
        L, V = _from_np(w, dtype), _from_np(v, dtype)
        ctx.op = op
        ctx.check_phases = not _phase_checks_off[0]
        ctx.set_materialize_grads(False)
        ctx.save_for_backward(A, L.detach(), V.detach())
        return L, V

    # A V = V diag(L), with unit-norm columns of V. Differentiating: dA V + A dV = dV diag(L) + V diag(dL); with
    # C = V^-1 dV, V^-1 dA V = diag(dL) + C diag(L) - diag(L) C, so dL = diag(V^-1 dA V) and, off the diagonal,
    # C_ij = (V^-1 dA V)_ij / (L_j - L_i). The normalisation |v_j| = 1 fixes Re(v_j^H dv_j) = 0, i.e.
    # Re(C_jj) = -Re(sum_{i != j} (V^H V)_ji C_ij); Im(C_jj) (the phase of v_j) is not determined, and a loss
    # that depends on it is refused (Note [Phases of complex eigenvectors]). The adjoint of the whole map is torch's
    #   gA = V^-H (diag(gL) + conj(E) o (V^H gV - V^H V diag(Re(diag(V^H gV))))) V^H,  E_ij = 1 / (L_j - L_i),
    # E_ii = 0; for a real A its real part (equal eigenvalues give infinities, as torch's).
    @staticmethod
    def backward(ctx, gL, gV):
        A, L, V = ctx.saved_tensors
        if gL is None and gV is None:
            return None, None
        if _again_for_backward(A):
            L, V = _recomputed(LinalgEig, A, ctx.op)
        n = A.shape[-1]
        inner = None
        if gV is not None:
            VhgV = _mm(_mH(V), gV)
            if _phase_check_wanted(ctx, A):
                _check_phase_invariance("linalg_eig_backward", _np(VhgV))
            diag_part = _C.mul(_real_part(VhgV), _eye(n, _real_part(VhgV)))
            term = _C.sub(VhgV, _mm(_mm(_mH(V), V), _C.to_dtype(diag_part, V.dtype)))
            gaps = _C.conj(_C.sub(_C.unsqueeze(L, -2), _C.unsqueeze(L, -1)))
            off = _const(1.0 - np.eye(n), V)
            inner = _C.mul(_C.div(term, _C.add(gaps, _eye(n, V))), off)
        if gL is not None:
            d = _C.mul(_C.unsqueeze(gL, -1), _eye(n, V))
            inner = d if inner is None else _C.add(inner, d)
        # V^-H inner V^H: solve V^H X = inner V^H
        gA = LinalgSolve.apply(_mH(V), _mm(inner, _mH(V)))
        return (gA if A.dtype.is_complex else _real_part(gA)), None

    # The derivation above, forward (torch's linalg_eig_jvp): dP = V^-1 dA V, dL = diag(dP), dV = V C with
    # C_ij = dP_ij / (L_j - L_i) off the diagonal and C_jj = -Re((V^H V C)_jj) (real: unit-norm columns, and the
    # phase gauge Im(C_jj) = 0).
    @staticmethod
    def jvp(ctx, tA, _):
        A, L, V = ctx.saved_tensors
        A = _jvp_primal(ctx, A)
        if _again_for_jvp(ctx, A):
            L, V = _recomputed(LinalgEig, A, ctx.op)
        n = A.shape[-1]
        t = tA if tA.dtype is V.dtype else _C.to_dtype(tA, V.dtype)
        dP = LinalgSolve.apply(V, _mm(t, V))
        gaps = _C.sub(_C.unsqueeze(L, -2), _C.unsqueeze(L, -1))
        C = _C.mul(_C.div(dP, _C.add(gaps, _eye(n, V))), _const(1.0 - np.eye(n), V))
        VC = _mm(V, C)
        norm_fix = _C.to_dtype(_real_part(_diag(_mm(_mH(V), VC))), V.dtype)
        return _diag(dP), _C.sub(VC, _C.mul(V, _C.unsqueeze(norm_fix, -2)))


def _check_phase_invariance(op, VhgV):
    """Note [Phases of complex eigenvectors]: eigenvectors (and singular vectors) are determined up to a phase
    e^{i phi} each; a loss that depends on the phases has no gradient. Invariance means Im(diag(V^H gV)) = 0 (for
    the SVD, Im(diag(U^H gU) + diag(V^H gV)) = 0), checked with torch's lax tolerances; torch raises the same
    error."""
    if np.iscomplexobj(VhgV) and not np.allclose(np.imag(np.diagonal(VhgV, axis1=-2, axis2=-1)), 0,
                                                    rtol=1e-2, atol=1e-2):
        raise RuntimeError(f"{op}: The eigenvectors in the complex case are specified up to multiplication by "
                           "e^{i phi}. The specified loss function depends on this phase term, making it "
                           "ill-defined.")


def eig(A):
    """(eigenvalues, eigenvectors) of square real or complex matrices, as complex tensors (torch's)."""
    A = _matrices("linalg.eig", A, complex_ok=True)
    _no_half("linalg.eig", A)
    return return_linalg_eig(*LinalgEig.apply(A, "linalg.eig"))


def eigvals(A):
    """The eigenvalues of square real or complex matrices, a complex tensor (torch's)."""
    A = _matrices("linalg.eigvals", A, complex_ok=True)
    _no_half("linalg.eigvals", A)
    return LinalgEig.apply(A, "linalg.eigvals")[0]


# ===== LU =========================================================================================================


def _unit_lower(lu, k):
    """L of a packed LU: the strictly lower part of its first k columns, with ones on the diagonal."""
    m = lu.shape[-2]
    return _C.add(_tri(_C.slice(lu, -1, 0, k, 1), True, -1), _const(np.eye(m, k), lu))


def _upper(lu, k):
    return _tri(_C.slice(lu, -2, 0, k, 1), False)


class LinalgLu(Function):
    """(L, U) of A = P L U from _getrf's factorisation (computed by the caller, passed in as numpy arrays)."""

    @staticmethod
    def forward(ctx, A, lu, piv):
        m, n = A.shape[-2], A.shape[-1]
        k = min(m, n)
        L = np.tril(lu[..., :, :k], -1) + np.eye(m, k, dtype=lu.dtype)
        U = np.triu(lu[..., :k, :])
        ctx.piv = piv
        ctx.set_materialize_grads(False)
        Lt, Ut = _from_np(L, A.dtype), _from_np(U, A.dtype)
        ctx.save_for_backward(A, Lt.detach(), Ut.detach())
        return Lt, Ut

    # Note [LU backward]. Square A = P L U (L unit lower, U upper): P^T dA = dL U + L dU, so
    # X = L^-1 P^T dA U^-1 = L^-1 dL + dU U^-1, the first strictly lower and the second upper: dL = L tril_-1(X),
    # dU = triu(X) U. Transposing, gA = P L^-T M U^-T with M = tril_-1(L^T gL) + triu(gU U^T).
    # Wide (m < n): U = [U1 U2], A = P L [U1 U2]; A1 = P L U1 is the square case and U2 = L^-1 P^T A2, so
    # gA2 = P L^-T gU2 and U2 adds -L^-T gU2 U2^T to gL: M = tril_-1(L^T gL - gU2 U2^T) + triu(gU1 U1^T).
    # Tall (m > n): P^T A = [L1; L2] U; [rows 1..n] = L1 U is the square case and L2 = B2 U^-1, so
    # gB2 = gL2 U^-T and L2 adds -L2^T gL2 U^-T to gU: M = tril_-1(L1^T gL1) + triu(gU U^T - L2^T gL2).
    @staticmethod
    def backward(ctx, gL, gU, *_):
        A, L, U = ctx.saved_tensors
        if gL is None and gU is None:
            return None, None, None
        m, n = A.shape[-2], A.shape[-1]
        k = min(m, n)
        if _again_for_backward(A):
            lu, piv, _ = hl.getrf(_np(A))
            L, U = LinalgLu.apply(A, lu, piv)
        gL = _zeros_like(L) if gL is None else gL
        gU = _zeros_like(U) if gU is None else gU
        L1, gL1 = _C.slice(L, -2, 0, k, 1), _C.slice(gL, -2, 0, k, 1)
        U1, gU1 = _C.slice(U, -1, 0, k, 1), _C.slice(gU, -1, 0, k, 1)
        lower = _mm(_mH(L1), gL1)
        upper = _mm(gU1, _mH(U1))
        if m < n:
            U2, gU2 = _C.slice(U, -1, k, n, 1), _C.slice(gU, -1, k, n, 1)
            lower = _C.sub(lower, _mm(gU2, _mH(U2)))
        if m > n:
            L2, gL2 = _C.slice(L, -2, k, m, 1), _C.slice(gL, -2, k, m, 1)
            upper = _C.sub(upper, _mm(_mH(L2), gL2))
        M = _C.add(_tri(lower, True, -1), _tri(upper, False))
        # gB1 = L1^-T M U1^-T: two triangular solves (L1^T is unit upper; M U1^-T = (U1^-1 M^T)^T)
        Y = _mH(LinalgSolveTriangular.apply(U1, _mH(M), True, False))
        gB = LinalgSolveTriangular.apply(_mH(L1), Y, True, True)
        if m < n:
            gB = _C.cat([gB, LinalgSolveTriangular.apply(_mH(L1), gU2, True, True)], -1)
        if m > n:
            gB2 = _mH(LinalgSolveTriangular.apply(U1, _mH(gL2), True, False))
            gB = _C.cat([gB, gB2], -2)
        P = _const(hl.permutation_matrix(ctx.piv, m, np.float64), A)
        return _mm(P, gB), None, None

    # Note [LU backward], forward (torch's linalg_lu_jvp): B = P^T dA; square part X = L1^-1 B1 U1^-1,
    # dL1 = L1 tril_-1(X), dU1 = triu(X) U1; wide: dU2 = L^-1 (B2 - dL U2); tall: dL2 = (B2 - L2 dU) U^-1.
    @staticmethod
    def jvp(ctx, tA, *_):
        A, L, U = ctx.saved_tensors
        m, n = A.shape[-2], A.shape[-1]
        k = min(m, n)
        A = _jvp_primal(ctx, A)
        if _again_for_jvp(ctx, A):
            lu, piv, _ = hl.getrf(_np(A))
            L, U = LinalgLu.apply(A, lu, piv)
        P = _const(hl.permutation_matrix(ctx.piv, m, np.float64), A)
        B = _mm(_C.mT(P), tA)
        L1, U1 = _C.slice(L, -2, 0, k, 1), _C.slice(U, -1, 0, k, 1)
        B1 = _C.slice(_C.slice(B, -2, 0, k, 1), -1, 0, k, 1)
        Y = LinalgSolveTriangular.apply(L1, B1, False, True)                      # L1^-1 B1
        X = _mH(LinalgSolveTriangular.apply(_mH(U1), _mH(Y), False, False))      # Y U1^-1
        dL = _mm(L1, _tri(X, True, -1))
        dU = _mm(_tri(X, False), U1)
        if m < n:
            U2, B2 = _C.slice(U, -1, k, n, 1), _C.slice(B, -1, k, n, 1)
            dU2 = LinalgSolveTriangular.apply(L1, _C.sub(B2, _mm(dL, U2)), False, True)
            dU = _C.cat([dU, dU2], -1)
        if m > n:
            L2, B2 = _C.slice(L, -2, k, m, 1), _C.slice(B, -2, k, m, 1)
            rest = _C.sub(B2, _mm(L2, dU))
            dL2 = _mH(LinalgSolveTriangular.apply(_mH(U1), _mH(rest), False, False))
            dL = _C.cat([dL, dL2], -2)
        return dL, dU


def _check_pivot(op, pivot):
    if not _bool_arg(pivot, op, "pivot"):
        raise RuntimeError(f"{op}: LU without pivoting is not implemented on the CPU.")


def _lu_input(op, A):
    A = tensor_arg(A, op, "A")
    if A.ndim < 2:
        raise RuntimeError(f"{op}: A must have at least 2 dimensions, got shape {shape_str(A.shape)}.")
    _float_input(op, A, "A", not_implemented=True, complex_ok=True)
    _no_half(op, A)
    return A


def _lu_parts(A):
    """(L, U, pivots as int32, info) of A, L and U differentiable."""
    lu, piv, info = hl.getrf(_np(A))
    L, U = LinalgLu.apply(A, lu, piv)
    return L, U, bridge.share(np.asarray(piv, order="C")), info


def _pack(L, U):
    """LAPACK's packed LU (m x n) from L (m x k) and U (k x n), differentiably."""
    m, n, k = L.shape[-2], U.shape[-1], L.shape[-1]
    low = _tri(L, True, -1)
    if n > k:
        low = _C.cat([low, _const(np.zeros(L.shape[:-1] + (n - k,)), L)], -1)
    up = U
    if m > k:
        up = _C.cat([U, _const(np.zeros(U.shape[:-2] + (m - k, n)), U)], -2)
    return _C.add(low, up)


def lu(A, *, pivot=True):
    """(P, L, U) with A = P L U: P a permutation, L unit lower triangular (m x k), U upper (k x n), k = min(m, n)."""
    op = "linalg.lu"
    A = _lu_input(op, A)
    _check_pivot(op, pivot)
    L, U, piv, _ = _lu_parts(A)
    P = _from_np(hl.permutation_matrix(_np(piv), A.shape[-2], np.float64), A.dtype)
    return return_linalg_lu(P, L, U)


def _raise_zero_pivot(op, info):
    if np.any(info):
        k, where = _where_batch(info)
        j = int(np.asarray(info).reshape(-1)[k])
        raise RuntimeError(f"{op}: {where}U[{j},{j}] is zero, so lu_solve with this factorization would divide by "
                           "zero. linalg.lu_factor_ex (with check_errors=False) or linalg.lu factor such matrices "
                           "without raising.")


def lu_factor_ex(A, *, pivot=True, check_errors=False):
    """(LU, pivots, info): LAPACK getrf's packed factorisation; info > 0 marks a zero pivot U[info, info]."""
    op = "linalg.lu_factor_ex"
    A = _lu_input(op, A)
    _check_pivot(op, pivot)
    L, U, piv, info = _lu_parts(A)
    if _bool_arg(check_errors, op, "check_errors"):
        _raise_zero_pivot(op, info)
    return return_linalg_lu_factor_ex(_pack(L, U), piv, _info_tensor(info))


def lu_factor(A, *, pivot=True):
    """(LU, pivots) of linalg.lu_factor_ex; a zero pivot raises."""
    op = "linalg.lu_factor"
    A = _lu_input(op, A)
    _check_pivot(op, pivot)
    L, U, piv, info = _lu_parts(A)
    _raise_zero_pivot(op, info)
    return return_linalg_lu_factor(_pack(L, U), piv)


def torch_lu(A, pivot=True, get_infos=False):
    """torch.lu (deprecated by torch): (LU, pivots), or (LU, pivots, info) with get_infos; never raises on a
    singular matrix."""
    op = "lu"
    A = _lu_input(op, A)
    warn_deprecated("torch.lu is deprecated in favour of linalg.lu_factor and linalg.lu_factor_ex: LU, pivots = "
                "lu(A, pivot) is linalg.lu_factor(A, pivot=pivot), and lu(A, pivot, get_infos=True) is "
                "linalg.lu_factor_ex(A, pivot=pivot).")
    _check_pivot(op, pivot)
    L, U, piv, info = _lu_parts(A)
    if _bool_arg(get_infos, op, "get_infos"):
        return return_lu_with_info(_pack(L, U), piv, _info_tensor(info))
    return _pack(L, U), piv


def _pivots(op, LU, pivots, name="pivots"):
    """pivots checked against LU: int32, shape LU's batch + (min(m, n),), values in 1..m."""
    pivots = tensor_arg(pivots, op, name)
    if pivots.dtype.name != "int32":
        raise RuntimeError(f"{op}: {name} must be an int32 tensor (as linalg.lu_factor returns it), got "
                           f"{pivots.dtype.name}.")
    m, n = LU.shape[-2], LU.shape[-1]
    if tuple(pivots.shape) != tuple(LU.shape[:-2]) + (min(m, n),):
        raise RuntimeError(f"{op}: {name} must have shape {shape_str(tuple(LU.shape[:-2]) + (min(m, n),))} for LU "
                           f"of shape {shape_str(LU.shape)}, got {shape_str(pivots.shape)}.")
    p = _np(pivots)
    if p.size and (p.min() < 1 or p.max() > m):
        raise RuntimeError(f"{op}: {name} must be between 1 and LU.size(-2) = {m} inclusive (did they come from "
                           "linalg.lu_factor?).")
    return p


def lu_unpack(LU_data, LU_pivots, unpack_data=True, unpack_pivots=True):
    """(P, L, U) from linalg.lu_factor's (LU, pivots); L and U are empty unless unpack_data, P unless
    unpack_pivots. L and U are differentiable in LU_data."""
    op = "lu_unpack"
    LU = tensor_arg(LU_data, op, "LU_data")
    if LU.ndim < 2:
        raise RuntimeError(f"{op}: LU_data must have at least 2 dimensions, got shape {shape_str(LU.shape)}.")
    _float_input(op, LU, "LU_data", not_implemented=True, complex_ok=True)
    unpack_data = _bool_arg(unpack_data, op, "unpack_data")
    unpack_pivots = _bool_arg(unpack_pivots, op, "unpack_pivots")
    p = _pivots(op, LU, LU_pivots, "LU_pivots")
    m, n = LU.shape[-2], LU.shape[-1]
    k = min(m, n)
    empty = _from_np(np.zeros(0), LU.dtype)
    P = _from_np(hl.permutation_matrix(p, m, np.float64), LU.dtype) if unpack_pivots else empty
    if not unpack_data:
        return return_lu_unpack(P, empty, _from_np(np.zeros(0), LU.dtype))
    return return_lu_unpack(P, _unit_lower(LU, k), _upper(LU, k))


def _lu_solve(op, LU, pivots, B, left, adjoint):
    LU = tensor_arg(LU, op, "LU")
    B = tensor_arg(B, op, "B")
    _float_input(op, LU, "LU", complex_ok=True)
    _float_input(op, B, "B", complex_ok=True)
    if LU.ndim < 2 or LU.shape[-1] != LU.shape[-2]:
        raise RuntimeError(f"{op}: LU must be a batch of square matrices, got shape {shape_str(LU.shape)}.")
    if B.ndim < 2:
        raise RuntimeError(f"{op}: B must have at least 2 dimensions, got shape {shape_str(B.shape)}.")
    _same_float_dtype(op, LU, B)
    _no_half(op, LU)
    p = _pivots(op, LU, pivots)
    n = LU.shape[-1]
    if (B.shape[-2] if left else B.shape[-1]) != n:
        raise RuntimeError(f"{op}: incompatible shapes of LU ({shape_str(LU.shape)}) and B ({shape_str(B.shape)}) "
                           f"for {'A X = B' if left else 'X A = B'}.")
    L, U = _unit_lower(LU, n), _upper(LU, n)
    P = _const(hl.permutation_matrix(p, n, np.float64), LU)
    if not left:                          # X A = B  <=>  A^H X^H = B^H (and X A^H = B <=> A X^H = B^H)
        return _mH(_lu_solve_left(L, U, P, _mH(B), not adjoint))
    return _lu_solve_left(L, U, P, B, adjoint)


def _lu_solve_left(L, U, P, B, adjoint):
    """A X = B with A = P L U, or A^H X = B if adjoint, by triangular solves (differentiable in L, U and B)."""
    batch = _broadcast_batch(L, B)
    L, U, P, B = (_expand_batch(t, batch) for t in (L, U, P, B))
    if not adjoint:                      # X = U^-1 L^-1 P^T B
        Y = LinalgSolveTriangular.apply(L, _mm(_C.mT(P), B), False, True)
        return LinalgSolveTriangular.apply(U, Y, True, False)
    Y = LinalgSolveTriangular.apply(_mH(U), B, False, False)            # X = P L^-H U^-H B
    return _mm(P, LinalgSolveTriangular.apply(_mH(L), Y, True, True))


def _broadcast_batch(A, B):
    return tuple(broadcast_shapes(A.shape[:-2], B.shape[:-2], "linalg.lu_solve"))


def _expand_batch(t, batch):
    shape = tuple(batch) + tuple(t.shape[-2:])
    return t if tuple(t.shape) == shape else _C.expand(t, shape)


def lu_solve(LU, pivots, B, *, left=True, adjoint=False):
    """X with A X = B (X A = B if not left; A^T instead of A if adjoint), A given by linalg.lu_factor's (LU,
    pivots). A zero pivot gives infs and NaNs, not an error."""
    op = "linalg.lu_solve"
    return _lu_solve(op, LU, pivots, B, _bool_arg(left, op, "left"), _bool_arg(adjoint, op, "adjoint"))


def torch_lu_solve(b, LU_data, LU_pivots):
    """torch.lu_solve (deprecated by torch): linalg.lu_solve with the arguments in another order."""
    op = "lu_solve"
    b = tensor_arg(b, op, "b")
    warn_deprecated("torch.lu_solve is deprecated in favour of linalg.lu_solve, which takes its arguments in another "
                "order: X = lu_solve(B, LU, pivots) is linalg.lu_solve(LU, pivots, B).")
    return _lu_solve(op, LU_data, LU_pivots, b, True, False)


def solve_ex(A, B, *, left=True, check_errors=False):
    """(result, info) of linalg.solve; info > 0 marks a singular matrix (its result is then that of the LU solve:
    infs and NaNs) instead of raising, unless check_errors."""
    op = "linalg.solve_ex"
    left, check_errors = _bool_arg(left, op, "left"), _bool_arg(check_errors, op, "check_errors")
    A0, Bm, vector = _solve_operands(op, A, B, left)
    _no_half(op, A0)
    _, _, info = hl.getrf(_np(A0))
    if np.any(info):
        if check_errors:
            raise LinAlgError(f"{op}: {_where_batch(info)[1]}the solver failed because the input matrix is "
                              "singular.")
        L, U, piv, _ = _lu_parts(A0)
        P = _const(hl.permutation_matrix(_np(piv), A0.shape[-1], np.float64), A0)
        X = _lu_solve_left(L, U, P, Bm, False) if left else _mH(_lu_solve_left(L, U, P, _mH(Bm), True))
        X = _C.squeeze(X, (-1,)) if vector else X
    else:
        X = solve(A, B, left=left)
    return return_linalg_solve_ex(X, _info_tensor(info))


# ===== matrix_exp =================================================================================================


class MatrixExp(Function):
    """linalg.matrix_exp: Note [matrix_exp] in host/linalg.py."""

    @staticmethod
    def forward(ctx, A):
        ctx.save_for_backward(A)
        return _from_np(hl.expm(_np(A)), A.dtype)

    # The Frechet derivative of exp at A in the direction E is the upper-right block of exp([[A, E], [0, A]]); its
    # adjoint is the derivative at A^H: gA = upper-right block of exp([[A^H, g], [0, A^H]]) (as torch's).
    @staticmethod
    def backward(ctx, g):
        (A,) = ctx.saved_tensors
        n = A.shape[-1]
        At = _mH(A)
        top = _C.cat([At, g], -1)
        bottom = _C.cat([_zeros_like(At), At], -1)
        big = MatrixExp.apply(_C.cat([top, bottom], -2))
        return _C.slice(_C.slice(big, -2, 0, n, 1), -1, n, 2 * n, 1)

    # The Frechet derivative itself: the upper-right block of exp([[A, dA], [0, A]]) (torch's
    # differential_analytic_matrix_function)
    @staticmethod
    def jvp(ctx, tA):
        (A,) = ctx.saved_tensors
        A = _jvp_primal(ctx, A)
        n = A.shape[-1]
        top = _C.cat([A, tA], -1)
        bottom = _C.cat([_zeros_like(A), A], -1)
        big = MatrixExp.apply(_C.cat([top, bottom], -2))
        return _C.slice(_C.slice(big, -2, 0, n, 1), -1, n, 2 * n, 1)


def matrix_exp(A):
    """The matrix exponential sum_k A^k / k! of square matrices."""
    A = tensor_arg(A, "linalg.matrix_exp", "A")
    if not A.dtype.is_floating_point and not A.dtype.is_complex:
        raise RuntimeError(f"linalg.matrix_exp: expected a floating-point tensor as A, got {A.dtype.name}.")
    A = _matrices("linalg.matrix_exp", A, complex_ok=True)
    if A.dtype.name in ("float16", "bfloat16"):        # computed in float32 and rounded, as numpy has no bfloat16
        return _C.to_dtype(MatrixExp.apply(_C.to_dtype(A, _C.float32)), A.dtype)
    return MatrixExp.apply(A)


# ===== householder_product (orgqr) ================================================================================

def householder_product(A, tau):
    """The first n columns of H_1 ... H_k, H_i = I - tau_i v_i v_i^H, v_i = (0, ..., 0, 1, A[i+1:, i]) (LAPACK
    orgqr, ungqr for complex A: Q from geqrf's output). A composite, so differentiable in A and tau."""
    op = "linalg.householder_product"
    A = tensor_arg(A, op, "A")
    tau = tensor_arg(tau, op, "tau")
    if A.ndim < 2:
        raise RuntimeError(f"{op}: A must have at least 2 dimensions, got shape {shape_str(A.shape)}.")
    if A.shape[-2] < A.shape[-1]:
        raise RuntimeError(f"{op}: A.shape[-2] must be greater than or equal to A.shape[-1], got "
                           f"{shape_str(A.shape)}.")
    if tau.ndim != A.ndim - 1:
        raise RuntimeError(f"{op}: expected tau to have one dimension less than A, got tau of shape "
                           f"{shape_str(tau.shape)} and A of shape {shape_str(A.shape)}.")
    if tau.shape[-1] > A.shape[-1]:
        raise RuntimeError(f"{op}: A.shape[-1] must be greater than or equal to tau.shape[-1], got "
                           f"{shape_str(A.shape)} and {shape_str(tau.shape)}.")
    if tuple(tau.shape[:-1]) != tuple(A.shape[:-2]):
        raise RuntimeError(f"{op}: expected the batch dimensions of tau, {shape_str(tau.shape[:-1])}, to equal "
                           f"those of A, {shape_str(A.shape[:-2])}.")
    _float_input(op, A, "A", complex_ok=True)
    _float_input(op, tau, "tau", complex_ok=True)
    _no_half(op, A)
    if A.dtype is not tau.dtype:
        raise RuntimeError(f"{op}: expected A and tau of the same dtype, got {A.dtype.name} and {tau.dtype.name}.")
    m, n, k = A.shape[-2], A.shape[-1], tau.shape[-1]
    Q = _const(np.broadcast_to(np.eye(m, n), tuple(A.shape[:-2]) + (m, n)), A)
    for i in range(k - 1, -1, -1):           # Q = H_i Q, from the last reflector to the first
        v, t = _reflector(A, tau, i)         # (*, m, 1), (*, 1, 1)
        Q = _C.sub(Q, _C.mul(t, _mm(v, _mm(_mH(v), Q))))
    return Q


def orgqr(input, tau):
    return householder_product(input, tau)


def _reflector(A, tau, i):
    """(v_i as a column (*, m, 1), tau_i as (*, 1, 1)) of geqrf's representation (A, tau)."""
    m = A.shape[-2]
    below = _const((np.arange(m) > i).astype(np.float64), A)
    v = _C.add(_C.mul(_C.select(A, -1, i), below), _const((np.arange(m) == i).astype(np.float64), A))
    return _C.unsqueeze(v, -1), _C.unsqueeze(_C.unsqueeze(_C.select(tau, -1, i), -1), -1)


def ormqr(input, tau, other, left=True, transpose=False):
    """op(Q) C (C op(Q) if not left), Q = H_1 ... H_k given by geqrf's (input, tau), op(Q) = Q^H if transpose
    (the conjugate transpose, as LAPACK unmqr's 'C' and torch), else Q; each H_i = I - tau_i v_i v_i^H (its
    adjoint has conj(tau_i)) is applied in turn (a composite: differentiable in all three)."""
    op = "ormqr"
    A, tau, C = tensor_arg(input, op, "input"), tensor_arg(tau, op, "tau"), tensor_arg(other, op, "other")
    left, transpose = _bool_arg(left, op, "left"), _bool_arg(transpose, op, "transpose")
    for t, name in ((A, "input"), (tau, "tau"), (C, "other")):
        _float_input(op, t, name, complex_ok=True)
    _no_half(op, A, C)
    if A.ndim < 2 or C.ndim < 2:
        raise RuntimeError(f"{op}: input and other must have at least 2 dimensions, got {shape_str(A.shape)} and "
                           f"{shape_str(C.shape)}.")
    if tau.ndim != A.ndim - 1 or C.ndim != A.ndim:
        raise RuntimeError(f"{op}: expected tau with one dimension less than input and other with as many, got "
                           f"{shape_str(tau.shape)}, {shape_str(A.shape)} and {shape_str(C.shape)}.")
    mn = C.shape[-2] if left else C.shape[-1]
    if A.shape[-2] != mn:
        raise RuntimeError(f"{op}: input.shape[-2] must equal other.shape[{-2 if left else -1}] = {mn}, got "
                           f"{A.shape[-2]}.")
    if tau.shape[-1] != min(mn, A.shape[-1]):
        raise RuntimeError(f"{op}: tau.shape[-1] must equal min(other.shape[{-2 if left else -1}], input.shape[-1]) "
                           f"= {min(mn, A.shape[-1])}, got {tau.shape[-1]}.")
    if tuple(tau.shape[:-1]) != tuple(A.shape[:-2]) or tuple(C.shape[:-2]) != tuple(A.shape[:-2]):
        raise RuntimeError(f"{op}: expected the same batch dimensions, got input {shape_str(A.shape)}, tau "
                           f"{shape_str(tau.shape)} and other {shape_str(C.shape)}.")
    if A.dtype is not tau.dtype or A.dtype is not C.dtype:
        raise RuntimeError(f"{op}: expected input, tau and other of the same dtype, got {A.dtype.name}, "
                           f"{tau.dtype.name} and {C.dtype.name}.")
    k = tau.shape[-1]
    # Q C = H_1 (H_2 (... H_k C)), Q^H C = H_k^H ... H_1^H C; C Q = C H_1 ... H_k, C Q^H = C H_k^H ... H_1^H
    order = range(k - 1, -1, -1) if left != transpose else range(k)
    out = C
    for i in order:
        v, t = _reflector(A, tau, i)
        if transpose:
            t = _conj(t)
        if left:
            out = _C.sub(out, _C.mul(t, _mm(v, _mm(_mH(v), out))))
        else:
            out = _C.sub(out, _C.mul(t, _mm(_mm(out, v), _mH(v))))
    return out


return_geqrf = _named("geqrf", ["a", "tau"])


def geqrf(input):
    """LAPACK geqrf's (a, tau) (zgeqrf's for complex input): R on and above a's diagonal, the Householder vectors
    below it (numpy.linalg.qr's 'raw' mode); not differentiable, as torch."""
    op = "geqrf"
    A = tensor_arg(input, op)
    if A.ndim < 2:
        raise RuntimeError(f"{op}: input must have at least 2 dimensions, got shape {shape_str(A.shape)}.")
    _float_input(op, A, "input", complex_ok=True)
    _no_half(op, A)
    a = _np(A)
    m, n = a.shape[-2:]
    if a.size == 0:
        h, tau = np.zeros(a.shape, a.dtype), np.zeros(a.shape[:-2] + (min(m, n),), a.dtype)
    else:
        h, tau = np.linalg.qr(a, mode="raw")
        h = np.swapaxes(h, -1, -2)
    name = "geqrf"
    return return_geqrf(_without_derivative(name, h, A.dtype, A, error=NotImplementedError),
                        _without_derivative(name, tau, A.dtype, A, error=NotImplementedError))


# ===== LDL (Bunch-Kaufman) ========================================================================================


class _NoDerivative(Function):
    """An op that torch does not differentiate: its output is made inside forward from a numpy array, so that it has a
    node linked to the inputs, whose backward raises as torch's does."""

    @staticmethod
    def forward(ctx, name, error, array, dtype, *inputs):
        ctx.name, ctx.error = name, error
        return _from_np(array, dtype)

    @staticmethod
    def backward(ctx, *grads):
        raise ctx.error(f"the derivative for {ctx.name} is not implemented (as in torch).")

    # torch has no forward-mode derivative of these either (NotImplementedError), rather than a zero tangent
    @staticmethod
    def jvp(ctx, *tangents):
        raise NotImplementedError(f"the forward-mode derivative for {ctx.name} is not implemented (as in torch).")


def _without_derivative(name, array, dtype, *inputs, error=RuntimeError):
    """A tensor holding `array`: with a node whose backward raises `error` when an input requires grad, and whose
    jvp raises when an input carries a tangent (forward-mode AD)."""
    if any(_differentiated(t) for t in inputs):
        return _NoDerivative.apply(name, error, array, dtype, *inputs)
    return _from_np(array, dtype)


def _ldl_input(op, A, hermitian):
    """A and hermitian: a complex A is factored as Hermitian (LAPACK hetrf) if hermitian, else as complex symmetric
    (sytrf), as torch; for a real A the switch changes nothing."""
    A = _matrices(op, A, not_implemented=False, complex_ok=True)
    hermitian = _bool_arg(hermitian, op, "hermitian")
    _no_half(op, A)
    return A, hermitian


def ldl_factor_ex(A, *, hermitian=False, check_errors=False):
    """(LD, pivots, info) of LAPACK sytrf (Note [LDL in numpy] in host/linalg.py); info > 0 marks a zero 1x1 block D[info, info]."""
    op = "linalg.ldl_factor_ex"
    A, hermitian = _ldl_input(op, A, hermitian)
    ld, piv, info = hl.ldl(_np(A), hermitian)
    if _bool_arg(check_errors, op, "check_errors"):
        _raise_singular_d(op, info)
    LD = _without_derivative("linalg.ldl_factor_ex", ld, A.dtype, A)
    return return_linalg_ldl_factor_ex(LD, bridge.share(np.asarray(piv, order="C")), _info_tensor(info))


def _raise_singular_d(op, info):
    if np.any(info):
        k, where = _where_batch(info)
        j = int(np.asarray(info).reshape(-1)[k])
        raise LinAlgError(f"{op}: {where}the factorization found D[{j},{j}] exactly zero: the matrix is singular.")


def ldl_factor(A, *, hermitian=False):
    """(LD, pivots) of linalg.ldl_factor_ex; a singular matrix raises LinAlgError."""
    op = "linalg.ldl_factor"
    A, hermitian = _ldl_input(op, A, hermitian)
    ld, piv, info = hl.ldl(_np(A), hermitian)
    _raise_singular_d(op, info)
    LD = _without_derivative("linalg.ldl_factor_ex", ld, A.dtype, A)
    return return_linalg_ldl_factor(LD, bridge.share(np.asarray(piv, order="C")))


def ldl_solve(LD, pivots, B, *, hermitian=False):
    """X with A X = B, A given by linalg.ldl_factor's (LD, pivots)."""
    op = "linalg.ldl_solve"
    LD = _matrices(op, LD, "LD", complex_ok=True)
    B = tensor_arg(B, op, "B")
    _float_input(op, B, "B", complex_ok=True)
    hermitian = _bool_arg(hermitian, op, "hermitian")
    if B.ndim < 2:
        raise RuntimeError(f"{op}: B must have at least 2 dimensions, got shape {shape_str(B.shape)}.")
    _same_float_dtype(op, LD, B)
    _no_half(op, LD)
    pivots = tensor_arg(pivots, op, "pivots")
    n = LD.shape[-1]
    if pivots.dtype.name != "int32" or tuple(pivots.shape) != tuple(LD.shape[:-1]):
        raise RuntimeError(f"{op}: pivots must be an int32 tensor of shape {shape_str(LD.shape[:-1])}, got "
                           f"{pivots.dtype.name} of shape {shape_str(pivots.shape)}.")
    if B.shape[-2] != n:
        raise RuntimeError(f"{op}: incompatible shapes of LD ({shape_str(LD.shape)}) and B ({shape_str(B.shape)}).")
    p = _np(pivots)
    if p.size and (np.abs(p).min() < 1 or np.abs(p).max() > n):
        raise RuntimeError(f"{op}: pivots must be between 1 and {n} in absolute value (did they come from "
                           "linalg.ldl_factor?).")
    batch = _broadcast_batch(LD, B)
    count = int(np.prod(batch, dtype=np.int64))        # explicit: -1 is ambiguous for empty matrices
    ld = np.broadcast_to(_np(LD), tuple(batch) + (n, n)).reshape(count, n, n)
    pv = np.broadcast_to(p, tuple(batch) + (n,)).reshape(count, n)
    b = np.broadcast_to(_np(B), tuple(batch) + tuple(B.shape[-2:])).reshape((count,) + tuple(B.shape[-2:]))
    wide = np.complex128 if LD.dtype.is_complex else np.float64
    out = np.empty(b.shape, dtype=wide)
    with np.errstate(all="ignore"):
        for i in range(b.shape[0]):
            out[i] = hl.sytrs(ld[i].astype(wide), pv[i], b[i].astype(wide), hermitian)
    return _without_derivative("linalg.ldl_solve", out.reshape(tuple(batch) + tuple(B.shape[-2:])), B.dtype, LD, B)


# ===== tensorinv, tensorsolve, vander (composites) ================================================================

def _prod(shape):
    out = 1
    for s in shape:
        out *= int(s)
    return out


def tensorinv(A, ind=2):
    """The inverse of A seen as a linear map from its dims ind: to its dims :ind: shape A.shape[ind:] +
    A.shape[:ind]."""
    op = "linalg.tensorinv"
    A = tensor_arg(A, op, "A")
    ind = to_int(ind, op, "ind")
    if ind <= 0:
        raise RuntimeError(f"{op}: expected a strictly positive integer for ind, got {ind}.")
    rows, cols = _prod(A.shape[:ind]), _prod(A.shape[ind:])
    if rows != cols:
        raise RuntimeError(f"{op}: expected prod(A.shape[ind:]) == prod(A.shape[:ind]), got {cols} != {rows} for "
                           f"A of shape {shape_str(A.shape)} and ind={ind}.")
    X = inv(_C.reshape(A, (rows, cols)))
    return _C.reshape(X, tuple(A.shape[ind:]) + tuple(A.shape[:ind]))


def tensorsolve(A, B, dims=None):
    """X with tensordot(A, X, X.ndim) = B: X has shape A.shape[B.ndim:] (after moving A's dims `dims` to the
    end)."""
    op = "linalg.tensorsolve"
    A, B = tensor_arg(A, op, "A"), tensor_arg(B, op, "B")
    if dims is not None:
        dims = [dims] if isinstance(dims, int) else list(dims)
        moved = [wrap_dim(to_int(d, op, "dims"), A.ndim, op) for d in dims]
        keep = [d for d in range(A.ndim) if d not in moved]
        A = _C.permute(A, tuple(keep + moved))
    rest = tuple(A.shape[B.ndim:])
    rows, cols = _prod(A.shape[:B.ndim]), _prod(rest)
    if rows != cols or B.ndim > A.ndim:
        raise RuntimeError(f"{op}: expected prod(A.shape[B.ndim:]) == prod(A.shape[:B.ndim]), got {cols} != {rows} "
                           f"for A of shape {shape_str(A.shape)} and B of shape {shape_str(B.shape)}.")
    if _prod(B.shape) != rows:
        raise RuntimeError(f"{op}: B of shape {shape_str(B.shape)} has {_prod(B.shape)} elements, expected {rows}.")
    X = solve(_C.reshape(A, (rows, cols)), _C.reshape(B, (rows,)))
    return _C.reshape(X, rest)


def _powers(x, N, op):
    """[x^0, x^1, ..., x^(N-1)] on a new last dim: ones, then the running product of N - 1 copies of x (as torch;
    exact for integers, and cumprod's gradient is exact at zeros)."""
    one = _C.unsqueeze(_C.add(_C.mul(x, _C.scalar_operand(0, x)), _C.scalar_operand(1, x)), -1)
    if N == 1:
        return one
    copies = _C.expand(_C.unsqueeze(x, -1), tuple(x.shape) + (N - 1,))
    return _C.cat([one, cumprod(copies, -1)], -1)


def vander(x, *, N=None):
    """linalg.vander: x[..., None] ** [0, 1, ..., N-1] (N defaults to x.shape[-1]; increasing powers)."""
    op = "linalg.vander"
    x = tensor_arg(x, op, "x")
    if x.dtype.name in ("bool", "float16", "bfloat16"):
        raise RuntimeError(f"{op}: supports float32, float64 and integer tensors, got {x.dtype.name}.")
    if x.ndim == 0:
        x = _C.reshape(x, (1,))         # torch takes a 0-d x as one sample: the result is (1, N)
    if N is None:
        N = x.shape[-1]
    N = to_int(N, op, "N")
    if N <= 1:
        raise RuntimeError(f"{op}: N must be greater than 1, got {N}.")
    return _powers(x, N, op)


def torch_vander(x, N=None, increasing=False):
    """torch.vander: the powers x^(N-1), ..., x^0 of a 1-D x (increasing: x^0 first); bool x counts as int64."""
    op = "vander"
    x = tensor_arg(x, op, "x")
    if x.ndim != 1:
        raise RuntimeError(f"{op}: x must be a one-dimensional tensor, got shape {shape_str(x.shape)}.")
    if x.dtype.name == "bool" or not x.dtype.is_floating_point and x.dtype.name != "int64":
        x = _C.to_dtype(x, _C.int64)
    N = x.shape[0] if N is None else to_int(N, op, "N")
    if N < 0:
        raise RuntimeError(f"{op}: N must be non-negative, got {N}.")
    if x.dtype.name == "bfloat16":            # numpy has no bfloat16: the products in float32, rounded once
        return _C.to_dtype(torch_vander(_C.to_dtype(x, _C.float32), N, increasing), x.dtype)
    if N == 0:
        return bridge.share(np.zeros((x.shape[0], 0), dtype=_np(x).dtype))
    out = _powers(x, N, op)
    if not _bool_arg(increasing, op, "increasing"):
        out = _C.index_select(out, -1, bridge.share(np.arange(N - 1, -1, -1, dtype=np.int64)))
    return out


# ===== torch's Cholesky and triangular solvers (composites over linalg.solve_triangular) =========================

return_triangular_solve = _named("triangular_solve", ["solution", "cloned_coefficient"])


def _at_least_2d(op, t, name):
    t = tensor_arg(t, op, name)
    if t.ndim < 2:
        raise RuntimeError(f"{op}: {name} must have at least 2 dimensions, got shape {shape_str(t.shape)}.")
    return t


class CholeskySolve(Function):
    """X = A^-1 B with A = L L^T (U^T U if upper), reading only L's lower (U's upper) triangle: LAPACK potrs."""

    @staticmethod
    def forward(ctx, B, L, upper):
        l, b = _np(L), _np(B)
        lh = np.conj(np.swapaxes(l, -1, -2))
        if upper:                                  # A = U^H U: U^H Y = B, then U X = Y
            y = _lapack_solve_triangular(lh.copy(), b, False, False)
            x = _lapack_solve_triangular(l.copy(), y, True, False)
        else:                                      # A = L L^H: L Y = B, then L^H X = Y
            y = _lapack_solve_triangular(l.copy(), b, False, False)
            x = _lapack_solve_triangular(lh.copy(), y, True, False)
        X = _from_np(x, B.dtype)
        ctx.upper = upper
        ctx.save_for_backward(B, L, X.detach())
        return X

    # X = A^-1 B, A = L L^H: gB = A^-1 g (A is Hermitian), gA = -gB X^H, and dA = dL L^H + L dL^H gives
    # gL = (gA + gA^H) L = -(gB X^H + X gB^H) L; for A = U^H U, gU = -U (gB X^H + X gB^H). As torch, this is the
    # gradient of the formula in the whole of L (the forward reads one triangle).
    @staticmethod
    def backward(ctx, g):
        B, L, X = ctx.saved_tensors
        gB = CholeskySolve.apply(g, L, ctx.upper)
        if not ctx.needs_input_grad[1]:
            return gB, None, None
        if _again_for_backward(B, L):
            X = CholeskySolve.apply(B, L, ctx.upper)
        common = _mm(gB, _mH(X))
        common = _C.add(common, _mH(common))
        gL = _C.neg(_mm(L, common) if ctx.upper else _mm(common, L))
        return gB, gL, None

    # dX = A^-1 (dB - dA X), dA = dL L^H + L dL^H (dU^H U + U^H dU if upper): torch's cholesky_solve_jvp, the
    # whole of dL entering (as the backward's gradient)
    @staticmethod
    def jvp(ctx, tB, tL, _):
        B, L, X = ctx.saved_tensors
        B, L = _jvp_primal(ctx, B), _jvp_primal(ctx, L)
        if _again_for_jvp(ctx, B, L):
            X = CholeskySolve.apply(B, L, ctx.upper)
        half = _mm(_mH(tL), L) if ctx.upper else _mm(tL, _mH(L))
        dA = _C.add(half, _mH(half))
        return CholeskySolve.apply(_C.sub(tB, _mm(dA, X)), L, ctx.upper)


def cholesky_solve(input, input2, upper=False):
    """X with A X = input, A = L L^T given by its Cholesky factor input2 = L (or A = U^T U, input2 = U, if upper)."""
    op = "cholesky_solve"
    B, L = _at_least_2d(op, input, "input"), _at_least_2d(op, input2, "input2")
    _float_input(op, B, "input", complex_ok=True)
    _float_input(op, L, "input2", complex_ok=True)
    if L.shape[-1] != L.shape[-2]:
        raise RuntimeError(f"{op}: input2 must be a batch of square matrices, got shape {shape_str(L.shape)}.")
    if B.shape[-2] != L.shape[-1]:
        raise RuntimeError(f"{op}: incompatible shapes of input {shape_str(B.shape)} and input2 "
                           f"{shape_str(L.shape)}.")
    if B.dtype is not L.dtype:
        raise RuntimeError(f"{op}: expected input and input2 of the same dtype, got {B.dtype.name} and "
                           f"{L.dtype.name}.")
    _no_half(op, L)
    batch = tuple(broadcast_shapes(B.shape[:-2], L.shape[:-2], op))
    return CholeskySolve.apply(_expand_batch(B, batch), _expand_batch(L, batch), _bool_arg(upper, op, "upper"))


def cholesky_inverse(input, upper=False):
    """(L L^T)^-1 from the Cholesky factor L = input ((U^T U)^-1 if upper)."""
    op = "cholesky_inverse"
    L = _at_least_2d(op, input, "input")
    _float_input(op, L, "input", complex_ok=True)
    _no_half(op, L)
    if L.shape[-1] != L.shape[-2]:
        raise RuntimeError(f"{op}: input must be a batch of square matrices, got shape {shape_str(L.shape)}.")
    return cholesky_solve(_const(np.broadcast_to(np.eye(L.shape[-1]), tuple(L.shape)), L), L, upper)


def triangular_solve(input, A, upper=True, transpose=False, unitriangular=False):
    """torch.triangular_solve (deprecated by torch): (X, A's copy) with A X = input (A^T X = input if transpose),
    reading A's upper (or lower) triangle."""
    op = "triangular_solve"
    b, A = _at_least_2d(op, input, "input"), _at_least_2d(op, A, "A")
    warn_deprecated("torch.triangular_solve is deprecated in favour of linalg.solve_triangular, which takes its arguments "
                "in the other order and returns no copy of A: X = triangular_solve(B, A).solution is "
                "linalg.solve_triangular(A, B, upper=True).")
    upper, transpose = _bool_arg(upper, op, "upper"), _bool_arg(transpose, op, "transpose")
    _no_half(op, A, b)
    unitriangular = _bool_arg(unitriangular, op, "unitriangular")
    M = _C.mT(A) if transpose else A
    X = solve_triangular(M, b, upper=upper != transpose, unitriangular=unitriangular)
    return return_triangular_solve(X, _C.mul(A, _C.scalar_operand(1, A)))


# ----- randomised low-rank factorisations (torch.svd_lowrank, torch.pca_lowrank) ---------------------------------

# Note [Randomised low-rank SVD]: Halko, Martinsson and Tropp (2009), algorithms 4.4 and 5.1, as torch computes them:
# a random Gaussian test matrix R (n x q) sketches the range of A (X = A R, Q = qr(X).Q); `niter` power iterations
# (Q = qr(A^H Q).Q, Q = qr(A Q).Q) sharpen it; then the small B = Q^H A (q x n) has an exact SVD, B = U_B S V^H,
# and A ~ (Q U_B) S V^H. A wide A is factorised as its conjugate transpose (the sketch is then of the shorter side);
# a complex A gets a complex Gaussian R (randn's: real and imaginary parts of variance 1/2, as torch's). Every
# step is a differentiable op (matmul, linalg.qr, linalg.svd), so gradients flow as torch's do; the random draws
# come from dyngrad's generator, so U, S, V equal torch's for a matrix of rank <= q (up to the signs of U's and V's
# columns), and are another random approximation otherwise.

def _lowrank_basis(A, q, niter, M):
    """An orthonormal (..., m, q) basis approximating A's range (M, if given, is subtracted from A first)."""
    def times(X, MX, Y):             # (X - MX) Y without forming X - MX
        return _C.matmul(X, Y) if MX is None else _C.sub(_C.matmul(X, Y), _C.matmul(MX, Y))
    At, Mt = _mH(A), None if M is None else _mH(M)
    Q = linalg_qr(times(A, M, randn(A.shape[-1], q, dtype=A.dtype)))[0]
    for _ in range(niter):
        Q = linalg_qr(times(At, Mt, Q))[0]
        Q = linalg_qr(times(A, M, Q))[0]
    return Q


def _checked_rank(op, q, default, m, n):
    q = default if q is None else to_int(q, op, "q")
    if not 0 <= q <= min(m, n):
        raise ValueError(f"{op}: q(={q}) must be non-negative integer and not greater than min(m, n)={min(m, n)}.")
    return q


def svd_lowrank(A, q=6, niter=2, M=None):
    """(U, S, V) with A ~ U diag(S) V^H of rank q, by a randomised range finder (Note [Randomised low-rank SVD]);
    M, if given, is subtracted from A (broadcast to A's shape) first."""
    op = "svd_lowrank"
    A = _matrices(op, A, square=False, complex_ok=True)
    m, n = A.shape[-2], A.shape[-1]
    q = 6 if q is None else to_int(q, op, "q")
    niter = 2 if niter is None else to_int(niter, op, "niter")
    if niter < 0:
        raise ValueError(f"{op}: niter must be >= 0, got {niter}.")
    if M is not None:
        M = _C.expand(tensor_arg(M, op, "M"), list(A.shape))
    wide = m < n
    if wide:
        A = _mH(A)
        M = None if M is None else _mH(M)
    Q = _lowrank_basis(A, q, niter, M)
    B = _C.matmul(_mH(Q), A)
    if M is not None:
        B = _C.sub(B, _C.matmul(_mH(Q), M))
    U, S, Vh = linalg_svd(B, full_matrices=False)
    U, V = _C.matmul(Q, U), _mH(Vh)
    return (V, S, U) if wide else (U, S, V)


def pca_lowrank(A, q=None, center=True, niter=2):
    """(U, S, V) of a principal component analysis of the rows of A: svd_lowrank of A minus its column means
    (center=True), q defaulting to min(6, m, n)."""
    op = "pca_lowrank"
    A = _matrices(op, A, square=False, complex_ok=True)
    m, n = A.shape[-2], A.shape[-1]
    q = _checked_rank(op, q, min(6, m, n), m, n)
    niter = to_int(niter, op, "niter")
    if niter < 0:
        raise ValueError(f"{op}: niter must be >= 0, got {niter}.")
    if center:
        A = _C.sub(A, _C.mean(A, [-2], True))
    return svd_lowrank(A, q, niter)
