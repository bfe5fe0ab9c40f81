"""nn.functional (issue 10, part B): activations, dropout, losses, normalisation, distances and attention, driven by
ONE table, with PyTorch 2.13 as the oracle.

Each row: Op(name, fn(m, *tensors), cases, options); `fn` takes the module first, so the same row runs on dyngrad,
dyngrad.reference and torch. helpers.check_op checks, for float64 and float32, the gradients against central
differences of the engine's own forward, float32 against float64, non-contiguous inputs, and (float64, same
inputs) the forward values and gradients against torch. Rows whose torch gradient is deliberately not the
derivative of the forward (a clamp torch applies without recording it) are compared with torch only (fd=False).
Besides the table: exact values and gradients at kinks, in-place semantics, random ops by their statistics,
running statistics, warnings and error types, all against torch. Skipped parts say so when torch is absent.
"""
import math
import re
import warnings

import numpy as np
import pytest

from helpers import (Const, F, Float, Ints, as_spec, assert_close, check_gradgrad, check_op, check_torch,
                     differentiable, draw_inputs, seed_of, to_numpy)

try:
    import torch
except ImportError:          # the torch comparisons skip; the engine checks still run
    torch = None

needs_torch = pytest.mark.skipif(torch is None, reason="torch (the oracle) is not installed")


class Op:
    """One row: `check` holds check_op options (low/high/away_from, tolerances, eps); fd=False compares with torch
    only; quiet=True silences the UserWarnings torch and dyngrad both give (checked in test_warnings)."""

    def __init__(self, name, fn, cases, *, grad=True, gradgrad=False, noncontig=True, fd=True, quiet=False,
                 torch_grad=True, **check):
        self.name, self.fn, self.cases, self.grad, self.gradgrad = name, fn, list(cases), grad, gradgrad
        self.noncontig, self.fd, self.quiet, self.check = noncontig, fd, quiet, check
        self.torch_grad = torch_grad       # False: torch's own backward fails there; its forward is compared

    def __repr__(self):
        return self.name


class Signs:
    """A float input of -1s and 1s (targets of the margin losses)."""

    def __init__(self, shape):
        self.shape = tuple(shape)

    def draw(self, rng):
        return np.where(rng.random(self.shape) < 0.5, -1.0, 1.0)

    def __repr__(self):
        return f"Signs{self.shape}"


class Probabilities:
    """Rows of class probabilities along `dim` (a float target of cross_entropy)."""

    def __init__(self, shape, dim=1):
        self.shape, self.dim = tuple(shape), dim

    def draw(self, rng):
        p = rng.uniform(0.05, 1.0, size=self.shape)
        return p / p.sum(axis=self.dim, keepdims=True)

    def __repr__(self):
        return f"Probabilities{self.shape}"


def pos(*shape):
    return Float(shape, 0.5, 2.0)


def signs(*shape):
    return Const(Signs(shape))


def nf(m):
    return m.nn.functional


UNARY = [[(3, 4)], [()], [(0, 3)]]
HARDSIGMOID_TOL = (1e-7, 1e-9)
REDUCTIONS = ("mean", "sum", "none")


def act(name, call, cases=UNARY, **kw):
    return Op(name, call, cases, **kw)


# ----- the table -------------------------------------------------------------------------------------------------

