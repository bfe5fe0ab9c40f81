"""torch.autocast on the CPU: the per-thread autocast state, torch's per-op cast policies, and the wrapper install()
puts around the public functions those policies name (torch.amp and dyngrad.amp build on this module).

Note [Autocast]: inside `with dg.autocast("cpu"):` the ops of torch's CPU lower-precision list (matmul, linear, the
convolutions, bmm, baddbmm, addmm, addbmm, prelu, scaled_dot_product_attention, linalg.vecdot: aten's
autocast_mode.cpp, AutocastCPU) cast their floating-point inputs (float64 excepted) to the autocast dtype, bfloat16
by default, and compute in it: the product's inputs are rounded to bfloat16, accumulated in float32 and the result
rounded to bfloat16, which is what a bfloat16 kernel does. The ops of its fp32 list (the losses, prod, cdist, the
3-d pools, the linear-algebra factorisations, ...) cast them to float32, and cat/stack/index_copy to the widest
floating input ("promote"). As in torch, the casts are recorded by autograd (the backward of each op runs in the
dtype its forward ran in and the gradients reaching float32 leaves are float32), the ops run with autocast
excluded (an op of a list does not autocast again inside), and within the outermost region the bfloat16 copy of a
float32 leaf that requires grad (a weight) is made once and reused (the weight cache; remade here if the weight was
modified in place since). Composites that torch computes through its listed mm/bmm (einsum, tensordot, inner,
chain_matmul, multi_dot, multi_head_attention_forward) are listed as lower-precision too, so that their results
have torch's dtype. The convolutions have no bfloat16 loop in the C++ core: they run in float32 on the bfloat16
values and round the result once, which is the same arithmetic.

Note [Autocast wrappers]: POLICIES is the one list (name -> policy) and install() wraps each such table row's
function once (`with_policy`); the in-place variants stay unwrapped, as torch registers only the out-of-place ops.
A wrapper costs one global read when no thread has autocast on (`_active_threads`); the C++ fast paths of matmul,
linear and cross_entropy then call their Python definitions too (Note [Fast paths under autocast]).
"""
import functools
import threading

from .. import _C
from .._user_frame import warn
from . import capture

DEVICE_TYPES = ("cpu", "cuda")

LOWER = "lower_precision_fp"    # cast to the autocast dtype
WIDENED = "lower_widened"       # the same, computed in float32 on the rounded values and rounded once
FP32 = "fp32"
PROMOTE = "promote"

# name (a row of table.py) -> policy, from aten/src/ATen/autocast_mode.cpp's AutocastCPU lists
POLICIES = {
    **dict.fromkeys("""matmul __matmul__ __rmatmul__ mm bmm baddbmm addmm addbmm linear prelu
        scaled_dot_product_attention vecdot einsum tensordot inner chain_matmul multi_dot
        multi_head_attention_forward""".split(), LOWER),
    **dict.fromkeys("""conv1d conv2d conv3d conv_transpose1d conv_transpose2d conv_transpose3d conv_tbc""".split(),
                    WIDENED),
    **dict.fromkeys("""avg_pool3d binary_cross_entropy grid_sample prod quantile nanquantile cdist trace cholesky
        cholesky_inverse cholesky_solve inverse lu_solve orgqr ormqr pinverse max_pool3d max_unpool2d max_unpool3d
        adaptive_avg_pool3d mse_loss cosine_embedding_loss nll_loss hinge_embedding_loss poisson_nll_loss
        smooth_l1_loss cross_entropy l1_loss huber_loss margin_ranking_loss soft_margin_loss triplet_margin_loss
        multi_margin_loss ctc_loss kl_div multilabel_margin_loss binary_cross_entropy_with_logits cond matrix_rank
        solve svdvals eigvals eigvalsh inv householder_product tensorinv tensorsolve geqrf lu qr svd
        triangular_solve fractional_max_pool2d fractional_max_pool3d adaptive_max_pool3d cholesky_ex eig eigh lstsq
        inv_ex""".split(), FP32),
    **dict.fromkeys("cat concat concatenate stack index_copy".split(), PROMOTE),
}


