"""More of torch.linalg (and the top-level names torch has for them): eig/eigvals, the LU family (lu, lu_factor,
lu_factor_ex, lu_solve, lu_unpack, torch.lu, torch.lu_solve), solve_ex, matrix_exp, householder_product (orgqr)
with geqrf and ormqr, the LDL family (ldl_factor, ldl_factor_ex, ldl_solve), tensorinv, tensorsolve, vander
(linalg's and torch's), and torch's cholesky_solve, cholesky_inverse and triangular_solve.

Written as linalg.py's factorisations are: a forward in numpy inside a custom Function whose backward is written
with dyngrad ops (Note [Outputs in linalg backwards] in linalg.py), or a composite of existing differentiable ops
(lu_solve, lu_unpack, householder_product, ormqr, tensorinv, tensorsolve, vander, triangular_solve), which then
differentiates itself. geqrf and the LDL family have no derivative, as torch: their results carry a node whose
backward raises torch's error.

Note [No complex dtype in eig]: a real matrix can have complex eigenvalues, and torch.linalg.eig/eigvals always
return complex tensors. dyngrad has no complex dtype. We return the real eigenvalues and eigenvectors (in A's real
dtype: the values equal torch's, whose imaginary parts are then exactly zero, as LAPACK geev returns them) when
every eigenvalue of every matrix is real, and raise NotImplementedError naming the missing complex support when
one is not. Imaginary parts are never dropped.
"""
import math
from fractions import Fraction

import numpy as np

from ... import _C
from ...autograd.function import Function
from ..args import broadcast_shapes, shape_str, tensor_arg, to_int, type_name, wrap_dim
from .linalg import (LinAlgError, LinalgSolve, LinalgSolveTriangular, _const, _deprecated, _eye, _float_input,
                     _from_np, _info_tensor, _matrices, _named, _np, _recording, _same_float_dtype,
                     _lapack_solve_triangular, _solve_operands, _tri, _where_batch, inv, solve,
                     solve_triangular)

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

def _geev(op, a):
    """(eigenvalues, eigenvectors) of a stack of real matrices through LAPACK geev (numpy.linalg.eig); raises the
    error of Note [No complex dtype in eig] when one is complex."""
    if a.size == 0:
        return np.zeros(a.shape[:-1], a.dtype), np.zeros(a.shape, a.dtype)
    if not np.isfinite(a).all():
        raise RuntimeError(f"{op}: the input should not contain infs or NaNs.")
    try:
        w, v = np.linalg.eig(a)
    except np.linalg.LinAlgError:
        raise LinAlgError(f"{op}: the eigenvalue algorithm (LAPACK geev) failed to converge.") from None
    if np.iscomplexobj(w) and np.any(w.imag != 0):
        flat = w.reshape(-1)
        z = flat[np.flatnonzero(flat.imag != 0)[0]]
        raise NotImplementedError(
            f"{op}: the input has complex eigenvalues (e.g. {z.real:.6g}{z.imag:+.6g}j), and dyngrad has no complex "
            "dtype to return them in (torch returns complex64/complex128 here). Only matrices whose eigenvalues are "
            "all real are supported; linalg.eigh handles symmetric matrices.")
    return np.real(w).astype(a.dtype), np.real(v).astype(a.dtype)


