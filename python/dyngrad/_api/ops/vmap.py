"""torch.vmap (torch.func.vmap) by batching rules (Note [vmap by batching rules]).

Note [vmap by batching rules]: vmap(func)(x) calls func once, on a BatchedTensor: an object that shows func the
shape of one row (the logical tensor) and holds the whole batch (the physical tensor). Every public call func makes
on one reaches the dispatcher here (Note [Batching at the public API] in _api/batching.py), which runs the op's
batching rule: one call of the op on the physical tensors, with the batch dims moved in front of the logical ones,
broadcast (pointwise ops), shifted past (dims of reductions and shape ops), or folded into the op's own batch dims
(matmul, linear, conv, pooling, losses). An op without a rule runs as a loop over the rows of the batch (the
fallback), with a warning that names it; tests/test_vmap.py lists the primitives of ops.def that fall back, and
fails for any other; tests/test_vmap_coverage.py does the same for every op of the API table (its FALLS_BACK).

Representation: a BatchedTensor's physical tensor has one leading dim per vmap level it is batched at, in the
order the levels were entered (outer first), each of that level's full size; its logical dims follow. Nested vmaps
are one object with several leading dims, so a rule handles any number of levels at once. Aligning two operands
inserts size-1 dims for the levels one lacks (broadcasting does the rest) or expands them (a view) where the op
needs equal sizes.

Note [Transforms inside vmap]: a rule runs ordinary ops on physical tensors, so autograd records, and forward AD
propagates, the batched computation itself. Row b of a batched output depends only on row b of the batched
inputs, so one backward pass from the sum of the rows gives every row's gradient: func.grad inside vmap
differentiates with respect to its inputs expanded to every open level (a per-sample copy of an unbatched weight,
as torch's per-sample gradients) and returns BatchedTensors; jvp inside vmap makes the batched physical tensors
dual. jacrev is vmap over the rows of the identity of vjp (func.jacrev).

randomness: 'error' refuses a random op inside vmap (torch's message); 'different' draws independently per row
(a factory draws the batch's shape); 'same' draws one row's worth and broadcasts it.
"""
import builtins
import copy
import functools
import inspect
import itertools
import math
import operator
import sys

import numpy as np

from ... import _C
from ..._user_frame import warn
from ...autograd.function import Function
from ...autograd.grad_mode import no_grad as _no_grad
from .. import bridge
from ..args import Size, Tensor, dtype_arg, get_default_dtype, to_int, type_name, warn_deprecated
from ..batching import METHODS, STATE, register
from .. import primitive_rows, table
from .complex import check_H_matrix as _check_H_matrix
from .distance import vector_norm as _distance_norm
from .linalg import _powers, linalg_qr, linalg_svd, vector_norm as _linalg_vector_norm
from .products import _chain_order, _sublist_equation
from .shape import diag_embed as _diag_embed, meshgrid_views
from .statistics import _range_pairs, return_histogram, return_histogramdd
from .sorting import sort as _sort
from .conv import conv1d as _conv1d_fn                       # these four: the nn.functional rules (vmapA)
from .linear import linear as _linear_fn
from .loss import cross_entropy as _cross_entropy_fn
from .normalization import _update_running

# ----- levels -------------------------------------------------------------------------------------------------
_COUNTER = itertools.count(1)


def active_levels():
    """The open levels as (id, size) pairs, outer first."""
    return [(lv[0], lv[1]) for lv in STATE.levels]


def _size_of(level):
    for lv in STATE.levels:
        if lv[0] == level:
            return lv[1]
    raise RuntimeError("vmap: a BatchedTensor was used outside the vmap that made it (it escaped through a "
                       "closure or a global); return it from the vmapped function instead.")


def pointwise_apply(fn, *args):
    """fn(*args) for a pointwise fn that is not in the op table (a package's own autograd.Function with a numpy
    forward, such as the distributions' gamma CDF): inside vmap it runs once on the physical tensors under the
    pointwise rule, as a table op would; outside vmap it is fn(*args)."""
    if any(type(a) is BatchedTensor for a in args):
        return _pointwise(fn, args, {})
    return fn(*args)


def all_rows(t):
    """The physical tensor under every vmap level of `t` (t itself outside vmap): what torch's _is_all_true
    reduces, so that a validity check over every row is one answer and not data-dependent control flow."""
    while type(t) is BatchedTensor:
        t = t._value
    return t


class BatchedTensor:
    """A tensor as one row of a vmap sees it (Note [vmap by batching rules]). _value is the physical tensor,
    _levels the ids of the levels of its leading dims."""
    __slots__ = ("_value", "_levels", "__weakref__")

    def __init__(self, value, levels):
        self._value = value
        self._levels = levels

    # isinstance(x, Tensor) holds for a row inside vmap, as for torch's BatchedTensor (a Tensor subclass): the
    # checks of nn modules and user code see a tensor. The core's functions still refuse one (pybind reads the
    # real type), so a BatchedTensor reaches the core only through a rule.
    @property
    def __class__(self):
        return Tensor

    # -- the logical tensor's queries
    @property
    def shape(self):
        return Size(tuple(self._value.shape)[len(self._levels):])

    def size(self, dim=None):
        shape = self.shape
        if dim is None:
            return shape
        d = to_int(dim, "size", "dim")
        if not -len(shape) <= d < max(len(shape), 1):
            raise IndexError(f"Dimension out of range (expected to be in range of [{-max(len(shape), 1)}, "
                             f"{max(len(shape), 1) - 1}], but got {d})")
        return shape[d]

    def dim(self):
        return self._value.ndim - len(self._levels)

    ndimension = dim

    @property
    def ndim(self):
        return self.dim()

    def numel(self):
        return math.prod(self.shape)

    nelement = numel

    @property
    def dtype(self):
        return self._value.dtype

    @property
    def device(self):
        return self._value.device

    @property
    def layout(self):
        return self._value.layout

    @property
    def requires_grad(self):
        return self._value.requires_grad

    @property
    def is_leaf(self):
        return self._value.is_leaf

    @property
    def grad_fn(self):
        return self._value.grad_fn

    @property
    def grad(self):
        g = self._value.grad
        return None if g is None else BatchedTensor(g, self._levels)

    @property
    def data(self):
        return BatchedTensor(self._value.data, self._levels)

    def is_floating_point(self):
        return self._value.is_floating_point()

    def is_complex(self):
        return self._value.is_complex()

    def element_size(self):
        return self._value.element_size()

    def stride(self, dim=None):
        strides = tuple(self._value.stride())[len(self._levels):]
        return strides if dim is None else strides[dim]

    def is_contiguous(self, memory_format=None):
        return self._value.is_contiguous()

    def detach(self):
        return BatchedTensor(self._value.detach(), self._levels)

    def requires_grad_(self, requires_grad=True):
        self._value.requires_grad_(requires_grad)
        return self

    def __len__(self):
        if self.dim() == 0:
            raise TypeError("len() of a 0-d tensor")
        return self.shape[0]

    def __iter__(self):
        if self.dim() == 0:
            raise TypeError("iteration over a 0-d tensor")
        return iter(_method("unbind", self))

    def __repr__(self):
        return f"BatchedTensor(levels={self._levels}, value={self._value!r})"

    __hash__ = object.__hash__

    # -- data-dependent control flow: torch's errors
    def _control_flow(self, *args, **kwargs):
        raise RuntimeError("vmap: It looks like you're attempting to use a Tensor in some data-dependent control "
                           "flow. We don't support that yet, please shout over at "
                           "https://github.com/pytorch/functorch/issues/257 .")

    __bool__ = __float__ = __int__ = __index__ = __complex__ = _control_flow

    def item(self):
        raise RuntimeError("vmap: It looks like you're calling .item() on a Tensor. We don't support vmap over "
                           "calling .item() on a Tensor, please try to rewrite what you're doing with other "
                           "operations. If error is occurring somewhere inside PyTorch internals, please file a bug "
                           "report.")

    def tolist(self):
        raise RuntimeError("vmap: .tolist() reads the values of a batched Tensor (data-dependent); return the "
                           "tensor from the vmapped function and call .tolist() outside vmap.")

    numpy = tolist

    def backward(self, *args, **kwargs):
        raise RuntimeError("vmap: backward() cannot be called inside vmap; use dyngrad.func.grad / vjp inside the "
                           "vmapped function (per-sample gradients: vmap(grad(f))).")

    # -- every other method: the dispatcher
    def __getattr__(self, name):
        if name.startswith("__") and name.endswith("__") or name.startswith("_pybind11"):
            raise AttributeError(name)
        if not hasattr(Tensor, name):
            raise AttributeError(f"'Tensor' object has no attribute '{name}'")
        # func3: the lookup is made once per name: the method (or the property) is set on the class, so the next
        # x.name finds it without __getattr__ (bench/vmap.py rows-2000: ~3 us of each op under vmap)
        attr = inspect.getattr_static(Tensor, name)
        if isinstance(attr, property):              # T, mT, ...: the property's getter through the dispatcher
            setattr(BatchedTensor, name, property(functools.partial(_property, name, attr.fget)))
        else:
            setattr(BatchedTensor, name, _make_method(name))
        return getattr(self, name)

    def __setitem__(self, index, value):
        _setitem(self, index, value)

    def __getitem__(self, index):
        return _method("__getitem__", self, index)


def _method(name, self, *args, **kwargs):
    """Tensor.name(self, *args, **kwargs) for a BatchedTensor self."""
    if name.endswith("_") and not name.endswith("__"):
        return _inplace(name, self, args, kwargs)
    found = _METHOD_KEYS.get(name)
    if found is None:
        found = _METHOD_KEYS[name] = _method_key(name)
    return _dispatch(found[0], found[1], (self,) + args, kwargs)


_METHOD_KEYS = {}          # func3: method name -> (dispatcher key, fn), found once per name


def _method_key(name):
    attr = METHODS.get(name) or getattr(Tensor, name)
    key = getattr(attr, "_batching_name", None)
    if key is not None:
        return key, attr.__wrapped__
    # a method of the core's Tensor: called per row by the fallback, or by a rule of the same name

    def fn(t, *a, **k):
        return getattr(t, name)(*a, **k)
    fn.__name__ = name
    return name, fn


def _method_pointwise(name, self, args):
    """vmapsp: Tensor.name(*args) as a pointwise op on the innermost level, dispatch skipped: the result, False
    when name's rule is not _pointwise, None when the call needs the general path."""
    fn = _FAST_FNS.get(name)
    if fn is None:
        fn = _fast_fn(name)
    return _pointwise_direct(fn, self, args) if fn else False


def _make_method(name):
    def method(self, *args, **kwargs):
        if not kwargs and len(args) <= 1:        # vmapsp: a pointwise op on the innermost level, dispatch skipped
            out = _method_pointwise(name, self, args)
            if out is not None and out is not False:
                return out
            if out is None:                      # a pointwise op the direct path declines: the general path
                pass
            elif args:                           # vmapsp: x.unsqueeze(d) and the other one-dim ops
                d = args[0]
                if type(d) is int:
                    fn = _FAST_DIMS.get(name)
                    if fn is None:
                        fn = _fast_dims_fn(name)
                    if fn:
                        out = _dims_direct(fn[0], fn[1], self, d)
                        if out is not None:
                            return out
            else:                                # vmapsp: x.sum() and the other reductions over every dim
                fn = _FAST_REDUCTIONS.get(name)
                if fn is None:
                    fn = _fast_reduction(name)
                if fn:
                    out = _reduce_direct(fn, self)
                    if out is not None:
                        return out
        return _method(name, self, *args, **kwargs)
    method.__name__ = method.__qualname__ = name
    return method


_FAST_FNS = {}             # vmapsp: method name -> the op's fn when its rule is _pointwise (False: it is not)


def _fast_fn(name):
    """The fn _dispatch would hand to _pointwise for Tensor.name, or False when the call must go through _dispatch
    (in-place, random, an op drawing inside, any rule but _pointwise)."""
    fn = False
    if not (name.endswith("_") and not name.endswith("__")):
        found = _METHOD_KEYS.get(name)
        if found is None:
            found = _METHOD_KEYS[name] = _method_key(name)
        key = found[0]
        if RULES.get(key) is _pointwise and key not in RANDOM and key not in DRAWS_INSIDE:
            fn = found[1]
    _FAST_FNS[name] = fn
    return fn


_FAST_REDUCTIONS = {}      # vmapsp: method name -> the op's fn when its rule is _dim_rule() (False: it is not)


def _fast_reduction(name):
    fn = False
    if not name.endswith("_"):
        found = _METHOD_KEYS.get(name)
        if found is None:
            found = _METHOD_KEYS[name] = _method_key(name)
        if found[0] in _REDUCTIONS and found[0] not in RANDOM and found[0] not in DRAWS_INSIDE:
            fn = found[1]
    _FAST_REDUCTIONS[name] = fn
    return fn


def _reduce_direct(fn, x):
    """vmapsp: _dispatch's answer for x.name() with the rule _dim_rule() (_all_dims_fast's), without _dispatch and
    the rule's wrappers. None: the general path."""
    was, STATE.active = STATE.active, False
    try:
        return _all_dims_fast(fn, x, "dim", True)
    finally:
        STATE.active = was


_FAST_DIMS = {}            # vmapsp: method name -> (fn, extra_rank) when x.name(d) is _dims_rule's (False: not)


def _fast_dims_fn(name):
    """(fn, extra_rank) when Tensor.name's rule is a _dims_rule of one dim parameter, fn's second parameter, every
    later one having a default: x.name(d) for an int d then binds d to it. False otherwise."""
    out = False
    if not name.endswith("_"):
        found = _METHOD_KEYS.get(name)
        if found is None:
            found = _METHOD_KEYS[name] = _method_key(name)
        key, fn = found
        rule = RULES.get(key)
        dims = getattr(getattr(rule, "_inner", None), "_dims", None)
        sig = _signature(fn) if dims is not None else None
        if sig and key not in RANDOM and key not in DRAWS_INSIDE:
            params, extra_rank, aligned = dims
            ps = list(sig.parameters.values())
            if (len(params) == 1 and not aligned and len(ps) >= 2 and ps[1].name == params[0] and
                    ps[1].kind == inspect.Parameter.POSITIONAL_OR_KEYWORD and
                    ps[0].kind == inspect.Parameter.POSITIONAL_OR_KEYWORD and
                    all(q.default is not inspect.Parameter.empty or q.kind in (
                        inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD) for q in ps[2:])):
                out = (fn, extra_rank)
    _FAST_DIMS[name] = out
    return out


def _dims_direct(fn, extra_rank, x, d):
    """vmapsp: _dims_rule's answer for x.name(d), d an int, without binding the signature per call. None: the
    general path (which raises for a dim out of range)."""
    levels = x._levels
    open_ = STATE.levels
    if len(levels) != 1 or not open_ or open_[-1][0] != levels[0]:
        return None
    v = x._value
    rank = v.ndim - 1 + extra_rank
    if rank == 0 or not -rank <= d < rank:
        return None
    was, STATE.active = STATE.active, False
    try:
        out = fn(v, d % rank + 1)
    finally:
        STATE.active = was
    return BatchedTensor(out, levels) if type(out) is Tensor else _wrap(out, levels)


def _pointwise_direct(fn, x, args):
    """vmapsp: _dispatch's answer for x.name(*args) with a pointwise rule, without _dispatch, _pointwise and the
    wrapping helpers (bench/vmap.py rows-2000: ~3 us an op, Intel Xeon family 6 model 167): x batched at the
    innermost open level only, and no argument or one that needs no alignment (a BatchedTensor of the same levels
    and rank, an unbatched tensor of fewer dims, an int or a float; at rank 0 the same dtype, as _pointwise_fast).
    None: the general path."""
    levels = x._levels
    open_ = STATE.levels
    if len(levels) != 1 or not open_ or open_[-1][0] != levels[0]:
        return None
    v = x._value
    if args:
        y = args[0]
        ty = type(y)
        if ty is BatchedTensor:
            ov = y._value
            if y._levels != levels or ov.ndim != v.ndim or (v.ndim == 1 and ov.dtype != v.dtype):
                return None
            y = ov
        elif ty is float or ty is int:
            pass
        elif isinstance(y, Tensor):
            if y.ndim >= v.ndim or (v.ndim == 1 and y.dtype != v.dtype):
                return None
        else:
            return None
    was, STATE.active = STATE.active, False
    try:
        out = fn(v, y) if args else fn(v)
    finally:
        STATE.active = was
    return BatchedTensor(out, levels) if type(out) is Tensor else _wrap(out, levels)


def _property(name, fget, self):
    return _dispatch(name, fget, (self,), {})


_DUNDERS = ("__add__", "__radd__", "__sub__", "__rsub__", "__mul__", "__rmul__", "__truediv__", "__rtruediv__",
            "__floordiv__", "__rfloordiv__", "__mod__", "__rmod__", "__pow__", "__rpow__", "__matmul__",
            "__rmatmul__", "__neg__", "__pos__", "__abs__", "__invert__", "__and__", "__rand__", "__or__", "__ror__",
            "__xor__", "__rxor__", "__eq__", "__ne__", "__lt__", "__le__", "__gt__", "__ge__", "__lshift__",
            "__rshift__", "__rdiv__", "__rlshift__", "__rrshift__")


def _make_dunder(name):
    def dunder(self, *args):
        if len(args) <= 1:                       # vmapsp: as _make_method's
            out = _method_pointwise(name, self, args)
            if out is not None and out is not False:
                return out
        return _method(name, self, *args)
    dunder.__name__ = name
    return dunder


for _name in _DUNDERS:
    setattr(BatchedTensor, _name, _make_dunder(_name))
for _name, _base in (("__iadd__", "add_"), ("__isub__", "sub_"), ("__imul__", "mul_"), ("__itruediv__", "div_"),
                     ("__iand__", "bitwise_and_"), ("__ior__", "bitwise_or_"), ("__ixor__", "bitwise_xor_"),
                     ("__ifloordiv__", "floor_divide_"), ("__imod__", "remainder_"),
                     ("__ilshift__", "bitwise_left_shift_"), ("__irshift__", "bitwise_right_shift_")):
    setattr(BatchedTensor, _name, (lambda base: lambda self, other: _method(base, self, other))(_base))


# ----- physical tensors ---------------------------------------------------------------------------------------
def _is_tensor(x):
    return isinstance(x, (Tensor, BatchedTensor))


def _levels_of(values):
    """The sorted union of the levels of the BatchedTensors among values (tensors, lists/tuples of them)."""
    levels = set()
    for v in values:
        if isinstance(v, BatchedTensor):
            levels.update(v._levels)
        elif isinstance(v, (tuple, list)):
            for w in v:
                if isinstance(w, BatchedTensor):
                    levels.update(w._levels)
    if levels:
        open_ = {lv[0] for lv in STATE.levels}
        if not levels <= open_:
            _size_of(min(levels - open_))      # raises: a BatchedTensor escaped its vmap
    return tuple(sorted(levels))


def _check_open(levels):
    """Raises if a level of `levels` (a BatchedTensor's) is not open (the tensor escaped its vmap)."""
    open_ = STATE.levels
    if len(levels) == 1 and open_ and open_[-1][0] == levels[0]:
        return                                  # the innermost level: the common case
    _levels_of([BatchedTensor(None, levels)])


def _logical_rank(x):
    return x.dim() if isinstance(x, BatchedTensor) else x.ndim


def _phys(x, levels, rank=None, expand=False):
    """x as a physical tensor with the dims of `levels` in front (size 1 for a level x lacks, or that level's
    size with expand) and its logical dims left-padded with size-1 dims to `rank`."""
    if isinstance(x, BatchedTensor):
        v, have = x._value, x._levels
    else:
        v, have = x, ()
    r = v.ndim - len(have)
    if have != levels:
        j = 0
        for pos, level in enumerate(levels):
            if j < len(have) and have[j] == level:
                j += 1
            else:
                v = v.unsqueeze(pos)
        if j != len(have):
            raise RuntimeError("vmap: internal error: a tensor is batched at a level that is not open")
    nb = len(levels)
    if rank is not None and rank > r:
        v = v.reshape(tuple(v.shape[:nb]) + (1,) * (rank - r) + tuple(v.shape[nb:]))
    if expand and levels:
        sizes = tuple(_size_of(level) for level in levels)
        if tuple(v.shape[:nb]) != sizes:
            v = v.expand(sizes + tuple(v.shape[nb:]))
    return v


def _wrap(out, levels):
    """A rule's physical result(s) as BatchedTensors of `levels`."""
    if not levels:
        return out
    if isinstance(out, Tensor):
        return BatchedTensor(out, levels)
    if isinstance(out, tuple):
        items = [_wrap(o, levels) for o in out]
        return type(out)(*items) if hasattr(out, "_fields") else tuple(items)
    if isinstance(out, list):
        return [_wrap(o, levels) for o in out]
    return out


def _batch_sizes(levels):
    return tuple(_size_of(level) for level in levels)


def _fold(v, nb):
    """v with its nb leading batch dims flattened into one (first)."""
    return v.reshape((math.prod(v.shape[:nb]),) + tuple(v.shape[nb:]))


def _unfold(v, sizes):
    return v.reshape(tuple(sizes) + tuple(v.shape[1:]))


# ----- the dispatcher -----------------------------------------------------------------------------------------
def _key_of(row):
    """The dispatcher's name of a row: the public name, or KIND.name for rows that are only nn.functional's,
    special's or linalg's (F.unfold is not Tensor.unfold)."""
    return row.name if set(row.kinds) & {"fn", "method", "op"} else row.kinds[0] + "." + row.name


_DRAWS = {"rand", "randn", "randint", "randperm", "bernoulli_mask"}
RANDOM = {_key_of(r) for r in table.rows() if _DRAWS & set(r.uses)} | {
    r.inplace for r in table.rows() if r.inplace and _DRAWS & set(r.uses)}
RULES = {}                # key -> rule(fn, args, kwargs): the batching rules
_WARNED = set()
FALLBACKS = []            # the keys the fallback loop ran for (tests/test_vmap.py reads it; cleared by them)


def _has_batched(args, kwargs):
    for a in itertools.chain(args, kwargs.values()):
        if isinstance(a, BatchedTensor):
            return True
        if isinstance(a, (tuple, list)):
            for b in a:
                if isinstance(b, BatchedTensor):
                    return True
    return False


def _randomness():
    modes = {lv[2] for lv in STATE.levels}
    return "error" if "error" in modes else modes.pop() if len(modes) == 1 else "mixed"


def _random_error():
    raise RuntimeError("vmap: called random operation while in randomness error mode. Please either use the 'same' "
                       "or 'different' randomness flags on vmap or perform the randomness operation out of vmap")


def _draws(key, args, kwargs):
    """Whether this call of a random op draws (dropout in eval mode or with p=0 does not)."""
    if "dropout" in key:
        bound = _bind(_DROPOUT_SIG, args, kwargs)
        if "alpha" in key:
            bound = _alpha_sig(args, kwargs)
        return bound.get("p", 0.5) != 0 and bool(bound.get("training", True))
    return True


_DROPOUT_SIG = inspect.Signature([inspect.Parameter(n, inspect.Parameter.POSITIONAL_OR_KEYWORD, default=d)
                                  for n, d in (("input", None), ("p", 0.5), ("training", True), ("inplace", False))])


def _sdpa_dropout(args, kwargs):
    p = kwargs["dropout_p"] if "dropout_p" in kwargs else args[4] if len(args) > 4 else 0.0
    return p != 0


# ops that are not random ops but draw inside a fused kernel (attention's dropout, from a hash of one seed and the
# element's position, so the rows of a batched call draw different numbers): whether a call draws
DRAWS_INSIDE = {"F.scaled_dot_product_attention": _sdpa_dropout, "scaled_dot_product_attention": _sdpa_dropout}


def _fused_draws(key, batched):
    """randomness= for a fused kernel that draws: 'error' refuses, as for any random op; 'different' is what the
    kernel does on a batched call; an unbatched call under 'different' (one draw broadcast to every row) or a
    batched one under 'same' (one mask for all rows) is what the kernel cannot give, and is refused, not run."""
    mode = _randomness()
    if mode == "error":
        _random_error()
    if (mode == "different" and not batched) or (mode != "different" and batched):
        raise RuntimeError(f"vmap: {key} with dropout_p > 0 and randomness='{mode}' on "
                           f"{'a batched' if batched else 'an unbatched'} input is not supported (its fused kernel "
                           f"draws one mask per row of a batched call: use randomness='different' with a batched "
                           f"input, or dropout_p=0).")


def _bind(sig, args, kwargs):
    try:
        b = sig.bind_partial(*args, **kwargs)
    except TypeError:
        return {}
    return b.arguments


_INPLACE_ERROR = ("vmap: inplace arithmetic(self, *extra_args) is not possible because there exists a Tensor `other` "
                  "in extra_args that has more elements than `self`. This happened due to `other` being vmapped over "
                  "but `self` not being vmapped over in a vmap. Please try to use out-of-place operators instead of "
                  "inplace operators.")


def _writes_into_first(key):
    return key.endswith("_") and not key.endswith("__") or key in (
        "__setitem__", "__iadd__", "__isub__", "__imul__", "__itruediv__", "__ifloordiv__", "__imod__", "__ipow__",
        "__iand__", "__ior__", "__ixor__", "__ilshift__", "__irshift__", "__imatmul__")


def _dispatch(key, fn, args, kwargs):
    """A public call made while a vmap runs (Note [Batching at the public API])."""
    first = type(args[0]) is BatchedTensor if args else False      # func3: a method's call, the common case
    batched = first or _has_batched(args, kwargs)
    if batched and not first and args and _writes_into_first(key):
        raise RuntimeError(_INPLACE_ERROR)      # an unbatched tensor cannot hold a batched result
    if key in RANDOM and _draws(key, args, kwargs):
        mode = _randomness()
        if mode == "error":
            _random_error()
        if not batched:
            return _random_factory(key, fn, args, kwargs, mode)
        rule = RANDOM_RULES.get(key)
        was, STATE.active = STATE.active, False
        try:
            if mode == "different":
                return rule(fn, args, kwargs) if rule is not None else _loop(key, fn, args, kwargs)
            same = SAME_RULES.get(key)
            if same is None:
                raise RuntimeError(f"vmap: {key} with randomness='{mode}' on a batched input is not supported "
                                   "(only 'different' and 'error' are).")
            return same(fn, args, kwargs)
        finally:
            STATE.active = was
    if key in DRAWS_INSIDE and DRAWS_INSIDE[key](args, kwargs):
        _fused_draws(key, batched)
    if not batched:
        return fn(*args, **kwargs)
    rule = RULES.get(key)
    was, STATE.active = STATE.active, False
    try:
        return rule(fn, args, kwargs) if rule is not None else _loop(key, fn, args, kwargs)
    finally:
        STATE.active = was


def _loop(key, fn, args, kwargs, quiet=False):
    """The fallback: fn once per row of the batch, the results stacked (Note [vmap by batching rules])."""
    FALLBACKS.append(key)
    if not quiet and key not in _WARNED:
        _WARNED.add(key)
        warn(f"vmap: there is no batching rule for {key}; it runs once per row of the batch (a loop). Its values "
             "and gradients are right, only slower.", UserWarning)
    levels = _levels_of(list(args) + list(kwargs.values()))
    sizes = _batch_sizes(levels)
    n = math.prod(sizes)
    if n == 0:
        raise RuntimeError(f"vmap: {key} has no batching rule, and its fallback cannot run over a batch of size 0.")

    def rows(x):
        if isinstance(x, BatchedTensor):
            return _fold(_phys(x, levels, expand=True), len(levels))
        if isinstance(x, (tuple, list)) and any(isinstance(y, BatchedTensor) for y in x):
            return [rows(y) for y in x]
        return x

    folded_args = [rows(a) for a in args]
    folded_kwargs = {k: rows(v) for k, v in kwargs.items()}
    flags_args = [_batched_flag(a) for a in args]
    flags_kwargs = {k: _batched_flag(v) for k, v in kwargs.items()}

    def row_of(x, flag, i):
        if flag is True:
            return x[i]
        if isinstance(flag, list):
            return type(x)(row_of(y, f, i) for y, f in zip(x, flag))
        return x
    results = []
    for i in builtins.range(n):
        results.append(fn(*[row_of(a, f, i) for a, f in zip(folded_args, flags_args)],
                          **{k: row_of(v, flags_kwargs[k], i) for k, v in folded_kwargs.items()}))
    return _stack_rows(results, sizes, levels, key)


def _batched_flag(x):
    if isinstance(x, BatchedTensor):
        return True
    if isinstance(x, (tuple, list)) and any(isinstance(y, BatchedTensor) for y in x):
        return [_batched_flag(y) for y in x]
    return False


def _stack_rows(results, sizes, levels, key):
    first = results[0]
    if isinstance(first, Tensor):
        return BatchedTensor(_unfold(_C.stack(list(results), 0), sizes), levels)
    if isinstance(first, (tuple, list)):
        items = [_stack_rows([r[k] for r in results], sizes, levels, key) for k in builtins.range(len(first))]
        if hasattr(first, "_fields"):
            return type(first)(*items)
        return type(first)(items) if isinstance(first, list) else tuple(items)
    if all(r == first for r in results[1:]):
        return first
    raise RuntimeError(f"vmap: {key} returned a {type_name(first)} that differs between the rows of the batch "
                       "(data-dependent); it cannot be batched.")


