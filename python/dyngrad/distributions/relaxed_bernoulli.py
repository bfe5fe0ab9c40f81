"""torch.distributions.relaxed_bernoulli's names (defined in relaxed.py)."""
from .relaxed import LogitRelaxedBernoulli, RelaxedBernoulli

__all__ = ["LogitRelaxedBernoulli", "RelaxedBernoulli"]