def _pad_runs_in_fp32(args, kwargs):
    """F.pad is torch's reflection_pad1d/2d or replication_pad1d/2d/3d (all fp32) only in those modes."""
    mode = kwargs.get("mode", args[2] if len(args) > 2 else "constant")
    pad = kwargs.get("pad", args[1] if len(args) > 1 else ())
    return mode == "replicate" or (mode == "reflect" and len(pad) in (2, 4))


CONDITIONAL = {"pad": (FP32, _pad_runs_in_fp32)}  # name -> (policy, whether it applies to this call)


class _State(threading.local):
    """One thread's autocast state (torch's is thread-local too)."""

    def __init__(self):
        self.enabled = dict.fromkeys(DEVICE_TYPES, False)
        self.dtype = {"cpu": _C.bfloat16, "cuda": _C.float16}
        self.nesting = 0
        self.cache_enabled = True
        self.cache = {}          # id(weight) -> (weight, its version, its cast): Note [Autocast]
        self.excluded = 0        # inside an op of a list


_state = _State()


class _NotGiven:
    def __repr__(self):
        return "<not given>"


_NOT_GIVEN = _NotGiven()
_lock = threading.Lock()
_active_threads = 0      # threads whose cpu autocast is enabled: a wrapper's first, lock-free check


def _device_type(device_type, owner):
    if not isinstance(device_type, str):
        raise ValueError(f"Expected `device_type` of type `str`, got: `{type(device_type).__name__}`")
    if device_type not in DEVICE_TYPES:
        raise RuntimeError(f"{owner}: unsupported autocast device_type {device_type!r} (dyngrad has "
                           f"{', '.join(map(repr, DEVICE_TYPES))})")
    return device_type


def is_autocast_available(device_type):
    """Whether autocast has a policy for device_type: "cpu" and "cuda" (which disables itself: no GPU)."""
    return device_type in DEVICE_TYPES


def is_autocast_enabled(device_type=None):
    """torch.is_autocast_enabled(device_type): this thread's state; without an argument, CUDA's (as torch)."""
    return _state.enabled[_device_type("cuda" if device_type is None else device_type, "is_autocast_enabled")]


def _check_bool(owner, name, value):
    if not isinstance(value, bool):
        raise TypeError(f"{owner}(): argument '{name}' must be bool, not {type(value).__name__}")


def set_autocast_enabled(device_type, enabled=_NOT_GIVEN):
    """torch.set_autocast_enabled(device_type, enabled); the one-argument form sets CUDA's, as torch."""
    global _active_threads
    if enabled is _NOT_GIVEN:
        device_type, enabled = "cuda", device_type
    _check_bool("set_autocast_enabled", "enabled", enabled)
    device_type = _device_type(device_type, "set_autocast_enabled")
    before, _state.enabled[device_type] = _state.enabled[device_type], enabled
    if device_type == "cpu" and before != enabled:
        with _lock:
            _active_threads += 1 if enabled else -1
            _C._set_autocast_active(_active_threads > 0)


def get_autocast_dtype(device_type):
    """torch.get_autocast_dtype(device_type): bfloat16 for "cpu", float16 for "cuda" unless set."""
    return _state.dtype[_device_type(device_type, "get_autocast_dtype")]


def set_autocast_dtype(device_type, dtype):
    """torch.set_autocast_dtype(device_type, dtype)."""
    if not isinstance(dtype, _C.dtype):
        raise TypeError(f"set_autocast_dtype(): argument 'dtype' must be a dtype, not {type(dtype).__name__}")
    _state.dtype[_device_type(device_type, "set_autocast_dtype")] = dtype


def _deprecated(old, new):
    warn(f"torch.{old} is deprecated. Please use torch.{new} instead.", DeprecationWarning)