def _random_factory(key, fn, args, kwargs, mode):
    """A random op with no batched input: 'same' draws once, 'different' once per row of every open level."""
    if mode == "same":
        return fn(*args, **kwargs)
    if mode != "different":
        raise RuntimeError("vmap: nested vmaps with different randomness= modes are not supported.")
    levels = tuple(lv[0] for lv in STATE.levels)
    sizes = _batch_sizes(levels)
    STATE.active = False
    try:
        if key in ("rand", "randn") and not any(isinstance(a, str) for a in args):
            size = args[0] if len(args) == 1 and isinstance(args[0], (tuple, list)) else args
            return BatchedTensor(fn(*(tuple(sizes) + tuple(size)), **kwargs), levels)
        return _stack_rows([fn(*args, **kwargs) for _ in builtins.range(math.prod(sizes))], sizes, levels, key)
    finally:
        STATE.active = True


register(_dispatch)


# ----- rules: pointwise ---------------------------------------------------------------------------------------
def _pointwise(fn, args, kwargs):
    """Operands aligned (levels in front, logical dims left-padded to one rank): broadcasting does the rest."""
    if not kwargs and len(args) <= 2:      # func3: the common cases without aligning (~10 us an op less)
        fast = _pointwise_fast(fn, args)
        if fast is not None:
            return fast
    tensors = [a for a in itertools.chain(args, kwargs.values()) if _is_tensor(a)]
    levels = _levels_of(tensors)
    ranks = [_logical_rank(t) for t in tensors]
    rank = builtins.max(ranks)
    # a 0-d operand does not promote a dimensioned one's dtype (torch's rule); padded, it would: the loop keeps
    # that case exact. So does it for 0-d rows with an unbatched 0-d tensor (logically two 0-d operands that
    # promote each other; physically the rows are dimensioned and the 0-d tensor would not promote them)
    if len({t.dtype for t in tensors}) > 1 and 0 in ranks and (
            rank > 0 or any(not isinstance(t, BatchedTensor) for t in tensors)):
        return _loop("pointwise", fn, args, kwargs, quiet=True)

    def conv(a):
        if isinstance(a, BatchedTensor):
            return _phys(a, levels, rank)
        if isinstance(a, Tensor):
            return a if a.ndim == 0 else _phys(a, levels, rank)
        return a
    return _wrap(fn(*[conv(a) for a in args], **{k: conv(v) for k, v in kwargs.items()}), levels)


def _pointwise_fast(fn, args):
    """func3: fn(*args) for a unary op on a BatchedTensor, or a binary one whose operands need no alignment: one
    BatchedTensor with a number, a 0-d tensor or a tensor of no more dims (broadcasting from the right already
    aligns it), or two BatchedTensors of the same levels and logical rank. None when the general path must run
    (0-d operands of different dtypes promote differently once the batch dims make one dimensioned)."""
    x = args[0]
    if len(args) == 1:
        if type(x) is not BatchedTensor:
            return None
        _check_open(x._levels)
        return _wrap(fn(x._value), x._levels)
    y = args[1]
    if type(x) is BatchedTensor:
        b, other = x, y
    elif type(y) is BatchedTensor:
        b, other = y, x
    else:
        return None
    levels, v = b._levels, b._value
    rank = v.ndim - len(levels)
    if type(other) is BatchedTensor:
        ov = other._value
        if other._levels != levels or ov.ndim != v.ndim or (rank == 0 and ov.dtype != v.dtype):
            return None
        _check_open(levels)
        return _wrap(fn(x._value, y._value), levels)
    if isinstance(other, Tensor):
        if other.ndim > rank or (rank == 0 and other.dtype != v.dtype):
            return None
    elif not isinstance(other, (int, float, complex, bool)):
        return None
    _check_open(levels)
    return _wrap(fn(v, y) if b is x else fn(x, v), levels)


def _first_only(fn, args, kwargs):
    """An op that treats its first argument's leading dims as a batch and reads only the last ones (layer_norm
    with unbatched weights, pad, embedding with batched indices): called on the physical tensor as it is."""
    others = [a for a in itertools.chain(args[1:], kwargs.values()) if isinstance(a, BatchedTensor) or (
        isinstance(a, (tuple, list)) and any(isinstance(b, BatchedTensor) for b in a))]
    if others or not isinstance(args[0], BatchedTensor):
        return None
    x = args[0]
    return _wrap(fn(x._value, *args[1:], **kwargs), x._levels)


def _or_loop(key, rule):
    def run(fn, args, kwargs):
        out = rule(fn, args, kwargs)
        return _loop(key, fn, args, kwargs) if out is None else out
    run._inner = rule          # vmapsp: what the methods' fast paths read (_fast_dims_fn)
    return run


# ----- rules: dims ----------------------------------------------------------------------------------------------
_SIGS = {}


def _signature(fn):
    sig = _SIGS.get(fn)
    if sig is None:
        try:
            sig = inspect.signature(fn)
        except (TypeError, ValueError):
            sig = False
        _SIGS[fn] = sig
    return sig


def _bound_args(fn, args, kwargs):
    """fn's arguments by name, defaults applied (None if they do not bind: the loop raises the op's error)."""
    sig = _signature(fn)
    if not sig:
        return None
    try:
        bound = sig.bind(*args, **kwargs)
    except TypeError:
        return None
    bound.apply_defaults()
    return bound


def _shift_dim(d, rank, nb):
    d = to_int(d, "vmap", "dim")
    if not -rank <= d < rank:
        return None
    return d % rank + nb


def _dim_rule(param="dim", none_means_all=True, keeps_rank_zero=False, new_dim=False):
    """Ops with a dim argument (reductions, softmax, cumsum, ...): the dim shifted past the batch dims; None (or
    no dim) is every logical dim."""
    def rule(fn, args, kwargs):
        if not kwargs and len(args) == 1 and type(args[0]) is BatchedTensor:   # func3: x.sum(), no binding
            out = _all_dims_fast(fn, args[0], param, none_means_all)
            if out is not None:
                return out
        sig = _signature(fn)
        if not sig:
            return None
        try:
            bound = sig.bind(*args, **kwargs)
        except TypeError:
            return None
        names = list(sig.parameters)
        x = bound.arguments[names[0]]
        if not isinstance(x, BatchedTensor) or _has_batched(args[1:], kwargs):
            return None
        nb, rank = len(x._levels), x.dim()
        if param not in sig.parameters:
            return None
        default = sig.parameters[param].default
        d = bound.arguments.get(param, default)
        if rank == 0:
            # a 0-d row reduced over all its dims (vmapB): the batch given one trailing dim of size 1 to reduce
            if not none_means_all or new_dim or not (d is None or (isinstance(d, (tuple, list)) and len(d) == 0
                                                                  and default == ())):
                return None
            bound.arguments[names[0]] = x._value.unsqueeze(-1)
            bound.arguments[param] = nb
            if "keepdim" in sig.parameters:
                bound.arguments["keepdim"] = False
            return _wrap(fn(*bound.args, **bound.kwargs), x._levels)
        if d is inspect.Parameter.empty:
            return None                        # a required dim is missing: the fallback raises the op's error
        if d is None or (isinstance(d, (tuple, list)) and len(d) == 0 and default == ()):
            if not none_means_all:
                return None
            new = tuple(builtins.range(nb, nb + rank))
        elif isinstance(d, (tuple, list)):
            new = tuple(_shift_dim(e, rank, nb) for e in d)
            if None in new:
                return None
        else:
            new = _shift_dim(d, rank + 1 if new_dim else rank, nb)
            if new is None:
                return None
        bound.arguments[names[0]] = x._value
        bound.arguments[param] = new
        return _wrap(fn(*bound.args, **bound.kwargs), x._levels)
    return rule


_DIM_DEFAULTS = {}


def _all_dims_fast(fn, x, param, none_means_all):
    """func3: _dim_rule's answer for fn(x) with no other argument when param defaults to None (every logical dim):
    fn(physical, param=the logical dims), without binding the signature per call. None: the general path."""
    key = (fn, param)
    ok = _DIM_DEFAULTS.get(key)
    if ok is None:
        sig = _signature(fn)
        p = sig.parameters.get(param) if sig else None
        names = list(sig.parameters) if sig else []
        ok = _DIM_DEFAULTS[key] = bool(
            p is not None and names and names[0] != param and p.default is None and
            p.kind in (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY) and
            all(q.default is not inspect.Parameter.empty or q.kind in (inspect.Parameter.VAR_POSITIONAL,
                                                                     inspect.Parameter.VAR_KEYWORD)
                for q in list(sig.parameters.values())[1:]))
    if not ok or not none_means_all:
        return None
    nb, rank = len(x._levels), x.dim()
    if rank == 0:
        return None
    _check_open(x._levels)
    return _wrap(fn(x._value, **{param: tuple(builtins.range(nb, nb + rank))}), x._levels)


def _argminmax(fn, args, kwargs):
    """argmax/argmin: with no dim, the index into the flattened row."""
    sig = _signature(fn)
    bound = sig.bind(*args, **kwargs)
    names = list(sig.parameters)
    x = bound.arguments[names[0]]
    if bound.arguments.get("dim") is not None:
        return _dim_rule()(fn, args, kwargs)
    if bound.arguments.get("keepdim") or not isinstance(x, BatchedTensor) or x.dim() == 0:
        return None
    nb = len(x._levels)
    flat = x._value.reshape(tuple(x._value.shape[:nb]) + (-1,))
    return _wrap(fn(flat, nb), x._levels)


# ----- rules: shape ops -----------------------------------------------------------------------------------------
def _sizes_from(args):
    if len(args) == 1 and isinstance(args[0], (tuple, list, Size)):
        return tuple(args[0])
    return tuple(args)


def _only_first_batched(args, kwargs):
    return isinstance(args[0], BatchedTensor) and not _has_batched(args[1:], kwargs)


def _reshape(fn, args, kwargs):
    if not _only_first_batched(args, kwargs):
        return None
    x = args[0]
    shape = _sizes_from(list(args[1:]) + list(kwargs.values()))
    nb = len(x._levels)
    return BatchedTensor(x._value.reshape(tuple(x._value.shape[:nb]) + tuple(shape)), x._levels)


def _reshape_as(fn, args, kwargs):
    x, other = args[0], args[1]
    if not isinstance(x, BatchedTensor) or isinstance(other, BatchedTensor):
        return None
    nb = len(x._levels)
    return BatchedTensor(x._value.reshape(tuple(x._value.shape[:nb]) + tuple(other.shape)), x._levels)


def _permute(fn, args, kwargs):
    if not _only_first_batched(args, kwargs):
        return None
    x = args[0]
    dims = _sizes_from(list(args[1:]) + list(kwargs.values()))
    nb, rank = len(x._levels), x.dim()
    if len(dims) != rank:
        return None
    new = [_shift_dim(d, rank, nb) for d in dims]
    if None in new:
        return None
    return BatchedTensor(x._value.permute(tuple(builtins.range(nb)) + tuple(new)), x._levels)


def _dims_rule(*params, extra_rank=0, aligned=()):
    """Ops whose named int arguments are all dims (transpose, movedim, flatten, unsqueeze, select, narrow, ...),
    each shifted past the batch dims; the tensors named in `aligned` (slice_scatter's src) are aligned with the
    input, of the same rank."""
    def rule(fn, args, kwargs):
        bound = _bound_args(fn, args, kwargs)
        if bound is None:
            return None
        sig = bound.signature
        names = list(sig.parameters)
        x = bound.arguments[names[0]]
        others = [bound.arguments[p] for p in aligned]
        if aligned:
            levels = _levels_of([x] + others)
            if not all(_is_tensor(o) for o in others):
                return None
            x = BatchedTensor(_phys(x, levels, expand=True), levels)
            for p in aligned:
                bound.arguments[p] = _phys(bound.arguments[p], levels, expand=True)
        elif not _only_first_batched(args, kwargs):
            return None
        nb, rank = len(x._levels), x.dim() + extra_rank
        if rank == 0:
            return None
        for p in params:
            d = bound.arguments[p]
            if isinstance(d, tuple) and len(d) == 1 and isinstance(d[0], (tuple, list)):
                d = tuple(d[0])                  # flip(x, (0, 1)) through a *dims signature
            if d is None or isinstance(d, bool) or not isinstance(d, (int, tuple, list)):
                return None
            if isinstance(d, (tuple, list)):
                new = [_shift_dim(e, rank, nb) for e in d]
                if None in new:
                    return None
                bound.arguments[p] = type(d)(new)
            else:
                new = _shift_dim(d, rank, nb)
                if new is None:
                    return None
                bound.arguments[p] = new
        bound.arguments[names[0]] = x._value
        return _wrap(fn(*bound.args, **bound.kwargs), x._levels)
    rule._dims = (params, extra_rank, aligned)
    return rule


def _t(fn, args, kwargs):
    x = args[0]
    if x.dim() < 2:
        return x
    nb = len(x._levels)
    return BatchedTensor(x._value.transpose(nb, nb + 1), x._levels)


def _squeeze(fn, args, kwargs):
    if not _only_first_batched(args, kwargs):
        return None
    x = args[0]
    nb, rank = len(x._levels), x.dim()
    dim = args[1] if len(args) > 1 else kwargs.get("dim")
    shape = x.shape
    if dim is None:
        dims = [d for d in builtins.range(rank) if shape[d] == 1]
    else:
        dims = list(dim) if isinstance(dim, (tuple, list)) else [dim]
        if rank == 0:
            return x
        dims = [_shift_dim(d, rank, nb) for d in dims]
        if None in dims:
            return None
        dims = [d - nb for d in dims if shape[d - nb] == 1]
    keep = tuple(x._value.shape[:nb]) + tuple(s for d, s in enumerate(shape) if d not in dims)
    return BatchedTensor(x._value.reshape(keep), x._levels)


def _expand(fn, args, kwargs):
    if not _only_first_batched(args, kwargs):
        return None
    x = args[0]
    sizes = _sizes_from(list(args[1:]) + list(kwargs.values()))
    nb, rank = len(x._levels), x.dim()
    if len(sizes) < rank:
        return None
    v = _phys(x, x._levels, len(sizes))
    batch = tuple(v.shape[:nb])
    want = tuple(v.shape[nb + i] if to_int(s, "expand", "size") == -1 else s for i, s in enumerate(sizes))
    return BatchedTensor(v.expand(batch + want), x._levels)


def _expand_as(fn, args, kwargs):
    x, other = args[0], args[1]
    return _expand(fn, (x, tuple(other.shape)), {})


def _tensor_list_rule(new_dim):
    """cat (new_dim False) and stack: every tensor aligned to the union of levels (expanded: sizes must agree),
    the dim shifted."""
    def rule(fn, args, kwargs):
        sig = _signature(fn)
        bound = sig.bind(*args, **kwargs)
        bound.apply_defaults()
        names = list(sig.parameters)
        tensors = list(bound.arguments[names[0]])
        levels = _levels_of(tensors)
        ranks = {_logical_rank(t) for t in tensors if not (_logical_rank(t) == 1 and t.shape[0] == 0)}
        if len(ranks) != 1:
            return None
        rank = ranks.pop()
        if rank == 0 and not new_dim:
            return None
        d = _shift_dim(bound.arguments[names[1]], rank + 1 if new_dim else rank, len(levels))
        if d is None:
            return None
        bound.arguments[names[0]] = [_phys(t, levels, expand=True) for t in tensors]
        bound.arguments[names[1]] = d
        return _wrap(fn(*bound.args, **bound.kwargs), levels)
    return rule


def _getitem(fn, args, kwargs):
    """Basic indexing (ints, slices, None, Ellipsis, unbatched tensors that stay adjacent): the batch dims get a
    full slice each in front."""
    x, index = args[0], args[1]
    if not isinstance(x, BatchedTensor):
        return None
    items = index if isinstance(index, tuple) else (index,)
    if any(isinstance(i, BatchedTensor) for i in items):
        return None
    advanced = [k for k, i in enumerate(items) if isinstance(i, (Tensor, list))]
    if advanced and advanced != list(builtins.range(advanced[0], advanced[-1] + 1)):
        return None                 # non-adjacent advanced indices move their dims to the front
    if any(isinstance(i, bool) for i in items):
        return None
    nb = len(x._levels)
    return BatchedTensor(fn(x._value, (slice(None),) * nb + tuple(items)), x._levels)


def _setitem(x, index, value):
    items = index if isinstance(index, tuple) else (index,)
    levels = _levels_of(list(items) + [value, x])
    if levels != x._levels:
        raise RuntimeError(_INPLACE_ERROR)
    if any(isinstance(i, BatchedTensor) for i in items):
        raise RuntimeError("vmap: assigning through a batched index tensor is not supported; use scatter or "
                           "index_put out of place.")
    nb = len(levels)
    full = (slice(None),) * nb + items
    was = STATE.active
    STATE.active = False
    try:
        region = x._value[full]
        if _is_tensor(value):
            value = _phys(value, levels, region.ndim - nb)
        x._value[full] = value
    finally:
        STATE.active = was


# ----- rules: products and layers -------------------------------------------------------------------------------
def _matmul(fn, args, kwargs):
    a, b = args[0], args[1]
    if not (_is_tensor(a) and _is_tensor(b)):
        return None
    ra, rb = _logical_rank(a), _logical_rank(b)
    if ra == 0 or rb == 0:
        return None
    levels = _levels_of([a, b])
    if not isinstance(b, BatchedTensor) and rb <= 2:     # one GEMM: the batch becomes rows
        return _wrap(fn(a._value, b), levels)
    if not isinstance(a, BatchedTensor) and rb >= 2 and ra <= 2:   # (a of rank > 2: its batch dims would meet
        return _wrap(fn(a, b._value), levels)                       # the vmap dims of b: vmapA's fix)
    pa = _phys(a, levels)
    pb = _phys(b, levels)
    nb = len(levels)
    if ra == 1:
        pa = pa.unsqueeze(-2)
    if rb == 1:
        pb = pb.unsqueeze(-1)
    rank = builtins.max(builtins.max(ra, 2), builtins.max(rb, 2))
    pa = _phys_pad(pa, nb, rank)
    pb = _phys_pad(pb, nb, rank)
    out = fn(pa, pb)
    if rb == 1:
        out = out.squeeze(-1)
    if ra == 1:
        out = out.squeeze(-1 if rb == 1 else -2)
    return BatchedTensor(out, levels)


def _phys_pad(v, nb, rank):
    have = v.ndim - nb
    if have >= rank:
        return v
    return v.reshape(tuple(v.shape[:nb]) + (1,) * (rank - have) + tuple(v.shape[nb:]))


def _checked_matmul(ranks, op):
    def rule(fn, args, kwargs):
        got = tuple(_logical_rank(a) for a in args[:2])
        if got != ranks:
            return None
        return _matmul(lambda x, y: _C.matmul(x, y), args, kwargs)
    return rule


def _shared_rows(v, nb):
    """Whether v's nb batch dims all have stride 0: every row is the same tensor (an unbatched weight expanded by
    func.grad inside vmap to get per-row gradients)."""
    return nb > 0 and all(st == 0 for st in tuple(v.stride())[:nb])


class _SharedWeightLinear(Function):
    """x @ w.T for a weight whose rows are one tensor (stride 0 over the batch dims) that still needs its per-row
    gradients (Note [Per-sample gradients of linear]).

    Note [Per-sample gradients of linear]: inside vmap(grad(f)), an unbatched weight becomes a per-row copy (an
    expanded view) so that the backward pass yields each row's gradient. As a batched matmul, the forward and the
    input's gradient are B products of one row each; but the rows of w are one matrix, so the forward is one
    product with it, and the weight's gradient the batch of outer products g x^T (one broadcast multiply for
    one-row inputs). bench/vmap.py, MLP 64-128-10 over 512 samples on a loaded 2-core Xeon: the two linears'
    forward and backward took 10.7 ms as batched products and 3.1 ms this way. Under create_graph (a gradient of
    the gradient) the input's gradient is the batched product again, which depends on each row of w."""

    @staticmethod
    def forward(ctx, x, w, nb):
        ctx.nb = nb
        ctx.save_for_backward(x, w)
        return _C.matmul(x, _C.permute(w[(0,) * nb], (1, 0)))

    @staticmethod
    def backward(ctx, grad):
        x, w = ctx.saved_tensors
        nb = ctx.nb
        if not ctx.needs_input_grad[0]:
            gx = None                 # vmapsp: the data of a first layer: no product for a gradient nobody reads
        elif _C.is_grad_enabled():    # create_graph: each row's input gradient depends on its own row of w
            gx = _matmul_batched(grad, w, nb)
        else:
            gx = _C.matmul(grad, w[(0,) * nb])
        if not ctx.needs_input_grad[1]:
            return gx, None, None
        if x.ndim == nb + 1:          # one row each: the outer products, one broadcast multiply
            gw = grad.unsqueeze(-1) * x.unsqueeze(-2)
        else:
            g2 = grad.reshape(tuple(grad.shape[:nb]) + (-1, grad.shape[-1]))
            x2 = x.reshape(tuple(x.shape[:nb]) + (-1, x.shape[-1]))
            gw = _C.matmul(g2.transpose(-1, -2), x2)
        return gx, gw, None

    @staticmethod
    def jvp(ctx, tx, tw, _):
        x, w = ctx.saved_tensors
        nb = ctx.nb
        out = _C.matmul(tx, _C.permute(w[(0,) * nb], (1, 0)))
        return out + _matmul_batched(x, w.transpose(-1, -2), nb)


def _matmul_batched(a, b, nb):
    """a @ b for physical a (batch dims, *rows, k) and b (batch dims, k, n): the batched product."""
    rows = a.ndim - nb
    a2 = a.unsqueeze(-2) if rows == 1 else a.reshape(tuple(a.shape[:nb]) + (-1, a.shape[-1]))
    out = _C.matmul(a2, b)
    return out.squeeze(-2) if rows == 1 else out.reshape(tuple(a.shape[:-1]) + (b.shape[-1],))


def _linear(fn, args, kwargs):
    names = ("input", "weight", "bias")
    bound = dict(zip(names, args))
    bound.update(kwargs)
    x, w, b = bound["input"], bound["weight"], bound.get("bias")
    if not isinstance(w, BatchedTensor) and not isinstance(b, BatchedTensor):
        return _wrap(fn(x._value, w, b), x._levels)
    if _logical_rank(w) != 2 or _logical_rank(x) == 0:
        return None
    levels = _levels_of([x, w, b])
    nb = len(levels)
    wv = _phys(w, levels, expand=True)
    if isinstance(x, BatchedTensor) and x._levels == levels and _shared_rows(wv, nb):
        out = BatchedTensor(_SharedWeightLinear.apply(x._value, wv, nb), levels)
    else:
        out = _matmul(_C.matmul, (x, BatchedTensor(wv.transpose(-1, -2), levels)), {})
    if b is not None:
        out = BatchedTensor(out._value + _phys(b, levels, out.dim()), levels)
    return out


def _conv(spatial):
    def rule(fn, args, kwargs):
        names = ("input", "weight", "bias", "stride", "padding", "dilation", "groups")
        bound = dict(zip(names, args))
        bound.update(kwargs)
        x, w, b = bound["input"], bound["weight"], bound.get("bias")
        groups = bound.get("groups", 1)
        rank = _logical_rank(x)
        if rank not in (spatial + 1, spatial + 2) or _logical_rank(w) != spatial + 2:
            return None
        levels = _levels_of([x, w, b])
        nb = len(levels)
        sizes = _batch_sizes(levels)
        rest = {k: v for k, v in bound.items() if k not in ("input", "weight", "bias", "groups")}
        if not isinstance(w, BatchedTensor) and not isinstance(b, BatchedTensor):
            v = _fold(_phys(x, levels, spatial + 2), nb)             # (B*N, C, ...)
            v = v.reshape((-1,) + tuple(v.shape[2:])) if rank == spatial + 2 else v.reshape(
                (-1,) + tuple(v.shape[2:]))
            out = fn(v, w, b, groups=groups, **rest)
            n = x.shape[0] if rank == spatial + 2 else None
            out = out.reshape(tuple(sizes) + ((n,) if n is not None else ()) + tuple(out.shape[1:]))
            return BatchedTensor(out, levels)
        # a batched weight (per-sample gradients): the batch goes into the groups (torch's rule)
        bt = math.prod(sizes)
        xv = _fold(_phys(x, levels, spatial + 2, expand=True), nb)           # (Bt, N, C, ...)
        n, c = xv.shape[1], xv.shape[2]
        xv = xv.transpose(0, 1).reshape((n, bt * c) + tuple(xv.shape[3:]))
        wv = _fold(_phys(w, levels, expand=True), nb)                          # (Bt, O, C/g, ...)
        o = wv.shape[1]
        wv = wv.reshape((bt * o,) + tuple(wv.shape[2:]))
        bv = None if b is None else _fold(_phys(b, levels, expand=True), nb).reshape((bt * o,))
        out = fn(xv, wv, bv, groups=groups * bt, **rest)                       # (N, Bt*O, ...)
        out = out.reshape((n, bt, o) + tuple(out.shape[2:])).transpose(0, 1)
        if rank == spatial + 1:
            out = out.squeeze(1)
        return BatchedTensor(out.reshape(tuple(sizes) + tuple(out.shape[1:])), levels)
    return rule


def _fold_leading(spatial):
    """Ops over (N, C, *spatial) or (C, *spatial) inputs that treat N as a batch (pooling, unfold/fold, channel
    dropout): the vmap batch folded into N."""
    def rule(fn, args, kwargs):
        if not _only_first_batched(args, kwargs):
            return None
        x = args[0]
        rank, nb = x.dim(), len(x._levels)
        if rank not in (spatial + 1, spatial + 2):
            return None
        sizes = tuple(x._value.shape[:nb])
        v = x._value.reshape((-1,) + tuple(x.shape[-(spatial + 1):]))
        out = fn(v, *args[1:], **kwargs)
        lead = sizes + ((x.shape[0],) if rank == spatial + 2 else ())

        def back(o):
            return o.reshape(lead + tuple(o.shape[1:]))
        if isinstance(out, tuple):
            return _wrap(type(out)(*[back(o) for o in out]) if hasattr(out, "_fields") else
                         tuple(back(o) for o in out), x._levels)
        return BatchedTensor(back(out), x._levels)
    return rule


def _attention(fn, args, kwargs):
    """scaled_dot_product_attention broadcasts the batch dims of query, key, value and attn_mask: the levels go in
    front of each, the logical dims left-padded to one rank, so that the fused kernel's loop over (batch, head)
    runs over the vmapped rows too."""
    names = ("query", "key", "value", "attn_mask", "dropout_p", "is_causal", "scale", "enable_gqa")
    bound = dict(zip(names, args))
    bound.update(kwargs)
    tensors = [k for k in names[:4] if bound.get(k) is not None]
    if len(args) > len(names) or any(not isinstance(bound[k], (BatchedTensor, Tensor)) for k in tensors):
        return None
    levels = _levels_of([bound[k] for k in tensors])
    rank = builtins.max(_logical_rank(bound[k]) for k in tensors)
    for k in tensors:
        if isinstance(bound[k], BatchedTensor):
            bound[k] = _phys(bound[k], levels, rank)
    return _wrap(fn(**bound), levels)


def _layer_norm(fn, args, kwargs):
    names = ("input", "normalized_shape", "weight", "bias", "eps")
    bound = dict(zip(names, args))
    bound.update(kwargs)
    x, w, b = bound["input"], bound.get("weight"), bound.get("bias")
    if not isinstance(x, BatchedTensor):
        return None
    if not isinstance(w, BatchedTensor) and not isinstance(b, BatchedTensor):
        return _wrap(fn(x._value, bound["normalized_shape"], w, b, bound.get("eps", 1e-5)), x._levels)
    levels = _levels_of([x, w, b])
    normed = BatchedTensor(fn(x._value, bound["normalized_shape"], None, None, bound.get("eps", 1e-5)), x._levels)
    out = _phys(normed, levels)
    rank = x.dim()
    if w is not None:
        out = out * _phys(w, levels, rank)
    if b is not None:
        out = out + _phys(b, levels, rank)
    return BatchedTensor(out, levels)


_LEGACY = ("size_average", "reduce")


def _loss_reduce(out, levels, reduction):
    nb = len(levels)
    if reduction == "none":
        return BatchedTensor(out, levels)
    dims = tuple(builtins.range(nb, out.ndim))
    if reduction == "sum":
        return BatchedTensor(out.sum(dims) if dims else out, levels)
    return BatchedTensor(out.mean(dims) if dims else out, levels)


def _pointwise_loss(*tensor_params):
    """Elementwise losses: reduction='none' on the aligned operands, then each row reduced by itself."""
    def rule(fn, args, kwargs):
        sig = _signature(fn)
        bound = sig.bind(*args, **kwargs)
        bound.apply_defaults()
        a = bound.arguments
        if any(a.get(k) is not None for k in _LEGACY):
            return None
        code = a.get("reduction", "mean")
        reduction = _REDUCTION_CODES.get(code, code) if isinstance(code, (int, str)) else None  # aten's int codes
        if reduction not in ("none", "mean", "sum", "batchmean"):
            return None
        tensors = [a[p] for p in tensor_params if _is_tensor(a.get(p))]
        levels = _levels_of(tensors)
        rank = builtins.max(_logical_rank(t) for t in tensors)
        for p in tensor_params:
            if _is_tensor(a.get(p)):
                a[p] = _phys(a[p], levels, rank, expand=True)   # bce refuses a broadcast target
        a["reduction"] = 0 if isinstance(code, int) else "none"
        out = fn(*bound.args, **bound.kwargs)
        if reduction == "batchmean":
            nb = len(levels)
            first = tensors[0]
            per_row = out.sum(tuple(builtins.range(nb, out.ndim))) if out.ndim > nb else out
            return BatchedTensor(per_row / (first.shape[0] if _logical_rank(first) > 0 else 1), levels)
        return _loss_reduce(out, levels, reduction)
    return rule


