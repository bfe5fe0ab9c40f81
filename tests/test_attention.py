"""The fused attention primitive (Note [Fused attention] in csrc/dyngrad/ops_nn.cpp): _C.attention and
_C.attention_backward against the composite formula (numpy here), torch, float64 finite differences and the other
engine; masks, causal, scale, dropout (Note [Dropout inside attention]), double backward, bad inputs."""
import math

import numpy as np
import pytest

import dyngrad
import dyngrad.reference
from dyngrad.reference import kernels as ref_kernels

try:
    import torch
except ImportError:  # pragma: no cover - torch is optional
    torch = None

needs_torch = pytest.mark.skipif(torch is None, reason="torch is not installed")


def F(m):
    return m.nn.functional


def np_attention(q, k, v, mask=None, causal=False, scale=None, keep=None):
    """The composite formula in float64 numpy: softmax(scale q k^T + mask) v, fully masked rows give zeros."""
    scale = 1 / math.sqrt(q.shape[-1]) if scale is None else scale
    s = np.matmul(q, np.swapaxes(k, -1, -2)) * scale
    if mask is not None:
        s = s + (np.where(mask, 0.0, -np.inf) if mask.dtype == bool else mask)
    if causal:
        s = s + np.where(np.tril(np.ones(s.shape[-2:], bool)), 0.0, -np.inf)
    m = s.max(-1, keepdims=True)
    dead = m == -np.inf
    e = np.exp(s - np.where(dead, 0, m))
    p = np.where(dead, 0.0, e / np.where(dead, 1, e.sum(-1, keepdims=True)))
    if keep is not None:
        p = p * keep
    return np.matmul(p, v)


def inputs(shape_q, shape_k, shape_v, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(s) for s in (shape_q, shape_k, shape_v)]


def node_name(t):
    return t.grad_fn.name() if t.grad_fn is not None else ""


CASES = [  # (q, k, v shapes, mask (numpy or None), causal, scale)
    ((2, 3, 5, 4), (2, 3, 7, 4), (2, 3, 7, 6), None, False, None),
    ((2, 3, 5, 4), (2, 3, 7, 4), (2, 3, 7, 6), None, False, 0.3),
    ((2, 3, 6, 4), (2, 3, 6, 4), (2, 3, 6, 4), None, True, None),
    ((2, 5, 4), (2, 3, 4), (2, 3, 2), None, True, None),             # fewer keys than queries
    ((3, 5, 4), (1, 7, 4), (1, 7, 6), None, False, None),            # broadcast batch of k, v
    ((2, 2, 3, 4), (2, 2, 5, 4), (2, 2, 5, 6),
     np.array([[1, 0, 1, 1, 0], [0, 0, 0, 0, 0], [1, 1, 1, 1, 1]], bool), False, None),   # a fully masked row
    ((2, 2, 3, 4), (2, 2, 5, 4), (2, 2, 5, 6), np.random.default_rng(3).standard_normal((2, 1, 3, 5)), False, 0.5),
    ((2, 70, 8), (2, 150, 8), (2, 150, 3), np.random.default_rng(4).standard_normal((150,)), False, None),  # blocks
    ((1, 130, 8), (1, 130, 8), (1, 130, 8), None, True, None),       # causal over several tiles and blocks
]


