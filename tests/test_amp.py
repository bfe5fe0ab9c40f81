"""Autocast and GradScaler on the CPU (Note [Autocast] in python/dyngrad/_api/autocast.py), on both engines against
torch: each op's result dtype and values under `autocast("cpu")`, a small model's outputs and gradients, the state
functions, nesting, decorators and threads, and GradScaler's scale, skipped steps, errors and state."""
import pickle
import threading
import warnings

import numpy as np
import pytest

RNG = np.random.default_rng(0)
X = RNG.standard_normal((4, 6)).astype(np.float32)
W = RNG.standard_normal((5, 6)).astype(np.float32)
B3 = RNG.standard_normal((2, 4, 4)).astype(np.float32)
IMG = RNG.standard_normal((1, 2, 6, 6)).astype(np.float32)
K2 = RNG.standard_normal((3, 2, 3, 3)).astype(np.float32)
SEQ = RNG.standard_normal((1, 2, 7)).astype(np.float32)
K1 = RNG.standard_normal((3, 2, 3)).astype(np.float32)
VOL = RNG.standard_normal((1, 1, 4, 4, 4)).astype(np.float32)
TARGET = np.array([0, 4, 2, 1])


def _F(m):
    return m.nn.functional


# name -> fn(m, t): t(array) makes a tensor of m; the ops of torch's AutocastCPU lists and some that are not on them
CASES = {
    # lower precision (bfloat16 out of float32 in)
    "matmul_operator": lambda m, t: t(X) @ t(W).T,
    "rmatmul_operator": lambda m, t: t(X).T.__rmatmul__(t(X)),
    "matmul": lambda m, t: m.matmul(t(X), t(W).T), "matmul_method": lambda m, t: t(X).matmul(t(W).T),
    "matmul_vector": lambda m, t: t(X[0]) @ t(X[1]),
    "mm": lambda m, t: m.mm(t(X), t(W).T), "bmm": lambda m, t: m.bmm(t(B3), t(B3)),
    "addmm": lambda m, t: m.addmm(t(X[:, :5]), t(X), t(W).T), "baddbmm": lambda m, t: m.baddbmm(t(B3), t(B3), t(B3)),
    "addbmm": lambda m, t: m.addbmm(t(B3[0]), t(B3), t(B3)),
    "linear": lambda m, t: _F(m).linear(t(X), t(W), t(W[:, 0])),
    "linear_module": lambda m, t: _module_linear(m, t)(t(X)),
    "conv1d": lambda m, t: _F(m).conv1d(t(SEQ), t(K1), padding=1),
    "conv2d": lambda m, t: _F(m).conv2d(t(IMG), t(K2), t(K2[:, 0, 0, 0]), stride=2),
    "conv_transpose2d": lambda m, t: _F(m).conv_transpose2d(t(IMG), t(K2.transpose(1, 0, 2, 3))),
    "conv3d": lambda m, t: _F(m).conv3d(t(VOL), t(VOL[:, :, :2, :2, :2])),
    "prelu": lambda m, t: _F(m).prelu(t(X), t(np.array([0.25], np.float32))),
    "sdpa": lambda m, t: _F(m).scaled_dot_product_attention(t(B3), t(B3), t(B3)),
    "einsum": lambda m, t: m.einsum("ij,kj->ik", t(X), t(W)),
    "tensordot": lambda m, t: m.tensordot(t(X), t(W), ([1], [1])),
    "inner": lambda m, t: m.inner(t(X), t(W)),
    "multi_dot": lambda m, t: m.linalg.multi_dot([t(X), t(W).T, t(W)]),
    "vecdot": lambda m, t: m.linalg.vecdot(t(X), t(X)),
    # not on the lists: their inputs' dtype
    "mv": lambda m, t: m.mv(t(X), t(X[0])), "dot": lambda m, t: m.dot(t(X[0]), t(X[1])),
    "outer": lambda m, t: m.outer(t(X[0]), t(X[1])), "addmv": lambda m, t: m.addmv(t(X[:, 0]), t(X), t(X[0])),
    "softmax_of_bf16": lambda m, t: _F(m).softmax(t(X) @ t(W).T, -1),
    "layer_norm_of_bf16": lambda m, t: _F(m).layer_norm(t(X) @ t(W).T, (5,)),
    "relu_of_bf16": lambda m, t: _F(m).relu(t(X) @ t(W).T),
    "float64_matmul": lambda m, t: t(X.astype(np.float64)) @ t(W.astype(np.float64)).T,
    "int_matmul": lambda m, t: t(TARGET[:, None]) @ t(TARGET[None, :]),
    # fp32 (float32 out of bfloat16 in)
    "cross_entropy": lambda m, t: _F(m).cross_entropy(t(X) @ t(W).T, t(TARGET)),
    "cross_entropy_fn": lambda m, t: m.nn.functional.cross_entropy(t(X) @ t(W).T, t(TARGET), label_smoothing=0.1),
    "nll_loss": lambda m, t: _F(m).nll_loss(_F(m).log_softmax(t(X) @ t(W).T, 1), t(TARGET)),
    "mse_loss": lambda m, t: _F(m).mse_loss(t(X) @ t(W).T, t(X[:, :5])),
    "l1_loss": lambda m, t: _F(m).l1_loss(t(X) @ t(W).T, t(X[:, :5])),
    "bce_with_logits": lambda m, t: _F(m).binary_cross_entropy_with_logits(t(X) @ t(W).T, t(np.abs(X[:, :5]) / 3)),
    "prod": lambda m, t: (t(X[:2, :3]) @ t(W[:3, :3]).T).prod(),
    "cdist": lambda m, t: m.cdist(t(X) @ t(W).T, t(X) @ t(W).T),
    "avg_pool3d": lambda m, t: _F(m).avg_pool3d(_F(m).conv3d(t(VOL), t(VOL[:, :, :1, :1, :1])), 2),
    # promote
    "cat": lambda m, t: m.cat([t(X), t(X) @ t(W).T @ t(W)]),
    "stack": lambda m, t: m.stack([t(X[:, :5]), t(X) @ t(W).T]),
    "cat_bf16": lambda m, t: m.cat([t(X) @ t(W).T, t(X) @ t(W).T]),
}