def _class_loss(fn, args, kwargs):
    """cross_entropy and nll_loss: the batch folded into N with reduction='none', then each row's mean with
    torch's denominator (the weights of its non-ignored targets)."""
    sig = _signature(fn)
    bound = sig.bind(*args, **kwargs)
    bound.apply_defaults()
    a = bound.arguments
    if any(a.get(k) is not None for k in _LEGACY) or isinstance(a.get("weight"), BatchedTensor):
        return None
    x, target, weight = a["input"], a["target"], a.get("weight")
    reduction, ignore = a.get("reduction", "mean"), a.get("ignore_index", -100)
    smoothing = a.get("label_smoothing", 0.0) or 0.0
    rank = _logical_rank(x)
    if rank == 0:
        return None
    levels = _levels_of([x, target])
    nb = len(levels)
    sizes = _batch_sizes(levels)
    xv = _fold(_phys(x, levels, expand=True), nb)
    tv = _fold(_phys(target, levels, expand=True), nb)
    probabilities = target.dtype.is_floating_point
    if rank == 1:           # one sample of C classes: the batch is N
        flat_x, flat_t = xv, tv
    else:
        flat_x = xv.reshape((-1,) + tuple(xv.shape[2:]))
        flat_t = tv.reshape((-1,) + tuple(tv.shape[2:]))
    a["input"], a["target"], a["reduction"] = flat_x, flat_t, "none"
    losses = fn(*bound.args, **bound.kwargs)
    losses = losses.reshape((len(xv),) + ((x.shape[0],) if rank > 1 else ()) + tuple(losses.shape[1:]))
    if reduction == "none":
        return BatchedTensor(_unfold(losses, sizes), levels)
    dims = tuple(builtins.range(1, losses.ndim))
    total = losses.sum(dims) if dims else losses
    if reduction == "sum":
        return BatchedTensor(_unfold(total, sizes), levels)
    if reduction != "mean":
        return None
    if probabilities:
        count = math.prod(losses.shape[1:])
        return BatchedTensor(_unfold(total / count, sizes), levels)
    if smoothing and weight is not None:
        return None
    tv = tv.reshape(losses.shape)
    keep = (tv != ignore)
    if weight is None:
        denom = keep.to(losses.dtype)
    else:
        denom = weight[(tv * keep.to(tv.dtype)).reshape(-1)].reshape(tv.shape) * keep.to(losses.dtype)
    denom = denom.sum(dims) if dims else denom
    return BatchedTensor(_unfold(total / denom, sizes), levels)


def _creation_like(fn, args, kwargs):
    """zeros_like and friends: the physical tensor's like."""
    x = args[0]
    if not isinstance(x, BatchedTensor) or _has_batched(args[1:], kwargs):
        return None
    return BatchedTensor(fn(x._value, *args[1:], **kwargs), x._levels)


def _unbatched_result(fn, args, kwargs):
    """new_zeros(size) and friends: a fresh unbatched tensor (only the dtype of self is read)."""
    x = args[0]
    if _has_batched(args[1:], kwargs):
        return None
    return fn(x._value, *args[1:], **kwargs)


def _split_rule(fn, args, kwargs):
    sig = _signature(fn)
    bound = sig.bind(*args, **kwargs)
    bound.apply_defaults()
    names = list(sig.parameters)
    x = bound.arguments[names[0]]
    if not _only_first_batched(args, kwargs) or x.dim() == 0:
        return None
    d = _shift_dim(bound.arguments["dim"], x.dim(), len(x._levels))
    if d is None:
        return None
    bound.arguments[names[0]] = x._value
    bound.arguments["dim"] = d
    return _wrap(tuple(fn(*bound.args, **bound.kwargs)), x._levels)


def _index_dim_rule(fn, args, kwargs):
    """index_select(input, dim, index) with an unbatched index, gather(input, dim, index) with the operands
    aligned and expanded: the dim shifted."""
    sig = _signature(fn)
    bound = sig.bind(*args, **kwargs)
    bound.apply_defaults()
    a = bound.arguments
    names = list(sig.parameters)
    x, index = a[names[0]], a["index"]
    rank = _logical_rank(x)
    if rank == 0:
        return None
    if fn.__name__ == "index_select":
        if isinstance(index, BatchedTensor) or not isinstance(x, BatchedTensor):
            return None
        levels = x._levels
        a[names[0]] = x._value
    else:
        levels = _levels_of([x, index] + [a.get("src")])
        if _logical_rank(index) != rank:
            return None
        a[names[0]] = _phys(x, levels, expand=True)
        a["index"] = _phys(index, levels, expand=True)
        if "src" in a and _is_tensor(a["src"]):
            a["src"] = _phys(a["src"], levels, expand=True)
    d = _shift_dim(a["dim"], rank, len(levels))
    if d is None:
        return None
    a["dim"] = d
    return _wrap(fn(*bound.args, **bound.kwargs), levels)


def _take(fn, args, kwargs):
    x, index = args[0], args[1]
    levels = _levels_of([x, index])
    nb = len(levels)
    xv = _phys(x, levels, expand=True)
    flat = xv.reshape(tuple(xv.shape[:nb]) + (-1,))
    iv = _phys(index, levels, expand=True)
    shape = tuple(iv.shape)
    iv = iv.reshape(shape[:nb] + (-1,))
    iv = iv + (iv < 0).to(iv.dtype) * flat.shape[-1]          # take's negative indices count from the end
    out = flat.gather(nb, iv)
    return BatchedTensor(out.reshape(shape), levels)


def _put(fn, args, kwargs):
    """put(input, index, source, accumulate): scatter (scatter_add) into each row seen as 1-D; index must be
    unbatched."""
    names = ("input", "index", "source", "accumulate")
    a = dict(zip(names, args))
    a.update(kwargs)
    x, index, source = a["input"], a["index"], a["source"]
    if isinstance(index, BatchedTensor) or not _is_tensor(source) or index.numel() != source.numel():
        return None
    levels = _levels_of([x, source])
    nb = len(levels)
    xv = _phys(x, levels, expand=True)
    flat = xv.reshape(tuple(xv.shape[:nb]) + (-1,))
    n = flat.shape[-1]
    if index.numel() and (bool((index >= n).any()) or bool((index < -n).any())):
        return None                                    # the fallback raises put's own error
    idx = (index + (index < 0).to(index.dtype) * n).reshape(-1)
    idx = idx.reshape((1,) * nb + (-1,)).expand(tuple(flat.shape[:nb]) + (idx.numel(),))
    src = _phys(source, levels, expand=True)
    src = src.reshape(tuple(src.shape[:nb]) + (-1,))
    out = flat.scatter_add(nb, idx, src) if a.get("accumulate") else flat.scatter(nb, idx, src)
    return BatchedTensor(out.reshape(tuple(xv.shape)), levels)


def _rnn_layer(fn, args, kwargs):
    """The core's whole-sequence RNN layer (gi (L, N, G), h0/c0 (N, H), weights): the vmap batch folded into N;
    batched weights fall back."""
    gi, h0, c0, w_hh, b_hh, mode, reverse = args
    if isinstance(w_hh, BatchedTensor) or isinstance(b_hh, BatchedTensor):
        return None
    levels = _levels_of([gi, h0, c0])
    nb = len(levels)
    sizes = _batch_sizes(levels)
    g = _fold(_phys(gi, levels, expand=True), nb)                   # (Bt, L, N, G)
    bt, length, n = g.shape[0], g.shape[1], g.shape[2]
    g = g.movedim(0, 1).reshape((length, bt * n) + tuple(g.shape[3:]))

    def state(t):
        return None if t is None else _fold(_phys(t, levels, expand=True), nb).reshape((bt * n,) + tuple(t.shape[1:]))
    y = fn(g, state(h0), state(c0), w_hh, b_hh, mode, reverse)      # (k, L, Bt*N, H)
    y = y.reshape(tuple(y.shape[:2]) + (bt, n) + tuple(y.shape[3:])).movedim(2, 0)
    return BatchedTensor(y.reshape(tuple(sizes) + tuple(y.shape[1:])), levels)


# ----- randomness rules -----------------------------------------------------------------------------------------
def _random_elementwise(fn, args, kwargs):
    """'different': the op on the physical tensor draws every row's values independently."""
    return _pointwise(fn, args, kwargs)


def _random_like_same(fn, args, kwargs):
    x = args[0]
    nb = len(x._levels)
    row = x._value[(0,) * nb] if x._value.numel() else x._value.reshape(tuple(x.shape))
    return fn(row, *args[1:], **kwargs)


def _dropout_same(fn, args, kwargs):
    """'same': one row's mask (dropout of ones), the same for every row."""
    x = args[0]
    bound = _bind(_DROPOUT_SIG, args, kwargs)
    ones = _C.full(tuple(x.shape), 1.0, x.dtype)
    mask = fn(ones, bound.get("p", 0.5), True, False)
    out = x._value * mask
    if bound.get("inplace"):
        x._value.copy_(out)
        return x
    return BatchedTensor(out, x._levels)


RANDOM_RULES = {}
SAME_RULES = {}
INPLACE_RULES = {}        # name_ -> rule(self, args, kwargs) for in-place methods that are not their op then a copy


# ----- in-place methods -----------------------------------------------------------------------------------------
def _inplace(name, self, args, kwargs):
    """self.name_(...): the out-of-place op's rule, then the result written into self's physical tensor (self must
    be batched at every level the result is)."""
    if name in INPLACE_RULES:
        return INPLACE_RULES[name](self, args, kwargs)
    base = name[:-1]
    was = STATE.active
    if name in _VIEW_INPLACE:           # func3: the row's logical view changes (see the section below)
        return _VIEW_INPLACE[name](self, args, kwargs)
    if name in RANDOM:
        mode = _randomness()
        if mode == "error":
            _random_error()
        STATE.active = False
        try:
            if mode == "different":
                getattr(self._value, name)(*[_phys(a, self._levels) if _is_tensor(a) else a for a in args],
                                           **kwargs)
                return self
            row = _C.full(tuple(self.shape), 0.0, self.dtype)
            getattr(row, name)(*args, **kwargs)
            self._value.copy_(_phys(row, self._levels, self.dim()))
            return self
        finally:
            STATE.active = was
    others = [a for a in itertools.chain(args, kwargs.values()) if _is_tensor(a)]
    if name in ("zero_", "fill_", "copy_") or RULES.get(base) is _pointwise:
        # the engine's own in-place op on the physical tensor (its autograd bookkeeping: versions, CopySlices),
        # the operands aligned to self's levels and rank
        if not set(_levels_of(others)) <= set(self._levels):
            raise RuntimeError(_INPLACE_ERROR)
        rank = self.dim()

        def conv(a):
            return _phys(a, self._levels, rank) if _is_tensor(a) and not (
                isinstance(a, Tensor) and not isinstance(a, BatchedTensor) and a.ndim == 0) else a
        STATE.active = False
        try:
            getattr(self._value, name)(*[conv(a) for a in args], **{k: conv(v) for k, v in kwargs.items()})
        finally:
            STATE.active = was
        return self
    if not hasattr(Tensor, base):
        raise RuntimeError(f"vmap: in-place {name} has no out-of-place twin to batch; use an out-of-place op.")
    # any other op: out of place on a copy (what it saves for backward must not be the tensor written next),
    # then copied in
    result = _method(base, BatchedTensor(self._value.clone(), self._levels), *args, **kwargs)
    if _is_tensor(result):
        levels = _levels_of([self, result])
        if levels != self._levels:
            raise RuntimeError(_INPLACE_ERROR)
    STATE.active = False
    try:
        if _is_tensor(result):
            src = _phys(result, self._levels, self.dim())
            if src.dtype != self.dtype:
                src = src.to(self.dtype)
            self._value.copy_(src)
        else:
            self._value.fill_(result)
    finally:
        STATE.active = was
    return self


# ----- the rule table -------------------------------------------------------------------------------------------
POINTWISE = """
add sub mul div true_divide divide neg negative pow maximum minimum fmax fmin atan2 arctan2 where clamp clip
clamp_min clamp_max exp log sqrt rsqrt abs absolute sin cos tanh sigmoid relu sign sgn gelu erf erfc erfinv log1p
expm1 log2 log10 tan asin acos atan arcsin arccos arctan sinh cosh asinh acosh atanh arcsinh arccosh arctanh exp2
floor ceil round trunc fix frac reciprocal square fmod remainder lerp addcmul addcdiv hypot logaddexp logaddexp2
copysign signbit nan_to_num isnan isinf isfinite isposinf isneginf isreal eq ne lt le gt ge greater greater_equal
less less_equal not_equal logical_and logical_or logical_not logical_xor bitwise_and bitwise_or bitwise_xor
bitwise_not float_power xlogy logit sinc deg2rad rad2deg heaviside masked_fill float double half long int bool
short byte char bfloat16 to type_as clone contiguous positive conj conj_physical resolve_conj view_as_real
view_as_complex polar complex angle real imag i0 mvlgamma lgamma digamma
polygamma nextafter ldexp frexp trapz
F.relu F.relu6 F.leaky_relu F.elu F.selu F.celu F.gelu F.silu F.mish F.softplus F.softsign F.hardtanh
F.hardsigmoid F.hardswish F.sigmoid F.tanh F.logsigmoid F.tanhshrink F.softshrink F.hardshrink F.threshold
F.rrelu_ F.glu_ silu mish relu6 leaky_relu elu selu celu hardtanh hardsigmoid hardswish softplus softshrink
hardshrink tanhshrink threshold logsigmoid
special.expit special.erf special.erfc special.erfinv special.exp2 special.expm1 special.log1p special.logit
special.xlogy special.sinc special.round special.i0 special.ndtr special.ndtri special.log_ndtr special.gammaln
special.digamma special.psi special.entr special.xlog1py special.i0e special.i1 special.i1e special.erfcx
""".split() + list(_DUNDERS) + [_name for _name, _ in primitive_rows.UNARY_PRIMITIVES]  # ops.def's plain unary ops

for _k in POINTWISE:
    RULES[_k] = _pointwise
for _k in ("__matmul__", "matmul", "linalg.matmul"):
    RULES[_k] = _or_loop(_k, _matmul)
RULES["__rmatmul__"] = _or_loop("__rmatmul__", lambda fn, args, kwargs: _matmul(
    lambda x, y: _C.matmul(x, y), (args[1], args[0]), {}))
RULES["mm"] = _or_loop("mm", _checked_matmul((2, 2), "mm"))
RULES["bmm"] = _or_loop("bmm", _checked_matmul((3, 3), "bmm"))
RULES["mv"] = _or_loop("mv", _checked_matmul((2, 1), "mv"))
RULES["dot"] = _or_loop("dot", _checked_matmul((1, 1), "dot"))
RULES["linear"] = _or_loop("linear", _linear)
for _k, _n in (("conv1d", 1), ("conv2d", 2), ("conv3d", 3)):
    RULES[_k] = _or_loop(_k, _conv(_n))
for _k, _n in (("F.max_pool1d", 1), ("F.max_pool2d", 2), ("F.max_pool3d", 3), ("F.avg_pool1d", 1),
               ("F.avg_pool2d", 2), ("F.avg_pool3d", 3), ("F.adaptive_avg_pool1d", 1), ("F.adaptive_avg_pool2d", 2),
               ("F.adaptive_avg_pool3d", 3), ("F.adaptive_max_pool1d", 1), ("F.adaptive_max_pool2d", 2),
               ("F.adaptive_max_pool3d", 3), ("max_pool1d", 1), ("max_pool2d", 2), ("max_pool3d", 3),
               ("avg_pool1d", 1), ("avg_pool2d", 2), ("avg_pool3d", 3), ("adaptive_avg_pool1d", 1),
               ("adaptive_avg_pool2d", 2), ("adaptive_max_pool1d", 1), ("adaptive_max_pool2d", 2),
               ("F.unfold", 2), ("F.fold", 1), ("F.lp_pool2d", 2), ("F.lp_pool1d", 1), ("F.pixel_shuffle", 2),
               ("pixel_shuffle", 2), ("F.pixel_unshuffle", 2), ("pixel_unshuffle", 2)):
    RULES[_k] = _or_loop(_k, _fold_leading(_n))
for _k in ("F.scaled_dot_product_attention", "scaled_dot_product_attention"):
    RULES[_k] = _or_loop(_k, _attention)
for _k in ("layer_norm", "F.layer_norm"):
    RULES[_k] = _or_loop(_k, _layer_norm)
for _k in ("F.pad", "pad", "F.embedding", "embedding", "tril", "triu"):
    RULES[_k] = _or_loop(_k, _first_only)
for _k in ("cross_entropy", "F.cross_entropy", "nll_loss", "F.nll_loss"):
    RULES[_k] = _or_loop(_k, _class_loss)
for _k in ("mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss", "soft_margin_loss"):
    RULES[_k] = RULES["F." + _k] = _or_loop(_k, _pointwise_loss("input", "target", "weight"))
for _k in ("binary_cross_entropy",):
    RULES[_k] = RULES["F." + _k] = _or_loop(_k, _pointwise_loss("input", "target", "weight"))
for _k in ("binary_cross_entropy_with_logits",):
    RULES[_k] = RULES["F." + _k] = _or_loop(_k, _pointwise_loss("input", "target", "weight", "pos_weight"))
for _k in ("kl_div",):
    RULES[_k] = RULES["F." + _k] = _or_loop(_k, _pointwise_loss("input", "target"))
_REDUCTIONS = ("sum", "mean", "amax", "amin", "logsumexp", "prod", "nansum", "nanmean", "var", "std", "all", "any",
               "count_nonzero", "special.logsumexp", "aminmax")
for _k in _REDUCTIONS:
    RULES[_k] = _or_loop(_k, _dim_rule())
def _max_min(fn, args, kwargs):
    """max/min: with a dim, (values, indices) over the shifted dim; with none, amax/amin of the row; with a
    tensor, maximum/minimum."""
    if len(args) > 1 and _is_tensor(args[1]) or _is_tensor(kwargs.get("other")):
        return _pointwise(fn, args, kwargs)
    if len(args) == 1 and not kwargs:
        x = args[0]
        if not isinstance(x, BatchedTensor) or x.dim() == 0 or x.numel() == 0:
            return None
        dims = tuple(builtins.range(len(x._levels), x._value.ndim))
        reduce = x._value.amax if fn.__name__ == "max" else x._value.amin
        return BatchedTensor(reduce(dims), x._levels)
    return _dim_rule(none_means_all=False)(fn, args, kwargs)


for _k in ("max", "min"):
    RULES[_k] = _or_loop(_k, _max_min)
for _k in ("argmax", "argmin"):
    RULES[_k] = _or_loop(_k, _argminmax)
for _k in ("cumsum", "cumprod", "softmax", "log_softmax", "F.softmax", "F.log_softmax", "F.softmin", "softmin",
           "special.softmax", "special.log_softmax", "logcumsumexp", "cummax", "cummin", "F.normalize", "F.glu",
           "glu"):
    RULES[_k] = _or_loop(_k, _dim_rule(none_means_all=False))
for _k in ("reshape", "view"):
    RULES[_k] = _or_loop(_k, _reshape)
for _k in ("reshape_as", "view_as"):
    RULES[_k] = _or_loop(_k, _reshape_as)
RULES["permute"] = _or_loop("permute", _permute)
RULES["expand"] = _or_loop("expand", _expand)
RULES["expand_as"] = _or_loop("expand_as", _expand_as)
RULES["t"] = _or_loop("t", _t)
RULES["T"] = lambda fn, args, kwargs: BatchedTensor(args[0]._value.permute(
    tuple(builtins.range(len(args[0]._levels))) + tuple(builtins.range(args[0]._value.ndim - 1,
                                                                       len(args[0]._levels) - 1, -1))),
    args[0]._levels)
RULES["mT"] = _or_loop("mT", lambda fn, args, kwargs: BatchedTensor(args[0]._value.transpose(-1, -2),
                                                                    args[0]._levels) if args[0].dim() >= 2 else None)
RULES["squeeze"] = _or_loop("squeeze", _squeeze)
for _k, _params in (("transpose", ("dim0", "dim1")), ("swapaxes", ("axis0", "axis1")),
                    ("swapdims", ("dim0", "dim1")), ("movedim", ("source", "destination")),
                    ("moveaxis", ("source", "destination")), ("flatten", ("start_dim", "end_dim")),
                    ("select", ("dim",)), ("narrow", ("dim",)), ("diagonal", ("dim1", "dim2")),
                    ("unflatten", ("dim",))):
    RULES[_k] = _or_loop(_k, _dims_rule(*_params))


def _flip(fn, args, kwargs):
    """flip(input, dims) and Tensor.flip(*dims): the dims shifted."""
    if not _only_first_batched(args, kwargs):
        return None
    x = args[0]
    dims = kwargs["dims"] if "dims" in kwargs else _sizes_from(args[1:])
    if isinstance(dims, int):
        dims = (dims,)
    nb, rank = len(x._levels), x.dim()
    if rank == 0:
        return None
    new = [_shift_dim(d, rank, nb) for d in dims]
    if None in new:
        return None
    return BatchedTensor(x._value.flip(tuple(new)), x._levels)


RULES["flip"] = _or_loop("flip", _flip)
RULES["unsqueeze"] = _or_loop("unsqueeze", _dims_rule("dim", extra_rank=1))
RULES["slice_scatter"] = _or_loop("slice_scatter", _dims_rule("dim", aligned=("src",)))
RULES["index_add"] = _or_loop("index_add", _dims_rule("dim", aligned=("source",)))
RULES["put"] = _or_loop("put", lambda fn, args, kwargs: _put(fn, args, kwargs))
RULES["rnn_layer"] = _or_loop("rnn_layer", lambda fn, args, kwargs: _rnn_layer(fn, args, kwargs))
RULES["cat"] = RULES["concat"] = RULES["concatenate"] = _or_loop("cat", _tensor_list_rule(False))
RULES["stack"] = _or_loop("stack", _tensor_list_rule(True))
for _k in ("split", "chunk", "unbind", "tensor_split"):
    RULES[_k] = _or_loop(_k, _split_rule)
RULES["__getitem__"] = _or_loop("__getitem__", _getitem)
for _k in ("index_select", "gather", "scatter_add", "scatter"):
    RULES[_k] = _or_loop(_k, _index_dim_rule)
RULES["take"] = _take
for _k in ("zeros_like", "ones_like", "full_like", "empty_like"):
    RULES[_k] = _or_loop(_k, _creation_like)
for _k in ("new_zeros", "new_ones", "new_full", "new_empty", "new_tensor"):
    RULES[_k] = _or_loop(_k, _unbatched_result)
for _k in ("dropout", "F.dropout", "alpha_dropout", "F.alpha_dropout", "F.feature_alpha_dropout", "F.dropout1d",
           "F.dropout2d", "F.dropout3d"):
    RULES[_k] = _pointwise        # in eval mode or with p=0 (when it draws, RANDOM_RULES has it)
for _k in ("dropout", "F.dropout", "alpha_dropout", "F.alpha_dropout", "rand_like", "randn_like", "bernoulli",
           "F.feature_alpha_dropout"):
    RANDOM_RULES[_k] = _random_elementwise
for _k, _n in (("F.dropout1d", 1), ("F.dropout2d", 2), ("F.dropout3d", 3)):
    RANDOM_RULES[_k] = _or_loop(_k, _fold_leading(_n))
for _k in ("dropout", "F.dropout", "F.dropout1d", "F.dropout2d", "F.dropout3d"):
    SAME_RULES[_k] = _dropout_same
for _k in ("rand_like", "randn_like", "randint_like"):
    SAME_RULES[_k] = _random_like_same

# ----- rules: in-place functions (dyngrad.abs_(x), F.relu_(x)) ----------------------------------------------------
def _inplace_fn(fn, args, kwargs):
    """An in-place function whose out-of-place op is pointwise: the engine's in-place op on self's physical tensor,
    the operands aligned to self's levels and rank."""
    x = args[0]
    if not isinstance(x, BatchedTensor):
        return None
    others = [a for a in itertools.chain(args[1:], kwargs.values()) if _is_tensor(a)]
    if not set(_levels_of(others)) <= set(x._levels):
        raise RuntimeError(_INPLACE_ERROR)
    rank = x.dim()

    def conv(a):
        return _phys(a, x._levels, rank) if _is_tensor(a) and not (
            isinstance(a, Tensor) and not isinstance(a, BatchedTensor) and a.ndim == 0) else a
    fn(x._value, *[conv(a) for a in args[1:]], **{k: conv(v) for k, v in kwargs.items()})
    return x


# ----- rules: a view op's copy (select_copy, view_copy, ...) -------------------------------------------------------
def _then_clone(rule):
    """The rule of the view, then a copy (a *_copy op returns fresh memory)."""
    def run(fn, args, kwargs):
        out = rule(fn, args, kwargs)
        if out is None:
            return None
        return _clone_out(out)
    return run


def _clone_out(out):
    if isinstance(out, BatchedTensor):
        return BatchedTensor(out._value.clone(), out._levels)
    if isinstance(out, (tuple, list)):
        return type(out)(_clone_out(o) for o in out)
    return out


def _reshape_param(fn, args, kwargs):
    """view_copy(input, size) / reshape-like ops whose size is one argument."""
    x = args[0]
    if not _only_first_batched(args, kwargs):
        return None
    shape = _sizes_from(list(args[1:]) + list(kwargs.values()))
    nb = len(x._levels)
    return BatchedTensor(x._value.reshape(tuple(x._value.shape[:nb]) + tuple(shape)), x._levels)


# ----- rules: sorting and order statistics ----------------------------------------------------------------------
def _flat_rows(x):
    """x's physical tensor with every logical dim flattened into one (the last)."""
    nb = len(x._levels)
    return x._value.reshape(tuple(x._value.shape[:nb]) + (-1,))


def _median_rule(fn, args, kwargs):
    """median/nanmedian: with no dim, the median of the flattened row (a value); with one, the dim shifted."""
    sig = _signature(fn)
    bound = sig.bind(*args, **kwargs)
    x = bound.arguments.get("input", args[0])
    if not _only_first_batched(args, kwargs) or x.dim() == 0:
        return None
    if bound.arguments.get("dim") is not None:
        return _dim_rule(none_means_all=False)(fn, args, kwargs)
    if bound.arguments.get("keepdim"):
        return None
    return BatchedTensor(fn(_flat_rows(x), len(x._levels))[0], x._levels)


def _msort(fn, args, kwargs):
    x = args[0]
    if not _only_first_batched(args, kwargs) or x.dim() == 0:
        return None
    return BatchedTensor(_C_sort_values(x._value, len(x._levels)), x._levels)


def _C_sort_values(v, dim):
    return _sort(v, dim)[0]


def _quantile_rule(fn, args, kwargs):
    """quantile/nanquantile(input, q, dim=None, keepdim): q unbatched; a 1-D q's dim, which the op puts first,
    moved behind the batch dims; no dim is the flattened row."""
    sig = _signature(fn)
    bound = sig.bind(*args, **kwargs)
    bound.apply_defaults()
    a = bound.arguments
    x, q = a["input"], a["q"]
    if not _only_first_batched(args, kwargs) or x.dim() == 0:
        return None
    nb = len(x._levels)
    if a["dim"] is None:
        if a["keepdim"]:
            return None
        a["input"], a["dim"] = _flat_rows(x), nb
    else:
        d = _shift_dim(a["dim"], x.dim(), nb)
        if d is None:
            return None
        a["input"], a["dim"] = x._value, d
    out = fn(*bound.args, **bound.kwargs)
    if _is_tensor(q) and q.ndim == 1:
        out = out.movedim(0, nb)
    return BatchedTensor(out, x._levels)


# ----- rules: fft ------------------------------------------------------------------------------------------------
def _fft_rule(param, plural):
    """The fft family: `dim` (an int, or a tuple for the n-d transforms) shifted past the batch dims; None is every
    logical dim, or the last len(s) of them when s is given (torch's default)."""
    def rule(fn, args, kwargs):
        sig = _signature(fn)
        try:
            bound = sig.bind(*args, **kwargs)
        except TypeError:
            return None
        names = list(sig.parameters)
        x = bound.arguments[names[0]]
        if not _only_first_batched(args, kwargs) or x.dim() == 0:
            return None
        nb, rank = len(x._levels), x.dim()
        d = bound.arguments.get(param, sig.parameters[param].default)
        if d is None:
            s = bound.arguments.get("s") if plural else None
            d = tuple(builtins.range(-len(s), 0)) if s is not None else tuple(builtins.range(rank))
        if isinstance(d, (tuple, list)):
            new = tuple(_shift_dim(e, rank, nb) for e in d)
            if None in new:
                return None
        else:
            new = _shift_dim(d, rank, nb)
            if new is None:
                return None
        bound.arguments[names[0]] = x._value
        bound.arguments[param] = new
        return _wrap(fn(*bound.args, **bound.kwargs), x._levels)
    return rule


# ----- rules: linear algebra on (*, n, n) batches ---------------------------------------------------------------
def _matrix_batch(min_rank):
    """Ops over the last one or two dims that treat every leading dim as a batch (det, inv, qr, svd, solve, ...):
    the tensor operands aligned to the union of levels (expanded, so their batch dims agree) and the op called
    once; the vmap batch dims fold into the op's own leading dims. A positional dim argument is not one of these
    ops' (they take none); an op whose result rank depends on an operand's rank gets the same view of it as each
    row (every operand keeps its logical rank)."""
    def rule(fn, args, kwargs):
        tensors = [a for a in itertools.chain(args, kwargs.values()) if _is_tensor(a)]
        levels = _levels_of(tensors)
        if any(_logical_rank(t) < min_rank for t in tensors if isinstance(t, BatchedTensor)):
            return None
        if any(_logical_rank(t) < min_rank for t in tensors[:1]):
            return None

        def conv(a):
            return _phys(a, levels, expand=True) if _is_tensor(a) else a
        return _wrap(fn(*[conv(a) for a in args], **{k: conv(v) for k, v in kwargs.items()}), levels)
    return rule


