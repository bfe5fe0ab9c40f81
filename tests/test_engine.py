"""The graph semantics both engines share: accumulation, deep graphs, retain/create_graph, hooks, custom Functions,
in-place recording, grad modes and threads, numpy interop, repr and dtype promotion (docs/design.md)."""
import gc
import os
import threading
import weakref

import numpy as np
import pytest

from helpers import dtype_name


def leaf(dg, values, dtype="float64"):
    return dg.tensor(np.asarray(values, dtype=dtype), requires_grad=True)


def grad_of(dg, fn, x):
    (g,) = dg.autograd.grad(fn(x), x)
    return g.numpy()


# ---- graph shapes ----

def test_diamond(dg):
    x = leaf(dg, [1.0, -2.0, 3.0])
    y = x * x + x                       # x reaches y along two paths
    y.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), 2 * np.array([1.0, -2.0, 3.0]) + 1)


def test_reused_subexpression(dg):
    x = leaf(dg, [0.5, 1.5])
    a = x.exp()                         # one node, four consumers
    out = a * a + a.sin() + a / 2 + a
    out.sum().backward()
    e = np.exp([0.5, 1.5])
    np.testing.assert_allclose(x.grad.numpy(), (2 * e + np.cos(e) + 0.5 + 1) * e, rtol=1e-12)


def test_value_used_many_times(dg):
    x = leaf(dg, 2.0)
    total = x * 0.0
    for i in range(200):
        total = total + x * float(i)
    total.backward()
    assert x.grad.item() == sum(range(200))


def test_wide_fan_in_and_out(dg):
    xs = [leaf(dg, [float(i)]) for i in range(50)]
    s = dg.stack(xs).sum() * dg.cat(xs).sum()
    s.backward()
    for x in xs:
        assert x.grad.item() == 2 * sum(range(50))


def test_leaf_accumulates_across_backward_calls(dg):
    x = leaf(dg, [1.0, 2.0])
    (x * 3).sum().backward()
    (x * x).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [3 + 2, 3 + 4])
    x.grad.zero_()
    np.testing.assert_allclose(x.grad.numpy(), [0, 0])
    x.grad = None
    (x * 2).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [2, 2])


def test_backward_with_gradient_argument(dg):
    x = leaf(dg, [1.0, 2.0, 3.0])
    y = x * x
    y.backward(dg.tensor(np.array([1.0, 0.5, -1.0])))
    np.testing.assert_allclose(x.grad.numpy(), [2.0, 2.0, -6.0])


def test_backward_inputs_restricts_accumulation(dg):
    x, w = leaf(dg, [1.0, 2.0]), leaf(dg, [3.0, 4.0])
    (x * w).sum().backward(inputs=[x])
    np.testing.assert_allclose(x.grad.numpy(), [3.0, 4.0])
    assert w.grad is None


def test_autograd_grad_multiple_inputs_and_unused(dg):
    x, w, unused = leaf(dg, [1.0, 2.0]), leaf(dg, [3.0, 4.0]), leaf(dg, [0.0])
    y = (x * w).sum()
    gx, gw, gu = dg.autograd.grad(y, [x, w, unused], allow_unused=True)
    np.testing.assert_allclose(gx.numpy(), [3.0, 4.0])
    np.testing.assert_allclose(gw.numpy(), [1.0, 2.0])
    assert gu is None
    assert x.grad is None and w.grad is None   # grad() does not accumulate


def test_autograd_grad_outputs(dg):
    x = leaf(dg, [1.0, 2.0])
    (g,) = dg.autograd.grad(x * 3, x, grad_outputs=dg.tensor(np.array([2.0, -1.0])))
    np.testing.assert_allclose(g.numpy(), [6.0, -3.0])


def test_autograd_backward_function(dg):
    x = leaf(dg, [1.0, 2.0])
    dg.autograd.backward([(x * x).sum(), (x * 2).sum()])
    np.testing.assert_allclose(x.grad.numpy(), [4.0, 6.0])


def test_graph_introspection(dg):
    x, w = leaf(dg, [1.0]), dg.tensor(np.array([2.0]))
    y = (x * w).exp()
    assert y.grad_fn.name() == "ExpBackward"
    mul_node, nr = y.grad_fn.next_functions[0]
    assert mul_node.name() == "MulBackward" and nr == 0
    acc, _ = mul_node.next_functions[0]
    assert acc.name() == "AccumulateGrad" and acc.variable is x
    assert mul_node.next_functions[1][0] is None          # w does not require grad
    assert x.is_leaf and not y.is_leaf and x.grad_fn is None


# ---- deep graphs: no recursion anywhere ----

def deep_chain(dg, x, n):
    y = x
    for _ in range(n):
        y = y * 1.0
    return y


# The C++ engine runs the 1e6-op chain in the default run. The pure-Python engine is ~20x slower per op,
# so its default depth is 2e4 (far past Python's recursion limit of 1000, which is what a recursive walk would hit)
# and the full 1e6 runs in test_deep_chain_reference_full_depth, marked slow (run it with --runslow).
DEPTH = {"dyngrad": 10 ** 6, "dyngrad.reference": 2 * 10 ** 4}


