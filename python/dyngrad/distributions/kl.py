"""kl_divergence(p, q) and register_kl: closed-form KL(p || q) for pairs of distribution types, dispatched on the
most specific registered pair (as torch's: a pair registered for subclasses wins over one for their bases)."""
import math
from functools import total_ordering

from .. import broadcast_shapes, digamma, full_like, lgamma, linalg, where
from .._user_frame import warn
from ..nn import functional as F
from .continuous_bernoulli import ContinuousBernoulli
from .continuous import Beta, Cauchy, Dirichlet, Exponential, Gamma, Laplace, Normal, Uniform
from .discrete import Bernoulli, Binomial, Categorical, Geometric, OneHotCategorical, Poisson
from .distribution import Distribution
from .lowrank_multivariate_normal import LowRankMultivariateNormal, _batch_lowrank_logdet, _batch_lowrank_mahalanobis
from .multivariate import Independent, MultivariateNormal, _batch_mahalanobis
from .transformed import Gumbel, HalfNormal, Pareto, TransformedDistribution
from .utils import _sum_rightmost, euler_constant

__all__ = ["kl_divergence", "register_kl"]

_KL_REGISTRY = {}      # (type_p, type_q) -> fn
_KL_MEMOIZE = {}       # (type_p, type_q) -> the chosen fn (cleared whenever the registry changes)


def register_kl(type_p, type_q):
    """Decorator registering fn(p, q) as KL(p || q) for p of type_p and q of type_q (and their subclasses, unless a
    more specific pair is registered)."""
    if not isinstance(type_p, type) or not issubclass(type_p, Distribution):
        raise TypeError(f"Expected type_p to be a Distribution subclass but got {type_p}")
    if not isinstance(type_q, type) or not issubclass(type_q, Distribution):
        raise TypeError(f"Expected type_q to be a Distribution subclass but got {type_q}")

    def decorator(fun):
        _KL_REGISTRY[type_p, type_q] = fun
        _KL_MEMOIZE.clear()
        return fun

    return decorator


@total_ordering
class _Match:
    """Orders candidate pairs by how specific they are (position of each type in the other's MRO)."""
    __slots__ = ["types"]

    def __init__(self, *types):
        self.types = types

    def __eq__(self, other):
        return self.types == other.types

    def __le__(self, other):
        for x, y in zip(self.types, other.types):
            if not issubclass(x, y):
                return False
            if x is not y:
                break
        return True


def _dispatch_kl(type_p, type_q):
    matches = [(super_p, super_q) for super_p, super_q in _KL_REGISTRY
               if issubclass(type_p, super_p) and issubclass(type_q, super_q)]
    if not matches:
        return NotImplemented
    left_p, left_q = min(_Match(*m) for m in matches).types
    right_q, right_p = min(_Match(*reversed(m)) for m in matches).types
    left_fun = _KL_REGISTRY[left_p, left_q]
    right_fun = _KL_REGISTRY[right_p, right_q]
    if left_fun is not right_fun:
        warn(f"Ambiguous kl_divergence({type_p.__name__}, {type_q.__name__}). Please register_kl("
             f"{left_p.__name__}, {right_q.__name__})", RuntimeWarning)
    return left_fun


def kl_divergence(p, q):
    """KL(p || q) = E_p[log p(x) - log q(x)], in closed form, with batch shape the broadcast of p's and q's.
    NotImplementedError when no formula is registered for the pair of types."""
    try:
        fun = _KL_MEMOIZE[type(p), type(q)]
    except KeyError:
        fun = _dispatch_kl(type(p), type(q))
        _KL_MEMOIZE[type(p), type(q)] = fun
    if fun is NotImplemented:
        raise NotImplementedError(f"No KL(p || q) is implemented for p type {p.__class__.__name__} and q type "
                                  f"{q.__class__.__name__}")
    return fun(p, q)


def _infinite_where(mask, t):
    return where(mask, full_like(t, math.inf), t)


def _zero_where(mask, t):
    return where(mask, full_like(t, 0.0), t)


