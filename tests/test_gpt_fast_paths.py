"""The fast paths of the gpt step (Note [Fast paths of the gpt step], csrc/bindings/fast_paths.cpp): view, reshape
and transpose with plain ints, and layer_norm's fused case, give what their Python definitions give -- values,
gradients, node names and errors -- on both engines (the reference engine has no fast path: it is the oracle), and
every call they do not take still reaches the Python definition."""
import numpy as np
import pytest


def _x(dg, shape=(2, 3, 4), dtype=np.float32, seed=0, grad=True):
    return dg.tensor(np.random.default_rng(seed).normal(size=shape).astype(dtype), requires_grad=grad)


def _error(fn):
    try:
        fn()
    except Exception as exc:  # noqa: BLE001  the outcome is compared
        return type(exc).__name__, str(exc).replace("dyngrad.reference.", "dyngrad.")
    return None


SHAPE_CALLS = {
    "view ints": lambda x: x.view(6, 4),
    "view -1": lambda x: x.view(-1),
    "view tuple": lambda x: x.view((3, 2, 4)),
    "view list": lambda x: x.view([2, 12]),
    "view size": lambda x: x.view(x.shape),
    "reshape ints": lambda x: x.reshape(4, 6),
    "reshape tuple": lambda x: x.reshape((24,)),
    "reshape of a transpose (a copy)": lambda x: x.transpose(0, 2).reshape(4, 6),
    "transpose": lambda x: x.transpose(1, 2),
    "transpose negative": lambda x: x.transpose(-1, 0),
    "dg.transpose": None,       # filled per engine below
}


@pytest.mark.parametrize("name", sorted(SHAPE_CALLS))
def test_shape_calls_values_grads_and_names(dg, ref, name):
    """The same values, the same node name and the same gradient as the reference engine's Python definitions."""
    outs = []
    for lib in (dg, ref):
        fn = SHAPE_CALLS[name] or (lambda x, lib=lib: lib.transpose(x, 0, 1))
        x = _x(lib)
        y = fn(x * 1.0)
        w = lib.tensor(np.arange(y.numel(), dtype=np.float32).reshape(tuple(y.shape)))
        (y * w).sum().backward()
        outs.append((y.detach().numpy(), y.grad_fn.name(), x.grad.numpy(), y.is_contiguous()))
    (a, na, ga, ca), (b, nb, gb, cb) = outs
    np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(ga, gb)
    assert (na, ca) == (nb, cb)


def test_shape_call_node_names_are_torchs(dg):
    x = _x(dg)
    h = x * 1.0
    assert h.view(6, 4).grad_fn.name() == "ViewBackward"
    assert h.transpose(0, 1).grad_fn.name() == "TransposeBackward"
    assert dg.transpose(h, 0, 1).grad_fn.name() == "TransposeBackward"
    # a leaf's view makes a node; a no-grad tensor's makes none
    assert x.view(-1).grad_fn.name() == "ViewBackward"
    assert _x(dg, grad=False).view(-1).grad_fn is None


BAD_SHAPE_CALLS = {
    "view wrong numel": lambda lib, x: x.view(5, 5),
    "view two -1": lambda lib, x: x.view(-1, -1),
    "view bool": lambda lib, x: x.view(True, 24),
    "view float": lambda lib, x: x.view(2.0, 12),
    "view huge": lambda lib, x: x.view(2 ** 70),
    "view of a transpose": lambda lib, x: x.transpose(0, 2).view(24),
    "view str": lambda lib, x: x.view("abc"),
    "reshape wrong numel": lambda lib, x: x.reshape(7),
    "reshape bool": lambda lib, x: x.reshape((False, 24)),
    "transpose out of range": lambda lib, x: x.transpose(0, 3),
    "transpose one dim": lambda lib, x: x.transpose(0),
    "transpose float": lambda lib, x: x.transpose(0, 1.0),
    "transpose huge": lambda lib, x: x.transpose(0, 2 ** 64),
    "dg.transpose not a tensor": lambda lib, x: lib.transpose([1, 2], 0, 1),
}


