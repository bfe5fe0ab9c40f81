"""torch.distributions.binomial's name (defined in discrete.py)."""
from .discrete import Binomial

__all__ = ["Binomial"]
