"""dyngrad.func (torch.func) on both engines: each transform against torch.func where torch is installed, and
against explicit loops / finite differences; composition in several orders; misuse errors."""
import numpy as np
import pytest


def _t(dg, a, requires_grad=False):
    return dg.tensor(np.asarray(a, dtype=np.float64), requires_grad=requires_grad)


def _np(t):
    return t.detach().numpy()


X = np.array([0.3, -1.2, 0.8])
Y = np.array([[0.5, -0.1, 0.2], [1.0, 0.4, -0.7]])


def f_scalar(x):
    return (x.sin() * x).sum() + (x * x).exp().mean()


def f_vector(x):
    return (x.tanh() * x[0]).exp()


def _fd_jacobian(fn, x, eps=1e-6):
    cols = []
    for k in range(x.size):
        e = np.zeros_like(x)
        e.flat[k] = eps
        cols.append((fn(x + e) - fn(x - e)) / (2 * eps))
    return np.stack(cols, -1).reshape(np.shape(fn(x)) + x.shape)


def _np_f_vector(x):
    return np.exp(np.tanh(x) * x[0])


def _np_f_scalar(x):
    return np.sum(np.sin(x) * x) + np.mean(np.exp(x * x))


def test_grad_and_value(dg):
    func = dg.func
    g, v = func.grad_and_value(f_scalar)(_t(dg, X))
    np.testing.assert_allclose(_np(v), _np_f_scalar(X))
    np.testing.assert_allclose(_np(g), _fd_jacobian(_np_f_scalar, X), rtol=1e-6)
    assert not g.requires_grad
    # argnums and has_aux
    gx, gy = func.grad(lambda x, y: (x * y).sum(), argnums=(0, 1))(_t(dg, X), _t(dg, X[::-1]))
    np.testing.assert_allclose(_np(gx), X[::-1])
    np.testing.assert_allclose(_np(gy), X)
    g, aux = func.grad(lambda x: ((x * x).sum(), {"n": x.numel()}), has_aux=True)(_t(dg, X))
    np.testing.assert_allclose(_np(g), 2 * X)
    assert aux == {"n": 3}


def test_jacobians_agree_and_match_finite_differences(dg):
    func = dg.func
    x = _t(dg, X)
    want = _fd_jacobian(_np_f_vector, X)
    for jac in (func.jacrev(f_vector), func.jacfwd(f_vector), func.jacrev(f_vector, chunk_size=1)):
        np.testing.assert_allclose(_np(jac(x)), want, rtol=1e-6, atol=1e-9)
    # two inputs, a matrix input
    jx, jy = func.jacfwd(lambda x, y: y @ x, argnums=(0, 1))(x, _t(dg, Y))
    np.testing.assert_allclose(_np(jx), Y)
    assert tuple(jy.shape) == (2, 2, 3)
    np.testing.assert_allclose(_np(jy)[1, 1], X)


def test_hessian_in_every_order(dg):
    func = dg.func
    x = _t(dg, X)
    want = _fd_jacobian(lambda z: _fd_jacobian(_np_f_scalar, z, 1e-5), X, 1e-5)
    for h in (func.hessian(f_scalar), func.jacrev(func.jacfwd(f_scalar)), func.jacfwd(func.jacfwd(f_scalar)),
              func.jacrev(func.jacrev(f_scalar)), func.jacrev(func.grad(f_scalar))):
        np.testing.assert_allclose(_np(h(x)), want, rtol=1e-5, atol=1e-5)


def test_grad_of_grad_and_jvp_of_grad(dg):
    func = dg.func
    x = _t(dg, X)
    v = _t(dg, [1.0, -0.5, 2.0])
    H = _np(func.hessian(f_scalar)(x))
    # grad(grad): d/dx sum(grad f) = H @ 1
    np.testing.assert_allclose(_np(func.grad(lambda z: func.grad(f_scalar)(z).sum())(x)), H.sum(1), rtol=1e-10)
    # jvp of grad: H v (forward over reverse); vjp of grad: H^T v
    np.testing.assert_allclose(_np(func.jvp(func.grad(f_scalar), (x,), (v,))[1]), H @ _np(v), rtol=1e-10)
    _, vjp_fn = func.vjp(func.grad(f_scalar), x)
    np.testing.assert_allclose(_np(vjp_fn(v)[0]), H.T @ _np(v), rtol=1e-10)
    # jvp of jvp: the second directional derivative v^T H v
    second = func.jvp(lambda z: func.jvp(f_scalar, (z,), (v,))[1], (x,), (v,))[1]
    np.testing.assert_allclose(_np(second), _np(v) @ H @ _np(v), rtol=1e-10)
    hv = dg.autograd.functional.hvp(f_scalar, x, v)[1]
    np.testing.assert_allclose(_np(hv), H @ _np(v), rtol=1e-10)