FLOAT32_THROUGHOUT = {"mv", "dot", "outer", "addmv", "float64_matmul", "int_matmul"}


def _module_linear(m, t):
    layer = m.nn.Linear(6, 5)
    with m.no_grad():
        layer.weight.copy_(t(W))
        layer.bias.copy_(t(W[:, 1]))
    return layer


def _numpy(out):
    return out.detach().float().numpy()


@pytest.mark.parametrize("name", sorted(CASES))
def test_ops_under_autocast_match_torch(dg, name):
    torch = pytest.importorskip("torch")
    with torch.autocast("cpu"):
        theirs = CASES[name](torch, torch.tensor)
    with dg.autocast("cpu"):
        ours = CASES[name](dg, dg.tensor)
    assert ours.dtype.name == str(theirs.dtype).split(".")[1], (ours.dtype, theirs.dtype)
    # bfloat16 results (and float32 ones computed from them): both round the same float32 sums once, so they agree
    # to a bfloat16 ulp or two; the ops that autocast leaves alone agree to float32's rounding
    tol = 1e-5 if name in FLOAT32_THROUGHOUT else 2e-2
    scale = max(1.0, float(np.abs(theirs.detach().float().numpy()).max()))
    np.testing.assert_allclose(_numpy(ours), theirs.detach().float().numpy(), rtol=tol, atol=tol * scale)
    plain = CASES[name](dg, dg.tensor)            # outside the region: no casts
    assert plain.dtype.name in ("float32", "float64", "int64")


