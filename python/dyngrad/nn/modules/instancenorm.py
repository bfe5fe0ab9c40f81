"""InstanceNorm1d/2d/3d and their lazy forms, as torch.nn.modules.instancenorm: per-sample, per-channel
statistics (running ones only with track_running_stats=True)."""

from .. import functional as F
from ..._user_frame import warn
from .batchnorm import _LazyNormBase, _NormBase
from .lazy import LazyModuleMixin

__all__ = ["InstanceNorm1d", "InstanceNorm2d", "InstanceNorm3d", "LazyInstanceNorm1d", "LazyInstanceNorm2d",
           "LazyInstanceNorm3d"]



class _InstanceNorm(_NormBase):
    """Each channel of each sample over its spatial dims; unbatched input (one dim fewer) is a batch of one."""

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=False, track_running_stats=False, device=None,
                 dtype=None, *, bias=True):
        super().__init__(num_features, eps, momentum, affine, track_running_stats, device, dtype, bias=bias)

    def forward(self, input):
        self._check_input_dim(input)
        no_batch = self._input_dims[0]
        feature_dim = input.dim() - no_batch
        if input.shape[feature_dim] != self.num_features:
            if self.affine:
                raise ValueError(f"{type(self).__name__}: expected input's size at dim={feature_dim} to match "
                                 f"num_features ({self.num_features}), but got: {input.shape[feature_dim]}.")
            warn(f"{type(self).__name__}: input's size at dim={feature_dim} does not match num_features. "
                 "You can silence this warning by not passing in num_features, which is not used because "
                 "affine=False", UserWarning)
        x = input.unsqueeze(0) if input.dim() == no_batch else input
        out = F.instance_norm(x, self.running_mean, self.running_var, self.weight, self.bias,
                              self.training or not self.track_running_stats,
                              self.momentum if self.momentum is not None else 0.0, self.eps)
        return out.squeeze(0) if input.dim() == no_batch else out


class InstanceNorm1d(_InstanceNorm):
    _input_dims = (2, 3)


class InstanceNorm2d(_InstanceNorm):
    _input_dims = (3, 4)


class InstanceNorm3d(_InstanceNorm):
    _input_dims = (4, 5)


class _LazyInstanceNormBase(_LazyNormBase):
    def __init__(self, eps=1e-5, momentum=0.1, affine=True, track_running_stats=True, device=None, dtype=None, *,
                 bias=True):
        # _InstanceNorm's own __init__ has other defaults; the lazy ones are torch's (affine and stats on)
        LazyModuleMixin.__init__(self, 0, eps, momentum, affine, track_running_stats, device, dtype, bias=bias)


class LazyInstanceNorm1d(_LazyInstanceNormBase, InstanceNorm1d):
    cls_to_become = InstanceNorm1d


class LazyInstanceNorm2d(_LazyInstanceNormBase, InstanceNorm2d):
    cls_to_become = InstanceNorm2d


class LazyInstanceNorm3d(_LazyInstanceNormBase, InstanceNorm3d):
    cls_to_become = InstanceNorm3d
