"""Composites batched through their primitives (Note [Composites through their primitives] in
python/dyngrad/_api/ops/vmap.py), on both engines: each case runs under vmap with every combination of batched
operands it lists, with no fallback loop, and is checked against the loop over the rows, its gradients through
vmap against the loop's, and its values against torch.func.vmap where torch is installed."""
import importlib

import numpy as np
import pytest

B = 3
RNG = np.random.default_rng(7)


def _r(*shape):
    return RNG.standard_normal(shape)


def _vm(dg):
    return importlib.import_module(dg.__name__ + "._api.ops.vmap")


def _t(m, a):
    if isinstance(a, np.ndarray) and a.dtype.kind in "iub":
        return m.tensor(a)
    return m.tensor(np.asarray(a, dtype=np.float64))


def _leaves(out):
    if isinstance(out, (tuple, list)):
        return [x for o in out for x in _leaves(o)]
    return [out]


# name: (f(m, *tensors), row inputs (numpy; a batched operand gets B rows of this shape), in_dims variants,
#        differentiable)
CASES = {
    "addmm": (lambda m, i, a, b: m.addmm(i, a, b, beta=0.5, alpha=2.0), [_r(3, 4), _r(3, 5), _r(5, 4)],
              [(0, None, None), (None, 0, None), (None, None, 0), (0, 0, 0)], True),
    "addmm_beta0": (lambda m, i, a, b: m.addmm(i, a, b, beta=0), [_r(4), _r(3, 5), _r(5, 4)],
                    [(0, 0, None)], True),
    "addmv": (lambda m, i, a, v: m.addmv(i, a, v), [_r(3), _r(3, 5), _r(5)], [(0, None, None), (None, 0, 0)], True),
    "addmv_": (lambda m, i, a, v: m.addmv_(i.clone(), a, v, alpha=3), [_r(3), _r(3, 5), _r(5)],
               [(0, None, None), (0, 0, 0)], True),
    "baddbmm": (lambda m, i, a, b: m.baddbmm(i, a, b), [_r(2, 3, 4), _r(2, 3, 5), _r(2, 5, 4)],
                [(0, None, None), (None, 0, 0)], True),
    "addbmm": (lambda m, i, a, b: m.addbmm(i, a, b, alpha=0.5), [_r(3, 4), _r(2, 3, 5), _r(2, 5, 4)],
               [(0, None, None), (None, 0, None), (None, None, 0)], True),
    "addr": (lambda m, i, a, b: m.addr(i, a, b, beta=2), [_r(3, 4), _r(3), _r(4)],
             [(0, None, None), (None, 0, None), (None, 0, 0)], True),
    "chain_matmul": (lambda m, a, b, c: m.chain_matmul(a, b, c), [_r(2, 3), _r(3, 4), _r(4, 2)],
                     [(0, None, None), (None, 0, 0)], True),
    "inner": (lambda m, a, b: m.inner(a, b), [_r(2, 3), _r(4, 3)], [(0, None), (None, 0), (0, 0)], True),
    "inner_0d": (lambda m, a, b: m.inner(a, b), [_r(), _r(4, 3)], [(0, None), (0, 0)], True),
    "kron": (lambda m, a, b: m.kron(a, b), [_r(2, 3), _r(3)], [(0, None), (None, 0), (0, 0)], True),
    "tensordot": (lambda m, a, b: m.tensordot(a, b, dims=([0, 2], [1, 0])), [_r(2, 3, 4), _r(4, 2, 5)],
                  [(0, None), (None, 0), (0, 0)], True),
    "tensordot_int": (lambda m, a, b: m.tensordot(a, b, 1), [_r(2, 3), _r(3, 4)], [(0, 0)], True),
    "dist": (lambda m, a, b: m.dist(a, b, 3), [_r(2, 3), _r(3)], [(0, None), (None, 0), (0, 0)], True),
    "cov": (lambda m, a: m.cov(a, correction=0), [_r(3, 5)], [(0,)], True),
    "cov_1d": (lambda m, a: m.cov(a), [_r(5)], [(0,)], True),
    "corrcoef": (lambda m, a: m.corrcoef(a), [_r(3, 5)], [(0,)], True),
    "meshgrid": (lambda m, a, b: m.meshgrid(a, b, indexing="xy"), [_r(3), _r(4)], [(0, None), (0, 0)], True),
    "cartesian_prod": (lambda m, a, b: m.cartesian_prod(a, b), [_r(3), _r(2)], [(None, 0), (0, 0)], True),
    "combinations": (lambda m, a: m.combinations(a, 2, with_replacement=True), [_r(4)], [(0,)], True),
    "block_diag": (lambda m, a, b, c: m.block_diag(a, b, c), [_r(2, 3), _r(), _r(2)],
                   [(0, None, None), (None, 0, 0)], True),
    "cross": (lambda m, a, b: m.cross(a, b, dim=1), [_r(2, 3), _r(2, 3)], [(0, None), (None, 0), (0, 0)], True),
    "cross_default": (lambda m, a, b: m.linalg.cross(a, b), [_r(2, 3), _r(1, 3)], [(0, None), (0, 0)], True),
    "pairwise_distance": (lambda m, a, b: m.nn.functional.pairwise_distance(a, b, p=1.5, keepdim=True),
                          [_r(2, 4), _r(4)], [(0, None), (None, 0), (0, 0)], True),
    "pdist": (lambda m, a: m.nn.functional.pdist(a), [_r(4, 3)], [(0,)], True),
    "cdist": (lambda m, a, b: m.cdist(a, b), [_r(3, 4), _r(2, 4)], [(0, None), (None, 0), (0, 0)], True),
    "cdist_p1": (lambda m, a, b: m.cdist(a, b, p=1), [_r(2, 3, 4), _r(2, 4)], [(0, 0)], True),
    "einsum": (lambda m, a, b: m.einsum("ij,jk", a, b), [_r(2, 3), _r(3, 4)], [(0, None), (None, 0), (0, 0)], True),
    "einsum_ellipsis": (lambda m, a, b: m.einsum("...j,jk->...k", a, b), [_r(2, 3), _r(3, 4)], [(0, 0)], True),
    "einsum_sublist": (lambda m, a, b: m.einsum(a, [0, 1], b, [1, 2], [0, 2]), [_r(2, 3), _r(3, 4)],
                       [(0, None), (0, 0)], True),
    "cholesky_inverse": (lambda m, a: m.cholesky_inverse(m.linalg.cholesky(a @ a.mT + 3 * m.eye(3, dtype=a.dtype))),
                         [_r(3, 3)], [(0,)], True),
    "lu": (lambda m, a: m.lu(a), [_r(3, 3)], [(0,)], False),
    "lu_unpack": (lambda m, a: m.lu_unpack(*m.linalg.lu_factor(a)), [_r(3, 3)], [(0,)], True),
    "lstsq": (lambda m, a, b: m.linalg.lstsq(a, b, driver="gelsd"), [_r(4, 2), _r(4, 3)],
              [(0, None), (None, 0), (0, 0)], False),
    "lstsq_default": (lambda m, a, b: m.linalg.lstsq(a, b).solution, [_r(4, 2), _r(4, 1)], [(0, 0)], True),
    "tensorinv": (lambda m, a: m.linalg.tensorinv(a, ind=1), [_r(4, 2, 2)], [(0,)], True),
    "tensorsolve": (lambda m, a, b: m.linalg.tensorsolve(a, b, dims=(0,)), [_r(6, 2, 3), _r(2, 3)],
                    [(0, None), (None, 0), (0, 0)], True),
    "linalg_vander": (lambda m, a: m.linalg.vander(a, N=4), [_r(2, 3)], [(0,)], True),
    "vander": (lambda m, a: m.vander(a, 4), [_r(3)], [(0,)], True),
    "vander_increasing": (lambda m, a: m.vander(a, increasing=True), [_r(3)], [(0,)], True),
    "diagonal_scatter": (lambda m, a, b: m.diagonal_scatter(a, b, 1), [_r(3, 3), _r(2)],
                         [(0, None), (None, 0), (0, 0)], True),
    "select_scatter": (lambda m, a, b: m.select_scatter(a, b, 1, 2), [_r(2, 3), _r(2)], [(0, None), (None, 0)], True),
    "hsplit": (lambda m, a: m.hsplit(a, 2), [_r(2, 4)], [(0,)], True),
    "vsplit": (lambda m, a: m.vsplit(a, [1, 3]), [_r(4, 2)], [(0,)], True),
    "dsplit": (lambda m, a: m.dsplit(a, 2), [_r(2, 2, 4)], [(0,)], True),
    "gradient": (lambda m, a: m.gradient(a, spacing=0.5), [_r(3, 4)], [(0,)], True),
    "gradient_dim": (lambda m, a: m.gradient(a, dim=1, edge_order=2), [_r(3, 4)], [(0,)], True),
    "index_copy": (lambda m, a, b: m.index_copy(a, 1, m.tensor([2, 0]), b), [_r(3, 4), _r(3, 2)],
                   [(0, None), (None, 0), (0, 0)], True),
    "index_fill": (lambda m, a: m.index_fill(a, 1, m.tensor([2, 0]), -1.5), [_r(3, 4)], [(0,)], True),
    "index_reduce": (lambda m, a, b: m.index_reduce(a, 0, m.tensor([0, 2, 0]), b, "prod"), [_r(3, 4), _r(3, 4)],
                     [(0, None), (None, 0), (0, 0)], True),
    "index_put": (lambda m, a, v: m.index_put(a, (m.tensor([0, 2, 0]), m.tensor([1, 1, 1])), v, accumulate=True),
                  [_r(3, 4), _r(3)], [(0, None), (None, 0), (0, 0)], True),
    "index_put_": (lambda m, a, v: a.clone().index_put_((m.tensor([0, 2]),), v), [_r(3, 4), _r(4)],
                   [(0, None), (0, 0)], True),
    "masked_scatter": (lambda m, a, k, s: m.masked_scatter(a, k, s),
                       [_r(3, 4), RNG.random((3, 4)) > 0.5, _r(12)], [(0, 0, None), (None, 0, 0), (0, None, 0)], True),
    "renorm": (lambda m, a: m.renorm(a, 2, 0, 1.0), [_r(3, 4)], [(0,)], True),
    "repeat_interleave": (lambda m, a: m.repeat_interleave(a, 2), [_r(2, 3)], [(0,)], True),
    "repeat_interleave_dim": (lambda m, a: m.repeat_interleave(a, m.tensor([1, 2, 0]), dim=1), [_r(2, 3)], [(0,)],
                              True),
    "scatter_reduce": (lambda m, a, i, b: m.scatter_reduce(a, 1, i, b, "amax", include_self=False),
                       [_r(3, 4), RNG.integers(0, 4, (3, 2)), _r(3, 2)],
                       [(0, None, None), (None, 0, None), (None, None, 0), (0, 0, 0)], True),
    "searchsorted": (lambda m, q, v: m.searchsorted(q, v), [np.sort(_r(5)), _r(2, 3)],
                     [(0, None), (None, 0), (0, 0)], False),
    "searchsorted_nd": (lambda m, q, v: m.searchsorted(q, v, right=True), [np.sort(_r(2, 5), -1), _r(2, 3)],
                        [(0, None), (None, 0), (0, 0)], False),
    "sum_to_size": (lambda m, a: a.sum_to_size(1, 4), [_r(3, 4)], [(0,)], True),
    "sum_to_size_short": (lambda m, a: a.sum_to_size(4), [_r(3, 4)], [(0,)], True),
    "take_along_dim": (lambda m, a, i: m.take_along_dim(a, i, dim=1), [_r(3, 4), RNG.integers(-4, 4, (3, 2))],
                       [(0, None), (None, 0), (0, 0)], True),
    "take_along_dim_flat": (lambda m, a, i: m.take_along_dim(a, i), [_r(3, 4), RNG.integers(0, 12, (5,))],
                            [(0, None), (0, 0)], True),
    "unravel_index": (lambda m, i: m.unravel_index(i, (3, 4)), [RNG.integers(0, 12, (5,))], [(0,)], False),
    "histc": (lambda m, a: m.histc(a, bins=5), [_r(3, 4)], [(0,)], False),
    "histc_range": (lambda m, a: m.histc(a, 4, -1, 1), [_r(3, 4)], [(0,)], False),
    "nonzero_static": (lambda m, a: m.nonzero_static(a > 0, size=5, fill_value=-7), [_r(3, 4)], [(0,)], False),
    "one_hot": (lambda m, i: m.nn.functional.one_hot(i, 5), [RNG.integers(0, 5, (2, 3))], [(0,)], False),
    "as_strided": (lambda m, a: m.as_strided(a, (2, 2), (1, 2)), [_r(2, 4)], [(0,)], True),
    "as_strided_copy": (lambda m, a: m.as_strided_copy(a, (3,), (2,)), [_r(2, 3)], [(0,)], True),
    "as_strided_scatter": (lambda m, a, b: m.as_strided_scatter(a, b, (2, 2), (1, 3), 1), [_r(2, 4), _r(2, 2)],
                           [(0, None), (None, 0), (0, 0)], True),
    "histogram": (lambda m, a: m.histogram(a, 4), [np.arange(5.0)], [(0,)], False),
    "histogram_range": (lambda m, a: m.histogram(a, 3, range=(0.0, 1.0), density=True), [RNG.random((2, 5))], [(0,)],
                        False),
    "histogram_weight": (lambda m, a: m.histogram(a, 5, weight=m.tensor(np.linspace(0.5, 2, 6))), [_r(6)], [(0,)],
                         False),
    "histogram_flat": (lambda m, a: m.histogram(a * 0, 2), [_r(3)], [(0,)], False),
    "histogramdd": (lambda m, a: m.histogramdd(a, [2, 3]), [_r(7, 2)], [(0,)], False),
    "histogramdd_density": (lambda m, a: m.histogramdd(a, 2, range=[-1.0, 1.0, -2.0, 2.0], density=True,
                                                       weight=m.tensor(np.linspace(1, 2, 7))), [_r(7, 2)], [(0,)],
                            False),
    "masked_select": (lambda m, a: m.masked_select(a, m.tensor([[True, False, True], [False, False, True]])),
                      [_r(2, 3)], [(0,)], True),
    "masked_select_broadcast": (lambda m, a: m.masked_select(a, m.tensor([True, False, True])), [_r(2, 3)], [(0,)],
                                True),
}


