"""torch.distributions.log_normal's name (defined in transformed.py)."""
from .transformed import LogNormal

__all__ = ["LogNormal"]