OPS = [
    # ---- activations ----
    act("relu", lambda m, x: F(m).relu(x), away_from=(0.0,)),
    act("relu6", lambda m, x: F(m).relu6(x), [[Float((3, 4), -8, 8, away_from=(0.0, 6.0), margin=0.1)], [()]]),
    act("hardtanh", lambda m, x: F(m).hardtanh(x), away_from=(-1.0, 1.0)),
    act("hardtanh_bounds", lambda m, x: F(m).hardtanh(x, -0.5, 2.0), [[Float((3, 4), -3, 3, away_from=(-0.5, 2.0))]]),
    act("elu", lambda m, x: F(m).elu(x), away_from=(0.0,), gradgrad=True),
    act("elu_alpha", lambda m, x: F(m).elu(x, alpha=0.5), [[(3, 4)]], away_from=(0.0,)),
    act("selu", lambda m, x: F(m).selu(x), away_from=(0.0,)),
    act("selu_fn", lambda m, x: m.selu(x), [[(3, 4)]], away_from=(0.0,)),
    act("celu", lambda m, x: F(m).celu(x, 2.0), away_from=(0.0,)),
    act("celu_fn", lambda m, x: m.celu(x, alpha=0.5), [[(3, 4)]], away_from=(0.0,)),
    # torch's hardsigmoid backward multiplies by 1/6 rounded to float32 (a relative 3e-8 off in float64)
    act("hardsigmoid", lambda m, x: F(m).hardsigmoid(x), [[Float((3, 4), -5, 5, away_from=(-3.0, 3.0))], [()]],
        torch_tol=HARDSIGMOID_TOL),
    act("hardswish", lambda m, x: F(m).hardswish(x), [[Float((3, 4), -5, 5, away_from=(-3.0, 3.0))], [()]]),
    act("silu", lambda m, x: F(m).silu(x), gradgrad=True),
    act("mish", lambda m, x: F(m).mish(x), gradgrad=True),
    act("logsigmoid", lambda m, x: F(m).logsigmoid(x), [[Float((3, 4), -30, 30)], [()], [(0, 3)]], gradgrad=True),
    act("softsign", lambda m, x: F(m).softsign(x), away_from=(0.0,)),
    act("softshrink", lambda m, x: F(m).softshrink(x), away_from=(-0.5, 0.5)),
    act("softshrink_lambd", lambda m, x: F(m).softshrink(x, 1.0), [[(3, 4)]], away_from=(-1.0, 1.0)),
    act("hardshrink", lambda m, x: F(m).hardshrink(x), away_from=(-0.5, 0.5)),
    act("hardshrink_fn", lambda m, x: m.hardshrink(x, 0.2), [[(3, 4)]], away_from=(-0.2, 0.2)),
    act("hardshrink_method", lambda m, x: x.hardshrink(), [[(3, 4)]], away_from=(-0.5, 0.5)),
    act("tanhshrink", lambda m, x: F(m).tanhshrink(x)),
    act("threshold", lambda m, x: F(m).threshold(x, 0.1, 20.0), away_from=(0.1,)),
    act("threshold_fn", lambda m, x: m.threshold(x, -0.2, -3.0), [[(3, 4)]], away_from=(-0.2,)),
    act("leaky_relu", lambda m, x: F(m).leaky_relu(x, 0.2), away_from=(0.0,)),
    act("gelu_tanh", lambda m, x: F(m).gelu(x, approximate="tanh"), gradgrad=True),
    act("softplus", lambda m, x: F(m).softplus(x, beta=2.0, threshold=3.0), [[(3, 4)]], away_from=(1.5,)),
    act("rrelu_eval", lambda m, x: F(m).rrelu(x, 0.1, 0.3), away_from=(0.0,)),
    act("rrelu_fn_eval", lambda m, x: m.rrelu(x), [[(3, 4)]], away_from=(0.0,)),
    act("glu", lambda m, x: F(m).glu(x), [[(3, 4)], [(2, 3, 2)]], gradgrad=True),
    act("glu_dim0", lambda m, x: F(m).glu(x, 0), [[(4, 3)]]),
    Op("prelu_scalar", lambda m, x, w: F(m).prelu(x, w), [[(3, 4), (1,)], [(), (1,)], [(5,), (1,)]],
       away_from=(0.0,)),
    Op("prelu_channels", lambda m, x, w: F(m).prelu(x, w), [[(2, 3, 4), (3,)], [(2, 3), (3,)]], away_from=(0.0,)),
    Op("prelu_fn_method", lambda m, x, w: m.prelu(x, w) + x.prelu(w), [[(2, 3, 2), (3,)]], away_from=(0.0,)),
    act("softmin", lambda m, x: F(m).softmin(x, dim=1), [[(3, 4)], [(2, 3, 4)]]),
    act("softmin_dtype", lambda m, x: F(m).softmin(x, 0, dtype=m.float64), [[(3, 4)]]),
    act("softmax_dtype", lambda m, x: F(m).softmax(x, -1, dtype=m.float64), [[(3, 4)]]),
    act("log_softmax_dtype", lambda m, x: F(m).log_softmax(x, 0, dtype=m.float64), [[(3, 4)]]),
    act("softmax_implicit_dim", lambda m, x: F(m).softmax(x), [[(3, 4)], [(2, 3, 4)], [(5,)], [()]], quiet=True),
    act("log_softmax_implicit_dim", lambda m, x: F(m).log_softmax(x), [[(2, 3, 4, 2)], [(3,)]], quiet=True),
    act("softmax_fn", lambda m, x: m.softmax(x, 1, m.float64) + x.log_softmax(dim=0), [[(3, 4)]]),
    # in-place forms (on a non-leaf, so that the write is recorded on its history)
    act("relu_inplace", lambda m, x: F(m).relu(x * 1, inplace=True), [[(3, 4)]], away_from=(0.0,)),
    act("elu_inplace", lambda m, x: F(m).elu(x * 1, 0.7, True), [[(3, 4)]], away_from=(0.0,)),
    act("elu_", lambda m, x: F(m).elu_(x * 1), [[(3, 4)]], away_from=(0.0,)),
    act("selu_", lambda m, x: m.selu_(x * 1) + F(m).selu_(x * 2), [[(3, 4)]], away_from=(0.0,)),
    act("celu_", lambda m, x: m.celu_(x * 1, 1.5) + F(m).celu_(x * 2), [[(3, 4)]], away_from=(0.0,)),
    act("hardtanh_", lambda m, x: F(m).hardtanh_(x * 1, -0.5, 0.5), [[(3, 4)]], away_from=(-0.5, 0.5)),
    act("leaky_relu_", lambda m, x: F(m).leaky_relu_(x * 1, 0.3), [[(3, 4)]], away_from=(0.0,)),
    act("threshold_", lambda m, x: m.threshold_(x * 1, 0.0, 2.0) + F(m).threshold_(x * 2, 0.5, 0.0), [[(3, 4)]],
        away_from=(0.0, 0.25)),
    act("relu_fn_", lambda m, x: m.relu_(x * 1) + F(m).relu_(x * 3), [[(3, 4)]], away_from=(0.0,)),
    act("rrelu_eval_", lambda m, x: F(m).rrelu_(x * 1) + m.rrelu_(x * 2, 0.2, 0.4), [[(3, 4)]], away_from=(0.0,)),
    act("hardswish_inplace", lambda m, x: F(m).hardswish(x * 1, inplace=True), [[(3, 4)]], away_from=(-3.0, 3.0)),
    act("hardsigmoid_inplace", lambda m, x: F(m).hardsigmoid(x * 1, True), [[(3, 4)]], torch_tol=HARDSIGMOID_TOL),
    act("silu_mish_relu6_inplace", lambda m, x: F(m).silu(x * 1, True) + F(m).mish(x * 2, True) +
        F(m).relu6(x * 3, inplace=True), [[(3, 4)]], away_from=(0.0,)),

    # ---- regression losses ----
    *[Op(f"mse_loss_{r}", lambda m, a, b, r=r: F(m).mse_loss(a, b, reduction=r), [[(3, 4), (3, 4)]],
         gradgrad=r == "mean") for r in REDUCTIONS],
    *[Op(f"mse_loss_weight_{r}", lambda m, a, b, w, r=r: F(m).mse_loss(a, b, reduction=r, weight=w),
         [[(3, 4), (3, 4), Const(pos(3, 4))]]) for r in REDUCTIONS],
    Op("mse_loss_broadcast", lambda m, a, b: F(m).mse_loss(a, b), [[(3, 1), (4,)]], quiet=True),
    Op("mse_loss_0d", lambda m, a, b: F(m).mse_loss(a, b), [[(), ()]]),
    *[Op(f"l1_loss_{r}", lambda m, a, b, r=r: F(m).l1_loss(a, b, reduction=r), [[(3, 4), (3, 4)]])
      for r in REDUCTIONS],
    Op("l1_loss_weight", lambda m, a, b, w: F(m).l1_loss(a, b, weight=w), [[(3, 4), (3, 4), Const(pos(3, 4))]]),
    *[Op(f"smooth_l1_loss_{r}", lambda m, a, b, r=r: F(m).smooth_l1_loss(a, b, reduction=r), [[(3, 4), (3, 4)]])
      for r in REDUCTIONS],
    Op("smooth_l1_loss_beta", lambda m, a, b: F(m).smooth_l1_loss(a, b, beta=0.5), [[(3, 4), (3, 4)]]),
    Op("smooth_l1_loss_beta0", lambda m, a, b: F(m).smooth_l1_loss(a, b, reduction="sum", beta=0.0),
       [[(3, 4), (3, 4)]]),
    *[Op(f"huber_loss_{r}", lambda m, a, b, r=r: F(m).huber_loss(a, b, reduction=r, delta=0.7), [[(3, 4), (3, 4)]])
      for r in REDUCTIONS],
    *[Op(f"huber_loss_weight_{r}", lambda m, a, b, w, r=r: F(m).huber_loss(a, b, r, 1.5, w),
         [[(3, 4), (3, 4), Const(pos(3, 4))]]) for r in REDUCTIONS],
    *[Op(f"poisson_nll_loss_{r}", lambda m, a, b, r=r: F(m).poisson_nll_loss(a, b, reduction=r),
         [[(3, 4), Float((3, 4), 0.0, 3.0)]]) for r in REDUCTIONS],
    Op("poisson_nll_loss_rates", lambda m, a, b: F(m).poisson_nll_loss(a, b, log_input=False, eps=1e-3),
       [[pos(3, 4), Float((3, 4), 0.0, 3.0)]]),
    Op("poisson_nll_loss_full", lambda m, a, b: F(m).poisson_nll_loss(a, b, full=True, reduction="sum"),
       [[(3, 4), Float((3, 4), 0.1, 4.0, away_from=(1.0,), margin=0.2)]]),
    Op("poisson_nll_loss_fn", lambda m, a, b: m.poisson_nll_loss(a, b, True, False, 1e-8, 2),
       [[(3, 4), Float((3, 4), 0.0, 3.0)]]),
    *[Op(f"gaussian_nll_loss_{r}", lambda m, a, b, v, r=r: F(m).gaussian_nll_loss(a, b, v, reduction=r),
         [[(3, 4), (3, 4), pos(3, 4)]]) for r in REDUCTIONS],
    Op("gaussian_nll_loss_homoscedastic", lambda m, a, b, v: F(m).gaussian_nll_loss(a, b, v, full=True),
       [[(3, 4), (3, 4), pos(3)], [(3, 4), (3, 4), pos(3, 1)], [(2, 3, 4), (2, 3, 4), pos(2, 1, 4)]]),
    Op("gaussian_nll_loss_float_var", lambda m, a, b: F(m).gaussian_nll_loss(a, b, 0.7), [[(3, 4), (3, 4)]]),
    Op("gaussian_nll_loss_clamped_var", lambda m, a, b, v: F(m).gaussian_nll_loss(a, b, v, eps=0.5),
       [[(3, 4), (3, 4), Float((3, 4), 0.1, 1.0)]], fd=False),

    # ---- probabilities ----
    *[Op(f"binary_cross_entropy_{r}", lambda m, x, y, r=r: F(m).binary_cross_entropy(x, y, reduction=r),
         [[Float((3, 4), 0.05, 0.95), Float((3, 4), 0.0, 1.0)]], gradgrad=r == "mean") for r in REDUCTIONS],
    Op("binary_cross_entropy_weight", lambda m, x, y, w: F(m).binary_cross_entropy(x, y, w),
       [[Float((3, 4), 0.05, 0.95), Float((3, 4), 0.0, 1.0), Const(pos(4))],
        [Float((2, 3), 0.05, 0.95), Float((2, 3), 0.0, 1.0), Const(pos(2, 3))]]),
    *[Op(f"bce_with_logits_{r}", lambda m, x, y, w, r=r: F(m).binary_cross_entropy_with_logits(x, y, w, reduction=r),
         [[(3, 4), Float((3, 4), 0.0, 1.0), Const(pos(3, 4))]]) for r in REDUCTIONS],
    Op("bce_with_logits_pos_weight", lambda m, x, y, p: F(m).binary_cross_entropy_with_logits(x, y, pos_weight=p),
       [[(3, 4), Float((3, 4), 0.0, 1.0), Const(pos(4))], [(2, 3, 2, 2), Float((2, 3, 2, 2), 0, 1),
                                                            Const(pos(3, 1, 1))],
        [Float((3, 4), -40, 40), Float((3, 4), 0.0, 1.0), Const(pos(1))]], gradgrad=True),
    Op("bce_with_logits_fn", lambda m, x, y, p: m.binary_cross_entropy_with_logits(x, y, None, p, 2),
       [[(3, 4), Float((3, 4), 0.0, 1.0), Const(pos(4))]]),
    *[Op(f"kl_div_{r}", lambda m, x, y, r=r: F(m).kl_div(x, y, reduction=r),
         [[(3, 4), Float((3, 4), 0.05, 1.0)]], quiet=r == "mean") for r in REDUCTIONS + ("batchmean",)],
    Op("kl_div_log_target", lambda m, x, y: F(m).kl_div(x, y, reduction="batchmean", log_target=True),
       [[(3, 4), (3, 4)], [(), ()]]),
    Op("kl_div_fn", lambda m, x, y: m.kl_div(x, y, 2, log_target=False), [[(3, 4), Float((3, 4), 0.05, 1.0)]]),

    # ---- margins ----
    *[Op(f"soft_margin_loss_{r}", lambda m, x, y, r=r: F(m).soft_margin_loss(x, y, reduction=r),
         [[(3, 4), signs(3, 4)]]) for r in REDUCTIONS],
    *[Op(f"multilabel_soft_margin_loss_{r}", lambda m, x, y, r=r: F(m).multilabel_soft_margin_loss(x, y, reduction=r),
         [[(3, 4), Const(Float((3, 4), 0.0, 1.0))]]) for r in REDUCTIONS],
    Op("multilabel_soft_margin_loss_weight", lambda m, x, y, w: F(m).multilabel_soft_margin_loss(x, y, w),
       [[(3, 4), Const(Float((3, 4), 0, 1)), Const(pos(4))], [(4,), Const(Float((4,), 0, 1)), Const(pos(4))]]),
    *[Op(f"multilabel_margin_loss_{r}", lambda m, x, y, r=r: F(m).multilabel_margin_loss(x, y, reduction=r),
         [[(4, 4), np.array([[3, 0, -1, 1], [1, 2, 3, 0], [-1, 0, 0, 0], [2, 2, -1, 3]])],
          [(4,), np.array([1, 3, -1, 2])]]) for r in REDUCTIONS],
    *[Op(f"multi_margin_loss_{r}", lambda m, x, y, r=r: F(m).multi_margin_loss(x, y, reduction=r),
         [[(4, 5), Ints((4,), 0, 5)], [(5,), np.array(3)], [(5,), np.array([2])]]) for r in REDUCTIONS],
    Op("multi_margin_loss_p2_weight", lambda m, x, y, w: F(m).multi_margin_loss(x, y, 2, 0.5, w),
       [[(4, 5), Ints((4,), 0, 5), Const(pos(5))]]),
    *[Op(f"margin_ranking_loss_{r}", lambda m, a, b, y, r=r: F(m).margin_ranking_loss(a, b, y, 0.1, reduction=r),
         [[(5,), (5,), signs(5)]]) for r in REDUCTIONS],
    Op("margin_ranking_loss_fn", lambda m, a, b, y: m.margin_ranking_loss(a, b, y, 0.3, 2), [[(3, 4), (3, 4),
                                                                                             signs(3, 4)]]),
    *[Op(f"hinge_embedding_loss_{r}", lambda m, x, y, r=r: F(m).hinge_embedding_loss(x, y, 0.5, reduction=r),
         [[(3, 4), signs(3, 4)]]) for r in REDUCTIONS],
    Op("hinge_embedding_loss_other_targets", lambda m, x, y: m.hinge_embedding_loss(x, y, 1.0, 0),
       [[(5,), Const(Float((5,), -2, 2, step=1.0))]]),
    *[Op(f"cosine_embedding_loss_{r}", lambda m, a, b, y, r=r: F(m).cosine_embedding_loss(a, b, y, 0.2, reduction=r),
         [[(3, 4), (3, 4), signs(3)]]) for r in REDUCTIONS],
    Op("cosine_embedding_loss_1d", lambda m, a, b, y: F(m).cosine_embedding_loss(a, b, y), [[(4,), (4,), signs()]]),
    Op("cosine_embedding_loss_fn", lambda m, a, b, y: m.cosine_embedding_loss(a, b, y, -0.5, 0),
       [[(3, 4), (3, 4), signs(3)]]),
    *[Op(f"triplet_margin_loss_{r}", lambda m, a, p, n, r=r: F(m).triplet_margin_loss(a, p, n, 2.0, reduction=r),
         [[(3, 4), (3, 4), (3, 4)]]) for r in REDUCTIONS],
    Op("triplet_margin_loss_p1_swap", lambda m, a, p, n: F(m).triplet_margin_loss(a, p, n, p=1, swap=True),
       [[(3, 4), (3, 4), (3, 4)], [(4,), (4,), (4,)]]),
    Op("triplet_margin_loss_fn", lambda m, a, p, n: m.triplet_margin_loss(a, p, n, 1.5, 3, 1e-6, True, 0),
       [[(3, 4), (3, 4), (3, 4)]]),
    Op("triplet_margin_with_distance_loss", lambda m, a, p, n: F(m).triplet_margin_with_distance_loss(a, p, n),
       [[(3, 4), (3, 4), (3, 4)]]),
    Op("triplet_margin_with_distance_loss_custom",
       lambda m, a, p, n: F(m).triplet_margin_with_distance_loss(
           a, p, n, distance_function=lambda u, v: ((u - v) ** 2).sum(-1), margin=3.0, swap=True, reduction="sum"),
       [[(3, 4), (3, 4), (3, 4)]]),

    # ---- class indices ----
    *[Op(f"cross_entropy_{r}", lambda m, x, t, r=r: F(m).cross_entropy(x, t, reduction=r),
         [[(4, 5), np.array([1, -100, 4, 0])], [(2, 4, 3), np.array([[0, 3, -100], [1, 1, 2]])],
          [(5,), np.array(2)], [(0, 3), Ints((0,), 0, 3)]]) for r in REDUCTIONS],
    # every target ignored: the mean is 0 / 0 = nan (finite differences are nan too), the gradient torch's zeros
    *[Op(f"cross_entropy_all_ignored_{r}", lambda m, x, t, r=r: F(m).cross_entropy(x, t, reduction=r),
         [[(5,), np.array(-100)], [(2, 3), np.array([-100, -100])]], fd=False) for r in REDUCTIONS],
    *[Op(f"cross_entropy_weight_smoothing_{r}",
         lambda m, x, t, w, r=r: F(m).cross_entropy(x, t, w, ignore_index=2, reduction=r, label_smoothing=0.2),
         [[(4, 5), np.array([1, 2, 4, 0]), Const(pos(5))], [(2, 4, 3), np.array([[0, 3, 2], [1, 1, 2]]),
                                                            Const(pos(4))],
          [(5,), np.array(3), Const(pos(5))]]) for r in REDUCTIONS],
    *[Op(f"cross_entropy_smoothing_{r}", lambda m, x, t, r=r: F(m).cross_entropy(x, t, reduction=r,
                                                                                    label_smoothing=0.3),
         [[(4, 5), np.array([1, -100, 4, 0])], [(2, 4, 3), np.array([[0, 3, -100], [1, 1, 2]])]])
      for r in REDUCTIONS],
    *[Op(f"cross_entropy_probabilities_{r}",
         lambda m, x, y, w, r=r: F(m).cross_entropy(x, y, w, reduction=r, label_smoothing=0.1),
         [[(3, 4), Probabilities((3, 4)), Const(pos(4))], [(2, 3, 2), Probabilities((2, 3, 2)), Const(pos(3))],
          [(4,), Probabilities((4,), 0), Const(pos(4))]]) for r in REDUCTIONS],
    Op("cross_entropy_probabilities_plain", lambda m, x, y: F(m).cross_entropy(x, y),
       [[(3, 4), Probabilities((3, 4))]]),
    # torch reads a (1,) target of (C,) input as one class index, but its backward then fails (size mismatch)
    Op("cross_entropy_1_target_of_1d", lambda m, x, t: F(m).cross_entropy(x, t, reduction="none"),
       [[(5,), np.array([3])]], torch_grad=False),
    *[Op(f"nll_loss_{r}", lambda m, x, t, w, r=r: F(m).nll_loss(x, t, w, ignore_index=1, reduction=r),
         [[(4, 5), np.array([1, 3, 4, 0]), Const(pos(5))], [(2, 4, 3), np.array([[0, 3, 1], [2, 1, 2]]),
                                                            Const(pos(4))],
          [(5,), np.array(3), Const(pos(5))]]) for r in REDUCTIONS],
    Op("nll_loss_nd_plain", lambda m, x, t: F(m).nll_loss(x, t), [[(2, 3, 2, 2), Ints((2, 2, 2), 0, 3)]]),
    Op("nll_loss_all_ignored", lambda m, x, t: F(m).nll_loss(x, t), [[(2, 3), np.array([-100, -100])]], fd=False),

    # ---- normalisation ----
    Op("batch_norm_train", lambda m, x, rm, rv, w, b: F(m).batch_norm(x, rm, rv, w, b, training=True),
       [[(4, 3), Const((3,)), Const(pos(3)), (3,), (3,)], [(2, 3, 4), Const((3,)), Const(pos(3)), (3,), (3,)]],
       gradgrad=True),
    Op("batch_norm_train_no_stats", lambda m, x: F(m).batch_norm(x, None, None, training=True, eps=1e-3),
       [[(2, 3, 2, 2)]]),
    Op("batch_norm_eval", lambda m, x, rm, rv, w, b: F(m).batch_norm(x, rm, rv, w, b),
       [[(4, 3), Const((3,)), Const(pos(3)), (3,), (3,)], [(2, 3, 4), Const((3,)), Const(pos(3)), (3,), (3,)]]),
    Op("batch_norm_fn", lambda m, x, rm, rv, w: m.batch_norm(x, w, None, rm, rv, True, 0.2, 1e-5, False),
       [[(4, 3), Const((3,)), Const(pos(3)), (3,)]]),
    Op("instance_norm", lambda m, x, w, b: F(m).instance_norm(x, weight=w, bias=b),
       [[(2, 3, 4), (3,), (3,)], [(2, 2, 2, 3), (2,), (2,)]], gradgrad=True),
    Op("instance_norm_stats", lambda m, x, rm, rv: F(m).instance_norm(x, rm, rv, momentum=0.3),
       [[(2, 3, 4), Const((3,)), Const(pos(3))]]),
    Op("instance_norm_running", lambda m, x, rm, rv: F(m).instance_norm(x, rm, rv, use_input_stats=False),
       [[(2, 3, 4), Const((3,)), Const(pos(3))]]),
    Op("instance_norm_fn", lambda m, x: m.instance_norm(x, None, None, None, None, True, 0.1, 1e-5, False),
       [[(2, 3, 4)]]),
    Op("group_norm", lambda m, x, w, b: F(m).group_norm(x, 2, w, b), [[(2, 4, 3), (4,), (4,)],
                                                                      [(3, 4, 2, 2), (4,), (4,)]], gradgrad=True),
    Op("group_norm_groups", lambda m, x: F(m).group_norm(x, 1) + F(m).group_norm(x, 4, eps=0.1), [[(2, 4, 3)]]),
    Op("group_norm_fn", lambda m, x: m.group_norm(x, 3), [[(2, 6)]]),
    Op("layer_norm_affine", lambda m, x, w, b: F(m).layer_norm(x, (3, 4), w, b, eps=1e-3),
       [[(2, 3, 4), (3, 4), (3, 4)]]),
    Op("layer_norm_fn", lambda m, x, w: m.layer_norm(x, [4], w), [[(3, 4), (4,)]]),
    Op("rms_norm", lambda m, x, w: F(m).rms_norm(x, (4,), w), [[(3, 4), (4,)], [(4,), (4,)]], gradgrad=True),
    Op("rms_norm_eps", lambda m, x: F(m).rms_norm(x, [3, 4], eps=1e-2) + m.rms_norm(x, (4,)), [[(2, 3, 4)]]),
    Op("local_response_norm", lambda m, x: F(m).local_response_norm(x, 3), [[(2, 5, 3)], [(2, 4, 2, 2)]]),
    Op("local_response_norm_params", lambda m, x: F(m).local_response_norm(x, 2, 0.3, 0.5, 2.0),
       [[(2, 5, 3)], [(1, 3, 2, 2, 2)]]),
    Op("normalize", lambda m, x: F(m).normalize(x), [[(3, 4)], [(2, 3, 4)]]),
    Op("normalize_p", lambda m, x: F(m).normalize(x, 1.0, 0) + F(m).normalize(x, 3.0, -1), [[(3, 4)]]),
    Op("normalize_inf", lambda m, x: F(m).normalize(x, math.inf, 1), [[(3, 4)]]),

    # ---- distances ----
    Op("cosine_similarity", lambda m, a, b: F(m).cosine_similarity(a, b), [[(3, 4), (3, 4)], [(2, 3, 4), (3, 1)]],
       gradgrad=True),
    Op("cosine_similarity_dim", lambda m, a, b: m.cosine_similarity(a, b, dim=-1, eps=0.5), [[(3, 4), (4,)]]),
    Op("pairwise_distance", lambda m, a, b: F(m).pairwise_distance(a, b), [[(3, 4), (3, 4)], [(3, 4), (4,)],
                                                                            [(4,), (4,)]], gradgrad=True),
    Op("pairwise_distance_p", lambda m, a, b: F(m).pairwise_distance(a, b, 1.0, keepdim=True) +
       m.pairwise_distance(a, b, 3.0, 1e-3), [[(3, 4), (3, 4)]]),
    Op("pairwise_distance_inf", lambda m, a, b: F(m).pairwise_distance(a, b, math.inf), [[(3, 4), (3, 4)]]),
    Op("pdist", lambda m, x: F(m).pdist(x), [[(4, 3)], [(1, 3)], [(5, 1)]], gradgrad=True),
    Op("pdist_p", lambda m, x: m.pdist(x, 1.0), [[(4, 3)]]),
    Op("pdist_p3", lambda m, x: F(m).pdist(x, p=3), [[(4, 3)]]),
    Op("pdist_inf", lambda m, x: F(m).pdist(x, math.inf), [[(4, 3)]]),

    # ---- attention and bilinear ----
    Op("bilinear", lambda m, a, b, w, c: F(m).bilinear(a, b, w, c), [[(3, 4), (3, 5), (2, 4, 5), (2,)],
                                                                     [(4,), (5,), (3, 4, 5), (3,)]], gradgrad=True),
    Op("bilinear_fn", lambda m, a, b, w: m.bilinear(a, b, w), [[(2, 3, 4), (2, 3, 2), (3, 4, 2)]]),
    Op("sdpa", lambda m, q, k, v: F(m).scaled_dot_product_attention(q, k, v),
       [[(2, 3, 4), (2, 5, 4), (2, 5, 6)], [(3, 4), (5, 4), (5, 2)]], gradgrad=True),
    Op("sdpa_bool_mask", lambda m, q, k, v, mask: F(m).scaled_dot_product_attention(q, k, v, attn_mask=mask),
       [[(2, 3, 4), (2, 5, 4), (2, 5, 6), np.array([[1, 0, 1, 1, 0], [0, 0, 0, 0, 0], [1, 1, 1, 1, 1]], bool)]]),
    Op("sdpa_float_mask", lambda m, q, k, v, mask: F(m).scaled_dot_product_attention(q, k, v, mask, scale=0.3),
       [[(2, 3, 4), (2, 5, 4), (2, 5, 6), Const((3, 5))], [(2, 2, 3, 4), (2, 2, 5, 4), (2, 2, 5, 6),
                                                          Const((2, 1, 3, 5))]]),
    Op("sdpa_causal", lambda m, q, k, v: F(m).scaled_dot_product_attention(q, k, v, is_causal=True),
       [[(2, 3, 4), (2, 5, 4), (2, 5, 6)], [(2, 4, 4), (2, 3, 4), (2, 3, 6)]]),
    Op("sdpa_gqa", lambda m, q, k, v: F(m).scaled_dot_product_attention(q, k, v, enable_gqa=True),
       [[(1, 4, 3, 4), (1, 2, 5, 4), (1, 2, 5, 3)]]),
]