class LinalgEig(Function):
    """linalg.eig of a matrix with real eigenvalues: LAPACK geev (eigenvectors of unit norm, as torch's)."""

    @staticmethod
    def forward(ctx, A, op):
        w, v = _geev(op, _np(A))
        L, V = _from_np(w, A.dtype), _from_np(v, A.dtype)
        ctx.op = op
        ctx.set_materialize_grads(False)
        ctx.save_for_backward(A, L.detach(), V.detach())
        return L, V

    # A V = V diag(L), with unit-norm columns of V. Differentiating: dA V + A dV = dV diag(L) + V diag(dL); with
    # C = V^-1 dV, V^-1 dA V = diag(dL) + C diag(L) - diag(L) C, so dL = diag(V^-1 dA V) and, off the diagonal,
    # C_ij = (V^-1 dA V)_ij / (L_j - L_i). The normalisation |v_j| = 1 fixes the diagonal: v_j^T dv_j = 0, i.e.
    # C_jj = -sum_{i != j} (V^T V)_ji C_ij. Transposing the whole map gives
    #   gA = V^-T (diag(gL) + E o (V^T gV - V^T V diag(diag(V^T gV)))) V^T,  E_ij = 1 / (L_j - L_i), E_ii = 0
    # (the real case of torch's formula; equal eigenvalues give infinities, as torch's).
    @staticmethod
    def backward(ctx, gL, gV):
        A, L, V = ctx.saved_tensors
        if gL is None and gV is None:
            return None, None
        if _recording(A):
            L, V = LinalgEig.apply(A, ctx.op)
        n = A.shape[-1]
        inner = None
        if gV is not None:
            VtgV = _mm(_C.mT(V), gV)
            diag_part = _C.mul(VtgV, _eye(n, VtgV))
            term = _C.sub(VtgV, _mm(_mm(_C.mT(V), V), diag_part))
            gaps = _C.sub(_C.unsqueeze(L, -2), _C.unsqueeze(L, -1))
            off = _const(1.0 - np.eye(n), A)
            inner = _C.mul(_C.div(term, _C.add(gaps, _eye(n, A))), off)
        if gL is not None:
            d = _C.mul(_C.unsqueeze(gL, -1), _eye(n, A))
            inner = d if inner is None else _C.add(inner, d)
        # V^-T inner V^T: solve V^T X = inner V^T
        return LinalgSolve.apply(_C.mT(V), _mm(inner, _C.mT(V))), None


def eig(A):
    """(eigenvalues, eigenvectors) of square matrices whose eigenvalues are real (Note [No complex dtype in eig])."""
    A = _matrices("linalg.eig", A)
    _no_half("linalg.eig", A)
    return return_linalg_eig(*LinalgEig.apply(A, "linalg.eig"))


def eigvals(A):
    """The eigenvalues of square matrices, when they are real (Note [No complex dtype in eig])."""
    A = _matrices("linalg.eigvals", A)
    _no_half("linalg.eigvals", A)
    return LinalgEig.apply(A, "linalg.eigvals")[0]


# ===== LU =========================================================================================================
#
# Note [LU in numpy]: numpy.linalg has no LU factorisation, so getrf's algorithm is written here: Gaussian
# elimination with partial pivoting (the row of largest |value| in the column, the first one on ties, as LAPACK's
# idamax), vectorised over the batch, one Python step per column. A zero pivot (a singular matrix) leaves its
# column unscaled and sets info to its 1-based index, as getrf.

def _getrf(a):
    """(LU packed as LAPACK stores it, 1-based pivots as int32, info) of a stack of m x n matrices."""
    a = np.array(a, dtype=np.float64 if a.dtype == np.float64 else a.dtype, copy=True)
    batch, (m, n) = a.shape[:-2], a.shape[-2:]
    lu = a.reshape((int(np.prod(batch, dtype=np.int64)), m, n))
    k_max = min(m, n)
    piv = np.zeros((lu.shape[0], k_max), dtype=np.int32)
    info = np.zeros(lu.shape[0], dtype=np.int64)
    rows = np.arange(lu.shape[0])
    with np.errstate(all="ignore"):
        for k in range(k_max):
            p = k + np.argmax(np.abs(lu[:, k:, k]), axis=1)
            piv[:, k] = p + 1
            swap = p != k
            if swap.any():
                top = lu[rows[swap], k, :].copy()
                lu[rows[swap], k, :] = lu[rows[swap], p[swap], :]
                lu[rows[swap], p[swap], :] = top
            pivot = lu[:, k, k]
            zero = pivot == 0
            info[zero & (info == 0)] = k + 1
            col = lu[:, k + 1:, k]
            lu[:, k + 1:, k] = np.where(zero[:, None], col, col / np.where(zero, 1.0, pivot)[:, None])
            lu[:, k + 1:, k + 1:] -= lu[:, k + 1:, k, None] * lu[:, k, None, k + 1:]
    return lu.reshape(a.shape), piv.reshape(batch + (k_max,)), info.reshape(batch)


def _permutation(piv, m):
    """P (as an index array perm with P[perm[i], i] = 1) from LAPACK's row interchanges: A = P L U."""
    perm = np.broadcast_to(np.arange(m), piv.shape[:-1] + (m,)).copy()
    count = int(np.prod(piv.shape[:-1], dtype=np.int64))
    flat, p = perm.reshape(count, m), piv.reshape(count, piv.shape[-1]).astype(np.int64) - 1
    idx = np.arange(flat.shape[0])
    for i in range(p.shape[-1]):
        a, b = flat[idx, i].copy(), flat[idx, p[:, i]].copy()
        flat[idx, i], flat[idx, p[:, i]] = b, a
    return flat.reshape(perm.shape)


