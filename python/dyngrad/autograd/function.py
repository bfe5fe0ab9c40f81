"""Custom differentiable functions written in Python (torch.autograd.Function), for both engines. The engine's core
records the node (_C._record_function) and calls back into `backward` during the backward pass."""
import functools

from .. import _C
from .grad_mode import no_grad
from .graph import _current_hooks

_ERR_BACKWARD_TWICE = (
    "backward() reached {node}, whose saved tensors were already freed by an earlier backward(). Pass "
    "retain_graph=True to the first backward() if you need to backpropagate through this graph twice.")
_ERR_SAVED_MODIFIED = (
    "a tensor of shape {shape} saved by {node} for the backward pass was modified in place: it is at version "
    "{now}, but version {saved} was saved. Use an out-of-place op (x = x + 1) instead of an in-place one (x += 1), "
    "or clone() before modifying.")


class FunctionCtx:
    """The `ctx` of forward/backward: save_for_backward / saved_tensors (version-checked, see Note [Saved tensor
    versions] in csrc/dyngrad/node.h), needs_input_grad, mark_non_differentiable, set_materialize_grads; any other
    attribute can be stored on it too."""

    def __init__(self, name="Function"):
        self._name = name
        self._saved = None
        self._packed = None  # Note [Saved tensor hooks]: [(packed value, unpack hook) or None, ...]
        self._released = False
        self.needs_input_grad = ()
        self._non_differentiable = ()
        self._dirty = ()
        self.materialize_grads = True
        self._call_site = None  # (file, line, function) of the node, for the errors below (Note [Call sites])

    def save_for_backward(self, *tensors):
        for i, t in enumerate(tensors):
            if t is not None and not isinstance(t, _C.Tensor):
                raise TypeError(f"save_for_backward: can only save tensors (or None), got {type(t).__name__} at "
                                f"position {i}; store other values as attributes of ctx.")
        self._saved = [(t, t._version if t is not None else 0) for t in tensors]

    @property
    def saved_tensors(self):
        if self._released:
            raise RuntimeError(_ERR_BACKWARD_TWICE.format(node=self._name) + self._created_at())
        if self._packed is not None:
            return tuple(self._unpack_all())
        out = []
        for t, version in self._saved or []:
            if t is not None and t._version != version:
                shape = "(" + ", ".join(str(s) for s in t.shape) + ("," if t.ndim == 1 else "") + ")"
                raise RuntimeError(_ERR_SAVED_MODIFIED.format(shape=shape, node=self._name, now=t._version,
                                                              saved=version) + self._created_at())
            out.append(t)
        return tuple(out)

    def _pack(self, pack, unpack):
        """Hand the saved tensors to an active saved_tensors_hooks' pack hook and keep only what it returns."""
        if not self._saved:
            return
        with no_grad():               # as the cores (Note [Saved tensor hooks]): the hook's ops pack nothing
            self._packed = [None if t is None else (pack(t), unpack) for t, _ in self._saved]
        self._saved = None

    def _unpack_all(self):
        for i, entry in enumerate(self._packed):
            if entry is None:
                yield None
                continue
            value, unpack = entry
            t = unpack(value)
            if not isinstance(t, _C.Tensor):
                raise TypeError(f"saved_tensors_hooks: the unpack hook must return a Tensor, got "
                                f"{type(t).__name__} (saved tensor {i} of {self._name}).")
            yield t

    def _created_at(self):
        site = self._call_site
        return f" ({self._name} was created at {site[0]}:{site[1]})" if site is not None else ""

    def save_for_forward(self, *tensors):
        """Tensors for jvp (torch's ctx.save_for_forward): jvp reads them as ctx.saved_tensors."""
        self._saved_forward = tuple(tensors)

    def mark_non_differentiable(self, *tensors):
        self._non_differentiable = tuple(tensors)

    def mark_dirty(self, *tensors):
        self._dirty = tuple(tensors)

    def set_materialize_grads(self, value):
        """False: backward receives None (not zeros) for outputs that got no gradient."""
        self.materialize_grads = bool(value)

    def _release(self):
        """Called by the engine when the node's saved state is freed (Note [Releasing the graph])."""
        self._released = True
        self._saved = None
        self._packed = None