@pytest.mark.parametrize("case", range(len(CASES)))
def test_forward_and_gradients_match_the_composite(dg, case):
    sq, sk, sv, mask, causal, scale = CASES[case]
    q, k, v = inputs(sq, sk, sv, case)
    t = [dg.tensor(a, requires_grad=True) for a in (q, k, v)]
    m = dg.tensor(mask) if mask is not None else None
    out = F(dg).scaled_dot_product_attention(*t, attn_mask=m, is_causal=causal, scale=scale)
    assert "ScaledDotProductAttention" in node_name(out)
    want = np_attention(q, k, v, mask, causal, scale)
    np.testing.assert_allclose(out.detach().numpy(), want, rtol=1e-10, atol=1e-12)
    # gradients against the composite path of the same engine (a mask that requires grad takes it)
    w = np.random.default_rng(9).standard_normal(want.shape)
    (out * dg.tensor(w)).sum().backward()
    fused = [x.grad.numpy().copy() for x in t]
    t2 = [dg.tensor(a, requires_grad=True) for a in (q, k, v)]
    m2 = dg.tensor(np.where(mask, 0.0, -np.inf) if mask is not None and mask.dtype == bool else mask,
                   requires_grad=True) if mask is not None else None
    if m2 is None and not causal:   # no mask to force the composite: the fused path must agree with torch-free math
        m2 = dg.zeros(sq[-2], sk[-2], dtype=dg.float64, requires_grad=True)
    out2 = F(dg).scaled_dot_product_attention(*t2, attn_mask=m2, is_causal=causal if m2 is None else False,
                                              scale=scale) if not (causal and m2 is None) else None
    if out2 is None:   # causal without a mask: the composite through an explicit causal mask
        cm = dg.tensor(np.where(np.tril(np.ones((sq[-2], sk[-2]), bool)), 0.0, -np.inf), requires_grad=True)
        out2 = F(dg).scaled_dot_product_attention(*t2, attn_mask=cm, scale=scale)
    assert "ScaledDotProductAttention" not in node_name(out2)
    np.testing.assert_allclose(out2.detach().numpy(), want, rtol=1e-10, atol=1e-12)
    (out2 * dg.tensor(w)).sum().backward()
    for a, x in zip(fused, t2):
        np.testing.assert_allclose(a, x.grad.numpy(), rtol=1e-9, atol=1e-11)


@pytest.mark.parametrize("case", [0, 2, 4, 5])
def test_float32(dg, case):
    sq, sk, sv, mask, causal, scale = CASES[case]
    q, k, v = inputs(sq, sk, sv, case)
    t = [dg.tensor(a.astype(np.float32), requires_grad=True) for a in (q, k, v)]
    out = F(dg).scaled_dot_product_attention(*t, attn_mask=None if mask is None else dg.tensor(mask),
                                             is_causal=causal, scale=scale)
    assert out.dtype is dg.float32
    np.testing.assert_allclose(out.detach().numpy(), np_attention(q, k, v, mask, causal, scale), rtol=1e-4, atol=1e-5)
    out.sum().backward()
    assert all(x.grad.dtype is dg.float32 for x in t)


SMALL = [  # gradcheck-sized cases: (q, k, v shapes, mask, causal, scale)
    ((2, 3, 2), (2, 4, 2), (2, 4, 3), None, False, None),
    ((1, 4, 2), (1, 4, 2), (1, 4, 2), None, True, 0.7),
    ((3, 2, 2), (1, 3, 2), (1, 3, 2), None, False, None),
    ((1, 3, 2), (1, 3, 2), (1, 3, 2), np.array([[1, 0, 1], [0, 0, 0], [1, 1, 0]], bool), False, None),
    ((1, 2, 3, 2), (1, 2, 3, 2), (1, 2, 3, 2), np.random.default_rng(3).standard_normal((2, 1, 3)), False, 0.5),
]


@pytest.mark.parametrize("case", range(len(SMALL)))
def test_gradcheck_and_gradgradcheck(dg, case):
    sq, sk, sv, mask, causal, scale = SMALL[case]
    q, k, v = inputs(sq, sk, sv, case)
    t = [dg.tensor(a, requires_grad=True) for a in (q, k, v)]
    m = dg.tensor(mask) if mask is not None else None

    def fn(a, b, c):
        return F(dg).scaled_dot_product_attention(a, b, c, attn_mask=m, is_causal=causal, scale=scale)
    assert dg.autograd.gradcheck(fn, t)
    assert dg.autograd.gradgradcheck(fn, t)


def test_double_backward_records_the_fused_backward(dg):
    q, k, v = inputs((2, 4, 3), (2, 5, 3), (2, 5, 2))
    t = [dg.tensor(a, requires_grad=True) for a in (q, k, v)]
    out = F(dg).scaled_dot_product_attention(*t, is_causal=False)
    gq, gk, gv = dg.autograd.grad(out.sum(), t, create_graph=True)
    assert "ScaledDotProductAttentionBackward" in node_name(gq)
    (gq * gq).sum().backward()
    assert t[0].grad is not None and np.isfinite(t[0].grad.numpy()).all()