def _mha(config):
    """multi_head_attention_forward on (L, N, E) = (3, 2, 4) query and (S, N, E) = (5, 2, 4) keys with 2 heads; the
    non-tensor options of `config` are applied, the tensor ones come from the row's inputs."""
    def fn(m, q, k, v, w_in, b_in, w_out, b_out, *extra):
        kw = dict(config)
        names = kw.pop("extra", ())
        kw.update(zip(names, extra))
        self_attention = kw.pop("self", False)
        unbatched = kw.pop("unbatched", False)
        if unbatched:
            q, k, v = q[:, 0], k[:, 0], v[:, 0]
        if self_attention:
            k = v = q
        elif kw.pop("shared_kv", False):
            v = k
        if kw.get("use_separate_proj_weight"):
            wq, wk, wv = w_in.chunk(3)
            kw.update(q_proj_weight=wq, k_proj_weight=wk, v_proj_weight=wv)
            w_in = None
        out, weights = F(m).multi_head_attention_forward(q, k, v, 4, 2, w_in, b_in, kw.pop("bias_k", None),
                                                         kw.pop("bias_v", None), kw.pop("add_zero_attn", False),
                                                         0.0, w_out, b_out, **kw)
        return (out,) if weights is None else (out, weights)
    return fn


MHA_INPUTS = [(3, 2, 4), (5, 2, 4), (5, 2, 4), (12, 4), (12,), (4, 4), (4,)]
KPM = np.array([[0, 0, 1, 0, 1], [0, 0, 0, 0, 0]], bool)
ATTN = np.array([[0, 1, 0, 0, 0], [0, 0, 0, 1, 1], [0, 0, 0, 0, 0]], bool)
OPS += [
    Op("mha_self", _mha({"self": True}), [MHA_INPUTS], gradgrad=True),
    Op("mha_cross_weights_per_head", _mha({"average_attn_weights": False}), [MHA_INPUTS]),
    Op("mha_shared_kv_no_weights", _mha({"shared_kv": True, "need_weights": False}), [MHA_INPUTS]),
    Op("mha_separate", _mha({"use_separate_proj_weight": True}), [MHA_INPUTS]),
    Op("mha_bias_kv_zero_attn", _mha({"extra": ("bias_k", "bias_v"), "add_zero_attn": True}),
       [MHA_INPUTS + [(1, 1, 4), (1, 1, 4)]]),
    Op("mha_masks", _mha({"extra": ("key_padding_mask", "attn_mask")}), [MHA_INPUTS + [KPM, ATTN]]),
    Op("mha_masks_no_weights", _mha({"extra": ("key_padding_mask", "attn_mask"), "need_weights": False}),
       [MHA_INPUTS + [KPM, ATTN]]),
    Op("mha_float_mask_3d", _mha({"extra": ("attn_mask",)}), [MHA_INPUTS + [Const((4, 3, 5))]]),
    Op("mha_causal", _mha({"extra": ("attn_mask",), "is_causal": True, "need_weights": False}),
       [MHA_INPUTS + [~np.tril(np.ones((3, 5), bool))]]),
    Op("mha_unbatched", _mha({"unbatched": True, "extra": ("key_padding_mask",)}),
       [MHA_INPUTS + [np.array([0, 1, 0, 0, 1], bool)]]),
]

