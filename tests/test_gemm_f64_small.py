"""The float64 product kernels: dyngrad's own AVX-512 kernel for small products (Note [Own float64 small-product
kernel] in csrc/dyngrad/kernels/gemm_f64_small.cpp) and the BLAS path every other CPU takes (forced here with
_C._set_gemm_kernel("blas")), against numpy over odd shapes, layouts, k blocks and thread counts; and the float64
recurrent layers that use it with their weight packed once (Note [Packed steps in float64] in kernels/rnn.cpp)."""
import numpy as np
import pytest

import dyngrad as dg
from dyngrad import _C


def _has_avx512():
    before = _C._gemm_kernel()
    try:
        _C._set_gemm_kernel("avx512")
        return True
    except RuntimeError:       # no AVX-512F: only the BLAS path runs (and is what such CPUs use)
        return False
    finally:
        _C._set_gemm_kernel(before)


KERNELS = ["blas"] + (["avx512"] if _has_avx512() else [])


@pytest.fixture(params=KERNELS)
def kernel(request):
    before = _C._set_gemm_kernel(request.param)
    yield request.param
    _C._set_gemm_kernel(before)


def _close(got, ref, k):
    assert got.dtype == np.float64
    scale = max(1.0, float(np.abs(ref).max())) if ref.size else 1.0
    err = float(np.abs(got - ref).max()) / scale if ref.size else 0.0
    assert err < 1e-14 * max(1.0, np.sqrt(k)) * 8, err


SIZES = [1, 5, 8, 9, 23, 24, 25, 51, 97]


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("k", [1, 3, 51, 200, 450])
@pytest.mark.parametrize("m", [1, 7, 17, 25, 49, 204])
def test_shapes_and_layouts(kernel, n, k, m):
    rng = np.random.default_rng(n * 10000 + k * 10 + m)
    a, b = rng.standard_normal((n, k)), rng.standard_normal((k, m))
    ref = a @ b
    ta, tb = dg.tensor(a), dg.tensor(b)
    at, bt = dg.tensor(np.ascontiguousarray(a.T)), dg.tensor(np.ascontiguousarray(b.T))
    _close((ta @ tb).numpy(), ref, k)             # A B
    _close((ta @ bt.mT).numpy(), ref, k)          # A B^T: linear's forward
    _close((at.mT @ tb).numpy(), ref, k)          # A^T B: a weight gradient
    _close((at.mT @ bt.mT).numpy(), ref, k)       # A^T B^T


def test_strided_and_batched(kernel):
    rng = np.random.default_rng(1)
    big = rng.standard_normal((70, 90))
    a, b = big[1:38:2, 3:60], big[2:59, 5:70:3]     # strided views (neither dim contiguous for b)
    got = (dg.tensor(big)[1:38:2, 3:60] @ dg.tensor(big)[2:59, 5:70:3]).numpy()
    _close(got, a @ b, 57)
    x, w = rng.standard_normal((3, 4, 33, 40)), rng.standard_normal((40, 29))
    _close((dg.tensor(x) @ dg.tensor(w)).numpy(), x @ w, 40)


def test_special_values(kernel):
    # c is written, not read: the result does not depend on what its memory held; inf and nan propagate as in numpy
    rng = np.random.default_rng(2)
    a, b = rng.standard_normal((20, 30)), rng.standard_normal((30, 27))
    a[3, 4], b[7, 9] = np.inf, np.nan
    with np.errstate(invalid="ignore"):
        ref = a @ b
    got = (dg.tensor(a) @ dg.tensor(b)).numpy()
    assert np.array_equal(np.isnan(got), np.isnan(ref)) and np.array_equal(np.isinf(got), np.isinf(ref))
    ok = np.isfinite(ref)
    _close(np.where(ok, got, 0), np.where(ok, ref, 0), 30)


@pytest.mark.parametrize("shape", [(97, 51, 204), (204, 97, 51), (16, 1500, 60), (300, 40, 70)])
def test_same_bits_at_one_and_two_threads(kernel, shape):
    n, k, m = shape
    rng = np.random.default_rng(3)
    a, b = dg.tensor(rng.standard_normal((n, k))), dg.tensor(rng.standard_normal((m, k)))
    before = dg.get_num_threads()
    try:
        outs = []
        for t in (1, 2):
            dg.set_num_threads(t)
            outs.append((a @ b.mT).numpy())
    finally:
        dg.set_num_threads(before)
    assert np.array_equal(outs[0], outs[1])


