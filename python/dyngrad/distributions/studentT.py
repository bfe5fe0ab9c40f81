"""torch.distributions.studentT's name (defined in continuous.py)."""
from .continuous import StudentT

__all__ = ["StudentT"]
