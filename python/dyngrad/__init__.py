"""dyngrad: a define-by-run autograd engine with a C++ core.

    import dyngrad as dg
    x = dg.tensor([1.0, 2.0], requires_grad=True)
    y = (x * x).sum()          # the graph is recorded as this line runs
    y.backward()               # and walked, iteratively, by the C++ engine
    x.grad                     # tensor([2., 4.])

The same script runs on the pure-Python reference engine with `import dyngrad.reference as dg`.
"""
import gc as _gc

from . import _C
from ._C import (  # noqa: F401  the C++ Tensor, dtypes and ops
    Tensor, dtype, float32, float64, int64, bool,
    from_numpy, zeros, ones, empty, full, arange, linspace, eye, rand, randn, randint, randperm,
    zeros_like, ones_like, empty_like, full_like, rand_like, randn_like, manual_seed, initial_seed,
    add, sub, mul, div, true_divide, pow, neg, negative, matmul, mm, bmm, maximum, minimum, where, clamp, clip,
    exp, log, sqrt, rsqrt, abs, sin, cos, tanh, sigmoid, relu, sign, erf, square, leaky_relu, gelu, softplus,
    eq, ne, lt, le, gt, ge, logical_and, logical_or, logical_xor, logical_not, isnan, isfinite,
    sum, mean, var, std, max, min, amax, amin, argmax, argmin, logsumexp,
    reshape, flatten, transpose, swapaxes, t, permute, squeeze, unsqueeze, broadcast_to, cat, concat, stack,
    split, chunk, unbind, narrow, select, gather, index_select, take, masked_fill,
    softmax, log_softmax, cross_entropy, nll_loss, mse_loss, binary_cross_entropy_with_logits, linear, embedding,
    dropout, one_hot, conv2d, max_pool2d, avg_pool2d, layer_norm,
    is_grad_enabled,
)
from . import _tensor_py
from ._tensor_py import Size
from ._blas import load_blas as _load_blas

_C._register_helpers({
    "Size": Size,
    "return_max": _tensor_py.return_max,
    "return_min": _tensor_py.return_min,
    "RemovableHandle": _tensor_py.RemovableHandle,
    "index_positions": _tensor_py.index_positions,
    "tensor_from_data": _tensor_py.tensor_from_data,
})
_tensor_py.install(Tensor)
_load_blas(_C)


def _collect_cycles_through_cpp(phase, info):
    """Python's gc cannot see references held by C++ objects; when it collects its oldest generation (as
    gc.collect() does), the C++ collector frees the cycles that pass through them (csrc/dyngrad/cycles.h)."""
    if phase == "start" and info["generation"] == 2:
        _C._collect_cycles()


_gc.callbacks.append(_collect_cycles_through_cpp)

float = float32  # noqa: A001  torch.float / torch.double / torch.long aliases
double = float64
long = int64

__version__ = "0.1.0"


def tensor(data, dtype=None, requires_grad=False, device=None):
    """A new tensor holding a copy of `data` (nested lists, numbers, numpy arrays or tensors)."""
    if device not in (None, "cpu"):
        raise RuntimeError(f"dyngrad runs on the CPU only; got device '{device}'.")
    return _tensor_py.tensor_from_data(data, dtype=dtype, requires_grad=requires_grad)


def as_tensor(data, dtype=None):
    """A tensor sharing memory with a numpy array when possible, else a copy."""
    import numpy as _np
    if isinstance(data, Tensor):
        return data if dtype is None else data.to(dtype)
    if isinstance(data, _np.ndarray) and (dtype is None or _np.dtype(dtype.name if isinstance(dtype, _C.dtype) else dtype) == data.dtype):
        try:
            return from_numpy(data)
        except TypeError:
            pass
    return tensor(data, dtype=dtype)


def get_default_dtype():
    return float32


def seed():
    """Seeds the generator from the operating system's entropy and returns the seed (torch.seed)."""
    import os as _os
    s = int.from_bytes(_os.urandom(8), "little") % (2 ** 63)
    manual_seed(s)
    return s


def normal(mean, std, size, dtype=None):
    """Samples of N(mean, std**2) of the given size (torch.normal with number arguments)."""
    return randn(*size, dtype=dtype) * std + mean if isinstance(size, (tuple, list)) else randn(size, dtype=dtype) * std + mean


def bernoulli(p):
    """1 with probability p (elementwise), else 0; no gradient."""
    if not isinstance(p, Tensor):
        raise TypeError(f"bernoulli: expected a Tensor of probabilities, got {type(p).__name__}.")
    with no_grad():
        probs = p if p.is_floating_point() else p.float()
        return (rand_like(probs) < probs).to(probs.dtype)


def is_tensor(obj):
    return isinstance(obj, Tensor)


def numel(t):
    if not isinstance(t, Tensor):
        raise TypeError(f"numel: expected a Tensor, got {type(t).__name__}.")
    return t.numel()


from .autograd.grad_mode import no_grad, enable_grad, set_grad_enabled, inference_mode  # noqa: E402
from . import autograd  # noqa: E402


def _dtype_from_name(name):
    return globals()[name] if name != "bool" else bool


def __getattr__(name):
    # nn, optim, utils, viz, distributed and save/load are imported on first use (plain Python shared with the
    # reference engine)
    import importlib
    if name in ("nn", "optim", "utils", "viz", "bench", "distributed"):
        return importlib.import_module(f".{name}", __name__)
    if name in ("save", "load"):
        return getattr(importlib.import_module(".serialization", __name__), name)
    raise AttributeError(f"module 'dyngrad' has no attribute '{name}'")
