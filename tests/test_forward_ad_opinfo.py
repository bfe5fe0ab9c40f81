"""Forward-mode AD fixes found by `scripts/opinfo_report.py --forward-ad` (docs/opinfo_forward_ad.md) and by the
class of bug behind them (a path chosen by `requires_grad` alone, blind to a tangent): each case's func.jvp on both
engines against float64 central differences and, where installed, torch.func.jvp on the same inputs and tangents.
"""
import numpy as np
import pytest

H = 1e-6


def _fd(dg, f, primals, tangents):
    """The central difference of f along the tangents (float64 arrays), as numpy."""
    plus = f(*(dg.tensor(p + H * t) for p, t in zip(primals, tangents)))
    minus = f(*(dg.tensor(p - H * t) for p, t in zip(primals, tangents)))
    return (np.asarray(plus.detach().numpy()) - np.asarray(minus.detach().numpy())) / (2 * H)


def _check(dg, f, torch_f, primals, tangents, rtol=1e-6, atol=1e-7):
    out, tangent = dg.func.jvp(f, tuple(dg.tensor(p) for p in primals), tuple(dg.tensor(t) for t in tangents))
    got = np.asarray(tangent.detach().numpy())
    np.testing.assert_allclose(got, _fd(dg, f, primals, tangents), rtol=1e-5, atol=1e-6)
    try:
        import torch
    except ImportError:
        return
    import torch.autograd.forward_ad as fwAD       # not torch.func.jvp: torch's module hooks refuse functorch
    with fwAD.dual_level():
        out = torch_f(*(fwAD.make_dual(torch.tensor(p), torch.tensor(t)) for p, t in zip(primals, tangents)))
        expected = fwAD.unpack_dual(out).tangent
    np.testing.assert_allclose(got, expected.detach().numpy(), rtol=rtol, atol=atol)


# in-place view ops on a dual tensor: the tangent kept its old shape (t_ of a square matrix: the primal transposed,
# its tangent not, a silent wrong jvp; of a non-square one, a broadcast error)
INPLACE_VIEWS = [("t_", ()), ("transpose_", (0, 1)), ("swapdims_", (1, 0)), ("swapaxes_", (0, 1)),
                 ("unsqueeze_", (1,)), ("squeeze_", ()), ("as_strided_", ((3, 3), (1, 3)))]


@pytest.mark.parametrize("name,args", INPLACE_VIEWS, ids=[n for n, _ in INPLACE_VIEWS])
@pytest.mark.parametrize("shape", [(3, 3), (1, 3, 3)], ids=["square", "leading-1"])
def test_inplace_view_ops_move_the_tangent(dg, name, args, shape):
    if name in ("t_",) and len(shape) > 2:
        pytest.skip("t_ takes at most 2-D")
    if name == "as_strided_" and len(shape) > 2:
        args = ((3, 3), (1, 3))
    rng = np.random.default_rng(1)
    x, t = rng.standard_normal(shape), rng.standard_normal(shape)
    weight = rng.standard_normal((3, 3))

    def make(lib):
        w = lib.tensor(weight)

        def f(a):
            y = a * 2.0
            getattr(y, name)(*args)
            return y * w if y.dim() == 2 else y.sum(0) * w if y.shape[0] == 1 else y.sum(1) * w
        return f
    _check(dg, make(dg), make(__import__("torch")) if _has_torch() else None, [x], [t])


def test_inplace_view_of_a_dual_primal_itself(dg):
    rng = np.random.default_rng(2)
    x, t = rng.standard_normal((3, 3)), rng.standard_normal((3, 3))
    with dg.autograd.forward_ad.dual_level():
        d = dg.autograd.forward_ad.make_dual(dg.tensor(x), dg.tensor(t))
        y = d.clone()
        y.t_()
        np.testing.assert_allclose(np.asarray(dg.autograd.forward_ad.unpack_dual(y).tangent.numpy()), t.T)


def _has_torch():
    try:
        import torch  # noqa: F401
        return True
    except ImportError:
        return False


# scaled_dot_product_attention with a float mask that is dual but does not require grad: the fused kernel took the
# call and dropped the mask's tangent
@pytest.mark.parametrize("tangent_of", ["mask", "all"])
def test_attention_mask_tangent(dg, tangent_of):
    rng = np.random.default_rng(3)
    shapes = [(2, 3, 4), (2, 5, 4), (2, 5, 4), (3, 5)]
    primals = [rng.standard_normal(s) for s in shapes]
    tangents = [rng.standard_normal(s) if tangent_of == "all" or i == 3 else np.zeros(s)
                for i, s in enumerate(shapes)]

    def make(lib):
        return lambda q, k, v, m: lib.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=m)
    _check(dg, make(dg), make(__import__("torch")) if _has_torch() else None, primals, tangents)


# norm(p="nuc"): its Function had no jvp (NotImplementedError where torch has forward AD)
@pytest.mark.parametrize("complex_", [False, True], ids=["real", "complex"])
@pytest.mark.parametrize("dim", [None, (0, 2)])
def test_nuclear_norm_tangent(dg, complex_, dim):
    rng = np.random.default_rng(4)
    shape = (3, 4) if dim is None else (3, 2, 4)

    def draw():
        a = rng.standard_normal(shape)
        return a + 1j * rng.standard_normal(shape) if complex_ else a
    x, t = draw(), draw()

    def make(lib):
        return lambda a: lib.norm(a, p="nuc", dim=dim)
    _check(dg, make(dg), make(__import__("torch")) if _has_torch() else None, [x], [t])



# fill_ with a 0-d tensor value read the value as a Python number: its tangent was dropped (a silent wrong jvp) and
# its gradient never came (v.grad None), where torch's fill_ differentiates the value
@pytest.mark.parametrize("complex_", [False, True], ids=["real", "complex"])
def test_fill_with_a_tensor_value_differentiates_the_value(dg, complex_):
    rng = np.random.default_rng(6)
    x, t = rng.standard_normal((3, 4)), rng.standard_normal((3, 4))
    v, tv = np.array(0.7), np.array(-1.3)
    if complex_:
        x, v, tv = x + 0.5j, v + 0.2j, tv - 0.4j
    w = rng.standard_normal((3, 4))

    def make(lib):
        def f(a, value):
            b = a * 1.0
            b[0].fill_(value)                  # a view: the write reaches b
            return b * lib.tensor(w)
        return f
    _check(dg, make(dg), make(__import__("torch")) if _has_torch() else None, [x, v], [t, tv])
    # reverse mode: the value's gradient is the sum of the gradient over the elements it filled
    value = dg.tensor(np.array(0.7), requires_grad=True)
    b = dg.zeros((3, 4), dtype=dg.float64)
    b.fill_(value)
    (b * dg.tensor(w)).sum().backward()
    np.testing.assert_allclose(float(value.grad), w.sum())


# quantile's tangent in q: the q path was chosen by q.requires_grad alone, so a dual q (func.jvp's) got a zero
# tangent (found by the forward-AD report's second run)
@pytest.mark.parametrize("name", ["quantile", "nanquantile"])
def test_quantile_tangent_in_q(dg, name):
    rng = np.random.default_rng(7)
    x = rng.standard_normal((3, 5))
    if name == "nanquantile":
        x[1, 2] = np.nan
    q, tq = np.array([0.2, 0.65]), rng.standard_normal(2)

    def make(lib):
        return lambda a, qq: getattr(lib, name)(a, qq, dim=1)
    _check(dg, make(dg), make(__import__("torch")) if _has_torch() else None, [x, q], [np.zeros_like(x), tq])
