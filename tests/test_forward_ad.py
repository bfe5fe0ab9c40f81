"""Forward-mode AD (autograd.forward_ad) on both engines.

test_tangent_of_every_primitive derives, for every primitive of the op table (ops.def), its forward derivative
against its reverse one, <J v, u> = <v, J^T u> on random float64 vectors, and against central finite differences
of the primal: a primitive without a tangent formula (no tangent reaches its output), or with a wrong one, fails.
The rest checks the user API (dual_level, make_dual, unpack_dual, nested levels, custom Function.jvp, misuse) and
compares with torch.autograd.forward_ad where torch is installed.
"""
import zlib

import numpy as np
import pytest

from dyngrad._api.primitive_rows import UNARY_PRIMITIVES
from dyngrad.reference.primitives import OP_NAMES

EPS = 1e-6
# (finite-difference step, relative tolerance) where the default does not fit: to_dtype's row goes through float32
TOLERANCE = {"to_dtype": (1e-2, 1e-5)}


def _away(rng, shape, low=0.3, high=1.5):
    """Values away from zero (log, div, pow bases) with random signs where `signed`."""
    return rng.uniform(low, high, size=shape)


# name -> (make(rng) -> list of float64 arrays (the differentiable inputs), call(C, *tensors) -> output(s))
# Inputs that are not differentiable (indices, shapes, dims) are fixed inside `call`.
def _specs():
    I64 = np.int64

    def idx(C, values):
        return C.from_numpy(np.array(values, dtype=I64))

    def r(*shape):
        return lambda rng: [rng.standard_normal(shape)]

    specs = {
        "add": (lambda g: [g.standard_normal((2, 3)), g.standard_normal((3,))], lambda C, a, b: C.add(a, b)),
        "sub": (lambda g: [g.standard_normal((2, 3)), g.standard_normal((2, 1))], lambda C, a, b: C.sub(a, b)),
        "mul": (lambda g: [g.standard_normal((2, 3)), g.standard_normal((3,))], lambda C, a, b: C.mul(a, b)),
        "div": (lambda g: [g.standard_normal((2, 3)), _away(g, (2, 3))], lambda C, a, b: C.div(a, b)),
        "neg": (lambda g: [g.standard_normal((4,))], lambda C, a: C.neg(a)),
        "pow": (lambda g: [_away(g, (2, 3)), g.standard_normal((2, 3))], lambda C, a, b: C.pow(a, b)),
        "pow_scalar": (lambda g: [_away(g, (5,))], lambda C, a: C.pow_scalar(a, 2.5)),
        # a / b away from the integers, where the quotients jump (positive and negative quotients)
        "remainder": (lambda g: [g.uniform(2.2, 2.8, (2, 3)) * np.array([1.0, -1.0, 1.0]), g.uniform(1.0, 1.05, (3,))],
                      lambda C, a, b: C.remainder(a, b)),
        "fmod": (lambda g: [g.uniform(2.2, 2.8, (2, 3)) * np.array([1.0, -1.0, 1.0]), g.uniform(-1.05, -1.0, (2, 3))],
                 lambda C, a, b: C.fmod(a, b)),
        "maximum": (lambda g: [g.standard_normal((2, 3)), g.standard_normal((2, 3))],
                    lambda C, a, b: C.maximum(a, b)),
        "minimum": (lambda g: [g.standard_normal((2, 3)), g.standard_normal((3,))],
                    lambda C, a, b: C.minimum(a, b)),
        "atan2": (lambda g: [g.standard_normal((2, 3)), g.standard_normal((3,))],
                  lambda C, a, b: C.atan2(a, b)),
        "where": (lambda g: [g.standard_normal((2, 3)), g.standard_normal((2, 3))],
                  lambda C, a, b: C.where(C.from_numpy(np.array([[True, False, True], [False, False, True]])), a, b)),
        "clamp": (lambda g: [g.standard_normal((6,))], lambda C, a: C.clamp(a, -0.5, 0.7)),
        "exp": (r(2, 3), lambda C, a: C.exp(a)),
        "log": (lambda g: [_away(g, (2, 3))], lambda C, a: C.log(a)),
        "sqrt": (lambda g: [_away(g, (2, 3))], lambda C, a: C.sqrt(a)),
        "rsqrt": (lambda g: [_away(g, (2, 3))], lambda C, a: C.rsqrt(a)),
        "abs": (lambda g: [_away(g, (5,)) * np.array([1, -1, 1, -1, 1])], lambda C, a: C.abs(a)),
        "sin": (r(4,), lambda C, a: C.sin(a)),
        "cos": (r(4,), lambda C, a: C.cos(a)),
        "tanh": (r(4,), lambda C, a: C.tanh(a)),
        "tanh_backward": (lambda g: [g.standard_normal((4,)), g.uniform(-0.9, 0.9, (4,))],
                          lambda C, grad, x: C.tanh_backward(grad, x)),
        "sigmoid": (r(4,), lambda C, a: C.sigmoid(a)),
        "sigmoid_backward": (lambda g: [g.standard_normal((4,)), g.uniform(0.1, 0.9, (4,))],
                             lambda C, grad, x: C.sigmoid_backward(grad, x)),
        "relu": (lambda g: [_away(g, (6,)) * np.array([1, -1, 1, -1, 1, -1])], lambda C, a: C.relu(a)),
        "threshold_backward": (lambda g: [g.standard_normal((6,)), _away(g, (6,)) * np.array([1, -1] * 3)],
                               lambda C, grad, x: C.threshold_backward(grad, x)),
        "sign": (lambda g: [_away(g, (4,)) * np.array([1, -1, 1, -1])], lambda C, a: C.sign(a)),
        "leaky_relu": (lambda g: [_away(g, (6,)) * np.array([1, -1] * 3)], lambda C, a: C.leaky_relu(a, 0.1)),
        "gelu": (r(5,), lambda C, a: C.gelu(a)),
        "gelu_backward": (lambda g: [g.standard_normal((5,)), g.standard_normal((5,))],
                          lambda C, grad, x: C.gelu_backward(grad, x)),
        "softplus": (lambda g: [g.standard_normal((5,)) * 3], lambda C, a: C.softplus(a, 2.0, 20.0)),
        "erf": (r(5,), lambda C, a: C.erf(a)),
        "log1p": (lambda g: [g.uniform(-0.5, 2.0, (5,))], lambda C, a: C.log1p(a)),
        "expm1": (r(5,), lambda C, a: C.expm1(a)),
        "log2": (lambda g: [_away(g, (5,))], lambda C, a: C.log2(a)),
        "log10": (lambda g: [_away(g, (5,))], lambda C, a: C.log10(a)),
        "tan": (lambda g: [g.uniform(-1.2, 1.2, (5,))], lambda C, a: C.tan(a)),
        "asin": (lambda g: [g.uniform(-0.9, 0.9, (5,))], lambda C, a: C.asin(a)),
        "acos": (lambda g: [g.uniform(-0.9, 0.9, (5,))], lambda C, a: C.acos(a)),
        "atan": (r(5,), lambda C, a: C.atan(a)),
        "sinh": (r(5,), lambda C, a: C.sinh(a)),
        "conj": (r(5,), lambda C, a: C.conj(a)),
        "sum": (r(2, 3, 4), lambda C, a: C.sum(a, [0, 2], False, None)),
        "mean": (r(2, 3, 4), lambda C, a: C.mean(a, [1], True)),
        "amax": (r(3, 4), lambda C, a: C.amax(a, [1], False)),
        "amin": (r(3, 4), lambda C, a: C.amin(a, [0], True)),
        "logsumexp": (r(3, 4), lambda C, a: C.logsumexp(a, [1], False)),
        "cumsum": (r(3, 4), lambda C, a: C.cumsum(a, 1, False)),
        # a zero in column 1: the division-free formulas hold there; both directions
        "cumprod": (lambda g: [g.standard_normal((3, 4)) * np.array([1.0, 0.0, 1.0, 1.0])],
                    lambda C, a: (C.cumprod(a, 1, False), C.cumprod(a, 0, True))),
        "logcumsumexp": (r(3, 4), lambda C, a: (C.logcumsumexp(a, 1, False), C.logcumsumexp(a, 0, True))),
        "linear_recurrence": (lambda g: [g.standard_normal((3, 4)), g.standard_normal((3, 4))],
                              lambda C, b, c: (C.linear_recurrence(b, c, 1, False),
                                               C.linear_recurrence(b, c, 0, True))),
        "matmul": (lambda g: [g.standard_normal((2, 3, 4)), g.standard_normal((4, 5))],
                   lambda C, a, b: C.matmul(a, b)),
        "to_dtype": (r(2, 3), lambda C, a: C.to_dtype(C.to_dtype(a, C.float32), C.float64)),
        "clone": (r(2, 3), lambda C, a: C.clone(a)),
        "reshape": (r(2, 6), lambda C, a: C.reshape(a, (3, 4))),
        "permute": (r(2, 3, 4), lambda C, a: C.permute(a, [2, 0, 1])),
        "expand": (r(3, 1), lambda C, a: C.expand(a, (2, 3, 4))),
        "slice": (r(5, 3), lambda C, a: C.slice(a, 0, 1, 5, 2)),
        "slice_scatter": (r(2, 3), lambda C, a: C.slice_scatter(a, (5, 3), 0, 1, 2)),
        "cat": (lambda g: [g.standard_normal((2, 3)), g.standard_normal((1, 3))], lambda C, a, b: C.cat([a, b], 0)),
        # (real in, real out: the complex tensor between them carries the tangent)
        "view_as_real": (r(3, 2), lambda C, a: C.view_as_real(C.mul(C.view_as_complex(a), C.view_as_complex(a)))),
        "view_as_complex": (r(3, 2), lambda C, a: C.view_as_real(C.exp(C.view_as_complex(a)))),
        "index_select": (r(4, 3), lambda C, a: C.index_select(a, 0, idx(C, [3, 0, 3]))),
        "index_add": (r(3, 2), lambda C, a: C.index_add(a, 0, idx(C, [1, 1, 0]), (4, 2))),
        "gather": (r(3, 4), lambda C, a: C.gather(a, 1, idx(C, [[0, 3], [1, 1], [2, 0]]))),
        "scatter_add": (r(3, 2), lambda C, a: C.scatter_add(a, 1, idx(C, [[0, 3], [1, 1], [2, 0]]), (3, 4))),
        "take": (r(3, 4), lambda C, a: C.take(a, idx(C, [[0, 11], [5, 5]]))),
        "put": (lambda g: [g.standard_normal((3, 4)), g.standard_normal((3,))],
                lambda C, a, v: C.put(a, idx(C, [1, 7, 10]), v)),
        "put_add": (r(4,), lambda C, v: C.put_add(v, idx(C, [1, 7, 1, 0]), (3, 4))),
        "softmax": (r(3, 4), lambda C, a: C.softmax(a, 1)),
        "softmax_backward": (lambda g: [g.standard_normal((3, 4)), g.uniform(0.1, 0.9, (3, 4))],
                             lambda C, grad, y: C.softmax_backward(grad, y, 1)),
        "log_softmax": (r(3, 4), lambda C, a: C.log_softmax(a, 0)),
        "log_softmax_backward": (lambda g: [g.standard_normal((3, 4)), -g.uniform(0.5, 2, (3, 4))],
                                 lambda C, grad, y: C.log_softmax_backward(grad, y, 1)),
        "cross_entropy": (r(3, 4), lambda C, x: C.cross_entropy(x, idx(C, [1, 3, -100]), 1, -100, 0.1)),
        "cross_entropy_backward": (lambda g: [g.standard_normal((3,)), g.standard_normal((3, 4))],
                                   lambda C, grad, x: C.cross_entropy_backward(grad, x, idx(C, [1, 3, 0]), 0, -100,
                                                                               0.2)),
        "unfold": (r(1, 2, 4, 4), lambda C, x: C.unfold(x, 2, 2, 1, 1, 1, 0, 1, 1)),
        "fold": (r(1, 8, 15), lambda C, c: C.fold(c, (1, 2, 4, 4), 2, 2, 1, 1, 1, 0, 1, 1)),
        "rnn_layer": (lambda g: [g.standard_normal((3, 2, 8)) * 0.5, g.standard_normal((2, 2)) * 0.5,
                                 g.standard_normal((2, 2)) * 0.5, g.standard_normal((8, 2)) * 0.5,
                                 g.standard_normal((8,)) * 0.5],
                      lambda C, gi, h0, c0, w, b: C.rnn_layer(gi, h0, c0, w, b, 2, False)),
        "layer_norm": (lambda g: [g.standard_normal((2, 3, 4)), g.standard_normal((3, 4)), g.standard_normal((3, 4))],
                       lambda C, x, w, b: C.layer_norm(x, w, b, 2, 1e-5)),
        "layer_norm_backward": (lambda g: [g.standard_normal((3, 4)), g.standard_normal((3, 4)),
                                           g.standard_normal((4,))],
                                lambda C, grad, a, w: C.layer_norm_backward(grad, a, w, 1, 1e-5,
                                                                            (True, True, True))),
        "rnn_layer_backward": (lambda g: [g.standard_normal((1, 3, 2, 2)), g.standard_normal((3, 2, 2)) * 0.5,
                                          g.standard_normal((2, 2)) * 0.5, g.standard_normal((2, 2)) * 0.5,
                                          g.standard_normal((2,)) * 0.5],
                               lambda C, grad, gi, h0, w, b: C.rnn_layer_backward(
                                   grad, gi, h0, None, w, b, C.rnn_layer(gi, h0, None, w, b, 0, True), None, 0, True,
                                   (True, True, True, True, True))),
        "acosh": (lambda g: [g.uniform(1.1, 3.0, (5,))], lambda C, a: C.acosh(a)),   # defined on [1, inf)
        "attention": (lambda g: [g.standard_normal((2, 3, 4)), g.standard_normal((2, 5, 4)),
                                 g.standard_normal((2, 5, 3))],
                      lambda C, q, k, v: C.attention(q, k, v, None, False, 0.4, 0.2, 11)),
        "attention_backward": (lambda g: [g.standard_normal((2, 4, 3)), g.standard_normal((2, 4, 4)),
                                          g.standard_normal((2, 5, 4)), g.standard_normal((2, 5, 3))],
                               lambda C, grad, q, k, v: C.attention_backward(grad, q, k, v, None, None, None, True,
                                                                             0.5, 0.0, 0, (True, True, True))),
    }
    # a plain unary primitive (primitive_rows.py, from ops.def) without a row of its own takes inputs in (0.1, 0.9),
    # inside the domain of every such function met so far (log, sqrt, asin, atanh, ...); one that needs other inputs
    # (or has a kink there) writes its row above
    for name, _ in UNARY_PRIMITIVES:
        specs.setdefault(name, (lambda g: [g.uniform(0.1, 0.9, (5,))], lambda C, a, name=name: getattr(C, name)(a)))
    return specs


