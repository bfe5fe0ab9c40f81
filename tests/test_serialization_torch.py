"""Checkpoints both ways with PyTorch itself (skipped without torch; the safetensors cases without the package):
torch.load reads what dyngrad.save writes, with torch's default weights_only=True, and dyngrad.load reads what
torch.save writes: every dtype, shared storages, optimizer states continuing to train alike, nested containers,
whole modules, mmap, safetensors."""
import importlib
import math
import pickle
import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")

DTYPES = ["bool", "uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16", "float32", "float64"]


@pytest.fixture(params=["cpp", "reference"])
def dg(request):
    return importlib.import_module("dyngrad" if request.param == "cpp" else "dyngrad.reference")


def host(t):
    """A tensor's values as numpy (float32 for bfloat16), for either library."""
    t = t.detach()
    if str(t.dtype).endswith("bfloat16"):
        t = t.float()
    return t.numpy()


def sample_np(name, shape=(3, 4)):
    n = math.prod(shape)
    if name == "bool":
        return (np.arange(n) % 3 == 0).reshape(shape)
    base = np.arange(n).reshape(shape) - (0 if name == "uint8" else n // 2)
    return base / 4.0 if name in ("float16", "bfloat16", "float32", "float64") else base


def make(lib, name, shape=(3, 4)):
    return lib.tensor(sample_np(name, shape)).to(getattr(lib, name))


def train_alike(dg, model, opt, twin, topt, x, steps=3):
    """A few steps of the dyngrad model and its torch twin on the same data; their parameters stay together."""
    for _ in range(steps):
        opt.zero_grad()
        topt.zero_grad()
        model(dg.tensor(x)).pow(2).sum().backward()
        twin(torch.tensor(x)).pow(2).sum().backward()
        opt.step()
        topt.step()
    for (name, p), q in zip(model.named_parameters(), twin.parameters()):
        np.testing.assert_allclose(host(p), q.detach().numpy(), rtol=1e-4, atol=1e-6, err_msg=name)


def test_torch_reads_dyngrad_checkpoints(dg, tmp_path):
    model = dg.nn.Sequential(dg.nn.Linear(3, 4), dg.nn.LayerNorm(4), dg.nn.Linear(4, 2))
    opt = dg.optim.AdamW(model.parameters(), lr=0.01)
    model(dg.randn(5, 3)).sum().backward()
    opt.step()
    w = dg.arange(24.).view(4, 6)
    obj = {"model": model.state_dict(), "optim": opt.state_dict(), "dtypes": {n: make(dg, n) for n in DTYPES},
           "views": {"w": w, "t": w.t(), "row": w[2], "cols": w[:, 1:5:2], "exp": w[:1].expand(3, 6)},
           "meta": {"epoch": 7, "size": dg.Size([2, 3]), "dtype": dg.bfloat16, "device": dg.device("cpu"),
                    "tags": ("a", None, 1.5), "set": {3}}}
    path = tmp_path / "from_dyngrad.pt"
    dg.save(obj, path)
    ckpt = torch.load(path)                         # torch 2.13's default: weights_only=True
    assert torch.serialization.get_unsafe_globals_in_checkpoint(str(path)) == []
    for name in DTYPES:
        t = ckpt["dtypes"][name]
        assert t.dtype == getattr(torch, name)
        np.testing.assert_array_equal(host(t), host(obj["dtypes"][name]))
    views = ckpt["views"]
    base = views["w"].untyped_storage().data_ptr()
    for key in ("t", "row", "cols", "exp"):
        np.testing.assert_array_equal(views[key].numpy(), host(obj["views"][key]), err_msg=key)
        assert views[key].untyped_storage().data_ptr() == base, key
    assert ckpt["meta"] == {"epoch": 7, "size": torch.Size([2, 3]), "dtype": torch.bfloat16,
                            "device": torch.device("cpu"), "tags": ("a", None, 1.5), "set": {3}}
    twin = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.LayerNorm(4), torch.nn.Linear(4, 2))
    twin.load_state_dict(ckpt["model"])
    topt = torch.optim.AdamW(twin.parameters(), lr=0.5)
    topt.load_state_dict(ckpt["optim"])
    x = np.random.default_rng(0).standard_normal((6, 3)).astype(np.float32)
    np.testing.assert_allclose(twin(torch.tensor(x)).detach().numpy(), model(dg.tensor(x)).detach().numpy(),
                               rtol=1e-5, atol=1e-6)
    train_alike(dg, model, opt, twin, topt, x)       # training continues alike from the loaded state
    assert torch.load(path, mmap=True)["dtypes"]["int16"].tolist() == make(dg, "int16").tolist()


