"""The float32 product kernels: dyngrad's own AVX-512 kernel (Note [Own small-product kernel] in
csrc/dyngrad/kernels/gemm_avx512.cpp) and the BLAS path every other CPU takes (the fallback, forced here with
_C._set_gemm_kernel("blas")), each against a float64 numpy reference over odd shapes, layouts and batches."""
import numpy as np
import pytest

import dyngrad as dg
from dyngrad import _C



def _has_avx512():
    before = _C._gemm_kernel()
    try:
        _C._set_gemm_kernel("avx512")
        return True
    except RuntimeError:       # the CPU has no AVX-512F: only the fallback runs (and is what such CPUs use)
        return False
    finally:
        _C._set_gemm_kernel(before)


HAS_AVX512 = _has_avx512()
KERNELS = ["blas"] + (["avx512"] if HAS_AVX512 else [])


@pytest.fixture(params=KERNELS)
def kernel(request):
    before = _C._set_gemm_kernel(request.param)
    assert _C._gemm_kernel() == request.param
    yield request.param
    _C._set_gemm_kernel(before)


def _close(got, ref, k):
    # float32 sums of k products: error grows like sqrt(k) eps |a||b|; never the last ulp
    scale = max(1.0, float(np.abs(ref).max()))
    tol = 1e-5 * max(1.0, np.sqrt(k)) * 4
    assert got.dtype == np.float32
    err = float(np.abs(got.astype(np.float64) - ref).max()) / scale if ref.size else 0.0
    assert err < tol, (err, tol)


SIZES = [1, 7, 17, 33, 65]


@pytest.mark.parametrize("m", SIZES)
@pytest.mark.parametrize("k", [1, 7, 33, 300])
@pytest.mark.parametrize("n", SIZES + [513])
def test_shapes_and_layouts(kernel, m, k, n):
    rng = np.random.default_rng(m * 1000 + k * 10 + n)
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = rng.standard_normal((k, n)).astype(np.float32)
    ref = a.astype(np.float64) @ b.astype(np.float64)
    ta, tb = dg.tensor(a), dg.tensor(b)
    at, bt = dg.tensor(np.ascontiguousarray(a.T)), dg.tensor(np.ascontiguousarray(b.T))
    _close((ta @ tb).numpy(), ref, k)             # A B
    _close((ta @ bt.mT).numpy(), ref, k)          # A B^T: linear's forward, q @ k^T
    _close((at.mT @ tb).numpy(), ref, k)          # A^T B: the weight gradient
    _close((at.mT @ bt.mT).numpy(), ref, k)       # A^T B^T


def test_non_contiguous_and_offset_views(kernel):
    rng = np.random.default_rng(3)
    a = rng.standard_normal((40, 90)).astype(np.float32)
    b = rng.standard_normal((72, 100)).astype(np.float32)
    sa, sb = a[3:36:2, 5:75:1], b[1:71, 7:90:3]         # strided rows / strided columns
    ref = sa.astype(np.float64) @ sb.astype(np.float64)
    ta = dg.tensor(a)[3:36:2, 5:75]
    tb = dg.tensor(b)[1:71, 7:90:3]
    _close((ta @ tb).numpy(), ref, 70)
    # leading dimension larger than the width (a slice of columns), both operands
    ref2 = a[:, 10:43].astype(np.float64) @ b[:33, 20:61].astype(np.float64)
    _close((dg.tensor(a)[:, 10:43] @ dg.tensor(b)[:33, 20:61]).numpy(), ref2, 33)


