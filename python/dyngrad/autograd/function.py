"""Custom differentiable functions written in Python (torch.autograd.Function); the C++ engine calls back into
their backward."""
from .. import _C
from .grad_mode import no_grad
from ..reference.errors import ERR_BACKWARD_TWICE, ERR_SAVED_MODIFIED


class FunctionCtx:
    """The `ctx` of forward/backward: saved tensors (version-checked), needs_input_grad, free attributes."""

    def __init__(self, name):
        self._name = name
        self._saved = None
        self._released = False
        self.needs_input_grad = ()
        self._non_differentiable = []
        self._call_site = None  # (file, line, function) of the node, for the errors below (Note [Call sites])

    def save_for_backward(self, *tensors):
        self._saved = [(t, t._version if t is not None else 0) for t in tensors]

    @property
    def saved_tensors(self):
        if self._released:
            raise RuntimeError(ERR_BACKWARD_TWICE.format(node=self._name) + self._created_at())
        out = []
        for t, version in self._saved or []:
            if t is not None and t._version != version:
                raise RuntimeError(ERR_SAVED_MODIFIED.format(shape=tuple(t.shape), node=self._name,
                                                             now=t._version, saved=version) + self._created_at())
            out.append(t)
        return tuple(out)

    def _created_at(self):
        site = self._call_site
        return f" ({self._name} was created at {site[0]}:{site[1]})" if site is not None else ""

    def mark_non_differentiable(self, *tensors):
        self._non_differentiable.extend(tensors)

    def set_materialize_grads(self, value):
        pass  # missing gradients are always materialised as zeros

    def _release(self):
        self._released = True
        self._saved = None


class Function:
    """Subclass with static forward(ctx, *args) and backward(ctx, *grads); call with .apply(*args)."""

    @staticmethod
    def forward(ctx, *args, **kwargs):
        raise NotImplementedError("a Function subclass must define forward(ctx, ...)")

    @staticmethod
    def backward(ctx, *grads):
        raise NotImplementedError("a Function subclass must define backward(ctx, ...)")

    @classmethod
    def apply(cls, *args):
        name = cls.__name__ + "Backward"
        ctx = FunctionCtx(name)
        ctx.needs_input_grad = tuple(isinstance(a, _C.Tensor) and a.requires_grad for a in args)
        with no_grad():
            result = cls.forward(ctx, *args)
        single = not isinstance(result, tuple)
        outputs = (result,) if single else result
        # an input returned as is becomes a new tensor object, so the input keeps its own history
        outputs = tuple(o.detach() if any(o is a for a in args) else o for o in outputs)
        if _C.is_grad_enabled() and any(ctx.needs_input_grad):
            node = _C._record_function(ctx, cls.backward, name, list(args), list(outputs), ctx._non_differentiable)
            ctx._call_site = node.call_site
        return outputs[0] if single else outputs
