"""numpy kernels of the special functions numpy lacks: erf/erfc/lgamma (the C library's, element by element),
erfinv/erfcinv, erfcx, digamma, polygamma, the Hurwitz zeta function, the modified Bessel functions I0/I1 and their
scaled forms. float64 arrays in, float64 arrays out, vectorised, without numpy warnings.

They serve the forwards of the custom Functions in pointwise.py and special.py (Note [numpy forwards] there). Each is
a loop over numpy operations or over the C library's functions, so a C++ kernel would be much faster; the maths
below is written to be ported as it is.
"""
import math
from fractions import Fraction

import numpy as np

_SQRT_PI = math.sqrt(math.pi)


def _apply(fn, x):
    """A math-module function elementwise (math.erf and friends are correctly rounded to within an ulp)."""
    x = np.asarray(x, dtype=np.float64)
    return np.fromiter(map(fn, x.ravel().tolist()), np.float64, x.size).reshape(x.shape)


def erf(x):
    return _apply(math.erf, x)


def erfc(x):
    return _apply(math.erfc, x)


def lgamma(x):
    """log|Gamma(x)|; +inf at the poles 0, -1, -2, ... and at -inf (as torch)."""
    x = np.asarray(x, dtype=np.float64)
    pole = (x <= 0) & (x == np.floor(x))
    out = _apply(math.lgamma, np.where(pole, 1.0, x))
    out[pole] = np.inf
    return out


# ----- Bernoulli numbers, for the asymptotic series ----------------------------------------------------------------

def _bernoulli(m):
    """B_m as a Fraction (Akiyama-Tanigawa; B_1 = +1/2, which is not used)."""
    a = [Fraction(0)] * (m + 1)
    for k in range(m + 1):
        a[k] = Fraction(1, k + 1)
        for j in range(k, 0, -1):
            a[j - 1] = j * (a[j - 1] - a[j])
    return a[0]


_B2K = [_bernoulli(2 * k) for k in range(1, 15)]                      # B_2 .. B_28
# digamma: psi(x) ~ ln x - 1/(2x) - sum_k B_2k / (2k x^2k)
_PSI_ASYMPTOTIC = [float(b / (2 * k)) for k, b in enumerate(_B2K[:8], 1)]
# Euler-Maclaurin tail of the Hurwitz zeta function: B_2j / (2j)!
_EM = [float(b / math.factorial(2 * j)) for j, b in enumerate(_B2K, 1)]


# ----- digamma, polygamma, Hurwitz zeta ------------------------------------------------------------------------------

def _digamma_positive(x):
    """psi(x) for x > 0 (and +inf, nan): shift x up to >= 10 with psi(x) = psi(x + 1) - 1/x, then the asymptotic
    series (8 terms: its error at x >= 10 is below 1e-17 relative)."""
    x = x.copy()
    acc = np.zeros_like(x)
    small = x < 10
    while small.any():
        acc[small] -= 1.0 / x[small]
        x[small] += 1.0
        small = x < 10
    inv2 = 1.0 / (x * x)
    series = np.zeros_like(x)
    for c in reversed(_PSI_ASYMPTOTIC):
        series = (series + c) * inv2
    return acc + np.log(x) - 0.5 / x - series


def digamma(x):
    """psi(x) = d/dx ln Gamma(x). torch's values at the poles: psi(+0) = -inf, psi(-0) = +inf, nan at the negative
    integers (and -inf). Negative x by reflection: psi(x) = psi(1 - x) - pi / tan(pi x), with pi x reduced to
    [-pi/2, pi/2] first so that large |x| keep their accuracy."""
    x = np.asarray(x, dtype=np.float64)
    with np.errstate(all="ignore"):
        negint = (x < 0) & (x == np.floor(x))
        reflect = (x < 0) & ~negint
        out = _digamma_positive(np.where(reflect, 1.0 - x, np.where(negint | (x == 0), 1.0, x)))
        r = x - np.round(x)
        out = np.where(reflect, out - math.pi / np.tan(math.pi * r), out)
        out = np.where(x == 0, np.copysign(np.inf, -x), out)
        return np.where(negint, np.nan, out)


_DIRECT_TERMS = 1e6      # q below -1e6 would take that many direct terms: not computed (nan)


