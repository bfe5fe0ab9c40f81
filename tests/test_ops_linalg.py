"""Linear algebra (python/dyngrad/_api/ops/linalg.py), driven by ONE table as tests/test_ops.py: forward vs numpy,
gradients vs float64 central differences, float32, non-contiguous inputs, both engines, and the same rows against
torch 2.13 where installed. Then second derivatives, exact values (kinks, singular matrices), errors (types as
torch's, singular inputs raising dyngrad.linalg.LinAlgError), out=, the dyngrad.linalg namespace.

Each row: Op(name, fn(m, *tensors), np_fn(*float64 arrays), cases, options). `fn` takes the module first so that
one row runs on dyngrad, dyngrad.reference and torch. Decompositions are tested through gauge-invariant functions of
their outputs where the outputs are only defined up to signs (eigenvectors, singular vectors), and on
well-conditioned inputs: WellConditioned square matrices (normal + n I), SPD ones built inside fn as X X^T + n I,
symmetric ones as (X + X^T) / 2.
"""
import math
import warnings

import numpy as np
import pytest

from helpers import Const, Float, Ints, check_exact, check_gradgrad, check_op, check_torch, draw_inputs, quiet, \
    differentiable, as_spec, seed_of


class Op:
    def __init__(self, name, fn, np_fn, cases, *, int_cases=(), grad=True, gradgrad=False, noncontig=True,
                 torch=True, **check):
        self.name, self.fn, self.np_fn, self.cases = name, fn, np_fn, list(cases)
        self.int_cases, self.grad, self.gradgrad = list(int_cases), grad, gradgrad
        self.noncontig, self.torch, self.check = noncontig, torch, check

    def __repr__(self):
        return self.name


class WellConditioned:
    """Square matrices: standard normal entries plus n on the diagonal (condition numbers of a few)."""

    def __init__(self, *shape):
        self.shape = tuple(shape)

    def draw(self, rng):
        n = self.shape[-1]
        a = rng.standard_normal(self.shape) + n * np.eye(n)
        return a.astype(np.float32).astype(np.float64)

    def __repr__(self):
        return f"WellConditioned{self.shape}"


WC = WellConditioned


# ---- building well-conditioned inputs inside fn (the same lambdas run on torch) ----

def eye(m, x):
    return m.eye(x.shape[-1], dtype=x.dtype)


def spd(m, x):
    """A symmetric positive-definite matrix from any square x: x x^T + n I."""
    return x @ x.mT + x.shape[-1] * eye(m, x)


def sym(m, x):
    return (x + x.mT) / 2


def np_spd(x):
    return x @ np.swapaxes(x, -1, -2) + x.shape[-1] * np.eye(x.shape[-1])


def np_sym(x):
    return (x + np.swapaxes(x, -1, -2)) / 2


def T(x):
    return np.swapaxes(x, -1, -2)


def np_svd_parts(a):
    u, s, vh = np.linalg.svd(a, full_matrices=False)
    return u * u, s, vh * vh, u @ vh


def svd_parts(m, a):
    """Sign-invariant functions of linalg.svd's outputs: U o U, S, Vh o Vh, U Vh."""
    U, S, Vh = m.linalg.svd(a, full_matrices=False)
    return U * U, S, Vh * Vh, U @ Vh


def np_eigh_parts(a, UPLO="L"):
    w, v = np.linalg.eigh(a, UPLO=UPLO)
    return w, v * v


def eigh_parts(m, a, UPLO="L"):
    L, V = m.linalg.eigh(a, UPLO=UPLO)
    return L, V * V


def np_lstsq(a, b):
    """The minimum-norm solution, matrix by matrix."""
    if a.ndim == 2:
        return np.linalg.lstsq(a, b, rcond=None)[0]
    return np.stack([np.linalg.lstsq(x, y, rcond=None)[0] for x, y in zip(a, b)])


def np_matrix_power(a, n):
    return np.linalg.matrix_power(a, n)


def np_cross(a, b, axis):
    a, b = np.broadcast_arrays(a, b)
    return np.cross(a, b, axis=axis)


def np_vector_norm(x, p, axis=None, keepdims=False):
    ax = np.abs(x)
    if p == math.inf:
        return ax.max(axis=axis, keepdims=keepdims)
    if p == -math.inf:
        return ax.min(axis=axis, keepdims=keepdims)
    if p == 0:
        return (x != 0).sum(axis=axis, keepdims=keepdims).astype(x.dtype)
    return (ax ** p).sum(axis=axis, keepdims=keepdims) ** (1 / p)


def np_matrix_norm(a, ord, axes=(-2, -1), keepdims=False):
    a = np.moveaxis(a, axes, (-2, -1))
    if ord == "fro":
        r = np.sqrt((a * a).sum((-2, -1)))
    elif ord in ("nuc", 2, -2):
        s = np.linalg.svd(a, compute_uv=False)
        r = s.sum(-1) if ord == "nuc" else s.max(-1) if ord == 2 else s.min(-1)
    else:
        sums = np.abs(a).sum(-2 if abs(ord) == 1 else -1)
        r = sums.max(-1) if ord > 0 else sums.min(-1)
    if keepdims:
        for d in sorted(x % (a.ndim) for x in axes):
            r = np.expand_dims(r, d)
    return r


def np_kron(a, b):
    return np.kron(a, b)


def np_diagonal(a, offset=0, d1=-2, d2=-1):
    return np.diagonal(a, offset, d1, d2)


def inplace(method, *extra, **kw):
    def fn(m, x, *others):
        y = x.clone()
        getattr(y, method)(*others, *extra, **kw)
        return y
    return fn


INF = math.inf

