"""The meta device (Note [Meta tensors] in python/dyngrad/_api/meta.py), on both engines: factories and module
constructors with device="meta" and under `with dg.device("meta")`, shapes, dtypes and strides through ops without
memory, the errors where values are needed, printing as torch, Module.to_empty and load_state_dict(assign=True) (the
tutorial idiom: build on meta, give memory, load, run, equal to the eager model), and torch as the oracle of shapes."""
import copy
import warnings

import numpy as np
import pytest


def _live_meta(dg):
    return dg.empty(2, device="meta")


def test_factories_make_meta_tensors(dg):
    for make in (lambda: dg.zeros(2, 3, device="meta"), lambda: dg.ones((2, 3), device="meta"),
                 lambda: dg.empty(2, 3, device=dg.device("meta")), lambda: dg.randn(2, 3, device="meta"),
                 lambda: dg.rand(2, 3, device="meta"), lambda: dg.full((2, 3), 1.5, device="meta")):
        t = make()
        assert t.is_meta and t.device == dg.device("meta") and not t.is_cpu
        assert tuple(t.shape) == (2, 3) and t.dtype == dg.float32 and t.stride() == (3, 1)
        assert t.is_contiguous() and t.numel() == 6 and t.dim() == 2
    assert dg.full((2,), 3, device="meta").dtype == dg.int64
    assert dg.randint(0, 5, (4,), device="meta").dtype == dg.int64
    assert tuple(dg.randperm(7, device="meta").shape) == (7,)
    assert dg.empty_strided((2, 3), (1, 2), device="meta").stride() == (1, 2)
    assert dg.zeros(2, dtype=dg.float64, device="meta").dtype == dg.float64
    assert dg.zeros(2, device="meta", requires_grad=True).requires_grad
    t = dg.tensor([[1.0, 2.0]], device="meta")
    assert t.is_meta and tuple(t.shape) == (1, 2)
    assert tuple(dg.arange(5, device="meta").shape) == (5,) and dg.eye(3, device="meta").is_meta


def test_like_and_new_follow_the_input(dg):
    m = dg.zeros(2, 3, dtype=dg.float64, device="meta")
    for t in (dg.zeros_like(m), dg.empty_like(m), dg.ones_like(m), dg.randn_like(m), dg.full_like(m, 2.0),
              m.new_zeros(4), m.new_empty((4, 1)), m.new_ones(4), m.new_full((4,), 1.0)):
        assert t.is_meta and t.dtype == dg.float64
    c = dg.empty_like(m, device="cpu")
    assert not c.is_meta and tuple(c.shape) == (2, 3) and c.dtype == dg.float64
    assert not dg.zeros_like(dg.ones(2)).is_meta
    cpu = dg.ones(2, 3).to("meta")
    assert cpu.is_meta and tuple(cpu.shape) == (2, 3)


def test_default_device_context(dg):
    with dg.device("meta"):
        assert dg.get_default_device() == dg.device("meta")
        t = dg.zeros(4)
        lin = dg.nn.Linear(3, 2)
    assert t.is_meta and lin.weight.is_meta and lin.bias.is_meta
    assert dg.get_default_device() == dg.device("cpu") and not dg.zeros(1).is_meta
    dg.set_default_device("meta")
    try:
        assert dg.ones(2).is_meta
    finally:
        dg.set_default_device(None)
    assert not dg.ones(2).is_meta


def test_no_memory_for_a_huge_model(dg):
    # 100000 x 100000 float32 would be 40 GB: a meta Linear has only the shapes
    lin = dg.nn.Linear(100_000, 100_000, device="meta")
    assert tuple(lin.weight.shape) == (100_000, 100_000) and isinstance(lin.weight, dg.nn.Parameter)
    assert lin.weight.requires_grad and lin.weight.is_meta
    emb = dg.nn.Embedding(1_000_000, 4096, device="meta")
    out = emb(dg.zeros(2, 7, dtype=dg.int64, device="meta"))
    assert tuple(out.shape) == (2, 7, 4096) and out.is_meta
    y = lin(dg.empty(8, 100_000, device="meta"))
    assert tuple(y.shape) == (8, 100_000) and y.is_meta


