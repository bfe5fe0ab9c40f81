"""The meta device: tensors with a shape, a dtype and strides but no values (torch's device="meta"), so that a
model can be built without memory, then given memory (Module.to_empty) and weights (load_state_dict(assign=True)).

Note [Meta tensors]: a meta tensor is an instance of MetaTensor (or of a Parameter's meta class), a subclass of the
engine's Tensor whose core is a *proxy*: one element of its dtype expanded to its shape (every stride 0, one
element of memory). The core answers shape, dtype, ndim, numel and size by itself; the strides torch would give
are kept beside it (`_meta_stride`, contiguous unless a rule below says otherwise). install() wraps every function
and method of the table once, in the one wrapper that also decides vmap's batching (Note [One dispatch wrapper]
in dispatch.py). Until the meta device is first used the wrapper only reads a flag (the hot rows' C++ fast paths
do not pass through it). The fast paths hand meta tensors to their Python definitions (tensor_of() in
csrc/bindings/fast_paths.cpp refuses instances of the class registered by `_C._set_meta_class`). A call that
involves the meta device (a meta argument, device="meta", or a factory under the meta default device) goes to
`meta_call`:

- shape rules without a kernel over the tensors' memory: factories (sizes, *_like, new_*), elementwise ops
  (broadcast shapes; the dtype from running the op on one-element tensors of the same dtypes and ranks), matmul and
  linear, embedding, cat and stack, reductions (the op runs on a probe whose dims are distinct primes, 2 x 3 x 5 x
  ..., so each output dim names the input dim it keeps), the normalisations, dropout, views by size (view,
  reshape), dtype conversions, in-place ops (the meta tensor is returned as it is; the shape-changing ones take the
  new shape);
- ops whose output shape depends on the values (nonzero, unique, masked_select, ...) and everything needing values
  (item, tolist, numpy, printing values, backward, ...) raise NotImplementedError naming the op;
- every other op runs on the proxies and its tensor results become meta tensors of their shapes and dtypes: a view
  (slicing, permute, expand, select, ...) costs nothing; an op that computes allocates its output for the time of
  the call (the values of the proxies are zeros, so an op that refuses zeros, a Cholesky factorisation say, says so).

A meta result requires grad when grad mode is on and a meta input does (torch's meta outputs have a grad_fn; ours
are leaves: backward through a meta graph is refused). Mixing a meta tensor with a CPU tensor of rank > 0 raises,
as torch's "Expected all tensors to be on the same device" does.
"""
import functools
import inspect
import math

from .. import _C
from .args import Size, Tensor, broadcast_shapes, get_default_dtype, shape_str, sizes_arg, type_name
from .device import META, META_LIVE as _live, device as device_type, default_is_meta, is_meta_device

_core_init = Tensor.__init__          # the core's: a tensor object sharing another's memory
_core_data = Tensor.data               # the core's data property (its setter swaps the memory in place)

# classes whose instances are meta tensors (MetaTensor, and the meta twins of Parameter classes)
_META_CLASSES = {}


class MetaValueError(NotImplementedError):
    """An op needed the values of a meta tensor, which has none (a NotImplementedError, which is a RuntimeError,
    as torch's errors there are)."""


def _no_values(op, t):
    return MetaValueError(f"{op}: a meta tensor has no values (shape {shape_str(tuple(t.shape))}, "
                          f"dtype {t.dtype}); give the module or tensor memory first (Module.to_empty(device='cpu') "
                          f"or torch.empty_like(t, device='cpu')) and fill it.")


def contiguous_strides(shape):
    strides, step = [], 1
    for s in reversed(shape):
        strides.append(step)
        step *= max(s, 1)
    return tuple(reversed(strides))