def is_autocast_cpu_enabled():
    _deprecated("is_autocast_cpu_enabled()", "is_autocast_enabled('cpu')")
    return is_autocast_enabled("cpu")


def set_autocast_cpu_enabled(enabled):
    _deprecated("set_autocast_cpu_enabled(enabled)", "set_autocast_enabled('cpu', enabled)")
    set_autocast_enabled("cpu", enabled)


def get_autocast_cpu_dtype():
    _deprecated("get_autocast_cpu_dtype()", "get_autocast_dtype('cpu')")
    return get_autocast_dtype("cpu")


def set_autocast_cpu_dtype(dtype):
    _deprecated("set_autocast_cpu_dtype(dtype)", "set_autocast_dtype('cpu', dtype)")
    set_autocast_dtype("cpu", dtype)


def get_autocast_gpu_dtype():
    _deprecated("get_autocast_gpu_dtype()", "get_autocast_dtype('cuda')")
    return get_autocast_dtype("cuda")


def set_autocast_gpu_dtype(dtype):
    _deprecated("set_autocast_gpu_dtype(dtype)", "set_autocast_dtype('cuda', dtype)")
    set_autocast_dtype("cuda", dtype)


def is_autocast_cache_enabled():
    return _state.cache_enabled


def set_autocast_cache_enabled(enabled):
    _check_bool("set_autocast_cache_enabled", "enabled", enabled)
    _state.cache_enabled = enabled


def clear_autocast_cache():
    """Drops this thread's cached casts of weights (torch does so when the outermost region exits)."""
    _state.cache.clear()


def autocast_increment_nesting():
    _state.nesting += 1
    return _state.nesting


def autocast_decrement_nesting():
    _state.nesting -= 1
    return _state.nesting


class autocast:
    """torch.autocast(device_type, dtype=None, enabled=True, cache_enabled=None): a context manager and decorator
    in which the ops of torch's lists run in their policy's dtype (Note [Autocast]). "cuda" warns and disables
    itself, as torch does without CUDA; on "cpu" the dtype must be bfloat16 (the default) or float16."""

    def __init__(self, device_type, dtype=None, enabled=True, cache_enabled=None):
        self.device = _device_type(device_type, "autocast")
        self.fast_dtype = get_autocast_dtype(self.device) if dtype is None else dtype
        self._cache_enabled = is_autocast_cache_enabled() if cache_enabled is None else cache_enabled
        if enabled and self.device == "cuda":
            warn("CUDA is not available or torch_xla is imported. Disabling autocast.")
            enabled = False
        elif enabled and self.fast_dtype not in (_C.bfloat16, _C.float16):
            warn("In CPU autocast, but the target dtype is not supported. Disabling autocast.\n"
                 f"CPU Autocast only supports dtypes of {_C.bfloat16}, {_C.float16} currently.")
            enabled = False
        self._enabled = bool(enabled)
        self._cache_enabled = bool(self._cache_enabled)

    def __enter__(self):
        self.prev_cache_enabled = is_autocast_cache_enabled()
        self.prev = is_autocast_enabled(self.device)
        self.prev_fastdtype = get_autocast_dtype(self.device)
        set_autocast_enabled(self.device, self._enabled)
        set_autocast_dtype(self.device, self.fast_dtype)
        autocast_increment_nesting()
        set_autocast_cache_enabled(self._cache_enabled)
        return self

    def __exit__(self, exc_type, exc_val, exc_tb):
        if autocast_decrement_nesting() == 0:
            clear_autocast_cache()
        set_autocast_enabled(self.device, self.prev)
        set_autocast_dtype(self.device, self.prev_fastdtype)
        set_autocast_cache_enabled(self.prev_cache_enabled)
        return False

    def __call__(self, func):
        if not callable(func):
            raise TypeError(f"autocast()(func) requires a callable, but got {type(func).__name__}. Did you mean to "
                            f"use autocast as a context manager? For example:\n"
                            f"    with torch.autocast(device_type=...):\n        output = model(input)")

        @functools.wraps(func)
        def decorate_autocast(*args, **kwargs):
            with self:
                return func(*args, **kwargs)
        return decorate_autocast


