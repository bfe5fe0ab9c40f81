"""torch.distributions.geometric's name (defined in discrete.py)."""
from .discrete import Geometric

__all__ = ["Geometric"]