@pytest.mark.parametrize("name", sorted(BAD_SHAPE_CALLS))
def test_shape_call_errors_are_the_python_definitions(cpp, ref, name):
    """A call the fast path does not take, or one the core refuses, raises what the reference engine raises."""
    got = _error(lambda: BAD_SHAPE_CALLS[name](cpp, _x(cpp)))
    want = _error(lambda: BAD_SHAPE_CALLS[name](ref, _x(ref)))
    assert got is not None and got == want


def test_view_dtype_and_numpy_ints_reach_the_python_definition(dg):
    x = _x(dg, (2, 4), grad=False)
    assert x.view(dg.int32).dtype == dg.int32
    assert tuple(x.view(np.int64(8)).shape) == (8,)
    assert tuple(x.reshape(np.int64(4), 2).shape) == (4, 2)
    assert tuple(x.transpose(np.int64(0), 1).shape) == (4, 2)


# ----- layer_norm ------------------------------------------------------------------------------------------------

LN_CALLS = {
    "module": lambda lib, F, x, w, b: lib.nn.LayerNorm(4)(x),
    "tuple shape": lambda lib, F, x, w, b: F.layer_norm(x, (4,), w, b, 1e-5),
    "int shape": lambda lib, F, x, w, b: F.layer_norm(x, 4, w, b),
    "list shape": lambda lib, F, x, w, b: F.layer_norm(x, [4], w, b, 1e-5),
    "two dims": lambda lib, F, x, w, b: F.layer_norm(x, (3, 4), None, None, 1e-5),
    "weight only": lambda lib, F, x, w, b: F.layer_norm(x, (4,), w, None, 1e-5),
    "bias only": lambda lib, F, x, w, b: F.layer_norm(x, (4,), None, b, 1e-5),
    "no affine": lambda lib, F, x, w, b: F.layer_norm(x, (4,)),
    "int eps": lambda lib, F, x, w, b: F.layer_norm(x, (4,), w, b, 1),
    "keywords": lambda lib, F, x, w, b: F.layer_norm(x, (4,), weight=w, bias=b, eps=1e-3),
    "mixed dtypes (composed)": lambda lib, F, x, w, b: F.layer_norm(x, (4,), w.double(), b, 1e-5),
    "dg.layer_norm": lambda lib, F, x, w, b: lib.layer_norm(x, (4,), w, b, 1e-5, True),
}


@pytest.mark.parametrize("name", sorted(LN_CALLS))
def test_layer_norm_values_grads_and_names(dg, ref, name):
    outs = []
    for lib in (dg, ref):
        x = _x(lib)
        w = lib.tensor(np.linspace(0.5, 1.5, 4).astype(np.float32), requires_grad=True)
        b = lib.tensor(np.linspace(-0.2, 0.3, 4).astype(np.float32), requires_grad=True)
        y = LN_CALLS[name](lib, lib.nn.functional, x, w, b)
        g = lib.tensor(np.random.default_rng(1).normal(size=tuple(y.shape)).astype(np.float32))
        y.backward(g)
        outs.append((y.detach().numpy(), y.grad_fn.name(), x.grad.numpy(),
                     None if w.grad is None else w.grad.numpy(), None if b.grad is None else b.grad.numpy()))
    for a, b_ in zip(*outs):
        if isinstance(a, str):
            assert a == b_
        elif a is None:
            assert b_ is None
        else:
            np.testing.assert_allclose(a, b_, rtol=1e-5, atol=1e-5)


def test_layer_norm_fused_node_name_and_gradcheck(dg):
    F = dg.nn.functional
    x = _x(dg, (2, 3, 4), np.float64)
    w = _x(dg, (4,), np.float64, seed=2)
    b = _x(dg, (4,), np.float64, seed=3)
    assert F.layer_norm(x, (4,), w, b, 1e-5).grad_fn.name() == "NativeLayerNormBackward"
    assert dg.autograd.gradcheck(lambda x, w, b: F.layer_norm(x, (4,), w, b, 1e-5), (x, w, b))
    assert dg.autograd.gradcheck(lambda x: F.layer_norm(x, 4, None, None, 0.5), (x,))