@needs_torch
@pytest.mark.parametrize("case", range(len(CASES)))
def test_against_torch(dg, case):
    sq, sk, sv, mask, causal, scale = CASES[case]
    q, k, v = inputs(sq, sk, sv, case)
    res = []
    for m in (dg, torch):
        t = [m.tensor(a, requires_grad=True) for a in (q, k, v)]
        out = F(m).scaled_dot_product_attention(*t, attn_mask=None if mask is None else m.tensor(mask),
                                                is_causal=causal, scale=scale)
        out.sum().backward()
        res.append([out.detach().numpy()] + [x.grad.numpy() for x in t])
    for a, b in zip(*res):
        np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-11)


def test_both_engines_agree_with_dropout(cpp, ref):
    q, k, v = inputs((2, 3, 40, 8), (2, 3, 50, 8), (2, 3, 50, 5))
    res = []
    for m in (cpp, ref):
        m.manual_seed(7)
        t = [m.tensor(a, requires_grad=True) for a in (q, k, v)]
        out = F(m).scaled_dot_product_attention(*t, dropout_p=0.3, is_causal=True)
        out.sum().backward()
        res.append([out.detach().numpy()] + [x.grad.numpy() for x in t])
    for a, b in zip(*res):
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)


def test_dropout_mask_is_the_hash_and_gradients_are_consistent(dg):
    q, k, v = inputs((2, 3, 33, 4), (2, 3, 140, 4), (2, 3, 140, 6))
    p, seed = 0.25, 123456789
    t = [dg.tensor(a, requires_grad=True) for a in (q, k, v)]
    out = dg._C.attention(*t, None, False, 0.5, p, seed)
    keep = ref_kernels.attention_keep_scale((2, 3), 33, 140, p, seed, np.float64)
    frac = (keep == 0).mean()
    assert abs(frac - p) < 0.02
    want = np_attention(q, k, v, scale=0.5, keep=keep)
    np.testing.assert_allclose(out.detach().numpy(), want, rtol=1e-10, atol=1e-12)
    # the same seed gives the same output; another seed another
    again = dg._C.attention(*[x.detach() for x in t], None, False, 0.5, p, seed)
    np.testing.assert_array_equal(again.numpy(), out.detach().numpy())
    other = dg._C.attention(*[x.detach() for x in t], None, False, 0.5, p, seed + 1)
    assert not np.allclose(other.numpy(), out.detach().numpy())
    # the backward regenerates the forward's mask: gradients are those of the formula with that mask
    w = np.random.default_rng(2).standard_normal(want.shape)
    (out * dg.tensor(w)).sum().backward()
    tt = [torch.tensor(a, requires_grad=True) for a in (q, k, v)] if torch is not None else None
    if tt is not None:
        s = tt[0] @ tt[1].transpose(-1, -2) * 0.5
        o = (torch.softmax(s, -1) * torch.tensor(keep)) @ tt[2]
        (o * torch.tensor(w)).sum().backward()
        for x, y in zip(t, tt):
            np.testing.assert_allclose(x.grad.numpy(), y.grad.numpy(), rtol=1e-9, atol=1e-11)
    # and the dropped function is differentiable: finite differences with the mask fixed by the seed
    assert dg.autograd.gradcheck(lambda a, b, c: dg._C.attention(a, b, c, None, True, 0.5, p, seed),
                                 [dg.tensor(a[:, :, :6], requires_grad=True) for a in (q, k, v)])


def test_dropout_through_the_public_function_draws_from_the_generator(dg):
    q = dg.randn(2, 50, 8, dtype=dg.float64)
    dg.manual_seed(3)
    a = F(dg).scaled_dot_product_attention(q, q, q, dropout_p=0.5)
    dg.manual_seed(3)
    b = F(dg).scaled_dot_product_attention(q, q, q, dropout_p=0.5)
    c = F(dg).scaled_dot_product_attention(q, q, q, dropout_p=0.5)
    np.testing.assert_array_equal(a.numpy(), b.numpy())
    assert not np.allclose(a.numpy(), c.numpy())
    zero = F(dg).scaled_dot_product_attention(q, q, q, dropout_p=1.0)
    np.testing.assert_array_equal(zero.numpy(), np.zeros(zero.shape))


