"""dyngrad.save / load on both engines, without torch: PyTorch's file format (round trips of every dtype, state
dicts, optimizer states, nested containers, whole modules), shared storages as views, weights_only and the
allow-list, map_location, mmap, the legacy .npz format, safetensors, and files crafted to crash, run code or
allocate (Note [Loading untrusted files], Note [weights_only]). tests/test_serialization_torch.py checks the files
against torch itself."""
import importlib
import io
import json
import math
import os
import pickle
import random
import re
import struct
import tracemalloc
import zipfile
from collections import OrderedDict

import numpy as np
import pytest

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data")
DTYPES = ["bool", "uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16", "float32", "float64"]


@pytest.fixture(params=["cpp", "reference"])
def dg(request):
    return importlib.import_module("dyngrad" if request.param == "cpp" else "dyngrad.reference")


def ser(dg):
    return importlib.import_module(dg.__name__ + ".serialization")


def values(t):
    return t.detach().float().numpy() if t.dtype.name == "bfloat16" else t.detach().numpy()


def sample(dg, name, shape=(2, 3)):
    """A tensor of dtype `name` with distinct values (exact in every dtype)."""
    n = math.prod(shape)
    if name == "bool":
        return dg.tensor((np.arange(n) % 3 == 0).reshape(shape))
    base = np.arange(n).reshape(shape) - (0 if name == "uint8" else n // 2)
    if name.startswith("float") or name == "bfloat16":
        return dg.tensor(base / 4.0).to(getattr(dg, name))
    return dg.tensor(base).to(getattr(dg, name))


def round_trip(dg, obj, **load_kwargs):
    buf = io.BytesIO()
    dg.save(obj, buf)
    return dg.load(io.BytesIO(buf.getvalue()), **load_kwargs)


def members(data):
    with zipfile.ZipFile(io.BytesIO(data)) as z:
        return {i.filename: i for i in z.infolist()}


# ----- round trips -----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", DTYPES)
def test_every_dtype_round_trips(dg, name):
    for shape in [(2, 3), (), (0, 4), (5,)]:
        t = sample(dg, name, shape)
        back = round_trip(dg, {"t": t})["t"]
        assert back.dtype == t.dtype and tuple(back.shape) == shape
        np.testing.assert_array_equal(values(back), values(t))
    if name.startswith("float") or name == "bfloat16":
        special = dg.tensor([math.inf, -math.inf, math.nan, -0.0]).to(getattr(dg, name))
        back = round_trip(dg, special)
        np.testing.assert_array_equal(values(back), values(special))
        assert np.signbit(values(back)[3])


def test_requires_grad_parameters_and_non_leaves(dg):
    p = dg.nn.Parameter(dg.ones(3))
    q = dg.nn.Parameter(dg.arange(3), requires_grad=False)
    leaf = dg.ones(2, requires_grad=True)
    back = round_trip(dg, {"p": p, "q": q, "leaf": leaf, "nonleaf": leaf * 2})
    assert type(back["p"]) is dg.nn.Parameter and back["p"].requires_grad and back["p"].is_leaf
    assert type(back["q"]) is dg.nn.Parameter and not back["q"].requires_grad and back["q"].dtype == dg.int64
    assert back["leaf"].requires_grad and back["leaf"].is_leaf and back["leaf"].grad_fn is None
    assert back["nonleaf"].requires_grad and back["nonleaf"].is_leaf and back["nonleaf"].tolist() == [2.0, 2.0]
    p.my_flag = "no decay"
    assert round_trip(dg, p).my_flag == "no decay"


def test_nested_containers_and_python_values(dg):
    obj = {"epoch": 3, "loss": float("nan"), "best": -math.inf, "name": "a/b%c", "tags": ["x", None, True],
           "shape": (2, 3), "size": dg.Size([4, 5]), "dtype": dg.bfloat16, "device": dg.device("cpu"),
           "set": {1, 2}, "frozen": frozenset({"a"}), "bytes": b"\x00\xff", "empty_bytes": b"",
           "bytearray": bytearray(b"ab"), "complex": 1 + 2j, "big": 2 ** 100, "od": OrderedDict(b=1, a=2),
           3: "int key", "nested": [[[{"deep": dg.ones(1)}]]]}
    back = round_trip(dg, obj)
    assert math.isnan(back.pop("loss")) and math.isnan(obj.pop("loss"))
    deep = back["nested"][0][0][0]["deep"]
    assert isinstance(deep, dg.Tensor) and deep.tolist() == [1.0]
    back["nested"] = obj["nested"]
    assert back == obj
    assert type(back["size"]) is dg.Size and back["dtype"] is dg.bfloat16 and list(back["od"]) == ["b", "a"]
    assert type(back["shape"]) is tuple and type(back["od"]) is OrderedDict


def test_model_and_optimizer_state_dicts(dg, tmp_path):
    model = dg.nn.Sequential(dg.nn.Linear(3, 4), dg.nn.BatchNorm1d(4), dg.nn.Linear(4, 2))
    opt = dg.optim.Adam(model.parameters(), lr=0.1, betas=(0.8, 0.9))
    model(dg.randn(5, 3)).sum().backward()
    opt.step()
    path = tmp_path / "ckpt.pt"
    dg.save({"model": model.state_dict(), "optim": opt.state_dict(), "epoch": 1}, str(path))
    ckpt = dg.load(path)
    other = dg.nn.Sequential(dg.nn.Linear(3, 4), dg.nn.BatchNorm1d(4), dg.nn.Linear(4, 2))
    other.load_state_dict(ckpt["model"])
    opt2 = dg.optim.Adam(other.parameters(), lr=0.5)
    opt2.load_state_dict(ckpt["optim"])
    assert opt2.param_groups[0]["lr"] == 0.1 and opt2.param_groups[0]["betas"] == (0.8, 0.9)
    x = dg.randn(6, 3)
    opt.zero_grad()
    for m in (model, other):
        m(x).sum().backward()
    opt.step()
    opt2.step()
    model.eval()
    other.eval()
    np.testing.assert_array_equal(model(x).detach().numpy(), other(x).detach().numpy())
    assert other[1].num_batches_tracked.dtype == dg.int64


def test_engines_read_each_others_files():
    cpp, ref = importlib.import_module("dyngrad"), importlib.import_module("dyngrad.reference")
    for src, dst in ((cpp, ref), (ref, cpp)):
        w = src.arange(12.).view(3, 4).to(src.bfloat16)
        obj = {"w": w, "wt": w.t(), "p": src.nn.Parameter(src.ones(2)), "i": src.arange(3, dtype=src.int16),
               "dtype": src.float16, "size": src.Size([1])}
        buf = io.BytesIO()
        src.save(obj, buf)
        back = dst.load(io.BytesIO(buf.getvalue()))
        assert isinstance(back["w"], dst.Tensor) and type(back["p"]) is dst.nn.Parameter
        assert back["dtype"] is dst.float16 and type(back["size"]) is dst.Size
        np.testing.assert_array_equal(values(back["wt"]), values(w.t()))
        assert back["wt"]._storage_id() == back["w"]._storage_id()


def test_file_layout_is_torchs(dg):
    w = dg.randn(3, 5)
    buf = io.BytesIO()
    dg.save({"w": w, "row": w[1], "b": dg.ones(7, dtype=dg.float64)}, buf)
    data = buf.getvalue()
    infos = members(data)
    assert set(infos) == {"archive/data.pkl", "archive/.format_version", "archive/.storage_alignment",
                          "archive/byteorder", "archive/data/0", "archive/data/1", "archive/version",
                          "archive/.data/serialization_id"}
    assert infos["archive/data/0"].file_size == 15 * 4 and infos["archive/data/1"].file_size == 7 * 8
    for info in infos.values():                  # stored, and every record's data 64-byte aligned (mmap)
        assert info.compress_type == zipfile.ZIP_STORED
        name_len, extra_len = struct.unpack("<HH", data[info.header_offset + 26:info.header_offset + 30])
        assert (info.header_offset + 30 + name_len + extra_len) % 64 == 0
    with zipfile.ZipFile(io.BytesIO(data)) as z:
        raw = np.frombuffer(z.read("archive/data/0"), dtype="<f4")
        text = z.read("archive/data.pkl")
    np.testing.assert_array_equal(raw, w.numpy().reshape(-1))
    assert b"torch._utils\n_rebuild_tensor_v2" in text and b"torch\nFloatStorage" in text
    assert b"dyngrad" not in text              # a state dict names only torch's globals


# ----- Note [Shared storages] ------------------------------------------------------------------------------------
def test_views_and_tied_weights_stay_shared(dg):
    w = dg.arange(60.).view(5, 12)
    linear = dg.nn.Linear(12, 5, bias=False)
    emb = dg.nn.Embedding(5, 12)
    emb.weight = linear.weight                       # weight tying, as GPT's lm_head / wte
    views = {"w": w, "row": w[2], "t": w.t(), "cols": w[:, 3:9:2], "step": w[1::2, ::5], "exp": w[0:1].expand(4, 12),
             "unsq": w[:, 1].unsqueeze(1), "scalar": w[3, 4], "sd": {**linear.state_dict(), **{
                 "emb." + k: v for k, v in emb.state_dict().items()}}}
    buf = io.BytesIO()
    dg.save(views, buf)
    assert sum(n.startswith("archive/data/") for n in members(buf.getvalue())) == 2
    back = dg.load(io.BytesIO(buf.getvalue()))
    for key in ["row", "t", "cols", "step", "exp", "unsq", "scalar"]:
        np.testing.assert_array_equal(values(back[key]), values(views[key]), err_msg=key)
        assert back[key]._storage_id() == back["w"]._storage_id(), key
    back["w"].mul_(-1)                               # one storage: every view sees the write
    for key in ["row", "t", "cols", "step", "scalar"]:
        np.testing.assert_array_equal(values(back[key]), -values(views[key]), err_msg=key)
    sd = back["sd"]
    assert sd["weight"]._storage_id() == sd["emb.weight"]._storage_id()
    back = round_trip(dg, {"a": linear.weight, "b": linear.weight})
    assert back["a"] is back["b"]                    # one object in, one object out (pickle's memo)


def test_view_plans_give_every_slicing_layout():
    """Note [Shared storages]: the plan, replayed with numpy, gives as_strided's elements as a view, for every
    slice/transpose/expand of a block at any offset of a storage; layouts with overlapping steps have none."""
    st = importlib.import_module("dyngrad.serialization._storage")

    def replay(base, plan, size):
        t = base[plan.start:plan.end].reshape(plan.box)[tuple(slice(*s) for s in plan.slices)][..., 0]
        t = t.transpose(plan.perm) if plan.perm else t
        for d in plan.unit_dims:
            t = np.expand_dims(t, d)
        return np.broadcast_to(t, size)

    rng = random.Random(0)
    for _ in range(3000):
        shape = [rng.randint(1, 6) for _ in range(rng.randint(1, 4))]
        k = rng.randint(0, 4)
        full = np.arange(math.prod(shape) + k + rng.randint(0, 3))
        v = full[k:k + math.prod(shape)].reshape(shape)[
            tuple(slice(rng.randint(0, n - 1), rng.choice([None, n]), rng.randint(1, 3)) for n in shape)]
        if rng.random() < 0.5:
            v = v.transpose(rng.sample(range(v.ndim), v.ndim))
        if rng.random() < 0.3:
            v = np.broadcast_to(np.expand_dims(v, 0), (3,) + v.shape)
        offset = (v.__array_interface__["data"][0] - full.__array_interface__["data"][0]) // 8
        stride = [s // 8 for s in v.strides]
        plan = st.view_plan(v.shape, stride, offset, full.size)
        assert plan is not None, (v.shape, stride, offset, full.size)
        assert 0 <= plan.start and plan.end <= full.size
        got = replay(full, plan, v.shape)
        assert np.array_equal(got, v) and np.shares_memory(got, full)
        # what save writes for the layout: a storage the plan fits
        end = st.storage_end(v.shape, stride, offset)
        assert st.view_plan(v.shape, stride, offset, end) is not None
    assert st.view_plan((3, 3), (1, 1), 0, 10) is None            # sliding windows overlap


# ----- whole modules, weights_only and the allow-list (Note [weights_only]) --------------------------------------
def make_net(dg):
    class Net(dg.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = dg.nn.Linear(3, 4)
            self.out = dg.nn.Linear(4, 2)

        def forward(self, x):
            return self.out(self.fc(x).relu())

    Net.__qualname__ = "Net"
    globals()["Net"] = Net                       # picklable by reference, as a class of the user's script
    return Net


def test_whole_module_and_optimizer(dg, tmp_path):
    Net = make_net(dg)
    net = Net()
    opt = dg.optim.SGD(net.parameters(), lr=0.1, momentum=0.9)
    net(dg.randn(2, 3)).sum().backward()
    opt.step()
    path = tmp_path / "model.pt"
    dg.save({"net": net, "opt": opt}, path)
    s = ser(dg)
    with pytest.raises(pickle.UnpicklingError, match=r"GLOBAL test_serialization\.Net was not an allowed global"):
        dg.load(path)
    root = dg.__name__
    unsafe = s.get_unsafe_globals_in_checkpoint(path)
    assert unsafe == ["test_serialization.Net", f"{root}.nn.modules.linear.Linear", f"{root}.optim.sgd.SGD",
                      "collections.defaultdict", "builtins.dict"]
    x = dg.randn(5, 3)
    back = dg.load(path, weights_only=False)
    np.testing.assert_array_equal(back["net"](x).detach().numpy(), net(x).detach().numpy())
    assert back["opt"].param_groups[0]["params"][0] is back["net"].fc.weight     # one Parameter, as saved
    assert back["opt"].state[back["net"].fc.weight]["momentum_buffer"].shape == (4, 3)
    dg.save(net, path)
    with s.safe_globals([Net, dg.nn.Linear]):
        assert s.get_safe_globals() == [Net, dg.nn.Linear]
        assert s.get_unsafe_globals_in_checkpoint(path) == []
        alone = dg.load(path)
    assert s.get_safe_globals() == []
    np.testing.assert_array_equal(alone(x).detach().numpy(), net(x).detach().numpy())
    s.add_safe_globals([Net, (dg.nn.Linear, f"{root}.nn.modules.linear.Linear")])
    try:
        assert type(dg.load(path)) is Net
    finally:
        s.clear_safe_globals()
    with pytest.raises(pickle.UnpicklingError, match="not an allowed global"):
        dg.load(path)
    with pytest.raises(TypeError, match="not a class or a function"):
        s.add_safe_globals([3])


def _torch_zip(pkl, storages=()):
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("archive/data.pkl", pkl)
        z.writestr("archive/byteorder", b"little")
        for key, data in storages:
            z.writestr(f"archive/data/{key}", data)
        z.writestr("archive/version", b"3\n")
    return buf.getvalue()


class _Evil:
    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        return (os.system, (f"touch {self.path}",))


def test_weights_only_refuses_code_and_runs_none(dg, tmp_path):
    marker = tmp_path / "ran"
    payloads = {
        "(os|posix).system": pickle.dumps({"w": _Evil(marker)}, protocol=2),
        "builtins.eval": b"\x80\x02c__builtin__\neval\nX\x0e\x00\x00\x00open('x', 'w')\x85R.",
        "builtins.getattr": pickle.dumps(getattr, protocol=4),
        "subprocess.run": b"\x80\x04\x8c\nsubprocess\x8c\x03run\x93.",
    }
    for name, pkl in payloads.items():
        f = io.BytesIO(_torch_zip(pkl))
        with pytest.raises(pickle.UnpicklingError, match=rf"GLOBAL {name} was not an allowed global.*add_safe_g"):
            dg.load(f)
        unsafe = ser(dg).get_unsafe_globals_in_checkpoint(io.BytesIO(_torch_zip(pkl)))
        assert len(unsafe) == 1 and re.fullmatch(name, unsafe[0])
    assert not marker.exists()
    # allowed callables check their arguments: no allocation from a size claim, no calling a non-global
    for pkl, err in [(b"\x80\x02c__builtin__\nbytearray\nJ\x00\x00\x00\x40\x85R.", "a size would allocate"),
                     (b"\x80\x02c_codecs\nencode\nX\x01\x00\x00\x00aX\x05\x00\x00\x00rot13\x86R.", "_codecs.encode"),
                     (b"\x80\x02}X\x01\x00\x00\x00a\x85R.", "not an allowed global"),
                     (b"\x80\x02ccollections\nOrderedDict\n)R}X\x05\x00\x00\x00itemsK\x01sb.", "replace part"),
                     (b"\x80\x02X\x01\x00\x00\x00a(X\x01\x00\x00\x00bK\x01u.", "not a container"),
                     (b"\x80\x02]Q.", "not a storage"),
                     (b"\x80\x02c__builtin__\nset\n)\x81.", "not an allowed class")]:
        with pytest.raises(pickle.UnpicklingError, match=err):
            dg.load(io.BytesIO(_torch_zip(pkl)))
    # a huge memo index is a dict key, not an allocation
    assert dg.load(io.BytesIO(_torch_zip(b"\x80\x02K\x07r\xff\xff\xff\xffj\xff\xff\xff\xff\x86."))) == (7, 7)


def test_malformed_pickles_raise_invalid_checkpoint(dg):
    Err = ser(dg).InvalidCheckpointError
    for pkl in [b"", b"\x80\x02", b"\x80\x02X\xff\xff\xff\x7fab.", b"\x80\x02s.", b"\x80\x02h\x05.", b"\x80\x02(t",
                b"\x80\x02K\x01K\x02.", b"\x80\x06N.", b"\x80\x02u.", b"\x80\x02Iabc\n.",
                b"\x80\x02\x8a\xff\x01.", b"\x80\x02\x8b\xff\xff\xff\x7f."]:
        with pytest.raises(Err, match="^load: "):
            dg.load(io.BytesIO(_torch_zip(pkl)))
    with pytest.raises(pickle.UnpicklingError, match="does not interpret pickle opcode"):
        dg.load(io.BytesIO(_torch_zip(b"\x80\x02\x82\x01.")))          # EXT1


def test_tensor_claims_are_checked_against_their_storage(dg):
    """A rebuilt tensor must lie inside its storage and the storage's record must hold what the pickle says."""
    Err = ser(dg).InvalidCheckpointError
    head = b"\x80\x02ctorch._utils\n_rebuild_tensor_v2\n((X\x07\x00\x00\x00storagectorch\nFloatStorage\nX\x01\x00" \
           b"\x00\x000X\x03\x00\x00\x00cpu"
    rec = [("0", np.arange(4, dtype="<f4").tobytes())]

    def tensor_pkl(numel, offset, size, stride, rg=b"\x89"):
        def tup(xs):
            return b"(" + b"".join(b"J" + struct.pack("<i", x) for x in xs) + b"t"
        return head + b"J" + struct.pack("<i", numel) + b"tQJ" + struct.pack("<i", offset) + tup(size) + \
            tup(stride) + rg + b"ccollections\nOrderedDict\n)RtR."

    ok = dg.load(io.BytesIO(_torch_zip(tensor_pkl(4, 1, (3,), (1,)), rec)))
    assert ok.tolist() == [1.0, 2.0, 3.0]
    for pkl, err in [(tensor_pkl(4, 1, (4,), (1,)), "reaches element 4"),
                     (tensor_pkl(4, 0, (2, 2), (3, 1)), "reaches element 4"),
                     (tensor_pkl(5, 0, (4,), (1,)), "record holds 16 bytes"),
                     (tensor_pkl(4, 0, (4,), (-1,)), "negative"),
                     (tensor_pkl(4, 0, (2 ** 31 - 1,) * 3, (0,) * 3), "claims"),
                     (tensor_pkl(4, 0, (2,), (1, 1)), "size"),
                     (tensor_pkl(4, 0, (2,), (1,), rg=b"K\x01"), "requires_grad")]:
        with pytest.raises(Err, match=err):
            dg.load(io.BytesIO(_torch_zip(pkl, rec)))
    expanded = dg.load(io.BytesIO(_torch_zip(tensor_pkl(4, 0, (10 ** 6, 10 ** 6), (0, 0)), rec)))
    assert tuple(expanded.shape) == (10 ** 6, 10 ** 6)                 # a view with stride 0: nothing allocated


# ----- map_location, mmap -----------------------------------------------------------------------------------------
def _relocated(data, location):
    """A dyngrad file whose storages claim to be saved on `location` (as a CUDA machine's torch.save writes)."""
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(data)) as src, zipfile.ZipFile(out, "w") as dst:
        for info in src.infolist():
            raw = src.read(info)
            if info.filename.endswith("data.pkl"):
                raw = raw.replace(b"X\x03\x00\x00\x00cpu", b"X" + struct.pack("<I", len(location)) + location.encode())
            dst.writestr(info.filename, raw)
    return out.getvalue()


def test_map_location(dg):
    obj = {"w": dg.randn(3, 4), "b": dg.arange(3)}
    buf = io.BytesIO()
    dg.save(obj, buf)
    data = buf.getvalue()
    class OtherDevice:                          # a device object of another library
        type, index = "cpu", None

        def __str__(self):
            return "cpu"

    for loc in (None, "cpu", dg.device("cpu"), OtherDevice(), {"cuda:0": "cpu"}, lambda s, where: None,
                lambda s, where: s):
        np.testing.assert_array_equal(dg.load(io.BytesIO(data), map_location=loc)["w"].numpy(), obj["w"].numpy())
    seen = []
    back = dg.load(io.BytesIO(data), map_location=lambda s, where: seen.append((where, s.shape)) or s * 2)
    assert seen == [("cpu", (12,)), ("cpu", (3,))] and back["b"].tolist() == [0, 2, 4]
    for loc in ("cuda", "cuda:0", "mps", "meta", dg.device("cuda:1"), {"cpu": "cuda"}):
        with pytest.raises(RuntimeError, match="CPU only|meta"):
            dg.load(io.BytesIO(data), map_location=loc)
    for loc, err in [(lambda s, where: 3, "must return None or a storage"), (5, "map_location must be"),
                     ({"cpu": 1}, "map device names")]:
        with pytest.raises(TypeError, match=err):
            dg.load(io.BytesIO(data), map_location=loc)
    on_gpu = _relocated(data, "cuda:0")
    with pytest.raises(RuntimeError, match="saved on 'cuda:0'.*map_location='cpu'"):
        dg.load(io.BytesIO(on_gpu))
    for loc in ("cpu", {"cuda:0": "cpu"}, dg.device("cpu")):
        np.testing.assert_array_equal(dg.load(io.BytesIO(on_gpu), map_location=loc)["w"].numpy(), obj["w"].numpy())
    where = []
    dg.load(io.BytesIO(on_gpu), map_location=lambda s, loc: where.append(loc) or s)
    assert where == ["cuda:0", "cuda:0"]


def test_mmap_is_copy_on_write(dg, tmp_path):
    obj = {"w": dg.randn(3, 4), "i": dg.arange(5, dtype=dg.int32), "h": dg.ones(4, dtype=dg.float16),
           "bf": dg.ones(2, dtype=dg.bfloat16), "m": dg.tensor([True, False]), "g": dg.ones(2, requires_grad=True)}
    obj["wt"] = obj["w"].t()
    path = tmp_path / "m.pt"
    dg.save(obj, path)
    before = path.read_bytes()
    m = dg.load(path, mmap=True)
    for k in obj:
        np.testing.assert_array_equal(values(m[k]), values(obj[k]))
        assert m[k].dtype == obj[k].dtype and m[k].requires_grad == obj[k].requires_grad
    assert m["wt"]._storage_id() == m["w"]._storage_id()
    m["w"].add_(1)
    m["i"].mul_(3)
    np.testing.assert_allclose(m["wt"].numpy(), obj["w"].numpy().T + 1)
    assert path.read_bytes() == before
    with pytest.raises(ValueError, match="mmap=True needs a file path"):
        dg.load(io.BytesIO(before), mmap=True)
    model = dg.nn.Linear(3, 2)
    dg.save(model.state_dict(), path)
    other = dg.nn.Linear(3, 2)
    other.load_state_dict(dg.load(path, mmap=True), assign=True)
    x = dg.randn(4, 3)
    np.testing.assert_array_equal(other(x).detach().numpy(), model(x).detach().numpy())


def test_argument_errors(dg, tmp_path):
    with pytest.raises(TypeError, match="weights_only must be a bool"):
        dg.load(tmp_path / "x", weights_only="yes")
    with pytest.raises(TypeError, match="mmap must be a bool"):
        dg.load(tmp_path / "x", mmap=1)
    with pytest.raises(RuntimeError, match="explicit pickle_module"):
        dg.load(tmp_path / "x", pickle_module=pickle)
    with pytest.raises(TypeError, match="unexpected keyword"):
        dg.load(tmp_path / "x", errors="strict")
    with pytest.raises(TypeError, match="path or a binary file object"):
        dg.save({}, 3)
    with pytest.raises(ValueError, match="pickle_protocol"):
        dg.save({}, io.BytesIO(), pickle_protocol=1)
    with pytest.raises((TypeError, AttributeError, pickle.PicklingError)):
        dg.save({"f": lambda: 0}, io.BytesIO())
    with pytest.raises(FileNotFoundError):
        dg.load(tmp_path / "missing.pt")
    for proto in (2, 3, 4, 5):
        buf = io.BytesIO()
        dg.save({"w": dg.ones(2), "t": (1, "a")}, buf, pickle_protocol=proto)
        back = dg.load(io.BytesIO(buf.getvalue()))
        assert back["w"].tolist() == [1.0, 1.0] and back["t"] == (1, "a")
    a = []
    a.append(a)                                  # pickle's memo: a list holding itself saves and loads
    back = round_trip(dg, a)
    assert back[0] is back


# ----- the legacy .npz format, plain numpy files ------------------------------------------------------------------
def test_legacy_npz_still_loads(dg, tmp_path):
    """tests/data/legacy_v1.npz was written by dyngrad.save before it wrote PyTorch's format (main at 5e4e496)."""
    ckpt = dg.load(os.path.join(DATA, "legacy_v1.npz"))
    model = ckpt["model"]
    np.testing.assert_array_equal(model["fc.weight"].numpy(), np.arange(6, dtype=np.float32).reshape(2, 3) / 4)
    assert model["fc.bias"].dtype == dg.float64 and model["fc.bias"].tolist() == [0.5, -1.5]
    assert model["bn.num_batches_tracked"].dtype == dg.int64 and model["bn.num_batches_tracked"].item() == 7
    assert model["mask"].tolist() == [True, False, True] and model["h"].dtype == dg.float16
    assert model["i8"].dtype == dg.int8 and model["i8"].tolist() == [-3, 4]
    assert ckpt["optim"]["state"][0]["step"] == 3 and ckpt["optim"]["param_groups"][0]["betas"] == (0.9, 0.999)
    assert ckpt["epoch"] == 5 and ckpt["loss"] == math.inf and ckpt["name"] == "run/a%b"
    assert ckpt["tags"] == ["x", None, True] and ckpt["p"].requires_grad
    assert dg.load(os.path.join(DATA, "legacy_v1.npz"), mmap=True)["model"]["fc.bias"].tolist() == [0.5, -1.5]
    np.savez(tmp_path / "plain.npz", a=np.arange(3), b=np.ones((2, 2), dtype=">f4"))
    np.savez_compressed(tmp_path / "packed.npz", a=np.arange(3), f=np.ones((2, 3), order="F"))
    plain, packed = dg.load(tmp_path / "plain.npz"), dg.load(tmp_path / "packed.npz")
    assert plain["a"].tolist() == [0, 1, 2] and plain["b"].dtype == dg.float32 and plain["b"].tolist() == [[1, 1]] * 2
    assert packed["a"].tolist() == [0, 1, 2] and packed["f"].shape == (2, 3)
    np.savez(tmp_path / "c.npz", x=np.ones(2, dtype=np.complex64))
    with pytest.raises(ser(dg).InvalidCheckpointError, match="complex"):
        dg.load(tmp_path / "c.npz")


# ----- Note [Loading untrusted files] ----------------------------------------------------------------------------
def test_not_a_checkpoint_says_what_it_is(dg, tmp_path):
    Err = ser(dg).InvalidCheckpointError
    assert issubclass(Err, RuntimeError) and issubclass(Err, pickle.UnpicklingError)
    np.save(tmp_path / "x.npy", np.arange(3))
    legacy_torch = pickle.dumps(0x1950A86A20F9469CFC6C, protocol=2) + pickle.dumps(1001, protocol=2)
    torchscript = io.BytesIO()
    with zipfile.ZipFile(torchscript, "w") as z:
        z.writestr("model/data.pkl", pickle.dumps(1, protocol=2))
        z.writestr("model/constants.pkl", pickle.dumps((), protocol=2))
    zipped = io.BytesIO()
    with zipfile.ZipFile(zipped, "w") as z:
        z.writestr("readme.txt", b"hello")
    for blob, err in [((tmp_path / "x.npy").read_bytes(), "single .npy array"),
                      (legacy_torch, "PyTorch checkpoint in torch's legacy format"),
                      (pickle.dumps({"a": 1}), "this is a pickle"),
                      (torchscript.getvalue(), "TorchScript"), (zipped.getvalue(), "no '<folder>/data.pkl'"),
                      (b"hello world!", "not a checkpoint dyngrad reads"), (b"", "not a checkpoint")]:
        with pytest.raises(Err, match=err):
            dg.load(io.BytesIO(blob))


def test_truncated_and_corrupted_files(dg):
    """Every truncation point and random byte flips of real checkpoints (PyTorch format and legacy): a load either
    succeeds or raises InvalidCheckpointError (or the refusal of a corrupted global), never another exception."""
    Err = ser(dg).InvalidCheckpointError
    buf = io.BytesIO()
    dg.save({"w": dg.randn(4, 5), "wt": None, "opt": {"state": {0: {"step": 3, "m": dg.zeros(5)}}, "lr": 0.1}}, buf)
    blobs = [buf.getvalue(), open(os.path.join(DATA, "legacy_v1.npz"), "rb").read()]
    rng = np.random.default_rng(0)
    for data in blobs:
        for cut in list(range(0, len(data), 97)) + [len(data) - 1]:
            with pytest.raises(Err, match="^load: "):
                dg.load(io.BytesIO(data[:cut]))
        for trial in range(150):
            blob = bytearray(data)
            for _ in range(int(rng.integers(1, 4))):
                blob[int(rng.integers(len(blob)))] = int(rng.integers(256))
            try:
                dg.load(io.BytesIO(bytes(blob)))
            except pickle.UnpicklingError:       # InvalidCheckpointError, or a refusal of a corrupted name
                pass


def test_restricted_unpickler_fuzz(dg):
    """Mutations of real pickles (a state dict, an optimizer state, a whole module's) fed to the restricted
    unpickler with valid zips around them (the CRC would stop most flips before it): a load, or an
    UnpicklingError (InvalidCheckpointError or a refusal), never another exception or a crash. (6000 trials of
    this, run once by hand: 164 loads, 2386 InvalidCheckpointError, 3449 refusals, 1 device refusal.)"""
    Net = make_net(dg)
    net = Net()
    opt = dg.optim.Adam(net.parameters())
    net(dg.randn(2, 3)).sum().backward()
    opt.step()
    pickles = []
    for obj in ({"sd": net.state_dict(), "opt": opt.state_dict(), "misc": [b"x", {1, 2}, 1 + 2j, dg.Size([2])]},
                net):
        buf = io.BytesIO()
        dg.save(obj, buf)
        with zipfile.ZipFile(io.BytesIO(buf.getvalue())) as z:
            storages = [(n.split("/")[-1], z.read(n)) for n in z.namelist() if "/data/" in n]
            pickles.append((z.read("archive/data.pkl"), storages))
    rng = random.Random(0)
    for trial in range(400):
        pkl, storages = pickles[trial % 2]
        blob = bytearray(pkl)
        for _ in range(rng.randint(1, 3)):
            pos = rng.randrange(len(blob))
            if rng.random() < 0.7:
                blob[pos] = rng.randrange(256)
            elif rng.random() < 0.5:
                del blob[pos:pos + rng.randint(1, 8)]
            else:
                blob[pos:pos] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 8)))
        try:
            with ser(dg).safe_globals([Net, dg.nn.Linear]):
                dg.load(io.BytesIO(_torch_zip(bytes(blob), storages)))
        except pickle.UnpicklingError:
            pass
        except RuntimeError as e:                # a corrupted location tag names a device: torch's refusal
            assert "CPU only" in str(e)


