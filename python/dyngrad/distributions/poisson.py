"""torch.distributions.poisson's name (defined in discrete.py)."""
from .discrete import Poisson

__all__ = ["Poisson"]
