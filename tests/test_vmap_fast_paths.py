"""vmap's fast paths (python/dyngrad/_api/ops/vmap.py: _fast_run at entry and exit, _pointwise_direct,
_reduce_direct and _dims_direct for a row's methods) give the loop's values and the general path's errors, on both
engines: the cases next to each fast path's conditions (in_dims at dim 1, None inputs, nested levels,
an input returned as it is, 0-d rows of another dtype, a row that escaped its vmap)."""
import numpy as np
import pytest


def _loop(dg, f, xs, dims):
    n = [x.shape[d] for x, d in zip(xs, dims) if d is not None][0]
    rows = [f(*[x if d is None else x.select(d, i) for x, d in zip(xs, dims)]) for i in range(n)]
    return dg.stack(rows)


def _check(dg, f, xs, in_dims):
    got = dg.vmap(f, in_dims=in_dims)(*xs)
    want = _loop(dg, f, xs, in_dims)
    assert tuple(got.shape) == tuple(want.shape)
    assert got.dtype == want.dtype
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-6, atol=1e-6)


def test_values_match_the_loop(dg):
    rng = np.random.default_rng(0)
    x = dg.tensor(rng.standard_normal((5, 4)).astype(np.float32))
    xt = dg.tensor(rng.standard_normal((4, 5)).astype(np.float32))
    w = dg.tensor(rng.standard_normal(4).astype(np.float32))
    _check(dg, lambda r: (r * w + 1.5).tanh().sum(), (x,), (0,))
    _check(dg, lambda r: (2 - r / w).exp().mean(), (xt,), (1,))                # in_dims 1: a movedim at entry
    _check(dg, lambda r, v: (r * v - v).abs().amax(), (x, w), (0, None))       # an unbatched input
    _check(dg, lambda r, s: (r + s).unsqueeze(0).unsqueeze(-1).sum(), (x, x), (0, 0))
    _check(dg, lambda r: r.unsqueeze(-2) * r.unsqueeze(1), (x,), (0,))
    _check(dg, lambda r: r.sum().unsqueeze(0), (x,), (0,))                     # 0-d row: the general path
    i = dg.tensor(np.arange(5))
    _check(dg, lambda r, k: r.sum() + k, (x, i), (0, 0))                       # 0-d rows of int64 and float32


def test_outputs_and_nesting(dg):
    x = dg.tensor(np.arange(12.0).reshape(3, 4))
    same = dg.vmap(lambda r: r)(x)
    np.testing.assert_array_equal(same.numpy(), x.numpy())
    same.add_(1)                                        # a view of x (as the loop's rows are)
    assert x.numpy()[0, 0] == 1.0
    x = dg.tensor(np.arange(12.0).reshape(3, 4))
    out = dg.vmap(lambda r: r * 2, out_dims=1)(x)
    np.testing.assert_array_equal(out.numpy(), (x.numpy() * 2).T)
    nested = dg.vmap(dg.vmap(lambda e: (e * 3).tanh()))(x)
    np.testing.assert_allclose(nested.numpy(), np.tanh(x.numpy() * 3), rtol=1e-12)
    outer = dg.vmap(lambda r: dg.vmap(lambda e, s: e * s, in_dims=(0, None))(r, r.sum()))(x)
    np.testing.assert_allclose(outer.numpy(), x.numpy() * x.numpy().sum(1, keepdims=True), rtol=1e-12)
    pair = dg.vmap(lambda r: (r + 1, r.sum()))(x)
    np.testing.assert_array_equal(pair[0].numpy(), x.numpy() + 1)
    np.testing.assert_array_equal(pair[1].numpy(), x.numpy().sum(1))


def test_errors_are_the_general_paths(dg):
    x = dg.ones(3, 4)
    with pytest.raises(ValueError, match="same size in the mapped dimension"):
        dg.vmap(lambda a, b: a + b)(x, dg.ones(2, 4))
    with pytest.raises(ValueError, match="in_dim=2"):
        dg.vmap(lambda r: r, in_dims=2)(x)
    with pytest.raises(ValueError, match="in_dims has 1 entries but 2 inputs"):
        dg.vmap(lambda a, b: a, in_dims=(0,))(x, x)
    with pytest.raises(ValueError, match="at least one Tensor"):
        dg.vmap(lambda a: a, in_dims=None)(x)
    with pytest.raises(ValueError, match="must only return Tensors"):
        dg.vmap(lambda r: 3)(x)
    kept = []
    dg.vmap(lambda r: kept.append(r) or r.tanh())(x)
    for use in (lambda k: k * 2, lambda k: 2 * k, lambda k: k.tanh(), lambda k: k.sum()):
        with pytest.raises(RuntimeError, match="outside the vmap"):
            use(kept[0])
