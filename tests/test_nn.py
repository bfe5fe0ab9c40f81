"""dyngrad.nn on both engines: module registration, state dicts, hooks, every layer's forward (against torch when
installed) and backward (gradcheck in float64), variable-length RNNs, init and clip_grad_norm_."""
import importlib
import math

import numpy as np
import pytest


@pytest.fixture(params=["cpp", "reference"])
def dg(request):
    return importlib.import_module("dyngrad" if request.param == "cpp" else "dyngrad.reference")


def np_of(t):
    return np.array(t.detach().numpy())


def rand64(dg, *shape, seed=0):
    return dg.tensor(np.random.default_rng(seed).standard_normal(shape))


def gradcheck_module(dg, module, *inputs):
    """Finite differences in float64 for the module's parameters and its floating inputs."""
    params = [p for p in module.parameters()]
    n = len(inputs)

    def fn(*args):
        out = module(*args[:n])
        if isinstance(out, tuple):      # RNNs: (output, state)
            out = out[0]
        if isinstance(out, list):
            out = dg.cat(out)
        return out

    assert dg.autograd.gradcheck(fn, tuple(inputs) + tuple(params), eps=1e-6, atol=1e-6, rtol=1e-4)


def to_torch(torch, dgmod, tmod):
    """Load a dyngrad module's state dict into a torch module (strict: the names and shapes must match)."""
    tmod.load_state_dict({k: torch.tensor(np_of(v)) for k, v in dgmod.state_dict().items()}, strict=True)
    return tmod.double()


# ----- Module mechanics ------------------------------------------------------------------------------------


def make_net(dg):
    nn = dg.nn

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(3, 4)
            self.norm = nn.LayerNorm(4)
            self.register_buffer("count", dg.zeros(1))
            self.scale = nn.Parameter(dg.ones(1))

        def forward(self, x):
            return self.norm(self.fc(x)) * self.scale

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.block = Block()
            self.layers = nn.ModuleList([nn.Linear(4, 4), nn.ReLU()])
            self.heads = nn.ModuleDict({"a": nn.Linear(4, 2)})
            self.not_a_param = dg.ones(2)       # a plain tensor attribute is not registered

        def forward(self, x):
            x = self.block(x)
            for layer in self.layers:
                x = layer(x)
            return self.heads["a"](x)

    return Model()


def test_registration(dg):
    m = make_net(dg)
    names = [n for n, _ in m.named_parameters()]
    assert names == ["block.scale", "block.fc.weight", "block.fc.bias", "block.norm.weight", "block.norm.bias",
                     "layers.0.weight", "layers.0.bias", "heads.a.weight", "heads.a.bias"]
    assert [n for n, _ in m.named_buffers()] == ["block.count"]
    assert [n for n, _ in m.named_modules()] == ["", "block", "block.fc", "block.norm", "layers", "layers.0",
                                                 "layers.1", "heads", "heads.a"]
    assert [n for n, _ in m.named_children()] == ["block", "layers", "heads"]
    assert all(isinstance(p, dg.nn.Parameter) and isinstance(p, dg.Tensor) and p.is_leaf and p.requires_grad
               for p in m.parameters())
    assert m.get_submodule("block.fc") is m.block.fc and m.get_parameter("heads.a.bias") is m.heads.a.bias
    # shared modules are listed once
    shared = dg.nn.Linear(2, 2)
    seq = dg.nn.Sequential(shared, shared)
    assert len(list(seq.parameters())) == 2
    # re-assigning: a parameter slot takes a Parameter or None only
    lin = dg.nn.Linear(2, 2)
    lin.bias = None
    assert [n for n, _ in lin.named_parameters()] == ["weight"]
    with pytest.raises(TypeError, match="cannot assign"):
        lin.weight = dg.ones(2, 2)
    del lin.weight
    assert list(lin.parameters()) == []
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        lin.nope

    class Early(dg.nn.Module):
        def __init__(self):
            self.fc = dg.nn.Linear(1, 1)

    with pytest.raises(AttributeError, match="before Module.__init__"):
        Early()


