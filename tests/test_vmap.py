"""vmap by batching rules (Note [vmap by batching rules] in python/dyngrad/_api/ops/vmap.py), on both engines.

The completeness test: every primitive of ops.def has a case here (its public op under vmap, checked against the
loop over the rows on random inputs, with the rule and not the fallback doing the work), or is listed in
FALLS_BACK with the reason. The fused derivatives are reached only by backward formulas, which run on physical
tensors: their case is vmap(grad(op)) against the loop of grads. Then: composites with rules of their own, nested
vmap, in_dims/out_dims/pytrees, chunk_size, randomness, errors, in-place ops, and the transforms inside vmap
(per-sample gradients, vmap of jvp, jacrev/jacfwd) against torch.func where torch is installed.
"""
import importlib
import threading
import warnings

import numpy as np
import pytest

from dyngrad._api.primitive_rows import UNARY_PRIMITIVES
from dyngrad.reference.primitives import OP_NAMES

B = 3
RNG = np.random.default_rng(0)


def _r(*shape):
    return RNG.standard_normal(shape)


def _pos(*shape):
    return np.abs(RNG.standard_normal(shape)) + 0.5


def _unit(*shape):
    return RNG.uniform(-0.9, 0.9, shape)


def _idx(high, *shape):
    return RNG.integers(0, high, shape)


def _vm(dg):
    return importlib.import_module(dg.__name__ + "._api.ops.vmap")


def _F(dg):
    return importlib.import_module(dg.__name__ + ".nn.functional")


def _tensor(dg, a):
    if isinstance(a, np.ndarray) and a.dtype.kind in "iu":
        return dg.tensor(a, dtype=dg.int64)
    return dg.tensor(np.asarray(a), dtype=dg.float64)


def _np(t):
    return t.detach().numpy() if hasattr(t, "detach") else np.asarray(t)


def _leaves(out):
    if isinstance(out, (tuple, list)):
        return [x for o in out for x in _leaves(o)]
    return [out]


def _check_against_loop(dg, fn, arrays, in_dims=0, rtol=1e-10, atol=1e-12):
    """vmap(fn)(*arrays) against stacking fn on each row, with no fallback loop inside vmap."""
    vm = _vm(dg)
    dims = in_dims if isinstance(in_dims, tuple) else (in_dims,) * len(arrays)
    tensors = [_tensor(dg, a) for a in arrays]
    vm.FALLBACKS.clear()
    got = dg.vmap(fn, in_dims=dims)(*tensors)
    assert not vm.FALLBACKS, f"the fallback loop ran for {sorted(set(vm.FALLBACKS))}"
    rows = []
    for i in range(B):
        row = [t if d is None else t.select(d, i) for t, d in zip(tensors, dims)]
        rows.append(fn(*row))
    for k, g in enumerate(_leaves(got)):
        want = np.stack([_np(_leaves(r)[k]) for r in rows])
        assert tuple(g.shape) == want.shape, (tuple(g.shape), want.shape)
        assert g.dtype == _leaves(rows[0])[k].dtype
        np.testing.assert_allclose(_np(g).astype(np.float64), want.astype(np.float64), rtol=rtol, atol=atol)


def _grad_case(op):
    """vmap(grad(sum of op)) for a fused derivative: the backward formulas run on the physical tensors."""
    def fn(dg, x):
        return dg.func.grad(lambda z: (op(dg, z) * z).sum())(x)
    return fn


