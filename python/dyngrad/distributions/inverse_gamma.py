"""torch.distributions.inverse_gamma's name (defined in transformed.py)."""
from .transformed import InverseGamma

__all__ = ["InverseGamma"]