def test_vjp_jvp_linearize(dg):
    func = dg.func
    x, u, v = _t(dg, X), _t(dg, [1.0, 2.0, 3.0]), _t(dg, [0.5, 0.0, -1.0])
    J = _fd_jacobian(_np_f_vector, X)
    out, vjp_fn = func.vjp(f_vector, x)
    np.testing.assert_allclose(_np(out), _np_f_vector(X))
    np.testing.assert_allclose(_np(vjp_fn(u)[0]), J.T @ _np(u), rtol=1e-6)
    out, jv = func.jvp(f_vector, (x,), (v,))
    np.testing.assert_allclose(_np(jv), J @ _np(v), rtol=1e-6)
    out, jvp_fn = func.linearize(f_vector, x)
    np.testing.assert_allclose(_np(jvp_fn(v)), J @ _np(v), rtol=1e-6)


def test_functional_call_and_stack_module_state(dg):
    func, nn = dg.func, dg.nn
    dg.manual_seed(0)
    model = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 2)).double()
    x = _t(dg, Y)
    params = {k: v.detach() * 2 for k, v in model.named_parameters()}
    got = func.functional_call(model, params, (x,))
    w0, b0, w1, b1 = (params[k] for k in ("0.weight", "0.bias", "2.weight", "2.bias"))
    np.testing.assert_allclose(_np(got), _np((x @ w0.T + b0).tanh() @ w1.T + b1))
    np.testing.assert_allclose(_np(model(x)), _np((x @ model[0].weight.T + model[0].bias).tanh() @ model[2].weight.T
                                                  + model[2].bias))   # restored
    # two dicts, strict, repeated keys
    half = dict(list(params.items())[:2]), dict(list(params.items())[2:])
    np.testing.assert_allclose(_np(func.functional_call(model, half, x)), _np(got))
    with pytest.raises(RuntimeError, match="Missing key"):
        func.functional_call(model, half[0], (x,), strict=True)
    with pytest.raises(ValueError, match="appeared in multiple dictionaries"):
        func.functional_call(model, (half[0], half[0]), (x,))
    # gradient with respect to the given parameters: a MAML-style inner step, against the module's own gradient
    loss = lambda p: func.functional_call(model, p, (x,)).square().sum()
    g = func.grad(loss)(dict(model.named_parameters()))
    model.zero_grad()
    model(x).square().sum().backward()
    for k, p in model.named_parameters():
        np.testing.assert_allclose(_np(g[k]), _np(p.grad), rtol=1e-12)
    # stack_module_state: ensembles, checked against each model
    models = [nn.Linear(3, 2).double() for _ in range(3)]
    stacked, buffers = func.stack_module_state(models)
    assert tuple(stacked["weight"].shape) == (3, 2, 3) and stacked["weight"].requires_grad and buffers == {}
    for i, m in enumerate(models):
        one = {k: v[i] for k, v in stacked.items()}
        np.testing.assert_allclose(_np(func.functional_call(models[0], one, (x,))), _np(m(x)))


def test_tied_weights(dg):
    func, nn = dg.func, dg.nn
    model = nn.Sequential(nn.Linear(2, 2, bias=False), nn.Linear(2, 2, bias=False)).double()
    model[1].weight = model[0].weight
    w = _t(dg, [[1.0, 2.0], [3.0, 4.0]])
    x = _t(dg, [[1.0, -1.0]])
    np.testing.assert_allclose(_np(func.functional_call(model, {"0.weight": w}, (x,))), _np(x @ w.T @ w.T))
    got = func.functional_call(model, {"0.weight": w}, (x,), tie_weights=False)
    np.testing.assert_allclose(_np(got), _np(x @ w.T @ model[0].weight.T))


def test_functionalize_is_the_identity(dg):
    f = lambda x: x.add_(1)
    assert dg.func.functionalize(f) is f
    with pytest.raises(RuntimeError, match="invalid remove argument"):
        dg.func.functionalize(f, remove="views")