@register_kl(Bernoulli, Bernoulli)
def _kl_bernoulli_bernoulli(p, q):
    t1 = p.probs * (F.softplus(-q.logits) - F.softplus(-p.logits))
    t1 = _zero_where(p.probs == 0, _infinite_where(q.probs == 0, t1))
    t2 = (1 - p.probs) * (F.softplus(q.logits) - F.softplus(p.logits))
    t2 = _zero_where(p.probs == 1, _infinite_where(q.probs == 1, t2))
    return t1 + t2


@register_kl(ContinuousBernoulli, ContinuousBernoulli)
def _kl_continuousbernoulli_continuousbernoulli(p, q):
    # log p(x) = log C(lambda) + x log lambda + (1 - x) log(1 - lambda) is linear in x: the expectation under p
    # needs only p's mean
    m = p.mean
    t1 = m * (p.probs.log() - q.probs.log())
    t2 = (1 - m) * ((-p.probs).log1p() - (-q.probs).log1p())
    return t1 + t2 + p._cont_bern_log_norm() - q._cont_bern_log_norm()


@register_kl(Pareto, Pareto)
def _kl_pareto_pareto(p, q):
    # E_p[log x] = log s_p + 1 / a_p gives log(a_p / a_q) + a_q log(s_p / s_q) + a_q / a_p - 1; infinite where p's
    # support [s_p, inf) starts below q's
    alpha_ratio = q.alpha / p.alpha
    kl = q.alpha * (p.scale / q.scale).log() - alpha_ratio.log() + alpha_ratio - 1
    return _infinite_where(p.scale < q.scale, kl)


@register_kl(Beta, Beta)
def _kl_beta_beta(p, q):
    sum_params_p = p.concentration1 + p.concentration0
    sum_params_q = q.concentration1 + q.concentration0
    t1 = lgamma(q.concentration1) + lgamma(q.concentration0) + lgamma(sum_params_p)
    t2 = lgamma(p.concentration1) + lgamma(p.concentration0) + lgamma(sum_params_q)
    t3 = (p.concentration1 - q.concentration1) * digamma(p.concentration1)
    t4 = (p.concentration0 - q.concentration0) * digamma(p.concentration0)
    t5 = (sum_params_q - sum_params_p) * digamma(sum_params_p)
    return t1 - t2 + t3 + t4 + t5


@register_kl(Binomial, Binomial)
def _kl_binomial_binomial(p, q):
    # KL between binomials of different total_count: infinite when p's exceeds q's, not implemented the other way
    if bool((p.total_count < q.total_count).any()):
        raise NotImplementedError("KL between Binomials where q.total_count > p.total_count is not implemented")
    kl = p.total_count * (p.probs * (p.logits - q.logits) + (-p.probs).log1p() - (-q.probs).log1p())
    return _infinite_where(p.total_count > q.total_count, kl)


@register_kl(Categorical, Categorical)
def _kl_categorical_categorical(p, q):
    t = p.probs * (p.logits - q.logits)
    t = _zero_where((p.probs == 0).expand_as(t), _infinite_where((q.probs == 0).expand_as(t), t))
    return t.sum(-1)


@register_kl(Dirichlet, Dirichlet)
def _kl_dirichlet_dirichlet(p, q):
    sum_p_concentration = p.concentration.sum(-1)
    sum_q_concentration = q.concentration.sum(-1)
    t1 = lgamma(sum_p_concentration) - lgamma(sum_q_concentration)
    t2 = (lgamma(p.concentration) - lgamma(q.concentration)).sum(-1)
    t3 = p.concentration - q.concentration
    t4 = digamma(p.concentration) - digamma(sum_p_concentration).unsqueeze(-1)
    return t1 - t2 + (t3 * t4).sum(-1)


@register_kl(Exponential, Exponential)
def _kl_exponential_exponential(p, q):
    rate_ratio = q.rate / p.rate
    t1 = -rate_ratio.log()
    return t1 + rate_ratio - 1


@register_kl(Gamma, Gamma)
def _kl_gamma_gamma(p, q):
    t1 = q.concentration * (p.rate / q.rate).log()
    t2 = lgamma(q.concentration) - lgamma(p.concentration)
    t3 = (p.concentration - q.concentration) * digamma(p.concentration)
    t4 = (q.rate - p.rate) * (p.concentration / p.rate)
    return t1 + t2 + t3 + t4