OPS_BY_NAME = {op.name: op for op in OPS}
assert len(OPS_BY_NAME) == len(OPS), "duplicate op names in the table"

CASES = [pytest.param(op, i, id=f"{op.name}-{i}") for op in OPS for i in range(len(op.cases))]


def _quietly(op):
    if not op.quiet:
        return op.fn

    def fn(*args):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            return op.fn(*args)
    return fn


@pytest.mark.parametrize("op,case", CASES)
def test_op(dg, op, case):
    fn = _quietly(op)
    if op.fd:
        check_op(dg, op.cases[case], fn, None, name=op.name, grad=op.grad, noncontig=op.noncontig,
                 torch=torch is not None and op.torch_grad, **op.check)
        if op.torch_grad or torch is None:
            return
    if torch is None:
        pytest.skip("compared with torch only, which is not installed")
    specs = [as_spec(s, op.check.get("low"), op.check.get("high"), op.check.get("away_from", ()))
             for s in op.cases[case]]
    arrays = draw_inputs(specs, seed_of(op.name, op.cases[case]))
    diff = differentiable(specs, arrays) if op.grad and op.torch_grad else []
    check_torch(dg, fn, arrays, diff, name=op.name,
                **({"tol": op.check["torch_tol"]} if "torch_tol" in op.check else {}))


@pytest.mark.parametrize("op", [pytest.param(op, id=op.name) for op in OPS if op.gradgrad])
def test_second_derivatives(dg, op):
    check_gradgrad(dg, op.cases[0], _quietly(op), name=op.name,
                   **{k: v for k, v in op.check.items() if k in ("low", "high", "away_from")})


def test_table_covers_part_b():
    """Every name of the brief has a row whose name starts with it (guards against a row dropped by accident)."""
    names = """batch_norm group_norm instance_norm layer_norm rms_norm local_response_norm normalize elu selu celu
        hardtanh relu6 hardsigmoid hardswish silu mish logsigmoid softsign softshrink hardshrink tanhshrink threshold
        glu prelu rrelu softmin softmax log_softmax gelu leaky_relu relu cross_entropy nll_loss binary_cross_entropy
        bce_with_logits kl_div huber_loss smooth_l1_loss l1_loss mse_loss soft_margin_loss margin_ranking_loss
        hinge_embedding_loss cosine_embedding_loss triplet_margin_loss triplet_margin_with_distance_loss
        poisson_nll_loss gaussian_nll_loss multilabel_soft_margin_loss multilabel_margin_loss multi_margin_loss
        cosine_similarity pairwise_distance pdist sdpa mha bilinear""".split()
    missing = [n for n in names if not any(op.name.startswith(n) for op in OPS)]
    assert not missing, missing


# ----- exact values and gradients at kinks: torch's conventions ---------------------------------------------------

KINKS = [
    # name, fn(m, x), input values (float64); the forward and the gradient of fn(x).sum() must be torch's
    ("relu", lambda m, x: F(m).relu(x), [-1.0, 0.0, 1.0]),
    ("relu6", lambda m, x: F(m).relu6(x), [-1.0, 0.0, 3.0, 6.0, 7.0]),
    ("hardtanh", lambda m, x: F(m).hardtanh(x, -0.5, 2.0), [-1.0, -0.5, 0.0, 2.0, 3.0]),
    ("hardsigmoid", lambda m, x: F(m).hardsigmoid(x), [-4.0, -3.0, 0.0, 3.0, 4.0], HARDSIGMOID_TOL),
    ("hardswish", lambda m, x: F(m).hardswish(x), [-4.0, -3.0, 0.0, 3.0, 4.0]),
    ("elu", lambda m, x: F(m).elu(x, 0.5), [-1.0, 0.0, 1.0]),
    ("selu", lambda m, x: F(m).selu(x), [-1.0, 0.0, 1.0]),
    ("celu", lambda m, x: F(m).celu(x, 2.0), [-1.0, 0.0, 1.0]),
    ("leaky_relu", lambda m, x: F(m).leaky_relu(x, 0.1), [-1.0, 0.0, 1.0]),
    ("rrelu_eval", lambda m, x: F(m).rrelu(x), [-1.0, 0.0, 1.0]),
    ("prelu", lambda m, x: F(m).prelu(x, m.tensor([0.25], dtype=m.float64)), [-1.0, 0.0, 1.0]),
    ("softshrink", lambda m, x: F(m).softshrink(x, 0.5), [-1.0, -0.5, 0.0, 0.5, 1.0]),
    ("hardshrink", lambda m, x: F(m).hardshrink(x, 0.5), [-1.0, -0.5, 0.0, 0.5, 1.0]),
    ("softsign", lambda m, x: F(m).softsign(x), [-1.0, 0.0, 1.0]),
    ("threshold", lambda m, x: F(m).threshold(x, 0.5, -2.0), [0.0, 0.5, 1.0]),
    ("l1_loss_tie", lambda m, x: F(m).l1_loss(x, m.zeros(3, dtype=m.float64), reduction="none"), [-1.0, 0.0, 1.0]),
    ("smooth_l1_at_beta", lambda m, x: F(m).smooth_l1_loss(x, m.zeros(4, dtype=m.float64), reduction="none",
                                                           beta=0.5), [-0.5, 0.0, 0.5, 1.0]),
    ("huber_at_delta", lambda m, x: F(m).huber_loss(x, m.zeros(4, dtype=m.float64), "none", 0.5),
     [-0.5, 0.0, 0.5, 1.0]),
    ("margin_ranking_at_0", lambda m, x: F(m).margin_ranking_loss(x, m.zeros(3, dtype=m.float64),
                                                                   m.ones(3, dtype=m.float64), 1.0, reduction="none"),
     [0.5, 1.0, 2.0]),
    ("hinge_at_margin", lambda m, x: F(m).hinge_embedding_loss(x, -m.ones(3, dtype=m.float64), 1.0,
                                                               reduction="none"), [0.5, 1.0, 2.0]),
    ("multi_margin_at_0", lambda m, x: F(m).multi_margin_loss(x, m.tensor(0), reduction="none"), [1.0, 0.0, -1.0]),
    ("multilabel_margin_at_0", lambda m, x: F(m).multilabel_margin_loss(x, m.tensor([0, -1, 0]), reduction="none"),
     [1.0, 0.0, -1.0]),
    ("triplet_at_0", lambda m, x: F(m).triplet_margin_loss(x.reshape(1, 2), m.zeros(1, 2, dtype=m.float64),
                                                           m.tensor([[3.0, 4.0]], dtype=m.float64), margin=5.0,
                                                           eps=0.0, reduction="none"), [0.0, 0.0]),
    ("normalize_zero_row", lambda m, x: F(m).normalize(x.reshape(2, 2)), [0.0, 0.0, 3.0, 4.0]),
    ("cosine_similarity_zero", lambda m, x: F(m).cosine_similarity(x.reshape(2, 2), m.ones(2, 2, dtype=m.float64)),
     [0.0, 0.0, 3.0, 4.0]),
    ("pairwise_distance_zero", lambda m, x: F(m).pairwise_distance(x.reshape(2, 2), m.zeros(2, 2, dtype=m.float64),
                                                                   eps=0.0), [0.0, 0.0, 3.0, 4.0]),
    ("pdist_duplicate_rows", lambda m, x: F(m).pdist(x.reshape(3, 2)), [1.0, 2.0, 1.0, 2.0, 4.0, 6.0]),
    ("bce_at_edges", lambda m, x: F(m).binary_cross_entropy(x, m.tensor([1.0, 0.0, 1.0, 0.0], dtype=m.float64),
                                                            reduction="none"), [0.0, 1.0, 1.0, 0.0]),
    ("kl_div_zero_target", lambda m, x: F(m).kl_div(x, m.tensor([0.0, 0.5, 1.0], dtype=m.float64),
                                                    reduction="none"), [-1.0, 0.0, 1.0]),
]


@needs_torch
@pytest.mark.parametrize("case", KINKS, ids=[c[0] for c in KINKS])
def test_kinks_are_torchs(dg, case):
    name, fn, values, *tol = case
    tol = tol[0] if tol else (1e-12, 1e-15)
    results = []
    for m in (dg, torch):
        x = m.tensor(values, dtype=m.float64, requires_grad=True)
        out = fn(m, x)
        out.sum().backward()
        results.append((to_numpy(out), to_numpy(x.grad)))
    (out, grad), (t_out, t_grad) = results
    assert_close(out, t_out, *tol, f"{name}: forward")
    assert_close(grad, t_grad, *tol, f"{name}: gradient")


# ----- in-place semantics ------------------------------------------------------------------------------------------

