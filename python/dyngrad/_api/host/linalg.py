"""Factorisations numpy.linalg does not have, written in numpy on float arrays: LU with partial pivoting (LAPACK's
getrf), the Bunch-Kaufman LDL^T factorisation and its solve (sytrf/sytrs), and the matrix exponential (scaling and
squaring with a Pade approximant). Batched over leading dims; no tensors here (the op families in
_api/ops/linalg.py call these on the values the numpy bridge gives them)."""
import math
from fractions import Fraction

import numpy as np


# Note [LU in numpy]: numpy.linalg has no LU factorisation, so getrf's algorithm is written here: Gaussian
# elimination with partial pivoting (the row of largest |value| in the column, the first one on ties, as LAPACK's
# idamax), vectorised over the batch, one Python step per column. A zero pivot (a singular matrix) leaves its
# column unscaled and sets info to its 1-based index, as getrf.

def getrf(a):
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
            column = lu[:, k:, k]         # LAPACK's izamax measures a complex number by |re| + |im|
            size = np.abs(column.real) + np.abs(column.imag) if np.iscomplexobj(column) else np.abs(column)
            p = k + np.argmax(size, axis=1)
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


def lu_permutation(piv, m):
    """P (as an index array perm with P[perm[i], i] = 1) from LAPACK's row interchanges: A = P L U."""
    perm = np.broadcast_to(np.arange(m), piv.shape[:-1] + (m,)).copy()
    count = int(np.prod(piv.shape[:-1], dtype=np.int64))
    flat, p = perm.reshape(count, m), piv.reshape(count, piv.shape[-1]).astype(np.int64) - 1
    idx = np.arange(flat.shape[0])
    for i in range(p.shape[-1]):
        a, b = flat[idx, i].copy(), flat[idx, p[:, i]].copy()
        flat[idx, i], flat[idx, p[:, i]] = b, a
    return flat.reshape(perm.shape)


def permutation_matrix(piv, m, dtype):
    perm = lu_permutation(piv, m)
    P = np.zeros(perm.shape + (m,), dtype=dtype)
    np.put_along_axis(P, perm[..., None, :], 1, axis=-2)   # P[perm[i], i] = 1
    return P


# Note [matrix_exp]: scaling and squaring with the [13/13] Pade approximant (Higham, "The scaling and squaring
# method for the matrix exponential revisited", 2005): exp(A) = (exp(A / 2^s))^(2^s), s the smallest with
# ||A / 2^s||_1 <= theta_13 = 5.37..., where r_13(X) = q(X)^-1 p(X) is accurate to double precision. The Pade
# coefficients b_j = (26 - j)! 13! / (26! j! (13 - j)!) are computed exactly here.

PADE13 = [float(Fraction(math.factorial(26 - j) * math.factorial(13),
                          math.factorial(26) * math.factorial(j) * math.factorial(13 - j))) for j in range(14)]


THETA13 = 5.371920351148152


def expm(a):
    """exp of a stack of square matrices (float32/float64 arrays computed in float64, complex ones in
    complex128)."""
    dtype = a.dtype
    a = a.astype(np.complex128 if np.iscomplexobj(a) else np.float64)
    n = a.shape[-1]
    if a.size == 0:
        return a.astype(dtype)
    with np.errstate(all="ignore"):
        norm = np.abs(a).sum(axis=-2).max(axis=-1)
        s = np.where(norm > THETA13, np.ceil(np.log2(np.maximum(norm, 1e-300) / THETA13)), 0)
        s = np.where(np.isfinite(s), np.maximum(s, 0), 0).astype(np.int64)
        x = a / (2.0 ** s)[..., None, None]
        eye = np.eye(n)
        x2 = x @ x
        x4 = x2 @ x2
        x6 = x4 @ x2
        b = PADE13
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


# Note [LDL in numpy]: LAPACK sytrf's factorisation A = P L D L^T P^T of a symmetric matrix (its lower triangle
# read), D block diagonal with 1x1 and 2x2 blocks, chosen by Bunch and Kaufman's partial pivoting (alpha =
# (1 + sqrt 17) / 8 bounds the growth), stored as LAPACK stores it: LD holds L below the diagonal and D on it (a
# 2x2 block's off-diagonal at [k+1, k]); pivots[k] > 0 means a 1x1 block after swapping rows k and pivots[k],
# pivots[k] = pivots[k+1] < 0 a 2x2 block after swapping rows k+1 and -pivots[k]. One matrix at a time (the pivot
# structure differs between matrices).

BK_ALPHA = (1.0 + math.sqrt(17.0)) / 8.0


def _cabs1(z):
    """|Re z| + |Im z|: LAPACK's CABS1, the magnitude its complex pivot searches (izamax) compare; |z| for a real z."""
    return np.abs(np.real(z)) + np.abs(np.imag(z))


