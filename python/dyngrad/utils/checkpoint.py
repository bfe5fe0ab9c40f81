"""dyngrad.utils.checkpoint, for both engines: trade compute for memory by recomputing a block's activations in
backward instead of keeping them (torch.utils.checkpoint).

Note [Checkpointing by saved-tensor hooks] (use_reentrant=False, the recommended mode): the block runs once normally, so
its graph is recorded as usual and gradients flow to every tensor it used (inputs and parameters alike), but
inside it a saved_tensors_hooks pair (Note [Saved tensor hooks], csrc/dyngrad/node.h) replaces each tensor a
node saves by its position in the order of saving, and drops the tensor. The first time backward unpacks one of
them, the block is run again, on detached copies of its inputs with the RNG state of the first run restored, under
a hook that keeps each saved tensor in a list; since the ops run in the same order, position k of the rerun is the
tensor that position k stood for. A define-by-run engine makes this natural: the rerun is just another call.
With create_graph, the core gives each unpacked tensor the original's history back, so double backward through a
checkpointed block is right too.

use_reentrant=True: the block is one custom Function whose forward runs it without recording, and whose backward
reruns it with recording and backpropagates through the rerun. Gradients reach the parameters the block uses by
accumulation into .grad (so autograd.grad cannot ask for them), and at least one input must require grad: torch's
reentrant rules.
"""
import contextlib

from .. import _C, Tensor
from .._user_frame import warn
from ..autograd import Function, backward as _backward
from ..autograd.graph import saved_tensors_hooks
from ..autograd.grad_mode import enable_grad, no_grad

__all__ = ["checkpoint", "checkpoint_sequential", "CheckpointError"]


class CheckpointError(RuntimeError):
    """The recomputation in backward did not save the same tensors as the first run (the block is not
    deterministic in the ops it runs), so the saved tensors cannot be matched up."""


def noop_context_fn():
    return contextlib.nullcontext(), contextlib.nullcontext()


def _detach_inputs(args):
    out = []
    for a in args:
        if isinstance(a, Tensor):
            d = a.detach()
            d.requires_grad_(a.requires_grad)
            out.append(d)
        else:
            out.append(a)
    return out


class _Recompute:
    """The state shared by the hooks of one checkpointed call (Note [Checkpointing by saved-tensor hooks])."""

    def __init__(self, function, args, kwargs, rng_state, determinism_check, context):
        self.function = function
        self.context = context
        self.args = args
        self.kwargs = kwargs
        self.rng_state = rng_state
        self.check = determinism_check != "none"
        self.count = 0        # tensors saved by the first run
        self.saved = None     # the rerun's, by position

    def pack(self, t):
        k = self.count
        self.count += 1
        return k

    def unpack(self, k):
        if self.saved is None:
            self.rerun()
        if k >= len(self.saved):
            raise CheckpointError(f"checkpoint: the recomputation in backward saved {len(self.saved)} tensors but "
                                  f"the first run saved {self.count}: the checkpointed function must run the same "
                                  "ops when run again.")
        return self.saved[k]

    def rerun(self):
        saved = []

        def keep(t):
            saved.append(t)
            return t

        state = _C._get_rng_state() if self.rng_state is not None else None
        try:
            if self.rng_state is not None:
                _C._set_rng_state(self.rng_state)
            with self.context, saved_tensors_hooks(keep, lambda t: t), enable_grad():
                self.function(*_detach_inputs(self.args), **self.kwargs)
        finally:
            if state is not None:
                _C._set_rng_state(state)
        if self.check and len(saved) != self.count:
            raise CheckpointError(f"checkpoint: the recomputation in backward saved {len(saved)} tensors but the "
                                  f"first run saved {self.count}: the checkpointed function must run the same ops "
                                  "when run again (pass determinism_check='none' to skip this check).")
        self.saved = saved


class _ReentrantCheckpoint(Function):
    @staticmethod
    def forward(ctx, function, preserve_rng_state, *args):
        ctx.function = function
        ctx.rng_state = _C._get_rng_state() if preserve_rng_state else None
        ctx.tensor_positions = [i for i, a in enumerate(args) if isinstance(a, Tensor)]
        ctx.args = list(args)
        ctx.save_for_backward(*[args[i] for i in ctx.tensor_positions])
        with no_grad():
            return function(*args)

    @staticmethod
    def backward(ctx, *grads):
        args = list(ctx.args)
        for i, t in zip(ctx.tensor_positions, ctx.saved_tensors):
            args[i] = t
        inputs = _detach_inputs(args)
        state = _C._get_rng_state() if ctx.rng_state is not None else None
        try:
            if ctx.rng_state is not None:
                _C._set_rng_state(ctx.rng_state)
            with enable_grad():
                outputs = ctx.function(*inputs)
        finally:
            if state is not None:
                _C._set_rng_state(state)
        if isinstance(outputs, Tensor):
            outputs = (outputs,)
        pairs = [(o, g) for o, g in zip(outputs, grads)
                 if isinstance(o, Tensor) and o.requires_grad and g is not None]
        if not pairs:
            raise RuntimeError("checkpoint: none of the outputs of the checkpointed function requires grad, so "
                               "there is nothing to backpropagate.")
        _backward([o for o, _ in pairs], [g for _, g in pairs])
        return (None, None) + tuple(inp.grad if isinstance(inp, Tensor) else None for inp in inputs)