OPS = [
    # ---- products ----
    Op("mm", lambda m, a, b: m.mm(a, b), np.matmul, [[(3, 4), (4, 5)], [(0, 4), (4, 2)], [(3, 0), (0, 2)]],
       int_cases=[[Ints((2, 3), -3, 4), Ints((3, 2), -3, 4)]], gradgrad=True),
    Op("mm_method", lambda m, a, b: a.mm(b), np.matmul, [[(2, 3), (3, 2)]]),
    Op("bmm", lambda m, a, b: m.bmm(a, b), np.matmul, [[(2, 3, 4), (2, 4, 5)]]),
    Op("mv", lambda m, a, v: m.mv(a, v), np.matmul, [[(3, 4), (4,)], [(0, 4), (4,)]],
       int_cases=[[Ints((2, 3), -3, 4), Ints((3,), -3, 4)]]),
    Op("mv_method", lambda m, a, v: a.mv(v), np.matmul, [[(3, 4), (4,)]]),
    Op("dot", lambda m, a, b: m.dot(a, b), np.dot, [[(5,), (5,)], [(0,), (0,)]],
       int_cases=[[Ints((4,), -3, 4), Ints((4,), -3, 4)]], gradgrad=True),
    Op("dot_method", lambda m, a, b: a.dot(b), np.dot, [[(5,), (5,)]]),
    Op("vdot", lambda m, a, b: m.vdot(a, b), np.vdot, [[(5,), (5,)]]),
    Op("inner", lambda m, a, b: m.inner(a, b), np.inner,
       [[(2, 3), (4, 3)], [(3,), (3,)], [(2, 3, 4), (5, 4)], [(), (2, 3)], [(2, 3), ()]]),
    Op("inner_method", lambda m, a, b: a.inner(b), np.inner, [[(2, 3), (3,)]]),
    Op("outer", lambda m, a, b: m.outer(a, b), np.outer, [[(3,), (4,)], [(0,), (2,)]],
       int_cases=[[Ints((3,), -3, 4), Ints((2,), -3, 4)]]),
    Op("ger", lambda m, a, b: m.ger(a, b), np.outer, [[(3,), (4,)]]),
    Op("outer_method", lambda m, a, b: a.outer(b), np.outer, [[(3,), (2,)]]),
    Op("addmm", lambda m, i, a, b: m.addmm(i, a, b), lambda i, a, b: i + a @ b,
       [[(3, 5), (3, 4), (4, 5)], [(5,), (3, 4), (4, 5)], [(), (2, 3), (3, 2)], [(3, 1), (3, 4), (4, 2)]],
       int_cases=[[Ints((2, 2), -3, 4), Ints((2, 3), -3, 4), Ints((3, 2), -3, 4)]], gradgrad=True),
    Op("addmm_beta_alpha", lambda m, i, a, b: m.addmm(i, a, b, beta=0.5, alpha=-2.0),
       lambda i, a, b: 0.5 * i + -2.0 * (a @ b), [[(3, 5), (3, 4), (4, 5)]]),
    Op("addmm_beta0", lambda m, i, a, b: m.addmm(i, a, b, beta=0, alpha=3),
       lambda i, a, b: 3 * (a @ b), [[(2, 5), (2, 4), (4, 5)]]),
    Op("addmm_method", lambda m, i, a, b: i.addmm(a, b, alpha=2), lambda i, a, b: i + 2 * (a @ b),
       [[(2, 3), (2, 4), (4, 3)]]),
    Op("addmm_", inplace("addmm_", beta=2), lambda i, a, b: 2 * i + a @ b, [[(2, 3), (2, 4), (4, 3)]]),
    Op("addmv", lambda m, i, a, v: m.addmv(i, a, v, beta=2, alpha=0.5), lambda i, a, v: 2 * i + 0.5 * (a @ v),
       [[(3,), (3, 4), (4,)], [(), (3, 4), (4,)]]),
    Op("addmv_", inplace("addmv_"), lambda i, a, v: i + a @ v, [[(3,), (3, 4), (4,)]]),
    Op("addbmm", lambda m, i, a, b: m.addbmm(i, a, b, beta=0.5), lambda i, a, b: 0.5 * i + (a @ b).sum(0),
       [[(3, 5), (2, 3, 4), (2, 4, 5)], [(5,), (0, 3, 4), (0, 4, 5)]], gradgrad=True),
    Op("addbmm_", inplace("addbmm_", alpha=2), lambda i, a, b: i + 2 * (a @ b).sum(0),
       [[(3, 5), (2, 3, 4), (2, 4, 5)]]),
    Op("baddbmm", lambda m, i, a, b: m.baddbmm(i, a, b, alpha=1.5), lambda i, a, b: i + 1.5 * (a @ b),
       [[(2, 3, 5), (2, 3, 4), (2, 4, 5)], [(3, 5), (2, 3, 4), (2, 4, 5)]]),
    Op("baddbmm_", inplace("baddbmm_"), lambda i, a, b: i + a @ b, [[(2, 3, 5), (2, 3, 4), (2, 4, 5)]]),
    Op("addr", lambda m, i, a, b: m.addr(i, a, b, beta=2, alpha=3), lambda i, a, b: 2 * i + 3 * np.outer(a, b),
       [[(3, 4), (3,), (4,)], [(4,), (3,), (4,)]], int_cases=[[Ints((2, 2), -3, 4), Ints((2,), -3, 4),
                                                              Ints((2,), -3, 4)]]),
    Op("addr_", inplace("addr_"), lambda i, a, b: i + np.outer(a, b), [[(3, 4), (3,), (4,)]]),
    Op("kron", lambda m, a, b: m.kron(a, b), np_kron,
       [[(2, 3), (4, 2)], [(2,), (3,)], [(2, 3), (4,)], [(), (3,)], [(2, 1, 2), (1, 2, 2)]],
       int_cases=[[Ints((2, 2), -3, 4), Ints((2,), -3, 4)]], gradgrad=True),
    Op("kron_method", lambda m, a, b: a.kron(b), np_kron, [[(2, 2), (2, 3)]]),
    Op("cross", lambda m, a, b: m.cross(a, b, dim=1), lambda a, b: np_cross(a, b, 1),
       [[(4, 3), (4, 3)], [(4, 3), (1, 3)]], int_cases=[[Ints((2, 3), -3, 4), Ints((2, 3), -3, 4)]],
       gradgrad=True),
    Op("cross_dim0", lambda m, a, b: a.cross(b, 0), lambda a, b: np_cross(a, b, 0), [[(3, 2), (3, 2)]]),
    Op("cross_default_dim", quiet(lambda m, a, b: m.cross(a, b)), lambda a, b: np_cross(a, b, 0),
       [[(3, 3), (3, 3)]]),
    Op("linalg_cross", lambda m, a, b: m.linalg.cross(a, b), lambda a, b: np_cross(a, b, -1),
       [[(2, 4, 3), (1, 4, 3)], [(3,), (3,)]]),
    Op("linalg_cross_dim", lambda m, a, b: m.linalg.cross(a, b, dim=0), lambda a, b: np_cross(a, b, 0),
       [[(3, 2), (3, 2)]]),
    Op("trace", lambda m, a: m.trace(a), np.trace, [[(3, 3)], [(3, 4)], [(4, 2)], [(0, 0)]],
       int_cases=[[Ints((3, 3), -3, 4)]], gradgrad=True),
    Op("trace_method", lambda m, a: a.trace(), np.trace, [[(3, 3)]]),
    Op("linalg_diagonal", lambda m, a: m.linalg.diagonal(a), np_diagonal, [[(2, 3, 4)], [(3, 3)]]),
    Op("linalg_diagonal_offset", lambda m, a: m.linalg.diagonal(a, offset=1, dim1=0, dim2=2),
       lambda a: np_diagonal(a, 1, 0, 2), [[(3, 2, 4)]]),
    Op("linalg_diagonal_neg_offset", lambda m, a: m.linalg.diagonal(a, offset=-2), lambda a: np_diagonal(a, -2),
       [[(4, 3)], [(2, 3)]]),
    Op("tensordot", lambda m, a, b: m.tensordot(a, b), lambda a, b: np.tensordot(a, b),
       [[(2, 3, 4), (3, 4, 5)]], gradgrad=True),
    Op("tensordot_int", lambda m, a, b: m.tensordot(a, b, dims=1), lambda a, b: np.tensordot(a, b, 1),
       [[(2, 3, 4), (4, 5)]], int_cases=[[Ints((2, 3), -3, 4), Ints((3, 2), -3, 4)]]),
    Op("tensordot_lists", lambda m, a, b: m.tensordot(a, b, dims=([1, 2], [1, 0])),
       lambda a, b: np.tensordot(a, b, ([1, 2], [1, 0])), [[(2, 3, 4), (4, 3, 2)]]),
    Op("tensordot_0", lambda m, a, b: m.tensordot(a, b, dims=0), lambda a, b: np.tensordot(a, b, 0),
       [[(2, 3), (2,)]]),
    Op("multi_dot", lambda m, a, b, c, d: m.linalg.multi_dot([a, b, c, d]),
       lambda a, b, c, d: np.linalg.multi_dot([a, b, c, d]),
       [[(3,), (3, 4), (4, 5), (5,)], [(2, 3), (3, 6), (6, 2), (2, 4)], [(3,), (3, 4), (4, 2), (2, 3)]],
       int_cases=[[Ints((2, 2), -3, 4), Ints((2, 3), -3, 4), Ints((3, 2), -3, 4), Ints((2,), -3, 4)]],
       gradgrad=True),
    Op("multi_dot_two", lambda m, a, b: m.linalg.multi_dot((a, b)), lambda a, b: a @ b,
       [[(3,), (3,)], [(2, 3), (3,)]]),
    Op("chain_matmul", quiet(lambda m, a, b, c: m.chain_matmul(a, b, c)), lambda a, b, c: a @ b @ c,
       [[(2, 3), (3, 4), (4, 2)]]),
    Op("vecdot", lambda m, a, b: m.linalg.vecdot(a, b), lambda a, b: (a * b).sum(-1),
       [[(2, 3), (3,)], [(4,), (4,)]]),
    Op("vecdot_dim", lambda m, a, b: m.linalg.vecdot(a, b, dim=0), lambda a, b: (a * b).sum(0),
       [[(3, 2), (3, 1)]]),
    Op("linalg_matmul", lambda m, a, b: m.linalg.matmul(a, b), np.matmul, [[(2, 3, 4), (4,)]]),

    # ---- einsum ----
    *[Op(f"einsum_{tag}", (lambda eq: lambda m, *ts: m.einsum(eq, *ts))(eq), (lambda eq: lambda *a: np.einsum(eq, *a))(eq),
         [shapes], gradgrad=tag in ("matmul", "chain", "diag"))
      for tag, eq, shapes in [
          ("matmul", "ij,jk->ik", [(3, 4), (4, 5)]),
          ("implicit", "ij,jk", [(3, 4), (4, 2)]),
          ("implicit_order", "ba,Ab", [(2, 3), (4, 2)]),
          ("batch", "bij,bjk->bik", [(2, 3, 4), (2, 4, 5)]),
          ("ellipsis", "...ij,...jk->...ik", [(2, 1, 3, 4), (3, 4, 2)]),
          ("ellipsis_implicit", "...ij", [(5, 2, 3)]),
          ("ellipsis_middle", "i...j,j->...i", [(3, 2, 4, 5), (5,)]),
          ("diag", "ii->i", [(3, 3)]),
          ("trace", "ii", [(4, 4)]),
          ("diag_3", "iij->j", [(3, 3, 2)]),
          ("diag_twice", "iijj->ij", [(2, 2, 3, 3)]),
          ("diag_mixed", "iji->ij", [(3, 2, 3)]),
          ("outer", "i,j->ij", [(3,), (4,)]),
          ("transpose", "ij->ji", [(3, 4)]),
          ("identity", "ij->ij", [(3, 4)]),
          ("sum_all", "ij->", [(3, 4)]),
          ("dot", "i,i->", [(5,), (5,)]),
          ("scalar", ",i->i", [(), (4,)]),
          ("chain", "ab,bc,cd->ad", [(2, 5), (5, 3), (3, 4)]),
          ("chain4", "ab,bc,cd,de->ae", [(3, 4), (4, 4), (4, 2), (2, 3)]),
          ("bilinear", "bn,anm,bm->ba", [(2, 3), (4, 3, 5), (2, 5)]),
          ("hadamard", "ij,ij->ij", [(2, 3), (2, 3)]),
          ("three_way", "ijk,jl,kl->il", [(2, 3, 4), (3, 5), (4, 5)]),
          ("upper", "Ab,bA->", [(2, 3), (3, 2)]),
          ("spaces", " i j , j k -> i k ", [(2, 3), (3, 2)]),
          ("empty", "ij,jk->ik", [(0, 3), (3, 2)]),
          ("empty_sum", "ij,jk->ik", [(2, 0), (0, 3)]),
      ]],
    Op("einsum_ellipsis_summed", lambda m, a: m.einsum("i...->i", a), lambda a: a.sum((1, 2)), [[(3, 2, 4)]]),
    Op("einsum_broadcast_label", lambda m, a, b: m.einsum("ij,ij->ij", a, b), lambda a, b: a * b,
       [[(2, 3), (1, 3)], [(2, 1), (1, 3)]]),
    Op("einsum_broadcast_contracted", lambda m, a, b: m.einsum("i,i->", a, b), lambda a, b: (a * b).sum(),
       [[(1,), (3,)]]),
    Op("einsum_list", lambda m, a, b: m.einsum("ij,jk", [a, b]), np.matmul, [[(2, 3), (3, 2)]]),
    Op("einsum_sublist", lambda m, a, b: m.einsum(a, [0, 1], b, [1, 2], [0, 2]), np.matmul, [[(2, 3), (3, 4)]]),
    Op("einsum_sublist_ellipsis", lambda m, a, b: m.einsum(a, [..., 0, 1], b, [1, 2], [..., 0, 2]), np.matmul,
       [[(2, 3, 4), (4, 2)]]),
    Op("einsum_sublist_implicit", lambda m, a, b: m.einsum(a, [0, 1], b, [1, 2]), np.matmul, [[(2, 3), (3, 4)]]),
    Op("einsum_int", lambda m, a, b: m.einsum("ij,jk->ik", a, b), np.matmul, [],
       int_cases=[[Ints((2, 3), -3, 4), Ints((3, 2), -3, 4)]]),

    # ---- inverse, determinants ----
    Op("inv", lambda m, a: m.linalg.inv(a), np.linalg.inv, [[WC(3, 3)], [WC(2, 3, 3)], [WC(1, 1)], [(0, 0)],
                                                          [(2, 0, 0)]], gradgrad=True),
    Op("inverse", lambda m, a: m.inverse(a), np.linalg.inv, [[WC(3, 3)]]),
    Op("inverse_method", lambda m, a: a.inverse(), np.linalg.inv, [[WC(2, 2, 2)]]),
    Op("inv_ex", lambda m, a: m.linalg.inv_ex(a).inverse, np.linalg.inv, [[WC(2, 3, 3)]]),
    Op("det", lambda m, a: m.linalg.det(a), np.linalg.det, [[WC(3, 3)], [WC(2, 4, 4)], [(2, 2)], [(0, 0)]],
       gradgrad=True),
    Op("det_fn", lambda m, a: m.det(a), np.linalg.det, [[WC(3, 3)]]),
    Op("det_method", lambda m, a: a.det(), np.linalg.det, [[WC(2, 3, 3)]]),
    Op("slogdet", lambda m, a: tuple(m.linalg.slogdet(a)), lambda a: tuple(np.linalg.slogdet(a)),
       [[WC(3, 3)], [(2, 3, 3)], [(0, 0)]], gradgrad=True),
    Op("slogdet_fn", lambda m, a: tuple(m.slogdet(a)), lambda a: tuple(np.linalg.slogdet(a)), [[(3, 3)]]),
    Op("slogdet_method", lambda m, a: a.slogdet()[1], lambda a: np.linalg.slogdet(a)[1], [[(3, 3)]]),
    Op("logdet", lambda m, a: m.logdet(spd(m, a)), lambda a: np.linalg.slogdet(np_spd(a))[1], [[(3, 3)], [(2, 2, 2)]],
       gradgrad=True),
    Op("logdet_method", lambda m, a: spd(m, a).logdet(), lambda a: np.linalg.slogdet(np_spd(a))[1], [[(3, 3)]]),

    # ---- solvers ----
    Op("solve", lambda m, a, b: m.linalg.solve(a, b), np.linalg.solve,
       [[WC(3, 3), (3, 2)], [WC(2, 3, 3), (2, 3, 4)], [WC(3, 3), (3, 0)]], gradgrad=True),
    Op("solve_vector", lambda m, a, b: m.linalg.solve(a, b), lambda a, b: np.linalg.solve(a, b[..., None])[..., 0],
       [[WC(3, 3), (3,)], [WC(2, 3, 3), (2, 3)], [WC(2, 3, 3), (3,)]]),
    Op("solve_broadcast", lambda m, a, b: m.linalg.solve(a, b),
       lambda a, b: np.linalg.solve(np.broadcast_to(a, (4, 2, 3, 3)), np.broadcast_to(b, (4, 2, 3, 2))),
       [[WC(2, 3, 3), (4, 1, 3, 2)]]),
    Op("solve_left_false", lambda m, a, b: m.linalg.solve(a, b, left=False),
       lambda a, b: T(np.linalg.solve(T(a), T(b))), [[WC(3, 3), (2, 3)]], gradgrad=True),
    Op("solve_triangular_upper", lambda m, a, b: m.linalg.solve_triangular(a, b, upper=True),
       lambda a, b: np.linalg.solve(np.triu(a), b), [[WC(3, 3), (3, 2)], [WC(2, 3, 3), (3, 4)]], gradgrad=True),
    Op("solve_triangular_lower", lambda m, a, b: m.linalg.solve_triangular(a, b, upper=False),
       lambda a, b: np.linalg.solve(np.tril(a), b), [[WC(4, 4), (4, 2)]]),
    Op("solve_triangular_unit", lambda m, a, b: m.linalg.solve_triangular(a, b, upper=False, unitriangular=True),
       lambda a, b: np.linalg.solve(np.tril(a, -1) + np.eye(3), b), [[WC(3, 3), (3, 2)]]),
    Op("solve_triangular_right", lambda m, a, b: m.linalg.solve_triangular(a, b, upper=True, left=False),
       lambda a, b: T(np.linalg.solve(T(np.triu(a)), T(b))), [[WC(3, 3), (2, 3)]]),
    Op("lstsq", lambda m, a, b: m.linalg.lstsq(a, b).solution, np_lstsq, [[(5, 3), (5, 2)], [(2, 5, 3), (2, 5, 2)],
                                                                          [(3, 5), (3, 2)]], gradgrad=True),
    Op("lstsq_vector", lambda m, a, b: m.linalg.lstsq(a, b)[0], lambda a, b: np_lstsq(a, b), [[(5, 3), (5,)]]),
    Op("lstsq_gelsd", lambda m, a, b: tuple(m.linalg.lstsq(a, b, driver="gelsd"))[:2],
       lambda a, b: (np_lstsq(a, b), np.linalg.lstsq(a, b, rcond=None)[1]), [[(5, 3), (5, 2)], [(5, 3), (5,)]]),
    Op("lstsq_broadcast", lambda m, a, b: tuple(m.linalg.lstsq(a, b, driver="gelsd"))[:2],
       lambda a, b: (np_lstsq(a, np.broadcast_to(b, (2, 5, 1))),
                     np.stack([np.linalg.lstsq(x, b[0], rcond=None)[1] for x in a])), [[(2, 5, 3), (1, 5, 1)]]),
    Op("lstsq_gelsd_rank_values", lambda m, a, b: tuple(m.linalg.lstsq(a, b, driver="gelss"))[2:],
       lambda a, b: (np.linalg.matrix_rank(a), np.linalg.svd(a, compute_uv=False)), [[(5, 3), (5, 2)]], grad=False),
    Op("lstsq_gels", lambda m, a, b: tuple(m.linalg.lstsq(a, b, driver="gels"))[:2],
       lambda a, b: (np_lstsq(a, b), np.linalg.lstsq(a, b, rcond=None)[1]), [[(5, 3), (5, 2)]]),
    Op("lstsq_rank_deficient", lambda m, a, b, c: m.linalg.lstsq(a @ b, c, driver="gelsd").solution,
       lambda a, b, c: np_lstsq(a @ b, c), [[(5, 2), (2, 3), (5, 2)]], grad=False),

    # ---- factorisations ----
    Op("cholesky", lambda m, a: m.linalg.cholesky(spd(m, a)), lambda a: np.linalg.cholesky(np_spd(a)),
       [[(3, 3)], [(2, 3, 3)], [(0, 0)]], gradgrad=True),
    Op("cholesky_upper", lambda m, a: m.linalg.cholesky(spd(m, a), upper=True),
       lambda a: T(np.linalg.cholesky(np_spd(a))), [[(3, 3)]]),
    Op("cholesky_ex", lambda m, a: m.linalg.cholesky_ex(spd(m, a)).L, lambda a: np.linalg.cholesky(np_spd(a)),
       [[(2, 3, 3)]]),
    Op("cholesky_torch", quiet(lambda m, a: m.cholesky(spd(m, a), True)),
       lambda a: T(np.linalg.cholesky(np_spd(a))), [[(3, 3)]]),
    Op("cholesky_method", quiet(lambda m, a: spd(m, a).cholesky()), lambda a: np.linalg.cholesky(np_spd(a)),
       [[(3, 3)]]),
    Op("qr", lambda m, a: tuple(m.linalg.qr(a)), lambda a: tuple(np.linalg.qr(a)),
       [[(4, 3)], [(3, 3)], [(3, 5)], [(2, 4, 3)]], gradgrad=True),
    Op("qr_complete", lambda m, a: tuple(m.linalg.qr(a, mode="complete")),
       lambda a: tuple(np.linalg.qr(a, mode="complete")), [[(3, 5)], [(3, 3)]]),
    Op("qr_r", lambda m, a: m.linalg.qr(a, mode="r")[1], lambda a: np.linalg.qr(a, mode="r"), [[(4, 3)]],
       grad=False),
    Op("qr_torch", quiet(lambda m, a: tuple(m.qr(a))), lambda a: tuple(np.linalg.qr(a)), [[(4, 3)]]),
    Op("qr_method_some_false", quiet(lambda m, a: tuple(a.qr(some=False))),
       lambda a: tuple(np.linalg.qr(a, mode="complete")), [[(3, 4)]]),
    Op("eigh", lambda m, a: eigh_parts(m, sym(m, a)), lambda a: np_eigh_parts(np_sym(a)),
       [[(3, 3)], [(2, 4, 4)], [(1, 1)]], gradgrad=True),
    Op("eigh_upper", lambda m, a: eigh_parts(m, sym(m, a), "U"), lambda a: np_eigh_parts(np_sym(a), "U"),
       [[(3, 3)]]),
    Op("eigh_reads_triangle", lambda m, a: eigh_parts(m, a, "U"), lambda a: np_eigh_parts(a, "U"), [[(3, 3)]],
       grad=False),
    Op("eigvalsh", lambda m, a: m.linalg.eigvalsh(sym(m, a)), lambda a: np.linalg.eigvalsh(np_sym(a)),
       [[(3, 3)], [(2, 3, 3)]], gradgrad=True),
    Op("svd", svd_parts, np_svd_parts, [[(4, 3)], [(3, 5)], [(3, 3)], [(2, 4, 3)]], gradgrad=True),
    Op("svd_full", lambda m, a: (lambda r: (r[0][..., :, :2] * r[0][..., :, :2], r[1], r[2][..., :2, :] *
                                            r[2][..., :2, :]))(m.linalg.svd(a)),
       lambda a: (lambda r: (r[0][..., :, :2] ** 2, r[1], r[2][..., :2, :] ** 2))(np.linalg.svd(a)),
       [[(4, 2)], [(2, 3)]]),
    Op("svd_full_shapes", lambda m, a: (lambda r: (r[0] @ r[0].mT, r[2].mT @ r[2]))(m.linalg.svd(a)),
       lambda a: (np.eye(4), np.eye(2)), [[(4, 2)]], grad=False),
    Op("svdvals", lambda m, a: m.linalg.svdvals(a), lambda a: np.linalg.svd(a, compute_uv=False),
       [[(4, 3)], [(2, 3, 5)], [(0, 3)]], gradgrad=True),
    Op("svd_torch", lambda m, a: (lambda r: (r[0] * r[0], r[1], r[2] * r[2]))(m.svd(a)),
       lambda a: (lambda r: (r[0] ** 2, r[1], T(r[2]) ** 2))(np.linalg.svd(a, full_matrices=False)),
       [[(4, 3)], [(3, 4)]]),
    Op("svd_torch_method_nouv", lambda m, a: tuple(a.svd(compute_uv=False)),
       lambda a: (np.zeros((4, 4)), np.linalg.svd(a, compute_uv=False), np.zeros((3, 3))), [[(4, 3)]]),
    Op("svd_torch_some_false", lambda m, a: (lambda r: (r[0][:, :3] ** 2, r[1], r[2] * r[2]))(m.svd(a, some=False)),
       lambda a: (lambda r: (r[0][:, :3] ** 2, r[1], T(r[2]) ** 2))(np.linalg.svd(a)), [[(4, 3)]]),
    Op("pinv", lambda m, a: m.linalg.pinv(a), np.linalg.pinv, [[(4, 3)], [(3, 5)], [(2, 3, 3)], [(0, 3)]],
       gradgrad=True),
    Op("pinv_hermitian", lambda m, a: m.linalg.pinv(sym(m, a), hermitian=True), lambda a: np.linalg.pinv(np_sym(a)),
       [[(3, 3)]]),
    Op("pinv_atol", lambda m, a: m.linalg.pinv(a, atol=0.5), lambda a: _np_pinv_cut(a, 0.5, 0.0), [[(4, 3)]],
       grad=False),
    Op("pinv_rtol", lambda m, a: m.linalg.pinv(a, rtol=0.5), lambda a: _np_pinv_cut(a, 0.0, 0.5), [[(4, 3)]],
       grad=False),
    Op("pinverse", lambda m, a: m.pinverse(a), np.linalg.pinv, [[(3, 4)]]),
    Op("pinverse_method", lambda m, a: a.pinverse(rcond=1e-10), np.linalg.pinv, [[(4, 3)]]),
    Op("matrix_power_3", lambda m, a: m.linalg.matrix_power(a, 3), lambda a: np_matrix_power(a, 3),
       [[(3, 3)], [(2, 2, 2)]], int_cases=[[Ints((2, 2), -3, 4)]], gradgrad=True),
    Op("matrix_power_neg", lambda m, a: m.linalg.matrix_power(a, -2), lambda a: np_matrix_power(a, -2),
       [[WC(3, 3)]], gradgrad=True),
    Op("matrix_power_0", lambda m, a: m.matrix_power(a, 0) + a, lambda a: np.eye(3, dtype=a.dtype) + a, [[(3, 3)]],
       int_cases=[[Ints((3, 3), -3, 4)]]),
    Op("matrix_power_1", lambda m, a: a.matrix_power(1), lambda a: a, [[(3, 3)]]),
    Op("matrix_power_6", lambda m, a: a.matrix_power(6), lambda a: np_matrix_power(a, 6), [[Float((3, 3), -0.6, 0.6)]]),
    Op("matrix_rank", lambda m, a: m.linalg.matrix_rank(a), np.linalg.matrix_rank, [[(4, 3)], [(2, 3, 3)]],
       grad=False),
    Op("matrix_rank_deficient", lambda m, a, b: m.linalg.matrix_rank(a @ b),
       lambda a, b: np.linalg.matrix_rank(a @ b), [[(4, 2), (2, 5)]], grad=False),
    Op("matrix_rank_hermitian", lambda m, a: m.linalg.matrix_rank(sym(m, a), hermitian=True),
       lambda a: np.linalg.matrix_rank(np_sym(a), hermitian=True), [[(3, 3)]], grad=False),
    Op("matrix_rank_atol", lambda m, a: m.linalg.matrix_rank(a, atol=1.0, rtol=0.0),
       lambda a: np.sum(np.linalg.svd(a, compute_uv=False) > 1.0), [[(4, 4)]], grad=False),
    Op("cond", lambda m, a: m.linalg.cond(a), lambda a: np.linalg.cond(a), [[WC(3, 3)], [(3, 4)]], gradgrad=True),
    Op("cond_p", lambda m, a: (m.linalg.cond(a, 1), m.linalg.cond(a, -2), m.linalg.cond(a, "nuc")),
       lambda a: (np.linalg.cond(a, 1), np.linalg.cond(a, -2), np.linalg.cond(a, "nuc")), [[WC(3, 3)]],
       torch=False),      # torch 2.13's cond(A, 1) backward fails (an in-place write in its own graph)

    # ---- norms ----
    *[Op(f"vector_norm_{tag}", (lambda p: lambda m, x: m.linalg.vector_norm(x, p))(p),
         (lambda p: lambda x: np_vector_norm(x, p))(p), [[(3, 4)], [(5,)]], away_from=(0.0,),
         gradgrad=tag in ("2", "3"))
      for tag, p in [("2", 2), ("1", 1), ("inf", INF), ("neg_inf", -INF), ("3", 3), ("half", 0.5), ("neg1", -1),
                     ("0", 0)]],
    Op("vector_norm_dim", lambda m, x: m.linalg.vector_norm(x, dim=(0, 2), keepdim=True),
       lambda x: np_vector_norm(x, 2, (0, 2), True), [[(2, 3, 4)]]),
    Op("vector_norm_dim_int", lambda m, x: m.linalg.vector_norm(x, 3, -1), lambda x: np_vector_norm(x, 3, -1),
       [[(2, 3)]]),
    Op("vector_norm_keepdim_all", lambda m, x: m.linalg.vector_norm(x, keepdim=True),
       lambda x: np_vector_norm(x, 2, None, True), [[(2, 3)]]),
    Op("vector_norm_dtype", lambda m, x: m.linalg.vector_norm(x, dtype=m.float64),
       lambda x: np_vector_norm(x, 2), [[(2, 3)]], out_dtype="float64", dtypes=("float32",)),
    Op("vector_norm_0d_empty", lambda m, x, y: (m.linalg.vector_norm(x), m.linalg.vector_norm(y)),
       lambda x, y: (np.abs(x), 0.0), [[(), (0,)]]),
    *[Op(f"matrix_norm_{tag}", (lambda o: lambda m, x: m.linalg.matrix_norm(x, o))(o),
         (lambda o: lambda x: np_matrix_norm(x, o))(o), [[(3, 4)], [(2, 3, 3)]], gradgrad=tag in ("fro", "nuc"))
      for tag, o in [("fro", "fro"), ("nuc", "nuc"), ("2", 2), ("neg2", -2), ("1", 1), ("neg1", -1), ("inf", INF),
                     ("neg_inf", -INF)]],
    Op("matrix_norm_dims", lambda m, x: m.linalg.matrix_norm(x, 1, dim=(2, 0), keepdim=True),
       lambda x: np_matrix_norm(x, 1, (2, 0), True), [[(3, 2, 4)]]),
    Op("matrix_norm_nuc_dims", lambda m, x: m.linalg.matrix_norm(x, "nuc", dim=(0, 2), keepdim=True),
       lambda x: np_matrix_norm(x, "nuc", (0, 2), True), [[(3, 2, 4)]]),
    Op("matrix_norm_empty", lambda m, x: tuple(m.linalg.matrix_norm(x, o) for o in ("fro", "nuc", 2, 1, INF)),
       lambda x: (0.0,) * 5, [[(0, 3)]]),
    Op("linalg_norm", lambda m, x: m.linalg.norm(x), lambda x: np.sqrt((x * x).sum()), [[(2, 3, 4)], [()]]),
    Op("linalg_norm_vec", lambda m, x: m.linalg.norm(x, 3, dim=1), lambda x: np_vector_norm(x, 3, 1), [[(2, 3, 4)]]),
    Op("linalg_norm_mat", lambda m, x: m.linalg.norm(x, INF, dim=(0, 2)),
       lambda x: np_matrix_norm(x, INF, (0, 2)), [[(2, 3, 4)]]),
    Op("linalg_norm_2d_ord", lambda m, x: m.linalg.norm(x, 2), lambda x: np_matrix_norm(x, 2), [[(3, 4)]]),
    Op("linalg_norm_1d_ord", lambda m, x: m.linalg.norm(x, 1, keepdim=True),
       lambda x: np_vector_norm(x, 1, None, True), [[(4,)]]),
]


