"""Reference engine: custom differentiable functions (torch.autograd.Function). Mirrors the FunctionNode of
csrc/dyngrad/node.h, which calls back into Python in the C++ engine."""
import weakref

from .. import debug, errors
from ..grad_mode import is_grad_enabled, no_grad
from ..node import Node, SavedTensor, gradient_edge, fit_gradient
from ..tensor import Tensor, make_tensor


class FunctionCtx:
    """The `ctx` passed to forward and backward: save_for_backward / saved_tensors, needs_input_grad,
    mark_non_differentiable, set_materialize_grads; any other attribute can be stored on it too."""

    def __init__(self):
        self.needs_input_grad = ()
        self._to_save = None
        self._saved = None
        self._node = None
        self._released = False
        self._non_differentiable = ()
        self._dirty = ()
        self.materialize_grads = True

    def save_for_backward(self, *tensors):
        for t in tensors:
            if t is not None and not isinstance(t, Tensor):
                raise TypeError(f"save_for_backward: can only save tensors (or None), got {type(t).__name__}; "
                                "store other values as attributes of ctx.")
        self._to_save = tensors

    @property
    def saved_tensors(self):
        node = self._node() if self._node is not None else None
        if self._released:
            raise RuntimeError(errors.ERR_BACKWARD_TWICE.format(node=node.name() if node else "a custom Function")
                               + (debug.created_at(node) if node else ""))
        if self._saved is None:
            return tuple(self._to_save or ())
        return tuple(s.unpack(node) if s is not None else None for s in self._saved)

    def mark_non_differentiable(self, *tensors):
        self._non_differentiable = tuple(tensors)

    def mark_dirty(self, *tensors):
        self._dirty = tuple(tensors)

    def set_materialize_grads(self, value):
        self.materialize_grads = bool(value)


class FunctionNode(Node):
    """The grad_fn of a custom Function's outputs: runs `cls.backward(ctx, *grads)`."""

    __slots__ = ("fn_cls", "ctx", "input_meta", "output_meta", "num_outputs")

    def __init__(self, fn_cls, ctx, args):
        super().__init__(tuple(gradient_edge(a) if isinstance(a, Tensor) and a.requires_grad else None for a in args))
        self.fn_cls = fn_cls
        self.ctx = ctx
        self.input_meta = tuple((a._data.shape, a._data.dtype) if isinstance(a, Tensor) else None for a in args)
        self.output_meta = ()
        self.num_outputs = 1
        if debug.active:
            debug.note_node_created(self)

    def name(self):
        return self.fn_cls.__name__ + "Backward"

    @property
    def released(self):
        return self.ctx._released

    @property
    def input_metadata(self):
        from ..dtypes import from_numpy_dtype
        from ..tensor import Size
        return [(Size(m[0]), from_numpy_dtype(m[1])) for m in self.input_meta if m is not None]

    def _saved_list(self):
        return tuple(self.ctx._saved or ())

    def release_saved(self):
        if self.ctx._saved is not None or self.ctx._to_save:
            self.ctx._saved = None
            self.ctx._to_save = None
            self.ctx._released = True

    def apply(self, grads):
        grads = list(grads)
        if self.ctx.materialize_grads:
            for i, g in enumerate(grads):
                if g is None and self.output_meta[i] is not None:
                    shape, np_dtype = self.output_meta[i]
                    import numpy as np
                    grads[i] = make_tensor(np.zeros(shape, dtype=np_dtype))
        result = self.fn_cls.backward(self.ctx, *grads)
        if not isinstance(result, tuple):
            result = (result,)
        n_inputs = len(self.next_edges)
        if len(result) > n_inputs and all(r is None for r in result[n_inputs:]):
            result = result[:n_inputs]
        if len(result) != n_inputs:
            raise RuntimeError(f"{self.fn_cls.__name__}.backward returned {len(result)} gradient"
                               f"{'s' if len(result) != 1 else ''}, but forward had {n_inputs} input"
                               f"{'s' if n_inputs != 1 else ''}.")
        out = []
        for i, g in enumerate(result):
            if g is None or self.next_edges[i] is None:
                out.append(None)
                continue
            if not isinstance(g, Tensor):
                raise TypeError(f"{self.fn_cls.__name__}.backward returned a {type(g).__name__} as gradient {i}; "
                                "expected a Tensor or None.")
            out.append(fit_gradient(g, self.input_meta[i], self.name(), i))
        return tuple(out)


class Function:
    """Subclass with static `forward(ctx, *args)` and `backward(ctx, *grads)`; call `MyFunc.apply(*args)`."""

    @staticmethod
    def forward(ctx, *args, **kwargs):
        raise NotImplementedError("Function.forward must be overridden in a subclass.")

    @staticmethod
    def backward(ctx, *grads):
        raise NotImplementedError("Function.backward must be overridden in a subclass.")

    @classmethod
    def apply(cls, *args, **kwargs):
        ctx = FunctionCtx()
        ctx.needs_input_grad = tuple(isinstance(a, Tensor) and a.requires_grad for a in args)
        recording = is_grad_enabled() and any(ctx.needs_input_grad)
        with no_grad():
            outputs = cls.forward(ctx, *args, **kwargs)
        single = not isinstance(outputs, tuple)
        outs = (outputs,) if single else tuple(outputs)
        if not recording:
            return outputs
        node = FunctionNode(cls, ctx, args)
        ctx._node = weakref.ref(node)
        node.num_outputs = len(outs)
        non_diff = {id(t) for t in ctx._non_differentiable}
        final, meta = [], []
        for i, o in enumerate(outs):
            if not isinstance(o, Tensor):
                final.append(o)
                meta.append(None)
                continue
            is_non_diff = id(o) in non_diff
            if any(o is a for a in args) or o.grad_fn is not None or o._requires_grad:
                o = make_tensor(o._data, o._storage)          # an input returned as is: give it its own identity
            if not is_non_diff and o.is_floating_point():
                o.grad_fn = node
                o.output_nr = i
            final.append(o)
            meta.append((o._data.shape, o._data.dtype))
        node.output_meta = tuple(meta)
        if ctx._to_save is not None:
            saved = []
            for t in ctx._to_save:
                if t is None:
                    saved.append(None)
                    continue
                position = next((i for i, o in enumerate(outs) if o is t), None)
                if position is not None and final[position].grad_fn is node:
                    saved.append(SavedTensor(final[position], is_output=True))
                else:
                    saved.append(SavedTensor(t))
            ctx._saved = saved
        return final[0] if single else tuple(final)


class once_differentiable:
    """Decorator kept for torch compatibility: runs backward with grad mode off."""

    def __new__(cls, fn):
        import functools

        @functools.wraps(fn)
        def wrapper(ctx, *grads):
            with no_grad():
                return fn(ctx, *grads)
        return wrapper
