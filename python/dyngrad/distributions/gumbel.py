"""torch.distributions.gumbel's name (defined in transformed.py)."""
from .transformed import Gumbel

__all__ = ["Gumbel"]