@pytest.mark.parametrize("input_needs_grad", [False, True])
def test_weight_gradient_in_the_weights_layout(dg, input_needs_grad):
    # Note [Gradient in the operand's layout]: x @ w.T gives w a gradient with w's own strides (no copy), also in a
    # first layer, where x needs no gradient and w.T is not saved
    rng = np.random.default_rng(0)
    x = dg.tensor(rng.normal(size=(5, 3)), requires_grad=input_needs_grad)
    w = leaf(dg, rng.normal(size=(4, 3)))
    g = rng.normal(size=(5, 4))
    arriving = []
    w.register_hook(lambda grad: arriving.append(grad.stride()))   # before accumulation (which would copy)
    (x @ w.T).backward(dg.tensor(g))
    assert arriving == [w.stride()] == [(3, 1)]
    np.testing.assert_allclose(w.grad.numpy(), g.T @ x.detach().numpy(), rtol=1e-12)
    if input_needs_grad:
        np.testing.assert_allclose(x.grad.numpy(), g @ w.detach().numpy(), rtol=1e-12)


def test_batched_input_times_matrix_is_one_product(dg):
    # Note [Folded batch]: (b, n, k) @ (k, m) is recorded as one (b*n, k) @ (k, m) product between two reshapes,
    # as torch computes it; values and gradients as the per-batch products
    rng = np.random.default_rng(1)
    x = leaf(dg, rng.normal(size=(2, 3, 4, 5)))
    w = leaf(dg, rng.normal(size=(5, 6)))
    y = x @ w
    assert tuple(y.shape) == (2, 3, 4, 6)
    product = y.grad_fn.next_functions[0][0]
    assert product.name() == "MatmulBackward"
    g = rng.normal(size=(2, 3, 4, 6))
    y.backward(dg.tensor(g))
    xv, wv = x.detach().numpy(), w.detach().numpy()
    np.testing.assert_allclose(y.detach().numpy(), xv @ wv, rtol=1e-12)
    np.testing.assert_allclose(w.grad.numpy(), np.einsum("abik,abim->km", xv, g), rtol=1e-12)
    np.testing.assert_allclose(x.grad.numpy(), g @ wv.T, rtol=1e-12)


def test_deep_chain_backward_and_free(dg):
    x = leaf(dg, [1.5])
    y = x * 1.0
    alive = graph_watch(dg, y)
    y = deep_chain(dg, y, DEPTH[dg.__name__])
    y.sum().backward()
    assert x.grad.item() == 1.0
    del y                                 # freeing the (released) chain from its head: every node goes
    gc.collect()
    assert alive() == 0


def graph_watch(dg, first):
    """A function telling whether a graph is still alive: in C++, how many nodes more than before it existed are
    alive (the leak counter), in the reference, whether the node of `first` (the graph's first op) is."""
    if hasattr(dg._C, "_live_node_count"):
        gc.collect()
        before = dg._C._live_node_count() - 2       # (first's node and its leaf's AccumulateGrad exist already)
        return lambda: dg._C._live_node_count() - before
    node = weakref.ref(first.grad_fn)
    return lambda: int(node() is not None)


