"""Samplers that need rejection loops: Gamma (Marsaglia-Tsang), Poisson (inversion / PTRS), Binomial (inversion /
BTRS), and the implicit reparameterisation gradient of Gamma samples.

Every uniform and normal draw comes from the engine's generator (dg.rand / dg.randn in float64), so samples are
reproducible under dg.manual_seed; the arithmetic of the accept/reject tests runs in numpy on those draws.
"""
import numpy as np

from .. import finfo, float64, from_numpy, no_grad, rand, randn
from .._api.host.special import digamma as _np_digamma, gammainc as _np_gammainc, lgamma as _np_lgamma
from ..autograd import Function
from ..autograd.function import _jvp_input_has_tangent
from .._api.ops.vmap import pointwise_apply


def _uniforms(n):
    with no_grad():
        return rand(int(n), dtype=_f64()).numpy().astype(np.float64)


def _normals(n):
    with no_grad():
        return randn(int(n), dtype=_f64()).numpy().astype(np.float64)


def _f64():
    return float64


def _to_tensor(array, like):
    """A numpy result as a tensor of like's dtype (a fresh copy)."""
    t = from_numpy(np.asarray(array, order="C"))
    return t.to(like.dtype) if t.dtype != like.dtype else t.clone()   # one copy either way


def _host(t):
    return np.array(t.detach().to(_f64()).numpy(), dtype=np.float64)


# ----- Gamma --------------------------------------------------------------------------------------------------------

def _standard_gamma_numpy(alpha):
    """Gamma(alpha, 1) draws, one per element of the float64 array alpha (alpha > 0).

    Marsaglia and Tsang (2000): for a >= 1, with d = a - 1/3 and c = 1/sqrt(9d), draw z ~ N(0,1) until
    v = (1 + cz)^3 > 0 and log u < z^2/2 + d - dv + d log v (u ~ U(0,1)); then d v ~ Gamma(a). For a < 1, draw
    Gamma(a + 1) and multiply by u^(1/a) (done in logs so that tiny values keep their exponent)."""
    alpha = np.asarray(alpha, dtype=np.float64)
    flat = alpha.reshape(-1)
    boost = flat < 1
    a = np.where(boost, flat + 1.0, flat)
    d = a - 1.0 / 3.0
    c = 1.0 / np.sqrt(9.0 * d)
    out = np.empty_like(flat)
    pending = np.arange(flat.size)
    while pending.size:
        z = _normals(pending.size)
        u = _uniforms(pending.size)
        dp, cp = d[pending], c[pending]
        v = (1.0 + cp * z) ** 3
        with np.errstate(invalid="ignore", divide="ignore"):
            ok = (v > 0) & (np.log(u) < 0.5 * z * z + dp - dp * v + dp * np.log(np.where(v > 0, v, 1.0)))
        out[pending[ok]] = (dp * v)[ok]
        pending = pending[~ok]
    if boost.any():
        idx = np.flatnonzero(boost)
        u = _uniforms(idx.size)
        with np.errstate(divide="ignore", under="ignore"):
            out[idx] = np.exp(np.log(out[idx]) + np.log(u) / flat[idx])
    return out.reshape(alpha.shape)


def _dP_dalpha(a, x):
    """d/da of the regularised lower incomplete gamma function P(a, x) (a, x: flat float64 arrays, x > 0).

    Note [Implicit Gamma gradient]
    P has the series P(a, x) = sum_n t_n, t_n = exp((a + n) log x - x - lgamma(a + n + 1)), so
    dP/da = sum_n t_n (log x - psi(a + n + 1)). The terms peak near n = x - a and fall off like a Gaussian of width
    sqrt(x), so the sum runs over a window of 12 sqrt(x) + 40 terms on either side of the peak, with
    t_{n+1} = t_n x / (a + n + 1) and psi(a + n + 2) = psi(a + n + 1) + 1 / (a + n + 1). For a Gamma sample x with
    u = P(a, x) held fixed, dx/da = -(dP/da) / p(x; a), p the density x^(a-1) e^-x / Gamma(a) (implicit
    reparameterisation, Figurnov et al. 2018)."""
    half = 12.0 * np.sqrt(x) + 40.0
    n0 = np.maximum(0.0, np.floor(x - a - half))
    steps = int(np.ceil(2 * half.max())) + 1
    log_x = np.log(x)
    log_t = (a + n0) * log_x - x - _np_lgamma(a + n0 + 1)
    psi = _np_digamma(a + n0 + 1)
    total = np.zeros_like(x)
    k = a + n0 + 1
    for _ in range(steps):
        total += np.exp(log_t) * (log_x - psi)
        log_t = log_t + log_x - np.log(k)
        psi = psi + 1.0 / k
        k = k + 1.0
    return total


def _gamma_log_pdf(a, x):
    return (a - 1) * np.log(x) - x - _np_lgamma(a)


