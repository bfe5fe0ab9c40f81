"""Random sampling beyond the core's uniform, normal and integer draws: multinomial, poisson, binomial and the
in-place fills random_, exponential_, geometric_, cauchy_, log_normal_, with torch's signatures, argument checks
and generator= (Note [Generators as swapped core states] in generator.py).

Each is built on the core's draws: U[0, 1) in float64 (53 random bits) or exact integers, transformed in numpy by
the inverse of the distribution's CDF (exponential, geometric, cauchy), or by a comparison with the CDF
(multinomial). Poisson and binomial have no closed-form inverse: their draws come from numpy's samplers on a PCG64
seeded by two integers from the core's stream, so the core's state (the generator's seed) still fixes them.
Gradients are zero, as torch's: a fill over a value with history records e.g. ExponentialBackward, poisson
PoissonBackward; binomial records none (torch's has no formula).
"""
import numpy as np

from ... import _C
from ...autograd.grad_mode import no_grad
from .. import bridge
from ..args import (Tensor, check_factory_options, core, dtype_arg, finish, get_default_dtype, number, refuse_complex,
                    sizes_arg, tensor_arg, to_int, type_name)
from ..device import check_device
from ..generator import drawing
from ..inplace import overwrite
from ..node_names import rename
from .creation import _dtype_or
from .pointwise import add, mul

_INT_RANGE = {"uint8": (0, 2 ** 8 - 1), "int8": (-2 ** 7, 2 ** 7 - 1), "int16": (-2 ** 15, 2 ** 15 - 1),
              "int32": (-2 ** 31, 2 ** 31 - 1), "int64": (-2 ** 63, 2 ** 63 - 1), "bool": (0, 1)}
# random_() with no bounds on a float tensor: [0, 2**digits], every integer of which the dtype holds exactly
_FLOAT_DIGITS = {"float16": 11, "bfloat16": 8, "float32": 24, "float64": 53}


def _uniform(shape, generator, op):
    """U[0, 1) in float64, as a numpy array, from `generator` (None: the global one)."""
    with drawing(generator, op):
        u = _C.rand(tuple(shape), _C.float64)
    return np.array(bridge.view(u), dtype=np.float64)


def _to_tensor(values, dtype):
    t = bridge.share(np.asarray(values, order="C"))
    return t if t.dtype is dtype else _C.to_dtype(t, dtype)


def _write(self, values, op):
    """Overwrites self (an in-place op, refused on a leaf that requires grad in grad mode, as torch; over a value
    with history the gradient becomes zero, as torch records it)."""
    before = _C.inplace_input(self, op, False)
    _C.assign_inplace(self, overwrite(before, _to_tensor(values, self.dtype), op), op)
    return self


def _real(value, op, name):
    if isinstance(value, Tensor):
        value = value.item()
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise TypeError(f"{op}: expected a number as {name}, got {type_name(value)}.")
    return float(value)


def _continuous(self, op, distribution):
    if not self.dtype.is_floating_point:
        raise RuntimeError(f"{op}: {distribution} distribution is a continuous probability distribution; expected a "
                           f"floating-point tensor, got {self.dtype.name}.")


# ----- integers -------------------------------------------------------------------------------------------------

def check_integer_bounds(dtype, low, high, op):
    """[low, high) must lie in an integer dtype's range (a draw outside it would wrap around)."""
    if dtype.is_floating_point or dtype.name not in _INT_RANGE:
        return
    lo_limit, hi_limit = _INT_RANGE[dtype.name]
    if not lo_limit <= low <= hi_limit:
        raise RuntimeError(f"{op}: from={low} is out of bounds for {dtype.name} ([{lo_limit}, {hi_limit}]).")
    if not lo_limit <= high - 1 <= hi_limit:
        raise RuntimeError(f"{op}: to - 1 = {high - 1} is out of bounds for {dtype.name} ([{lo_limit}, {hi_limit}]).")