def test_deep_chain_freed_without_backward(dg):
    """An unreleased graph is freed with its last tensor, however deep (Note [Iterative graph destruction]: no
    recursion), from the head, or with the leaf dropped first (the graph still holds it)."""
    for depth, leaf_first in ((DEPTH[dg.__name__], False), (DEPTH[dg.__name__] // 10, True)):
        x = leaf(dg, [1.0])
        y = x * 1.0
        alive = graph_watch(dg, y)
        y = deep_chain(dg, y, depth)
        assert alive() >= (depth if hasattr(dg._C, "_live_node_count") else 1)
        if leaf_first:
            del x
        del y                                 # the whole graph goes at once, from the head
        gc.collect()
        assert alive() == 0


@pytest.mark.slow
def test_deep_chain_reference_full_depth(ref):
    x = leaf(ref, [1.5])
    y = deep_chain(ref, x, 10 ** 6)
    y.sum().backward()
    assert x.grad.item() == 1.0
    del y
    y = deep_chain(ref, x, 10 ** 6)
    del y


def test_deep_chain_second_order(dg):
    x = leaf(dg, [0.3])
    y = x
    for _ in range(2000):
        y = y.sin() * 0.5 + y * 0.5
    (g,) = dg.autograd.grad(y.sum(), x, create_graph=True)
    (h,) = dg.autograd.grad(g.sum(), x)
    assert np.isfinite(h.item())


# ---- retain_graph, create_graph ----

def test_retain_graph(dg):
    x = leaf(dg, [1.0, 2.0])
    y = (x.exp() * x).sum()
    y.backward(retain_graph=True)
    first = x.grad.numpy().copy()
    y.backward()
    np.testing.assert_allclose(x.grad.numpy(), 2 * first)
    with pytest.raises(RuntimeError, match="retain_graph=True"):
        y.backward()


def test_second_derivative(dg):
    x = leaf(dg, [0.5, -1.0, 2.0])
    (g,) = dg.autograd.grad((x ** 3).sum(), x, create_graph=True)
    assert g.requires_grad
    np.testing.assert_allclose(g.detach().numpy(), 3 * x.detach().numpy() ** 2)
    (h,) = dg.autograd.grad(g.sum(), x)
    np.testing.assert_allclose(h.numpy(), 6 * x.detach().numpy())


def test_third_derivative(dg):
    x = leaf(dg, [0.7])
    (g1,) = dg.autograd.grad(x.sin(), x, create_graph=True)
    (g2,) = dg.autograd.grad(g1, x, create_graph=True)
    (g3,) = dg.autograd.grad(g2, x)
    np.testing.assert_allclose(g3.numpy(), -np.cos(0.7))


def test_hessian_vector_product(dg):
    rng = np.random.default_rng(0)
    a_np, x_np, v_np = rng.standard_normal((4, 4)), rng.standard_normal(4), rng.standard_normal(4)
    a, x, v = dg.tensor(a_np), leaf(dg, x_np), dg.tensor(v_np)
    f = (x @ a @ x) + x.sin().sum()
    (g,) = dg.autograd.grad(f, x, create_graph=True)
    (hv,) = dg.autograd.grad((g * v).sum(), x)
    hessian = a_np + a_np.T - np.diag(np.sin(x_np))
    np.testing.assert_allclose(hv.numpy(), hessian @ v_np, rtol=1e-12)


def test_backward_create_graph_gives_differentiable_grad(dg):
    x = leaf(dg, [2.0])
    (x ** 3).sum().backward(create_graph=True)
    assert x.grad.requires_grad
    g = x.grad
    x.grad = None
    g.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [12.0])


# ---- hooks and retain_grad ----

def test_hook_replaces_gradient(dg):
    x = leaf(dg, [1.0, 2.0])
    handle = x.register_hook(lambda g: g * 10)
    (x * 3).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [30.0, 30.0])
    handle.remove()
    x.grad = None
    (x * 3).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [3.0, 3.0])


def test_hook_on_intermediate_changes_upstream(dg):
    x = leaf(dg, [1.0, 2.0])
    h = x * 2
    seen = []
    h.register_hook(lambda g: seen.append(g.numpy().copy()))      # returns None: gradient kept
    h.register_hook(lambda g: g + 1)
    (h * h).sum().backward()
    np.testing.assert_allclose(seen[0], [4.0, 8.0])
    np.testing.assert_allclose(x.grad.numpy(), 2 * (np.array([4.0, 8.0]) + 1))


def test_retain_grad(dg):
    x = leaf(dg, [1.0, 2.0])
    h = x * 3
    h.retain_grad()
    assert h.retains_grad
    y = x * 2
    (h * h + y).sum().backward()
    np.testing.assert_allclose(h.grad.numpy(), 2 * h.detach().numpy())
    assert y.grad is None


# ---- custom Function ----

