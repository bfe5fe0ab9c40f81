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