def random_integers(shape, dtype, low, high, generator, op):
    """Integers uniform on [low, high) (low >= -2**63, high <= 2**63: the whole int64 range is reachable, which the
    core's randint, with int64 bounds, cannot give in one call) as a tensor of `dtype`."""
    if not low < high:
        raise RuntimeError(f"{op}: expected 'from' to be less than 'to', but got from={low} >= to={high}.")
    shape = tuple(shape)
    with drawing(generator, op):
        if high <= 2 ** 63 - 1:
            t = _C.randint(low, high, shape, _C.int64)
        elif low > -2 ** 63:                     # [low, 2**63): one step down, drawn, then one up
            t = _C.add(_C.randint(low - 1, high - 1, shape, _C.int64), _C.full((), 1, _C.int64))
        else:                                    # every int64: 64 random bits from two 32-bit halves
            hi = np.array(bridge.view(_C.randint(0, 2 ** 32, shape, _C.int64))).astype(np.uint64)
            lo = np.array(bridge.view(_C.randint(0, 2 ** 32, shape, _C.int64))).astype(np.uint64)
            t = bridge.share(((hi << np.uint64(32)) | lo).view(np.int64))
    return t if t.dtype is dtype else _C.to_dtype(t, dtype)


def random_(self, *args, generator=None, **kwargs):
    """random_() (every value the dtype holds; [0, 2**digits] for floats), random_(to) ([0, to)) or
    random_(from, to) ([from, to); to=None: up to the dtype's largest value): uniform integers, in place."""
    op = "random_"
    names = ("from", "to")
    if len(args) > 2:
        raise TypeError(f"{op}: expected at most 2 positional arguments (from, to), got {len(args)}.")
    given = dict(zip(names, args))
    for k, v in kwargs.items():
        if k not in names or k in given:
            raise TypeError(f"{op}: got an unexpected or repeated keyword argument {k!r}.")
        given[k] = v
    name = self.dtype.name
    if name in _FLOAT_DIGITS:
        top = 2 ** _FLOAT_DIGITS[name]          # the largest value drawn without bounds (inclusive)
    elif name in _INT_RANGE:
        top = _INT_RANGE[name][1]
    else:
        raise RuntimeError(f"{op}: not implemented for {self.dtype.name} tensors.")
    if not given:                               # random_()
        low, high = 0, top + 1
    elif "from" not in given:                   # random_(to=...)
        low, high = 0, to_int(given["to"], op, "to")
    elif len(args) == 1 and "to" not in given and not kwargs:   # random_(to)
        low, high = 0, to_int(given["from"], op, "to")
    else:                                       # random_(from, to) / random_(from, None)
        low = to_int(given["from"], op, "from")
        high = top + 1 if given.get("to") is None else to_int(given["to"], op, "to")
    if not low < high:
        raise RuntimeError(f"{op}: expected 'from' to be less than 'to', but got from={low} >= to={high}.")
    if not self.dtype.is_floating_point:
        check_integer_bounds(self.dtype, low, high, op)
    elif not (-2 ** 63 <= low and high <= 2 ** 63):
        raise RuntimeError(f"{op}: the range [{low}, {high}) is outside int64's.")
    t = random_integers(tuple(self.shape), _C.int64, low, high, generator, op)
    before = _C.inplace_input(self, op, False)
    _C.assign_inplace(self, overwrite(before, t if self.dtype is _C.int64 else _C.to_dtype(t, self.dtype), op), op)
    return self


# ----- continuous and geometric fills -----------------------------------------------------------------------------

def exponential_(self, lambd=1.0, *, generator=None):
    """Exponential(lambd) samples, in place: -log(1 - U) / lambd."""
    op = "exponential_"
    lambd = _real(lambd, op, "lambd")
    _continuous(self, op, "the exponential")
    if not lambd > 0:
        raise RuntimeError(f"{op}: expected lambda > 0.0, but found lambda={lambd:g}.")
    u = _uniform(self.shape, generator, op)
    return _write(self, -np.log1p(-u) / lambd, op)