# name: (fn(dg, *tensors), arrays with the batch of B in front where in_dims says 0, in_dims)
PRIMITIVE_CASES = {
    "add": (lambda dg, a, b: dg.add(a, b, alpha=2), [_r(B, 4), _r(4)], (0, None)),
    "sub": (lambda dg, a, b: a - b, [_r(B, 2, 4), _r(B, 4)], 0),
    "mul": (lambda dg, a, b: a * b, [_r(B, 4), _r(B, 3, 1)], 0),
    "div": (lambda dg, a, b: a / b, [_r(B, 4), _pos(B, 4)], 0),
    "neg": (lambda dg, a: -a, [_r(B, 4)], 0),
    "pow": (lambda dg, a, b: dg.pow(a, b), [_pos(B, 4), _r(4)], (0, None)),
    "pow_scalar": (lambda dg, a: a ** 3, [_r(B, 4)], 0),
    "maximum": (lambda dg, a, b: dg.maximum(a, b), [_r(B, 4), _r(B, 4)], 0),
    "minimum": (lambda dg, a, b: dg.minimum(a, b), [_r(4), _r(B, 4)], (None, 0)),
    "atan2": (lambda dg, a, b: dg.atan2(a, b), [_r(B, 4), _r(B, 4)], 0),
    "where": (lambda dg, a, b: dg.where(a > 0, a, b), [_r(B, 4), _r(B, 4)], 0),
    "clamp": (lambda dg, a: dg.clamp(a, -0.5, 0.5), [_r(B, 4)], 0),
    "exp": (lambda dg, a: a.exp(), [_r(B, 4)], 0),
    "log": (lambda dg, a: dg.log(a), [_pos(B, 4)], 0),
    "sqrt": (lambda dg, a: a.sqrt(), [_pos(B, 4)], 0),
    "rsqrt": (lambda dg, a: a.rsqrt(), [_pos(B, 4)], 0),
    "abs": (lambda dg, a: a.abs(), [_r(B, 4)], 0),
    "sin": (lambda dg, a: dg.sin(a), [_r(B, 4)], 0),
    "cos": (lambda dg, a: a.cos(), [_r(B, 4)], 0),
    "tanh": (lambda dg, a: a.tanh(), [_r(B, 4)], 0),
    "sigmoid": (lambda dg, a: dg.sigmoid(a), [_r(B, 4)], 0),
    "relu": (lambda dg, a: _F(dg).relu(a), [_r(B, 4)], 0),
    "sign": (lambda dg, a: a.sign(), [_r(B, 4)], 0),
    "leaky_relu": (lambda dg, a: _F(dg).leaky_relu(a, 0.1), [_r(B, 4)], 0),
    "gelu": (lambda dg, a: _F(dg).gelu(a), [_r(B, 4)], 0),
    "softplus": (lambda dg, a: _F(dg).softplus(a), [_r(B, 4)], 0),
    "erf": (lambda dg, a: a.erf(), [_r(B, 4)], 0),
    "log1p": (lambda dg, a: a.log1p(), [_pos(B, 4)], 0),
    "expm1": (lambda dg, a: a.expm1(), [_r(B, 4)], 0),
    "log2": (lambda dg, a: a.log2(), [_pos(B, 4)], 0),
    "log10": (lambda dg, a: a.log10(), [_pos(B, 4)], 0),
    "tan": (lambda dg, a: a.tan(), [_unit(B, 4)], 0),
    "asin": (lambda dg, a: a.asin(), [_unit(B, 4)], 0),
    "acos": (lambda dg, a: a.acos(), [_unit(B, 4)], 0),
    "atan": (lambda dg, a: a.atan(), [_r(B, 4)], 0),
    "sinh": (lambda dg, a: a.sinh(), [_r(B, 4)], 0),
    "sum": (lambda dg, a: (a.sum(1), a.sum(), dg.sum(a, (0, 1), keepdim=True)), [_r(B, 2, 4)], 0),
    "mean": (lambda dg, a: (a.mean(-1), a.mean()), [_r(B, 2, 4)], 0),
    "amax": (lambda dg, a: (dg.amax(a, 1), a.amax()), [_r(B, 2, 4)], 0),
    "amin": (lambda dg, a: dg.amin(a, 0, keepdim=True), [_r(B, 2, 4)], 0),
    "logsumexp": (lambda dg, a: dg.logsumexp(a, 1), [_r(B, 2, 4)], 0),
    "cumsum": (lambda dg, a: a.cumsum(0), [_r(B, 2, 4)], 0),
    "cumprod": (lambda dg, a: (a.cumprod(1), dg.cummax(a, 0)[0], dg.cummin(a, 1)[1]), [_r(B, 2, 4)], 0),
    "logcumsumexp": (lambda dg, a: dg.logcumsumexp(a, -1), [_r(B, 2, 4)], 0),
    # reached through cumprod's and logcumsumexp's derivatives
    "linear_recurrence": (_grad_case(lambda dg, z: z.cumprod(-1) + z.logcumsumexp(-1)), [_r(B, 2, 4)], 0),
    "remainder": (lambda dg, a, b: (dg.remainder(a, b), a % 0.7), [_r(B, 4), _pos(4)], (0, None)),
    "fmod": (lambda dg, a, b: dg.fmod(a, b), [_r(B, 4), _pos(B, 4)], 0),
    # complex values compared through their (real, imag) pairs
    "view_as_complex": (lambda dg, a: dg.view_as_real(dg.view_as_complex(a) * 2), [_r(B, 3, 2)], 0),
    "view_as_real": (lambda dg, a: (dg.view_as_real(dg.complex(a, a * 2)), dg.view_as_complex(a).real),
                     [_r(B, 3, 2)], 0),
    "conj": (lambda dg, a: dg.view_as_real(dg.conj(dg.view_as_complex(a))), [_r(B, 3, 2)], 0),
    "matmul": (lambda dg, a, b: (a @ b, dg.matmul(b.t(), a.t())), [_r(B, 2, 3), _r(B, 3, 4)], 0),
    "to_dtype": (lambda dg, a: a.to(dg.float32), [_r(B, 4)], 0),
    "clone": (lambda dg, a: a.clone(), [_r(B, 4)], 0),
    "reshape": (lambda dg, a: (a.reshape(2, 2), a.view(4, 1), dg.reshape(a, (-1,))), [_r(B, 4)], 0),
    "permute": (lambda dg, a: (a.permute(2, 0, 1), dg.permute(a, (1, 0, 2))), [_r(B, 2, 3, 4)], 0),
    "expand": (lambda dg, a: a.expand(2, 3, 4), [_r(B, 1, 4)], 0),
    "slice": (lambda dg, a: (a[:, 1:3], a[0], a[..., ::2], a[None, 1]), [_r(B, 2, 4)], 0),
    "slice_scatter": (lambda dg, a, b: dg.slice_scatter(a, b, dim=1, start=0, end=2), [_r(B, 2, 4), _r(B, 2, 2)],
                      0),
    "cat": (lambda dg, a, b: dg.cat([a, b], 1), [_r(B, 2, 4), _r(2, 3)], (0, None)),
    "index_select": (lambda dg, a, i: dg.index_select(a, 1, i), [_r(B, 2, 4), _idx(4, 3)], (0, None)),
    "index_add": (lambda dg, a, i, s: dg.index_add(a, 1, i, s), [_r(B, 2, 4), np.array([0, 3, 0]), _r(B, 2, 3)],
                  (0, None, 0)),
    "gather": (lambda dg, a, i: dg.gather(a, 1, i), [_r(B, 2, 4), _idx(4, B, 2, 3)], 0),
    "scatter_add": (lambda dg, a, i, s: dg.scatter_add(a, 1, i, s), [_r(B, 2, 4), _idx(4, B, 2, 3), _r(B, 2, 3)],
                    0),
    "take": (lambda dg, a, i: dg.take(a, i), [_r(B, 2, 4), np.array([[0, -1], [5, 2]])], (0, None)),
    "put": (lambda dg, a, s, i: dg.put(a, i, s), [_r(B, 2, 4), _r(B, 3), np.array([0, 7, -2])], (0, 0, None)),
    "put_add": (lambda dg, a, s, i: a.put(i, s, accumulate=True), [_r(B, 2, 4), _r(B, 3), np.array([1, 1, -2])],
                (0, 0, None)),
    "softmax": (lambda dg, a: (dg.softmax(a, 1), _F(dg).softmax(a, dim=-1)), [_r(B, 2, 4)], 0),
    "log_softmax": (lambda dg, a: (a.log_softmax(0), _F(dg).log_softmax(a, dim=1)), [_r(B, 2, 4)], 0),
    "cross_entropy": (lambda dg, a, t: (_F(dg).cross_entropy(a, t), _F(dg).cross_entropy(a, t, reduction="none"),
                                        _F(dg).cross_entropy(a, t, reduction="sum")),
                      [_r(B, 2, 5), _idx(5, B, 2)], 0),
    "unfold": (lambda dg, a: _F(dg).unfold(a, kernel_size=2), [_r(B, 1, 2, 3, 3)], 0),
    "fold": (lambda dg, a: _F(dg).fold(a, output_size=(3, 3), kernel_size=2), [_r(B, 1, 8, 4)], 0),
    "rnn_layer": (lambda dg, a: _GRU[dg.__name__](a)[0], [_r(B, 5, 2, 3)], 0),
    "layer_norm": (lambda dg, a, w: (_F(dg).layer_norm(a, (4,)), _F(dg).layer_norm(a, (4,), w, w * 2)),
                   [_r(B, 2, 4), _r(B, 4)], 0),
    # fused derivatives: their forward op under vmap(grad)
    "tanh_backward": (_grad_case(lambda dg, z: z.tanh()), [_r(B, 4)], 0),
    "sigmoid_backward": (_grad_case(lambda dg, z: z.sigmoid()), [_r(B, 4)], 0),
    "threshold_backward": (_grad_case(lambda dg, z: z.relu()), [_r(B, 4)], 0),
    "gelu_backward": (_grad_case(lambda dg, z: _F(dg).gelu(z)), [_r(B, 4)], 0),
    "softmax_backward": (_grad_case(lambda dg, z: z.softmax(-1)), [_r(B, 2, 4)], 0),
    "log_softmax_backward": (_grad_case(lambda dg, z: z.log_softmax(-1)), [_r(B, 2, 4)], 0),
    "cross_entropy_backward": (lambda dg, a, t: dg.func.grad(lambda z: _F(dg).cross_entropy(z, t))(a),
                               [_r(B, 2, 5), _idx(5, B, 2)], 0),
    "layer_norm_backward": (_grad_case(lambda dg, z: _F(dg).layer_norm(z, (4,))), [_r(B, 2, 4)], 0),
    "rnn_layer_backward": (lambda dg, a: dg.func.grad(lambda z: _GRU[dg.__name__](z)[0].pow(2).sum())(a),
                           [_r(B, 5, 2, 3)], 0),
    "attention": (lambda dg, q, k, v, m: (_F(dg).scaled_dot_product_attention(q, k, v),
                                          _F(dg).scaled_dot_product_attention(q, k, v, attn_mask=m),
                                          _F(dg).scaled_dot_product_attention(q, k, v, is_causal=True, scale=0.3)),
                  [_r(B, 2, 3, 4), _r(B, 2, 5, 4), _r(5, 6), _r(B, 3, 5)], (0, 0, None, 0)),
    "attention_backward": (lambda dg, q, k: dg.func.grad(
        lambda z: _F(dg).scaled_dot_product_attention(z, k, k, is_causal=True).pow(2).sum())(q),
        [_r(B, 2, 4, 3), _r(2, 4, 3)], (0, None)),
}

