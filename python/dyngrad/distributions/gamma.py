"""torch.distributions.gamma's name (defined in continuous.py)."""
from .continuous import Gamma

__all__ = ["Gamma"]
