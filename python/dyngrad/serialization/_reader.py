"""dyngrad.load of PyTorch's checkpoint format: the storages, the tensors rebuilt over them (as views, Note [Shared
storages] in _storage.py), map_location and mmap; the pickle is read by the restricted unpickler
(weights_only=True, Note [weights_only] in _unpickler.py) or by the standard library's (weights_only=False)."""
import importlib
import io
import math
import pickle
from collections import Counter, OrderedDict

import numpy as np

from .. import Tensor, Size, device, from_numpy, no_grad, empty, bfloat16, tensor
from .._user_frame import warn
from ..nn import Parameter
from ..nn.hooks import HookDict
from . import _unpickler
from ._errors import bad, describe
from ._storage import (BY_NAME, BY_STORAGE, MISSING_DTYPES, MISSING_STORAGES, MAX_DIMS, MAX_NUMEL, apply_plan,
                       view_plan)

_ROOT = __name__.rpartition(".serialization.")[0]


class StorageType:
    """What the global torch.FloatStorage (etc.) resolves to: a marker of the dtype of a storage's elements."""

    __slots__ = ("dtype",)

    def __init__(self, dtype):
        self.dtype = dtype

    def __repr__(self):
        return f"torch.{self.dtype.storage}"


_STORAGE_TYPES = {name: StorageType(d) for name, d in BY_STORAGE.items()}
_UNTYPED = StorageType(BY_NAME["uint8"])


class LoadedStorage:
    """One storage of the file: its elements in `base`, a 1-d tensor every tensor on it is a view of."""

    __slots__ = ("key", "dtype", "numel", "base")

    def __init__(self, key, dtype, numel, base):
        self.key, self.dtype, self.numel, self.base = key, dtype, numel, base


def _cpu_only(location, how):
    text = str(location)
    if text == "cpu" or text.startswith("cpu:"):
        return
    if text == "meta":
        raise RuntimeError(f"load: {how} 'meta'; dyngrad.load reads tensors onto the CPU only (map_location='cpu').")
    raise RuntimeError(f"load: {how} {text!r}, a device dyngrad does not have: it runs on the CPU only. Load with "
                       "map_location='cpu' (torch's advice for a CPU-only machine, too).")


def check_map_location(map_location):
    """Checks map_location's type; returns a function (storage tensor, location) -> storage tensor."""
    if map_location is None:
        def restore(base, location):
            _cpu_only(location, "the checkpoint holds tensors saved on")
            return base
    elif isinstance(map_location, dict):
        for k, v in map_location.items():
            if not isinstance(k, str) or not isinstance(v, (str, device)):
                raise TypeError("load: a map_location dict must map device names to device names, got "
                                f"{k!r}: {v!r}.")

        def restore(base, location):
            target = map_location.get(location, location)
            _cpu_only(target, f"map_location maps '{location}' to" if location in map_location else
                      "the checkpoint holds tensors saved on")
            return base
    elif isinstance(map_location, (str, device)) or hasattr(map_location, "type") and not callable(map_location):
        _cpu_only(map_location, "map_location names")          # (a device object of another library too)

        def restore(base, location):
            return base
    elif callable(map_location):
        def restore(base, location):
            out = map_location(base, location)
            if out is None:
                _cpu_only(location, "the checkpoint holds tensors saved on")
                return base
            if not isinstance(out, Tensor) or out.dtype != base.dtype or tuple(out.shape) != tuple(base.shape):
                raise TypeError("load: map_location(storage, location) must return None or a storage: a 1-d "
                                f"tensor of {base.dtype} with {base.numel()} elements (got "
                                f"{type(out).__name__}{'' if not isinstance(out, Tensor) else tuple(out.shape)}).")
            return out
    else:
        raise TypeError(f"load: map_location must be None, a device, a str, a dict or a callable, got "
                        f"{type(map_location).__name__}.")
    return restore


def _int(value, what):
    if not isinstance(value, int) or isinstance(value, bool):
        raise bad(f"a tensor's {what} is a {type(value).__name__}, not an int.")
    return value


def _ints(value, what):
    if not isinstance(value, (tuple, list)):
        raise bad(f"a tensor's {what} is a {type(value).__name__}, not a tuple of ints.")
    if len(value) > MAX_DIMS:
        raise bad(f"a tensor's {what} has {len(value)} dimensions (at most {MAX_DIMS}).")
    return tuple(_int(v, what) for v in value)