# primitives whose public op has no batching rule (each runs as the loop, with a warning): none today
FALLS_BACK = {}

# a plain unary primitive (primitive_rows.py, from ops.def) without a case of its own: the method on inputs in
# (0.1, 0.9), inside the domain of every such function met so far but acosh's, [1, inf)
PRIMITIVE_CASES["acosh"] = (lambda dg, a: a.acosh(), [RNG.uniform(1.1, 3.0, (B, 4))], 0)
for _name, _ in UNARY_PRIMITIVES:
    PRIMITIVE_CASES.setdefault(_name, ((lambda n: lambda dg, a: getattr(a, n)())(_name),
                                       [RNG.uniform(0.1, 0.9, (B, 4))], 0))

_GRU = {}


@pytest.fixture(autouse=True)
def _modules(dg):
    if dg.__name__ not in _GRU:
        dg.manual_seed(0)
        _GRU[dg.__name__] = dg.nn.GRU(3, 2).double()


def test_every_primitive_has_a_case():
    assert sorted(set(PRIMITIVE_CASES) | set(FALLS_BACK)) == sorted(OP_NAMES), \
        "each primitive of ops.def needs a batching case here, or a line in FALLS_BACK"


@pytest.mark.parametrize("name", sorted(PRIMITIVE_CASES))
def test_primitive_rule_matches_the_loop(dg, name):
    fn, arrays, in_dims = PRIMITIVE_CASES[name]
    _check_against_loop(dg, lambda *xs: fn(dg, *xs), arrays, in_dims)


