"""ExponentialFamily: the base class torch gives the distributions of the exponential family (Normal, Bernoulli,
Beta, Gamma, Chi2, Dirichlet, Exponential, Poisson), so that isinstance checks against it hold. Their entropies and
KL divergences are the closed forms of each class and of distributions.kl."""
from .distribution import Distribution

__all__ = ["ExponentialFamily"]


class ExponentialFamily(Distribution):
    """Distributions whose density is exp(<t(x), theta> - F(theta) + k(x)). The closed forms are written per class;
    this base carries the name for isinstance checks."""
