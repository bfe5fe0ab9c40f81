"""Process-wide settings that torch scripts set at the top (issue 10/14): print options, determinism flags, float32
matmul precision, interop threads, warn-always, anomaly and inference-mode queries, typename and the deprecated
set_default_tensor_type; on both engines, against torch where it is installed."""
import warnings

import numpy as np
import pytest

PRINT_CASES = [
    # (set_printoptions kwargs, values)
    (dict(precision=2), [1.23456, 2.0, -0.5]),
    (dict(precision=6), [1.23456789, 2.0]),
    (dict(threshold=5), list(np.arange(10.0))),
    (dict(threshold=5, edgeitems=1), list(np.arange(10.0))),
    (dict(edgeitems=2, threshold=3), [[1.5, 2.5, 3.5, 4.5, 5.5]] * 6),
    (dict(linewidth=20), list(np.linspace(0.1, 0.9, 12))),
    (dict(sci_mode=True), [1.5, 2.25]),
    (dict(sci_mode=False), [1e-6, 123456.0]),
    (dict(profile="short"), [1.23456, 2.0]),
    (dict(profile="full"), list(np.arange(1200.0))),
]


@pytest.fixture
def restore_printoptions(dg):
    yield
    dg.set_printoptions(profile="default")


@pytest.mark.parametrize("kwargs,values", PRINT_CASES, ids=[str(k) for k, _ in PRINT_CASES])
def test_printoptions_like_torch(dg, restore_printoptions, kwargs, values):
    torch = pytest.importorskip("torch")
    try:
        torch.set_printoptions(**kwargs)
        expected = repr(torch.tensor(values, dtype=torch.float32))
    finally:
        torch.set_printoptions(profile="default")
    dg.set_printoptions(**kwargs)
    assert repr(dg.tensor(values, dtype=dg.float32)) == expected


def test_printoptions_reset_and_errors(dg, restore_printoptions):
    default = repr(dg.tensor([1.23456]))
    dg.set_printoptions(precision=1)
    assert repr(dg.tensor([1.23456])) == "tensor([1.2])"
    dg.set_printoptions(profile="default")
    assert repr(dg.tensor([1.23456])) == default == "tensor([1.2346])"
    with pytest.raises(ValueError, match="profile"):
        dg.set_printoptions(profile="long")
    with pytest.raises(TypeError, match="precision"):
        dg.set_printoptions(precision="2")
    with pytest.raises(TypeError, match="sci_mode"):
        dg.set_printoptions(sci_mode="yes")


def test_deterministic_flags(dg):
    try:
        assert not dg.are_deterministic_algorithms_enabled() and dg.get_deterministic_debug_mode() == 0
        dg.use_deterministic_algorithms(True, warn_only=True)
        assert dg.are_deterministic_algorithms_enabled() and dg.is_deterministic_algorithms_warn_only_enabled()
        assert dg.get_deterministic_debug_mode() == 1
        dg.set_deterministic_debug_mode("error")
        assert dg.get_deterministic_debug_mode() == 2 and not dg.is_deterministic_algorithms_warn_only_enabled()
        dg.set_deterministic_debug_mode(0)
        assert not dg.are_deterministic_algorithms_enabled()
        with pytest.raises(RuntimeError, match="debug_mode"):
            dg.set_deterministic_debug_mode("sometimes")
        with pytest.raises(RuntimeError, match="0, 1, or 2"):
            dg.set_deterministic_debug_mode(5)
        with pytest.raises(TypeError, match="mode"):
            dg.use_deterministic_algorithms(1)
    finally:
        dg.use_deterministic_algorithms(False)


def test_matmul_precision_interop_threads_warn_always(dg):
    assert dg.get_float32_matmul_precision() == "highest"
    try:
        dg.set_float32_matmul_precision("high")
        assert dg.get_float32_matmul_precision() == "high"
        with pytest.warns(UserWarning, match="no effect"):
            dg.set_float32_matmul_precision("fastest")
        assert dg.get_float32_matmul_precision() == "high"
    finally:
        dg.set_float32_matmul_precision("highest")
    before = dg.get_num_interop_threads()
    assert before >= 1
    dg.set_num_interop_threads(2)
    assert dg.get_num_interop_threads() == 2
    dg.set_num_interop_threads(before)
    with pytest.raises(RuntimeError, match="positive"):
        dg.set_num_interop_threads(0)
    with pytest.raises(TypeError):
        dg.set_num_interop_threads(1.5)
    assert dg.is_warn_always_enabled() is False
    dg.set_warn_always(True)
    assert dg.is_warn_always_enabled() is True
    dg.set_warn_always(False)


def test_anomaly_and_inference_queries(dg):
    assert dg.is_anomaly_enabled() is False and dg.is_anomaly_check_nan_enabled() is True
    dg.set_anomaly_enabled(True)
    try:
        assert dg.is_anomaly_enabled()
        x = dg.tensor([0.0], requires_grad=True)
        with pytest.raises(RuntimeError, match="nan|NaN"):
            (x.sqrt() * 0).sum().backward()   # d sqrt(0) = inf, times 0: nan in backward
    finally:
        dg.set_anomaly_enabled(False)
    with pytest.raises(NotImplementedError, match="check_nan"):
        dg.set_anomaly_enabled(True, check_nan=False)
    assert not dg.is_anomaly_enabled()
    assert dg.is_inference_mode_enabled() is False
    with dg.inference_mode():
        assert dg.is_inference_mode_enabled() and not dg.is_grad_enabled()
        with dg.inference_mode(False):
            assert not dg.is_inference_mode_enabled()
        assert dg.is_inference_mode_enabled()
    assert dg.is_inference_mode_enabled() is False


def test_typename_and_default_tensor_type(dg):
    assert dg.typename(dg.ones(2)) == "dyngrad.FloatTensor"
    assert dg.typename(dg.ones(2, dtype=dg.int64)) == "dyngrad.LongTensor"
    assert dg.typename(3) == "int"
    assert dg.typename(dg.nn.Linear(1, 1)).endswith("nn.modules.linear.Linear")     # torch: torch.nn.modules.linear.Linear
    try:
        with pytest.warns(UserWarning, match="deprecated"):
            dg.set_default_tensor_type(dg.DoubleTensor)
        assert dg.get_default_dtype() == dg.float64 and dg.ones(1).dtype == dg.float64
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            dg.set_default_tensor_type("dyngrad.FloatTensor")
            assert dg.get_default_dtype() == dg.float32
            with pytest.raises(TypeError, match="floating-point tensor type"):
                dg.set_default_tensor_type(dg.LongTensor)
    finally:
        dg.set_default_dtype(dg.float32)