def test_attention_backward_primitive(dg):
    q, k, v = inputs((2, 5, 4), (2, 6, 4), (2, 6, 3))
    t = [dg.tensor(a) for a in (q, k, v)]
    g = dg.tensor(np.random.default_rng(1).standard_normal((2, 5, 3)))
    dq, dk, dv = dg._C.attention_backward(g, *t, None, None, None, True, 0.4, 0.0, 0, (True, False, True))
    assert dk is None
    tq = [dg.tensor(a, requires_grad=True) for a in (q, k, v)]
    out = dg._C.attention(*tq, None, True, 0.4, 0.0, 0)
    want = dg.autograd.grad(out, tq, g)
    np.testing.assert_allclose(dq.numpy(), want[0].numpy(), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(dv.numpy(), want[2].numpy(), rtol=1e-10, atol=1e-12)


def test_mask_requiring_grad_takes_the_composite(dg):
    q, k, v = inputs((2, 3, 4), (2, 5, 4), (2, 5, 6))
    m = dg.zeros(3, 5, dtype=dg.float64, requires_grad=True)
    out = F(dg).scaled_dot_product_attention(dg.tensor(q), dg.tensor(k), dg.tensor(v), attn_mask=m)
    out.sum().backward()
    assert m.grad is not None
    with pytest.raises(RuntimeError, match="attention: .*attn_mask"):
        dg._C.attention(dg.tensor(q), dg.tensor(k), dg.tensor(v), m, False, 1.0, 0.0, 0)


BAD = [  # (call, error type, message pattern)
    (lambda dg, t: dg._C.attention(t(2, 3), t(2, 5), t(2, 5), None, False, 1.0, 0.0, 0), RuntimeError,
     r"attention: expected key's last dim"),
    (lambda dg, t: dg._C.attention(t(2, 3), t(4, 3), t(5, 3), None, False, 1.0, 0.0, 0), RuntimeError,
     r"attention: expected value to have key's length"),
    (lambda dg, t: dg._C.attention(t(3), t(4, 3), t(4, 3), None, False, 1.0, 0.0, 0), RuntimeError,
     r"attention: expected query to be at least 2-D"),
    (lambda dg, t: dg._C.attention(t(2, 3), t(4, 3), t(4, 3), None, False, 1.0, 1.5, 0), RuntimeError,
     r"attention: dropout_p must be in \[0, 1\]"),
    (lambda dg, t: dg._C.attention(t(2, 3), t(4, 3), t(4, 3), t(3, 4), False, 1.0, 0.0, 0), RuntimeError,
     r"attention: .*(attn_mask of shape|broadcast)"),
    (lambda dg, t: dg._C.attention(t(2, 3), t(4, 3), t(4, 3), t(2, 4), True, 1.0, 0.0, 0), RuntimeError,
     r"attention: attn_mask must not be given when is_causal"),
    (lambda dg, t: dg._C.attention(t(2, 3, 3), t(3, 4, 3), t(3, 4, 3), None, False, 1.0, 0.0, 0), RuntimeError,
     r"attention"),
    (lambda dg, t: dg._C.attention(t(2, 3), t(4, 3).float(), t(4, 3), None, False, 1.0, 0.0, 0), TypeError,
     r"attention: expected query, key and value of one dtype"),
    (lambda dg, t: dg._C.attention(t(2, 3), t(4, 3), t(4, 3), dg.ones(2, 4, dtype=dg.int64), False, 1.0, 0.0, 0),
     TypeError, r"attention: expected attn_mask to be bool or floating point"),
    (lambda dg, t: dg._C.attention_backward(t(2, 2), t(2, 3), t(4, 3), t(4, 3), None, None, None, False, 1.0, 0.0,
                                            0, (True, True, True)), RuntimeError,
     r"attention_backward: expected a floating-point gradient of the output's shape"),
    (lambda dg, t: F(dg).scaled_dot_product_attention(t(2, 3), t(4, 3), t(4, 3), dropout_p=-0.1), RuntimeError,
     r"scaled_dot_product_attention: dropout_p must be in \[0, 1\]"),
]


@pytest.mark.parametrize("case", range(len(BAD)))
def test_bad_inputs_raise_naming_the_op(dg, case):
    call, error, pattern = BAD[case]

    def t(*shape):
        return dg.zeros(*shape, dtype=dg.float64)
    with pytest.raises(error, match=pattern):
        call(dg, t)


@pytest.mark.parametrize("shapes", [((2, 0, 4), (2, 5, 4), (2, 5, 3)), ((2, 3, 4), (2, 0, 4), (2, 0, 3)),
                                    ((2, 3, 4), (2, 5, 4), (2, 5, 0))])
def test_empty_dims(dg, shapes):
    """No queries, no keys (zeros, as torch's), an empty value dim: forward, backward and double backward."""
    arrays = inputs(*shapes)
    t = [dg.tensor(a, requires_grad=True) for a in arrays]
    out = F(dg).scaled_dot_product_attention(*t)
    assert tuple(out.shape) == shapes[0][:-1] + (shapes[2][-1],)
    np.testing.assert_array_equal(out.detach().numpy(), np.zeros(out.shape))
    grads = dg.autograd.grad(out.sum(), t, create_graph=True)
    assert [tuple(g.shape) for g in grads] == [s for s in shapes]
    sum((g * g).sum() for g in grads).backward()


def test_half_types_take_the_composite(dg):
    q = dg.randn(2, 3, 4).to(dg.bfloat16)
    out = F(dg).scaled_dot_product_attention(q, q, q)
    assert out.dtype is dg.bfloat16


def test_results_do_not_depend_on_the_thread_count(cpp):
    q, k, v = inputs((4, 4, 64, 32), (4, 4, 64, 32), (4, 4, 64, 32))
    t = [cpp.tensor(a.astype(np.float32), requires_grad=True) for a in (q, k, v)]
    before = cpp.get_num_threads()
    res = []
    try:
        for n in (1, 2):
            cpp.set_num_threads(n)
            for x in t:
                x.grad = None
            out = cpp._C.attention(*t, None, True, 0.2, 0.1, 5)
            out.sum().backward()
            res.append([out.detach().numpy()] + [x.grad.numpy() for x in t])
    finally:
        cpp.set_num_threads(before)
    for a, b in zip(*res):
        np.testing.assert_array_equal(a, b)


def test_multihead_attention_and_transformer_use_the_fused_kernel(dg):
    dg.manual_seed(0)
    layer = dg.nn.TransformerEncoderLayer(16, 4, dim_feedforward=32, dropout=0.0, batch_first=True)
    x = dg.randn(3, 10, 16)
    mask = dg.nn.Transformer.generate_square_subsequent_mask(10)
    out = layer(x, src_mask=mask, is_causal=True)
    stack, visited = [out.grad_fn], 0
    while stack and visited < 500:   # (node wrappers are made anew on each access: no dedup by id)
        n = stack.pop()
        visited += 1
        if n is None:
            continue
        if "ScaledDotProductAttention" in n.name():
            break
        stack.extend(f for f, _ in n.next_functions)
    else:
        pytest.fail("no ScaledDotProductAttention node in the encoder layer's graph")


@pytest.mark.parametrize("causal", [False, True])
def test_heads_as_views_of_one_projection(dg, causal):
    """Note [Attention on row-strided views] (ops_nn.cpp): q, k, v as a GPT makes them -- split of one (B, L, 3C)
    projection, viewed as (B, L, H, E) and transposed to (B, H, L, E), rows 3C apart -- taken without copies: the
    values and gradients of the contiguous copies, and the float64 formula."""
    B, L, H, E = 2, 37, 3, 8       # 37 rows: causal tiles of 16 and a partial one
    C = H * E
    rng = np.random.default_rng(7)
    x0 = rng.standard_normal((B, L, 3 * C))
    g0 = rng.standard_normal((B, H, L, E))
    results = []
    for strided in (True, False):
        x = dg.tensor(x0, requires_grad=True)
        q, k, v = (z.view(B, L, H, E).transpose(1, 2) for z in x.split(C, dim=2))
        if not strided:
            q, k, v = (z.contiguous() for z in (q, k, v))
        out = F(dg).scaled_dot_product_attention(q, k, v, is_causal=causal)
        out.backward(dg.tensor(g0))
        results.append((out.detach().numpy(), x.grad.numpy()))
    np.testing.assert_allclose(results[0][0], results[1][0], rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(results[0][1], results[1][1], rtol=1e-12, atol=1e-12)
    qn, kn, vn = (z.reshape(B, L, H, E).transpose(0, 2, 1, 3) for z in np.split(x0, 3, axis=2))
    np.testing.assert_allclose(results[0][0], np_attention(qn, kn, vn, causal=causal), rtol=1e-10, atol=1e-12)
    # float32 too (the own product kernel's path)
    x = dg.tensor(x0.astype(np.float32), requires_grad=True)
    q, k, v = (z.view(B, L, H, E).transpose(1, 2) for z in x.split(C, dim=2))
    out = F(dg).scaled_dot_product_attention(q, k, v, is_causal=causal)
    np.testing.assert_allclose(out.detach().numpy(), np_attention(qn, kn, vn, causal=causal), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("causal", [False, True])
def test_outputs_in_the_heads_layout(cpp, causal):
    """Note [Attention outputs in the heads' layout] (ops_nn.cpp): with q a (B, L, H, E) memory seen as (B, H, L, E),
    the output is too (so y.transpose(1, 2).contiguous() is the same memory, as torch's CPU flash attention), the
    gradient that comes back through that transpose is read where it lies, and dq, dk, dv are made in their inputs'
    layouts; a contiguous q keeps a contiguous output. Values and gradients are those of contiguous copies, float32
    and float64, against the float64 formula."""
    B, L, H, E = 2, 37, 3, 8
    C = H * E
    rng = np.random.default_rng(8)
    x0 = rng.standard_normal((B, L, 3 * C))
    w0 = rng.standard_normal((C, 5))
    for dtype, tol in ((np.float64, 1e-12), (np.float32, 1e-5)):
        results = []
        for strided in (True, False):
            x = cpp.tensor(x0.astype(dtype), requires_grad=True)
            w = cpp.tensor(w0.astype(dtype))
            q, k, v = (z.view(B, L, H, E).transpose(1, 2) for z in x.split(C, dim=2))
            if not strided:
                q, k, v = (z.contiguous() for z in (q, k, v))
            y = F(cpp).scaled_dot_product_attention(q, k, v, is_causal=causal)
            if strided:
                assert y.transpose(1, 2).is_contiguous() and not y.is_contiguous()
            else:
                assert y.is_contiguous()
            t = y.transpose(1, 2).contiguous()
            assert (t.data_ptr() == y.data_ptr()) == strided
            (t.view(B, L, C) @ w).square().sum().backward()
            results.append((y.detach().numpy(), x.grad.numpy()))
        np.testing.assert_allclose(results[0][0], results[1][0], rtol=tol, atol=tol)
        np.testing.assert_allclose(results[0][1], results[1][1], rtol=tol, atol=tol)
        qn, kn, vn = (z.reshape(B, L, H, E).transpose(0, 2, 1, 3) for z in np.split(x0, 3, axis=2))
        np.testing.assert_allclose(results[0][0], np_attention(qn, kn, vn, causal=causal), rtol=10 * tol,
                                   atol=10 * tol)


# Note [Attention tiles for small head dims] (kernels/attention.cpp): head dims 16, 32, 48 and 64 (value dims too)
# take the register-tiled path; lengths that are not multiples of its groups (4 and 8 rows, 16 keys) nor of its tiles
# (64 queries, 64 keys), causal with more or fewer keys than queries, masks with a fully masked row.
_rng = np.random.default_rng(11)
_dead = _rng.random((33, 65)) > 0.4
_dead[5] = False
TILED = [  # (q, k, v shapes, mask, causal, scale)
    ((2, 3, 37, 32), (2, 3, 37, 32), (2, 3, 37, 32), None, True, None),
    ((1, 2, 70, 64), (1, 2, 130, 64), (1, 2, 130, 16), None, False, None),
    ((2, 1, 130, 16), (2, 1, 130, 16), (2, 1, 130, 48), None, True, 0.3),
    ((1, 2, 20, 32), (1, 2, 150, 32), (1, 2, 150, 32), None, True, None),     # keys no query sees: zero grads
    ((3, 75, 32), (3, 7, 32), (3, 7, 32), None, True, None),                 # fewer keys than queries
    ((2, 1, 33, 48), (2, 1, 65, 48), (2, 1, 65, 64), _dead, False, None),     # a fully masked row
    ((2, 2, 33, 32), (2, 2, 65, 32), (2, 2, 65, 32), _rng.standard_normal((2, 1, 1, 65)), False, 0.5),
    ((1, 1, 1, 16), (1, 1, 1, 16), (1, 1, 1, 16), None, True, None),
]


def _torch_grads(q, k, v, mask, causal, scale, w):
    t = [torch.tensor(a, requires_grad=True) for a in (q, k, v)]
    out = torch.nn.functional.scaled_dot_product_attention(
        *t, attn_mask=None if mask is None else torch.tensor(mask), is_causal=causal, scale=scale)
    (out * torch.tensor(w)).sum().backward()
    return [out.detach().numpy()] + [x.grad.numpy() for x in t]


@pytest.mark.parametrize("case", range(len(TILED)))
def test_small_heads_match_the_formula_and_torch(dg, case):
    sq, sk, sv, mask, causal, scale = TILED[case]
    q, k, v = inputs(sq, sk, sv, 40 + case)
    want = np_attention(q, k, v, mask, causal, scale)
    w = np.random.default_rng(case).standard_normal(want.shape)
    t = [dg.tensor(a, requires_grad=True) for a in (q, k, v)]
    out = F(dg).scaled_dot_product_attention(*t, attn_mask=None if mask is None else dg.tensor(mask),
                                             is_causal=causal, scale=scale)
    assert "ScaledDotProductAttention" in node_name(out)
    np.testing.assert_allclose(out.detach().numpy(), want, rtol=1e-10, atol=1e-12)
    (out * dg.tensor(w)).sum().backward()
    got = [out.detach().numpy()] + [x.grad.numpy() for x in t]
    if causal and sk[-2] > sq[-2]:   # keys after the last query take no part
        assert not got[2][..., sq[-2]:, :].any() and not got[3][..., sq[-2]:, :].any()
    if torch is not None:
        for a, b in zip(got, _torch_grads(q, k, v, mask, causal, scale, w)):
            np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-11)
    # float32 against the float64 results
    t32 = [dg.tensor(a.astype(np.float32), requires_grad=True) for a in (q, k, v)]
    out32 = F(dg).scaled_dot_product_attention(*t32, attn_mask=None if mask is None else dg.tensor(mask),
                                               is_causal=causal, scale=scale)
    (out32 * dg.tensor(w.astype(np.float32))).sum().backward()
    for a, b in zip([out32.detach().numpy()] + [x.grad.numpy() for x in t32], got):
        np.testing.assert_allclose(a, b, rtol=2e-4, atol=2e-4 * max(1.0, np.abs(b).max()))


@pytest.mark.parametrize("head,causal,masked", [(16, True, False), (32, False, False), (32, False, True),
                                                (48, True, False), (64, False, False)])
def test_small_heads_gradcheck(dg, head, causal, masked):
    """float64 finite differences of the tiled path: 19 queries and 21 keys (partial groups, a diagonal that
    crosses them), and the fused backward's own derivative."""
    q, k, v = inputs((1, 2, 19, head), (1, 2, 21, head), (1, 2, 21, 16 if head == 48 else head), head)
    mask = None
    if masked:
        mask = np.random.default_rng(1).random((19, 21)) > 0.3
        mask[3] = False
    t = [dg.tensor(a, requires_grad=True) for a in (q, k, v)]
    m = dg.tensor(mask) if mask is not None else None

    def fn(a, b, c):
        return F(dg).scaled_dot_product_attention(a, b, c, attn_mask=m, is_causal=causal)
    assert dg.autograd.gradcheck(fn, t)
    if head == 16:
        assert dg.autograd.gradgradcheck(fn, t)


@pytest.mark.parametrize("case", [0, 2, 3, 5])
def test_small_heads_agree_with_the_generic_path(cpp, monkeypatch, case):
    """DYNGRAD_ATTENTION=generic sends the same call through the gemm_into path: float64 results agree to rounding;
    dropout's mask (the hash of the weight's index) is the same on both."""
    sq, sk, sv, mask, causal, scale = TILED[case]
    q, k, v = inputs(sq, sk, sv, 60 + case)
    res = []
    for mode in ("tiles", "generic"):
        monkeypatch.setenv("DYNGRAD_ATTENTION", mode)
        t = [cpp.tensor(a, requires_grad=True) for a in (q, k, v)]
        out = cpp._C.attention(*t, None if mask is None else cpp.tensor(np.where(mask, 0.0, -np.inf)), causal,
                               0.25 if scale is None else scale, 0.2, 77)
        out.sum().backward()
        res.append([out.detach().numpy()] + [x.grad.numpy() for x in t])
    for a, b in zip(*res):
        np.testing.assert_allclose(a, b, rtol=1e-11, atol=1e-12)


def test_small_heads_dropout_on_both_engines(cpp, ref):
    q, k, v = inputs((2, 2, 45, 32), (2, 2, 45, 32), (2, 2, 45, 32), 5)
    res = []
    for m in (cpp, ref):
        m.manual_seed(11)
        t = [m.tensor(a, requires_grad=True) for a in (q, k, v)]
        out = F(m).scaled_dot_product_attention(*t, dropout_p=0.2, is_causal=True)
        out.sum().backward()
        res.append([out.detach().numpy()] + [x.grad.numpy() for x in t])
    for a, b in zip(*res):
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)


def _graph_has_attention(out):
    stack, visited = [out.grad_fn], 0
    while stack and visited < 500:
        n = stack.pop()
        visited += 1
        if n is None:
            continue
        if "ScaledDotProductAttention" in n.name():
            return True
        stack.extend(f for f, _ in n.next_functions)
    return False


@needs_torch
@pytest.mark.parametrize("batch_first,causal,padding", [(False, False, False), (True, True, False),
                                                        (False, False, True)])
def test_multihead_attention_with_small_heads_is_fused_and_matches_torch(dg, batch_first, causal, padding):
    """nn.MultiheadAttention(64, 2) (heads of 32: the tiled path) with need_weights=False, as the transformer layers
    call it: one ScaledDotProductAttention node, outputs and gradients of torch's module with the same weights."""
    L, N, E = 21, 3, 64
    tm = torch.nn.MultiheadAttention(E, 2, batch_first=batch_first, dtype=torch.float64)
    mm = dg.nn.MultiheadAttention(E, 2, batch_first=batch_first, dtype=dg.float64)
    mm.load_state_dict({k: dg.tensor(v.detach().numpy()) for k, v in tm.state_dict().items()})
    x0 = np.random.default_rng(3).standard_normal((N, L, E) if batch_first else (L, N, E))
    pad = np.zeros((N, L), bool)
    pad[1, -4:] = True
    res = []
    for m, mod in ((dg, mm), (torch, tm)):
        x = m.tensor(x0, requires_grad=True)
        kw = {"need_weights": False}
        if causal:
            kw.update(attn_mask=m.tensor(np.triu(np.ones((L, L), bool), 1)), is_causal=True)
        if padding:
            kw["key_padding_mask"] = m.tensor(pad)
        out = mod(x, x, x, **kw)[0]
        if m is dg:
            assert _graph_has_attention(out)
        out.square().sum().backward()
        res.append((out.detach().numpy(), x.grad.numpy(), mod.in_proj_weight.grad.numpy()))
    for a, b in zip(*res):
        np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-10)


def test_transformer_layer_with_small_heads_is_fused(dg):
    dg.manual_seed(0)
    layer = dg.nn.TransformerEncoderLayer(128, 4, dim_feedforward=64, dropout=0.0, batch_first=True)
    x = dg.randn(2, 19, 128)
    out = layer(x, src_mask=dg.nn.Transformer.generate_square_subsequent_mask(19), is_causal=True)
    assert _graph_has_attention(out)
