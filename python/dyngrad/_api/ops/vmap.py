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

from ... import _C
from ..._user_frame import warn
from ...autograd.function import Function
from ..args import Size, Tensor, to_int, type_name
from ..batching import METHODS, STATE, register
from .. import primitive_rows, table
from .shape import diag_embed as _diag_embed
from .sorting import sort as _sort

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


def _make_method(name):
    def method(self, *args, **kwargs):
        return _method(name, self, *args, **kwargs)
    method.__name__ = method.__qualname__ = name
    return method


def _property(name, fget, self):
    return _dispatch(name, fget, (self,), {})


_DUNDERS = ("__add__", "__radd__", "__sub__", "__rsub__", "__mul__", "__rmul__", "__truediv__", "__rtruediv__",
            "__floordiv__", "__rfloordiv__", "__mod__", "__rmod__", "__pow__", "__rpow__", "__matmul__",
            "__rmatmul__", "__neg__", "__pos__", "__abs__", "__invert__", "__and__", "__rand__", "__or__", "__ror__",
            "__xor__", "__rxor__", "__eq__", "__ne__", "__lt__", "__le__", "__gt__", "__ge__", "__lshift__",
            "__rshift__", "__rdiv__", "__rlshift__", "__rrshift__")


def _make_dunder(name):
    def dunder(self, *args):
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
        if rank == 0:
            return None
        if param not in sig.parameters:
            return None
        default = sig.parameters[param].default
        d = bound.arguments.get(param, default)
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
        sig = _signature(fn)
        if not sig:
            return None
        try:
            bound = sig.bind(*args, **kwargs)
        except TypeError:
            return None
        bound.apply_defaults()
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
    if not isinstance(a, BatchedTensor) and rb >= 2:
        return _wrap(fn(a, b._value), levels)
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
        if _C.is_grad_enabled():      # create_graph: each row's input gradient depends on its own row of w
            gx = _matmul_batched(grad, w, nb)
        else:
            gx = _C.matmul(grad, w[(0,) * nb])
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
        reduction = a.get("reduction", "mean")
        if reduction not in ("none", "mean", "sum", "batchmean"):
            return None
        tensors = [a[p] for p in tensor_params if _is_tensor(a.get(p))]
        levels = _levels_of(tensors)
        rank = builtins.max(_logical_rank(t) for t in tensors)
        for p in tensor_params:
            if _is_tensor(a.get(p)):
                a[p] = _phys(a[p], levels, rank, expand=True)   # bce refuses a broadcast target
        a["reduction"] = "none"
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


def _einsum(fn, args, kwargs):
    equation, operands = args[0], args[1:]
    if len(operands) == 1 and isinstance(operands[0], (tuple, list)):
        operands = tuple(operands[0])
    if not isinstance(equation, str) or "..." in equation or "->" not in equation:
        return None
    levels = _levels_of(operands)
    free = [c for c in "ABCDEFGHIJKLMNOPQRSTUVWXYZ" if c not in equation][:len(levels)]
    lhs, rhs = equation.replace(" ", "").split("->")
    terms = lhs.split(",")
    new_terms, phys = [], []
    for term, op in zip(terms, operands):
        if isinstance(op, BatchedTensor):
            mine = [free[levels.index(lv)] for lv in op._levels]
            new_terms.append("".join(mine) + term)
            phys.append(op._value)
        else:
            new_terms.append(term)
            phys.append(op)
    return BatchedTensor(fn(",".join(new_terms) + "->" + "".join(free) + rhs, *phys), levels)


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


# ----- in-place methods -----------------------------------------------------------------------------------------
def _inplace(name, self, args, kwargs):
    """self.name_(...): the out-of-place op's rule, then the result written into self's physical tensor (self must
    be batched at every level the result is)."""
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
for _k in ("sum", "mean", "amax", "amin", "logsumexp", "prod", "nansum", "nanmean", "var", "std", "all", "any",
           "count_nonzero", "special.logsumexp", "aminmax"):
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
RULES["einsum"] = _or_loop("einsum", _einsum)
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
    """outer/ger/inner/vdot of two 1-D rows: the aligned physical vectors combined (broadcast over the batch)."""
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
                  ("inner", _two_vectors(lambda a, b: (a * b).sum(-1))),
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
                  ("trapezoid", _trapezoid), ("cumulative_trapezoid", _trapezoid), ("adjoint", _adjoint),
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


def _values_against_unbatched(pos):
    """isin(elements, test), bucketize(input, boundaries), searchsorted(sorted, values): elementwise in the
    argument at `pos` when the other (the set, the boundaries, a 1-D sorted sequence) is unbatched."""
    def rule(fn, args, kwargs):
        if len(args) < 2 or not isinstance(args[pos], BatchedTensor):
            return None
        others = [a for k, a in enumerate(args) if k != pos] + list(kwargs.values())
        if _has_batched(others, {}):
            return None
        if pos == 1 and _logical_rank(args[0]) != 1:
            return None                        # an n-d sorted sequence pairs its rows with the values' rows
        x = args[pos]
        new = list(args)
        new[pos] = x._value
        return _wrap(fn(*new, **kwargs), x._levels)
    return rule


RULES["cfloat"] = RULES["cdouble"] = _pointwise
RULES["isin"] = _or_loop("isin", _values_against_unbatched(0))
RULES["bucketize"] = _or_loop("bucketize", _values_against_unbatched(0))
RULES["searchsorted"] = _or_loop("searchsorted", _values_against_unbatched(1))


def _where(fn, args, kwargs):
    """where(cond, x, y) is pointwise; where(cond) alone is nonzero's tuple (data-dependent: the loop)."""
    if len(args) + len(kwargs) == 1:
        return None
    return _pointwise(fn, args, kwargs)


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


RULES["where"] = _or_loop("where", _where)
for _k in ("prod", "aminmax"):
    RULES[_k] = _or_loop(_k, _reduce_all_flat)


# index_add's, scatter's and scatter_add's index/src are aligned by _index_dim_rule; index_select's must be
# unbatched (a batched index falls back).


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

    def mapped(*args, **kwargs):
        dims = in_dims if isinstance(in_dims, (tuple, list)) else (in_dims,) * len(args)
        if isinstance(in_dims, (tuple, list)) and len(in_dims) != len(args):
            raise ValueError(f"{op}: in_dims has {len(in_dims)} entries but {len(args)} inputs were given.")
        sizes = []

        def check(t, d):
            if d is None:
                return (t, None)
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


def _cat_public(parts, dim):
    if any(isinstance(p, BatchedTensor) for p in parts):
        return _dispatch("cat", _C_cat, (parts, dim), {})
    return _C.cat(list(parts), dim)


def _C_cat(tensors, dim=0):
    return _C.cat(list(tensors), dim)
