"""A sweep of every pooling op with a kernel larger than its input (and adaptive outputs larger than the input):
max/avg/lp pooling 1-3d with padding, stride, dilation and ceil_mode, adaptive max/avg 1-3d and fractional max
2d/3d. Each case runs on both engines and on torch: the same exception type, or the same values, indices and
input gradient. Every element of the input is distinct and each channel lives in its own range, so a read from a
neighbouring row, channel or batch element shows (issue 23: the C++ max_pool2d once read the next channel's value
when a tap lay right of the image, and segfaulted for a kernel of 2**20).

The cases are run in loops, one test per op, so the sweep stays fast; a failure names the case."""
import itertools

import numpy as np
import pytest

from helpers import builtin_base

try:
    import torch
except ImportError:  # the engines are still compared with each other
    torch = None


def _input(spatial, dtype=np.float32):
    """(2, 2, *spatial): distinct values, channel c of batch b in [100 (2b + c), 100 (2b + c) + 50)."""
    n = int(np.prod(spatial))
    rng = np.random.default_rng(len(spatial) * 7 + n)
    plane = rng.permutation(n).reshape(spatial) * (50.0 / max(n, 1)) - 25.0
    lanes = (np.arange(4) * 100.0).reshape((2, 2) + (1,) * len(spatial))
    return (plane + lanes).astype(dtype)