class TorchReader:
    """Reads one archive written by torch.save (or dyngrad.save)."""

    def __init__(self, archive, prefix, map_location, mmap_path, encoding):
        self.zr = archive
        self.prefix = prefix
        self.restore = check_map_location(map_location)
        self.encoding = encoding
        self.storages = {}
        self.copy_budget = archive.file_size       # elements copied for layouts no view gives, in bytes
        order = self._record("byteorder", optional=True)
        if order not in (None, b"little", b"big"):
            raise bad(f"the checkpoint's byteorder record is {order[:20]!r}, not b'little' or b'big'.")
        self.big_endian = order == b"big"
        self.mapped = None
        if mmap_path is not None:
            self.mapped = np.memmap(mmap_path, dtype=np.uint8, mode="c")  # copy-on-write, as torch's mmap=True
        self.rebuilders = dict(zip(REBUILDER_NAMES, (
            self.rebuild_tensor, self.rebuild_tensor_v2, self.rebuild_tensor_v3, self.rebuild_parameter,
            self.rebuild_parameter_with_state, self.rebuild_meta_tensor, self.rebuild_from_type_v2)))

    def _record(self, name, optional=False):
        full = f"{self.prefix}/{name}"
        if full not in self.zr:
            if optional:
                return None
            raise bad(f"the checkpoint has no record '{full}'.")
        return self.zr.read_bytes(full)

    # ----- storages
    def persistent_load(self, pid):
        if not isinstance(pid, tuple) or len(pid) != 5:
            raise bad(f"a persistent id of the pickle is {describe(pid)}, not a storage's "
                      "('storage', type, key, location, numel).")
        kind, storage_type, key, location, numel = pid
        kind, key, location = (v.decode("ascii") if isinstance(v, bytes) else v for v in (kind, key, location))
        if kind != "storage" or not isinstance(storage_type, StorageType) or not isinstance(key, str) \
                or not isinstance(location, str):
            raise bad(f"a persistent id of the pickle is ({', '.join(map(describe, pid))}), not a storage's.")
        numel = _int(numel, "storage size")
        if numel < 0:
            raise bad(f"storage '{key}' claims {numel} elements.")
        found = self.storages.get(key)
        if found is not None:
            if found.dtype is not storage_type.dtype or found.numel != numel:
                raise bad(f"storage '{key}' is named as {found.dtype.name} x {found.numel} and as "
                          f"{storage_type.dtype.name} x {numel}.")
            return found
        fd = storage_type.dtype
        name = f"{self.prefix}/data/{key}"
        member = self.zr.member(name)
        if member.size != numel * fd.itemsize:
            raise bad(f"storage '{key}' claims {numel} {fd.name} elements ({numel * fd.itemsize} bytes) but its "
                      f"record holds {member.size} bytes.")
        base = self.restore(self._storage_tensor(name, member, fd, numel), location)
        storage = LoadedStorage(key, fd, numel, base)
        self.storages[key] = storage
        return storage

    def _storage_tensor(self, name, member, fd, numel):
        file_np = fd.file_np.newbyteorder(">") if self.big_endian else fd.file_np
        if (self.mapped is not None and self.zr.mappable(name) and member.data_offset % fd.itemsize == 0
                and numel > 0):
            self.zr.check_claim(member)
            raw = self.mapped[member.data_offset:member.data_offset + member.size].view(file_np)
        else:
            raw = self.zr.read_array(name, file_np, numel)
        return tensor_from_file_array(raw, fd)

    # ----- tensors
    def _tensor(self, storage, offset, size, stride):
        if not isinstance(storage, LoadedStorage):
            raise bad(f"a tensor is rebuilt over a {type(storage).__name__}, not a storage of the file.")
        offset = _int(offset, "storage offset")
        size, stride = _ints(size, "size"), _ints(stride, "stride")
        if len(size) != len(stride):
            raise bad(f"a tensor has size {size} but stride {stride}.")
        if offset < 0 or any(n < 0 for n in size) or any(s < 0 for s in stride):
            raise bad(f"a tensor has a negative size, stride or offset (size {size}, stride {stride}, offset "
                      f"{offset}).")
        numel = math.prod(size)
        if numel > MAX_NUMEL:
            raise bad(f"a tensor claims {numel} elements.")
        with no_grad():
            if numel == 0:
                return empty(size, dtype=storage.base.dtype)
            last = offset + sum((n - 1) * s for n, s in zip(size, stride))
            if last >= storage.numel:
                raise bad(f"a tensor (size {size}, stride {stride}, offset {offset}) reaches element {last} of "
                          f"storage '{storage.key}', which holds {storage.numel}.")
            plan = view_plan(size, stride, offset, storage.numel)
            if plan is not None:
                t = apply_plan(storage.base, plan, size).detach()
                if self._is_layout(t, storage.base, size, stride, offset):
                    return t
            return self._copy(storage, size, stride, offset, numel)

    @staticmethod
    def _is_layout(t, base, size, stride, offset):
        return (tuple(t.shape) == size
                and all(n == 1 or a == b for n, a, b in zip(size, t.stride(), stride))
                and t.data_ptr() - base.data_ptr() == offset * base.element_size())

    def _copy(self, storage, size, stride, offset, numel):
        """A layout no chain of views gives (overlapping windows): its elements, copied (memory not shared)."""
        cost = numel * storage.dtype.itemsize
        if cost > self.copy_budget:
            raise bad(f"a tensor of size {size} with stride {stride} overlaps itself in storage '{storage.key}'; "
                      f"copying it would allocate {cost} bytes, more than the file holds.")
        self.copy_budget -= cost
        positions = np.full(size, offset, dtype=np.int64)
        for k, (n, s) in enumerate(zip(size, stride)):
            axis = [1] * len(size)
            axis[k] = n
            positions = positions + (np.arange(n, dtype=np.int64) * s).reshape(axis)
        return storage.base[tensor(positions.reshape(-1))].reshape(size)

    def rebuild_tensor(self, storage, storage_offset, size, stride):
        return self._tensor(storage, storage_offset, size, stride)

    def rebuild_tensor_v2(self, storage, storage_offset, size, stride, requires_grad=False, backward_hooks=None,
                          metadata=None):
        t = self._tensor(storage, storage_offset, size, stride)
        if metadata:
            raise bad(f"a tensor carries the flags {describe(metadata)} (torch's conjugate or negative bits), which "
                      "dyngrad tensors do not have.")
        if not isinstance(requires_grad, bool):
            raise bad(f"a tensor's requires_grad is a {type(requires_grad).__name__}.")
        if requires_grad:
            if not t.dtype.is_floating_point:
                raise bad(f"a {t.dtype} tensor is marked requires_grad; only floating-point tensors can be.")
            t.requires_grad_(True)
        return t

    def rebuild_tensor_v3(self, storage, storage_offset, size, stride, requires_grad, backward_hooks, dtype,
                          metadata=None):
        raise bad(f"the checkpoint holds a tensor of dtype {dtype}, which dyngrad does not have.")

    def rebuild_parameter(self, data, requires_grad, backward_hooks):
        if not isinstance(data, Tensor) or not isinstance(requires_grad, bool):
            raise bad(f"a Parameter is rebuilt from {type(data).__name__} and {describe(requires_grad)}.")
        if requires_grad and not data.dtype.is_floating_point:
            raise bad(f"a {data.dtype} Parameter is marked requires_grad; only floating-point tensors can be.")
        return Parameter(data, requires_grad)

    def rebuild_parameter_with_state(self, data, requires_grad, backward_hooks, state):
        return set_state(self.rebuild_parameter(data, requires_grad, backward_hooks), state)

    def rebuild_meta_tensor(self, dtype, size, stride, requires_grad):
        raise bad("the checkpoint holds a meta tensor (a shape without data); dyngrad.load reads tensors with data.")

    def rebuild_from_type_v2(self, func, new_type, args, state):
        if not any(func is f for f in self.rebuilders.values()):
            raise bad(f"_rebuild_from_type_v2 calls {describe(func)}, not one of torch's tensor rebuilders.")
        if not isinstance(args, tuple):
            raise bad("_rebuild_from_type_v2 with arguments that are not a tuple.")
        out = func(*args)
        if new_type is Parameter and not isinstance(out, Parameter):
            out = Parameter(out, out.requires_grad)
        elif new_type is not Tensor and type(out) is not new_type:
            raise bad(f"the checkpoint holds a tensor of the subclass {getattr(new_type, '__qualname__', new_type)}"
                      "; dyngrad.load rebuilds Tensor and Parameter only.")
        return set_state(out, state)

    # ----- globals
    def restrictions(self):
        d = dict(DEFAULT_GLOBALS)
        d.update(self.rebuilders)
        callables = list(_DEFAULT_CALLABLES) + list(self.rebuilders.values())
        return _unpickler.Restrictions(_ROOT, d, callables, _CONTAINERS, _REFUSALS)

    def load(self, weights_only):
        data = self._record("data.pkl")
        if weights_only:
            return _unpickler.RestrictedUnpickler(data, self.restrictions(), self.persistent_load,
                                                  self.encoding).load()
        return _FullUnpickler(io.BytesIO(data), self, encoding=self.encoding).load()