SPECS = _specs()


def test_every_primitive_has_a_case():
    assert sorted(SPECS) == sorted(OP_NAMES), "each primitive of ops.def needs a row in SPECS"


def _as_list(out):
    return [o for o in (out if isinstance(out, (tuple, list)) else [out])]


def _values(outs):
    return [None if o is None else o._numpy_view().astype(np.float64).copy() for o in outs]


def _tensor(C, arr):
    return C.from_numpy(np.array(arr, order="C"))


@pytest.mark.parametrize("name", OP_NAMES)
def test_tangent_of_every_primitive(dg, name):
    make, call = SPECS[name]
    C, fwAD = dg._C, dg.autograd.forward_ad
    rng = np.random.default_rng(zlib.crc32(name.encode()))
    xs = make(rng)
    vs = [rng.standard_normal(x.shape) for x in xs]
    primal = _as_list(call(C, *[_tensor(C, x) for x in xs]))
    us = [None if o is None else rng.standard_normal(tuple(o.shape)) for o in primal]
    # forward mode: J v
    with fwAD.dual_level():
        duals = [fwAD.make_dual(_tensor(C, x), _tensor(C, v)) for x, v in zip(xs, vs)]
        outs = _as_list(call(C, *duals))
        jv = []
        for o in outs:
            if o is None:
                jv.append(None)
                continue
            tangent = fwAD.unpack_dual(o).tangent
            assert tangent is not None, f"{name}: no tangent reached its output"
            jv.append(tangent._numpy_view().astype(np.float64).copy())
    # reverse mode: J^T u
    leaves = [_tensor(C, x) for x in xs]
    for t in leaves:
        t.requires_grad_(True)
    outs = _as_list(call(C, *leaves))
    roots = [o for o in outs if o is not None]
    grads = dg.autograd.grad(roots, leaves, [_tensor(C, u) for u, o in zip(us, outs) if o is not None],
                             allow_unused=True)
    jtu = [np.zeros(x.shape) if g is None else g._numpy_view().astype(np.float64) for x, g in zip(xs, grads)]
    forward = sum(float(np.sum(a * u)) for a, u in zip(jv, us) if a is not None)
    reverse = sum(float(np.sum(v * g)) for v, g in zip(vs, jtu))
    step, rtol = TOLERANCE.get(name, (EPS, 1e-7))
    assert forward == pytest.approx(reverse, rel=rtol, abs=1e-9), f"{name}: <Jv, u> != <v, J^T u>"
    # central finite differences of the primal along v
    plus = _values(_as_list(call(C, *[_tensor(C, x + step * v) for x, v in zip(xs, vs)])))
    minus = _values(_as_list(call(C, *[_tensor(C, x - step * v) for x, v in zip(xs, vs)])))
    for a, p, m in zip(jv, plus, minus):
        if a is not None:
            np.testing.assert_allclose(a, (p - m) / (2 * step), rtol=max(rtol, 1e-5), atol=1e-6, err_msg=name)