@pytest.mark.parametrize("batch", [1, 3, 48])
def test_batched(kernel, batch):
    rng = np.random.default_rng(batch)
    q = rng.standard_normal((batch, 64, 32)).astype(np.float32)
    k = rng.standard_normal((batch, 64, 32)).astype(np.float32)
    v = rng.standard_normal((batch, 32, 17)).astype(np.float32)
    q64, k64 = q.astype(np.float64), k.astype(np.float64)
    _close((dg.tensor(q) @ dg.tensor(k).mT).numpy(), q64 @ k64.transpose(0, 2, 1), 32)
    _close((dg.tensor(q) @ dg.tensor(v)).numpy(), q64 @ v.astype(np.float64), 32)
    # a broadcast operand (the same weight for every batch)
    w = rng.standard_normal((32, 33)).astype(np.float32)
    _close((dg.tensor(q) @ dg.tensor(w)).numpy(), q64 @ w.astype(np.float64), 32)


def test_zero_sizes(kernel):
    for (m, k, n) in [(0, 5, 7), (5, 0, 7), (5, 7, 0), (0, 0, 0), (33, 0, 65)]:
        a = np.ones((m, k), np.float32)
        b = np.ones((k, n), np.float32)
        got = (dg.tensor(a) @ dg.tensor(b)).numpy()
        assert got.shape == (m, n)
        assert (got == 0).all()
    got = dg.nn.functional.linear(dg.zeros(4, 0), dg.zeros(3, 0), dg.tensor(np.arange(3, dtype=np.float32)))
    np.testing.assert_array_equal(got.numpy(), np.tile(np.arange(3, dtype=np.float32), (4, 1)))


def test_nan_and_inf_propagate(kernel):
    a = np.ones((17, 33), np.float32)
    b = np.ones((33, 40), np.float32)
    a[3, 5] = np.nan
    b[7, 20] = np.inf
    got = (dg.tensor(a) @ dg.tensor(b)).numpy()
    assert np.isnan(got[3]).all()
    assert np.isinf(got[np.arange(17) != 3, 20]).all()
    assert np.isfinite(np.delete(got[np.arange(17) != 3], 20, axis=1)).all()


def test_gradients_of_linear(kernel):
    rng = np.random.default_rng(11)
    x0 = rng.standard_normal((33, 129)).astype(np.float32)
    w0 = rng.standard_normal((65, 129)).astype(np.float32)
    b0 = rng.standard_normal(65).astype(np.float32)
    g0 = rng.standard_normal((33, 65)).astype(np.float32)
    x, w, b = (dg.tensor(v, requires_grad=True) for v in (x0, w0, b0))
    y = dg.nn.functional.linear(x, w, b)
    y.backward(dg.tensor(g0))
    x64, w64, g64 = x0.astype(np.float64), w0.astype(np.float64), g0.astype(np.float64)
    _close(y.detach().numpy(), x64 @ w64.T + b0, 129)
    _close(x.grad.numpy(), g64 @ w64, 65)
    _close(w.grad.numpy(), g64.T @ x64, 33)
    _close(b.grad.numpy(), g64.sum(0), 33)


def test_threads_do_not_change_bits(kernel):
    rng = np.random.default_rng(5)
    # 2^23 multiply-adds: split over the threads (from 2^20, matmul.cpp); k = 300 spans two k blocks
    a = dg.tensor(rng.standard_normal((56, 300)).astype(np.float32))
    b = dg.tensor(rng.standard_normal((500, 300)).astype(np.float32))
    before = dg.get_num_threads()
    try:
        dg.set_num_threads(1)
        one = (a @ b.mT).numpy()
        dg.set_num_threads(2)
        two = (a @ b.mT).numpy()
    finally:
        dg.set_num_threads(before)
    np.testing.assert_array_equal(one, two)


