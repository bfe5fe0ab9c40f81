"""dyngrad.testing (assert_close, make_tensor) and dyngrad.compile / dyngrad.compiler, on both engines, against
torch.testing and torch.compile's argument checks."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")

F32, F64 = np.float32, np.float64


@pytest.fixture(autouse=True)
def _keep_torch_distribution_validation():
    """Importing torch._dynamo (torch.compile, torch.compiler.list_backends) switches torch.distributions' argument
    validation off for the whole process; other tests compare with torch's default (on)."""
    saved = torch.distributions.Distribution._validate_args
    yield
    torch.distributions.Distribution.set_default_validate_args(saved)

# (actual, expected, keywords): numpy data handed to both torch and dyngrad as tensors
TENSOR_CASES = [
    (F32([1, 2, 3]), F32([1, 2.1, 3]), {}),
    (F32([[1, 2], [3, 4]]), F32([[1, 2], [3, 5]]), {}),
    (F32([1, 2, 3]), F32([1, 2.1, 3.5]), {}),
    (np.array([1, 2, 3]), np.array([1, 2, 4]), {}),
    (np.array([True, False]), np.array([True, True]), {}),
    (F32(1), F32(2), {}),
    (F64(1), F64(2), {}),
    (F32([np.nan]), F32([np.nan]), {}),
    (F32([np.nan]), F32([np.nan]), {"equal_nan": True}),
    (F32([1, np.inf]), F32([1, -np.inf]), {}),
    (F32([1, np.inf]), F32([1, np.inf]), {}),
    (F32([0]), F32([1e-4]), {}),
    (F32([0]), F32([9e-6]), {}),
    (F64([1]), F64([1 + 5e-8]), {}),
    (F32([1]), F32([2]), {"rtol": 0.1}),
    (F32([1]), F32([1.5]), {"rtol": 0.0, "atol": 0.6}),
    (F32([1]), F32([1.5]), {"rtol": 0.0, "atol": 0.4}),
    (F32([1, 2]), F32([1, 2, 3]), {}),
    (F32([1, 2]), F64([1, 2]), {}),
    (F32([1, 2]), F64([1, 2.1]), {"check_dtype": False}),
    (np.array([1, 2]), F32([1, 2]), {"check_dtype": False}),
    (np.array([1, 2]), F32([1, 2.5]), {"check_dtype": False}),
    (F32([1, 2.5]), np.array([1, 2]), {"check_dtype": False}),
    (np.array([1, 2], dtype=np.float16), np.array([1, 2.01], dtype=np.float16), {}),
    (F32([1, 2]), F32([1.5, 3]), {"msg": "boom"}),
    (F32([1, 2]), F32([1.5, 3]), {"msg": lambda m: "custom: " + m.splitlines()[0]}),
    (F32([]), F32([]), {}),
]


def _run(fn, *args, **kwargs):
    try:
        fn(*args, **kwargs)
        return "ok"
    except Exception as e:   # the type and the message, with each library's name taken out
        return type(e).__name__ + ": " + str(e).replace("torch.", "").replace("dyngrad.", "")


@pytest.mark.parametrize("actual,expected,kwargs", TENSOR_CASES)
def test_assert_close_tensors_as_torch(dg, actual, expected, kwargs):
    ours = _run(dg.testing.assert_close, dg.tensor(actual), dg.tensor(expected), **kwargs)
    theirs = _run(torch.testing.assert_close, torch.tensor(actual), torch.tensor(expected), **kwargs)
    assert ours == theirs


@pytest.mark.parametrize("actual,expected,kwargs", [
    (1.0, 1.1, {}), (1.0, 1.0 + 1e-9, {}), (1, 2, {}), (1, 1.0, {}), (1, 1.0, {"check_dtype": False}),
    (True, False, {}), ([1.0, 2.0], [1.0, 2.5], {}), ((1, 2), [1, 2], {}), ([1.0], [1.0, 2.0], {}),
    ({"a": 1.0}, {"a": 2.0}, {}), ({"a": 1}, {"b": 1}, {}), ([[1.0], [2.0]], [[1.0], [2.5]], {}),
    ("a", "b", {}), (1.0, 1.0, {"rtol": 1e-3}),
])
def test_assert_close_python_values_as_torch(dg, actual, expected, kwargs):
    assert _run(dg.testing.assert_close, actual, expected, **kwargs) == \
        _run(torch.testing.assert_close, actual, expected, **kwargs)


def test_assert_close_nested_tensors_and_type_errors(dg):
    a = [dg.tensor([1.0]), {"w": dg.tensor([2.0, 3.0])}]
    b = [dg.tensor([1.0]), {"w": dg.tensor([2.0, 3.5])}]
    with pytest.raises(AssertionError, match=r"Mismatched elements: 1 / 2 \(50\.0%\)[\s\S]*item \[1\]\['w'\]"):
        dg.testing.assert_close(a, b)
    dg.testing.assert_close(a, [dg.tensor([1.0]), {"w": dg.tensor([2.0, 3.0])}])
    with pytest.raises(TypeError):
        dg.testing.assert_close(dg.tensor([1.0]), 1.0)
    with pytest.raises(TypeError):
        dg.testing.assert_close(dg.tensor([1.0]), [1.0])


