"""Reference engine: the discrete Fourier transform over complex numbers stored as real tensors with a trailing dim
of 2, the twin of csrc/dyngrad/kernels/fft.cpp (same names, arguments, checks and messages). The kernel is
numpy.fft (pocketfft), in float64, rounded once into the input's dtype. No autograd, as in C++."""
import numpy as np

from .tensor import make_tensor, wrap_dim

_NORMS = ("backward", "ortho", "forward")


def _norm(norm, op):
    if norm not in _NORMS:
        raise ValueError(f"{op}: norm must be 'backward', 'ortho' or 'forward', got '{norm}'.")
    return norm


def _dims(dims, ndim, op):
    if len(dims) == 0:
        raise ValueError(f"{op}: dims must name at least one dim.")
    out = []
    for d in dims:
        w = wrap_dim(d, ndim, op)
        if w in out:
            raise ValueError(f"{op}: dims must be distinct; dim {w} appears twice.")
        out.append(w)
    return out


def _check_float(x, op, what):
    if x.dtype.name not in ("float32", "float64"):
        raise TypeError(f"{op}: x must be float32 or float64{what}, got {x.dtype.name}.")


def _complex_of(x, op):
    _check_float(x, op, " (a complex tensor as its real view)")
    if x.ndim < 1 or x.shape[-1] != 2:
        shape = "(" + ", ".join(str(s) for s in x.shape) + ("," if x.ndim == 1 else "") + ")"
        raise ValueError(f"{op}: x must have a trailing dim of size 2 (the real and imaginary parts), got shape "
                         f"{shape}.")
    a = x._data.astype(np.float64)
    return a[..., 0] + 1j * a[..., 1]


def _check_points(shape, dims, op):
    for d in dims:
        if shape[d] < 1:
            raise ValueError(f"{op}: invalid number of data points ({shape[d]}) along dim {d}; a transform needs "
                             f"at least 1.")


def _as_real(z, dtype):
    return make_tensor(np.ascontiguousarray(np.stack([z.real, z.imag], -1)).astype(dtype))


def _fft_c2c(x, dims, forward, norm):
    op = "_fft_c2c"
    z = _complex_of(x, op)
    d = _dims(dims, z.ndim, op)
    _check_points(z.shape, d, op)
    fn = np.fft.fftn if forward else np.fft.ifftn
    return _as_real(fn(z, axes=d, norm=_norm(norm, op)), x._data.dtype)


def _fft_r2c(x, dims, forward, norm, onesided):
    op = "_fft_r2c"
    _check_float(x, op, "")
    d = _dims(dims, x.ndim, op)
    _check_points(x.shape, d, op)
    a = x._data.astype(np.float64)
    norm = _norm(norm, op)
    # the inverse transform of a real signal is the conjugate of its forward transform, scaled the other way
    scale_as = norm if forward else {"backward": "forward", "forward": "backward", "ortho": "ortho"}[norm]
    z = np.fft.rfftn(a, axes=d, norm=scale_as) if onesided else np.fft.fftn(a, axes=d, norm=scale_as)
    return _as_real(z if forward else np.conj(z), x._data.dtype)


def _fft_c2r(x, dims, forward, norm, last_dim_size):
    op = "_fft_c2r"
    z = _complex_of(x, op)
    d = _dims(dims, z.ndim, op)
    if last_dim_size < 1:
        raise ValueError(f"{op}: invalid number of data points ({last_dim_size}); last_dim_size must be at least 1.")
    half = last_dim_size // 2 + 1
    if z.shape[d[-1]] != half:
        raise ValueError(f"{op}: x has {z.shape[d[-1]]} terms along dim {d[-1]}, but a real signal of "
                         f"{last_dim_size} points has {half} (last_dim_size // 2 + 1).")
    _check_points(z.shape, d[:-1], op)
    norm = _norm(norm, op)
    s = [z.shape[k] for k in d[:-1]] + [last_dim_size]
    if forward:   # the forward transform of a Hermitian signal: the inverse transform of its conjugate
        z = np.conj(z)
        norm = {"backward": "forward", "forward": "backward", "ortho": "ortho"}[norm]
    return make_tensor(np.ascontiguousarray(np.fft.irfftn(z, s=s, axes=d, norm=norm)).astype(x._data.dtype))