class MetaMixin:
    """What a meta tensor answers itself: its device, strides, and an error wherever values are needed."""

    @property
    def device(self):
        return META

    @property
    def is_meta(self):
        return True

    @property
    def is_cpu(self):
        return False

    def get_device(self):
        return -1

    def stride(self, dim=None):
        if dim is None:
            return self._meta_stride
        if self.ndim == 0:
            raise IndexError("stride(): a 0-d tensor has no dimensions.")
        return self._meta_stride[dim]

    def is_contiguous(self, memory_format=None):
        expected = contiguous_strides(tuple(self.shape))
        return all(s == e for n, s, e in zip(self.shape, self._meta_stride, expected) if n != 1)

    def storage_offset(self):
        return 0

    def data_ptr(self):
        return 0

    def untyped_storage(self):
        raise _no_values("Tensor.untyped_storage()", self)

    @property
    def data(self):
        return make_meta(self.shape, self.dtype, self._meta_stride)

    @data.setter
    def data(self, value):
        if not is_meta(value):
            raise RuntimeError(f"data: a meta tensor's data can only be another meta tensor, got "
                               f"{type_name(value)} on {getattr(value, 'device', 'no device')} (torch's set_data "
                               "refuses incompatible tensor types the same way); use Module.to_empty() to give "
                               "a module memory.")
        _core_data.__set__(self, value)
        self._meta_stride = value._meta_stride

    def detach(self):
        return make_meta(self.shape, self.dtype, self._meta_stride)

    def item(self):
        raise _no_values("Tensor.item()", self)

    def tolist(self):
        raise _no_values("Tensor.tolist()", self)

    def numpy(self, *, force=False):
        raise _no_values("Tensor.numpy()", self)

    def _numpy_view(self, *args, **kwargs):
        raise _no_values("the numpy bridge", self)

    def __array__(self, dtype=None, copy=None):
        raise _no_values("Tensor.__array__()", self)

    def __bool__(self):
        raise _no_values("bool(tensor)", self)

    def __float__(self):
        raise _no_values("float(tensor)", self)

    def __int__(self):
        raise _no_values("int(tensor)", self)

    def __index__(self):
        raise _no_values("operator.index(tensor)", self)

    def __complex__(self):
        raise _no_values("complex(tensor)", self)

    def __iter__(self):
        if self.ndim == 0:
            raise TypeError("iteration over a 0-d tensor")
        return iter(self.unbind(0))

    def __format__(self, spec):
        return object.__format__(repr(self), spec)

    def __repr__(self):
        parts = [f"size={tuple(self.shape)!r}"]
        if self.dtype != get_default_dtype():
            parts.append(f"dtype={self.dtype}")
        if self.grad_fn is not None:
            parts.append(f"grad_fn=<{self.grad_fn.name()}>")
        elif self.requires_grad:
            parts.append("requires_grad=True")
        return f"tensor(..., device='meta', {', '.join(parts)})"

    __str__ = __repr__

    def __deepcopy__(self, memo):
        copy = make_meta(self.shape, self.dtype, self._meta_stride, self.requires_grad, type(self))
        memo[id(self)] = copy
        return copy

    def __reduce_ex__(self, protocol):
        raise _no_values("pickling (dyngrad.save)", self)

    def backward(self, *args, **kwargs):
        raise MetaValueError("Tensor.backward(): backward through meta tensors is not supported by dyngrad (meta "
                             "results are leaves without a graph: Note [Meta tensors]).")


class MetaTensor(MetaMixin, Tensor):
    """A tensor on the meta device (see the module's Note [Meta tensors])."""


def register_meta_class(cls, meta_cls):
    """meta_cls holds cls's meta tensors (nn.Parameter registers its twin)."""
    _META_CLASSES[cls] = meta_cls


register_meta_class(Tensor, MetaTensor)
register_meta_class(MetaTensor, MetaTensor)
_C._set_meta_class(MetaMixin)


def meta_class_of(cls):
    """The meta twin of a Tensor subclass (made on first use for a user's subclass of a registered class)."""
    meta = _META_CLASSES.get(cls)
    if meta is None:
        if issubclass(cls, MetaMixin):
            return cls
        meta = type(cls.__name__, (MetaMixin, cls), {"__module__": cls.__module__})
        _META_CLASSES[cls] = meta
    return meta


def is_meta(o):
    return isinstance(o, MetaMixin)


def _proxy(shape, dtype):
    return _C.expand(_C.full([], 0, dtype), list(shape))


