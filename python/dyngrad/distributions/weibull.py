"""torch.distributions.weibull's name (defined in transformed.py)."""
from .transformed import Weibull

__all__ = ["Weibull"]