def zeta(s, q):
    """The Hurwitz zeta function sum_k (q + k)^-s (s > 1): the first terms directly until q + k exceeds
    max(9, s/2), the rest by Euler-Maclaurin (integral, half term, 14 Bernoulli corrections). As torch (Cephes):
    inf at s == 1 and at q = 0, -1, -2, ...; nan for s < 1, and for q < 0 with a non-integer s. Non-integer
    q < -1e6 give nan (the direct sum would take more than a million steps)."""
    s, q = np.broadcast_arrays(np.asarray(s, dtype=np.float64), np.asarray(q, dtype=np.float64))
    with np.errstate(all="ignore"):
        total = np.zeros(s.shape)
        a = q.copy()
        limit = np.minimum(np.maximum(9.0, 0.5 * s), 1e4)      # s = inf must not loop forever
        pole = (q <= 0) & (q == np.floor(q))
        k = 0
        todo = np.isfinite(a) & ~pole & (a > -_DIRECT_TERMS)
        while todo.any():
            total[todo] += a[todo] ** -s[todo]
            a[todo] += 1.0
            k += 1
            todo &= (a <= limit) | (k < 9)
        tail = a ** (1.0 - s) / (s - 1.0) + 0.5 * a ** -s
        factor = s * a ** (-s - 1.0)                # s (s+1) ... (s+2j-2) a^(-s-2j+1), for j = 1
        for j, c in enumerate(_EM, 1):
            tail = tail + c * factor
            factor = factor * (s + 2 * j - 1) * (s + 2 * j) / (a * a)
        out = total + np.where(np.isinf(a) | np.isinf(s), 0.0, tail)
        # the special cases in Cephes' order of precedence (the last applied wins), as torch
        out = np.where((a < -_DIRECT_TERMS) | (q == np.inf) | ((q < 0) & (s != np.floor(s))), np.nan, out)
        out = np.where(pole, np.inf, out)
        out = np.where(s < 1, np.nan, out)
        return np.where(s == 1, np.inf, out)


def polygamma(n, x):
    """psi^(n)(x): digamma for n == 0, else (-1)^(n+1) n! zeta(n + 1, x). At +-inf, torch's values: for n == 1
    (its trigamma) 0 and nan, for n >= 2 (its zeta) nan and +-inf."""
    if n == 0:
        return digamma(x)
    x = np.asarray(x, dtype=np.float64)
    factorial = float(math.factorial(n)) if n <= 170 else math.inf
    with np.errstate(all="ignore"):
        out = (1.0 if n % 2 else -1.0) * factorial * zeta(float(n + 1), x)
    if n == 1:
        out = np.where(x == np.inf, 0.0, np.where(x == -np.inf, np.nan, out))
    return out


# ----- the inverse error functions -------------------------------------------------------------------------------

def _solve_erf(target, log_1_minus_y2, tail):
    """x >= 0 with erf(x) = target (tail False) or erfc(x) = target (tail True), target in (0, 1].

    Start from Winitzki's closed form, x0 = sqrt(sqrt(t^2 - w/a) - t) with w = ln(1 - y^2), t = 2/(pi a) + w/2,
    a = 0.147 (relative error ~2e-3), then three Halley steps on f(x) = erf(x) - target (or erfc): with
    f'' = -2x f', Halley's step is x -= d / (1 + x d), d = f/f'. Working on erfc in the tail keeps the relative
    accuracy of 1 - y there."""
    a = 0.147
    t = 2.0 / (math.pi * a) + 0.5 * log_1_minus_y2
    x = np.sqrt(np.maximum(np.sqrt(t * t - log_1_minus_y2 / a) - t, 0.0))
    for _ in range(3):
        slope = (2.0 / _SQRT_PI) * np.exp(-x * x)
        f = (erfc(x) - target) if tail else (erf(x) - target)
        d = np.where(slope > 0, f / np.where(slope > 0, (-slope if tail else slope), 1.0), 0.0)
        x = x - d / (1.0 + x * d)
    return x


def erfinv(y):
    """The inverse of erf on [-1, 1]: +-inf at +-1, nan outside."""
    y = np.asarray(y, dtype=np.float64)
    out = np.full(y.shape, np.nan)
    with np.errstate(all="ignore"):
        ay = np.abs(y)
        central = ay <= 0.5
        if central.any():
            v = ay[central]
            out[central] = _solve_erf(v, np.log1p(-v * v), False)
        tail = (ay > 0.5) & (ay < 1)
        if tail.any():
            z = 1.0 - ay[tail]                                  # exact for ay in [0.5, 1]
            out[tail] = _solve_erf(z, np.log(z) + np.log(2.0 - z), True)
        out[ay == 1] = np.inf
        return np.copysign(out, y)


def erfcinv(z):
    """The inverse of erfc on [0, 2]: erfcinv(z) = -erfcinv(2 - z), both exact differences."""
    z = np.asarray(z, dtype=np.float64)
    out = np.full(z.shape, np.nan)
    with np.errstate(all="ignore"):
        upper = z > 1
        w = np.where(upper, 2.0 - z, z)                       # in [0, 1]; exact
        tail = (w > 0) & (w < 0.5)
        if tail.any():
            v = w[tail]
            out[tail] = _solve_erf(v, np.log(v) + np.log(2.0 - v), True)
        central = (w >= 0.5) & (w <= 1)
        if central.any():
            y = 1.0 - w[central]                                # exact
            out[central] = _solve_erf(y, np.log1p(-y * y), False)
        out[w == 0] = np.inf
        out = np.where(upper, -out, out)
        return np.where((z < 0) | (z > 2), np.nan, out)


# ----- erfcx, the normal distribution ------------------------------------------------------------------------------

