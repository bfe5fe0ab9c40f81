"""numpy kernels of the special functions numpy lacks: erf/erfc/lgamma (the C library's, element by element),
erfinv/erfcinv, erfcx, digamma, polygamma, the Hurwitz zeta function, the modified Bessel functions I and K and
their scaled forms, the Bessel functions J and Y of orders 0 and 1, spherical_bessel_j0, the Airy function Ai, the
regularised incomplete gamma functions and the orthogonal polynomials (Chebyshev, Hermite, Laguerre, Legendre).
float64 arrays in and out (the polynomials also float32, so that they overflow where torch's do), vectorised,
without numpy warnings; each written from the mathematics named above it, with torch's special values.

They serve the forwards of the custom Functions and host ops in ops/pointwise.py and ops/special.py (Note [numpy
forwards] there) and the samplers of distributions/. Each is a loop over numpy operations or over the C library's
functions, so a C++ kernel would be much faster; the maths below is written to be ported as it is.
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


_EULER = 0.57721566490153286061
_TWO_OVER_PI = 2.0 / math.pi


# ===== Bessel functions of the first and second kind, orders 0 and 1 ===============================================
#
# Note [Bessel J and Y]: three regimes.
#  |x| <= 2: the power series. J_nu(x) = sum_k (-1)^k (x/2)^(2k+nu) / (k! (k+nu)!), and (A&S 9.1.11)
#    Y0(x) = (2/pi) (ln(x/2) + gamma) J0(x) + (2/pi) sum_k>=1 (-1)^(k+1) H_k (x^2/4)^k / (k!)^2,
#    Y1(x) = -2/(pi x) + (2/pi) ln(x/2) J1(x) - (1/pi) (x/2) sum_k>=0 (psi(k+1) + psi(k+2)) (-x^2/4)^k / (k! (k+1)!),
#    H_k the harmonic numbers, psi(k+1) = H_k - gamma.
#  2 < |x| < 25: Miller's algorithm: the recurrence J_(k-1) = (2k/x) J_k - J_(k+1) run downwards from a high order
#    (where it is stable), normalised with 1 = J0 + 2 sum_k J_2k; then Neumann's series (A&S 9.1.88)
#    Y0 = (2/pi) (ln(x/2) + gamma) J0 - (4/pi) sum_k>=1 (-1)^k J_2k / k, and its derivative (Y1 = -Y0',
#    J_2k' = (J_(2k-1) - J_(2k+1)) / 2): Y1 = (2/pi) (ln(x/2) + gamma) J1 - (2/pi) J0 / x
#    + (2/pi) sum_k>=1 (-1)^k (J_(2k-1) - J_(2k+1)) / k. Every term is bounded, so there is no cancellation.
#  |x| >= 25: Hankel's expansion, J_nu = sqrt(2/(pi x)) (P cos chi - Q sin chi), Y_nu = sqrt(2/(pi x)) (P sin chi +
#    Q cos chi), chi = x - (nu/2 + 1/4) pi, P = sum_k (-1)^k a_2k / x^2k, Q = sum_k (-1)^k a_(2k+1) / x^(2k+1),
#    a_k = prod_{j=1..k} (4 nu^2 - (2j-1)^2) / (k! 8^k); its terms shrink until k ~ 2x, so 40 terms are below 1e-19.
# torch's special values: J(+-inf) and Y(+-inf) are NaN, Y of a negative x is NaN and Y(+-0) = -inf.

def _bessel_series(x):
    """(J0, J1, Y0, Y1) by the power series, for 0 < x <= 2."""
    q = -0.25 * x * x
    j0_term = np.ones_like(x)
    j1_term = 0.5 * x
    j0, j1 = j0_term.copy(), j1_term.copy()
    h = 0.0                                         # H_k
    y0_sum = np.zeros_like(x)
    psi_k1, psi_k2 = -_EULER, 1.0 - _EULER          # psi(k+1), psi(k+2) for k = 0
    y1_sum = (psi_k1 + psi_k2) * np.ones_like(x)
    y1_term = np.ones_like(x)                        # (-x^2/4)^k / (k! (k+1)!)
    for k in range(1, 30):
        j0_term = j0_term * q / (k * k)
        j1_term = j1_term * q / (k * (k + 1))
        j0 = j0 + j0_term
        j1 = j1 + j1_term
        h += 1.0 / k
        y0_sum = y0_sum - h * j0_term                # (-1)^(k+1) H_k (x^2/4)^k / (k!)^2 = -H_k * j0_term
        y1_term = y1_term * q / (k * (k + 1))
        psi_k1, psi_k2 = psi_k1 + 1.0 / k, psi_k2 + 1.0 / (k + 1)
        y1_sum = y1_sum + (psi_k1 + psi_k2) * y1_term
    log_half = np.log(0.5 * x)
    y0 = _TWO_OVER_PI * ((log_half + _EULER) * j0 + y0_sum)
    y1 = -_TWO_OVER_PI / x + _TWO_OVER_PI * log_half * j1 - 0.5 * x * y1_sum / math.pi
    return j0, j1, y0, y1


def _bessel_miller(x):
    """(J0, J1, Y0, Y1) by Miller's algorithm and Neumann's series, for 2 < x < 25."""
    top = 2 * ((int(x.max()) + 60) // 2)
    f_next = np.zeros_like(x)             # f_(k+1)
    f = np.full(x.shape, 1e-300)          # f_k, k = top
    norm = np.zeros_like(x)               # 2 sum_{k>=1} f_2k
    s0 = np.zeros_like(x)                 # sum_k (-1)^k f_2k / k
    s1 = np.zeros_like(x)                 # sum_k (-1)^k (f_(2k-1) - f_(2k+1)) / k
    for k in range(top, 0, -1):
        f_prev = (2.0 * k / x) * f - f_next
        if k % 2 == 0:
            half = k // 2
            sign = -1.0 if half % 2 else 1.0
            norm = norm + 2.0 * f
            s0 = s0 + sign * f / half
            s1 = s1 + sign * (f_prev - f_next) / half
        f_next, f = f, f_prev
        big = np.abs(f) > 1e250
        if big.any():                       # rescale everything accumulated so far
            scale = np.where(big, 1e-250, 1.0)
            f, f_next, norm, s0, s1 = f * scale, f_next * scale, norm * scale, s0 * scale, s1 * scale
    total = f + norm                        # f is f_0 now, f_next is f_1
    j0, j1 = f / total, f_next / total
    log_term = np.log(0.5 * x) + _EULER
    y0 = _TWO_OVER_PI * log_term * j0 - 2.0 * _TWO_OVER_PI * s0 / total
    y1 = _TWO_OVER_PI * log_term * j1 - _TWO_OVER_PI * j0 / x + _TWO_OVER_PI * s1 / total
    return j0, j1, y0, y1


def _hankel_pq(nu, x):
    """Hankel's P and Q of order nu for large x (Note [Bessel J and Y])."""
    mu = 4.0 * nu * nu
    term = np.ones_like(x)
    p, q = np.ones_like(x), np.zeros_like(x)
    for k in range(1, 41):
        term = term * (mu - (2 * k - 1) ** 2) / (k * 8.0 * x)
        sign = -1.0 if (k // 2) % 2 else 1.0        # (-1)^floor(k/2)
        if k % 2:
            q = q + sign * term
        else:
            p = p + sign * term
    return p, q


def _bessel_hankel(x):
    """(J0, J1, Y0, Y1) by Hankel's expansion, for x >= 25."""
    c, s = np.cos(x), np.sin(x)
    r = np.sqrt(2.0 / (math.pi * x))
    h = math.sqrt(0.5)
    cos0, sin0 = h * (c + s), h * (s - c)           # cos and sin of x - pi/4
    cos1, sin1 = h * (s - c), -h * (s + c)          # cos and sin of x - 3 pi/4
    p0, q0 = _hankel_pq(0, x)
    p1, q1 = _hankel_pq(1, x)
    return (r * (p0 * cos0 - q0 * sin0), r * (p1 * cos1 - q1 * sin1),
            r * (p0 * sin0 + q0 * cos0), r * (p1 * sin1 + q1 * cos1))


def _bessel_jy(x):
    """(J0, J1, Y0, Y1) of |x| (Note [Bessel J and Y]); the caller applies the parities and special values."""
    ax = np.abs(x)
    outs = [np.full(x.shape, np.nan) for _ in range(4)]
    with np.errstate(all="ignore"):
        regimes = (((ax > 0) & (ax <= 2), _bessel_series), (((ax > 2) & (ax < 25)), _bessel_miller),
                   ((ax >= 25) & (ax < np.inf), _bessel_hankel))
        for sel, fn in regimes:
            if sel.any():
                for out, value in zip(outs, fn(ax[sel])):
                    out[sel] = value
    return outs


def bessel_j0(x):
    x = np.asarray(x, dtype=np.float64)
    j0 = _bessel_jy(x)[0]
    return np.where(x == 0, 1.0, j0)


def bessel_j1(x):
    x = np.asarray(x, dtype=np.float64)
    j1 = _bessel_jy(x)[1]
    j1 = np.where(x < 0, -j1, j1)                   # odd
    return np.where(x == 0, x, j1)                  # J1(+-0) = +-0


def _bessel_y(x, index):
    x = np.asarray(x, dtype=np.float64)
    y = _bessel_jy(x)[index]
    y = np.where(x < 0, np.nan, y)
    return np.where(x == 0, -np.inf, y)


def bessel_y0(x):
    return _bessel_y(x, 2)


def bessel_y1(x):
    return _bessel_y(x, 3)


# ===== modified Bessel functions ====================================================================================
#
# Note [Modified Bessel K]: for 0 < x <= 2 the series (A&S 9.6.13 and 9.6.11)
#    K0(x) = -(ln(x/2) + gamma) I0(x) + sum_k>=1 H_k (x^2/4)^k / (k!)^2,
#    K1(x) = 1/x + ln(x/2) I1(x) - (x/4) sum_k>=0 (psi(k+1) + psi(k+2)) (x^2/4)^k / (k! (k+1)!);
# above, the integral e^x K_nu(x) = int_0^inf exp(-x (cosh t - 1)) cosh(nu t) dt by the trapezoidal rule with step
# 0.04: the integrand is analytic and decays doubly exponentially, so the rule's error is ~exp(-2 pi d / h) for a
# strip of half-width d (~1e-20 here for x <= 30); and for x > 30 the expansion
# e^x K_nu(x) ~ sqrt(pi / (2x)) sum_k a_k(nu) / x^k (a_k as in Hankel's, 40 terms). Any real order nu (airy_ai
# uses nu = 1/3).

_TRAPEZOID_H = 0.04
_TRAPEZOID_T = np.arange(0, 7.0, _TRAPEZOID_H)        # cosh(7) - 1 ~ 548: exp(-548 x) is nothing for x >= 1.8


def _scaled_k(nu, x):
    """e^x K_nu(x) for x >= 1.8 (Note [Modified Bessel K])."""
    out = np.empty_like(x)
    mid = x <= 30
    if mid.any():
        v = x[mid][:, None]
        t = _TRAPEZOID_T[None, :]
        f = np.exp(-v * (np.cosh(t) - 1.0)) * np.cosh(nu * t)
        out[mid] = _TRAPEZOID_H * (f.sum(axis=1) - 0.5 * f[:, 0])
    far = ~mid
    if far.any():
        v = x[far]
        mu = 4.0 * nu * nu
        term, total = np.ones_like(v), np.ones_like(v)
        for k in range(1, 41):
            term = term * (mu - (2 * k - 1) ** 2) / (k * 8.0 * v)
            total = total + term
        out[far] = np.sqrt(math.pi / (2.0 * v)) * total
    return out


def _k_series(nu, x):
    """K_nu(x) (nu = 0 or 1) by the series, 0 < x <= 2."""
    q = 0.25 * x * x
    log_half = np.log(0.5 * x)
    if nu == 0:
        term, h, total = np.ones_like(x), 0.0, np.zeros_like(x)
        for k in range(1, 30):
            term = term * q / (k * k)
            h += 1.0 / k
            total = total + h * term
        return -(log_half + _EULER) * bessel_i(0, x, False) + total
    term = np.ones_like(x)
    psi_k1, psi_k2 = -_EULER, 1.0 - _EULER
    total = (psi_k1 + psi_k2) * term
    for k in range(1, 30):
        term = term * q / (k * (k + 1))
        psi_k1, psi_k2 = psi_k1 + 1.0 / k, psi_k2 + 1.0 / (k + 1)
        total = total + (psi_k1 + psi_k2) * term
    return 1.0 / x + log_half * bessel_i(1, x, False) - 0.25 * x * total


def bessel_k(nu, x, scaled):
    """K_nu(x), or e^x K_nu(x) if scaled (nu = 0 or 1): inf at 0, NaN below (and at -inf), 0 at +inf."""
    x = np.asarray(x, dtype=np.float64)
    out = np.full(x.shape, np.nan)
    with np.errstate(all="ignore"):
        small = (x > 0) & (x <= 2)
        if small.any():
            v = x[small]
            k = _k_series(nu, v)
            out[small] = k * np.exp(v) if scaled else k
        big = (x > 2) & np.isfinite(x)
        if big.any():
            v = x[big]
            k = _scaled_k(float(nu), v)
            out[big] = k if scaled else k * np.exp(-v)
        out[x == 0] = np.inf
        out[x == np.inf] = 0.0
    return out


def modified_bessel_i(nu, x):
    """I_nu(x) (bessel_i); NaN at +-inf, as torch's."""
    x = np.asarray(x, dtype=np.float64)
    return np.where(np.isinf(x), np.nan, bessel_i(nu, x, False))


def spherical_bessel_j0(x):
    """sin(x) / x: its Taylor series below 0.5 (no cancellation), 0 at +-inf."""
    x = np.asarray(x, dtype=np.float64)
    with np.errstate(all="ignore"):
        x2 = x * x
        series = 1.0 + x2 * (-1 / 6 + x2 * (1 / 120 + x2 * (-1 / 5040 + x2 * (1 / 362880 + x2 * (
            -1 / 39916800 + x2 / 6227020800)))))
        out = np.where(np.abs(x) < 0.5, series, np.sin(x) / x)
    return np.where(np.isinf(x), 0.0, out)


# ===== the Airy function Ai ========================================================================================
#
# Note [Airy Ai]: Ai solves y'' = x y with Ai(0) = 3^(-2/3) / Gamma(2/3), Ai'(0) = -3^(-1/3) / Gamma(1/3).
#  x > 2: Ai(x) = (1/pi) sqrt(x/3) K_(1/3)(zeta), zeta = (2/3) x^(3/2) (Note [Modified Bessel K] for K).
#  -10 <= x <= 2: Taylor steps of the differential equation from 0: about x0, y = sum_n c_n t^n with
#    (n+2)(n+1) c_(n+2) = x0 c_n + c_(n-1); steps of 0.5 with 40 terms. Leftwards both solutions oscillate with the
#    same amplitude, so the steps are stable; rightwards to 2 the growing solution Bi amplifies errors by < 50.
#  x < -10: Ai(-z) ~ pi^(-1/2) z^(-1/4) (sin(zeta + pi/4) sum_k (-1)^k u_2k zeta^-2k
#    - cos(zeta + pi/4) sum_k (-1)^k u_(2k+1) zeta^-(2k+1)), u_k = (2k+1)(2k+3)...(6k-1) / (216^k k!) (A&S 10.4.60;
#    zeta >= 21 there, so 30 terms are far below rounding).
# torch's values: NaN at +-inf.

_AI0 = 3.0 ** (-2.0 / 3.0) / math.gamma(2.0 / 3.0)
_AIP0 = -(3.0 ** (-1.0 / 3.0)) / math.gamma(1.0 / 3.0)
_AIRY_STEP = 0.5
_AIRY_TERMS = 40


def _taylor_coefficients(x0, y, dy):
    c = [y, dy]
    for n in range(_AIRY_TERMS - 2):
        c.append((x0 * c[n] + (c[n - 1] if n >= 1 else 0.0)) / ((n + 2) * (n + 1)))
    return c


def _airy_grid():
    """{x0: Taylor coefficients of Ai about x0} on the grid 0, +-0.5, ... over [-10, 2]."""
    grid = {}
    for direction, last in ((1, 4), (-1, 20)):
        y, dy = _AI0, _AIP0
        for i in range(last + 1):
            x0 = direction * i * _AIRY_STEP
            c = _taylor_coefficients(x0, y, dy)
            grid[i * direction] = c
            h = direction * _AIRY_STEP
            y = sum(cn * h ** n for n, cn in enumerate(c))
            dy = sum(n * cn * h ** (n - 1) for n, cn in enumerate(c) if n)
    return grid


_AIRY_GRID = None


def airy_ai(x):
    global _AIRY_GRID
    x = np.asarray(x, dtype=np.float64)
    out = np.full(x.shape, np.nan)
    with np.errstate(all="ignore"):
        mid = (x >= -10) & (x <= 2)
        if mid.any():
            if _AIRY_GRID is None:
                _AIRY_GRID = _airy_grid()
            v = x[mid]
            idx = np.trunc(v / _AIRY_STEP).astype(np.int64)
            coeffs = np.array([_AIRY_GRID[int(i)] for i in range(-20, 5)])       # row i + 20 for grid index i
            c = coeffs[idx + 20]
            t = v - idx * _AIRY_STEP
            acc = np.zeros_like(v)
            for n in range(_AIRY_TERMS - 1, -1, -1):
                acc = acc * t + c[:, n]
            out[mid] = acc
        right = (x > 2) & np.isfinite(x)
        if right.any():
            v = x[right]
            zeta = (2.0 / 3.0) * v * np.sqrt(v)
            out[right] = np.sqrt(v / 3.0) / math.pi * _scaled_k(1.0 / 3.0, zeta) * np.exp(-zeta)
        left = (x < -10) & np.isfinite(x)
        if left.any():
            z = -x[left]
            zeta = (2.0 / 3.0) * z * np.sqrt(z)
            u = 1.0
            p, q = np.ones_like(z), np.zeros_like(z)
            power = np.ones_like(z)
            for k in range(1, 30):
                u = u * (6 * k - 5) * (6 * k - 3) * (6 * k - 1) / ((2 * k - 1) * 216.0 * k)
                power = power / zeta
                sign = -1.0 if (k // 2) % 2 else 1.0
                if k % 2:
                    q = q + sign * u * power
                else:
                    p = p + sign * u * power
            phase = zeta + math.pi / 4
            out[left] = (np.sin(phase) * p - np.cos(phase) * q) / (math.sqrt(math.pi) * np.sqrt(np.sqrt(z)))
    return out


# ===== the regularised incomplete gamma functions ==================================================================
#
# Note [Incomplete gamma]: P(a, x) = gamma(a, x) / Gamma(a), Q = 1 - P. For x < a + 1 the series
# P = x^a e^-x / Gamma(a + 1) sum_n x^n / ((a+1)...(a+n)) (positive terms); otherwise Legendre's continued fraction
# Q = x^a e^-x / Gamma(a) * 1 / (x + 1 - a - 1 (1 - a) / (x + 3 - a - 2 (2 - a) / (x + 5 - a - ...))), evaluated by
# the modified Lentz method. For a < 1 in the series' range (x < 2), Q comes from gamma(a, x) = sum_k (-1)^k
# x^(a+k) / (k! (a+k)) directly, Q = -expm1(a ln x - lgamma(a+1)) - x^a / Gamma(a+1) a sum_k>=1 (-1)^k x^k /
# (k! (a+k)), which keeps Q's digits where P is near 1. Each converges in O(sqrt(a)) terms where x ~ a; past 20,000 terms (a above ~5e6 near
# x = a) the result is NaN rather than an unconverged value. torch's special values: NaN for a < 0, x < 0, and at
# a = x = 0 and at a = x = inf; P = 1 for a = 0 < x and at x = inf; P = 0 at x = 0 and at a = inf (NaN a and x
# included, in that order).

_MAX_TERMS = 20000


_ZETA_K = [float(zeta(float(k), 1.0)) for k in range(2, 40)]        # zeta(2), zeta(3), ...


def _lgamma1p(a):
    """lgamma(1 + a) without rounding 1 + a: for a < 0.2 the series -gamma a + sum_k>=2 (-1)^k zeta(k) a^k / k."""
    out = lgamma(a + 1.0)
    small = np.abs(a) < 0.2
    if small.any():
        v = a[small]
        total = np.zeros_like(v)
        for k in range(len(_ZETA_K) + 1, 1, -1):           # Horner in a, from the highest power down
            total = (total + (1.0 if k % 2 == 0 else -1.0) * _ZETA_K[k - 2] / k) * v
        out[small] = (total - _EULER) * v
    return out


def _gamma_pq(a, x):
    """(P, Q) of broadcast float64 arrays."""
    a, x = np.broadcast_arrays(np.asarray(a, dtype=np.float64), np.asarray(x, dtype=np.float64))
    p = np.full(a.shape, np.nan)
    q = np.full(a.shape, np.nan)
    with np.errstate(all="ignore"):
        ok = (a > 0) & (x > 0) & np.isfinite(a) & np.isfinite(x)
        series = ok & (x < a + 1)
        if series.any():
            av, xv = a[series], x[series]
            term = np.ones_like(av)
            total = np.ones_like(av)
            done = np.zeros(av.shape, dtype=bool)
            n = 0
            while not done.all() and n < _MAX_TERMS:
                n += 1
                term = np.where(done, term, term * xv / (av + n))
                total = np.where(done, total, total + term)
                done |= term <= 1e-17 * total
            log_prefactor = av * np.log(xv) - xv - lgamma(av + 1.0)
            pv = np.where(done, np.exp(log_prefactor) * total, np.nan)
            p[series], q[series] = pv, 1.0 - pv
        small = series & (a < 1)        # x < 2 here; Q is small where P is near 1: Note [Incomplete gamma]
        if small.any():
            av, xv = a[small], x[small]
            term, total = np.ones_like(av), np.zeros_like(av)
            for k in range(1, 45):
                term = term * -xv / k
                total = total + term / (av + k)
            log_head = av * np.log(xv) - _lgamma1p(av)
            q[small] = -np.expm1(log_head) - np.exp(log_head) * av * total
        frac = ok & ~(x < a + 1)
        if frac.any():
            av, xv = a[frac], x[frac]
            tiny = 1e-300
            b = xv + 1.0 - av
            c = np.full(av.shape, 1.0 / tiny)
            d = 1.0 / b
            h = d.copy()
            done = np.zeros(av.shape, dtype=bool)
            n = 0
            while not done.all() and n < _MAX_TERMS:
                n += 1
                an = -n * (n - av)
                b = b + 2.0
                d = an * d + b
                d = np.where(np.abs(d) < tiny, tiny, d)
                c = b + an / c
                c = np.where(np.abs(c) < tiny, tiny, c)
                d = 1.0 / d
                delta = d * c
                h = np.where(done, h, h * delta)
                done |= np.abs(delta - 1.0) <= 1e-16
            log_prefactor = av * np.log(xv) - xv - lgamma(av)
            qv = np.where(done, np.exp(log_prefactor) * h, np.nan)
            q[frac], p[frac] = qv, 1.0 - qv
        # the special values, in torch's order of precedence (the first that applies wins)
        cases = [(a < 0) | (x < 0), (a == 0) & (x > 0), a == 0, x == 0, np.isinf(a) & np.isinf(x), np.isinf(a),
                 np.isinf(x)]
        p_values = [np.nan, 1.0, np.nan, 0.0, np.nan, 0.0, 1.0]
        p = np.select(cases, p_values, p)
        q = np.select(cases, [v if v != v else 1.0 - v for v in p_values], q)
    return p, q


def gammainc(a, x):
    return _gamma_pq(a, x)[0]


def gammaincc(a, x):
    return _gamma_pq(a, x)[1]


# ===== orthogonal polynomials ======================================================================================
#
# Note [Orthogonal polynomials]: each is its three-term recurrence from (p_0, p_1), with torch's special cases
# first: n < 0 gives 0 (n is truncated to an integer; NaN and +-inf count as negative, as torch's conversion makes
# them); at the ends of the interval the closed values; for |y| < 1 and n past a small threshold the trigonometric
# forms (y = cos theta: T_n = cos n theta, U_n = sin (n+1) theta / sin theta, V_n = cos (n+1/2) theta / cos
# theta/2, W_n = sin (n+1/2) theta / sin theta/2). The recurrence runs on every element at once, for at most
# 10,000 steps (ending early once every unfinished value is NaN, which the recurrence keeps): an element that needs
# more and is still finite raises (torch would loop n times).

_MAX_STEPS = 10000


def _degree(n):
    n = np.asarray(n, dtype=np.float64)
    with np.errstate(all="ignore"):
        ok = np.isfinite(n) & (np.abs(n) < 2.0 ** 63)
        return np.where(ok, np.trunc(np.where(ok, n, -1)), -1.0)


def _recurrence(op, x, n, first, step):
    """p_n(x) for n >= 2 where `needed`: p_0 = 1, p_1 = first(x), p_(j+1) = step(j, x, p_(j-1), p_j)."""
    p, q = np.ones_like(x), first(x)
    top = int(n.max()) if n.size else 0
    if top > _MAX_STEPS + 1:
        steps = _MAX_STEPS + 1
    else:
        steps = top
    for j in range(1, steps):
        active = n > j
        if not active.any():
            break
        if j % 64 == 0 and np.isnan(q[active]).all():      # NaN stays NaN: the rest changes nothing
            break
        r = step(j, x, p, q)
        p, q = np.where(active, q, p), np.where(active, r, q)
    unfinished = (n > steps) & np.isfinite(q)
    if unfinished.any():
        raise RuntimeError(f"{op}: degree {int(n[unfinished].max())} needs more than {_MAX_STEPS} steps of the "
                           "recurrence at these points; dyngrad stops there.")
    return q


def _polynomial(op, x, n, first, step, special):
    """The shared frame: broadcast; `special(x, n)` gives (mask, values) of the elements its cases decide; the rest
    by the recurrence (n == 0: 1, n == 1: first(x)); n < 0 gives 0."""
    x = np.asarray(x)
    x = x if x.dtype in (np.float32, np.float64) else x.astype(np.float64)
    x, n = np.broadcast_arrays(x, _degree(n))
    x, n = x.copy(), n.copy()
    with np.errstate(all="ignore"):
        decided, values = special(x, n)
        out = np.where(decided, values, 1.0).astype(x.dtype)
        need = ~decided & (n >= 1)
        if need.any():
            out[need] = _recurrence(op, x[need], n[need], first, step)
        return np.where(n < 0, 0.0, out).astype(x.dtype)


def chebyshev(kind, shifted):
    """The Chebyshev polynomial of the given kind ('t', 'u', 'v', 'w'), shifted (argument 2x - 1) or not."""
    first = {"t": lambda y: y, "u": lambda y: 2 * y, "v": lambda y: 2 * y - 1, "w": lambda y: 2 * y + 1}[kind]
    threshold = {"t": 6, "u": 8, "v": 8, "w": 8}[kind] if not shifted else {"t": 6, "u": 6, "v": 6, "w": 4}[kind]

    def kernel(x, n, op):
        y_of = (lambda x: (x + x) - 1.0) if shifted else (lambda x: x)

        def special(x, n):
            y = y_of(x)
            theta = np.arccos(np.clip(y, -1, 1))
            trig = (n > threshold) & (np.abs(y) < 1)
            even = np.fmod(n, 2) == 0
            if kind == "t":
                value = np.cos(n * theta)
            elif kind == "u":
                s = np.sin(theta)
                value = np.where(s != 0, np.sin((n + 1) * theta) / np.where(s != 0, s, 1),
                                 (n + 1) * np.cos((n + 1) * theta) / y)
            elif kind == "v":
                value = np.where(np.sin(theta / 2) != 1, np.cos((n + 0.5) * theta) / np.cos(theta / 2),
                                 np.where(even, 2 * n + 1, -(2 * n + 1)))
            else:
                alt = np.where(even, 1.0, -1.0)
                value = np.where(np.cos(theta / 2) != 1, np.sin((n + 0.5) * theta) / np.sin(theta / 2),
                                 alt if shifted else np.where(y > 0, 2 * n + 1, alt))
            # the ends of the interval: y = 1 and y = -1 (x = 1 and x = 0 when shifted)
            at_one = (x == 1) if shifted else (y == 1)
            at_minus_one = (x == 0) if shifted else (y == -1)
            ends_one = {"t": 1.0, "u": n + 1, "v": 1.0, "w": 2 * n + 1}[kind]
            ends_minus = {"t": np.where(even, 1.0, -1.0), "u": np.where(even, n + 1, -(n + 1)),
                          "v": np.where(even, 2 * n + 1, -(2 * n + 1)), "w": np.where(even, 1.0, -1.0)}[kind]
            value = np.where(at_minus_one, ends_minus, np.where(at_one, ends_one, value))
            return trig | at_one | at_minus_one, value

        return _polynomial(op, x, n, lambda x: first(y_of(x)), lambda j, x, p, q: (2 * y_of(x)) * q - p, special)
    return kernel


def _no_special(x, n):
    return np.zeros(x.shape, dtype=bool), x


def hermite_h(x, n, op):
    return _polynomial(op, x, n, lambda x: x + x, lambda j, x, p, q: (x + x) * q - (2 * j) * p, _no_special)


def hermite_he(x, n, op):
    return _polynomial(op, x, n, lambda x: x, lambda j, x, p, q: x * q - j * p, _no_special)


def laguerre(x, n, op):
    def special(x, n):
        return x == 0, np.ones_like(x)
    return _polynomial(op, x, n, lambda x: 1.0 - x, lambda j, x, p, q: ((2 * j + (1.0 - x)) * q - j * p) / (j + 1),
                       special)


def legendre(x, n, op):
    def special(x, n):
        even = np.fmod(n, 2) == 0
        return np.abs(x) == 1, np.where((x == 1) | even, 1.0, -1.0)
    return _polynomial(op, x, n, lambda x: x, lambda j, x, p, q: ((2 * j + 1) * x * q - j * p) / (j + 1), special)


# ----- nextafter on the half types' grids ---------------------------------------------------------------------------

def nextafter(x, y, dtype_name):
    """The next value after x towards y on the grid of `dtype_name` (x and y hold its values, the half types as
    float32): numpy's own for float16 and the wider floats; for bfloat16 (the upper half of a float32) one step of
    2**16 in the float32 bit pattern, from 0 the smallest subnormal (2**-133) with the direction's sign."""
    if dtype_name == "float16":
        return np.nextafter(x.astype(np.float16), y.astype(np.float16)).astype(np.float32)
    if dtype_name != "bfloat16":
        return np.nextafter(x, y)
    x, y = np.broadcast_arrays(np.asarray(x, np.float32), np.asarray(y, np.float32))
    bits = x.view(np.uint32).astype(np.int64)
    away = (y > x) == (x > 0)                       # towards larger magnitude
    stepped = (bits + np.where(away, 1, -1) * 2 ** 16).astype(np.uint32).view(np.float32)
    tiny = np.where(y > x, np.float32(2.0 ** -133), np.float32(-2.0 ** -133))
    out = np.where(x == 0, tiny, stepped)
    out = np.where(x == y, y, out)
    return np.where(np.isnan(x) | np.isnan(y), np.float32(np.nan), out).astype(np.float32)