@pytest.mark.parametrize("m,k,n", [(1, 7, 5), (8, 33, 48), (64, 256, 256), (17, 300, 65), (65, 193, 513)])
@pytest.mark.parametrize("threads", [1, 2])
def test_a_product_and_its_tangent_in_one_call(kernel, m, k, n, threads):
    """Forward mode through x @ w (w constant): the product and its tangent tx @ w in one call (Note [A product and
    its tangent in one call] in gemm_avx512.cpp) give the bits of the two products computed apart, for w as given
    and transposed (linear's), a strided x, a broadcast tangent, on 1 and 2 threads (k > 192: two k blocks)."""
    rng = np.random.default_rng(m * 7 + k + n)
    x = dg.tensor(rng.standard_normal((m, k)).astype(np.float32))
    tx = dg.tensor(rng.standard_normal((m, k)).astype(np.float32))
    w = dg.tensor(rng.standard_normal((k, n)).astype(np.float32))
    wt = dg.tensor(np.ascontiguousarray(rng.standard_normal((k, n)).astype(np.float32).T))
    wide = dg.tensor(rng.standard_normal((m, 2 * k)).astype(np.float32))
    row = dg.tensor(rng.standard_normal((1, k)).astype(np.float32))
    before = dg.get_num_threads()
    try:
        dg.set_num_threads(threads)
        for a, t in ((x, tx), (wide[:, ::2], tx), (x, row.expand(m, k))):
            for b in (w, wt.mT):
                out, tangent = dg.func.jvp(lambda z: z @ b, (a,), (t,))
                np.testing.assert_array_equal(out.numpy(), (a @ b).numpy())
                np.testing.assert_array_equal(tangent.numpy(), (t @ b).numpy())
        # where the formula runs instead (w has a tangent too; the tangent records a graph): the same values
        tw = dg.tensor(rng.standard_normal((k, n)).astype(np.float32))
        out, tangent = dg.func.jvp(lambda z, v: z @ v, (x, w), (tx, tw))
        np.testing.assert_array_equal(tangent.numpy(), (tx @ w + x @ tw).numpy())
        with dg.autograd.forward_ad.dual_level():
            t = tx.detach().requires_grad_(True)
            y = dg.autograd.forward_ad.make_dual(x, t) @ w
            ty = dg.autograd.forward_ad.unpack_dual(y).tangent
            assert ty.requires_grad
            np.testing.assert_array_equal(ty.detach().numpy(), (tx @ w).numpy())
            g, = dg.autograd.grad(ty.sum(), t)
            _close(g.numpy(), np.ones((m, n)) @ w.numpy().astype(np.float64).T, n)
    finally:
        dg.set_num_threads(before)


@pytest.mark.parametrize("shape", [(520, 128, 100), (1100, 300, 60), (1024, 512, 128), (999, 517, 131)])
def test_many_rows_split_by_rows(kernel, shape):
    """Note [Own kernel's split]: products of many rows go to the threads as row panels (the second shape is
    beyond 2^24 multiply-adds, on the own kernel by Note [Own kernel for many rows], the last two by Note [a and b
    within L2], both in matmul.cpp, with k across three k blocks); same bits at 1 and 2
    threads, and the float64 product within float32 rounding, through linear's A B^T and through A B."""
    m, k, n = shape
    rng = np.random.default_rng(m)
    a0 = rng.standard_normal((m, k)).astype(np.float32)
    w0 = rng.standard_normal((n, k)).astype(np.float32)
    ref = a0.astype(np.float64) @ w0.astype(np.float64).T
    a, w, wt = dg.tensor(a0), dg.tensor(w0), dg.tensor(np.ascontiguousarray(w0.T))
    before = dg.get_num_threads()
    try:
        got = {}
        for t in (1, 2):
            dg.set_num_threads(t)
            got[t] = ((a @ w.mT).numpy(), (a @ wt).numpy())
    finally:
        dg.set_num_threads(before)
    for i in range(2):
        np.testing.assert_array_equal(got[1][i], got[2][i])
        _close(got[1][i], ref, k)


def test_environment_chooses_the_blas_path():
    import os
    import subprocess
    import sys
    env = dict(os.environ, DYNGRAD_GEMM="blas")
    code = ("import numpy as np, dyngrad as dg; from dyngrad import _C; a = np.arange(6, dtype=np.float32).reshape(2, 3);"
            "print(_C._gemm_kernel(), (dg.tensor(a) @ dg.tensor(a.T)).numpy().tolist())")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout
    assert out.split(None, 1)[0] == "blas"
    assert "[[5.0, 14.0], [14.0, 50.0]]" in out


