"""BatchNorm1d/2d/3d, SyncBatchNorm and the lazy BatchNorms, over nn.functional's ops, with torch's
parameters, buffers (running_mean, running_var, num_batches_tracked) and reprs; _NormBase and the affine parameters
are shared with instancenorm.py and normalization.py, as torch's."""

from ... import distributed as dist, empty, int64, no_grad, ones, tensor, zeros
from ..._api.device import check_device
from ..._api.ops.normalization import _update_running
from ...distributed.nn.functional import all_reduce
from .. import functional as F, init
from ..parameter import Parameter
from .lazy import LazyModuleMixin
from .module import Module

__all__ = ["BatchNorm1d", "BatchNorm2d", "BatchNorm3d", "SyncBatchNorm", "LazyBatchNorm1d", "LazyBatchNorm2d",
           "LazyBatchNorm3d"]


def _affine_parameters(module, shape, affine, bias, dtype):
    """weight (and bias, unless bias=False) of `shape` when affine, else both registered as None; their values
    come from _reset_affine (ones, zeros)."""
    module.register_parameter("weight", Parameter(empty(shape, dtype=dtype)) if affine else None)
    module.register_parameter("bias", Parameter(empty(shape, dtype=dtype)) if affine and bias else None)


def _reset_affine(module):
    with no_grad():
        if module.weight is not None:
            init.ones_(module.weight)
        if module.bias is not None:
            init.zeros_(module.bias)


class _NormBase(Module):
    """What BatchNorm and InstanceNorm share: per-channel weight (ones) and bias (zeros) when affine, and the
    running statistics when track_running_stats (running_mean zeros, running_var ones, num_batches_tracked 0)."""

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=True, track_running_stats=True, device=None,
                 dtype=None, *, bias=True):
        super().__init__()
        check_device(device, type(self).__name__)
        self.num_features, self.eps, self.momentum = num_features, eps, momentum
        self.affine, self.track_running_stats = affine, track_running_stats
        _affine_parameters(self, num_features, affine, bias, dtype)
        if track_running_stats:
            self.register_buffer("running_mean", zeros(num_features, dtype=dtype))
            self.register_buffer("running_var", ones(num_features, dtype=dtype))
            self.register_buffer("num_batches_tracked", tensor(0, dtype=int64))
        else:
            self.register_buffer("running_mean", None)
            self.register_buffer("running_var", None)
            self.register_buffer("num_batches_tracked", None)
        self.reset_parameters()

    def reset_running_stats(self):
        if self.track_running_stats:
            with no_grad():
                self.running_mean.zero_()
                self.running_var.fill_(1.0)
                self.num_batches_tracked.zero_()

    def reset_parameters(self):
        self.reset_running_stats()
        _reset_affine(self)

    def _check_input_dim(self, input):
        dims = self._input_dims
        if input.dim() not in dims:
            shapes = " or ".join(f"{d}D" for d in dims)
            raise ValueError(f"{type(self).__name__}: expected {shapes} input (got {input.dim()}D input)")

    def extra_repr(self):
        return (f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, affine={self.affine}, "
                f"bias={self.bias is not None}, track_running_stats={self.track_running_stats}")


class _BatchNorm(_NormBase):
    """Training: normalise with the batch statistics and update the running ones (momentum=None: their cumulative
    average, factor 1 / num_batches_tracked); eval: normalise with the running ones (or with the batch's when
    there are none)."""

    def forward(self, input):
        self._check_input_dim(input)
        if input.shape[1] != self.num_features:
            raise RuntimeError(f"{type(self).__name__}: expected input with {self.num_features} channels (dim 1), "
                               f"got shape {tuple(input.shape)}")
        factor = self._running_factor()
        use_batch_stats = self.training or (self.running_mean is None and self.running_var is None)
        keep = not self.training or self.track_running_stats
        return F.batch_norm(input, self.running_mean if keep else None, self.running_var if keep else None,
                            self.weight, self.bias, use_batch_stats, factor, self.eps)


    def _running_factor(self):
        """The weight of this batch in the running statistics; counts the batch in num_batches_tracked when
        training (momentum=None: the cumulative average, 1 / num_batches_tracked)."""
        factor = 0.0 if self.momentum is None else self.momentum
        if self.training and self.track_running_stats and self.num_batches_tracked is not None:
            with no_grad():
                self.num_batches_tracked.add_(1)
            factor = 1.0 / int(self.num_batches_tracked) if self.momentum is None else self.momentum
        return factor


class BatchNorm1d(_BatchNorm):
    """Per feature (dim 1) of (N, C) or (N, C, L) input."""
    _input_dims = (2, 3)


class BatchNorm2d(_BatchNorm):
    """Per channel (dim 1) of (N, C, H, W) input."""
    _input_dims = (4,)


class BatchNorm3d(_BatchNorm):
    """Per channel (dim 1) of (N, C, D, H, W) input."""
    _input_dims = (5,)