def tensor_from_file_array(raw, fd):
    """A tensor over the elements of `raw`, an array of fd's file dtype (shared with it, but for bfloat16, which
    is converted, and bytes of a bool array other than 0 and 1, which from_numpy copies)."""
    if not raw.dtype.isnative:
        raw = raw.astype(raw.dtype.newbyteorder("="))
    if fd.name == "bfloat16":
        values = (raw.astype(np.uint32) << np.uint32(16)).view(np.float32)
        with no_grad():
            return from_numpy(values).to(bfloat16)
    if fd.name == "bool":
        raw = raw.view(np.bool_)
    return from_numpy(raw)


def set_state(t, state):
    """Restores the Python attributes torch pickled with a tensor or a Parameter ((dict, slots) or dict)."""
    if not state:
        return t
    dict_state, slots = state if isinstance(state, tuple) and len(state) == 2 else (state, None)
    for part in (dict_state, slots):
        if not part:
            continue
        if not isinstance(part, dict):
            raise bad(f"a tensor's state is a {type(part).__name__}, not a dict of attributes.")
        try:
            _unpickler.set_attributes(t, part, f"a {type(t).__name__}")
        except AttributeError:
            warn(f"load: the checkpoint's tensor carries the attributes {sorted(map(str, part))}, which a "
                 f"dyngrad {type(t).__name__} cannot hold; they were dropped.", UserWarning)
    return t