COMPOSITE_CASES = {
    "linear": (lambda dg, x, w, b: _F(dg).linear(x, w, b), [_r(B, 2, 3), _r(4, 3), _r(4)], (0, None, None)),
    "linear_batched_weight": (lambda dg, x, w, b: _F(dg).linear(x, w, b), [_r(B, 3), _r(B, 4, 3), _r(B, 4)], 0),
    "conv2d": (lambda dg, x, w: _F(dg).conv2d(x, w, padding=1), [_r(B, 2, 2, 4, 4), _r(3, 2, 3, 3)], (0, None)),
    "conv2d_unbatched_input": (lambda dg, x, w: _F(dg).conv2d(x, w), [_r(B, 2, 4, 4), _r(3, 2, 3, 3)], (0, None)),
    "conv2d_batched_weight": (lambda dg, x, w, b: _F(dg).conv2d(x, w, b, stride=2), [_r(B, 2, 2, 5, 5),
                                                                                    _r(B, 3, 2, 3, 3), _r(B, 3)], 0),
    "conv1d_batched_weight": (lambda dg, x, w: _F(dg).conv1d(x, w, groups=2), [_r(B, 2, 4, 6), _r(B, 2, 2, 3)], 0),
    "max_pool2d": (lambda dg, x: _F(dg).max_pool2d(x, 2), [_r(B, 2, 2, 4, 4)], 0),
    "avg_pool2d": (lambda dg, x: _F(dg).avg_pool2d(x, 2), [_r(B, 2, 4, 4)], 0),
    "adaptive_avg_pool2d": (lambda dg, x: _F(dg).adaptive_avg_pool2d(x, 1), [_r(B, 2, 2, 4, 4)], 0),
    "mse_loss": (lambda dg, a, b: (_F(dg).mse_loss(a, b), _F(dg).mse_loss(a, b, reduction="sum")),
                 [_r(B, 2, 4), _r(2, 4)], (0, None)),
    "nll_loss": (lambda dg, a, t: _F(dg).nll_loss(a.log_softmax(-1), t), [_r(B, 2, 5), _idx(5, B, 2)], 0),
    "cross_entropy_one_sample": (lambda dg, a, t: _F(dg).cross_entropy(a, t), [_r(B, 5), _idx(5, B)], 0),
    "binary_cross_entropy_with_logits": (lambda dg, a, t: _F(dg).binary_cross_entropy_with_logits(a, t),
                                         [_r(B, 4), RNG.uniform(0, 1, (B, 4))], 0),
    "flatten_transpose_unsqueeze": (lambda dg, a: (a.flatten(), a.transpose(0, 1), a.unsqueeze(-1), a.t(),
                                                   a.unsqueeze(0).squeeze(0), a.movedim(0, 1)), [_r(B, 2, 3)], 0),
    "stack_split_unbind": (lambda dg, a, b: (dg.stack([a, b], 1), a.split(1, 1), a.unbind(0), a.chunk(3, 1)),
                           [_r(B, 2, 3), _r(2, 3)], (0, None)),
    "advanced_index": (lambda dg, a, i: (a[i], a[:, i]), [_r(B, 3, 4), np.array([2, 0])], (0, None)),
    "einsum": (lambda dg, a, b: dg.einsum("ij,jk->ik", a, b), [_r(B, 2, 3), _r(3, 4)], (0, None)),
    "mv_dot_bmm": (lambda dg, a, v: (dg.mv(a, v), dg.dot(v, v), dg.mm(a, a.t())), [_r(B, 2, 3), _r(B, 3)], 0),
    "reductions": (lambda dg, a: (a.max(1)[0], a.max(1)[1], a.argmax(), a.argmax(1), a.var(1), a.std(),
                                  a.prod(1), a.max()), [_r(B, 2, 4)], 0),
    "creation_like": (lambda dg, a: (dg.zeros_like(a), dg.ones_like(a) * a, a.new_zeros(2) + a[0, :2]),
                      [_r(B, 2, 4)], 0),
    "zero_d_rows": (lambda dg, a, b: (a * b, a + 1, (a * b).sum()), [_r(B), _r(B, 3)], 0),
    "dropout_eval": (lambda dg, a: _F(dg).dropout(a, 0.5, training=False), [_r(B, 4)], 0),
    "more_dim_ops": (lambda dg, a: (a.flip(0), dg.flip(a, (0, 1)), a.flip(-1, 0), a.tril(), dg.triu(a, 1),
                                    a.diagonal(), a.unflatten(1, (2, 2)), _F(dg).normalize(a), _F(dg).glu(a),
                                    a.T, a.mT, a.mH, a.H, a.adjoint(), a.softmax(dim=-1), a.cumsum(dim=1)),
                     [_r(B, 3, 4)], 0),
    "mlp": (lambda dg, x, w1, w2: (x @ w1).tanh() @ w2, [_r(B, 5), _r(5, 4), _r(4, 2)], (0, None, None)),
}


@pytest.mark.parametrize("name", sorted(COMPOSITE_CASES))
def test_composite_rule_matches_the_loop(dg, name):
    fn, arrays, in_dims = COMPOSITE_CASES[name]
    _check_against_loop(dg, lambda *xs: fn(dg, *xs), arrays, in_dims)


def test_an_op_without_a_rule_falls_back_with_a_warning(dg):
    vm = _vm(dg)
    x = _tensor(dg, _r(B, 4))
    vm.FALLBACKS.clear()
    vm._WARNED.discard("bincount")
    x = dg.tensor(np.array([[0, 1, 2, 2], [2, 1, 0, 0], [1, 2, 2, 0]]))   # every row's max is 2: the shapes agree
    with pytest.warns(UserWarning, match="no batching rule for bincount"):
        got = dg.vmap(lambda r: dg.bincount(r))(x)
    assert vm.FALLBACKS == ["bincount"]
    want = np.stack([np.bincount(_np(x)[i]) for i in range(B)])
    np.testing.assert_array_equal(_np(got), want)