def make_meta(shape, dtype, stride=None, requires_grad=False, cls=MetaTensor):
    """A meta tensor of shape and dtype (strides contiguous unless given)."""
    shape = tuple(int(s) for s in shape)
    t = cls.__new__(cls)
    _core_init(t, _proxy(shape, dtype))
    t._meta_stride = contiguous_strides(shape) if stride is None else tuple(stride)
    if requires_grad:
        t.requires_grad = True
    _live[0] = True
    return t


def meta_like(t, cls=MetaTensor):
    """A meta tensor with t's shape, dtype and (for a meta t) strides."""
    stride = t._meta_stride if is_meta(t) else tuple(t.stride())
    return make_meta(t.shape, t.dtype, stride, False, cls)


def mark_live():
    _live[0] = True


# ----- the wrapper --------------------------------------------------------------------------------------------------

def _walk(o):
    """The tensors in an argument (lists and tuples of tensors too, as cat's)."""
    if isinstance(o, Tensor):
        yield o
    elif isinstance(o, (list, tuple)):
        for x in o:
            if isinstance(x, Tensor):
                yield x
            elif isinstance(x, (list, tuple)):
                yield from _walk(x)


def _has_meta(args, kwargs):
    for a in args:
        for t in _walk(a):
            if isinstance(t, MetaMixin):
                return True
    for a in kwargs.values():
        for t in _walk(a):
            if isinstance(t, MetaMixin):
                return True
    return False


def _names_meta_device(args, kwargs):
    if is_meta_device(kwargs.get("device")):
        return True
    return any(isinstance(a, (str, device_type)) and is_meta_device(a) for a in args)


def _takes_device(fn):
    try:
        return "device" in inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False


# ----- meta_call ------------------------------------------------------------------------------------------------------

# the output's shape depends on the values
DATA_DEPENDENT = set("""nonzero argwhere nonzero_static unique unique_consecutive masked_select bincount
    repeat_interleave""".split())
# the answer is values
NEEDS_VALUES = set("""equal allclose is_nonzero __contains__ apply_ map_ map2_ tolist numpy item __reduce_ex__
    backward __array__ __bool__ __float__ __int__ __index__ __complex__ cpu""".split())
# methods that change the tensor object's own state, not its values: run on the meta tensor itself
PASSTHROUGH = set("""requires_grad_ __init__ __repr__ __str__ __format__ __len__ __deepcopy__ __iter__ is_floating_point
    is_tensor numel is_signed is_same_size nbytes itemsize ndimension nelement dim_order""".split())
# in-place methods that change the shape: the meta tensor takes the out-of-place op's result
SHAPE_INPLACE = {"unsqueeze_": "unsqueeze", "squeeze_": "squeeze", "t_": "t", "transpose_": "transpose",
                 "swapdims_": "swapdims", "swapaxes_": "swapaxes", "as_strided_": "as_strided"}

FACTORIES = set("""zeros ones empty full rand randn randint randperm empty_strided zeros_like ones_like empty_like
    full_like rand_like randn_like randint_like new_zeros new_ones new_empty new_full new_empty_strided""".split())


def meta_call(name, fn, args, kwargs):
    if name == "__init__" and args and not is_meta(args[0]) and any(is_meta(t) for a in args[1:] for t in _walk(a)):
        raise MetaValueError("Tensor(t): t is a meta tensor, and a cpu Tensor cannot share its (absent) memory; use "
                             "t.detach() for another meta tensor or torch.empty_like(t, device='cpu') for memory.")
    if name in PASSTHROUGH:
        return fn(*args, **kwargs)
    if name in NEEDS_VALUES:
        first = next((t for a in args for t in _walk(a) if is_meta(t)), None)
        raise _no_values(name, first if first is not None else make_meta((), get_default_dtype()))
    if name in DATA_DEPENDENT or (name == "where" and len(args) + len(kwargs) == 1) or (
            name in ("__getitem__", "__setitem__", "index_put", "index_put_") and
            any(is_meta(t) and t.dtype == _C.bool for a in args[1:] for t in _walk(a))):
        raise MetaValueError(f"{name}: the shape of its result depends on the values of its input, and a meta "
                             "tensor has none.")
    if name == "to":
        return _to(fn, args, kwargs)
    if name in FACTORIES or "device" in kwargs or _names_meta_device(args, kwargs):
        made = _factory(name, fn, args, kwargs)
        if made is not NotImplemented:
            return made
    if name.endswith("_") and not name.startswith("__") or name in INPLACE_DUNDERS:
        return _inplace(name, fn, args, kwargs)
    _check_same_device(name, args, kwargs)
    rule = RULES.get(name)
    if rule is None and name in POINTWISE:
        rule = _pointwise
    if rule is not None:
        out = rule(name, fn, args, kwargs)
    else:
        out = _on_proxies(fn, args, kwargs)
    return _with_grad(out, args, kwargs)