def checkpoint(function, *args, use_reentrant=None, context_fn=noop_context_fn, determinism_check="default",
               debug=False, early_stop=True, preserve_rng_state=True, **kwargs):
    """function(*args, **kwargs), keeping none of the tensors its ops save for backward: they are recomputed by
    running `function` again during backward. Same values and gradients as calling it directly.

    use_reentrant: False (recommended) records the graph normally and recomputes only the saved tensors (Note
    [Checkpointing by saved-tensor hooks]); True uses a custom Function (torch's older mode: at least one input
    must require grad; keyword arguments are not allowed). Not given, it warns and means True, as in torch 2.13. preserve_rng_state: the rerun sees the
    random numbers of the first run (dropout masks agree). context_fn: returns two context managers, the first
    entered around the first run and the second around the recomputation. determinism_check: 'default' checks
    that the rerun saves as many tensors as the first run; 'none' skips the check. debug and early_stop are
    accepted for compatibility (early_stop has no effect: the whole block is rerun)."""
    if not callable(function):
        raise TypeError(f"checkpoint: function must be callable, got {type(function).__name__}.")
    if determinism_check not in ("default", "none"):
        raise ValueError(f"checkpoint: determinism_check must be 'default' or 'none', got {determinism_check!r}.")
    if use_reentrant is None:
        warn("checkpoint: pass use_reentrant explicitly; without it the older reentrant mode (True) is "
             "used, as in torch. use_reentrant=False is recommended: gradients reach the parameters even "
             "when no input requires grad, and keyword arguments are allowed.", UserWarning)
        use_reentrant = True
    if use_reentrant:
        if kwargs:
            raise ValueError("checkpoint: keyword arguments are only supported with use_reentrant=False, got "
                             f"{sorted(kwargs)}.")
        if context_fn is not noop_context_fn:
            raise ValueError("checkpoint: context_fn is only supported with use_reentrant=False.")
        if _C.is_grad_enabled() and not any(isinstance(a, Tensor) and a.requires_grad for a in args):
            warn("checkpoint: none of the inputs has requires_grad=True; with use_reentrant=True the "
                 "gradients of the checkpointed block will be None.", UserWarning)
        return _ReentrantCheckpoint.apply(function, bool(preserve_rng_state), *args)
    forward_context, recompute_context = context_fn()
    if not _C.is_grad_enabled():
        with forward_context:
            return function(*args, **kwargs)   # nothing is recorded, so nothing needs recomputing
    state = _Recompute(function, args, kwargs, _C._get_rng_state() if preserve_rng_state else None,
                       determinism_check, recompute_context)
    with forward_context, saved_tensors_hooks(state.pack, state.unpack):
        return function(*args, **kwargs)


def checkpoint_sequential(functions, segments, input, use_reentrant=None, **kwargs):
    """Runs `functions` (an nn.Sequential or a list of modules/functions) in order on `input`, split into
    `segments` chunks; every chunk but the last is checkpointed. Same result and gradients as running them
    directly. Keyword arguments go to checkpoint() (e.g. preserve_rng_state)."""
    if hasattr(functions, "children") and not isinstance(functions, (list, tuple)):
        functions = list(functions.children())
    functions = list(functions)
    if isinstance(segments, bool) or not isinstance(segments, int) or segments < 1:
        raise ValueError(f"checkpoint_sequential: segments must be a positive int, got {segments!r}.")
    segments = min(segments, max(len(functions), 1))
    size = len(functions) // segments

    def run(start, end):
        def forward(x):
            for fn in functions[start:end + 1]:
                x = fn(x)
            return x
        return forward

    end = -1
    for start in range(0, size * (segments - 1), size):
        end = start + size - 1
        input = checkpoint(run(start, end), input, use_reentrant=use_reentrant, **kwargs)
    return run(end + 1, len(functions) - 1)(input)
