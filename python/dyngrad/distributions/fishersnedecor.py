"""torch.distributions.fishersnedecor's name (defined in continuous.py)."""
from .continuous import FisherSnedecor

__all__ = ["FisherSnedecor"]