def _check_same_device(name, args, kwargs):
    if name in ("__getitem__", "__setitem__", "index_select", "gather", "take"):
        args = args[:1]                      # a cpu index into a meta tensor is fine, as in torch
    for a in list(args) + list(kwargs.values()):
        for t in _walk(a):
            if not is_meta(t) and t.ndim > 0:
                raise RuntimeError(f"{name}: expected all tensors to be on the same device, but found a meta "
                                   f"tensor and a cpu tensor of shape {shape_str(tuple(t.shape))} (only 0-d cpu "
                                   "tensors mix with meta ones, as in torch).")


def _with_grad(out, args, kwargs):
    """Meta results require grad where a meta input does and grad mode is on (as leaves: Note [Meta tensors])."""
    if not _C.is_grad_enabled():
        return out
    if not any(t.requires_grad for a in list(args) + list(kwargs.values()) for t in _walk(a) if is_meta(t)):
        return out
    for t in _walk(out if isinstance(out, (tuple, list)) else (out,)):
        if is_meta(t) and t.dtype.is_floating_point and not t.requires_grad and t.grad_fn is None:
            t.requires_grad = True
    return out


def _alias(t):
    """A plain core tensor sharing a meta tensor's proxy."""
    a = Tensor.__new__(Tensor)
    _core_init(a, t)
    return a


def _proxies(o):
    if isinstance(o, MetaMixin):
        return _alias(o)
    if isinstance(o, list):
        return [_proxies(x) for x in o]
    if isinstance(o, tuple) and not hasattr(o, "_fields"):
        return tuple(_proxies(x) for x in o)
    return o


def _to_meta(o):
    """Every tensor in a result as a meta tensor of its shape and dtype."""
    if isinstance(o, Tensor):
        return o if is_meta(o) else make_meta(o.shape, o.dtype)
    if isinstance(o, tuple):
        items = [_to_meta(x) for x in o]
        return type(o)(*items) if hasattr(o, "_fields") else tuple(items)
    if isinstance(o, list):
        return [_to_meta(x) for x in o]
    return o


def _on_proxies(fn, args, kwargs):
    out = fn(*[_proxies(a) for a in args], **{k: _proxies(v) for k, v in kwargs.items()})
    return _to_meta(out)


def _ones_probe(o):
    """Each tensor replaced by a one-element tensor of its dtype and rank (ops' dtype rules read ranks)."""
    if isinstance(o, Tensor):
        return _C.full([1] * o.ndim, 1, o.dtype)
    if isinstance(o, list):
        return [_ones_probe(x) for x in o]
    if isinstance(o, tuple) and not hasattr(o, "_fields"):
        return tuple(_ones_probe(x) for x in o)
    return o


def _probe(fn, args, kwargs):
    return fn(*[_ones_probe(a) for a in args], **{k: _ones_probe(v) for k, v in kwargs.items()})


def _reshaped(probe_out, shape):
    """The probe's result (a tensor or a tuple of them) as meta tensors of `shape`."""
    if isinstance(probe_out, Tensor):
        return make_meta(shape, probe_out.dtype)
    if isinstance(probe_out, tuple):
        items = [_reshaped(x, shape) for x in probe_out]
        return type(probe_out)(*items) if hasattr(probe_out, "_fields") else tuple(items)
    return probe_out


