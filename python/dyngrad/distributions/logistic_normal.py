"""torch.distributions.logistic_normal's name (defined in transformed.py)."""
from .transformed import LogisticNormal

__all__ = ["LogisticNormal"]
