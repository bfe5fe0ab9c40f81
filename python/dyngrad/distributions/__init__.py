"""dyngrad.distributions: torch.distributions' names, shared by both engines.

Distributions with torch's parameters, constraints and validation (ValueError for parameters or values outside
their constraints), sample/rsample (reparameterised where torch's is: Normal, Uniform, Exponential, Laplace, Gamma
and Beta/Dirichlet through implicit reparameterisation, MultivariateNormal, LogNormal), log_prob, cdf/icdf, entropy,
mean/mode/variance, expand; kl_divergence with register_kl; transforms, TransformedDistribution and the
biject_to/transform_to registries. Random draws come from the engine's generator (reproducible under manual_seed)."""
from . import constraints, transforms
from .constraint_registry import biject_to, transform_to
from .continuous import (Beta, Cauchy, Chi2, Dirichlet, Exponential, FisherSnedecor, Gamma, Laplace, Normal, StudentT,
                         Uniform)
from .continuous_bernoulli import ContinuousBernoulli
from .discrete import (Bernoulli, Binomial, Categorical, Geometric, Multinomial, NegativeBinomial, OneHotCategorical,
                       OneHotCategoricalStraightThrough, Poisson)
from .distribution import Distribution
from .exp_family import ExponentialFamily
from .kl import kl_divergence, register_kl
from .kumaraswamy import Kumaraswamy
from .lowrank_multivariate_normal import LowRankMultivariateNormal
from .mixture_same_family import MixtureSameFamily
from .multivariate import Independent, MultivariateNormal
from .relaxed import ExpRelaxedCategorical, LogitRelaxedBernoulli, RelaxedBernoulli, RelaxedOneHotCategorical
from .transformed import (Gumbel, HalfCauchy, HalfNormal, InverseGamma, LogNormal, LogisticNormal, Pareto,
                          TransformedDistribution, Weibull)
from .transforms import (AbsTransform, AffineTransform, ComposeTransform, CumulativeDistributionTransform,
                         ExpTransform, IndependentTransform, LowerCholeskyTransform, PowerTransform, ReshapeTransform,
                         SigmoidTransform, SoftmaxTransform, SoftplusTransform, StickBreakingTransform, TanhTransform,
                         Transform, identity_transform)
from .von_mises import VonMises

__all__ = ["AbsTransform", "AffineTransform", "Bernoulli", "Beta", "Binomial", "Categorical", "Cauchy", "Chi2",
           "ComposeTransform", "ContinuousBernoulli", "CumulativeDistributionTransform", "Dirichlet", "Distribution",
           "ExpRelaxedCategorical", "ExpTransform", "Exponential", "ExponentialFamily", "FisherSnedecor", "Gamma",
           "Geometric", "Gumbel", "HalfCauchy", "HalfNormal", "Independent", "IndependentTransform", "InverseGamma",
           "Kumaraswamy", "Laplace", "LogNormal", "LogisticNormal", "LogitRelaxedBernoulli",
           "LowRankMultivariateNormal", "LowerCholeskyTransform", "MixtureSameFamily", "Multinomial",
           "MultivariateNormal", "NegativeBinomial", "Normal", "OneHotCategorical",
           "OneHotCategoricalStraightThrough", "Pareto", "Poisson", "PowerTransform", "RelaxedBernoulli",
           "RelaxedOneHotCategorical", "ReshapeTransform", "SigmoidTransform", "SoftmaxTransform",
           "SoftplusTransform", "StickBreakingTransform", "StudentT", "TanhTransform", "Transform",
           "TransformedDistribution", "Uniform", "VonMises", "Weibull", "biject_to", "constraints",
           "identity_transform", "kl_divergence", "register_kl", "transform_to", "transforms"]