def test_kernel_choice_errors():
    with pytest.raises(ValueError, match="_set_gemm_kernel"):
        _C._set_gemm_kernel("mkl")


def _own_kernel_takes(m, k, n):
    # matmul.cpp's own_gemm_pays for every layout: outside the window (2^15, 2^18] where b's contiguous rows send
    # products of more than 8 rows to OpenBLAS, and at most 2^24 multiply-adds
    work = m * k * n
    return work <= 2 ** 24 and (m <= 8 or work <= 2 ** 15 or work > 2 ** 18)


@pytest.mark.skipif(not HAS_AVX512, reason="the own kernel needs AVX-512F")
@pytest.mark.parametrize("m", [9, 23, 64, 65])
@pytest.mark.parametrize("n", [47, 48, 49, 64, 80, 95, 96, 97, 129])
@pytest.mark.parametrize("k", [129, 193, 400])
def test_own_kernel_layouts_give_the_same_bits(m, n, k):
    """Each output of the own kernel is one chain of fused multiply-adds p = 0 .. k-1 whatever the layout of a
    and b: b's strips packed in place by the first row block (rows contiguous, Note [Packing b in the first row
    block]), transposed into the pack (b given transposed), a read with any strides. So the four layouts give the
    same bits, at the strip edges (n around multiples of 48 and 16) and across k blocks of 192, on 1 and 2
    threads; and the float64 product within float32 rounding."""
    if not _own_kernel_takes(m, k, n):
        pytest.skip("OpenBLAS's shape")
    rng = np.random.default_rng(m * 100003 + n * 101 + k)
    a0 = rng.standard_normal((m, k)).astype(np.float32)
    b0 = rng.standard_normal((k, n)).astype(np.float32)
    ref = a0.astype(np.float64) @ b0.astype(np.float64)
    a, b = dg.tensor(a0), dg.tensor(b0)
    at, bt = dg.tensor(np.ascontiguousarray(a0.T)), dg.tensor(np.ascontiguousarray(b0.T))
    before_kernel, before_threads = _C._set_gemm_kernel("avx512"), dg.get_num_threads()
    try:
        got = []
        for threads in (1, 2):
            dg.set_num_threads(threads)
            got += [(x @ y).numpy() for x in (a, at.mT) for y in (b, bt.mT)]
    finally:
        _C._set_gemm_kernel(before_kernel)
        dg.set_num_threads(before_threads)
    _close(got[0], ref, k)
    for g in got[1:]:
        np.testing.assert_array_equal(g, got[0])


@pytest.mark.parametrize("rows,cols", [(300, 1000), (1000, 300)])
def test_blas_panels_across_the_wider_side(kernel, rows, cols):
    """Note [Panels across the wider side] (matmul.cpp): a BLAS product of more columns than rows is split into
    column panels, one of more rows into row panels, by its shape alone: the same bits on 1 and 2 threads, for
    each layout of a and b (k = 300: these shapes take OpenBLAS on either kernel setting)."""
    k = 300
    rng = np.random.default_rng(rows + cols)
    a0 = rng.standard_normal((rows, k)).astype(np.float32)
    b0 = rng.standard_normal((k, cols)).astype(np.float32)
    ref = a0.astype(np.float64) @ b0.astype(np.float64)
    a, b = dg.tensor(a0), dg.tensor(b0)
    at, bt = dg.tensor(np.ascontiguousarray(a0.T)), dg.tensor(np.ascontiguousarray(b0.T))
    before = dg.get_num_threads()
    try:
        got = {}
        for threads in (1, 2):
            dg.set_num_threads(threads)
            got[threads] = [(x @ y).numpy() for x in (a, at.mT) for y in (b, bt.mT)]
    finally:
        dg.set_num_threads(before)
    for one, two in zip(got[1], got[2]):
        np.testing.assert_array_equal(one, two)
        _close(one, ref, k)


