"""Vision ops of issues 10 and 14 against torch on both engines: conv3d / conv_transpose3d and their layers (with
the Lazy convolutions), affine_grid, grid_sample, gumbel_softmax, fractional max pooling, native_channel_shuffle
and conv_tbc: values, gradients of every input, gradcheck in float64 and torch's exception types."""
import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")


def _outputs(out):
    return out if isinstance(out, tuple) else (out,)


def F(m):
    return m.nn.functional


def rand(*shape, seed=0, dtype=np.float64):
    return np.random.default_rng(seed + 7 * sum(shape)).standard_normal(shape).astype(dtype)


def compare(dg, fn, arrays, *, grad=True, rtol=1e-5, atol=1e-6, seed=0, no_grad=()):
    """fn(module, *tensors) on torch and dg: the same shapes, dtypes and values, and the same gradient of every
    float input (but those of positions no_grad) for one random upstream gradient of the first output."""
    rng = np.random.default_rng(seed)
    needs = [grad and a.dtype.kind == "f" and i not in no_grad for i, a in enumerate(arrays)]
    tx = [torch.tensor(a).requires_grad_(r) for a, r in zip(arrays, needs)]
    gx = [dg.tensor(a, requires_grad=r) for a, r in zip(arrays, needs)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
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
                assert g.grad is not None
                np.testing.assert_allclose(g.grad.numpy(), t.grad.numpy(), rtol=rtol, atol=atol)
    return gout


def gradcheck(dg, fn, *arrays):
    xs = [dg.tensor(a.astype(np.float64), requires_grad=True) for a in arrays]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert dg.autograd.gradcheck(lambda *t: _outputs(fn(dg, *t))[0], tuple(xs), eps=1e-6, atol=1e-5)


def same_error(dg, fn):
    """fn(module) raises the same exception type on torch and on dg."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(Exception) as expected:
            fn(torch)
        with pytest.raises(expected.type):
            fn(dg)


# ----- conv3d and conv_transpose3d ---------------------------------------------------------------------------------

CONV3D_CASES = [
    ((2, 4, 5, 6, 5), (6, 4, 3, 2, 3), {}),
    ((2, 4, 5, 6, 5), (6, 4, 3, 2, 3), dict(stride=2, padding=1)),
    ((1, 4, 5, 4, 5), (6, 2, 3, 1, 2), dict(groups=2, stride=(1, 2, 1), padding=(2, 0, 1), dilation=2)),
    ((2, 3, 4, 5, 4), (2, 3, 2, 3, 2), dict(padding="same", dilation=(2, 1, 1))),
    ((2, 3, 4, 5, 4), (2, 3, 3, 3, 3), dict(padding="valid")),
    ((3, 4, 5, 4), (2, 3, 2, 2, 2), {}),                      # unbatched
    ((0, 3, 4, 4, 4), (2, 3, 1, 2, 1), {}),                   # empty batch
]


@pytest.mark.parametrize("xs,ws,kw", CONV3D_CASES)
@pytest.mark.parametrize("bias", [True, False])
def test_conv3d(dg, xs, ws, kw, bias):
    arrays = [rand(*xs), rand(*ws, seed=1)] + ([rand(ws[0], seed=2)] if bias else [])
    fn = lambda m, x, w, *b: F(m).conv3d(x, w, b[0] if b else None, **kw)   # noqa: E731
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = compare(dg, fn, arrays)[0]
    assert out.grad_fn is None or out.grad_fn.name() == "ConvolutionBackward"


CONV_T3D_CASES = [
    ((2, 4, 3, 4, 3), (4, 3, 3, 2, 3), {}),
    ((2, 4, 3, 4, 3), (4, 3, 3, 2, 2), dict(stride=2, padding=1, output_padding=1)),
    ((1, 4, 3, 4, 3), (4, 3, 3, 2, 3), dict(groups=2, stride=(2, 1, 3), padding=(1, 0, 1), dilation=(2, 1, 2),
                                            output_padding=(1, 0, 2))),
    ((4, 3, 2, 3), (4, 2, 2, 2, 2), dict(stride=(3, 1, 1), output_padding=(2, 0, 0))),    # unbatched
]


@pytest.mark.parametrize("xs,ws,kw", CONV_T3D_CASES)
def test_conv_transpose3d(dg, xs, ws, kw):
    bias = rand(ws[1] * kw.get("groups", 1), seed=2)
    compare(dg, lambda m, x, w, b: F(m).conv_transpose3d(x, w, b, **kw), [rand(*xs), rand(*ws, seed=1), bias])


def test_conv3d_gradcheck(dg):
    gradcheck(dg, lambda m, x, w, b: F(m).conv3d(x, w, b, stride=(2, 1, 1), padding=1, dilation=(1, 2, 1),
                                                 groups=2),
              rand(1, 2, 3, 4, 3), rand(2, 1, 2, 2, 2, seed=1), rand(2, seed=2))
    gradcheck(dg, lambda m, x, w, b: F(m).conv_transpose3d(x, w, b, stride=2, padding=(1, 0, 0), output_padding=1,
                                                           groups=2),
              rand(1, 2, 2, 3, 2), rand(2, 1, 2, 2, 3, seed=1), rand(2, seed=2))


def test_conv3d_integer_and_top_level(dg):
    x = np.arange(2 * 2 * 3 * 3 * 3).reshape(2, 2, 3, 3, 3) % 5
    w = np.arange(3 * 2 * 2 * 2 * 2).reshape(3, 2, 2, 2, 2) % 3 - 1
    compare(dg, lambda m, a, b: m.conv3d(a, b, stride=1, padding=1), [x, w], grad=False)
    compare(dg, lambda m, a, b: m.conv_transpose3d(a, b, stride=2), [x, w[:2]], grad=False)


CONV3D_ERRORS = [
    lambda m: F(m).conv3d(m.zeros(2, 3, 4, 4), m.zeros(2, 3, 1, 1, 1)),             # channel mismatch (unbatched)
    lambda m: F(m).conv3d(m.zeros(2, 3, 4, 4, 4), m.zeros(2, 3, 1, 1)),             # 4-D weight
    lambda m: F(m).conv3d(m.zeros(2, 3, 4, 4, 4), m.zeros(2, 3, 1, 1, 1), stride=(1, 2)),
    lambda m: F(m).conv3d(m.zeros(2, 3, 4, 4, 4), m.zeros(2, 3, 1, 1, 1), padding="same", stride=2),
    lambda m: F(m).conv3d(m.zeros(2, 3, 4, 4, 4), m.zeros(2, 3, 5, 1, 1)),          # kernel deeper than input
    lambda m: F(m).conv3d(m.zeros(2, 3, 4, 4, 4), m.zeros(2, 3, 1, 1, 1, dtype=m.float64)),
    lambda m: F(m).conv_transpose3d(m.zeros(1, 3, 4, 4, 4), m.zeros(3, 2, 1, 1, 1), padding="same"),
    lambda m: F(m).conv_transpose3d(m.zeros(1, 3, 4, 4, 4), m.zeros(2, 2, 1, 1, 1)),
    lambda m: F(m).conv_transpose3d(m.zeros(1, 2, 4, 4, 4), m.zeros(2, 2, 1, 1, 1), stride=2, output_padding=2),
    lambda m: m.nn.ConvTranspose3d(2, 3, 3, padding_mode="circular"),
    lambda m: m.nn.Conv3d(2, 3, 3, groups=2),
]


@pytest.mark.parametrize("case", range(len(CONV3D_ERRORS)))
def test_conv3d_errors(dg, case):
    same_error(dg, CONV3D_ERRORS[case])


# ----- the layers ------------------------------------------------------------------------------------------------

def _load(dg, tmod, gmod):
    gmod.load_state_dict({k: dg.tensor(v.detach().numpy()) for k, v in tmod.state_dict().items()})


LAYER_CASES = [
    ("Conv3d", (3, 4, (2, 3, 2)), dict(stride=(1, 2, 1), padding=1), (2, 3, 4, 5, 4)),
    ("Conv3d", (4, 4, 3), dict(padding="same", groups=2, bias=False), (4, 4, 5, 3)),
    ("Conv3d", (3, 2, 3), dict(padding=(1, 2, 1), padding_mode="circular"), (1, 3, 4, 4, 4)),
    ("Conv3d", (3, 2, 2), dict(padding=1, padding_mode="reflect"), (1, 3, 3, 4, 3)),
    ("Conv3d", (3, 2, 3), dict(padding="same", padding_mode="replicate", dilation=(1, 2, 1)), (1, 3, 4, 5, 4)),
    ("ConvTranspose3d", (3, 4, (2, 3, 2)), dict(stride=2, padding=(0, 1, 1), output_padding=1), (2, 3, 3, 3, 2)),
    ("ConvTranspose3d", (4, 2, 2), dict(groups=2, dilation=2), (4, 2, 3, 2)),
]


@pytest.mark.parametrize("name,args,kw,xs", LAYER_CASES)
def test_layers(dg, name, args, kw, xs):
    tmod = getattr(torch.nn, name)(*args, **kw).double()
    gmod = getattr(dg.nn, name)(*args, **kw, dtype=dg.float64)
    assert repr(gmod) == repr(tmod)
    assert [(k, tuple(v.shape)) for k, v in gmod.state_dict().items()] == \
        [(k, tuple(v.shape)) for k, v in tmod.state_dict().items()]
    _load(dg, tmod, gmod)
    compare(dg, lambda m, x: (tmod if m is torch else gmod)(x), [rand(*xs)])
    for (k, tp), (_, gp) in zip(tmod.named_parameters(), gmod.named_parameters()):
        np.testing.assert_allclose(gp.grad.numpy(), tp.grad.numpy(), rtol=1e-6, atol=1e-8, err_msg=k)


def test_conv_transpose3d_output_size(dg):
    tmod, gmod = torch.nn.ConvTranspose3d(2, 3, 3, stride=2).double(), dg.nn.ConvTranspose3d(2, 3, 3, stride=2)
    gmod = gmod.double()
    _load(dg, tmod, gmod)
    x = rand(1, 2, 3, 3, 3)
    t = tmod(torch.tensor(x), output_size=(8, 7, 8))
    g = gmod(dg.tensor(x), output_size=(8, 7, 8))
    np.testing.assert_allclose(g.detach().numpy(), t.detach().numpy(), rtol=1e-6, atol=1e-8)


LAZY_CASES = [
    ("LazyConv1d", "Conv1d", dict(kernel_size=3, padding=1), (2, 4, 6)),
    ("LazyConv2d", "Conv2d", dict(kernel_size=(2, 3), groups=2), (2, 4, 5, 5)),
    ("LazyConv3d", "Conv3d", dict(kernel_size=2, stride=2), (4, 4, 4, 4)),            # unbatched
    ("LazyConvTranspose1d", "ConvTranspose1d", dict(kernel_size=3, stride=2), (2, 4, 5)),
    ("LazyConvTranspose2d", "ConvTranspose2d", dict(kernel_size=2, groups=2, output_padding=1, stride=2),
     (2, 4, 3, 3)),
    ("LazyConvTranspose3d", "ConvTranspose3d", dict(kernel_size=2, bias=False), (1, 4, 2, 3, 2)),
]


@pytest.mark.parametrize("lazy,full,kw,xs", LAZY_CASES)
def test_lazy_convs(dg, lazy, full, kw, xs):
    gmod = getattr(dg.nn, lazy)(6, **kw)
    assert gmod.in_channels == 0 and gmod.has_uninitialized_params()
    opt = dg.optim.SGD(gmod.parameters(), lr=0.1)            # made before the shapes are known
    x = rand(*xs).astype(np.float32)
    gmod(dg.tensor(x))
    assert type(gmod) is getattr(dg.nn, full)
    n = int(full[-2])                                       # spatial dims of the layer
    assert gmod.in_channels == (xs[1] if len(xs) == n + 2 else xs[0])
    tmod = getattr(torch.nn, full)(gmod.in_channels, 6, **kw)
    assert tuple(gmod.weight.shape) == tuple(tmod.weight.shape)
    assert repr(gmod) == repr(tmod)
    _load(dg, tmod, gmod)
    compare(dg, lambda m, a: (tmod if m is torch else gmod)(a), [x])
    opt.step()                                              # the optimiser holds the materialised parameters
    assert opt.param_groups[0]["params"][0] is gmod.weight
    # a state_dict loaded before the first call gives the shapes
    other = getattr(dg.nn, lazy)(6, **kw)
    _load(dg, tmod, other)
    assert tuple(other.weight.shape) == tuple(tmod.weight.shape) and other.in_channels == tmod.in_channels


def test_lazy_conv_bad_input(dg):
    with pytest.raises(RuntimeError):
        dg.nn.LazyConv2d(4, 3)(dg.zeros(2, 3))


# ----- affine_grid and grid_sample -------------------------------------------------------------------------------

AFFINE_CASES = [((2, 3, 4, 5), False), ((2, 3, 4, 5), True), ((1, 1, 1, 3), False), ((2, 2, 3, 1, 4), False),
                ((2, 2, 3, 2, 4), True)]


@pytest.mark.parametrize("size,align", AFFINE_CASES)
def test_affine_grid(dg, size, align):
    n = len(size) - 2
    out = compare(dg, lambda m, th: F(m).affine_grid(th, size, align_corners=align), [rand(size[0], n, n + 1)])[0]
    assert out.grad_fn.name() == "AffineGridGeneratorBackward"
    gradcheck(dg, lambda m, th: F(m).affine_grid(th, size, align_corners=align), rand(size[0], n, n + 1))


GRID_CASES = [(nd, mode, pad, align) for nd in (2, 3) for mode in ("bilinear", "nearest", "bicubic")
              for pad in ("zeros", "border", "reflection") for align in (False, True)
              if not (nd == 3 and mode == "bicubic")]


def _grid_arrays(nd, dtype, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((2, 3) + (4, 5, 3)[:nd]).astype(dtype)
    g = rng.uniform(-1.4, 1.4, (2,) + (3, 2, 4)[:nd] + (nd,)).astype(dtype)
    return x, g


@pytest.mark.parametrize("nd,mode,pad,align", GRID_CASES)
def test_grid_sample(dg, nd, mode, pad, align):
    fn = lambda m, x, g: F(m).grid_sample(x, g, mode=mode, padding_mode=pad, align_corners=align)  # noqa: E731
    out = compare(dg, fn, list(_grid_arrays(nd, np.float32)), rtol=1e-4, atol=1e-5)[0]
    assert out.grad_fn.name() == f"GridSampler{nd}DBackward"
    compare(dg, fn, list(_grid_arrays(nd, np.float64, seed=1)), rtol=1e-9, atol=1e-10)


@pytest.mark.parametrize("nd,mode,pad", [(2, "bilinear", "reflection"), (2, "bicubic", "border"),
                                         (3, "bilinear", "zeros"), (2, "bicubic", "zeros")])
def test_grid_sample_gradcheck(dg, nd, mode, pad):
    rng = np.random.default_rng(3)          # small: gradcheck perturbs every element of both inputs
    x = rng.standard_normal((1, 2) + (3, 4, 2)[:nd])
    g = rng.uniform(-1.3, 1.3, (1,) + (2, 3, 1)[:nd] + (nd,))
    gradcheck(dg, lambda m, a, b: F(m).grid_sample(a, b, mode=mode, padding_mode=pad, align_corners=False), x, g)


def test_grid_sample_special_points(dg):
    # the borders, pixel centres and points just outside; infinite coordinates with border padding (clipped to
    # the border; torch's result for them with the other padding modes is undefined)
    x = rand(1, 2, 3, 4)
    g = np.array([[[[-1, -1], [1, 1], [0, 0], [1.0001, -1.0001], [-3.5, 2.25], [0.5, 0.5]]]])
    for mode in ("bilinear", "nearest", "bicubic"):
        for pad in ("zeros", "border", "reflection"):
            for align in (False, True):
                compare(dg, lambda m, a, b: F(m).grid_sample(a, b, mode, pad, align), [x, g], grad=False)
    g = np.array([[[[np.inf, 0.5], [0.3, -np.inf]]]])
    for mode in ("bilinear", "nearest"):
        compare(dg, lambda m, a, b: F(m).grid_sample(a, b, mode, "border", False), [x, g], grad=False)
    out = F(dg).grid_sample(dg.tensor(x), dg.tensor(g), "bilinear", "zeros", False)
    np.testing.assert_array_equal(out.numpy(), 0)


def test_grid_sample_align_corners_warns(dg):
    x, g = _grid_arrays(2, np.float32)
    with pytest.warns(UserWarning):
        F(dg).grid_sample(dg.tensor(x), dg.tensor(g))
    with pytest.warns(UserWarning):
        F(dg).affine_grid(dg.zeros(1, 2, 3), (1, 1, 2, 2))


GRID_ERRORS = [
    lambda m: F(m).grid_sample(m.zeros(1, 2, 3, 4), m.zeros(1, 5, 6, 2), mode="foo", align_corners=False),
    lambda m: F(m).grid_sample(m.zeros(1, 2, 3, 4), m.zeros(1, 5, 6, 2), padding_mode="foo", align_corners=False),
    lambda m: F(m).grid_sample(m.zeros(1, 2, 3, 4), m.zeros(1, 5, 6, 2, dtype=m.float64), align_corners=False),
    lambda m: F(m).grid_sample(m.zeros(2, 3, 4), m.zeros(5, 6, 2), align_corners=False),
    lambda m: F(m).grid_sample(m.zeros(1, 2, 3, 4), m.zeros(2, 5, 6, 2), align_corners=False),
    lambda m: F(m).grid_sample(m.zeros(1, 2, 3, 4), m.zeros(1, 5, 6, 3), align_corners=False),
    lambda m: F(m).grid_sample(m.zeros(1, 2, 3, 4), m.zeros(1, 5, 2), align_corners=False),
    lambda m: F(m).grid_sample(m.zeros(1, 2, 3, 4, 5), m.zeros(1, 2, 3, 4, 3), mode="bicubic", align_corners=False),
    lambda m: F(m).grid_sample(m.zeros(1, 2, 0, 4), m.zeros(1, 5, 6, 2), align_corners=False),
    lambda m: F(m).grid_sample(m.zeros(1, 2, 3, 4, dtype=m.int64), m.zeros(1, 5, 6, 2, dtype=m.int64),
                               align_corners=False),
    lambda m: F(m).affine_grid(m.zeros(2, 2, 3), (2, 3, 4), align_corners=False),
    lambda m: F(m).affine_grid(m.zeros(2, 2, 3), (2, 3, 4, 5, 6), align_corners=False),
    lambda m: F(m).affine_grid(m.zeros(2, 2, 3), (3, 3, 4, 5), align_corners=False),
    lambda m: F(m).affine_grid(m.zeros(2, 2, 3, dtype=m.int64), (2, 3, 4, 5), align_corners=False),
    lambda m: F(m).affine_grid(m.zeros(2, 2, 3), (2, 3, 0, 5), align_corners=False),
    lambda m: F(m).affine_grid(m.zeros(2, 2, 3), (2, 3, 4, 5), align_corners=1),
]


@pytest.mark.parametrize("case", range(len(GRID_ERRORS)))
def test_grid_errors(dg, case):
    same_error(dg, GRID_ERRORS[case])


def test_grid_sample_empty_batch(dg):
    compare(dg, lambda m, x, g: F(m).grid_sample(x, g, align_corners=True), [rand(0, 2, 3, 4), rand(0, 5, 6, 2)])


# ----- gumbel_softmax ----------------------------------------------------------------------------------------------

def test_gumbel_softmax_soft(dg):
    logits = dg.tensor(rand(4, 5), requires_grad=True)
    y = F(dg).gumbel_softmax(logits, tau=0.5, dim=0)
    np.testing.assert_allclose(y.detach().numpy().sum(0), 1, rtol=1e-12)
    # y = softmax((logits + g) / tau) for a Gumbel sample g: tau * log(y) - logits is constant over dim 0 up to g
    assert y.grad_fn is not None and (y.detach().numpy() > 0).all()
    y.sum().backward()
    np.testing.assert_allclose(logits.grad.numpy(), 0, atol=1e-12)       # the rows of a softmax sum to 1


def test_gumbel_softmax_hard_straight_through(dg):
    logits = rand(6, 3)
    dg.manual_seed(3)
    a = dg.tensor(logits, requires_grad=True)
    hard = F(dg).gumbel_softmax(a, tau=2.0, hard=True)
    dg.manual_seed(3)
    b = dg.tensor(logits, requires_grad=True)
    soft = F(dg).gumbel_softmax(b, tau=2.0)
    h = hard.detach().numpy()
    assert set(np.unique(h)) == {0.0, 1.0} and (h.sum(-1) == 1).all()
    assert (h.argmax(-1) == soft.detach().numpy().argmax(-1)).all()
    w = dg.tensor(rand(6, 3, seed=5))
    (hard * w).sum().backward()
    (soft * w).sum().backward()
    np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=1e-12)   # the soft sample's gradient


def test_gumbel_softmax_distribution(dg):
    # argmax of logits + Gumbel noise is a sample of softmax(logits), whatever tau
    p = np.array([0.6, 0.3, 0.1])
    logits = dg.tensor(np.tile(np.log(p), (4000, 1)))
    dg.manual_seed(0)
    y = F(dg).gumbel_softmax(logits, tau=0.3, hard=True).numpy()
    freq = y.mean(0)
    assert np.abs(freq - p).max() < 0.03, freq


def test_gumbel_softmax_arguments(dg):
    x = dg.zeros(3, 4)
    with pytest.warns(UserWarning):
        F(dg).gumbel_softmax(x, eps=1e-5)
    same_error(dg, lambda m: F(m).gumbel_softmax(m.zeros(3, 4, dtype=m.int64)))
    same_error(dg, lambda m: F(m).gumbel_softmax(m.zeros(3, 4), dim=2))


# ----- fractional max pooling --------------------------------------------------------------------------------------

FRACTIONAL_CASES = [
    (2, (2, 3, 9, 8), 2, (4, 3), None),
    (2, (3, 7, 7), (3, 2), None, (0.5, 0.7)),              # unbatched, output_ratio
    (2, (1, 2, 5, 5), 2, 1, None),
    (2, (2, 2, 6, 6), 2, 0, None),                         # an empty output
    (3, (2, 2, 7, 8, 9), 2, (3, 4, 2), None),
    (3, (2, 6, 7, 5), (2, 3, 1), None, 0.6),               # unbatched, one ratio
]


@pytest.mark.parametrize("n,xs,k,size,ratio", FRACTIONAL_CASES)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_fractional_max_pool(dg, n, xs, k, size, ratio, dtype):
    batch = 1 if len(xs) == n + 1 else xs[0]
    samples = np.random.default_rng(1).random((batch, xs[-n - 1], n)).astype(dtype)

    def fn(m, x, s):
        return getattr(F(m), f"fractional_max_pool{n}d")(x, k, output_size=size, output_ratio=ratio,
                                                          return_indices=True, _random_samples=s)
    values, _ = compare(dg, fn, [rand(*xs).astype(dtype), samples], no_grad=(1,))
    if values.grad_fn is not None:
        assert values.grad_fn.name() == f"FractionalMaxPool{n}DBackward"
    with_indices = getattr(F(dg), f"fractional_max_pool{n}d_with_indices")
    v2, i2 = with_indices(dg.tensor(rand(*xs).astype(dtype)), k, size, ratio, _random_samples=dg.tensor(samples))
    assert tuple(i2.shape) == tuple(values.shape) and i2.dtype is dg.int64


def test_fractional_max_pool_ties_and_nan(dg):
    x = np.zeros((1, 1, 6, 6))
    x[0, 0, 2, 3] = np.nan
    s = np.array([[[0.3, 0.8]]])
    compare(dg, lambda m, a, b: F(m).fractional_max_pool2d(a, 2, 3, return_indices=True, _random_samples=b), [x, s],
            no_grad=(1,))


def test_fractional_max_pool_gradcheck(dg):
    s = np.array([[[0.2, 0.7, 0.4], [0.9, 0.1, 0.5]]])
    gradcheck(dg, lambda m, x: F(m).fractional_max_pool3d(x, 2, (2, 3, 2), _random_samples=m.tensor(s)),
              rand(1, 2, 4, 5, 4))


def test_fractional_max_pool_random(dg):
    # without _random_samples: the windows are drawn from the engine's generator (reproducible with manual_seed)
    x = dg.tensor(rand(2, 3, 10, 10))
    dg.manual_seed(5)
    a, ia = F(dg).fractional_max_pool2d(x, 2, output_ratio=(0.5, 0.5), return_indices=True)
    dg.manual_seed(5)
    b, ib = F(dg).fractional_max_pool2d(x, 2, output_ratio=(0.5, 0.5), return_indices=True)
    assert tuple(a.shape) == (2, 3, 5, 5) and np.array_equal(ia.numpy(), ib.numpy())
    np.testing.assert_array_equal(a.numpy(), np.take_along_axis(x.numpy().reshape(2, 3, -1),
                                                                ia.numpy().reshape(2, 3, -1), 2).reshape(a.shape))


@pytest.mark.parametrize("n", [2, 3])
def test_fractional_max_pool_modules(dg, n):
    name = f"FractionalMaxPool{n}d"
    xs = (2, 3) + (7, 6, 5)[:n]
    samples = np.random.default_rng(2).random((2, 3, n))
    tmod = getattr(torch.nn, name)(2, output_size=3, return_indices=True, _random_samples=torch.tensor(samples))
    gmod = getattr(dg.nn, name)(2, output_size=3, return_indices=True, _random_samples=dg.tensor(samples))
    assert repr(gmod) == repr(tmod) and list(gmod.state_dict()) == list(tmod.state_dict())
    compare(dg, lambda m, x: (tmod if m is torch else gmod)(x), [rand(*xs)])
    out = getattr(dg.nn, name)(2, output_ratio=0.5)(dg.tensor(rand(*xs)))
    assert tuple(out.shape) == xs[:2] + tuple(int(v * 0.5) for v in xs[2:])


FRACTIONAL_ERRORS = [
    lambda m: F(m).fractional_max_pool2d(m.zeros(2, 3, 7, 6), 2),
    lambda m: F(m).fractional_max_pool2d(m.zeros(2, 3, 7, 6), 2, output_size=(7, 6)),
    lambda m: F(m).fractional_max_pool2d(m.zeros(2, 3, 7, 6), 2, 3, _random_samples=m.zeros(2, 3, 3)),
    lambda m: F(m).fractional_max_pool2d(m.zeros(2, 3, 7, 6), 2, 3, _random_samples=m.zeros(1, 3, 2)),
    lambda m: F(m).fractional_max_pool2d(m.zeros(2, 3, 7, 6), 2, 3,
                                         _random_samples=m.zeros(2, 3, 2, dtype=m.float64)),
    lambda m: F(m).fractional_max_pool2d(m.zeros(2, 3, 7, 6), (2, 2, 2), 3),
    lambda m: F(m).fractional_max_pool2d(m.zeros(2, 3, 7, 6), 2, (3, 3, 3)),
    lambda m: F(m).fractional_max_pool2d(m.zeros(2, 3, 7, 6), 2, output_ratio=(0.5, 0.5, 0.5)),
    lambda m: F(m).fractional_max_pool2d(m.zeros(2, 3, 0, 6), 2, 1),
    lambda m: F(m).fractional_max_pool2d(m.zeros(1, 1, 4, 4), 2, 2, _random_samples=m.zeros(1, 1, 2,
                                                                                           requires_grad=True)),
    lambda m: F(m).fractional_max_pool3d(m.zeros(3, 5, 6, 7), 2, output_size=(6, 3, 3)),
    lambda m: m.nn.FractionalMaxPool2d(2),
    lambda m: m.nn.FractionalMaxPool2d(2, output_size=2, output_ratio=0.5),
    lambda m: m.nn.FractionalMaxPool3d(2, output_ratio=1.5),
]


@pytest.mark.parametrize("case", range(len(FRACTIONAL_ERRORS)))
def test_fractional_errors(dg, case):
    same_error(dg, FRACTIONAL_ERRORS[case])


# ----- native_channel_shuffle and conv_tbc ---------------------------------------------------------------------

def test_native_channel_shuffle(dg):
    x = rand(2, 6, 3)
    with torch.no_grad():
        expected = torch.native_channel_shuffle(torch.tensor(x), 3).numpy()
    for fn in (dg.native_channel_shuffle, F(dg).native_channel_shuffle):
        np.testing.assert_array_equal(fn(dg.tensor(x), 3).numpy(), expected)
    same_error(dg, lambda m: m.native_channel_shuffle(m.zeros(1, 4, 2), 3))
    same_error(dg, lambda m: m.native_channel_shuffle(m.zeros(4, 2), 2))
    gradcheck(dg, lambda m, a: m.native_channel_shuffle(a, 2), rand(1, 4, 2))


@pytest.mark.parametrize("pad", [0, 1, 2, -1])
def test_conv_tbc(dg, pad):
    arrays = [rand(5, 2, 3), rand(3, 3, 4, seed=1), rand(4, seed=2)]
    out = compare(dg, lambda m, x, w, b: m.conv_tbc(x, w, b, pad), arrays)[0]
    assert out.grad_fn.name() == "ConvTbcBackward"
    gradcheck(dg, lambda m, x, w, b: F(m).conv_tbc(x, w, b, pad), *arrays)


CONV_TBC_ERRORS = [
    lambda m: m.conv_tbc(m.zeros(5, 2, 3), m.zeros(3, 3, 4), m.zeros(3)),
    lambda m: m.conv_tbc(m.zeros(5, 2, 3), m.zeros(3, 2, 4), m.zeros(4)),
    lambda m: m.conv_tbc(m.zeros(2, 3), m.zeros(3, 3, 4), m.zeros(4)),
    lambda m: m.conv_tbc(m.zeros(5, 2, 3), m.zeros(3, 4), m.zeros(4)),
    lambda m: m.conv_tbc(m.zeros(5, 2, 3), m.zeros(3, 3, 4), m.zeros(1, 4)),
    lambda m: m.conv_tbc(m.zeros(5, 2, 3), m.zeros(8, 3, 4), m.zeros(4)),
    lambda m: m.conv_tbc(m.zeros(5, 2, 3), m.zeros(3, 3, 4), m.zeros(4), 1.5),
]


@pytest.mark.parametrize("case", range(len(CONV_TBC_ERRORS)))
def test_conv_tbc_errors(dg, case):
    same_error(dg, CONV_TBC_ERRORS[case])


def test_second_order(dg):
    # every new op is a composite of differentiable core ops, so gradients of gradients come for free
    rng = np.random.default_rng(4)
    x, w = rng.standard_normal((1, 2, 3, 3, 3)), rng.standard_normal((2, 1, 2, 2, 2))
    cases = [
        (lambda a, b: F(dg).conv3d(a, b, padding=1, groups=2, stride=(2, 1, 1)), (x, w)),
        (lambda a, b: F(dg).conv_transpose3d(a, b, stride=2, groups=2), (x, w)),
        (lambda a, b: F(dg).grid_sample(a, b, align_corners=False),
         (rng.standard_normal((1, 1, 3, 3)), rng.uniform(-1, 1, (1, 2, 2, 2)))),
    ]
    for fn, arrays in cases:
        inputs = tuple(dg.tensor(a, requires_grad=True) for a in arrays)
        assert dg.autograd.gradgradcheck(fn, inputs)