def _matrix_first(min_rank):
    """As _matrix_batch for ops whose other operands are not batch-aligned (pivots of a given shape, orders):
    only the first argument may be batched."""
    def rule(fn, args, kwargs):
        if not _only_first_batched(args, kwargs) or args[0].dim() < min_rank:
            return None
        return _wrap(fn(args[0]._value, *args[1:], **kwargs), args[0]._levels)
    return rule


# ----- rules: indexing with non-adjacent advanced indices --------------------------------------------------------
def _getitem_advanced(fn, args, kwargs):
    """x[i, :, j] with unbatched index tensors that are not adjacent: the op puts the index dims first, in front
    of the batch dims' full slices; they move back behind them."""
    out = _getitem(fn, args, kwargs)
    if out is not None:
        return out
    x, index = args[0], args[1]
    if not isinstance(x, BatchedTensor):
        return None
    items = index if isinstance(index, tuple) else (index,)
    if any(isinstance(i, (BatchedTensor, bool)) for i in items):
        return None
    advanced = [i for i in items if isinstance(i, (Tensor, list))]
    if not advanced or any(isinstance(i, list) for i in advanced):
        return None
    if any(i.dtype == _C.bool for i in advanced):
        return None
    k = builtins.max(i.ndim for i in advanced)
    nb = len(x._levels)
    out = fn(x._value, (slice(None),) * nb + tuple(items))
    order = tuple(builtins.range(k, k + nb)) + tuple(builtins.range(k)) + tuple(builtins.range(k + nb, out.ndim))
    return BatchedTensor(out.permute(order), x._levels)


# ----- randomness: alpha dropout --------------------------------------------------------------------------------
def _alpha_sig(args, kwargs):
    """(input, p, training, inplace) of alpha_dropout/feature_alpha_dropout in either spelling (F.'s training=,
    torch's train positional)."""
    a = dict(zip(("input", "p", "training", "inplace"), args))
    a.update(kwargs)
    if "train" in a:
        a["training"] = a.pop("train")
    return a


def _feature_different(fn, args, kwargs):
    """feature_alpha_dropout (a mask per channel of each sample: dims 0 and 1 of the row) with 'different': the
    batch folded into the row's dim 0, so every row's channels draw their own mask."""
    x = args[0]
    if not _only_first_batched(args, kwargs) or x.dim() < 2:
        return None
    v = x._value.reshape((-1,) + tuple(x.shape[1:]))
    out = fn(v, *args[1:], **kwargs)
    if out is v:
        return x
    return BatchedTensor(out.reshape(tuple(x._value.shape)), x._levels)


def _affine_same(fn, args, kwargs):
    """randomness='same' for alpha dropout: given its mask the op is affine in the input (a x + c, a and c of the
    mask), so one row's mask is read by running the op on a row of zeros and, from the same generator state, a row
    of ones; every row is then a x + c with that mask."""
    x = args[0]
    if not _only_first_batched(args, kwargs):
        return None
    state = _C._get_rng_state()
    zeros = fn(_C.full(tuple(x.shape), 0.0, x.dtype), *args[1:], **kwargs)
    _C._set_rng_state(state)
    ones = fn(_C.full(tuple(x.shape), 1.0, x.dtype), *args[1:], **kwargs)
    out = x._value * (ones - zeros) + zeros
    if _alpha_sig(args, kwargs).get("inplace") or fn.__name__.endswith("_"):
        x._value.copy_(out)
        return x
    return BatchedTensor(out, x._levels)


for _k in ("alpha_dropout", "F.alpha_dropout", "alpha_dropout_", "dropout_"):
    RANDOM_RULES[_k] = _random_elementwise
for _k in ("feature_alpha_dropout", "F.feature_alpha_dropout", "feature_alpha_dropout_"):
    RANDOM_RULES[_k] = _or_loop(_k, _feature_different)
for _k in ("alpha_dropout", "F.alpha_dropout", "alpha_dropout_", "feature_alpha_dropout", "F.feature_alpha_dropout",
           "feature_alpha_dropout_"):
    SAME_RULES[_k] = _or_loop(_k, _affine_same)
SAME_RULES["dropout_"] = _dropout_same


# ----- the tables of the families above ---------------------------------------------------------------------------
for _k in """subtract multiply rsub gcd lcm igamma igammac bitwise_left_shift bitwise_right_shift isclose floor_divide
special.airy_ai special.bessel_j0 special.bessel_j1 special.bessel_y0 special.bessel_y1 special.chebyshev_polynomial_t
special.chebyshev_polynomial_u special.chebyshev_polynomial_v special.chebyshev_polynomial_w special.gammainc
special.gammaincc special.hermite_polynomial_h special.hermite_polynomial_he special.laguerre_polynomial_l
special.legendre_polynomial_p special.modified_bessel_i0 special.modified_bessel_i1 special.modified_bessel_k0
special.modified_bessel_k1 special.multigammaln special.scaled_modified_bessel_k0 special.scaled_modified_bessel_k1
special.shifted_chebyshev_polynomial_t special.shifted_chebyshev_polynomial_u special.shifted_chebyshev_polynomial_v
special.shifted_chebyshev_polynomial_w special.spherical_bessel_j0 special.zeta resolve_neg""".split():
    RULES.setdefault(_k, _pointwise)
for _row in table.rows():
    _key = _key_of(_row)
    if _key.endswith("_") and not _key.endswith("__") and _key not in RULES and RULES.get(_key[:-1]) is _pointwise:
        RULES[_key] = _or_loop(_key, _inplace_fn)
for _k, _rule in (("select_copy", _dims_rule("dim")), ("transpose_copy", _dims_rule("dim0", "dim1")),
                  ("unsqueeze_copy", _dims_rule("dim", extra_rank=1)), ("narrow_copy", _dims_rule("dim")),
                  ("diagonal_copy", _dims_rule("dim1", "dim2")), ("permute_copy", _permute),
                  ("expand_copy", _expand), ("squeeze_copy", _squeeze), ("t_copy", _t), ("view_copy", _reshape_param),
                  ("detach_copy", lambda fn, args, kwargs: args[0].detach()), ("alias_copy", _creation_like),
                  ("split_copy", _split_rule), ("unbind_copy", _split_rule), ("split_with_sizes_copy", _split_rule),
                  ("split_with_sizes", _split_rule), ("unsafe_split", _split_rule), ("unsafe_chunk", _split_rule),
                  ("unsafe_split_with_sizes", _split_rule), ("slice_copy", _dims_rule("dim"))):
    RULES[_k] = _or_loop(_k, _then_clone(_rule))
for _k in ("sort", "argsort", "topk", "kthvalue", "mode"):
    RULES[_k] = _or_loop(_k, _dim_rule(none_means_all=False))
for _k in ("median", "nanmedian"):
    RULES[_k] = _or_loop(_k, _median_rule)
for _k in ("quantile", "nanquantile"):
    RULES[_k] = _or_loop(_k, _quantile_rule)
RULES["msort"] = _or_loop("msort", _msort)
for _k in ("fft", "ifft", "rfft", "irfft", "hfft", "ihfft"):
    RULES["fft." + _k] = _or_loop("fft." + _k, _fft_rule("dim", False))
for _k in ("fft2", "ifft2", "rfft2", "irfft2", "hfft2", "ihfft2", "fftn", "ifftn", "rfftn", "irfftn", "hfftn",
           "ihfftn"):
    RULES["fft." + _k] = _or_loop("fft." + _k, _fft_rule("dim", True))
for _k in ("fftshift", "ifftshift"):
    RULES["fft." + _k] = _or_loop("fft." + _k, _fft_rule("dim", False))
for _k in ("linalg.vector_norm", "linalg.matrix_norm", "linalg.norm", "norm"):
    RULES[_k] = _or_loop(_k, _dim_rule())
for _k in """det logdet slogdet inverse cholesky matrix_exp pinverse qr svd linalg.cholesky linalg.cholesky_ex linalg.cond
linalg.det linalg.eig linalg.eigh linalg.eigvals linalg.eigvalsh linalg.inv linalg.inv_ex linalg.ldl_factor
linalg.ldl_factor_ex linalg.lu linalg.lu_factor linalg.lu_factor_ex linalg.matrix_exp linalg.pinv linalg.qr
linalg.slogdet linalg.svd linalg.svdvals linalg.matrix_rank geqrf""".split():
    RULES[_k] = _or_loop(_k, _matrix_first(2))
for _k in ("matrix_power", "linalg.matrix_power"):
    RULES[_k] = _or_loop(_k, _matrix_first(2))
for _k in """linalg.solve linalg.solve_ex linalg.solve_triangular linalg.lu_solve linalg.ldl_solve cholesky_solve
triangular_solve lu_solve linalg.householder_product orgqr ormqr""".split():
    RULES[_k] = _or_loop(_k, _matrix_batch(1))
RULES["__getitem__"] = _or_loop("__getitem__", _getitem_advanced)


# ----- rules: products of vectors, shape composites ---------------------------------------------------------------
def _two_vectors(combine):
    """outer/ger/vdot of two 1-D rows: the aligned physical vectors combined (broadcast over the batch)."""
    def rule(fn, args, kwargs):
        if kwargs or len(args) != 2 or not all(_is_tensor(a) for a in args):
            return None
        a, b = args
        if _logical_rank(a) != 1 or _logical_rank(b) != 1:
            return None
        levels = _levels_of([a, b])
        return BatchedTensor(combine(_phys(a, levels), _phys(b, levels)), levels)
    return rule


def _trace(fn, args, kwargs):
    x = args[0]
    if not _only_first_batched(args, kwargs) or x.dim() != 2:
        return None
    return BatchedTensor(x._value.diagonal(0, -2, -1).sum(-1), x._levels)


def _diag(fn, args, kwargs):
    """diag(x, diagonal): a 1-D row becomes a matrix (diag_embed), a 2-D row gives its diagonal."""
    x = args[0]
    offset = args[1] if len(args) > 1 else kwargs.get("diagonal", 0)
    if not _only_first_batched(args, kwargs) or x.dim() not in (1, 2) or isinstance(offset, bool) or \
            not isinstance(offset, int):
        return None
    if x.dim() == 1:
        return BatchedTensor(_diag_embed(x._value, offset, -2, -1), x._levels)
    return BatchedTensor(x._value.diagonal(offset, -2, -1), x._levels)


def _diagflat(fn, args, kwargs):
    x = args[0]
    offset = args[1] if len(args) > 1 else kwargs.get("offset", 0)
    if not _only_first_batched(args, kwargs) or isinstance(offset, bool) or not isinstance(offset, int):
        return None
    return BatchedTensor(_diag_embed(_flat_rows(x), offset, -2, -1), x._levels)


def _roll(fn, args, kwargs):
    """roll(x, shifts, dims): the dims shifted; no dims rolls the flattened row."""
    x = args[0]
    if not _only_first_batched(args, kwargs) or x.dim() == 0:
        return None
    shifts = args[1] if len(args) > 1 else kwargs.get("shifts")
    dims = args[2] if len(args) > 2 else kwargs.get("dims")
    nb = len(x._levels)
    if dims is None or (isinstance(dims, (tuple, list)) and len(dims) == 0):
        flat = _flat_rows(x)
        return BatchedTensor(fn(flat, shifts, nb).reshape(tuple(x._value.shape)), x._levels)
    return _dims_rule("dims")(fn, args, kwargs)


def _flip_one(d):
    def rule(fn, args, kwargs):
        x = args[0]
        if not _only_first_batched(args, kwargs) or x.dim() < (2 if d else 1):
            return None
        return BatchedTensor(x._value.flip(len(x._levels) + d), x._levels)
    return rule


def _tile(fn, args, kwargs):
    """tile(x, reps) / x.repeat(*sizes): the row padded with leading size-1 dims to the reps' length, then the
    batch dims repeated once."""
    x = args[0]
    if not _only_first_batched(args, kwargs):
        return None
    reps = tuple(_sizes_from(list(args[1:]) + list(kwargs.values())))
    if any(isinstance(r, bool) or not isinstance(r, int) for r in reps):
        return None
    is_repeat = fn.__name__ == "repeat"
    if is_repeat and len(reps) < x.dim():
        return None                        # repeat's own error
    nb, rank = len(x._levels), builtins.max(x.dim(), len(reps))
    reps = (1,) * (rank - len(reps)) + reps
    v = _phys(x, x._levels, rank)
    return BatchedTensor(v.repeat((1,) * nb + reps), x._levels)


def _ravel(fn, args, kwargs):
    x = args[0]
    if not _only_first_batched(args, kwargs):
        return None
    return BatchedTensor(_flat_rows(x), x._levels)


def _atleast(n):
    shapes = {1: {0: lambda s: (1,)}, 2: {0: lambda s: (1, 1), 1: lambda s: (1,) + s},
              3: {0: lambda s: (1, 1, 1), 1: lambda s: (1,) + s + (1,), 2: lambda s: s + (1,)}}[n]

    def one(x):
        if not isinstance(x, BatchedTensor):
            return fn_plain(x)
        shape = tuple(x.shape)
        if len(shape) not in shapes:
            return x
        nb = len(x._levels)
        return BatchedTensor(x._value.reshape(tuple(x._value.shape[:nb]) + shapes[len(shape)](shape)), x._levels)

    def fn_plain(x):
        shape = tuple(x.shape)
        return x.reshape(shapes[len(shape)](shape)) if len(shape) in shapes else x

    def rule(fn, args, kwargs):
        if kwargs:
            return None
        if len(args) == 1 and isinstance(args[0], (tuple, list)):
            return tuple(one(a) for a in args[0])
        if len(args) == 1:
            return one(args[0])
        return tuple(one(a) for a in args)
    return rule


def _broadcast_to(fn, args, kwargs):
    x = args[0]
    shape = args[1] if len(args) > 1 else kwargs.get("size")
    return _expand(fn, (x, tuple(shape)), {})


def _broadcast_tensors(fn, args, kwargs):
    tensors = list(args[0]) if len(args) == 1 and isinstance(args[0], (tuple, list)) else list(args)
    if kwargs or not all(_is_tensor(t) for t in tensors):
        return None
    shape = ()
    for t in tensors:
        shape = _broadcast_shape(shape, tuple(t.shape))
        if shape is None:
            return None
    levels = _levels_of(tensors)
    sizes = _batch_sizes(levels)
    out = []
    for t in tensors:
        v = _phys(t, levels, len(shape))
        out.append(BatchedTensor(v.expand(sizes + shape), levels) if levels else v)
    return tuple(out)


def _broadcast_shape(a, b):
    out = []
    for x, y in itertools.zip_longest(reversed(a), reversed(b), fillvalue=1):
        if x != y and 1 not in (x, y):
            return None
        out.append(builtins.max(x, y) if 0 not in (x, y) else 0)
    return tuple(reversed(out))


def _aligned_dim(param, tensor_params):
    """Binary ops along a dim of broadcast operands (cosine_similarity, linalg.cross, linalg.vecdot): the operands
    aligned to one logical rank, the dim shifted within it."""
    def rule(fn, args, kwargs):
        sig = _signature(fn)
        try:
            bound = sig.bind(*args, **kwargs)
        except TypeError:
            return None
        bound.apply_defaults()
        a = bound.arguments
        tensors = [a[p] for p in tensor_params]
        if not all(_is_tensor(t) for t in tensors):
            return None
        levels = _levels_of(tensors)
        rank = builtins.max(_logical_rank(t) for t in tensors)
        if rank == 0 or a[param] is None:
            return None
        d = _shift_dim(a[param], rank, len(levels))
        if d is None:
            return None
        for p in tensor_params:
            a[p] = _phys(a[p], levels, rank)
        a[param] = d
        return _wrap(fn(*bound.args, **bound.kwargs), levels)
    return rule


def _diff(fn, args, kwargs):
    sig = _signature(fn)
    bound = sig.bind(*args, **kwargs)
    if bound.arguments.get("prepend") is not None or bound.arguments.get("append") is not None:
        return None
    return _dim_rule(none_means_all=False)(fn, args, kwargs)


def _trapezoid(fn, args, kwargs):
    sig = _signature(fn)
    bound = sig.bind(*args, **kwargs)
    if _is_tensor(bound.arguments.get("x")):
        return None
    return _dim_rule(none_means_all=False)(fn, args, kwargs)


def _adjoint(fn, args, kwargs):
    x = args[0]
    if not _only_first_batched(args, kwargs) or x.dim() < 2:
        return None
    return BatchedTensor(x._value.transpose(-1, -2).conj(), x._levels)


def _matrix_H(fn, args, kwargs):
    """Tensor.H of each row: a row must be a matrix (the op's own error otherwise, from one row)."""
    _check_H_matrix(args[0].dim())
    return _adjoint(fn, args, kwargs)


def _implicit_softmax(fn, args, kwargs):
    """softmax/log_softmax/softmin with dim=None: torch's implicit dim (0 for 0-, 1- and 3-D rows, else 1) of the
    row, shifted."""
    sig = _signature(fn)
    bound = sig.bind(*args, **kwargs)
    x = bound.arguments[list(sig.parameters)[0]]
    if not _only_first_batched(args, kwargs):
        return None
    if bound.arguments.get("dim") is None:
        rank = x.dim()
        if rank == 0:
            return None
        bound.arguments["dim"] = 0 if rank in (1, 3) else 1
        return _dim_rule(none_means_all=False)(fn, bound.args, bound.kwargs)
    return _dim_rule(none_means_all=False)(fn, args, kwargs)


def _fold_n(min_rank):
    """Ops over (N, C, *) inputs that treat N as a batch (interpolate, group_norm, local_response_norm,
    channel_shuffle): the vmap batch folded into N; their other tensor arguments (weights) must be unbatched."""
    def rule(fn, args, kwargs):
        if not _only_first_batched(args, kwargs):
            return None
        x = args[0]
        if x.dim() < min_rank:
            return None
        nb = len(x._levels)
        sizes = tuple(x._value.shape[:nb])
        out = fn(x._value.reshape((-1,) + tuple(x.shape[1:])), *args[1:], **kwargs)
        return _wrap(out.reshape(sizes + (x.shape[0],) + tuple(out.shape[1:])), x._levels)
    return rule


for _k, _rule in (("outer", _two_vectors(lambda a, b: a.unsqueeze(-1) * b.unsqueeze(-2))),
                  ("ger", _two_vectors(lambda a, b: a.unsqueeze(-1) * b.unsqueeze(-2))),
                  ("vdot", _two_vectors(lambda a, b: (a.conj() * b).sum(-1))),
                  ("trace", _trace), ("diag", _diag), ("diagflat", _diagflat), ("roll", _roll),
                  ("rot90", _dims_rule("dims")), ("fliplr", _flip_one(1)), ("flipud", _flip_one(0)),
                  ("tile", _tile), ("repeat", _tile), ("ravel", _ravel), ("atleast_1d", _atleast(1)),
                  ("atleast_2d", _atleast(2)), ("atleast_3d", _atleast(3)), ("broadcast_to", _broadcast_to),
                  ("broadcast_tensors", _broadcast_tensors), ("diag_embed", _dims_rule("dim1", "dim2", extra_rank=1)),
                  ("cosine_similarity", _aligned_dim("dim", ("x1", "x2"))),
                  ("F.cosine_similarity", _aligned_dim("dim", ("x1", "x2"))),
                  ("linalg.cross", _aligned_dim("dim", ("input", "other"))),
                  ("linalg.vecdot", _aligned_dim("dim", ("x", "y"))), ("diff", _diff),
                  ("trapezoid", _trapezoid), ("cumulative_trapezoid", _trapezoid), ("adjoint", _adjoint), ("mH", _adjoint),
                  ("H", _matrix_H),
                  ("std_mean", _dim_rule()), ("var_mean", _dim_rule()), ("constant_pad_nd", _first_only),
                  ("rms_norm", _first_only), ("F.rms_norm", _first_only), ("linalg.diagonal", _dims_rule("dim1", "dim2")),
                  ("F.interpolate", _fold_n(3)), ("F.upsample", _fold_n(3)), ("F.upsample_nearest", _fold_n(3)),
                  ("F.upsample_bilinear", _fold_n(3)), ("F.group_norm", _fold_n(2)), ("group_norm", _fold_n(2)),
                  ("F.local_response_norm", _fold_n(3)), ("channel_shuffle", _fold_n(3)),
                  ("native_channel_shuffle", _fold_n(3)), ("F.lp_pool3d", _fold_leading(3))):
    RULES[_k] = _or_loop(_k, _rule)
for _k in ("F.softmax", "F.log_softmax", "F.softmin"):
    RULES[_k] = _or_loop(_k, _implicit_softmax)
for _k, _n in (("F.max_pool1d_with_indices", 1), ("F.max_pool2d_with_indices", 2), ("F.max_pool3d_with_indices", 3),
               ("max_pool1d_with_indices", 1), ("F.adaptive_max_pool1d_with_indices", 1),
               ("F.adaptive_max_pool2d_with_indices", 2), ("F.adaptive_max_pool3d_with_indices", 3)):
    RULES[_k] = _or_loop(_k, _fold_leading(_n))
for _k, _params in (("margin_ranking_loss", ("input1", "input2", "target")),
                    ("hinge_embedding_loss", ("input", "target")), ("poisson_nll_loss", ("input", "target"))):
    RULES[_k] = RULES["F." + _k] = _or_loop(_k, _pointwise_loss(*_params))


def _values_against_unbatched(fn, args, kwargs):
    """isin(elements, test), bucketize(input, boundaries): elementwise in the first argument when the other (the
    set, the boundaries) is unbatched. (searchsorted, whose sorted sequence comes first, has _searchsorted_rule.)"""
    if len(args) < 2 or not isinstance(args[0], BatchedTensor) or _has_batched(list(args[1:]) + list(kwargs.values()),
                                                                                  {}):
        return None
    x = args[0]
    return _wrap(fn(x._value, *args[1:], **kwargs), x._levels)


RULES["cfloat"] = RULES["cdouble"] = _pointwise
RULES["isin"] = _or_loop("isin", _values_against_unbatched)
RULES["bucketize"] = _or_loop("bucketize", _values_against_unbatched)


def _reduce_all_flat(fn, args, kwargs):
    """prod/aminmax: with no dim, the op over the flattened row (they take one int dim, not a tuple)."""
    sig = _signature(fn)
    bound = sig.bind(*args, **kwargs)
    x = bound.arguments[list(sig.parameters)[0]]
    if bound.arguments.get("dim") is not None:
        return _dim_rule()(fn, args, kwargs)
    if not _only_first_batched(args, kwargs) or x.dim() == 0 or bound.arguments.get("keepdim"):
        return None
    bound.arguments[list(sig.parameters)[0]] = _flat_rows(x)
    bound.arguments["dim"] = len(x._levels)
    return _wrap(fn(*bound.args, **bound.kwargs), x._levels)


for _k in ("prod", "aminmax"):
    RULES[_k] = _or_loop(_k, _reduce_all_flat)


# index_add's, scatter's and scatter_add's index/src are aligned by _index_dim_rule; index_select's must be
# unbatched (a batched index falls back).


# ===== vmapA: nn.functional and torch.masked rules (issue 21) ======================================================
# The nn.functional-class ops (losses, transposed and time-major convs, stft/istft, unfold, prelu, bilinear, the
# sampling and unpooling layers, embedding_bag, batch/instance norm, multi-head attention) and the 19 torch.masked
# ops. Most fold the vmap batch into the op's own N dim, or run the op on the physical tensors with the dims
# shifted; a case a rule does not cover returns None, and the loop runs (and is counted: tests/test_vmap_coverage.py).
_REDUCTION_CODES = {0: "none", 1: "mean", 2: "sum"}      # the aten rows' reduction= (kl_div, margin_ranking_loss, ...)


def _masked_rule(kind):
    """torch.masked's ops (Note [torch.masked's rules]): the op itself on the physical input, expanded to the batch,
    with the mask aligned to it (levels in front, left-padded to its rank: it still broadcasts to the input, as
    masked's own broadcast_to wants) and the dims shifted past the batch dims. kind: 'reduce' (dim None or () is
    every logical dim), 'one' (one int dim: scans, softmaxes, median, normalize), 'arg' (argmax/argmin: dim None
    indexes the flattened row), 'pointwise' (logaddexp: every operand aligned)."""
    def rule(fn, args, kwargs):
        bound = _bound_args(fn, args, kwargs)
        if bound is None:
            return None
        a = bound.arguments
        names = [n for n in ("input", "other", "mask", "input_mask", "other_mask") if _is_tensor(a.get(n))]
        if "input" not in names:
            return None
        levels = _levels_of([a[n] for n in names])
        nb = len(levels)
        if kind == "pointwise":
            rank = builtins.max(_logical_rank(a[n]) for n in names)
            for n in names:
                a[n] = _phys(a[n], levels, rank, expand=n in ("input", "other"))
            return _wrap(fn(*bound.args, **bound.kwargs), levels)
        x = a["input"]
        rank = _logical_rank(x)
        mask = a.get("mask")
        if rank == 0 or (_is_tensor(mask) and _logical_rank(mask) > rank):
            return None
        xv = _phys(x, levels, expand=True)
        mv = _phys(mask, levels, rank) if _is_tensor(mask) else mask
        d = a.get("dim")
        if d is None or (isinstance(d, (tuple, list)) and len(d) == 0):
            if kind == "one":
                return None
            if kind == "arg":
                if a.get("keepdim") and rank > 1:
                    return None
                sizes = tuple(xv.shape[:nb])
                if _is_tensor(mv):
                    mv = mv.expand(tuple(xv.shape)).reshape(sizes + (-1,))
                xv, new = xv.reshape(sizes + (-1,)), nb
            else:
                new = tuple(builtins.range(nb, nb + rank))
        elif isinstance(d, bool):
            return None
        elif isinstance(d, (tuple, list)):
            new = tuple(_shift_dim(e, rank, nb) for e in d)
            if None in new:
                return None
        else:
            new = _shift_dim(d, rank, nb)
            if new is None:
                return None
        a["input"], a["dim"] = xv, new
        if _is_tensor(mask):
            a["mask"] = mv
        return _wrap(fn(*bound.args, **bound.kwargs), levels)
    return rule


# Note [torch.masked's rules]: a masked op reads its mask only through masked.py's _input_mask (broadcast_to the
# input's shape, then bool) and its dims through _dims, so on the physical tensors (the input expanded to every
# open level, the mask with size-1 dims for the levels it lacks) the op computes every row's result at once; the
# masked-out elements are replaced by the identity elementwise, and the reductions run over the shifted dims only.
for _k, _kind in (("sum", "reduce"), ("prod", "reduce"), ("amax", "reduce"), ("amin", "reduce"),
                  ("mean", "reduce"), ("logsumexp", "reduce"), ("norm", "reduce"), ("var", "reduce"),
                  ("std", "reduce"), ("cumsum", "one"), ("cumprod", "one"), ("median", "one"),
                  ("softmax", "one"), ("log_softmax", "one"), ("softmin", "one"), ("normalize", "one"),
                  ("argmax", "arg"), ("argmin", "arg"), ("logaddexp", "pointwise")):
    RULES["masked." + _k] = _or_loop("masked." + _k, _masked_rule(_kind))


def _pixel_unshuffle_rule(fn, args, kwargs):
    """pixel_(un)shuffle take (*, C, H, W): the physical tensor as it is."""
    return _first_only(fn, args, kwargs)


def _stft_rule(complex_rank):
    """stft over (L) or (N, L) rows, istft over (F, T) or (N, F, T) complex rows: the batch folded into N (the
    window must be unbatched)."""
    def rule(fn, args, kwargs):
        if not _only_first_batched(args, kwargs):
            return None
        x = args[0]
        rank, nb = x.dim(), len(x._levels)
        if rank not in (complex_rank, complex_rank + 1) or (complex_rank == 2 and not x.is_complex()):
            return None
        sizes = tuple(x._value.shape[:nb])
        v = x._value.reshape((-1,) + tuple(x.shape[rank - complex_rank:]))
        out = fn(v, *args[1:], **kwargs)
        lead = sizes + ((x.shape[0],) if rank == complex_rank + 1 else ())
        return BatchedTensor(out.reshape(lead + tuple(out.shape[1:])), x._levels)
    return rule


def _conv_tbc_rule(fn, args, kwargs):
    """conv_tbc over (T, N, C) rows: the batch moved beside N and folded into it; a batched weight or bias
    (per-sample gradients): conv1d of the permuted rows, as the op's definition, through conv1d's rule (the
    batch in its groups)."""
    if not isinstance(args[0], BatchedTensor) or _has_batched(args[1:], kwargs):
        bound = _bound_args(fn, args, kwargs)
        if bound is None:
            return None
        a = bound.arguments
        x, w, b, pad = a.get("input"), a.get("weight"), a.get("bias"), a.get("pad", 0)
        if (not all(_is_tensor(t) for t in (x, w, b)) or isinstance(pad, bool) or not isinstance(pad, int) or
                pad < 0 or _logical_rank(x) != 3 or _logical_rank(w) != 3 or _logical_rank(b) != 1 or
                x.shape[2] != w.shape[1] or b.shape[0] != w.shape[2] or x.shape[0] + 2 * pad - w.shape[0] + 1 <= 0):
            return None                             # the op's errors and its cropping, by the loop
        xp = _dispatch("permute", lambda t, dims: t.permute(dims), (x, (1, 2, 0)), {})
        wp = _dispatch("permute", lambda t, dims: t.permute(dims), (w, (2, 1, 0)), {})
        out = _dispatch("conv1d", _conv1d_fn, (xp, wp, b), {"padding": pad})
        return _dispatch("permute", lambda t, dims: t.permute(dims), (out, (2, 0, 1)), {})
    x = args[0]
    nb = len(x._levels)
    if x.dim() != 3:
        return None
    sizes = tuple(x._value.shape[:nb])
    v = x._value.movedim(nb, 0)                                    # (T, *batch, N, C)
    t, n, c = x.shape
    out = fn(v.reshape((t, -1, c)), *args[1:], **kwargs)           # (T', Bt*N, O)
    out = out.reshape((out.shape[0],) + sizes + (n, out.shape[-1]))
    return BatchedTensor(out.movedim(0, nb), x._levels)


