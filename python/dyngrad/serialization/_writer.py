"""dyngrad.save: PyTorch's checkpoint format (Note [PyTorch's file format] in __init__.py), so torch.load reads it.

The pickle is written by a subclass of the standard library's Python pickler that spells dyngrad's objects as torch
does: a tensor as torch._utils._rebuild_tensor_v2 over a persistent id naming its storage, a Parameter as
_rebuild_parameter, a dtype as the global torch.float32, Size and device as torch.Size and torch.device. Storages are
collected in a first pass over the object (a storage's extent is known only once every tensor on it is seen,
Note [Shared storages] in _storage.py), then the second pass writes the pickle.
"""
import io
import math
import os
import pickle
import secrets
import sys
from collections import OrderedDict

import numpy as np

from .. import Tensor, Size, device, float32
from .._api import bridge
from ..nn import Parameter
from ._storage import BY_NAME, storage_end
from ._zip import ZipWriter

ARCHIVE = "archive"         # the folder of the records (torch.load reads any name)


class TorchGlobal:
    """A global written as torch spells it (GLOBAL 'module name'); never imported here."""

    __slots__ = ("module", "name")

    def __init__(self, module, name):
        self.module, self.name = module, name

    def __call__(self, *args):          # the pickler wants a reduce's function callable; this one is only a name
        raise TypeError(f"{self.module}.{self.name} is a name torch.load resolves, not a function of dyngrad.")


REBUILD_TENSOR_V2 = TorchGlobal("torch._utils", "_rebuild_tensor_v2")
REBUILD_PARAMETER = TorchGlobal("torch._utils", "_rebuild_parameter")
REBUILD_PARAMETER_WITH_STATE = TorchGlobal("torch._utils", "_rebuild_parameter_with_state")
REBUILD_FROM_TYPE_V2 = TorchGlobal("torch._tensor", "_rebuild_from_type_v2")
TORCH_SIZE = TorchGlobal("torch", "Size")
TORCH_DEVICE = TorchGlobal("torch", "device")
DTYPE_GLOBALS = {d.name: TorchGlobal("torch", d.name) for d in BY_NAME.values()}
STORAGE_GLOBALS = {d.name: TorchGlobal("torch", d.storage) for d in BY_NAME.values()}
# the fields of the engine's tensor core that live in a reference-engine tensor's __dict__ (not user attributes)
_ENGINE_FIELDS = frozenset(vars(Tensor)) | {"_data", "_storage"}


def _parameter_class():
    return Parameter


def is_tensor(obj):
    """A tensor of this engine, or of the other one (saved the same way)."""
    return isinstance(obj, Tensor) or (type(obj).__module__.startswith("dyngrad")
                                       and hasattr(type(obj), "_storage_id") and hasattr(obj, "_numpy_view"))


def user_state(t):
    """The Python attributes a user put on a tensor (torch pickles them with it)."""
    return {k: v for k, v in getattr(t, "__dict__", {}).items() if k not in _ENGINE_FIELDS}


class TensorData:
    """Pickled as the plain tensor it wraps (a Parameter's data)."""

    __slots__ = ("t",)

    def __init__(self, t):
        self.t = t


class StorageRef:
    __slots__ = ("key", "dtype", "numel")

    def __init__(self, key, dtype, numel):
        self.key, self.dtype, self.numel = key, dtype, numel


class _Member:
    """A tensor on a storage: its layout in elements of the storage."""

    __slots__ = ("t", "size", "stride", "offset", "ptr", "itemsize")

    def __init__(self, t):
        self.t = t
        self.size = tuple(t.shape)
        self.stride = tuple(t.stride())
        self.ptr = t.data_ptr()
        self.itemsize = t.element_size()      # of the engine's memory (the reference keeps bfloat16 in float32)
        self.offset = 0

    @property
    def numel(self):
        return math.prod(self.size)

    def contiguous(self):
        expect = 1
        for n, s in zip(reversed(self.size), reversed(self.stride)):
            if n != 1 and s != expect:
                return False
            expect *= n
        return True

    def make_own(self):
        """This tensor gets a storage of its own, holding its elements contiguously."""
        self.offset = 0
        strides, expect = [], 1
        for n in reversed(self.size):
            strides.append(expect)
            expect *= max(n, 1)
        self.stride = tuple(reversed(strides))


