"""Reference engine: array kernels, numpy one-liners. Mirrors csrc/dyngrad/kernels/*.cpp.

Kernels take and return numpy arrays and know nothing about autograd. torch returns nan/inf for log(-1) or 1/0
silently, so numpy's floating-point warnings are switched off: by `quiet` in the kernels that call numpy functions
written in Python (np.sum, np.mean, ...), by a warnings filter for the kernels that call ufuncs directly (add, mul,
sin, ...), which saves `quiet`'s per-call cost (Note [numpy's floating-point warnings] in __init__.py).
"""
import math

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view


def quiet(fn):
    """Run a kernel with numpy's floating-point warnings off (torch never warns on nan/inf)."""
    def run(*args, **kwargs):
        with np.errstate(all="ignore"):
            return fn(*args, **kwargs)
    run.__name__ = fn.__name__
    run.__doc__ = fn.__doc__
    return run


# ----- elementwise (kernels/elementwise.cpp) ----------------------------------------------------------------
add = (lambda a, b: np.add(a, b))
sub = (lambda a, b: np.subtract(a, b))
mul = (lambda a, b: np.multiply(a, b))
div = quiet(lambda a, b: np.true_divide(a, b))
neg = (lambda a: np.negative(a) if a.dtype != np.bool_ else ~a)
pow = quiet(lambda a, b: np.power(a, b))


def int_pow(a, b):
    """Integer a ** b as elementwise.cpp's k_int_pow: wrapping, and for b < 0 torch's 1, +-1 for a = -1, else 0."""
    a, b = np.broadcast_arrays(a, b)
    out = np.power(a, np.where(b < 0, 0, b).astype(b.dtype))
    odd = (b % 2) != 0
    negative = np.where(a == 1, 1, np.where(a == -1, np.where(odd, -1, 1), 0)).astype(out.dtype)
    return np.where(b < 0, negative, out)
maximum = (lambda a, b: np.maximum(a, b))
minimum = (lambda a, b: np.minimum(a, b))
atan2 = (lambda a, b: np.arctan2(a, b))


@quiet
def fmod(a, b):
    """C's fmod, a - trunc(a / b) b; an integer divisor 0 or -1 gives 0 (Note [Remainders] in
    kernels/elementwise.cpp: the ops refuse 0 first, and -1 avoids INT64_MIN's overflow)."""
    if a.dtype.kind == "f":
        return np.fmod(a, b)
    safe = np.where((b == 0) | (b == -1), 1, b).astype(b.dtype)
    return np.where((b == 0) | (b == -1), 0, np.fmod(a, safe)).astype(np.result_type(a, b))


def remainder(a, b):
    """a - floor(a / b) b: fmod moved into the divisor's sign, as torch's kernel (a zero keeps fmod's sign)."""
    r = fmod(a, b)
    return np.where((r != 0) & ((b < 0) != (r < 0)), r + b, r).astype(r.dtype)


floor_divide = quiet(lambda a, b: np.floor_divide(a, b))       # the quotients of remainder's and fmod's
trunc_divide = quiet(lambda a, b: np.trunc(a / b))              # derivatives (floating point)
where = (lambda cond, a, b: np.where(cond, a, b))
clamp = (lambda a, lo, hi: np.clip(a, lo, hi))
exp = quiet(lambda a: np.exp(a))
log = quiet(lambda a: np.log(a))
sqrt = quiet(lambda a: np.sqrt(a))
rsqrt = quiet(lambda a: 1 / np.sqrt(a))
abs = (lambda a: np.abs(a))
sin = (lambda a: np.sin(a))
cos = (lambda a: np.cos(a))
tanh = (lambda a: np.tanh(a))
def sigmoid(a):
    """1 / (1 + exp(-a)) from exp(-|a|), which never overflows; (tanh(a/2) + 1) / 2 cancels to 0 below a = -17.
    Complex: 1 / (1 + exp(-a)), as elementwise.cpp."""
    if a.dtype.kind == "c":
        with np.errstate(all="ignore"):
            return 1 / (1 + np.exp(-a))
    e = np.exp(-np.abs(a))
    return np.where(a >= 0, 1 / (1 + e), e / (1 + e)).astype(a.dtype)
relu = (lambda a: np.maximum(a, 0))
def sign(a):
    """-1, 0 or 1; 0 for NaN and for -0.0 (as torch, and the C++ kernel); a bool tensor is its own sign."""
    if a.dtype == np.bool_:
        return a.copy()
    if a.dtype.kind == "c":           # torch.sgn: a / |a|, 0 at 0 (numpy before 2.0 took the real part's sign)
        m = np.abs(a)
        with np.errstate(all="ignore"):
            return np.where(m == 0, 0, a / np.where(m == 0, 1, m)).astype(a.dtype)
    if a.dtype.kind != "f":
        return np.sign(a)
    return (a > 0).astype(a.dtype) - (a < 0).astype(a.dtype)
