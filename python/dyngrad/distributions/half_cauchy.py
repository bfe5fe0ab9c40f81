"""torch.distributions.half_cauchy's name (defined in transformed.py)."""
from .transformed import HalfCauchy

__all__ = ["HalfCauchy"]
