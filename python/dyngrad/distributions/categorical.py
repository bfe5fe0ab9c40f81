"""torch.distributions.categorical's name (defined in discrete.py)."""
from .discrete import Categorical

__all__ = ["Categorical"]
