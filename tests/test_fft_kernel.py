"""The FFT kernels of both engines (csrc/dyngrad/kernels/fft.cpp, python/dyngrad/reference/fft.py) through their
layout-level bindings _C._fft_c2c, _fft_r2c and _fft_c2r (complex numbers as a trailing dim of 2), against
numpy.fft: every size 1-512 and selected sizes up to 4096 (primes among them, the Bluestein plans), forward and
inverse, float64 to 1e-12 and float32 to a tolerance that grows with log n; the multi-dim, strided and batched
drivers; the argument checks (same type and message in both engines)."""
import math

import numpy as np
import pytest

SELECTED = [1000, 1021, 1024, 1155, 2039, 2048, 2187, 3125, 4093, 4095, 4096, 127 * 2, 131 * 3, 67 * 64, 97 * 5]


def as_pairs(z, dtype):
    return np.ascontiguousarray(np.stack([z.real, z.imag], -1)).astype(dtype)


def as_complex(a):
    return a[..., 0] + 1j * a[..., 1]


def rel_err(got, want):
    return np.abs(got - want).max() / max(np.abs(want).max(), 1e-300)


def tol(dtype, n):
    """float64: 1e-12; float32: eps * log2 n times a constant (an FFT's error grows like log n)."""
    return 1e-12 if dtype == np.float64 else 3e-7 * (2 + math.log2(max(n, 2)))


def c2c(dg, z, dims, forward, norm="backward", dtype=np.float64):
    return as_complex(dg._C._fft_c2c(dg.tensor(as_pairs(z, dtype)), dims, forward, norm).numpy())


def rand_complex(rng, shape):
    return rng.standard_normal(shape) + 1j * rng.standard_normal(shape)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_c2c_every_size_to_512_and_selected_to_4096(cpp, dtype):
    """The C++ kernel against numpy.fft, forward and inverse, one batch of 2 lines per size."""
    rng = np.random.default_rng(0)
    bad = []
    for n in list(range(1, 513)) + SELECTED:
        z = rand_complex(rng, (2, n))
        zq = as_complex(as_pairs(z, dtype).astype(np.float64))   # the values the kernel sees
        for forward in (True, False):
            want = np.fft.fft(zq) if forward else np.fft.ifft(zq)
            err = rel_err(c2c(cpp, z, [1], forward, dtype=dtype), want)
            if not err <= tol(dtype, n):
                bad.append((n, forward, err, cpp._C._fft_plan(n, dtype == np.float64)))
    assert not bad, f"sizes off numpy.fft: {bad[:10]}"


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_real_transforms_every_size_to_512_and_selected(cpp, dtype):
    rng = np.random.default_rng(1)
    bad = []
    for n in list(range(1, 513)) + SELECTED:
        x = rng.standard_normal((2, n)).astype(dtype)
        X = np.fft.rfft(x.astype(np.float64))
        got = as_complex(cpp._C._fft_r2c(cpp.tensor(x), [1], True, "backward", True).numpy())
        if not rel_err(got, X) <= tol(dtype, n):
            bad.append(("r2c", n, rel_err(got, X)))
        Xq = as_pairs(X, dtype)
        want = np.fft.irfft(as_complex(Xq.astype(np.float64)), n)
        back = cpp._C._fft_c2r(cpp.tensor(Xq), [1], False, "backward", n).numpy()
        if not rel_err(back, want) <= tol(dtype, n):
            bad.append(("c2r", n, rel_err(back, want)))
    assert not bad, f"sizes off numpy.fft: {bad[:10]}"


def test_plans(cpp):
    """Smooth sizes are Stockham stages of radix 2-5, large primes Bluestein's, small primes their own stage."""
    plan = cpp._C._fft_plan
    assert plan(1024, True) == "stockham 4x4x4x4x4"
    assert plan(60, False) == "stockham 4x3x5"
    assert plan(7, True) == "stockham 7"
    assert plan(4093, True).startswith("bluestein m=8192 over stockham")
    assert plan(1, True) == "stockham"
    cpp._C._fft_clear_plan_cache()
    assert cpp._C._fft_cached_plan_count() == 0
    plan(4093, False)
    assert cpp._C._fft_cached_plan_count() >= 2       # the plan and its m-point sub-plan (and the kernel's)