class Storages:
    """The storages of the tensors being saved, keyed by the engine's storage identity (Note [Shared storages]):
    the first pickling pass adds every tensor; finish() gives each storage its key, its extent and each tensor's
    offset in it; the second pass asks for the references."""

    def __init__(self):
        self.groups = {}        # storage identity -> [_Member], in the order first seen
        self.members = {}       # id(tensor) -> _Member
        self.refs = {}          # id(tensor) -> StorageRef
        self.storages = []      # (StorageRef, [_Member]) in key order

    def add(self, t):
        if id(t) in self.members:
            return
        member = _Member(t)
        self.members[id(t)] = member
        own = member.numel == 0 or any(s < 0 for s in member.stride)
        key = ("own", id(t)) if own else (t._storage_id(), t.dtype.name)
        self.groups.setdefault(key, []).append(member)

    def finish(self):
        for key, members in self.groups.items():
            if key[0] == "own":
                members[0].make_own()
                self._storage([members[0]], members[0].numel)
                continue
            base = min(m.ptr for m in members)
            shared = []
            for m in members:
                gap, rem = divmod(m.ptr - base, m.itemsize)
                if rem:
                    m.make_own()
                    self._storage([m], m.numel)
                else:
                    m.offset = gap
                    shared.append(m)
            if shared:
                self._storage(shared, max(storage_end(m.size, m.stride, m.offset) for m in shared))

    def _storage(self, members, numel):
        ref = StorageRef(str(len(self.storages)), BY_NAME[members[0].t.dtype.name], numel)
        self.storages.append((ref, members))
        for m in members:
            self.refs[id(m.t)] = ref

    def reference(self, t):
        member = self.members[id(t)]
        return self.refs[id(t)], member

    def data(self, ref, members):
        """The storage's bytes (little-endian): the tensors' elements at their offsets, zeros in between."""
        fd = ref.dtype
        if len(members) == 1 and members[0].offset == 0 and members[0].numel == ref.numel and members[0].contiguous():
            return np.asarray(_file_values(members[0].t, fd), order="C").reshape(-1)
        buf = np.zeros(ref.numel, dtype=fd.file_np)
        for m in members:
            if m.numel:
                target = np.lib.stride_tricks.as_strided(buf[m.offset:], m.size, [s * fd.itemsize for s in m.stride])
                target[...] = _file_values(m.t, fd)
        return buf


def _file_values(t, fd):
    """A numpy view (or, for bfloat16, the 16-bit patterns) of t's elements in the file's dtype."""
    t = t.detach()
    if fd.name == "bfloat16":
        values = bridge.view(t.to(float32))
        return (values.view(np.uint32) >> np.uint32(16)).astype(fd.file_np)
    values = bridge.view(t)
    if values.dtype.itemsize == fd.itemsize and values.dtype.kind != fd.file_np.kind:
        return values.view(fd.file_np)       # bool as its bytes
    return values.astype(fd.file_np, copy=False)


class TorchPickler(pickle._Pickler):
    """The standard library's Python pickler (the C one cannot write a global it does not import) writing dyngrad's
    objects as torch writes its own."""

    dispatch = dict(pickle._Pickler.dispatch)

    def __init__(self, file, protocol, storages, collecting):
        super().__init__(file, protocol)
        self.storages = storages
        self.collecting = collecting
        self.parameter = _parameter_class()

    def persistent_id(self, obj):
        if type(obj) is StorageRef:
            return ("storage", STORAGE_GLOBALS[obj.dtype.name], obj.key, "cpu", obj.numel)
        return None

    def reducer_override(self, obj):
        if type(obj) is TensorData:
            return self._tensor(obj.t)
        if not is_tensor(obj):
            if type(obj) is Size:
                return TORCH_SIZE, (tuple(obj),)
            if type(obj) is device:
                return TORCH_DEVICE, (obj.type,) if obj.index is None else (obj.type, obj.index)
            return NotImplemented
        hooks = OrderedDict()
        if isinstance(obj, self.parameter) or type(obj).__name__ == "Parameter":
            state = user_state(obj)
            if state:
                return REBUILD_PARAMETER_WITH_STATE, (TensorData(obj), obj.requires_grad, hooks, state)
            return REBUILD_PARAMETER, (TensorData(obj), obj.requires_grad, hooks)
        func, args = self._tensor(obj)
        state = user_state(obj)
        if type(obj) is Tensor and not state:
            return func, args
        return REBUILD_FROM_TYPE_V2, (func, type(obj), args, state)

    def _tensor(self, t):
        if self.collecting:
            self.storages.add(t)
            return REBUILD_TENSOR_V2, ()
        ref, member = self.storages.reference(t)
        return REBUILD_TENSOR_V2, (ref, member.offset, member.size, member.stride, bool(t.requires_grad),
                                   OrderedDict())


def _write_torch_global(pickler, obj):
    pickler.write(pickle.GLOBAL + f"{obj.module}\n{obj.name}\n".encode("utf-8"))
    pickler.memoize(obj)


def _write_dtype(pickler, obj):
    _write_torch_global(pickler, DTYPE_GLOBALS[obj.name])


TorchPickler.dispatch[TorchGlobal] = _write_torch_global
TorchPickler.dispatch[type(float32)] = _write_dtype


class _Discard:
    def write(self, data):
        return len(data)


def save_torch(obj, f, protocol, byteorder_record):
    storages = Storages()
    TorchPickler(_Discard(), protocol, storages, collecting=True).dump(obj)
    storages.finish()
    pkl = io.BytesIO()
    TorchPickler(pkl, protocol, storages, collecting=False).dump(obj)
    records = [("data.pkl", pkl.getvalue()), (".format_version", b"1"), (".storage_alignment", b"64")]
    if byteorder_record:
        records.append(("byteorder", sys.byteorder.encode()))
    own = isinstance(f, (str, bytes, os.PathLike))
    fh = open(f, "wb") if own else f
    try:
        writer = ZipWriter(fh)
        for name, data in records:
            writer.write(f"{ARCHIVE}/{name}", data)
        for ref, members in storages.storages:
            writer.write(f"{ARCHIVE}/data/{ref.key}", storages.data(ref, members))
        writer.write(f"{ARCHIVE}/version", b"3\n")
        writer.write(f"{ARCHIVE}/.data/serialization_id", f"{secrets.randbits(128):040d}".encode())
        writer.close()
    finally:
        if own:
            fh.close()
