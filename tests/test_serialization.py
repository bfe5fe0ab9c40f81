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
    with pytest.raises(ser.InvalidCheckpointError, match="Python objects"):
        ser.load(path)


def test_top_level_save_load(tmp_path):
    import dyngrad
    dyngrad.save({"w": dyngrad.ones(2)}, tmp_path / "w.npz")
    assert dyngrad.load(tmp_path / "w.npz")["w"].tolist() == [1.0, 1.0]


# ----- map_location, weights_only, mmap ------------------------------------------------------------------------
def test_map_location_weights_only_and_mmap(dg, tmp_path):
    ser = serialization(dg)
    obj = {"w": dg.randn(3, 4), "b": dg.arange(3), "g": dg.ones(2, requires_grad=True), "s": dg.tensor(1.5)}
    path = tmp_path / "m.npz"
    ser.save(obj, path)
    for loc in (None, "cpu", dg.device("cpu"), {"cuda:0": "cpu"}, {"cpu": "cpu"}, lambda t, where: None):
        back = ser.load(path, map_location=loc, weights_only=True)
        np.testing.assert_array_equal(back["w"].numpy(), obj["w"].numpy())
    seen = []
    back = ser.load(path, map_location=lambda t, where: seen.append(where) or t * 2)
    assert seen == ["cpu"] * 4 and back["b"].tolist() == [0, 2, 4]
    for loc in ("cuda", "cuda:0", "mps", {"cpu": "cuda"}):
        with pytest.raises(RuntimeError, match="CPU only"):
            ser.load(path, map_location=loc)
    with pytest.raises(TypeError, match="must return a Tensor"):
        ser.load(path, map_location=lambda t, where: 3)
    with pytest.raises(TypeError, match="weights_only"):
        ser.load(path, weights_only="yes")
    m = ser.load(path, mmap=True)
    for k in obj:
        np.testing.assert_array_equal(m[k].detach().numpy(), obj[k].detach().numpy())
        assert m[k].dtype == obj[k].dtype and m[k].requires_grad == obj[k].requires_grad
    before = path.read_bytes()
    m["w"].add_(1)                        # copy-on-write pages, as torch's mmap=True: the file is unchanged
    np.testing.assert_allclose(m["w"].numpy(), obj["w"].numpy() + 1)
    assert path.read_bytes() == before
    import io
    with pytest.raises(ValueError, match="mmap=True needs a file path"):
        ser.load(io.BytesIO(before), mmap=True)
    assert ser.load(io.BytesIO(before))["b"].tolist() == [0, 1, 2]


def test_load_state_dict_assign_from_mmap(dg, tmp_path):
    ser = serialization(dg)
    model = dg.nn.Linear(3, 2)
    ser.save(model.state_dict(), tmp_path / "l.npz")
    other = dg.nn.Linear(3, 2)
    other.load_state_dict(ser.load(tmp_path / "l.npz", mmap=True), assign=True)
    x = dg.randn(4, 3)
    np.testing.assert_array_equal(other(x).detach().numpy(), model(x).detach().numpy())


# ----- Note [Loading untrusted files]: crafted files -------------------------------------------------------------
def _npz(path, **arrays):
    with open(path, "wb") as fh:
        np.savez(fh, **arrays)


def _meta(text):
    return np.frombuffer(text.encode(), dtype=np.uint8)