def _bilinear_rule(fn, args, kwargs):
    """bilinear(x1, x2, weight, bias) over (*, in) rows: x1 and x2 aligned (their leading dims are the op's own
    batch); a batched weight or bias: _bilinear_batched_weight."""
    bound = _bound_args(fn, args, kwargs)
    if bound is None:
        return None
    a = bound.arguments
    x1, x2, w, b = a.get("input1"), a.get("input2"), a.get("weight"), a.get("bias")
    if not (_is_tensor(x1) and _is_tensor(x2)) or _logical_rank(x1) != _logical_rank(x2) or _logical_rank(x1) == 0:
        return None
    if _has_batched([w, b], {}):
        if (not _is_tensor(w) or _logical_rank(w) != 3 or tuple(x1.shape[:-1]) != tuple(x2.shape[:-1]) or
                (x1.shape[-1], x2.shape[-1]) != tuple(w.shape[1:]) or
                (b is not None and (not _is_tensor(b) or tuple(b.shape) != (w.shape[0],)))):
            return None                             # the op's own errors, by the loop
        return _bilinear_batched_weight(x1, x2, w, b)
    levels = _levels_of([x1, x2])
    a["input1"], a["input2"] = _phys(x1, levels, expand=True), _phys(x2, levels, expand=True)
    return _wrap(fn(*bound.args, **bound.kwargs), levels)


def _bilinear_batched_weight(x1, x2, w, b):
    """bilinear with a batched weight (per-sample gradients), on the physical tensors as its definition computes
    it: x1 @ (in1, out * in2) per row, contracted with x2 over in2."""
    levels = _levels_of([x1, x2, w, b])
    nb = len(levels)
    sizes = _batch_sizes(levels)
    out, in1, in2 = w.shape
    rank = _logical_rank(x1)
    v1, v2 = _phys(x1, levels, expand=True), _phys(x2, levels, expand=True)
    lead = tuple(v1.shape[nb:-1])
    wv = _phys(w, levels, expand=True)
    wv = wv.permute(tuple(builtins.range(nb)) + (nb + 1, nb, nb + 2)).reshape(tuple(sizes) + (in1, out * in2))
    left = v1.reshape(tuple(sizes) + (-1, in1)).matmul(wv).reshape(tuple(sizes) + lead + (out, in2))
    y = (left * v2.unsqueeze(-2)).sum(-1)
    if b is not None:
        y = y + _phys(b, levels, rank)
    return BatchedTensor(y, levels)


def _prelu_rule(fn, args, kwargs):
    """prelu(x, weight): the weight scales the row's dim 1 (its channels) where x < 0. An unbatched weight: the op
    on the physical tensor with the row's dims 0 and 1 moved in front of the batch dims; a batched one: the formula
    on the aligned operands (weight viewed along dim 1), as for a row of rank < 2 (one weight, no channels)."""
    bound = _bound_args(fn, args, kwargs)
    if bound is None:
        return None
    x, w = bound.arguments.get("input"), bound.arguments.get("weight")
    if not (_is_tensor(x) and _is_tensor(w)) or _logical_rank(w) > 1:
        return None
    rank = _logical_rank(x)
    levels = _levels_of([x, w])
    nb = len(levels)
    if not isinstance(w, BatchedTensor) and rank >= 2:
        v = x._value
        order = (nb, nb + 1) + tuple(builtins.range(nb)) + tuple(builtins.range(nb + 2, v.ndim))
        out = fn(v.permute(order), w)
        back = [0] * v.ndim
        for pos, d in enumerate(order):
            back[d] = pos
        return BatchedTensor(out.permute(tuple(back)), levels)
    wv = _phys(w, levels)                                          # (*batch, C) or (*batch,) for a 0-d weight
    c = tuple(w.shape)
    if rank >= 2:
        if c and c[0] not in (1, x.shape[1]):
            return None
        wv = wv.reshape(tuple(wv.shape[:nb]) + (1,) + (c[0] if c else 1,) + (1,) * (rank - 2))
    else:
        if c and c[0] != 1:
            return None
        wv = wv.reshape(tuple(wv.shape[:nb]) + (1,) * rank)
    xv = _phys(x, levels, expand=True)
    return BatchedTensor(xv.clamp(min=0) + wv * xv.clamp(max=0), levels)


def _conv_transpose(spatial):
    """conv_transpose{1,2,3}d: as _conv, the batch folded into N for an unbatched weight, into the groups for a
    batched one (weight (Cin, Cout/g, *k): the batch's copies stacked along Cin, so group b*g + j is row b's j)."""
    def rule(fn, args, kwargs):
        bound = _bound_args(fn, args, kwargs)
        if bound is None:
            return None
        a = bound.arguments
        x, w, b = a.get("input"), a.get("weight"), a.get("bias")
        rank = _logical_rank(x)
        if not _is_tensor(w) or rank not in (spatial + 1, spatial + 2) or _logical_rank(w) != spatial + 2:
            return None
        levels = _levels_of([x, w, b])
        nb = len(levels)
        sizes = _batch_sizes(levels)
        n = x.shape[0] if rank == spatial + 2 else None
        if not isinstance(w, BatchedTensor) and not isinstance(b, BatchedTensor):
            v = _fold(_phys(x, levels, spatial + 2), nb)
            a["input"] = v.reshape((-1,) + tuple(v.shape[2:]))
            out = fn(*bound.args, **bound.kwargs)
            return BatchedTensor(out.reshape(tuple(sizes) + ((n,) if n is not None else ()) + tuple(out.shape[1:])),
                                 levels)
        bt = math.prod(sizes)
        xv = _fold(_phys(x, levels, spatial + 2, expand=True), nb)           # (Bt, N, Cin, ...)
        nn_, cin = xv.shape[1], xv.shape[2]
        a["input"] = xv.transpose(0, 1).reshape((nn_, bt * cin) + tuple(xv.shape[3:]))
        wv = _fold(_phys(w, levels, expand=True), nb)                         # (Bt, Cin, Cout/g, ...)
        a["weight"] = wv.reshape((bt * cin,) + tuple(wv.shape[2:]))
        groups = a.get("groups", 1)
        cout = wv.shape[2] * groups
        if b is not None:
            a["bias"] = _fold(_phys(b, levels, 1, expand=True), nb).reshape((bt * cout,))
        a["groups"] = groups * bt
        out = fn(*bound.args, **bound.kwargs)                                 # (N, Bt*Cout, ...)
        out = out.reshape((nn_, bt, cout) + tuple(out.shape[2:])).transpose(0, 1)
        if n is None:
            out = out.squeeze(1)
        return BatchedTensor(out.reshape(tuple(sizes) + tuple(out.shape[1:])), levels)
    return rule


for _k, _rule in (("pixel_unshuffle", _pixel_unshuffle_rule), ("F.pixel_unshuffle", _pixel_unshuffle_rule),
                  ("unfold", _dims_rule("dimension")), ("unfold_copy", _dims_rule("dimension")),
                  ("stft", _stft_rule(1)), ("istft", _stft_rule(2)), ("conv_tbc", _conv_tbc_rule),
                  ("bilinear", _bilinear_rule), ("F.bilinear", _bilinear_rule), ("prelu", _prelu_rule),
                  ("F.prelu", _prelu_rule), ("conv_transpose1d", _conv_transpose(1)),
                  ("conv_transpose2d", _conv_transpose(2)), ("conv_transpose3d", _conv_transpose(3))):
    RULES[_k] = _or_loop(_k, _rule)


# ----- vmapA: losses over (N, *) samples, the sampling layers, norms with running statistics -------------------
def _reduction_arg(a):
    """(the reduction as a word, the value meaning 'none' in the op's own spelling), or (None, None): the legacy
    size_average/reduce arguments, or a reduction no rule here knows (the loop raises the op's error)."""
    if any(a.get(k) is not None for k in _LEGACY):
        return None, None
    code = a.get("reduction", "mean")
    word = _REDUCTION_CODES.get(code, code) if isinstance(code, (int, str)) and not isinstance(code, bool) else None
    if word not in ("none", "mean", "sum"):
        return None, None
    return word, (0 if isinstance(code, int) else "none")


def _sample_loss(ranks, weight=None):
    """Losses whose input is one sample (rank ranks[first]) or N of them (one more dim), with one loss per sample
    (cosine_embedding, triplet_margin, multi_margin, multilabel_margin, multilabel_soft_margin): every operand
    named in `ranks` aligned and folded into N, the op run with reduction='none', each row reduced by itself. A
    batched class weight (C,): `weight` 'per_class' (multilabel_soft_margin multiplies each class's loss by it,
    broadcasting: repeated per sample and folded), 'by_target' (multi_margin scales a sample's loss by the weight
    of its target class: the unweighted losses times the row's weights gathered at the targets); else it must be
    unbatched."""
    def rule(fn, args, kwargs):
        bound = _bound_args(fn, args, kwargs)
        if bound is None:
            return None
        a = bound.arguments
        reduction, none = _reduction_arg(a)
        if reduction is None or a.get("distance_function") is not None:
            return None
        names = list(ranks)
        if not all(_is_tensor(a.get(p)) for p in names):
            return None
        w = a.get("weight")
        batched_w = weight is not None and isinstance(w, BatchedTensor)
        if _has_batched([v for k, v in a.items() if k not in ranks and not (batched_w and k == "weight")], {}):
            return None
        has_n = _logical_rank(a[names[0]]) - ranks[names[0]]
        if has_n not in (0, 1) or any(_logical_rank(a[p]) != ranks[p] + has_n for p in names):
            return None
        if batched_w and (_logical_rank(w) != 1 or w.shape[0] != a[names[0]].shape[-1]):
            return None                                     # the op's own error, by the loop
        levels = _levels_of([a[p] for p in names] + ([w] if batched_w else []))
        nb = len(levels)
        sizes = _batch_sizes(levels)
        n = a[names[0]].shape[0] if has_n else None
        for p in names:
            v = _fold(_phys(a[p], levels, expand=True), nb)
            a[p] = v.reshape((-1,) + tuple(v.shape[2:])) if has_n else v
        wv = _fold(_phys(w, levels, expand=True), nb) if batched_w else None        # (Bt, C)
        if batched_w and weight == "per_class":
            a["weight"] = (wv.unsqueeze(1).expand((wv.shape[0], n, wv.shape[1])).reshape((-1, wv.shape[1]))
                           if has_n else wv)
        elif batched_w:
            a["weight"] = None
        a["reduction"] = none
        out = fn(*bound.args, **bound.kwargs)
        out = out.reshape((-1,) + ((n,) if has_n else ()))
        if batched_w and weight == "by_target":
            t = a["target"].reshape((out.shape[0], -1))
            out = out * wv.to(out.dtype).gather(1, t).reshape(tuple(out.shape))
        return _loss_reduce(_unfold(out, sizes), levels, reduction)
    return rule


def _triplet_distance_rule(fn, args, kwargs):
    """triplet_margin_with_distance_loss: the default distance (pairwise_distance) folds as triplet_margin_loss;
    a user's distance_function runs on the rows themselves (BatchedTensors, its own calls batched by their rules),
    then max(d(a, p) - d(a, n) + margin, 0) on the physical distances."""
    bound = _bound_args(fn, args, kwargs)
    if bound is None:
        return None
    a = bound.arguments
    if a.get("distance_function") is None:
        return _sample_loss({"anchor": 1, "positive": 1, "negative": 1})(fn, args, kwargs)
    reduction, _ = _reduction_arg(a)
    anchor, pos, neg = a["anchor"], a["positive"], a["negative"]
    margin = a.get("margin", 1.0)
    if (reduction is None or not all(_is_tensor(t) for t in (anchor, pos, neg)) or
            len({_logical_rank(t) for t in (anchor, pos, neg)}) != 1 or isinstance(margin, bool) or
            not isinstance(margin, (int, float)) or margin <= 0):
        return None
    distance = a["distance_function"]
    was, STATE.active = STATE.active, True            # the user's function: a composite of public calls
    try:
        d_pos, d_neg = distance(anchor, pos), distance(anchor, neg)
        d_swap = distance(pos, neg) if a.get("swap") else None
    finally:
        STATE.active = was
    found = [d for d in (d_pos, d_neg, d_swap) if d is not None]
    if not all(_is_tensor(d) for d in found):
        return None
    levels = _levels_of(found)
    if not levels:
        return None
    rank = builtins.max(_logical_rank(d) for d in found)
    dp, dn = _phys(d_pos, levels, rank), _phys(d_neg, levels, rank)
    if d_swap is not None:
        dn = dn.minimum(_phys(d_swap, levels, rank))
    losses = (dp + float(margin) - dn).clamp(min=0.0)
    losses = losses.expand(tuple(_batch_sizes(levels)) + tuple(losses.shape[len(levels):]))
    return _loss_reduce(losses, levels, reduction)


def _gaussian_nll_rule(fn, args, kwargs):
    """gaussian_nll_loss is elementwise once var is read against input's shape (the same, one dim fewer, or size 1
    in one dim): input and target aligned (input at least target's rank), var with the batch dims only (its
    shape against input's stays the row's), reduction='none', then each row reduced by itself."""
    bound = _bound_args(fn, args, kwargs)
    if bound is None:
        return None
    a = bound.arguments
    reduction, none = _reduction_arg(a)
    x, y, var = a.get("input"), a.get("target"), a.get("var")
    if reduction is None or not (_is_tensor(x) and _is_tensor(y)) or _logical_rank(y) > _logical_rank(x):
        return None
    tensors = [t for t in (x, y, var) if _is_tensor(t)]
    levels = _levels_of(tensors)
    rank = _logical_rank(x)
    a["input"], a["target"] = _phys(x, levels, expand=True), _phys(y, levels, rank, expand=True)
    if _is_tensor(var):
        if _logical_rank(var) == 0 and rank > 0:
            return None                               # a 0-d var against a dimensioned input: the op's error
        a["var"] = _phys(var, levels, expand=True)
    a["reduction"] = none
    return _loss_reduce(fn(*bound.args, **bound.kwargs), levels, reduction)


def _lengths_phys(t, levels, count):
    """ctc_loss's lengths (a tensor, batched or not) as a physical tensor of the batch's shape + (count,)."""
    return _phys(t, levels, expand=True).reshape(tuple(_batch_sizes(levels)) + (count,))


def _as_lengths(t, like):
    """ctc_loss's lengths as a tensor: a tensor as it is, a Python int or list of ints as an unbatched int64 one
    (None: anything else, for the op's own error)."""
    if _is_tensor(t):
        return t
    if isinstance(t, int) and not isinstance(t, bool):
        return like.new_tensor(t, dtype=_C.int64)
    if isinstance(t, (list, tuple)) and all(isinstance(v, int) and not isinstance(v, bool) for v in t):
        return like.new_tensor(list(t), dtype=_C.int64)
    return None


def _padded_targets(tv, tl_v):
    """Each row's concatenated targets (Bt, L) as padded ones (Bt*N, S), S the longest target length: sample j
    of row b reads tv[b, start_bj : start_bj + S] (clamped; the op reads only its first length values). None if
    a row's lengths overrun its L (the op's error)."""
    bt, length = tv.shape[0], tv.shape[1]
    n = tl_v.shape[1]
    ends = tl_v.cumsum(1)
    if n == 0 or not bool((ends[:, -1] <= length).all()):
        return None
    s = builtins.max(int(tl_v.max().item()), 1)
    if length == 0:
        return tv.new_zeros((bt * n, s))
    pos = (ends - tl_v).unsqueeze(-1) + (tl_v.new_ones((s,)).cumsum(0) - 1)      # (Bt, N, S)
    return tv.gather(1, pos.clamp(max=length - 1).reshape((bt, n * s))).reshape((bt * n, s))


def _ctc_rule(fn, args, kwargs):
    """ctc_loss: the batch folded into N (log_probs (T, N, C), or an unbatched row's (T, C) made one sample),
    padded targets and the lengths (tensors, or Python ints/lists shared by the rows) aligned and folded; each
    row's concatenated 1-D targets become padded ones (_padded_targets); reduction='none', then each row's mean
    divides by its target lengths (at least 1) as torch's."""
    bound = _bound_args(fn, args, kwargs)
    if bound is None:
        return None
    a = bound.arguments
    reduction, none = _reduction_arg(a)
    lp, tg = a.get("log_probs"), a.get("targets")
    if reduction is None or not (_is_tensor(lp) and _is_tensor(tg)):
        return None
    like = lp._value if isinstance(lp, BatchedTensor) else lp
    il, tl = _as_lengths(a.get("input_lengths"), like), _as_lengths(a.get("target_lengths"), like)
    if il is None or tl is None:
        return None
    rank = _logical_rank(lp)
    if rank == 3:
        n = lp.shape[1]
        if _logical_rank(tg) not in (1, 2) or _logical_rank(il) != 1 or _logical_rank(tl) != 1:
            return None
    elif rank == 2:
        n = 1
        if _logical_rank(tg) != 1 or _logical_rank(il) > 1 or _logical_rank(tl) > 1:
            return None
        if il.numel() != 1 or tl.numel() != 1:
            return None
    else:
        return None
    if il.numel() != n or tl.numel() != n:
        return None
    levels = _levels_of([lp, tg, il, tl])
    nb = len(levels)
    sizes = _batch_sizes(levels)
    v = _fold(_phys(lp, levels, expand=True), nb)                  # (Bt, T, [N,] C)
    if rank == 2:
        v = v.unsqueeze(2)
    t_len, c = v.shape[1], v.shape[-1]
    a["log_probs"] = v.transpose(0, 1).reshape((t_len, -1, c))       # (T, Bt*N, C)
    il_v = _lengths_phys(il, levels, n)
    tl_v = _lengths_phys(tl, levels, n)
    tv = _fold(_phys(tg, levels, expand=True), nb)
    if rank == 3 and _logical_rank(tg) == 1:
        tv = _padded_targets(tv, _fold(tl_v, nb))
        if tv is None:
            return None
    a["targets"] = tv.reshape((-1, tv.shape[-1]))                   # (Bt*N, S)
    a["input_lengths"], a["target_lengths"] = il_v.reshape(-1), tl_v.reshape(-1)
    a["reduction"] = none
    losses = fn(*bound.args, **bound.kwargs).reshape(tuple(sizes) + (n,))
    if reduction == "mean":
        losses = losses / tl_v.clamp(min=1).to(losses.dtype)
    if rank == 2:
        losses = losses.squeeze(-1)
    return _loss_reduce(losses, levels, reduction)


def _fold_aligned_n(params, spatial_of, out_fix=None):
    """Layers whose tensor operands all carry the same leading N (grid_sample's input and grid, max_unpool's
    input and indices): each aligned to the batch and folded into N. spatial_of(a) is the rank of a row with its N
    (a row one dim short is a single sample: max_unpool), or None to refuse."""
    def rule(fn, args, kwargs):
        bound = _bound_args(fn, args, kwargs)
        if bound is None:
            return None
        a = bound.arguments
        if not all(_is_tensor(a.get(p)) for p in params):
            return None
        if _has_batched([v for k, v in a.items() if k not in params], {}):
            return None
        full = spatial_of(a)
        if full is None:
            return None
        ranks = {_logical_rank(a[p]) for p in params}
        if len(ranks) != 1 or ranks.pop() not in (full, full - 1):
            return None
        has_n = _logical_rank(a[params[0]]) == full
        levels = _levels_of([a[p] for p in params])
        nb = len(levels)
        sizes = _batch_sizes(levels)
        n = a[params[0]].shape[0] if has_n else None
        for p in params:
            v = _fold(_phys(a[p], levels, expand=True), nb)
            a[p] = v.reshape((-1,) + tuple(v.shape[2:])) if has_n else v
        if out_fix is not None:
            out_fix(a)
        out = fn(*bound.args, **bound.kwargs)
        lead = tuple(sizes) + ((n,) if has_n else ())

        def back(o):
            return o.reshape(lead + tuple(o.shape[1:]))
        if isinstance(out, tuple):
            return _wrap(type(out)(*[back(o) for o in out]) if hasattr(out, "_fields") else
                         tuple(back(o) for o in out), levels)
        return BatchedTensor(back(out), levels)
    return rule


def _unpool_output_size(spatial):
    def fix(a):
        size = a.get("output_size")
        if size is not None and not _is_tensor(size) and len(size) > spatial:
            a["output_size"] = tuple(size)[-spatial:]       # (N, C, *spatial): the spatial part only
    return fix


def _affine_grid_rule(fn, args, kwargs):
    """affine_grid(theta (N, n, n+1), size (N, C, *spatial)): the batch folded into N, size's N scaled."""
    bound = _bound_args(fn, args, kwargs)
    if bound is None:
        return None
    a = bound.arguments
    th, size = a.get("theta"), a.get("size")
    if not isinstance(th, BatchedTensor) or _logical_rank(th) != 3 or not isinstance(size, (tuple, list)):
        return None
    if not size or isinstance(size[0], bool) or not isinstance(size[0], int) or size[0] != th.shape[0]:
        return None
    nb = len(th._levels)
    bt = math.prod(th._value.shape[:nb])
    a["theta"] = _fold(th._value, nb).reshape((-1,) + tuple(th.shape[1:]))
    a["size"] = type(size)([size[0] * bt] + list(size[1:]))
    out = fn(*bound.args, **bound.kwargs)
    return BatchedTensor(out.reshape(tuple(th._value.shape[:nb]) + (th.shape[0],) + tuple(out.shape[1:])),
                         th._levels)


def _fractional_rule(spatial):
    """fractional_max_pool{2,3}d: the batch folded into N (one draw of the windows' samples for the folded
    batch, as the loop's draws per row: each sample its own); given _random_samples (N, C, n) fold with it."""
    def rule(fn, args, kwargs):
        bound = _bound_args(fn, args, kwargs)
        if bound is None:
            return None
        a = bound.arguments
        x, samples = a.get("input"), a.get("_random_samples")
        rank = _logical_rank(x) if _is_tensor(x) else -1
        if rank not in (spatial + 1, spatial + 2):
            return None
        if samples is None:
            return _fold_leading(spatial)(fn, args, kwargs)
        n = x.shape[0] if rank == spatial + 2 else 1
        if not _is_tensor(samples) or _logical_rank(samples) != 3 or samples.shape[0] != n:
            return None
        return _fractional_with_samples(fn, bound, x, samples, rank, spatial)
    return rule


def _fractional_with_samples(fn, bound, x, samples, rank, spatial):
    a = bound.arguments
    levels = _levels_of([x, samples])
    nb = len(levels)
    sizes = _batch_sizes(levels)
    xv = _fold(_phys(x, levels, expand=True), nb)
    a["input"] = xv.reshape((-1,) + tuple(x.shape[-(spatial + 1):]))
    sv = _fold(_phys(samples, levels, expand=True), nb)
    a["_random_samples"] = sv.reshape((-1,) + tuple(sv.shape[2:]))
    out = fn(*bound.args, **bound.kwargs)
    lead = tuple(sizes) + ((x.shape[0],) if rank == spatial + 2 else ())

    def back(o):
        return o.reshape(lead + tuple(o.shape[1:]))
    return _wrap(tuple(back(o) for o in out) if isinstance(out, tuple) else back(out), levels)


def _embedding_bag_rule(fn, args, kwargs):
    """embedding_bag: a 2-D row's bags folded with the batch; a 1-D row's indices concatenated, its offsets
    shifted by the row's start (every row's first offset must be 0, else its leading indices, in no bag, would join
    the previous row's last bag; with include_last_offset every row's last offset must be its end);
    per_sample_weights folded as the indices. A batched weight (per-sample gradients) is stacked into one table,
    row b's indices shifted by b * num_embeddings; its padding_idx becomes one extra row that every row's padding
    index points at."""
    bound = _bound_args(fn, args, kwargs)
    if bound is None:
        return None
    a = bound.arguments
    idx, off, psw = a.get("input"), a.get("offsets"), a.get("per_sample_weights")
    w = a.get("weight")
    if not _is_tensor(idx) or not _is_tensor(w) or _logical_rank(w) != 2:
        return None
    pad = a.get("padding_idx")
    if isinstance(w, BatchedTensor) and pad is not None:
        try:
            pad = None if isinstance(pad, bool) else operator.index(pad)       # an int or numpy's
        except TypeError:
            pad = None
        if pad is None or not -w.shape[0] <= pad < w.shape[0]:
            return None                             # the op's error, by the loop
    if a.get("max_norm") is not None or (psw is not None and not _is_tensor(psw)):
        return None
    rank = _logical_rank(idx)
    if (rank == 2) != (off is None) or rank not in (1, 2) or (off is not None and (
            not _is_tensor(off) or _logical_rank(off) != 1)):
        return None
    if psw is not None and tuple(psw.shape) != tuple(idx.shape):
        return None
    levels = _levels_of([t for t in (idx, off, psw, w) if t is not None])
    nb = len(levels)
    sizes = _batch_sizes(levels)
    iv = _fold(_phys(idx, levels, expand=True), nb)
    if isinstance(w, BatchedTensor):
        num = w.shape[0]
        if iv.numel() and not bool(((iv >= 0) & (iv < num)).all()):
            return None                         # an index out of its row's table: the op's error, by the loop
        wv = _fold(_phys(w, levels, expand=True), nb)                           # (Bt, num, D)
        table = wv.reshape((-1, wv.shape[-1]))
        shifted = iv + ((iv.new_ones((iv.shape[0],)).cumsum(0) - 1) * num).reshape((-1,) + (1,) * (iv.ndim - 1))
        if pad is not None:         # every row's padding index -> one extra (zero) row, the table's padding_idx
            table = _C_cat([table, table.new_zeros((1, table.shape[1]))], 0)
            shifted = shifted.masked_fill(iv == pad % num, table.shape[0] - 1)
            a["padding_idx"] = table.shape[0] - 1
        a["weight"], iv = table, shifted
    if rank == 2:
        bags = idx.shape[0]
        a["input"] = iv.reshape((-1, iv.shape[-1]))
    else:
        length = idx.shape[0]
        ov = _fold(_phys(off, levels, expand=True), nb)             # (Bt, bags)
        if a.get("include_last_offset"):        # each row's last offset must be its end (L): dropped, the rest
            if ov.shape[1] == 0 or not bool((ov[:, -1] == length).all()):
                return None
            ov, a["include_last_offset"] = ov[:, :-1], False    # are plain offsets
        bags = ov.shape[1]
        if bags == 0 or not bool((ov[:, 0] == 0).all()):
            return None
        starts = (ov.new_ones((ov.shape[0], 1)).cumsum(0) - 1) * length      # row b's indices start at b * L
        a["input"], a["offsets"] = iv.reshape(-1), (ov + starts).reshape(-1)
    if psw is not None:
        a["per_sample_weights"] = _fold(_phys(psw, levels, expand=True), nb).reshape(tuple(a["input"].shape))
    out = fn(*bound.args, **bound.kwargs)
    return BatchedTensor(out.reshape(tuple(sizes) + (bags,) + tuple(out.shape[1:])), levels)


def _norm_with_stats(kind):
    """batch_norm and instance_norm: the batch folded into the channels ((N, Bt*C, *)), so each row keeps its own
    statistics (batch_norm's over N and space, instance_norm's per sample), and weight, bias and the running
    statistics used in eval are repeated (or folded, if batched) along them. The running statistics a training
    call updates: a batched buffer (at every open level) takes each row's update at once; an unbatched one takes
    the rows' updates one after another, in the loop's order (the values the loop leaves there)."""
    def rule(fn, args, kwargs):
        bound = _bound_args(fn, args, kwargs)
        if bound is None:
            return None
        a = bound.arguments
        flag = bool(a.get("training" if kind == "batch" else "use_input_stats"))
        x, rm, rv, w, b = (a.get(p) for p in ("input", "running_mean", "running_var", "weight", "bias"))
        momentum = a.get("momentum")
        if (not _is_tensor(x) or _logical_rank(x) < 2 or isinstance(momentum, bool) or
                not isinstance(momentum, (int, float))):
            return None
        c = x.shape[1]
        ts = [t for t in (rm, rv, w, b) if t is not None]
        if not all(_is_tensor(t) and t.numel() == c for t in ts):
            return None
        levels = _levels_of([x] + ts)
        nb = len(levels)
        if any(isinstance(t, BatchedTensor) and t._levels != levels for t in (rm, rv)):
            return None                                   # a buffer batched at some of the levels: the loop
        if flag and any(s is not None and (s is w or s is b) for s in (rm, rv)):
            return None                                   # a row's update moves the next row's weight: the loop
        sizes = _batch_sizes(levels)
        bt = math.prod(sizes)
        xv = _fold(_phys(x, levels, expand=True), nb)                        # (Bt, N, C, *s)
        n, spatial = xv.shape[1], tuple(xv.shape[3:])

        def chan(t):
            return None if t is None else _fold(_phys(t, levels, expand=True), nb).reshape(-1)
        a["input"] = xv.transpose(0, 1).reshape((n, bt * c) + spatial)
        a["weight"], a["bias"] = chan(w), chan(b)
        a["running_mean"], a["running_var"] = (None, None) if flag else (chan(rm), chan(rv))
        out = fn(*bound.args, **bound.kwargs)
        out = out.reshape((n, bt, c) + spatial).transpose(0, 1)
        if flag and (rm is not None or rv is not None):
            with _no_grad():
                xd = xv.detach()
                if kind == "batch":
                    dims = (1,) + tuple(builtins.range(3, xd.ndim))
                    count = n * math.prod(spatial)
                    mean = xd.mean(dims)
                    var = xd.var(dims, correction=0) * (count / builtins.max(count - 1, 1))
                else:
                    dims = tuple(builtins.range(3, xd.ndim))
                    count = math.prod(spatial)
                    mean = xd.mean(dims).mean(1)
                    var = (xd.var(dims, correction=0) * (count / builtins.max(count - 1, 1))).mean(1)
                for buf, stat in ((rm, mean), (rv, var)):          # stat: (Bt, C)
                    if buf is None:
                        continue
                    if isinstance(buf, BatchedTensor):
                        _update_running(buf._value, stat.reshape(tuple(buf._value.shape)), float(momentum))
                    else:
                        for i in builtins.range(bt):
                            _update_running(buf, stat[i], float(momentum))
        return BatchedTensor(_unfold(out, sizes), levels)
    return rule


