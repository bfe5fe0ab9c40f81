"""Binary ops of a contiguous tensor with one broadcast over its leading dims (x * w, x (N, k), w (k,) or (1, k)):
the C++ engine's row loop (Note [Row-broadcast binary loops] in csrc/dyngrad/kernels/elementwise.cpp) against numpy
and the strided loop it replaces (the same product on a non-contiguous copy), on both engines; either operand on the
left, arithmetic, comparisons (bool outputs), integer dtypes, in-place writes, and shapes the row loop must refuse."""
import numpy as np
import pytest

SHAPES = [((2000, 16), (16,)), ((7, 3, 5), (3, 5)), ((7, 3, 5), (1, 5)), ((4, 6), (1, 6)), ((5, 4, 3), (1, 1, 3)),
          ((3, 1, 5), (1, 5)), ((6, 5), (6, 1)), ((2, 3, 4), (2, 1, 4)), ((9, 2), (1, 1, 2))]
OPS = [("mul", lambda a, b: a * b, np.multiply), ("add", lambda a, b: a + b, np.add),
       ("sub", lambda a, b: a - b, np.subtract), ("div", lambda a, b: a / b, np.divide),
       ("maximum", lambda a, b: a.maximum(b), np.maximum), ("lt", lambda a, b: a < b, np.less),
       ("eq", lambda a, b: a == b, np.equal)]


@pytest.mark.parametrize("xs,ws", SHAPES)
@pytest.mark.parametrize("name,op,ref", OPS, ids=[o[0] for o in OPS])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64])
def test_row_broadcast(dg, xs, ws, name, op, ref, dtype):
    rng = np.random.default_rng(len(xs) * 7 + len(ws))
    if dtype == np.int64:
        if name == "div":
            pytest.skip("true division of int64 tensors promotes (another loop)")
        xn = rng.integers(-5, 6, xs)
        wn = rng.integers(-5, 6, ws)
    else:
        xn = rng.standard_normal(xs).astype(dtype)
        wn = (rng.standard_normal(ws) + 3).astype(dtype)
    x, w = dg.tensor(xn), dg.tensor(wn)
    for got, want in ((op(x, w), ref(xn, wn)), (op(w, x), ref(wn, xn))):
        assert tuple(got.shape) == want.shape
        assert got.numpy().dtype == want.dtype
        np.testing.assert_array_equal(got.numpy(), want)
    # the strided loop (a non-contiguous x) gives the same values
    xt = dg.tensor(np.ascontiguousarray(np.swapaxes(xn, 0, -1))).transpose(0, -1)
    np.testing.assert_array_equal(op(xt, w).numpy(), op(x, w).numpy())


def test_row_broadcast_inplace(dg):
    rng = np.random.default_rng(3)
    xn = rng.standard_normal((50, 8)).astype(np.float32)
    wn = rng.standard_normal(8).astype(np.float32)
    x = dg.tensor(xn.copy())
    x.mul_(dg.tensor(wn)).add_(dg.tensor(wn))
    np.testing.assert_array_equal(x.numpy(), xn * wn + wn)


def test_row_broadcast_gradients(dg):
    rng = np.random.default_rng(4)
    x = dg.tensor(rng.standard_normal((30, 4)), requires_grad=True)
    w = dg.tensor(rng.standard_normal(4), requires_grad=True)
    (x * w + w).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), np.broadcast_to(w.detach().numpy(), (30, 4)), rtol=0, atol=0)
    np.testing.assert_allclose(w.grad.numpy(), x.detach().numpy().sum(0) + 30, rtol=1e-12)
