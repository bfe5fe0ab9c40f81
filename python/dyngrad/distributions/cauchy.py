"""torch.distributions.cauchy's name (defined in continuous.py)."""
from .continuous import Cauchy

__all__ = ["Cauchy"]