def _np_pinv_cut(a, atol, rtol):
    u, s, vh = np.linalg.svd(a, full_matrices=False)
    keep = s > max(atol, rtol * s.max())
    return (T(vh) * np.where(keep, 1 / s, 0)) @ T(u)


OPS_BY_NAME = {op.name: op for op in OPS}
assert len(OPS_BY_NAME) == len(OPS), "duplicate op names in the table"

FLOAT_CASES = [pytest.param(op, i, id=f"{op.name}-{i}") for op in OPS for i in range(len(op.cases))]
INT_CASES = [pytest.param(op, i, id=f"{op.name}-int{i}") for op in OPS for i in range(len(op.int_cases))]
GRADGRAD = [pytest.param(op, id=op.name) for op in OPS if op.gradgrad]
TORCH_CASES = [pytest.param(op, i, id=f"{op.name}-{i}") for op in OPS if op.torch for i in range(len(op.cases))]


@pytest.mark.parametrize("op,case", FLOAT_CASES)
def test_op(dg, op, case):
    check_op(dg, op.cases[case], op.fn, op.np_fn, name=op.name, grad=op.grad, noncontig=op.noncontig, **op.check)


@pytest.mark.parametrize("op,case", INT_CASES)
def test_op_int(dg, op, case):
    """int64 inputs where torch accepts them (products, kron, cross, trace, matrix_power): exact int64 results."""
    check_op(dg, op.int_cases[case], op.fn, op.np_fn, name=op.name, grad=False, dtypes=("float32",),
             noncontig=False)