def _exp_square(x):
    """exp(x^2) without the rounding error of x^2: x = hi + lo with hi of 24 bits, so hi^2 is exact."""
    hi = x.astype(np.float32).astype(np.float64)
    lo = x - hi
    return np.exp(hi * hi) * np.exp(lo * (2.0 * hi + lo))


def erfcx(x):
    """exp(x^2) erfc(x): exp(x^2) * erfc(x) for 0 <= x < 12; the asymptotic series
    1/(x sqrt(pi)) sum_k (-1)^k (2k-1)!! / (2x^2)^k for x >= 12 (16 terms: below 1e-17); 2 exp(x^2) - erfcx(-x)
    for x < 0 (+inf below about -26.6)."""
    x = np.asarray(x, dtype=np.float64)
    with np.errstate(all="ignore"):
        ax = np.abs(x)
        near = ax < 12
        out = np.empty(x.shape)
        out[near] = _exp_square(ax[near]) * erfc(ax[near])
        far = ~near
        if far.any():
            v = ax[far]
            inv = 1.0 / (2.0 * v * v)
            term, series = np.ones_like(v), np.ones_like(v)
            for k in range(1, 17):
                term = term * -(2 * k - 1) * inv
                series = series + term
            out[far] = series / (v * _SQRT_PI)
        neg = x < 0
        out[neg] = 2.0 * _exp_square(x[neg]) - out[neg]
        out[x == -np.inf] = np.inf
        return np.where(np.isnan(x), np.nan, out)


def ndtr(x):
    """The standard normal distribution function: erfc(-x / sqrt 2) / 2 (exact in both tails)."""
    x = np.asarray(x, dtype=np.float64)
    return 0.5 * erfc(-x / math.sqrt(2.0))


def log_ndtr(x):
    """log ndtr(x): log1p(-erfc(x / sqrt 2) / 2) above -1; log(erfcx(-x / sqrt 2) / 2) - x^2/2 below, where
    ndtr itself would underflow."""
    x = np.asarray(x, dtype=np.float64)
    out = np.empty(x.shape)
    with np.errstate(all="ignore"):
        upper = ~(x < -1)                        # nan goes here and stays nan
        out[upper] = np.log1p(-0.5 * erfc(x[upper] / math.sqrt(2.0)))
        low = x < -1
        v = x[low]
        out[low] = np.log(0.5 * erfcx(-v / math.sqrt(2.0))) - 0.5 * v * v
    return out


def ndtri(p):
    """The inverse of ndtr: -sqrt(2) erfcinv(2p) (2p is exact, so small p keep their accuracy); ndtri(1/2) = +0."""
    p = np.asarray(p, dtype=np.float64)
    with np.errstate(all="ignore"):
        return -math.sqrt(2.0) * erfcinv(2.0 * p) + 0.0


# ----- modified Bessel functions of the first kind, orders 0 and 1 ---------------------------------------------------

def bessel_i(nu, x, scaled):
    """I_nu(x) (nu = 0 or 1), or exp(-|x|) I_nu(x) when scaled.

    |x| <= 30: the power series sum_k (x^2/4)^k (x/2)^nu / (k! (k+nu)!), whose terms are all positive (no
    cancellation), until the terms stop mattering. |x| > 30: the asymptotic expansion
    exp(|x|) / sqrt(2 pi |x|) sum_k (-1)^k a_k / |x|^k, a_k = a_(k-1) (4 nu^2 - (2k-1)^2) / (8k) (25 terms: below
    1e-19 at 30). I_1 is odd, I_0 even."""
    x = np.asarray(x, dtype=np.float64)
    ax = np.abs(x)
    out = np.full(x.shape, np.nan)
    with np.errstate(all="ignore"):
        small = ax <= 30
        if small.any():
            v = ax[small]
            q = 0.25 * v * v
            term = np.ones_like(v) if nu == 0 else 0.5 * v
            total = term.copy()
            k = 0
            while True:
                k += 1
                term = term * q / (k * (k + nu))
                total = total + term
                if not (term > 1e-17 * total).any():
                    break
            out[small] = total * np.exp(-v) if scaled else total
        big = (ax > 30) & np.isfinite(ax)
        if big.any():
            v = ax[big]
            series = _asymptotic_sum(nu, v)
            scaled_value = series / np.sqrt(2 * math.pi * v)
            if scaled:
                out[big] = scaled_value
            else:                       # exp(v/2) twice: exp(v) would overflow before I(v) does
                half = np.exp(0.5 * v)
                out[big] = half * (half * scaled_value)
        inf = np.isinf(ax)
        out[inf] = 0.0 if scaled else np.inf
        return np.where(x < 0, -out, out) if nu == 1 else out      # odd; i1(-0) = +0, as torch


def _asymptotic_sum(nu, v):
    """sum_k (-1)^k a_k / v^k of bessel_i's expansion."""
    term, series = np.ones_like(v), np.ones_like(v)
    mu = 4.0 * nu * nu
    for k in range(1, 26):
        term = term * -(mu - (2 * k - 1) ** 2) / (8 * k * v)
        series = series + term
    return series