def test_nested_vmap_and_dims(dg):
    a, b = _r(2, 3, 4), _r(3, 4, 2)
    x, y = _tensor(dg, a), _tensor(dg, b)
    # outer over x's dim 0 and y's dim 2, inner over dim 0 of both rows: out[i, j] = x[i, j] * y[j, :, i]
    got = dg.vmap(dg.vmap(lambda r, s: (r * s).sum()), in_dims=(0, 2))(x, y)
    want = np.einsum("ijk,jki->ij", a, b)
    np.testing.assert_allclose(_np(got), want, rtol=1e-12)
    # out_dims, a dict input, a tuple output with None out_dims
    got = dg.vmap(lambda d: (d["u"].sin(), d["v"].sum()), in_dims=({"u": 1, "v": None},), out_dims=(1, None))(
        {"u": x, "v": y})
    np.testing.assert_allclose(_np(got[0]), np.sin(a), rtol=1e-12)
    np.testing.assert_allclose(_np(got[1]), b.sum(), rtol=1e-12)
    # an output that does not depend on the mapped input is expanded
    got = dg.vmap(lambda r: dg.ones(2), in_dims=0)(x)
    assert tuple(got.shape) == (2, 2)


def test_chunk_size_gives_the_same_values(dg):
    x = _tensor(dg, _r(7, 3))
    whole = dg.vmap(lambda r: (r.exp(), r.sum()))(x)
    for chunk in (1, 2, 3, 7, 10):
        part = dg.vmap(lambda r: (r.exp(), r.sum()), chunk_size=chunk)(x)
        for w, p in zip(whole, part):
            np.testing.assert_allclose(_np(p), _np(w), rtol=1e-12)


def test_randomness(dg):
    F = _F(dg)
    x = _tensor(dg, np.ones((4, 50)))
    with pytest.raises(RuntimeError, match="randomness error mode"):
        dg.vmap(lambda r: F.dropout(r, 0.5))(x)
    with pytest.raises(RuntimeError, match="randomness error mode"):
        dg.vmap(lambda r: r + dg.randn(50))(x)
    same = _np(dg.vmap(lambda r: F.dropout(r, 0.5), randomness="same")(x))
    assert (same == same[0]).all() and (same == 0).any()
    different = _np(dg.vmap(lambda r: F.dropout(r, 0.5), randomness="different")(x))
    assert not (different == different[0]).all()
    assert set(np.unique(different)) <= {0.0, 2.0}
    noise = _np(dg.vmap(lambda r: r + dg.randn(50), randomness="different")(x))
    assert noise.shape == (4, 50) and not np.allclose(noise, noise[0])
    noise = _np(dg.vmap(lambda r: r + dg.randn(50), randomness="same")(x))
    assert np.allclose(noise, noise[0])


def test_randomness_of_gumbel_softmax_and_rrelu(dg):
    """F.gumbel_softmax and F.rrelu draw on the physical tensor under randomness='different' (a dim counted in the
    row), and refuse 'same' with a batched input, as torch.func."""
    F = _F(dg)
    x = _tensor(dg, np.zeros((4, 3, 6)))
    for d in (-1, 0, 1):
        y = _np(dg.vmap(lambda r: F.gumbel_softmax(r, tau=0.5, dim=d), randomness="different")(x))
        np.testing.assert_allclose(y.sum(d if d < 0 else d + 1), 1.0, rtol=1e-6)
        assert not np.allclose(y, y[0])                  # each row its own noise (the logits are all equal)
    hard = _np(dg.vmap(lambda r: F.gumbel_softmax(r, hard=True), randomness="different")(x))
    assert set(np.unique(hard)) == {0.0, 1.0} and (hard.sum(-1) == 1).all()
    with pytest.raises(RuntimeError, match="same randomness"):
        dg.vmap(lambda r: F.gumbel_softmax(r), randomness="same")(x)
    neg = _tensor(dg, -np.ones((4, 50)))
    slopes = _np(dg.vmap(lambda r: F.rrelu(r, training=True), randomness="different")(neg))
    assert ((slopes <= -1 / 8) & (slopes >= -1 / 3)).all() and not np.allclose(slopes, slopes[0])


def test_randomness_of_attention_dropout(dg):
    """scaled_dot_product_attention draws its dropout inside the fused kernel: vmap's randomness= applies to it as
    to a random op ('error' refuses, 'different' gives each row its own mask), and what the kernel cannot give is
    refused, not run with the wrong meaning."""
    F = _F(dg)
    q = _tensor(dg, np.ones((3, 1, 6, 4)))
    sdpa = lambda r: F.scaled_dot_product_attention(r, r, r, dropout_p=0.5)      # noqa: E731
    with pytest.raises(RuntimeError, match="randomness error mode"):
        dg.vmap(sdpa)(q)
    different = _np(dg.vmap(sdpa, randomness="different")(q))
    assert different.shape == (3, 1, 6, 4) and not np.allclose(different, different[0])
    with pytest.raises(RuntimeError, match="randomness='same' on a batched input is not supported"):
        dg.vmap(sdpa, randomness="same")(q)
    fixed = _tensor(dg, np.ones((1, 6, 4)))
    with pytest.raises(RuntimeError, match="randomness='different' on an unbatched input is not supported"):
        dg.vmap(lambda r: r + F.scaled_dot_product_attention(fixed, fixed, fixed, dropout_p=0.5),
                randomness="different")(q)
    np.testing.assert_allclose(_np(dg.vmap(lambda r: F.scaled_dot_product_attention(r, r, r))(q)), _np(q))