TORCH_REFUSES = {"chain_matmul", "as_strided_scatter", "histogramdd", "histogramdd_density"}   # torch.func.vmap:
# "Batching rule not implemented"


def _run(m, name, in_dims):
    f, inputs, _, _ = CASES[name]
    args = []
    for a, d in zip(inputs, in_dims):
        if d is None:
            args.append(_t(m, a))
        elif a.dtype.kind in "iub":    # indices and masks: each row a permutation of the row given
            args.append(_t(m, np.stack([np.roll(a, b) for b in range(B)])))
        else:
            args.append(_t(m, np.stack([a + 0.25 * b for b in range(B)])))
    return f, args


@pytest.mark.parametrize("name,in_dims", [(n, d) for n, c in CASES.items() for d in c[2]])
def test_composite_matches_the_loop(dg, name, in_dims):
    f, args = _run(dg, name, in_dims)
    vm = _vm(dg)
    diff = CASES[name][3]
    if diff:
        args = [a.requires_grad_() if a.dtype.is_floating_point else a for a in args]
    vm.FALLBACKS.clear()
    got = dg.vmap(lambda *a: f(dg, *a), in_dims=in_dims)(*args)
    assert not vm.FALLBACKS, f"{name} fell back for {sorted(set(vm.FALLBACKS))}"
    rows = [f(dg, *[a if d is None else a[b] for a, d in zip(args, in_dims)]) for b in range(B)]
    for k, g in enumerate(_leaves(got)):
        want = np.stack([_leaves(r)[k].detach().numpy() for r in rows])
        assert g.shape == want.shape
        np.testing.assert_allclose(g.detach().numpy(), want, rtol=1e-10, atol=1e-10)
    if diff:
        weights = [dg.tensor(np.linspace(-1, 1, g.numel()).reshape(tuple(g.shape))) for g in _leaves(got)]
        params = [a for a in args if a.requires_grad]
        gv = dg.autograd.grad(sum((g * w).sum() for g, w in zip(_leaves(got), weights)), params, allow_unused=True)
        gl = dg.autograd.grad(sum((_leaves(r)[k] * w[b]).sum() for b, r in enumerate(rows)
                                  for k, w in enumerate(weights)), params, allow_unused=True)
        for x, y in zip(gv, gl):
            assert (x is None) == (y is None)
            if x is not None:
                    np.testing.assert_allclose(x.numpy(), y.numpy(), rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("name,in_dims", [(n, d) for n, c in CASES.items() for d in c[2]])
def test_composite_matches_torch_func(name, in_dims):
    torch = pytest.importorskip("torch")
    if name in TORCH_REFUSES:
        pytest.skip(f"torch.func.vmap refuses {name}")
    import dyngrad
    f, args = _run(dyngrad, name, in_dims)
    got = dyngrad.vmap(lambda *a: f(dyngrad, *a), in_dims=in_dims)(*args)
    targs = [torch.tensor(a.numpy()) for a in args]
    want = torch.func.vmap(lambda *a: f(torch, *a), in_dims=in_dims)(*targs)
    for g, w in zip(_leaves(got), _leaves(want)):
        np.testing.assert_allclose(g.numpy(), w.numpy(), rtol=1e-10, atol=1e-10)


def test_constructors_of_a_batched_row(dg):
    """The legacy typed constructors, tensor/as_tensor/new, scalar_tensor and fill give each row's own values (the
    legacy Tensor(row) refuses: it cannot hold a row); detach_ cuts the batch from the graph."""
    vm = _vm(dg)
    x = dg.tensor(_r(B, 4), requires_grad=True)
    y = x * 2
    vm.FALLBACKS.clear()
    for make in (dg.DoubleTensor, dg.tensor, dg.as_tensor, lambda r: r.new(r), lambda r: r.cpu()):
        got = dg.vmap(make)(y)
        np.testing.assert_array_equal(got.detach().numpy(), y.detach().numpy())
    assert not dg.vmap(dg.DoubleTensor)(y).requires_grad
    i = dg.tensor(RNG.integers(0, 9, (B, 4)))
    np.testing.assert_array_equal(dg.vmap(dg.LongTensor)(i).numpy(), i.numpy())
    with pytest.raises(TypeError, match="FloatTensor: expected a tensor of dtype float32"):
        dg.vmap(dg.FloatTensor)(y)
    with pytest.raises(RuntimeError, match="legacy constructor"):
        dg.vmap(dg.Tensor)(y)
    s = dg.tensor(_r(B))
    got = dg.vmap(lambda r: dg.scalar_tensor(r, dtype=dg.float32))(s)
    assert got.dtype == dg.float32 and got.shape == (B,)
    np.testing.assert_allclose(got.numpy(), s.numpy().astype(np.float32))
    got = dg.vmap(lambda r, v: dg.fill(r, v), in_dims=(None, 0))(dg.zeros(2, 3), s)
    np.testing.assert_array_equal(got.numpy(), np.broadcast_to(s.numpy().astype(np.float32)[:, None, None], (B, 2, 3)))
    np.testing.assert_array_equal(dg.vmap(dg.from_dlpack)(y.detach()).numpy(), y.detach().numpy())
    got = dg.vmap(lambda r: r.new_empty_strided((2, 2), (2, 1)))(y)
    assert tuple(got.shape) in ((2, 2), (B, 2, 2)) and got.dtype == y.dtype
    assert not vm.FALLBACKS, sorted(set(vm.FALLBACKS))
    z = x.detach() * 3
    z.requires_grad_()
    w = z * 1.0
    dg.vmap(lambda r: r.detach_())(w)
    assert not w.requires_grad and w.grad_fn is None


RANDOM = {
    "normal": lambda m, r: m.normal(r, 0.5),
    "poisson": lambda m, r: m.poisson(r * 4),
    "binomial": lambda m, r: m.binomial(r * 0 + 20, r),
    "multinomial": lambda m, r: m.multinomial(r, 3, replacement=True),
    "randint_like": lambda m, r: m.randint_like(r, 1000),
    "rrelu": lambda m, r: m.rrelu(r - 0.5, training=True),
    "rrelu_": lambda m, r: m.rrelu_(r - 0.5, training=True),
}


@pytest.mark.parametrize("name", sorted(RANDOM))
def test_random_draws_follow_randomness(dg, name):
    """'error' refuses the draw; 'different' gives each of equal rows its own draw, with no fallback loop; 'same'
    gives equal rows for randint_like (its input is only a shape) and refuses the draws parametrised by the batched
    input, as torch.func does."""
    vm = _vm(dg)
    f = RANDOM[name]
    row = RNG.uniform(0.1, 0.9, (5, 6))
    x = dg.tensor(np.stack([row] * 4))
    with pytest.raises(RuntimeError, match="randomness"):
        dg.vmap(lambda r: f(dg, r))(x)
    vm.FALLBACKS.clear()
    got = dg.vmap(lambda r: f(dg, r), randomness="different")(x)
    assert not vm.FALLBACKS, sorted(set(vm.FALLBACKS))
    want = f(dg, x[0])
    assert tuple(got.shape) == (4,) + tuple(want.shape) and got.dtype == want.dtype
    v = got.numpy()
    assert not all(np.array_equal(v[0], v[k]) for k in range(1, 4))
    if name == "multinomial":
        assert ((v >= 0) & (v < 6)).all()
    if name == "binomial":
        assert ((v >= 0) & (v <= 20)).all() and (v == np.round(v)).all()
    if name.startswith("rrelu"):     # negative inputs scaled by a slope in [1/8, 1/3], positive ones kept
        neg = row - 0.5 < 0
        slopes = v[:, neg] / (row - 0.5)[neg]
        assert ((slopes >= 1 / 8 - 1e-6) & (slopes <= 1 / 3 + 1e-6)).all()
        np.testing.assert_allclose(v[:, ~neg], np.broadcast_to((row - 0.5)[~neg], v[:, ~neg].shape))
    if name == "randint_like":
        same = dg.vmap(lambda r: f(dg, r), randomness="same")(x).numpy()
        assert all(np.array_equal(same[0], same[k]) for k in range(1, 4))
    else:
        with pytest.raises(RuntimeError, match="same randomness with a batched tensor input"):
            dg.vmap(lambda r: f(dg, r), randomness="same")(x)


def test_one_hot_needs_num_classes(dg):
    """num_classes=-1 would size the result from the batch's values: refused, as torch.func does."""
    i = dg.tensor(RNG.integers(0, 5, (B, 4)))
    with pytest.raises(RuntimeError, match="explicit positive num_classes"):
        dg.vmap(lambda r: dg.nn.functional.one_hot(r))(i)


@pytest.mark.parametrize("name", ["svd_lowrank", "pca_lowrank"])
def test_lowrank_follows_randomness(dg, name):
    """A rank-2 row is recovered exactly by every row's own sketch ('different', no loop) and by the shared one
    ('same'); a full-rank row's rank-2 sketches differ between equal rows with 'different' only; 'error' refuses
    the draw."""
    vm = _vm(dg)
    op = getattr(dg, name)
    low = _r(6, 2) @ _r(2, 5)
    x = dg.tensor(np.stack([low + b for b in range(B)]) if name == "svd_lowrank" else np.stack([low] * B))
    with pytest.raises(RuntimeError, match="randomness"):
        dg.vmap(lambda r: op(r, q=2))(x)
    for mode in ("different", "same"):
        vm.FALLBACKS.clear()
        U, S, V = dg.vmap(lambda r: op(r, q=3, niter=1), randomness=mode)(x)
        assert not vm.FALLBACKS
        rec = (U * S.unsqueeze(-2)) @ V.mT
        want = x.numpy() if name == "svd_lowrank" else x.numpy() - x.numpy().mean(-2, keepdims=True)
        if name == "svd_lowrank":
            want = want if np.linalg.matrix_rank(want[1]) <= 3 else None
        if want is not None:
            np.testing.assert_allclose(rec.numpy(), want, atol=1e-8)
    full = dg.tensor(np.stack([_r(6, 5)] * B))
    for mode, equal in (("different", False), ("same", True)):
        S = dg.vmap(lambda r: op(r, q=2, niter=0)[1], randomness=mode)(full).numpy()
        assert all(np.allclose(S[0], S[k]) for k in range(1, B)) == equal


def _stacked(m, a, shape_front):
    n = int(np.prod(shape_front))
    if a.dtype.kind in "iub":
        rows = [np.roll(a, k) for k in range(n)]
    else:
        rows = [a + 0.25 * k for k in range(n)]
    return _t(m, np.stack(rows).reshape(tuple(shape_front) + a.shape))


@pytest.mark.parametrize("name", sorted(n for n, c in CASES.items() if any(d is not None for d in c[2][-1])))
def test_composite_under_nested_vmap(dg, name):
    """Two levels at once (the rules see two batch dims): vmap(vmap(f)) against the double loop, no fallback."""
    f, inputs, variants, _ = CASES[name]
    in_dims = variants[-1]
    vm = _vm(dg)
    args = [_t(dg, a) if d is None else _stacked(dg, a, (2, B)) for a, d in zip(inputs, in_dims)]
    vm.FALLBACKS.clear()
    got = dg.vmap(dg.vmap(lambda *a: f(dg, *a), in_dims=in_dims), in_dims=in_dims)(*args)
    assert not vm.FALLBACKS, sorted(set(vm.FALLBACKS))
    for i in range(2):
        for b in range(B):
            row = f(dg, *[a if d is None else a[i, b] for a, d in zip(args, in_dims)])
            for g, w in zip(_leaves(got), _leaves(row)):
                np.testing.assert_allclose(g[i, b].detach().numpy(), w.detach().numpy(), rtol=1e-10, atol=1e-10)


_PER_SAMPLE = [(n, d) for n, c in sorted(CASES.items()) if c[3] for d in c[2]
               if None in d and any(x is not None for x in d)]


@pytest.mark.parametrize("name,in_dims", _PER_SAMPLE)
def test_per_sample_gradients_through_composites(dg, name, in_dims):
    """vmap(grad(f)) with respect to the unbatched operands (a per-sample copy of each, Note [Transforms inside
    vmap]) against the loop of grads."""
    f, args = _run(dg, name, in_dims)
    argnums = tuple(k for k, (a, d) in enumerate(zip(args, in_dims)) if d is None and a.dtype.is_floating_point)
    if not argnums:
        pytest.skip("no floating unbatched operand")

    def loss(*a):
        return sum((leaf * leaf).sum() for leaf in _leaves(f(dg, *a)) if leaf.dtype.is_floating_point)
    vm = _vm(dg)
    vm.FALLBACKS.clear()
    got = dg.vmap(dg.func.grad(loss, argnums=argnums), in_dims=in_dims)(*args)
    assert not vm.FALLBACKS, sorted(set(vm.FALLBACKS))
    for b in range(B):
        row = [a if d is None else a[b] for a, d in zip(args, in_dims)]
        want = dg.func.grad(loss, argnums=argnums)(*row)
        for g, w in zip(_leaves(got), _leaves(want)):
            np.testing.assert_allclose(g[b].numpy(), w.numpy(), rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("name", ["nonzero", "argwhere", "unique", "unique_consecutive", "where", "masked_select",
                                  "arange"])
def test_dynamic_shapes_are_refused(dg, name):
    """Ops whose result's shape the row's values set refuse under vmap, as torch.func does, even when every row's
    result would have the same shape (the loop would have stacked them)."""
    x = dg.tensor(np.stack([np.arange(1.0, 5.0)] * B))
    call = {"nonzero": lambda r: dg.nonzero(r), "argwhere": lambda r: dg.argwhere(r), "unique": lambda r: dg.unique(r),
            "unique_consecutive": lambda r: dg.unique_consecutive(r), "where": lambda r: dg.where(r > 0),
            "masked_select": lambda r: dg.masked_select(dg.ones(4), r > 0), "arange": lambda r: dg.arange(r[0])}[name]
    with pytest.raises(RuntimeError, match="dynamic shape|batched bound"):
        dg.vmap(call)(x)


def test_as_strided_offset_counts_from_the_row(dg):
    """An explicit storage_offset is counted from each row's start, as torch.func counts it."""
    torch = pytest.importorskip("torch")
    x = np.arange(24.0).reshape(3, 8)
    got = dg.vmap(lambda r: dg.as_strided(r, (2, 2), (1, 2), 1))(dg.tensor(x)).numpy()
    want = torch.func.vmap(lambda r: torch.as_strided(r, (2, 2), (1, 2), 1))(torch.tensor(x)).numpy()
    np.testing.assert_array_equal(got, want)


def test_resize_as_of_a_row(dg):
    """resize_as_ to the row's own shape leaves it as it is; to another shape it refuses (a row owns no storage)."""
    x = dg.tensor(_r(B, 4))
    for f in (lambda r: dg.resize_as_(r, dg.zeros(4)), lambda r: r.resize_as_(dg.zeros(4))):
        np.testing.assert_array_equal(dg.vmap(f)(x).numpy(), x.numpy())
    for f in (lambda r: dg.resize_as_(r, dg.zeros(2, 2)), lambda r: r.resize_as_(dg.zeros(2, 2))):
        with pytest.raises(RuntimeError, match="resize_as_ to another shape"):
            dg.vmap(f)(x)
