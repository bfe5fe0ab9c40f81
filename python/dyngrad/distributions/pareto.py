"""torch.distributions.pareto's name (defined in transformed.py)."""
from .transformed import Pareto

__all__ = ["Pareto"]