def test_data_dependent_control_flow_raises_torchs_error(dg):
    x = _tensor(dg, _r(3, 2))
    with pytest.raises(RuntimeError, match="data-dependent control flow"):
        dg.vmap(lambda r: r if r.sum() > 0 else -r)(x)
    with pytest.raises(RuntimeError, match=r"\.item\(\)"):
        dg.vmap(lambda r: r * r.sum().item())(x)


def test_in_place_ops(dg):
    a = _r(3, 4)
    x = _tensor(dg, a)

    def f(r):
        r = r.clone()
        r.mul_(2)
        r[0] = 5.0
        r[1:3] += r[3]
        return r
    got = dg.vmap(f)(x)
    want = 2 * a
    want[:, 0] = 5.0
    want[:, 1:3] += want[:, 3:4]
    np.testing.assert_allclose(_np(got), want, rtol=1e-12)
    # writing a batched value into an unbatched tensor is torch's error
    y = dg.zeros(4, dtype=dg.float64)
    with pytest.raises(RuntimeError, match="inplace"):
        dg.vmap(lambda r: y.add_(r))(x)


def test_in_place_view_changes_of_a_row(dg):
    """t_, transpose_, swapaxes_, swapdims_, unsqueeze_, as_strided_ change the row's logical view (the physical
    tensor's dims past the batch dims), fill_diagonal_ writes each row's diagonal, deepcopy copies the row: each
    against the loop, with gradients through the view change."""
    import copy
    a = _r(B, 2, 3)

    def f(r):
        r = r * 1.0
        r.t_()                      # (3, 2)
        r.unsqueeze_(-1)            # (3, 2, 1)
        r.transpose_(0, 2)          # (1, 2, 3)
        r.swapaxes_(0, 1)           # (2, 1, 3)
        r.swapdims_(-1, dim1=1)     # (2, 3, 1)
        r.swapaxes_(axis0=0, axis1=0)
        return r * r
    x = _tensor(dg, a).requires_grad_(True)
    got = dg.vmap(f)(x)
    rows = [f(_tensor(dg, a[b]).requires_grad_(True)) for b in range(B)]
    np.testing.assert_allclose(_np(got), np.stack([_np(r) for r in rows]), rtol=1e-12)
    (g,) = dg.autograd.grad(got.sum(), x)
    np.testing.assert_allclose(_np(g), 2 * a, rtol=1e-12)
    with pytest.raises((IndexError, RuntimeError)):
        dg.vmap(lambda r: r.clone().transpose_(0, 5))(_tensor(dg, a))
    # as_strided_ from each row's first element; fill_diagonal_ with wrap on a tall row; deepcopy of a row
    got = dg.vmap(lambda r: r.clone().as_strided_((2, 2), (1, 2)))(_tensor(dg, a))
    want = np.stack([a[b].reshape(-1)[[[0, 2], [1, 3]]] for b in range(B)])
    np.testing.assert_allclose(_np(got), want, rtol=1e-12)
    with pytest.raises(RuntimeError, match="storage_offset"):
        dg.vmap(lambda r: r.clone().as_strided_((2, 2), (1, 2), 1))(_tensor(dg, a))
    tall = _r(B, 5, 2)
    got = dg.vmap(lambda r: r.clone().fill_diagonal_(-1.0, wrap=True))(_tensor(dg, tall))
    want = tall.copy()
    for b in range(B):
        np.fill_diagonal(want[b], -1.0, wrap=True)
    np.testing.assert_allclose(_np(got), want, rtol=1e-12)
    got = dg.vmap(lambda r: copy.deepcopy(r) + 1)(_tensor(dg, a))
    np.testing.assert_allclose(_np(got), a + 1, rtol=1e-12)


def test_pointwise_promotion_of_zero_dim_rows(dg):
    """The dtype of a pointwise op on 0-d rows follows the loop's (torch's) rule: a 0-d row and a 0-d tensor of
    another dtype promote as two 0-d tensors, though the row's physical tensor has a batch dim; a dimensioned row
    is not promoted by a 0-d tensor, and rows of different ranks broadcast as the loop's do."""
    xs = dg.tensor(np.array([1.0, 2.0, 3.0], np.float32))
    half = dg.tensor(0.5, dtype=dg.float64)
    for f in (lambda r: r * half, lambda r: half - r, lambda r: r + 1, lambda r: dg.mul(r, r)):
        got = dg.vmap(f)(xs)
        want = dg.stack([f(xs[b]) for b in range(3)])
        assert got.dtype == want.dtype
        np.testing.assert_allclose(_np(got), _np(want), rtol=1e-6)
    m = dg.tensor(_r(3, 2, 4).astype(np.float32))
    for f in (lambda r: r * half, lambda r, v=dg.tensor(_r(4)): r + v, lambda r, c=dg.tensor(_r(3, 2, 4)): c * r):
        got = dg.vmap(f)(m)
        want = dg.stack([f(m[b]) for b in range(3)])
        assert got.dtype == want.dtype and tuple(got.shape) == tuple(want.shape)
        np.testing.assert_allclose(_np(got), _np(want), rtol=1e-6)
    an, bn = _r(3, 4), _r(3, 2, 4)
    got = dg.vmap(lambda p, q: p * q)(dg.tensor(an), dg.tensor(bn))
    np.testing.assert_allclose(_np(got), an[:, None, :] * bn, rtol=1e-12)


def test_errors(dg):
    with pytest.raises(ValueError, match="same size in the mapped dimension"):
        dg.vmap(lambda a, b: a + b)(dg.ones(2, 3), dg.ones(3, 3))
    with pytest.raises(ValueError, match="must only return Tensors"):
        dg.vmap(lambda r: 3)(dg.ones(3))
    with pytest.raises(RuntimeError, match="randomness"):
        dg.vmap(lambda r: r, randomness="bad")
    with pytest.raises(RuntimeError, match="outside the vmap"):
        kept = []
        dg.vmap(lambda r: kept.append(r) or r)(dg.ones(3))
        kept[0] + 1


