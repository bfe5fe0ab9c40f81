"""torch.distributions.normal's name (defined in continuous.py)."""
from .continuous import Normal

__all__ = ["Normal"]