class SyncBatchNorm(_BatchNorm):
    """BatchNorm over any (N, C, ...) input whose training statistics are those of the whole batch across the
    processes of a distributed group (dyngrad.distributed over MPI; torch does this on GPUs only).

    Note [SyncBatchNorm as a composite]: the batch mean and variance are per-channel sums all-reduced across the
    ranks with the differentiable all_reduce of distributed.nn.functional, mean first, then the squared deviations
    from it (two passes: stable where E[x^2] - E[x]^2 cancels). The rest is ordinary ops, so backward needs no
    formula of its own: the all_reduce nodes sum the gradients flowing into the statistics across the ranks, which
    makes each rank's input gradient that of the global batch (and DDP's averaging then gives the parameters the
    gradient of one process on the whole batch). Every rank must therefore run forward and backward through the
    same SyncBatchNorm layers in the same order. Without a process group, or with one rank, it is BatchNorm."""

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=True, track_running_stats=True,
                 process_group=None, device=None, dtype=None, *, bias=True):
        super().__init__(num_features, eps, momentum, affine, track_running_stats, device, dtype, bias=bias)
        self.process_group = process_group

    def _check_input_dim(self, input):
        if input.dim() < 2:
            raise ValueError(f"SyncBatchNorm: expected at least 2D input (got {input.dim()}D input)")

    def forward(self, input):
        self._check_input_dim(input)
        if input.shape[1] == 0:
            raise ValueError("SyncBatchNorm number of input channels should be non-zero")
        if self.training:
            if dist.is_initialized() and dist.get_world_size(self.process_group) > 1:
                return self._synchronised(input, dist)
        return super().forward(input)

    def _synchronised(self, input, dist):
        if input.shape[1] != self.num_features:
            raise RuntimeError(f"SyncBatchNorm: expected input with {self.num_features} channels (dim 1), got "
                               f"shape {tuple(input.shape)}")
        dims = [0] + list(range(2, input.dim()))
        count = tensor([input.numel() // input.shape[1]], dtype=int64)
        dist.all_reduce(count, group=self.process_group)          # ranks may hold batches of different sizes
        n = int(count)
        if n <= 1:
            raise ValueError(f"SyncBatchNorm: expected more than 1 value per channel when training, got input "
                             f"size {tuple(input.shape)} on each rank ({n} value(s) per channel in all)")
        view = [1, input.shape[1]] + [1] * (input.dim() - 2)
        mean = all_reduce(input.sum(dims), group=self.process_group) / n
        centred = input - mean.reshape(view)
        var = all_reduce((centred * centred).sum(dims), group=self.process_group) / n
        factor = self._running_factor()
        if self.track_running_stats and self.running_mean is not None:   # as F.batch_norm updates them
            _update_running(self.running_mean, mean, factor)
            _update_running(self.running_var, var.detach() * (n / (n - 1)), factor)
        out = centred * (var + self.eps).rsqrt().reshape(view)
        if self.weight is not None:
            out = out * self.weight.reshape(view)
        if self.bias is not None:
            out = out + self.bias.reshape(view)
        return out

    @classmethod
    def convert_sync_batchnorm(cls, module, process_group=None):
        """module with every BatchNorm*d in it replaced by a SyncBatchNorm sharing its parameters and buffers."""
        out = module
        if isinstance(module, _BatchNorm):
            out = cls(module.num_features, module.eps, module.momentum, module.affine, module.track_running_stats,
                      process_group, bias=module.bias is not None)
            if module.affine:
                out.weight, out.bias = module.weight, module.bias
            out.running_mean, out.running_var = module.running_mean, module.running_var
            out.num_batches_tracked = module.num_batches_tracked
            out.training = module.training
        for name, child in module.named_children():
            out.add_module(name, cls.convert_sync_batchnorm(child, process_group))
        return out


# ----- lazy variants: num_features read from dim 1 of the first input --------------------------------------------

class _LazyNormBase(LazyModuleMixin):
    """num_features read from dim 1 of the first input (nn/modules/lazy.py)."""
    _lazy_tensors = ("weight", "bias", "running_mean", "running_var")
    _size_attr = "num_features"

    def __init__(self, eps=1e-5, momentum=0.1, affine=True, track_running_stats=True, device=None, dtype=None, *,
                 bias=True):
        super().__init__(0, eps, momentum, affine, track_running_stats, device, dtype, bias=bias)

    def reset_parameters(self):
        if not self.has_uninitialized_params():
            super().reset_parameters()

    def initialize_parameters(self, input):
        if input.dim() < 2:
            raise ValueError(f"{type(self).__name__}: expected at least 2D input to infer num_features (dim 1), got "
                             f"{input.dim()}D input")
        self._materialize({n: (input.shape[1],) for n in self._lazy_tensors})
        self.reset_parameters()


class LazyBatchNorm1d(_LazyNormBase, BatchNorm1d):
    cls_to_become = BatchNorm1d


class LazyBatchNorm2d(_LazyNormBase, BatchNorm2d):
    cls_to_become = BatchNorm2d


class LazyBatchNorm3d(_LazyNormBase, BatchNorm3d):
    cls_to_become = BatchNorm3d