# ----- the user API ---------------------------------------------------------------------------------------------

def _t(dg, values):
    return dg.tensor(np.asarray(values, dtype=np.float64))


def _np(t):
    return t.detach().numpy()


def test_make_dual_unpack_dual(dg):
    fwAD = dg.autograd.forward_ad
    x, v = _t(dg, [0.5, -1.0, 2.0]), _t(dg, [1.0, 2.0, -1.0])
    assert fwAD.unpack_dual(x) == (x, None)          # outside every level: not dual
    with fwAD.dual_level() as level:
        d = fwAD.make_dual(x, v)
        p, t = fwAD.unpack_dual(d)
        assert isinstance(fwAD.unpack_dual(d), fwAD.UnpackedDualTensor)
        np.testing.assert_array_equal(_np(p), _np(x))
        np.testing.assert_array_equal(_np(t), _np(v))
        assert fwAD.unpack_dual(p).tangent is None    # the primal is not dual
        y = (d * d).exp().sum()
        np.testing.assert_allclose(_np(fwAD.unpack_dual(y, level=level).tangent),
                                   np.sum(np.exp(_np(x) ** 2) * 2 * _np(x) * _np(v)))
    assert fwAD.unpack_dual(d).tangent is None       # the level is closed


def test_forward_ad_ignores_grad_mode(dg):
    fwAD = dg.autograd.forward_ad
    with fwAD.dual_level(), dg.no_grad():
        d = fwAD.make_dual(_t(dg, [1.0, 2.0]), _t(dg, [3.0, 4.0]))
        np.testing.assert_allclose(_np(fwAD.unpack_dual(d * 2).tangent), [6.0, 8.0])