def _mha_rule(fn, args, kwargs):
    """multi_head_attention_forward: the batch folded into N ((L, Bt*N, E); an unbatched (L, E) row is one
    sample), key_padding_mask, 3-D masks and static_k/v folded along their N*heads, a 2-D attn_mask shared (or
    repeated per sample, if batched); batched projection weights: _mha_batched_weights. Dropout of the attention weights
    draws per element of the folded batch: each row its own mask, as the loop's draws."""
    bound = _bound_args(fn, args, kwargs)
    if bound is None:
        return None
    a = bound.arguments
    q, k, v = a.get("query"), a.get("key"), a.get("value")
    if not all(_is_tensor(t) for t in (q, k, v)):
        return None
    seq = ("query", "key", "value")
    folded = seq + ("key_padding_mask", "attn_mask", "static_k", "static_v")
    if _has_batched([a.get(p) for p in _MHA_WEIGHTS], {}):
        return _mha_batched_weights(fn, a)
    if _has_batched([val for name, val in a.items() if name not in folded], {}):
        return None
    rank = _logical_rank(q)
    if rank not in (2, 3) or any(_logical_rank(t) != rank for t in (k, v)):
        return None
    heads = a.get("num_heads")
    if isinstance(heads, bool) or not isinstance(heads, int) or heads <= 0:
        return None
    extra = [a.get(p) for p in folded[3:]]
    if any(t is not None and not _is_tensor(t) for t in extra):
        return None
    levels = _levels_of([q, k, v] + [t for t in extra if t is not None])
    nb = len(levels)
    sizes = _batch_sizes(levels)
    bt = math.prod(sizes)
    n = q.shape[1] if rank == 3 else 1
    for p in seq:
        t = _fold(_phys(a[p], levels, expand=True), nb)                     # (Bt, L, [N,] E)
        if rank == 2:
            t = t.unsqueeze(2)
        a[p] = t.transpose(0, 1).reshape((t.shape[1], bt * n, t.shape[-1]))
    kpm = a.get("key_padding_mask")
    if kpm is not None:
        if _logical_rank(kpm) != rank - 1:
            return None
        a["key_padding_mask"] = _fold(_phys(kpm, levels, expand=True), nb).reshape((bt * n, -1))
    mask = a.get("attn_mask")
    if mask is not None:
        if _logical_rank(mask) == 3:
            a["attn_mask"] = _fold(_phys(mask, levels, expand=True), nb).reshape((-1,) + tuple(mask.shape[1:]))
        elif _logical_rank(mask) == 2 and isinstance(mask, BatchedTensor):
            mv = _fold(_phys(mask, levels, expand=True), nb).unsqueeze(1)
            a["attn_mask"] = mv.expand((bt, n * heads) + tuple(mask.shape)).reshape((-1,) + tuple(mask.shape))
        elif _logical_rank(mask) != 2:
            return None
    for p in ("static_k", "static_v"):
        if a.get(p) is not None:
            t = a[p]
            if _logical_rank(t) != 3:
                return None
            a[p] = _fold(_phys(t, levels, expand=True), nb).reshape((-1,) + tuple(t.shape[1:]))
    out, weights = fn(*bound.args, **bound.kwargs)
    out = out.reshape((out.shape[0], bt, n, out.shape[-1])).transpose(0, 1)   # (Bt, L, N, E)
    if rank == 2:
        out = out.squeeze(2)
    out = _unfold(out, sizes)
    if weights is not None:
        weights = weights.reshape(tuple(sizes) + ((n,) if rank == 3 else ()) + tuple(weights.shape[1:]))
        weights = BatchedTensor(weights, levels)
    return BatchedTensor(out, levels), weights


_MHA_WEIGHTS = ("in_proj_weight", "in_proj_bias", "out_proj_weight", "out_proj_bias", "q_proj_weight",
                "k_proj_weight", "v_proj_weight")


def _narrow_rows(t, start, length):
    """Rows start:start+length of a logical weight or bias (dim 0), batched or not."""
    if t is None:
        return None
    if isinstance(t, BatchedTensor):
        return BatchedTensor(t._value.narrow(len(t._levels), start, length), t._levels)
    return t.narrow(0, start, length)


def _mha_batched_weights(fn, a):
    """multi_head_attention_forward with batched projection weights (an ensemble, per-sample gradients): the in
    and out projections through linear's rule (a batched weight: one matmul per row), the attention between them
    by the op itself, folded as _mha_rule does, with identity projections (x @ I is x exactly)."""
    q, k, v, e = a["query"], a["key"], a["value"], a["query"].shape[-1]
    if isinstance(a.get("bias_k"), BatchedTensor) or isinstance(a.get("bias_v"), BatchedTensor):
        return None
    if a.get("use_separate_proj_weight"):
        ws = [a.get("q_proj_weight"), a.get("k_proj_weight"), a.get("v_proj_weight")]
    else:
        w = a.get("in_proj_weight")
        if not _is_tensor(w) or tuple(w.shape) != (3 * e, e):
            return None
        ws = [_narrow_rows(w, i * e, e) for i in builtins.range(3)]
    b = a.get("in_proj_bias")
    wo, bo = a.get("out_proj_weight"), a.get("out_proj_bias")
    if (not all(_is_tensor(t) and _logical_rank(t) == 2 and t.shape[0] == e for t in ws) or
            (b is not None and (not _is_tensor(b) or tuple(b.shape) != (3 * e,))) or
            not _is_tensor(wo) or tuple(wo.shape) != (e, e) or
            (bo is not None and (not _is_tensor(bo) or tuple(bo.shape) != (e,)))):
        return None                                     # the op's own errors, by the loop
    projected = [_dispatch("linear", _linear_fn, (t, wt, _narrow_rows(b, i * e, e)), {})
                 for i, (t, wt) in enumerate(zip((q, k, v), ws))]
    like = next(t for t in (q, *ws, wo) if isinstance(t, BatchedTensor))._value
    eye = _diag_embed(like.new_ones((e,)))
    inner = dict(a)
    inner.update(query=projected[0], key=projected[1], value=projected[2], in_proj_weight=None, in_proj_bias=None,
                 use_separate_proj_weight=True, q_proj_weight=eye, k_proj_weight=eye, v_proj_weight=eye,
                 out_proj_weight=eye, out_proj_bias=None)
    if not all(isinstance(t, BatchedTensor) for t in projected):
        return None
    got = _mha_rule(fn, (), inner)
    if got is None:
        return None
    out, weights = got
    return _dispatch("linear", _linear_fn, (out, wo, bo), {}), weights


def _linear_cross_entropy_rule(fn, args, kwargs):
    """linear_cross_entropy(x, w, y) is cross_entropy(linear(x, w, b), y, ...) (its definition's own path for a
    2-D linear_weight and no options): the two composed through their batching rules."""
    bound = _bound_args(fn, args, kwargs)
    if bound is None:
        return None
    a = bound.arguments
    x, w, y, b = a.get("input"), a.get("linear_weight"), a.get("target"), a.get("linear_bias")
    if not all(_is_tensor(t) for t in (x, w, y)) or a.get("options") is not None:
        return None
    if _logical_rank(x) not in (1, 2) or _logical_rank(w) != 2 or x.shape[-1] != w.shape[-1]:
        return None
    if b is not None and (not _is_tensor(b) or tuple(b.shape) != (w.shape[0],)):
        return None
    probabilities = tuple(y.shape) == tuple(x.shape[:-1]) + (w.shape[0],)
    if probabilities and a.get("ignore_index") is not None:
        return None
    if a.get("reduction") not in ("mean", "sum", "none"):
        return None
    logits = _dispatch("linear", _linear_fn, (x, w, b), {})
    ignore = a.get("ignore_index")
    return _dispatch("cross_entropy", _cross_entropy_fn, (logits, y, a.get("weight")),
                     {"ignore_index": -100 if ignore is None else ignore, "reduction": a["reduction"],
                      "label_smoothing": a.get("label_smoothing", 0.0)})


for _k, _rule in (("cosine_embedding_loss", _sample_loss({"input1": 1, "input2": 1, "target": 0})),
                  ("triplet_margin_loss", _sample_loss({"anchor": 1, "positive": 1, "negative": 1})),
                  ("F.multi_margin_loss", _sample_loss({"input": 1, "target": 0}, "by_target")),
                  ("F.multilabel_margin_loss", _sample_loss({"input": 1, "target": 1})),
                  ("F.multilabel_soft_margin_loss", _sample_loss({"input": 1, "target": 1}, "per_class")),
                  ("F.triplet_margin_with_distance_loss", _triplet_distance_rule),
                  ("F.gaussian_nll_loss", _gaussian_nll_rule), ("ctc_loss", _ctc_rule),
                  ("F.grid_sample", _fold_aligned_n(("input", "grid"), lambda a: a["input"].dim())),
                  ("F.max_unpool1d", _fold_aligned_n(("input", "indices"), lambda a: 3, _unpool_output_size(1))),
                  ("F.max_unpool2d", _fold_aligned_n(("input", "indices"), lambda a: 4, _unpool_output_size(2))),
                  ("F.max_unpool3d", _fold_aligned_n(("input", "indices"), lambda a: 5, _unpool_output_size(3))),
                  ("F.affine_grid", _affine_grid_rule), ("F.embedding_bag", _embedding_bag_rule),
                  ("F.fractional_max_pool2d", _fractional_rule(2)), ("F.fractional_max_pool3d", _fractional_rule(3)),
                  ("F.fractional_max_pool2d_with_indices", _fractional_rule(2)),
                  ("F.fractional_max_pool3d_with_indices", _fractional_rule(3)),
                  ("F.batch_norm", _norm_with_stats("batch")), ("batch_norm", _norm_with_stats("batch")),
                  ("F.instance_norm", _norm_with_stats("instance")), ("instance_norm", _norm_with_stats("instance")),
                  ("F.multi_head_attention_forward", _mha_rule),
                  ("F.linear_cross_entropy", _linear_cross_entropy_rule)):
    RULES[_k] = _or_loop(_k, _rule)
    if _k in ("cosine_embedding_loss", "triplet_margin_loss", "ctc_loss"):
        RULES["F." + _k] = RULES[_k]
# ===== end of vmapA's section ========================================================================================
# ===== vmapB: composites batched through their primitives; products, linalg, indexing, random, constructors ======
# Note [Composites through their primitives]: a composite of _api/ops calls the core (_C) directly, which a
# BatchedTensor cannot enter, so without a rule it falls back to the loop. _composite(decomp) batches it through
# the public ops it is made of instead: decomp is the composite written over public functions and methods, and runs
# with the dispatcher on, so each op it calls on a BatchedTensor runs that op's own rule (a sub-op without one
# appears in FALLBACKS under its own name: the coverage test sees it). decomp reads logical shapes and dtypes only;
# on an input the composite refuses it returns None and the loop runs the op, which raises the op's own error.
def _root():
    """The public namespace of this engine (dyngrad or dyngrad.reference)."""
    return sys.modules[__package__.rsplit("._api", 1)[0]]


def _composite(decomp):
    def rule(fn, args, kwargs):
        was = STATE.active
        STATE.active = True
        try:
            return decomp(*args, **kwargs)
        finally:
            STATE.active = was
    return rule