# ----- the default globals (Note [weights_only]) -------------------------------------------------------------------
def _encode(text, encoding="utf-8"):
    """_codecs.encode as protocol-2 pickles call it for bytes: (str, 'latin1')."""
    if not isinstance(text, str) or encoding not in ("latin1", "latin-1"):
        raise bad(f"_codecs.encode is called with ({describe(text)}, {describe(encoding)}), not how a pickle "
                  "writes bytes.")
    return text.encode("latin-1")


def _bytes(*args):
    if args:
        raise bad("builtins.bytes is called with arguments (only bytes() is how a pickle writes b'').")
    return b""


def _bytearray(*args):
    if not args or len(args) == 1 and isinstance(args[0], (bytes, bytearray)):
        return bytearray(*args)
    if len(args) == 2 and isinstance(args[0], str) and args[1] in ("latin1", "latin-1"):
        return bytearray(args[0], "latin-1")
    raise bad("builtins.bytearray is called with arguments that are not bytes (a size would allocate).")


def _collection(kind):
    def build(*args):
        if len(args) > 1 or args and not isinstance(args[0], (list, tuple, set, frozenset)):
            raise bad(f"builtins.{kind.__name__} is called with arguments that are not one list.")
        return kind(*args)
    build.__qualname__ = kind.__name__
    return build


def _complex(real=0.0, imag=0.0):
    if not all(isinstance(v, (int, float)) for v in (real, imag)):
        raise bad("builtins.complex is called with arguments that are not numbers.")
    return complex(real, imag)


def _size(values=()):
    if not isinstance(values, (tuple, list)) or len(values) > MAX_DIMS:
        raise bad("torch.Size is called with arguments that are not a tuple of ints.")
    return Size(tuple(_int(v, "size") for v in values))


def _device(kind, index=None):
    if not isinstance(kind, str) or index is not None and not isinstance(index, int):
        raise bad("torch.device is called with arguments that are not a device name.")
    return device(kind, index)


def _dict_class(kind):
    def build(*args):
        if len(args) > 1 or args and not isinstance(args[0], (list, tuple, dict)):
            raise bad(f"{kind.__name__} is called with arguments that are not one list of pairs.")
        return kind(*args)
    return build


def _hook_dict_class():
    return HookDict


def _defaults():
    hook_dict = _hook_dict_class()
    root = importlib.import_module(_ROOT)
    defaults = {
        "collections.OrderedDict": _dict_class(OrderedDict),
        "collections.Counter": _dict_class(Counter),
        "builtins.set": _collection(set),
        "builtins.frozenset": _collection(frozenset),
        "builtins.bytearray": _bytearray,
        "builtins.bytes": _bytes,
        "builtins.complex": _complex,
        "_codecs.encode": _encode,
        "torch.Size": _size,
        "torch.device": _device,
        "torch.Tensor": Tensor,
        "torch.nn.parameter.Parameter": Parameter,
        "torch.UntypedStorage": _UNTYPED,
        "torch.storage.UntypedStorage": _UNTYPED,
        "dyngrad.nn.hooks.HookDict": _dict_class(hook_dict),
        "dyngrad.reference.nn.hooks.HookDict": _dict_class(hook_dict),
    }
    for name in BY_NAME:
        defaults[f"torch.{name}"] = getattr(root, name)
    for name, marker in _STORAGE_TYPES.items():
        defaults[f"torch.{name}"] = marker
    callables = [v for k, v in defaults.items() if k.startswith(("collections.", "builtins.", "_codecs.",
                                                                    "dyngrad.")) or k in ("torch.Size", "torch.device")]
    containers = (dict, OrderedDict, Counter, hook_dict)
    return defaults, callables, containers