def test_nested_levels_give_second_derivatives(dg):
    fwAD = dg.autograd.forward_ad
    x = _t(dg, [0.3, 1.2])
    with fwAD.dual_level() as outer:
        x1 = fwAD.make_dual(x, _t(dg, [1.0, 1.0]), level=outer)
        with fwAD.dual_level() as inner:
            x2 = fwAD.make_dual(x1, _t(dg, [1.0, 1.0]), level=inner)
            y = x2.sin() * x2
            first = fwAD.unpack_dual(y, level=inner).tangent        # d/dx (x sin x) = sin x + x cos x
        second = fwAD.unpack_dual(first, level=outer).tangent        # 2 cos x - x sin x
    xv = _np(x)
    np.testing.assert_allclose(_np(fwAD.unpack_dual(first).primal), np.sin(xv) + xv * np.cos(xv))
    np.testing.assert_allclose(_np(second), 2 * np.cos(xv) - xv * np.sin(xv))


def test_reverse_over_forward_and_forward_over_reverse(dg):
    fwAD = dg.autograd.forward_ad
    xv = np.array([0.3, -0.7, 1.1])
    x = dg.tensor(xv, requires_grad=True)
    v = _t(dg, [1.0, 0.5, -2.0])
    with fwAD.dual_level():
        d = fwAD.make_dual(x, v)
        y = (d.tanh() * d).sum()
        jv = fwAD.unpack_dual(y).tangent
    g, = dg.autograd.grad(jv, x)                     # d/dx <grad f, v> = H v
    hv = dg.autograd.functional.hvp(lambda z: (z.tanh() * z).sum(), _t(dg, xv), v)[1]
    np.testing.assert_allclose(_np(g), _np(hv), rtol=1e-10)
    # analytic: f = sum x tanh x, f'' = 2 sech^2 x - 2 x tanh x sech^2 x (diagonal)
    s2 = 1 / np.cosh(xv) ** 2
    np.testing.assert_allclose(_np(hv), (2 * s2 - 2 * xv * np.tanh(xv) * s2) * _np(v), rtol=1e-10)