def test_misuse(dg):
    func = dg.func
    x = _t(dg, X)
    with pytest.raises(RuntimeError, match="Expected f\\(\\*args\\) to return a scalar Tensor"):
        func.grad(lambda z: z * 2)(x)
    with pytest.raises(RuntimeError, match="Expected primals to be a tuple"):
        func.jvp(f_vector, x, (x,))
    with pytest.raises(RuntimeError, match="same python structure"):
        func.jvp(lambda a, b: a + b, (x, x), (x,))
    with pytest.raises(RuntimeError, match="argnums"):
        func.grad(f_scalar, argnums=3)(x)
    with pytest.raises(ValueError, match="chunk_size"):
        func.jacrev(f_vector, chunk_size=0)
    with pytest.raises(RuntimeError, match="should be a tuple: \\(output, aux\\)"):
        func.grad(f_scalar, has_aux=True)(x)


def _misuse_cases(m):
    """Misuse of the transforms, as (name, call) on engine m (dyngrad, dyngrad.reference or torch)."""
    func = m.func
    x, y = m.tensor(np.ones((3, 4))), m.tensor(np.ones((5, 4)))
    return [
        ("in_dim out of range", lambda: func.vmap(lambda a: a, in_dims=2)(x)),
        ("in_dims of a wrong type", lambda: func.vmap(lambda a: a, in_dims="0")(x)),
        ("in_dims a list", lambda: func.vmap(lambda a: a, in_dims=[0])(x)),
        ("in_dims of the wrong length", lambda: func.vmap(lambda a, b: a, in_dims=(0, 0, 0))(x, x)),
        ("in_dims of the wrong structure", lambda: func.vmap(lambda a: a, in_dims=((0,),))(x)),
        ("an in_dim for a number", lambda: func.vmap(lambda a, b: a * b)(x, 2.0)),
        ("an in_dim for a 0-d tensor", lambda: func.vmap(lambda a: a)(m.tensor(1.0))),
        ("mismatched batch sizes", lambda: func.vmap(lambda a, b: a + b)(x, y)),
        ("no tensor to map", lambda: func.vmap(lambda: x)()),
        ("a non-tensor output", lambda: func.vmap(lambda a: 3)(x)),
        ("out_dims of a wrong type", lambda: func.vmap(lambda a: a, out_dims="0")(x)),
        ("out_dims of the wrong length", lambda: func.vmap(lambda a: a, out_dims=(0, 0))(x)),
        ("if on a batched tensor", lambda: func.vmap(lambda a: a if a.sum() > 0 else -a)(x)),
        (".item() inside vmap", lambda: func.vmap(lambda a: a * a.sum().item())(x)),
        ("a random op in randomness='error'", lambda: func.vmap(lambda a: a + m.rand(4))(x)),
        ("a bad randomness", lambda: func.vmap(lambda a: a, randomness="bogus")(x)),
        ("a non-scalar grad", lambda: func.grad(lambda a: a)(x)),
        ("a non-tensor grad input", lambda: func.grad(lambda a: a)(3.0)),
        ("a non-tensor jvp primal", lambda: func.jvp(lambda a: a, (3.0,), (x,))),
        ("jvp's shapes differ", lambda: func.jvp(lambda a: a, (x,), (y,))),
        ("a non-tensor jvp output", lambda: func.jvp(lambda a: 3, (x,), (x,))),
        ("a non-tensor vjp output", lambda: func.vjp(lambda a: 3, x)),
        ("a non-tensor cotangent", lambda: func.vjp(lambda a: a * 2, x)[1](3.0)),
        ("a cotangent of another shape", lambda: func.vjp(lambda a: a * 2, x)[1](y)),
        ("a non-tensor jacrev output", lambda: func.jacrev(lambda a: 3)(x)),
        ("a non-tensor jacfwd output", lambda: func.jacfwd(lambda a: 3)(x)),
    ]


def test_misuse_raises_torch_funcs_types(dg):
    """Each misuse raises the exception type torch.func raises (torch 2.13), on both engines, with a message that
    names the transform."""
    torch = pytest.importorskip("torch")
    import warnings

    def outcome(call):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                call()
            except Exception as exc:  # noqa: BLE001  the type is what is compared
                return exc
        return None
    ours, theirs = _misuse_cases(dg), _misuse_cases(torch)
    for (name, call), (_, torch_call) in zip(ours, theirs):
        got, want = outcome(call), outcome(torch_call)
        assert want is not None, f"{name}: torch accepts it"
        assert type(got) is type(want), f"{name}: {type(got).__name__} ({got}), torch {type(want).__name__} ({want})"
        assert any(word in str(got) for word in ("vmap", "grad", "jvp", "vjp", "jacrev", "jacfwd")), (name, str(got))