def geometric_(self, p, *, generator=None):
    """Geometric(p) samples on {1, 2, ...} (trials up to the first success), in place: floor(log(V) / log(1 - p))
    + 1 with V = 1 - U in (0, 1], whose probability of k is (1 - p)**(k - 1) * p. On an integer tensor values
    beyond the dtype's largest are clamped to it."""
    op = "geometric_"
    p = _real(p, op, "p")
    if not 0 < p < 1:
        raise RuntimeError(f"{op}: expected p to be in (0, 1), but got p={p:g}.")
    if self.dtype is _C.bool:
        raise RuntimeError(f"{op}: not implemented for bool tensors.")
    v = 1.0 - _uniform(self.shape, generator, op)
    k = np.floor(np.log(v) / np.log1p(-p)) + 1.0
    if not self.dtype.is_floating_point:
        k = np.minimum(k, float(_INT_RANGE[self.dtype.name][1])).astype(np.int64)
    return _write(self, k, op)


def cauchy_(self, median=0.0, sigma=1.0, *, generator=None):
    """Cauchy(median, sigma) samples, in place: median + sigma * tan(pi * (U - 1/2))."""
    op = "cauchy_"
    median, sigma = _real(median, op, "median"), _real(sigma, op, "sigma")
    _continuous(self, op, "the Cauchy")
    if not sigma > 0:
        raise RuntimeError(f"{op}: expected sigma > 0.0, but found sigma={sigma:g}.")
    u = _uniform(self.shape, generator, op)
    return _write(self, median + sigma * np.tan(np.pi * (u - 0.5)), op)


def log_normal_(self, mean=1.0, std=2.0, *, generator=None):
    """exp(N(mean, std**2)) samples, in place (mean and std are those of the underlying normal)."""
    op = "log_normal_"
    mean, std = _real(mean, op, "mean"), _real(std, op, "std")
    if not self.dtype.is_floating_point:      # torch: NotImplementedError for an integer tensor
        raise NotImplementedError(f"{op}: not implemented for {self.dtype.name} tensors; expected a "
                                  f"floating-point tensor.")
    if not std > 0:
        raise RuntimeError(f"{op}: expected std > 0.0, but found std={std:g}.")
    with drawing(generator, op):
        n = _C.randn(tuple(self.shape), _C.float64)
    return _write(self, np.exp(mean + std * np.array(bridge.view(n))), op)


# ----- multinomial, poisson --------------------------------------------------------------------------------------

def multinomial(input, num_samples, replacement=False, *, generator=None):
    """num_samples category indices per row of input (1-D: one distribution; 2-D: one per row), drawn with
    probability proportional to the row's non-negative weights; with replacement or without (then no index repeats
    within a row, and a zero weight is drawn only when the non-zero ones are used up). int64 result of shape
    (num_samples,) or (rows, num_samples).

    With replacement: the index whose CDF interval holds U. Without: the num_samples smallest keys E_i / w_i
    (E_i ~ Exp(1)), which is sequential weighted sampling without replacement (the exponential race), as torch's
    algorithm."""
    op = "multinomial"
    tensor_arg(input, op)
    if isinstance(num_samples, bool) or not isinstance(num_samples, (int, np.integer)) and not (
            isinstance(num_samples, Tensor) and not num_samples.dtype.is_floating_point):
        raise TypeError(f"{op}: num_samples must be an int, not {type_name(num_samples)}.")
    num_samples = to_int(num_samples, op, "num_samples")
    if not isinstance(replacement, (bool, np.bool_)):
        raise TypeError(f"{op}: replacement must be a bool, not {type_name(replacement)}.")
    if input.ndim not in (1, 2):
        raise RuntimeError(f"{op}: prob_dist must be 1 or 2 dim, got a tensor of {input.ndim} dimensions.")
    if not input.dtype.is_floating_point:
        raise RuntimeError(f"{op}: only floating-point dtypes are supported for input, got {input.dtype.name}.")
    if num_samples <= 0:
        raise RuntimeError(f"{op}: cannot sample n_sample <= 0 samples (num_samples={num_samples}).")
    n = input.shape[-1]
    if not replacement and num_samples > n:
        raise RuntimeError(f"{op}: cannot sample n_sample > prob_dist.size(-1) samples without replacement "
                           f"({num_samples} > {n}).")
    w = np.array(bridge.view(_C.to_dtype(input.detach(), _C.float64)), dtype=np.float64).reshape(-1, n)
    rows = w.shape[0]
    if w.size and (not np.isfinite(w).all() or (w < 0).any()):
        raise RuntimeError(f"{op}: probability tensor contains either `inf`, `nan` or element < 0.")
    if rows and (w.sum(axis=1) <= 0).any():
        raise RuntimeError(f"{op}: invalid multinomial distribution (sum of probabilities <= 0).")
    if replacement:
        cdf = np.cumsum(w, axis=1)
        cdf /= cdf[:, -1:]                       # the last entry exactly 1.0, so U < 1 always falls inside
        u = _uniform((rows, num_samples), generator, op).reshape(rows, num_samples)
        out = np.stack([np.searchsorted(cdf[r], u[r], side="right") for r in range(rows)]) if rows else \
            np.zeros((0, num_samples), dtype=np.int64)
        out = np.minimum(out, n - 1)
    else:
        e = -np.log1p(-_uniform((rows, n), generator, op).reshape(rows, n))
        with np.errstate(divide="ignore"):
            keys = e / w                          # a zero weight: inf, drawn after every non-zero one
        out = np.argsort(keys, axis=1, kind="stable")[:, :num_samples]
    out = out.astype(np.int64).reshape((num_samples,) if input.ndim == 1 else (rows, num_samples))
    return bridge.share(np.asarray(out, order="C"))


