"""The convolution layers (Conv1d/2d/3d, ConvTranspose1d/2d/3d and their Lazy variants) with torch's
arguments, parameter shapes, initialisation, state_dict names and repr."""
import math

from ... import empty
from ..._api.device import check_device
from ..._api.ops.conv import _PADDING_MODES, _pad_nonzero
from .. import functional as F, init
from ..parameter import Parameter
from .lazy import LazyModuleMixin
from .module import LAYER_ERRORS, Module, layer_error

__all__ = ["Conv1d", "Conv2d", "Conv3d", "ConvTranspose1d", "ConvTranspose2d", "ConvTranspose3d", "LazyConv1d",
           "LazyConv2d", "LazyConv3d", "LazyConvTranspose1d", "LazyConvTranspose2d", "LazyConvTranspose3d"]


def _ntuple(v, n):
    return tuple(v) if isinstance(v, (tuple, list)) else (v,) * n


def _pair(v):
    return _ntuple(v, 2)


class _ConvNd(Module):
    """What Conv1d/2d and ConvTranspose1d/2d share: torch's _ConvNd (arguments, parameters, init, repr)."""

    _n = 2

    def __init__(self, in_channels, out_channels, kernel_size, stride, padding, dilation, transposed, output_padding,
                 groups, bias, padding_mode, device=None, dtype=None):
        super().__init__()
        name = type(self).__name__
        check_device(device, name)
        if groups <= 0:
            raise ValueError(f"{name}: groups must be a positive integer, got {groups}")
        if in_channels % groups != 0:
            raise ValueError(f"{name}: in_channels must be divisible by groups ({in_channels} % {groups} != 0)")
        if out_channels % groups != 0:
            raise ValueError(f"{name}: out_channels must be divisible by groups ({out_channels} % {groups} != 0)")
        if isinstance(padding, str):
            if padding not in ("same", "valid"):
                raise ValueError(f"{name}: invalid padding string {padding!r}, should be one of {{'valid', 'same'}}")
            if padding == "same" and any(s != 1 for s in stride):
                raise ValueError(f"{name}: padding='same' is not supported for strided convolutions")
        if padding_mode not in _PADDING_MODES:
            raise ValueError(f"{name}: padding_mode must be one of {list(_PADDING_MODES)}, but got "
                             f"padding_mode='{padding_mode}'")
        self.in_channels, self.out_channels = in_channels, out_channels
        self.kernel_size, self.stride, self.padding, self.dilation = kernel_size, stride, padding, dilation
        self.transposed, self.output_padding = transposed, output_padding
        self.groups, self.padding_mode = groups, padding_mode
        # (left, right) padding of each spatial dim for the non-zero padding modes (Note [Conv padding modes])
        if isinstance(padding, str):
            self._padding_sides = [(0, 0)] * len(kernel_size)
            if padding == "same":
                self._padding_sides = [(d * (k - 1) // 2, d * (k - 1) - d * (k - 1) // 2)
                                       for d, k in zip(dilation, kernel_size)]
        else:
            self._padding_sides = [(p, p) for p in padding]
        # torch's attribute (F.pad's order: the last dim first), which some user code reads
        self._reversed_padding_repeated_twice = [v for side in reversed(self._padding_sides) for v in side]
        if transposed:
            shape = (in_channels, out_channels // groups) + tuple(kernel_size)
        else:
            shape = (out_channels, in_channels // groups) + tuple(kernel_size)
        self.weight = Parameter(empty(*shape, dtype=dtype))
        if bias:
            self.bias = Parameter(empty(out_channels, dtype=dtype))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self):
        # torch's default: kaiming_uniform with a=sqrt(5) (a bound of 1/sqrt(fan_in)), and the bias uniform in
        # the same bound
        init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            fan_in, _ = init._calculate_fan_in_and_fan_out(self.weight)
            if fan_in != 0:
                bound = 1 / math.sqrt(fan_in)
                init.uniform_(self.bias, -bound, bound)

    def extra_repr(self):
        s = f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, stride={self.stride}"
        if self.padding != (0,) * len(self.padding):
            s += f", padding={self.padding}"
        if self.dilation != (1,) * len(self.dilation):
            s += f", dilation={self.dilation}"
        if self.output_padding != (0,) * len(self.output_padding):
            s += f", output_padding={self.output_padding}"
        if self.groups != 1:
            s += f", groups={self.groups}"
        if self.bias is None:
            s += ", bias=False"
        if self.padding_mode != "zeros":
            s += f", padding_mode={self.padding_mode}"
        return s


class _Conv(_ConvNd):
    _functional = None

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1, groups=1,
                 bias=True, padding_mode="zeros", device=None, dtype=None):
        n = self._n
        super().__init__(in_channels, out_channels, _ntuple(kernel_size, n), _ntuple(stride, n),
                         padding if isinstance(padding, str) else _ntuple(padding, n), _ntuple(dilation, n), False,
                         (0,) * n, groups, bias, padding_mode, device, dtype)

    def _conv_forward(self, input, weight, bias):
        conv = getattr(F, self._functional)
        if self.padding_mode != "zeros":
            padded = _pad_nonzero(input, self._padding_sides, self.padding_mode, type(self).__name__)
            return conv(padded, weight, bias, self.stride, 0, self.dilation, self.groups)
        return conv(input, weight, bias, self.stride, self.padding, self.dilation, self.groups)

    def forward(self, input):
        try:
            return self._conv_forward(input, self.weight, self.bias)
        except LAYER_ERRORS as err:
            raise layer_error(self, err) from None


class Conv1d(_Conv):
    """1-d cross-correlation over (N, C_in, L) or (C_in, L); weight (C_out, C_in // groups, k) as in torch."""
    _n, _functional = 1, "conv1d"


class Conv2d(_Conv):
    """2-d cross-correlation over (N, C_in, H, W) or (C_in, H, W); weight (C_out, C_in // groups, kh, kw)."""
    _n, _functional = 2, "conv2d"


class Conv3d(_Conv):
    """3-d cross-correlation over (N, C_in, D, H, W) or (C_in, D, H, W); weight (C_out, C_in // groups, kd, kh, kw)."""
    _n, _functional = 3, "conv3d"


class _ConvTransposeNd(_ConvNd):
    _functional = None

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, output_padding=0, groups=1,
                 bias=True, dilation=1, padding_mode="zeros", device=None, dtype=None):
        if padding_mode != "zeros":
            raise ValueError(f'Only "zeros" padding mode is supported for {type(self).__name__}')
        n = self._n
        super().__init__(in_channels, out_channels, _ntuple(kernel_size, n), _ntuple(stride, n),
                         padding if isinstance(padding, str) else _ntuple(padding, n), _ntuple(dilation, n), True,
                         _ntuple(output_padding, n), groups, bias, padding_mode, device, dtype)

    def _output_padding(self, input, output_size, stride, padding, kernel_size, num_spatial_dims, dilation=None):
        """The output_padding that makes the output output_size (torch's rule: within stride - 1 of the
        smallest size these arguments give)."""
        if output_size is None:
            return self.output_padding
        has_batch = input.dim() == num_spatial_dims + 2
        non_spatial = 2 if has_batch else 1
        output_size = list(output_size)
        if len(output_size) == non_spatial + num_spatial_dims:
            output_size = output_size[non_spatial:]
        if len(output_size) != num_spatial_dims:
            raise ValueError(f"{type(self).__name__}: output_size must have {num_spatial_dims} or "
                             f"{non_spatial + num_spatial_dims} elements (got {len(output_size)})")
        result = []
        for d in range(num_spatial_dims):
            dil = dilation[d] if dilation is not None else 1
            smallest = ((input.size(d + non_spatial) - 1) * stride[d] - 2 * padding[d] + dil * (kernel_size[d] - 1)
                        + 1)
            largest = smallest + stride[d] - 1
            if not smallest <= output_size[d] <= largest:
                raise ValueError(f"{type(self).__name__}: requested an output size of {output_size}, but valid sizes "
                                 f"range from {smallest} to {largest} (for an input of {tuple(input.shape[2:])})")
            result.append(output_size[d] - smallest)
        return tuple(result)

    def forward(self, input, output_size=None):
        output_padding = self._output_padding(input, output_size, self.stride, self.padding, self.kernel_size,
                                              self._n, self.dilation)
        try:
            return getattr(F, self._functional)(input, self.weight, self.bias, self.stride, self.padding,
                                                output_padding, self.groups, self.dilation)
        except LAYER_ERRORS as err:
            raise layer_error(self, err) from None