def test_policies_name_table_rows_and_cover_the_fast_paths(dg):
    import importlib
    autocast = importlib.import_module(dg.__name__ + "._api.autocast")
    from dyngrad._api.table import rows
    names = {row.name for row in rows()}
    assert set(autocast.POLICIES) | set(autocast.CONDITIONAL) <= names
    # Note [Fast paths under autocast]: the hot rows with a policy are the ones the C++ fast paths defer
    hot = {row.name for row in rows() if row.hot and row.name in autocast.POLICIES}
    assert hot == {"matmul", "linear", "cross_entropy", "__matmul__", "__rmatmul__"}
    x, w = dg.tensor(X), dg.tensor(W)
    with dg.autocast("cpu"):
        calls = [x @ w.T, dg.matmul(x, w.T), x.matmul(w.T), dg.nn.functional.linear(x, w), w.T.__rmatmul__(x)]
        assert [c.dtype for c in calls] == [dg.bfloat16] * 5
        assert dg.cross_entropy(x, dg.tensor(TARGET[:4] % 6)).dtype is dg.float32
        assert dg.nn.functional.cross_entropy(x.bfloat16(), dg.tensor(TARGET[:4] % 6)).dtype is dg.float32
    assert (x @ w.T).dtype is dg.float32 and dg.nn.functional.linear(x, w).dtype is dg.float32


class SmallNet:
    """conv -> relu -> linear -> cross_entropy, with the same weights on dyngrad and on torch."""

    def __init__(self, m):
        self.m = m
        self.conv = m.nn.Conv2d(2, 3, 3)
        self.fc = m.nn.Linear(3 * 4 * 4, 5)
        params = [RNG_W.standard_normal(tuple(p.shape)).astype(np.float32) * 0.3
                  for p in (self.conv.weight, self.conv.bias, self.fc.weight, self.fc.bias)]
        with m.no_grad():
            for p, v in zip((self.conv.weight, self.conv.bias, self.fc.weight, self.fc.bias), params):
                p.copy_(m.tensor(v))

    def params(self):
        return [self.conv.weight, self.conv.bias, self.fc.weight, self.fc.bias]

    def __call__(self, x, y):
        h = self.m.nn.functional.relu(self.conv(x))
        logits = self.fc(h.flatten(1))
        return logits, h, self.m.nn.functional.cross_entropy(logits, y)


RNG_W = np.random.default_rng(7)


def test_small_model_outputs_and_gradients_match_torch(dg):
    torch = pytest.importorskip("torch")
    state = RNG_W.bit_generator.state
    x = np.random.default_rng(3).standard_normal((4, 2, 6, 6)).astype(np.float32)
    y = np.array([0, 3, 1, 4])
    results = {}
    for m in (torch, dg):
        RNG_W.bit_generator.state = state
        net = SmallNet(m)
        with m.autocast(device_type="cpu", dtype=m.bfloat16):
            logits, h, loss = net(m.tensor(x), m.tensor(y))
        loss.backward()
        results[m] = (logits, h, loss, [p.grad for p in net.params()])
    (tl, th, tloss, tgrads), (ol, oh, oloss, ograds) = results[torch], results[dg]
    for ours, theirs in ((ol, tl), (oh, th), (oloss, tloss)):
        assert ours.dtype.name == str(theirs.dtype).split(".")[1]
        np.testing.assert_allclose(_numpy(ours), theirs.detach().float().numpy(), rtol=3e-2, atol=3e-2)
    for ours, theirs in zip(ograds, tgrads):
        assert ours.dtype is dg.float32 and theirs.dtype is torch.float32
        np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=5e-2, atol=2e-2 * np.abs(theirs.numpy()).max())