def _pointwise(name, fn, args, kwargs):
    shape = ()
    for a in list(args) + list(kwargs.values()):
        if isinstance(a, Tensor):
            shape = broadcast_shapes(shape, tuple(a.shape), name)
    return _reshaped(_probe(fn, args, kwargs), shape)


def _same_as_input(name, fn, args, kwargs):
    x = args[0] if args else kwargs.get("input")
    dtype = kwargs.get("dtype") or x.dtype
    return make_meta(x.shape, dtype)


def _matmul_shape(a, b, name):
    if a.ndim == 0 or b.ndim == 0:
        raise RuntimeError(f"{name}: both arguments need at least 1 dimension, got {a.ndim}-d and {b.ndim}-d.")
    sa, sb = tuple(a.shape), tuple(b.shape)
    if sa[-1] != (sb[0] if len(sb) == 1 else sb[-2]):
        raise RuntimeError(f"{name}: shapes {shape_str(sa)} and {shape_str(sb)} cannot be multiplied "
                           f"({sa[-1]} != {sb[0] if len(sb) == 1 else sb[-2]}).")
    if len(sa) == 1 and len(sb) == 1:
        return ()
    if len(sb) == 1:
        return sa[:-1]
    if len(sa) == 1:
        return sb[:-2] + sb[-1:]
    return broadcast_shapes(sa[:-2], sb[:-2], name) + (sa[-2], sb[-1])


def _matmul(name, fn, args, kwargs):
    a, b = args[0], args[1] if len(args) > 1 else kwargs.get("other", kwargs.get("mat2"))
    if name == "__rmatmul__":
        a, b = b, a
    return _reshaped(_probe(fn, args, kwargs), _matmul_shape(a, b, name))


def _linear(name, fn, args, kwargs):
    x = args[0] if args else kwargs["input"]
    w = args[1] if len(args) > 1 else kwargs["weight"]
    if x.ndim == 0 or tuple(x.shape)[-1] != tuple(w.shape)[-1]:
        raise RuntimeError(f"{name}: input of shape {shape_str(tuple(x.shape))} and weight of shape "
                           f"{shape_str(tuple(w.shape))} do not match (the last dims must be equal).")
    shape = tuple(x.shape)[:-1] + (tuple(w.shape)[:1] if w.ndim == 2 else ())
    return _reshaped(_probe(fn, args, kwargs), shape)


def _embedding(name, fn, args, kwargs):
    idx = args[0] if args else kwargs["input"]
    w = args[1] if len(args) > 1 else kwargs["weight"]
    return make_meta(tuple(idx.shape) + tuple(w.shape)[1:], w.dtype)


def _cat(name, fn, args, kwargs):
    tensors = list(args[0] if args else kwargs["tensors"])
    dim = args[1] if len(args) > 1 else kwargs.get("dim", kwargs.get("axis", 0))
    probe = _probe(fn, args, kwargs)
    if name == "stack":
        shape = list(tensors[0].shape)
        d = dim + len(shape) + 1 if dim < 0 else dim
        shape.insert(d, len(tensors))
        return make_meta(shape, probe.dtype)
    shaped = [t for t in tensors if tuple(t.shape) != (0,)] or tensors[:1]
    shape = list(shaped[0].shape)
    d = dim + len(shape) if dim < 0 else dim
    shape[d] = sum(t.shape[d] for t in shaped)
    return make_meta(shape, probe.dtype)


_PRIMES = (2, 3, 5, 7, 11, 13, 17, 19)


def _reduction(name, fn, args, kwargs):
    """The op on a probe whose dims are distinct primes: each output dim of size p keeps the input dim of size p,
    each of size 1 is a kept reduced dim."""
    x = args[0] if args else kwargs.get("input")
    if not isinstance(x, Tensor) or x.ndim > len(_PRIMES) or any(isinstance(a, Tensor) for a in args[1:]):
        return _on_proxies(fn, args, kwargs)
    sizes = _PRIMES[:x.ndim]
    true = dict(zip(sizes, tuple(x.shape)))
    probe = fn(_C.full(list(sizes), 1, x.dtype), *args[1:], **kwargs)

    def back(o):
        if isinstance(o, Tensor):
            return make_meta([true.get(s, s) for s in o.shape], o.dtype)
        if isinstance(o, tuple):
            items = [back(i) for i in o]
            return type(o)(*items) if hasattr(o, "_fields") else tuple(items)
        return o
    return back(probe)