@register_kl(Exponential, Gamma)
def _kl_exponential_gamma(p, q):
    ratio = q.rate / p.rate
    t1 = -q.concentration * ratio.log()
    return t1 + ratio + lgamma(q.concentration) + q.concentration * euler_constant - (1 + euler_constant)


@register_kl(Laplace, Laplace)
def _kl_laplace_laplace(p, q):
    scale_ratio = p.scale / q.scale
    loc_abs_diff = (p.loc - q.loc).abs()
    t1 = -scale_ratio.log()
    t2 = loc_abs_diff / q.scale
    t3 = scale_ratio * (-loc_abs_diff / p.scale).exp()
    return t1 + t2 + t3 - 1


@register_kl(MultivariateNormal, MultivariateNormal)
def _kl_multivariatenormal_multivariatenormal(p, q):
    if p.event_shape != q.event_shape:
        raise ValueError("KL-divergence between two Multivariate Normals with different event shapes cannot be "
                         "computed")
    half_term1 = (q._unbroadcasted_scale_tril.diagonal(dim1=-2, dim2=-1).log().sum(-1)
                  - p._unbroadcasted_scale_tril.diagonal(dim1=-2, dim2=-1).log().sum(-1))
    combined_batch_shape = broadcast_shapes(tuple(q._unbroadcasted_scale_tril.shape[:-2]),
                                            tuple(p._unbroadcasted_scale_tril.shape[:-2]))
    n = p.event_shape[0]
    q_scale_tril = q._unbroadcasted_scale_tril.expand(tuple(combined_batch_shape) + (n, n))
    p_scale_tril = p._unbroadcasted_scale_tril.expand(tuple(combined_batch_shape) + (n, n))
    # tr(Sigma_q^-1 Sigma_p) = ||L_q^-1 L_p||_F^2
    term2 = linalg.solve_triangular(q_scale_tril, p_scale_tril, upper=False).pow(2).sum((-2, -1))
    term3 = _batch_mahalanobis(q._unbroadcasted_scale_tril, q.loc - p.loc)
    return half_term1 + 0.5 * (term2 + term3 - n)


@register_kl(Normal, Normal)
def _kl_normal_normal(p, q):
    var_ratio = (p.scale / q.scale).pow(2)
    t1 = ((p.loc - q.loc) / q.scale).pow(2)
    return 0.5 * (var_ratio + t1 - 1 - var_ratio.log())


@register_kl(OneHotCategorical, OneHotCategorical)
def _kl_onehotcategorical_onehotcategorical(p, q):
    return _kl_categorical_categorical(p._categorical, q._categorical)


@register_kl(Poisson, Poisson)
def _kl_poisson_poisson(p, q):
    return p.rate * (p.rate.log() - q.rate.log()) - (p.rate - q.rate)


@register_kl(TransformedDistribution, TransformedDistribution)
def _kl_transformed_transformed(p, q):
    if p.transforms != q.transforms:
        raise NotImplementedError("KL between TransformedDistributions with different transforms is not "
                                  "implemented")
    if p.event_shape != q.event_shape:
        raise NotImplementedError("KL between TransformedDistributions with different event shapes is not "
                                  "implemented")
    return kl_divergence(p.base_dist, q.base_dist)


@register_kl(Uniform, Uniform)
def _kl_uniform_uniform(p, q):
    result = ((q.high - q.low) / (p.high - p.low)).log()
    return _infinite_where((q.low > p.low) | (q.high < p.high), result)


@register_kl(Uniform, Normal)
def _kl_uniform_normal(p, q):
    common_term = p.high - p.low
    t1 = (math.sqrt(math.pi * 2) * q.scale / common_term).log()
    t2 = common_term.pow(2) / 12
    t3 = ((p.high + p.low - 2 * q.loc) / 2).pow(2)
    return t1 + 0.5 * (t2 + t3) / q.scale.pow(2)


@register_kl(Independent, Independent)
def _kl_independent_independent(p, q):
    if p.reinterpreted_batch_ndims != q.reinterpreted_batch_ndims:
        raise NotImplementedError("KL between Independents with different reinterpreted_batch_ndims is not "
                                  "implemented")
    result = kl_divergence(p.base_dist, q.base_dist)
    return _sum_rightmost(result, p.reinterpreted_batch_ndims)



