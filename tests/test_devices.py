"""Devices, honestly (issue 14): dyngrad.device parses, compares and prints as torch.device; the CPU works wherever
torch takes a device; CUDA, MPS, meta or a garbage string fail at once, naming the device; the cuda/backends
queries answer as torch does without a GPU. torch 2.13 (CPU) is the oracle where it is installed."""
import pickle

import numpy as np
import pytest


def outcome(fn):
    """('ok', value) or (exception type name, message)."""
    try:
        return "ok", fn()
    except Exception as exc:  # noqa: BLE001  the outcome is what is compared
        return type(exc).__name__, str(exc)


DEVICE_CALLS = [
    ("cpu", lambda m: m.device("cpu")), ("cpu:0", lambda m: m.device("cpu:0")),
    ("cpu,0", lambda m: m.device("cpu", 0)), ("kw", lambda m: m.device(type="cpu", index=1)),
    ("cuda", lambda m: m.device("cuda")), ("cuda:1", lambda m: m.device("cuda:1")),
    ("mps", lambda m: m.device("mps")), ("meta", lambda m: m.device("meta")),
    ("copy", lambda m: m.device(m.device("cpu", 2))),
    ("banana", lambda m: m.device("banana")), ("cpu:x", lambda m: m.device("cpu:x")),
    ("cpu:-1", lambda m: m.device("cpu:-1")), ("cuda:0:1", lambda m: m.device("cuda:0:1")),
    ("empty", lambda m: m.device("")), ("space", lambda m: m.device("cpu ")),
    ("neg index", lambda m: m.device("cpu", -1)), ("two indices", lambda m: m.device("cpu:0", 0)),
    ("str index", lambda m: m.device("cpu", "a")), ("int", lambda m: m.device(0)),
]


@pytest.mark.parametrize("name,call", DEVICE_CALLS, ids=[n for n, _ in DEVICE_CALLS])
def test_device_parses_as_torch(dg, name, call):
    torch = pytest.importorskip("torch")
    ours, theirs = outcome(lambda: call(dg)), outcome(lambda: call(torch))
    assert ours[0] == theirs[0], (ours, theirs)
    if ours[0] == "ok":
        d, t = ours[1], theirs[1]
        assert (repr(d), str(d), d.type, d.index) == (repr(t), str(t), t.type, t.index)
    elif ours[0] == "RuntimeError":
        assert ours[1] == theirs[1]


def test_device_compares_hashes_pickles(dg):
    cpu = dg.device("cpu")
    assert cpu == dg.device("cpu") and cpu != dg.device("cpu", 0) and cpu != "cpu"
    assert len({cpu, dg.device("cpu"), dg.device("cpu:0")}) == 2
    assert pickle.loads(pickle.dumps(dg.device("cpu", 1))) == dg.device("cpu:1")
    with pytest.raises(AttributeError):
        cpu.index = 3
    assert type(cpu).__name__ == "device"


def test_default_device_and_context_manager(dg):
    assert dg.get_default_device() == dg.device("cpu")
    dg.set_default_device("cpu")
    dg.set_default_device(None)
    with dg.device("cpu") as d:
        assert d == dg.device("cpu") and dg.ones(2).device == dg.device("cpu")
    for bad in ("cuda", "cuda:0", dg.device("cuda")):
        with pytest.raises(RuntimeError, match="CUDA"):
            dg.set_default_device(bad)
    with pytest.raises(RuntimeError, match="device 'mps' is not available"):
        dg.set_default_device("mps")
    with pytest.raises(AssertionError, match="CUDA"):            # torch raises AssertionError here
        with dg.device("cuda"):
            pass
    assert dg.get_default_device() == dg.device("cpu")


