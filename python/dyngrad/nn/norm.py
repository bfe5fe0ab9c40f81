"""LayerNorm and BatchNorm1d."""
from .. import empty, zeros, ones, tensor, int64, no_grad
from .._api.args import check_device
from . import functional as F, init
from .module import Module
from .parameter import Parameter


class LayerNorm(Module):
    """Normalises over the last len(normalized_shape) dims, then scales by weight and shifts by bias."""

    def __init__(self, normalized_shape, eps=1e-5, elementwise_affine=True, bias=True, device=None, dtype=None):
        super().__init__()
        check_device(device, "LayerNorm")
        self.normalized_shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
        self.eps, self.elementwise_affine = eps, elementwise_affine
        if elementwise_affine:
            self.weight = Parameter(empty(self.normalized_shape, dtype=dtype))
            if bias:
                self.bias = Parameter(empty(self.normalized_shape, dtype=dtype))
            else:
                self.register_parameter("bias", None)
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self):
        if self.weight is not None:
            init.ones_(self.weight)
        if self.bias is not None:
            init.zeros_(self.bias)

    def forward(self, x):
        return F.layer_norm(x, self.normalized_shape, self.weight, self.bias, self.eps)

    def extra_repr(self):
        return (f"{self.normalized_shape}, eps={self.eps}, elementwise_affine={self.elementwise_affine}, "
                f"bias={self.bias is not None}")


class BatchNorm1d(Module):
    """Normalises each feature (dim 1) of (N, C) or (N, C, L) input over the batch (and length) dims.

    Training uses the batch statistics and updates running_mean / running_var (with the unbiased variance, as torch
    does); eval uses the running statistics.
    """

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=True, track_running_stats=True, device=None,
                 dtype=None, *, bias=True):
        super().__init__()
        check_device(device, "BatchNorm1d")
        self.num_features, self.eps, self.momentum = num_features, eps, momentum
        self.affine, self.track_running_stats = affine, track_running_stats
        if affine:
            self.weight = Parameter(ones(num_features, dtype=dtype))
            if bias:
                self.bias = Parameter(zeros(num_features, dtype=dtype))
            else:
                self.register_parameter("bias", None)
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)
        if track_running_stats:
            self.register_buffer("running_mean", zeros(num_features, dtype=dtype))
            self.register_buffer("running_var", ones(num_features, dtype=dtype))
            self.register_buffer("num_batches_tracked", tensor(0, dtype=int64))
        else:
            self.register_buffer("running_mean", None)
            self.register_buffer("running_var", None)
            self.register_buffer("num_batches_tracked", None)

    def reset_running_stats(self):
        if self.track_running_stats:
            with no_grad():
                self.running_mean.zero_()
                self.running_var.fill_(1.0)
                self.num_batches_tracked.zero_()

    def forward(self, x):
        if x.dim() not in (2, 3) or x.shape[1] != self.num_features:
            raise ValueError(f"BatchNorm1d: expected input of shape (N, {self.num_features}) or "
                             f"(N, {self.num_features}, L), got {tuple(x.shape)}")
        dims = (0,) if x.dim() == 2 else (0, 2)
        shape = (1, -1) if x.dim() == 2 else (1, -1, 1)
        use_batch_stats = self.training or not self.track_running_stats
        if use_batch_stats:
            count = x.numel() // self.num_features
            if count <= 1:
                raise ValueError(f"BatchNorm1d: expected more than 1 value per channel when training, "
                                 f"got input of shape {tuple(x.shape)}")
            mean = x.mean(dim=dims)
            var = x.var(dim=dims, correction=0)
            if self.training and self.track_running_stats:
                with no_grad():
                    self.num_batches_tracked.add_(1)
                    m = self.momentum if self.momentum is not None else 1.0 / int(self.num_batches_tracked)
                    self.running_mean.mul_(1 - m).add_(mean.detach() * m)
                    self.running_var.mul_(1 - m).add_(var.detach() * (m * count / (count - 1)))
        else:
            mean, var = self.running_mean, self.running_var
        out = (x - mean.reshape(shape)) * (var.reshape(shape) + self.eps).rsqrt()
        if self.weight is not None:
            out = out * self.weight.reshape(shape)
        if self.bias is not None:
            out = out + self.bias.reshape(shape)
        return out

    def extra_repr(self):
        return (f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, affine={self.affine}, "
                f"bias={self.bias is not None}, track_running_stats={self.track_running_stats}")