def _p_matrix(piv, m, dtype):
    perm = _permutation(piv, m)
    P = np.zeros(perm.shape + (m,), dtype=dtype)
    np.put_along_axis(P, perm[..., None, :], 1, axis=-2)   # P[perm[i], i] = 1
    return P


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
        if _recording(A):
            lu, piv, _ = _getrf(_np(A))
            L, U = LinalgLu.apply(A, lu, piv)
        gL = _zeros_like(L) if gL is None else gL
        gU = _zeros_like(U) if gU is None else gU
        L1, gL1 = _C.slice(L, -2, 0, k, 1), _C.slice(gL, -2, 0, k, 1)
        U1, gU1 = _C.slice(U, -1, 0, k, 1), _C.slice(gU, -1, 0, k, 1)
        lower = _mm(_C.mT(L1), gL1)
        upper = _mm(gU1, _C.mT(U1))
        if m < n:
            U2, gU2 = _C.slice(U, -1, k, n, 1), _C.slice(gU, -1, k, n, 1)
            lower = _C.sub(lower, _mm(gU2, _C.mT(U2)))
        if m > n:
            L2, gL2 = _C.slice(L, -2, k, m, 1), _C.slice(gL, -2, k, m, 1)
            upper = _C.sub(upper, _mm(_C.mT(L2), gL2))
        M = _C.add(_tri(lower, True, -1), _tri(upper, False))
        # gB1 = L1^-T M U1^-T: two triangular solves (L1^T is unit upper; M U1^-T = (U1^-1 M^T)^T)
        Y = _C.mT(LinalgSolveTriangular.apply(U1, _C.mT(M), True, False))
        gB = LinalgSolveTriangular.apply(_C.mT(L1), Y, True, True)
        if m < n:
            gB = _C.cat([gB, LinalgSolveTriangular.apply(_C.mT(L1), gU2, True, True)], -1)
        if m > n:
            gB2 = _C.mT(LinalgSolveTriangular.apply(U1, _C.mT(gL2), True, False))
            gB = _C.cat([gB, gB2], -2)
        P = _const(_p_matrix(ctx.piv, m, np.float64), A)
        return _mm(P, gB), None, None


def _check_pivot(op, pivot):
    if not _bool_arg(pivot, op, "pivot"):
        raise RuntimeError(f"{op}: LU without pivoting is not implemented on the CPU.")


def _lu_input(op, A):
    A = tensor_arg(A, op, "A")
    if A.ndim < 2:
        raise RuntimeError(f"{op}: A must have at least 2 dimensions, got shape {shape_str(A.shape)}.")
    _float_input(op, A, "A", not_implemented=True)
    _no_half(op, A)
    return A


