"""svd_lowrank and pca_lowrank (Note [Randomised low-rank SVD] in _api/ops/linalg.py), F.linear_cross_entropy,
Tensor.resize_ and resize_as_, on both engines: against torch where installed, against the mathematics (a matrix of
rank <= q is reproduced exactly; singular values are torch's) and gradcheck."""
import numpy as np
import pytest

RNG = np.random.default_rng(3)
LOW = (RNG.standard_normal((7, 3)) @ RNG.standard_normal((3, 5)))          # rank 3, 7 x 5
WIDE = LOW.T.copy()                                                      # 5 x 7


@pytest.mark.parametrize("A", [LOW, WIDE, np.stack([LOW, 2 * LOW])], ids=["tall", "wide", "batched"])
def test_svd_lowrank_reproduces_a_low_rank_matrix(dg, A):
    dg.manual_seed(0)
    U, S, V = dg.svd_lowrank(dg.tensor(A), q=4)
    m, n = A.shape[-2:]
    assert tuple(U.shape) == A.shape[:-2] + (m, 4) and tuple(S.shape) == A.shape[:-2] + (4,)
    assert tuple(V.shape) == A.shape[:-2] + (n, 4)
    recon = (U.numpy() * S.numpy()[..., None, :]) @ np.swapaxes(V.numpy(), -1, -2)
    np.testing.assert_allclose(recon, A, atol=1e-9)
    np.testing.assert_allclose(S.numpy(), np.linalg.svd(A, compute_uv=False)[..., :4], atol=1e-9)
    np.testing.assert_allclose(np.swapaxes(U.numpy(), -1, -2) @ U.numpy(), np.broadcast_to(np.eye(4), S.shape + (4,)),
                               atol=1e-9)


def test_svd_lowrank_singular_values_match_torch(dg):
    torch = pytest.importorskip("torch")
    for q, niter in ((3, 2), (4, 0), (5, 1)):                  # q >= the rank: exact, whatever the draws
        ours = dg.svd_lowrank(dg.tensor(LOW), q=q, niter=niter)[1].numpy()
        theirs = torch.svd_lowrank(torch.tensor(LOW), q=q, niter=niter)[1].numpy()
        np.testing.assert_allclose(ours[:3], theirs[:3], atol=1e-9)      # the rank-3 part is exact in both


def test_svd_lowrank_with_M_and_pca(dg):
    torch = pytest.importorskip("torch")
    M = RNG.standard_normal((1, 5))
    U, S, V = dg.svd_lowrank(dg.tensor(LOW + M), q=3, M=dg.tensor(M))
    recon = (U.numpy() * S.numpy()) @ V.numpy().T
    np.testing.assert_allclose(recon, LOW, atol=1e-9)
    X = RNG.standard_normal((9, 4)) @ RNG.standard_normal((4, 6)) + 3.0
    for center in (True, False):
        ours = dg.pca_lowrank(dg.tensor(X), center=center)
        theirs = torch.pca_lowrank(torch.tensor(X), center=center)
        assert [tuple(t.shape) for t in ours] == [tuple(t.shape) for t in theirs]
        np.testing.assert_allclose(ours[1].numpy()[:4], theirs[1].numpy()[:4], rtol=1e-8, atol=1e-9)
    with pytest.raises(ValueError, match=r"pca_lowrank: q\(=7\) must be non-negative integer and not greater"):
        dg.pca_lowrank(dg.tensor(X), q=7)
    with pytest.raises(RuntimeError, match="svd_lowrank: A must have at least 2 dimensions"):
        dg.svd_lowrank(dg.tensor([1.0, 2.0]))


def test_svd_lowrank_gradient(dg):
    # S of a rank-3 matrix with q=3 is a smooth function of A (distinct singular values): float64 gradcheck
    A = dg.tensor(LOW, requires_grad=True)

    def top(a):
        dg.manual_seed(1)
        return dg.svd_lowrank(a, q=3, niter=2)[1]
    assert dg.autograd.gradcheck(top, (A,), eps=1e-6, atol=1e-5)

    # q = n of a full-rank 6 x 4 matrix: U S V^T is A itself, for every A near it (q above the rank would make the
    # QR and SVD of the sketch rank-deficient, where their gradients are undefined, in torch as here)
    full = dg.tensor(RNG.standard_normal((6, 4)), requires_grad=True)

    def product(a):
        dg.manual_seed(1)
        U, S, V = dg.svd_lowrank(a, q=4, niter=1)
        return (U * S) @ V.T
    assert dg.autograd.gradcheck(product, (full,), eps=1e-6, atol=1e-5)