# op on meta tensors -> compared with torch's meta shapes and dtypes
OPS = {
    "add": lambda m, a, b: a + b, "radd": lambda m, a, b: 2 + a, "mul_int": lambda m, a, b: a * 3,
    "div_int": lambda m, a, b: m.zeros(3, dtype=m.int64, device="meta") / 2,
    "cmp": lambda m, a, b: a > b, "where": lambda m, a, b: m.where(a > 0, a, b),
    "exp": lambda m, a, b: a.exp(), "relu": lambda m, a, b: m.nn.functional.relu(a),
    "gelu": lambda m, a, b: m.nn.functional.gelu(a), "softmax": lambda m, a, b: a.softmax(-1),
    "sum": lambda m, a, b: a.sum(), "sum_dim": lambda m, a, b: a.sum(1), "mean_keep": lambda m, a, b: a.mean(0, True),
    "amax": lambda m, a, b: a.amax((0, 2)), "max_dim": lambda m, a, b: a.max(dim=1).values,
    "argmax": lambda m, a, b: a.argmax(-1), "sum_int": lambda m, a, b: (a > 0).sum(),
    "var": lambda m, a, b: a.var(1, keepdim=True), "norm": lambda m, a, b: a.norm(dim=-1),
    "matmul": lambda m, a, b: a @ b.transpose(-1, -2), "bmm": lambda m, a, b: m.bmm(a, b.mT),
    "linear": lambda m, a, b: m.nn.functional.linear(a, m.empty(5, 4, device="meta")),
    "view": lambda m, a, b: a.view(10, -1), "reshape": lambda m, a, b: a.reshape(-1),
    "flatten": lambda m, a, b: a.flatten(1), "permute": lambda m, a, b: a.permute(2, 0, 1),
    "transpose": lambda m, a, b: a.transpose(0, 1), "unsqueeze": lambda m, a, b: a.unsqueeze(1),
    "getitem": lambda m, a, b: a[:, 1:, ::2], "select": lambda m, a, b: a[0],
    "expand": lambda m, a, b: a[:, :1].expand(2, 5, 4),
    "cat": lambda m, a, b: m.cat([a, b], 1), "stack": lambda m, a, b: m.stack([a, b]),
    "chunk": lambda m, a, b: a.chunk(2, dim=-1)[1], "split": lambda m, a, b: a.split(1, 1)[2],
    "layer_norm": lambda m, a, b: m.nn.functional.layer_norm(a, (4,)),
    "dropout": lambda m, a, b: m.nn.functional.dropout(a, 0.5),
    "to_double": lambda m, a, b: a.double(), "to_dtype": lambda m, a, b: a.to(m.float64),
    "contiguous": lambda m, a, b: a.transpose(0, 1).contiguous(), "clone": lambda m, a, b: a.clone(),
    "sdpa": lambda m, a, b: m.nn.functional.scaled_dot_product_attention(a, b, b),
    "cumsum": lambda m, a, b: a.cumsum(1), "topk": lambda m, a, b: a.topk(2).indices,
    "masked_fill": lambda m, a, b: a.masked_fill(b > 0, 0.0), "tril": lambda m, a, b: a.tril(),
    "embedding": lambda m, a, b: m.nn.functional.embedding(m.zeros(2, 3, dtype=m.int64, device="meta"),
                                                           m.empty(10, 4, device="meta")),
    "cross_entropy": lambda m, a, b: m.nn.functional.cross_entropy(
        a.reshape(-1, 4), m.zeros(10, dtype=m.int64, device="meta")),
    "pad": lambda m, a, b: m.nn.functional.pad(a, (1, 2)),
}


@pytest.mark.parametrize("name", list(OPS))
def test_ops_give_torchs_meta_shapes(dg, name):
    torch = pytest.importorskip("torch")
    results = []
    for m in (dg, torch):
        a = m.empty(2, 5, 4, device="meta")
        b = m.empty(2, 5, 4, device="meta")
        results.append(OPS[name](m, a, b))
    ours, theirs = results
    assert ours.is_meta, name
    assert tuple(ours.shape) == tuple(theirs.shape), name
    assert str(ours.dtype).split(".")[-1] == str(theirs.dtype).split(".")[-1], name


def test_strides_follow_views(dg):
    a = dg.empty(2, 3, 4, device="meta")
    assert a.transpose(0, 2).stride() == (1, 4, 12) and not a.transpose(0, 2).is_contiguous()
    assert a.permute(1, 2, 0).stride() == (4, 1, 12)
    assert a.transpose(0, 2).contiguous().stride() == (6, 2, 1)


def test_in_place_ops_keep_the_tensor(dg):
    a = dg.zeros(2, 3, device="meta")
    assert a.add_(1) is a and a.mul_(2.0) is a and a.uniform_() is a and a.fill_(3) is a and a.zero_() is a
    assert a.copy_(dg.ones(2, 3)) is a and a.normal_() is a
    a += 1
    assert a.is_meta and tuple(a.shape) == (2, 3)
    a[0] = 5.0
    assert a.unsqueeze_(0) is a and tuple(a.shape) == (1, 2, 3)
    assert a.requires_grad_() is a and a.requires_grad
    with pytest.raises(NotImplementedError, match=r"copy_.*meta tensor has no values"):
        dg.ones(2, 3).copy_(dg.zeros(2, 3, device="meta"))


