"""Reference engine: dyngrad.reference.autograd (grad, backward, Function, grad modes, gradcheck).

gradcheck.py is shared with the C++ engine: it lives in python/dyngrad/autograd/ and is found through this
package's __path__, so that `from .. import` there gives this engine's root.
"""
import os as _os

from .. import errors as _errors
from ..engine import run_backward as _run_backward, queue_callback as _queue_callback  # noqa: F401
from ..grad_mode import no_grad, enable_grad, set_grad_enabled, is_grad_enabled
from ..tensor import Tensor as _Tensor, make_tensor as _make_tensor
from .function import Function, FunctionCtx, once_differentiable

__path__.append(_os.path.join(_os.path.dirname(_os.path.dirname(_os.path.dirname(_os.path.abspath(__file__)))),
                              "autograd"))


def _as_tuple(tensors, what):
    if isinstance(tensors, _Tensor):
        return (tensors,)
    tensors = tuple(tensors)
    for i, t in enumerate(tensors):
        if not isinstance(t, _Tensor):
            raise TypeError(f"{what}: expected tensors, got {type(t).__name__} at position {i}.")
    return tensors


def _make_grads(outputs, grads, op):
    """The initial gradient of each output: ones for a scalar when none is given."""
    import numpy as np
    if grads is None or isinstance(grads, _Tensor):
        grads = (grads,) * len(outputs) if grads is None else (grads,)
    grads = tuple(grads)
    if len(grads) != len(outputs):
        raise RuntimeError(f"{op}: got {len(grads)} gradients for {len(outputs)} outputs; they must match.")
    result = []
    for i, (out, g) in enumerate(zip(outputs, grads)):
        if g is None:
            if not out.requires_grad:
                raise RuntimeError(_errors.ERR_NO_GRAD_FN)
            if out.numel() != 1:
                raise RuntimeError(_errors.ERR_NONSCALAR_BACKWARD.format(shape=_errors.shape_str(out.shape)))
            g = _make_tensor(np.ones(out.shape, dtype=out._data.dtype))
        else:
            if not isinstance(g, _Tensor):
                g = _make_tensor(np.asarray(g, dtype=out._data.dtype))
            if g.shape != out.shape:
                raise RuntimeError(f"{op}: the gradient for output {i} has shape {_errors.shape_str(g.shape)}, "
                                   f"but the output has shape {_errors.shape_str(out.shape)}; they must match.")
            if g.dtype is not out.dtype:
                g = g.to(out.dtype)
        result.append(g)
    return tuple(result)


def backward(tensors, grad_tensors=None, retain_graph=None, create_graph=False, inputs=None, grad_variables=None):
    """Accumulate the gradients of `tensors` into the .grad of the leaves (only those in `inputs` if given)."""
    tensors = _as_tuple(tensors, "backward")
    grads = _make_grads(tensors, grad_tensors if grad_tensors is not None else grad_variables, "backward")
    if retain_graph is None:
        retain_graph = create_graph
    if inputs is not None:
        inputs = _as_tuple(inputs, "backward")
        if not inputs:
            raise RuntimeError("backward: the inputs argument was given but is empty.")
    _run_backward(tensors, grads, retain_graph=retain_graph, create_graph=create_graph, inputs=inputs,
                  accumulate=True)


def grad(outputs, inputs, grad_outputs=None, retain_graph=None, create_graph=False, allow_unused=None,
         is_grads_batched=False, materialize_grads=False):
    """The gradients of `outputs` with respect to `inputs`, returned (not accumulated into .grad)."""
    outputs = _as_tuple(outputs, "grad")
    single_input = isinstance(inputs, _Tensor)
    inputs = _as_tuple(inputs, "grad")
    grads = _make_grads(outputs, grad_outputs, "grad")
    if retain_graph is None:
        retain_graph = create_graph
    result = _run_backward(outputs, grads, retain_graph=retain_graph, create_graph=create_graph, inputs=inputs,
                           accumulate=False, allow_unused=bool(allow_unused) or materialize_grads)
    if materialize_grads:
        import numpy as np
        result = tuple(g if g is not None else _make_tensor(np.zeros(t.shape, t._data.dtype))
                       for g, t in zip(result, inputs))
    return result


from . import gradcheck as _gradcheck_module  # noqa: E402
from .gradcheck import gradcheck, gradgradcheck  # noqa: E402
from .anomaly import detect_anomaly, set_detect_anomaly, is_anomaly_enabled, set_record_call_sites, is_recording_call_sites  # noqa: E402,F401,E501
from .graph import graph_stats, set_graph_growth_warning, GraphGrowthWarning  # noqa: E402,F401

__all__ = ["grad", "backward", "Function", "FunctionCtx", "once_differentiable", "no_grad", "enable_grad",
           "set_grad_enabled", "is_grad_enabled", "gradcheck", "gradgradcheck"]