def poisson(input, generator=None):
    """Poisson(rate) samples, one per element of input (the rates, >= 0), in input's dtype; zero gradient."""
    op = "poisson"
    tensor_arg(input, op)
    if not input.dtype.is_floating_point:
        raise NotImplementedError(f"{op}: not implemented for {input.dtype.name} tensors; expected "
                                  f"floating-point rates.")
    rates = np.array(bridge.view(_C.to_dtype(input.detach(), _C.float64)), dtype=np.float64)
    if not (rates >= 0).all():                   # also refuses nan
        raise RuntimeError(f"{op}: invalid Poisson rate, expected every rate to be non-negative (and not nan).")
    if (rates > 1e18).any():
        raise RuntimeError(f"{op}: a rate above 1e18 is not supported, got {rates.max():g}.")
    sample = _to_tensor(np.asarray(_numpy_rng(generator, op).poisson(rates), dtype=np.float64), input.dtype)
    if not (input.requires_grad and _C.is_grad_enabled()):
        return sample
    # torch records PoissonBackward, whose gradient is zero: the sample, with input as a zero-gradient parent
    written = _C.where(_C.full(tuple(input.shape), True, _C.bool), sample, input)
    return rename(written, "PoissonBackward", (input,))


def _numpy_rng(generator, op):
    """A numpy Generator seeded by two integers drawn from `generator` (None: the global one): for the samplers
    with no closed-form inverse (poisson, binomial), whose draws the core's state still fixes."""
    with drawing(generator, op):
        seed = _C.randint(0, 2 ** 62, (2,), _C.int64)
    return np.random.Generator(np.random.PCG64([int(s) for s in np.array(bridge.view(seed))]))