INPLACE = [
    ("relu", lambda m, x: F(m).relu(x, inplace=True)), ("relu_", lambda m, x: F(m).relu_(x)),
    ("torch_relu_", lambda m, x: m.relu_(x)), ("elu", lambda m, x: F(m).elu(x, inplace=True)),
    ("elu_", lambda m, x: F(m).elu_(x, 2.0)), ("selu_", lambda m, x: m.selu_(x)),
    ("celu_", lambda m, x: F(m).celu_(x)), ("hardtanh_", lambda m, x: F(m).hardtanh_(x)),
    ("relu6", lambda m, x: F(m).relu6(x, True)), ("leaky_relu_", lambda m, x: F(m).leaky_relu_(x, 0.2)),
    ("threshold_", lambda m, x: m.threshold_(x, 0.0, 5.0)), ("rrelu_", lambda m, x: F(m).rrelu_(x)),
    ("hardsigmoid", lambda m, x: F(m).hardsigmoid(x, inplace=True), HARDSIGMOID_TOL),
    ("hardswish", lambda m, x: F(m).hardswish(x, inplace=True)), ("silu", lambda m, x: F(m).silu(x, True)),
    ("mish", lambda m, x: F(m).mish(x, inplace=True)),
    ("dropout_eval", lambda m, x: F(m).dropout(x, 0.5, False, True)),
    ("dropout_p1", lambda m, x: F(m).dropout(x, 1.0, True, True)),
    ("alpha_dropout_p1", lambda m, x: F(m).alpha_dropout(x, 1.0, True, True)),
]


@needs_torch
@pytest.mark.parametrize("case", INPLACE, ids=[c[0] for c in INPLACE])
def test_inplace_semantics_are_torchs(dg, case):
    """inplace=True returns input itself with the result written into it, bumps its version, refuses a leaf that
    requires grad (RuntimeError; F.dropout outside training returns it untouched, as torch), and the gradient
    through the write is torch's."""
    name, fn, *tol = case
    tol = tol[0] if tol else (1e-12, 1e-15)
    values = np.array([[-2.0, -0.5, 0.0], [0.5, 1.5, 7.0]])
    results = []
    for m in (dg, torch):
        leaf = m.tensor(values, dtype=m.float64, requires_grad=True)
        if name == "dropout_eval":
            assert fn(m, leaf) is leaf
        else:
            with pytest.raises(RuntimeError):
                fn(m, leaf)
        x = leaf * 1
        version = x._version
        out = fn(m, x)
        assert out is x, f"{name}: the in-place form must return its input"
        assert x._version > version or name == "dropout_eval"
        (out * m.tensor(np.arange(6.0).reshape(2, 3), dtype=m.float64)).sum().backward()
        results.append((to_numpy(x), to_numpy(leaf.grad)))
        plain = m.tensor(values, dtype=m.float64)
        assert fn(m, plain) is plain                   # no grad involved: written in place too
        assert_close(to_numpy(plain), results[-1][0], 0, 0, f"{name}: without grad")
    assert_close(results[0][0], results[1][0], *tol, f"{name}: values")
    assert_close(results[0][1], results[1][1], *tol, f"{name}: gradient")


def test_fast_path_does_not_shadow_functional_relu(dg):
    """dyngrad.relu has a C++ fast path; nn.functional.relu (with inplace=) is another function."""
    x = dg.tensor([-1.0, 2.0])
    assert dg.nn.functional.relu(x, inplace=True) is x and x.tolist() == [0.0, 2.0]


# ----- random ops, by their statistics --------------------------------------------------------------------------

def test_dropout_channel_structure(dg):
    dg.manual_seed(0)
    f = dg.nn.functional
    for fn, shape, channel_dims in [
            (lambda x: f.dropout1d(x, 0.5), (40, 30, 6), 2), (lambda x: f.dropout1d(x, 0.5), (30, 6), 1),
            (lambda x: f.dropout2d(x, 0.5), (40, 30, 3, 2), 2), (lambda x: f.dropout3d(x, 0.5), (40, 30, 2, 2, 2), 2),
            (lambda x: f.dropout3d(x, 0.5), (30, 2, 2, 2), 1),
            (lambda x: f.feature_alpha_dropout(x, 0.5, True), (40, 30, 4), 2)]:
        x = dg.ones(*shape, dtype=dg.float64)
        y = fn(x).numpy().reshape(shape[:channel_dims] + (-1,))
        assert (y == y[..., :1]).all(), "each channel is dropped or kept whole"
        kept = (y[..., 0] == y.max())
        assert 0.25 < kept.mean() < 0.75
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        y = f.dropout2d(dg.ones(50, 40, 3, dtype=dg.float64)).numpy()       # 3-D: (N, C, L), as torch
    assert (y == y[..., :1]).all()


def test_dropout_scaling_and_gradient(dg):
    dg.manual_seed(1)
    x = dg.ones(300, 100, dtype=dg.float64, requires_grad=True)
    for p in (0.2, 0.7):
        y = dg.nn.functional.dropout(x, p)
        kept = y.detach().numpy() != 0
        assert abs(kept.mean() - (1 - p)) < 0.01
        np.testing.assert_allclose(y.detach().numpy()[kept], 1 / (1 - p))
        x.grad = None
        y.sum().backward()
        np.testing.assert_allclose(x.grad.numpy(), y.detach().numpy())


def test_alpha_dropout_keeps_selu_statistics(dg):
    """On standard normal input, alpha dropout keeps mean 0 and variance 1 (its purpose), as torch's does."""
    dg.manual_seed(2)
    x = dg.randn(200, 500, dtype=dg.float64)
    for p in (0.2, 0.5):
        y = dg.nn.functional.alpha_dropout(x, p, training=True).numpy()
        assert abs(y.mean()) < 0.02 and abs(y.var() - 1) < 0.03, (p, y.mean(), y.var())
        scale = 1 / math.sqrt((1.7580993408473766 ** 2 * p + 1) * (1 - p))
        dropped_value = -1.7580993408473766 * scale + 1.7580993408473766 * scale * p
        dropped = np.isclose(y, dropped_value)
        assert abs(dropped.mean() - p) < 0.01
    assert dg.nn.functional.alpha_dropout(x, 0.5) is x                      # training=False by default


@needs_torch
def test_dropout_identities_are_torchs(dg):
    """Outside training, with p == 0 or an empty input, the input itself comes back (torch returns it too)."""
    f, tf = dg.nn.functional, torch.nn.functional
    for name in ("dropout", "alpha_dropout", "feature_alpha_dropout", "dropout1d", "dropout2d", "dropout3d"):
        for shape in ((2, 3, 4), (0, 3, 4)):
            for p, training in ((0.5, False), (0.0, True)) + (((0.5, True),) if 0 in shape else ()):
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", UserWarning)
                    x, tx = dg.ones(*shape), torch.ones(*shape)
                    assert (getattr(f, name)(x, p, training) is x) == (getattr(tf, name)(tx, p, training) is tx)


def test_rrelu_training(dg):
    dg.manual_seed(3)
    x = dg.tensor(np.linspace(-3, 3, 2001), dtype=dg.float64, requires_grad=True)
    y = dg.nn.functional.rrelu(x, 0.1, 0.3, training=True)
    y.sum().backward()
    xv, yv, g = x.detach().numpy(), y.detach().numpy(), x.grad.numpy()
    pos = xv > 0
    np.testing.assert_array_equal(yv[pos], xv[pos])
    np.testing.assert_array_equal(g[pos], 1.0)
    slopes = yv[xv < 0] / xv[xv < 0]
    assert (slopes >= 0.1).all() and (slopes <= 0.3).all() and abs(slopes.mean() - 0.2) < 0.01
    np.testing.assert_allclose(g[xv < 0], slopes)                     # the gradient is each element's slope
    assert np.unique(slopes).size > 900                                # one draw per element


def test_attention_dropout(dg):
    dg.manual_seed(4)
    q = dg.randn(2, 50, 8, dtype=dg.float64)
    out_eval = dg.nn.functional.scaled_dot_product_attention(q, q, q)
    out = dg.nn.functional.scaled_dot_product_attention(q, q, q, dropout_p=0.5)
    assert not np.allclose(out.numpy(), out_eval.numpy())
    # dropout then renormalisation by 1/(1-p) keeps the expected output: average many draws
    mean = sum(dg.nn.functional.scaled_dot_product_attention(q, q, q, dropout_p=0.5).numpy() for _ in range(200))
    assert np.abs(mean / 200 - out_eval.numpy()).mean() < 0.05


# ----- running statistics ----------------------------------------------------------------------------------------

@needs_torch
@pytest.mark.parametrize("shape", [(5, 3), (4, 3, 2), (2, 3, 2, 2)])
@pytest.mark.parametrize("momentum", [0.1, 0.5])
def test_batch_norm_running_statistics_are_torchs(dg, shape, momentum):
    rng = np.random.default_rng(5)
    x = rng.standard_normal(shape)
    rm, rv = rng.standard_normal(3), rng.uniform(0.5, 2, 3)
    stats = []
    for m in (dg, torch):
        mean, var = m.tensor(rm.copy()), m.tensor(rv.copy())
        for _ in range(2):
            F(m).batch_norm(m.tensor(x), mean, var, training=True, momentum=momentum)
        out = F(m).batch_norm(m.tensor(x), mean, var, m.ones(3, dtype=m.float64), None, False, momentum, 1e-3)
        stats.append((to_numpy(mean), to_numpy(var), to_numpy(out)))
    for a, b, what in zip(*stats, ("running_mean", "running_var", "eval output")):
        assert_close(a, b, 1e-12, 1e-14, what)


@needs_torch
def test_instance_norm_running_statistics_are_torchs(dg):
    rng = np.random.default_rng(6)
    x = rng.standard_normal((4, 3, 5))
    stats = []
    for m in (dg, torch):
        mean, var = m.zeros(3, dtype=m.float64), m.ones(3, dtype=m.float64)
        F(m).instance_norm(m.tensor(x), mean, var, momentum=0.3)
        stats.append((to_numpy(mean), to_numpy(var)))
    assert_close(stats[0][0], stats[1][0], 1e-12, 1e-14, "running_mean")
    assert_close(stats[0][1], stats[1][1], 1e-12, 1e-14, "running_var")


def test_running_statistics_are_not_recorded(dg):
    x = dg.randn(4, 3, requires_grad=True)
    mean, var = dg.zeros(3), dg.ones(3)
    dg.nn.functional.batch_norm(x, mean, var, training=True).sum().backward()
    assert not mean.requires_grad and mean.grad_fn is None and var.grad_fn is None
    assert x.grad is not None


# ----- ctc_loss --------------------------------------------------------------------------------------------------

def _ctc_case(rng, concatenated=False, unbatched=False):
    t, n, c = 6, 3, 5
    logits = rng.standard_normal((t, n, c))
    targets = np.array([[1, 2, 2], [3, 1, 0], [4, 4, 4]])        # repeats, a padded row, an impossible row
    in_lens, tg_lens = np.array([6, 5, 4]), np.array([3, 2, 3])
    if concatenated:
        targets = np.concatenate([row[:k] for row, k in zip(targets, tg_lens)])
    if unbatched:
        return logits[:, 0], targets[0], np.array(6), np.array(3)
    return logits, targets, in_lens, tg_lens


