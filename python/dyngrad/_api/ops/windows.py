"""torch.signal.windows with torch's signatures: bartlett, blackman, cosine, exponential, gaussian, general_cosine,
general_hamming, hamming, hann, kaiser and nuttall. A window is computed on the host in float64 from the exact
sample positions and rounded once into its dtype (float32 or float64, as torch allows); sym=False gives the
periodic window (the symmetric one of M + 1 points without its last, as torch and scipy define it). The
dyngrad.*_window factories of torch (periodic=True by default) are in creation.py."""
import math

import numpy as np

from .. import bridge
from ..args import check_factory_options, dtype_arg, finish, get_default_dtype, number, to_int
from ..device import check_device


def _checked(name, M, dtype, layout, device):
    """M as an int and the window's dtype, after torch's checks (ValueError, as torch.signal.windows)."""
    op = f"signal.windows.{name}"
    check_device(device, op)
    check_factory_options(op, layout)
    m = to_int(M, op, "M")
    if m < 0:
        raise ValueError(f"{op}: requires a non-negative window length, got M={m}.")
    dt = get_default_dtype() if dtype is None else dtype_arg(dtype, op)
    if dt.name not in ("float32", "float64"):
        raise ValueError(f"{op}: expects float32 or float64 dtypes, got {dt.name}.")
    return m, dt


def _result(values, dt, requires_grad):
    return finish(bridge.host_result(np.asarray(values, dtype=np.float64), dt), requires_grad)


def _span(m, sym):
    """The denominator of the sample positions: M - 1 for a symmetric window, M for a periodic one (M > 1)."""
    return m - 1 if sym or m <= 1 else m


def _cosine_sum(name, M, a, sym, dtype, layout, device, requires_grad):
    """w_n = sum_i (-1)^i a_i cos(2 pi i n / (M - 1)) (M for sym=False), errors naming the window `name`."""
    m, dt = _checked(name, M, dtype, layout, device)
    if m <= 1:
        return _result(np.ones(m), dt, requires_grad)
    if not hasattr(a, "__iter__"):
        raise TypeError(f"signal.windows.{name}: the coefficients a must be a list or tuple of numbers, got "
                        f"{type(a).__name__}.")
    coefficients = [float(number(c, f"signal.windows.{name}", "a")) for c in a]
    if not coefficients:
        raise ValueError(f"signal.windows.{name}: the coefficients a must not be empty.")
    z = 2 * math.pi * np.arange(m) / _span(m, sym)
    w = sum((-1) ** i * c * np.cos(i * z) for i, c in enumerate(coefficients))
    return _result(w, dt, requires_grad)


def general_cosine(M, *, a, sym=True, dtype=None, layout=None, device=None, requires_grad=False):
    """w_n = sum_i (-1)^i a_i cos(2 pi i n / (M - 1)) (M for sym=False)."""
    return _cosine_sum("general_cosine", M, a, sym, dtype, layout, device, requires_grad)


def _hamming_family(name, M, alpha, sym, dtype, layout, device, requires_grad):
    alpha = float(number(alpha, f"signal.windows.{name}", "alpha"))
    return _cosine_sum(name, M, [alpha, 1.0 - alpha], sym, dtype, layout, device, requires_grad)


def general_hamming(M, *, alpha=0.54, sym=True, dtype=None, layout=None, device=None, requires_grad=False):
    """w_n = alpha - (1 - alpha) cos(2 pi n / (M - 1))."""
    return _hamming_family("general_hamming", M, alpha, sym, dtype, layout, device, requires_grad)


def hann(M, *, sym=True, dtype=None, layout=None, device=None, requires_grad=False):
    """w_n = 1/2 - 1/2 cos(2 pi n / (M - 1)) = sin^2(pi n / (M - 1))."""
    return _hamming_family("hann", M, 0.5, sym, dtype, layout, device, requires_grad)


def hamming(M, *, sym=True, dtype=None, layout=None, device=None, requires_grad=False):
    """w_n = 0.54 - 0.46 cos(2 pi n / (M - 1))."""
    return _hamming_family("hamming", M, 0.54, sym, dtype, layout, device, requires_grad)