# ----- more pairs: same family, and across families where one has a closed form ----------------------------------

@register_kl(Cauchy, Cauchy)
def _kl_cauchy_cauchy(p, q):
    # log(((s_p + s_q)^2 + (m_p - m_q)^2) / (4 s_p s_q))  (Chyzak and Nielsen, 2019)
    return ((p.scale + q.scale).pow(2) + (p.loc - q.loc).pow(2)).log() - (4 * p.scale * q.scale).log()


@register_kl(Geometric, Geometric)
def _kl_geometric_geometric(p, q):
    # E_p[log p] - E_p[k log(1 - q) + log q], with E_p[k] = 1/p - 1
    return -p.entropy() - (-q.probs).log1p() / p.probs - q.logits


@register_kl(Gumbel, Gumbel)
def _kl_gumbel_gumbel(p, q):
    ratio = p.scale / q.scale
    q_loc = q.loc / q.scale
    p_loc = p.loc / q.scale
    t1 = -ratio.log() - q_loc + p_loc
    t2 = ratio * euler_constant
    t3 = (q_loc + lgamma(1 + ratio) - p_loc).exp()
    return t1 + t2 + t3 - (1 + euler_constant)


@register_kl(HalfNormal, HalfNormal)
def _kl_halfnormal_halfnormal(p, q):
    return _kl_normal_normal(p.base_dist, q.base_dist)


@register_kl(Normal, Laplace)
def _kl_normal_laplace(p, q):
    # E_p|x - m_q| for x ~ N(m_p, s_p^2): s_p sqrt(2/pi) exp(-d^2 / (2 s_p^2)) + d erf(d / (sqrt(2) s_p))
    loc_diff = p.loc - q.loc
    scale_ratio = p.scale / q.scale
    z = loc_diff / p.scale
    abs_moment = math.sqrt(2 / math.pi) * p.scale * (-0.5 * z.pow(2)).exp() + loc_diff * (math.sqrt(0.5) * z).erf()
    return -scale_ratio.log() + abs_moment / q.scale - 0.5 * (1 + math.log(0.5 * math.pi))


@register_kl(Gamma, Exponential)
def _kl_gamma_exponential(p, q):
    return -p.entropy() - q.rate.log() + q.rate * p.concentration / p.rate


def _normal_cross_entropy(q, first_moment, second_moment):
    """-E_p[log q(x)] for q Normal, from p's first two moments."""
    var = q.scale.pow(2)
    return 0.5 * (2 * math.pi * var).log() + (0.5 * second_moment - q.loc * first_moment + 0.5 * q.loc.pow(2)) / var


@register_kl(Exponential, Normal)
def _kl_exponential_normal(p, q):
    return -p.entropy() + _normal_cross_entropy(q, p.rate.reciprocal(), 2 * p.rate.pow(-2))


@register_kl(Gamma, Normal)
def _kl_gamma_normal(p, q):
    second = (p.concentration.pow(2) + p.concentration) / p.rate.pow(2)
    return -p.entropy() + _normal_cross_entropy(q, p.concentration / p.rate, second)


@register_kl(Laplace, Normal)
def _kl_laplace_normal(p, q):
    return -p.entropy() + _normal_cross_entropy(q, p.loc, p.loc.pow(2) + 2 * p.scale.pow(2))


@register_kl(Beta, Normal)
def _kl_beta_normal(p, q):
    mean = p.concentration1 / (p.concentration1 + p.concentration0)
    var = mean * (1 - mean) / (p.concentration1 + p.concentration0 + 1)
    return -p.entropy() + _normal_cross_entropy(q, mean, var + mean.pow(2))


@register_kl(Gumbel, Normal)
def _kl_gumbel_normal(p, q):
    mean = p.loc + p.scale * euler_constant
    var = (math.pi * p.scale).pow(2) / 6
    return -p.entropy() + _normal_cross_entropy(q, mean, var + mean.pow(2))