def test_layer_norm_module_with_parameters_and_no_grad(dg):
    ln = dg.nn.LayerNorm(4)
    x = _x(dg, grad=False)
    with dg.no_grad():
        y = ln(x)
    assert y.grad_fn is None and not y.requires_grad
    y = ln(x)
    assert y.requires_grad and y.grad_fn.name() == "NativeLayerNormBackward"


BAD_LN_CALLS = {
    "shape mismatch": lambda lib, F, x, w: F.layer_norm(x, (3,), None, None),
    "too many dims": lambda lib, F, x, w: F.layer_norm(x, (1, 2, 3, 4), None, None),
    "empty shape": lambda lib, F, x, w: F.layer_norm(x, (), None, None),
    "weight shape": lambda lib, F, x, w: F.layer_norm(x, (4,), w[:3], None),
    "bias shape": lambda lib, F, x, w: F.layer_norm(x, (4,), None, w[:2]),
    "bool shape": lambda lib, F, x, w: F.layer_norm(x, (True,), None, None),
    "float shape": lambda lib, F, x, w: F.layer_norm(x, 4.0, None, None),
    "str eps": lambda lib, F, x, w: F.layer_norm(x, (4,), None, None, "a"),
    "weight not a tensor": lambda lib, F, x, w: F.layer_norm(x, (4,), [1.0] * 4, None),
    "input not a tensor": lambda lib, F, x, w: F.layer_norm([1.0] * 4, (4,), None, None),
    "int input": lambda lib, F, x, w: F.layer_norm(lib.ones(2, 4, dtype=lib.int64), (4,), None, None),
    "complex input": lambda lib, F, x, w: F.layer_norm(lib.ones(2, 4, dtype=lib.complex64), (4,), None, None),
    "too many arguments": lambda lib, F, x, w: F.layer_norm(x, (4,), None, None, 1e-5, 1),
}


@pytest.mark.parametrize("name", sorted(BAD_LN_CALLS))
def test_layer_norm_errors_are_the_python_definitions(cpp, ref, name):
    outcomes = []
    for lib in (cpp, ref):
        w = lib.ones(4)
        outcomes.append(_error(lambda: BAD_LN_CALLS[name](lib, lib.nn.functional, _x(lib), w)))
    assert outcomes[0] is not None and outcomes[0] == outcomes[1]


def test_layer_norm_int_input_is_the_composed_path(dg):
    """An integer input is not the fused case: the Python definition composes it (or refuses it) as before."""
    got = _error(lambda: dg.nn.functional.layer_norm(dg.ones(2, 4, dtype=dg.int64), (4,)))
    assert got is not None


def test_fast_paths_leave_vmap_and_meta_to_python(dg):
    """A vmap over the calls and meta tensors still get their rules (the fast paths take plain tensors only)."""
    F = dg.nn.functional
    x = _x(dg, (3, 2, 4), grad=False)
    out = dg.func.vmap(lambda t: F.layer_norm(t.view(8).view(2, 4).transpose(0, 1).transpose(0, 1), (4,)))(x)
    want = F.layer_norm(x, (4,))
    np.testing.assert_allclose(out.numpy(), want.numpy(), rtol=1e-6, atol=1e-6)
    m = dg.empty(2, 3, 4, device="meta")
    assert tuple(F.layer_norm(m.view(6, 4).transpose(0, 1).reshape(4, 6).transpose(0, 1), (4,)).shape) == (6, 4)
    assert F.layer_norm(m.view(6, 4), (4,)).is_meta


# ----- split, chunk, embedding -------------------------------------------------------------------------------------