_erf_scalar = np.frompyfunc(math.erf, 1, 1)
erf = quiet(lambda a: np.asarray(_erf_scalar(a)).astype(a.dtype) if a.size else a.copy())  # 0-d: frompyfunc gives a float
log1p = (lambda a: np.log1p(a))
expm1 = (lambda a: np.expm1(a))
log2 = (lambda a: np.log2(a))
log10 = (lambda a: np.log10(a))
tan = (lambda a: np.tan(a))
asin = (lambda a: np.arcsin(a))
acos = (lambda a: np.arccos(a))
atan = (lambda a: np.arctan(a))
sinh = (lambda a: np.sinh(a))
asinh = (lambda a: np.arcsinh(a))
atanh = (lambda a: np.arctanh(a))
cosh = (lambda a: np.cosh(a))
acosh = (lambda a: np.arccosh(a))
conj = (lambda a: np.conj(a))
leaky_relu = (lambda a, slope: np.where(a > 0, a, a * a.dtype.type(slope)))
gelu = quiet(lambda a: 0.5 * a * (1 + erf(a / math.sqrt(2.0))))
softplus = quiet(lambda a, beta, threshold: np.where(a * beta > threshold, a,
                                                     np.logaddexp(0, a * beta) / a.dtype.type(beta)))


@quiet
def cumsum(a, d, reverse):
    """The running sum along d (from the end if reverse) in a's dtype: float32 accumulated in float64 (as
    kernels/scan.cpp), int64 wrapping."""
    x = np.flip(a, d) if reverse else a
    out = np.add.accumulate(x.astype(np.float64) if a.dtype == np.float32 else x, axis=d).astype(a.dtype)
    return np.asarray(np.flip(out, d) if reverse else out, order="C")


def _along(fn, a, d, reverse):
    """fn(x) of a flipped along d when reverse, flipped back, C-contiguous."""
    x = np.flip(a, d) if reverse else a
    out = fn(x)
    return np.asarray(np.flip(out, d) if reverse else out, order="C")


@quiet
def cumprod(a, d, reverse):
    """The running product along d in a's dtype, accumulated as cumsum (float32 in float64, int64 wrapping)."""
    return _along(lambda x: np.multiply.accumulate(x.astype(np.float64) if a.dtype == np.float32 else x,
                                                   axis=d).astype(a.dtype), a, d, reverse)


@quiet
def logcumsumexp(a, d, reverse):
    """The running log(sum(exp)) along d (float32 in float64): numpy's logaddexp, as scan.cpp's."""
    return _along(lambda x: np.logaddexp.accumulate(x.astype(np.float64) if a.dtype == np.float32 else x,
                                                    axis=d).astype(a.dtype), a, d, reverse)


@quiet
def linear_recurrence(b, c, d, reverse):
    """y_k = b_k + c_k y_{k-1} along d (y_{k+1} if reverse), float32 in float64: a loop over d, as scan.cpp's."""
    wide = np.float64 if b.dtype == np.float32 else b.dtype
    bs, cs = np.moveaxis(b, d, 0).astype(wide), np.moveaxis(c, d, 0).astype(wide)
    y = np.empty_like(bs)
    acc = np.zeros(bs.shape[1:], dtype=wide)
    n = bs.shape[0]
    for k in (range(n - 1, -1, -1) if reverse else range(n)):
        acc = bs[k] + cs[k] * acc
        y[k] = acc
    return np.ascontiguousarray(np.moveaxis(y, 0, d).astype(b.dtype))


def cumulative_extremum_index(a, d, is_max):
    """The index along d of the running max (min): the latest position holding it (torch updates on >=, <=), a
    NaN once seen staying, its index the latest NaN's (scan.cpp's loop)."""
    if a.ndim == 0 or a.size == 0:
        return np.zeros(a.shape, dtype=np.int64)
    x = a.astype(np.int64) if a.dtype.kind in "bui" else a
    running = (np.maximum if is_max else np.minimum).accumulate(x, axis=d)
    holds = x == running
    if x.dtype.kind == "f":
        holds |= np.isnan(x)
    shape = [1] * x.ndim
    shape[d] = x.shape[d]
    positions = np.where(holds, np.arange(x.shape[d]).reshape(shape), -1)
    return np.ascontiguousarray(np.maximum.accumulate(positions, axis=d).astype(np.int64))


