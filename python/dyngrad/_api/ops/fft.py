"""torch.fft with torch's signatures: the transforms (fft ... ihfftn), fftfreq, rfftfreq, fftshift and ifftshift;
and torch.stft / istft.

Note [FFT over the real layout]: the kernels (csrc/dyngrad/kernels/fft.cpp; numpy.fft in the reference engine)
take and return complex numbers as real tensors with a trailing dim of 2 (the layout torch's view_as_real gives):
_C._fft_c2c, _fft_r2c and _fft_c2r. Everything here is written over that layout: the arguments (n/s, dim, norm)
become a FftPlan by pure functions of the input's shape (plan_1d, plan_nd), the input is padded with zeros or
trimmed to the plan's sizes (resize), and the three transforms are autograd Functions whose backward is again a
transform, so gradients of any order work. The gradient of a real loss with respect to a complex number stored as
(re, im) is (dL/dre, dL/dim), which is torch's convention for complex gradients, so no conjugation is needed
at the boundary. Each transform's adjoint is "the other direction with the adjoint scale" (a forward transform
unscaled is the adjoint of the inverse unscaled; ADJOINT_NORM swaps the two one-sided scalings); the one-sided
halves weigh their terms that stand for two (1 <= k < (n+1)/2) by 2 in c2r's adjoint and by 1/2 in r2c's.

The boundary between the public tensors and the layout is two functions, to_layout (a complex tensor's
view_as_real; a real input of a complex-input transform gets a zero imaginary part stacked on, as torch promotes
it) and from_layout (view_as_complex of the kernel's pairs). Both are views, so the complex gradient reaches the
pairs as (dL/dre, dL/dim) and back, with no copy at either end. stft_layout and istft_layout likewise: stft returns
the complex spectrum (return_complex=True) or its pairs, istft takes the complex spectrum's view_as_real.
"""
import collections

import numpy as np

from ... import _C
from ..._user_frame import warn
from ...autograd.function import Function
from .. import bridge
from ..args import (check_factory_options, dtype_arg, finish, get_default_dtype, number, shape_str, tensor_arg,
                    to_int, type_name)
from ..device import check_device
from ..dtype_info import promote_types
from .padding import pad
from .shape import roll, unfold

NORMS = ("backward", "ortho", "forward")
# the norm whose scale, in the other direction, equals this norm's: the adjoint's
ADJOINT_NORM = {"backward": "forward", "forward": "backward", "ortho": "ortho"}

# name: (kernel, forward, shape style, input complex, result complex)
#   kernel c2c (complex -> complex), r2c (real -> one-sided complex), c2r (one-sided complex -> real)
#   style 1 (n, dim=-1), 2 (s, dim=(-2, -1)), n (s, dim=None)
TRANSFORMS = {
    "fft": ("c2c", True, "1", True, True), "ifft": ("c2c", False, "1", True, True),
    "fft2": ("c2c", True, "2", True, True), "ifft2": ("c2c", False, "2", True, True),
    "fftn": ("c2c", True, "n", True, True), "ifftn": ("c2c", False, "n", True, True),
    "rfft": ("r2c", True, "1", False, True), "irfft": ("c2r", False, "1", True, False),
    "rfft2": ("r2c", True, "2", False, True), "irfft2": ("c2r", False, "2", True, False),
    "rfftn": ("r2c", True, "n", False, True), "irfftn": ("c2r", False, "n", True, False),
    "hfft": ("c2r", True, "1", True, False), "ihfft": ("r2c", False, "1", False, True),
    "hfft2": ("c2r", True, "2", True, False), "ihfft2": ("r2c", False, "2", False, True),
    "hfftn": ("c2r", True, "n", True, False), "ihfftn": ("r2c", False, "n", False, True),
}
COMPLEX_RESULTS = tuple(name for name, spec in TRANSFORMS.items() if spec[4])


# ----- the arguments, as pure functions of the input's shape ------------------------------------------------------

# dims: the transformed dims (wrapped, in order); sizes: the signal's size along each (the n or s of torch: the
# input is padded or trimmed to it, except the last dim of c2r, whose input is trimmed to sizes[-1] // 2 + 1)
FftPlan = collections.namedtuple("FftPlan", "dims sizes")


def norm_arg(norm, op):
    if norm is None:
        return "backward"
    if not isinstance(norm, str) or norm not in NORMS:
        raise RuntimeError(f'fft.{op}: invalid normalization mode: "{norm}" (expected "backward", "ortho", '
                           f'"forward" or None).')
    return norm


