"""Identity, Linear, Bilinear and LazyLinear, and NonDynamicallyQuantizableLinear (a Linear, as torch's)."""
import math

from ... import empty
from ..._api.device import check_device
from .. import functional as F, init
from ..parameter import Parameter
from .lazy import LazyModuleMixin
from .module import LAYER_ERRORS, Module, layer_error

__all__ = ["Identity", "Linear", "Bilinear", "LazyLinear"]     # as torch: NonDynamicallyQuantizableLinear only here


class Identity(Module):
    """Returns its input (arguments are accepted and ignored, as torch)."""

    def __init__(self, *args, **kwargs):
        super().__init__()

    def forward(self, input):
        return input


class Linear(Module):
    """y = x @ weight.T + bias, with weight of shape (out_features, in_features) as in torch."""

    def __init__(self, in_features, out_features, bias=True, device=None, dtype=None):
        super().__init__()
        check_device(device, "Linear")
        self.in_features, self.out_features = in_features, out_features
        self.weight = Parameter(empty(out_features, in_features, dtype=dtype))
        if bias:
            self.bias = Parameter(empty(out_features, dtype=dtype))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self):
        # torch's default: kaiming_uniform_(a=sqrt(5)) for the weight, U(-1/sqrt(fan_in), 1/sqrt(fan_in)) for bias
        init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            bound = 1 / math.sqrt(self.in_features) if self.in_features > 0 else 0
            init.uniform_(self.bias, -bound, bound)

    def forward(self, x):
        try:
            return F.linear(x, self.weight, self.bias)
        except LAYER_ERRORS as err:
            raise layer_error(self, err) from None

    def extra_repr(self):
        return f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}"


class NonDynamicallyQuantizableLinear(Linear):
    """MultiheadAttention's out_proj: a Linear under torch's class name (its repr shows that name)."""


class Bilinear(Module):
    """y_o = x1^T weight[o] x2 + bias[o]: weight (out_features, in1_features, in2_features), bias (out_features,);
    both initialised from U(-1/sqrt(in1_features), 1/sqrt(in1_features)), as torch."""

    def __init__(self, in1_features, in2_features, out_features, bias=True, device=None, dtype=None):
        super().__init__()
        check_device(device, "Bilinear")
        self.in1_features, self.in2_features, self.out_features = in1_features, in2_features, out_features
        self.weight = Parameter(empty(out_features, in1_features, in2_features, dtype=dtype))
        if bias:
            self.bias = Parameter(empty(out_features, dtype=dtype))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self):
        bound = 1 / math.sqrt(self.weight.shape[1]) if self.weight.shape[1] > 0 else 0
        init.uniform_(self.weight, -bound, bound)
        if self.bias is not None:
            init.uniform_(self.bias, -bound, bound)

    def forward(self, input1, input2):
        try:
            return F.bilinear(input1, input2, self.weight, self.bias)
        except LAYER_ERRORS as err:
            raise layer_error(self, err) from None

    def extra_repr(self):
        return (f"in1_features={self.in1_features}, in2_features={self.in2_features}, "
                f"out_features={self.out_features}, bias={self.bias is not None}")


class LazyLinear(LazyModuleMixin, Linear):
    """A Linear whose in_features is read from the last dim of its first input (nn/modules/lazy.py); it becomes a Linear
    then, as torch's."""
    cls_to_become = Linear
    _lazy_tensors = ("weight",)
    _size_attr, _size_dim = "in_features", 1

    def __init__(self, out_features, bias=True, device=None, dtype=None):
        super().__init__(0, out_features, bias, device, dtype)

    def reset_parameters(self):
        if not self.has_uninitialized_params():
            super().reset_parameters()

    def initialize_parameters(self, input):
        if input.dim() < 1:
            raise RuntimeError("LazyLinear: expected an input with at least 1 dimension, got a 0-d tensor.")
        self._materialize({"weight": (self.out_features, input.shape[-1])})
        self.reset_parameters()
