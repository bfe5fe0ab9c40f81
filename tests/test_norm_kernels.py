"""The float32 kernels of layer_norm, softmax / log_softmax (forward and backward), cross_entropy and GELU's
derivative (Notes [layer_norm in 16 lanes] and [Softmax in 16 lanes] in csrc/dyngrad/kernels/reduce.cpp): at shapes
whose rows end in a vector tail (lengths around multiples of 16) and that are split over threads, against float64
(the same ops on float64 inputs, and torch where installed), and bitwise the same at 1 and at 2 threads. float64
gradcheck at the same shapes, on both engines.
"""
import numpy as np
import pytest

LENGTHS = [1, 5, 15, 16, 17, 31, 32, 33, 48, 64, 65, 128, 200]


def _t(m, a, grad=False):
    return m.tensor(np.asarray(a), requires_grad=grad)


def _close(a, b, rtol=2e-5, atol=2e-6):
    np.testing.assert_allclose(np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64), rtol=rtol, atol=atol)


def _layer_norm_all(m, x, w, b, g, dtype):
    xs = _t(m, x.astype(dtype), True)
    ws = None if w is None else _t(m, w.astype(dtype), True)
    bs = None if b is None else _t(m, b.astype(dtype), True)
    y = m.nn.functional.layer_norm(xs, (x.shape[-1],), ws, bs)
    y.backward(_t(m, g.astype(dtype)))
    return [y.detach().numpy(), xs.grad.numpy()] + [p.grad.numpy() for p in (ws, bs) if p is not None]


@pytest.mark.parametrize("D", LENGTHS)
@pytest.mark.parametrize("affine", ["both", "weight", "bias", "none"])
def test_layer_norm_float32_against_float64(cpp, D, affine):
    rng = np.random.default_rng(D)
    rows = 70
    x = rng.normal(0.5, 2.0, (rows, D))
    g = rng.normal(size=(rows, D))
    w = rng.normal(1.0, 0.3, D) if affine in ("both", "weight") else None
    b = rng.normal(0.0, 0.3, D) if affine in ("both", "bias") else None
    ours = _layer_norm_all(cpp, x, w, b, g, np.float32)
    want = _layer_norm_all(cpp, x, w, b, g, np.float64)
    # sums over 70 rows (dweight, dbias) and the cancelling terms of dx: looser than one rounding, far tighter than
    # any wrong formula or a lane read past the row's end
    for o, e in zip(ours, want):
        _close(o, e, rtol=1e-4, atol=2e-5 * max(1.0, np.abs(e).max()))


def test_layer_norm_matches_torch_at_the_gpt_shape(cpp):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(3)
    x, g = rng.normal(size=(12, 64, 128)).astype(np.float32), rng.normal(size=(12, 64, 128)).astype(np.float32)
    w, b = rng.normal(1, 0.2, 128).astype(np.float32), rng.normal(0, 0.2, 128).astype(np.float32)
    ours = _layer_norm_all(cpp, x, w, b, g, np.float32)
    theirs = _layer_norm_all(torch, x, w, b, g, np.float32)
    for o, e in zip(ours, theirs):
        _close(o, e, rtol=1e-4, atol=1e-4)


def _at_threads(cpp, n, fn):
    before = cpp.get_num_threads()
    cpp.set_num_threads(n)
    try:
        return fn()
    finally:
        cpp.set_num_threads(before)


@pytest.mark.parametrize("shape", [(1024, 128), (2049, 33), (300, 1000)])
def test_layer_norm_bits_do_not_depend_on_threads(cpp, shape):
    rng = np.random.default_rng(1)
    x, g = rng.normal(size=shape), rng.normal(size=shape)
    w, b = rng.normal(size=shape[-1]), rng.normal(size=shape[-1])
    one = _at_threads(cpp, 1, lambda: _layer_norm_all(cpp, x, w, b, g, np.float32))
    two = _at_threads(cpp, 2, lambda: _layer_norm_all(cpp, x, w, b, g, np.float32))
    for a, c in zip(one, two):
        np.testing.assert_array_equal(a, c)