def test_train_eval_zero_grad_and_dtype(dg):
    m = make_net(dg)
    assert m.training and m.block.fc.training
    m.eval()
    assert not any(x.training for x in m.modules())
    m.train()
    assert all(x.training for x in m.modules())
    m(dg.randn(5, 3)).sum().backward()
    assert all(p.grad is not None for p in m.parameters())
    m.zero_grad(set_to_none=False)
    assert all(float(p.grad.abs().sum()) == 0 for p in m.parameters())
    m.zero_grad()
    assert all(p.grad is None for p in m.parameters())
    w = m.block.fc.weight
    m.double()
    assert m.block.fc.weight is w and w.dtype == dg.float64 and m.block.count.dtype == dg.float64
    assert m(dg.randn(2, 3, dtype=dg.float64)).dtype == dg.float64


def test_state_dict_round_trip(dg):
    dg.manual_seed(0)
    a, b = make_net(dg), make_net(dg)
    sd = a.state_dict()
    # torch's order: each module's own parameters, then its buffers, then its children
    assert list(sd) == ["block.scale", "block.count", "block.fc.weight", "block.fc.bias", "block.norm.weight",
                        "block.norm.bias", "layers.0.weight", "layers.0.bias", "heads.a.weight", "heads.a.bias"]
    assert not any(v.requires_grad for v in sd.values())
    x = dg.randn(4, 3)
    assert not np.allclose(np_of(a(x)), np_of(b(x)))
    result = b.load_state_dict(sd)
    assert result.missing_keys == [] and result.unexpected_keys == []
    np.testing.assert_array_equal(np_of(a(x)), np_of(b(x)))
    # numpy arrays are accepted too
    b.load_state_dict({k: np_of(v) * 0 for k, v in sd.items()})
    assert float(b.block.fc.weight.abs().sum()) == 0
    # strictness and shapes
    partial = {k: v for k, v in sd.items() if k != "heads.a.bias"}
    partial["extra"] = dg.ones(1)
    with pytest.raises(RuntimeError, match=r'Missing key\(s\) in state_dict: "heads.a.bias"'):
        b.load_state_dict(partial)
    with pytest.raises(RuntimeError, match=r'Unexpected key\(s\) in state_dict: "extra"'):
        b.load_state_dict(partial)
    assert b.load_state_dict(partial, strict=False) == (["heads.a.bias"], ["extra"])
    bad = dict(sd)
    bad["block.fc.weight"] = dg.ones(3, 3)
    with pytest.raises(RuntimeError, match=r"size mismatch for block.fc.weight: .*Size\(\[3, 3\]\).*Size\(\[4, 3\]\)"):
        b.load_state_dict(bad)


def test_hooks(dg):
    lin = dg.nn.Linear(2, 2)
    seen = []
    h1 = lin.register_forward_pre_hook(lambda mod, args: (args[0] * 0,))
    h2 = lin.register_forward_hook(lambda mod, args, out: seen.append(out.shape) or out + 1)
    out = lin(dg.ones(3, 2))
    np.testing.assert_allclose(np_of(out), np.broadcast_to(np_of(lin.bias) + 1, (3, 2)), rtol=1e-6)
    assert seen == [(3, 2)]
    h1.remove()
    h2.remove()
    np.testing.assert_allclose(np_of(lin(dg.ones(1, 2))), np_of(lin.weight.sum(1) + lin.bias)[None], rtol=1e-6)
    assert seen == [(3, 2)]


def test_repr(dg):
    m = dg.nn.Sequential(dg.nn.Conv2d(1, 2, 3, padding=1), dg.nn.ReLU(), dg.nn.Flatten(), dg.nn.Linear(8, 2))
    assert repr(m) == ("Sequential(\n"
                       "  (0): Conv2d(1, 2, kernel_size=(3, 3), stride=(1, 1), padding=(1, 1))\n"
                       "  (1): ReLU()\n"
                       "  (2): Flatten(start_dim=1, end_dim=-1)\n"
                       "  (3): Linear(in_features=8, out_features=2, bias=True)\n"
                       ")")
    assert repr(dg.nn.LSTM(3, 4, num_layers=2)) == "LSTM(3, 4, num_layers=2)"
    assert repr(dg.nn.Parameter(dg.ones(1))).startswith("Parameter containing:\ntensor([1.]")


