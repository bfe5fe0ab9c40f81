"""torch.distributions.negative_binomial's name (defined in discrete.py)."""
from .discrete import NegativeBinomial

__all__ = ["NegativeBinomial"]
