"""torch.distributions.half_normal's name (defined in transformed.py)."""
from .transformed import HalfNormal

__all__ = ["HalfNormal"]