def test_autocast_state_nesting_and_decorators(dg):
    assert not dg.is_autocast_enabled("cpu") and dg.get_autocast_dtype("cpu") is dg.bfloat16
    assert dg.get_autocast_dtype("cuda") is dg.float16 and dg.amp.is_autocast_available("cpu")
    x = dg.tensor(X)
    with dg.autocast("cpu") as region:
        assert region.fast_dtype is dg.bfloat16 and dg.is_autocast_enabled("cpu") and not dg.is_autocast_enabled()
        with dg.autocast("cpu", enabled=False):
            assert not dg.is_autocast_enabled("cpu") and (x @ x.T).dtype is dg.float32
        with dg.amp.autocast("cpu", dtype=dg.float16):
            assert (x @ x.T).dtype is dg.float16 and dg.get_autocast_dtype("cpu") is dg.float16
        assert (x @ x.T).dtype is dg.bfloat16 and dg.get_autocast_dtype("cpu") is dg.bfloat16

    @dg.autocast("cpu")
    def forward(a):
        return a @ a.T
    assert forward(x).dtype is dg.bfloat16 and forward.__name__ == "forward" and not dg.is_autocast_enabled("cpu")
    with pytest.warns(FutureWarning, match=r"torch\.cpu\.amp\.autocast"):
        old = dg.cpu.amp.autocast()
    with old:
        assert (x @ x.T).dtype is dg.bfloat16
    # the state is per thread, as torch's
    seen = []
    with dg.autocast("cpu"):
        thread = threading.Thread(target=lambda: seen.append((dg.is_autocast_enabled("cpu"), (x @ x.T).dtype)))
        thread.start()
        thread.join()
    assert seen == [(False, dg.float32)]
    with pytest.raises(TypeError, match="requires a callable"):
        dg.autocast("cpu")(5)
    with pytest.raises(ValueError, match="device_type"):
        dg.autocast(5)
    with pytest.raises(RuntimeError, match="unsupported autocast device_type 'meta'"):
        dg.autocast("meta")
    with pytest.raises(TypeError, match="enabled"):
        dg.set_autocast_enabled("cpu", 1)
    with pytest.warns(UserWarning, match="CUDA is not available"):
        cuda_region = dg.autocast("cuda")
    with cuda_region:
        assert (x @ x.T).dtype is dg.float32 and not dg.is_autocast_enabled("cuda")
    with pytest.warns(UserWarning, match="target dtype is not supported"):
        assert not dg.autocast("cpu", dtype=dg.float32)._enabled
    with pytest.warns(DeprecationWarning, match="is_autocast_enabled\\('cpu'\\)"):
        assert dg.is_autocast_cpu_enabled() is False
    assert not dg.is_autocast_enabled("cpu")


def test_weight_cache_and_in_place_updates(dg):
    w = dg.tensor(W, requires_grad=True)
    x = dg.tensor(X)
    with dg.autocast("cpu"):
        a = dg.nn.functional.linear(x, w)
        b = dg.nn.functional.linear(x, w)
        np.testing.assert_array_equal(_numpy(a), _numpy(b))
        with dg.no_grad():
            w.mul_(2.0)                      # a new version: the cached bfloat16 copy is made again
        c = dg.nn.functional.linear(x, w)
        np.testing.assert_allclose(_numpy(c), 2 * _numpy(a), rtol=1e-2, atol=1e-2)
    (a.float().sum() + b.float().sum()).backward()
    np.testing.assert_allclose(w.grad.numpy(), 2 * X.sum(0)[None].repeat(5, 0), rtol=1e-2, atol=1e-2)
    assert w.grad.dtype is dg.float32


def test_custom_fwd_and_bwd(dg):
    seen = {}

    class Square(dg.autograd.Function):
        @staticmethod
        @dg.amp.custom_fwd(device_type="cpu", cast_inputs=dg.float32)
        def forward(ctx, a):
            seen["forward"] = (a.dtype, dg.is_autocast_enabled("cpu"))
            ctx.save_for_backward(a)
            return a * a

        @staticmethod
        @dg.amp.custom_bwd(device_type="cpu")
        def backward(ctx, grad):
            seen["backward"] = dg.is_autocast_enabled("cpu")
            (a,) = ctx.saved_tensors
            return 2 * a * grad

    x = dg.tensor(X, requires_grad=True)
    with dg.autocast("cpu"):
        out = Square.apply(x.bfloat16())
    out.sum().backward()
    assert seen == {"forward": (dg.float32, False), "backward": False} and out.dtype is dg.float32
    np.testing.assert_allclose(x.grad.numpy(), 2 * X, rtol=1e-2)


# ----- GradScaler ------------------------------------------------------------------------------------------------
def _scaler_run(m, scaler, events):
    """SGD on a linear model through `scaler`; events: per step, None or the index of a gradient made inf/nan."""
    model = m.nn.Linear(3, 2)
    with m.no_grad():
        model.weight.copy_(m.tensor([[0.5, -1.0, 0.25], [1.5, 0.0, -0.5]]))
        model.bias.copy_(m.tensor([0.1, -0.2]))
    opt = m.optim.SGD(model.parameters(), lr=0.1)
    x = m.tensor([[1.0, 2.0, 3.0], [0.5, -1.0, 2.0]])
    history = []
    for bad in events:
        opt.zero_grad()
        loss = model(x).pow(2).sum()
        scaler.scale(loss).backward()
        if bad is not None:
            with m.no_grad():
                model.weight.grad[0, bad] = float("inf") if bad % 2 == 0 else float("nan")
        scaler.unscale_(opt)
        grad_seen = model.weight.grad.clone()
        ret = scaler.step(opt)
        scaler.update()
        history.append((scaler.get_scale(), scaler._get_growth_tracker(), ret,
                        model.weight.detach().numpy().copy(), grad_seen.numpy()))
    return history, scaler.state_dict()