@pytest.mark.parametrize("op", GRADGRAD)
def test_second_derivatives(dg, op):
    check_gradgrad(dg, op.cases[0], op.fn, name=op.name, **{k: v for k, v in op.check.items()
                                                             if k in ("low", "high", "away_from")})


@pytest.mark.parametrize("op,case", TORCH_CASES)
def test_op_matches_torch(dg, op, case):
    pytest.importorskip("torch")
    specs = [as_spec(s, op.check.get("low"), op.check.get("high"), op.check.get("away_from", ()))
             for s in op.cases[case]]
    arrays = draw_inputs(specs, seed_of(op.name, op.cases[case]))
    diff = differentiable(specs, arrays) if op.grad else []
    check_torch(dg, op.fn, arrays, diff, name=op.name)


# ---- exact values: kinks, ties, singular matrices (torch's conventions; test_exact_matches_torch checks them) ----

EXACT = [
    # name, fn, inputs, expected forward, expected gradients of fn(...).sum()
    ("vector_norm_2_at_0", lambda m, x: m.linalg.vector_norm(x), [[0.0, 0.0]], 0.0, [[0.0, 0.0]]),
    ("vector_norm_3_at_0", lambda m, x: m.linalg.vector_norm(x, 3), [[0.0, 0.0]], 0.0, [[0.0, 0.0]]),
    ("vector_norm_half_with_0", lambda m, x: m.linalg.vector_norm(x, 0.5), [[0.0, 1.0, -1.0]], 4.0,
     [[0.0, 2.0, -2.0]]),
    ("vector_norm_1_at_0", lambda m, x: m.linalg.vector_norm(x, 1), [[0.0, 1.0, -2.0]], 3.0, [[0.0, 1.0, -1.0]]),
    ("vector_norm_inf_ties", lambda m, x: m.linalg.vector_norm(x, INF), [[0.0, 2.0, -2.0]], 2.0,
     [[0.0, 0.5, -0.5]]),
    ("matrix_norm_fro_at_0", lambda m, x: m.linalg.matrix_norm(x), [np.zeros((2, 2))], 0.0, [np.zeros((2, 2))]),
    ("matrix_norm_nuc_identity", lambda m, x: m.linalg.matrix_norm(x, "nuc"), [np.eye(2)], 2.0, [np.eye(2)]),
    ("matrix_power_0_grad", lambda m, x: m.linalg.matrix_power(x, 0), [[[1.0, 2.0], [3.0, 4.0]]], np.eye(2),
     [np.zeros((2, 2))]),
    ("trace_rect", lambda m, x: m.trace(x), [np.arange(6.0).reshape(2, 3)], 4.0, [[[1.0, 0, 0], [0, 1.0, 0]]]),
    ("cross_basis", lambda m, a, b: m.linalg.cross(a, b), [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]], [0.0, 0.0, 1.0],
     [[1.0, 0.0, -1.0], [0.0, 1.0, -1.0]]),
]