def _dim(dim, ndim, op):
    d = to_int(dim, f"fft.{op}", "dim")
    if ndim == 0:
        raise IndexError(f"fft.{op}: dimension specified as {d} but the tensor has no dimensions.")
    if not -ndim <= d < ndim:
        raise IndexError(f"fft.{op}: dim {d} is out of range for a tensor of {ndim} dimensions (expected "
                         f"{-ndim}..{ndim - 1}).")
    return d + ndim if d < 0 else d


def _points(n, op):
    if n < 1:
        raise RuntimeError(f"fft.{op}: invalid number of data points ({n}) specified.")
    return n


def _default_size(shape, d, kernel, last):
    """The signal size along d when n/s does not say: the input's, or 2 (m - 1) for the half of a c2r."""
    return 2 * (shape[d] - 1) if kernel == "c2r" and last else shape[d]


def plan_1d(shape, n, dim, kernel, op):
    """FftPlan of fft(input, n, dim): one dim."""
    d = _dim(dim, len(shape), op)
    size = _default_size(shape, d, kernel, True) if n is None else to_int(n, f"fft.{op}", "n")
    return FftPlan((d,), (_points(size, op),))


def _int_list(o, op, name):
    if isinstance(o, (tuple, list)):
        return [to_int(v, f"fft.{op}", name) for v in o]
    return [to_int(o, f"fft.{op}", name)]


def plan_nd(shape, s, dim, kernel, op):
    """FftPlan of fftn(input, s, dim) (torch's rules): dim None -> the last len(s) dims, or every dim without s;
    an s entry of -1 keeps the input's size; dims unique; r2c and c2r transform at least one dim."""
    ndim = len(shape)
    dims = None
    if dim is not None:
        dims = [_dim(d, ndim, op) for d in _int_list(dim, op, "dim")]
        if len(set(dims)) != len(dims):
            raise RuntimeError(f"fft.{op}: FFT dims must be unique, got {shape_str(dims)}.")
    sizes = None if s is None else _int_list(s, op, "s")
    if sizes is not None:
        if dims is not None and len(sizes) != len(dims):
            raise RuntimeError(f"fft.{op}: when given, dim and s must have the same length; got s "
                               f"{shape_str(sizes)} and dim {shape_str(dims)}.")
        if dims is None:
            if len(sizes) > ndim:
                raise RuntimeError(f"fft.{op}: got s with {len(sizes)} values, but the input has only {ndim} "
                                   f"dimensions.")
            dims = list(range(ndim - len(sizes), ndim))
    if dims is None:
        dims = list(range(ndim))
    if not dims and kernel != "c2c":
        raise RuntimeError(f"fft.{op}: must transform at least one dim.")
    last = len(dims) - 1
    out = []
    for i, d in enumerate(dims):
        size = sizes[i] if sizes is not None and sizes[i] != -1 else _default_size(shape, d, kernel, i == last)
        out.append(_points(size, op))
    return FftPlan(tuple(dims), tuple(out))


def plan_for(name, shape, size_arg, dim_arg):
    """The FftPlan of the transform `name` called with n or s = size_arg and dim = dim_arg."""
    kernel, _, style, _, _ = TRANSFORMS[name]
    if style == "1":
        return plan_1d(shape, size_arg, -1 if dim_arg is None else dim_arg, kernel, name)
    if style == "2" and dim_arg is None:
        dim_arg = (-2, -1)
    return plan_nd(shape, size_arg, dim_arg, kernel, name)