def test_values_are_refused_naming_the_op(dg):
    a = dg.zeros(2, 3, device="meta")
    for call, what in ((lambda: a.item(), r"item\(\)"), (lambda: a.tolist(), r"tolist"),
                       (lambda: a.numpy(), r"numpy"), (lambda: float(a[0, 0]), r"float"),
                       (lambda: bool(a.sum() > 0), r"bool"), (lambda: np.asarray(a), r"__array__"),
                       (lambda: a.nonzero(), r"nonzero.*depends on the values"),
                       (lambda: a[a > 0], r"__getitem__.*depends on the values"),
                       (lambda: a.unique(), r"unique"), (lambda: dg.equal(a, a), r"equal"),
                       (lambda: a.cpu(), r"cpu"), (lambda: a.to("cpu"), r"cannot copy out of a meta tensor"),
                       (lambda: a.sum().backward(), r"backward")):
        with pytest.raises(NotImplementedError, match=what):
            call()
    with pytest.raises(NotImplementedError, match=r"Tensor\(t\): t is a meta tensor"):
        dg.Tensor(a)
    with pytest.raises(RuntimeError, match="same device"):
        a + dg.ones(2, 3)
    assert tuple(a[dg.tensor([1, 0, 1])].shape) == (3, 3)            # a cpu index into a meta tensor
    assert (a + dg.tensor(2.0)).is_meta                      # a 0-d cpu tensor mixes, as in torch
    with pytest.raises(RuntimeError, match="cannot be multiplied"):
        a @ a


def test_printing_as_torch(dg):
    torch = pytest.importorskip("torch")
    for make in (lambda m: m.zeros(2, 3, device="meta"), lambda m: m.zeros(4, dtype=m.int64, device="meta"),
                 lambda m: m.zeros(2, device="meta", requires_grad=True),
                 lambda m: m.nn.Parameter(m.zeros(2, 3, device="meta")),
                 lambda m: m.zeros((), dtype=m.float64, device="meta")):
        assert repr(make(dg)).replace("dyngrad", "torch") == repr(make(torch))


def test_parameters_buffers_and_deepcopy(dg):
    bn = dg.nn.BatchNorm1d(4, device="meta")
    assert all(t.is_meta for t in list(bn.parameters()) + list(bn.buffers()))
    enc = dg.nn.TransformerEncoder(dg.nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, device="meta"), 2)
    assert all(p.is_meta and isinstance(p, dg.nn.Parameter) for p in enc.parameters())
    clone = copy.deepcopy(enc)
    assert all(p.is_meta for p in clone.parameters())
    assert all(v.is_meta for v in enc.state_dict().values())
    assert "device='meta'" in repr(next(iter(enc.parameters())))


class _Net:
    """A small model of each engine: embedding, LSTM, layer norm, attention block, linear head."""

    @staticmethod
    def make(dg, **factory):
        nn = dg.nn

        class Net(nn.Module):
            def __init__(self, device=None):
                super().__init__()
                self.emb = nn.Embedding(11, 8, device=device)
                self.rnn = nn.LSTM(8, 8, batch_first=True, device=device)
                self.norm = nn.LayerNorm(8, device=device)
                self.block = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True, device=device)
                self.head = nn.Linear(8, 5, device=device)
                self.register_buffer("scale", dg.ones(5, device=device))

            def forward(self, idx):
                h, _ = self.rnn(self.emb(idx))
                return self.head(self.block(self.norm(h))) * self.scale
        return Net(**factory)


@pytest.mark.parametrize("how", ["device_kwarg", "context"])
def test_build_on_meta_to_empty_load_and_run(dg, how):
    dg.manual_seed(0)
    eager = _Net.make(dg)
    eager.eval()
    if how == "context":
        with dg.device("meta"):
            model = _Net.make(dg)
    else:
        model = _Net.make(dg, device="meta")
    params = list(model.parameters()) + list(model.buffers())
    assert params and all(t.is_meta for t in params)
    assert [k for k in model.state_dict()] == [k for k in eager.state_dict()]
    idx = dg.tensor([[1, 2, 3, 4], [5, 6, 7, 8]])
    out = model(idx.to("meta"))
    assert out.is_meta and tuple(out.shape) == (2, 4, 5)
    model.to_empty(device="cpu")
    assert not any(t.is_meta for t in list(model.parameters()) + list(model.buffers()))
    assert all(isinstance(p, dg.nn.Parameter) and p.requires_grad for p in model.parameters())
    model.load_state_dict(eager.state_dict())
    model.eval()
    np.testing.assert_array_equal(model(idx).detach().numpy(), eager(idx).detach().numpy())
    # and the model trains: gradients reach every parameter
    model(idx).sum().backward()
    assert all(p.grad is not None for p in model.parameters())