def test_linear_cross_entropy_is_linear_then_cross_entropy(dg):
    torch = pytest.importorskip("torch")
    x = RNG.standard_normal((6, 4)).astype(np.float32)
    w = RNG.standard_normal((5, 4)).astype(np.float32)
    b = RNG.standard_normal(5).astype(np.float32)
    cw = RNG.random(5).astype(np.float32)
    for kwargs in ({}, {"reduction": "sum"}, {"reduction": "none", "ignore_index": 2}, {"label_smoothing": 0.1},
                   {"use_bias": True, "weight": True}):
        kw = dict(kwargs)
        y = np.array([0, 4, 2, 1, 2 if "ignore_index" in kw else -100, 3])
        ours_kw, theirs_kw = {}, {}
        if kw.pop("use_bias", False):
            ours_kw["linear_bias"], theirs_kw["linear_bias"] = dg.tensor(b), torch.tensor(b)
        if kw.pop("weight", False):
            ours_kw["weight"], theirs_kw["weight"] = dg.tensor(cw), torch.tensor(cw)
        xs = dg.tensor(x, requires_grad=True)
        xt = torch.tensor(x, requires_grad=True)
        ours = dg.nn.functional.linear_cross_entropy(xs, dg.tensor(w), dg.tensor(y), **ours_kw, **kw)
        theirs = torch.nn.functional.linear_cross_entropy(xt, torch.tensor(w), torch.tensor(y), **theirs_kw, **kw)
        np.testing.assert_allclose(ours.detach().numpy(), theirs.detach().numpy(), rtol=1e-5, atol=1e-6)
        ours.sum().backward()
        theirs.sum().backward()
        np.testing.assert_allclose(xs.grad.numpy(), xt.grad.numpy(), rtol=1e-5, atol=1e-6)


def test_linear_cross_entropy_gradcheck(dg):
    x = dg.tensor(RNG.standard_normal((3, 4)), requires_grad=True)
    w = dg.tensor(RNG.standard_normal((5, 4)), requires_grad=True)
    y = dg.tensor([1, 0, 4])
    assert dg.autograd.gradcheck(lambda a, b: dg.nn.functional.linear_cross_entropy(a, b, y), (x, w))


def test_resize_as_torch(dg):
    torch = pytest.importorskip("torch")
    for shape, new in (((2, 3), (3, 2)), ((2, 3), (4,)), ((2, 3), (2, 2)), ((4,), (0,)), ((3,), (3,))):
        values = np.arange(np.prod(shape), dtype=np.float32).reshape(shape)
        ours, theirs = dg.tensor(values), torch.tensor(values)
        assert ours.resize_(*new) is ours
        theirs.resize_(*new)
        assert tuple(ours.shape) == tuple(theirs.shape)
        kept = min(values.size, int(np.prod(new)))
        np.testing.assert_array_equal(ours.numpy().reshape(-1)[:kept], theirs.numpy().reshape(-1)[:kept])
    t = dg.tensor([[1.0, 2.0], [3.0, 4.0]]).T                      # non-contiguous: row-major order of its values
    t.resize_(4)
    np.testing.assert_array_equal(t.numpy(), [1.0, 3.0, 2.0, 4.0])
    grow = dg.tensor([1, 2, 3])
    grow.resize_((2, 3))
    assert tuple(grow.shape) == (2, 3) and grow.numpy().reshape(-1)[:3].tolist() == [1, 2, 3]
    a = dg.zeros(5)
    assert a.resize_as_(dg.ones(1, 5)) is a and tuple(a.shape) == (1, 5)
    with pytest.raises(RuntimeError, match="resize_: cannot resize a tensor that requires grad"):
        dg.ones(2, requires_grad=True).resize_(3)
    with pytest.raises(RuntimeError, match="resize_: negative dimension"):
        dg.ones(2).resize_(-1)
    m = dg.empty(2, 3, device="meta")
    assert m.resize_(6) is m and m.is_meta and tuple(m.shape) == (6,)


def test_linear_cross_entropy_k_dimensional(dg):
    torch = pytest.importorskip("torch")
    x = RNG.standard_normal((4, 3))
    w = RNG.standard_normal((2, 5, 3))                 # C=2 classes, d_1=5: logits (4, 2, 5)
    b = RNG.standard_normal((2, 5))
    y = RNG.integers(0, 2, (4, 5))
    ours = dg.nn.functional.linear_cross_entropy(dg.tensor(x), dg.tensor(w), dg.tensor(y), linear_bias=dg.tensor(b),
                                                 reduction="none")
    theirs = torch.nn.functional.linear_cross_entropy(torch.tensor(x), torch.tensor(w), torch.tensor(y),
                                                      linear_bias=torch.tensor(b), reduction="none")
    np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=1e-10)
    assert dg.autograd.gradcheck(
        lambda a, c: dg.nn.functional.linear_cross_entropy(a, c, dg.tensor(y)),
        (dg.tensor(x, requires_grad=True), dg.tensor(w, requires_grad=True)))
    with pytest.raises(RuntimeError, match="linear_cross_entropy: expected equal input and linear_weight last"):
        dg.nn.functional.linear_cross_entropy(dg.tensor(x), dg.tensor(w[..., :2]), dg.tensor(y))
    t = dg.zeros(2, 3)
    assert dg.resize_as_(t, dg.zeros(6)) is t and tuple(t.shape) == (6,)


