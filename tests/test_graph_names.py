"""What the graph shows, as torch shows it (issue 14): the grad_fn names of composite ops (Note [Display names] in
csrc/dyngrad/node.h), the inputs a number on the left of an operator is recorded with, grad_fn._saved_<name>, and
the in-place method variants (including the in-place view ops). torch 2.13 is the oracle where installed."""
import numpy as np
import pytest


def node_name(node):
    """torch's names carry an overload digit (MulBackward0) and a namespace (torch::autograd::AccumulateGrad)."""
    return None if node is None else node.name().replace("torch::autograd::", "").rstrip("0123456789")


def graph_names(out):
    node = out.grad_fn
    return node_name(node), tuple(node_name(n) for n, _ in node.next_functions)


def inputs(m):
    rng = np.random.default_rng(0)
    x = m.tensor(rng.standard_normal((3, 4)), requires_grad=True)
    y = m.tensor(rng.standard_normal((3, 4)))
    w = m.tensor(rng.standard_normal((5, 4)), requires_grad=True)
    b = m.tensor(rng.standard_normal(5), requires_grad=True)
    return x, y, w, b, m.tensor([0, 2, 1])


def F(m):
    return m.nn.functional


# the op, called the same way on both libraries; torch's node name and next_functions are the expectation
COMPOSITES = {
    "mse_loss": lambda m, x, y, w, b, i: F(m).mse_loss(x, y),
    "mse_loss_none": lambda m, x, y, w, b, i: F(m).mse_loss(x, y, reduction="none"),
    "smooth_l1_loss": lambda m, x, y, w, b, i: F(m).smooth_l1_loss(x, y),
    "bce_with_logits": lambda m, x, y, w, b, i: F(m).binary_cross_entropy_with_logits(x, y.sigmoid()),
    "nll_loss": lambda m, x, y, w, b, i: F(m).nll_loss(x, i),
    "linear": lambda m, x, y, w, b, i: F(m).linear(x, w, b),
    "linear_no_bias": lambda m, x, y, w, b, i: F(m).linear(x, w),
    "embedding": lambda m, x, y, w, b, i: F(m).embedding(i, w),
    "addcmul": lambda m, x, y, w, b, i: m.addcmul(x, x, y),
    "gelu_tanh": lambda m, x, y, w, b, i: F(m).gelu(x, approximate="tanh"),
    "silu": lambda m, x, y, w, b, i: F(m).silu(x), "relu6": lambda m, x, y, w, b, i: F(m).relu6(x),
    "square": lambda m, x, y, w, b, i: x.square(), "var": lambda m, x, y, w, b, i: x.var(),
    "std": lambda m, x, y, w, b, i: x.std(1), "max_dim": lambda m, x, y, w, b, i: x.max(1)[0],
    "max": lambda m, x, y, w, b, i: x.max(), "min_dim": lambda m, x, y, w, b, i: x.min(1).values,
    "masked_fill": lambda m, x, y, w, b, i: x.masked_fill(y > 0, 0.0),
    "t": lambda m, x, y, w, b, i: x.t(), "transpose": lambda m, x, y, w, b, i: x.transpose(0, 1),
    "mT": lambda m, x, y, w, b, i: x.mT, "unsqueeze": lambda m, x, y, w, b, i: x.unsqueeze(0),
    "squeeze": lambda m, x, y, w, b, i: x[None].squeeze(0), "view": lambda m, x, y, w, b, i: x.view(12),
    "stack": lambda m, x, y, w, b, i: m.stack([x, x]), "split": lambda m, x, y, w, b, i: x.split(2)[0],
    "chunk": lambda m, x, y, w, b, i: x.chunk(2)[1], "unbind": lambda m, x, y, w, b, i: x.unbind()[0],
    "select": lambda m, x, y, w, b, i: x.select(0, 1), "to_float": lambda m, x, y, w, b, i: x.float(),
    "type_as": lambda m, x, y, w, b, i: x.type_as(y.float()), "mm": lambda m, x, y, w, b, i: m.mm(x, w.T),
    "bmm": lambda m, x, y, w, b, i: m.bmm(x[None], w.T[None]),
    "scatter_add": lambda m, x, y, w, b, i: x.scatter_add(1, i[:, None], y),
    "clamp_tensor": lambda m, x, y, w, b, i: x.clamp(min=y),
    # number on the left of an operator: the tensor is recorded first (torch's order)
    "rmul": lambda m, x, y, w, b, i: 2 * x, "radd": lambda m, x, y, w, b, i: 2.5 + x,
    "rdiv": lambda m, x, y, w, b, i: 2 / x, "rsub_name": lambda m, x, y, w, b, i: 1 - x,
    "mul": lambda m, x, y, w, b, i: x * 2, "sub": lambda m, x, y, w, b, i: x - 2,
}
# where the next_functions cannot follow torch's: the node is a renamed primitive (the last op inside the
# composite), whose inputs differ from the op torch records
NAME_ONLY = {"mse_loss", "mse_loss_none", "smooth_l1_loss", "bce_with_logits", "nll_loss", "linear", "embedding",
             "addcmul", "gelu_tanh", "silu", "square", "var", "std", "max_dim", "min_dim", "masked_fill", "split",
             "chunk", "unbind", "select", "scatter_add", "clamp_tensor", "rsub_name", "stack", "squeeze", "bmm",
             "linear_no_bias", "relu6"}


