"""dyngrad.save / load: round trips of tensors, model and optimiser state dicts; the file is a plain .npz
readable by numpy, and loading never unpickles."""
import importlib

import numpy as np
import pytest


@pytest.fixture(params=["cpp", "reference"])
def dg(request):
    return importlib.import_module("dyngrad" if request.param == "cpp" else "dyngrad.reference")


def serialization(dg):
    return importlib.import_module(dg.__name__ + ".serialization")


def test_tensor_round_trip(dg, tmp_path):
    ser = serialization(dg)
    for t in [dg.randn(3, 4), dg.randn(2, dtype=dg.float64), dg.arange(5), dg.tensor([True, False]),
              dg.tensor(2.5), dg.ones(2, requires_grad=True)]:
        path = tmp_path / "t.npz"
        ser.save(t, path)
        back = ser.load(path)
        assert isinstance(back, dg.Tensor) and back.dtype == t.dtype and back.shape == t.shape
        assert back.requires_grad == t.requires_grad
        np.testing.assert_array_equal(back.detach().numpy(), t.detach().numpy())


def test_model_state_dict_round_trip_and_plain_npz(dg, tmp_path):
    ser = serialization(dg)
    model = dg.nn.Sequential(dg.nn.Linear(3, 4), dg.nn.BatchNorm1d(4), dg.nn.Linear(4, 2))
    path = tmp_path / "model.npz"
    ser.save(model.state_dict(), str(path))
    assert path.exists()                                    # no ".npz" appended twice
    with np.load(path, allow_pickle=False) as f:            # readable with numpy alone, keys as in the state dict
        assert set(f.files) == set(model.state_dict()) | {"__dyngrad__"}
        np.testing.assert_array_equal(f["0.weight"], model[0].weight.detach().numpy())
    other = dg.nn.Sequential(dg.nn.Linear(3, 4), dg.nn.BatchNorm1d(4), dg.nn.Linear(4, 2))
    other.load_state_dict(ser.load(path))
    x = dg.randn(5, 3)
    model.eval()
    other.eval()
    np.testing.assert_array_equal(model(x).detach().numpy(), other(x).detach().numpy())
    assert other[1].num_batches_tracked.dtype == dg.int64


def test_nested_objects_round_trip(dg, tmp_path):
    ser = serialization(dg)
    p = dg.nn.Parameter(dg.ones(3))
    opt = dg.optim.Adam([p], lr=0.1, betas=(0.8, 0.9))
    p.grad = dg.ones(3)
    opt.step()
    obj = {"optimizer": opt.state_dict(), "epoch": 3, "loss": float("nan"), "best": 0.5, "name": "a/b%c",
           "tags": ["x", None, True], "shape": (2, 3), "arr": np.arange(4), "weird/key": dg.zeros(1)}
    path = tmp_path / "ckpt.npz"
    ser.save(obj, path)
    back = ser.load(path)
    assert back["epoch"] == 3 and np.isnan(back["loss"]) and back["best"] == 0.5 and back["name"] == "a/b%c"
    assert back["tags"] == ["x", None, True] and back["shape"] == (2, 3)
    assert isinstance(back["arr"], np.ndarray) and back["arr"].tolist() == [0, 1, 2, 3]
    assert back["weird/key"].tolist() == [0.0]
    st = back["optimizer"]["state"][0]
    assert st["step"] == 1 and st["exp_avg"].tolist() == pytest.approx([0.2] * 3)
    assert back["optimizer"]["param_groups"][0]["betas"] == (0.8, 0.9)
    with np.load(path) as f:
        assert "state/0/exp_avg" in f.files[0:] or "optimizer/state/0/exp_avg" in f.files
        assert "weird%2Fkey" in f.files
    opt2 = dg.optim.Adam([dg.nn.Parameter(dg.ones(3))], lr=0.5)
    opt2.load_state_dict(back["optimizer"])
    assert opt2.param_groups[0]["lr"] == 0.1


def test_rejects_what_it_cannot_store_safely(dg, tmp_path):
    ser = serialization(dg)
    with pytest.raises(TypeError, match="cannot save an object of type object"):
        ser.save({"a": object()}, tmp_path / "x.npz")
    with pytest.raises(ValueError, match="two entries map to the key '0'"):
        ser.save({0: dg.ones(1), "0": dg.ones(1)}, tmp_path / "x.npz")
    # a file holding a pickled object array is refused by the loader (allow_pickle=False)
    path = tmp_path / "evil.npz"
    np.savez(path, __dyngrad__=np.frombuffer(b'{"format": "dyngrad", "version": 1, "root": '
                                             b'{"t": "ndarray", "key": "x"}}', dtype=np.uint8),
             x=np.array([object()], dtype=object))
    with pytest.raises(ValueError, match="allow_pickle"):
        ser.load(path)


def test_top_level_save_load(tmp_path):
    import dyngrad
    dyngrad.save({"w": dyngrad.ones(2)}, tmp_path / "w.npz")
    assert dyngrad.load(tmp_path / "w.npz")["w"].tolist() == [1.0, 1.0]