PIECE_CALLS = {
    "split": lambda lib, x: x.split(2, 2),
    "split dim=": lambda lib, x: x.split(3, dim=2),
    "split uneven": lambda lib, x: x.split(3, dim=-1),
    "split default dim": lambda lib, x: x.split(1),
    "split sections (Python)": lambda lib, x: x.split([1, 3], dim=2),
    "dg.split": lambda lib, x: lib.split(x, 2, dim=1),
    "dg.split positional": lambda lib, x: lib.split(x, 2, 1),
    "chunk": lambda lib, x: x.chunk(2, dim=-1),
    "chunk positional": lambda lib, x: x.chunk(3, 1),
    "dg.chunk": lambda lib, x: lib.chunk(x, 2),
}


@pytest.mark.parametrize("name", sorted(PIECE_CALLS))
def test_split_and_chunk_values_grads_and_names(dg, ref, name):
    outs = []
    for lib in (dg, ref):
        x = _x(lib)
        pieces = PIECE_CALLS[name](lib, x * 1.0)
        assert isinstance(pieces, tuple)
        loss = sum(((p * (i + 1.0)) ** 2).sum() for i, p in enumerate(pieces))
        loss.backward()
        outs.append(([p.detach().numpy() for p in pieces], [p.grad_fn.name() for p in pieces], x.grad.numpy()))
    (a, na, ga), (b, nb, gb) = outs
    assert na == nb and len(a) == len(b)
    for u, v in zip(a, b):
        np.testing.assert_array_equal(u, v)
    np.testing.assert_allclose(ga, gb, rtol=1e-6)


BAD_PIECE_CALLS = {
    "split zero": lambda lib, x: x.split(0, dim=1),
    "split bad dim": lambda lib, x: x.split(2, dim=3),
    "split bool": lambda lib, x: x.split(True),
    "split float dim": lambda lib, x: x.split(2, dim=1.0),
    "split other keyword": lambda lib, x: x.split(2, axis=1),
    "split three arguments": lambda lib, x: x.split(2, 1, 0),
    "chunk zero": lambda lib, x: x.chunk(0),
    "chunk bad dim": lambda lib, x: lib.chunk(x, 2, dim=-4),
    "chunk no argument": lambda lib, x: x.chunk(),
    "dg.split not a tensor": lambda lib, x: lib.split([1.0, 2.0], 1),
}


@pytest.mark.parametrize("name", sorted(BAD_PIECE_CALLS))
def test_split_and_chunk_errors_are_the_python_definitions(cpp, ref, name):
    got = _error(lambda: BAD_PIECE_CALLS[name](cpp, _x(cpp)))
    want = _error(lambda: BAD_PIECE_CALLS[name](ref, _x(ref)))
    assert got is not None and got == want


def test_split_of_a_no_grad_tensor_makes_no_nodes(dg):
    assert all(p.grad_fn is None for p in _x(dg, grad=False).split(2, dim=2))
    assert [p.grad_fn.name() for p in _x(dg).chunk(2, 0)] == ["SplitBackward"] * 2


EMBEDDING_CALLS = {
    "module": lambda lib, F, idx, w: lib.nn.Embedding(5, 3)(idx),
    "F.embedding": lambda lib, F, idx, w: F.embedding(idx, w),
    "1-d indices": lambda lib, F, idx, w: F.embedding(idx[0], w),
    "transposed indices": lambda lib, F, idx, w: F.embedding(idx.t(), w),
    "padding_idx (Python)": lambda lib, F, idx, w: F.embedding(idx, w, padding_idx=1),
    "dg.embedding": lambda lib, F, idx, w: lib.embedding(idx, w),
}