@pytest.mark.parametrize("name", sorted(COMPOSITES))
def test_node_names_as_torch(dg, name):
    torch = pytest.importorskip("torch")
    ours = graph_names(COMPOSITES[name](dg, *inputs(dg)))
    theirs = graph_names(COMPOSITES[name](torch, *inputs(torch)))
    if name in NAME_ONLY:
        assert ours[0] == theirs[0]
    else:
        assert ours == theirs


def test_reflected_operators_match_torch_values(dg):
    torch = pytest.importorskip("torch")
    v = np.random.default_rng(1).uniform(0.5, 2.0, size=(50,)).astype(np.float32)
    for op in (lambda a: 2 * a, lambda a: 2.5 + a, lambda a: 3 / a, lambda a: 1 - a, lambda a: 7 / a):
        ours = op(dg.tensor(v, requires_grad=True))
        theirs = op(torch.tensor(v, requires_grad=True))
        assert np.array_equal(ours.detach().numpy(), theirs.detach().numpy())    # bitwise: torch's formula
        ours.sum().backward()
    ints = dg.tensor([1, 2, 4])
    assert (3 / ints).dtype is dg.float32 and np.array_equal((3 / ints).numpy(), (3 / torch.tensor([1, 2, 4])).numpy())


def test_renaming_touches_only_new_nodes(dg):
    x = dg.ones(3, requires_grad=True) * 2
    assert x.t().grad_fn is x.grad_fn and x.grad_fn.name() == "MulBackward"    # t() of 1-D returns x itself
    assert F(dg).dropout(x, 0.5, training=False).grad_fn.name() == "MulBackward"
    y = dg.ones(2, 3)
    assert F(dg).mse_loss(y, y).grad_fn is None
    with dg.no_grad():
        assert F(dg).mse_loss(x, x).grad_fn is None
    assert dg.clamp(x, -1.0, 1.0).grad_fn.name() == "ClampBackward"
    loss = F(dg).mse_loss(x, dg.zeros(3))
    assert "grad_fn=<MseLossBackward>" in repr(loss)
    g = F(dg).gelu(x, approximate="tanh")
    g.sum().backward()
    with pytest.raises(RuntimeError, match="reached GeluBackward"):   # errors name the node as shown
        g.sum().backward()