def _view(name, fn, args, kwargs):
    """view/reshape by sizes, with one -1 inferred (a view by dtype goes to the proxies)."""
    x = args[0]
    rest = args[1:] if len(args) > 1 else (kwargs.get("shape", kwargs.get("size")),)
    if len(rest) == 1 and isinstance(rest[0], (_C.dtype, type(None))):
        return _on_proxies(fn, args, kwargs)
    sizes = list(rest[0] if len(rest) == 1 and isinstance(rest[0], (tuple, list)) else rest)
    numel = math.prod(tuple(x.shape))
    if sizes.count(-1) == 1:
        known = math.prod(s for s in sizes if s != -1)
        if known == 0 or numel % known:
            raise RuntimeError(f"{name}: shape {shape_str(tuple(sizes))} is invalid for input of size {numel}")
        sizes[sizes.index(-1)] = numel // known
    if math.prod(sizes) != numel:
        raise RuntimeError(f"{name}: shape {shape_str(tuple(sizes))} is invalid for input of size {numel}")
    return make_meta(sizes, x.dtype)


def _permuted(name, fn, args, kwargs):
    """transpose, permute, t, mT: the proxies give the shape; the strides are the input's, permuted."""
    x = args[0]
    out = fn(*[_proxies(a) for a in args], **{k: _proxies(v) for k, v in kwargs.items()})
    n = x.ndim
    if name in ("t", "T", "mT", "transpose", "swapaxes", "swapdims"):
        if name in ("t", "T") and n < 2 or name == "T" and n != 2:
            perm = list(range(n))[::-1]
        elif name in ("t", "T", "mT"):
            perm = list(range(n - 2)) + [n - 1, n - 2]
        else:
            d0 = args[1] if len(args) > 1 else kwargs.get("dim0", kwargs.get("axis0"))
            d1 = args[2] if len(args) > 2 else kwargs.get("dim1", kwargs.get("axis1"))
            perm = list(range(n))
            d0, d1 = d0 % max(n, 1), d1 % max(n, 1)
            perm[d0], perm[d1] = perm[d1], perm[d0]
    else:
        dims = args[1:] if len(args) > 1 else (kwargs["dims"],)
        dims = list(dims[0] if len(dims) == 1 and isinstance(dims[0], (tuple, list)) else dims)
        perm = [d % max(n, 1) for d in dims]
    stride = tuple(x._meta_stride[p] for p in perm) if len(perm) == n and n > 0 else None
    return make_meta(out.shape, out.dtype, stride)


def _conversion(name, fn, args, kwargs):
    probe = _probe(fn, args, kwargs)
    if not isinstance(probe, Tensor):
        return probe
    return make_meta(args[0].shape, probe.dtype)


def _sdpa(name, fn, args, kwargs):
    q = args[0] if args else kwargs["query"]
    v = args[2] if len(args) > 2 else kwargs["value"]
    return make_meta(tuple(q.shape)[:-1] + tuple(v.shape)[-1:], q.dtype)


RULES = {
    **dict.fromkeys("matmul __matmul__ __rmatmul__ mm bmm".split(), _matmul),
    "linear": _linear,
    "embedding": _embedding,
    **dict.fromkeys("cat concat concatenate stack".split(), _cat),
    **dict.fromkeys("""sum nansum mean nanmean prod amax amin logsumexp all any argmax argmin max min var std
        var_mean std_mean aminmax count_nonzero norm""".split(), _reduction),
    **dict.fromkeys("""layer_norm rms_norm group_norm batch_norm instance_norm local_response_norm normalize
        dropout dropout1d dropout2d dropout3d alpha_dropout feature_alpha_dropout clone contiguous""".split(),
                    _same_as_input),
    **dict.fromkeys("view reshape".split(), _view),
    **dict.fromkeys("t T mT transpose swapaxes swapdims permute".split(), _permuted),
    **dict.fromkeys("""type_as float double long int bool short char byte half bfloat16 type""".split(),
                    _conversion),
    "scaled_dot_product_attention": _sdpa,
}