def make_functions(dg):
    class Cube(dg.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x ** 3

        @staticmethod
        def backward(ctx, grad):
            (x,) = ctx.saved_tensors
            return grad * 3 * x ** 2

    class ScaledAdd(dg.autograd.Function):
        @staticmethod
        def forward(ctx, a, b, scale):
            ctx.scale = scale
            ctx.flags = ctx.needs_input_grad
            return a + b * scale

        @staticmethod
        def backward(ctx, grad):
            return grad, grad * ctx.scale, None

    class WrongArity(dg.autograd.Function):
        @staticmethod
        def forward(ctx, a, b):
            return a * b

        @staticmethod
        def backward(ctx, grad):
            return grad

    return Cube, ScaledAdd, WrongArity


def test_custom_function(dg):
    Cube, ScaledAdd, _ = make_functions(dg)
    x = leaf(dg, [1.0, -2.0])
    y = Cube.apply(x)
    assert y.grad_fn.name() == "CubeBackward"
    (y * Cube.apply(x)).sum().backward()                     # used twice, saved tensors read twice
    np.testing.assert_allclose(x.grad.numpy(), 6 * np.array([1.0, -2.0]) ** 5)


def test_custom_function_needs_input_grad(dg):
    _, ScaledAdd, _ = make_functions(dg)
    a, b = leaf(dg, [1.0]), dg.tensor(np.array([2.0]))
    out = ScaledAdd.apply(a, b, 4.0)
    assert out.grad_fn.name() == "ScaledAddBackward"
    out.sum().backward()
    np.testing.assert_allclose(a.grad.numpy(), [1.0])
    b2 = leaf(dg, [2.0])
    out2 = ScaledAdd.apply(dg.tensor(np.array([1.0])), b2, 4.0)
    out2.sum().backward()
    np.testing.assert_allclose(b2.grad.numpy(), [4.0])


def test_custom_function_needs_input_grad_flags(dg):
    seen = []

    class Probe(dg.autograd.Function):
        @staticmethod
        def forward(ctx, a, b, k):
            seen.append(tuple(ctx.needs_input_grad))
            return a * b

        @staticmethod
        def backward(ctx, grad):
            return grad, grad, None

    Probe.apply(leaf(dg, [1.0]), dg.tensor(np.array([2.0])), 3)
    assert seen == [(True, False, False)]


def test_custom_function_wrong_arity(dg):
    _, _, WrongArity = make_functions(dg)
    a, b = leaf(dg, [1.0]), leaf(dg, [2.0])
    with pytest.raises(RuntimeError, match=r"WrongArity.*1 gradient.*2 inputs"):
        WrongArity.apply(a, b).sum().backward()


def test_custom_function_second_order(dg):
    Cube, _, _ = make_functions(dg)
    x = leaf(dg, [2.0])
    (g,) = dg.autograd.grad(Cube.apply(x).sum(), x, create_graph=True)
    np.testing.assert_allclose(g.detach().numpy(), [12.0])
    (h,) = dg.autograd.grad(g.sum(), x)
    np.testing.assert_allclose(h.numpy(), [12.0])                    # d(3x^2)/dx = 6x


# ---- in-place ops ----

def test_inplace_recorded_and_grad_fn_moves(dg):
    x = leaf(dg, [1.0, 2.0])
    y = x * 2
    v0 = y._version
    y.add_(1)
    assert y._version == v0 + 1
    assert y.grad_fn.name() == "AddBackward"
    y *= x
    assert y.grad_fn.name() == "MulBackward"
    y.sum().backward()
    # y = (2x + 1) * x  ->  dy/dx = 4x + 1
    np.testing.assert_allclose(x.grad.numpy(), 4 * np.array([1.0, 2.0]) + 1)


def test_setitem_recorded(dg):
    x, v = leaf(dg, [1.0, 2.0, 3.0]), leaf(dg, 5.0)
    y = x * 1
    y[1] = v * 2
    y.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [1.0, 0.0, 1.0])
    np.testing.assert_allclose(v.grad.numpy(), 2.0)


def test_inplace_into_view_updates_base_history(dg):
    x = leaf(dg, [[1.0, 2.0], [3.0, 4.0]])
    w = leaf(dg, [10.0, 20.0])
    y = x * 1
    row = y[0]
    row.mul_(w)                                   # writes into y through the view
    np.testing.assert_allclose(y.detach().numpy(), [[10.0, 40.0], [3.0, 4.0]])
    (y * y).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [[2 * 10 * 10, 2 * 40 * 20], [6.0, 8.0]])
    np.testing.assert_allclose(w.grad.numpy(), [2 * 10 * 1, 2 * 40 * 2])


def test_augmented_assignment_into_slice(dg):
    x, d = leaf(dg, [[1.0, 2.0], [3.0, 4.0]]), leaf(dg, [5.0, 6.0])
    y = x * 1
    y[:, 0] += d                                  # __getitem__, __iadd__ on the view, __setitem__
    np.testing.assert_allclose(y.detach().numpy(), [[6.0, 2.0], [9.0, 4.0]])
    (y * y).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [[12.0, 4.0], [18.0, 8.0]])
    np.testing.assert_allclose(d.grad.numpy(), [12.0, 18.0])


def test_inplace_version_error(dg):
    x = leaf(dg, [1.0, 2.0])
    a = x.exp()                                   # exp saves its output
    b = a * 1
    a.add_(1)
    with pytest.raises(RuntimeError, match="modified in place"):
        b.sum().backward(retain_graph=True)
        a.sum().backward()
    x2 = leaf(dg, [1.0, 2.0])
    a2 = x2.exp()
    c2 = a2.sum() * 1
    a2.mul_(2)
    with pytest.raises(RuntimeError, match=r"ExpBackward.*version"):
        (c2 + a2.sum()).backward()
    # every saved tensor is checked, even one the formula happens not to read (x ** 0), as torch
    y = leaf(dg, [1.0, 2.0]) * 1.0
    z = y ** 0
    y.mul_(2)
    with pytest.raises(RuntimeError, match="modified in place"):
        z.sum().backward()


def test_leaf_inplace_error_and_no_grad_write(dg):
    x = leaf(dg, [1.0, 2.0])
    with pytest.raises(RuntimeError, match="leaf"):
        x.add_(1)
    v = x._version
    with dg.no_grad():
        x.add_(1)
        x[0] = 7.0
    np.testing.assert_allclose(x.detach().numpy(), [7.0, 3.0])
    assert x._version == v + 2 and x.requires_grad and x.is_leaf