SAVED = [
    ("mul", lambda m, x, y: x * y, {"_saved_self": "x", "_saved_other": "y"}),
    ("div", lambda m, x, y: x / y, {"_saved_self": "x", "_saved_other": "y"}),
    ("exp", lambda m, x, y: x.exp(), {"_saved_result": "out"}),
    ("tanh", lambda m, x, y: x.tanh(), {"_saved_result": "out"}),
    ("log", lambda m, x, y: x.abs().log(), {}),
    ("pow", lambda m, x, y: x.pow(y), {"_saved_self": "x", "_saved_exponent": "y", "_saved_result": "out"}),
    ("pow_scalar", lambda m, x, y: x ** 3, {"_saved_exponent": 3.0}),
    ("sum", lambda m, x, y: x.sum(1, keepdim=True), {"_saved_dim": (1,), "_saved_keepdim": True}),
    ("softmax", lambda m, x, y: x.softmax(1), {"_saved_dim": 1, "_saved_result": "out"}),
    ("clamp", lambda m, x, y: x.clamp(-0.5, 0.5), {"_saved_min": -0.5, "_saved_max": 0.5}),
    ("leaky_relu", lambda m, x, y: F(m).leaky_relu(x, 0.2), {"_saved_negative_slope": 0.2}),
    ("permute", lambda m, x, y: x.permute(1, 0), {"_saved_dims": (1, 0)}),
]


@pytest.mark.parametrize("name,fn,expect", SAVED, ids=[s[0] for s in SAVED])
def test_saved_attributes_as_torch(dg, name, fn, expect):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(2)
    a, c = rng.uniform(0.5, 1.5, size=(2, 3)), rng.uniform(0.5, 1.5, size=(2, 3))
    for m in (dg, torch):
        x, y = m.tensor(a, requires_grad=True), m.tensor(c, requires_grad=True)
        out = fn(m, x, y)
        values = {"x": x, "y": y, "out": out}
        for attr, want in expect.items():
            got = getattr(out.grad_fn, attr)
            if isinstance(want, str):
                assert np.allclose(np.asarray(got.detach()), np.asarray(values[want].detach())), (m.__name__, attr)
            elif isinstance(want, float):
                assert float(got) == pytest.approx(want), (m.__name__, attr)
            else:
                assert tuple(got) == want if isinstance(want, tuple) else got == want, (m.__name__, attr)


def test_saved_attribute_errors(dg):
    x = dg.ones(2, requires_grad=True)
    out = x * x
    with pytest.raises(AttributeError, match=r"MulBackward has no attribute '_saved_bogus' \(it saved: "
                                             r"_saved_self, _saved_other\)"):
        out.grad_fn._saved_bogus
    with pytest.raises(AttributeError):
        out.grad_fn.no_such_thing
    out.sum().backward()
    with pytest.raises(RuntimeError, match="backward\\(\\) reached MulBackward, whose saved tensors were already "
                                           "freed"):
        out.grad_fn._saved_self
    loss = F(dg).mse_loss(x, dg.zeros(2))
    with pytest.raises(AttributeError, match="last primitive inside a composite"):
        loss.grad_fn._saved_self


# ----- in-place variants -----------------------------------------------------------------------------------------

def test_inplace_variants_exist_for_our_ops(dg):
    torch = pytest.importorskip("torch")
    ours = set(dir(dg.Tensor))
    missing = [n for n in dir(torch.Tensor) if n.endswith("_") and not n.startswith("_") and n not in ours and
               n[:-1] in ours and not n[:-1].startswith("_")]
    assert not missing, f"torch has these in-place variants of methods dyngrad has: {missing}"


INPLACE = [
    ("eq_", lambda t, o: t.eq_(o)), ("ne_", lambda t, o: t.ne_(o)), ("lt_", lambda t, o: t.lt_(0.1)),
    ("le_", lambda t, o: t.le_(o)), ("gt_", lambda t, o: t.gt_(o)), ("ge_", lambda t, o: t.ge_(0.0)),
    ("logical_and_", lambda t, o: t.logical_and_(o)), ("logical_or_", lambda t, o: t.logical_or_(o)),
    ("logical_xor_", lambda t, o: t.logical_xor_(o)), ("logical_not_", lambda t, o: t.logical_not_()),
]
# torch records the comparisons' in-place forms with a zero gradient (EqBackward); the logical ones keep the old
# history on the new value (torch's behaviour, mirrored)