def test_containers(dg):
    nn = dg.nn
    seq = nn.Sequential(nn.Linear(2, 3), nn.Tanh(), nn.Linear(3, 1))
    assert len(seq) == 3 and isinstance(seq[-1], nn.Linear) and isinstance(seq[1:], nn.Sequential)
    assert len(seq[1:]) == 2
    seq.append(nn.Sigmoid())
    assert seq(dg.ones(4, 2)).shape == (4, 1)
    with pytest.raises(IndexError, match="out of range"):
        seq[7]
    ml = nn.ModuleList()
    ml.append(nn.Linear(1, 1))
    ml.extend([nn.Linear(1, 1)])
    ml.insert(0, nn.Linear(1, 2))
    assert [m.out_features for m in ml] == [2, 1, 1]
    assert [n for n, _ in ml.named_parameters()][:2] == ["0.weight", "0.bias"]
    md = nn.ModuleDict({"x": nn.Linear(1, 1)})
    md["y"] = nn.ReLU()
    assert list(md.keys()) == ["x", "y"] and "y" in md and len(md) == 2


# ----- layers against torch -------------------------------------------------------------------------------
def test_layers_match_torch(dg):
    torch = pytest.importorskip("torch")
    dg.manual_seed(0)
    x4 = rand64(dg, 2, 3, 6, 6)
    x2 = rand64(dg, 5, 4)
    cases = [
        (dg.nn.Linear(4, 3), torch.nn.Linear(4, 3), x2),
        (dg.nn.Conv2d(3, 4, 3, stride=2, padding=1), torch.nn.Conv2d(3, 4, 3, stride=2, padding=1), x4),
        (dg.nn.Conv2d(3, 2, (2, 3), bias=False), torch.nn.Conv2d(3, 2, (2, 3), bias=False), x4),
        (dg.nn.MaxPool2d(2), torch.nn.MaxPool2d(2), x4),
        (dg.nn.AvgPool2d(3, stride=2, padding=1), torch.nn.AvgPool2d(3, stride=2, padding=1), x4),
        (dg.nn.Flatten(), torch.nn.Flatten(), x4),
        (dg.nn.LayerNorm(4), torch.nn.LayerNorm(4), x2),
        (dg.nn.LayerNorm((6, 6)), torch.nn.LayerNorm((6, 6)), x4),
        (dg.nn.GELU(), torch.nn.GELU(), x2),
        (dg.nn.LeakyReLU(0.2), torch.nn.LeakyReLU(0.2), x2),
        (dg.nn.Softplus(beta=2.0), torch.nn.Softplus(beta=2.0), x2),
        (dg.nn.LogSoftmax(dim=1), torch.nn.LogSoftmax(dim=1), x2),
        (dg.nn.SiLU(), torch.nn.SiLU(), x2),
    ]
    for ours, theirs, x in cases:
        ours.double()
        to_torch(torch, ours, theirs)
        np.testing.assert_allclose(np_of(ours(x)), theirs(torch.tensor(np_of(x))).detach().numpy(),
                                   rtol=1e-10, atol=1e-12, err_msg=repr(ours))


def test_embedding(dg):
    torch = pytest.importorskip("torch")
    ours = dg.nn.Embedding(10, 3, padding_idx=0).double()
    assert float(ours.weight[0].abs().sum()) == 0
    theirs = to_torch(torch, ours, torch.nn.Embedding(10, 3, padding_idx=0))
    idx = [[1, 0, 9], [4, 4, 2]]
    out = ours(dg.tensor(idx))
    np.testing.assert_allclose(np_of(out), theirs(torch.tensor(idx)).detach().numpy())
    out.sum().backward()
    assert float(ours.weight.grad[0].abs().sum()) == 0 and float(ours.weight.grad[4].sum()) == 6


def test_batchnorm1d(dg):
    torch = pytest.importorskip("torch")
    for shape in [(8, 3), (4, 3, 5)]:
        ours = dg.nn.BatchNorm1d(3).double()
        theirs = to_torch(torch, ours, torch.nn.BatchNorm1d(3))
        assert list(ours.state_dict()) == list(theirs.state_dict())
        for seed in range(3):
            x = rand64(dg, *shape, seed=seed)
            np.testing.assert_allclose(np_of(ours(x)), theirs(torch.tensor(np_of(x))).detach().numpy(), rtol=1e-9,
                                       atol=1e-12)
        for name in ("running_mean", "running_var"):
            np.testing.assert_allclose(np_of(getattr(ours, name)), getattr(theirs, name).numpy(), rtol=1e-12)
        assert int(ours.num_batches_tracked) == 3
        ours.eval()
        theirs.eval()
        x = rand64(dg, *shape, seed=9)
        np.testing.assert_allclose(np_of(ours(x)), theirs(torch.tensor(np_of(x))).detach().numpy(), rtol=1e-9)
    with pytest.raises(RuntimeError, match="BatchNorm1d: expected input with 3 channels"):   # torch: RuntimeError
        dg.nn.BatchNorm1d(3)(dg.ones(2, 4))
    with pytest.raises(ValueError, match=r"BatchNorm1d: expected 2D or 3D input \(got 4D input\)"):
        dg.nn.BatchNorm1d(3)(dg.ones(2, 3, 1, 1))


