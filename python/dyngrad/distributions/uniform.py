"""torch.distributions.uniform's name (defined in continuous.py)."""
from .continuous import Uniform

__all__ = ["Uniform"]
