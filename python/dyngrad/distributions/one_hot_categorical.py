"""torch.distributions.one_hot_categorical's names (defined in discrete.py)."""
from .discrete import OneHotCategorical, OneHotCategoricalStraightThrough

__all__ = ["OneHotCategorical", "OneHotCategoricalStraightThrough"]