class ConvTranspose1d(_ConvTransposeNd):
    """The adjoint of Conv1d: input (N, C_in, L) or (C_in, L), weight (C_in, C_out // groups, k)."""
    _n, _functional = 1, "conv_transpose1d"


class ConvTranspose2d(_ConvTransposeNd):
    """The adjoint of Conv2d: input (N, C_in, H, W) or (C_in, H, W), weight (C_in, C_out // groups, kh, kw)."""
    _n, _functional = 2, "conv_transpose2d"


class ConvTranspose3d(_ConvTransposeNd):
    """The adjoint of Conv3d: input (N, C_in, D, H, W) or (C_in, D, H, W), weight (C_in, C_out // groups, kd, kh,
    kw)."""
    _n, _functional = 3, "conv_transpose3d"


# ----- lazy variants: in_channels read from the channel dim of the first input ------------------------------------

class _LazyConvMixin(LazyModuleMixin):
    """in_channels is 0 and the weight empty until the first input (nn/modules/lazy.py); the bias's shape does not depend
    on in_channels, so it exists from the start (torch's lazy bias is also materialised as (out_channels,))."""
    _lazy_tensors = ("weight",)
    _size_attr = "in_channels"

    def reset_parameters(self):
        if not self.has_uninitialized_params():
            super().reset_parameters()

    def _materialize(self, shapes):
        super()._materialize(shapes)
        if "weight" in shapes and not self.transposed:     # weight (C_out, C_in // groups, *k)
            self.in_channels = shapes["weight"][1] * self.groups

    def initialize_parameters(self, input):
        n = self._n
        if input.dim() not in (n + 1, n + 2):
            raise RuntimeError(f"Expected {n + 1}D (unbatched) or {n + 2}D (batched) input to {type(self).__name__}, "
                               f"but got input of size: {list(input.shape)}")
        cin = input.shape[1] if input.dim() == n + 2 else input.shape[0]
        if cin % self.groups:
            raise RuntimeError(f"{type(self).__name__}: the input has {cin} channels, which is not divisible by "
                               f"groups={self.groups}.")
        k = tuple(self.kernel_size)
        if self.transposed:
            shape = (cin, self.out_channels // self.groups) + k
        else:
            shape = (self.out_channels, cin // self.groups) + k
        self._materialize({"weight": shape})
        self.in_channels = cin
        self.reset_parameters()


class _LazyConv(_LazyConvMixin):
    def __init__(self, out_channels, kernel_size, stride=1, padding=0, dilation=1, groups=1, bias=True,
                 padding_mode="zeros", device=None, dtype=None):
        super().__init__(0, out_channels, kernel_size, stride, padding, dilation, groups, bias, padding_mode, device,
                         dtype)


class _LazyConvTranspose(_LazyConvMixin):
    def __init__(self, out_channels, kernel_size, stride=1, padding=0, output_padding=0, groups=1, bias=True,
                 dilation=1, padding_mode="zeros", device=None, dtype=None):
        super().__init__(0, out_channels, kernel_size, stride, padding, output_padding, groups, bias, dilation,
                         padding_mode, device, dtype)


class LazyConv1d(_LazyConv, Conv1d):
    """A Conv1d whose in_channels is read from its first input; it becomes a Conv1d then, as torch's."""
    cls_to_become = Conv1d


class LazyConv2d(_LazyConv, Conv2d):
    """A Conv2d whose in_channels is read from its first input; it becomes a Conv2d then, as torch's."""
    cls_to_become = Conv2d


class LazyConv3d(_LazyConv, Conv3d):
    """A Conv3d whose in_channels is read from its first input; it becomes a Conv3d then, as torch's."""
    cls_to_become = Conv3d


class LazyConvTranspose1d(_LazyConvTranspose, ConvTranspose1d):
    """A ConvTranspose1d whose in_channels is read from its first input."""
    cls_to_become = ConvTranspose1d


class LazyConvTranspose2d(_LazyConvTranspose, ConvTranspose2d):
    """A ConvTranspose2d whose in_channels is read from its first input."""
    cls_to_become = ConvTranspose2d


class LazyConvTranspose3d(_LazyConvTranspose, ConvTranspose3d):
    """A ConvTranspose3d whose in_channels is read from its first input."""
    cls_to_become = ConvTranspose3d