def test_linear_cross_entropy_options_and_argument_checks_as_torch(dg):
    """torch 2.13's options= (nn.LinearCrossEntropyOptions, checked as torch checks it; the same values as without
    it, torch's chunked path being a memory saving) and its argument errors: each bad call raises the same type in
    both libraries."""
    torch = pytest.importorskip("torch")
    x = RNG.standard_normal((6, 4))
    w = RNG.standard_normal((5, 4))
    y = np.array([0, 4, 2, 1, 3, 3])
    for reduction in ("mean", "sum", "none"):
        for opt in ({}, {"batch_chunk_size": 2}, {"chunking_method": "aspect_ratio:2", "acc_policy": "accurate"}):
            ours = dg.nn.functional.linear_cross_entropy(dg.tensor(x), dg.tensor(w), dg.tensor(y), reduction=reduction,
                                                         options=dg.nn.LinearCrossEntropyOptions(**opt))
            theirs = torch.nn.functional.linear_cross_entropy(torch.tensor(x), torch.tensor(w), torch.tensor(y),
                                                              reduction=reduction,
                                                              options=torch.nn.LinearCrossEntropyOptions(**opt))
            np.testing.assert_allclose(ours.numpy(), theirs.detach().numpy(), rtol=1e-10)
    with pytest.warns(UserWarning, match="options`` ignored"):
        dg.nn.functional.linear_cross_entropy(dg.tensor(x), dg.tensor(w), dg.tensor(y), label_smoothing=0.1,
                                              options=dg.nn.LinearCrossEntropyOptions())
    for bad in ({"acc_policy": "fast"}, {"chunking_method": "rows"}, {"chunking_method": "aspect_ratio:0"},
                {"batch_chunk_size": 0}, {"batch_chunk_size": 2.0}):
        with pytest.raises(ValueError):
            torch.nn.LinearCrossEntropyOptions(**bad)
        with pytest.raises(ValueError):
            dg.nn.LinearCrossEntropyOptions(**bad)
    with pytest.raises(ValueError, match="acc_dtype"):
        dg.nn.LinearCrossEntropyOptions(acc_dtype=dg.int64)
    assert dg.nn.LinearCrossEntropyOptions(acc_dtype=dg.float32).acc_dtype is dg.float32
    probs = RNG.random((6, 5))
    calls = [  # (x, w, target, kwargs)
        (RNG.standard_normal((2, 3, 4)), w, y, {}),                      # input of 3 dims
        (x, RNG.standard_normal(4), y, {}),                              # linear_weight of 1 dim
        (x, RNG.standard_normal((5, 3)), y, {}),                         # in_features differ
        (x, w, y, {"linear_bias": RNG.standard_normal(4)}),              # bias shape
        (RNG.standard_normal(4), RNG.standard_normal((2, 5, 4)), y[:5], {}),   # K-dimensional, unbatched
        (x, w, probs, {"ignore_index": 1}),                              # ignore_index with probabilities
    ]
    for xa, wa, ya, kw in calls:
        with pytest.raises(Exception) as theirs:
            torch.nn.functional.linear_cross_entropy(torch.tensor(xa), torch.tensor(wa), torch.tensor(ya),
                                                     **{k: torch.tensor(v) for k, v in kw.items() if k != "ignore_index"},
                                                     **{k: v for k, v in kw.items() if k == "ignore_index"})
        with pytest.raises(theirs.type, match="linear_cross_entropy"):
            dg.nn.functional.linear_cross_entropy(dg.tensor(xa), dg.tensor(wa), dg.tensor(ya),
                                                  **{k: dg.tensor(v) for k, v in kw.items() if k != "ignore_index"},
                                                  **{k: v for k, v in kw.items() if k == "ignore_index"})
    with pytest.raises(TypeError, match="options"):
        dg.nn.functional.linear_cross_entropy(dg.tensor(x), dg.tensor(w), dg.tensor(y), options={"batch_chunk_size": 2})