@register_kl(Normal, Gumbel)
def _kl_normal_gumbel(p, q):
    # -E_p[log q(x)] = log s_q + E[(x - m_q)/s_q] + E[exp(-(x - m_q)/s_q)] (a lognormal moment)
    mean_ratio = p.loc / q.scale
    var_ratio = (p.scale / q.scale).pow(2)
    loc_ratio = q.loc / q.scale
    t3 = (-mean_ratio + 0.5 * var_ratio + loc_ratio).exp()
    return -0.5 * var_ratio.log() + mean_ratio - loc_ratio + t3 - 0.5 * (1 + math.log(2 * math.pi))


def _x_log_x(t):
    return t * t.log()


@register_kl(Uniform, Exponential)
def _kl_uniform_exponential(p, q):
    result = q.rate * (p.high + p.low) / 2 - ((p.high - p.low) * q.rate).log()
    return _infinite_where(p.low < 0, result)


@register_kl(Uniform, Gamma)
def _kl_uniform_gamma(p, q):
    width = p.high - p.low
    # E_p[log x] = (h log h - l log l - (h - l)) / (h - l)
    mean_log = (_x_log_x(p.high) - _x_log_x(p.low) - width) / width
    result = (-width.log() + lgamma(q.concentration) - q.concentration * q.rate.log()
              + (1 - q.concentration) * mean_log + q.rate * (p.high + p.low) / 2)
    return _infinite_where(p.low < 0, result)


def _infinite_like(t):
    return full_like(t, math.inf)


def _kl_infinite(param):
    def kl(p, q):
        return _infinite_like(getattr(p, param))
    return kl


# the support of p is not inside the support of q
for _p, _q, _param in [(Normal, Beta, "loc"), (Normal, Exponential, "loc"), (Normal, Gamma, "loc"),
                       (Normal, Uniform, "loc"), (Laplace, Beta, "loc"), (Laplace, Exponential, "loc"),
                       (Laplace, Gamma, "loc"), (Laplace, Uniform, "loc"), (Gumbel, Beta, "loc"),
                       (Gumbel, Exponential, "loc"), (Gumbel, Gamma, "loc"), (Gumbel, Uniform, "loc"),
                       (Exponential, Beta, "rate"), (Exponential, Uniform, "rate"), (Gamma, Beta, "concentration"),
                       (Gamma, Uniform, "concentration"), (Poisson, Bernoulli, "rate"),
                       (Poisson, Binomial, "rate")]:
    register_kl(_p, _q)(_kl_infinite(_param))


@register_kl(LowRankMultivariateNormal, LowRankMultivariateNormal)
def _kl_lowrank_lowrank(p, q):
    # KL = 1/2 (log det S_q - log det S_p + tr(S_q^-1 S_p) + (m_q - m_p)^T S_q^-1 (m_q - m_p) - n), with
    # S_q^-1 = D_q^-1 - A^T A, A = L^-1 W_q^T D_q^-1 (Woodbury, L the capacitance's Cholesky factor), so
    # tr(S_q^-1 S_p) = tr(D_p / D_q) + ||D_q^-1/2 W_p||^2 - ||A D_p^1/2||^2 - ||A W_p||^2
    if p.event_shape != q.event_shape:
        raise ValueError("KL-divergence between two Low Rank Multivariate Normals with different event shapes "
                         "cannot be computed")
    pW, pD = p._unbroadcasted_cov_factor, p._unbroadcasted_cov_diag
    qW, qD = q._unbroadcasted_cov_factor, q._unbroadcasted_cov_diag
    term1 = _batch_lowrank_logdet(qW, qD, q._capacitance_tril) - _batch_lowrank_logdet(pW, pD, p._capacitance_tril)
    term3 = _batch_lowrank_mahalanobis(qW, qD, q.loc - p.loc, q._capacitance_tril)
    A = linalg.solve_triangular(q._capacitance_tril, qW.mT / qD.unsqueeze(-2), upper=False)
    term2 = ((pD / qD).sum(-1) + (pW * qD.rsqrt().unsqueeze(-1)).pow(2).sum((-2, -1))
             - (A * pD.sqrt().unsqueeze(-2)).pow(2).sum((-2, -1)) - (A @ pW).pow(2).sum((-2, -1)))
    return 0.5 * (term1 + term2 + term3 - p.event_shape[0])
