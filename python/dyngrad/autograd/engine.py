"""torch's signatures over the engine's backward (_C._run_backward): backward, grad and _queue_callback. The engine's
core does the work; this module only checks and normalises the arguments."""
from .. import _C


def _tensors(tensors, what, op):
    if isinstance(tensors, _C.Tensor):
        return (tensors,)
    if tensors is None:
        return None
    tensors = tuple(tensors)
    for i, t in enumerate(tensors):
        if not isinstance(t, _C.Tensor):
            raise TypeError(f"{op}: expected tensors as {what}, got {type(t).__name__} at position {i}.")
    return tensors


def _gradients(grads, outputs, op):
    """One gradient (or None: ones for a scalar output) per output."""
    if grads is None or isinstance(grads, _C.Tensor):
        grads = (grads,) * len(outputs) if grads is None else (grads,)
    grads = tuple(grads)
    if len(grads) != len(outputs):
        raise RuntimeError(f"{op}: got {len(grads)} gradients for {len(outputs)} outputs; they must match.")
    for i, g in enumerate(grads):
        if g is not None and not isinstance(g, _C.Tensor):
            raise TypeError(f"{op}: expected a Tensor or None as the gradient of output {i}, got {type(g).__name__}.")
    return grads


def backward(tensors, grad_tensors=None, retain_graph=None, create_graph=False, grad_variables=None, inputs=None):
    """Accumulates the gradients of `tensors` into the leaves' .grad (only into `inputs`, if given)."""
    outputs = _tensors(tensors, "tensors", "backward")
    grads = _gradients(grad_tensors if grad_tensors is not None else grad_variables, outputs, "backward")
    inputs = _tensors(inputs, "inputs", "backward")
    if inputs is not None and not inputs:
        raise RuntimeError("backward: the inputs argument was given but is empty; pass None to accumulate into "
                           "every leaf.")
    retain = create_graph if retain_graph is None else bool(retain_graph)
    _C._run_backward(outputs, grads, inputs, retain, bool(create_graph), True, False)


def grad(outputs, inputs, grad_outputs=None, retain_graph=None, create_graph=False, only_inputs=True,
         allow_unused=None, is_grads_batched=False, materialize_grads=False):
    """The gradients of `outputs` with respect to `inputs`, as a tuple; .grad is left untouched."""
    if is_grads_batched:
        raise NotImplementedError("grad: is_grads_batched=True is not supported.")
    outputs = _tensors(outputs, "outputs", "grad")
    inputs = _tensors(inputs, "inputs", "grad")
    grads = _gradients(grad_outputs, outputs, "grad")
    for i, t in enumerate(inputs):
        if not t.requires_grad:
            raise RuntimeError(f"grad: input {i} does not require grad, so no gradient can be computed for it; set "
                               "requires_grad=True on it.")
    retain = create_graph if retain_graph is None else bool(retain_graph)
    result = _C._run_backward(outputs, grads, inputs, retain, bool(create_graph), False,
                              bool(allow_unused) or bool(materialize_grads))
    if materialize_grads:
        result = tuple(g if g is not None else _C.full(tuple(t.shape), 0, t.dtype) for g, t in zip(result, inputs))
    return result


def _queue_callback(callback):
    """Runs callback() when the backward pass now running ends, before backward() returns (torch's
    Variable._execution_engine.queue_callback); call it from a hook. Note [Final callbacks] in csrc/dyngrad/engine.h."""
    _C._queue_callback(callback)