@pytest.mark.parametrize("kind", ["RNN", "LSTM", "GRU"])
def test_rnns_match_torch(dg, kind):
    torch = pytest.importorskip("torch")
    dg.manual_seed(0)
    kw = dict(num_layers=2, bidirectional=True, batch_first=True)
    ours = getattr(dg.nn, kind)(3, 4, **kw).double()
    theirs = to_torch(torch, ours, getattr(torch.nn, kind)(3, 4, **kw))
    assert [(k, tuple(v.shape)) for k, v in ours.state_dict().items()] == \
           [(k, tuple(v.shape)) for k, v in theirs.state_dict().items()]
    x = rand64(dg, 2, 5, 3)
    out, state = ours(x)
    t_out, t_state = theirs(torch.tensor(np_of(x)))
    np.testing.assert_allclose(np_of(out), t_out.detach().numpy(), rtol=1e-9, atol=1e-12)
    states = state if kind == "LSTM" else (state,)
    t_states = t_state if kind == "LSTM" else (t_state,)
    for s, ts in zip(states, t_states):
        np.testing.assert_allclose(np_of(s), ts.detach().numpy(), rtol=1e-9, atol=1e-12)
    # variable lengths: a padded batch + lengths matches torch's packed sequences
    lengths = [5, 2]
    out, state = ours(x, lengths=lengths)
    packed = torch.nn.utils.rnn.pack_padded_sequence(torch.tensor(np_of(x)), lengths, batch_first=True)
    t_out, t_state = theirs(packed)
    t_out, _ = torch.nn.utils.rnn.pad_packed_sequence(t_out, batch_first=True)
    np.testing.assert_allclose(np_of(out), t_out.detach().numpy(), rtol=1e-9, atol=1e-12)
    t_states = t_state if kind == "LSTM" else (t_state,)
    for s, ts in zip(state if kind == "LSTM" else (state,), t_states):
        np.testing.assert_allclose(np_of(s), ts.detach().numpy(), rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("kind", ["RNNCell", "LSTMCell", "GRUCell"])
def test_cells_match_torch(dg, kind):
    torch = pytest.importorskip("torch")
    ours = getattr(dg.nn, kind)(3, 4).double()
    theirs = to_torch(torch, ours, getattr(torch.nn, kind)(3, 4))
    x, h = rand64(dg, 2, 3), rand64(dg, 2, 4, seed=1)
    hx = (h, h * 0.5) if kind == "LSTMCell" else h
    t_hx = tuple(torch.tensor(np_of(s)) for s in hx) if kind == "LSTMCell" else torch.tensor(np_of(h))
    out, t_out = ours(x, hx), theirs(torch.tensor(np_of(x)), t_hx)
    for a, b in zip(out if kind == "LSTMCell" else (out,), t_out if kind == "LSTMCell" else (t_out,)):
        np.testing.assert_allclose(np_of(a), b.detach().numpy(), rtol=1e-10, atol=1e-12)


def test_losses_match_torch(dg):
    torch = pytest.importorskip("torch")
    logits = rand64(dg, 6, 4)
    target = dg.tensor([0, 3, 1, 1, 2, 0])
    y = rand64(dg, 6, 4, seed=2)
    prob = dg.tensor(np.random.default_rng(3).uniform(size=(6, 4)))
    T = lambda t: torch.tensor(np_of(t))  # noqa: E731
    pairs = [
        (dg.nn.CrossEntropyLoss()(logits, target), torch.nn.CrossEntropyLoss()(T(logits), T(target))),
        (dg.nn.CrossEntropyLoss(reduction="sum", ignore_index=3)(logits, target),
         torch.nn.CrossEntropyLoss(reduction="sum", ignore_index=3)(T(logits), T(target))),
        (dg.nn.NLLLoss()(logits.log_softmax(1), target), torch.nn.NLLLoss()(T(logits).log_softmax(1), T(target))),
        (dg.nn.MSELoss()(logits, y), torch.nn.MSELoss()(T(logits), T(y))),
        (dg.nn.L1Loss(reduction="none")(logits, y), torch.nn.L1Loss(reduction="none")(T(logits), T(y))),
        (dg.nn.BCEWithLogitsLoss()(logits, prob), torch.nn.BCEWithLogitsLoss()(T(logits), T(prob))),
    ]
    if dg.__name__ == "dyngrad":       # the reference engine has no label_smoothing yet
        pairs.append((dg.nn.CrossEntropyLoss(label_smoothing=0.1)(logits, target),
                      torch.nn.CrossEntropyLoss(label_smoothing=0.1)(T(logits), T(target))))
    for ours, theirs in pairs:
        np.testing.assert_allclose(np_of(ours), theirs.numpy(), rtol=1e-10)
    with pytest.raises(ValueError, match="reduction must be"):       # torch checks it at the call, too
        dg.nn.MSELoss(reduction="avg")(logits, y)


# ----- gradients ------------------------------------------------------------------------------------------
def test_layer_gradients(dg):
    dg.manual_seed(0)
    x = rand64(dg, 2, 3).requires_grad_()
    gradcheck_module(dg, dg.nn.Linear(3, 2).double(), x)
    gradcheck_module(dg, dg.nn.LayerNorm(3).double(), x)
    gradcheck_module(dg, dg.nn.BatchNorm1d(3).double(), rand64(dg, 4, 3).requires_grad_())
    img = rand64(dg, 1, 2, 4, 4).requires_grad_()
    gradcheck_module(dg, dg.nn.Conv2d(2, 2, 3, padding=1).double(), img)
    gradcheck_module(dg, dg.nn.MaxPool2d(2), img)
    gradcheck_module(dg, dg.nn.AvgPool2d(2), img)
    gradcheck_module(dg, dg.nn.Embedding(5, 2).double(), dg.tensor([1, 3, 1]))


@pytest.mark.parametrize("kind", ["RNN", "LSTM", "GRU"])
def test_rnn_gradients(dg, kind):
    dg.manual_seed(0)
    rnn = getattr(dg.nn, kind)(2, 2, bidirectional=True).double()
    seqs = [rand64(dg, 3, 2, seed=1).requires_grad_(), rand64(dg, 1, 2, seed=2).requires_grad_()]
    params = list(rnn.parameters())

    def fn(a, b, *unused):
        out, _ = rnn([a, b])
        return dg.cat(out)

    assert dg.autograd.gradcheck(fn, tuple(seqs) + tuple(params), atol=1e-6, rtol=1e-4)


# ----- variable-length sequences --------------------------------------------------------------------------
@pytest.mark.parametrize("kind", ["RNN", "LSTM", "GRU"])
def test_variable_length_batch_equals_one_by_one(dg, kind):
    dg.manual_seed(0)
    rnn = getattr(dg.nn, kind)(3, 4, num_layers=2, bidirectional=True).double()
    lengths = [2, 5, 1, 5, 3]
    seqs = [rand64(dg, n, 3, seed=i) for i, n in enumerate(lengths)]
    outs, state = rnn(seqs)
    h_n = state[0] if kind == "LSTM" else state
    assert [tuple(o.shape) for o in outs] == [(n, 8) for n in lengths] and tuple(h_n.shape) == (4, 5, 4)
    for i, s in enumerate(seqs):
        out_i, state_i = rnn(s)                      # unbatched (L, input_size)
        np.testing.assert_allclose(np_of(outs[i]), np_of(out_i), rtol=1e-10, atol=1e-12)
        h_i = state_i[0] if kind == "LSTM" else state_i
        np.testing.assert_allclose(np_of(h_n[:, i]), np_of(h_i), rtol=1e-10, atol=1e-12)
    # padded + lengths gives the same numbers, zeros at the padding
    padded = np.zeros((5, len(lengths), 3))
    for i, s in enumerate(seqs):
        padded[:lengths[i], i] = np_of(s)
    out, _ = rnn(dg.tensor(padded), lengths=lengths)
    for i, n in enumerate(lengths):
        np.testing.assert_allclose(np_of(out[:n, i]), np_of(outs[i]), rtol=1e-10, atol=1e-12)
        assert not np_of(out[n:, i]).any()
    # the gradient reaches every sequence
    sum(o.sum() for o in outs).backward()
    assert all(p.grad is not None for p in rnn.parameters())
    with pytest.raises(ValueError, match="lengths must hold 5 values"):
        rnn(dg.tensor(padded), lengths=[5, 6, 1, 1, 1])
    with pytest.raises(ValueError, match=r"sequence 1 must be a non-empty \(L_i, 3\) tensor"):
        rnn([seqs[0], dg.ones(2, 4, dtype=dg.float64)])


def test_rnn_initial_state_and_errors(dg):
    lstm = dg.nn.LSTM(2, 3, batch_first=True)
    x = dg.randn(4, 5, 2)
    h0, c0 = dg.randn(1, 4, 3), dg.randn(1, 4, 3)
    out, (h, c) = lstm(x, (h0, c0))
    assert out.shape == (4, 5, 3) and h.shape == (1, 4, 3)
    np.testing.assert_allclose(np_of(out[:, -1]), np_of(h[0]), rtol=1e-6)
    with pytest.raises(RuntimeError, match=r"Expected hidden\[0\] size \(1, 4, 3\), got \[1, 2, 3\]"):
        lstm(x, (dg.randn(1, 2, 3), c0))
    with pytest.raises(RuntimeError, match=r"input.size\(-1\) must be equal to input_size. Expected 2, got 7"):
        lstm(dg.randn(4, 5, 7))


# ----- init, dropout, clipping, functional ----------------------------------------------------------------
def test_init(dg):
    dg.manual_seed(0)
    init = dg.nn.init
    assert init.calculate_gain("relu") == pytest.approx(math.sqrt(2))
    assert init.calculate_gain("leaky_relu", 0.2) == pytest.approx(math.sqrt(2 / 1.04))
    assert init.calculate_gain("tanh") == pytest.approx(5 / 3)
    w = dg.empty(300, 200)
    init.xavier_uniform_(w)
    bound = math.sqrt(6 / 500)
    assert float(w.abs().max()) <= bound and float(w.abs().max()) > 0.9 * bound
    init.kaiming_normal_(w, nonlinearity="relu")
    assert float(w.std()) == pytest.approx(math.sqrt(2 / 200), rel=0.05)
    init.kaiming_uniform_(w, mode="fan_out")
    assert float(w.std()) == pytest.approx(math.sqrt(2 / (1 + 0.0)) / math.sqrt(300), rel=0.05)
    init.xavier_normal_(w, gain=2.0)
    assert float(w.std()) == pytest.approx(2 * math.sqrt(2 / 500), rel=0.05)
    init.zeros_(w)
    assert float(w.abs().sum()) == 0
    init.constant_(w, 0.5)
    assert float(w.mean()) == 0.5
    with pytest.raises(ValueError, match="fewer than 2 dimensions"):
        init.xavier_uniform_(dg.empty(3))
    # torch's default Linear init: U(-1/sqrt(fan_in), 1/sqrt(fan_in)) for weight and bias
    lin = dg.nn.Linear(400, 300)
    b = 1 / math.sqrt(400)
    assert b * 0.95 < float(lin.weight.abs().max()) <= b and float(lin.bias.abs().max()) <= b
    p = dg.nn.Parameter(dg.ones(3))
    init.normal_(p)
    assert p.is_leaf and p.grad_fn is None


def test_dropout_module(dg):
    dg.manual_seed(0)
    drop = dg.nn.Dropout(0.5)
    x = dg.ones(1000)
    y = drop(x)
    kept = np_of(y) != 0
    assert 0.4 < kept.mean() < 0.6 and np.allclose(np_of(y)[kept], 2.0)
    drop.eval()
    assert np.array_equal(np_of(drop(x)), np_of(x))
    with pytest.raises(ValueError, match="between 0 and 1"):
        dg.nn.Dropout(1.5)


def test_clip_grad_norm(dg):
    a = dg.nn.Parameter(dg.zeros(2))
    b = dg.nn.Parameter(dg.zeros(1))
    a.grad = dg.tensor([3.0, 0.0])
    b.grad = dg.tensor([4.0])
    total = dg.nn.utils.clip_grad_norm_([a, b], max_norm=1.0)
    assert float(total) == pytest.approx(5.0)
    assert a.grad.tolist() == pytest.approx([0.6, 0.0], rel=1e-5) and b.grad.tolist() == pytest.approx([0.8], rel=1e-5)
    total = dg.nn.utils.clip_grad_norm_([a, b], max_norm=10.0)
    assert float(total) == pytest.approx(1.0, rel=1e-5) and b.grad.tolist() == pytest.approx([0.8], rel=1e-5)
    assert float(dg.nn.utils.clip_grad_norm_([a, b], 0.4, norm_type=math.inf)) == pytest.approx(0.8, rel=1e-5)
    dg.nn.utils.clip_grad_value_([a, b], 0.1)
    assert b.grad.tolist() == pytest.approx([0.1])
    v = dg.nn.utils.parameters_to_vector([a, b])
    assert tuple(v.shape) == (3,)
    dg.nn.utils.vector_to_parameters(dg.tensor([1.0, 2.0, 3.0]), [a, b])
    assert a.tolist() == [1.0, 2.0] and b.tolist() == [3.0]


def test_functional_exports(dg):
    F = dg.nn.functional
    for name in ("softmax log_softmax cross_entropy nll_loss mse_loss binary_cross_entropy_with_logits linear "
                 "embedding dropout one_hot conv2d max_pool2d avg_pool2d layer_norm relu leaky_relu gelu softplus "
                 "sigmoid tanh").split():
        assert callable(getattr(F, name)), name
    x = dg.tensor([[3.0, 4.0]])
    assert F.normalize(x).tolist()[0] == pytest.approx([0.6, 0.8])
    assert float(F.smooth_l1_loss(dg.tensor([0.0, 3.0]), dg.tensor([0.5, 0.0]))) == pytest.approx((0.125 + 2.5) / 2)


def test_shared_classes_are_per_engine():
    import dyngrad
    import dyngrad.reference
    assert dyngrad.nn.Module is not dyngrad.reference.nn.Module
    assert issubclass(dyngrad.reference.nn.Parameter, dyngrad.reference.Tensor)
    assert issubclass(dyngrad.nn.Parameter, dyngrad.Tensor)
    assert isinstance(dyngrad.reference.nn.Linear(1, 1).weight, dyngrad.reference.Tensor)


def _torch_layout():
    """(file, class name) of every public class of torch.nn.modules.<file> (its private files aside): those the
    file defines or lists in its __all__, not the ones it merely imports for its own use."""
    import inspect
    import pkgutil
    torch_modules = pytest.importorskip("torch.nn.modules")
    for info in pkgutil.iter_modules(torch_modules.__path__):
        if info.name.startswith("_"):
            continue
        module = importlib.import_module(f"torch.nn.modules.{info.name}")
        exported = set(getattr(module, "__all__", ()))
        for name, obj in vars(module).items():
            if inspect.isclass(obj) and not name.startswith("_") and (
                    obj.__module__ == module.__name__ or name in exported):
                yield info.name, name


def test_modules_paths_are_torchs(dg):
    """A class dyngrad has at nn.<Class> is also at nn.modules.<file>.<Class> wherever torch has it at
    torch.nn.modules.<file>.<Class> (scripts write torch.nn.modules.rnn.LSTM, .linear.Linear, .sparse.Embedding)."""
    layout = list(_torch_layout())
    missing, checked = [], 0
    for file, name in layout:
        if not hasattr(dg.nn, name):
            continue
        checked += 1
        try:
            module = importlib.import_module(f"{dg.__name__}.nn.modules.{file}")
        except ImportError:
            missing.append(f"nn.modules.{file} (for {name})")
            continue
        if getattr(module, name, None) is not getattr(dg.nn, name):
            missing.append(f"nn.modules.{file}.{name}")
    assert checked > 150
    assert not missing, f"not where torch has them: {missing}"


def test_layers_are_defined_once(dg):
    """Each layer class is defined in one file of nn/modules/ and reached from there under every name: nn.X,
    nn.modules.X and nn.modules.<file>.X are one class (NonDynamicallyQuantizableLinear: a Linear, as torch's)."""
    for name in dg.nn.modules.__all__:
        cls = getattr(dg.nn.modules, name)
        assert cls is getattr(dg.nn, name)
        assert cls.__module__.startswith(f"{dg.__name__}.nn.modules."), (name, cls.__module__)
        assert getattr(importlib.import_module(cls.__module__), name) is cls
    quantizable = dg.nn.modules.linear.NonDynamicallyQuantizableLinear
    assert issubclass(quantizable, dg.nn.Linear) and not hasattr(dg.nn, "NonDynamicallyQuantizableLinear")
    assert dg.nn.modules.lazy.LazyModuleMixin is type(dg.nn.LazyLinear(3)).__mro__[1]