DEFAULT_GLOBALS, _DEFAULT_CALLABLES, _CONTAINERS = {}, [], ()
_REFUSALS = {}
for _name in MISSING_DTYPES:
    _REFUSALS[f"torch.{_name}"] = f"the checkpoint uses the dtype torch.{_name}, which dyngrad does not have."
for _name in MISSING_STORAGES + ("UInt16Storage", "UInt32Storage", "UInt64Storage", "Float8_e4m3fnStorage",
                                 "Float8_e5m2Storage"):
    _REFUSALS[f"torch.{_name}"] = (f"the checkpoint holds a torch.{_name} (a dtype dyngrad does not have: complex, "
                                   "quantized, unsigned 16-64 bit and 8-bit float tensors are not supported).")
for _name, _what in (("_rebuild_sparse_tensor", "a sparse tensor"), ("_rebuild_nested_tensor", "a nested tensor"),
                     ("_rebuild_qtensor", "a quantized tensor"), ("_rebuild_wrapper_subclass", "a tensor subclass "
                      "without storage (DTensor, FakeTensor...)"), ("_rebuild_device_tensor_from_numpy", "an XLA "
                      "tensor"), ("_rebuild_device_tensor_from_cpu_tensor", "a tensor of another backend")):
    _REFUSALS[f"torch._utils.{_name}"] = f"the checkpoint holds {_what}, which dyngrad does not support."
_REFUSALS["torch.serialization._get_layout"] = ("the checkpoint holds a tensor layout (sparse tensors), which "
                                               "dyngrad does not support.")


def _ensure_defaults():
    global _DEFAULT_CALLABLES, _CONTAINERS
    if not DEFAULT_GLOBALS:
        defaults, _DEFAULT_CALLABLES, _CONTAINERS = _defaults()
        DEFAULT_GLOBALS.update(defaults)


class _FullUnpickler(pickle.Unpickler):
    """weights_only=False: the standard library's unpickler (any global, any code the file names), with torch's
    names mapped to dyngrad's: the rebuilders and storage types above, and torch.X to dyngrad's X."""

    def __init__(self, file, reader, encoding):
        super().__init__(file, encoding=encoding)
        self.reader = reader

    def persistent_load(self, pid):
        return self.reader.persistent_load(pid)

    def find_class(self, module, name):
        full = _unpickler.global_name(module, name)
        if full in self.reader.rebuilders:
            return self.reader.rebuilders[full]
        if full in DEFAULT_GLOBALS and (full.startswith("torch.") or full.startswith("dyngrad")):
            return DEFAULT_GLOBALS[full]
        if full in _REFUSALS:
            raise bad(_REFUSALS[full])
        candidates = _unpickler.our_name_candidates(module, _ROOT)
        if candidates:
            for candidate in candidates:
                try:
                    mod = importlib.import_module(candidate)
                except ImportError:
                    continue
                found = _unpickler.lookup(mod, name)
                if found is not None:
                    return found
            raise pickle.UnpicklingError(f"load: the checkpoint names {full}, which dyngrad does not have.")
        return super().find_class(module, name)


REBUILDER_NAMES = ("torch._utils._rebuild_tensor", "torch._utils._rebuild_tensor_v2", "torch._utils._rebuild_tensor_v3",
                   "torch._utils._rebuild_parameter", "torch._utils._rebuild_parameter_with_state",
                   "torch._utils._rebuild_meta_tensor_no_storage", "torch._tensor._rebuild_from_type_v2")


def static_restrictions():
    """The restrictions of a load, for scanning a file without loading it (the rebuilders as names only)."""
    _ensure_defaults()
    defaults = dict(DEFAULT_GLOBALS)
    defaults.update((name, name) for name in REBUILDER_NAMES)
    return _unpickler.Restrictions(_ROOT, defaults, _DEFAULT_CALLABLES, _CONTAINERS, _REFUSALS)


def read_torch(archive, prefix, map_location, weights_only, mmap_path, encoding):
    _ensure_defaults()
    return TorchReader(archive, prefix, map_location, mmap_path, encoding).load(weights_only)