def test_load_state_dict_assign(dg):
    eager = dg.nn.Linear(3, 2)
    meta = dg.nn.Linear(3, 2, device="meta")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        meta.load_state_dict(eager.state_dict())                  # a no-op on meta, which torch warns about
    assert any("assign=True" in str(w.message) for w in caught) and meta.weight.is_meta
    meta.load_state_dict(eager.state_dict(), assign=True)
    assert not meta.weight.is_meta and isinstance(meta.weight, dg.nn.Parameter) and meta.weight.requires_grad
    x = dg.ones(4, 3)
    np.testing.assert_array_equal(meta(x).detach().numpy(), eager(x).detach().numpy())


def test_module_to_meta_and_back(dg):
    lin = dg.nn.Linear(3, 2)
    weight = lin.weight
    lin.to("meta")
    assert lin.weight.is_meta and lin.weight is not weight and tuple(lin.weight.shape) == (2, 3)
    with pytest.raises(NotImplementedError, match="to_empty"):
        lin.to("cpu")
    lin.to_empty(device="cpu")
    assert not lin.weight.is_meta
    with pytest.raises(RuntimeError, match="device 'cuda"):
        lin.to_empty(device="cuda")


def test_cpp_fast_paths_leave_meta_tensors_to_python(cpp):
    # the C++ fast paths of +, matmul, linear, sum, relu must not compute on a meta tensor's proxy
    a = cpp.empty(3, 4, device="meta")
    for out in (a + a, a * 2.0, a @ a.T, cpp.nn.functional.linear(a, a), a.sum(), cpp.relu(a), a[0], a.add_(1)):
        assert out.is_meta


def _gpt(dg):
    """A character-level GPT as the tutorials write it: a causal-mask buffer built by tril, q/k/v views and
    transposes, masked_fill with -inf, MultiheadAttention, a Conv1d, a GRU, dropout and module.apply(init)."""
    nn, F = dg.nn, dg.nn.functional

    class Block(nn.Module):
        def __init__(self, C, nh, T):
            super().__init__()
            self.c_attn, self.c_proj, self.nh = nn.Linear(C, 3 * C), nn.Linear(C, C), nh
            self.register_buffer("bias", dg.tril(dg.ones(T, T)).view(1, 1, T, T))

        def forward(self, x):
            B, T, C = x.size()
            q, k, v = (t.view(B, T, self.nh, C // self.nh).transpose(1, 2) for t in self.c_attn(x).split(C, dim=2))
            att = (q @ k.transpose(-2, -1)) * (1.0 / k.size(-1) ** 0.5)
            att = F.softmax(att.masked_fill(self.bias[:, :, :T, :T] == 0, float("-inf")), dim=-1)
            return self.c_proj((att @ v).transpose(1, 2).contiguous().view(B, T, C))

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.wte, self.wpe = nn.Embedding(20, 16), nn.Embedding(8, 16)
            self.h = nn.ModuleList([Block(16, 2, 8) for _ in range(2)])
            self.mha = nn.MultiheadAttention(16, 2, batch_first=True)
            self.conv, self.gru = nn.Conv1d(16, 16, 3, padding=1), nn.GRU(16, 16, batch_first=True)
            self.ln, self.head, self.drop = nn.LayerNorm(16), nn.Linear(16, 20, bias=False), nn.Dropout(0.1)
            self.apply(self._init)

        def _init(self, m):
            if isinstance(m, nn.Linear):
                nn.init.normal_(m.weight, 0.0, 0.02)
                if m.bias is not None:
                    nn.init.zeros_(m.bias)

        def forward(self, idx, targets):
            pos = dg.arange(0, idx.size(1), dtype=dg.long, device=idx.device).unsqueeze(0)
            x = self.drop(self.wte(idx) + self.wpe(pos))
            for block in self.h:
                x = x + block(x)
            x = x + self.mha(x, x, x, need_weights=False)[0]
            x = x + self.conv(x.transpose(1, 2)).transpose(1, 2)
            logits = self.head(self.ln(x + self.gru(x)[0]))
            return logits, F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))
    return GPT


def test_gpt_style_model_on_meta(dg):
    GPT = _gpt(dg)
    dg.manual_seed(0)
    eager = GPT().eval()
    with dg.device("meta"):
        model = GPT()
    assert all(t.is_meta for t in list(model.parameters()) + list(model.buffers()))
    idx = dg.randint(0, 20, (2, 8))
    logits, loss = model(idx.to("meta"), idx.to("meta"))
    assert logits.is_meta and tuple(logits.shape) == (2, 8, 20) and loss.is_meta and loss.ndim == 0
    model.to_empty(device="cpu")
    model.load_state_dict(eager.state_dict())
    model.eval()
    ours, theirs = model(idx, idx), eager(idx, idx)
    np.testing.assert_array_equal(ours[0].detach().numpy(), theirs[0].detach().numpy())
    assert ours[1].item() == theirs[1].item()
