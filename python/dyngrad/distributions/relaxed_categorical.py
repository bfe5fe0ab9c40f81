"""torch.distributions.relaxed_categorical's names (defined in relaxed.py)."""
from .relaxed import ExpRelaxedCategorical, RelaxedOneHotCategorical

__all__ = ["ExpRelaxedCategorical", "RelaxedOneHotCategorical"]