@pytest.mark.parametrize("x_shape", [(33, 129), (3, 11, 129), (768, 128)])
@pytest.mark.parametrize("needs", ["all", "bias", "x", "none"])
def test_linear_bias_in_the_product(kernel, x_shape, needs):
    """Note [Bias in the product's last store] (matmul.cpp): F.linear(x, w, b) takes the bias in the own kernel's
    last store: the values, the graph (its node names) and every gradient are those of x @ w.mT + b computed
    apart, bit for bit, on 1 and 2 threads, with an in-place op on the output; float32 rounding of float64 and the
    reference engine's answers."""
    import dyngrad.reference as ref_engine
    F = dg.nn.functional
    rng = np.random.default_rng(sum(x_shape))
    k, m = x_shape[-1], 65 if x_shape[0] != 768 else 384
    x0 = rng.standard_normal(x_shape).astype(np.float32)
    w0 = rng.standard_normal((m, k)).astype(np.float32)
    b0 = rng.standard_normal(m).astype(np.float32)
    g0 = rng.standard_normal(x_shape[:-1] + (m,)).astype(np.float32)
    flags = {"all": (True, True, True), "bias": (False, False, True), "x": (True, False, False),
             "none": (False, False, False)}[needs]

    def run(fused, threads):
        dg.set_num_threads(threads)
        x, w, b = (dg.tensor(v, requires_grad=f) for v, f in zip((x0, w0, b0), flags))
        y = F.linear(x, w, b) if fused else x @ w.mT + b
        name = y.grad_fn.name() if y.grad_fn is not None else None
        out = y.detach().numpy().copy()
        if y.requires_grad:
            y = dg.relu(y) * 2
            y.backward(dg.tensor(g0))
        return out, name, [t.grad.numpy() if t.grad is not None else None for t in (x, w, b)]

    before = dg.get_num_threads()
    try:
        runs = [run(fused, t) for fused in (True, False) for t in (1, 2)]
    finally:
        dg.set_num_threads(before)
    for out, _, grads in runs[1:]:
        np.testing.assert_array_equal(out, runs[0][0])
        for g, g_first in zip(grads, runs[0][2]):
            assert (g is None) == (g_first is None)
            if g is not None:
                np.testing.assert_array_equal(g, g_first)
    if len(x_shape) == 2 and needs != "none":
        assert runs[0][1] == runs[1][1] == "AddmmBackward", runs[0][1]   # torch's name for linear's node
    ref64 = x0.astype(np.float64) @ w0.astype(np.float64).T + b0
    _close(runs[0][0], ref64, k)
    r = ref_engine.nn.functional.linear(ref_engine.tensor(x0), ref_engine.tensor(w0), ref_engine.tensor(b0))
    _close(runs[0][0], np.asarray(r.numpy(), np.float64), k)


@pytest.mark.skipif(not HAS_AVX512, reason="the own kernel needs AVX-512F")
def test_linear_bias_in_the_product_in_place_on_the_output():
    """An in-place op on linear's output (nn.ReLU(inplace=True)) and then backward: the same gradients as the
    product and the add computed apart (the output is a tensor of its own, not a view of the product's)."""
    F = dg.nn.functional
    rng = np.random.default_rng(7)
    x0 = rng.standard_normal((4, 16, 96)).astype(np.float32)
    w0 = rng.standard_normal((200, 96)).astype(np.float32)
    b0 = rng.standard_normal(200).astype(np.float32)
    grads = []
    for fused in (True, False):
        x, w, b = (dg.tensor(v, requires_grad=True) for v in (x0, w0, b0))
        y = F.linear(x, w, b) if fused else x @ w.mT + b
        y.relu_()
        (y * y).sum().backward()
        grads.append([t.grad.numpy() for t in (x, w, b)])
    for g1, g2 in zip(*grads):
        np.testing.assert_array_equal(g1, g2)