def input_sizes(plan, kernel):
    """The sizes the input is padded or trimmed to along plan.dims."""
    if kernel == "c2r":
        return plan.sizes[:-1] + (plan.sizes[-1] // 2 + 1,)
    return plan.sizes


def result_shape(shape, plan, kernel):
    """The shape of the result (without the trailing 2 of a complex one)."""
    out = list(shape)
    for d, n in zip(plan.dims, plan.sizes):
        out[d] = n
    if kernel == "r2c":
        out[plan.dims[-1]] = plan.sizes[-1] // 2 + 1
    return tuple(out)


# ----- the transforms over the layout, differentiable -------------------------------------------------------------

def _zeros(shape, like):
    return _C.full(tuple(shape), 0.0, like.dtype)


def resize(x, dims, sizes):
    """x trimmed or padded with zeros at the end to `sizes` along `dims` (differentiable)."""
    for d, n in zip(dims, sizes):
        have = x.shape[d]
        if n < have:
            x = _C.slice(x, d, 0, n, 1)
        elif n > have:
            pad = list(x.shape)
            pad[d] = n - have
            x = _C.cat([x, _zeros(pad, x)], d)
    return x


def _pair_weights(n, d, ndim, value, like):
    """The weights along d (of n // 2 + 1 terms) of the one-sided terms standing for two: `value` for 1 <= k <
    (n + 1) / 2, 1 for the zero-frequency term and, for even n, the Nyquist term; shaped to broadcast over a
    tensor of ndim dims."""
    half = n // 2 + 1
    pairs = (n + 1) // 2 - 1
    parts = [_C.full((1,), 1.0, like.dtype)]
    if pairs > 0:
        parts.append(_C.full((pairs,), value, like.dtype))
    if half - 1 - pairs > 0:
        parts.append(_C.full((half - 1 - pairs,), 1.0, like.dtype))
    w = _C.cat(parts, 0) if len(parts) > 1 else parts[0]
    return _C.reshape(w, (half,) + (1,) * (ndim - d - 1))


class FftC2C(Function):
    """The complex transform over dims of x (..., 2)."""

    @staticmethod
    def forward(ctx, x, dims, forward, norm):
        ctx.args = (dims, forward, norm)
        return _C._fft_c2c(x, list(dims), forward, norm)

    # y = F x  ->  gx = F^H g: the other direction, the same scale
    @staticmethod
    def backward(ctx, g):
        dims, forward, norm = ctx.args
        return FftC2C.apply(g, dims, not forward, ADJOINT_NORM[norm]), None, None, None

    # linear: the tangent's transform
    @staticmethod
    def jvp(ctx, t, *_):
        return FftC2C.apply(t, *ctx.args)


class FftR2C(Function):
    """The transform of real x over dims: (..., 2), one-sided along the last of dims when onesided; the conjugate
    of the inverse transform for forward=False (ihfft)."""

    @staticmethod
    def forward(ctx, x, dims, forward, norm, onesided):
        ctx.args = (dims, forward, norm, onesided, x.shape[dims[-1]])
        return _C._fft_r2c(x, list(dims), forward, norm, onesided)

    # gx = Re(F^H g) over the whole spectrum; a one-sided g stands for its conjugate partners too, which c2r
    # adds back: c2r(g with the paired terms halved)
    @staticmethod
    def backward(ctx, g):
        dims, forward, norm, onesided, n = ctx.args
        if not onesided:
            return _C.select(FftC2C.apply(g, dims, not forward, ADJOINT_NORM[norm]), -1, 0), None, None, None, None
        g = _C.mul(g, _pair_weights(n, dims[-1], g.ndim, 0.5, g))
        return FftC2R.apply(g, dims, not forward, ADJOINT_NORM[norm], n), None, None, None, None

    @staticmethod
    def jvp(ctx, t, *_):
        dims, forward, norm, onesided, _n = ctx.args
        return FftR2C.apply(t, dims, forward, norm, onesided)


class FftC2R(Function):
    """The real signal of n points along the last of dims whose one-sided transform is x (..., 2); forward=True
    transforms a Hermitian signal forward (hfft)."""

    @staticmethod
    def forward(ctx, x, dims, forward, norm, n):
        ctx.args = (dims, forward, norm, n)
        return _C._fft_c2r(x, list(dims), forward, norm, n)

    # gx = w * r2c(g) (one-sided): each paired term enters the real signal twice (w = 2)
    @staticmethod
    def backward(ctx, g):
        dims, forward, norm, n = ctx.args
        gx = FftR2C.apply(g, dims, not forward, ADJOINT_NORM[norm], True)
        return _C.mul(gx, _pair_weights(n, dims[-1], gx.ndim, 2.0, gx)), None, None, None, None

    @staticmethod
    def jvp(ctx, t, *_):
        return FftC2R.apply(t, *ctx.args)


def transform_layout(name, x, size_arg=None, dim_arg=None, norm=None):
    """The transform `name` of TRANSFORMS over the layout: x is (..., 2) for a complex input, a real tensor for a
    real one; the result likewise. size_arg is torch's n (1-D) or s, dim_arg its dim (None: the default)."""
    kernel, forward, _, complex_input, _ = TRANSFORMS[name]
    norm = norm_arg(norm, name)
    shape = tuple(x.shape[:-1]) if complex_input else tuple(x.shape)
    plan = plan_for(name, shape, size_arg, dim_arg)
    if not plan.dims:                                # fftn over no dims: the input itself
        return _C.clone(x)
    x = resize(x, plan.dims, input_sizes(plan, kernel))
    if kernel == "c2c":
        return FftC2C.apply(x, plan.dims, forward, norm)
    if kernel == "r2c":
        return FftR2C.apply(x, plan.dims, forward, norm, True)
    return FftC2R.apply(x, plan.dims, forward, norm, plan.sizes[-1])


# ----- the boundary between the public tensors and the layout -----------------------------------------------------

def _floating(x, op):
    """torch's dtypes for the FFT: float32, float64, complex64 and complex128 as they are, integers and bool as
    the default float."""
    name = x.dtype.name
    if name in ("float32", "float64", "complex64", "complex128"):
        return x
    if x.dtype.is_floating_point:
        raise RuntimeError(f"fft.{op}: unsupported dtype {name} (the FFT takes float32, float64, complex64 and "
                           f"complex128, as torch's CPU FFT); convert the input with .float() first.")
    return _C.to_dtype(x, get_default_dtype())


def to_layout(input, name):
    """The public input as the kernels' layout: a complex tensor as its view_as_real (gradients flow through the
    view); a real input of a complex-input transform promoted as torch does (its imaginary part, zero, stacked
    on); a complex input of a real-input transform (rfft*, ihfft*) refused, as torch."""
    x = _floating(tensor_arg(input, f"fft.{name}"), name)
    if x.dtype.is_complex:
        if not TRANSFORMS[name][3]:
            raise RuntimeError(f"fft.{name}: expects a real input tensor, but got {x.dtype.name}.")
        return _C.view_as_real(x)
    if TRANSFORMS[name][3]:
        return _C.stack([x, _zeros(x.shape, x)], -1)
    return x


def from_layout(y, name=None):
    """The layout's result as the public result: a complex result (..., 2) as its view_as_complex (the kernels
    write contiguous pairs; a copy makes any other layout contiguous first)."""
    if name is None or TRANSFORMS[name][4]:
        if y.stride()[-1] != 1 or any(st % 2 for st in y.stride()[:-1]):
            y = _C.contiguous(y)
        return _C.view_as_complex(y)
    return y


def _public(name, input, size, dim, norm):
    return from_layout(transform_layout(name, to_layout(input, name), size, dim, norm), name)


def fft(input, n=None, dim=-1, norm=None):
    """The one-dimensional discrete Fourier transform (complex result)."""
    return _public("fft", input, n, dim, norm)


def ifft(input, n=None, dim=-1, norm=None):
    """The one-dimensional inverse discrete Fourier transform (complex result)."""
    return _public("ifft", input, n, dim, norm)


def fft2(input, s=None, dim=(-2, -1), norm=None):
    """The two-dimensional discrete Fourier transform (complex result)."""
    return _public("fft2", input, s, dim, norm)


def ifft2(input, s=None, dim=(-2, -1), norm=None):
    """The two-dimensional inverse discrete Fourier transform (complex result)."""
    return _public("ifft2", input, s, dim, norm)


def fftn(input, s=None, dim=None, norm=None):
    """The n-dimensional discrete Fourier transform (complex result)."""
    return _public("fftn", input, s, dim, norm)


def ifftn(input, s=None, dim=None, norm=None):
    """The n-dimensional inverse discrete Fourier transform (complex result)."""
    return _public("ifftn", input, s, dim, norm)


def rfft(input, n=None, dim=-1, norm=None):
    """The one-dimensional transform of a real signal: its n // 2 + 1 non-negative frequencies (complex result)."""
    return _public("rfft", input, n, dim, norm)


def irfft(input, n=None, dim=-1, norm=None):
    """The inverse of rfft: the real signal of n points (default 2 (m - 1)) whose one-sided transform is input."""
    return _public("irfft", input, n, dim, norm)


def rfft2(input, s=None, dim=(-2, -1), norm=None):
    """The two-dimensional transform of a real signal, one-sided along the last dim (complex result)."""
    return _public("rfft2", input, s, dim, norm)


def irfft2(input, s=None, dim=(-2, -1), norm=None):
    """The inverse of rfft2: a real signal."""
    return _public("irfft2", input, s, dim, norm)


def rfftn(input, s=None, dim=None, norm=None):
    """The n-dimensional transform of a real signal, one-sided along the last dim (complex result)."""
    return _public("rfftn", input, s, dim, norm)


def irfftn(input, s=None, dim=None, norm=None):
    """The inverse of rfftn: a real signal."""
    return _public("irfftn", input, s, dim, norm)


def hfft(input, n=None, dim=-1, norm=None):
    """The transform of a Hermitian signal given by its first half: a real result of n points (default 2 (m - 1))."""
    return _public("hfft", input, n, dim, norm)


def ihfft(input, n=None, dim=-1, norm=None):
    """The inverse of hfft: the first n // 2 + 1 terms of a real signal's inverse transform (complex result)."""
    return _public("ihfft", input, n, dim, norm)


def hfft2(input, s=None, dim=(-2, -1), norm=None):
    """The two-dimensional transform of a Hermitian signal given by its half along the last dim: a real result."""
    return _public("hfft2", input, s, dim, norm)


def ihfft2(input, s=None, dim=(-2, -1), norm=None):
    """The inverse of hfft2 (complex result)."""
    return _public("ihfft2", input, s, dim, norm)


def hfftn(input, s=None, dim=None, norm=None):
    """The n-dimensional transform of a Hermitian signal given by its half along the last dim: a real result."""
    return _public("hfftn", input, s, dim, norm)


def ihfftn(input, s=None, dim=None, norm=None):
    """The inverse of hfftn (complex result)."""
    return _public("ihfftn", input, s, dim, norm)


# ----- frequencies and shifts -------------------------------------------------------------------------------------

def _frequencies(op, n, d, dtype, layout, device, requires_grad, onesided):
    check_device(device, f"fft.{op}")
    check_factory_options(f"fft.{op}", layout)
    n = to_int(n, f"fft.{op}", "n")
    if n < 0:
        raise RuntimeError(f"fft.{op}: n must be non-negative, got {n}.")
    spacing = float(number(d, f"fft.{op}", "d"))
    dt = get_default_dtype() if dtype is None else dtype_arg(dtype, f"fft.{op}")
    if not dt.is_floating_point:
        raise RuntimeError(f"fft.{op}: requires a floating-point dtype, got {dt.name}.")
    k = np.arange(n // 2 + 1 if onesided else n, dtype=np.float64)
    if not onesided:
        k[(n + 1) // 2:] -= n
    with np.errstate(divide="ignore", invalid="ignore"):
        values = k / (n * spacing)        # rfftfreq(0) is [nan], as torch
    return finish(bridge.host_result(values, dt), requires_grad)


def fftfreq(n, d=1.0, *, dtype=None, layout=None, device=None, requires_grad=False):
    """The sample frequencies of an n-point transform with sample spacing d: [0, 1, ..., -2, -1] / (d n)."""
    return _frequencies("fftfreq", n, d, dtype, layout, device, requires_grad, False)


def rfftfreq(n, d=1.0, *, dtype=None, layout=None, device=None, requires_grad=False):
    """The sample frequencies of rfft's n // 2 + 1 terms: [0, 1, ..., n // 2] / (d n)."""
    return _frequencies("rfftfreq", n, d, dtype, layout, device, requires_grad, True)


def _shift(op, input, dim, inverse):
    a = tensor_arg(input, f"fft.{op}")
    if dim is None:
        dims = list(range(a.ndim))
    elif isinstance(dim, (tuple, list)):
        dims = [to_int(d, f"fft.{op}", "dim") for d in dim]
    else:
        dims = [to_int(dim, f"fft.{op}", "dim")]
    if not dims:                                    # a 0-d tensor, or dim=()
        return _C.clone(a)
    wrapped = [_dim(d, a.ndim, op) for d in dims]
    shifts = [(a.shape[d] + 1) // 2 if inverse else a.shape[d] // 2 for d in wrapped]
    return roll(a, shifts, wrapped)


def fftshift(input, dim=None):
    """input rolled by n // 2 along each of dim (every dim by default): the zero frequency to the middle."""
    return _shift("fftshift", input, dim, False)


def ifftshift(input, dim=None):
    """The inverse of fftshift: input rolled by (n + 1) // 2 along each of dim (every dim by default)."""
    return _shift("ifftshift", input, dim, True)


# ----- the short-time Fourier transform -----------------------------------------------------------------------------

def _window_pairs(window, n_fft, dtype):
    """A complex window as its parts (wr, wi), each (n_fft,) of the real dtype `dtype`, zero-padded to n_fft points
    (centred) as the real windows are."""
    wp = _C.transpose(_C.view_as_real(window), 0, 1)         # (2, win)
    if wp.dtype is not dtype:
        wp = _C.to_dtype(wp, dtype)
    win = wp.shape[1]
    if win < n_fft:
        left = (n_fft - win) // 2
        wp = pad(wp, (left, n_fft - win - left))
    return _C.select(wp, 0, 0), _C.select(wp, 0, 1)


def _pairs(re, im):
    return _C.cat([_C.unsqueeze(re, -1), _C.unsqueeze(im, -1)], -1)


def _times_pairs(z, wr, wi):
    """The complex product of pairs z (..., n, 2) with the complex w = wr + i wi (n,)."""
    re, im = _C.select(z, -1, 0), _C.select(z, -1, 1)
    return _pairs(_C.sub(_C.mul(re, wr), _C.mul(im, wi)), _C.add(_C.mul(re, wi), _C.mul(im, wr)))


def stft_layout(x, n_fft, hop_length=None, win_length=None, window=None, center=True, pad_mode="reflect",
                normalized=False, onesided=None, complex_input=False):
    """torch.stft over the layout: x is a real signal (L,) or batch (B, L), or with complex_input its pairs (L, 2)
    or (B, L, 2); the result is (B?, n_fft // 2 + 1 or n_fft, frames, 2). Frame t is x[t hop : t hop + n_fft] (after
    padding n_fft // 2 on both sides when center) times the window (win_length points, centred in n_fft; ones by
    default; a complex window needs complex_input), transformed over its n_fft points (scaled by n_fft^-1/2 when
    normalized)."""
    op = "stft"
    signal_ndim = x.ndim - (1 if complex_input else 0)
    if signal_ndim not in (1, 2):
        raise RuntimeError(f"{op}: expected a 1-D or 2-D signal, got {signal_ndim} dimensions "
                           f"(shape {shape_str(x.shape)}).")
    n_fft = to_int(n_fft, op, "n_fft")
    hop = n_fft // 4 if hop_length is None else to_int(hop_length, op, "hop_length")
    win = n_fft if win_length is None else to_int(win_length, op, "win_length")
    time_dim = signal_ndim - 1
    if window is not None:
        window = tensor_arg(window, op, "window")
        if window.ndim != 1 or window.shape[0] != win:
            raise RuntimeError(f"{op}: expected a 1-D window of win_length={win} points, got a window of shape "
                               f"{shape_str(window.shape)}.")
        if window.dtype.is_complex and not complex_input:
            raise RuntimeError(f"{op}: a complex window needs a complex input (stft promotes a real one).")
    if center:
        if not isinstance(pad_mode, str):
            raise TypeError(f"{op}: expected a string as pad_mode, got {type_name(pad_mode)}.")
        half = n_fft // 2
        if complex_input:       # pad each part: (..., L, 2) as channels (..., 2, L)
            x = _C.transpose(pad(_C.transpose(x, -1, -2), (half, half), pad_mode), -1, -2)
        elif x.ndim == 1:
            x = _C.squeeze(pad(_C.unsqueeze(x, 0), (half, half), pad_mode), [0])
        else:
            x = pad(x, (half, half), pad_mode)
    length = x.shape[time_dim]
    if not 0 < n_fft <= length:
        raise RuntimeError(f"{op}: expected 0 < n_fft <= {length} (the signal's length{', padded' if center else ''}),"
                           f" got n_fft={n_fft}.")
    if hop <= 0:
        raise RuntimeError(f"{op}: expected hop_length > 0, got hop_length={hop}.")
    if not 0 < win <= n_fft:
        raise RuntimeError(f"{op}: expected 0 < win_length <= n_fft={n_fft}, got win_length={win}.")
    if onesided is None:
        onesided = not complex_input
    if onesided and complex_input:
        raise RuntimeError(f"{op}: cannot have onesided output if window or input is complex (torch's rule; pass "
                           "onesided=False).")
    frames = unfold(x, time_dim, n_fft, hop)                 # (B?, frames, [2,] n_fft)
    if complex_input:
        frames = _C.transpose(frames, -1, -2)                # (B?, frames, n_fft, 2)
    if window is not None and window.dtype.is_complex:
        frames = _times_pairs(frames, *_window_pairs(window, n_fft, x.dtype))
    elif window is not None:
        w = _C.to_dtype(window, x.dtype) if window.dtype is not x.dtype else window
        if win < n_fft:
            left = (n_fft - win) // 2
            w = pad(w, (left, n_fft - win - left))
        frames = _C.mul(frames, _C.unsqueeze(w, -1) if complex_input else w)
    dims = (frames.ndim - (2 if complex_input else 1),)
    norm = "ortho" if normalized else "backward"
    if complex_input:
        spectrum = FftC2C.apply(frames, dims, True, norm)
    else:
        spectrum = FftR2C.apply(frames, dims, True, norm, bool(onesided))
    return _C.transpose(spectrum, -3, -2)                    # (B?, freqs, frames, 2)


def stft(input, n_fft, hop_length=None, win_length=None, window=None, center=True, pad_mode="reflect",
         normalized=False, onesided=None, return_complex=None, align_to_window=None):
    """The short-time Fourier transform of a signal (L,) or batch (B, L), real or complex, with a real or complex
    window: the frequencies x frames as a complex tensor (return_complex=True) or as its real pairs (..., 2)
    (return_complex=False), as torch's. The signal and the window promote as in a product (torch multiplies the
    frames by the window), so a complex window makes the transform complex, and two-sided, as a complex signal."""
    x = _floating(tensor_arg(input, "stft"), "stft")
    if window is not None:
        window = tensor_arg(window, "stft", "window")
        dt = promote_types(x.dtype, window.dtype)
        if dt is not x.dtype:
            x = _C.to_dtype(x, dt)
    complex_input = x.dtype.is_complex
    if return_complex is None:
        if not complex_input:
            raise RuntimeError("stft: requires the return_complex parameter be given for real inputs (torch's rule; "
                               "return_complex=True gives a complex tensor, False its real pairs).")
        return_complex = True
    if align_to_window is not None:
        raise NotImplementedError("stft: align_to_window is not supported.")
    if window is None:
        warn("stft: no window was given, so a rectangular one is used, which is known to cause spectral leakage; "
             "pass window=dyngrad.hann_window(n_fft) (or window=dyngrad.ones(n_fft) to keep the rectangle).")
    if complex_input:
        x = _C.view_as_real(x)
    spectrum = stft_layout(x, n_fft, hop_length, win_length, window, center, pad_mode, normalized, onesided,
                           complex_input)
    return from_layout(spectrum) if return_complex else spectrum


def istft_layout(x, n_fft, hop_length=None, win_length=None, window=None, center=True, normalized=False,
                 onesided=None, length=None, return_complex=False):
    """torch.istft over the layout: x is the spectrum (B?, freqs, frames, 2); the result is the real signal
    (B?, length) that stft_layout maps to x: each frame's inverse transform times the window, overlap-added every
    hop_length points and divided by the overlap-added squared window (torch's algorithm, including its check that
    this envelope does not vanish). With return_complex, the complex signal's pairs (B?, length, 2) from a two-sided
    spectrum by the complex inverse transform; the window may then be complex (its square w^2, not |w|^2, makes the
    envelope, as torch's)."""
    op = "istft"
    if x.ndim not in (3, 4) or x.shape[-1] != 2:
        raise RuntimeError(f"{op}: expected a spectrum of shape (freqs, frames, 2) or (batch, freqs, frames, 2), got "
                           f"shape {shape_str(x.shape)}.")
    n_fft = to_int(n_fft, op, "n_fft")
    hop = n_fft // 4 if hop_length is None else to_int(hop_length, op, "hop_length")
    win = n_fft if win_length is None else to_int(win_length, op, "win_length")
    batched = x.ndim == 4
    if not batched:
        x = _C.unsqueeze(x, 0)
    freqs, frames = x.shape[1], x.shape[2]
    if not 0 < hop <= win:
        raise RuntimeError(f"{op}: expected 0 < hop_length <= win_length, got hop_length={hop} and "
                           f"win_length={win}.")
    if not 0 < win <= n_fft:
        raise RuntimeError(f"{op}: expected 0 < win_length <= n_fft={n_fft}, got win_length={win}.")
    onesided = freqs != n_fft if onesided is None else bool(onesided)
    if freqs != (n_fft // 2 + 1 if onesided else n_fft):
        raise RuntimeError(f"{op}: expected {n_fft // 2 + 1 if onesided else n_fft} frequencies for n_fft={n_fft} "
                           f"({'one-sided' if onesided else 'two-sided'}), got {freqs}.")
    if frames < 1:
        raise RuntimeError(f"{op}: expected at least one frame, got {frames}.")
    if return_complex and onesided:
        raise RuntimeError(f"{op}: cannot have onesided output if window or input is complex (torch's rule: "
                           "return_complex=True needs a two-sided spectrum, onesided=False).")
    w = None if window is None else tensor_arg(window, op, "window")
    if w is not None and (w.ndim != 1 or w.shape[0] != win):
        raise RuntimeError(f"{op}: expected a 1-D window of win_length={win} points, got a window of shape "
                           f"{shape_str(w.shape)}.")
    if w is not None and w.dtype.is_complex:
        if not return_complex:
            raise RuntimeError(f"{op}: complex windows are incompatible with return_complex=False (torch's rule).")
        wr, wi = _window_pairs(w, n_fft, x.dtype)
        w = None
    else:
        w = _C.full((win,), 1.0, x.dtype) if w is None else (_C.to_dtype(w, x.dtype) if w.dtype is not x.dtype else w)
        if win < n_fft:
            left = (n_fft - win) // 2
            w = pad(w, (left, n_fft - win - left))
    spectra = _C.transpose(x, 1, 2)                          # (B, frames, freqs, 2)
    norm = "ortho" if normalized else "backward"
    if return_complex:
        signal = FftC2C.apply(spectra, (2,), False, norm)    # (B, frames, n_fft, 2)
    else:
        if not onesided:
            spectra = _C.slice(spectra, 2, 0, n_fft // 2 + 1, 1)
        signal = FftC2R.apply(spectra, (2,), False, norm, n_fft)   # (B, frames, n_fft)
    # overlap-add: frame t's point k lands at t hop + k (pairs: along dim 1 of (B, points, 2))
    total = n_fft + hop * (frames - 1)
    positions = bridge.copy((np.arange(frames)[:, None] * hop + np.arange(n_fft)[None, :]).reshape(-1), False)
    batch = signal.shape[0]
    pair = (2,) if return_complex else ()
    if w is None:
        windowed = _times_pairs(signal, wr, wi)
        squares = _pairs(_C.sub(_C.mul(wr, wr), _C.mul(wi, wi)), _scaled2(_C.mul(wr, wi)))     # w^2
    else:
        windowed = _C.mul(signal, _C.unsqueeze(w, -1) if return_complex else w)
        squares = _C.mul(w, w)
    y = _C.index_add(_C.reshape(windowed, (batch, frames * n_fft) + pair), 1, positions, (batch, total) + pair)
    square_pair = (2,) if w is None else ()
    squares = _C.expand(_C.reshape(squares, (1, 1, n_fft) + square_pair), (1, frames, n_fft) + square_pair)
    envelope = _C.index_add(_C.reshape(squares, (1, frames * n_fft) + square_pair), 1, positions,
                            (1, total) + square_pair)
    start = n_fft // 2 if center else 0
    end = start + length if length is not None else (total - n_fft // 2 if center else total)
    end = min(end, total)
    y, envelope = _C.slice(y, 1, start, end, 1), _C.slice(envelope, 1, start, end, 1)
    values = bridge.host_values(envelope.detach())
    magnitude = np.hypot(values[..., 0], values[..., 1]) if w is None else np.abs(values)
    smallest = float(magnitude.min()) if envelope.shape[1] else 1.0
    if smallest < 1e-11:
        raise RuntimeError(f"{op}: the window's overlap-add envelope is {smallest:.3g} somewhere (it must not vanish: "
                           f"the nonzero overlap-add condition); use a larger window or a smaller hop_length.")
    if w is None:                                            # complex division by the complex envelope
        er, ei = _C.select(envelope, -1, 0), _C.select(envelope, -1, 1)
        scale = _C.add(_C.mul(er, er), _C.mul(ei, ei))
        y = _times_pairs(y, _C.div(er, scale), _C.neg(_C.div(ei, scale)))
    else:
        y = _C.div(y, _C.unsqueeze(envelope, -1) if return_complex else envelope)
    if length is not None and y.shape[1] < length:
        y = _C.cat([y, _C.full((batch, length - y.shape[1]) + pair, 0.0, y.dtype)], 1)
    return y if batched else _C.squeeze(y, [0])


def _scaled2(x):
    return _C.add(x, x)



def istft(input, n_fft, hop_length=None, win_length=None, window=None, center=True, normalized=False,
          onesided=None, length=None, return_complex=False):
    """The inverse of stft: the signal (L,) or batch (B, L) whose short-time transform is the complex spectrum
    (freqs, frames) or (B, freqs, frames), as torch.istft: real, or with return_complex=True complex (from a
    two-sided spectrum; the window may then be complex). The spectrum and the window promote as in a product."""
    x = tensor_arg(input, "istft")
    if not x.dtype.is_complex:
        raise RuntimeError(f"istft: requires a complex-valued input tensor (got {x.dtype.name}); a spectrum held as "
                           f"real pairs (..., 2) is dyngrad.view_as_complex(spectrum).")
    if not isinstance(return_complex, (bool, int, np.bool_)) or isinstance(return_complex, float):
        raise TypeError(f"istft: expected a bool as return_complex, got {type(return_complex).__name__}.")
    if window is not None:
        window = tensor_arg(window, "istft", "window")
        dt = promote_types(x.dtype, window.dtype)
        if dt is not x.dtype:
            x = _C.to_dtype(x, dt)
    y = istft_layout(_C.view_as_real(x), n_fft, hop_length, win_length, window, center, normalized, onesided,
                     length, bool(return_complex))
    return from_layout(y) if return_complex else y
