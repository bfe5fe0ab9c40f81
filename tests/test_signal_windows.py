"""dyngrad.signal.windows (python/dyngrad/_api/ops/windows.py) and the dyngrad.*_window factories (creation.py) on
both engines against torch: values in float32 and float64, symmetric and periodic, lengths 0-9 and 64, the
keyword parameters, requires_grad, and torch's argument errors."""
import numpy as np
import pytest

WINDOWS = [  # (name, keyword arguments)
    ("bartlett", {}), ("blackman", {}), ("cosine", {}), ("exponential", {}), ("exponential", {"tau": 2.5}),
    ("gaussian", {}), ("gaussian", {"std": 0.4}), ("general_cosine", {"a": [0.46, 0.23, 0.31]}),
    ("general_cosine", {"a": (1.0,)}), ("general_hamming", {}), ("general_hamming", {"alpha": 0.6}),
    ("hamming", {}), ("hann", {}), ("kaiser", {}), ("kaiser", {"beta": 0.0}), ("kaiser", {"beta": 3.5}),
    ("nuttall", {}),
]
LENGTHS = list(range(10)) + [64]


@pytest.mark.parametrize("sym", [True, False])
@pytest.mark.parametrize("name,kwargs", WINDOWS)
def test_windows_against_torch(dg, name, kwargs, sym):
    torch = pytest.importorskip("torch")
    for dtype in ("float32", "float64"):
        for m in LENGTHS:
            got = getattr(dg.signal.windows, name)(m, sym=sym, dtype=getattr(dg, dtype), **kwargs)
            want = getattr(torch.signal.windows, name)(m, sym=sym, dtype=getattr(torch, dtype), **kwargs)
            assert got.dtype == getattr(dg, dtype) and tuple(got.shape) == (m,)
            tol = 2e-6 if dtype == "float32" else 1e-12
            np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=tol, atol=tol, err_msg=f"{name} M={m}")


def test_exponential_center(dg):
    torch = pytest.importorskip("torch")
    got = dg.signal.windows.exponential(9, center=2.0, sym=False, dtype=dg.float64)
    want = torch.signal.windows.exponential(9, center=2.0, sym=False, dtype=torch.float64)
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-12)


def test_window_options(dg):
    w = dg.signal.windows.hann(6)
    assert w.dtype == dg.get_default_dtype() and not w.requires_grad
    g = dg.signal.windows.kaiser(5, requires_grad=True, dtype=dg.float64)
    assert g.requires_grad and g.is_leaf
    (g * g).sum().backward()
    np.testing.assert_allclose(g.grad.numpy(), 2 * g.detach().numpy())


WINDOW_ERRORS = [
    (lambda m: m.signal.windows.hann(-1), ValueError,
     r"signal\.windows\.hann: requires a non-negative window length, got M=-1\."),
    (lambda m: m.signal.windows.bartlett(4, dtype=m.int64), ValueError,
     r"signal\.windows\.bartlett: expects float32 or float64 dtypes, got int64\."),
    (lambda m: m.signal.windows.blackman(4, dtype=m.float16), ValueError,
     r"signal\.windows\.blackman: expects float32 or float64 dtypes, got float16\."),
    (lambda m: m.signal.windows.exponential(4, tau=0.0), ValueError,
     r"signal\.windows\.exponential: tau must be positive, got 0\.0\."),
    (lambda m: m.signal.windows.exponential(4, center=1.0), ValueError,
     r"signal\.windows\.exponential: center must be None for a symmetric window"),
    (lambda m: m.signal.windows.gaussian(4, std=-1), ValueError,
     r"signal\.windows\.gaussian: the standard deviation std must be positive, got -1\.0\."),
    (lambda m: m.signal.windows.kaiser(4, beta=-0.5), ValueError,
     r"signal\.windows\.kaiser: beta must be non-negative, got -0\.5\."),
    (lambda m: m.signal.windows.general_cosine(4, a=0.5), TypeError,
     r"signal\.windows\.general_cosine: the coefficients a must be a list or tuple of numbers, got float\."),
    (lambda m: m.signal.windows.general_cosine(4, a=[]), ValueError,
     r"signal\.windows\.general_cosine: the coefficients a must not be empty\."),
    (lambda m: m.signal.windows.nuttall(2.5), TypeError, r"signal\.windows\.nuttall: expected an int as M"),
]


@pytest.mark.parametrize("call,exc,message", WINDOW_ERRORS)
def test_window_errors(dg, call, exc, message):
    with pytest.raises(exc, match=message):
        call(dg)


FACTORIES = [("hann_window", ()), ("hamming_window", ()), ("hamming_window", (0.6, 0.4)), ("blackman_window", ()),
             ("bartlett_window", ()), ("kaiser_window", ()), ("kaiser_window", (4.0,))]


@pytest.mark.parametrize("periodic", [True, False])
@pytest.mark.parametrize("name,extra", FACTORIES)
def test_window_factories_against_torch(dg, name, extra, periodic):
    torch = pytest.importorskip("torch")
    for dtype in ("float32", "float64"):
        for n in LENGTHS:
            got = getattr(dg, name)(n, periodic, *extra, dtype=getattr(dg, dtype))
            want = getattr(torch, name)(n, periodic, *extra, dtype=getattr(torch, dtype))
            assert got.dtype == getattr(dg, dtype) and tuple(got.shape) == (n,)
            tol = 2e-6 if dtype == "float32" else 1e-12
            np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=tol, atol=tol, err_msg=f"{name} n={n}")
    w = getattr(dg, name)(8, requires_grad=True)
    assert w.requires_grad and w.is_leaf
