"""Process-wide settings: the number of threads the engine's kernels (and its BLAS) use."""

from .. import _C
from .._user_frame import warn
from .dtype_info import set_default_dtype


def get_num_threads():
    """Threads used by the engine's large kernels and matrix products."""
    return _C.get_num_threads()


def set_num_threads(n):
    """Threads for the engine's large kernels and matrix products (1: run on the calling thread).

    On the C++ engine this also sets the BLAS's threads, as torch.set_num_threads does for PyTorch's: the BLAS is
    numpy's own OpenBLAS (one pool per process, shared with numpy: Note [One BLAS]), so numpy's products then use
    `n` threads too (at most one per core). dyngrad's own products run that BLAS on one thread per call and split
    large ones over its kernel threads (Note [Deterministic matmul]). The reference engine leaves numpy's BLAS as
    it is."""
    if isinstance(n, bool) or not isinstance(n, int):
        raise RuntimeError(f"set_num_threads expects an int, but got {type(n).__name__}")
    if n < 1:
        raise RuntimeError(f"set_num_threads expects a positive integer, got {n}")
    _C.set_num_threads(n)


def get_num_interop_threads():
    """Threads for running independent ops side by side: dyngrad runs ops one after another on the calling
    thread, so this reports the value last set (default: the number of CPUs, as torch), as a knob torch scripts
    set."""
    import os
    return _interop_threads if _interop_threads is not None else (os.cpu_count() or 1)


_interop_threads = None


def set_num_interop_threads(n):
    global _interop_threads
    if isinstance(n, bool) or not isinstance(n, int):
        raise TypeError(f"set_num_interop_threads expects an int, but got {type(n).__name__}")
    if n < 1:
        raise RuntimeError(f"set_num_interop_threads expects a positive integer, got {n}")
    _interop_threads = n


# ----- determinism -------------------------------------------------------------------------------------------------
# dyngrad's kernels are deterministic: the same inputs give the same bits on every run at a given thread count
# (reductions split work at fixed points, gradients accumulate in graph order; tests/test_determinism.py). The
# flags below are kept and reported so that scripts which set them run unchanged; there is no nondeterministic
# kernel for them to refuse.
_deterministic = {"enabled": False, "warn_only": False}
_DEBUG_MODES = {"default": 0, "warn": 1, "error": 2}


def use_deterministic_algorithms(mode, *, warn_only=False):
    """Records the flag (torch refuses nondeterministic kernels when it is on; dyngrad has none)."""
    if not isinstance(mode, bool):
        raise TypeError(f"use_deterministic_algorithms(): argument 'mode' must be bool, not {type(mode).__name__}")
    if not isinstance(warn_only, bool):
        raise TypeError("use_deterministic_algorithms(): argument 'warn_only' must be bool, not "
                        f"{type(warn_only).__name__}")
    _deterministic.update(enabled=mode, warn_only=warn_only)


def are_deterministic_algorithms_enabled():
    return _deterministic["enabled"]


def is_deterministic_algorithms_warn_only_enabled():
    return _deterministic["warn_only"]


def set_deterministic_debug_mode(debug_mode):
    """'default'/0: off; 'warn'/1: on with warn_only; 'error'/2: on (torch's three levels)."""
    if isinstance(debug_mode, str):
        if debug_mode not in _DEBUG_MODES:
            raise RuntimeError("invalid value of debug_mode, expected one of `default`, `warn`, `error`, but got "
                               f"{debug_mode}")
        debug_mode = _DEBUG_MODES[debug_mode]
    elif isinstance(debug_mode, bool) or not isinstance(debug_mode, int):
        raise TypeError(f"debug_mode must be str or int, but got {type(debug_mode).__name__}")
    if debug_mode not in (0, 1, 2):
        raise RuntimeError(f"invalid value of debug_mode, expected 0, 1, or 2, but got {debug_mode}")
    use_deterministic_algorithms(debug_mode > 0, warn_only=debug_mode == 1)


def get_deterministic_debug_mode():
    if not _deterministic["enabled"]:
        return 0
    return 1 if _deterministic["warn_only"] else 2


# ----- float32 matrix products ---------------------------------------------------------------------------------------
_matmul_precision = ["highest"]


def set_float32_matmul_precision(precision):
    """Records torch's hint ('highest', 'high' or 'medium'); dyngrad's float32 products are always computed in
    full float32 (no TF32 or bfloat16 passes on a CPU), i.e. as 'highest'. Another value warns and changes
    nothing, as in torch."""
    import warnings
    if precision not in ("highest", "high", "medium"):
        warn(f"{precision} is not one of 'highest', 'high', or 'medium'; the set_float32_matmul_precision "
             "call has no effect.", UserWarning)
        return
    _matmul_precision[0] = precision


def get_float32_matmul_precision():
    return _matmul_precision[0]


# ----- warnings and legacy type settings -------------------------------------------------------------------------------
_warn_always = [False]


def set_warn_always(b):
    """torch's switch for warnings it would otherwise give once; dyngrad's warnings follow Python's warnings
    filters, so the flag is recorded and reported only."""
    _warn_always[0] = bool(b)


def is_warn_always_enabled():
    return _warn_always[0]


def typename(obj):
    """The type of obj as a string: 'dyngrad.FloatTensor' for tensors (Tensor.type()), else module.QualName."""
    if isinstance(obj, _C.Tensor):
        return obj.type()
    module = type(obj).__module__
    name = type(obj).__qualname__
    return name if module in ("builtins", None) else f"{module}.{name}"


def set_default_tensor_type(t):
    """Deprecated in torch: sets the default dtype from a tensor type (dyngrad.DoubleTensor or its name)."""
    warn("set_default_tensor_type() is deprecated as of PyTorch 2.1; use set_default_dtype() instead.",
         UserWarning)
    name = t if isinstance(t, str) else getattr(t, "__name__", None)
    short = name.rsplit(".", 1)[-1] if isinstance(name, str) else None
    dtypes = {"FloatTensor": _C.float32, "DoubleTensor": _C.float64, "HalfTensor": _C.float16,
              "BFloat16Tensor": _C.bfloat16}
    if short not in dtypes:
        raise TypeError(f"set_default_tensor_type: expected a floating-point tensor type such as "
                        f"dyngrad.DoubleTensor, got {t!r}")
    set_default_dtype(dtypes[short])
