"""Differentiable collectives (torch.distributed.nn.functional): they return a new tensor and record a node whose
backward runs the adjoint collective, so a loss that depends on values from every rank backpropagates into each
rank's inputs. Every rank must then run backward through the same collectives in the same order (as every rank
runs the same forward)."""
from ...autograd.function import Function, once_differentiable
from .. import collectives as _dist
from ..collectives import ReduceOp


class _AllReduce(Function):
    """y = x_1 + ... + x_W on every rank (or their mean, for AVG). Summed over the ranks' losses, the objective
    depends on x_r through every rank's copy of y: d(sum_k L_k)/d x_r = sum_k dL_k/dy (times 1/W for AVG), which
    is the same all-reduce applied to the gradients."""

    @staticmethod
    def forward(ctx, x, op, group):
        ctx.op, ctx.group = op, group
        y = x.detach().clone()
        _dist.all_reduce(y, op=op, group=group)
        return y

    @staticmethod
    def _reduced(ctx, t):
        out = t.detach().clone()
        _dist.all_reduce(out, op=ctx.op, group=ctx.group)
        return out

    @staticmethod
    @once_differentiable
    def backward(ctx, grad):
        return _AllReduce._reduced(ctx, grad), None, None

    # linear: y's tangent is the same all-reduce of the ranks' tangents (every rank must run forward AD alike, as
    # every rank runs backward)
    @staticmethod
    def jvp(ctx, tangent, op, group):
        return _AllReduce._reduced(ctx, tangent)


def all_reduce(tensor, op=ReduceOp.SUM, group=None):
    """The all-reduce of `tensor` as a new tensor, differentiable (SUM and AVG; the input is left as it is)."""
    if op not in (ReduceOp.SUM, ReduceOp.AVG):
        raise ValueError(f"distributed.nn.functional.all_reduce: only SUM and AVG are differentiable here, got {op}")
    return _AllReduce.apply(tensor, op, group)
