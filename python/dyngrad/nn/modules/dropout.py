"""Dropout layers: zero elements (Dropout), whole channels (Dropout1d/2d/3d) or set them to SELU's saturation value
keeping mean and variance (AlphaDropout, FeatureAlphaDropout), while training; identity in eval."""
from .. import functional as F
from .module import Module

__all__ = ["Dropout", "Dropout1d", "Dropout2d", "Dropout3d", "AlphaDropout", "FeatureAlphaDropout"]


class _DropoutNd(Module):
    _fn = "dropout"

    def __init__(self, p=0.5, inplace=False):
        super().__init__()
        if p < 0 or p > 1:
            raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
        self.p, self.inplace = p, inplace

    def forward(self, input):
        return getattr(F, self._fn)(input, self.p, self.training, self.inplace)

    def extra_repr(self):
        return f"p={self.p}, inplace={self.inplace}"


class Dropout(_DropoutNd):
    """Each element zeroed with probability p, the rest scaled by 1 / (1 - p)."""


class Dropout1d(_DropoutNd):
    """Whole channels of (N, C, L) or (C, L) input zeroed."""
    _fn = "dropout1d"


class Dropout2d(_DropoutNd):
    """Whole channels of (N, C, H, W) or (C, H, W) input zeroed."""
    _fn = "dropout2d"


class Dropout3d(_DropoutNd):
    """Whole channels of (N, C, D, H, W) or (C, D, H, W) input zeroed."""
    _fn = "dropout3d"


class AlphaDropout(_DropoutNd):
    _fn = "alpha_dropout"


class FeatureAlphaDropout(_DropoutNd):
    _fn = "feature_alpha_dropout"
