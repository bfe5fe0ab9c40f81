"""torch.distributions.multinomial's name (defined in discrete.py)."""
from .discrete import Multinomial

__all__ = ["Multinomial"]