def test_against_torch_func(dg):
    torch = pytest.importorskip("torch")
    tf = torch.func

    def net(m, x, w1, w2):
        return (m.tanh(x @ w1) @ w2).sum(-1).square().mean()

    rng = np.random.default_rng(1)
    xs, w1, w2 = rng.standard_normal((4, 3)), rng.standard_normal((3, 5)), rng.standard_normal((5, 2))
    v = rng.standard_normal((3, 5))
    ours = dg.func.hessian(lambda w: net(dg, _t(dg, xs), w, _t(dg, w2)))(_t(dg, w1))
    theirs = tf.hessian(lambda w: net(torch, torch.tensor(xs), w, torch.tensor(w2)))(torch.tensor(w1))
    np.testing.assert_allclose(_np(ours), theirs.numpy(), rtol=1e-9, atol=1e-12)
    ours = dg.func.jvp(lambda w: net(dg, _t(dg, xs), w, _t(dg, w2)), (_t(dg, w1),), (_t(dg, v),))
    theirs = tf.jvp(lambda w: net(torch, torch.tensor(xs), w, torch.tensor(w2)), (torch.tensor(w1),),
                    (torch.tensor(v),))
    for a, b in zip(ours, theirs):
        np.testing.assert_allclose(_np(a), b.numpy(), rtol=1e-10)
    ours = dg.func.jacrev(lambda x: dg.tanh(x @ _t(dg, w1)))(_t(dg, xs))
    theirs = tf.jacrev(lambda x: torch.tanh(x @ torch.tensor(w1)))(torch.tensor(xs))
    np.testing.assert_allclose(_np(ours), theirs.numpy(), rtol=1e-10, atol=1e-14)


def test_vmap_composes_with_grad_and_jvp(dg):
    """Per-sample gradients (vmap of grad) and batched jvps against the explicit loops (Note [Transforms inside
    vmap]; tests/test_vmap.py has more)."""
    func = dg.func
    rng = np.random.default_rng(2)
    w, xs = _t(dg, rng.standard_normal((3, 2))), _t(dg, rng.standard_normal((5, 3)))
    loss = lambda w, x: (x @ w).tanh().sum()
    per_sample = func.vmap(func.grad(loss), in_dims=(None, 0))(w, xs)
    loop = [func.grad(loss)(w, xs[i]) for i in range(5)]
    np.testing.assert_allclose(_np(per_sample), np.stack([_np(g) for g in loop]), rtol=1e-12)
    jv = func.vmap(lambda x: func.jvp(lambda z: z.sin(), (x,), (dg.ones_like(x),))[1])(xs)
    np.testing.assert_allclose(_np(jv), np.cos(_np(xs)), rtol=1e-12)


def test_distribution_with_numpy_forward_under_vmap(dg):
    """Gamma.cdf's forward reads values into numpy and validates its argument with a check over every row: under
    vmap it is batched by the pointwise rule and the check is one answer for all rows (torch's _is_all_true), so
    vmap(grad), jacfwd and jacrev work; an invalid row still raises."""
    x = dg.tensor([0.5, 1.0, 2.0], dtype=dg.float64)
    rate = dg.tensor(1.5, dtype=dg.float64)

    def cdf_in_x(v):
        return dg.distributions.Gamma(dg.tensor(2.0, dtype=dg.float64), rate).cdf(v)

    def cdf_in_concentration(c):
        return dg.distributions.Gamma(c, rate).cdf(x)

    def central(f, v, h=1e-6):
        return np.array([(f(dg.tensor(v + h * e)) - f(dg.tensor(v - h * e))).numpy() / (2 * h)
                         for e in np.eye(len(v))]).T

    np.testing.assert_allclose(dg.func.vmap(cdf_in_x)(x).numpy(), cdf_in_x(x).numpy(), rtol=1e-12)
    dcdf = dg.func.vmap(dg.func.grad(cdf_in_x))(x).numpy()
    np.testing.assert_allclose(np.diag(central(cdf_in_x, x.numpy())), dcdf, rtol=1e-6)
    np.testing.assert_allclose(dg.func.jacfwd(cdf_in_x)(x).numpy(), np.diag(dcdf), rtol=1e-10, atol=1e-14)
    c = dg.tensor([2.0, 2.0, 2.0], dtype=dg.float64)
    np.testing.assert_allclose(dg.func.jacrev(cdf_in_concentration)(c).numpy(),
                               central(cdf_in_concentration, c.numpy()), rtol=1e-5)
    with pytest.raises(ValueError, match="support"):
        dg.func.vmap(cdf_in_x)(dg.tensor([0.5, -1.0], dtype=dg.float64))
