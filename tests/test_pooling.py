"""Pooling, padding, resampling, pixel/channel shuffles and embedding_bag against torch (values, indices,
gradients), gradcheck in float64, and torch's exception types for bad arguments, on both engines."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")
TF = torch.nn.functional


def _to_torch(a, requires_grad):
    t = torch.tensor(a)
    return t.requires_grad_(True) if requires_grad else t


def _outputs(out):
    return out if isinstance(out, tuple) else (out,)


def compare(dg, fn, arrays, *, grad=True, rtol=1e-5, atol=1e-6, seed=0):
    """fn(module, *tensors) on torch and dg: the same values (and indices), and the same gradients of every
    float input for one random upstream gradient of the first output."""
    rng = np.random.default_rng(seed)
    tx = [_to_torch(a, grad and a.dtype.kind == "f") for a in arrays]
    gx = [dg.tensor(a, requires_grad=grad and a.dtype.kind == "f") for a in arrays]
    tout, gout = _outputs(fn(torch, *tx)), _outputs(fn(dg, *gx))
    assert len(tout) == len(gout)
    for t, g in zip(tout, gout):
        assert tuple(g.shape) == tuple(t.shape)
        assert g.dtype.name == str(t.dtype).split(".")[1]
        np.testing.assert_allclose(g.detach().numpy(), t.detach().numpy(), rtol=rtol, atol=atol)
    if grad and tout[0].requires_grad:
        up = rng.standard_normal(tuple(tout[0].shape)).astype(arrays[0].dtype)
        tout[0].backward(torch.tensor(up))
        gout[0].backward(dg.tensor(up))
        for t, g in zip(tx, gx):
            if t.requires_grad:
                np.testing.assert_allclose(g.grad.numpy(), t.grad.numpy(), rtol=rtol, atol=atol)
    return gout


def gradcheck(dg, fn, *arrays):
    xs = [dg.tensor(a.astype(np.float64), requires_grad=True) for a in arrays]
    assert dg.autograd.gradcheck(lambda *t: _outputs(fn(dg, *t))[0], tuple(xs), eps=1e-6, atol=1e-5)


def rand(*shape, seed=0):
    return np.random.default_rng(seed + sum(shape)).standard_normal(shape).astype(np.float32)


def F(m):
    return m.nn.functional


# ----- pad -----------------------------------------------------------------------------------------------------

PAD_CASES = [
    ((5,), (2, 1), "constant"),
    ((2, 3, 4), (1, -1, 2, 0, -1, 1), "constant"),      # negative padding crops
    ((1, 2, 5), (-3, -2), "constant"),                   # cropped to nothing
    ((2, 2, 2, 3, 2), (1, 1, 0, 1, 1, 0, 1, 0), "constant"),
    ((2, 5), (2, 3), "reflect"),                         # unbatched
    ((1, 2, 5), (-2, 1), "reflect"),
    ((1, 2, 4, 5), (1, 2, 3, 1), "reflect"),
    ((1, 1, 2, 3, 4), (1, 1, 1, 1, 1, 0), "reflect"),
    ((1, 2, 5), (-2, 3), "replicate"),
    ((2, 4, 5), (1, 2, 3, 1), "replicate"),
    ((1, 1, 2, 3, 4), (2, 1, 0, 3, 1, 1), "replicate"),
    ((1, 2, 5), (5, 3), "circular"),
    ((1, 2, 5), (-2, 1), "circular"),                    # crops, then wraps over what is left
    ((1, 2, 5), (2, -1), "circular"),
    ((3, 4, 5), (1, 2, 4, 3), "circular"),
    ((1, 1, 2, 3, 4), (1, 1, 2, 1, 1, 0), "circular"),
]


@pytest.mark.parametrize("shape, pad, mode", PAD_CASES)
def test_pad(dg, shape, pad, mode):
    compare(dg, lambda m, x: F(m).pad(x, pad, mode=mode), [rand(*shape)])


def test_pad_value_and_dtypes(dg):
    compare(dg, lambda m, x: F(m).pad(x, (1, 2), value=-3.5), [rand(2, 3)])
    ints = np.arange(6).reshape(2, 3)
    compare(dg, lambda m, x: F(m).pad(x, (1, 1, 1, 0), value=2.5), [ints], grad=False)    # 2.5 -> 2, as torch
    compare(dg, lambda m, x: F(m).pad(x, (1, 1), mode="reflect"), [ints], grad=False)
    compare(dg, lambda m, x: F(m).pad(x.transpose(1, 2), (1, 2), mode="replicate"), [rand(2, 3, 4)])   # strided
    y = F(dg).pad(dg.ones(2, 2), (0, 0))
    assert y.tolist() == [[1.0, 1.0], [1.0, 1.0]] and y.grad_fn is None


@pytest.mark.parametrize("pad, mode", [((1, 2, 0, -1), "constant"), ((1, 2, 2, 1), "reflect"),
                                       ((2, 1, 1, 2), "replicate"), ((2, 1, 1, 3), "circular")])
def test_pad_gradcheck(dg, pad, mode):
    gradcheck(dg, lambda m, x: F(m).pad(x, pad, mode=mode), rand(2, 3, 4))


PAD_ERRORS = [
    ((1, 2, 5), (1,), "constant", RuntimeError),                  # odd length
    ((5,), (1, 1, 1, 1), "constant", RuntimeError),              # longer than twice the dims
    ((1, 2, 5), (-3, -3), "constant", RuntimeError),             # crops more than the dim
    ((1, 2, 5), (1, 1), "wrap", NotImplementedError),
    ((5,), (1, 1), "reflect", NotImplementedError),              # 1-D input for a 1-D pad
    ((1, 1, 4, 5), (1, 1), "replicate", NotImplementedError),    # 4-D input for a 1-D pad
    ((1, 2, 5), (5, 0), "reflect", RuntimeError),                # reflect pad must be < the dim
    ((1, 2, 5), (6, 1), "circular", RuntimeError),               # wraps more than once
    ((1, 0, 5), (1, 1), "replicate", RuntimeError),              # empty channel dim
]


@pytest.mark.parametrize("shape, pad, mode, error", PAD_ERRORS)
def test_pad_errors(dg, shape, pad, mode, error):
    for m in (torch, dg):
        with pytest.raises(error):
            F(m).pad(m.ones(*shape), pad, mode=mode)
    with pytest.raises(TypeError):
        F(dg).pad(dg.ones(2, 3), (1.0, 1))
    with pytest.raises(RuntimeError):
        F(dg).pad(dg.ones(2, 3), (1, 1), mode="reflect", value=2.0)


def test_pad_node_names(dg):
    x = dg.ones(1, 2, 4, 4, requires_grad=True)
    assert F(dg).pad(x, (1, 1)).grad_fn.name() == "ConstantPadNdBackward"
    assert F(dg).pad(x, (1, 1, 1, 1), mode="reflect").grad_fn.name() == "ReflectionPad2DBackward"
    assert F(dg).pad(x[0], (1, 1), mode="replicate").grad_fn.name() == "ReplicationPad1DBackward"


PAD_MODULES = [
    ("ZeroPad1d", (2,), (2, 3, 4)), ("ZeroPad2d", ((1, 2, 0, 1),), (2, 3, 4)), ("ZeroPad3d", (1,), (1, 2, 3, 4)),
    ("ConstantPad1d", (2, 3.5), (2, 3, 4)), ("ConstantPad2d", (1, 2), (2, 3, 4)),
    ("ConstantPad3d", ((1, 0, 0, 1, 1, 0), 2.0), (1, 2, 3, 4)),
    ("ReflectionPad1d", (2,), (2, 3, 4)), ("ReflectionPad2d", ((1, 0, 2, 1),), (1, 2, 3, 4)),
    ("ReflectionPad3d", (1,), (1, 2, 3, 4)), ("ReplicationPad1d", ((1, 2),), (3, 4)),
    ("ReplicationPad2d", (2,), (2, 3, 4)), ("ReplicationPad3d", (1,), (1, 1, 2, 3, 4)),
    ("CircularPad1d", (2,), (2, 3, 4)), ("CircularPad2d", (1,), (2, 3, 4)), ("CircularPad3d", (1,), (1, 2, 3, 4)),
]


@pytest.mark.parametrize("name, args, shape", PAD_MODULES)
def test_pad_modules(dg, name, args, shape):
    out = compare(dg, lambda m, x: getattr(m.nn, name)(*args)(x), [rand(*shape)])
    assert out and repr(getattr(dg.nn, name)(*args)) == repr(getattr(torch.nn, name)(*args))


# ----- max and average pooling ---------------------------------------------------------------------------------

POOL_CASES = [      # (name, shape, call)
    ("max2d", (2, 3, 6, 5), lambda F, x: F.max_pool2d(x, 2)),
    ("max2d_pad_stride", (1, 2, 7, 6), lambda F, x: F.max_pool2d(x, 3, 2, 1)),
    ("max2d_ceil", (1, 2, 7, 6), lambda F, x: F.max_pool2d(x, 3, 2, 1, ceil_mode=True, return_indices=True)),
    ("max2d_ceil_drop", (1, 1, 4, 4), lambda F, x: F.max_pool2d(x, 2, 2, 1, ceil_mode=True)),   # last window dropped
    ("max2d_dilation", (1, 2, 7, 8), lambda F, x: F.max_pool2d(x, (3, 2), (2, 1), (1, 1), dilation=(2, 3),
                                                                return_indices=True)),
    ("max2d_unbatched", (3, 5, 6), lambda F, x: F.max_pool2d(x, 2, 1, return_indices=True)),
    ("max2d_rect", (2, 1, 5, 7), lambda F, x: F.max_pool2d(x, (2, 3), stride=[1, 2])),
    ("max2d_with_indices", (1, 2, 5, 5), lambda F, x: F.max_pool2d_with_indices(x, 3, 1, 1)),
    ("max2d_strided_input", (2, 3, 5, 6), lambda F, x: F.max_pool2d(x.transpose(2, 3), 2, return_indices=True)),
    ("max1d", (2, 3, 9), lambda F, x: F.max_pool1d(x, 3)),
    ("max1d_all", (2, 3, 9), lambda F, x: F.max_pool1d(x, 3, 2, 1, 2, True, True)),
    ("max1d_unbatched", (3, 8), lambda F, x: F.max_pool1d(x, 2, 1, 1, return_indices=True)),
    ("max1d_with_indices", (1, 2, 8), lambda F, x: F.max_pool1d_with_indices(x, (3,), ceil_mode=True)),
    ("avg2d", (2, 3, 6, 5), lambda F, x: F.avg_pool2d(x, 2)),
    ("avg2d_pad", (1, 2, 7, 6), lambda F, x: F.avg_pool2d(x, 3, 2, 1)),
    ("avg2d_no_pad_count", (1, 2, 7, 6), lambda F, x: F.avg_pool2d(x, 3, 2, 1, count_include_pad=False)),
    ("avg2d_ceil", (1, 2, 7, 6), lambda F, x: F.avg_pool2d(x, 3, 2, 1, ceil_mode=True)),
    ("avg2d_ceil_no_count", (1, 2, 6, 7), lambda F, x: F.avg_pool2d(x, (2, 3), 2, (1, 1), True, False)),
    ("avg2d_divisor", (1, 2, 6, 5), lambda F, x: F.avg_pool2d(x, 3, 2, 1, divisor_override=5)),
    ("avg2d_unbatched", (3, 5, 6), lambda F, x: F.avg_pool2d(x, 2, 1, ceil_mode=True)),
    ("avg1d", (2, 3, 9), lambda F, x: F.avg_pool1d(x, 3)),
    ("avg1d_all", (2, 3, 9), lambda F, x: F.avg_pool1d(x, 4, 3, 2, True, False)),
    ("avg1d_unbatched", (3, 8), lambda F, x: F.avg_pool1d(x, 3, 2, 1, ceil_mode=True)),
    ("adaptive_avg2d", (2, 3, 7, 6), lambda F, x: F.adaptive_avg_pool2d(x, (3, 4))),
    ("adaptive_avg2d_global", (2, 3, 7, 6), lambda F, x: F.adaptive_avg_pool2d(x, 1)),
    ("adaptive_avg2d_none", (2, 3, 7, 6), lambda F, x: F.adaptive_avg_pool2d(x, (None, 4))),
    ("adaptive_avg2d_bigger", (1, 2, 3, 4), lambda F, x: F.adaptive_avg_pool2d(x, 5)),
    ("adaptive_avg2d_tiles", (2, 3, 6, 4), lambda F, x: F.adaptive_avg_pool2d(x, (3, 2))),
    ("adaptive_avg1d", (2, 3, 7), lambda F, x: F.adaptive_avg_pool1d(x, 3)),
    ("adaptive_avg1d_unbatched", (3, 7), lambda F, x: F.adaptive_avg_pool1d(x, (5,))),
    ("adaptive_max2d", (2, 3, 7, 6), lambda F, x: F.adaptive_max_pool2d(x, (3, 4), return_indices=True)),
    ("adaptive_max2d_tiles", (2, 3, 6, 4), lambda F, x: F.adaptive_max_pool2d(x, (3, 2))),
    ("adaptive_max2d_unbatched", (3, 5, 5), lambda F, x: F.adaptive_max_pool2d(x, (2, None), True)),
    ("adaptive_max1d", (2, 3, 7), lambda F, x: F.adaptive_max_pool1d(x, 3, return_indices=True)),
    ("adaptive_max1d_indices", (3, 7), lambda F, x: F.adaptive_max_pool1d_with_indices(x, 4)),
    ("adaptive_max2d_indices", (1, 3, 5, 7), lambda F, x: F.adaptive_max_pool2d_with_indices(x, 3)),
    ("lp2d", (1, 2, 6, 5), lambda F, x: F.lp_pool2d(x, 2, 2)),
    ("lp2d_ceil", (1, 2, 7, 6), lambda F, x: F.lp_pool2d(x, 3.0, (3, 2), 2, ceil_mode=True)),
    ("lp2d_inf", (1, 2, 6, 6), lambda F, x: F.lp_pool2d(x, float("inf"), 2)),
    ("lp1d", (2, 3, 9), lambda F, x: F.lp_pool1d(x, 2, 3, 2)),
    ("lp1d_unbatched", (3, 8), lambda F, x: F.lp_pool1d(x, 1.5, 2, ceil_mode=True)),
]


@pytest.mark.parametrize("name, shape, call", POOL_CASES, ids=[c[0] for c in POOL_CASES])
def test_pool(dg, name, shape, call):
    a = rand(*shape)
    if name.startswith("lp") and "inf" not in name:
        a = np.abs(a) + 0.1                 # x^p of a negative number with p not an integer is NaN
    compare(dg, lambda m, x: call(F(m), x), [a])


@pytest.mark.parametrize("name, shape, call", [c for c in POOL_CASES if c[0] in (
    "max2d_ceil", "max2d_dilation", "max1d_all", "avg2d_ceil_no_count", "avg2d_divisor", "avg1d_all",
    "adaptive_avg2d", "adaptive_max2d", "adaptive_max1d", "lp2d_ceil", "max2d_pad_stride", "avg2d_pad")])
def test_pool_gradcheck(dg, name, shape, call):
    a = rand(*((1, 1) + tuple(shape[-2:])) if len(shape) == 4 else (1,) + tuple(shape[-2:]))   # one channel
    if name.startswith("lp"):
        a = np.abs(a) + 0.5
    gradcheck(dg, lambda m, x: call(F(m), x), a)


def test_pool_ties_nans_and_infs(dg):
    """The first maximum wins (and takes the gradient); a NaN wins over numbers (the last NaN of the window);
    a window of -inf next to padding answers a position inside the input."""
    a = np.array([[[[1.0, 1.0, 0.0], [1.0, 1.0, 2.0], [0.0, 3.0, 3.0]]]], dtype=np.float32)
    compare(dg, lambda m, x: F(m).max_pool2d(x, 2, 1, return_indices=True), [a])
    compare(dg, lambda m, x: F(m).adaptive_max_pool2d(x, 2, return_indices=True), [a])
    nan = a.copy()
    nan[0, 0, 0, 1] = nan[0, 0, 1, 0] = np.nan
    compare(dg, lambda m, x: F(m).max_pool2d(x, 2, 1, return_indices=True), [nan], grad=False)
    inf = np.full((1, 1, 3, 3), -np.inf, dtype=np.float32)
    compare(dg, lambda m, x: F(m).max_pool2d(x, 3, 2, 1, return_indices=True), [inf], grad=False)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64])
def test_max_pool_2x2_ties_nans_and_infs(dg, dtype):
    """Note [Max pooling 2x2] (kernel 2, stride 2, no padding, its own loop): ties, NaNs and infinities in every
    tap of the window, odd sizes (the last row and column belong to no window); positions, values, gradients."""
    rng = np.random.default_rng(3)
    a = rng.integers(-2, 3, size=(2, 3, 9, 7)).astype(dtype)   # small integers: many ties
    if dtype != np.int64:
        flat = a.reshape(-1)
        flat[rng.choice(flat.size, 20, replace=False)] = np.nan
        flat[rng.choice(flat.size, 8, replace=False)] = np.inf
        flat[rng.choice(flat.size, 8, replace=False)] = -np.inf
    compare(dg, lambda m, x: F(m).max_pool2d(x, 2, return_indices=True), [a], grad=dtype != np.int64)


def test_pool_integers(dg):
    a = np.arange(30).reshape(1, 1, 5, 6) * 7 % 11 - 5
    compare(dg, lambda m, x: F(m).max_pool2d(x, 2, 1, 1, return_indices=True), [a], grad=False)
    compare(dg, lambda m, x: F(m).avg_pool2d(x, 3, 1, 1), [a], grad=False)     # C division: truncates to zero
    compare(dg, lambda m, x: F(m).avg_pool1d(x[0], 2, ceil_mode=True), [a], grad=False)


def test_pool_empty_batch(dg):
    for call in (lambda F, x: F.max_pool2d(x, 2), lambda F, x: F.avg_pool2d(x, 2, ceil_mode=True),
                 lambda F, x: F.adaptive_max_pool2d(x, 3, True), lambda F, x: F.adaptive_avg_pool2d(x, 0)):
        compare(dg, lambda m, x: call(F(m), x), [np.zeros((0, 2, 4, 4), dtype=np.float32)], grad=False)


POOL_ERRORS = [     # (call, shape, exception type): torch raises the same type
    (lambda F, x: F.max_pool2d(x, 2, padding=2), (1, 2, 5, 5), RuntimeError),         # padding > kernel / 2
    (lambda F, x: F.avg_pool2d(x, 2, padding=2), (1, 2, 5, 5), RuntimeError),
    (lambda F, x: F.max_pool1d(x, 2, padding=2), (1, 2, 5), RuntimeError),
    (lambda F, x: F.max_pool2d(x, 0), (1, 2, 5, 5), RuntimeError),
    (lambda F, x: F.max_pool2d(x, 2, stride=0), (1, 2, 5, 5), RuntimeError),
    (lambda F, x: F.max_pool2d(x, 2, dilation=0), (1, 2, 5, 5), RuntimeError),
    (lambda F, x: F.max_pool2d(x, 2, padding=-1), (1, 2, 5, 5), RuntimeError),
    (lambda F, x: F.max_pool2d(x, 6), (1, 2, 5, 5), RuntimeError),                   # no window fits
    (lambda F, x: F.avg_pool2d(x, 6), (1, 2, 5, 5), RuntimeError),
    (lambda F, x: F.max_pool2d(x, 2), (5, 5), RuntimeError),                         # 2-D input
    (lambda F, x: F.max_pool2d(x, 2), (1, 1, 1, 5, 5), RuntimeError),
    (lambda F, x: F.max_pool1d(x, 2), (5,), RuntimeError),
    (lambda F, x: F.avg_pool1d(x, 2), (1, 2, 2, 5), RuntimeError),
    (lambda F, x: F.max_pool2d(x, (2, 2, 2)), (1, 2, 5, 5), RuntimeError),
    (lambda F, x: F.avg_pool1d(x, (2, 3)), (1, 2, 5), RuntimeError),
    (lambda F, x: F.max_pool2d(x, 2.0), (1, 2, 5, 5), TypeError),
    (lambda F, x: F.max_pool2d(x, 2), (1, 0, 4, 4), RuntimeError),                   # empty channels
    (lambda F, x: F.avg_pool2d(x, 2, divisor_override=0), (1, 2, 5, 5), RuntimeError),
    (lambda F, x: F.max_pool2d(x.bool(), 2), (1, 2, 4, 4), NotImplementedError),
    (lambda F, x: F.adaptive_avg_pool2d(x, -1), (1, 2, 5, 5), RuntimeError),
    (lambda F, x: F.adaptive_avg_pool2d(x, (1, 2, 3)), (1, 2, 5, 5), RuntimeError),
    (lambda F, x: F.adaptive_max_pool2d(x, 2), (5, 5), RuntimeError),
    (lambda F, x: F.adaptive_max_pool1d(x, 2), (5,), RuntimeError),
    (lambda F, x: F.adaptive_avg_pool2d(x.long(), 2), (1, 1, 4, 4), NotImplementedError),
    (lambda F, x: F.adaptive_avg_pool2d(x, 2), (1, 2, 0, 4), RuntimeError),
]


@pytest.mark.parametrize("call, shape, error", POOL_ERRORS)
def test_pool_errors(dg, call, shape, error):
    for m in (torch, dg):
        with pytest.raises(error):
            call(F(m), m.ones(*shape))


# ----- max_unpool ----------------------------------------------------------------------------------------------

UNPOOL_CASES = [     # (shape, call, whether the pool windows are disjoint: then gradcheck through pool and unpool)
    ((1, 2, 4, 4), lambda F, x: F.max_unpool2d(*F.max_pool2d(x, 2, return_indices=True), 2), True),
    ((1, 2, 5, 5), lambda F, x: F.max_unpool2d(*F.max_pool2d(x, 2, return_indices=True), 2, output_size=(5, 5)),
     True),
    ((1, 2, 5, 5), lambda F, x: F.max_unpool2d(*F.max_pool2d(x, 3, 2, 1, return_indices=True), 3, 2, 1,
                                               output_size=(1, 2, 5, 5)), False),
    ((2, 5, 4), lambda F, x: F.max_unpool2d(*F.max_pool2d(x, 2, 1, return_indices=True), 2, 1), False),
    ((2, 3, 8), lambda F, x: F.max_unpool1d(*F.max_pool1d(x, 2, return_indices=True), 2), True),
    ((3, 7), lambda F, x: F.max_unpool1d(*F.max_pool1d(x, 3, 2, 1, return_indices=True), 3, 2, 1,
                                         output_size=[7]), False),
]


@pytest.mark.parametrize("shape, call, disjoint", UNPOOL_CASES)
def test_max_unpool(dg, shape, call, disjoint):
    compare(dg, lambda m, x: call(F(m), x), [rand(*shape)])
    if disjoint:    # (overlapping windows write one element twice: pool-then-unpool is not smooth there)
        gradcheck(dg, lambda m, x: call(F(m), x), rand(*shape))


UNPOOL_ERRORS = [
    (lambda F, o, i: F.max_unpool2d(o, i, 2, output_size=(7, 7)), ValueError),     # not within stride of 4
    (lambda F, o, i: F.max_unpool2d(o, i, 2, output_size=(2, 4, 4)), ValueError),  # 3 sizes
    (lambda F, o, i: F.max_unpool2d(o, i + 100, 2), RuntimeError),                 # index outside the plane
    (lambda F, o, i: F.max_unpool2d(o, i.float(), 2), RuntimeError),
    (lambda F, o, i: F.max_unpool2d(o, i[:, :1], 2), RuntimeError),                # indices of another shape
]


@pytest.mark.parametrize("call, error", UNPOOL_ERRORS)
def test_max_unpool_errors(dg, call, error):
    for m in (torch, dg):
        out, idx = F(m).max_pool2d(m.ones(1, 2, 4, 4), 2, return_indices=True)
        with pytest.raises(error):
            call(F(m), out, idx)


# ----- pooling layers ------------------------------------------------------------------------------------------

POOL_MODULES = [    # (name, args, kwargs, input shape)
    ("MaxPool1d", (3,), {}, (2, 3, 8)),
    ("MaxPool1d", (3, 2, 1, 2, True, True), {}, (3, 9)),
    ("MaxPool2d", (2,), {}, (2, 3, 6, 6)),
    ("MaxPool2d", (3,), {"stride": 2, "padding": 1}, (3, 6, 7)),                  # unbatched (issue 14)
    ("MaxPool2d", ((3, 2),), {"stride": 1, "padding": 1, "dilation": 2, "return_indices": True,
                              "ceil_mode": True}, (1, 2, 6, 7)),
    ("AvgPool1d", (3,), {"stride": 2, "padding": 1, "ceil_mode": True, "count_include_pad": False}, (2, 3, 8)),
    ("AvgPool2d", (3, 2, 1, True, False, 2), {}, (1, 2, 7, 6)),
    ("AvgPool2d", (2,), {}, (2, 6, 6)),
    ("AdaptiveAvgPool1d", (3,), {}, (2, 3, 8)),
    ("AdaptiveAvgPool2d", ((3, None),), {}, (2, 3, 7, 5)),
    ("AdaptiveMaxPool1d", (3, True), {}, (3, 8)),
    ("AdaptiveMaxPool2d", (2,), {}, (1, 2, 5, 7)),
    ("LPPool1d", (2, 3), {}, (2, 3, 9)),
    ("LPPool2d", (2, 3, 2, True), {}, (1, 2, 8, 7)),
]


@pytest.mark.parametrize("name, args, kwargs, shape", POOL_MODULES)
def test_pool_modules(dg, name, args, kwargs, shape):
    a = np.abs(rand(*shape)) + 0.1
    compare(dg, lambda m, x: getattr(m.nn, name)(*args, **kwargs)(x), [a])
    assert repr(getattr(dg.nn, name)(*args, **kwargs)) == repr(getattr(torch.nn, name)(*args, **kwargs))


@pytest.mark.parametrize("n", [1, 2])
def test_unpool_modules(dg, n):
    shape = (2, 3, 8) if n == 1 else (1, 2, 6, 6)
    pool, unpool = f"MaxPool{n}d", f"MaxUnpool{n}d"

    def run(m, x):
        out, idx = getattr(m.nn, pool)(2, return_indices=True)(x)
        return getattr(m.nn, unpool)(2)(out, idx, output_size=x.shape)
    compare(dg, run, [rand(*shape)])
    assert repr(getattr(dg.nn, unpool)(2, 1, 1)) == repr(getattr(torch.nn, unpool)(2, 1, 1))


def test_pool_node_names(dg):
    x = dg.ones(1, 2, 4, 4, requires_grad=True)
    assert F(dg).max_pool2d(x, 2).grad_fn.name() == "MaxPool2DWithIndicesBackward"
    assert F(dg).max_pool2d(x, 2, ceil_mode=True, dilation=2).grad_fn.name() == "MaxPool2DWithIndicesBackward"
    assert F(dg).avg_pool2d(x, 2).grad_fn.name() == "AvgPool2DBackward"
    assert F(dg).adaptive_avg_pool2d(x, 3).grad_fn.name() == "AdaptiveAvgPool2DBackward"
    assert F(dg).adaptive_max_pool2d(x, 3).grad_fn.name() == "AdaptiveMaxPool2DBackward"


# ----- interpolate -----------------------------------------------------------------------------------------------

INTERP_SIZES = [dict(scale_factor=2), dict(scale_factor=1.7), dict(scale_factor=0.6), dict(size=1),
                dict(scale_factor=1.7, recompute_scale_factor=True)]
INTERP_CASES = [(shape, mode, kw) for mode in ("nearest", "nearest-exact") for shape in ((2, 3, 7), (1, 2, 5, 7))
                for kw in INTERP_SIZES]
INTERP_CASES += [(shape, mode, dict(kw, align_corners=ac))
                 for mode, shape in (("linear", (2, 3, 7)), ("bilinear", (1, 2, 5, 7)), ("bicubic", (1, 2, 5, 7)))
                 for ac in (False, True) for kw in INTERP_SIZES]
INTERP_CASES += [((1, 2, 3, 4, 5), "trilinear", dict(scale_factor=(1.5, 2, 0.7), align_corners=False)),
                 ((1, 2, 3, 4, 5), "trilinear", dict(size=(2, 5, 4), align_corners=True)),
                 ((1, 2, 3, 4, 5), "nearest", dict(scale_factor=(2, 1.5, 0.5))),
                 ((1, 2, 5, 7), "bilinear", dict(size=(3, 10))),
                 ((1, 2, 5, 7), "area", dict(size=(3, 4))), ((2, 3, 8), "area", dict(scale_factor=0.5))]


@pytest.mark.parametrize("shape, mode, kw", INTERP_CASES)
def test_interpolate(dg, shape, mode, kw):
    compare(dg, lambda m, x: F(m).interpolate(x, mode=mode, **kw), [rand(*shape)], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("shape, mode, kw", [
    ((1, 2, 5), "linear", dict(scale_factor=1.7)), ((1, 2, 5), "linear", dict(size=3, align_corners=True)),
    ((1, 1, 3, 4), "bilinear", dict(scale_factor=(1.7, 0.6))), ((1, 1, 3, 4), "bilinear", dict(size=5,
                                                                                              align_corners=True)),
    ((1, 1, 3, 4), "bicubic", dict(scale_factor=1.7)), ((1, 1, 3, 4), "bicubic", dict(size=(2, 5),
                                                                                      align_corners=True)),
    ((1, 1, 2, 3, 3), "trilinear", dict(scale_factor=1.5)), ((1, 1, 3, 4), "nearest-exact", dict(size=(5, 3)))])
def test_interpolate_gradcheck(dg, shape, mode, kw):
    gradcheck(dg, lambda m, x: F(m).interpolate(x, mode=mode, **kw), rand(*shape))


@pytest.mark.parametrize("mode, kw", [("bilinear", dict(scale_factor=0.3)), ("bilinear", dict(size=(4, 6))),
                                      ("bicubic", dict(scale_factor=(0.7, 1.6), align_corners=True)),
                                      ("bicubic", dict(size=(3, 5)))])
def test_interpolate_antialias(dg, mode, kw):
    compare(dg, lambda m, x: F(m).interpolate(x, mode=mode, antialias=True, **kw), [rand(1, 2, 9, 11)],
            rtol=1e-5, atol=1e-5)
    gradcheck(dg, lambda m, x: F(m).interpolate(x, mode=mode, antialias=True, **kw), rand(1, 1, 7, 8))


def test_interpolate_float64_and_names(dg):
    compare(dg, lambda m, x: F(m).interpolate(x, scale_factor=1.3, mode="bicubic"), [rand(1, 1, 4, 5).astype(float)],
            rtol=1e-12, atol=1e-12)
    x = dg.ones(1, 1, 4, 4, requires_grad=True)
    assert F(dg).interpolate(x, scale_factor=2).grad_fn.name() == "UpsampleNearest2DBackward"
    assert F(dg).interpolate(x, scale_factor=2, mode="bilinear").grad_fn.name() == "UpsampleBilinear2DBackward"
    assert F(dg).interpolate(x[0], size=3, mode="linear").grad_fn.name() == "UpsampleLinear1DBackward"
    assert F(dg).interpolate(x, size=3, mode="bicubic", antialias=True).grad_fn.name() == \
        "UpsampleBicubic2DAaBackward"


def test_upsample_deprecated(dg):
    for name, kw in (("upsample", dict(scale_factor=2, mode="bilinear")), ("upsample_nearest", dict(size=(6, 5))),
                     ("upsample_bilinear", dict(scale_factor=1.5))):
        with pytest.warns(UserWarning):
            compare(dg, lambda m, x: getattr(F(m), name)(x, **kw), [rand(1, 2, 3, 4)])


INTERP_ERRORS = [
    (dict(size=0), RuntimeError), (dict(scale_factor=0.1), RuntimeError), (dict(scale_factor=-2), RuntimeError),
    (dict(size=(2.0, 3)), TypeError), (dict(size=2, scale_factor=2), ValueError), (dict(), ValueError),
    (dict(size=2, align_corners=True), ValueError), (dict(size=2, mode="foo"), NotImplementedError),
    (dict(size=2, mode="linear"), NotImplementedError), (dict(size=2, recompute_scale_factor=True), ValueError),
    (dict(size=(2, 3, 4)), ValueError), (dict(scale_factor=2, mode="bicubic", antialias=True, shape=(1, 2, 5)),
                                         ValueError),
    (dict(size=2, shape=(2, 5)), NotImplementedError), (dict(size=2, mode="bilinear", shape=(2, 4, 5)),
                                                         NotImplementedError),
]


@pytest.mark.parametrize("kw, error", INTERP_ERRORS)
def test_interpolate_errors(dg, kw, error):
    kw = dict(kw)
    shape = kw.pop("shape", (1, 2, 5, 4))
    for m in (torch, dg):
        with pytest.raises(error):
            F(m).interpolate(m.ones(*shape), **kw)


UPSAMPLE_MODULES = [
    ("Upsample", (), dict(scale_factor=2), (1, 2, 3, 4)),
    ("Upsample", (), dict(size=(3, 7), mode="bilinear", align_corners=True), (1, 2, 3, 4)),
    ("Upsample", (), dict(scale_factor=(1.5, 2.0), mode="bicubic"), (1, 2, 3, 4)),
    ("Upsample", (5,), dict(mode="linear"), (2, 3, 4)),
    ("UpsamplingNearest2d", (), dict(scale_factor=2), (1, 2, 3, 4)),
    ("UpsamplingBilinear2d", ((4, 6),), {}, (1, 2, 3, 4)),
    ("PixelShuffle", (2,), {}, (2, 8, 3, 4)), ("PixelShuffle", (3,), {}, (9, 2, 2)),
    ("PixelShuffle", (2,), {}, (1, 2, 4, 2, 3)),
    ("PixelUnshuffle", (2,), {}, (2, 2, 4, 6)), ("PixelUnshuffle", (3,), {}, (1, 6, 3)),
    ("ChannelShuffle", (3,), {}, (2, 6, 2, 2)), ("ChannelShuffle", (2,), {}, (2, 4, 3)),
    ("ChannelShuffle", (2,), {}, (1, 6, 1, 2, 3)),
]


@pytest.mark.parametrize("name, args, kwargs, shape", UPSAMPLE_MODULES)
def test_resample_modules(dg, name, args, kwargs, shape):
    compare(dg, lambda m, x: getattr(m.nn, name)(*args, **kwargs)(x), [rand(*shape)], rtol=1e-5, atol=1e-5)
    assert repr(getattr(dg.nn, name)(*args, **kwargs)) == repr(getattr(torch.nn, name)(*args, **kwargs))


def test_shuffles_gradcheck_and_inverse(dg):
    gradcheck(dg, lambda m, x: F(m).pixel_shuffle(x, 2), rand(1, 8, 2, 3))
    gradcheck(dg, lambda m, x: F(m).channel_shuffle(x, 2), rand(1, 4, 3))
    x = dg.tensor(rand(2, 3, 4, 6))
    assert (F(dg).pixel_shuffle(F(dg).pixel_unshuffle(x, 2), 2) == x).all()
    assert dg.pixel_shuffle(F(dg).pixel_unshuffle(x, 2), 2).shape == x.shape


SHUFFLE_ERRORS = [
    (lambda F, x: F.pixel_shuffle(x, 2), (8, 3)), (lambda F, x: F.pixel_shuffle(x, 2), (2, 6, 3, 3)),
    (lambda F, x: F.pixel_shuffle(x, 0), (2, 8, 3, 3)), (lambda F, x: F.pixel_unshuffle(x, 2), (2, 6, 3, 3)),
    (lambda F, x: F.pixel_unshuffle(x, 0), (2, 6, 4, 4)), (lambda F, x: F.channel_shuffle(x, 3), (2, 6)),
    (lambda F, x: F.channel_shuffle(x, 4), (2, 6, 3, 3)), (lambda F, x: F.channel_shuffle(x, 0), (2, 6, 3, 3)),
]


@pytest.mark.parametrize("call, shape", SHUFFLE_ERRORS)
def test_shuffle_errors(dg, call, shape):
    for m in (torch, dg):
        with pytest.raises(RuntimeError):
            call(F(m), m.ones(*shape))


# ----- embedding_bag ---------------------------------------------------------------------------------------------

IDX = np.array([1, 2, 4, 5, 4, 3, 2, 0])
BAG_CASES = [   # (indices, offsets, kwargs)
    (IDX, np.array([0, 3, 3, 6]), {}),                                             # an empty bag
    (IDX, np.array([0, 3, 3, 6]), dict(mode="sum")),
    (IDX, np.array([0, 3, 3, 6]), dict(mode="max")),
    (IDX, np.array([0, 2, 8]), dict(mode="max", include_last_offset=True)),
    (IDX, np.array([0, 3, 8]), dict(mode="sum", include_last_offset=True)),
    (IDX, np.array([0, 8]), dict(mode="mean")),                                    # the last bag is empty
    (IDX, np.array([0, 4]), dict(mode="mean", padding_idx=4)),
    (IDX, np.array([0, 4]), dict(mode="max", padding_idx=-2)),
    (IDX.reshape(2, 4), None, dict(mode="sum", padding_idx=2)),
    (IDX.reshape(4, 2), None, dict(mode="max")),
    (np.array([[1, 1], [2, 1]]), None, dict(mode="mean", padding_idx=1)),          # a bag of padding only
]


@pytest.mark.parametrize("indices, offsets, kwargs", BAG_CASES)
def test_embedding_bag(dg, indices, offsets, kwargs):
    w = rand(6, 3)
    w[3, 1] = w[5, 1] = 9.0                                                        # a tie in max mode
    arrays = [w, indices] + ([] if offsets is None else [offsets])
    compare(dg, lambda m, w, i, o=None: F(m).embedding_bag(i, w, o, **kwargs), arrays)
    if kwargs.get("mode") != "max":
        gradcheck(dg, lambda m, w: F(m).embedding_bag(dg_or_torch(m, indices), w, dg_or_torch(m, offsets),
                                                      **kwargs), w)


def test_embedding_bag_max_gradcheck(dg):
    w = rand(6, 3, seed=5)            # distinct values: the maximum of each column is unique
    gradcheck(dg, lambda m, w: F(m).embedding_bag(m.tensor(IDX), w, m.tensor([0, 3, 3]), mode="max",
                                                  padding_idx=2), w)


def test_embedding_bag_tail_outside_the_bags(dg):
    """With include_last_offset, indices after offsets[-1] are in no bag (values only: torch's gradient of the
    weight reads outside its buffer there)."""
    compare(dg, lambda m, w, i, o: F(m).embedding_bag(i, w, o, mode="sum", include_last_offset=True),
            [rand(6, 3), IDX, np.array([0, 3, 5])], grad=False)


def dg_or_torch(m, a):
    return None if a is None else m.tensor(a)


def test_embedding_bag_per_sample_weights(dg):
    psw = rand(8, seed=3)
    compare(dg, lambda m, w, p, i, o: F(m).embedding_bag(i, w, o, mode="sum", per_sample_weights=p),
            [rand(6, 3), psw, IDX, np.array([0, 3, 3])])
    compare(dg, lambda m, w, p, i: F(m).embedding_bag(i, w, mode="sum", per_sample_weights=p, padding_idx=4),
            [rand(6, 3), psw.reshape(2, 4), IDX.reshape(2, 4)])
    gradcheck(dg, lambda m, w, p: F(m).embedding_bag(m.tensor(IDX), w, m.tensor([0, 5]), mode="sum",
                                                     per_sample_weights=p), rand(6, 3), psw)


def test_embedding_bag_max_norm(dg):
    for m in (torch, dg):
        w = m.tensor(rand(6, 3) * 2)
        before = w.clone()
        out = F(m).embedding_bag(m.tensor(IDX[:4]), w, m.tensor([0, 2]), max_norm=1.0, mode="sum")
        if m is torch:
            expected_w, expected_out = w.numpy(), out.numpy()
        else:
            np.testing.assert_allclose(w.numpy(), expected_w, rtol=1e-6)          # rows 1, 2, 4, 5 renormed
            np.testing.assert_allclose(out.numpy(), expected_out, rtol=1e-6)
            assert (w[0] == before[0]).all() and (w[3] == before[3]).all()


BAG_ERRORS = [
    (lambda m, w: F(m).embedding_bag(m.tensor([0, 1, 2]), w, m.tensor([1, 2])), RuntimeError),
    (lambda m, w: F(m).embedding_bag(m.tensor([0, 1, 2]), w, m.tensor([0, 4])), RuntimeError),
    (lambda m, w: F(m).embedding_bag(m.tensor([0, 7]), w, m.tensor([0])), RuntimeError),
    (lambda m, w: F(m).embedding_bag(m.tensor([0, -1]), w, m.tensor([0])), RuntimeError),
    (lambda m, w: F(m).embedding_bag(m.tensor([[1, 5]]), w, padding_idx=7), RuntimeError),
    (lambda m, w: F(m).embedding_bag(m.tensor([0, 1]), w, m.tensor([0]), mode="mean",
                                     per_sample_weights=w[0, :2]), NotImplementedError),
    (lambda m, w: F(m).embedding_bag(m.tensor([0, 1]), w, m.tensor([0]), mode="sum",
                                     per_sample_weights=w[0]), ValueError),
    (lambda m, w: F(m).embedding_bag(m.tensor([[[0]]]), w), ValueError),
    (lambda m, w: F(m).embedding_bag(m.tensor([[0, 1]]), w, m.tensor([0])), ValueError),
    (lambda m, w: F(m).embedding_bag(m.tensor([[0, 1]]), w, mode="min"), ValueError),
    (lambda m, w: F(m).embedding_bag(m.tensor([0, 1]), w), ValueError),
    (lambda m, w: F(m).embedding_bag(m.tensor([0, 1]), w[None], m.tensor([0])), ValueError),
    (lambda m, w: F(m).embedding_bag(m.tensor([0, 1]), w, m.tensor([[0]])), ValueError),
    (lambda m, w: F(m).embedding_bag(m.tensor([[0, 1]]), w, mode="max", scale_grad_by_freq=True), ValueError),
]


@pytest.mark.parametrize("call, error", BAG_ERRORS)
def test_embedding_bag_errors(dg, call, error):
    for m in (torch, dg):
        with pytest.raises(error):
            call(m, m.ones(6, 3))


def test_embedding_bag_module(dg):
    w = rand(6, 3)
    for kwargs in (dict(), dict(mode="max", padding_idx=1), dict(mode="sum", include_last_offset=True)):
        grads = []
        for m in (torch, dg):
            bag = m.nn.EmbeddingBag.from_pretrained(m.tensor(w), freeze=False, **kwargs)
            out = bag(m.tensor(IDX), m.tensor([0, 3, 8]))
            (out * m.tensor(np.arange(out.numel()).reshape(out.shape) % 5 - 2.0)).sum().backward()
            grads.append((out.detach().numpy(), bag.weight.grad.numpy()))
        for a, b in zip(*grads):
            np.testing.assert_allclose(b, a, rtol=1e-5, atol=1e-6)
        assert repr(dg.nn.EmbeddingBag(6, 3, **kwargs)) == repr(torch.nn.EmbeddingBag(6, 3, **kwargs))
    bag = dg.nn.EmbeddingBag(5, 4, padding_idx=-1, max_norm=1.0, norm_type=1.0)
    assert bag.padding_idx == 4 and bag.weight[4].tolist() == [0.0] * 4 and bag.weight.requires_grad
    assert repr(bag) == repr(torch.nn.EmbeddingBag(5, 4, padding_idx=-1, max_norm=1.0, norm_type=1.0))
    frozen = dg.nn.EmbeddingBag.from_pretrained(dg.tensor(w))
    assert not frozen.weight.requires_grad and frozen(dg.tensor([[0, 1]])).shape == (1, 3)
    node = dg.nn.EmbeddingBag(3, 2)(dg.tensor([[0, 1]])).grad_fn
    assert node.name() == "EmbeddingBagBackward"


# ----- 3-D pooling -----------------------------------------------------------------------------------------------

POOL3D_CASES = [
    ("max3d", (1, 2, 4, 5, 6), lambda F, x: F.max_pool3d(x, 2)),
    ("max3d_all", (1, 2, 5, 5, 6), lambda F, x: F.max_pool3d(x, (3, 2, 2), (2, 1, 2), (1, 0, 1), (1, 2, 1), True,
                                                             True)),
    ("max3d_unbatched", (2, 4, 4, 5), lambda F, x: F.max_pool3d_with_indices(x, 2, 1)),
    ("avg3d", (1, 2, 4, 5, 6), lambda F, x: F.avg_pool3d(x, 2)),
    ("avg3d_all", (1, 2, 5, 5, 6), lambda F, x: F.avg_pool3d(x, 3, 2, 1, True, False)),
    ("avg3d_divisor", (2, 5, 4, 6), lambda F, x: F.avg_pool3d(x, 2, 2, 1, divisor_override=3)),
    ("adaptive_avg3d", (1, 2, 5, 4, 7), lambda F, x: F.adaptive_avg_pool3d(x, (2, None, 3))),
    ("adaptive_avg3d_global", (1, 2, 5, 4, 7), lambda F, x: F.adaptive_avg_pool3d(x, 1)),
    ("adaptive_max3d", (2, 5, 4, 7), lambda F, x: F.adaptive_max_pool3d(x, (3, 2, 4), True)),
    ("adaptive_max3d_indices", (1, 1, 4, 4, 4), lambda F, x: F.adaptive_max_pool3d_with_indices(x, 2)),
    ("lp3d", (1, 2, 4, 4, 5), lambda F, x: F.lp_pool3d(x, 2, 2)),
    ("unpool3d", (1, 2, 4, 4, 6), lambda F, x: F.max_unpool3d(*F.max_pool3d(x, 2, return_indices=True), 2)),
    ("area3d", (1, 2, 4, 5, 6), lambda F, x: F.interpolate(x, size=(3, 2, 4), mode="area")),
]


@pytest.mark.parametrize("name, shape, call", POOL3D_CASES, ids=[c[0] for c in POOL3D_CASES])
def test_pool3d(dg, name, shape, call):
    a = np.abs(rand(*shape)) + 0.1 if name.startswith("lp") else rand(*shape)
    compare(dg, lambda m, x: call(F(m), x), [a])
    if name in ("max3d_all", "avg3d_all", "adaptive_max3d", "unpool3d"):
        gradcheck(dg, lambda m, x: call(F(m), x), rand(*((1,) + shape[-3:])))


@pytest.mark.parametrize("name, args", [("MaxPool3d", (2, 1, 1)), ("AvgPool3d", (3, 2, 1, True)),
                                        ("AdaptiveAvgPool3d", ((2, 3, None),)), ("AdaptiveMaxPool3d", (2,)),
                                        ("LPPool3d", (2, 2))])
def test_pool3d_modules(dg, name, args):
    compare(dg, lambda m, x: getattr(m.nn, name)(*args)(x), [np.abs(rand(1, 2, 4, 5, 6)) + 0.1])
    assert repr(getattr(dg.nn, name)(*args)) == repr(getattr(torch.nn, name)(*args))
    assert repr(dg.nn.MaxUnpool3d(2)) == repr(torch.nn.MaxUnpool3d(2))


def test_pool3d_names(dg):
    x = dg.ones(1, 1, 4, 4, 4, requires_grad=True)
    assert F(dg).max_pool3d(x, 2).grad_fn.name() == "MaxPool3DWithIndicesBackward"
    assert F(dg).avg_pool3d(x, 2).grad_fn.name() == "AvgPool3DBackward"
    assert F(dg).adaptive_max_pool3d(x, 3).grad_fn.name() == "AdaptiveMaxPool3DBackward"
    with pytest.raises(RuntimeError):
        F(dg).max_pool3d(dg.ones(4, 4, 4), 2)                  # 3-D input


@pytest.mark.parametrize("call", [
    lambda F, x: F.max_pool2d(x, 3, 2, 1, ceil_mode=True), lambda F, x: F.avg_pool2d(x, 3, 2, 1, False, False),
    lambda F, x: F.interpolate(x, scale_factor=1.5, mode="bicubic"), lambda F, x: F.pad(x, (1, 2, 2, 1), "reflect"),
    lambda F, x: F.adaptive_max_pool2d(x, 3)])
def test_second_order(dg, call):
    """The composites record differentiable backwards: create_graph=True gives correct second derivatives."""
    x = dg.tensor(rand(1, 1, 5, 5).astype(np.float64), requires_grad=True)
    assert dg.autograd.gradgradcheck(lambda t: call(F(dg), t), (x,), eps=1e-6, atol=1e-5)


@pytest.mark.parametrize("call", [
    lambda F, x: F.interpolate(x, size=2 ** 63 - 1), lambda F, x: F.adaptive_avg_pool2d(x, 2 ** 62),
    lambda F, x: F.pad(x, (2 ** 62, 2 ** 62)), lambda F, x: F.avg_pool2d(x, 2 ** 62, padding=2 ** 61),
    lambda F, x: F.max_unpool2d(x, x.long(), 2 ** 62)])
def test_sizes_beyond_int64_raise(dg, call):
    """numpy makes an empty range of 2**63 - 1 elements: such sizes must raise, never give an empty answer."""
    with pytest.raises(RuntimeError, match="more elements than fit in 64 bits"):
        call(F(dg), dg.zeros(1, 2, 5, 5))