@pytest.mark.parametrize("name,call", INPLACE, ids=[n for n, _ in INPLACE])
def test_comparison_inplace_as_torch(dg, name, call):
    torch = pytest.importorskip("torch")
    a = np.array([[0.0, 1.0, -2.0], [0.5, 0.0, 3.0]])
    o = np.array([[0.0, 2.0, -2.0], [0.5, 1.0, 0.0]])
    for dtype in ("float64", "int64", "bool"):
        outs = []
        for m in (dg, torch):
            t = m.tensor(a.astype(dtype))
            r = call(t, m.tensor(o.astype(dtype)))
            assert r is t
            outs.append((str(t.dtype).split(".")[1], t.tolist()))
        assert outs[0] == outs[1], (dtype, outs)
    # over a value with history: the gradient torch gives, and its node name
    grads, names = [], []
    for m in (dg, torch):
        x = m.tensor(a, requires_grad=True)
        y = x * 1
        call(y, m.tensor(o))
        (y * 3).sum().backward()
        grads.append(np.asarray(x.grad))
        names.append(node_name(y.grad_fn))
    assert np.array_equal(grads[0], grads[1]) and names[0] == names[1]


def test_bernoulli_inplace(dg):
    dg.manual_seed(0)
    t = dg.zeros(1000)
    assert t.bernoulli_() is t and t.dtype is dg.float32 and 400 < float(t.sum()) < 600
    assert set(t.tolist()) <= {0.0, 1.0}
    assert set(dg.zeros(50, dtype=dg.int64).bernoulli_(0.5).tolist()) <= {0, 1}
    assert float(dg.zeros(100).bernoulli_(dg.ones(100)).sum()) == 100
    assert dg.zeros(5, dtype=dg.bool).bernoulli_(1.0).tolist() == [True] * 5


VIEW_INPLACE = [
    ("unsqueeze_", lambda t: t.unsqueeze_(1)), ("unsqueeze_neg", lambda t: t.unsqueeze_(-1)),
    ("squeeze_", lambda t: t.unsqueeze(0).squeeze_()), ("squeeze_dim", lambda t: t.unsqueeze(0).squeeze_(0)),
    ("t_", lambda t: t.t_()), ("transpose_", lambda t: t.transpose_(0, 1)),
    ("swapaxes_", lambda t: t.swapaxes_(1, 0)),
]


@pytest.mark.parametrize("name,call", VIEW_INPLACE, ids=[n for n, _ in VIEW_INPLACE])
def test_view_inplace_as_torch(dg, name, call):
    torch = pytest.importorskip("torch")
    a = np.arange(6.0).reshape(2, 3)
    results = []
    for m in (dg, torch):
        t = m.tensor(a)
        v0 = t._version
        r = call(t)
        results.append((tuple(r.shape), r.stride(), r.tolist(), r.is_contiguous()))
        if r is t or name in ("unsqueeze_", "unsqueeze_neg", "t_", "transpose_", "swapaxes_"):
            assert r is t and t._version > v0
        # the memory stays: writing through the result changes the original's storage
        x = m.tensor(a, requires_grad=True)
        y = x * 2
        r = call(y)
        assert node_name(r.grad_fn) is not None
        (r * m.tensor(np.arange(r.numel(), dtype=np.float64).reshape(tuple(r.shape)))).sum().backward()
        results.append(x.grad.tolist())
    assert results[0] == results[2] and results[1] == results[3]


def test_view_inplace_history_and_leaves(dg):
    x = dg.ones(2, 3, requires_grad=True)
    with pytest.raises(RuntimeError, match="leaf tensor that requires grad is being used in an in-place"):
        x.t_()
    with dg.no_grad():
        x.t_()
    assert x.shape == (3, 2) and x.is_leaf
    y = x * 1
    y.unsqueeze_(0)
    assert y.grad_fn.name() == "UnsqueezeBackward" and y.grad_fn.next_functions[0][0].name() == "MulBackward"
    plain = dg.arange(6.0).reshape(2, 3)
    ptr = plain.data_ptr()
    plain.t_()
    assert plain.data_ptr() == ptr and plain.stride() == (1, 3) and plain.tolist() == [[0, 3], [1, 4], [2, 5]]
