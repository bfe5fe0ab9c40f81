"""torch.distributions.beta's name (defined in continuous.py)."""
from .continuous import Beta

__all__ = ["Beta"]
