"""No internal name in what a user reads: error messages, reprs of types and help() texts name `dyngrad.Tensor`,
never `dyngrad._C.Tensor`, `_C._record_function` or a file of the shared layer `_api/` (issue 25; Note [Public type
names] in csrc/bindings/common.h)."""
import pickle
import re
import types

import pytest

INTERNAL = re.compile(r"\b_C\.|_api\b|_api/|_user_frame")


def _function_returning(dg, value):
    """A custom Function whose backward returns `value` (made per engine: it needs the engine's Function)."""
    class Bad(dg.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, grad):
            return value
    return Bad


# bad calls a new user makes; each must raise, and its message must name no internal module
BAD_CALLS = [
    ("operator with a str", lambda dg: dg.ones(2) + "a"),
    ("reflected operator", lambda dg: "a" - dg.ones(2)),
    ("hook not callable", lambda dg: dg.ones(2, requires_grad=True).register_hook(3)),
    ("calling a grad_fn", lambda dg: dg.ones(2, requires_grad=True).exp().grad_fn(1, 2, 3)),
    ("matmul with a str", lambda dg: dg.matmul(dg.ones(2), "a")),
    ("Linear on a str", lambda dg: dg.nn.Linear(2, 2)("a")),
    ("parameter assigned an int", lambda dg: setattr(dg.nn.Linear(2, 2), "weight", 3)),
    ("module assigned a tensor as child", lambda dg: dg.nn.Module().add_module("x", dg.ones(1))),
    ("backward of a str gradient", lambda dg: dg.ones(2, requires_grad=True).sum().backward("a")),
    ("backward returns a str", lambda dg: _function_returning(dg, "a").apply(dg.ones(2, requires_grad=True))
     .sum().backward()),
    ("backward returns too many", lambda dg: _function_returning(dg, (dg.ones(2), dg.ones(2)))
     .apply(dg.ones(2, requires_grad=True)).sum().backward()),
    ("record_function with an int", lambda dg: dg.profiler.record_function(3).__enter__()),
    ("index with an object", lambda dg: dg.ones(2)[object()]),
    ("tensor of an object", lambda dg: dg.tensor(object())),
    ("view with a str", lambda dg: dg.ones(2).view("a")),
    ("cat of a tensor", lambda dg: dg.cat(dg.ones(2))),
    ("len of a 0-d tensor", lambda dg: len(dg.tensor(1.0))),
    ("iterating a 0-d tensor", lambda dg: iter(dg.tensor(1.0))),
    ("float of a 2-element tensor", lambda dg: float(dg.ones(2))),
    ("shape mismatch", lambda dg: dg.ones(2) + dg.ones(3)),
    ("grad of a non-scalar", lambda dg: dg.ones(2, requires_grad=True).exp().backward()),
]


@pytest.mark.parametrize("what,call", BAD_CALLS, ids=[c[0] for c in BAD_CALLS])
def test_error_messages_name_no_internal_module(dg, what, call):
    with pytest.raises(Exception) as info:
        call(dg)
    message = str(info.value)
    assert not INTERNAL.search(message), f"{what}: {type(info.value).__name__}: {message}"


def test_types_read_as_public_names(dg):
    x = dg.ones(2, requires_grad=True)
    for obj in (x, x.exp().grad_fn, dg.float32):
        assert not INTERNAL.search(repr(type(obj))), repr(type(obj))
    assert "'Tensor'" in _message(lambda: x + "a")


def test_cpp_types_are_where_users_reach_them(cpp):
    """The C++ classes are named after their public homes, and those homes hold the same class (pickle looks
    them up there)."""
    import dyngrad.autograd.graph as graph
    assert repr(type(cpp.ones(1))) == "<class 'dyngrad.Tensor'>"
    assert repr(cpp.dtype) == "<class 'dyngrad.dtype'>"
    assert type(cpp.ones(1, requires_grad=True).exp().grad_fn) is graph.Node
    assert isinstance(cpp.ones(1, requires_grad=True).exp().grad_fn, graph.Node)
    x = cpp.arange(3.0)
    assert cpp.equal(pickle.loads(pickle.dumps(x)), x)
    assert pickle.loads(pickle.dumps(cpp.float16)) is cpp.float16
    assert "dyngrad.Tensor" in cpp.Tensor.register_hook.__doc__        # pybind11's signature line


def test_reference_node_class_is_published(ref):
    import dyngrad.reference.autograd.graph as graph
    assert isinstance(ref.ones(1, requires_grad=True).exp().grad_fn, graph.Node)


def _message(call):
    try:
        call()
    except Exception as e:  # noqa: BLE001
        return str(e)
    raise AssertionError("expected an error")


def _public_objects(dg):
    for owner in (dg, dg.Tensor, dg.nn.functional, dg.nn, dg.autograd, dg.linalg, dg.special, dg.optim):
        for name in dir(owner):
            if name.startswith("_") and not (name.startswith("__") and name.endswith("__")):
                continue
            try:
                yield f"{owner.__name__}.{name}", getattr(owner, name)
            except Exception:  # noqa: BLE001  a lazy attribute that cannot load here
                continue


def test_help_texts_name_no_internal_module(dg):
    """help() shows these docstrings (and pybind11's signatures) to users: the public functions, classes and
    methods (module docstrings are the developers' map of the layout and may name files)."""
    leaks = []
    for name, obj in _public_objects(dg):
        doc = getattr(obj, "__doc__", None)
        if isinstance(doc, str) and not isinstance(obj, types.ModuleType) and INTERNAL.search(doc):
            leaks.append((name, INTERNAL.search(doc).group(0)))
    assert not leaks, leaks