# ----- the policies ---------------------------------------------------------------------------------------------
def _eligible(x):
    return isinstance(x, _C.Tensor) and x.dtype in (_C.float32, _C.bfloat16, _C.float16)


def _cast(x, dtype):
    """x in dtype, through the weight cache for a float32 leaf that requires grad (Note [Autocast])."""
    if x.dtype is dtype:
        return x
    if not (_state.cache_enabled and x.dtype is _C.float32 and x.requires_grad and x.is_leaf
            and dtype is not _C.float32):
        return x.to(dtype)
    if capture.is_capturing():
        # a recording (dyngrad.compile) must see the cast as a step from the weight: a cached cast would be an
        # external, replayed with its old values after the weight changed (Note [Autocast under compile] in
        # _api/compiling.py). The fresh cast has the cached one's values, so the recorded call is eager mode's
        return x.to(dtype)
    hit = _state.cache.get(id(x))
    if hit is not None and hit[0] is x and hit[1] == x._version:
        return hit[2]
    out = x.to(dtype)
    _state.cache[id(x)] = (x, x._version, out)
    return out


def _map_tensors(value, fn):
    """value with fn applied to every eligible tensor in it (and in lists and tuples, one level deep)."""
    if _eligible(value):
        return fn(value)
    if isinstance(value, (list, tuple)) and any(_eligible(v) for v in value):
        return type(value)(fn(v) if _eligible(v) else v for v in value)
    return value


def _widest(args, kwargs):
    widest = None
    for value in list(args) + list(kwargs.values()):
        for v in (value if isinstance(value, (list, tuple)) else (value,)):
            if _eligible(v):
                if widest is None or v.dtype is _C.float32:
                    widest = v.dtype
                elif widest is not v.dtype and widest is not _C.float32:
                    widest = _C.float32      # bfloat16 with float16: torch's promotion of the two
    return widest


def _run(policy, fn, args, kwargs):
    """fn(*args, **kwargs) under `policy`, with autocast excluded inside (Note [Autocast])."""
    if policy == PROMOTE:
        dtype = _widest(args, kwargs)
    else:
        dtype = _C.float32 if policy == FP32 else _state.dtype["cpu"]
    if dtype is not None:
        cast = functools.partial(_cast, dtype=dtype)
        args = tuple(_map_tensors(a, cast) for a in args)
        kwargs = {k: _map_tensors(v, cast) for k, v in kwargs.items()}
    widened = policy == WIDENED and dtype is not _C.float32
    if widened:
        args = tuple(_map_tensors(a, lambda t: t.float()) for a in args)
        kwargs = {k: _map_tensors(v, lambda t: t.float()) for k, v in kwargs.items()}
    _state.excluded += 1
    try:
        out = fn(*args, **kwargs)
    finally:
        _state.excluded -= 1
    if widened:
        out = _map_tensors(out, lambda t: t.to(dtype))
    return out


def with_policy(name, fn):
    """fn, wrapped so that it applies POLICIES[name] inside an enabled cpu autocast region; fn itself when the name
    has no policy (Note [Autocast wrappers])."""
    policy = POLICIES.get(name)
    applies = None
    if policy is None and name in CONDITIONAL:
        policy, applies = CONDITIONAL[name]
    if policy is None or fn is None or isinstance(fn, type):
        return fn

    @functools.wraps(fn)
    def autocast_wrapper(*args, **kwargs):
        if not _active_threads or _state.excluded or not _state.enabled["cpu"]:
            return fn(*args, **kwargs)
        if applies is not None and not applies(args, kwargs):
            return fn(*args, **kwargs)
        return _run(policy, fn, args, kwargs)
    autocast_wrapper.autocast_policy = policy
    return autocast_wrapper