def test_grad_scaler_matches_torch(dg):
    torch = pytest.importorskip("torch")
    events = [None, 0, None, None, 1, None, None, None]
    kwargs = dict(init_scale=2.0 ** 10, growth_factor=4.0, backoff_factor=0.25, growth_interval=2)
    ours, our_state = _scaler_run(dg, dg.amp.GradScaler("cpu", **kwargs), events)
    theirs, their_state = _scaler_run(torch, torch.amp.GradScaler("cpu", **kwargs), events)
    assert our_state == their_state
    for o, t in zip(ours, theirs):
        assert o[:3] == t[:3]
        np.testing.assert_allclose(o[3], t[3], rtol=1e-5)
        np.testing.assert_allclose(o[4], t[4], rtol=1e-5)


def test_grad_scaler_errors_and_state(dg):
    model = dg.nn.Linear(2, 1)
    opt = dg.optim.SGD(model.parameters(), lr=0.1)
    scaler = dg.amp.GradScaler("cpu")
    assert scaler.is_enabled() and scaler.get_scale() == 65536.0
    with pytest.raises(AssertionError, match="did not use scaler.scale"):
        scaler.step(opt)
    loss = model(dg.ones(1, 2)).sum()
    assert scaler.scale(loss).item() == pytest.approx(loss.item() * 65536.0)
    assert [t.item() for t in scaler.scale([loss, (loss,)])[1]] == [pytest.approx(loss.item() * 65536.0)]
    scaler.scale(loss).backward()
    scaler.unscale_(opt)
    with pytest.raises(RuntimeError, match="already been called on this optimizer"):
        scaler.unscale_(opt)
    scaler.step(opt)
    with pytest.raises(RuntimeError, match="step\\(\\) has already been called"):
        scaler.step(opt)
    with pytest.raises(RuntimeError, match="after step"):
        scaler.unscale_(opt)
    with pytest.raises(AssertionError, match="only be pickled"):
        pickle.dumps(scaler)
    scaler.update(new_scale=8.0)
    assert scaler.get_scale() == 8.0
    scaler.update(dg.tensor([4.0]))
    assert scaler.get_scale() == 4.0
    copy = pickle.loads(pickle.dumps(scaler))
    assert copy.state_dict() == scaler.state_dict() and copy.get_scale() == 4.0
    fresh = dg.amp.GradScaler("cpu")
    fresh.load_state_dict(scaler.state_dict())
    assert fresh.get_scale() == 4.0 and fresh.get_growth_interval() == 2000
    with pytest.raises(RuntimeError, match="Closure use"):
        scaler.step(opt, closure=lambda: 0)
    with pytest.raises(AssertionError, match="growth factor"):
        dg.amp.GradScaler("cpu", growth_factor=1.0)
    # torch.cuda.amp.GradScaler and the default device: torch's warnings, then a passthrough
    with pytest.warns() as record:
        off = dg.cuda.amp.GradScaler(enabled=True)
    assert [w.category for w in record] == [FutureWarning, UserWarning]
    assert "CUDA is not available" in str(record[1].message)
    assert not off.is_enabled() and off.scale(loss) is loss and off.get_scale() == 1.0 and off.state_dict() == {}
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        dg.amp.GradScaler(enabled=False)                # nothing to warn about when disabled
    off.step(opt)
    off.update()
    with pytest.warns(UserWarning, match="CUDA is not available"):
        assert not dg.amp.GradScaler().is_enabled()
    with pytest.warns(FutureWarning, match=r"torch\.cpu\.amp\.GradScaler"):
        assert dg.cpu.amp.GradScaler().is_enabled()