# the derivatives f' of unary ops (kernels/kernels.h's derivative helpers): x's dtype, computed as their formulas
tanh_grad_from_out = (lambda y: 1 - y * y)                                   # of tanh, from its output
sigmoid_grad_from_out = (lambda y: y * (1 - y))                              # of sigmoid, from its output
relu_mask = (lambda x: np.where(x <= 0, 0, 1).astype(x.dtype))               # of relu (NaN: 1, as torch)


@quiet
def gelu_grad(x):
    """Phi(x) + x phi(x), as derivatives.py wrote it."""
    t = x.dtype.type
    cdf = (erf(x * t(math.sqrt(0.5))) + t(1)) * t(0.5)
    pdf = np.exp(x * x * t(-0.5)) * t(0.3989422804014327)
    return (cdf + x * pdf).astype(x.dtype)


compare = {"eq": np.equal, "ne": np.not_equal, "lt": np.less, "le": np.less_equal, "gt": np.greater,
           "ge": np.greater_equal}

# ----- reductions (kernels/reduce.cpp) ----------------------------------------------------------------------
sum = quiet(lambda a, dims, keepdim: np.sum(a, axis=dims, keepdims=keepdim))
@quiet
def mean(a, dims, keepdim):
    """np.mean, but an empty slice gives nan without numpy's "Mean of empty slice" warning (torch is silent)."""
    if a.size:
        return np.mean(a, axis=dims, keepdims=keepdim)
    return np.full_like(np.sum(a, axis=dims, keepdims=keepdim), np.nan)
amax = quiet(lambda a, dims, keepdim: np.max(a, axis=dims, keepdims=keepdim))
amin = quiet(lambda a, dims, keepdim: np.min(a, axis=dims, keepdims=keepdim))


@quiet
def logsumexp(a, dims, keepdim):
    peak = np.max(a, axis=dims, keepdims=True, initial=-np.inf)  # (initial: an empty reduction gives -inf)
    peak = np.where(np.isfinite(peak), peak, 0)
    out = np.log(np.sum(np.exp(a - peak), axis=dims, keepdims=True)) + peak
    return out if keepdim else np.squeeze(out, axis=dims)


@quiet
def softmax(a, dim):
    if a.size == 0:
        return a.copy()
    shifted = np.exp(a - np.max(a, axis=dim, keepdims=True))
    return shifted / np.sum(shifted, axis=dim, keepdims=True)


@quiet
def log_softmax(a, dim):
    # (a - peak) - log(sum), as reduce.cpp: a - logsumexp(a) would round to logsumexp's precision (5e-4 at 1e4)
    if a.size == 0:
        return a.copy()
    # as reduce.cpp: only a row of -inf shifts by 0; a +inf peak makes inf - inf = NaN of every entry (torch's NaN)
    peak = np.max(a, axis=dim, keepdims=True)
    shifted = a - np.where(np.isneginf(peak), 0, peak)
    return shifted - np.log(np.sum(np.exp(shifted), axis=dim, keepdims=True))


# ----- matmul (kernels/matmul.cpp) --------------------------------------------------------------------------
matmul = np.matmul


# ----- convolution and pooling (kernels/conv.cpp) -----------------------------------------------------------
def im2col(x, kernel, stride, padding, pad_value=0.0, dilation=(1, 1)):
    """(N, C, H, W) -> (N, C*kh*kw, OH*OW): every receptive field as one column (rows ordered c, i, j); tap (i, j)
    of a window reads x[oh*sh - ph + i*dh, ow*sw - pw + j*dw]."""
    (kh, kw), (sh, sw), (ph, pw), (dh, dw) = kernel, stride, padding, dilation
    n, c = x.shape[:2]
    if ph or pw:
        x = np.pad(x, ((0, 0), (0, 0), (ph, ph), (pw, pw)), constant_values=pad_value)
    ekh, ekw = dh * (kh - 1) + 1, dw * (kw - 1) + 1            # the span of a dilated kernel
    windows = sliding_window_view(x, (ekh, ekw), axis=(2, 3))[:, :, ::sh, ::sw, ::dh, ::dw]  # (N,C,OH,OW,kh,kw)
    oh, ow = windows.shape[2:4]
    return windows.transpose(0, 1, 4, 5, 2, 3).reshape(n, c * kh * kw, oh * ow)


