"""Forward-mode AD through the custom autograd.Functions of the dyngrad package (numpy forwards, host-computed
derivatives), on both engines.

test_every_function_has_a_forward_derivative finds every Function subclass the package defines: each must define
jvp (inherited counts) or be listed in NO_JVP with the reason its forward needs none, so a new Function without a
forward formula fails here. The rest checks the tangents against float64 central finite differences and against
torch.func.jvp (where torch is installed), the ops torch gives no forward derivative (they raise as torch), the
piecewise-constant ops (zero tangents, as torch) and second derivatives through nested levels.
"""
import importlib
import pathlib
import warnings

import numpy as np
import pytest

# Function -> why it has no jvp: its forward is written in the engine's ops, which carry the tangents themselves
NO_JVP = {
    "dyngrad.utils.checkpoint._ReentrantCheckpoint": "forward runs the checkpointed function's engine ops (under "
                                                     "no_grad, which does not stop forward AD)",
}


def _package_functions():
    """Every autograd.Function subclass defined in the dyngrad package (every module imported; the reference
    engine's core, the benchmark and the run-as-a-script modules aside), by module.qualname."""
    import dyngrad
    from dyngrad.autograd.function import Function
    root = pathlib.Path(dyngrad.__file__).parent
    for path in sorted(root.rglob("*.py")):
        parts = list(path.relative_to(root.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        name = ".".join(parts)
        if parts[-1] == "__main__" or name == "dyngrad.run" or name.startswith(("dyngrad.bench", "dyngrad.reference")):
            continue
        importlib.import_module(name)
    found, stack = {}, [Function]
    while stack:
        for sub in stack.pop().__subclasses__():
            if sub.__module__.startswith("dyngrad."):
                found.setdefault(f"{sub.__module__}.{sub.__qualname__}", []).append(sub)
            stack.append(sub)
    return found, Function


def test_every_function_has_a_forward_derivative():
    found, Function = _package_functions()
    assert len(found) > 40, sorted(found)         # the walk did find the package's Functions
    missing = sorted(name for name, classes in found.items()
                     if any(c.jvp is Function.jvp for c in classes) and name not in NO_JVP)
    assert not missing, ("these autograd.Functions define no jvp (forward-mode AD raises NotImplementedError on "
                         f"them): {missing}; give each one, or list it in NO_JVP with the reason it needs none")
    stale = sorted(name for name in NO_JVP if name not in found or any(c.jvp is not Function.jvp for c in found[name]))
    assert not stale, f"NO_JVP lists Functions that are gone or now define jvp: {stale}"


# ----- tangents ----------------------------------------------------------------------------------------------------

def _u(low, high, *shape):
    return lambda g: g.uniform(low, high, shape)


def _n(*shape):
    return lambda g: g.standard_normal(shape)


def _checkpointed(dg, x):
    with warnings.catch_warnings():   # no input requires grad (forward mode only): the reentrant mode warns so
        warnings.simplefilter("ignore")
        return dg.utils.checkpoint.checkpoint(lambda a: dg.sin(a) * a, x, use_reentrant=True)


# name -> (input makers, fn(dg, *tensors), torch_fn(torch, *tensors) or None): float64 inputs; binary ops broadcast
CASES = {
    "exp2": ([_n(4)], lambda dg, x: dg.exp2(x), lambda T, x: T.exp2(x)),
    "erfc": ([_n(4)], lambda dg, x: dg.special.erfc(x), lambda T, x: T.special.erfc(x)),
    "erfinv": ([_u(-0.9, 0.9, 4)], lambda dg, x: dg.erfinv(x), lambda T, x: T.erfinv(x)),
    "lgamma": ([_u(0.5, 3, 4)], lambda dg, x: dg.lgamma(x), lambda T, x: T.lgamma(x)),
    "digamma": ([_u(0.5, 3, 4)], lambda dg, x: dg.digamma(x), lambda T, x: T.digamma(x)),
    "polygamma": ([_u(0.5, 3, 4)], lambda dg, x: dg.polygamma(2, x), lambda T, x: T.polygamma(2, x)),
    "sinc": ([_n(4)], lambda dg, x: dg.sinc(x), lambda T, x: T.sinc(x)),
    "logit": ([_u(0.1, 0.9, 4)], lambda dg, x: dg.logit(x), lambda T, x: T.logit(x)),
    "logit_eps": ([lambda g: np.array([0.05, 0.3, 0.6, 0.95])], lambda dg, x: dg.logit(x, eps=0.1),
                  lambda T, x: T.logit(x, eps=0.1)),
    "entr": ([_u(0.2, 2, 4)], lambda dg, x: dg.special.entr(x), lambda T, x: T.special.entr(x)),
    "erfcx": ([_n(4)], lambda dg, x: dg.special.erfcx(x), lambda T, x: T.special.erfcx(x)),
    "log_ndtr": ([_n(4)], lambda dg, x: dg.special.log_ndtr(x), lambda T, x: T.special.log_ndtr(x)),
    "ndtri": ([_u(0.1, 0.9, 4)], lambda dg, x: dg.special.ndtri(x), lambda T, x: T.special.ndtri(x)),
    "i0": ([_n(4)], lambda dg, x: dg.special.i0(x), lambda T, x: T.special.i0(x)),
    "i0e": ([_u(0.3, 2, 4)], lambda dg, x: dg.special.i0e(x), lambda T, x: T.special.i0e(x)),
    "i1": ([_n(4)], lambda dg, x: dg.special.i1(x), lambda T, x: T.special.i1(x)),
    "i1e": ([_u(0.3, 2, 4)], lambda dg, x: dg.special.i1e(x), lambda T, x: T.special.i1e(x)),
    "xlogy": ([_n(2, 3), _u(0.5, 2, 3)], lambda dg, x, y: dg.xlogy(x, y), lambda T, x, y: T.xlogy(x, y)),
    "xlog1py": ([_n(2, 3), _u(0.5, 2, 2, 1)], lambda dg, x, y: dg.special.xlog1py(x, y),
                lambda T, x, y: T.special.xlog1py(x, y)),
    "hypot": ([_n(2, 3), _n(3)], lambda dg, a, b: dg.hypot(a, b), lambda T, a, b: T.hypot(a, b)),
    "logaddexp": ([_n(2, 3), _n(2, 1)], lambda dg, a, b: dg.logaddexp(a, b), lambda T, a, b: T.logaddexp(a, b)),
    "logaddexp2": ([_n(3), _n(2, 3)], lambda dg, a, b: dg.logaddexp2(a, b), lambda T, a, b: T.logaddexp2(a, b)),
    "copysign": ([_u(0.3, 2, 4), _n(4)], lambda dg, a, b: dg.copysign(a, b), lambda T, a, b: T.copysign(a, b)),
    "float_power": ([_u(0.5, 2, 2, 3), _n(3)], lambda dg, a, b: dg.float_power(a, b),
                    lambda T, a, b: T.float_power(a, b)),
    "float_power_number": ([_u(0.5, 2, 4)], lambda dg, a: dg.float_power(a, 2.5), lambda T, a: T.float_power(a, 2.5)),
    "frexp": ([_n(4)], lambda dg, x: dg.frexp(x)[0], lambda T, x: T.frexp(x)[0]),
    "nextafter": ([_n(4), _n(4)], lambda dg, a, b: dg.nextafter(a, b), lambda T, a, b: T.nextafter(a, b)),
    "binary_cross_entropy": ([_u(0.1, 0.9, 2, 3), _u(0.1, 0.9, 2, 3)],
                             lambda dg, x, y: dg.nn.functional.binary_cross_entropy(x, y),
                             lambda T, x, y: T.nn.functional.binary_cross_entropy(x, y)),
    "binary_cross_entropy_weight": ([_u(0.1, 0.9, 2, 3), _u(0.1, 0.9, 2, 3)],
                                    lambda dg, x, y: dg.nn.functional.binary_cross_entropy(
                                        x, y, weight=dg.tensor([1.0, 2.0, 0.5], dtype=dg.float64), reduction="sum"),
                                    lambda T, x, y: T.nn.functional.binary_cross_entropy(
                                        x, y, weight=T.tensor([1.0, 2.0, 0.5], dtype=T.float64), reduction="sum")),
    "max": ([_n(2, 3)], lambda dg, x: dg.max(x), lambda T, x: T.max(x)),
    "median": ([_n(5)], lambda dg, x: dg.median(x), lambda T, x: T.median(x)),
    "nanmedian": ([_n(5)], lambda dg, x: dg.nanmedian(x), lambda T, x: T.nanmedian(x)),
    "min": ([_n(5)], lambda dg, x: dg.min(x), lambda T, x: T.min(x)),
    # torch's Gamma.cdf has no derivative in the concentration: finite differences only
    "gamma_cdf": ([_u(1, 3, 3), _u(0.5, 2, 1), _u(0.5, 2, 3)],
                  lambda dg, c, r, v: dg.distributions.Gamma(c, r).cdf(v), None),
    "checkpoint": ([_n(2, 3)], lambda dg, x: _checkpointed(dg, x), lambda T, x: T.sin(x) * x),
}


def _jvp(dg, fn, values, tangents):
    """fn's output and tangent at `values` with the given tangents (None: that input is not dual)."""
    fa = dg.autograd.forward_ad
    with fa.dual_level():
        inputs = [dg.tensor(v, dtype=dg.float64) if t is None else
                  fa.make_dual(dg.tensor(v, dtype=dg.float64), dg.tensor(t, dtype=dg.float64))
                  for v, t in zip(values, tangents)]
        primal, tangent = fa.unpack_dual(fn(dg, *inputs))
        return primal.numpy(), (None if tangent is None else tangent.numpy())


def _central(dg, fn, values, tangents, h=1e-6):
    def at(s):
        return fn(dg, *[dg.tensor(v + (0 if t is None else s * h * t), dtype=dg.float64)
                        for v, t in zip(values, tangents)]).numpy()
    return (at(1) - at(-1)) / (2 * h)


def _draw(name, makers):
    g = np.random.default_rng(sum(map(ord, name)))
    values = [m(g) for m in makers]
    return values, [g.standard_normal(v.shape) for v in values]


def _directions(tangents):
    """Every input dual together, then each input alone (the others have no tangent)."""
    yield list(tangents)
    if len(tangents) > 1:
        for i in range(len(tangents)):
            yield [t if j == i else None for j, t in enumerate(tangents)]


@pytest.mark.parametrize("name", sorted(CASES))
def test_tangent_matches_finite_differences(dg, name):
    makers, fn, _ = CASES[name]
    values, tangents = _draw(name, makers)
    for direction in _directions(tangents):
        primal, tangent = _jvp(dg, fn, values, direction)
        np.testing.assert_allclose(primal, fn(dg, *[dg.tensor(v, dtype=dg.float64) for v in values]).numpy())
        want = _central(dg, fn, values, direction)
        got = np.zeros_like(want) if tangent is None else tangent
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-7, err_msg=f"{name}, tangents {direction}")


@pytest.mark.parametrize("name", sorted(n for n, case in CASES.items() if case[2] is not None))
def test_tangent_matches_torch(dg, name):
    torch = pytest.importorskip("torch")
    makers, fn, torch_fn = CASES[name]
    values, tangents = _draw(name, makers)
    for direction in _directions(tangents):
        _, got = _jvp(dg, fn, values, direction)
        dual = [i for i, t in enumerate(direction) if t is not None]

        def partial(*duals):
            args = [torch.tensor(v) for v in values]
            for i, d in zip(dual, duals):
                args[i] = d
            return torch_fn(torch, *args)

        _, want = torch.func.jvp(partial, tuple(torch.tensor(values[i]) for i in dual),
                                 tuple(torch.tensor(direction[i]) for i in dual))
        got = np.zeros(tuple(want.shape)) if got is None else got
        np.testing.assert_allclose(got, want.numpy(), rtol=1e-9, atol=1e-12, err_msg=f"{name}, tangents {direction}")


# ----- what torch does not differentiate forward, and the piecewise-constant ops ------------------------------------

def _ctc(dg, log_probs):
    return dg.nn.functional.ctc_loss(log_probs.log_softmax(2), dg.tensor([[1, 2]]), [3], [2])


# name -> (what the message names, input makers, fn, torch_fn)
NOT_IMPLEMENTED = {
    "zeta": ("zeta", [_u(2, 3, 3), _u(1, 2, 3)], lambda dg, s, q: dg.special.zeta(s, q),
             lambda T, s, q: T.special.zeta(s, q)),
    "floor_divide": ("floor_divide", [_n(3), _u(1, 2, 3)], lambda dg, a, b: dg.floor_divide(a, b),
                     lambda T, a, b: T.floor_divide(a, b)),
    "heaviside": ("heaviside", [_n(3), _n(3)], lambda dg, a, b: dg.heaviside(a, b), lambda T, a, b: T.heaviside(a, b)),
    "gammainc": ("igamma", [_u(1, 2, 3), _u(1, 2, 3)], lambda dg, a, x: dg.special.gammainc(a, x),
                 lambda T, a, x: T.special.gammainc(a, x)),
    "gammaincc": ("igammac", [_u(1, 2, 3), _u(1, 2, 3)], lambda dg, a, x: dg.special.gammaincc(a, x),
                  lambda T, a, x: T.special.gammaincc(a, x)),
    "ctc_loss": ("ctc_loss", [_n(3, 1, 4)], _ctc, _ctc),
    "standard_gamma": ("_standard_gamma", [_u(1, 2, 3)], lambda dg, c: dg.distributions.Gamma(c, 1.0).rsample(),
                       lambda T, c: T.distributions.Gamma(c, 1.0).rsample()),
}


@pytest.mark.parametrize("name", sorted(NOT_IMPLEMENTED))
def test_no_forward_derivative_raises_as_torch(dg, name):
    op, makers, fn, torch_fn = NOT_IMPLEMENTED[name]
    values, tangents = _draw(name, makers)
    for direction in _directions(tangents):
        with pytest.raises(NotImplementedError, match=f"^{op}: .*not implemented"):
            _jvp(dg, fn, values, direction)
    try:
        import torch
    except ImportError:
        return
    with pytest.raises(NotImplementedError):
        torch.func.jvp(lambda *a: torch_fn(torch, *a), tuple(map(torch.tensor, values)),
                       tuple(map(torch.tensor, tangents)))


PIECEWISE_CONSTANT = {
    "floor": lambda dg, x: dg.floor(x), "ceil": lambda dg, x: dg.ceil(x), "trunc": lambda dg, x: dg.trunc(x),
    "round": lambda dg, x: dg.round(x), "round_decimals": lambda dg, x: dg.round(x, decimals=1),
    "div_floor": lambda dg, x: dg.div(x, 0.7, rounding_mode="floor"),
    "div_trunc": lambda dg, x: dg.div(x, 0.7, rounding_mode="trunc"), "angle": lambda dg, x: dg.angle(x),
}


@pytest.mark.parametrize("name", sorted(PIECEWISE_CONSTANT))
def test_piecewise_constant_ops_have_zero_tangents(dg, name):
    """torch gives zeros (not None) for these."""
    values, tangents = [np.array([-1.3, -0.2, 0.4, 2.6])], [np.array([1.0, -2.0, 3.0, 0.5])]
    _, tangent = _jvp(dg, PIECEWISE_CONSTANT[name], values, tangents)
    assert tangent is not None and (tangent == 0).all()


# ----- second derivatives (nested levels, reverse over forward) and hooks ------------------------------------------

def test_second_derivatives_through_numpy_functions(dg):
    x = dg.tensor([0.6, 1.3, 2.2], dtype=dg.float64)
    want = np.diag(dg.polygamma(1, x).numpy())
    for H in (dg.func.hessian(lambda a: dg.lgamma(a).sum())(x),
              dg.func.jacfwd(dg.func.jacfwd(lambda a: dg.lgamma(a).sum()))(x)):
        np.testing.assert_allclose(H.numpy(), want, rtol=1e-10)
    # a derivative that reads the op's output (exp2, hypot), and two inputs: against the other composition order
    for fn in (lambda a: dg.exp2(a).sum(), lambda a: (dg.hypot(a, a * a) * a).sum()):
        np.testing.assert_allclose(dg.func.hessian(fn)(x).numpy(), dg.func.jacrev(dg.func.jacrev(fn))(x).numpy(),
                                   rtol=1e-10)


def test_backward_hook_passes_tangents_through(dg):
    linear = dg.nn.Linear(3, 2).double()
    seen = []
    linear.register_full_backward_hook(lambda module, grad_in, grad_out: seen.append(1))
    x, v = dg.tensor(np.linspace(-1, 1, 6).reshape(2, 3)), dg.tensor(np.linspace(2, 0, 6).reshape(2, 3))
    _, tangent = dg.func.jvp(linear, (x,), (v,))
    np.testing.assert_allclose(tangent.numpy(), (v @ linear.weight.T).detach().numpy(), rtol=1e-12)
    fa = dg.autograd.forward_ad
    with fa.dual_level():          # an input without a tangent keeps none
        out = linear(x)
        assert fa.unpack_dual(out).tangent is None


def test_ctc_loss_gradient_forward_derivatives(dg):
    """ctc_loss's gradient is linear in the incoming gradient (its tangent there is the gradient of the tangent);
    a Hessian-vector product (forward over reverse) is not implemented, as in torch."""
    g = np.random.default_rng(3)
    log_probs = dg.tensor(g.standard_normal((3, 1, 4)))
    _, vjp_fn = dg.func.vjp(lambda lp: _ctc(dg, lp), log_probs)
    cotangent, direction = dg.tensor(1.5, dtype=dg.float64), dg.tensor(-0.5, dtype=dg.float64)
    (grad,), (tangent,) = dg.func.jvp(vjp_fn, (cotangent,), (direction,))
    np.testing.assert_allclose(tangent.numpy(), vjp_fn(direction)[0].numpy(), rtol=1e-12)
    np.testing.assert_allclose(grad.numpy(), vjp_fn(cotangent)[0].numpy(), rtol=1e-12)
    with pytest.raises(NotImplementedError, match="^ctc_loss: .*not implemented"):
        dg.autograd.functional.hvp(lambda lp: _ctc(dg, lp), log_probs, dg.tensor(g.standard_normal((3, 1, 4))))


def test_jvp_of_a_vjp_with_a_constant_gradient(dg):
    """The cotangent's tangent reaches the gradient where the gradient does not depend on the input (a linear
    function's; Note [Constant gradients under create_graph] in csrc/dyngrad/engine.cpp): it was dropped."""
    x = dg.tensor(np.array([0.3, 0.5]))
    for fn, want in ((lambda a: (a * 2).sum(), [-1.0, -1.0]), (lambda a: (dg.exp(a) * 2).sum(), -np.exp([0.3, 0.5]))):
        _, vjp_fn = dg.func.vjp(fn, x)
        (_,), (tangent,) = dg.func.jvp(vjp_fn, (dg.tensor(1.5, dtype=dg.float64),), (dg.tensor(-0.5, dtype=dg.float64),))
        np.testing.assert_allclose(tangent.numpy(), want, rtol=1e-12)


def _node_names(out):
    names, stack, seen = set(), [out.grad_fn], set()
    while stack:
        node = stack.pop()
        if node is None or id(node) in seen:
            continue
        seen.add(id(node))
        names.add(node.name())
        stack.extend(nxt for nxt, _ in node.next_functions)
    return names


def test_every_numpy_function_has_a_tangent_case():
    """Each numpy-forward pointwise op (a _NumpyFunction) is reached by a case above (its node is in a case's graph)."""
    import dyngrad as dg
    from dyngrad._api.ops.pointwise import _NumpyFunction
    reached = set()
    tables = [(makers, fn) for makers, fn, _ in CASES.values()] + [(c[1], c[2]) for c in NOT_IMPLEMENTED.values()]
    tables += [([lambda g: np.array([-1.3, 0.4])], fn) for fn in PIECEWISE_CONSTANT.values()]
    for makers, fn in tables:
        values, _ = _draw("nodes", makers)
        reached |= _node_names(fn(dg, *[dg.tensor(v, requires_grad=True) for v in values]))
    stack, missing = [_NumpyFunction], set()
    while stack:
        for sub in stack.pop().__subclasses__():
            stack.append(sub)
            if sub.__name__ + "Backward" not in reached:
                missing.add(sub.__name__)
    assert not missing, f"no case of CASES, NOT_IMPLEMENTED or PIECEWISE_CONSTANT reaches {sorted(missing)}"


@pytest.mark.parametrize("name", ["exp2", "erfinv", "i1", "i1e", "ndtri", "hypot", "float_power", "xlogy",
                                  "binary_cross_entropy"])
def test_reverse_over_forward(dg, name):
    """The tangent is recorded for reverse mode (the derivative's output recomputed differentiably): its gradient
    matches central differences of the tangent."""
    makers, fn, _ = CASES[name]
    values, tangents = _draw(name, makers)
    fa = dg.autograd.forward_ad
    inputs = [dg.tensor(v, requires_grad=True) for v in values]
    with fa.dual_level():
        tangent = fa.unpack_dual(fn(dg, *[fa.make_dual(x, dg.tensor(t)) for x, t in zip(inputs, tangents)])).tangent
        grads = dg.autograd.grad(tangent.sum(), inputs)
    for i, g in enumerate(grads):
        want = np.zeros(values[i].size)
        for k in range(values[i].size):
            step = np.zeros(values[i].size)
            step[k] = 1e-6
            moved = [[v + (step.reshape(v.shape) * s if j == i else 0) for j, v in enumerate(values)] for s in (1, -1)]
            want[k] = (_jvp(dg, fn, moved[0], tangents)[1].sum() - _jvp(dg, fn, moved[1], tangents)[1].sum()) / 2e-6
        np.testing.assert_allclose(g.numpy().reshape(-1), want, rtol=1e-5, atol=1e-7, err_msg=f"{name}, input {i}")