@pytest.mark.parametrize("dtype,low,high", [("float32", None, None), ("float64", -1, 1), ("int64", None, None),
                                            ("int64", 0, 2), ("bool", None, None), ("uint8", None, None),
                                            ("int8", -3, 3)])
def test_make_tensor_ranges(dg, dtype, low, high):
    dg.manual_seed(0)
    dt = getattr(dg, dtype)
    t = dg.testing.make_tensor(400, dtype=dt, device="cpu", low=low, high=high)
    ref = torch.testing.make_tensor(400, dtype=getattr(torch, dtype), device="cpu", low=low, high=high)
    assert t.dtype == dt and tuple(t.shape) == (400,)
    values, theirs = t.numpy().astype(float), ref.numpy().astype(float)
    # the same range as torch's (both cover it: 400 draws reach both ends of a small integer range)
    if dtype in ("float32", "float64"):
        lo, hi = (-9, 9) if low is None else (low, high)
        assert lo <= values.min() and values.max() < hi and values.max() - values.min() > 0.8 * (hi - lo)
    else:
        assert (values.min(), values.max()) == (theirs.min(), theirs.max())


def test_make_tensor_options(dg):
    mt = dg.testing.make_tensor
    t = mt((2, 3), dtype=dg.float32, device="cpu", noncontiguous=True)
    assert tuple(t.shape) == (2, 3) and not t.is_contiguous()
    t = mt(2, 3, dtype=dg.float64, device="cpu", requires_grad=True)
    assert t.requires_grad and t.is_leaf and tuple(t.shape) == (2, 3)
    assert (mt(500, dtype=dg.int64, device="cpu", low=0, high=2, exclude_zero=True) == 1).all()
    assert (mt(500, dtype=dg.float32, device="cpu", low=-1, high=1, exclude_zero=True) != 0).all()
    for kwargs, error in [(dict(low=3, high=2), ValueError), (dict(low=float("nan")), ValueError),
                          (dict(dtype=dg.int64, requires_grad=True), ValueError),
                          (dict(dtype=dg.uint8, low=-10, high=-1), ValueError)]:
        kwargs.setdefault("dtype", dg.float32)
        with pytest.raises(error):
            mt(3, device="cpu", **kwargs)
    with pytest.raises(TypeError):
        mt(3, dtype=dg.float32)             # device is required, as torch's


def test_compile_returns_its_argument_outside_the_static_modes(dg):
    model = dg.nn.Linear(3, 2)
    assert dg.compile(model) is model
    assert model._orig_mod is model and "_orig_mod" not in dict(model.named_modules()) \
        and list(model.state_dict()) == ["weight", "bias"]
    assert dg.compiler.compile(model, mode="max-autotune") is model
    assert dg.compile(model, fullgraph=True)._orig_mod is model          # static replay (tests/test_compile.py)

    def f(x):
        return x * 2
    assert dg.compile(f) is f
    assert dg.compile(backend="eager")(f) is f

    @dg.compile
    def g(x):
        return x + 1

    @dg.compile(mode="reduce-overhead", dynamic=True)
    def h(x):
        return x - 1
    x = dg.tensor([1.0, 2.0])
    assert g(x).tolist() == [2.0, 3.0] and h(x).tolist() == [0.0, 1.0]
    assert model.compile() is None and model(dg.ones(1, 3)).shape == (1, 2)
    assert dg.compiler.is_compiling() is False
    assert dg.compiler.disable(f) is f and dg.compiler.disable(recursive=False)(f) is f
    assert "inductor" in dg.compiler.list_backends() and "eager" in dg.compiler.list_backends(exclude_tags=())
    assert dg.compiler.list_backends() == torch.compiler.list_backends() or \
        set(dg.compiler.list_backends()) <= set(torch.compiler.list_backends(exclude_tags=()))


@pytest.mark.parametrize("kwargs,error", [
    (dict(mode="fast"), RuntimeError), (dict(backend="nope"), RuntimeError),
    (dict(mode="default", options={"a": 1}), RuntimeError), (dict(dynamic="yes"), (TypeError, AssertionError)),
])
def test_compile_rejects_what_torch_rejects(dg, kwargs, error):
    with pytest.raises(error):
        torch.compile(lambda x: x, **kwargs)
    with pytest.raises(error):
        dg.compile(lambda x: x, **kwargs)
    with pytest.raises(error):
        dg.nn.Linear(1, 1).compile(**kwargs)


def test_compile_signature_is_torchs(dg):
    import inspect
    ours, theirs = inspect.signature(dg.compile), inspect.signature(torch.compile)
    assert list(ours.parameters) == list(theirs.parameters)
    assert [p.default for p in ours.parameters.values()] == [p.default for p in theirs.parameters.values()]


def test_assert_close_allow_subclasses_false_refuses_different_tensor_types(dg):
    """allow_subclasses=False was accepted and ignored; torch refuses a Parameter compared with a Tensor."""
    p, t = dg.nn.Parameter(dg.ones(2)), dg.ones(2)
    dg.testing.assert_close(p, t)
    dg.testing.assert_close(t, dg.ones(2), allow_subclasses=False)
    with pytest.raises(TypeError, match="No comparison pair"):
        dg.testing.assert_close(p, t, allow_subclasses=False)