def test_data_and_detach(dg):
    x = leaf(dg, [1.0, 2.0])
    d = x.detach()
    assert not d.requires_grad and d.grad_fn is None
    d[0] = 5.0                                     # shares memory
    assert x.detach().numpy()[0] == 5.0
    x.data = dg.tensor(np.array([3.0, 4.0]))
    np.testing.assert_allclose(x.detach().numpy(), [3.0, 4.0])
    assert x.requires_grad
    y = x * 2
    y.detach_()
    assert y.grad_fn is None and not y.requires_grad
    z = dg.tensor(np.array([1.0])).requires_grad_()
    assert z.requires_grad and z.is_leaf
    with pytest.raises(RuntimeError):
        (x * 2).requires_grad = False


# ---- grad modes ----

def test_grad_mode_context_managers(dg):
    x = leaf(dg, [1.0])
    with dg.no_grad():
        assert not dg.is_grad_enabled()
        assert not (x * 2).requires_grad
        with dg.enable_grad():
            assert (x * 2).requires_grad
        with dg.set_grad_enabled(True):
            assert (x * 2).requires_grad
        assert not (x * 2).requires_grad
    with dg.set_grad_enabled(False):
        assert not (x * 2).requires_grad
    assert dg.is_grad_enabled() and (x * 2).requires_grad
    assert dg.autograd.no_grad is dg.no_grad or dg.autograd.no_grad.__name__ == "no_grad"


def test_grad_mode_restored_after_exception(dg):
    with pytest.raises(ValueError):
        with dg.no_grad():
            raise ValueError("boom")
    assert dg.is_grad_enabled()


def test_grad_mode_decorators(dg):
    x = leaf(dg, [1.0])

    @dg.no_grad()
    def f(t):
        return t * 2

    @dg.enable_grad()
    def g(t):
        return t * 2

    @dg.set_grad_enabled(False)
    def h(t):
        return t * 2

    assert not f(x).requires_grad and dg.is_grad_enabled()
    assert not h(x).requires_grad and dg.is_grad_enabled()
    with dg.no_grad():
        assert g(x).requires_grad
        assert not dg.is_grad_enabled()


def test_set_grad_enabled_as_function(dg):
    try:
        dg.set_grad_enabled(False)
        assert not dg.is_grad_enabled()
    finally:
        dg.set_grad_enabled(True)
    assert dg.is_grad_enabled()


def test_grad_mode_is_thread_local(dg):
    seen = {}
    started, release = threading.Event(), threading.Event()

    def worker():
        seen["initial"] = dg.is_grad_enabled()
        with dg.no_grad():
            started.set()
            release.wait(5)
            seen["inside"] = dg.is_grad_enabled()

    with dg.no_grad():
        t = threading.Thread(target=worker)
        t.start()
        started.wait(5)
        main_in_no_grad = dg.is_grad_enabled()
        release.set()
        t.join()
    assert dg.is_grad_enabled()                   # the worker's no_grad did not leak here
    assert seen == {"initial": True, "inside": False}
    assert main_in_no_grad is False


# ---- threads ----

