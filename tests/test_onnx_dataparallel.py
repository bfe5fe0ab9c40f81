"""Two of issue 24's blockers, on both engines: `import torch.onnx` (export raises, naming what to do instead) and
nn.DataParallel, which wraps a model on the one CPU device as torch does when it finds no GPU."""
import numpy as np
import pytest


def test_onnx_imports_and_export_says_what_to_do(dg):
    import importlib
    onnx = importlib.import_module(dg.__name__ + ".onnx")
    assert dg.onnx is onnx and onnx.is_in_onnx_export() is False
    model = dg.nn.Linear(3, 2)
    # the arguments a call of export evaluates exist, so the error is the one that says what to do
    with pytest.raises(NotImplementedError, match=r"onnx\.export: .*state_dict.*torch\.onnx\.export"):
        onnx.export(model, (dg.ones(1, 3),), "model.onnx", training=onnx.TrainingMode.EVAL,
                    operator_export_type=onnx.OperatorExportTypes.ONNX, input_names=["x"])
    with pytest.raises(NotImplementedError, match="dynamo_export"):
        onnx.dynamo_export(model, dg.ones(1, 3))
    with pytest.raises(TypeError):
        onnx.export(model, (dg.ones(1, 3),), "model.onnx", True)       # keyword-only after f, as torch 2.x
    torch = pytest.importorskip("torch")
    assert [m.name for m in onnx.TrainingMode] == list(torch.onnx.TrainingMode.__members__)
    assert [m.name for m in onnx.OperatorExportTypes] == list(torch.onnx.OperatorExportTypes.__members__)
    assert [int(m) for m in onnx.TrainingMode] == [int(m) for m in torch.onnx.TrainingMode.__members__.values()]


def _linear_model(lib):
    return lib.nn.Sequential(lib.nn.Linear(4, 3), lib.nn.Tanh(), lib.nn.Linear(3, 2))


def test_data_parallel_wraps_the_module(dg):
    dg.manual_seed(0)
    inner = _linear_model(dg)
    model = dg.nn.DataParallel(inner, device_ids=[0, 1], output_device=0)
    assert dg.nn.DataParallel is dg.nn.parallel.DataParallel and model.module is inner and model.device_ids == []
    assert list(model.state_dict()) == ["module." + k for k in inner.state_dict()]
    x = dg.tensor(np.linspace(-1, 1, 8, dtype=np.float32).reshape(2, 4))
    np.testing.assert_array_equal(model(x).detach().numpy(), inner(x).detach().numpy())
    model(x).sum().backward()                          # gradients reach the wrapped module's parameters
    assert all(p.grad is not None for p in inner.parameters())
    assert repr(model).startswith("DataParallel(\n  (module): Sequential(")
    with pytest.raises(RuntimeError, match="data_parallel: no GPU"):
        dg.nn.parallel.data_parallel(inner, x)


def test_data_parallel_checkpoints_load_both_ways_with_torch(dg):
    torch = pytest.importorskip("torch")
    theirs = torch.nn.DataParallel(_linear_model(torch))
    ours = dg.nn.DataParallel(_linear_model(dg))
    assert list(ours.state_dict()) == list(theirs.state_dict())
    ours.load_state_dict({k: dg.tensor(v.detach().numpy()) for k, v in theirs.state_dict().items()})
    x = np.linspace(-1, 1, 12).reshape(3, 4).astype(np.float32)
    np.testing.assert_allclose(ours(dg.tensor(x)).detach().numpy(), theirs(torch.tensor(x)).detach().numpy(),
                               rtol=1e-5, atol=1e-6)
    with pytest.raises(RuntimeError):                  # torch without GPUs raises too
        torch.nn.parallel.data_parallel(theirs.module, torch.tensor(x))