@pytest.mark.parametrize("norm", ["backward", "ortho", "forward"])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_c2c_dims_and_norms(dg, norm, dtype):
    rng = np.random.default_rng(2)
    z = rand_complex(rng, (6, 5, 7))
    zq = as_complex(as_pairs(z, dtype).astype(np.float64))
    for dims in ([0], [1], [2], [0, 2], [2, 0], [-1, -3], [0, 1, 2]):
        for forward in (True, False):
            fn = np.fft.fftn if forward else np.fft.ifftn
            got = c2c(dg, z, dims, forward, norm, dtype)
            assert got.shape == z.shape
            assert rel_err(got, fn(zq, axes=dims, norm=norm)) <= tol(dtype, 210), (dims, forward)


@pytest.mark.parametrize("norm", ["backward", "ortho", "forward"])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_real_transforms_dims_and_norms(dg, norm, dtype):
    rng = np.random.default_rng(3)
    x = rng.standard_normal((6, 5, 8)).astype(dtype)
    x64 = x.astype(np.float64)
    for dims in ([2], [0], [1], [0, 2], [2, 0], [0, 1, 2]):
        out = dg._C._fft_r2c(dg.tensor(x), dims, True, norm, True).numpy()
        assert out.dtype == dtype
        assert rel_err(as_complex(out), np.fft.rfftn(x64, axes=dims, norm=norm)) <= tol(dtype, 240), dims
        full = as_complex(dg._C._fft_r2c(dg.tensor(x), dims, True, norm, False).numpy())
        assert rel_err(full, np.fft.fftn(x64, axes=dims, norm=norm)) <= tol(dtype, 240), dims
        # ihfft: the inverse transform of a real signal, onesided
        inv = as_complex(dg._C._fft_r2c(dg.tensor(x), dims, False, norm, True).numpy())
        assert rel_err(inv, np.conj(np.fft.rfftn(x64, axes=dims, norm={"backward": "forward", "forward": "backward",
                                                                        "ortho": "ortho"}[norm]))) <= tol(dtype, 240)
        for n in (x.shape[dims[-1]], x.shape[dims[-1]] + 1):    # even and odd last sizes
            s = [x.shape[d] for d in dims[:-1]] + [n]
            X = np.fft.rfftn(rng.standard_normal(x.shape), s=s, axes=dims)
            Xq = as_pairs(X, dtype)
            back = dg._C._fft_c2r(dg.tensor(Xq), dims, False, norm, n).numpy()
            want = np.fft.irfftn(as_complex(Xq.astype(np.float64)), s=s, axes=dims, norm=norm)
            assert back.shape == want.shape and back.dtype == dtype
            assert rel_err(back, want) <= tol(dtype, 240), (dims, n)
            # hfft: the forward transform of a Hermitian signal, the inverse of its conjugate scaled the other way
            fwd = dg._C._fft_c2r(dg.tensor(Xq), dims, True, norm, n).numpy()
            other = {"backward": "forward", "forward": "backward", "ortho": "ortho"}[norm]
            want = np.fft.irfftn(np.conj(as_complex(Xq.astype(np.float64))), s=s, axes=dims, norm=other)
            assert rel_err(fwd, want) <= tol(dtype, 240), (dims, n)