@pytest.mark.parametrize("case", EXACT, ids=[c[0] for c in EXACT])
def test_exact(dg, case):
    name, fn, vals, expect, expect_grad = case
    check_exact(dg, fn, vals, expect, expect_grad, name=name)


@pytest.mark.parametrize("case", EXACT, ids=lambda c: c[0])
def test_exact_matches_torch(case):
    torch = pytest.importorskip("torch")
    name, fn, vals, expect, expect_grad = case
    check_exact(torch, fn, vals, expect, expect_grad, name=name)


@pytest.mark.parametrize("a,adjugate_t", [
    ([[1.0, 2.0], [2.0, 4.0]], [[4.0, -2.0], [-2.0, 1.0]]),
    (np.diag([1.0, 2.0, 0.0]), np.diag([0.0, 0.0, 2.0])),
    (np.zeros((3, 3)), np.zeros((3, 3))),
    ([[1.0, 2.0, 3.0], [2.0, 4.0, 6.0], [1.0, 0.0, 1.0]], None)])
def test_det_gradient_at_singular_matrices_is_the_adjugate(dg, a, adjugate_t):
    """d det(A) / dA = adj(A)^T, also where det(A) = 0. torch 2.13 gives an exactly singular matrix a zero gradient
    unless create_graph=True, and then the adjugate: dyngrad gives the adjugate always (finite differences agree)."""
    a = np.asarray(a, dtype=np.float64)
    x = dg.tensor(a, requires_grad=True)
    (g,) = dg.autograd.grad(dg.linalg.det(x), x)
    eps, fd = 1e-6, np.zeros_like(a)
    for idx in np.ndindex(*a.shape):
        d = np.zeros_like(a)
        d[idx] = eps
        fd[idx] = (np.linalg.det(a + d) - np.linalg.det(a - d)) / (2 * eps)
    np.testing.assert_allclose(g.numpy(), fd, atol=1e-8)
    if adjugate_t is not None:
        np.testing.assert_allclose(g.numpy(), adjugate_t, atol=1e-12)
    torch = pytest.importorskip("torch")
    t = torch.tensor(a, requires_grad=True)
    (tg,) = torch.autograd.grad(torch.linalg.det(t), t, create_graph=True)
    np.testing.assert_allclose(g.numpy(), tg.detach().numpy(), atol=1e-12)


def test_slogdet_singular_gradient_is_infinite(dg):
    x = dg.tensor([[1.0, 2.0], [2.0, 4.0]], dtype=dg.float64, requires_grad=True)
    sign, logabs = dg.linalg.slogdet(x)
    assert sign.item() == 0 and logabs.item() == -math.inf
    logabs.backward()
    assert np.all(np.isinf(x.grad.numpy()))


def test_cond_of_singular_matrix_is_inf(dg):
    a = dg.tensor([[[1.0, 2.0], [2.0, 4.0]], [[2.0, 0.0], [0.0, 1.0]]], dtype=dg.float64)
    out = dg.linalg.cond(a, 1).numpy()
    assert out[0] == math.inf and out[1] == 2.0          # |A|_1 |A^-1|_1 = 2 * 1, as torch


def test_logdet_negative_and_zero(dg):
    out = dg.logdet(dg.tensor([[[-1.0, 0.0], [0.0, 1.0]], [[1.0, 2.0], [2.0, 4.0]]], dtype=dg.float64)).numpy()
    assert np.isnan(out[0]) and out[1] == -math.inf


def test_solve_triangular_zero_diagonal_gives_inf_not_error(dg):
    a = dg.tensor([[0.0, 1.0], [0.0, 2.0]], dtype=dg.float64)
    out = dg.linalg.solve_triangular(a, dg.ones(2, 1, dtype=dg.float64), upper=True).numpy()
    assert not np.all(np.isfinite(out))


def test_inv_ex_and_cholesky_ex_report_info(dg):
    torch = pytest.importorskip("torch")
    singular = [[1.0, 2.0], [2.0, 4.0]]
    a = np.stack([np.eye(2), np.array(singular), np.array([[0.0, 1.0], [1.0, 0.0]])])
    for m in (dg, torch):
        t = (m.tensor if m is dg else torch.tensor)(a)
        inv, info = m.linalg.inv_ex(t)
        chol, cinfo = m.linalg.cholesky_ex(t)
        assert info.tolist() == [0, 2, 0], m.__name__
        assert cinfo.tolist() == [0, 2, 1], m.__name__
        np.testing.assert_allclose(inv.numpy()[0], np.eye(2))
        np.testing.assert_allclose(inv.numpy()[2], [[0.0, 1.0], [1.0, 0.0]])
        np.testing.assert_allclose(chol.numpy()[0], np.eye(2))


def test_cholesky_reads_one_triangle(dg):
    torch = pytest.importorskip("torch")
    a = np.array([[4.0, 100.0], [-2.0, 5.0]])          # lower triangle is PD, upper is not
    low = dg.linalg.cholesky(dg.tensor(a)).numpy()
    np.testing.assert_allclose(low, torch.linalg.cholesky(torch.tensor(a)).numpy(), rtol=1e-12)
    with pytest.raises(dg.linalg.LinAlgError, match="leading minor of order 2"):
        dg.linalg.cholesky(dg.tensor(a), upper=True)


# ---- errors: types as torch's (LinAlgError for singular data), messages naming the op ----

def _t(m, a, dtype="float64"):
    a = np.asarray(a, dtype=dtype)
    return m.tensor(a) if m.__name__ != "torch" else m.from_numpy(a)


def _r(m, *shape, dtype="float64"):
    return _t(m, np.random.default_rng(0).standard_normal(shape), dtype)


SINGULAR = [[1.0, 2.0], [2.0, 4.0]]

