"""Distribution: the base class of every probability distribution (torch.distributions.Distribution's contract).

A distribution holds tensors of parameters; batch_shape is the shape over which independent distributions are
batched and event_shape the shape of one draw. sample(sample_shape) returns sample_shape + batch_shape +
event_shape; rsample does the same with a reparameterised, differentiable draw where the distribution has one;
log_prob(value) scores values broadcastable to batch_shape + event_shape.

Validation (on by default, as torch's __debug__ default): the constructor checks every parameter against
arg_constraints and log_prob/cdf/icdf check their value's shape and support, raising ValueError with the
offending values; validate_args=False or Distribution.set_default_validate_args(False) turns it off.
"""

from .. import Size, Tensor, no_grad
from . import constraints
from .._api.ops.vmap import all_rows
from .._user_frame import warn
from .utils import lazy_property

__all__ = ["Distribution"]


def _all_true(valid):
    """Whether every value is valid; under vmap over every row at once, as torch._is_all_true's batching rule."""
    return bool(all_rows(valid).all()) if isinstance(valid, Tensor) else bool(valid)


class Distribution:
    has_rsample = False
    has_enumerate_support = False
    _validate_args = __debug__

    @staticmethod
    def set_default_validate_args(value):
        """Turns argument validation on (True) or off (False) for distributions built without validate_args."""
        if value not in [True, False]:
            raise ValueError("set_default_validate_args: value must be True or False.")
        Distribution._validate_args = value

    def __init__(self, batch_shape=Size(), event_shape=Size(), validate_args=None):
        self._batch_shape = Size(tuple(batch_shape))
        self._event_shape = Size(tuple(event_shape))
        if validate_args is not None:
            self._validate_args = validate_args
        if self._validate_args:
            try:
                arg_constraints = self.arg_constraints
            except NotImplementedError:
                arg_constraints = {}
                warn(f"{self.__class__} does not define `arg_constraints`. Please set `arg_constraints = "
                     "{}` or initialize the distribution with `validate_args=False` to turn off "
                     "validation.")
            for param, constraint in arg_constraints.items():
                if constraints.is_dependent(constraint):
                    continue                           # depends on other parameters: cannot be checked alone
                if param not in self.__dict__ and isinstance(getattr(type(self), param), lazy_property):
                    continue                           # a derived parameter not computed yet
                value = getattr(self, param)
                if not _all_true(constraint.check(value)):
                    raise ValueError(f"Expected parameter {param} ({type(value).__name__} of shape "
                                     f"{tuple(value.shape)}) of distribution {self!r} to satisfy the constraint "
                                     f"{constraint!r}, but found invalid values:\n{value}")
        super().__init__()

    def expand(self, batch_shape, _instance=None):
        """A new distribution of the same kind whose parameters are expanded to batch_shape (no copy)."""
        raise NotImplementedError

    @property
    def batch_shape(self):
        """The shape over which parameters are batched."""
        return self._batch_shape

    @property
    def event_shape(self):
        """The shape of a single sample (without batching)."""
        return self._event_shape

    @property
    def arg_constraints(self):
        """The constraint each parameter must satisfy (name -> Constraint)."""
        raise NotImplementedError

    @property
    def support(self):
        """The Constraint describing the set of values the distribution takes."""
        raise NotImplementedError

    @property
    def mean(self):
        raise NotImplementedError

    @property
    def mode(self):
        raise NotImplementedError(f"{self.__class__} does not implement mode")

    @property
    def variance(self):
        raise NotImplementedError

    @property
    def stddev(self):
        return self.variance.sqrt()

    def sample(self, sample_shape=Size()):
        """A sample of shape sample_shape + batch_shape + event_shape, without a graph."""
        with no_grad():
            return self.rsample(sample_shape)

    def rsample(self, sample_shape=Size()):
        """A reparameterised sample: differentiable with respect to the parameters."""
        raise NotImplementedError

    def sample_n(self, n):
        """Deprecated: sample((n,))."""
        warn("`sample_n(n)` will be deprecated. Use `sample((n,))` instead.", FutureWarning)
        return self.sample(Size((n,)))

    def log_prob(self, value):
        raise NotImplementedError

    def cdf(self, value):
        raise NotImplementedError

    def icdf(self, value):
        raise NotImplementedError

    def enumerate_support(self, expand=True):
        raise NotImplementedError

    def entropy(self):
        raise NotImplementedError

    def perplexity(self):
        """exp(entropy)."""
        return self.entropy().exp()

    def _extended_shape(self, sample_shape=Size()):
        """sample_shape + batch_shape + event_shape."""
        if not isinstance(sample_shape, Size):
            sample_shape = Size(tuple(sample_shape))
        return Size(tuple(sample_shape) + tuple(self._batch_shape) + tuple(self._event_shape))

    def _validate_sample(self, value):
        """The checks log_prob/cdf/icdf run on their value (when validation is on): a Tensor, event_shape on the
        right, broadcastable with batch_shape + event_shape, inside the support."""
        if not isinstance(value, Tensor):
            raise ValueError("The value argument to log_prob must be a Tensor")
        event_dim_start = value.dim() - len(self._event_shape)
        if Size(tuple(value.shape[event_dim_start:])) != self._event_shape:
            raise ValueError(f"The right-most size of value must match event_shape: {value.shape} vs "
                             f"{self._event_shape}.")
        actual_shape = value.shape
        expected_shape = Size(tuple(self._batch_shape) + tuple(self._event_shape))
        for i, j in zip(reversed(actual_shape), reversed(expected_shape)):
            if i != 1 and j != 1 and i != j:
                raise ValueError(f"Value is not broadcastable with batch_shape+event_shape: {actual_shape} vs "
                                 f"{expected_shape}.")
        try:
            support = self.support
        except NotImplementedError:
            warn(f"{self.__class__} does not define `support` to enable sample validation. Please "
                 "initialize the distribution with `validate_args=False` to turn off validation.")
            return
        if not _all_true(support.check(value)):
            raise ValueError(f"Expected value argument ({type(value).__name__} of shape {tuple(value.shape)}) to be "
                             f"within the support ({support!r}) of the distribution {self!r}, but found invalid "
                             f"values:\n{value}")

    def _get_checked_instance(self, cls, _instance=None):
        if _instance is None and type(self).__init__ != cls.__init__:
            raise NotImplementedError(f"Subclass {self.__class__.__name__} of {cls.__name__} that defines a "
                                      "custom __init__ method must also define a custom .expand() method.")
        return self.__new__(type(self)) if _instance is None else _instance

    def __repr__(self):
        names = [k for k in self.arg_constraints if k in self.__dict__]
        args = ", ".join(f"{p}: {self.__dict__[p] if self.__dict__[p].numel() == 1 else self.__dict__[p].size()}"
                         for p in names)
        return self.__class__.__name__ + "(" + args + ")"
