"""torch.distributions.transformed_distribution's name (defined in transformed.py)."""
from .transformed import TransformedDistribution

__all__ = ["TransformedDistribution"]