@needs_torch
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("layout", ["padded", "concatenated", "unbatched"])
@pytest.mark.parametrize("zero_infinity", [False, True])
def test_ctc_loss_is_torchs(dg, reduction, layout, zero_infinity):
    """Values and gradients (through log_softmax, and of the log-probabilities themselves: torch's formula)."""
    logits, targets, in_lens, tg_lens = _ctc_case(np.random.default_rng(7), layout == "concatenated",
                                                  layout == "unbatched")
    if layout != "unbatched" and not zero_infinity:
        in_lens = np.array([6, 5, 6])                              # no impossible row: the loss stays finite
    results = []
    for m in (dg, torch):
        x = m.tensor(logits, requires_grad=True)
        lp = F(m).log_softmax(x, -1)
        lp.retain_grad()
        loss = F(m).ctc_loss(lp, m.tensor(targets), m.tensor(in_lens), m.tensor(tg_lens), blank=0,
                             reduction=reduction, zero_infinity=zero_infinity)
        w = m.tensor(np.linspace(0.5, 1.5, loss.numel()).reshape(tuple(loss.shape)))
        (loss * w).sum().backward()
        results.append((to_numpy(loss), to_numpy(x.grad), to_numpy(lp.grad)))
    for a, b, what in zip(*results, ("loss", "gradient of the logits", "gradient of the log-probabilities")):
        assert_close(a, b, 1e-9, 1e-12, f"ctc_loss {layout} {reduction}: {what}")


def test_ctc_loss_gradcheck(dg):
    logits, targets, in_lens, tg_lens = _ctc_case(np.random.default_rng(8))
    in_lens = np.array([6, 5, 6])

    def loss(x):
        lp = dg.nn.functional.log_softmax(x, -1)
        return dg.nn.functional.ctc_loss(lp, dg.tensor(targets), tuple(in_lens), tuple(tg_lens), reduction="sum")
    assert dg.autograd.gradcheck(loss, (dg.tensor(logits, requires_grad=True),), eps=1e-6, atol=1e-6)


def test_ctc_loss_blank_and_double_backward(dg):
    rng = np.random.default_rng(9)
    lp = dg.nn.functional.log_softmax(dg.tensor(rng.standard_normal((5, 1, 4)), requires_grad=True), -1)
    loss = dg.nn.functional.ctc_loss(lp, dg.tensor([[0, 1]]), (5,), (2,), blank=3)
    assert math.isfinite(loss.item())
    (g,) = dg.autograd.grad(loss, lp, create_graph=True)
    with pytest.raises(RuntimeError, match="ctc_loss"):
        g.sum().backward()                                       # torch: not implemented either


@needs_torch
def test_ctc_loss_fn_form_is_torchs(dg):
    logits, targets, in_lens, tg_lens = _ctc_case(np.random.default_rng(10))
    outs = [to_numpy(m.ctc_loss(F(m).log_softmax(m.tensor(logits), -1), m.tensor(targets), tuple(in_lens),
                                tuple(tg_lens), 0, 0, True)) for m in (dg, torch)]
    assert_close(outs[0], outs[1], 1e-10, 1e-12, "torch.ctc_loss")


# ----- legacy arguments and warnings -----------------------------------------------------------------------------

LEGACY = [
    ("mse_loss", lambda m, f, kw: f.mse_loss(m.tensor([[1.0, 2.0]]), m.tensor([[0.0, 4.0]]), **kw)),
    ("l1_loss", lambda m, f, kw: f.l1_loss(m.tensor([1.0, 2.0]), m.tensor([0.0, 4.0]), **kw)),
    ("smooth_l1_loss", lambda m, f, kw: f.smooth_l1_loss(m.tensor([1.0, 2.0]), m.tensor([0.0, 4.0]), **kw)),
    ("cross_entropy", lambda m, f, kw: f.cross_entropy(m.tensor([[1.0, 2.0], [0.5, 0.0]]), m.tensor([1, 0]), **kw)),
    ("nll_loss", lambda m, f, kw: f.nll_loss(m.tensor([[-1.0, -2.0], [-0.5, 0.0]]), m.tensor([1, 0]), **kw)),
    ("bce", lambda m, f, kw: f.binary_cross_entropy(m.tensor([0.2, 0.9]), m.tensor([0.0, 1.0]), **kw)),
    ("bce_logits", lambda m, f, kw: f.binary_cross_entropy_with_logits(m.tensor([0.2, 0.9]), m.tensor([0.0, 1.0]),
                                                                       **kw)),
    ("kl_div", lambda m, f, kw: f.kl_div(m.tensor([[-1.0, -2.0]]), m.tensor([[0.3, 0.7]]), **kw)),
    ("poisson", lambda m, f, kw: f.poisson_nll_loss(m.tensor([0.2, 0.9]), m.tensor([1.0, 2.0]), **kw)),
    ("soft_margin", lambda m, f, kw: f.soft_margin_loss(m.tensor([0.2, 0.9]), m.tensor([1.0, -1.0]), **kw)),
    ("multilabel_soft_margin", lambda m, f, kw: f.multilabel_soft_margin_loss(m.tensor([[0.2, 0.9]]),
                                                                              m.tensor([[1.0, 0.0]]), **kw)),
    ("multilabel_margin", lambda m, f, kw: f.multilabel_margin_loss(m.tensor([[0.2, 0.9]]), m.tensor([[1, -1]]),
                                                                    **kw)),
    ("multi_margin", lambda m, f, kw: f.multi_margin_loss(m.tensor([[0.2, 0.9]]), m.tensor([0]), **kw)),
    ("margin_ranking", lambda m, f, kw: f.margin_ranking_loss(m.tensor([0.2, 0.9]), m.tensor([0.5, 0.1]),
                                                              m.tensor([1.0, -1.0]), **kw)),
    ("hinge_embedding", lambda m, f, kw: f.hinge_embedding_loss(m.tensor([0.2, 0.9]), m.tensor([1.0, -1.0]), **kw)),
    ("cosine_embedding", lambda m, f, kw: f.cosine_embedding_loss(m.tensor([[0.2, 0.9]]), m.tensor([[0.5, 0.1]]),
                                                                  m.tensor([-1.0]), **kw)),
    ("triplet_margin", lambda m, f, kw: f.triplet_margin_loss(m.tensor([[0.2, 0.9]]), m.tensor([[0.5, 0.1]]),
                                                              m.tensor([[0.3, 0.3]]), **kw)),
]
LEGACY_FLAGS = [dict(size_average=False), dict(reduce=False), dict(size_average=True, reduce=True),
                dict(size_average=False, reduce=True), dict(size_average=True, reduce=False),
                dict(reduce=True, reduction="none")]


@needs_torch
@pytest.mark.parametrize("case", LEGACY, ids=[c[0] for c in LEGACY])
def test_legacy_size_average_and_reduce_are_torchs(dg, case):
    """The deprecated flags pick the reduction as torch's legacy_get_string does, with a warning."""
    name, fn = case
    for flags in LEGACY_FLAGS:
        outs = []
        for m in (dg, torch):
            with pytest.warns(UserWarning, match="size_average and reduce"):
                outs.append(to_numpy(fn(m, F(m), flags)))
        assert_close(outs[0], outs[1], 1e-6, 1e-7, f"{name} {flags}")


WARNS = [
    ("mse_broadcast", lambda m: F(m).mse_loss(m.zeros(3, 1), m.zeros(3)), "target size"),
    ("l1_broadcast", lambda m: F(m).l1_loss(m.zeros(3, 1), m.zeros(3)), "target size"),
    ("smooth_l1_broadcast", lambda m: F(m).smooth_l1_loss(m.zeros(3), m.zeros(2, 3)), "target size"),
    ("huber_broadcast", lambda m: F(m).huber_loss(m.zeros(3), m.zeros(1)), "target size"),
    ("softmax_implicit", lambda m: F(m).softmax(m.zeros(2, 3)), "mplicit dimension"),
    ("log_softmax_implicit", lambda m: F(m).log_softmax(m.zeros(3)), "mplicit dimension"),
    ("softmin_implicit", lambda m: F(m).softmin(m.zeros(2, 3, 4)), "mplicit dimension"),
    ("kl_div_mean", lambda m: F(m).kl_div(m.zeros(2, 3), m.ones(2, 3)), "batchmean"),
    ("dropout2d_3d", lambda m: F(m).dropout2d(m.zeros(2, 3, 4)), "dropout2d"),
    ("dropout2d_5d", lambda m: F(m).dropout2d(m.zeros(1, 2, 1, 1, 1)), "dropout2d"),
    ("dropout3d_3d", lambda m: F(m).dropout3d(m.zeros(2, 3, 4)), "dropout3d"),
    ("mha_mask_types", lambda m: F(m).multi_head_attention_forward(
        m.zeros(1, 1, 2), m.zeros(1, 1, 2), m.zeros(1, 1, 2), 2, 1, m.zeros(6, 2), None, None, None, False, 0.0,
        m.zeros(2, 2), None, key_padding_mask=m.zeros(1, 1, dtype=m.bool), attn_mask=m.zeros(1, 1)), "mismatched"),
]


@pytest.mark.parametrize("case", WARNS, ids=[c[0] for c in WARNS])
def test_warnings_are_torchs(dg, case):
    name, fn, pattern = case
    engines = (dg, torch) if torch is not None else (dg,)
    for m in engines:
        with pytest.warns(UserWarning, match=pattern if m is dg else None):
            fn(m)


# ----- error types -----------------------------------------------------------------------------------------------

def _z(m, *shape):
    return m.zeros(*shape)