class Function:
    """Subclass with static forward(ctx, *args) and backward(ctx, *grads); call with .apply(*args)."""

    @staticmethod
    def forward(ctx, *args, **kwargs):
        raise NotImplementedError("a Function subclass must define forward(ctx, ...)")

    @staticmethod
    def backward(ctx, *grads):
        raise NotImplementedError("a Function subclass must define backward(ctx, ...)")

    @staticmethod
    def jvp(ctx, *tangents):
        """The forward-mode derivative: one tangent per input of forward (None for a non-tensor), one returned per
        output. Defined by subclasses that are used under forward_ad / func.jvp."""
        raise NotImplementedError

    @classmethod
    def apply(cls, *args, **kwargs):
        result, ctx = cls._apply(*args, **kwargs)
        if _C._current_dual_level() >= 0:
            _forward_tangents(cls, ctx, args, result)
        return result

    @classmethod
    def _apply(cls, *args, **kwargs):
        name = cls.__name__ + "Backward"
        ctx = FunctionCtx(name)
        ctx.needs_input_grad = tuple(isinstance(a, _C.Tensor) and a.requires_grad for a in args)
        grad_enabled = _C.is_grad_enabled()
        recording = grad_enabled and any(ctx.needs_input_grad)
        # forward runs without recording (no_grad's effect, without building its context object: this is the
        # hot path of every numpy-computed op)
        _C._set_grad_enabled(False)
        try:
            result = cls.forward(ctx, *args, **kwargs)
        finally:
            _C._set_grad_enabled(grad_enabled)
        if not recording:
            return result, ctx
        single = not isinstance(result, tuple)
        outputs = (result,) if single else tuple(result)
        # An input returned as is becomes a new tensor object (sharing its memory), so the input keeps its own
        # history; mark_non_differentiable on it then applies to the returned object.
        non_diff = list(ctx._non_differentiable)
        fresh = []
        for o in outputs:
            if isinstance(o, _C.Tensor) and any(o is a for a in args):
                alias = o.detach()
                non_diff = [alias if n is o else n for n in non_diff]
                o = alias
            fresh.append(o)
        node = _C._record_function(ctx, cls.backward, name, list(args), fresh, non_diff)
        ctx._call_site = node.call_site
        hooks = _current_hooks()
        if hooks is not None:
            ctx._pack(*hooks)
        return (fresh[0] if single else tuple(fresh)), ctx


_ERR_NO_JVP = ("{name}: an input is a dual tensor (forward-mode AD), but {name} defines no jvp(ctx, *tangents); "
               "implement it as a staticmethod returning one tangent per output.")


def _open_levels_of(args):
    """The dual levels at which some tensor argument has a tangent, lowest first."""
    levels = []
    for level in _C._open_dual_levels():
        if any(isinstance(a, _C.Tensor) and _C._get_tangent(a, level) is not None for a in args):
            levels.append(level)
    return levels


def _jvp_primal(ctx, t):
    """Inside a Function's jvp at level L: t with its tangents at the levels >= L hidden (Note [Nested levels] in
    csrc/dyngrad/forward_ad.h: level L's tangent is computed with the levels >= L hidden, so the second-order cross
    term comes once, in the inner tangent's outer tangent); its lower levels' tangents and its autograd history are
    kept. For a jvp that computes with the Function's own apply (nested levels, or a tangent recorded for reverse
    mode): without it the apply would run this jvp again, forever."""
    level = getattr(ctx, "_jvp_level", None)
    if level is None or not isinstance(t, _C.Tensor):
        return t
    hidden = [lv for lv in _C._open_dual_levels() if lv >= level and _C._get_tangent(t, lv) is not None]
    if not hidden:
        return t
    out = _C.reshape(t, tuple(t.shape))
    for lv in hidden:
        _C._set_tangent(out, lv, None)
    return out