# elementwise: the shape broadcasts, the dtype is the op's on one-element tensors
POINTWISE = set("""add sub subtract rsub mul multiply div divide true_divide floor_divide remainder fmod addcmul
    addcdiv lerp pow float_power neg negative positive reciprocal square maximum minimum fmax fmin clamp clip
    clamp_min clamp_max nan_to_num copysign hypot atan2 arctan2 logaddexp logaddexp2 xlogy heaviside gcd lcm ldexp
    frexp nextafter exp exp2 expm1 log log1p sqrt rsqrt abs absolute sin cos asin arcsin acos arccos atan arctan
    cosh tanh asinh arcsinh acosh arccosh atanh arctanh deg2rad rad2deg sigmoid expit logit relu sign sgn signbit
    floor ceil round trunc fix frac erf erfc erfinv lgamma gammaln digamma psi polygamma mvlgamma multigammaln sinc
    i0 eq ne lt le gt ge isnan isfinite isinf isposinf isneginf isreal isclose greater greater_equal less
    less_equal not_equal logical_and logical_or logical_xor logical_not bitwise_and bitwise_or bitwise_xor
    bitwise_not bitwise_left_shift bitwise_right_shift log2 log10 tan sinh where masked_fill
    softmax log_softmax softmin relu6 leaky_relu hardtanh elu selu celu rrelu prelu threshold gelu softplus silu
    mish logsigmoid hardsigmoid hardswish softsign tanhshrink softshrink hardshrink
    __add__ __radd__ __sub__ __rsub__ __mul__ __rmul__ __truediv__ __rtruediv__ __rdiv__ __pow__ __rpow__ __neg__
    __pos__ __abs__ __invert__ __and__ __rand__ __or__ __ror__ __xor__ __rxor__ __lshift__ __rlshift__ __rshift__
    __rrshift__ __mod__ __rmod__ __floordiv__ __rfloordiv__ __eq__ __ne__ __lt__ __le__ __gt__ __ge__""".split())

INPLACE_DUNDERS = set("""__iadd__ __isub__ __imul__ __itruediv__ __imod__ __ifloordiv__ __iand__ __ior__ __ixor__
    __ilshift__ __irshift__ __setitem__""".split())


def register_unary(names):
    """The unary primitives of ops.def are elementwise too (install() passes their names)."""
    POINTWISE.update(names)


def _inplace(name, fn, args, kwargs):
    self = args[0] if args else None
    if not is_meta(self):
        first = next(t for a in list(args) + list(kwargs.values()) for t in _walk(a) if is_meta(t))
        raise _no_values(f"{name} (writing a meta tensor into a {type_name(self)} on the cpu)", first)
    if name in ("resize_", "resize_as_"):
        shape = tuple(args[1].shape) if name == "resize_as_" else sizes_arg(args[1:], name)
        out = make_meta(shape, self.dtype)
        _core_data.__set__(self, out)
        self._meta_stride = out._meta_stride
        return self
    if name in SHAPE_INPLACE:
        out = meta_call(SHAPE_INPLACE[name], getattr(Tensor, SHAPE_INPLACE[name]), args, kwargs)
        _core_data.__set__(self, out)
        self._meta_stride = out._meta_stride
        return self
    if name == "__setitem__":
        return None
    return self