def test_load_refuses_crafted_files_with_one_error_type(dg, tmp_path):
    import pickle
    import zipfile
    ser = serialization(dg)
    Err = ser.InvalidCheckpointError
    assert issubclass(Err, RuntimeError) and issubclass(Err, pickle.UnpicklingError)
    good = tmp_path / "good.npz"
    ser.save({"a": dg.arange(1000), "b": [dg.ones(2)]}, good)
    data = good.read_bytes()
    cases = {}
    # truncated at many points (header, data, central directory)
    for cut in (0, 1, 10, 40, 100, len(data) // 2, len(data) - 30, len(data) - 1):
        cases[f"trunc{cut}"] = data[:cut]
    cases["magic"] = b"NOTAZIP!" + data[8:]
    np.save(tmp_path / "x.npy", np.arange(3))
    cases["npy"] = (tmp_path / "x.npy").read_bytes()
    cases["pickle"] = pickle.dumps({"a": 1})
    # .npy header claiming a huge shape: must fail before allocating
    huge = np.lib.format.header_data_from_array_1_0(np.arange(3))
    huge["shape"] = (2 ** 40, 2 ** 20)
    import io
    buf = io.BytesIO()
    np.lib.format.write_array_header_1_0(buf, huge)
    buf.write(np.arange(3).tobytes())
    with zipfile.ZipFile(tmp_path / "huge.npz", "w") as z:
        z.writestr("__dyngrad__.npy", _npy_bytes(_meta('{"format": "dyngrad", "version": 1, "root": '
                                                        '{"t": "tensor", "key": "x"}}')))
        z.writestr("x.npy", buf.getvalue())
    cases["huge"] = (tmp_path / "huge.npz").read_bytes()
    for name, blob in cases.items():
        p = tmp_path / f"{name}.bad"
        p.write_bytes(blob)
        with pytest.raises(Err, match="^load: "):
            ser.load(p)
    # malformed metadata, deep nesting, complex arrays, missing keys
    deep = '{"t": "list", "items": [' * 5000 + ']}' * 5000
    deeper = '[' * 200000 + ']' * 200000
    metas = {
        "deep": '{"format": "dyngrad", "version": 1, "root": ' + deep + '}',
        "deeper": deeper,
        "nokey": '{"format": "dyngrad", "version": 1, "root": {"t": "tensor", "key": "missing"}}',
        "noitems": '{"format": "dyngrad", "version": 1, "root": {"t": "dict"}}',
        "badtype": '{"format": "dyngrad", "version": 1, "root": {"t": "banana"}}',
        "notjson": '{"format": "dyngrad", "vers',
        "version": '{"format": "dyngrad", "version": 99, "root": {"t": "value", "v": 1}}',
        "list": '[1, 2, 3]',
        "baditem": '{"format": "dyngrad", "version": 1, "root": {"t": "dict", "items": [[1.5, {}]]}}',
    }
    for name, text in metas.items():
        p = tmp_path / f"{name}.npz"
        _npz(p, __dyngrad__=_meta(text), x=np.ones(2))
        with pytest.raises(Err, match="^load: "):
            ser.load(p)
    p = tmp_path / "complex.npz"
    _npz(p, __dyngrad__=_meta('{"format": "dyngrad", "version": 1, "root": {"t": "tensor", "key": "x"}}'),
         x=np.ones(2, dtype=np.complex64))
    with pytest.raises(Err, match="complex"):
        ser.load(p)
    _npz(p, x=np.ones(2, dtype=np.complex128))          # a plain npz too
    with pytest.raises(Err, match="complex"):
        ser.load(p)
    with pytest.raises(TypeError, match="complex"):
        ser.save({"x": np.ones(2, dtype=np.complex64)}, p)


def _npy_bytes(array):
    import io
    buf = io.BytesIO()
    np.save(buf, array)
    return buf.getvalue()


def test_load_fuzz_random_corruption(dg, tmp_path):
    """Random byte flips and truncations of a real checkpoint: either a valid load or InvalidCheckpointError
    (never another exception, a crash or a huge allocation)."""
    ser = serialization(dg)
    good = tmp_path / "good.npz"
    ser.save({"w": dg.randn(4, 5), "opt": {"state": {0: {"step": 3, "m": dg.zeros(5)}}, "lr": 0.1}}, good)
    data = bytearray(good.read_bytes())
    rng = np.random.default_rng(0)
    p = tmp_path / "fuzz.npz"
    for trial in range(150):
        blob = bytearray(data)
        for _ in range(int(rng.integers(1, 4))):
            blob[int(rng.integers(len(blob)))] = int(rng.integers(256))
        if trial % 5 == 0:
            blob = blob[:int(rng.integers(len(blob)))]
        p.write_bytes(bytes(blob))
        try:
            ser.load(p)
        except ser.InvalidCheckpointError:
            pass


def test_save_refuses_self_containing_and_too_deep(dg, tmp_path):
    ser = serialization(dg)
    a = []
    a.append(a)
    with pytest.raises(ValueError, match="contains itself"):
        ser.save(a, tmp_path / "a.npz")
    deep = dg.ones(1)
    for _ in range(ser.MAX_DEPTH + 2):
        deep = [deep]
    with pytest.raises(ValueError, match="nested more than"):
        ser.save(deep, tmp_path / "a.npz")
    ok = dg.ones(1)
    for _ in range(ser.MAX_DEPTH - 1):
        ok = [ok]
    ser.save(ok, tmp_path / "ok.npz")
    back = ser.load(tmp_path / "ok.npz")
    for _ in range(ser.MAX_DEPTH - 1):
        back = back[0]
    assert back.tolist() == [1.0]