# ----- transforms inside vmap -----------------------------------------------------------------------------------
def _mlp_loss(dg):
    F = _F(dg)

    def loss(params, x, t):
        h = F.linear(x, params["w1"], params["b1"]).tanh()
        return F.cross_entropy(F.linear(h, params["w2"], params["b2"]).unsqueeze(0), t.unsqueeze(0))
    return loss


def _params(dg):
    rng = np.random.default_rng(5)
    return {k: _tensor(dg, rng.standard_normal(s)) for k, s in
            (("w1", (6, 4)), ("b1", (6,)), ("w2", (3, 6)), ("b2", (3,)))}


def test_per_sample_gradients_match_the_loop(dg):
    func = dg.func
    loss = _mlp_loss(dg)
    params = _params(dg)
    xs, ts = _tensor(dg, _r(5, 4)), _tensor(dg, _idx(3, 5))
    vm = _vm(dg)
    vm.FALLBACKS.clear()
    per_sample = func.vmap(func.grad(loss), in_dims=(None, 0, 0))(params, xs, ts)
    assert not vm.FALLBACKS
    for i in range(5):
        g = func.grad(loss)(params, xs[i], ts[i])
        for k in params:
            np.testing.assert_allclose(_np(per_sample[k][i]), _np(g[k]), rtol=1e-10, atol=1e-12)


def test_per_sample_gradients_of_a_cnn_match_the_loop(dg):
    func, F, nn = dg.func, _F(dg), dg.nn
    dg.manual_seed(1)
    model = nn.Sequential(nn.Conv2d(1, 3, 3), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(), nn.Linear(12, 4)).double()
    params = {k: v.detach() for k, v in model.named_parameters()}

    def loss(p, x, t):
        out = func.functional_call(model, p, (x.unsqueeze(0),))
        return F.cross_entropy(out, t.unsqueeze(0))
    xs, ts = _tensor(dg, _r(4, 1, 6, 6)), _tensor(dg, _idx(4, 4))
    vm = _vm(dg)
    vm.FALLBACKS.clear()
    per_sample = func.vmap(func.grad(loss), in_dims=(None, 0, 0))(params, xs, ts)
    assert not vm.FALLBACKS
    for i in range(4):
        g = func.grad(loss)(params, xs[i], ts[i])
        for k in params:
            np.testing.assert_allclose(_np(per_sample[k][i]), _np(g[k]), rtol=1e-10, atol=1e-12)


def test_per_sample_gradients_match_torch_func(dg):
    torch = pytest.importorskip("torch")
    loss = _mlp_loss(dg)
    params = _params(dg)
    x, t = _r(5, 4), _idx(3, 5)
    ours = dg.func.vmap(dg.func.grad(loss), in_dims=(None, 0, 0))(params, _tensor(dg, x), _tensor(dg, t))

    def tloss(p, xi, ti):
        h = torch.nn.functional.linear(xi, p["w1"], p["b1"]).tanh()
        return torch.nn.functional.cross_entropy(torch.nn.functional.linear(h, p["w2"], p["b2"]).unsqueeze(0),
                                                 ti.unsqueeze(0))
    tparams = {k: torch.tensor(_np(v)) for k, v in params.items()}
    theirs = torch.func.vmap(torch.func.grad(tloss), in_dims=(None, 0, 0))(tparams, torch.tensor(x),
                                                                           torch.tensor(t))
    for k in params:
        np.testing.assert_allclose(_np(ours[k]), theirs[k].numpy(), rtol=1e-10, atol=1e-12)


def test_vmap_of_jvp_and_vjp(dg):
    func = dg.func
    a = _r(4, 3)
    xs = _tensor(dg, a)
    tangent = _tensor(dg, _r(3))
    jv = func.vmap(lambda x: func.jvp(lambda z: (z.sin() * z).sum(), (x,), (tangent,))[1])(xs)
    want = ((np.cos(a) * a + np.sin(a)) * _np(tangent)).sum(1)
    np.testing.assert_allclose(_np(jv), want, rtol=1e-10)
    # vjp inside vmap, and vmap over the cotangents of one vjp (jacrev's pattern)
    vj = func.vmap(lambda x: func.vjp(lambda z: z.tanh(), x)[1](dg.ones_like(x))[0])(xs)
    np.testing.assert_allclose(_np(vj), 1 - np.tanh(a) ** 2, rtol=1e-10)
    vm = _vm(dg)
    vm.FALLBACKS.clear()
    _, pullback = func.vjp(lambda z: z.exp(), xs[0])
    rows = func.vmap(pullback)(_tensor(dg, np.eye(3)))[0]
    np.testing.assert_allclose(_np(rows), np.diag(np.exp(a[0])), rtol=1e-10)
    # a coupled function with two primals and aux: vmap(vjp_fn) batches (no loop), rows are J^T u per cotangent
    w = _tensor(dg, _r(3, 2))
    _, pullback, aux = func.vjp(lambda z, m: ((z @ m).tanh(), z.sum()), xs[0], w, has_aux=True)
    us = _r(5, 2)
    gz, gw = func.vmap(pullback)(_tensor(dg, us))
    assert not vm.FALLBACKS, vm.FALLBACKS
    h = a[0] @ _np(w)
    for k in range(5):
        g = us[k] * (1 - np.tanh(h) ** 2)
        np.testing.assert_allclose(_np(gz)[k], _np(w) @ g, rtol=1e-10)
        np.testing.assert_allclose(_np(gw)[k], np.outer(a[0], g), rtol=1e-10)
    np.testing.assert_allclose(_np(aux), a[0].sum(), rtol=1e-12)