ERRORS = [
    # id, fn(m), exception type (on torch: its own class of that kind), regex for dyngrad's message
    ("inv_singular", lambda m: m.linalg.inv(_t(m, SINGULAR)), "LinAlgError", r"linalg\.inv: .*singular"),
    ("inv_singular_batch", lambda m: m.linalg.inv(_t(m, [np.eye(2), SINGULAR])), "LinAlgError",
     r"linalg\.inv: \(batch element 1\)"),
    ("inverse_singular", lambda m: m.inverse(_t(m, SINGULAR)), "LinAlgError", r"singular"),
    ("inv_ex_check_errors", lambda m: m.linalg.inv_ex(_t(m, SINGULAR), check_errors=True), "LinAlgError",
     r"linalg\.inv_ex: .*singular"),
    ("matrix_power_neg_singular", lambda m: m.linalg.matrix_power(_t(m, SINGULAR), -1), "LinAlgError", r"singular"),
    ("solve_singular", lambda m: m.linalg.solve(_t(m, SINGULAR), _r(m, 2)), "LinAlgError",
     r"linalg\.solve: .*singular"),
    ("cholesky_not_pd", lambda m: m.linalg.cholesky(_t(m, [[1.0, 2.0], [2.0, 1.0]])), "LinAlgError",
     r"linalg\.cholesky: .*positive-definite.*order 2"),
    ("cholesky_not_pd_batch", lambda m: m.linalg.cholesky(_t(m, [np.eye(2), -np.eye(2)])), "LinAlgError",
     r"\(batch element 1\).*order 1"),
    ("cholesky_ex_check_errors", lambda m: m.linalg.cholesky_ex(-_t(m, np.eye(2)), check_errors=True), "LinAlgError",
     r"positive-definite"),
    ("inv_not_square", lambda m: m.linalg.inv(_r(m, 2, 3)), RuntimeError, r"linalg\.inv: A must be a batch of square"),
    ("inv_1d", lambda m: m.linalg.inv(_r(m, 3)), RuntimeError, r"at least 2 dimensions"),
    ("inv_int", lambda m: m.linalg.inv(_t(m, [[1, 2], [3, 4]], "int64")), RuntimeError, r"floating-point"),
    ("det_not_square", lambda m: m.linalg.det(_r(m, 2, 3)), RuntimeError, r"linalg\.det: .*square"),
    ("slogdet_int", lambda m: m.linalg.slogdet(_t(m, [[1, 2], [3, 4]], "int64")), RuntimeError, r"floating"),
    ("cholesky_not_square", lambda m: m.linalg.cholesky(_r(m, 2, 3)), RuntimeError, r"square"),
    ("eigh_int", lambda m: m.linalg.eigh(_t(m, [[1, 2], [3, 4]], "int64")), NotImplementedError, r"floating"),
    ("eigh_uplo", lambda m: m.linalg.eigh(_r(m, 2, 2), UPLO="X"), RuntimeError, r"UPLO"),
    ("eigvalsh_not_square", lambda m: m.linalg.eigvalsh(_r(m, 2, 3)), RuntimeError, r"square"),
    ("qr_mode", lambda m: m.linalg.qr(_r(m, 3, 2), mode="x"), RuntimeError, r"linalg\.qr: .*mode"),
    ("qr_int", lambda m: m.linalg.qr(_t(m, [[1, 2], [3, 4]], "int64")), RuntimeError, r"floating"),
    ("svd_driver", lambda m: m.linalg.svd(_r(m, 3, 2), driver="gesvd"), RuntimeError, r"driver"),
    ("svd_1d", lambda m: m.linalg.svd(_r(m, 3)), RuntimeError, r"at least 2 dimensions"),
    ("svdvals_int", lambda m: m.linalg.svdvals(_t(m, [[1, 2]], "int64")), RuntimeError, r"floating"),
    # torch never promotes in a matrix product (issue 11: dyngrad silently computed float64 @ float32)
    ("matmul_mixed_dtypes", lambda m: _r(m, 2, 2) @ _r(m, 2, 2, dtype="float32"), RuntimeError,
     r"matmul: .*same dtype"),
    ("mm_mixed_dtypes", lambda m: m.mm(_r(m, 2, 2, dtype="float32"), _r(m, 2, 2, dtype="float64")),
     RuntimeError, r"same dtype"),
    ("bmm_mixed_dtypes", lambda m: m.bmm(_r(m, 1, 2, 2, dtype="float32"), _r(m, 1, 2, 2)), RuntimeError,
     r"same dtype"),
    ("mv_mixed_dtypes", lambda m: m.mv(_r(m, 2, 2, dtype="float64"), _r(m, 2, dtype="float32")),
     RuntimeError, r"same dtype"),
    ("dot_mixed_dtypes", lambda m: m.dot(_r(m, 2, dtype="float64"), _r(m, 2, dtype="float32")),
     RuntimeError, r"same dtype"),
    ("matmul_int_float", lambda m: _t(m, [[1, 2]], "int64") @ _r(m, 2, 1, dtype="float32"),
     RuntimeError, r"same dtype"),
    ("linear_mixed_dtypes", lambda m: m.nn.functional.linear(
        _r(m, 2, 3, dtype="float64"), _r(m, 4, 3, dtype="float32")),
     RuntimeError, r"same dtype"),
    ("pinv_1d", lambda m: m.linalg.pinv(_r(m, 3)), RuntimeError, r"at least 2"),
    ("matrix_rank_int", lambda m: m.linalg.matrix_rank(_t(m, [[1, 2]], "int64")), RuntimeError, r"floating"),
    ("solve_dtypes", lambda m: m.linalg.solve(_r(m, 2, 2), _r(m, 2, dtype="float32")), RuntimeError, r"same dtype"),
    ("solve_shapes", lambda m: m.linalg.solve(_r(m, 3, 3), _r(m, 2)), RuntimeError, r"incompatible shapes"),
    ("solve_left_false_vector", lambda m: m.linalg.solve(_r(m, 3, 3), _r(m, 3), left=False), RuntimeError,
     r"XA = B"),
    ("solve_triangular_vector", lambda m: m.linalg.solve_triangular(_r(m, 3, 3), _r(m, 3), upper=True),
     RuntimeError, r"at least 2 dimensions"),
    ("solve_triangular_no_upper", lambda m: m.linalg.solve_triangular(_r(m, 3, 3), _r(m, 3, 1)), TypeError, r"upper"),
    ("lstsq_driver", lambda m: m.linalg.lstsq(_r(m, 3, 2), _r(m, 3, 1), driver="x"), RuntimeError, r"driver"),
    ("matrix_power_float", lambda m: m.linalg.matrix_power(_r(m, 2, 2), 2.0), TypeError, r"int"),
    ("matrix_power_not_square", lambda m: m.linalg.matrix_power(_r(m, 2, 3), 2), RuntimeError, r"square"),
    ("matrix_power_int_neg", lambda m: m.linalg.matrix_power(_t(m, [[1, 2], [3, 4]], "int64"), -1), RuntimeError,
     r"floating"),
    ("vector_norm_int", lambda m: m.linalg.vector_norm(_t(m, [1, 2], "int64")), RuntimeError, r"floating"),
    ("vector_norm_str_ord", lambda m: m.linalg.vector_norm(_r(m, 3), ord="fro"), TypeError, r"ord"),
    ("vector_norm_narrowing", lambda m: m.linalg.vector_norm(_r(m, 3), dtype=m.float32), RuntimeError,
     r"narrowing"),
    ("vector_norm_inf_empty", lambda m: m.linalg.vector_norm(_r(m, 0), ord=math.inf), RuntimeError, r"empty"),
    ("vector_norm_dim", lambda m: m.linalg.vector_norm(_r(m, 2, 3), dim=2), IndexError, r"dim 2 is out of range"),
    ("matrix_norm_ord", lambda m: m.linalg.matrix_norm(_r(m, 2, 2), ord=3), RuntimeError, r"order 3"),
    ("matrix_norm_min_of_empty", lambda m: m.linalg.matrix_norm(_r(m, 3, 0), ord=-2), IndexError, r"empty"),
    ("matrix_norm_neg1_of_empty", lambda m: m.linalg.matrix_norm(_r(m, 3, 0), ord=-1), IndexError, r"empty"),
    ("vector_norm_negative_empty", lambda m: m.linalg.vector_norm(_r(m, 0), ord=-1), RuntimeError, r"empty"),
    ("matrix_norm_1d", lambda m: m.linalg.matrix_norm(_r(m, 3)), RuntimeError, r"at least 2 dimensions"),
    ("matrix_norm_same_dims", lambda m: m.linalg.matrix_norm(_r(m, 2, 2), dim=(0, 0)), RuntimeError, r"different"),
    ("matrix_norm_three_dims", lambda m: m.linalg.matrix_norm(_r(m, 2, 2, 2), dim=(0, 1, 2)), RuntimeError,
     r"2-tuple"),
    ("norm_ord_3d", lambda m: m.linalg.norm(_r(m, 2, 2, 2), ord=2), RuntimeError, r"1-D or 2-D"),
    ("norm_three_dims", lambda m: m.linalg.norm(_r(m, 2, 2, 2), dim=(0, 1, 2)), RuntimeError, r"1 or 2"),
    ("mm_dtypes", lambda m: m.mm(_r(m, 2, 2), _r(m, 2, 2, dtype="float32")), RuntimeError, r"mm: .*same dtype"),
    ("mm_1d", lambda m: m.mm(_r(m, 2), _r(m, 2, 2)), RuntimeError, r"mm: expected 2-D"),
    ("mm_shapes", lambda m: m.mm(_r(m, 2, 3), _r(m, 2, 3)), RuntimeError, r"matmul"),
    ("mm_bool", lambda m: m.mm(_t(m, [[True]], "bool"), _t(m, [[True]], "bool")), NotImplementedError, r"bool"),
    ("bmm_batch", lambda m: m.bmm(_r(m, 2, 2, 2), _r(m, 3, 2, 2)), RuntimeError, r"bmm"),
    ("mv_shapes", lambda m: m.mv(_r(m, 2, 2), _r(m, 2, 2)), RuntimeError, r"mv"),
    ("dot_2d", lambda m: m.dot(_r(m, 2, 2), _r(m, 2, 2)), RuntimeError, r"dot: expected 1-D"),
    ("dot_sizes", lambda m: m.dot(_r(m, 2), _r(m, 3)), RuntimeError, r"same length"),
    ("dot_dtypes", lambda m: m.dot(_r(m, 2), _r(m, 2, dtype="float32")), RuntimeError, r"same dtype"),
    ("inner_sizes", lambda m: m.inner(_r(m, 2, 3), _r(m, 2, 2)), RuntimeError, r"inner"),
    ("outer_2d", lambda m: m.outer(_r(m, 2, 2), _r(m, 2)), RuntimeError, r"outer"),
    ("addmm_broadcast", lambda m: m.addmm(_r(m, 2), _r(m, 3, 3), _r(m, 3, 3)), RuntimeError, r"broadcast"),
    ("addmm_dtypes", lambda m: m.addmm(_r(m, 3, 3), _r(m, 3, 3, dtype="float32"), _r(m, 3, 3, dtype="float32")),
     RuntimeError, r"same dtype"),
    ("addr_int_float_beta", lambda m: m.addr(_t(m, [[1, 2], [3, 4]], "int64"), _t(m, [1, 2], "int64"),
                                             _t(m, [1, 2], "int64"), beta=1.5), RuntimeError, r"beta"),
    ("addbmm_batch", lambda m: m.addbmm(_r(m, 2, 2), _r(m, 2, 2, 3), _r(m, 3, 3, 2)), RuntimeError, r"addbmm"),
    ("cross_no_size_3", lambda m: m.cross(_r(m, 4, 2), _r(m, 4, 2)), RuntimeError, r"size 3"),
    ("cross_dim_size", lambda m: m.cross(_r(m, 4, 3), _r(m, 4, 3), dim=0), RuntimeError, r"length 3"),
    ("cross_ndim", lambda m: m.cross(_r(m, 4, 3), _r(m, 3), dim=-1), RuntimeError, r"number of dimensions"),
    ("cross_dtypes", lambda m: m.linalg.cross(_r(m, 3), _r(m, 3, dtype="float32")), RuntimeError, r"dtype"),
    ("linalg_cross_dim", lambda m: m.linalg.cross(_r(m, 3, 4), _r(m, 3, 4)), RuntimeError, r"length 3"),
    ("linalg_cross_dim_range", lambda m: m.linalg.cross(_r(m, 4, 3), _r(m, 4, 3), dim=2), IndexError, r"dim 2"),
    ("trace_3d", lambda m: m.trace(_r(m, 2, 2, 2)), RuntimeError, r"trace: expected a matrix"),
    ("trace_bool", lambda m: m.trace(_t(m, [[True]], "bool")), NotImplementedError, r"bool"),
    ("tensordot_negative", lambda m: m.tensordot(_r(m, 2, 3), _r(m, 3, 2), dims=-1), RuntimeError, r">= 0"),
    ("tensordot_sizes", lambda m: m.tensordot(_r(m, 2, 3, 4), _r(m, 3, 3), dims=([2], [0])), RuntimeError,
     r"must match"),
    ("tensordot_dtypes", lambda m: m.tensordot(_r(m, 2, 3), _r(m, 3, dtype="float32"), dims=1), RuntimeError,
     r"same dtype"),
    ("tensordot_int_pair", lambda m: m.tensordot(_r(m, 2, 3), _r(m, 3, 3), dims=[1, 0]), TypeError, r"dims"),
    ("multi_dot_one", lambda m: m.linalg.multi_dot([_r(m, 2, 2)]), RuntimeError, r"at least 2"),
    ("multi_dot_3d", lambda m: m.linalg.multi_dot([_r(m, 2, 2), _r(m, 2, 2, 2)]), RuntimeError, r"1-D or 2-D"),
    ("multi_dot_dtypes", lambda m: m.linalg.multi_dot([_r(m, 2, 2), _r(m, 2, 2, dtype="float32")]), RuntimeError,
     r"same dtype"),
    ("multi_dot_shapes", lambda m: m.linalg.multi_dot([_r(m, 2, 3), _r(m, 2, 2)]), RuntimeError, r"multiplied"),
    ("chain_matmul_none", lambda m: m.chain_matmul(), RuntimeError, r"one or more"),
    ("vecdot_int", lambda m: m.linalg.vecdot(_t(m, [1], "int64"), _t(m, [1], "int64")), RuntimeError, r"floating"),
    ("vecdot_dtypes", lambda m: m.linalg.vecdot(_r(m, 2), _r(m, 2, dtype="float32")), RuntimeError, r"same dtype"),
    ("einsum_no_operands", lambda m: m.einsum("i"), ValueError, r"at least one operand"),
    ("einsum_not_str", lambda m: m.einsum(3, _r(m, 2)), TypeError, r"equation"),
    ("einsum_sizes", lambda m: m.einsum("ij,jk", _r(m, 2, 3), _r(m, 4, 2)), RuntimeError, r"subscript j has size 4"),
    ("einsum_diag_sizes", lambda m: m.einsum("ii", _r(m, 2, 3)), RuntimeError, r"repeated"),
    ("einsum_too_few", lambda m: m.einsum("ij,jk", _r(m, 2, 2)), RuntimeError, r"operands"),
    ("einsum_too_many", lambda m: m.einsum("ij", _r(m, 2, 2), _r(m, 2, 2)), RuntimeError, r"operands"),
    ("einsum_bad_char", lambda m: m.einsum("i1", _r(m, 2, 2)), RuntimeError, r"invalid subscript"),
    ("einsum_output_twice", lambda m: m.einsum("ij->ii", _r(m, 2, 2)), RuntimeError, r"more than once"),
    ("einsum_output_unknown", lambda m: m.einsum("ij->k", _r(m, 2, 2)), RuntimeError, r"does not appear"),
    ("einsum_ndim", lambda m: m.einsum("ijk", _r(m, 2, 2)), RuntimeError, r"dimensions"),
    ("einsum_two_ellipses", lambda m: m.einsum("......", _r(m, 2)), RuntimeError, r"ellipsis"),
    ("einsum_dtypes", lambda m: m.einsum("ij,jk", _r(m, 2, 2), _r(m, 2, 2, dtype="float32")), RuntimeError,
     r"same dtype"),
]


