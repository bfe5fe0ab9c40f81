"""Module hooks: RemovableHandle (torch.utils.hooks.RemovableHandle) and the machinery of full backward hooks.

A module's full backward hooks see the gradients with respect to the module's inputs and outputs, however many ops
its forward runs. As in torch, the inputs and the outputs of the call each pass through an identity Function,
BackwardHookFunction (its node shows as BackwardHookFunctionBackward): the outputs' node receives grad_output first
(and runs the backward pre-hooks), the inputs' node then receives grad_input and runs the hooks.
"""
import weakref
from collections import OrderedDict

from .. import Tensor, _C, is_grad_enabled
from .._user_frame import warn
from ..autograd.function import Function, _jvp_input_has_tangent


class RemovableHandle:
    """Returned by the register_*_hook methods: remove() unregisters the hook (also as a context manager)."""

    next_id = 0

    def __init__(self, hooks_dict, *, extra_dict=None):
        self.hooks_dict_ref = weakref.ref(hooks_dict)
        self.id = RemovableHandle.next_id
        RemovableHandle.next_id += 1
        extras = extra_dict if isinstance(extra_dict, (list, tuple)) else [] if extra_dict is None else [extra_dict]
        self.extra_dict_ref = tuple(weakref.ref(d) for d in extras)

    def remove(self):
        for ref in (self.hooks_dict_ref,) + self.extra_dict_ref:
            d = ref()
            if d is not None and self.id in d:
                del d[self.id]

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.remove()


class HookDict(OrderedDict):
    """An OrderedDict that can be weakly referenced (by RemovableHandle)."""


class BackwardHookFunction(Function):
    """The identity on the tensors of a module call, whose backward runs the module's backward hooks."""

    @staticmethod
    def forward(ctx, hook, stage, *tensors):
        ctx.hook, ctx.stage = hook, stage
        ctx.requires = tuple(t.requires_grad for t in tensors)
        if _C._current_dual_level() >= 0:
            ctx.tensors = tensors
        ctx.mark_non_differentiable(*[t for t in tensors if not t.requires_grad])
        return tensors

    @staticmethod
    def backward(ctx, *grads):
        if ctx.stage == "output":            # an output that needs no gradient shows None (torch's grad_output)
            grads = ctx.hook.on_grad_outputs(tuple(g if r else None for g, r in zip(grads, ctx.requires)))
        else:                                 # an input that needs none shows zeros (torch's grad_input)
            grads = ctx.hook.on_grad_inputs(grads)
        return (None, None) + tuple(grads)

    @staticmethod
    def jvp(ctx, hook, stage, *tangents):
        """The identity's: each tensor's tangent passes through unchanged (none where it had none)."""
        return tuple(t if _jvp_input_has_tangent(ctx, a) else None for a, t in zip(ctx.tensors, tangents))


class BackwardHook:
    """One module call's backward hooks: hook(module, grad_input, grad_output) and pre_hook(module, grad_output),
    with a None for each argument (output) that is not a tensor."""

    def __init__(self, module, hooks, pre_hooks):
        self.module, self.hooks, self.pre_hooks = module, hooks, pre_hooks
        self.grad_outputs = None
        self.n_inputs = self.n_outputs = 0
        self.input_index = self.output_index = None

    @staticmethod
    def _wrap(hook, stage, args):
        """args with their tensors passed through BackwardHookFunction; (args, tensor positions or None)."""
        index = [i for i, a in enumerate(args) if isinstance(a, Tensor)]
        if not index or not is_grad_enabled() or not any(args[i].requires_grad for i in index):
            return args, None
        wrapped = BackwardHookFunction.apply(hook, stage, *[args[i] for i in index])
        out = list(args)
        for i, t in zip(index, wrapped):
            out[i] = t
        return tuple(out), index

    @staticmethod
    def _pack(index, values, size):
        out = [None] * size
        for i, v in zip(index or [], values):
            out[i] = v
        return tuple(out)

    def setup_input_hook(self, args):
        self.n_inputs = len(args)
        args, self.input_index = self._wrap(self, "input", args)
        return args

    def setup_output_hook(self, result):
        single = not isinstance(result, tuple)
        outputs = (result,) if single else result
        self.n_outputs = len(outputs)
        outputs, self.output_index = self._wrap(self, "output", outputs)
        return outputs[0] if single else outputs

    def on_grad_outputs(self, grads):
        self.grad_outputs = self._pack(self.output_index, grads, self.n_outputs)
        for pre_hook in self.pre_hooks:
            new = pre_hook(self.module, self.grad_outputs)
            if new is None:
                continue
            new = new if isinstance(new, tuple) else (new,)
            if len(new) != len(self.grad_outputs):
                raise RuntimeError(f"Backward pre hook returned an invalid number of grad_output, got {len(new)}, "
                                   f"but expected {len(self.grad_outputs)}")
            self.grad_outputs = new
        local = self.grad_outputs
        if self.input_index is None:          # no input requires grad: the hooks run now, with grad_input None
            if self.hooks:
                warn("Full backward hook is firing when gradients are computed with respect to module "
                     "outputs since no inputs require gradients.", UserWarning)
            grad_inputs = (None,) * self.n_inputs
            for hook in self.hooks:
                res = hook(self.module, grad_inputs, self.grad_outputs)
                if res is not None and not (isinstance(res, tuple) and all(r is None for r in res)):
                    raise RuntimeError("Backward hook for Modules where no input requires gradient should always "
                                       "return None or None for all gradients.")
            self.grad_outputs = None
        return tuple(local[i] for i in self.output_index)

    def on_grad_inputs(self, grads):
        if self.grad_outputs is None:         # the gradient did not come through the outputs (autograd.grad)
            return grads
        res = self._pack(self.input_index, grads, self.n_inputs)
        for hook in self.hooks:
            out = hook(self.module, res, self.grad_outputs)
            if out is None:
                continue
            out = out if isinstance(out, tuple) else (out,)
            if len(out) != len(res):
                raise RuntimeError(f"Backward hook returned an invalid number of grad_input, got {len(out)}, but "
                                   f"expected {len(res)}")
            res = out
        self.grad_outputs = None
        return tuple(res[i] for i in self.input_index)