@pytest.mark.skipif(not HAS_AVX512, reason="the own kernel needs AVX-512F")
@pytest.mark.parametrize("m,k,n", [(32, 128, 512), (1, 64, 300), (7, 33, 129), (17, 200, 1000), (31, 400, 513)])
def test_few_rows_by_a_transposed_b(m, k, n):
    """x @ W^T with few rows of c is computed as c^T = W x^T and transposed back (Note [Few rows by a transposed
    b] in gemm_avx512.cpp): the bits of the rows-contiguous layout, on 1 and 2 threads, with the bias of linear
    added after the sum (the bits of the product then the add); float64 reference within float32 rounding."""
    rng = np.random.default_rng(m * 7919 + k * 31 + n)
    x0 = rng.standard_normal((m, k)).astype(np.float32)
    w0 = rng.standard_normal((n, k)).astype(np.float32)
    b0 = rng.standard_normal(n).astype(np.float32)
    ref = x0.astype(np.float64) @ w0.T.astype(np.float64)
    x, w, wt, bias = dg.tensor(x0), dg.tensor(w0), dg.tensor(np.ascontiguousarray(w0.T)), dg.tensor(b0)
    xt = dg.tensor(np.ascontiguousarray(x0.T)).mT
    before_kernel, before_threads = _C._set_gemm_kernel("avx512"), dg.get_num_threads()
    try:
        got, lin = [], []
        for threads in (1, 2):
            dg.set_num_threads(threads)
            got += [(x @ w.mT).numpy(), (xt @ w.mT).numpy()]
            lin.append(dg.nn.functional.linear(x, w, bias).numpy())
        direct = (x @ wt).numpy()
    finally:
        _C._set_gemm_kernel(before_kernel)
        dg.set_num_threads(before_threads)
    _close(got[0], ref, k)
    _close(lin[0], ref + b0, k)
    for g in got[1:] + [direct]:
        np.testing.assert_array_equal(g, got[0])
    np.testing.assert_array_equal(lin[0], lin[1])
    np.testing.assert_array_equal(lin[0], got[0] + b0)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("n,k,m,ta,tb", [(1024, 1024, 1024, False, False), (1000, 777, 1300, False, True),
                                         (1300, 777, 1000, True, False), (513, 1025, 700, True, True),
                                         (300, 1000, 4000, False, False)])
def test_one_blas_call_on_one_thread(kernel, dtype, n, k, m, ta, tb):
    """On one thread a large BLAS product is one call, on two it is split into panels (Note [One call on one
    thread] in matmul.cpp): the same bits either way, and the float64 reference within rounding."""
    rng = np.random.default_rng(n + k + m)
    a0 = rng.standard_normal((n, k)).astype(dtype)
    b0 = rng.standard_normal((k, m)).astype(dtype)
    a = dg.tensor(np.ascontiguousarray(a0.T)).mT if ta else dg.tensor(a0)
    b = dg.tensor(np.ascontiguousarray(b0.T)).mT if tb else dg.tensor(b0)
    before = dg.get_num_threads()
    try:
        got = []
        for threads in (1, 2, 1):
            dg.set_num_threads(threads)
            got.append((a @ b).numpy())
    finally:
        dg.set_num_threads(before)
    ref = a0.astype(np.float64) @ b0.astype(np.float64)
    if dtype == np.float32:
        _close(got[0], ref, k)
    else:
        np.testing.assert_allclose(got[0], ref, rtol=1e-10, atol=1e-10 * np.abs(ref).max())
    np.testing.assert_array_equal(got[0], got[1])
    np.testing.assert_array_equal(got[0], got[2])


def _heads(x, batch, seq, heads, d):
    x = x.reshape(batch, seq, heads, d)
    return np.swapaxes(x, 1, 2) if isinstance(x, np.ndarray) else x.transpose(1, 2)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("batch,seq,heads,d", [(16, 64, 4, 32), (3, 17, 2, 9), (2, 65, 3, 33)])