def max_pool2d_positions(x, kernel, stride, padding):
    """The flat position in x (N, C, H, W) of each window's maximum, (N, C, OH, OW) int64, as the C++ kernel
    (Note [Max pooling by positions] in csrc/dyngrad/kernels/conv.cpp): padded taps never win, the first maximum
    wins, and a NaN wins over everything before it (so the last NaN of a window)."""
    (kh, kw), (sh, sw), (ph, pw) = kernel, stride, padding
    n, c, h, w = x.shape
    oh, ow = (h + 2 * ph - kh) // sh + 1, (w + 2 * pw - kw) // sw + 1
    # only the kernel rows [i0, i1) and columns [j0, j1) that some window puts inside the image: the others are
    # padding in every window (a kernel may be far larger than the image, as in the C++ kernel)
    i0, i1 = max(0, ph - (oh - 1) * sh), min(kh, h + ph)
    j0, j1 = max(0, pw - (ow - 1) * sw), min(kw, w + pw)
    top, left = ph - i0, pw - j0
    bottom, right = max(0, (oh - 1) * sh - top + i1 - i0 - h), max(0, (ow - 1) * sw - left + j1 - j0 - w)
    padded = np.pad(x, ((0, 0), (0, 0), (top, bottom), (left, right)), constant_values=-np.inf)
    kh, kw = i1 - i0, j1 - j0
    windows = sliding_window_view(padded, (kh, kw), axis=(2, 3))[:, :, :(oh - 1) * sh + 1:sh, :(ow - 1) * sw + 1:sw]
    windows = windows.reshape(n, c, oh, ow, kh * kw)
    tap = np.argmax(windows, axis=-1)                          # first maximum (first NaN, if any)
    nan = np.isnan(windows)
    last_nan = kh * kw - 1 - np.argmax(nan[..., ::-1], axis=-1)
    tap = np.where(nan.any(axis=-1), last_nan, tap)
    h0 = (np.arange(oh) * sh - top)[:, None]
    w0 = (np.arange(ow) * sw - left)[None, :]
    row, col = h0 + tap // kw, w0 + tap % kw
    # a window of -inf only: its first real tap (argmax may have picked a padded one)
    padded = (row < 0) | (row >= h) | (col < 0) | (col >= w)
    row = np.where(padded, np.maximum(h0, 0), row)
    col = np.where(padded, np.maximum(w0, 0), col)
    plane = (np.arange(n)[:, None] * c + np.arange(c)[None, :]) * (h * w)
    return (plane[:, :, None, None] + row * w + col).astype(np.int64)


def col2im(cols, input_size, kernel, stride, padding, dilation=(1, 1)):
    """The adjoint of im2col: add every column back onto the (N, C, H, W) positions it was read from."""
    (kh, kw), (sh, sw), (ph, pw), (dh, dw) = kernel, stride, padding, dilation
    n, c, h, w = input_size
    oh, ow = (h + 2 * ph - dh * (kh - 1) - 1) // sh + 1, (w + 2 * pw - dw * (kw - 1) - 1) // sw + 1
    cols = cols.reshape(n, c, kh, kw, oh, ow)
    out = np.zeros((n, c, h + 2 * ph, w + 2 * pw), dtype=cols.dtype)
    for i in range(kh):
        for j in range(kw):
            out[:, :, i * dh:i * dh + sh * oh:sh, j * dw:j * dw + sw * ow:sw] += cols[:, :, i, j]
    return out[:, :, ph:ph + h, pw:pw + w]


# ---- attention (Note [Fused attention], Note [Dropout inside attention] in csrc/dyngrad/kernels/attention.cpp) ----

def attention_dropout_threshold(p):
    if p <= 0:
        return 0
    if p >= 1:
        return 1 << 24
    return int(math.floor(p * 16777216.0))


def attention_keep_scale(batch, lq, lk, p, seed, dtype):
    """The dropout factors of the fused kernel's mask, batch + (lq, lk): 1 / (1 - p) where the hash of (seed, flat
    index) keeps the weight, else 0 -- the same bits as the C++ kernel (splitmix64's finaliser over uint64)."""
    shape = tuple(batch) + (lq, lk)
    n = int(np.prod(shape, dtype=np.int64))
    u = np.uint64
    idx = np.arange(n, dtype=np.uint64)
    z = u(seed & 0xFFFFFFFFFFFFFFFF) + (idx + u(1)) * u(0x9E3779B97F4A7C15)
    z = (z ^ (z >> u(30))) * u(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> u(27))) * u(0x94D049BB133111EB)
    z = z ^ (z >> u(31))
    keep = (z >> u(40)) >= u(attention_dropout_threshold(p))
    scale = 1.0 / (1.0 - p) if p < 1 else 0.0
    return np.where(keep, scale, 0.0).astype(dtype).reshape(shape)


def attention_causal_bias(lq, lk, dtype):
    """(lq, lk): 0 where j <= i, else -inf."""
    return np.where(np.tril(np.ones((lq, lk), dtype=bool)), 0.0, -np.inf).astype(dtype)