def test_tensor_device_attributes(dg):
    torch = pytest.importorskip("torch")
    t, tt = dg.ones(2), torch.ones(2)
    assert repr(t.device) == repr(tt.device) and isinstance(t.device, dg.device)
    assert (t.is_cpu, t.is_cuda, t.is_meta, t.get_device()) == (tt.is_cpu, tt.is_cuda, tt.is_meta, tt.get_device())
    assert t.cpu() is t


FACTORIES = [
    ("tensor", lambda m, d: m.tensor([1.0, 2.0], device=d)), ("zeros", lambda m, d: m.zeros(2, device=d)),
    ("ones", lambda m, d: m.ones(2, 3, device=d)), ("empty", lambda m, d: m.empty(2, device=d)),
    ("full", lambda m, d: m.full((2,), 1.5, device=d)), ("arange", lambda m, d: m.arange(3, device=d)),
    ("linspace", lambda m, d: m.linspace(0, 1, 3, device=d)), ("eye", lambda m, d: m.eye(2, device=d)),
    ("rand", lambda m, d: m.rand(2, device=d)), ("randn", lambda m, d: m.randn(2, device=d)),
    ("randint", lambda m, d: m.randint(0, 3, (2,), device=d)), ("randperm", lambda m, d: m.randperm(3, device=d)),
    ("zeros_like", lambda m, d: m.zeros_like(m.ones(2), device=d)),
    ("full_like", lambda m, d: m.full_like(m.ones(2), 3, device=d)),
    ("as_tensor", lambda m, d: m.as_tensor([1, 2], device=d)), ("Tensor", lambda m, d: m.Tensor([1], device=d)),
    ("FloatTensor", lambda m, d: m.FloatTensor([1], device=d)),
]


@pytest.mark.parametrize("name,make", FACTORIES, ids=[n for n, _ in FACTORIES])
def test_factories_take_cpu_devices_and_refuse_others(dg, name, make):
    for d in (None, "cpu", "cpu:0", dg.device("cpu"), dg.device("cpu", 0)):
        assert make(dg, d).device == dg.device("cpu")
    for d in ("cuda", "cuda:1", dg.device("cuda"), 0):
        with pytest.raises(RuntimeError, match="CUDA|accelerator"):
            make(dg, d)
    with pytest.raises(RuntimeError, match="mps"):
        make(dg, "mps")
    with pytest.raises(RuntimeError, match="banana"):
        make(dg, "banana")
    if name in ("Tensor", "FloatTensor"):                  # the legacy constructors stay on the cpu
        with pytest.raises(RuntimeError, match="device 'meta' is not available"):
            make(dg, "meta")
    else:
        t = make(dg, "meta")                             # tests/test_meta.py
        assert t.is_meta and t.device == dg.device("meta")


def test_to_and_type_take_devices_as_torch(dg):
    torch = pytest.importorskip("torch")
    t, tt = dg.ones(2), torch.ones(2)
    same = [lambda m, x: x.to("cpu"), lambda m, x: x.to(m.device("cpu")), lambda m, x: x.to(device="cpu"),
            lambda m, x: x.to("cpu", m.float64), lambda m, x: x.to(m.device("cpu:0"), dtype=m.float64),
            lambda m, x: x.to(m.float64), lambda m, x: x.to(m.ones(1, dtype=m.int64)),
            lambda m, x: x.to(m.float64, False, True), lambda m, x: x.to("cpu", m.float64, copy=True),
            lambda m, x: x.type(m.float64), lambda m, x: x.type("torch.DoubleTensor"),
            lambda m, x: x.type(m.LongTensor)]
    for call in same:
        ours, theirs = call(dg, t), call(torch, tt)
        assert ours.dtype.name == str(theirs.dtype).split(".")[1] and ours.tolist() == theirs.tolist()
    assert t.to("cpu") is t and t.to(copy=True) is not t
    assert t.type() == "dyngrad.FloatTensor" and dg.ones(2, dtype=dg.float64).type() == "dyngrad.DoubleTensor"
    for bad in ("cuda", "cuda:0", dg.device("cuda")):
        with pytest.raises(RuntimeError, match="to: device 'cuda.*needs CUDA"):
            t.to(bad)
        with pytest.raises(AssertionError):                         # torch's type for this error
            t.to(device=bad)
    with pytest.raises(RuntimeError, match="Expected one of cpu, cuda.*device string: banana"):
        t.to(device="banana")
    with pytest.raises(RuntimeError, match="Expected one of cpu, cuda.*device string: banana"):
        t.to("banana")
    assert t.to("meta").is_meta                       # the meta device is the one other device (tests/test_meta.py)
    with pytest.raises(RuntimeError, match="device 'mps' is not available"):
        t.to("mps")
    with pytest.raises(RuntimeError, match=r"Tensor.cuda\(\) needs CUDA"):
        t.cuda()


