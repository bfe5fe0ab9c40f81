"""VonMises: the circular normal distribution on angles, density exp(k cos(x - loc)) / (2 pi I0(k)). Sampled by
Best and Fisher's (1979) rejection from a wrapped Cauchy envelope, on uniforms from the engine's generator."""
import math
from numbers import Number

import numpy as np

from .. import Size, no_grad, special
from . import constraints
from ._sampling import _host, _to_tensor, _uniforms
from .distribution import Distribution
from .utils import broadcast_all

__all__ = ["VonMises"]


def _log_i0(k):
    return special.i0e(k).log() + k


def _von_mises_numpy(loc, k):
    """Best-Fisher draws for the float64 arrays loc and k (one shape), returned in [-pi, pi)."""
    flat_k = k.reshape(-1)
    out = np.empty_like(flat_k)
    # below 1e-5 the density is uniform to within 1e-5: draw uniform angles (the envelope's rho loses precision)
    tiny = flat_k < 1e-5
    if tiny.any():
        out[tiny] = np.pi * (2 * _uniforms(int(tiny.sum())) - 1)
    idx = np.flatnonzero(~tiny)
    kk = flat_k[idx]
    tau = 1 + np.sqrt(1 + 4 * kk * kk)
    rho = (tau - np.sqrt(2 * tau)) / (2 * kk)
    r = (1 + rho * rho) / (2 * rho)
    pending = np.arange(idx.size)
    while pending.size:
        u1, u2, u3 = (_uniforms(pending.size) for _ in range(3))
        rp, kp = r[pending], kk[pending]
        z = np.cos(np.pi * u1)
        f = (1 + rp * z) / (rp + z)
        c = kp * (rp - f)
        with np.errstate(divide="ignore", invalid="ignore"):
            ok = (c * (2 - c) - u2 > 0) | (np.log(c / u2) + 1 - c >= 0)
        theta = np.sign(u3 - 0.5) * np.arccos(np.clip(f, -1, 1))
        out[idx[pending[ok]]] = theta[ok]
        pending = pending[~ok]
    angles = out.reshape(k.shape) + loc
    return np.mod(angles + np.pi, 2 * np.pi) - np.pi


class VonMises(Distribution):
    """The von Mises distribution with mean direction loc and concentration k (angles in [-pi, pi))."""
    arg_constraints = {"loc": constraints.real, "concentration": constraints.positive}
    support = constraints.real
    has_rsample = False

    def __init__(self, loc, concentration, validate_args=None):
        self.loc, self.concentration = broadcast_all(loc, concentration)
        numbers = isinstance(loc, Number) and isinstance(concentration, Number)
        batch_shape = Size() if numbers else self.loc.shape
        super().__init__(batch_shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(VonMises, _instance)
        batch_shape = Size(tuple(batch_shape))
        new.loc = self.loc.expand(batch_shape)
        new.concentration = self.concentration.expand(batch_shape)
        Distribution.__init__(new, batch_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return (self.concentration * (value - self.loc).cos() - math.log(2 * math.pi)
                - _log_i0(self.concentration))

    def sample(self, sample_shape=Size()):
        shape = self._extended_shape(sample_shape)
        with no_grad():
            loc = np.broadcast_to(_host(self.loc), tuple(shape))
            k = np.broadcast_to(_host(self.concentration), tuple(shape))
            return _to_tensor(_von_mises_numpy(loc, np.asarray(k, order="C")), self.loc)

    @property
    def mean(self):
        return self.loc

    @property
    def mode(self):
        return self.loc

    @property
    def variance(self):
        # the circular variance 1 - I1(k) / I0(k)
        return 1 - special.i1e(self.concentration) / special.i0e(self.concentration)