def blackman(M, *, sym=True, dtype=None, layout=None, device=None, requires_grad=False):
    """w_n = 0.42 - 0.5 cos(2 pi n / (M - 1)) + 0.08 cos(4 pi n / (M - 1))."""
    return _cosine_sum("blackman", M, [0.42, 0.5, 0.08], sym, dtype, layout, device, requires_grad)


def nuttall(M, *, sym=True, dtype=None, layout=None, device=None, requires_grad=False):
    """The minimum 4-term Blackman-Harris window of Nuttall (coefficients 0.3635819, 0.4891775, 0.1365995,
    0.0106411)."""
    return _cosine_sum("nuttall", M, [0.3635819, 0.4891775, 0.1365995, 0.0106411], sym, dtype, layout, device,
                       requires_grad)


def bartlett(M, *, sym=True, dtype=None, layout=None, device=None, requires_grad=False):
    """The triangular window: w_n = 1 - |2 n / (M - 1) - 1|."""
    m, dt = _checked("bartlett", M, dtype, layout, device)
    if m <= 1:
        return _result(np.ones(m), dt, requires_grad)
    return _result(1 - np.abs(2 * np.arange(m) / _span(m, sym) - 1), dt, requires_grad)


def cosine(M, *, sym=True, dtype=None, layout=None, device=None, requires_grad=False):
    """The sine window: w_n = sin(pi (n + 1/2) / M) (M + 1 for sym=False)."""
    m, dt = _checked("cosine", M, dtype, layout, device)
    denominator = m + 1 if not sym and m > 1 else m
    return _result(np.sin(math.pi * (np.arange(m) + 0.5) / max(denominator, 1)), dt, requires_grad)


def exponential(M, *, center=None, tau=1.0, sym=True, dtype=None, layout=None, device=None, requires_grad=False):
    """The Poisson window: w_n = exp(-|n - center| / tau), center (M - 1) / 2 by default (M / 2 for sym=False)."""
    m, dt = _checked("exponential", M, dtype, layout, device)
    tau = float(number(tau, "signal.windows.exponential", "tau"))
    if not tau > 0:
        raise ValueError(f"signal.windows.exponential: tau must be positive, got {tau}.")
    if sym and center is not None:
        raise ValueError("signal.windows.exponential: center must be None for a symmetric window (sym=True).")
    if center is None:
        center = (m if not sym and m > 1 else m - 1) / 2.0
    center = float(number(center, "signal.windows.exponential", "center"))
    return _result(np.exp(-np.abs(np.arange(m) - center) / tau), dt, requires_grad)


def gaussian(M, *, std=1.0, sym=True, dtype=None, layout=None, device=None, requires_grad=False):
    """w_n = exp(-(n - (M - 1) / 2)^2 / (2 std^2)) (M / 2 for sym=False)."""
    m, dt = _checked("gaussian", M, dtype, layout, device)
    std = float(number(std, "signal.windows.gaussian", "std"))
    if not std > 0:
        raise ValueError(f"signal.windows.gaussian: the standard deviation std must be positive, got {std}.")
    middle = (m if not sym and m > 1 else m - 1) / 2.0
    return _result(np.exp(-((np.arange(m) - middle) ** 2) / (2 * std * std)), dt, requires_grad)


def kaiser(M, *, beta=12.0, sym=True, dtype=None, layout=None, device=None, requires_grad=False):
    """w_n = I0(beta sqrt(1 - (2 n / (M - 1) - 1)^2)) / I0(beta) (M for sym=False)."""
    m, dt = _checked("kaiser", M, dtype, layout, device)
    beta = float(number(beta, "signal.windows.kaiser", "beta"))
    if not beta >= 0:
        raise ValueError(f"signal.windows.kaiser: beta must be non-negative, got {beta}.")
    if m <= 1:
        return _result(np.ones(m), dt, requires_grad)
    k = np.minimum(1.0, 2 * np.arange(m) / _span(m, sym) - 1)
    return _result(np.i0(beta * np.sqrt(np.clip(1 - k * k, 0, None))) / np.i0(beta), dt, requires_grad)