@pytest.mark.parametrize("mode", ["LSTM", "GRU", "RNN_TANH"])
def test_float64_layers_many_rows_match_the_steps(kernel, mode):
    # 70 rows: more than rnn.cpp's kFewRows, so the packed-weight step products of the own kernel (or the BLAS
    # products) rather than the portable tiles; the whole-layer node against the step functions' separate ops
    from dyngrad.nn.modules import rnn
    rng = np.random.default_rng(4)
    L, N, I, H = 3, 70, 5, 6
    layer = getattr(dg.nn, "RNN" if mode == "RNN_TANH" else mode)(I, H).double()
    x = dg.tensor(rng.standard_normal((L, N, I)), requires_grad=True)
    out, _ = layer(x)
    w_ih, w_hh, b_ih, b_hh = layer.weight_ih_l0, layer.weight_hh_l0, layer.bias_ih_l0, layer.bias_hh_l0
    h = dg.zeros(N, H, dtype=dg.float64)
    state = (h, h) if mode == "LSTM" else h
    steps = []
    for t in range(L):
        state = rnn._STEPS[mode](dg.nn.functional.linear(x[t], w_ih, b_ih), state, w_hh, b_hh)
        steps.append(state[0] if isinstance(state, tuple) else state)
    ref = dg.stack(steps)
    np.testing.assert_allclose(out.detach().numpy(), ref.detach().numpy(), rtol=1e-12, atol=1e-13)
    g = dg.tensor(rng.standard_normal((L, N, H)))
    gx, gw = dg.autograd.grad(out, (x, w_hh), g)
    rx, rw = dg.autograd.grad(ref, (x, w_hh), g)
    np.testing.assert_allclose(gx.numpy(), rx.numpy(), rtol=1e-11, atol=1e-12)
    np.testing.assert_allclose(gw.numpy(), rw.numpy(), rtol=1e-11, atol=1e-11)


def test_float64_lstm_gradcheck_many_rows(kernel):
    from dyngrad.nn.modules.rnn import _rnn_layer
    rng = np.random.default_rng(5)
    N, H = 66, 3
    gi = dg.tensor(rng.standard_normal((2, N, 4 * H)), requires_grad=True)
    h0 = dg.tensor(rng.standard_normal((N, H)), requires_grad=True)
    c0 = dg.tensor(rng.standard_normal((N, H)), requires_grad=True)
    w = dg.tensor(rng.standard_normal((4 * H, H)) * 0.5, requires_grad=True)
    b = dg.tensor(rng.standard_normal(4 * H) * 0.1, requires_grad=True)
    assert dg.autograd.gradcheck(lambda gi, h0, c0, w, b: _rnn_layer(gi, h0, c0, w, b, 2, False),
                                 (gi, h0, c0, w, b), eps=1e-6, atol=1e-6)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("H", [9, 11, 19, 51])
@pytest.mark.parametrize("N", [3, 70])
def test_lstm_layer_odd_hidden_matches_the_steps(kernel, dtype, H, N):
    # hidden sizes not a multiple of the vector width (the gate loops' scalar tails, Note [LSTM cell in two passes]
    # in kernels/rnn.cpp), few and many rows, against the step functions
    from dyngrad.nn.modules import rnn
    dt = getattr(dg, dtype)
    rng = np.random.default_rng(H * 100 + N)
    L, I = 4, 3
    layer = dg.nn.LSTM(I, H).to(dt)
    x = dg.tensor(rng.standard_normal((L, N, I)), dtype=dt, requires_grad=True)
    out, (hn, cn) = layer(x)
    w_ih, w_hh, b_ih, b_hh = layer.weight_ih_l0, layer.weight_hh_l0, layer.bias_ih_l0, layer.bias_hh_l0
    h = dg.zeros(N, H, dtype=dt)
    state, steps = (h, h), []
    for t in range(L):
        state = rnn.lstm_step(dg.nn.functional.linear(x[t], w_ih, b_ih), state, w_hh, b_hh)
        steps.append(state[0])
    ref = dg.stack(steps)
    tol = dict(rtol=1e-5, atol=1e-6) if dtype == "float32" else dict(rtol=1e-12, atol=1e-13)
    np.testing.assert_allclose(out.detach().numpy(), ref.detach().numpy(), **tol)
    np.testing.assert_allclose(cn.detach().numpy()[0], state[1].detach().numpy(), **tol)
    g = dg.tensor(rng.standard_normal((L, N, H)), dtype=dt)
    got = dg.autograd.grad(out, (x, w_hh, b_hh), g)
    want = dg.autograd.grad(ref, (x, w_hh, b_hh), g)
    for a, b in zip(got, want):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=tol["rtol"] * 10, atol=tol["atol"] * 10)