def test_cuda_and_backends_queries(dg):
    torch = pytest.importorskip("torch")
    import importlib
    cuda = importlib.import_module(dg.__name__ + ".cuda")
    assert dg.cuda is cuda
    for name in ("is_available", "device_count", "is_initialized", "is_bf16_supported", "memory_allocated",
                 "max_memory_allocated", "memory_reserved", "empty_cache", "seed", "seed_all"):
        assert getattr(cuda, name)() == getattr(torch.cuda, name)(), name
    assert cuda.manual_seed(0) is None and cuda.manual_seed_all(0) is None
    for name in ("current_device", "get_device_name", "get_device_properties", "synchronize", "init",
                 "get_rng_state", "mem_get_info"):
        with pytest.raises(AssertionError, match="needs CUDA"):
            getattr(cuda, name)()
        with pytest.raises(RuntimeError, match="needs CUDA"):   # both types, so either `except` catches it
            getattr(cuda, name)()
    with pytest.raises(RuntimeError, match="CUDA"):
        with cuda.device(0):
            pass
    backends = importlib.import_module(dg.__name__ + ".backends")
    assert backends.mps.is_available() is False and backends.mps.is_built() is False
    assert backends.cuda.is_built() is False and backends.cudnn.is_available() is False
    for flag in ("enabled", "benchmark", "deterministic", "allow_tf32"):
        assert getattr(backends.cudnn, flag) == getattr(torch.backends.cudnn, flag), flag
    backends.cudnn.benchmark = True           # plain attributes, as scripts set them
    backends.cudnn.deterministic = True
    assert backends.cudnn.benchmark and backends.cudnn.deterministic
    backends.cudnn.benchmark = backends.cudnn.deterministic = False
    assert backends.cuda.matmul.allow_tf32 is False


def test_the_usual_device_selection_idiom_runs(dg):
    torch = dg
    device = torch.device("cuda" if torch.cuda.is_available() else "mps" if torch.backends.mps.is_available()
                          else "cpu")
    model = torch.nn.Linear(3, 2).to(device)
    x = torch.randn(4, 3, device=device).to(device)
    assert model(x).device == device == torch.device("cpu")
    with pytest.raises(RuntimeError, match=r"Linear.cuda\(\) needs CUDA"):
        model.cuda()
    with pytest.raises(RuntimeError, match="needs CUDA"):
        model.to("cuda")


@pytest.mark.parametrize("make", [
    lambda nn, d: nn.Linear(2, 3, device=d), lambda nn, d: nn.Conv2d(1, 2, 3, device=d),
    lambda nn, d: nn.Embedding(4, 2, device=d), lambda nn, d: nn.LayerNorm(3, device=d),
    lambda nn, d: nn.BatchNorm1d(3, device=d), lambda nn, d: nn.RNN(2, 3, device=d),
    lambda nn, d: nn.LSTM(2, 3, device=d), lambda nn, d: nn.GRU(2, 3, device=d),
    lambda nn, d: nn.RNNCell(2, 3, device=d), lambda nn, d: nn.LSTMCell(2, 3, device=d),
    lambda nn, d: nn.GRUCell(2, 3, device=d)])