def _zip_with(entries):
    """A zip (as bytes) of (name, data, compress_type) entries."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        for name, data, kind in entries:
            z.writestr(zipfile.ZipInfo(name), data, compress_type=kind)
    return buf.getvalue()


def test_zip_claims_are_checked_before_allocating(dg):
    Err = ser(dg).InvalidCheckpointError
    stored = _zip_with([("a.npy", b"\x93NUMPY" + b"x" * 200, zipfile.ZIP_STORED)])
    info = members(stored)["a.npy"]
    # a stored member claiming more than the file holds (central directory edited: sizes at +20 and +24)
    cd = stored.rindex(b"PK\x01\x02")
    for field in (20, 24):
        blob = bytearray(stored)
        blob[cd + field:cd + field + 4] = struct.pack("<I", 2 ** 31)
        with pytest.raises(Err, match="past the end of the file|claims"):
            dg.load(io.BytesIO(bytes(blob)))
    # a deflated member claiming more than deflate can expand
    deflated = _zip_with([("a.npy", b"\x00" * 10000, zipfile.ZIP_DEFLATED)])
    cd = deflated.rindex(b"PK\x01\x02")
    blob = bytearray(deflated)
    blob[cd + 24:cd + 28] = struct.pack("<I", 2 ** 32 - 1)
    with pytest.raises(Err, match="more than deflate can expand"):
        dg.load(io.BytesIO(bytes(blob)))
    # two central-directory entries pointing at the same data: the classic overlapping-member bomb
    overlap = bytearray(_zip_with([("a.npy", b"x" * 100, zipfile.ZIP_STORED), ("b.npy", b"y" * 100,
                                                                              zipfile.ZIP_STORED)]))
    second = overlap.rindex(b"PK\x01\x02")
    overlap[second + 42:second + 46] = struct.pack("<I", info.header_offset)
    with pytest.raises(Err, match="overlap"):
        dg.load(io.BytesIO(bytes(overlap)))


def test_compression_bomb_allocates_only_its_array(dg, tmp_path):
    """Issue 23: a compressed .npz of 64 MiB of zeros (64 KiB on disk) used to peak at 3x the array; it is now
    read into its one array (tracemalloc counts numpy's allocations)."""
    nbytes = 64 << 20
    path = tmp_path / "bomb.npz"
    np.savez_compressed(path, x=np.zeros(nbytes // 4, dtype=np.float32))
    assert path.stat().st_size < nbytes // 500
    tracemalloc.start()
    try:
        t = dg.load(path)["x"]
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert t.numel() == nbytes // 4 and float(t.sum().item()) == 0.0
    assert peak < nbytes + (6 << 20), f"peak {peak / 2 ** 20:.1f} MiB for a {nbytes >> 20} MiB array"
    w = dg.ones(nbytes // 4)
    dg.save({"w": w}, tmp_path / "w.pt")
    del w, t
    tracemalloc.start()
    try:
        back = dg.load(tmp_path / "w.pt")["w"]
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert back.numel() == nbytes // 4 and peak < nbytes + (6 << 20)


# ----- safetensors ------------------------------------------------------------------------------------------------
def test_safetensors_round_trip(dg, tmp_path):
    st = ser(dg).safetensors
    tensors = {name: sample(dg, name, (2, 3)) for name in DTYPES}
    tensors["scalar"] = dg.tensor(2.5)
    tensors["empty"] = dg.zeros(0, 3)
    tensors["strided"] = dg.arange(12.).view(3, 4).t()
    path = tmp_path / "m.safetensors"
    st.save_file(tensors, path, metadata={"format": "pt"})
    for back in (st.load_file(path), st.load(st.save(tensors)), dg.load(path), ser(dg).load_safetensors(path)):
        assert set(back) == set(tensors)
        for k, t in tensors.items():
            assert back[k].dtype == t.dtype and tuple(back[k].shape) == tuple(t.shape)
            np.testing.assert_array_equal(values(back[k]), values(t), err_msg=k)
    with st.safe_open(path, framework="pt") as f:
        assert f.keys() == sorted(tensors) and f.metadata() == {"format": "pt"}
        np.testing.assert_array_equal(values(f.get_tensor("bfloat16")), values(tensors["bfloat16"]))
    raw = path.read_bytes()
    n = struct.unpack("<Q", raw[:8])[0]
    assert (8 + n) % 8 == 0 and raw[8:9] == b"{"
    w = dg.ones(4)
    with pytest.raises(RuntimeError, match="share memory"):
        st.save({"a": w, "b": w[1:]})
    assert set(st.load(st.save({"a": w[:2], "b": w[2:]}))) == {"a", "b"}     # disjoint halves are fine


def test_safetensors_refuses_malformed_headers(dg, tmp_path):
    st = ser(dg).safetensors
    Err = ser(dg).InvalidCheckpointError
    good = st.save({"a": dg.ones(2), "b": dg.zeros(3, dtype=dg.int64)})

    def with_header(header, data=b""):
        text = json.dumps(header).encode()
        return struct.pack("<Q", len(text)) + text + data

    cases = {
        "too short": good[:5], "header past end": struct.pack("<Q", 10 ** 12) + b"{}",
        "not json": struct.pack("<Q", 4) + b"{abc", "not an object": with_header([1]),
        "dtype": with_header({"a": {"dtype": "C64", "shape": [1], "data_offsets": [0, 8]}}, b"\0" * 8),
        "unknown dtype": with_header({"a": {"dtype": "Q9", "shape": [1], "data_offsets": [0, 8]}}, b"\0" * 8),
        "size mismatch": with_header({"a": {"dtype": "F32", "shape": [3], "data_offsets": [0, 8]}}, b"\0" * 8),
        "gap": with_header({"a": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}}, b"\0" * 8),
        "overlap": with_header({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
                                "b": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}}, b"\0" * 8),
        "truncated": good[:-3], "trailing": good + b"\0",
        "negative": with_header({"a": {"dtype": "F32", "shape": [-1], "data_offsets": [0, 0]}}),
        "metadata": with_header({"__metadata__": {"a": 1}}),
    }
    for name, blob in cases.items():
        with pytest.raises(Err, match="^load: "):
            st.load(blob)
    torch_file = io.BytesIO()
    dg.save({"a": dg.ones(1)}, torch_file)
    (tmp_path / "t.pt").write_bytes(torch_file.getvalue())
    with pytest.raises(Err, match="PyTorch checkpoint.*dyngrad.load"):
        st.load_file(tmp_path / "t.pt")
    with pytest.raises(RuntimeError, match="CPU only"):
        st.load_file(tmp_path / "t.pt", device="cuda")