ERRORS = [
    ("gelu_approximate", lambda m: F(m).gelu(_z(m, 2), approximate="fast")),
    ("hardtanh_bounds", lambda m: F(m).hardtanh(_z(m, 2), 1.0, -1.0)),
    ("softshrink_negative", lambda m: F(m).softshrink(_z(m, 2), -0.5)),
    ("rrelu_bounds", lambda m: F(m).rrelu(_z(m, 2), 0.5, 0.1, training=True)),
    ("glu_0d", lambda m: F(m).glu(m.tensor(1.0))),
    ("glu_odd", lambda m: F(m).glu(_z(m, 3, 3))),
    ("glu_dim", lambda m: F(m).glu(_z(m, 2, 2), 2)),
    ("prelu_weight_2d", lambda m: F(m).prelu(_z(m, 2, 3), m.ones(2, 2))),
    ("prelu_channels", lambda m: F(m).prelu(_z(m, 2, 3), m.ones(2))),
    ("prelu_1d_channels", lambda m: F(m).prelu(_z(m, 3), m.ones(3))),
    ("softmax_dim", lambda m: F(m).softmax(_z(m, 2), 3)),
    ("softmax_fn_no_dim", lambda m: m.softmax(_z(m, 2))),
    ("dropout_p", lambda m: F(m).dropout(_z(m, 2), 1.5)),
    ("dropout1d_p", lambda m: F(m).dropout1d(_z(m, 2, 2), -0.1)),
    ("dropout1d_4d", lambda m: F(m).dropout1d(_z(m, 2, 2, 2, 2))),
    ("alpha_dropout_p", lambda m: F(m).alpha_dropout(_z(m, 2), 2.0, True)),
    ("feature_alpha_dropout_1d", lambda m: F(m).feature_alpha_dropout(m.ones(4), 0.5, True)),
    ("mse_weight_shape", lambda m: F(m).mse_loss(_z(m, 2, 3), _z(m, 2, 3), weight=m.ones(3))),
    ("mse_no_broadcast", lambda m: F(m).mse_loss(_z(m, 2, 3), _z(m, 4))),
    ("reduction_name", lambda m: F(m).l1_loss(_z(m, 2), _z(m, 2), reduction="avg")),
    ("smooth_l1_beta", lambda m: F(m).smooth_l1_loss(_z(m, 2), _z(m, 2), beta=-1.0)),
    ("huber_delta", lambda m: F(m).huber_loss(_z(m, 2), _z(m, 2), delta=0.0)),
    ("bce_range", lambda m: F(m).binary_cross_entropy(m.tensor([1.5]), m.tensor([1.0]))),
    ("bce_sizes", lambda m: F(m).binary_cross_entropy(m.full((3, 1), 0.5), m.full((3,), 0.5))),
    ("bce_logits_sizes", lambda m: F(m).binary_cross_entropy_with_logits(_z(m, 3, 1), _z(m, 3))),
    ("kl_div_reduction", lambda m: F(m).kl_div(_z(m, 2), _z(m, 2), reduction="avg")),
    ("gaussian_var_negative", lambda m: F(m).gaussian_nll_loss(_z(m, 2), _z(m, 2), -m.ones(2))),
    ("gaussian_var_shape", lambda m: F(m).gaussian_nll_loss(_z(m, 2, 3), _z(m, 2, 3), m.ones(2, 2))),
    ("gaussian_reduction", lambda m: F(m).gaussian_nll_loss(_z(m, 2), _z(m, 2), m.ones(2), reduction="x")),
    ("ce_smoothing", lambda m: F(m).cross_entropy(_z(m, 2, 3), m.tensor([0, 1]), label_smoothing=1.5)),
    ("ce_target_oob", lambda m: F(m).cross_entropy(_z(m, 2, 3), m.tensor([0, 7]))),
    ("ce_target_float", lambda m: F(m).cross_entropy(_z(m, 2, 3), m.ones(2))),
    ("ce_batch", lambda m: F(m).cross_entropy(_z(m, 2, 3), m.tensor([0, 1, 1]))),
    ("ce_nd_target", lambda m: F(m).cross_entropy(_z(m, 2, 3, 4), m.zeros(2, 3, dtype=m.long))),
    ("ce_probabilities_int", lambda m: F(m).cross_entropy(_z(m, 2, 3), m.zeros(2, 3, dtype=m.long))),
    ("ce_probabilities_ignore", lambda m: F(m).cross_entropy(_z(m, 2, 3), _z(m, 2, 3), ignore_index=1)),
    ("nll_target_oob", lambda m: F(m).nll_loss(_z(m, 2, 3), m.tensor([0, -3]))),
    ("nll_weight", lambda m: F(m).nll_loss(_z(m, 2, 3), m.tensor([0, 1]), weight=m.ones(2))),
    ("nll_1d_target", lambda m: F(m).nll_loss(_z(m, 3), m.tensor([0, 1]))),
    ("multi_margin_p", lambda m: F(m).multi_margin_loss(_z(m, 2, 3), m.tensor([0, 1]), p=3)),
    ("multi_margin_weight_dim", lambda m: F(m).multi_margin_loss(_z(m, 2, 3), m.tensor([0, 1]), weight=m.ones(1, 3))),
    ("multi_margin_weight_size", lambda m: F(m).multi_margin_loss(_z(m, 2, 3), m.tensor([0, 1]), weight=m.ones(2))),
    ("multi_margin_target", lambda m: F(m).multi_margin_loss(_z(m, 2, 3), m.tensor([0, 5]))),
    ("multilabel_margin_target", lambda m: F(m).multilabel_margin_loss(_z(m, 1, 3), m.tensor([[0, -2, 1]]))),
    ("multilabel_margin_shape", lambda m: F(m).multilabel_margin_loss(_z(m, 2, 3), m.tensor([[0, 1, -1]]))),
    ("margin_ranking_dims", lambda m: F(m).margin_ranking_loss(_z(m, 2), _z(m, 2), m.tensor(1.0))),
    ("cosine_embedding_target_2d", lambda m: F(m).cosine_embedding_loss(_z(m, 2, 3), _z(m, 2, 3), m.ones(2, 1))),
    ("cosine_embedding_dims", lambda m: F(m).cosine_embedding_loss(_z(m, 3), _z(m, 3), m.ones(3))),
    ("triplet_margin", lambda m: F(m).triplet_margin_loss(_z(m, 2, 3), _z(m, 2, 3), _z(m, 2, 3), margin=0.0)),
    ("triplet_dims", lambda m: F(m).triplet_margin_loss(_z(m, 2, 3), _z(m, 2, 3), _z(m, 3))),
    ("triplet_distance_margin", lambda m: F(m).triplet_margin_with_distance_loss(_z(m, 2), _z(m, 2), _z(m, 2),
                                                                                  margin=-1.0)),
    ("triplet_distance_reduction", lambda m: F(m).triplet_margin_with_distance_loss(_z(m, 2), _z(m, 2), _z(m, 2),
                                                                                     reduction="x")),
    ("ctc_blank", lambda m: F(m).ctc_loss(_z(m, 5, 1, 3), m.tensor([[1]]), (5,), (1,), blank=3)),
    ("ctc_input_length", lambda m: F(m).ctc_loss(_z(m, 5, 1, 3), m.tensor([[1]]), (6,), (1,))),
    ("ctc_target_length", lambda m: F(m).ctc_loss(_z(m, 5, 1, 3), m.tensor([[1]]), (5,), (2,))),
    ("ctc_lengths_count", lambda m: F(m).ctc_loss(_z(m, 5, 2, 3), m.tensor([[1], [1]]), (5,), (1, 1))),
    ("ctc_reduction", lambda m: F(m).ctc_loss(_z(m, 5, 1, 3), m.tensor([[1]]), (5,), (1,), reduction="x")),
    ("bn_eval_without_stats", lambda m: F(m).batch_norm(_z(m, 2, 3), None, None)),
    ("bn_one_value", lambda m: F(m).batch_norm(_z(m, 1, 3), None, None, training=True)),
    ("bn_stats_size", lambda m: F(m).batch_norm(_z(m, 2, 3), _z(m, 2), m.ones(2), training=True)),
    ("bn_weight_size", lambda m: F(m).batch_norm(_z(m, 2, 3), None, None, m.ones(2), training=True)),
    ("bn_momentum_none", lambda m: F(m).batch_norm(_z(m, 2, 3), _z(m, 3), m.ones(3), training=True, momentum=None)),
    ("bn_eps", lambda m: F(m).batch_norm(_z(m, 2, 3), None, None, training=True, eps=0.0)),
    ("in_spatial", lambda m: F(m).instance_norm(_z(m, 2, 3, 1))),
    ("in_no_stats", lambda m: F(m).instance_norm(_z(m, 2, 3, 4), use_input_stats=False)),
    ("gn_divisible", lambda m: F(m).group_norm(_z(m, 2, 3), 2)),
    ("gn_1d", lambda m: F(m).group_norm(_z(m, 4), 2)),
    ("gn_weight", lambda m: F(m).group_norm(_z(m, 2, 4), 2, m.ones(3))),
    ("ln_weight", lambda m: F(m).layer_norm(_z(m, 2, 3), (3,), m.ones(2))),
    ("ln_bias", lambda m: F(m).layer_norm(_z(m, 2, 3), (3,), None, m.ones(2))),
    ("ln_shape", lambda m: F(m).layer_norm(_z(m, 2, 3), (2,))),
    ("rms_shape", lambda m: F(m).rms_norm(_z(m, 2, 3), (2,))),
    ("rms_weight", lambda m: F(m).rms_norm(_z(m, 2, 3), (3,), m.ones(2))),
    ("lrn_2d", lambda m: F(m).local_response_norm(_z(m, 2, 3), 2)),
    ("pdist_1d", lambda m: F(m).pdist(_z(m, 3))),
    ("pdist_p", lambda m: F(m).pdist(_z(m, 3, 2), -1.0)),
    ("cosine_similarity_shapes", lambda m: F(m).cosine_similarity(_z(m, 3, 4), _z(m, 2, 4))),
    ("bilinear_dims", lambda m: F(m).bilinear(_z(m, 2, 3), _z(m, 3), _z(m, 4, 3, 3))),
    ("bilinear_batch", lambda m: F(m).bilinear(_z(m, 2, 3), _z(m, 3, 3), _z(m, 4, 3, 3))),
    ("bilinear_in1", lambda m: F(m).bilinear(_z(m, 2, 2), _z(m, 2, 3), _z(m, 4, 3, 3))),
    ("bilinear_bias", lambda m: F(m).bilinear(_z(m, 2, 3), _z(m, 2, 3), _z(m, 4, 3, 3), _z(m, 3))),
    ("sdpa_1d", lambda m: F(m).scaled_dot_product_attention(_z(m, 4), _z(m, 4), _z(m, 4))),
    ("sdpa_causal_and_mask", lambda m: F(m).scaled_dot_product_attention(_z(m, 2, 3), _z(m, 2, 3), _z(m, 2, 3),
                                                                         m.ones(2, 2, dtype=m.bool), is_causal=True)),
    ("sdpa_dtypes", lambda m: F(m).scaled_dot_product_attention(_z(m, 2, 3), _z(m, 2, 3).double(), _z(m, 2, 3))),
    ("sdpa_int_mask", lambda m: F(m).scaled_dot_product_attention(_z(m, 2, 3), _z(m, 2, 3), _z(m, 2, 3),
                                                                  m.ones(2, 2, dtype=m.long))),
    ("mha_embed_dim", lambda m: F(m).multi_head_attention_forward(
        _z(m, 1, 1, 4), _z(m, 1, 1, 4), _z(m, 1, 1, 4), 3, 2, _z(m, 12, 4), None, None, None, False, 0.0,
        _z(m, 4, 4), None)),
    ("mha_heads", lambda m: F(m).multi_head_attention_forward(
        _z(m, 1, 1, 4), _z(m, 1, 1, 4), _z(m, 1, 1, 4), 4, 3, _z(m, 12, 4), None, None, None, False, 0.0,
        _z(m, 4, 4), None)),
    ("mha_query_dims", lambda m: F(m).multi_head_attention_forward(
        _z(m, 4), _z(m, 4), _z(m, 4), 4, 2, _z(m, 12, 4), None, None, None, False, 0.0, _z(m, 4, 4), None)),
    ("mha_causal_without_mask", lambda m: F(m).multi_head_attention_forward(
        _z(m, 1, 1, 4), _z(m, 1, 1, 4), _z(m, 1, 1, 4), 4, 2, _z(m, 12, 4), None, None, None, False, 0.0,
        _z(m, 4, 4), None, is_causal=True)),
    ("mha_mask_shape", lambda m: F(m).multi_head_attention_forward(
        _z(m, 2, 1, 4), _z(m, 3, 1, 4), _z(m, 3, 1, 4), 4, 2, _z(m, 12, 4), None, None, None, False, 0.0,
        _z(m, 4, 4), None, attn_mask=_z(m, 3, 3))),
    ("mha_kpm_shape", lambda m: F(m).multi_head_attention_forward(
        _z(m, 2, 1, 4), _z(m, 3, 1, 4), _z(m, 3, 1, 4), 4, 2, _z(m, 12, 4), None, None, None, False, 0.0,
        _z(m, 4, 4), None, key_padding_mask=m.zeros(1, 2, dtype=m.bool))),
    ("mha_bias_k_only", lambda m: F(m).multi_head_attention_forward(
        _z(m, 2, 1, 4), _z(m, 3, 1, 4), _z(m, 3, 1, 4), 4, 2, _z(m, 12, 4), None, _z(m, 1, 1, 4), None, False, 0.0,
        _z(m, 4, 4), None)),
    ("mha_separate_missing", lambda m: F(m).multi_head_attention_forward(
        _z(m, 2, 1, 4), _z(m, 3, 1, 4), _z(m, 3, 1, 4), 4, 2, None, None, None, None, False, 0.0,
        _z(m, 4, 4), None, use_separate_proj_weight=True, q_proj_weight=_z(m, 4, 4))),
    ("nontensor_input", lambda m: F(m).elu([1.0, 2.0])),
]