def test_module_constructors_take_device_and_dtype(dg, make):
    for d in ("cpu", dg.device("cpu"), None):
        assert all(p.device == dg.device("cpu") for p in make(dg.nn, d).parameters())
    with pytest.raises(RuntimeError, match="CUDA"):
        make(dg.nn, "cuda")


def test_module_dtype_keyword(dg):
    nn = dg.nn
    for m in (nn.Linear(2, 3, dtype=dg.float64), nn.Conv2d(1, 2, 3, dtype=dg.float64),
              nn.Embedding(4, 2, dtype=dg.float64), nn.LayerNorm(3, dtype=dg.float64),
              nn.BatchNorm1d(3, dtype=dg.float64), nn.LSTM(2, 3, dtype=dg.float64),
              nn.GRUCell(2, 3, dtype=dg.float64)):
        assert {p.dtype for p in m.parameters()} == {dg.float64}, m


def test_legacy_tensor_types_as_torch(dg):
    torch = pytest.importorskip("torch")
    for name in ("FloatTensor", "DoubleTensor", "LongTensor", "BoolTensor"):
        ours, theirs = getattr(dg, name), getattr(torch, name)
        for make in (lambda m: m.ones(2), lambda m: m.ones(2, dtype=m.float64), lambda m: m.tensor([1, 2]),
                     lambda m: m.tensor([True])):
            assert isinstance(make(dg), ours) == isinstance(make(torch), theirs)
        assert not issubclass(ours, dg.Tensor) and type(ours([1])) is dg.Tensor
        assert ours.__name__ == name and repr(ours) == f"<class 'dyngrad.{name}'>"
        assert str(ours.dtype).split(".")[1] == str(theirs.dtype).split(".")[1]
        assert ours.is_cuda is False
    assert dg.FloatTensor(2, 3).shape == (2, 3) and dg.FloatTensor(dg.Size([2, 3])).shape == (2, 3)
    assert dg.Tensor(dg.Size([2, 3])).shape == torch.Tensor(torch.Size([2, 3])).shape
    assert dg.FloatTensor((1, 2)).tolist() == [1.0, 2.0] and dg.FloatTensor(np.ones(2)).dtype is dg.float32
    src = dg.ones(2)
    assert dg.FloatTensor(src).data_ptr() == src.data_ptr()
    with pytest.raises(TypeError, match="expected a tensor of dtype int64, got float32"):
        dg.LongTensor(dg.ones(2))
    with pytest.raises(TypeError, match="data must be a sequence"):
        dg.LongTensor(2.5)
    with pytest.raises(RuntimeError, match="CUDA"):
        dg.FloatTensor([1], device="cuda")


def test_format_and_type_strings(dg):
    torch = pytest.importorskip("torch")
    for spec in ("{:+.2f}", "{:.3e}", "{}", "{:>8.1f}"):
        assert spec.format(dg.tensor(1.2345)) == spec.format(torch.tensor(1.2345))
    for m in (dg, torch):
        prefix = m.__name__.split(".")[0]
        assert m.ones(2).type() == prefix + ".FloatTensor"
        assert m.ones(2, dtype=m.int64).type() == prefix + ".LongTensor"
        assert m.ones(2, dtype=m.bool).type() == prefix + ".BoolTensor"
    with pytest.raises(TypeError):
        "{:.2f}".format(dg.ones(2))


def test_functional_module(dg):
    import importlib
    functional = importlib.import_module(dg.__name__ + ".functional")
    torch = pytest.importorskip("torch")
    import torch.functional as tf
    assert set(functional.__all__) <= set(tf.__all__) and "split" in functional.__all__
    for name in functional.__all__:
        assert getattr(functional, name) is getattr(dg, name)
    a, b = functional.split(dg.arange(5), 2)[:2]
    assert a.tolist() == [0, 1] and b.tolist() == [2, 3]