def test_misuse(dg):
    fwAD = dg.autograd.forward_ad
    x = _t(dg, [1.0, 2.0])
    with pytest.raises(RuntimeError, match="make_dual: no dual level is open"):
        fwAD.make_dual(x, x)
    with fwAD.dual_level():
        with pytest.raises(RuntimeError, match=r"make_dual: the tangent's shape \(3,\) differs"):
            fwAD.make_dual(x, _t(dg, [1.0, 2.0, 3.0]))
        with pytest.raises(TypeError, match="make_dual: expected a Tensor as the tangent"):
            fwAD.make_dual(x, [1.0, 2.0])
        with pytest.raises(ValueError, match="make_dual: expected a floating-point or complex primal"):
            fwAD.make_dual(dg.tensor([1, 2]), dg.tensor([1, 2]))
    outer = fwAD.enter_dual_level()
    inner = fwAD.enter_dual_level()
    with pytest.raises(RuntimeError, match="not the innermost open level"):
        fwAD.exit_dual_level(level=outer)
    fwAD.exit_dual_level(level=inner)
    fwAD.exit_dual_level()
    with pytest.raises(RuntimeError, match="no dual level is open"):
        fwAD.exit_dual_level()


def test_custom_function_jvp(dg):
    fwAD = dg.autograd.forward_ad

    class Cube(dg.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_forward(x)
            ctx.save_for_backward(x)
            return dg.tensor(np.asarray(x.detach().numpy()) ** 3)     # on the host: no tangent of its own

        @staticmethod
        def backward(ctx, g):
            x, = ctx.saved_tensors
            return g * 3 * x * x

        @staticmethod
        def jvp(ctx, t):
            x, = ctx.saved_tensors
            return t * 3 * x * x

    class NoJvp(dg.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return dg.tensor(np.asarray(x.detach().numpy()) * 2)

        @staticmethod
        def backward(ctx, g):
            return g * 2

    x, v = _t(dg, [1.0, -2.0]), _t(dg, [0.5, 1.0])
    with fwAD.dual_level():
        y = Cube.apply(fwAD.make_dual(x, v))
        np.testing.assert_allclose(_np(fwAD.unpack_dual(y).tangent), [1.5, 12.0])
        with pytest.raises(NotImplementedError, match="NoJvp: an input is a dual tensor.*defines no jvp"):
            NoJvp.apply(fwAD.make_dual(x, v))


def test_matches_torch_forward_ad(dg):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(3)
    xv, wv, v = rng.standard_normal((4, 3)), rng.standard_normal((5, 3)), rng.standard_normal((4, 3))

    def net(F, x, w):
        return F.log_softmax(F.gelu(F.linear(x, w)), -1).sum(0)

    with dg.autograd.forward_ad.dual_level():
        ours = dg.autograd.forward_ad.unpack_dual(
            net(dg.nn.functional, dg.autograd.forward_ad.make_dual(_t(dg, xv), _t(dg, v)), _t(dg, wv))).tangent
    with torch.autograd.forward_ad.dual_level():
        theirs = torch.autograd.forward_ad.unpack_dual(
            net(torch.nn.functional, torch.autograd.forward_ad.make_dual(torch.tensor(xv), torch.tensor(v)),
                torch.tensor(wv))).tangent
    np.testing.assert_allclose(_np(ours), theirs.numpy(), rtol=1e-10, atol=1e-12)


def test_in_place_ops_carry_tangents(dg):
    fwAD = dg.autograd.forward_ad
    with fwAD.dual_level():
        d = fwAD.make_dual(_t(dg, [1.0, 2.0]), _t(dg, [1.0, -1.0]))
        y = d * 1.0
        y.mul_(d)                                   # y = d^2: tangent 2 d v
        np.testing.assert_allclose(_np(fwAD.unpack_dual(y).tangent), [2.0, -4.0])
        z = _t(dg, [0.0, 0.0])
        z.copy_(d)                                  # z takes d's tangent
        np.testing.assert_allclose(_np(fwAD.unpack_dual(z).tangent), [1.0, -1.0])
        z.fill_(3.0)                                # a constant: no tangent
        assert fwAD.unpack_dual(z).tangent is None


def test_setitem_carries_the_written_values_tangent(dg):
    """y[idx] = v on tensors that need no grad: the tangent of v lands in y's window (it was dropped: the write took
    the unrecorded path whenever requires_grad was off, as it is in forward mode alone)."""
    a = dg.tensor([0.3, 0.7], dtype=dg.float64)
    t = dg.tensor([1.0, 0.0], dtype=dg.float64)

    def full(x):
        y = x.clone()
        y[:] = x.sum()
        return y

    def window(x):
        y = dg.zeros(3, dtype=dg.float64)
        y[1:] = x * 3
        return y
    np.testing.assert_allclose(dg.func.jvp(full, (a,), (t,))[1].numpy(), [1.0, 1.0])
    np.testing.assert_allclose(dg.func.jvp(window, (a,), (t,))[1].numpy(), [0.0, 3.0, 0.0])
    fwd = dg.autograd.forward_ad
    with fwd.dual_level():
        x = fwd.make_dual(a, t)
        y = dg.zeros(2, dtype=dg.float64)
        y[1] = x[0] * 2
        np.testing.assert_allclose(fwd.unpack_dual(y).tangent.numpy(), [0.0, 2.0])


@pytest.mark.parametrize("write", ["unsqueeze", "expand", "slice", "select", "view"])
def test_inplace_write_into_a_view_updates_the_bases_tangent(dg, write):
    """y.view_op().add_(...) changes y: y's tangent follows (it kept its old tangent), checked against jacrev."""
    a = dg.tensor([0.3, 0.7, 0.9], dtype=dg.float64)
    t = dg.tensor([1.0, 2.0, 4.0], dtype=dg.float64)
    writes = {"unsqueeze": lambda y, x: y.unsqueeze(0).add_(x), "expand": lambda y, x: y.unsqueeze(0).expand(1, 3).add_(x),
              "slice": lambda y, x: y[0:2].add_(x[1:] * x[:2]), "select": lambda y, x: y[1].mul_(x[2]),
              "view": lambda y, x: y.view(3, 1).mul_(x.view(3, 1).exp())}

    def f(x):
        y = x.clone()
        writes[write](y, x)
        return y
    np.testing.assert_allclose(dg.func.jvp(f, (a,), (t,))[1].numpy(), (dg.func.jacrev(f)(a) @ t).numpy(),
                               rtol=1e-12)


def test_max_and_min_of_every_element_have_a_tangent(dg):
    """x.max() / x.min() / x.median() (a shared selection): the tangent is the mean over the elements tied with the
    result, as the gradient shares it."""
    a = dg.tensor([0.3, 0.7, 0.7], dtype=dg.float64)
    t = dg.tensor([1.0, 2.0, 4.0], dtype=dg.float64)
    for fn in (lambda x: x.max(), lambda x: x.min(), lambda x: x.median() * x.max()):
        np.testing.assert_allclose(float(dg.func.jvp(fn, (a,), (t,))[1]), float(dg.func.grad(fn)(a) @ t),
                                   rtol=1e-12)


# The plain unary primitives that take complex tensors, whose tangents (for most of them the default from the
# backward formula: Note [Tangents from backward formulas] in csrc/dyngrad/derivatives.cpp) must be the
# directional derivative along a complex tangent, conj(backward(conj(v))) and not backward(v). The complex primal
# and tangent are view_as_complex of real ones here, and the output is read back through view_as_real (so the
# tangents also cross those two views); tests/test_forward_ad_complex.py makes complex duals directly. sign is left out: its derivative is zero by definition here (torch's sgn, its
# complex counterpart, has one that is not).
def _complex_unary():
    from dyngrad.reference.ops import COMPLEX_KERNEL_OPS
    return sorted(name for name, _ in UNARY_PRIMITIVES if name in COMPLEX_KERNEL_OPS and name != "sign")


@pytest.mark.parametrize("name", _complex_unary())
def test_complex_tangent_of_unary_primitives(dg, name):
    C, fwAD = dg._C, dg.autograd.forward_ad
    rng = np.random.default_rng(zlib.crc32(name.encode()))
    z = np.stack([rng.uniform(0.1, 0.9, 5), rng.uniform(0.1, 0.5, 5)], -1)  # (re, im) pairs
    v = rng.standard_normal((5, 2))

    def f(a):
        out = getattr(C, name)(C.view_as_complex(a))
        return C.view_as_real(out) if out.dtype.is_complex else out

    with fwAD.dual_level():
        tangent = fwAD.unpack_dual(f(fwAD.make_dual(_tensor(C, z), _tensor(C, v)))).tangent
        assert tangent is not None, f"{name}: no tangent reached its output"
        tangent = tangent._numpy_view().copy()
    step = 1e-6
    expected = (f(_tensor(C, z + step * v))._numpy_view() - f(_tensor(C, z - step * v))._numpy_view()) / (2 * step)
    np.testing.assert_allclose(tangent, expected, rtol=1e-6, atol=1e-8, err_msg=name)
