"""dyngrad.autograd.functional (jacobian, hessian, vjp, jvp, hvp, vhp) against torch.autograd.functional, on both
engines, in float64."""
import importlib

import numpy as np
import pytest

torch = pytest.importorskip("torch")

RNG = np.random.default_rng(0)
X = RNG.normal(size=(3, 2))
Y = RNG.normal(size=(3, 2))
V = RNG.normal(size=(3, 2))


def F(dg):
    return importlib.import_module(dg.__name__ + ".autograd.functional")


def close(a, b):
    if isinstance(b, (tuple, list)):
        assert isinstance(a, tuple) and len(a) == len(b)
        for x, y in zip(a, b):
            close(x, y)
        return
    assert tuple(a.shape) == tuple(b.shape)
    np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-10, atol=1e-12)


# (function, inputs as numpy arrays): written once, run on dyngrad and on torch
def f_single(x):
    return x.sin() * x


def f_two_in(x, y):
    return (x * y).tanh().sum(0)


def f_two_out(x):
    return x.exp().sum(1), x * x


def f_both(x, y):
    return (x.sin() * y).sum(0), (x * x).exp() + y


def scalar(x):
    return (x ** 3).sum() * x.sum()


def scalar_two(x, y):
    return (x * y.exp()).sum() + (x ** 2).sum()


@pytest.mark.parametrize("fn,arrays,as_tuple", [
    (f_single, (X,), False), (f_single, (X,), True), (f_two_out, (X,), False), (f_two_out, (X,), True),
    (f_two_in, (X, Y), True), (f_both, (X, Y), True)],
    ids=["single", "single_tuple", "two_out", "two_out_tuple", "two_in", "both"])
def test_jacobian_matches_torch(dg, fn, arrays, as_tuple):
    ours = tuple(dg.tensor(a) for a in arrays)
    theirs = tuple(torch.tensor(a) for a in arrays)
    if not as_tuple:
        ours, theirs = ours[0], theirs[0]
    close(F(dg).jacobian(fn, ours), torch.autograd.functional.jacobian(fn, theirs))
    close(F(dg).jacobian(fn, ours, vectorize=True), torch.autograd.functional.jacobian(fn, theirs))


@pytest.mark.parametrize("fn,arrays", [(scalar, (X,)), (scalar_two, (X, Y))], ids=["one", "two"])
def test_hessian_matches_torch(dg, fn, arrays):
    ours = tuple(dg.tensor(a) for a in arrays)
    theirs = tuple(torch.tensor(a) for a in arrays)
    if len(arrays) == 1:
        ours, theirs = ours[0], theirs[0]
    close(F(dg).hessian(fn, ours), torch.autograd.functional.hessian(fn, theirs))


@pytest.mark.parametrize("name", ["vjp", "jvp", "hvp", "vhp"])
def test_products_match_torch(dg, name):
    fn = f_single if name in ("vjp", "jvp") else scalar
    out, res = getattr(F(dg), name)(fn, dg.tensor(X), dg.tensor(V))
    t_out, t_res = getattr(torch.autograd.functional, name)(fn, torch.tensor(X), torch.tensor(V))
    close(out, t_out)
    close(res, t_res)
    assert not res.requires_grad and not out.requires_grad       # detached without create_graph


def test_products_with_tuples_and_default_v(dg):
    f = F(dg)
    x, y = dg.tensor(X), dg.tensor(Y)
    tx, ty = torch.tensor(X), torch.tensor(Y)
    close(f.vjp(scalar_two, (x, y))[1], torch.autograd.functional.vjp(scalar_two, (tx, ty))[1])
    v2 = (dg.tensor(V), dg.tensor(V * 2))
    tv2 = (torch.tensor(V), torch.tensor(V * 2))
    close(f.jvp(f_both, (x, y), v2)[1], torch.autograd.functional.jvp(f_both, (tx, ty), tv2)[1])
    close(f.hvp(scalar_two, (x, y), v2)[1], torch.autograd.functional.hvp(scalar_two, (tx, ty), tv2)[1])
    close(f.vhp(scalar_two, (x, y), v2)[1], torch.autograd.functional.vhp(scalar_two, (tx, ty), tv2)[1])
    one = dg.tensor([0.7])
    close(f.jvp(lambda a: a.exp() * 3, one)[1], torch.autograd.functional.jvp(lambda a: a.exp() * 3,
                                                                               torch.tensor([0.7]))[1])
    with pytest.raises(RuntimeError, match="v can be omitted only"):
        f.vjp(f_single, x)


def test_create_graph_allows_differentiating_the_result(dg):
    f = F(dg)
    x = dg.tensor(X, requires_grad=True)
    tx = torch.tensor(X, requires_grad=True)
    jac = f.jacobian(lambda a: (a ** 3).sum(1), x, create_graph=True)
    tjac = torch.autograd.functional.jacobian(lambda a: (a ** 3).sum(1), tx, create_graph=True)
    assert jac.requires_grad
    (g,) = dg.autograd.grad(jac.sum(), x)
    (tg,) = torch.autograd.grad(tjac.sum(), tx)
    close(g, tg)
    _, jv = f.jvp(f_single, x, dg.tensor(V), create_graph=True)
    _, tjv = torch.autograd.functional.jvp(f_single, tx, torch.tensor(V), create_graph=True)
    (g,) = dg.autograd.grad(jv.sum(), x)
    (tg,) = torch.autograd.grad(tjv.sum(), tx)
    close(g, tg)


def test_unused_inputs_strict_and_argument_errors(dg):
    f = F(dg)
    x, y = dg.tensor(X), dg.tensor(Y)
    jac = f.jacobian(lambda a, b: a * 2, (x, y))
    close(jac, torch.autograd.functional.jacobian(lambda a, b: a * 2, (torch.tensor(X), torch.tensor(Y))))
    with pytest.raises(RuntimeError, match="strict mode"):
        f.jacobian(lambda a, b: a * 2, (x, y), strict=True)
    with pytest.raises(RuntimeError, match="strict mode"):
        f.vjp(lambda a: dg.ones(3), x, dg.ones(3), strict=True)
    h = f.hessian(lambda a: (a * 2).sum(), x)                  # linear: zero Hessian
    assert h.shape == (3, 2, 3, 2) and not h.numpy().any()
    with pytest.raises(RuntimeError, match="single element"):
        f.hessian(f_single, x)
    with pytest.raises(TypeError, match="Tensor or a tuple of Tensors"):
        f.jacobian(lambda a: 3.0, x)
    with pytest.raises(TypeError, match="inputs must be a Tensor"):
        f.jacobian(f_single, [1.0])
    with pytest.raises(RuntimeError, match="shape"):
        f.jvp(f_single, x, dg.ones(2))
    with pytest.raises(ValueError, match="strategy"):
        f.jacobian(f_single, x, strategy="sideways")
    with pytest.raises(ValueError, match="forward-mode"):
        f.jacobian(f_single, x, strategy="forward-mode")
    close(f.jacobian(f_single, x, vectorize=True, strategy="forward-mode"),
          torch.autograd.functional.jacobian(f_single, torch.tensor(X)))
    assert not x.requires_grad                               # the caller's tensors are left alone