def _sliding_cases(n, with_dilation, with_padding=True):
    """(kernel, stride, padding, dilation, ceil_mode, spatial) where the kernel is larger than some input dim."""
    cases = []
    for spatial in [(1,) * n, (2,) * n, (1, 3, 2)[:n]]:
        for grow, stride, pad, dil, ceil in itertools.product((1, 3), (1, 2), (False, True),
                                                              (1, 2) if with_dilation else (1,), (False, True)):
            kernel = tuple(s + grow for s in spatial)                      # each > its dim
            padding = tuple(k // 2 for k in kernel) if pad and with_padding else 0
            if not with_padding and pad:
                continue
            cases.append((kernel, stride, padding, dil, ceil, spatial))
    return cases


def _max_call(n, kernel, stride, padding, dil, ceil):
    def call(m, x):
        f = getattr(m.nn.functional, f"max_pool{n}d")
        return (f(x, kernel, stride, padding, dil, ceil),
                f(x, kernel, stride, padding, dil, ceil, return_indices=True)[1])
    return call


def _avg_call(n, kernel, stride, padding, ceil, include_pad):
    def call(m, x):
        return getattr(m.nn.functional, f"avg_pool{n}d")(x, kernel, stride, padding, ceil, include_pad)
    return call


def _lp_call(n, norm, kernel, stride, ceil):
    kernel = kernel[0] if n == 1 else kernel         # torch's lp_pool1d multiplies by kernel_size: an int only
    def call(m, x):
        return getattr(m.nn.functional, f"lp_pool{n}d")(x, norm, kernel, stride, ceil)
    return call


def _adaptive_call(n, kind, size):
    def call(m, x):
        f = getattr(m.nn.functional, f"adaptive_{kind}_pool{n}d")
        return f(x, size, return_indices=True) if kind == "max" else f(x, size)
    return call


def _fractional_call(n, kernel, output_size, output_ratio):
    def call(m, x):
        samples = m.tensor(np.linspace(0.1, 0.9, 4 * n).reshape(2, 2, n).astype(np.float32))
        return getattr(m.nn.functional, f"fractional_max_pool{n}d")(
            x, kernel, output_size=output_size, output_ratio=output_ratio, return_indices=True,
            _random_samples=samples)
    return call


def _cases():
    out = {}
    for n in (1, 2, 3):
        out[f"max_pool{n}d"] = [(f"k{k} s{s} p{p} d{d} ceil={c} on {sp}", _max_call(n, k, s, p, d, c), sp)
                                for k, s, p, d, c, sp in _sliding_cases(n, True)]
        out[f"avg_pool{n}d"] = [(f"k{k} s{s} p{p} ceil={c} include_pad={i} on {sp}", _avg_call(n, k, s, p, c, i), sp)
                                for k, s, p, _, c, sp in _sliding_cases(n, False) for i in (False, True)]
        out[f"lp_pool{n}d"] = [(f"norm {q} k{k} s{s} ceil={c} on {sp}", _lp_call(n, q, k, s, c), sp)
                               for k, s, _, _, c, sp in _sliding_cases(n, False, False) for q in (1, 2, float("inf"))]
        for kind in ("max", "avg"):
            out[f"adaptive_{kind}_pool{n}d"] = [
                (f"output {o} on {sp}", _adaptive_call(n, kind, o), sp)
                for sp in [(1,) * n, (2, 3, 1)[:n]]
                for o in [tuple(2 * s + 1 for s in sp), tuple(s + 2 for s in sp), ((3,) + (None,) * (n - 1))]]
    for n in (2, 3):
        out[f"fractional_max_pool{n}d"] = [
            (f"k{k} output {o} ratio {r} on {sp}", _fractional_call(n, k, o, r), sp)
            for sp in [(2,) * n, (5, 4, 3)[:n]]
            for k, o, r in [(sp[0] + 1, (1,) * n, None), (2, tuple(s + 1 for s in sp), None), (3, None, (0.5,) * n),
                            (sp[-1], (1,) * n, None), (2, (2,) * n, None)]]
    return out


CASES = _cases()
# torch refuses every kernel larger than the input here: avg_pool3d (and lp_pool3d, an avg_pool3d) checks the
# unpadded input against the kernel; fractional pooling needs output_size + kernel_size - 1 <= input size
ALWAYS_REFUSED = {"avg_pool3d", "lp_pool3d", "fractional_max_pool2d", "fractional_max_pool3d"}


def _outcome(m, call, x_np, grad=True):
    """(values, ..., input gradient) as numpy arrays, or the exception's type."""
    x = m.tensor(x_np, requires_grad=grad)
    try:
        outs = call(m, x)
    except Exception as exc:  # noqa: BLE001  the outcome is what is compared
        return Raised(builtin_base(type(exc)), str(exc)[:200])
    outs = outs if isinstance(outs, tuple) else (outs,)
    arrays = [o.detach().float().numpy() if o.dtype.is_floating_point else o.numpy() for o in outs]
    if grad:
        up = np.random.default_rng(1).standard_normal(tuple(outs[0].shape)).astype(x_np.dtype)
        outs[0].backward(m.tensor(up))
        arrays.append(x.grad.float().numpy())
    return arrays


class Raised:
    def __init__(self, kind, message):
        self.kind, self.message = kind, message

    def __repr__(self):
        return f"{self.kind.__name__}({self.message!r})"


def _brief(outcome):
    return outcome if isinstance(outcome, Raised) else f"results of shapes {[a.shape for a in outcome]}"


def _agree(a, b, what, rtol=1e-5, atol=1e-5):
    if isinstance(a, Raised) or isinstance(b, Raised):
        assert isinstance(a, Raised) and isinstance(b, Raised) and a.kind is b.kind, \
            f"{what}: {_brief(a)} vs {_brief(b)}"
        return
    assert len(a) == len(b), what
    for u, v in zip(a, b):
        assert u.shape == v.shape, f"{what}: shape {u.shape} vs {v.shape}"
        np.testing.assert_allclose(u, v, rtol=rtol, atol=atol, err_msg=what)


def _empty_windows(outcome):
    """A dilated window can hold no element of the input (taps at -1 and 1 of a size-1 dim): its maximum is -inf.
    torch then returns an index outside the input and its backward writes there (munmap_chunk(): invalid pointer),
    so only the values are compared with torch; dyngrad's index is -1 and no gradient flows from such a window."""
    return not isinstance(outcome, Raised) and np.isinf(outcome[0]).any()


@pytest.mark.parametrize("op", sorted(CASES))
def test_kernel_larger_than_input_like_torch(dg, op):
    if torch is None:
        pytest.skip("torch is not installed")
    ran = 0
    for label, call, spatial in CASES[op]:
        x = _input(spatial)
        theirs = _outcome(torch, call, x, grad=False)
        mine = _outcome(dg, call, x, grad=not _empty_windows(theirs))
        if _empty_windows(theirs):
            empty = np.isinf(theirs[0])
            _agree(mine[:1], theirs[:1], f"{op} {label}")
            assert (mine[1][empty] == -1).all(), f"{op} {label}: indices of empty windows {mine[1][empty]}"
            continue
        _agree(mine, _outcome(torch, call, x), f"{op} {label}")
        ran += not isinstance(theirs, Raised)
    assert ran >= 3 or op in ALWAYS_REFUSED, f"{op}: only {ran} cases computed (the sweep should mostly pool)"


@pytest.mark.parametrize("op", sorted(CASES))
def test_kernel_larger_than_input_engines_agree(cpp, ref, op):
    for label, call, spatial in CASES[op]:
        x = _input(spatial)
        _agree(_outcome(cpp, call, x), _outcome(ref, call, x), f"{op} {label}")


def test_huge_kernel_on_a_small_map(dg):
    """The issue's segfault: a 2**20 kernel with padding 2**19 on 4x4 is one window holding the whole map."""
    x = _input((4, 4))
    for n, spatial in ((2, (4, 4)), (1, (4,))):
        xs = x if n == 2 else x[..., 0]
        t = dg.tensor(xs, requires_grad=True)
        out = getattr(dg.nn.functional, f"max_pool{n}d")(t, 2 ** 20, padding=2 ** 19)
        assert tuple(out.shape) == (2, 2) + (1,) * n
        np.testing.assert_array_equal(out.detach().numpy().reshape(4), xs.reshape(4, -1).max(1))
        out.sum().backward()
        assert t.grad.numpy().sum() == 4 and (t.grad.numpy().reshape(4, -1).argmax(1) ==
                                              xs.reshape(4, -1).argmax(1)).all()
        avg = getattr(dg.nn.functional, f"avg_pool{n}d")(dg.tensor(xs), 2 ** 20, padding=2 ** 19,
                                                         count_include_pad=False)
        np.testing.assert_allclose(avg.numpy().reshape(4), xs.reshape(4, -1).mean(1), rtol=1e-6)


def test_stem_pool_on_a_one_pixel_map(dg):
    """ResNet's stem pool (3, 2, 1) on a 1x1 map keeps each channel's own value, and its gradient."""
    x = dg.tensor([[[[-1.0]], [[100.0]]]], requires_grad=True)
    out = dg.nn.functional.max_pool2d(x, 3, 2, 1)
    assert out.flatten().tolist() == [-1.0, 100.0]
    out.backward(dg.tensor([[[[2.0]], [[3.0]]]]))
    assert x.grad.flatten().tolist() == [2.0, 3.0]


HALF_CALLS = {
    "max_pool1d": lambda m, x: m.nn.functional.max_pool1d(x[:, :, 0], 3, 2, 1),
    "max_pool2d": lambda m, x: m.nn.functional.max_pool2d(x, 3, 2, 1),
    "max_pool2d_ceil": lambda m, x: m.nn.functional.max_pool2d(x, 2, 2, ceil_mode=True),
    "max_pool2d_indices": lambda m, x: m.nn.functional.max_pool2d(x, 2, return_indices=True),
    "max_pool3d": lambda m, x: m.nn.functional.max_pool3d(x, 2),
    "avg_pool1d": lambda m, x: m.nn.functional.avg_pool1d(x[:, :, 0], 3, 2, 1),
    "avg_pool2d": lambda m, x: m.nn.functional.avg_pool2d(x, 3, 2, 1),
    "avg_pool2d_exclude": lambda m, x: m.nn.functional.avg_pool2d(x, 3, 2, 1, count_include_pad=False),
    "avg_pool3d": lambda m, x: m.nn.functional.avg_pool3d(x, 2),
    "adaptive_max_pool2d": lambda m, x: m.nn.functional.adaptive_max_pool2d(x, 2),
    "adaptive_avg_pool2d": lambda m, x: m.nn.functional.adaptive_avg_pool2d(x, (2, 3)),
    "lp_pool2d": lambda m, x: m.nn.functional.lp_pool2d(x, 2, 2),
}


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("name", sorted(HALF_CALLS))
def test_half_precision_pools_like_torch(dg, name, dtype):
    """float16 / bfloat16 pooling as torch: the input's dtype out, values within the dtype's rounding, and the
    gradient (issue 23: the core's max_pool2d raised TypeError unless return_indices=True)."""
    if torch is None:
        pytest.skip("torch is not installed")
    x = _input((4, 5)) / 4
    results = []
    for m in (dg, torch):
        t = m.tensor(x, dtype=getattr(m, dtype), requires_grad=True)
        try:
            outs = HALF_CALLS[name](m, t)
        except NotImplementedError:     # torch's missing half kernel (avg_pool3d): its float32 result, rounded
            assert m is torch
            t = m.tensor(x, requires_grad=True)
            outs = HALF_CALLS[name](m, t)
            outs = tuple(o.to(getattr(m, dtype)) if o.dtype.is_floating_point else o
                         for o in (outs if isinstance(outs, tuple) else (outs,)))
        outs = outs if isinstance(outs, tuple) else (outs,)
        assert str(outs[0].dtype).split(".")[-1] == dtype
        outs[0].float().sum().backward()
        results.append([o.detach().float().numpy() if o.dtype.is_floating_point else o.numpy() for o in outs]
                       + [t.grad.float().numpy()])
    tol = 2 ** -8 if dtype == "bfloat16" else 2 ** -11     # one rounding of the result: half an ulp, relative
    _agree(results[0], results[1], f"{name} {dtype}", rtol=tol, atol=tol)