def test_attention_products_in_the_step_layouts(kernel, dtype, batch, seq, heads, d):
    """The transformer block's batched products with q, k, v as views into one (batch, seq, 3 heads d) tensor
    (rows 3 heads d apart, k^T read transposed), forward and the backward's layouts (P^T @ g, dS @ k, dS^T @ q),
    a batch broadcast against one matrix and against (1, heads, ...): the float64 product within rounding, and the
    same bits at 1 and 2 threads (Note [Parallel batches] in matmul.cpp)."""
    rng = np.random.default_rng(batch * 100 + seq + d)
    qkv0 = rng.standard_normal((batch, seq, 3 * heads * d)).astype(dtype)
    p0 = rng.standard_normal((batch, heads, seq, seq)).astype(dtype)
    g0 = rng.standard_normal((batch, heads, seq, d)).astype(dtype)
    m0 = rng.standard_normal((1, heads, d, seq)).astype(dtype)
    q, k, v = (_heads(c, batch, seq, heads, d) for c in dg.tensor(qkv0).chunk(3, dim=-1))
    q64, k64, v64 = (_heads(c, batch, seq, heads, d) for c in np.split(qkv0.astype(np.float64), 3, axis=-1))
    P, g, M = dg.tensor(p0), dg.tensor(g0), dg.tensor(m0)
    P64, g64, M64 = p0.astype(np.float64), g0.astype(np.float64), m0.astype(np.float64)
    T = (lambda x: np.swapaxes(x, -1, -2))
    products = [(lambda: q @ k.transpose(-2, -1), q64 @ T(k64), d), (lambda: P @ v, P64 @ v64, seq),
                (lambda: g @ v.transpose(-2, -1), g64 @ T(v64), d), (lambda: P.transpose(-2, -1) @ g, T(P64) @ g64, seq),
                (lambda: P @ k, P64 @ k64, seq), (lambda: P.transpose(-2, -1) @ q, T(P64) @ q64, seq),
                (lambda: q @ M, q64 @ M64, d), (lambda: q @ M[0, 0], q64 @ M64[0, 0], d)]
    before = dg.get_num_threads()
    try:
        for fn, ref, depth in products:
            got = []
            for threads in (1, 2):
                dg.set_num_threads(threads)
                got.append(fn().numpy())
            assert got[0].shape == ref.shape
            if dtype == np.float32:
                _close(got[0], ref, depth)
            else:
                np.testing.assert_allclose(got[0], ref, rtol=1e-12, atol=1e-12 * max(1.0, np.abs(ref).max()))
            np.testing.assert_array_equal(got[0], got[1])
    finally:
        dg.set_num_threads(before)


@pytest.mark.parametrize("n, k, m", [(2, 4, 1), (64, 300, 1), (7, 33, 2), (64, 128, 5), (512, 784, 1)])
def test_linear_has_the_bits_of_its_product_then_add(n, k, m):
    """F.linear's bias in the product's last store (Note [Bias in the product's last store]) and the lane dot of a
    one-column product (matmul.cpp's gemm) must agree with x @ W^T + b bit for bit, which is what a compiled
    replay computes: a one-column linear took the own kernel and its plain product the lane dot, so replays
    differed from eager mode in the last bit."""
    rng = np.random.default_rng(n * k + m)
    x = dg.tensor(rng.standard_normal((n, k)).astype(np.float32))
    w = dg.tensor(rng.standard_normal((m, k)).astype(np.float32))
    b = dg.tensor(rng.standard_normal(m).astype(np.float32))
    fused = dg.nn.functional.linear(x, w, b).numpy()
    np.testing.assert_array_equal(fused, (x @ w.mT + b).numpy())
    np.testing.assert_array_equal(fused, (dg.matmul(x, w.mT) + b).numpy())
