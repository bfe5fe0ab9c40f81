"""torch.distributions.dirichlet's name (defined in continuous.py)."""
from .continuous import Dirichlet

__all__ = ["Dirichlet"]
