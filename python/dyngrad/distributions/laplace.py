"""torch.distributions.laplace's name (defined in continuous.py)."""
from .continuous import Laplace

__all__ = ["Laplace"]
