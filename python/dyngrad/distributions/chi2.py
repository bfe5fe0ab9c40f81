"""torch.distributions.chi2's name (defined in continuous.py)."""
from .continuous import Chi2

__all__ = ["Chi2"]
