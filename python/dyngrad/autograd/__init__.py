"""dyngrad.autograd for the C++ engine: grad, backward, Function, grad modes, gradcheck."""
from .. import _C
from .grad_mode import no_grad, enable_grad, set_grad_enabled, is_grad_enabled, inference_mode  # noqa: F401
from .function import Function, FunctionCtx  # noqa: F401


def backward(tensors, grad_tensors=None, retain_graph=None, create_graph=False):
    """Accumulates the gradients of `tensors` into the leaves' .grad."""
    _C._run_backward(tensors, grad_tensors, retain_graph, create_graph)


def grad(outputs, inputs, grad_outputs=None, retain_graph=None, create_graph=False, allow_unused=False):
    """The gradients of `outputs` with respect to `inputs`, as a tuple; .grad is left untouched."""
    single = isinstance(inputs, _C.Tensor)
    return _C._grad(outputs, [inputs] if single else list(inputs), grad_outputs, retain_graph, create_graph,
                    allow_unused)


def _queue_callback(callback):
    """Runs callback() when the backward pass now running ends, before backward() returns (torch's
    Variable._execution_engine.queue_callback); call it from a hook. Note [Final callbacks] in csrc/dyngrad/engine.h."""
    _C._queue_callback(callback)


from .gradcheck import gradcheck, gradgradcheck  # noqa: E402,F401
from .anomaly import detect_anomaly, set_detect_anomaly, is_anomaly_enabled, set_record_call_sites, is_recording_call_sites  # noqa: E402,F401,E501
from .graph import graph_stats, set_graph_growth_warning, GraphGrowthWarning  # noqa: E402,F401
