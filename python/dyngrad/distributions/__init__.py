"""dyngrad.distributions: torch.distributions' names, shared by both engines.

Distributions with torch's parameters, constraints and validation (ValueError for parameters or values outside
their constraints), sample/rsample (reparameterised where torch's is: Normal, Uniform, Exponential, Laplace, Gamma
and Beta/Dirichlet through implicit reparameterisation, MultivariateNormal, LogNormal), log_prob, cdf/icdf, entropy,
mean/mode/variance, expand; kl_divergence with register_kl; transforms and TransformedDistribution. Random draws
come from the engine's generator (reproducible under manual_seed)."""
from . import constraints, transforms
from .continuous import Beta, Cauchy, Chi2, Dirichlet, Exponential, Gamma, Laplace, Normal, StudentT, Uniform
from .discrete import (Bernoulli, Binomial, Categorical, Geometric, Multinomial, OneHotCategorical,
                       OneHotCategoricalStraightThrough, Poisson)
from .distribution import Distribution
from .kl import kl_divergence, register_kl
from .multivariate import Independent, MultivariateNormal
from .mixture_same_family import MixtureSameFamily
from .transformed import Gumbel, HalfNormal, LogNormal, TransformedDistribution
from .transforms import (AbsTransform, AffineTransform, ComposeTransform, ExpTransform, PowerTransform,
                         SigmoidTransform, SoftplusTransform, TanhTransform, Transform, identity_transform)

__all__ = ["AbsTransform", "AffineTransform", "Bernoulli", "Beta", "Binomial", "Categorical", "Cauchy", "Chi2",
           "ComposeTransform", "Dirichlet", "Distribution", "ExpTransform", "Exponential", "Gamma", "Geometric",
           "Gumbel", "HalfNormal", "Independent", "Laplace", "LogNormal", "MixtureSameFamily", "Multinomial",
           "MultivariateNormal", "Normal", "OneHotCategorical", "StudentT",
           "OneHotCategoricalStraightThrough", "Poisson", "PowerTransform", "SigmoidTransform",
           "SoftplusTransform", "TanhTransform", "Transform", "TransformedDistribution", "Uniform", "constraints",
           "identity_transform", "kl_divergence", "register_kl", "transforms"]
