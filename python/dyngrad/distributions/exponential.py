"""torch.distributions.exponential's name (defined in continuous.py)."""
from .continuous import Exponential

__all__ = ["Exponential"]