def test_threads_run_independent_backward_passes(dg):
    rng = np.random.default_rng(0)
    inputs = [(rng.standard_normal((8, 16)), rng.standard_normal((16, 4))) for _ in range(8)]

    def work(a_np, w_np):
        a, w = dg.tensor(a_np, requires_grad=True), dg.tensor(w_np, requires_grad=True)
        for _ in range(5):
            loss = ((a @ w).tanh() ** 2).mean() + (a.exp() * 0.01).sum()
            loss.backward()
        return a.grad.numpy().copy(), w.grad.numpy().copy()

    serial = [work(*p) for p in inputs]
    results = [None] * len(inputs)

    def run(i):
        results[i] = work(*inputs[i])

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(inputs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for (ga, gw), (sa, sw) in zip(results, serial):
        np.testing.assert_array_equal(ga, sa)
        np.testing.assert_array_equal(gw, sw)


# ---- numpy interop ----

def test_from_numpy_shares_memory(dg):
    arr = np.arange(6.0).reshape(2, 3)
    t = dg.from_numpy(arr)
    assert t.dtype == dg.float64 and tuple(t.shape) == (2, 3)
    arr[0, 0] = 42.0
    assert t[0, 0].item() == 42.0
    t.mul_(2)
    assert arr[1, 2] == 10.0
    back = t.numpy()
    assert np.shares_memory(back, arr)
    assert np.shares_memory(np.asarray(t), arr)


def test_from_numpy_keeps_strides_and_0d(dg):
    arr = np.arange(12.0).reshape(3, 4)[:, ::2]
    t = dg.from_numpy(arr)
    np.testing.assert_array_equal(t.numpy(), arr)
    z = dg.from_numpy(np.array(3.5))
    assert tuple(z.shape) == () and z.item() == 3.5


UNSHAREABLE_ARRAYS = {   # arrays a tensor cannot share: from_numpy refuses (as torch does), the copies convert
    "negative stride": lambda: np.arange(6.0)[::-1],
    "big-endian": lambda: np.arange(6.0, dtype=">f8"),
    "stride not a multiple of the item": lambda: np.zeros(6, dtype=[("a", "<f8"), ("b", "<i2")])["a"],
}


@pytest.mark.parametrize("kind", sorted(UNSHAREABLE_ARRAYS))
def test_from_numpy_refuses_what_it_cannot_share(dg, kind):
    arr = UNSHAREABLE_ARRAYS[kind]()
    arr[...] = np.arange(6.0)
    with pytest.raises(ValueError, match="from_numpy: .*cannot share"):
        dg.from_numpy(arr)     # a silent copy would drop the sharing from_numpy promises
    for make in (dg.tensor, dg.as_tensor, dg.asarray):
        t = make(arr)
        np.testing.assert_array_equal(t.numpy(), np.arange(6.0))
        t.add_(1)
        np.testing.assert_array_equal(arr, np.arange(6.0))     # a copy: the array is untouched
    with pytest.raises(ValueError, match="asarray: copy=False"):
        dg.asarray(arr, copy=False)


def test_tensor_copies(dg):
    arr = np.ones(3)
    t = dg.tensor(arr)
    arr[0] = 5.0
    assert t[0].item() == 1.0
    assert not np.shares_memory(t.numpy(), arr)


def test_numpy_of_requires_grad_raises(dg):
    x = leaf(dg, [1.0])
    with pytest.raises(RuntimeError, match="detach"):
        x.numpy()
    assert np.shares_memory(x.detach().numpy(), x.detach().numpy())


# ---- conversions, repr, dtypes ----

def test_item_tolist(dg):
    assert dg.tensor(2.5).item() == 2.5 and isinstance(dg.tensor(2.5).item(), float)
    assert dg.tensor(3).item() == 3 and isinstance(dg.tensor(3).item(), int)
    assert dg.tensor(True).item() is True
    assert dg.tensor([[1, 2], [3, 4]]).tolist() == [[1, 2], [3, 4]]
    assert dg.tensor([1.5, 2.0]).tolist() == [1.5, 2.0]
    assert dg.tensor(7.0).tolist() == 7.0
    assert float(dg.tensor([2.0])) == 2.0 and int(dg.tensor(3)) == 3
    assert len(dg.zeros(4, 2)) == 4
    assert [r.tolist() for r in dg.tensor([[1, 2], [3, 4]])] == [[1, 2], [3, 4]]
    assert bool(dg.tensor(1.0)) and not bool(dg.tensor(0))


REPRS = [
    (lambda dg: dg.tensor([1.0, 2.0], requires_grad=True), "tensor([1., 2.], requires_grad=True)"),
    (lambda dg: dg.tensor([1.0, 2.0], requires_grad=True) * 2, "tensor([2., 4.], grad_fn=<MulBackward>)"),
    (lambda dg: dg.tensor([1.5, 2.0], dtype=dg.float64), "tensor([1.5000, 2.0000], dtype=dyngrad.float64)"),
    (lambda dg: dg.tensor([1, 2]), "tensor([1, 2])"),
    (lambda dg: dg.tensor([True, False]), "tensor([ True, False])"),
    (lambda dg: dg.tensor([True, True]), "tensor([True, True])"),
    (lambda dg: dg.tensor(3.0), "tensor(3.)"),
    (lambda dg: dg.zeros(2, 2), "tensor([[0., 0.],\n        [0., 0.]])"),
]


@pytest.mark.parametrize("make,text", REPRS, ids=[t for _, t in REPRS])
def test_repr(dg, make, text):
    assert repr(make(dg)) == text


def test_dtype_names(dg):
    assert str(dg.float32) == "dyngrad.float32" and str(dg.int64) == "dyngrad.int64"
    assert dg.float is dg.float32 and dg.double is dg.float64 and dg.long is dg.int64
    assert dg.get_default_dtype() == dg.float32
    assert dg.zeros(2).dtype == dg.float32
    assert dg.zeros(2, dtype=np.float64).dtype == dg.float64
    assert dg.zeros(2, dtype=bool).dtype == dg.bool
    assert dg.zeros(2, dtype=int).dtype == dg.int64


CREATION_DTYPES = [
    (lambda dg: dg.tensor(1.5), "float32"),
    (lambda dg: dg.tensor([1, 2]), "int64"),
    (lambda dg: dg.tensor([True]), "bool"),
    (lambda dg: dg.tensor(np.zeros(2)), "float64"),
    (lambda dg: dg.tensor(np.zeros(2, dtype=np.float32)), "float32"),
    (lambda dg: dg.tensor([1, 2], dtype=dg.float64), "float64"),
    (lambda dg: dg.arange(5), "int64"),
    (lambda dg: dg.arange(0.0, 1.0, 0.25), "float32"),
    (lambda dg: dg.ones(2, 3), "float32"),
    (lambda dg: dg.full((2,), 7), "int64"),
    (lambda dg: dg.full((2,), 7.0), "float32"),
    (lambda dg: dg.randint(0, 5, (3,)), "int64"),
    (lambda dg: dg.zeros_like(dg.tensor([1, 2])), "int64"),
    (lambda dg: dg.rand_like(dg.zeros(2, dtype=dg.float64)), "float64"),
    (lambda dg: dg.linspace(0, 1, 5), "float32"),
    (lambda dg: dg.eye(3), "float32"),
]


@pytest.mark.parametrize("make,dtype", CREATION_DTYPES, ids=[str(i) for i in range(len(CREATION_DTYPES))])
def test_creation_dtypes(dg, make, dtype):
    assert dtype_name(make(dg)) == dtype


def test_creation_values(dg):
    np.testing.assert_array_equal(dg.arange(2, 11, 3).numpy(), [2, 5, 8])
    np.testing.assert_allclose(dg.linspace(0, 1, 5).numpy(), np.linspace(0, 1, 5))
    np.testing.assert_array_equal(dg.eye(2, 3).numpy(), np.eye(2, 3))
    np.testing.assert_array_equal(dg.full((2, 2), 3.0).numpy(), np.full((2, 2), 3.0))
    assert tuple(dg.zeros((2, 3)).shape) == (2, 3) == tuple(dg.zeros([2, 3]).shape) == tuple(dg.empty(2, 3).shape)
    r = dg.randint(3, 7, (1000,)).numpy()
    assert r.min() >= 3 and r.max() <= 6
    u = dg.rand(10000).numpy()
    assert 0 <= u.min() and u.max() < 1 and abs(u.mean() - 0.5) < 0.02
    n = dg.randn(10000).numpy()
    assert abs(n.mean()) < 0.05 and abs(n.std() - 1) < 0.05
    dg.manual_seed(7)
    a = dg.randn(5).numpy()
    dg.manual_seed(7)
    np.testing.assert_array_equal(dg.randn(5).numpy(), a)


PROMOTION = [
    # (a, b, result dtype): design.md "Type promotion"
    (("float32", [1.0]), ("float64", [1.0]), "float64"),
    (("int64", [1]), ("float32", [1.0]), "float32"),
    (("bool", [True]), ("int64", [1]), "int64"),
    (("bool", [True]), ("float64", [1.0]), "float64"),
    (("float32", [1.0]), 2.5, "float32"),
    (("float64", [1.0]), 2, "float64"),
    (("int64", [1]), 2.5, "float32"),
    (("int64", [1]), 2, "int64"),
]


@pytest.mark.parametrize("a,b,want", PROMOTION, ids=[str(i) for i in range(len(PROMOTION))])
def test_promotion(dg, a, b, want):
    ta = dg.tensor(np.asarray(a[1], dtype=a[0]))
    tb = dg.tensor(np.asarray(b[1], dtype=b[0])) if isinstance(b, tuple) else b
    results = [ta + tb, tb + ta, ta * tb]
    if a[0] != "bool":            # torch refuses subtraction with a bool operand (tests/test_ops_pointwise.py)
        results.append(ta - tb)
    for r in results:
        assert dtype_name(r) == want, (a, b, dtype_name(r))


def test_int_division_and_float_ops_on_ints(dg):
    a, b = dg.tensor([3, 4]), dg.tensor([2, 8])
    assert dtype_name(a / b) == "float32"
    np.testing.assert_allclose((a / b).numpy(), [1.5, 0.5])
    assert dtype_name(a.exp()) == "float32" and dtype_name(a.sqrt()) == "float32"
    assert dtype_name(a.sum()) == "int64" and dtype_name(dg.tensor([True, True]).sum()) == "int64"
    assert dg.tensor([True, True, False]).sum().item() == 2
    assert dtype_name(a < b) == "bool" and dtype_name(a.float()) == "float32" and dtype_name(a.double()) == "float64"
    assert dtype_name(dg.tensor([1.7]).long()) == "int64" and dg.tensor([1.7]).long().item() == 1


def test_int_tensors_cannot_require_grad(dg):
    with pytest.raises(RuntimeError, match="floating-point"):
        dg.tensor([1, 2], requires_grad=True)
    t = dg.tensor([1, 2])
    with pytest.raises(RuntimeError, match="int64"):
        t.requires_grad = True


def test_comparisons_have_no_grad(dg):
    x = leaf(dg, [1.0, 2.0])
    assert not (x > 1).requires_grad and not x.eq(x).requires_grad and not x.argmax().requires_grad
    assert x.sign().requires_grad                  # as torch: sign is recorded, with a zero gradient


def test_shape_properties(dg):
    t = dg.zeros(2, 3, 4)
    assert t.shape == (2, 3, 4) and t.size() == (2, 3, 4) and t.size(1) == 3 and t.size(-1) == 4
    assert t.ndim == 3 and t.dim() == 3 and t.numel() == 24
    assert t.stride() == (12, 4, 1) and t.is_contiguous()
    tt = t.transpose(0, 2)
    assert tt.stride() == (1, 4, 12) and not tt.is_contiguous() and tt.contiguous().is_contiguous()
    assert repr(t.shape).endswith("Size([2, 3, 4])")


def test_views_share_memory(dg):
    base = dg.zeros(3, 4)
    for view in (base.reshape(12), base.view(4, 3), base.T, base.transpose(0, 1), base[1], base[:, 1:3],
                 base.unsqueeze(0), base[None].squeeze(0), base.permute(1, 0), base[:1].expand(5, 4)):
        before = view.sum().item()
        base.add_(1)
        assert view.sum().item() == before + view.numel(), view.shape
    assert not np.shares_memory(base.reshape(12).numpy(), base.T.reshape(12).numpy())


# ---- Note [Slice gradients in place] and Note [Gradient accumulation] (buffers the engine owns) ----

def _pieces_loss(dg, x, weights):
    a, b, c = x.chunk(3, dim=0)                       # disjoint row slices
    d = x[1:5:2]                                      # strided, overlapping a and b
    e = x[:, 1:4]                                     # a slice of the other dim
    return (a * weights[0]).sum() + (b * b).sum() + (c * weights[1]).sum() + (d * 5).sum() + (e * 7).sum() \
        + (x * x).sum()


def _pieces_grad(x, w):
    g = 2 * x.copy()
    g[0:2] += w[0]
    g[2:4] += 2 * x[2:4]
    g[4:6] += w[1]
    g[1:5:2] += 5
    g[:, 1:4] += 7
    return g


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_gradients_of_many_slices_of_one_value(dg, dtype):
    rng = np.random.default_rng(7)
    x0, w = rng.standard_normal((6, 5)).astype(dtype), rng.standard_normal((2, 2, 5)).astype(dtype)
    x = dg.tensor(x0, requires_grad=True)
    weights = [dg.tensor(w[0]), dg.tensor(w[1])]
    seen = []
    x.register_hook(lambda g: seen.append(g.detach().numpy().copy()))
    _pieces_loss(dg, x, weights).backward()
    want = _pieces_grad(x0, w)
    np.testing.assert_allclose(x.grad.numpy(), want, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(seen[0], want, rtol=1e-6, atol=1e-6)
    # a non-leaf cut into pieces, with retain_grad, and create_graph (which takes the formulas' path): same numbers
    x.grad = None
    h = x * 1
    h.retain_grad()
    (gx,) = dg.autograd.grad(_pieces_loss(dg, h, weights), [x], create_graph=True)
    np.testing.assert_allclose(gx.detach().numpy(), want, rtol=1e-6, atol=1e-6)
    h.grad = None   # (autograd.grad fills retained grads too, as torch's)
    _pieces_loss(dg, h, weights).backward()
    np.testing.assert_allclose(h.grad.numpy(), want, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("shape, index", [((6, 5), np.s_[2:4]), ((6, 5), np.s_[0:1]), ((6, 5), np.s_[5:6]),
                                          ((1, 6, 5), np.s_[:, 1:3]), ((1, 1, 6, 5), np.s_[:, :, 3:6]),
                                          ((6, 5), np.s_[:, 1:3]), ((1, 6, 5), np.s_[:, 0:6:2]),
                                          ((2, 6, 5), np.s_[:, 1:3])])
def test_one_slice_gradient_is_zero_around_its_window(dg, shape, index):
    """The first slice to reach a value's pending buffer makes it: zeros outside the window (only the rest of the
    buffer is cleared when the window is one contiguous block), the slice's gradient inside; then a second slice
    adds into it."""
    for _ in range(3):                     # (buffers come back from the cache with old contents)
        x = dg.tensor(np.arange(float(np.prod(shape))).reshape(shape) + 1, requires_grad=True)
        h = x * 1                          # a non-leaf: its gradient is the pending buffer's
        (h[index] * 3).sum().backward()
        want = np.zeros(shape)
        want[index] = 3
        np.testing.assert_array_equal(x.grad.numpy(), want)
        x.grad = None
        h = x * 1
        ((h[index] * 3).sum() + (h[..., 1:2] * 2).sum()).backward()
        want[..., 1:2] += 2
        np.testing.assert_array_equal(x.grad.numpy(), want)


def test_accumulation_never_writes_into_a_gradient_someone_holds(dg):
    """v + 0 hands v's gradient on as is: v.grad (retained) and x's pending sum are one tensor; adding the other
    consumers' gradients into it in place would change v.grad."""
    x = dg.tensor([1.0, 2.0, 3.0], requires_grad=True)
    v = x + 0
    v.retain_grad()
    loss = v.sum() + (x * 3).sum() + x[0:2].sum() * 5
    loss.backward()
    assert v.grad.tolist() == [1.0, 1.0, 1.0]
    assert x.grad.tolist() == [9.0, 9.0, 4.0]


def test_the_engine_names_no_op():
    """Both engines' backward loops are generic: what an op's node does in backward is the node's own business
    (Node::apply, and Node::apply_in_place for Note [Gradients written in place]), never a special case of an OpKind."""
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
    with open(os.path.join(root, "csrc", "dyngrad", "engine.cpp"), encoding="utf-8") as f:
        assert "OpKind" not in f.read()
    with open(os.path.join(root, "python", "dyngrad", "reference", "engine.py"), encoding="utf-8") as f:
        text = f.read()
    assert ".op ==" not in text and "primitives" not in text