def test_c2r_ignores_the_imaginary_parts_that_must_be_zero(dg):
    """numpy's and torch's rule: the imaginary parts of the zero-frequency (and even sizes' Nyquist) terms drop."""
    rng = np.random.default_rng(4)
    for n in (8, 9):
        X = rand_complex(rng, (3, n // 2 + 1))
        got = dg._C._fft_c2r(dg.tensor(as_pairs(X, np.float64)), [1], False, "backward", n).numpy()
        np.testing.assert_allclose(got, np.fft.irfft(X, n), rtol=1e-12, atol=1e-13)


def test_strided_and_batched_inputs(cpp):
    """Transforms along a leading dim of a wide array (lines gathered in blocks), of non-contiguous views, and
    batches big enough to be split across threads."""
    rng = np.random.default_rng(5)
    z = rand_complex(rng, (64, 37, 48))
    base = cpp.tensor(as_pairs(z, np.float64))
    view = base.permute(2, 0, 1, 3)                   # non-contiguous, trailing pair dim kept
    got = as_complex(cpp._C._fft_c2c(view, [0, 2], True, "backward").numpy())
    want = np.fft.fftn(np.transpose(z, (2, 0, 1)), axes=(0, 2))
    assert rel_err(got, want) <= 1e-12
    x = rng.standard_normal((300, 257))
    half = cpp._C._fft_r2c(cpp.tensor(x)[:, ::2], [0, 1], True, "backward", True).numpy()
    assert rel_err(as_complex(half), np.fft.rfftn(x[:, ::2])) <= 1e-12
    old = cpp.get_num_threads()
    try:
        cpp.set_num_threads(2)
        got2 = as_complex(cpp._C._fft_c2c(view, [0, 2], True, "backward").numpy())
    finally:
        cpp.set_num_threads(old)
    assert np.array_equal(got, got2), "the result depends on the thread count"


def test_empty_batches_and_single_points(dg):
    out = dg._C._fft_c2c(dg.tensor(np.zeros((0, 4, 2))), [1], True, "backward")
    assert tuple(out.shape) == (0, 4, 2)
    one = dg._C._fft_c2c(dg.tensor(np.array([[3.0, -1.0]])), [0], False, "ortho").numpy()
    np.testing.assert_array_equal(one, [[3.0, -1.0]])
    r = dg._C._fft_r2c(dg.tensor(np.array([2.5])), [0], True, "backward", True).numpy()
    np.testing.assert_array_equal(r, [[2.5, 0.0]])
    c = dg._C._fft_c2r(dg.tensor(np.array([[2.5, 7.0]])), [0], False, "backward", 1).numpy()
    np.testing.assert_array_equal(c, [2.5])


def test_large_sizes_round_trip(cpp):
    """2^20 points (the bench's size) and a large prime: forward then inverse gives the input back."""
    rng = np.random.default_rng(6)
    for n in (1 << 20, 65537):
        x = rng.standard_normal(n)
        X = cpp._C._fft_r2c(cpp.tensor(x), [0], True, "backward", True)
        np.testing.assert_allclose(as_complex(X.numpy()), np.fft.rfft(x), rtol=0, atol=1e-9 * math.sqrt(n))
        back = cpp._C._fft_c2r(X, [0], False, "backward", n).numpy()
        np.testing.assert_allclose(back, x, rtol=0, atol=1e-12)


BAD_CALLS = [
    (lambda m: m._C._fft_c2c(m.tensor(np.zeros((4, 3))), [0], True, "backward"), ValueError,
     r"_fft_c2c: x must have a trailing dim of size 2 \(the real and imaginary parts\), got shape \(4, 3\)\."),
    (lambda m: m._C._fft_c2c(m.tensor(np.zeros((4, 2), dtype=np.int64)), [0], True, "backward"), TypeError,
     r"_fft_c2c: x must be float32 or float64 \(a complex tensor as its real view\), got int64\."),
    (lambda m: m._C._fft_c2c(m.tensor(np.zeros((4, 2))), [0], True, "none"), ValueError,
     r"_fft_c2c: norm must be 'backward', 'ortho' or 'forward', got 'none'\."),
    (lambda m: m._C._fft_c2c(m.tensor(np.zeros((4, 3, 2))), [0, -2], True, "backward"), ValueError,
     r"_fft_c2c: dims must be distinct; dim 0 appears twice\."),
    (lambda m: m._C._fft_c2c(m.tensor(np.zeros((4, 2))), [], True, "backward"), ValueError,
     r"_fft_c2c: dims must name at least one dim\."),
    (lambda m: m._C._fft_c2c(m.tensor(np.zeros((4, 2))), [1], True, "backward"), IndexError, r"_fft_c2c"),
    (lambda m: m._C._fft_c2c(m.tensor(np.zeros((0, 2))), [0], True, "backward"), ValueError,
     r"_fft_c2c: invalid number of data points \(0\) along dim 0"),
    (lambda m: m._C._fft_r2c(m.tensor(np.zeros(4, dtype=np.float16)), [0], True, "backward", True), TypeError,
     r"_fft_r2c: x must be float32 or float64, got float16\."),
    (lambda m: m._C._fft_c2r(m.tensor(np.zeros((4, 2))), [0], False, "backward", 8), ValueError,
     r"_fft_c2r: x has 4 terms along dim 0, but a real signal of 8 points has 5 \(last_dim_size // 2 \+ 1\)\."),
    (lambda m: m._C._fft_c2r(m.tensor(np.zeros((4, 2))), [0], False, "backward", 0), ValueError,
     r"_fft_c2r: invalid number of data points \(0\); last_dim_size must be at least 1\."),
]


@pytest.mark.parametrize("call,exc,message", BAD_CALLS)
def test_bad_arguments(dg, call, exc, message):
    with pytest.raises(exc, match=message):
        call(dg)


def test_engines_agree(cpp, ref):
    rng = np.random.default_rng(7)
    z = as_pairs(rand_complex(rng, (5, 12)), np.float32)
    a = cpp._C._fft_c2c(cpp.tensor(z), [1], True, "ortho").numpy()
    b = ref._C._fft_c2c(ref.tensor(z), [1], True, "ortho").numpy()
    assert a.dtype == b.dtype == np.float32
    np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)

