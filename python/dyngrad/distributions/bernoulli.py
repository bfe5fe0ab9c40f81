"""torch.distributions.bernoulli's name (defined in discrete.py)."""
from .discrete import Bernoulli

__all__ = ["Bernoulli"]