def _standard_gamma_grad_numpy(alpha, x):
    """d x / d alpha for x ~ Gamma(alpha, 1), holding the CDF value P(alpha, x) fixed (Note [Implicit Gamma
    gradient])."""
    alpha = np.asarray(alpha, dtype=np.float64)
    x = np.maximum(np.asarray(x, dtype=np.float64), np.finfo(np.float64).tiny)
    shape = np.broadcast_shapes(alpha.shape, x.shape)
    a, x = np.broadcast_to(alpha, shape).reshape(-1), np.broadcast_to(x, shape).reshape(-1)
    if a.size == 0:
        return np.zeros(shape)
    with np.errstate(over="ignore", invalid="ignore"):
        grad = -_dP_dalpha(a, x) * np.exp(-_gamma_log_pdf(a, x))
    return grad.reshape(shape)


class _GammaInc(Function):
    """P(a, x) with its gradients: dP/dx is the Gamma(a) density, dP/da the series of Note [Implicit Gamma
    gradient]."""

    @staticmethod
    def forward(ctx, a, x):
        shape = np.broadcast_shapes(tuple(a.shape), tuple(x.shape))
        an, xn = (np.broadcast_to(_host(t), shape).reshape(-1).copy() for t in (a, x))
        ctx.save_for_backward(a, x)
        like = a if a.dtype.is_floating_point else x
        return _to_tensor(_np_gammainc(an, np.maximum(xn, 0.0)).reshape(shape), like)

    @staticmethod
    def _partials(a, x):
        """(dP/da, dP/dx) at the broadcast shape of a and x, as constants (0 where x <= 0)."""
        shape = np.broadcast_shapes(tuple(a.shape), tuple(x.shape))
        an, xn = (np.broadcast_to(_host(t), shape).reshape(-1).copy() for t in (a, x))
        positive = xn > 0
        d_dx = np.zeros_like(xn)
        d_da = np.zeros_like(xn)
        if positive.any():
            d_dx[positive] = np.exp(_gamma_log_pdf(an[positive], xn[positive]))
            d_da[positive] = _dP_dalpha(an[positive], xn[positive])
        return _to_tensor(d_da.reshape(shape), a), _to_tensor(d_dx.reshape(shape), x)

    @staticmethod
    def backward(ctx, grad):
        a, x = ctx.saved_tensors
        d_da, d_dx = _GammaInc._partials(a, x)
        return (grad * d_da if ctx.needs_input_grad[0] else None, grad * d_dx if ctx.needs_input_grad[1] else None)

    @staticmethod
    def jvp(ctx, ta, tx):
        a, x = ctx.saved_tensors
        d_da, d_dx = _GammaInc._partials(a, x)
        terms = [t * d for v, t, d in ((a, ta, d_da), (x, tx, d_dx)) if _jvp_input_has_tangent(ctx, v)]
        return sum(terms[1:], terms[0]) if terms else None


def gammainc(a, x):
    """The regularised lower incomplete gamma function, differentiable in both arguments (and batched under vmap
    by the pointwise rule: its forward reads values into numpy)."""
    return pointwise_apply(_GammaInc.apply, a, x)


class _StandardGamma(Function):
    """Gamma(alpha, 1) draws whose gradient with respect to alpha is the implicit one (Note [Implicit Gamma
    gradient]); draws are clamped below by the dtype's smallest normal number, as torch's."""

    @staticmethod
    def forward(ctx, alpha):
        a = _host(alpha)
        x = _standard_gamma_numpy(a)
        out = _to_tensor(x, alpha).clamp(min=finfo(alpha.dtype).tiny)
        ctx.save_for_backward(alpha, out)
        return out

    @staticmethod
    def backward(ctx, grad):
        alpha, out = ctx.saved_tensors
        dx = _standard_gamma_grad_numpy(_host(alpha), _host(out))
        return grad * _to_tensor(dx, alpha)

    @staticmethod
    def jvp(ctx, *tangents):
        raise NotImplementedError("_standard_gamma: forward-mode AD (a dual tensor as input) is not implemented (as "
                                  "in torch).")


def standard_gamma(alpha):
    """Gamma(alpha, 1) samples, differentiable in alpha (implicit reparameterisation)."""
    return _StandardGamma.apply(alpha)


# ----- Poisson ------------------------------------------------------------------------------------------------------

