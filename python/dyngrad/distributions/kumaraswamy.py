"""Kumaraswamy: the distribution on [0, 1] with density a b x^(a-1) (1 - x^a)^(b-1), a Beta look-alike whose CDF
inverts in closed form: (1 - (1 - u)^(1/b))^(1/a) for u uniform (reparameterised)."""
import math

from .. import digamma, full, full_like, lgamma, where
from . import constraints
from .continuous import Uniform
from .transformed import TransformedDistribution
from .transforms import AffineTransform, PowerTransform
from .utils import broadcast_all, euler_constant

__all__ = ["Kumaraswamy"]


def _moments(a, b, n):
    """E[X^n] = b B(1 + n/a, b)."""
    arg1 = 1 + n / a
    return b * (lgamma(arg1) + lgamma(b) - lgamma(arg1 + b)).exp()


class Kumaraswamy(TransformedDistribution):
    """Kumaraswamy(concentration1 = a, concentration0 = b)."""
    arg_constraints = {"concentration1": constraints.positive, "concentration0": constraints.positive}
    support = constraints.unit_interval
    has_rsample = True

    def __init__(self, concentration1, concentration0, validate_args=None):
        self.concentration1, self.concentration0 = broadcast_all(concentration1, concentration0)
        base_dist = Uniform(full_like(self.concentration0, 0.0), full_like(self.concentration0, 1.0),
                            validate_args=validate_args)
        transforms = [PowerTransform(exponent=self.concentration0.reciprocal()), AffineTransform(loc=1.0, scale=-1.0),
                      PowerTransform(exponent=self.concentration1.reciprocal())]
        super().__init__(base_dist, transforms, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(Kumaraswamy, _instance)
        new.concentration1 = self.concentration1.expand(batch_shape)
        new.concentration0 = self.concentration0.expand(batch_shape)
        return super().expand(batch_shape, _instance=new)

    @property
    def mean(self):
        return _moments(self.concentration1, self.concentration0, 1)

    @property
    def mode(self):
        # ((a - 1) / (a b - 1))^(1/a) for a, b >= 1, not both 1; no interior mode otherwise (nan). torch 2.13
        # computes log1p(-b) / b - log1p(-a b) here, which is nan for every b > 1 (a bug we do not copy).
        a, b = self.concentration1, self.concentration0
        defined = (a >= 1) & (b >= 1) & ((a > 1) | (b > 1))
        safe_a = where(defined, a, full((), 2.0, dtype=a.dtype))
        safe_b = where(defined, b, full((), 2.0, dtype=b.dtype))
        mode = ((safe_a - 1) / (safe_a * safe_b - 1)).pow(safe_a.reciprocal())
        return where(defined, mode, full((), math.nan, dtype=mode.dtype))

    @property
    def variance(self):
        return _moments(self.concentration1, self.concentration0, 2) - self.mean.pow(2)

    def entropy(self):
        t1 = 1 - self.concentration1.reciprocal()
        t0 = 1 - self.concentration0.reciprocal()
        H0 = digamma(self.concentration0 + 1) + euler_constant
        return t0 + t1 * H0 - self.concentration1.log() - self.concentration0.log()