def test_jacobians_by_vmap_match_torch(dg):
    torch = pytest.importorskip("torch")
    w = _r(3, 3)
    x = _r(3)

    def ours(z):
        return (z @ _tensor(dg, w)).tanh() * z

    def theirs(z):
        return (z @ torch.tensor(w)).tanh() * z
    for ofunc, tfunc in ((dg.func.jacrev, torch.func.jacrev), (dg.func.jacfwd, torch.func.jacfwd),
                         (dg.func.hessian, torch.func.hessian)):
        fn_o = ofunc(lambda z: ours(z).sum()) if ofunc is dg.func.hessian else ofunc(ours)
        fn_t = tfunc(lambda z: theirs(z).sum()) if tfunc is torch.func.hessian else tfunc(theirs)
        np.testing.assert_allclose(_np(fn_o(_tensor(dg, x))), fn_t(torch.tensor(x)).numpy(), rtol=1e-10,
                                   atol=1e-12)
    # per-sample Jacobians: vmap of jacrev
    xs = _r(4, 3)
    got = dg.func.vmap(dg.func.jacrev(ours))(_tensor(dg, xs))
    want = torch.func.vmap(torch.func.jacrev(theirs))(torch.tensor(xs))
    np.testing.assert_allclose(_np(got), want.numpy(), rtol=1e-10, atol=1e-12)


def test_ensemble_with_stack_module_state(dg):
    func, nn = dg.func, dg.nn
    dg.manual_seed(3)
    models = [nn.Sequential(nn.Linear(4, 5), nn.Tanh(), nn.Linear(5, 2)).double() for _ in range(3)]
    params, buffers = func.stack_module_state(models)
    x = _tensor(dg, _r(6, 4))

    def run(p, b, data):
        return func.functional_call(models[0], (p, b), (data,))
    vm = _vm(dg)
    vm.FALLBACKS.clear()
    got = func.vmap(run, in_dims=(0, 0, None))(params, buffers, x)
    assert not vm.FALLBACKS
    for i, m in enumerate(models):
        np.testing.assert_allclose(_np(got[i]), _np(m(x)), rtol=1e-12)
    # the ensemble trains in one vmap: the gradient of the summed losses reaches every stacked parameter
    loss = func.vmap(run, in_dims=(0, 0, None))(params, buffers, x).pow(2).sum()
    loss.backward()
    for i, m in enumerate(models):
        m(x).pow(2).sum().backward()
        np.testing.assert_allclose(_np(params["0.weight"].grad[i]), _np(m[0].weight.grad), rtol=1e-10)


def test_second_order_through_per_sample_linear(dg):
    """Note [Per-sample gradients of linear]: the shared-weight linear under hessian (forward over reverse) and
    grad of grad, per sample, against the loop."""
    func, F = dg.func, _F(dg)
    w1, w2 = _tensor(dg, _r(4, 3)), _tensor(dg, _r(2, 4))
    xs = _tensor(dg, _r(3, 3))

    def loss(w, x):
        return F.linear(F.linear(x, w).tanh(), w2).pow(2).sum()
    for transform in (func.hessian, lambda f: func.jacrev(func.grad(f))):
        got = func.vmap(transform(loss), in_dims=(None, 0))(w1, xs)
        for i in range(3):
            want = transform(loss)(w1, xs[i])
            np.testing.assert_allclose(_np(got[i]), _np(want), rtol=1e-9, atol=1e-11)
    # and the whole per-sample-gradient computation against finite differences of one row's loss
    g = func.vmap(func.grad(loss), in_dims=(None, 0))(w1, xs)
    base, eps = _np(w1), 1e-6
    for i in range(3):
        fd = np.zeros_like(base)
        for k in np.ndindex(base.shape):
            e = np.zeros_like(base)
            e[k] = eps
            fd[k] = (_np(loss(_tensor(dg, base + e), xs[i])) - _np(loss(_tensor(dg, base - e), xs[i]))) / (2 * eps)
        np.testing.assert_allclose(_np(g[i]), fd, rtol=1e-6, atol=1e-8)


def test_transforms_around_vmap(dg):
    """vmap inside grad, jvp and jacfwd: the batched computation is differentiated as any other."""
    func = dg.func
    a = _r(3, 4)
    x = _tensor(dg, a)
    batched_sin_sum = func.vmap(lambda r: (r.sin() * r).sum())
    g = func.grad(lambda z: batched_sin_sum(z).sum())(x)
    np.testing.assert_allclose(_np(g), np.cos(a) * a + np.sin(a), rtol=1e-10)
    t = _tensor(dg, _r(3, 4))
    _, jv = func.jvp(batched_sin_sum, (x,), (t,))
    np.testing.assert_allclose(_np(jv), ((np.cos(a) * a + np.sin(a)) * _np(t)).sum(1), rtol=1e-10)
    jac = func.jacfwd(func.vmap(lambda r: r.exp()))(x[0])
    np.testing.assert_allclose(_np(jac), np.diag(np.exp(a[0])), rtol=1e-10)


def test_a_vmap_in_one_thread_does_not_batch_another_threads_calls(dg):
    inside, done, seen = threading.Event(), threading.Event(), []

    def other():
        inside.wait()
        seen.append(tuple(dg.randn(3).shape))       # no randomness error: this thread runs no vmap
        done.set()

    def f(r):
        inside.set()
        done.wait(10)
        return r * 2
    worker = threading.Thread(target=other)
    worker.start()
    dg.vmap(f)(dg.ones(2, 3))
    worker.join()
    assert seen == [(3,)]