def binomial(count, prob, generator=None):
    """Binomial(count, prob) samples, elementwise (count and prob broadcast together): the number of successes in
    `count` trials of probability `prob`; in count's dtype, no gradient. torch checks little here (a negative count
    gives 0, a nan one hangs); dyngrad refuses counts that are not whole numbers >= 0 and probs outside [0, 1]."""
    op = "binomial"
    tensor_arg(count, op, "count")
    tensor_arg(prob, op, "prob")
    if not count.dtype.is_floating_point:
        raise ValueError(f"{op}: only floating-point dtypes are supported for count, got {count.dtype.name}.")
    if prob.dtype is not count.dtype:
        raise RuntimeError(f"{op}: expected prob of count's dtype {count.dtype.name}, got {prob.dtype.name}.")
    n = np.array(bridge.view(_C.to_dtype(count.detach(), _C.float64)), dtype=np.float64)
    p = np.array(bridge.view(_C.to_dtype(prob.detach(), _C.float64)), dtype=np.float64)
    try:
        n, p = np.broadcast_arrays(n, p)
    except ValueError:
        raise RuntimeError(f"{op}: the shapes of count {tuple(count.shape)} and prob {tuple(prob.shape)} cannot be "
                           f"broadcast together.") from None
    if n.size and not ((n >= 0) & (n == np.floor(n)) & (n < 2 ** 62)).all():
        raise RuntimeError(f"{op}: expected every count to be a whole number >= 0 (and below 2**62).")
    if p.size and not ((p >= 0) & (p <= 1)).all():
        raise RuntimeError(f"{op}: expected every prob to be in [0, 1].")
    rng = _numpy_rng(generator, op)
    return _to_tensor(rng.binomial(n.astype(np.int64), p).astype(np.float64), count.dtype)


# ----- factories: rand, randn, randint, randperm, normal, bernoulli and their _like forms --------------------------

# Note [Complex random numbers]: as torch, a complex draw is a draw of its view_as_real: rand gives real and
# imaginary parts each from U[0, 1); randn parts each from N(0, 1/2), so E|z|^2 = 1; uniform_(a, b) fills both
# parts from U[a, b) and normal_(mean, std) both from N(mean, std^2 / 2).
_REAL_OF = {"complex64": "float32", "complex128": "float64"}
_HALF_VARIANCE = 0.5 ** 0.5


def _draw(draw, shape, dtype, normal):
    """draw(shape, dtype) (the core's rand or randn), by Note [Complex random numbers] for a complex dtype."""
    if not dtype.is_complex:
        return draw(shape, dtype)
    pairs = draw(tuple(shape) + (2,), dtype_arg(_REAL_OF[dtype.name]))
    if normal:
        pairs = _C.mul(pairs, _C.scalar_operand(_HALF_VARIANCE, pairs))
    return _C.view_as_complex(pairs)


def _random_like(op, draw):
    def factory(input, *, generator=None, dtype=None, layout=None, device=None, requires_grad=False,
                memory_format=None):
        tensor_arg(input, op)
        check_device(device, op)
        check_factory_options(op, layout)
        dt = _float_dtype(_dtype_or(dtype, input.dtype, op), op)
        with drawing(generator, op):
            return finish(_draw(draw, tuple(input.shape), dt, op == "randn_like"), requires_grad)
    factory.__name__ = factory.__qualname__ = op
    factory.__doc__ = f"{op[:-5]}() with the shape (and by default the dtype) of `input`."
    return factory


rand_like = _random_like("rand_like", core("rand"))


randn_like = _random_like("randn_like", core("randn"))


def _float_dtype(dtype, op):
    if not (dtype.is_floating_point or dtype.is_complex):
        raise RuntimeError(f"{op}: expected a floating-point or complex dtype, got {dtype.name}.")
    return dtype


def rand(*size, generator=None, dtype=None, device=None, requires_grad=False):
    """Uniform samples from [0, 1)."""
    check_device(device, "rand")
    dt = _float_dtype(_dtype_or(dtype, get_default_dtype(), "rand"), "rand")
    shape = sizes_arg(size, "rand")
    with drawing(generator, "rand"):
        return finish(_draw(_C.rand, shape, dt, False), requires_grad)


def randn(*size, generator=None, dtype=None, device=None, requires_grad=False):
    """Samples from the standard normal distribution."""
    check_device(device, "randn")
    dt = _float_dtype(_dtype_or(dtype, get_default_dtype(), "randn"), "randn")
    shape = sizes_arg(size, "randn")
    with drawing(generator, "randn"):
        return finish(_draw(_C.randn, shape, dt, True), requires_grad)