def test_dyngrad_reads_torch_checkpoints(dg, tmp_path):
    torch.manual_seed(0)
    twin = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Tanh(), torch.nn.BatchNorm1d(4), torch.nn.Linear(4, 2))
    topt = torch.optim.Adam(twin.parameters(), lr=0.01)
    twin(torch.randn(5, 3)).sum().backward()
    topt.step()
    w = torch.arange(24.).view(4, 6)
    tied = torch.nn.Linear(6, 4, bias=False)
    obj = {"model": twin.state_dict(), "optim": topt.state_dict(),
           "dtypes": {n: torch.tensor(sample_np(n)).to(getattr(torch, n)) for n in DTYPES},
           "views": {"w": w, "t": w.t(), "row": w[2], "cols": w[:, 1:5:2], "exp": w[:1].expand(3, 6),
                     "step": torch.arange(10.)[::3], "a": tied.weight, "b": tied.weight},
           "windows": torch.arange(8.).unfold(0, 3, 1),           # overlapping: loads as a copy
           "meta": {"size": torch.Size([2]), "dtype": torch.int8, "device": torch.device("cpu"), "bytes": b"\x01",
                    "nested": [{"deep": (torch.ones(1),)}]}}
    path = tmp_path / "from_torch.pt"
    torch.save(obj, path)
    for mmap in (False, True):
        ckpt = dg.load(path, mmap=mmap)
        for name in DTYPES:
            t = ckpt["dtypes"][name]
            assert t.dtype == getattr(dg, name)
            np.testing.assert_array_equal(host(t), host(obj["dtypes"][name]))
        views = ckpt["views"]
        for key in ("t", "row", "cols", "exp", "step", "b"):
            np.testing.assert_array_equal(host(views[key]), obj["views"][key].detach().numpy(), err_msg=key)
        for key in ("t", "row", "cols", "exp"):
            assert views[key]._storage_id() == views["w"]._storage_id(), key
        assert type(views["a"]) is dg.nn.Parameter and views["a"] is views["b"]
        np.testing.assert_array_equal(ckpt["windows"].numpy(), obj["windows"].numpy())
        meta = ckpt["meta"]
        assert meta["size"] == (2,) and meta["dtype"] is dg.int8 and str(meta["device"]) == "cpu"
        assert meta["bytes"] == b"\x01" and meta["nested"][0]["deep"][0].tolist() == [1.0]
    model = dg.nn.Sequential(dg.nn.Linear(3, 4), dg.nn.Tanh(), dg.nn.BatchNorm1d(4), dg.nn.Linear(4, 2))
    model.load_state_dict(ckpt["model"])
    opt = dg.optim.Adam(model.parameters(), lr=0.5)
    opt.load_state_dict(ckpt["optim"])
    x = np.random.default_rng(1).standard_normal((6, 3)).astype(np.float32)
    train_alike(dg, model, opt, twin, topt, x)


