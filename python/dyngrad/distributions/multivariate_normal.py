"""torch.distributions.multivariate_normal's name (defined in multivariate.py)."""
from .multivariate import MultivariateNormal

__all__ = ["MultivariateNormal"]