@pytest.mark.parametrize("name", sorted(EMBEDDING_CALLS))
def test_embedding_values_grads_and_names(dg, ref, name):
    outs = []
    for lib in (dg, ref):
        lib.manual_seed(0)
        idx = lib.tensor(np.array([[0, 4, 1, 1], [3, 1, 2, 0]]), dtype=lib.int64)
        w = _x(lib, (5, 3), seed=4)
        y = EMBEDDING_CALLS[name](lib, lib.nn.functional, idx, w)
        g = lib.tensor(np.random.default_rng(2).normal(size=tuple(y.shape)).astype(np.float32))
        y.backward(g)
        outs.append((y.detach().numpy(), y.grad_fn.name(), None if w.grad is None else w.grad.numpy()))
    (a, na, ga), (b, nb, gb) = outs
    np.testing.assert_allclose(a, b, rtol=1e-6)
    assert na == nb
    if ga is None:
        assert gb is None
    else:
        np.testing.assert_allclose(ga, gb, rtol=1e-6)


BAD_EMBEDDING_CALLS = {
    "index too large": lambda lib, F, w: F.embedding(lib.tensor([[0, 5]]), w),
    "negative index": lambda lib, F, w: F.embedding(lib.tensor([-1, 2]), w),
    "int32 indices": lambda lib, F, w: F.embedding(lib.tensor([0, 1], dtype=lib.int32), w),
    "float indices": lambda lib, F, w: F.embedding(lib.tensor([0.0, 1.0]), w),
    "1-d weight": lambda lib, F, w: F.embedding(lib.tensor([0, 1]), w[0]),
    "indices not a tensor": lambda lib, F, w: F.embedding([0, 1], w),
    "max_norm": lambda lib, F, w: F.embedding(lib.tensor([0, 1]), w, max_norm=1.0, sparse=True),
}


@pytest.mark.parametrize("name", sorted(BAD_EMBEDDING_CALLS))
def test_embedding_errors_are_the_python_definitions(cpp, ref, name):
    outcomes = [_error(lambda: BAD_EMBEDDING_CALLS[name](lib, lib.nn.functional, _x(lib, (5, 3)))) for lib in (cpp, ref)]
    assert outcomes[0] is not None and outcomes[0] == outcomes[1]


def test_embedding_gradcheck_and_frozen_weight(dg):
    idx = dg.tensor(np.array([[0, 2, 2], [1, 0, 3]]), dtype=dg.int64)
    w = _x(dg, (4, 3), np.float64, seed=5)
    assert dg.autograd.gradcheck(lambda w: dg.nn.functional.embedding(idx, w), (w,))
    frozen = _x(dg, (4, 3), grad=False)
    y = dg.nn.functional.embedding(idx, frozen)
    assert y.grad_fn is None and not y.requires_grad


# ----- the engine's sums (Note [Gradient accumulation], csrc/dyngrad/engine.cpp) -----------------------------------

def test_a_residual_gradient_summed_into_the_arriving_buffer(dg, ref):
    """A residual add hands one gradient to both inputs; where the stream's slot holds that shared tensor and the
    branch's gradient arrives fresh, the sum may go into the fresh buffer: the gradients equal the reference engine's,
    and the shared tensor (seen here by a hook that keeps it) is left as it was."""
    outs = []
    for lib in (dg, ref):
        x = _x(lib, (3, 4), np.float64)
        w = lib.tensor(np.random.default_rng(7).normal(size=(3, 4)))
        kept = []
        y = x * 2.0
        r = y + (y * 3.0).tanh()           # the stream y gets r's gradient itself and tanh's branch's, fresh
        r.register_hook(lambda g: kept.append(g))
        s = r + r.sin()                     # and again one level up
        (s * w).sum().backward()
        outs.append((x.grad.numpy(), kept[0].numpy()))
        want_r = w.numpy() * (1 + np.cos(r.detach().numpy()))
        np.testing.assert_allclose(kept[0].numpy(), want_r, rtol=1e-12)
    np.testing.assert_allclose(outs[0][0], outs[1][0], rtol=1e-12)


def test_residual_gradients_gradcheck(dg):
    x = _x(dg, (2, 3), np.float64)
    assert dg.autograd.gradcheck(lambda x: (lambda y: y + (y * 3.0).tanh() + y.exp())(x * 2.0), (x,))
    assert dg.autograd.gradgradcheck(lambda x: (lambda y: y + (y * 3.0).tanh())(x * 2.0), (x,))