class TorchNet(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(3, 4)
        self.norm = torch.nn.LayerNorm(4)

    def forward(self, x):
        return self.norm(self.fc(x)).relu()


def test_whole_torch_modules_load_as_dyngrad_modules(dg, tmp_path):
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.ReLU(), torch.nn.LayerNorm(4))
    path = tmp_path / "net.pt"
    torch.save(net, path)
    ser = importlib.import_module(dg.__name__ + ".serialization")
    unsafe = ["torch.nn.modules.container.Sequential", "torch.nn.modules.linear.Linear",
              "torch.nn.modules.activation.ReLU", "torch.nn.modules.normalization.LayerNorm"]
    assert sorted(ser.get_unsafe_globals_in_checkpoint(path)) == sorted(
        torch.serialization.get_unsafe_globals_in_checkpoint(str(path))) == sorted(unsafe)
    with pytest.raises(pickle.UnpicklingError, match="torch.nn.modules.container.Sequential"):
        dg.load(path)
    x = np.random.default_rng(0).standard_normal((2, 3)).astype(np.float32)
    want = net(torch.tensor(x)).detach().numpy()
    for back in (dg.load(path, weights_only=False),
                 _load_allowed(dg, ser, path, [dg.nn.Sequential, dg.nn.Linear, dg.nn.ReLU, dg.nn.LayerNorm])):
        assert type(back) is dg.nn.Sequential and type(back[0]) is dg.nn.Linear
        np.testing.assert_allclose(back(dg.tensor(x)).detach().numpy(), want, rtol=1e-5, atol=1e-6)
        assert type(back[0].weight) is dg.nn.Parameter and back[0].weight.requires_grad


def _load_allowed(dg, ser, path, classes):
    with ser.safe_globals(classes):
        return dg.load(path)


def test_refusals_for_what_dyngrad_cannot_read(dg, tmp_path):
    ser = importlib.import_module(dg.__name__ + ".serialization")
    for obj, err in [(torch.ones(2, dtype=torch.complex64), "ComplexFloatStorage"),
                     (torch.ones(2, dtype=torch.uint16), "uint16"),
                     (torch.ones(2).to_sparse(), "sparse")]:
        torch.save(obj, tmp_path / "x.pt")
        with pytest.raises(ser.InvalidCheckpointError, match=err):
            dg.load(tmp_path / "x.pt")
    torch.save(torch.ones(2), tmp_path / "legacy.pt", _use_new_zipfile_serialization=False)
    with pytest.raises(ser.InvalidCheckpointError, match="legacy format"):
        dg.load(tmp_path / "legacy.pt")
    with warnings.catch_warnings():              # torch 2.13 deprecates TorchScript
        warnings.simplefilter("ignore", DeprecationWarning)
        torch.jit.save(torch.jit.script(torch.nn.Linear(2, 2)), tmp_path / "script.pt")
    with pytest.raises(ser.InvalidCheckpointError, match="TorchScript"):
        dg.load(tmp_path / "script.pt")
    torch.save({"w": torch.ones(2)}, tmp_path / "ok.pt")
    with pytest.raises(ser.InvalidCheckpointError, match="PyTorch checkpoint.*dyngrad.load"):
        ser.load_safetensors(tmp_path / "ok.pt")


def test_safetensors_against_the_package(dg, tmp_path):
    st_torch = pytest.importorskip("safetensors.torch")
    ser = importlib.import_module(dg.__name__ + ".serialization")
    tensors = {n: torch.tensor(sample_np(n)).to(getattr(torch, n)) for n in DTYPES}
    tensors["scalar"] = torch.tensor(1.5)
    st_torch.save_file(tensors, tmp_path / "theirs.safetensors", metadata={"k": "v"})
    ours = ser.safetensors.load_file(tmp_path / "theirs.safetensors")
    with ser.safetensors.safe_open(tmp_path / "theirs.safetensors") as f:
        assert f.metadata() == {"k": "v"}
    for k, t in tensors.items():
        assert ours[k].dtype == getattr(dg, str(t.dtype)[6:])
        np.testing.assert_array_equal(host(ours[k]), host(t), err_msg=k)
    ser.safetensors.save_file(ours, tmp_path / "ours.safetensors", metadata={"k": "v"})
    back = st_torch.load_file(tmp_path / "ours.safetensors")
    assert (tmp_path / "ours.safetensors").read_bytes() == (tmp_path / "theirs.safetensors").read_bytes()
    for k, t in tensors.items():
        assert torch.equal(back[k], t), k