def _expected_type(m, exc):
    if exc == "LinAlgError":
        return m.linalg.LinAlgError
    return exc


@pytest.mark.parametrize("case", ERRORS, ids=lambda c: c[0])
def test_error(dg, case):
    name, fn, exc, pattern = case
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        with pytest.raises(_expected_type(dg, exc), match=pattern):
            fn(dg)


@pytest.mark.parametrize("case", ERRORS, ids=lambda c: c[0])
def test_error_types_are_torchs(case):
    torch = pytest.importorskip("torch")
    name, fn, exc, _ = case
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        with pytest.raises(_expected_type(torch, exc)):
            fn(torch)


def test_linalg_error_is_a_runtime_error(dg):
    assert issubclass(dg.linalg.LinAlgError, RuntimeError)
    with pytest.raises(RuntimeError):
        dg.linalg.inv(dg.zeros(2, 2))


def test_qr_gradient_refusals(dg):
    x = dg.tensor(np.random.default_rng(0).standard_normal((4, 2)), requires_grad=True)
    with pytest.raises(RuntimeError, match="mode='r'"):
        dg.linalg.qr(x, mode="r")[1].sum().backward()
    with pytest.raises(RuntimeError, match="complete"):
        dg.linalg.qr(x, mode="complete")[0].sum().backward()


# ---- warnings of torch's deprecated spellings ----

@pytest.mark.parametrize("call", [
    lambda m, a: m.qr(a), lambda m, a: a.qr(), lambda m, a: m.cholesky(a @ a.mT + 3 * m.eye(3, dtype=a.dtype)),
    lambda m, a: m.chain_matmul(a, a), lambda m, a: m.cross(a, a)])
def test_deprecated_spellings_warn_at_the_callers_line(dg, call):
    a = dg.tensor(np.random.default_rng(0).standard_normal((3, 3)))
    with pytest.warns(UserWarning, match="deprecated") as record:
        call(dg, a)
    assert record[0].filename == __file__


# ---- out= ----

def test_out(dg):
    a = dg.tensor(np.random.default_rng(0).standard_normal((3, 3)) + 3 * np.eye(3))
    out = dg.empty(3, 3, dtype=dg.float64)
    assert dg.linalg.inv(a, out=out) is out
    np.testing.assert_allclose(out.numpy(), np.linalg.inv(a.numpy()))
    vals, vecs = dg.empty(0, dtype=dg.float64), dg.empty(0, dtype=dg.float64)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)      # resizing a non-empty out= warns; these are empty
        res = dg.linalg.eigh(a + a.mT, out=(vals, vecs))
    assert res[0] is vals and res.eigenvectors is vecs and tuple(vecs.shape) == (3, 3)
    o = dg.empty(3, 3, dtype=dg.float64)
    dg.addmm(a, a, a, out=o)
    np.testing.assert_allclose(o.numpy(), a.numpy() + a.numpy() @ a.numpy())
    r = dg.empty((), dtype=dg.int64)
    dg.linalg.matrix_rank(a, out=r)
    assert r.item() == 3
    with pytest.raises(RuntimeError, match="automatic differentiation"):
        dg.linalg.det(a.requires_grad_(), out=dg.empty((), dtype=dg.float64))


# ---- the dyngrad.linalg namespace and the rest of the table ----

def test_linalg_namespace_is_the_table(dg):
    import inspect
    from dyngrad._api.table import rows
    table = {row.name for row in rows() if "linalg" in row.kinds}
    public = {n for n in dir(dg.linalg) if not n.startswith("_") and not inspect.ismodule(getattr(dg.linalg, n))}
    assert public == table
    assert dg.linalg.__name__ == dg.__name__ + ".linalg"
    torch = pytest.importorskip("torch")
    for name in table:
        assert hasattr(torch.linalg, name), name
        if name != "LinAlgError":
            ours = list(inspect.signature(getattr(dg.linalg, name)).parameters)
            assert ours[0] in ("A", "input", "x", "tensors", "LU", "LD"), (name, ours)     # LU, LD: torch's names


def test_engines_have_their_own_namespace(cpp, ref):
    import importlib
    assert importlib.import_module("dyngrad.linalg") is cpp.linalg
    assert importlib.import_module("dyngrad.reference.linalg") is ref.linalg
    assert cpp.linalg.LinAlgError is not ref.linalg.LinAlgError
    x = ref.tensor([[2.0, 0.0], [0.0, 4.0]])
    assert type(ref.linalg.inv(x)) is ref.Tensor