def _poisson_numpy(rate):
    """Poisson(rate) draws (float64 array of rates >= 0).

    rate < 10: inversion by multiplication (count uniforms until their product falls below e^-rate; about rate + 1
    draws). rate >= 10: Hormann's PTRS, transformed rejection with squeeze (W. Hormann, "The transformed rejection
    method for generating Poisson random variables", 1993), exact via lgamma in the acceptance test."""
    rate = np.asarray(rate, dtype=np.float64)
    flat = rate.reshape(-1)
    out = np.zeros_like(flat)
    small = np.flatnonzero((flat < 10) & (flat > 0))
    if small.size:
        limit = np.exp(-flat[small])
        prod = np.ones(small.size)
        count = np.zeros(small.size)
        active = np.arange(small.size)
        while active.size:
            prod[active] *= _uniforms(active.size)
            going = prod[active] > limit[active]
            count[active[going]] += 1
            active = active[going]
        out[small] = count
    large = np.flatnonzero(flat >= 10)
    if large.size:
        lam = flat[large]
        slam, loglam = np.sqrt(lam), np.log(lam)
        b = 0.931 + 2.53 * slam
        a = -0.059 + 0.02483 * b
        inv_alpha = 1.1239 + 1.1328 / (b - 3.4)
        vr = 0.9277 - 3.6224 / (b - 2)
        pending = np.arange(large.size)
        while pending.size:
            u = _uniforms(pending.size) - 0.5
            v = _uniforms(pending.size)
            ap, bp = a[pending], b[pending]
            us = 0.5 - np.abs(u)
            k = np.floor((2 * ap / us + bp) * u + lam[pending] + 0.43)
            quick = (us >= 0.07) & (v <= vr[pending])
            reject = (k < 0) | ((us < 0.013) & (v > us))
            with np.errstate(divide="ignore", invalid="ignore"):
                lhs = np.log(v) + np.log(inv_alpha[pending]) - np.log(ap / (us * us) + bp)
                rhs = -lam[pending] + k * loglam[pending] - _np_lgamma(np.maximum(k, 0) + 1)
            ok = quick | (~reject & (lhs <= rhs))
            out[large[pending[ok]]] = k[ok]
            pending = pending[~ok]
    return out.reshape(rate.shape)


def poisson(rate):
    """Poisson draws with the rates of the tensor rate (no gradient)."""
    return _to_tensor(_poisson_numpy(_host(rate)), rate)


# ----- Binomial -----------------------------------------------------------------------------------------------------

def _binomial_numpy(count, prob):
    """Binomial(count, prob) draws (float64 arrays of one shape; count a non-negative integer, 0 <= prob <= 1).

    With q = min(prob, 1 - prob) (a draw for 1 - prob is count minus one for prob): count * q < 10 by inversion
    (walk the pmf from 0 with its ratio recurrence, about count * q + 1 steps); otherwise Hormann's BTRS
    (W. Hormann, "The generation of binomial random variates", 1993), with the exact log-pmf ratio via lgamma in the
    acceptance test."""
    n_all = count.reshape(-1)
    p_all = prob.reshape(-1)
    flip = p_all > 0.5
    q_all = np.where(flip, 1.0 - p_all, p_all)
    out = np.zeros_like(n_all)
    small = np.flatnonzero((n_all * q_all < 10) & (q_all > 0) & (n_all > 0))
    if small.size:
        n, q = n_all[small], q_all[small]
        u = _uniforms(small.size)
        k = np.zeros(small.size)
        pk = np.exp(n * np.log1p(-q))
        ratio = q / (1 - q)
        active = np.arange(small.size)
        while active.size:
            going = (u[active] > pk[active]) & (k[active] < n[active])
            active = active[going]
            u[active] -= pk[active]
            k[active] += 1
            pk[active] *= (n[active] - k[active] + 1) / k[active] * ratio[active]
        out[small] = k
    large = np.flatnonzero(n_all * q_all >= 10)
    if large.size:
        n, q = n_all[large], q_all[large]
        spq = np.sqrt(n * q * (1 - q))
        b = 1.15 + 2.53 * spq
        a = -0.0873 + 0.0248 * b + 0.01 * q
        c = n * q + 0.5
        vr = 0.92 - 4.2 / b
        alpha = (2.83 + 5.1 / b) * spq
        lpq = np.log(q / (1 - q))
        m = np.floor((n + 1) * q)
        log_pmf_m = _np_lgamma(m + 1) + _np_lgamma(n - m + 1)
        pending = np.arange(large.size)
        while pending.size:
            u = _uniforms(pending.size) - 0.5
            v = _uniforms(pending.size)
            ap, bp, cp, vp = a[pending], b[pending], c[pending], vr[pending]
            us = 0.5 - np.abs(u)
            k = np.floor((2 * ap / us + bp) * u + cp)
            quick = (us >= 0.07) & (v <= vp)
            inside = (k >= 0) & (k <= n[pending])
            kk = np.clip(k, 0, n[pending])
            with np.errstate(divide="ignore", invalid="ignore"):
                lhs = np.log(v * alpha[pending] / (ap / (us * us) + bp))
                rhs = (kk - m[pending]) * lpq[pending] + log_pmf_m[pending] - _np_lgamma(kk + 1) \
                    - _np_lgamma(n[pending] - kk + 1)
            ok = quick | (inside & (lhs <= rhs))
            out[large[pending[ok]]] = k[ok]
            pending = pending[~ok]
    out = np.where(flip, n_all - out, out)
    return out.reshape(count.shape)


def binomial(count, prob):
    """Binomial draws (count, prob: tensors of one shape; no gradient)."""
    return _to_tensor(_binomial_numpy(_host(count), _host(prob)), prob)