def _to(fn, args, kwargs):
    """Tensor.to: to("meta") makes a meta tensor of the same shape; a meta tensor goes to the cpu only through
    Module.to_empty / empty_like (it has no values to copy)."""
    self = args[0]
    target, dtype = kwargs.get("device"), kwargs.get("dtype")
    for a in args[1:]:
        if isinstance(a, (str, device_type)):
            target = a
        elif isinstance(a, Tensor):
            target, dtype = a.device, a.dtype
        elif isinstance(a, _C.dtype) or a in (float, int, bool):
            dtype = a
    if target is not None and not is_meta_device(target) and is_meta(self):
        raise MetaValueError(f"Tensor.to({target!r}): cannot copy out of a meta tensor: it has no data (shape "
                             f"{shape_str(tuple(self.shape))}); use Module.to_empty(device=...) or "
                             "torch.empty_like(t, device=...) to give it memory.")
    if dtype is not None:
        new_dtype = fn(_C.full([], 1, self.dtype), dtype=dtype).dtype
    else:
        new_dtype = self.dtype
    if is_meta(self) and new_dtype == self.dtype:
        return self
    out = make_meta(self.shape, new_dtype, self._meta_stride if is_meta(self) else tuple(self.stride()))
    if self.requires_grad and _C.is_grad_enabled() and new_dtype.is_floating_point:
        out.requires_grad = True
    return out


def _factory(name, fn, args, kwargs):
    """A factory under the meta device: the size-taking ones make the meta tensor directly; others with a meta
    device run on the cpu and give their result's shape and dtype; with device='cpu' (empty_like(meta,
    device='cpu')) the cpu factory runs on the proxies."""
    device = kwargs.get("device")
    if device is not None and not is_meta_device(device):
        return fn(*[_proxies(a) for a in args], **{k: _proxies(v) for k, v in kwargs.items()})
    if device is None and (name.endswith("_like") or name.startswith("new_")) and args and not is_meta(args[0]):
        return fn(*args, **kwargs)           # these follow their input's device, not the default one (as torch)
    kwargs = {k: v for k, v in kwargs.items() if k != "device"}
    requires_grad = bool(kwargs.get("requires_grad"))
    dtype = kwargs.get("dtype")
    if dtype is not None and not isinstance(dtype, _C.dtype):
        dtype = _C.full([], 0, get_default_dtype()).to(dtype).dtype
    out = NotImplemented
    if name in ("zeros", "ones", "empty", "rand", "randn"):
        size = args if args else (kwargs.get("size"),)
        out = make_meta(sizes_arg(size, name), dtype or get_default_dtype())
    elif name == "full":
        size = args[0] if args else kwargs["size"]
        value = args[1] if len(args) > 1 else kwargs["fill_value"]
        default = _C.bool if isinstance(value, bool) else _C.int64 if isinstance(value, int) else get_default_dtype()
        out = make_meta(sizes_arg((size,), name), dtype or default)
    elif name in ("zeros_like", "ones_like", "empty_like", "full_like", "rand_like", "randn_like", "randint_like"):
        x = args[0] if args else kwargs["input"]
        out = make_meta(x.shape, dtype or x.dtype, x._meta_stride if is_meta(x) else None)
    elif name in ("new_zeros", "new_ones", "new_empty", "new_full"):
        size = args[1:] if name != "new_full" else args[1:2]
        size = size if size else (kwargs.get("size"),)
        out = make_meta(sizes_arg(size, name), dtype or args[0].dtype)
    elif name in ("empty_strided", "new_empty_strided"):
        rest = args[1:] if name == "new_empty_strided" else args
        size = rest[0] if rest else kwargs["size"]
        stride = rest[1] if len(rest) > 1 else kwargs["stride"]
        default = args[0].dtype if name == "new_empty_strided" else get_default_dtype()
        out = make_meta(sizes_arg((size,), name), dtype or default, tuple(stride))
    elif name == "randint":
        size = kwargs.get("size", args[-1] if args else None)
        out = make_meta(sizes_arg((size,), name), dtype or _C.int64)
    elif name == "randperm":
        out = make_meta((int(args[0] if args else kwargs["n"]),), dtype or _C.int64)
    elif _has_meta(args, kwargs):
        return NotImplemented                # an op with a device= keyword taking meta tensors: not a factory
    else:
        out = _to_meta(fn(*args, **kwargs))   # tensor(data), arange, eye, linspace, windows, ...
    if requires_grad and not out.requires_grad:
        out.requires_grad = True
    return out