def test_linalg_rows_behave_the_same_on_both_engines(cpp, ref):
    """The parity check of tests/test_api_table.py (same results or the same error on odd arguments), for the
    dyngrad.linalg namespace, which that test does not reach."""
    from test_api_table import _bad_argument_lists, _outcome, _same
    names = sorted(n for n in cpp.linalg.__all__ if n != "LinAlgError")
    differ, tried = [], 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        for name in names:
            for k in range(len(_bad_argument_lists(cpp))):
                outs = [_outcome(lambda: getattr(m.linalg, name)(*_bad_argument_lists(m)[k])) for m in (cpp, ref)]
                tried += 1
                if not _same(*outs):
                    differ.append(f"linalg.{name}{k}: dyngrad {outs[0]!s:.160}\n   reference {outs[1]!s:.160}")
    assert tried > 200
    assert not differ, "\n".join(differ)


def test_signatures_match_torch():
    """Parameter names, kinds and defaults of every function of this family (top level, Tensor methods,
    torch.linalg) are torch's, where torch's are introspectable."""
    import inspect
    torch = pytest.importorskip("torch")
    import dyngrad as dg
    checked = 0
    for name, ours, theirs in [("tensordot", dg.tensordot, torch.tensordot),
                               ("chain_matmul", dg.chain_matmul, torch.chain_matmul)]:
        p, q = inspect.signature(ours).parameters, inspect.signature(theirs).parameters
        assert list(p) == list(q), (name, list(p), list(q))
        checked += 1
    # torch's builtins show their signature in the first line of their docstring
    import re
    for space, mod, tmod in [("", dg, torch), ("linalg.", dg.linalg, torch.linalg)]:
        for name in (mod.__all__ if space else [
                "mm", "bmm", "mv", "dot", "vdot", "inner", "outer", "ger", "addmm", "addmv", "addbmm", "baddbmm",
                "addr", "kron", "cross", "trace", "inverse", "det", "logdet", "slogdet", "pinverse", "cholesky", "qr",
                "svd", "matrix_power"]):
            theirs = getattr(tmod, name, None)
            first = (getattr(theirs, "__doc__", None) or "").strip().splitlines()
            if not first or "(" not in first[0] or name == "LinAlgError":
                continue
            head = re.sub(r"^(torch\.)?(linalg\.)?", "", first[0])
            if not head.startswith(name + "(") and not head.startswith("linalg_" + name):
                continue
            head = head.split(" ->")[0]
            inside = head[head.index("(") + 1:head.rindex(")")]
            parts, depth, current = [], 0, ""
            for ch in inside:                  # top-level commas only (annotations hold brackets)
                depth += ch in "[(" and 1 or (-1 if ch in "])" else 0)
                if ch == "," and depth == 0:
                    parts.append(current)
                    current = ""
                else:
                    current += ch
            parts.append(current)
            names = [re.split(r"[:=]", part.strip().replace("bool ", ""))[0].strip() for part in parts]
            names = [n for n in names if n and n not in ("*", "out")]
            ours = [n for n in inspect.signature(getattr(mod, name)).parameters if n != "out"]
            if space + name == "linalg.matrix_rank":       # also torch's older overload matrix_rank(A, tol)
                ours.remove("tol")
            assert ours == names, (space + name, ours, names)
            checked += 1
    assert checked > 40


def test_no_reference_cycles_through_saved_outputs(cpp):
    """Note [Outputs in linalg backwards]: the Functions save their outputs detached, so a graph is freed as soon as
    it is dropped (no cycle left for the collector)."""
    import gc
    gc.collect()
    before = cpp._C._live_node_count()
    x = cpp.tensor(np.eye(3) * 2 + 0.1, requires_grad=True)
    for fn in (cpp.linalg.inv, cpp.linalg.det, lambda a: cpp.linalg.svd(a)[0], lambda a: cpp.linalg.eigh(a)[1],
               lambda a: cpp.linalg.qr(a)[0], cpp.linalg.cholesky, cpp.linalg.pinv):
        y = fn(x).sum()
        del y
    assert cpp._C._live_node_count() == before


# ---- einsum on random equations, against torch ----

def _random_einsum(rng):
    """A random valid-looking equation and operand shapes: 1-4 operands, repeated subscripts, ellipses, size-1
    dims that broadcast, implicit and explicit outputs (some invalid: both libraries must then raise)."""
    letters = "abcdAB"
    sizes = {l: int(rng.integers(1, 4)) for l in letters}
    ell = [int(rng.integers(1, 3)) for _ in range(int(rng.integers(0, 3)))] if rng.random() < 0.4 else None
    terms, shapes = [], []
    for _ in range(int(rng.integers(1, 5))):
        labels = list(rng.choice(list(letters), size=int(rng.integers(0, 4))))
        shape = [sizes[l] if rng.random() > 0.15 else 1 for l in labels]
        term = "".join(labels)
        if ell is not None and rng.random() < 0.7:
            at = int(rng.integers(0, len(labels) + 1))
            e = [1 if rng.random() < 0.3 else s for s in ell[int(rng.integers(0, len(ell) + 1)):]]
            term = "".join(labels[:at]) + "..." + "".join(labels[at:])
            shape = shape[:at] + e + shape[at:]
        terms.append(term)
        shapes.append(tuple(shape))
    equation = ",".join(terms)
    if rng.random() < 0.6:
        used = sorted(set("".join(terms).replace(".", "")))
        out = "".join(rng.permutation(used)[:int(rng.integers(0, len(used) + 1))])
        equation += "->" + (("..." + out) if ell is not None and rng.random() < 0.7 else out)
    return equation, shapes


def test_einsum_random_equations_match_torch(dg):
    """Values and gradients equal torch's, or both raise (DYNGRAD_LONG=1: 2000 equations instead of 150)."""
    import os
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(7)
    valid = 0
    for trial in range(2000 if os.environ.get("DYNGRAD_LONG") == "1" else 150):
        equation, shapes = _random_einsum(rng)
        arrays = [rng.standard_normal(s) for s in shapes]
        results = []
        for m in (torch, dg):
            ts = [(m.tensor(a) if m is dg else torch.tensor(a)).requires_grad_() for a in arrays]
            try:
                out = m.einsum(equation, *ts)
            except RuntimeError:
                results.append(None)
                continue
            w = np.random.default_rng(trial).standard_normal(tuple(out.shape))
            loss = (out * (m.tensor(w) if m is dg else torch.tensor(w))).sum()
            grads = m.autograd.grad(loss, ts, allow_unused=True)
            results.append((out.detach().numpy(), [None if g is None else g.numpy() for g in grads]))
        theirs, ours = results
        assert (theirs is None) == (ours is None), (equation, shapes, "only one raised")
        if theirs is None:
            continue
        valid += 1
        np.testing.assert_allclose(ours[0], theirs[0], rtol=1e-10, atol=1e-12, err_msg=f"{equation} {shapes}")
        for g, tg, a in zip(ours[1], theirs[1], arrays):
            np.testing.assert_allclose(np.zeros(a.shape) if g is None else g, np.zeros(a.shape) if tg is None else tg,
                                       rtol=1e-10, atol=1e-12, err_msg=f"{equation} {shapes}: gradient")
    assert valid > 100


@pytest.mark.parametrize("k", [16, 23, 1000, 32336])
def test_long_dot_and_mv_in_float64_close_to_exact(dg, k):
    """Products with one output column (dot, mv, a matrix times a vector) sum in 8 interleaved partial sums (Note
    [Dot products in 8 lanes] in kernels/matmul.cpp): close to the exactly rounded sum, and a row's result does
    not depend on the other rows."""
    import math
    rng = np.random.default_rng(k)
    m, v = rng.standard_normal((5, k)), rng.standard_normal(k)
    exact = np.array([math.fsum(row * v) for row in m])   # (each product rounded once: the tolerance covers it)
    scale = np.abs(m * v).sum(axis=1)
    got = dg.tensor(m).mv(dg.tensor(v)).numpy()
    assert np.all(np.abs(got - exact) <= 1e-14 * scale)
    assert abs(dg.tensor(m[2]).dot(dg.tensor(v)).item() - exact[2]) <= 1e-14 * scale[2]
    if dg.__name__ == "dyngrad":   # (numpy's products, the reference engine's, sum in orders of their own)
        assert dg.tensor(m[2]).dot(dg.tensor(v)).item() == got[2]
        np.testing.assert_array_equal((dg.tensor(m) @ dg.tensor(v)[:, None]).numpy()[:, 0], got)


@pytest.mark.parametrize("keepdim", [False, True])
def test_two_norm_over_every_dim_is_one_dot_product(dg, keepdim):
    """linalg.vector_norm(x) of a real x over every dim is sqrt(x . x) of x flattened (one pass): the value of
    the sum of squares for contiguous and transposed x, the keepdim shape, gradient x / |x| (0 at a zero x, as
    torch's), and float64 finite differences."""
    rng = np.random.default_rng(7)
    a = rng.standard_normal((37, 29))
    for x in (dg.tensor(a), dg.tensor(a).mT, dg.tensor(a.astype(np.float32))):
        n = dg.linalg.vector_norm(x, keepdim=keepdim)
        ref = np.sqrt((x.numpy().astype(np.float64) ** 2).sum())
        assert tuple(n.shape) == ((1, 1) if keepdim else ())
        np.testing.assert_allclose(n.numpy(), ref, rtol=1e-6 if x.dtype == dg.float32 else 1e-13)
    x = dg.tensor(a, requires_grad=True)
    dg.linalg.vector_norm(x, keepdim=keepdim).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), a / np.sqrt((a ** 2).sum()), rtol=1e-12)
    z = dg.zeros(3, 4, dtype=dg.float64, requires_grad=True)
    dg.linalg.vector_norm(z, keepdim=keepdim).sum().backward()
    np.testing.assert_array_equal(z.grad.numpy(), np.zeros((3, 4)))
    y = dg.tensor(rng.standard_normal((4, 5)), requires_grad=True)
    assert dg.autograd.gradcheck(lambda t: dg.linalg.vector_norm(t.mT, keepdim=keepdim), (y,))
    assert dg.autograd.gradgradcheck(lambda t: dg.linalg.vector_norm(t, keepdim=keepdim), (y,))