def _jvp_primal_has_tangents(ctx, *tensors):
    """Inside a Function's jvp at level L: whether some of `tensors` has a tangent at a level below L, which the
    jvp's result must then carry (compute it from _jvp_primal(ctx, t) through differentiable ops)."""
    level = getattr(ctx, "_jvp_level", None)
    lower = [lv for lv in _C._open_dual_levels() if level is None or lv < level]
    return any(isinstance(t, _C.Tensor) and _C._get_tangent(t, lv) is not None for t in tensors for lv in lower)


def _jvp_input_has_tangent(ctx, t):
    """Inside a Function's jvp at level L: whether the input t has a tangent of its own at L (jvp receives zeros for
    an input that has none, as torch's materialized tangents)."""
    level = getattr(ctx, "_jvp_level", None)
    return level is not None and isinstance(t, _C.Tensor) and _C._get_tangent(t, level) is not None


def _differentiable_dtype(t):
    """Whether t can carry a tangent: floating-point and complex tensors (as make_dual's primals)."""
    return t.dtype.is_floating_point or t.dtype.is_complex


def _forward_tangents(cls, ctx, args, result):
    """Forward-mode AD through a custom Function: its jvp's tangents replace whatever the ops of its forward
    computed (a forward computed in numpy has none), level by level."""
    levels = _open_levels_of(args)
    if not levels:
        return
    single = not isinstance(result, tuple)
    outputs = (result,) if single else tuple(result)
    if cls.jvp is Function.jvp:
        # Without a jvp, a forward written in the engine's ops has already carried the tangents through them; one
        # computed on the host (numpy) has none, and that is an error, as in torch.
        for o in outputs:
            if isinstance(o, _C.Tensor) and _differentiable_dtype(o) and \
                    not any(_C._get_tangent(o, level) is not None for level in levels):
                raise NotImplementedError(_ERR_NO_JVP.format(name=cls.__name__))
        return
    for level in levels:
        tangents = []
        for a in args:
            if not isinstance(a, _C.Tensor):
                tangents.append(None)
                continue
            t = _C._get_tangent(a, level)
            tangents.append(t if t is not None else _C.full(tuple(a.shape), 0.0, a.dtype))
        saved_forward = getattr(ctx, "_saved_forward", None)
        if saved_forward is not None:   # torch: jvp reads what forward gave save_for_forward as saved_tensors
            ctx._saved, ctx._packed = [(t, t._version if t is not None else 0) for t in saved_forward], None
        ctx._jvp_level = level          # what _jvp_primal strips: the Function applied again inside jvp must not
        out_tangents = cls.jvp(ctx, *tangents)     # see this level's tangent (it would call this jvp again)
        out_tangents = (out_tangents,) if not isinstance(out_tangents, tuple) else out_tangents
        if len(out_tangents) != len(outputs):
            raise RuntimeError(f"{cls.__name__}.jvp returned {len(out_tangents)} tangents for {len(outputs)} "
                               "outputs; return one per output (None for none).")
        for o, t in zip(outputs, out_tangents):
            if isinstance(o, _C.Tensor) and _differentiable_dtype(o):
                if t is not None and tuple(t.shape) != tuple(o.shape):
                    raise RuntimeError(f"{cls.__name__}.jvp returned a tangent of shape {tuple(t.shape)} for an "
                                       f"output of shape {tuple(o.shape)}.")
                _C._set_tangent(o, level, t)


class once_differentiable:
    """Decorator kept for torch compatibility: runs backward with grad mode off."""

    def __new__(cls, fn):
        @functools.wraps(fn)
        def wrapper(ctx, *grads):
            with no_grad():
                return fn(ctx, *grads)
        return wrapper