def randint(low=0, high=None, size=None, *, generator=None, dtype=None, device=None,
            requires_grad=False):
    """randint(high, size) or randint(low, high, size): integers from [low, high)."""
    check_device(device, "randint")
    if size is None and isinstance(high, (tuple, list)):
        low, high, size = 0, low, high
    if high is None or size is None:
        raise TypeError("randint: expected randint(high, size) or randint(low, high, size).")
    low, high = to_int(low, "randint", "low"), to_int(high, "randint", "high")
    shape, dt = sizes_arg((size,), "randint"), _dtype_or(dtype, _C.int64, "randint")
    if low < high:                            # (the core refuses low >= high) a draw must not wrap, as torch
        check_integer_bounds(dt, low, high, "randint")
    with drawing(generator, "randint"):
        return finish(_C.randint(low, high, shape, dt), requires_grad)


def randint_like(input, low=0, high=None, *, generator=None, dtype=None, layout=None, device=None,
                 requires_grad=False, memory_format=None):
    """randint_like(input, high) or randint_like(input, low, high): integers from [low, high) with input's shape,
    in input's dtype unless dtype= says otherwise (floats hold the integers)."""
    tensor_arg(input, "randint_like")
    check_device(device, "randint_like")
    check_factory_options("randint_like", layout)
    if high is None:
        if low == 0 and not isinstance(low, Tensor):
            raise TypeError("randint_like: expected randint_like(input, high) or randint_like(input, low, high).")
        low, high = 0, low
    dt = _dtype_or(dtype, input.dtype, "randint_like")
    low, high = to_int(low, "randint_like", "low"), to_int(high, "randint_like", "high")
    if low < high:
        check_integer_bounds(dt, low, high, "randint_like")
    return finish(random_integers(tuple(input.shape), dt, low, high, generator, "randint_like"), requires_grad)


def randperm(n, *, generator=None, dtype=None, device=None, requires_grad=False):
    """A random permutation of 0..n-1."""
    check_device(device, "randperm")
    n = to_int(n, "randperm", "n")
    with drawing(generator, "randperm"):
        t = _C.randperm(n)
    return finish(t if dtype is None else _C.to_dtype(t, dtype_arg(dtype, "randperm")), requires_grad)


def normal(mean, std=1.0, size=None, *, generator=None, dtype=None, device=None,
           requires_grad=False):
    """Samples of N(mean, std**2): numbers with a size, or tensors of means and/or stds (broadcast); std defaults to
    1 with a tensor of means, as torch.normal(mean)."""
    check_device(device, "normal")
    if isinstance(std, Tensor):
        values = bridge.host_array(std.detach())
        if values.size and not (values >= 0).all():
            raise RuntimeError("normal: expected every element of std to be >= 0.0.")
    elif not float(number(std, "normal", "std")) >= 0:
        raise RuntimeError(f"normal: expected std >= 0.0, but found std={float(std):g}.")
    if isinstance(mean, Tensor) or isinstance(std, Tensor):
        like = mean if isinstance(mean, Tensor) else std
        a = tuple(mean.shape) if isinstance(mean, Tensor) else ()
        b = tuple(std.shape) if isinstance(std, Tensor) else ()
        try:
            shape = np.broadcast_shapes(a, b)
        except ValueError:
            raise RuntimeError(f"normal: the shapes of mean {a} and std {b} cannot be broadcast together.") from None
        with drawing(generator, "normal"):
            noise = _C.randn(shape, _float_dtype(like.dtype, "normal"))
        with _no_grad():
            return add(mul(noise, std), mean)
    if size is None:
        raise TypeError("normal: with number mean and std, size is required.")
    dt = _float_dtype(_dtype_or(dtype, get_default_dtype(), "normal"), "normal")
    shape = sizes_arg((size,), "normal")
    with drawing(generator, "normal"):
        t = _C.randn(shape, dt)
    return finish(_C.add(_C.mul(t, _C.scalar_operand(float(std), t)), _C.scalar_operand(float(mean), t)),
                  requires_grad)


def _no_grad():
    return no_grad()


