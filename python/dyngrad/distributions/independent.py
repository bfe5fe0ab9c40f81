"""torch.distributions.independent's name (defined in multivariate.py)."""
from .multivariate import Independent

__all__ = ["Independent"]