def _lu_parts(A):
    """(L, U, pivots as int32, info) of A, L and U differentiable."""
    lu, piv, info = _getrf(_np(A))
    L, U = LinalgLu.apply(A, lu, piv)
    return L, U, _C.from_numpy(np.ascontiguousarray(piv)), info


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
    P = _from_np(_p_matrix(_np(piv), A.shape[-2], np.float64), A.dtype)
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
    _deprecated("torch.lu is deprecated in favour of linalg.lu_factor and linalg.lu_factor_ex: LU, pivots = "
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
    _float_input(op, LU, "LU_data", not_implemented=True)
    unpack_data = _bool_arg(unpack_data, op, "unpack_data")
    unpack_pivots = _bool_arg(unpack_pivots, op, "unpack_pivots")
    p = _pivots(op, LU, LU_pivots, "LU_pivots")
    m, n = LU.shape[-2], LU.shape[-1]
    k = min(m, n)
    empty = _from_np(np.zeros(0), LU.dtype)
    P = _from_np(_p_matrix(p, m, np.float64), LU.dtype) if unpack_pivots else empty
    if not unpack_data:
        return return_lu_unpack(P, empty, _from_np(np.zeros(0), LU.dtype))
    return return_lu_unpack(P, _unit_lower(LU, k), _upper(LU, k))


def _lu_solve(op, LU, pivots, B, left, adjoint):
    LU = tensor_arg(LU, op, "LU")
    B = tensor_arg(B, op, "B")
    _float_input(op, LU, "LU")
    _float_input(op, B, "B")
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
    P = _const(_p_matrix(p, n, np.float64), LU)
    if not left:                          # X A = B  <=>  A^T X^T = B^T (and X A^T = B <=> A X^T = B^T)
        return _C.mT(_lu_solve_left(L, U, P, _C.mT(B), not adjoint))
    return _lu_solve_left(L, U, P, B, adjoint)


def _lu_solve_left(L, U, P, B, adjoint):
    """A X = B with A = P L U, or A^T X = B if adjoint, by triangular solves (differentiable in L, U and B)."""
    batch = _broadcast_batch(L, B)
    L, U, P, B = (_expand_batch(t, batch) for t in (L, U, P, B))
    if not adjoint:                      # X = U^-1 L^-1 P^T B
        Y = LinalgSolveTriangular.apply(L, _mm(_C.mT(P), B), False, True)
        return LinalgSolveTriangular.apply(U, Y, True, False)
    Y = LinalgSolveTriangular.apply(_C.mT(U), B, False, False)          # X = P L^-T U^-T B
    return _mm(P, LinalgSolveTriangular.apply(_C.mT(L), Y, True, True))


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
    _deprecated("torch.lu_solve is deprecated in favour of linalg.lu_solve, which takes its arguments in another "
                "order: X = lu_solve(B, LU, pivots) is linalg.lu_solve(LU, pivots, B).")
    return _lu_solve(op, LU_data, LU_pivots, b, True, False)


def solve_ex(A, B, *, left=True, check_errors=False):
    """(result, info) of linalg.solve; info > 0 marks a singular matrix (its result is then that of the LU solve:
    infs and NaNs) instead of raising, unless check_errors."""
    op = "linalg.solve_ex"
    left, check_errors = _bool_arg(left, op, "left"), _bool_arg(check_errors, op, "check_errors")
    A0, Bm, vector = _solve_operands(op, A, B, left)
    _no_half(op, A0)
    _, _, info = _getrf(_np(A0))
    if np.any(info):
        if check_errors:
            raise LinAlgError(f"{op}: {_where_batch(info)[1]}the solver failed because the input matrix is "
                              "singular.")
        L, U, piv, _ = _lu_parts(A0)
        P = _const(_p_matrix(_np(piv), A0.shape[-1], np.float64), A0)
        X = _lu_solve_left(L, U, P, Bm, False) if left else _C.mT(_lu_solve_left(L, U, P, _C.mT(Bm), True))
        X = _C.squeeze(X, (-1,)) if vector else X
    else:
        X = solve(A, B, left=left)
    return return_linalg_solve_ex(X, _info_tensor(info))


# ===== matrix_exp =================================================================================================
#
# Note [matrix_exp]: scaling and squaring with the [13/13] Pade approximant (Higham, "The scaling and squaring
# method for the matrix exponential revisited", 2005): exp(A) = (exp(A / 2^s))^(2^s), s the smallest with
# ||A / 2^s||_1 <= theta_13 = 5.37..., where r_13(X) = q(X)^-1 p(X) is accurate to double precision. The Pade
# coefficients b_j = (26 - j)! 13! / (26! j! (13 - j)!) are computed exactly here.

_PADE13 = [float(Fraction(math.factorial(26 - j) * math.factorial(13),
                          math.factorial(26) * math.factorial(j) * math.factorial(13 - j))) for j in range(14)]
_THETA13 = 5.371920351148152


def _expm(a):
    """exp of a stack of square matrices (float64 or float32 arrays; computed in float64)."""
    dtype = a.dtype
    a = a.astype(np.float64)
    n = a.shape[-1]
    if a.size == 0:
        return a.astype(dtype)
    with np.errstate(all="ignore"):
        norm = np.abs(a).sum(axis=-2).max(axis=-1)
        s = np.where(norm > _THETA13, np.ceil(np.log2(np.maximum(norm, 1e-300) / _THETA13)), 0)
        s = np.where(np.isfinite(s), np.maximum(s, 0), 0).astype(np.int64)
        x = a / (2.0 ** s)[..., None, None]
        eye = np.eye(n)
        x2 = x @ x
        x4 = x2 @ x2
        x6 = x4 @ x2
        b = _PADE13
        u = x @ (x6 @ (b[13] * x6 + b[11] * x4 + b[9] * x2) + b[7] * x6 + b[5] * x4 + b[3] * x2 + b[1] * eye)
        v = x6 @ (b[12] * x6 + b[10] * x4 + b[8] * x2) + b[6] * x6 + b[4] * x4 + b[2] * x2 + b[0] * eye
        try:
            r = np.linalg.solve(v - u, v + u)
        except np.linalg.LinAlgError:      # non-finite input: NaNs, as torch's
            r = np.full(a.shape, np.nan)
        for step in range(int(s.max()) if s.size else 0):
            r = np.where((s > step)[..., None, None], r @ r, r)
        r = np.where(np.isfinite(a).all(axis=(-2, -1))[..., None, None], r, np.nan)
    return r.astype(dtype)


class MatrixExp(Function):
    """linalg.matrix_exp: Note [matrix_exp]."""

    @staticmethod
    def forward(ctx, A):
        ctx.save_for_backward(A)
        return _from_np(_expm(_np(A)), A.dtype)

    # The Frechet derivative of exp at A in the direction E is the upper-right block of exp([[A, E], [0, A]]); its
    # adjoint is the derivative at A^T: gA = upper-right block of exp([[A^T, g], [0, A^T]]) (as torch's).
    @staticmethod
    def backward(ctx, g):
        (A,) = ctx.saved_tensors
        n = A.shape[-1]
        At = _C.mT(A)
        top = _C.cat([At, g], -1)
        bottom = _C.cat([_zeros_like(At), At], -1)
        big = MatrixExp.apply(_C.cat([top, bottom], -2))
        return _C.slice(_C.slice(big, -2, 0, n, 1), -1, n, 2 * n, 1)


def matrix_exp(A):
    """The matrix exponential sum_k A^k / k! of square matrices."""
    A = tensor_arg(A, "linalg.matrix_exp", "A")
    if not A.dtype.is_floating_point:
        raise RuntimeError(f"linalg.matrix_exp: expected a floating-point tensor as A, got {A.dtype.name}.")
    A = _matrices("linalg.matrix_exp", A)
    if A.dtype.name in ("float16", "bfloat16"):        # computed in float32 and rounded, as numpy has no bfloat16
        return _C.to_dtype(MatrixExp.apply(_C.to_dtype(A, _C.float32)), A.dtype)
    return MatrixExp.apply(A)


# ===== householder_product (orgqr) ================================================================================

def householder_product(A, tau):
    """The first n columns of H_1 ... H_k, H_i = I - tau_i v_i v_i^T, v_i = (0, ..., 0, 1, A[i+1:, i]) (LAPACK
    orgqr: Q from geqrf's output). A composite, so differentiable in A and tau."""
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
    _float_input(op, A, "A")
    _float_input(op, tau, "tau")
    _no_half(op, A)
    if A.dtype is not tau.dtype:
        raise RuntimeError(f"{op}: expected A and tau of the same dtype, got {A.dtype.name} and {tau.dtype.name}.")
    m, n, k = A.shape[-2], A.shape[-1], tau.shape[-1]
    Q = _const(np.broadcast_to(np.eye(m, n), tuple(A.shape[:-2]) + (m, n)), A)
    for i in range(k - 1, -1, -1):           # Q = H_i Q, from the last reflector to the first
        v, t = _reflector(A, tau, i)         # (*, m, 1), (*, 1, 1)
        Q = _C.sub(Q, _C.mul(t, _mm(v, _mm(_C.mT(v), Q))))
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
    """op(Q) C (C op(Q) if not left), Q = H_1 ... H_k given by geqrf's (input, tau), op = transpose or not; each
    H_i = I - tau_i v_i v_i^T is applied in turn (a composite: differentiable in all three)."""
    op = "ormqr"
    A, tau, C = tensor_arg(input, op, "input"), tensor_arg(tau, op, "tau"), tensor_arg(other, op, "other")
    left, transpose = _bool_arg(left, op, "left"), _bool_arg(transpose, op, "transpose")
    for t, name in ((A, "input"), (tau, "tau"), (C, "other")):
        _float_input(op, t, name)
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
    # Q C = H_1 (H_2 (... H_k C)), Q^T C = H_k ... H_1 C; C Q = C H_1 ... H_k, C Q^T = C H_k ... H_1
    order = range(k - 1, -1, -1) if left != transpose else range(k)
    out = C
    for i in order:
        v, t = _reflector(A, tau, i)
        if left:
            out = _C.sub(out, _C.mul(t, _mm(v, _mm(_C.mT(v), out))))
        else:
            out = _C.sub(out, _C.mul(t, _mm(_mm(out, v), _C.mT(v))))
    return out


return_geqrf = _named("geqrf", ["a", "tau"])


def geqrf(input):
    """LAPACK geqrf's (a, tau): R on and above a's diagonal, the Householder vectors below it (numpy.linalg.qr's
    'raw' mode); not differentiable, as torch."""
    op = "geqrf"
    A = tensor_arg(input, op)
    if A.ndim < 2:
        raise RuntimeError(f"{op}: input must have at least 2 dimensions, got shape {shape_str(A.shape)}.")
    _float_input(op, A, "input")
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
#
# Note [LDL in numpy]: LAPACK sytrf's factorisation A = P L D L^T P^T of a symmetric matrix (its lower triangle
# read), D block diagonal with 1x1 and 2x2 blocks, chosen by Bunch and Kaufman's partial pivoting (alpha =
# (1 + sqrt 17) / 8 bounds the growth), stored as LAPACK stores it: LD holds L below the diagonal and D on it (a
# 2x2 block's off-diagonal at [k+1, k]); pivots[k] > 0 means a 1x1 block after swapping rows k and pivots[k],
# pivots[k] = pivots[k+1] < 0 a 2x2 block after swapping rows k+1 and -pivots[k]. One matrix at a time (the pivot
# structure differs between matrices).

_BK_ALPHA = (1.0 + math.sqrt(17.0)) / 8.0


def _sytf2(a):
    """(LD, 1-based pivots, info) of one symmetric matrix (lower triangle read)."""
    n = a.shape[-1]
    a = np.tril(a) + np.tril(a, -1).T
    piv = np.zeros(n, dtype=np.int32)
    info = 0
    k = 0
    while k < n:
        kstep = 1
        absakk = abs(a[k, k])
        if k < n - 1:
            imax = k + 1 + int(np.argmax(np.abs(a[k + 1:, k])))
            colmax = abs(a[imax, k])
        else:
            imax, colmax = k, 0.0
        if max(absakk, colmax) == 0 or np.isnan(absakk):
            info = info or k + 1
            kp = k
        else:
            if absakk >= _BK_ALPHA * colmax:
                kp = k
            else:
                row = np.abs(a[imax, k:imax])           # the off-diagonal entries of row/column imax
                rowmax = row.max() if row.size else 0.0
                if imax < n - 1:
                    rowmax = max(rowmax, np.abs(a[imax + 1:, imax]).max())
                if absakk >= _BK_ALPHA * colmax * (colmax / rowmax):
                    kp = k
                elif abs(a[imax, imax]) >= _BK_ALPHA * rowmax:
                    kp = imax
                else:
                    kp, kstep = imax, 2
            kk = k + kstep - 1
            if kp != kk:                               # symmetric interchange of rows and columns kk and kp
                perm = np.arange(n)
                perm[kk], perm[kp] = kp, kk
                a[k:, k:] = a[np.ix_(perm[k:], perm[k:])]
            if kstep == 1:
                if k < n - 1:
                    col = a[k + 1:, k] / a[k, k]
                    a[k + 1:, k + 1:] -= np.outer(col, a[k + 1:, k])
                    a[k + 1:, k] = col
                    a[k, k + 1:] = col
            elif k < n - 2:
                D = np.array([[a[k, k], a[k + 1, k]], [a[k + 1, k], a[k + 1, k + 1]]])
                C = a[k + 2:, k:k + 2]
                W = np.linalg.solve(D, C.T).T           # the two columns of L: C D^-1
                a[k + 2:, k + 2:] -= W @ C.T
                a[k + 2:, k:k + 2] = W
                a[k:k + 2, k + 2:] = W.T
        if kstep == 1:
            piv[k] = kp + 1
        else:
            piv[k] = piv[k + 1] = -(kp + 1)
        k += kstep
    return np.tril(a), piv, info


def _ldl_numpy(a):
    batch, n = a.shape[:-2], a.shape[-1]
    flat = a.reshape((int(np.prod(batch, dtype=np.int64)), n, n))
    ld = np.zeros_like(flat)
    piv = np.zeros((flat.shape[0], n), dtype=np.int32)
    info = np.zeros(flat.shape[0], dtype=np.int64)
    with np.errstate(all="ignore"):
        for i in range(flat.shape[0]):
            ld[i], piv[i], info[i] = _sytf2(flat[i].astype(np.float64))
    return ld.reshape(a.shape), piv.reshape(batch + (n,)), info.reshape(batch)


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


def _without_derivative(name, array, dtype, *inputs, error=RuntimeError):
    """A tensor holding `array`: with a node whose backward raises `error` when an input requires grad."""
    if _C.is_grad_enabled() and any(t.requires_grad for t in inputs):
        return _NoDerivative.apply(name, error, array, dtype, *inputs)
    return _from_np(array, dtype)


def _ldl_input(op, A, hermitian):
    A = _matrices(op, A, not_implemented=False)
    _bool_arg(hermitian, op, "hermitian")
    _no_half(op, A)
    return A


def ldl_factor_ex(A, *, hermitian=False, check_errors=False):
    """(LD, pivots, info) of LAPACK sytrf (Note [LDL in numpy]); info > 0 marks a zero 1x1 block D[info, info]."""
    op = "linalg.ldl_factor_ex"
    A = _ldl_input(op, A, hermitian)
    ld, piv, info = _ldl_numpy(_np(A))
    if _bool_arg(check_errors, op, "check_errors"):
        _raise_singular_d(op, info)
    LD = _without_derivative("linalg.ldl_factor_ex", ld, A.dtype, A)
    return return_linalg_ldl_factor_ex(LD, _C.from_numpy(np.ascontiguousarray(piv)), _info_tensor(info))


def _raise_singular_d(op, info):
    if np.any(info):
        k, where = _where_batch(info)
        j = int(np.asarray(info).reshape(-1)[k])
        raise LinAlgError(f"{op}: {where}the factorization found D[{j},{j}] exactly zero: the matrix is singular.")


def ldl_factor(A, *, hermitian=False):
    """(LD, pivots) of linalg.ldl_factor_ex; a singular matrix raises LinAlgError."""
    op = "linalg.ldl_factor"
    A = _ldl_input(op, A, hermitian)
    ld, piv, info = _ldl_numpy(_np(A))
    _raise_singular_d(op, info)
    LD = _without_derivative("linalg.ldl_factor_ex", ld, A.dtype, A)
    return return_linalg_ldl_factor(LD, _C.from_numpy(np.ascontiguousarray(piv)))


def _sytrs(ld, piv, b):
    """A^-1 b for one matrix from its (LD, pivots), as LAPACK sytrs (lower)."""
    n = ld.shape[-1]
    b = b.copy()
    k = 0
    while k < n:                                        # solve L D y = P^T b
        if piv[k] > 0:
            p = piv[k] - 1
            b[[k, p]] = b[[p, k]]
            b[k + 1:] -= np.outer(ld[k + 1:, k], b[k])
            b[k] /= ld[k, k]
            k += 1
        else:
            p = -piv[k] - 1
            b[[k + 1, p]] = b[[p, k + 1]]
            b[k + 2:] -= np.outer(ld[k + 2:, k], b[k]) + np.outer(ld[k + 2:, k + 1], b[k + 1])
            D = np.array([[ld[k, k], ld[k + 1, k]], [ld[k + 1, k], ld[k + 1, k + 1]]])
            b[k:k + 2] = np.linalg.solve(D, b[k:k + 2])
            k += 2
    k = n - 1
    while k >= 0:                                       # solve L^T P^T x = y
        if piv[k] > 0:
            b[k] -= ld[k + 1:, k] @ b[k + 1:]
            p = piv[k] - 1
            b[[k, p]] = b[[p, k]]
            k -= 1
        else:
            b[k] -= ld[k + 1:, k] @ b[k + 1:]
            b[k - 1] -= ld[k + 1:, k - 1] @ b[k + 1:]
            p = -piv[k] - 1
            b[[k, p]] = b[[p, k]]
            k -= 2
    return b


def ldl_solve(LD, pivots, B, *, hermitian=False):
    """X with A X = B, A given by linalg.ldl_factor's (LD, pivots)."""
    op = "linalg.ldl_solve"
    LD = _matrices(op, LD, "LD")
    B = tensor_arg(B, op, "B")
    _float_input(op, B, "B")
    _bool_arg(hermitian, op, "hermitian")
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
    ld = np.broadcast_to(_np(LD), tuple(batch) + (n, n)).reshape(-1, n, n)
    pv = np.broadcast_to(p, tuple(batch) + (n,)).reshape(-1, n)
    b = np.broadcast_to(_np(B), tuple(batch) + tuple(B.shape[-2:])).reshape((-1,) + tuple(B.shape[-2:]))
    out = np.empty(b.shape, dtype=np.float64)
    with np.errstate(all="ignore"):
        for i in range(b.shape[0]):
            out[i] = _sytrs(ld[i].astype(np.float64), pv[i], b[i].astype(np.float64))
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
    from .scan import cumprod
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
    if N is None:
        N = x.shape[-1] if x.ndim else 0
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
        return _C.from_numpy(np.zeros((x.shape[0], 0), dtype=_np(x).dtype))
    out = _powers(x, N, op)
    if not _bool_arg(increasing, op, "increasing"):
        out = _C.index_select(out, -1, _C.from_numpy(np.arange(N - 1, -1, -1, dtype=np.int64)))
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
        if upper:                                  # A = U^T U: U^T Y = B, then U X = Y
            y = _lapack_solve_triangular(np.swapaxes(l, -1, -2).copy(), b, False, False)
            x = _lapack_solve_triangular(l.copy(), y, True, False)
        else:                                      # A = L L^T: L Y = B, then L^T X = Y
            y = _lapack_solve_triangular(l.copy(), b, False, False)
            x = _lapack_solve_triangular(np.swapaxes(l, -1, -2).copy(), y, True, False)
        X = _from_np(x, B.dtype)
        ctx.upper = upper
        ctx.save_for_backward(B, L, X.detach())
        return X

    # X = A^-1 B, A = L L^T: gB = A^-1 g (A is symmetric), gA = -gB X^T, and dA = dL L^T + L dL^T gives
    # gL = (gA + gA^T) L = -(gB X^T + X gB^T) L; for A = U^T U, gU = -U (gB X^T + X gB^T). As torch, this is the
    # gradient of the formula in the whole of L (the forward reads one triangle).
    @staticmethod
    def backward(ctx, g):
        B, L, X = ctx.saved_tensors
        gB = CholeskySolve.apply(g, L, ctx.upper)
        if not ctx.needs_input_grad[1]:
            return gB, None, None
        if _recording(B, L):
            X = CholeskySolve.apply(B, L, ctx.upper)
        common = _mm(gB, _C.mT(X))
        common = _C.add(common, _C.mT(common))
        gL = _C.neg(_mm(L, common) if ctx.upper else _mm(common, L))
        return gB, gL, None


def cholesky_solve(input, input2, upper=False):
    """X with A X = input, A = L L^T given by its Cholesky factor input2 = L (or A = U^T U, input2 = U, if upper)."""
    op = "cholesky_solve"
    B, L = _at_least_2d(op, input, "input"), _at_least_2d(op, input2, "input2")
    _float_input(op, B, "input")
    _float_input(op, L, "input2")
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
    _float_input(op, L, "input")
    _no_half(op, L)
    if L.shape[-1] != L.shape[-2]:
        raise RuntimeError(f"{op}: input must be a batch of square matrices, got shape {shape_str(L.shape)}.")
    return cholesky_solve(_const(np.broadcast_to(np.eye(L.shape[-1]), tuple(L.shape)), L), L, upper)


def triangular_solve(input, A, upper=True, transpose=False, unitriangular=False):
    """torch.triangular_solve (deprecated by torch): (X, A's copy) with A X = input (A^T X = input if transpose),
    reading A's upper (or lower) triangle."""
    op = "triangular_solve"
    b, A = _at_least_2d(op, input, "input"), _at_least_2d(op, A, "A")
    _deprecated("torch.triangular_solve is deprecated in favour of linalg.solve_triangular, which takes its arguments "
                "in the other order and returns no copy of A: X = triangular_solve(B, A).solution is "
                "linalg.solve_triangular(A, B, upper=True).")
    upper, transpose = _bool_arg(upper, op, "upper"), _bool_arg(transpose, op, "transpose")
    _no_half(op, A, b)
    unitriangular = _bool_arg(unitriangular, op, "unitriangular")
    M = _C.mT(A) if transpose else A
    X = solve_triangular(M, b, upper=upper != transpose, unitriangular=unitriangular)
    return return_triangular_solve(X, _C.mul(A, _C.scalar_operand(1, A)))