@needs_torch
@pytest.mark.parametrize("case", ERRORS, ids=[c[0] for c in ERRORS])
def test_error_types_are_torchs(dg, case):
    name, fn = case
    kinds = []
    for m in (dg, torch):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            try:
                fn(m)
            except Exception as exc:  # noqa: BLE001  the type is what is compared
                kinds.append(type(exc))
                if m is dg:
                    message = str(exc)
            else:
                kinds.append(None)
    assert kinds[1] is not None, f"{name}: torch does not raise"
    assert kinds[0] is kinds[1], f"{name}: dyngrad raises {kinds[0]}, torch raises {kinds[1]}"
    # ours name the op first; Python's own argument errors name the function: "softmax() missing ..."
    assert re.match(r"^\w+(: |\(\) )", message), f"{name}: the message should start with the op's name: {message!r}"


# ----- signatures ------------------------------------------------------------------------------------------------

def _torch_parameters(fn):
    import inspect
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return None
    return [(p.name, p.default if p.default is not p.empty else "<required>", p.kind == p.KEYWORD_ONLY)
            for p in sig.parameters.values()]


PART_B = """batch_norm group_norm instance_norm layer_norm rms_norm local_response_norm normalize elu elu_ selu selu_
    celu celu_ hardtanh hardtanh_ relu6 hardsigmoid hardswish silu mish softsign tanhshrink threshold threshold_ glu
    rrelu rrelu_ softmin softmax log_softmax leaky_relu leaky_relu_ relu relu_ dropout dropout1d dropout2d dropout3d
    alpha_dropout feature_alpha_dropout cross_entropy nll_loss binary_cross_entropy binary_cross_entropy_with_logits
    kl_div huber_loss smooth_l1_loss l1_loss mse_loss soft_margin_loss margin_ranking_loss hinge_embedding_loss
    cosine_embedding_loss triplet_margin_loss triplet_margin_with_distance_loss poisson_nll_loss gaussian_nll_loss
    multilabel_soft_margin_loss multilabel_margin_loss multi_margin_loss ctc_loss multi_head_attention_forward
    logsigmoid softshrink hardshrink prelu gelu cosine_similarity pairwise_distance pdist bilinear
    scaled_dot_product_attention""".split()


@needs_torch
@pytest.mark.parametrize("name", PART_B)
def test_functional_signatures_are_torchs(dg, name):
    """Parameter names, defaults and keyword-only markers of nn.functional.NAME are torch's (for torch's builtins,
    the names of its documented signature)."""
    import inspect
    ours = _torch_parameters(getattr(dg.nn.functional, name))
    theirs = _torch_parameters(getattr(torch.nn.functional, name))
    if theirs is None:                 # a builtin: its docstring begins with the signature
        doc = getattr(torch.nn.functional, name).__doc__.strip()
        first = doc[:doc.index(")") + 1]
        inside = " ".join(first[first.index("(") + 1:-1].split())
        names = [p.split("=")[0].strip() for p in inside.split(",") if p.strip() and p.strip() != "*"]
        assert [p[0] for p in ours] == names, (ours, first)
        return
    assert [p[0] for p in ours] == [p[0] for p in theirs]
    assert [p[2] for p in ours] == [p[2] for p in theirs]
    for (n, a, _), (_, b, _) in zip(ours, theirs):
        assert a == b or (isinstance(b, float) and a == pytest.approx(b)), f"{name}: default of {n}: {a!r} vs {b!r}"
    del inspect


# ----- the rest: out=, dtype, 0-d and empty inputs ---------------------------------------------------------------

@needs_torch
def test_normalize_out(dg):
    x = np.arange(6.0).reshape(2, 3)
    outs = []
    for m in (dg, torch):
        out = m.empty(2, 3, dtype=m.float64)
        r = F(m).normalize(m.tensor(x), out=out)
        assert r is out
        outs.append(to_numpy(out))
    assert_close(outs[0], outs[1], 1e-12, 1e-15, "normalize out=")


@needs_torch
@pytest.mark.parametrize("name", ["mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss", "soft_margin_loss",
                                  "binary_cross_entropy", "kl_div"])
def test_empty_losses_are_torchs(dg, name):
    """A loss over no elements: 'mean' is nan, 'sum' is 0, 'none' is empty, as torch."""
    for reduction in REDUCTIONS:
        outs = []
        for m in (dg, torch):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")       # numpy's "mean of empty slice" in the reference engine
                outs.append(to_numpy(getattr(F(m), name)(m.zeros(0, 3), m.zeros(0, 3), reduction=reduction)))
        assert_close(outs[0], outs[1], 0, 0, f"{name} {reduction}")


@needs_torch
def test_dropout_fn_forms_are_torchs(dg):
    """torch.dropout_ / alpha_dropout / feature_alpha_dropout (and their in-place forms) take (input, p, train)."""
    for name in ("dropout_", "alpha_dropout", "alpha_dropout_", "feature_alpha_dropout", "feature_alpha_dropout_"):
        for p, train in ((0.5, False), (1.0, True)):
            outs = []
            for m in (dg, torch):
                x = m.ones(2, 3, dtype=m.float64)
                out = getattr(m, name)(x, p, train)
                assert (out is x) == (name.endswith("_") or not train)
                outs.append(to_numpy(out))
            assert_close(outs[0], outs[1], 0, 0, f"{name}({p}, {train})")


@pytest.mark.parametrize("affine", [(False, False), (True, False), (False, True), (True, True)])
@pytest.mark.parametrize("shape, k", [((3, 5), 1), ((2, 3, 4), 2), ((2, 1, 6), 1)])
def test_layer_norm_fused_backward_is_the_formula(dg, affine, shape, k):
    # Note [Fused layer_norm]: one node; its backward without create_graph (one kernel in C++) gives the same
    # gradients as the differentiable formula create_graph uses, and that formula is twice differentiable
    rng = np.random.default_rng(len(shape) + k)
    x = dg.tensor(rng.normal(size=shape) * 3 + 1, requires_grad=True)
    ns = shape[len(shape) - k:]
    w = dg.tensor(rng.normal(size=ns), requires_grad=True) if affine[0] else None
    b = dg.tensor(rng.normal(size=ns), requires_grad=True) if affine[1] else None
    inputs = [t for t in (x, w, b) if t is not None]
    g = dg.tensor(rng.normal(size=shape))
    y = F(dg).layer_norm(x, ns, w, b, eps=1e-3)
    assert y.grad_fn.name() == "NativeLayerNormBackward"
    fused = dg.autograd.grad(y, inputs, g)
    formula = dg.autograd.grad(F(dg).layer_norm(x, ns, w, b, eps=1e-3), inputs, g, create_graph=True)
    for u, v in zip(fused, formula):
        np.testing.assert_allclose(u.numpy(), v.detach().numpy(), rtol=1e-10, atol=1e-12)
    def fn(x, *affine_inputs):
        rest = iter(affine_inputs)
        return F(dg).layer_norm(x, ns, next(rest) if affine[0] else None, next(rest) if affine[1] else None, eps=1e-3)
    assert dg.autograd.gradcheck(fn, inputs)
    assert dg.autograd.gradgradcheck(fn, inputs)


@needs_torch
@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_ctc_loss_with_an_empty_target_is_torchs(dg, reduction):
    """A target of length 0 (the extended target is one blank): the loss is -sum of the blank's log-probabilities
    (it raised a numpy broadcast error once)."""
    logits = np.random.default_rng(11).standard_normal((6, 2, 4))
    results = []
    for m in (dg, torch):
        x = m.tensor(logits, requires_grad=True)
        loss = F(m).ctc_loss(F(m).log_softmax(x, -1), m.tensor([1, 2, 3, 1]), [6, 5], [0, 4], reduction=reduction)
        loss.sum().backward()
        results.append((to_numpy(loss), to_numpy(x.grad)))
    for a, b in zip(*results):
        assert_close(a, b, 1e-9, 1e-12, f"ctc_loss, an empty target, {reduction}")


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_cross_entropy_without_smoothing_as_the_log_softmax_path(dg, dtype):
    """Without label smoothing the forward computes each row's log_softmax at its target alone (Note [Cross entropy
    without the log_softmax] in kernels/reduce.cpp), with the same arithmetic as the full log_softmax path that
    label smoothing takes: a smoothing of 1e-300 changes no double, so the two losses agree exactly; ignored
    targets, every reduction and 1-D logits included; a row of -inf but at its target has loss 0."""
    F = dg.nn.functional
    rng = np.random.default_rng(5)
    x = (rng.standard_normal((40, 300)) * 5).astype(dtype)
    t = rng.integers(0, 300, 40)
    t[3] = -100
    for reduction in ("mean", "sum", "none"):
        a = F.cross_entropy(dg.tensor(x), dg.tensor(t), reduction=reduction)
        b = F.cross_entropy(dg.tensor(x), dg.tensor(t), reduction=reduction, label_smoothing=1e-300)
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    logp = x - x.max(axis=1, keepdims=True)
    logp = logp - np.log(np.exp(logp).sum(axis=1, keepdims=True))
    want = np.where(t == -100, 0.0, -logp[np.arange(40), np.where(t == -100, 0, t)])
    tol = 1e-5 if dtype == "float32" else 1e-12
    np.testing.assert_allclose(F.cross_entropy(dg.tensor(x), dg.tensor(t), reduction="none").numpy(), want,
                               rtol=tol, atol=tol)
    np.testing.assert_array_equal(F.cross_entropy(dg.tensor(x[0]), dg.tensor(t[0])).numpy(),
                                  F.cross_entropy(dg.tensor(x[0]), dg.tensor(t[0]), label_smoothing=1e-300).numpy())
    row = np.full((1, 5), -np.inf, dtype=dtype)
    row[0, 2] = 1.0
    assert F.cross_entropy(dg.tensor(row), dg.tensor(np.array([2]))).item() == 0.0