def _softmax_all(m, x, g, dtype, log, dim=-1):
    xs = _t(m, x.astype(dtype), True)
    F = m.nn.functional
    y = (F.log_softmax if log else F.softmax)(xs, dim=dim)
    y.backward(_t(m, g.astype(dtype)))
    return y.detach().numpy(), xs.grad.numpy()


@pytest.mark.parametrize("n", LENGTHS)
@pytest.mark.parametrize("log", [False, True])
def test_softmax_float32_against_float64(cpp, n, log):
    rng = np.random.default_rng(n)
    x, g = rng.normal(0, 3, (37, n)), rng.normal(size=(37, n))
    ours = _softmax_all(cpp, x, g, np.float32, log)
    want = _softmax_all(cpp, x, g, np.float64, log)
    for o, e in zip(ours, want):
        _close(o, e, rtol=1e-5, atol=1e-5 * max(1.0, np.abs(e).max()))


def test_softmax_rows_of_minus_inf_and_nan(cpp):
    x = np.full((3, 20), -np.inf, np.float32)
    x[1, 3] = 0.5                  # one finite entry: a one-hot row
    x[2, 17] = np.nan              # a NaN in the vector tail: its row is NaN
    y = cpp.nn.functional.softmax(_t(cpp, x), dim=-1).numpy()
    assert np.isnan(y[0]).all()    # exp(-inf - 0) = 0 everywhere, 0 / 0 (torch's answer too)
    np.testing.assert_array_equal(y[1], np.eye(20, dtype=np.float32)[3])
    assert np.isnan(y[2]).all()
    big = np.array([[1e4, 1e4 - 1.0, -1e4] + [0.0] * 14], np.float32)  # the maximum subtracted: no overflow
    _close(cpp.nn.functional.softmax(_t(cpp, big), dim=-1).numpy()[0, :2],
           [1 / (1 + np.exp(-1.0)), np.exp(-1.0) / (1 + np.exp(-1.0))], rtol=1e-6)


def test_softmax_along_a_leading_dim(cpp):
    rng = np.random.default_rng(5)
    x, g = rng.normal(size=(17, 3, 5)), rng.normal(size=(17, 3, 5))
    for log in (False, True):
        ours = _softmax_all(cpp, x, g, np.float32, log, dim=0)
        want = _softmax_all(cpp, x, g, np.float64, log, dim=0)
        for o, e in zip(ours, want):
            _close(o, e, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("C", [1, 15, 17, 65, 1000])
def test_cross_entropy_float32_against_float64(cpp, C):
    rng = np.random.default_rng(C)
    logits = rng.normal(0, 2, (50, C))
    target = rng.integers(0, C, 50)
    target[3] = -100
    vals = []
    for dtype in (np.float32, np.float64):
        x = _t(cpp, logits.astype(dtype), True)
        loss = cpp.nn.functional.cross_entropy(x, cpp.tensor(target))
        loss.backward()
        vals.append((loss.item(), x.grad.numpy()))
    _close(vals[0][0], vals[1][0], rtol=1e-5)
    _close(vals[0][1], vals[1][1], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("shape", [(3, 17), (2, 33), (4, 16), (1, 5)])
def test_gradcheck_layer_norm_softmax_cross_entropy_float64(dg, shape):
    rng = np.random.default_rng(sum(shape))
    x = dg.tensor(rng.normal(size=shape), requires_grad=True)
    w = dg.tensor(rng.normal(1, 0.3, shape[-1]), requires_grad=True)
    b = dg.tensor(rng.normal(0, 0.3, shape[-1]), requires_grad=True)
    F = dg.nn.functional
    assert dg.autograd.gradcheck(lambda x, w, b: F.layer_norm(x, (shape[-1],), w, b), (x, w, b))
    assert dg.autograd.gradcheck(lambda x: F.softmax(x, dim=-1), (x,))
    assert dg.autograd.gradcheck(lambda x: F.log_softmax(x, dim=-1), (x,))
    target = dg.tensor(rng.integers(0, shape[-1], shape[0]))
    assert dg.autograd.gradcheck(lambda x: F.cross_entropy(x, target), (x,))
    assert dg.autograd.gradcheck(lambda x: F.gelu(x), (x,))