def bernoulli(input, p=None, *, generator=None):
    """1 with probability input (elementwise), else 0; no gradient."""
    tensor_arg(input, "bernoulli")
    refuse_complex("bernoulli", input)
    probs = input.detach()
    if p is not None:
        probs = _C.full(input.shape, float(p), input.dtype if input.dtype.is_floating_point else _C.float32)
    if not probs.dtype.is_floating_point:
        probs = _C.to_dtype(probs, _C.float32)
    values = bridge.host_array(probs)
    if values.size and not ((values >= 0) & (values <= 1)).all():
        raise RuntimeError("bernoulli: expected every probability to be in [0, 1].")
    with drawing(generator, "bernoulli"):
        u = _C.rand(probs.shape, probs.dtype)
    return _C.to_dtype(_C.compare("lt", u, probs), probs.dtype)


# ----- in-place fills: uniform_, normal_, bernoulli_ ---------------------------------------------------------------

def _random_fill(op, make):
    """uniform_/normal_: the new values are written as an in-place op (refused on a leaf that requires grad in
    grad mode, as torch; nn.init runs them under no_grad)."""
    def method(self, *args, **kwargs):
        if not (self.dtype.is_floating_point or self.dtype.is_complex):
            raise RuntimeError(f"{op}: expected a floating-point or complex tensor, got {self.dtype.name}.")
        before = _C.inplace_input(self, op, False)
        _C.assign_inplace(self, overwrite(before, make(before, *args, **kwargs), op), op)
        return self
    method.__name__ = method.__qualname__ = op
    return method


def _affine(x, scale, shift):
    """x * scale + shift; of a complex x on both parts (Note [Complex random numbers])."""
    if x.dtype.is_complex:
        return _C.view_as_complex(_affine(_C.view_as_real(x), scale, shift))
    return _C.add(_C.mul(x, _C.scalar_operand(scale, x)), _C.scalar_operand(shift, x))


def _uniform_values(self, a=0.0, b=1.0, *, generator=None):
    lo, hi = float(number(a, "uniform_", "from")), float(number(b, "uniform_", "to"))
    if lo > hi:
        raise RuntimeError(f"uniform_: expected a [from, to) range with from <= to, but got from={lo:g} > to={hi:g}.")
    with drawing(generator, "uniform_"):
        u = _draw(_C.rand, tuple(self.shape), self.dtype, False)
    return _affine(u, hi - lo, lo)


def _normal_values(self, mean=0.0, std=1.0, *, generator=None):
    mean, std = float(number(mean, "normal_", "mean")), float(number(std, "normal_", "std"))
    if not std >= 0:
        raise RuntimeError(f"normal_: expected std >= 0.0, but found std={std:g}.")
    with drawing(generator, "normal_"):
        n = _draw(_C.randn, tuple(self.shape), self.dtype, True)
    return _affine(n, std, mean)


uniform_ = _random_fill("uniform_", _uniform_values)


normal_ = _random_fill("normal_", _normal_values)


def bernoulli_(self, p=0.5, *, generator=None):
    """Each element becomes 1 with probability p (a number, or a tensor of probabilities broadcast to self)."""
    float_dtype = self.dtype if self.dtype.is_floating_point else _C.float32
    if isinstance(p, Tensor):
        probs = _C.to_dtype(p.detach(), float_dtype)
        values = bridge.host_array(probs)
        if values.size and not ((values >= 0) & (values <= 1)).all():
            raise RuntimeError("bernoulli_: expected every probability p to be in [0, 1].")
    else:
        value = float(number(p, "bernoulli_", "p"))
        if not 0 <= value <= 1:
            raise RuntimeError(f"bernoulli_: expected p to be in [0, 1], but got p={value:g}.")
        probs = _C.scalar_operand(value, _C.full((), 0.0, float_dtype))
    with drawing(generator, "bernoulli_"):
        u = _C.rand(tuple(self.shape), float_dtype)
    sample = _C.compare("lt", u, probs)
    before = _C.inplace_input(self, "bernoulli_", False)
    _C.assign_inplace(self, overwrite(before, sample, "bernoulli_"), "bernoulli_")
    return self