def sytf2(a, hermitian=False):
    """(LD, 1-based pivots, info) of one symmetric matrix (lower triangle read); of a complex one, LAPACK zsytf2's
    complex-symmetric A = P L D L^T P^T, or with hermitian zhetf2's A = P L D L^H P^T (the diagonal's real part
    read, D Hermitian with a real diagonal). Pivots compare CABS1 magnitudes (|Re a_kk| on a Hermitian diagonal), as
    LAPACK's do."""
    n = a.shape[-1]
    herm = bool(hermitian) and np.iscomplexobj(a)
    low = np.tril(a, -1)
    a = low + np.conj(low).T + np.diag(np.real(np.diagonal(a))).astype(a.dtype) if herm else np.tril(a) + low.T
    adj = (lambda x: np.conj(x).T) if herm else (lambda x: x.T)     # the mirror image of a lower-triangle block
    dabs = (lambda z: abs(np.real(z))) if herm else _cabs1          # the magnitude of a diagonal entry
    piv = np.zeros(n, dtype=np.int32)
    info = 0
    k = 0
    while k < n:
        kstep = 1
        absakk = dabs(a[k, k])
        if k < n - 1:
            imax = k + 1 + int(np.argmax(_cabs1(a[k + 1:, k])))
            colmax = _cabs1(a[imax, k])
        else:
            imax, colmax = k, 0.0
        if max(absakk, colmax) == 0 or np.isnan(absakk):
            info = info or k + 1
            kp = k
        else:
            if absakk >= BK_ALPHA * colmax:
                kp = k
            else:
                row = _cabs1(a[imax, k:imax])           # the off-diagonal entries of row/column imax
                rowmax = row.max() if row.size else 0.0
                if imax < n - 1:
                    rowmax = max(rowmax, _cabs1(a[imax + 1:, imax]).max())
                if absakk >= BK_ALPHA * colmax * (colmax / rowmax):
                    kp = k
                elif dabs(a[imax, imax]) >= BK_ALPHA * rowmax:
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
                    a[k + 1:, k + 1:] -= np.outer(col, adj(a[k + 1:, k]))
                    a[k + 1:, k] = col
                    a[k, k + 1:] = adj(col)
            elif k < n - 2:
                D = np.array([[a[k, k], adj(a[k + 1, k])], [a[k + 1, k], a[k + 1, k + 1]]])
                C = a[k + 2:, k:k + 2]
                W = np.linalg.solve(D.T, C.T).T         # the two columns of L: C D^-1
                a[k + 2:, k + 2:] -= W @ adj(C)
                a[k + 2:, k:k + 2] = W
                a[k:k + 2, k + 2:] = adj(W)
            if herm:                                   # the trailing block's diagonal stays real (as zher's)
                rest = np.arange(k + kstep, n)
                a[rest, rest] = np.real(a[rest, rest])
        if kstep == 1:
            piv[k] = kp + 1
        else:
            piv[k] = piv[k + 1] = -(kp + 1)
        k += kstep
    return np.tril(a), piv, info


def ldl(a, hermitian=False):
    batch, n = a.shape[:-2], a.shape[-1]
    flat = a.reshape((int(np.prod(batch, dtype=np.int64)), n, n))
    ld = np.zeros_like(flat)
    piv = np.zeros((flat.shape[0], n), dtype=np.int32)
    info = np.zeros(flat.shape[0], dtype=np.int64)
    wide = np.complex128 if np.iscomplexobj(a) else np.float64
    with np.errstate(all="ignore"):
        for i in range(flat.shape[0]):
            ld[i], piv[i], info[i] = sytf2(flat[i].astype(wide), hermitian)
    return ld.reshape(a.shape), piv.reshape(batch + (n,)), info.reshape(batch)


def sytrs(ld, piv, b, hermitian=False):
    """A^-1 b for one matrix from its (LD, pivots), as LAPACK sytrs (lower); with hermitian and a complex LD, hetrs
    (A = P L D L^H P^T, D Hermitian)."""
    n = ld.shape[-1]
    herm = bool(hermitian) and np.iscomplexobj(ld)
    cj = np.conj if herm else (lambda x: x)
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
            D = np.array([[ld[k, k], cj(ld[k + 1, k])], [ld[k + 1, k], ld[k + 1, k + 1]]])
            b[k:k + 2] = np.linalg.solve(D, b[k:k + 2])
            k += 2
    k = n - 1
    while k >= 0:                                       # solve L^T P^T x = y (L^H if hermitian)
        if piv[k] > 0:
            b[k] -= cj(ld[k + 1:, k]) @ b[k + 1:]
            p = piv[k] - 1
            b[[k, p]] = b[[p, k]]
            k -= 1
        else:
            b[k] -= cj(ld[k + 1:, k]) @ b[k + 1:]
            b[k - 1] -= cj(ld[k + 1:, k - 1]) @ b[k + 1:]
            p = -piv[k] - 1
            b[[k, p]] = b[[p, k]]
            k -= 2
    return b