def _plain_number(v, integral):
    """v, if it is an int (or, for a floating/complex result, a float) that the decompositions can pass on."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    if integral and not isinstance(v, int):
        return None
    return v


def _add_product_pub(input, product, beta, alpha):
    """_add_product of products.py over public ops: beta * input + alpha * product (input broadcast to product)."""
    shape = tuple(product.shape)
    ishape = tuple(input.shape)
    if len(ishape) > len(shape) or any(s != 1 and s != t for s, t in zip(ishape[::-1], shape[::-1])):
        return None
    integral = not (product.dtype.is_floating_point or product.dtype.is_complex)
    b, a = _plain_number(beta, integral), _plain_number(alpha, integral)
    if a is None or b is None:
        return None
    scaled = product if a == 1 else product * a
    if b == 0:
        return scaled if scaled is not product else product.clone()
    return (input if b == 1 else input * b) + scaled


def _same_matmul_dtypes(*tensors):
    first = tensors[0].dtype
    return all(t.dtype is first for t in tensors) and first is not _C.bool


def _addmm(input, mat1, mat2, *, beta=1, alpha=1):
    if not all(_is_tensor(t) for t in (input, mat1, mat2)) or mat1.dim() != 2 or mat2.dim() != 2 or \
            not _same_matmul_dtypes(input, mat1, mat2) or mat1.shape[1] != mat2.shape[0]:
        return None
    return _add_product_pub(input, mat1.matmul(mat2), beta, alpha)


def _addmv(input, mat, vec, *, beta=1, alpha=1):
    if not all(_is_tensor(t) for t in (input, mat, vec)) or mat.dim() != 2 or vec.dim() != 1 or \
            not _same_matmul_dtypes(input, mat, vec) or mat.shape[1] != vec.shape[0]:
        return None
    return _add_product_pub(input, mat.matmul(vec), beta, alpha)


def _bmm_operands(b1, b2):
    return (_is_tensor(b1) and _is_tensor(b2) and b1.dim() == 3 and b2.dim() == 3 and b1.shape[0] == b2.shape[0]
            and b1.shape[2] == b2.shape[1])


def _baddbmm(input, batch1, batch2, *, beta=1, alpha=1):
    if not _is_tensor(input) or not _bmm_operands(batch1, batch2) or not _same_matmul_dtypes(input, batch1, batch2):
        return None
    return _add_product_pub(input, batch1.matmul(batch2), beta, alpha)


def _addbmm(input, batch1, batch2, *, beta=1, alpha=1):
    """As products.addbmm: one matmul of (n, B*m) by (B*m, p)."""
    if not _is_tensor(input) or not _bmm_operands(batch1, batch2) or not _same_matmul_dtypes(input, batch1, batch2):
        return None
    (nb, n, m), p = tuple(batch1.shape), batch2.shape[2]
    rows = batch1.permute(1, 0, 2).reshape(n, nb * m)
    return _add_product_pub(input, rows.matmul(batch2.reshape(nb * m, p)), beta, alpha)


def _addr(input, vec1, vec2, *, beta=1, alpha=1):
    if not all(_is_tensor(t) for t in (input, vec1, vec2)) or vec1.dim() != 1 or vec2.dim() != 1:
        return None
    product = vec1.unsqueeze(1) * vec2.unsqueeze(0)
    if input.dtype is not product.dtype or product.dtype is _C.bool:
        return None                    # dtype promotion and bool coefficients: the loop (addr's own rules)
    if not (product.dtype.is_floating_point or product.dtype.is_complex) and \
            any(isinstance(c, float) for c in (beta, alpha)):
        return None                    # addr refuses a float coefficient for an integer result
    return _add_product_pub(input, product, beta, alpha)


def _inplace_via(base):
    """fn_(x, ...) as a function (addmv_): the out-of-place rule on x, written into x (_inplace's path)."""
    def rule(fn, args, kwargs):
        if not args or not isinstance(args[0], BatchedTensor):
            return None
        return _inplace(base + "_", args[0], args[1:], kwargs)
    return rule


for _k, _decomp in (("addmm", _addmm), ("addmv", _addmv), ("baddbmm", _baddbmm), ("addbmm", _addbmm),
                    ("addr", _addr)):
    RULES[_k] = _or_loop(_k, _composite(_decomp))
RULES["addmv_"] = _or_loop("addmv_", _inplace_via("addmv"))

def _same_dtype_floating(*tensors):
    return all(t.dtype is tensors[0].dtype for t in tensors) and tensors[0].dtype.is_floating_point


def _chain_matmul(*matrices):
    if not matrices or not all(_is_tensor(m) and m.dim() == 2 for m in matrices) or \
            not _same_matmul_dtypes(*matrices):
        return None
    if any(a.shape[1] != b.shape[0] for a, b in zip(matrices, matrices[1:])):
        return None
    warn_deprecated("chain_matmul is deprecated and will be removed; use linalg.multi_dot instead (it takes a list).")
    if len(matrices) == 1:
        return matrices[0].clone()
    split = _chain_order([tuple(m.shape) for m in matrices])

    def product(i, j):
        if i == j:
            return matrices[i]
        k = split[i][j]
        return product(i, k).matmul(product(k + 1, j))
    return product(0, len(matrices) - 1)


def _inner(input, other):
    if not (_is_tensor(input) and _is_tensor(other)):
        return None
    if input.dim() == 0 or other.dim() == 0:
        return input * other
    if not _same_matmul_dtypes(input, other) or input.shape[-1] != other.shape[-1]:
        return None
    k = input.shape[-1]
    out = input.reshape(-1, k).matmul(other.reshape(-1, k).transpose(0, 1))
    return out.reshape(tuple(input.shape[:-1]) + tuple(other.shape[:-1]))


def _kron(input, other):
    if not (_is_tensor(input) and _is_tensor(other)):
        return None
    nd = builtins.max(input.dim(), other.dim())
    sa = (1,) * (nd - input.dim()) + tuple(input.shape)
    sb = (1,) * (nd - other.dim()) + tuple(other.shape)
    a2 = input.reshape(tuple(x for n in sa for x in (n, 1)))
    b2 = other.reshape(tuple(x for n in sb for x in (1, n)))
    return (a2 * b2).reshape(tuple(x * y for x, y in zip(sa, sb)))


def _tensordot(a, b, dims=2):
    if not (_is_tensor(a) and _is_tensor(b)) or not _same_matmul_dtypes(a, b):
        return None
    ra, rb = a.dim(), b.dim()
    if isinstance(dims, int) and not isinstance(dims, bool):
        if not 0 <= dims <= builtins.min(ra, rb):
            return None
        da, db = list(builtins.range(ra - dims, ra)), list(builtins.range(dims))
    elif isinstance(dims, (list, tuple)) and len(dims) == 2 and all(isinstance(x, (list, tuple)) for x in dims):
        try:
            da = [to_int(d, "tensordot", "dims") for d in dims[0]]
            db = [to_int(d, "tensordot", "dims") for d in dims[1]]
        except (TypeError, RuntimeError):
            return None
        if any(not -ra <= d < builtins.max(ra, 1) for d in da) or any(not -rb <= d < builtins.max(rb, 1) for d in db):
            return None
        da, db = [d % builtins.max(ra, 1) for d in da], [d % builtins.max(rb, 1) for d in db]
    else:
        return None
    if len(da) != len(db) or len(set(da)) != len(da) or len(set(db)) != len(db):
        return None
    if any(a.shape[x] != b.shape[y] for x, y in zip(da, db)):
        return None                    # size-1 broadcasting and mismatches: the loop
    fa = [d for d in builtins.range(ra) if d not in da]
    fb = [d for d in builtins.range(rb) if d not in db]
    k = math.prod(a.shape[d] for d in da)
    left = a.permute(*(fa + da)).reshape(math.prod(a.shape[d] for d in fa), k)
    right = b.permute(*(db + fb)).reshape(k, math.prod(b.shape[d] for d in fb))
    return left.matmul(right).reshape(tuple(a.shape[d] for d in fa) + tuple(b.shape[d] for d in fb))


def _cross_rule(fn, args, kwargs):
    """cross(input, other, dim): the operands aligned (logical ranks must agree), the dim (torch.cross's default:
    the first of size 3 of the row's broadcast shape) shifted."""
    a = dict(zip(("input", "other", "dim"), args))
    a.update(kwargs)
    x, y, dim = a.get("input"), a.get("other"), a.get("dim")
    if set(a) - {"input", "other", "dim"} or not (_is_tensor(x) and _is_tensor(y)) or x.dim() != y.dim() or \
            x.dtype is not y.dtype:
        return None
    shape = _broadcast_shape(tuple(x.shape), tuple(y.shape))
    if shape is None or not shape:
        return None
    if dim is None:
        sizes = [d for d, n in enumerate(shape) if n == 3]
        if not sizes:
            return None
        d = sizes[0]
        warn_deprecated("cross: calling cross without dim is deprecated; pass dim explicitly (the default is the "
                        "first dimension of size 3, while linalg.cross defaults to dim=-1).")
    else:
        d = dim
    levels = _levels_of([x, y])
    nd = _shift_dim(d, len(shape), len(levels))
    if nd is None or x.shape[nd - len(levels)] != 3 or y.shape[nd - len(levels)] != 3:
        return None
    return BatchedTensor(fn(_phys(x, levels), _phys(y, levels), nd), levels)


def _dist(input, other, p=2):
    if not (_is_tensor(input) and _is_tensor(other)) or not _same_dtype_floating(input, other):
        return None
    return _root().linalg.vector_norm(input - other, p)


def _distance_rule(fn, args, kwargs):
    """pairwise_distance(x1, x2, p, eps, keepdim): distance.py's norm over the last dim of the aligned physical
    difference."""
    a = dict(zip(("x1", "x2", "p", "eps", "keepdim"), args))
    a.update(kwargs)
    x1, x2 = a.get("x1"), a.get("x2")
    p, eps = a.get("p", 2.0), a.get("eps", 1e-6)
    if set(a) - {"x1", "x2", "p", "eps", "keepdim"} or not (_is_tensor(x1) and _is_tensor(x2)) or \
            _plain_number(p, False) is None or _plain_number(eps, False) is None:
        return None
    rank = builtins.max(x1.dim(), x2.dim())
    if _broadcast_shape(tuple(x1.shape), tuple(x2.shape)) is None:
        return None
    levels = _levels_of([x1, x2])
    diff = _phys(x1, levels, rank) - _phys(x2, levels, rank)
    diff = diff + _C.scalar_operand(float(eps), diff)
    dims = () if rank == 0 else (diff.ndim - 1,)
    if not dims:
        return None                    # a 0-d row's norm over no dims: the loop
    return BatchedTensor(_distance_norm(diff, float(p), dims, bool(a.get("keepdim", False))), levels)


def _pdist_rule(fn, args, kwargs):
    """pdist(input, p): the pairs i < j of the row's rows picked by one index_select each, normed over the last
    dim (distance.py's norm) of the physical difference."""
    x = args[0]
    p = args[1] if len(args) > 1 else kwargs.get("p", 2)
    if not _only_first_batched(args, kwargs) or x.dim() != 2 or not x.dtype.is_floating_point or \
            x.dtype in (_C.float16, _C.bfloat16) or _plain_number(p, False) is None or p < 0:
        return None
    nb = len(x._levels)
    i, j = np.triu_indices(x.shape[0], 1)
    rows_i = x._value.index_select(nb, bridge.copy(i.astype(np.int64), False))
    rows_j = x._value.index_select(nb, bridge.copy(j.astype(np.int64), False))
    return BatchedTensor(_distance_norm(rows_i - rows_j, float(p), (nb + 1,), False), x._levels)


def _cov(input, *, correction=1, fweights=None, aweights=None):
    """statistics.cov without weights, over public ops."""
    if fweights is not None or aweights is not None or not _is_tensor(input) or input.dim() > 2 or \
            _plain_number(correction, False) is None:
        return None
    x = input.reshape((1, -1) if input.dim() < 2 else tuple(input.shape))
    if not (x.dtype.is_floating_point or x.dtype.is_complex):
        x = x.to(get_default_dtype())
    norm = float(x.shape[1]) - float(correction)
    if norm <= 0:
        return None                    # the loop warns and gives inf/nan
    centred = x - x.mean(1, keepdim=True)
    weighted = centred.conj() if centred.dtype.is_complex else centred
    c = centred.matmul(weighted.transpose(0, 1)) / norm
    return c.reshape(()) if c.shape[0] == 1 else c


def _corrcoef(input):
    if not _is_tensor(input) or input.dim() > 2:
        return None
    c = _cov(input)
    if c is None:
        return None
    if c.dim() == 0:
        return c / c
    d = c.diagonal().sqrt()
    c = c / d.reshape(-1, 1) / d.reshape(1, -1)
    if c.dtype.is_complex:
        return _root().view_as_complex(_root().view_as_real(c).clamp(-1, 1).contiguous())
    return c.clamp(-1, 1)


def _tensor_args(tensors):
    ts = tensors[0] if len(tensors) == 1 and isinstance(tensors[0], (tuple, list)) else tensors
    return list(ts) if all(_is_tensor(t) for t in ts) else None


def _meshgrid(*tensors, indexing=None):
    ts = _tensor_args(tensors)
    if not ts or any(t.dim() > 1 or t.dtype is not ts[0].dtype for t in ts) or indexing not in (None, "ij", "xy"):
        return None
    if indexing is None:
        warn("meshgrid: in an upcoming release it will be required to pass the indexing argument (as in "
             "torch); indexing='ij' is used.", UserWarning)
        indexing = "ij"
    return meshgrid_views(ts, indexing, lambda t, along, shape: t.reshape(along).expand(shape))


def _cartesian_prod(*tensors):
    ts = list(tensors)
    if not ts or not all(_is_tensor(t) and t.dim() == 1 for t in ts):
        return None
    if len(ts) == 1:
        return ts[0]
    grids = _meshgrid(ts, indexing="ij")
    return None if grids is None else _root().stack([g.reshape(-1) for g in grids], 1)


def _combinations(input, r=2, with_replacement=False):
    if not _is_tensor(input) or input.dim() != 1 or isinstance(r, bool) or not isinstance(r, int) or r <= 0:
        return None
    pick = itertools.combinations_with_replacement if with_replacement else itertools.combinations
    rows = np.array(list(pick(builtins.range(input.shape[0]), r)), dtype=np.int64).reshape(-1, r)
    return input[bridge.copy(rows, False)]


def _block_diag(*tensors):
    ts = list(tensors)
    if not ts or not all(_is_tensor(t) and t.dim() <= 2 for t in ts):
        return None
    P = _root()
    blocks = [t.reshape(1, t.numel()) if t.dim() < 2 else t for t in ts]
    width = builtins.sum(b.shape[1] for b in blocks)
    rows, left = [], 0
    for b in blocks:
        h, w = tuple(b.shape)
        rows.append(P.cat([P.zeros((h, left), dtype=b.dtype), b, P.zeros((h, width - left - w), dtype=b.dtype)], 1))
        left += w
    return P.cat(rows, 0)


def _cdist_rule(fn, args, kwargs):
    """cdist over (..., P, M) and (..., R, M), whose leading dims broadcast: the operands aligned to one logical
    rank, the vmap batch dims in front of theirs."""
    a = dict(zip(("x1", "x2", "p", "compute_mode"), args))
    a.update(kwargs)
    x1, x2 = a.get("x1"), a.get("x2")
    if set(a) - {"x1", "x2", "p", "compute_mode"} or not (_is_tensor(x1) and _is_tensor(x2)) or \
            x1.dim() < 2 or x2.dim() < 2:
        return None
    levels = _levels_of([x1, x2])
    rank = builtins.max(x1.dim(), x2.dim())
    a["x1"], a["x2"] = _phys(x1, levels, rank, expand=True), _phys(x2, levels, rank, expand=True)
    return BatchedTensor(fn(**a), levels)


def _einsum_any(fn, args, kwargs):
    """einsum in either format, with an ellipsis or an implicit output: the batch letters in front of every
    batched operand's subscripts and of the output's."""
    if kwargs or not args:
        return None
    if isinstance(args[0], str):
        equation, operands = args[0], list(args[1:])
        if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
            operands = list(operands[0])
    elif _is_tensor(args[0]):
        try:
            equation, operands = _sublist_equation(args)
        except (TypeError, ValueError, RuntimeError):
            return None
    else:
        return None
    eq = equation.replace(" ", "")
    lhs, arrow, rhs = eq.partition("->")
    terms = lhs.split(",")
    if len(terms) != len(operands) or not all(_is_tensor(o) for o in operands):
        return None
    if not arrow:                      # the implicit output: the ellipsis, then the labels used once, sorted
        letters = [c for c in lhs if c.isalpha()]
        rhs = ("..." if "..." in lhs else "") + "".join(sorted(c for c in set(letters) if letters.count(c) == 1))
    levels = _levels_of(operands)
    free = [c for c in "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz" if c not in eq][:len(levels)]
    if len(free) < len(levels):
        return None
    new_terms, phys = [], []
    for term, op in zip(terms, operands):
        if isinstance(op, BatchedTensor):
            new_terms.append("".join(free[levels.index(lv)] for lv in op._levels) + term)
            phys.append(op._value)
        else:
            new_terms.append(term)
            phys.append(op)
    return BatchedTensor(fn(",".join(new_terms) + "->" + "".join(free) + rhs, *phys), levels)


for _k, _decomp in (("chain_matmul", _chain_matmul), ("inner", _inner), ("kron", _kron), ("tensordot", _tensordot),
                    ("dist", _dist), ("cov", _cov), ("corrcoef", _corrcoef), ("meshgrid", _meshgrid),
                    ("cartesian_prod", _cartesian_prod), ("combinations", _combinations),
                    ("block_diag", _block_diag)):
    RULES[_k] = _or_loop(_k, _composite(_decomp))
for _k, _rule in (("cross", _cross_rule), ("pairwise_distance", _distance_rule),
                  ("F.pairwise_distance", _distance_rule), ("pdist", _pdist_rule), ("F.pdist", _pdist_rule),
                  ("cdist", _cdist_rule), ("einsum", _einsum_any)):
    RULES[_k] = _or_loop(_k, _rule)



# ----- vmapB: linalg outside the (*, n, n) family ------------------------------------------------------------------
def _empty_results_batched(rule):
    """A batched linalg call whose results include empty tensors computed without the batch dims (lstsq's
    residuals, rank and singular values for a driver that computes none): those expanded to the batch's."""
    def run(fn, args, kwargs):
        out = rule(fn, args, kwargs)
        if out is None or not isinstance(out, tuple):
            return out
        levels = next(o._levels for o in out if isinstance(o, BatchedTensor))
        sizes = _batch_sizes(levels)
        items = []
        for o in out:
            if isinstance(o, BatchedTensor) and tuple(o._value.shape[:len(levels)]) != sizes:
                if o._value.numel() != 0:
                    return None
                o = BatchedTensor(o._value.reshape((1,) * len(levels) + tuple(o._value.shape)).expand(
                    sizes + tuple(o._value.shape)), levels)
            items.append(o)
        return type(out)(*items) if hasattr(out, "_fields") else tuple(items)
    return run


def _torch_vander(fn, args, kwargs):
    """torch.vander(x, N, increasing) of a 1-D row: linalg's running powers over the physical tensor's last dim,
    reversed unless increasing."""
    a = dict(zip(("x", "N", "increasing"), args))
    a.update(kwargs)
    x, N, increasing = a.get("x"), a.get("N"), a.get("increasing", False)
    if set(a) - {"x", "N", "increasing"} or not _only_first_batched(args, kwargs) or x.dim() != 1 or \
            not isinstance(increasing, bool):
        return None
    v = x._value
    if v.dtype is _C.bool or not v.dtype.is_floating_point and v.dtype is not _C.int64:
        v = v.to(_C.int64)
    N = x.shape[0] if N is None else N
    if isinstance(N, bool) or not isinstance(N, int) or N <= 0 or v.dtype in (_C.bfloat16, _C.float16):
        return None
    out = _powers(v, N, "vander")
    if not increasing:
        out = out.index_select(-1, bridge.share(np.arange(N - 1, -1, -1, dtype=np.int64)))
    return BatchedTensor(out, x._levels)


def _tensorinv(A, ind=2):
    if not _is_tensor(A) or isinstance(ind, bool) or not isinstance(ind, int) or ind <= 0:
        return None
    rows, cols = math.prod(A.shape[:ind]), math.prod(A.shape[ind:])
    if rows != cols:
        return None
    X = _root().linalg.inv(A.reshape(rows, cols))
    return X.reshape(tuple(A.shape[ind:]) + tuple(A.shape[:ind]))


def _tensorsolve(A, B, dims=None):
    if not (_is_tensor(A) and _is_tensor(B)):
        return None
    if dims is not None:
        dims = [dims] if isinstance(dims, int) else list(dims)
        if any(isinstance(d, bool) or not isinstance(d, int) or not -A.dim() <= d < A.dim() for d in dims):
            return None
        moved = [d % A.dim() for d in dims]
        A = A.permute(*([d for d in builtins.range(A.dim()) if d not in moved] + moved))
    rest = tuple(A.shape[B.dim():])
    rows, cols = math.prod(A.shape[:B.dim()]), math.prod(rest)
    if rows != cols or B.dim() > A.dim() or math.prod(B.shape) != rows:
        return None
    return _root().linalg.solve(A.reshape(rows, cols), B.reshape(rows)).reshape(rest)


for _k, _rule in (("cholesky_inverse", _matrix_first(2)), ("lu", _matrix_first(2)), ("linalg.vander", _matrix_first(1)),
                  ("lu_unpack", _matrix_batch(1)), ("linalg.lstsq", _empty_results_batched(_matrix_batch(1))),
                  ("vander", _torch_vander), ("linalg.tensorinv", _composite(_tensorinv)),
                  ("linalg.tensorsolve", _composite(_tensorsolve))):
    RULES[_k] = _or_loop(_k, _rule)



# ----- vmapB: indexing, scatter and split composites --------------------------------------------------------------
def _split_along(min_ndim, dim_of):
    """hsplit/vsplit/dsplit: tensor_split along the row's dim_of(ndim), after their own checks."""
    def decomp(input, indices_or_sections):
        if not _is_tensor(input) or input.dim() < min_ndim:
            return None
        d = dim_of(input.dim())
        if not isinstance(indices_or_sections, (tuple, list)):
            if isinstance(indices_or_sections, bool) or not isinstance(indices_or_sections, int):
                return None
            if indices_or_sections == 0 or input.shape[d] % indices_or_sections:
                return None
        return _root().tensor_split(input, indices_or_sections, d)
    return decomp


def _gradient_rule(fn, args, kwargs):
    """gradient(input, spacing=, dim=, edge_order=): the row's dims (all of them for dim=None) shifted; the
    spacing (steps or unbatched coordinates) pairs with them as before."""
    if len(args) != 1 or not _only_first_batched(args, kwargs) or set(kwargs) - {"spacing", "dim", "edge_order"}:
        return None
    x = args[0]
    rank, nb = x.dim(), len(x._levels)
    if rank == 0:
        return None
    dim = kwargs.get("dim")
    dims = list(builtins.range(rank)) if dim is None else list(dim) if isinstance(dim, (tuple, list)) else [dim]
    new = [_shift_dim(d, rank, nb) if isinstance(d, int) and not isinstance(d, bool) else None for d in dims]
    if None in new:
        return None
    kw = dict(kwargs)
    kw["dim"] = new
    return _wrap(tuple(fn(x._value, **kw)), x._levels)


def _index_along(names):
    """index_copy/index_fill/index_reduce (input, dim, index, ...): a 1-D unbatched index along the shifted dim;
    the tensor arguments named in `names` (source) aligned with input and expanded."""
    def rule(fn, args, kwargs):
        sig = _signature(fn)
        if not sig:
            return None
        try:
            bound = sig.bind(*args, **kwargs)
        except TypeError:
            return None
        a = bound.arguments
        x, index = a.get("input"), a.get("index")
        if isinstance(index, BatchedTensor) or not _is_tensor(x) or x.dim() == 0:
            return None
        tensors = [a[n] for n in names if n in a]
        if "value" in a and isinstance(a["value"], BatchedTensor):
            return None                    # a batched fill value: the loop
        if not all(_is_tensor(t) for t in tensors) or any(_logical_rank(t) != x.dim() for t in tensors):
            return None
        levels = _levels_of([x] + tensors)
        d = _shift_dim(a["dim"], x.dim(), len(levels))
        if d is None:
            return None
        a["input"] = _phys(x, levels, expand=True)
        for n in names:
            if n in a:
                a[n] = _phys(a[n], levels, expand=True)
        a["dim"] = d
        return BatchedTensor(fn(*bound.args, **bound.kwargs), levels)
    return rule


def _index_put_rule(fn, args, kwargs):
    """index_put(input, indices, values, accumulate): unbatched int64 index tensors, after one arange per batch
    dim (broadcast against them), so the write lands in each row's own slice."""
    a = dict(zip(("input", "indices", "values", "accumulate"), args))
    a.update(kwargs)
    x, indices, values = a.get("input"), a.get("indices"), a.get("values")
    if set(a) - {"input", "indices", "values", "accumulate"} or not _is_tensor(x) or not _is_tensor(values) or \
            not isinstance(indices, (tuple, list)) or not indices:
        return None
    if not all(isinstance(i, Tensor) and not isinstance(i, BatchedTensor) and i.dtype is _C.int64 for i in indices):
        return None                        # batched or bool indices: the loop
    if len(indices) > x.dim():
        return None
    shape = ()
    for i in indices:
        shape = _broadcast_shape(shape, tuple(i.shape))
        if shape is None:
            return None
    levels = _levels_of([x, values])
    nb = len(levels)
    sizes = _batch_sizes(levels)
    rest = tuple(x.shape[len(indices):])
    if _broadcast_shape(tuple(values.shape), shape + rest) != shape + rest:
        return None
    full = []
    for j, n in enumerate(sizes):
        view = (1,) * j + (n,) + (1,) * (nb - j - 1) + (1,) * len(shape)
        full.append(_root().arange(n).reshape(view))
    full += [i.reshape((1,) * nb + tuple(i.shape)) for i in indices]
    xv = _phys(x, levels, expand=True)
    vv = _phys(values, levels, len(shape) + len(rest))
    return BatchedTensor(fn(xv, tuple(full), vv, bool(a.get("accumulate", False))), levels)


def _masked_scatter_rule(fn, args, kwargs):
    """masked_scatter(input, mask, source): row b's k-th True takes source_b's k-th element: the position of each
    True (a cumulative count over the row's mask) gathers from the row's flattened source."""
    a = dict(zip(("input", "mask", "source"), args))
    a.update(kwargs)
    x, mask, source = a.get("input"), a.get("mask"), a.get("source")
    if set(a) - {"input", "mask", "source"} or not all(_is_tensor(t) for t in (x, mask, source)) or \
            mask.dtype is not _C.bool or x.dtype is not source.dtype:
        return None
    shape = _broadcast_shape(tuple(x.shape), tuple(mask.shape))
    if shape is None or _broadcast_shape(shape, tuple(x.shape)) != shape:
        return None
    levels = _levels_of([x, mask, source])
    nb = len(levels)
    sizes = _batch_sizes(levels)
    n = math.prod(sizes)
    xv = _phys(x, levels, len(shape)).expand(sizes + shape).reshape((n, -1))
    mv = _phys(mask, levels, len(shape)).expand(sizes + shape).reshape((n, -1))
    src = _fold(_phys(source, levels, expand=True), nb).reshape((n, -1))
    count = mv.to(_C.int64).cumsum(1)
    if count.shape[1] and int(count[:, -1].max()) > src.shape[1]:
        return None                        # too few source elements: the loop raises masked_scatter's error
    if src.shape[1] == 0:
        out = xv.clone()
    else:
        picked = src.gather(1, (count - 1).clamp(0, src.shape[1] - 1))
        out = _C.where(mv, picked, xv)
    return BatchedTensor(out.reshape(sizes + shape), levels)


def _renorm_rule(fn, args, kwargs):
    """renorm(input, p, dim, maxnorm): normalization.renorm's factor from the norms over the row's other dims."""
    a = dict(zip(("input", "p", "dim", "maxnorm"), args))
    a.update(kwargs)
    x = a.get("input")
    p, maxnorm = a.get("p"), a.get("maxnorm")
    if set(a) != {"input", "p", "dim", "maxnorm"} or not _only_first_batched(args, kwargs) or x.dim() < 2 or \
            not x.dtype.is_floating_point or _plain_number(p, False) is None or \
            _plain_number(maxnorm, False) is None or p <= 0 or maxnorm < 0:
        return None
    nb = len(x._levels)
    d = _shift_dim(a["dim"], x.dim(), nb)
    if d is None:
        return None
    others = tuple(i for i in builtins.range(nb, nb + x.dim()) if i != d)
    v = x._value
    norms = _linalg_vector_norm(v, float(p), others, True)
    limit = _C.scalar_operand(float(maxnorm), norms)
    scale = _C.div(limit, _C.add(norms, _C.scalar_operand(1e-7, norms)))
    factor = _C.where(_C.compare("gt", norms, limit), scale, _C.scalar_operand(1.0, norms))
    return BatchedTensor(_C.mul(v, factor), x._levels)


def _repeat_interleave_rule(fn, args, kwargs):
    a = dict(zip(("input", "repeats", "dim"), args))
    a.update(kwargs)
    x, repeats, dim = a.get("input"), a.get("repeats"), a.get("dim")
    if set(a) - {"input", "repeats", "dim", "output_size"} or repeats is None or \
            not _only_first_batched(args, kwargs):
        return None
    nb = len(x._levels)
    if dim is None:
        v, d = _flat_rows(x), nb
    else:
        if x.dim() == 0:
            return None
        v, d = x._value, _shift_dim(dim, x.dim(), nb)
        if d is None:
            return None
    return BatchedTensor(fn(v, repeats, d, output_size=a.get("output_size")), x._levels)


def _searchsorted_rule(fn, args, kwargs):
    """searchsorted(sorted_sequence, input): both aligned and expanded to the batch; a 1-D sequence per row pairs
    with the row's values flattened (an n-D one already pairs its leading dims with theirs)."""
    a = dict(zip(("sorted_sequence", "input"), args))
    a.update(kwargs)
    seq, values, sorter = a.get("sorted_sequence"), a.get("input"), a.get("sorter")
    if not (_is_tensor(seq) and _is_tensor(values)) or seq.dim() == 0 or (sorter is not None and (
            not _is_tensor(sorter) or tuple(sorter.shape) != tuple(seq.shape))):
        return None
    levels = _levels_of([seq, values, sorter])
    nb = len(levels)
    sizes = _batch_sizes(levels)
    a["sorted_sequence"] = _phys(seq, levels, expand=True)
    if sorter is not None:
        a["sorter"] = _phys(sorter, levels, expand=True)
    vv = _phys(values, levels, expand=True)
    if seq.dim() == 1:
        a["input"] = vv.reshape(sizes + (-1,))
        out = fn(a.pop("sorted_sequence"), a.pop("input"), **a)
        return BatchedTensor(out.reshape(sizes + tuple(values.shape)), levels)
    if values.dim() != seq.dim():
        return None
    a["input"] = vv
    return BatchedTensor(fn(a.pop("sorted_sequence"), a.pop("input"), **a), levels)


def _sum_to_size_rule(fn, args, kwargs):
    x = args[0]
    if kwargs or not _only_first_batched(args, kwargs):
        return None
    shape = _sizes_from(list(args[1:]))
    if any(isinstance(s, bool) or not isinstance(s, int) for s in shape):
        return None
    rank, nb = x.dim(), len(x._levels)
    if len(shape) > rank or any(s != t and s != 1 for s, t in zip(shape, tuple(x.shape)[rank - len(shape):])):
        return None
    batch = tuple(x._value.shape[:nb])
    out = x._value.sum_to_size(batch + (1,) * (rank - len(shape)) + tuple(shape))
    return BatchedTensor(out.reshape(batch + tuple(shape)), x._levels)


def _take_along_dim_rule(fn, args, kwargs):
    a = dict(zip(("input", "indices", "dim"), args))
    a.update(kwargs)
    x, idx, dim = a.get("input"), a.get("indices"), a.get("dim")
    if set(a) - {"input", "indices", "dim"} or not (_is_tensor(x) and _is_tensor(idx)):
        return None
    levels = _levels_of([x, idx])
    nb = len(levels)
    xv, iv = _phys(x, levels, expand=True), _phys(idx, levels, expand=True)
    if dim is None:
        sizes = _batch_sizes(levels)
        return BatchedTensor(fn(xv.reshape(sizes + (-1,)), iv.reshape(sizes + (-1,)), nb), levels)
    if x.dim() != idx.dim() or x.dim() == 0:
        return None
    d = _shift_dim(dim, x.dim(), nb)
    return None if d is None else BatchedTensor(fn(xv, iv, d), levels)


for _k, _decomp in (("hsplit", _split_along(1, lambda n: 1 if n > 1 else 0)), ("vsplit", _split_along(2, lambda n: 0)),
                    ("dsplit", _split_along(3, lambda n: 2))):
    RULES[_k] = _or_loop(_k, _composite(_decomp))
for _k, _rule in (("diagonal_scatter", _dims_rule("dim1", "dim2", aligned=("src",))),
                  ("select_scatter", _dims_rule("dim", aligned=("src",))), ("gradient", _gradient_rule),
                  ("index_copy", _index_along(("source",))), ("index_reduce", _index_along(("source",))),
                  ("index_fill", _index_along(())), ("index_put", _index_put_rule),
                  ("index_put_", _inplace_via("index_put")), ("masked_scatter", _masked_scatter_rule),
                  ("renorm", _renorm_rule), ("repeat_interleave", _repeat_interleave_rule),
                  ("scatter_reduce", _index_dim_rule), ("searchsorted", _searchsorted_rule),
                  ("sum_to_size", _sum_to_size_rule), ("take_along_dim", _take_along_dim_rule),
                  ("unravel_index", _first_only)):
    RULES[_k] = _or_loop(_k, _rule)



# ----- vmapB: constructors and conversions of a batched row -------------------------------------------------------
def _new_rule(fn, args, kwargs):
    """x.new(t): t itself without its history (its dtype must be x's); x.new(sizes) / x.new(data): a fresh
    unbatched tensor of x's dtype."""
    x = args[0]
    if len(args) == 2 and _is_tensor(args[1]):
        if args[1].dtype is not x.dtype or set(kwargs) - {"device"}:
            return None
        return args[1].detach()
    if _has_batched(args[1:], kwargs):
        return None
    return fn(x._value if isinstance(x, BatchedTensor) else x, *args[1:], **kwargs)


def _scalar_tensor_rule(fn, args, kwargs):
    """scalar_tensor(s) of a batched 0-d row: each row's number, as a fresh 0-d tensor of the dtype asked."""
    s = args[0] if args else kwargs.get("s")
    if len(args) > 1 or not isinstance(s, BatchedTensor) or s.dim() != 0 or kwargs.get("requires_grad") or \
            set(kwargs) - {"s", "dtype", "device", "layout", "pin_memory", "requires_grad"}:
        return None
    fn(_C.full((), 0, s.dtype), **{k: v for k, v in kwargs.items() if k != "s"})     # the options' checks
    dt = get_default_dtype() if kwargs.get("dtype") is None else dtype_arg(kwargs["dtype"], "scalar_tensor")
    return BatchedTensor(s._value.detach().to(dt), s._levels)


def _fill_rule(fn, args, kwargs):
    """fill(input, value): a number fills the physical tensor; a batched 0-d value gives each row its own."""
    a = dict(zip(("input", "value"), args))
    a.update(kwargs)
    x, value = a.get("input"), a.get("value")
    if set(a) != {"input", "value"} or not _is_tensor(x):
        return None
    if not isinstance(value, BatchedTensor):
        return _first_only(fn, (x, value), {})
    if value.dim() != 0:
        return None
    levels = _levels_of([x, value])
    sizes = _batch_sizes(levels)
    v = _phys(value, levels, x.dim())
    v = v.to(x.dtype) if v.dtype is not x.dtype else v
    return BatchedTensor(v.expand(sizes + tuple(x.shape)) if x.dim() else v.clone(), levels)


def _detach_inplace(self, args, kwargs):
    """x.detach_() of a batched row detaches the physical tensor (the core refuses a view, as torch does)."""
    was = STATE.active
    STATE.active = False
    try:
        self._value.detach_(*args, **kwargs)
    finally:
        STATE.active = was
    return self


def _legacy_init(fn, args, kwargs):
    raise RuntimeError("vmap: Tensor(x) of a batched row cannot hold the row: the legacy constructor initialises a "
                       "new, unbatched tensor in place. Use x.detach() (the memory Tensor(x) shares), or a typed "
                       "constructor such as dyngrad.FloatTensor(x), which returns the row.")


for _k, _rule in (("tensor", _first_only), ("as_tensor", _first_only), ("asarray", _first_only), ("cpu", _first_only),
                  ("to_dense", _first_only), ("new", _new_rule), ("scalar_tensor", _scalar_tensor_rule),
                  ("fill", _fill_rule)):
    RULES[_k] = _or_loop(_k, _rule)
RULES["__init__"] = _legacy_init
# new_empty_strided reads only self's dtype (a fresh, uninitialised, unbatched tensor); from_dlpack of a row is the
# physical tensor's capsule (the rows keep sharing its memory)
RULES["new_empty_strided"] = _or_loop("new_empty_strided", _unbatched_result)
RULES["from_dlpack"] = _or_loop("from_dlpack", _first_only)
INPLACE_RULES["detach_"] = _detach_inplace



# ----- vmapB: random draws with a batched input -------------------------------------------------------------------
# randomness='different': one draw over the physical tensor gives every row its own (elementwise draws: normal,
# poisson, binomial, rrelu; multinomial draws per row of its (n, k) input, into which the batch folds).
# randomness='same': randint_like draws one row's worth (its input gives only a shape); for the draws whose
# parameters are the batched input torch refuses, and so does this (its message).
def _multinomial_rule(fn, args, kwargs):
    x = args[0]
    if not _only_first_batched(args, kwargs) or x.dim() not in (1, 2):
        return None
    nb = len(x._levels)
    sizes = tuple(x._value.shape[:nb])
    out = fn(x._value.reshape((-1, x.shape[-1])), *args[1:], **kwargs)
    return BatchedTensor(out.reshape(sizes + tuple(x.shape[:-1]) + (out.shape[-1],)), x._levels)


def _same_refused(fn, args, kwargs):
    raise RuntimeError("vmap: Vmap does not currently support same randomness with a batched tensor input (as "
                       "torch.func); use randomness='different', or draw outside vmap.")


for _k in ("normal", "poisson", "binomial", "rrelu"):
    RANDOM_RULES[_k] = _random_elementwise
    SAME_RULES[_k] = _same_refused
RANDOM_RULES["rrelu_"] = _or_loop("rrelu_", _inplace_fn)
SAME_RULES["rrelu_"] = SAME_RULES["multinomial"] = _same_refused
RANDOM_RULES["multinomial"] = _or_loop("multinomial", _multinomial_rule)
# the nn.functional spellings of rrelu (coordinator, after vmapB's note)
RANDOM_RULES["F.rrelu"] = _random_elementwise
RANDOM_RULES["F.rrelu_"] = _or_loop("F.rrelu_", _inplace_fn)
SAME_RULES["F.rrelu"] = SAME_RULES["F.rrelu_"] = _same_refused

_GUMBEL_SIG = inspect.Signature([inspect.Parameter(n, inspect.Parameter.POSITIONAL_OR_KEYWORD, default=d) for n, d in
                                 (("logits", None), ("tau", 1), ("hard", False), ("eps", 1e-10), ("dim", -1))])


def _gumbel_different(fn, args, kwargs):
    """'different': gumbel_softmax on the physical logits draws each row's noise; its dim moves past the batch
    dims (a dim out of range declines, and the loop raises the op's error)."""
    bound = _bind(_GUMBEL_SIG, args, kwargs)
    x, d = bound.get("logits"), bound.get("dim", -1)
    if not isinstance(x, BatchedTensor) or not isinstance(d, int) or isinstance(d, bool):
        return None
    rank, nb = x.dim(), len(x._levels)
    if not -rank <= d < builtins.max(rank, 1):
        return None
    return BatchedTensor(fn(_phys(x, x._levels), bound.get("tau", 1), bound.get("hard", False),
                            bound.get("eps", 1e-10), d if d < 0 else d + nb), x._levels)


RANDOM_RULES["F.gumbel_softmax"] = _or_loop("F.gumbel_softmax", _gumbel_different)
SAME_RULES["F.gumbel_softmax"] = _same_refused
RANDOM_RULES["randint_like"] = _or_loop("randint_like", _creation_like)
SAME_RULES["randint_like"] = _or_loop("randint_like", _random_like_same)



# ----- vmapB: results whose size the values would set -------------------------------------------------------------
def _one_hot_rule(fn, args, kwargs):
    """one_hot(x, num_classes): the physical indices' one-hot; num_classes=-1 would read the batch's values for
    the result's size, which torch.func refuses (its message)."""
    a = dict(zip(("tensor", "num_classes"), args))
    a.update(kwargs)
    x, n = a.get("tensor"), a.get("num_classes", -1)
    if set(a) - {"tensor", "num_classes"} or not _only_first_batched(args, kwargs):
        return None
    if isinstance(n, int) and not isinstance(n, bool) and n < 0:
        raise RuntimeError("vmap: When vmap-ing one_hot, please provide an explicit positive num_classes argument "
                           "(as torch.func): the default reads the values to size the result.")
    return BatchedTensor(fn(x._value, n), x._levels)


def _histc_rule(fn, args, kwargs):
    """histc(x, bins, min, max): statistics.histc's arithmetic over every row at once (each row's own range when
    min == max), the counts of all rows in one bincount."""
    a = dict(zip(("input", "bins", "min", "max"), args))
    a.update(kwargs)
    x, bins = a.get("input"), a.get("bins", 100)
    lo, hi = a.get("min", 0), a.get("max", 0)
    if set(a) - {"input", "bins", "min", "max"} or not _only_first_batched(args, kwargs) or \
            not x.dtype.is_floating_point or x.dtype in (_C.float16, _C.bfloat16) or \
            isinstance(bins, bool) or not isinstance(bins, int) or bins <= 0 or \
            _plain_number(lo, False) is None or _plain_number(hi, False) is None:
        return None
    nb = len(x._levels)
    sizes = tuple(x._value.shape[:nb])
    n = math.prod(sizes)
    arr = bridge.host_values(x._value).reshape(n, -1)
    t = arr.dtype.type
    lo_r, hi_r = np.full(n, float(lo)), np.full(n, float(hi))
    if float(lo) == float(hi) and arr.shape[1]:
        lo_r, hi_r = arr.min(1).astype(np.float64), arr.max(1).astype(np.float64)
    same = lo_r == hi_r
    lo_r, hi_r = np.where(same, lo_r - 1, lo_r), np.where(same, hi_r + 1, hi_r)
    if not (np.isfinite(lo_r).all() and np.isfinite(hi_r).all() and (lo_r < hi_r).all()):
        return None                        # the loop raises histc's error for the row
    left, right = lo_r.astype(t)[:, None], hi_r.astype(t)[:, None]
    inside = (arr >= left) & (arr <= right)
    position = ((np.where(inside, arr, left) - left) * t(bins) / (right - left)).astype(np.int64)
    position[position == bins] = bins - 1
    flat = (np.arange(n, dtype=np.int64)[:, None] * bins + position)[inside]
    counts = np.bincount(flat, minlength=n * bins).reshape(sizes + (bins,))
    return BatchedTensor(bridge.host_result(counts, x.dtype), x._levels)


def _nonzero_static_rule(fn, args, kwargs):
    """nonzero_static(x, size=, fill_value=): each row's first `size` nonzero coordinates (row-major), padded
    with fill_value: the rank of each nonzero within its row places it."""
    x = args[0] if args else kwargs.get("input")
    size, fill = kwargs.get("size"), kwargs.get("fill_value", -1)
    if len(args) != 1 or set(kwargs) - {"size", "fill_value"} or not _only_first_batched(args, kwargs) or \
            any(isinstance(v, bool) or not isinstance(v, int) for v in (size, fill)) or size < 0:
        return None
    nb = len(x._levels)
    sizes = tuple(x._value.shape[:nb])
    n = math.prod(sizes)
    shape = tuple(x.shape)
    mask = bridge.host_array(x._value.detach()).reshape(n, -1) != 0
    rank = np.cumsum(mask, 1) - 1
    keep = mask & (rank < size)
    rows, flat = np.nonzero(keep)
    out = np.full((n, size, len(shape)), fill, dtype=np.int64)
    if len(shape):
        out[rows, rank[rows, flat]] = np.stack(np.unravel_index(flat, shape), -1)
    return BatchedTensor(bridge.host_result(out.reshape(sizes + (size, len(shape))), _C.int64), x._levels)


for _k, _rule in (("one_hot", _one_hot_rule), ("F.one_hot", _one_hot_rule), ("histc", _histc_rule),
                  ("nonzero_static", _nonzero_static_rule)):
    RULES[_k] = _or_loop(_k, _rule)



# ----- vmapB: randomised low-rank factorisations (Note [Randomised low-rank SVD] in linalg.py) --------------------
# 'same': the op on the physical tensor draws one test matrix, which every row shares; 'different': the same steps
# with a test matrix drawn per row (the batch dims in front of its (n, q)).
def _lowrank_different(pca):
    names = ("A", "q", "center", "niter") if pca else ("A", "q", "niter", "M")

    def rule(fn, args, kwargs):
        a = dict(zip(names, args))
        a.update(kwargs)
        A = a.get("A")
        if set(a) - set(names) or not _only_first_batched(args, kwargs) or A.dim() < 2 or \
                not A.dtype.is_floating_point or a.get("M") is not None:
            return None
        m, n = A.shape[-2], A.shape[-1]
        q, niter = a.get("q", None if pca else 6), a.get("niter", 2)
        q = (builtins.min(6, m, n) if pca else 6) if q is None else q
        if any(isinstance(v, bool) or not isinstance(v, int) for v in (q, niter)) or niter < 0 or \
                q < 0 or pca and q > builtins.min(m, n):
            return None                    # the loop raises the op's error
        v = A._value
        if pca and a.get("center", True):
            v = _C.sub(v, _C.mean(v, [-2], True))
        wide = m < n
        if wide:
            v = _C.mT(v)
        vt = _C.mT(v)
        Q = linalg_qr(_C.matmul(v, _C.randn(list(v.shape[:-2]) + [v.shape[-1], q], v.dtype)))[0]
        for _ in builtins.range(niter):
            Q = linalg_qr(_C.matmul(vt, Q))[0]
            Q = linalg_qr(_C.matmul(v, Q))[0]
        U, S, Vh = linalg_svd(_C.matmul(_C.mT(Q), v), full_matrices=False)
        U, V = _C.matmul(Q, U), _C.mT(Vh)
        return _wrap((V, S, U) if wide else (U, S, V), A._levels)
    return rule


for _k, _pca in (("svd_lowrank", False), ("pca_lowrank", True)):
    RANDOM_RULES[_k] = _or_loop(_k, _lowrank_different(_pca))
    SAME_RULES[_k] = _or_loop(_k, _matrix_first(2))



# ----- vmapB: results whose shape the values set (dynamic shapes): refused, as torch.func refuses them ------------
# Looping over the rows only worked when every row's result happened to have the same shape; torch.func refuses
# these ops outright, and so does this (a result is never shaped by the data, hence never a silent loop).
def _dynamic_shape(key, alternatives):
    def rule(fn, args, kwargs):
        raise RuntimeError(f"vmap: {key} returns a result whose shape depends on each row's values (a dynamic "
                           f"shape), which cannot be batched (torch.func refuses it too); {alternatives}.")
    return rule


def _masked_select_rule(fn, args, kwargs):
    """masked_select(x, mask) with an unbatched mask: every row selects the same positions (a fixed size); a
    batched mask would size each row's result by its values (refused)."""
    a = dict(zip(("input", "mask"), args))
    a.update(kwargs)
    x, mask = a.get("input"), a.get("mask")
    if set(a) != {"input", "mask"} or not (_is_tensor(x) and _is_tensor(mask)):
        return None
    if isinstance(mask, BatchedTensor):
        _dynamic_shape("masked_select with a batched mask", "use where(mask, x, fill) or masked_fill")(fn, args,
                                                                                                        kwargs)
    if mask.dtype is not _C.bool:
        return None
    shape = _broadcast_shape(tuple(x.shape), tuple(mask.shape))
    if shape is None:
        return None
    nb = len(x._levels)
    xv = _phys(x, x._levels, len(shape)).expand(tuple(x._value.shape[:nb]) + shape)
    return BatchedTensor(xv[(slice(None),) * nb + (mask.expand(shape),)], x._levels)


def _where_any(fn, args, kwargs):
    if len(args) + len(kwargs) == 1:
        _dynamic_shape("where(condition)", "use where(condition, x, y), or nonzero_static")(fn, args, kwargs)
    return _pointwise(fn, args, kwargs)


def _arange_rule(fn, args, kwargs):
    raise RuntimeError("vmap: arange with a batched bound reads each row's value to size its result (as .item() "
                       "would; torch.func refuses it too); pass Python numbers, or build the range outside vmap.")


for _k, _alt in (("nonzero", "use nonzero_static(x, size=...)"), ("argwhere", "use nonzero_static(x, size=...)"),
                 ("unique", "compute it outside vmap"), ("unique_consecutive", "compute it outside vmap")):
    RULES[_k] = _dynamic_shape(_k, _alt)
RULES["masked_select"] = _or_loop("masked_select", _masked_select_rule)
RULES["where"] = _where_any
RULES["arange"] = _arange_rule



# ----- vmapB: as_strided of a row, its storage offset counted from the row's start (as torch.func) ----------------
# The positions that shape.as_strided reads from a contiguous row are those it reads from the row of its element
# numbers (the op itself, on an arange: its checks and errors too); every row then picks them from its flattened
# elements (one index_select over the batch). A row whose dims are not laid out contiguously falls back.
def _row_is_contiguous(x):
    strides, expect = tuple(x._value.stride())[len(x._levels):], 1
    for n, st in reversed(list(zip(tuple(x.shape), strides))):
        if n != 1 and st != expect:
            return False
        expect *= n
    return True


def _as_strided_rule(fn, args, kwargs):
    a = dict(zip(("input", "size", "stride", "storage_offset"), args))
    a.update(kwargs)
    x = a.get("input")
    if set(a) - {"input", "size", "stride", "storage_offset"} or not _only_first_batched(args, kwargs) or \
            not _row_is_contiguous(x):
        return None
    numbers = _root().arange(x.numel()).reshape(tuple(x.shape))
    positions = fn(numbers, a.get("size"), a.get("stride"), a.get("storage_offset"))
    nb = len(x._levels)
    out = _flat_rows(x).index_select(nb, positions.reshape(-1))
    return BatchedTensor(out.reshape(tuple(x._value.shape[:nb]) + tuple(positions.shape)), x._levels)


def _as_strided_scatter_rule(fn, args, kwargs):
    a = dict(zip(("input", "src", "size", "stride", "storage_offset"), args))
    a.update(kwargs)
    x, src = a.get("input"), a.get("src")
    size, stride, offset = a.get("size"), a.get("stride"), a.get("storage_offset")
    offset = 0 if offset is None else offset
    if set(a) - {"input", "src", "size", "stride", "storage_offset"} or not (_is_tensor(x) and _is_tensor(src)) or \
            not isinstance(size, (tuple, list, Size)) or not isinstance(stride, (tuple, list)) or \
            len(size) != len(stride) or x.dtype is not src.dtype or tuple(src.shape) != tuple(size) or \
            any(isinstance(v, bool) or not isinstance(v, int) or v < 0 for v in tuple(size) + tuple(stride)) or \
            isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
        return None
    n = x.numel()
    if 0 in tuple(size):
        return None
    positions = np.full(tuple(size), offset, dtype=np.int64)
    for k, (m, st) in enumerate(zip(size, stride)):
        view = (1,) * k + (m,) + (1,) * (len(size) - k - 1)
        positions = positions + (np.arange(m, dtype=np.int64) * st).reshape(view)
    flat_pos = positions.reshape(-1)
    if flat_pos.max() >= n or np.unique(flat_pos).size != flat_pos.size:
        return None                        # outside the row, or overlapping writes: the loop (and its error)
    levels = _levels_of([x, src])
    nb = len(levels)
    sizes = _batch_sizes(levels)
    xv = _phys(x, levels, expand=True).reshape(sizes + (n,))
    sv = _phys(src, levels, expand=True).reshape(sizes + (-1,))
    out = xv.index_copy(nb, bridge.copy(flat_pos, False), sv)
    return BatchedTensor(out.reshape(sizes + tuple(x.shape)), levels)


def _resize_as_inplace(self, args, kwargs):
    """x.resize_as_(t): a row already of t's shape is left as it is; any other size would resize the storage,
    which a row does not own (refused, as resize_ is)."""
    template = args[0] if args else kwargs.get("the_template")
    if not isinstance(self, BatchedTensor) or not _is_tensor(template) or tuple(template.shape) != tuple(self.shape):
        raise RuntimeError("vmap: resize_as_ to another shape resizes the storage, which a batched row does not own; "
                           "use an out-of-place op (reshape, new_empty).")
    return self


RULES["resize_as_"] = lambda fn, args, kwargs: _resize_as_inplace(args[0], args[1:], kwargs)
INPLACE_RULES["resize_as_"] = _resize_as_inplace
RULES["as_strided"] = _or_loop("as_strided", _as_strided_rule)
RULES["as_strided_copy"] = _or_loop("as_strided_copy", _as_strided_rule)
RULES["as_strided_scatter"] = _or_loop("as_strided_scatter", _as_strided_scatter_rule)



def _row_bins(column, bins, pair, dtype):
    """For the (n, E) values of one dim of every row: statistics._uniform_edges per row (n, bins + 1) and numpy
    histogramdd's bin of each value (an upper-bound search on the row's float64 edges, the last edge closed;
    -1 outside). None where a row's own range is not finite (the loop raises histogram's error)."""
    n = column.shape[0]
    if pair is None:
        if column.shape[1]:
            lo, hi = column.min(1).astype(np.float64), column.max(1).astype(np.float64)
        else:
            lo, hi = np.zeros(n), np.ones(n)
        if not (np.isfinite(lo).all() and np.isfinite(hi).all()):
            return None
    else:
        lo, hi = np.full(n, pair[0]), np.full(n, pair[1])
    same = lo == hi
    lo, hi = np.where(same, lo - 0.5, lo), np.where(same, hi + 0.5, hi)
    edges = np.linspace(lo, hi, bins + 1, axis=1).astype(dtype)
    e64, p64 = edges.astype(np.float64), column.astype(np.float64)
    rows = np.arange(n, dtype=np.int64)[:, None]
    first = np.zeros(p64.shape, np.int64)
    last = np.full(p64.shape, bins + 1, np.int64)
    while (first < last).any():                                                   # searchsorted(side='right')
        middle = (first + last) // 2
        with np.errstate(invalid="ignore"):
            right = (first < last) & (e64[rows, np.minimum(middle, bins)] <= p64)
        first, last = np.where(right, middle + 1, first), np.where(right | (first >= last), last, middle)
    with np.errstate(invalid="ignore"):
        first = first - (p64 == e64[:, -1:])                                      # the last edge is closed
    return edges, np.where((first >= 1) & (first <= bins), first - 1, -1)


def _histogram_rule(fn, args, kwargs):
    """histogram(x, bins: int, range=, weight=, density=) and histogramdd(x, bins: int(s), ...): statistics'
    edges for every row at once (each row's own range unless range= is given), then numpy histogramdd's counting
    for all rows in one bincount."""
    one_dim = fn.__name__ == "histogram"
    a = dict(zip(("input", "bins"), args))
    a.update(kwargs)
    x, bins, rng, weight = a.get("input"), a.get("bins"), a.get("range"), a.get("weight")
    if set(a) - {"input", "bins", "range", "weight", "density"} or not _only_first_batched(args, kwargs) or \
            not x.dtype.is_floating_point or x.dtype in (_C.float16, _C.bfloat16) or (not one_dim and x.dim() < 1):
        return None
    d = 1 if one_dim else x.shape[-1]
    bins = [bins] * d if isinstance(bins, int) else list(bins) if isinstance(bins, (tuple, list)) and \
        not one_dim else None
    if bins is None or len(bins) != d or any(isinstance(b, bool) or not isinstance(b, int) or b <= 0 for b in bins):
        return None
    point_shape = tuple(x.shape) if one_dim else tuple(x.shape[:-1])
    if weight is not None and (not _is_tensor(weight) or isinstance(weight, BatchedTensor) or
                               tuple(weight.shape) != point_shape or weight.dtype is not x.dtype):
        return None
    if rng is not None and (not isinstance(rng, (tuple, list)) or (one_dim and len(rng) != 2)):
        return None
    pairs = _range_pairs(rng, d, "histogram" if one_dim else "histogramdd")
    nb = len(x._levels)
    sizes = tuple(x._value.shape[:nb])
    n = math.prod(sizes)
    dtype = np.dtype(x.dtype.name)
    points = bridge.host_array(x._value.detach()).astype(dtype, copy=False).reshape(n, -1, d)
    flat = np.arange(n, dtype=np.int64)[:, None] * math.prod(bins)
    keep = np.ones(points.shape[:2], bool)
    all_edges = []
    for k in builtins.range(d):
        found = _row_bins(points[:, :, k], bins[k], None if pairs is None else pairs[k], dtype)
        if found is None:
            return None
        edges, which = found
        all_edges.append(edges)
        keep &= which >= 0
        flat = flat + which * math.prod(bins[k + 1:])
    w = None if weight is None else np.broadcast_to(
        bridge.host_array(weight.detach()).astype(dtype).reshape(1, -1), keep.shape)[keep].astype(np.float64)
    counts = np.bincount(flat[keep], w, minlength=n * math.prod(bins)).reshape((n,) + tuple(bins))
    if a.get("density"):
        with np.errstate(all="ignore"):
            total = counts.reshape(n, -1).sum(1).reshape((n,) + (1,) * d)
            for k, edges in enumerate(all_edges):
                widths = np.diff(edges.astype(np.float64), axis=1)
                counts = counts / widths.reshape((n,) + (1,) * k + (bins[k],) + (1,) * (d - k - 1))
            counts = counts / total
    hist = BatchedTensor(bridge.host_result(counts.astype(dtype).reshape(sizes + tuple(bins)), x.dtype), x._levels)
    out = [BatchedTensor(bridge.host_result(e.reshape(sizes + (e.shape[1],)), x.dtype), x._levels) for e in all_edges]
    return return_histogram(hist, out[0]) if one_dim else return_histogramdd(hist, tuple(out))


RULES["histogram"] = _or_loop("histogram", _histogram_rule)
RULES["histogramdd"] = _or_loop("histogramdd", _histogram_rule)


# ----- func3: in-place view changes of a batched row, fill_diagonal_ -------------------------------------------------
# t_, transpose_, swapaxes_, swapdims_, unsqueeze_ and as_strided_ change the row's shape, not its values: the
# physical tensor takes the same change with its dims shifted past the batch dims (as torch's BatchedTensor changes
# its logical view), through the engine's own in-place view op (its version bump and autograd history). The
# out-of-place op runs first on the row, so a bad argument raises that op's error.
def _physical_inplace(self, name, args):
    was, STATE.active = STATE.active, False
    try:
        getattr(self._value, name)(*args)
    finally:
        STATE.active = was
    return self


def _dims_of(args, kwargs, names, op):
    if len(args) + len(kwargs) != len(names) or any(k not in names[len(args):] for k in kwargs):
        raise TypeError(f"{op}() takes the arguments ({', '.join(names)}), got {len(args)} positional and "
                        f"{sorted(kwargs)} keyword ones.")
    return list(args) + [kwargs[n] for n in names[len(args):]]


def _transpose_inplace(op, names):
    def run(self, args, kwargs):
        _method(op[:-1], self, *args, **kwargs)          # validates (the out-of-place op's errors)
        d0, d1 = _dims_of(args, kwargs, names, op)
        nb, rank = len(self._levels), self.dim()
        if rank == 0:
            return self
        return _physical_inplace(self, "transpose_", (_shift_dim(d0, rank, nb), _shift_dim(d1, rank, nb)))
    return run


def _t_inplace(self, args, kwargs):
    _method("t", self, *args, **kwargs)
    nb, rank = len(self._levels), self.dim()
    return self if rank < 2 else _physical_inplace(self, "transpose_", (nb, nb + 1))


def _unsqueeze_inplace(self, args, kwargs):
    _method("unsqueeze", self, *args, **kwargs)
    (d,) = _dims_of(args, kwargs, ("dim",), "unsqueeze_")
    nb, rank = len(self._levels), self.dim()
    return _physical_inplace(self, "unsqueeze_", (_shift_dim(d, rank + 1, nb),))


def _as_strided_inplace(self, args, kwargs):
    """Each row's as_strided_ from its own first element: the batch dims keep their physical sizes and strides in
    front of the row's. An explicit storage_offset names a position in memory the row does not own: refused."""
    size, stride, *rest = _dims_of(args, kwargs, ("size", "stride", "storage_offset")[:max(2, len(args) +
                                                                                        len(kwargs))],
                                   "as_strided_")
    if rest and rest[0] is not None:
        raise RuntimeError("vmap: as_strided_ with a storage_offset is not supported on a batched tensor (the "
                           "offset names the physical memory of every row); pass storage_offset=None, or use "
                           "as_strided_ outside vmap.")
    size = tuple(to_int(n, "as_strided_", "size") for n in size)
    stride = tuple(to_int(n, "as_strided_", "stride") for n in stride)
    if len(size) != len(stride):
        _method("as_strided", self, size, stride)        # the op's own error
    v, nb = self._value, len(self._levels)
    return _physical_inplace(self, "as_strided_", (tuple(v.shape[:nb]) + size, tuple(v.stride()[:nb]) + stride,
                                                   v.storage_offset()))


def _fill_diagonal_inplace(self, args, kwargs):
    """The row's diagonal positions found by fill_diagonal_ on an unbatched mask of the row's shape (its errors and
    its wrap= rule), then one masked_fill_ of the physical tensor."""
    was, STATE.active = STATE.active, False
    try:
        mask = _C.full(tuple(self.shape), 0, self.dtype if self.dtype != _C.bool else _C.int64)
        mask.fill_diagonal_(1, *args[1:], **kwargs)
        value = args[0] if args else kwargs.get("fill_value")
        self._value.masked_fill_(mask != 0, value)
    finally:
        STATE.active = was
    return self


_VIEW_INPLACE = {"t_": _t_inplace, "transpose_": _transpose_inplace("transpose_", ("dim0", "dim1")),
                 "swapdims_": _transpose_inplace("swapdims_", ("dim0", "dim1")),
                 "swapaxes_": _transpose_inplace("swapaxes_", ("axis0", "axis1")),
                 "unsqueeze_": _unsqueeze_inplace, "as_strided_": _as_strided_inplace,
                 "fill_diagonal_": _fill_diagonal_inplace}


def _deepcopy(self, memo):
    """copy.deepcopy of a row: the deep copy of the physical tensor, batched at the same levels."""
    was, STATE.active = STATE.active, False
    try:
        out = BatchedTensor(copy.deepcopy(self._value, memo), self._levels)
    finally:
        STATE.active = was
    memo[id(self)] = out
    return out


BatchedTensor.__deepcopy__ = _deepcopy


# ----- vmap -----------------------------------------------------------------------------------------------------
def _tree_map_dims(obj, dims, fn, op):
    """fn(tensor, dim) over the tensors of obj (nested tuples, lists and dicts), dims an int/None for all of them
    or a structure matching obj's."""
    if _is_tensor(obj):
        if isinstance(dims, (tuple, list, dict)):
            raise ValueError(f"{op}: in_dims is not compatible with the structure of the inputs.")
        return fn(obj, dims)
    if isinstance(obj, (tuple, list)):
        if isinstance(dims, (tuple, list)):
            if len(dims) != len(obj):
                raise ValueError(f"{op}: in_dims is not compatible with the structure of the inputs "
                                 f"({len(dims)} in_dims for {len(obj)} inputs).")
            items = [_tree_map_dims(o, d, fn, op) for o, d in zip(obj, dims)]
        else:
            items = [_tree_map_dims(o, dims, fn, op) for o in obj]
        return type(obj)(items) if isinstance(obj, list) else tuple(items)
    if isinstance(obj, dict):
        if isinstance(dims, dict):
            return {k: _tree_map_dims(v, dims.get(k), fn, op) for k, v in obj.items()}
        return {k: _tree_map_dims(v, dims, fn, op) for k, v in obj.items()}
    if obj is not None and dims is not None:
        # torch.func's error: a Python number (or any non-tensor) passed with a mapped dim
        raise ValueError(f"{op}: got in_dim={dims!r} for an input of type {type_name(obj)}; vmap maps over "
                         "Tensors only: pass None as that input's in_dim (e.g. in_dims=(0, None)).")
    return obj


def _movedim1(v, src, dst):
    """func3: v.movedim(src, dst) for one dim, both in range: the core's permute without movedim's argument
    checking (vmap's entry and exit cost ~10 us per call of the vmapped function, a third of it in movedim)."""
    order = list(builtins.range(v.ndim))
    order.insert(dst, order.pop(src))
    return _C.permute(v, tuple(order))


def _move_in(x, d, level):
    """x's logical dim d becomes the batch dim of the new level (the last, innermost)."""
    if isinstance(x, BatchedTensor):
        nb = len(x._levels)
        v = x._value if d == 0 else _movedim1(x._value, nb + d, nb)
        return BatchedTensor(v, x._levels + (level,))
    return BatchedTensor(x if d == 0 else _movedim1(x, d, 0), (level,))


def _move_out(x, level, size, od, op, name):
    """An output of func: the level's dim moved to logical dim od (expanded if the output is not batched at the
    level); outer levels stay batched."""
    if not _is_tensor(x):
        raise ValueError(f"{op}: `{name}` must only return Tensors, got {type_name(x)}; set out_dims to None for "
                         "that output to return it unmapped.")
    if isinstance(x, BatchedTensor) and level in x._levels:
        rest = tuple(lv for lv in x._levels if lv != level)
        pos = x._levels.index(level)
        v = _movedim1(x._value, pos, len(x._levels) - 1) if pos != len(x._levels) - 1 else x._value
    else:
        rest = x._levels if isinstance(x, BatchedTensor) else ()
        v = x._value if isinstance(x, BatchedTensor) else x
        v = v.unsqueeze(len(rest))
        v = v.expand(tuple(v.shape[:len(rest)]) + (size,) + tuple(v.shape[len(rest) + 1:]))
    nb = len(rest)
    rank = v.ndim - nb
    od = to_int(od, op, "out_dims")
    if not -rank <= od < rank:
        raise IndexError(f"{op}: out_dims {od} is out of range for an output of {rank} dimensions.")
    v = _movedim1(v, nb, nb + od % rank)
    return BatchedTensor(v, rest) if rest else v


def tree_flatten(obj):
    """(leaves, spec) of a pytree (tuples, lists, dicts and namedtuples of tensors and other leaves);
    tree_unflatten(leaves, spec) rebuilds it. dyngrad.func shares these."""
    if isinstance(obj, (tuple, list)):
        leaves, specs = [], []
        for o in obj:
            ls, sp = tree_flatten(o)
            leaves.extend(ls)
            specs.append((len(ls), sp))
        return leaves, (type(obj), specs)
    if isinstance(obj, dict):
        leaves, specs = [], []
        for k, o in obj.items():
            ls, sp = tree_flatten(o)
            leaves.extend(ls)
            specs.append((k, len(ls), sp))
        return leaves, (dict, specs)
    return [obj], None


def tree_unflatten(leaves, spec):
    if spec is None:
        return leaves[0]
    kind, specs = spec
    pos = 0
    if kind is dict:
        out = {}
        for k, n, sp in specs:
            out[k] = tree_unflatten(leaves[pos:pos + n], sp)
            pos += n
        return out
    items = []
    for n, sp in specs:
        items.append(tree_unflatten(leaves[pos:pos + n], sp))
        pos += n
    if kind is tuple or kind is list:
        return kind(items)
    return kind(*items)


def _broadcast_out_dims(out_dims, out, op):
    """One out_dim per output leaf."""
    leaves, spec = tree_flatten(out)
    for d in (out_dims if isinstance(out_dims, (tuple, list)) else (out_dims,)):
        if d is not None and not isinstance(d, (int, tuple, list)):      # torch.func's ValueError
            raise ValueError(f"{op}: out_dims must be an int, None or a Python collection of them (where the mapped "
                             f"dim goes in each output), got {type_name(d)}.")
    if isinstance(out_dims, (tuple, list)) and isinstance(out, tuple):
        if len(out_dims) != len(out):
            raise ValueError(f"{op}: out_dims has {len(out_dims)} entries but func returned {len(out)} outputs.")
        dims = []
        for o, d in zip(out, out_dims):
            dims.extend([d] * len(tree_flatten(o)[0]))
        return leaves, spec, dims
    if isinstance(out_dims, (tuple, list)):
        if len(out_dims) != 1:
            raise ValueError(f"{op}: out_dims has {len(out_dims)} entries but func returned 1 output.")
        out_dims = out_dims[0]
    return leaves, spec, [out_dims] * len(leaves)


def vmap(func, in_dims=0, out_dims=0, randomness="error", *, chunk_size=None):
    """func mapped over a dimension of its inputs: vmap(f)(x) is f(x[i]) for every i stacked, computed in one call
    of f on batched tensors (Note [vmap by batching rules]); in_dims says which dim of each input is mapped (None
    for an input passed whole, a structure matching the inputs'), out_dims where the mapped dim goes in each output,
    randomness how random ops behave ('error', 'different', 'same'), chunk_size how many rows run at once."""
    if not callable(func):
        raise TypeError(f"vmap: expected a function as func, got {type_name(func)}.")
    if randomness not in ("error", "different", "same"):
        raise RuntimeError(f"vmap: the allowed values for randomness are 'error', 'different' or 'same', got "
                           f"{randomness!r}.")
    if chunk_size is not None and (isinstance(chunk_size, bool) or not isinstance(chunk_size, int) or
                                   chunk_size < 1):
        raise ValueError(f"vmap: chunk_size must be None or a positive int, got {chunk_size!r}.")
    name = getattr(func, "__name__", type(func).__name__)
    op = f"vmap({name}, ...)"

    # vmapsp: in_dims as one non-negative int (or None) per positional input, when it is that simple; out_dims 0
    fast_dims = in_dims
    if not (fast_dims is None or type(fast_dims) is int and fast_dims >= 0 or isinstance(fast_dims, tuple) and
            all(d is None or type(d) is int and d >= 0 for d in fast_dims)):
        fast_dims = False
    fast_out = type(out_dims) is int and out_dims == 0

    def mapped(*args, **kwargs):
        if not isinstance(in_dims, (int, tuple)) and in_dims is not None:   # torch.func's ValueError (a list too)
            raise ValueError(f"{op}: expected in_dims to be an int or a (possibly nested) tuple matching the "
                             f"structure of the inputs, got {type_name(in_dims)}.")
        if fast_dims is not False and not kwargs and chunk_size is None:
            out = _fast_run(args)
            if out is not _SLOW:
                return out
        dims = in_dims if isinstance(in_dims, tuple) else (in_dims,) * len(args)
        if isinstance(in_dims, tuple) and len(in_dims) != len(args):
            raise ValueError(f"{op}: in_dims has {len(in_dims)} entries but {len(args)} inputs were given.")
        sizes = []

        def check(t, d):
            if d is None:
                return (t, None)
            if not isinstance(d, int):      # a bool is an int: to_int's TypeError, as torch's size(dim)
                raise ValueError(f"{op}: got in_dim={d!r} of type {type_name(d)} for an input; an in_dim is an int "
                                 "(the mapped dimension) or None.")
            d = to_int(d, op, "in_dims")
            rank = _logical_rank(t)
            if not -rank <= d < max(rank, 0) or rank == 0:
                raise ValueError(f"{op}: got in_dim={d} for an input of {rank} dimensions; expected "
                                 f"{-rank} <= in_dim < {rank}.")
            d = d + rank if d < 0 else d
            sizes.append(t.shape[d])
            return (t, d)
        plan = _tree_map_dims(tuple(args), tuple(dims), check, op)
        if not sizes:
            raise ValueError(f"{op}: expected at least one Tensor to vmap over.")
        if len(set(sizes)) != 1:
            raise ValueError(f"{op}: expected all tensors to have the same size in the mapped dimension, got sizes "
                             f"{sizes}.")
        n = sizes[0]
        if chunk_size is None or chunk_size >= n:
            return _run(plan, n, 0, n, kwargs)
        outs = [_run(plan, n, start, builtins.min(start + chunk_size, n), kwargs)
                for start in builtins.range(0, n, chunk_size)]
        return _concat_chunks(outs)

    def _fast_run(args):
        """vmapsp: mapped(*args) for tensors mapped at non-negative dims (other inputs neither tensors nor
        containers), without the pytree walks of the plan and of the outputs, and, for a BatchedTensor returned at
        out_dims 0, without the exit's movedim (~4 us a call of the vmapped function on an Intel Xeon, lscpu family
        6 model 167). _SLOW: the general path (which also raises every error)."""
        dims = fast_dims if isinstance(fast_dims, tuple) else (fast_dims,) * len(args)
        if len(dims) != len(args):
            return _SLOW
        n = -1
        for a, d in zip(args, dims):
            if d is None:
                if isinstance(a, (tuple, list, dict, BatchedTensor)):
                    return _SLOW
            elif type(a) is not Tensor or d >= a.ndim or (n >= 0 and a.shape[d] != n):
                return _SLOW
            else:
                n = a.shape[d]
        if n < 0:
            return _SLOW
        level = next(_COUNTER)
        was = STATE.active
        STATE.active = False
        try:
            batched = [a if d is None else BatchedTensor(a if d == 0 else _movedim1(a, d, 0), (level,))
                       for a, d in zip(args, dims)]
        finally:
            STATE.active = was
        STATE.levels.append([level, n, randomness])
        STATE.active = True
        try:
            out = func(*batched)
            STATE.active = False
            if fast_out and type(out) is BatchedTensor and out._levels == (level,) and \
                    not any(out._value is a for a in args):
                return out._value
            leaves, spec, odims = _broadcast_out_dims(out_dims, out, op)
            moved = [leaf if od is None else _move_out(leaf, level, n, od, op, name)
                     for leaf, od in zip(leaves, odims)]
        finally:
            STATE.levels.pop()
            STATE.active = bool(STATE.levels)
        return tree_unflatten(moved, spec)

    def _run(plan, n, start, stop, kwargs):
        level = next(_COUNTER)
        size = stop - start

        def enter(x):
            if isinstance(x, tuple) and len(x) == 2 and _is_tensor(x[0]) and (x[1] is None or
                                                                               isinstance(x[1], int)):
                t, d = x
                if d is None:
                    return t
                if (start, stop) != (0, n):
                    t = t.narrow(d, start, size)
                return _move_in(t, d, level)
            if isinstance(x, (tuple, list)):
                items = [enter(o) for o in x]
                return type(x)(items) if isinstance(x, list) else tuple(items)
            if isinstance(x, dict):
                return {k: enter(v) for k, v in x.items()}
            return x
        was = STATE.active
        STATE.active = False          # narrow and movedim of the inputs are vmap's own, not func's
        try:
            batched = enter(plan)
        finally:
            STATE.active = was
        STATE.levels.append([level, size, randomness])
        STATE.active = True
        try:
            out = func(*batched, **kwargs)
            STATE.active = False
            leaves, spec, odims = _broadcast_out_dims(out_dims, out, op)
            moved = [leaf if od is None else _move_out(leaf, level, size, od, op, name)
                     for leaf, od in zip(leaves, odims)]
        finally:
            STATE.levels.pop()
            STATE.active = bool(STATE.levels)
        return tree_unflatten(moved, spec)

    def _concat_chunks(outs):
        leaves0, spec, odims = _broadcast_out_dims(out_dims, outs[0], op)
        columns = [tree_flatten(o)[0] for o in outs]
        merged = []
        for k, od in enumerate(odims):
            if od is None:
                merged.append(leaves0[k])
                continue
            parts = [c[k] for c in columns]
            rank = _logical_rank(parts[0])
            merged.append(_cat_public(parts, to_int(od, op, "out_dims") % rank))
        return tree_unflatten(merged, spec)

    mapped.__name__ = mapped.__qualname__ = f"vmap_{name}"
    mapped.__doc__ = f"{name} mapped by vmap over in_dims={in_dims!r}, out_dims={out_dims!r}."
    return mapped


_SLOW = object()        # vmapsp: _fast_run's "take the general path"


def _cat_public(parts, dim):
    if any(isinstance(p, BatchedTensor) for p in parts):
        return _dispatch("cat", _C_cat, (parts, dim), {})
    return _C.cat(list(parts), dim)


def _C_cat(tensors, dim=0):
    return _C.cat(list(tensors), dim)
