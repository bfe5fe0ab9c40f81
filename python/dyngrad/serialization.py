"""dyngrad.save / dyngrad.load: tensors and (nested) state dicts in a safe .npz file. docs/serialization.md has
the format, its safety promise and how it compares with torch.load(weights_only=True).

Format (version 1). The file is an ordinary, uncompressed numpy .npz archive (a zip of .npy files), so
`numpy.load(path)` reads it; dyngrad.load reads it with its own validating reader and never unpickles:

- every tensor (or numpy array) in `obj` is one array entry; its key is its path in the object, the keys of
  the enclosing dicts/lists joined with "/" (e.g. a model's state dict gives "fc.weight", "fc.bias", so
  `numpy.load(path)["fc.weight"]` works; an optimizer's gives "state/0/exp_avg"). "/" and "%" inside a key are
  written as "%2F" and "%25". An object that is a single tensor is stored under the key "tensor".
- the entry "__dyngrad__" holds UTF-8 JSON describing the structure: {"format": "dyngrad", "version": 1,
  "root": node}, where a node is {"t": "tensor", "key": k, "requires_grad": b} | {"t": "ndarray", "key": k} |
  {"t": "dict", "items": [[key, node], ...]} (keys are str or int) | {"t": "list" or "tuple", "items": [node, ...]}
  | {"t": "value", "v": number, string, bool or null} (a float that is not finite is stored as its repr with
  "float": true).

Note [Loading untrusted files]: a file that is not a valid checkpoint raises InvalidCheckpointError (one type, a
RuntimeError and a pickle.UnpicklingError, as torch's loader raises for a file it refuses) naming the problem,
and never makes the loader run code, recurse without bound or allocate more than the file holds:
- arrays are read by our own .npy reader: the header's shape and dtype are checked against the bytes the entry
  really has (and, for a stored entry, against the file's size) before anything is allocated; dtypes are limited to
  bool, integers and floats (object arrays would need pickle; complex ones are refused, never cast);
- the JSON is parsed by the standard json module (RecursionError caught) and walked to a depth of at most
  MAX_DEPTH; every key it names must exist.
"""
import json
import math
import os
import pickle
import struct
import zipfile

import numpy as np

from . import Tensor, tensor, from_numpy

_META = "__dyngrad__"
_VERSION = 1
MAX_DEPTH = 128                 # nesting of dicts/lists in a checkpoint (a state dict needs 3 or 4)
_MAX_HEADER = 64 * 1024         # bytes of a .npy header (numpy writes well under 1 KiB)
_DTYPE_KINDS = "biuf"           # bool, signed and unsigned integers, floats
_DEFLATE_MAX_RATIO = 1100       # deflate cannot expand more than ~1032:1


class InvalidCheckpointError(RuntimeError, pickle.UnpicklingError):
    """The file is not a valid dyngrad checkpoint (or a plain numpy .npz): truncated, not a zip archive,
    malformed metadata, an unsupported dtype, a header that claims more data than the file holds, nesting deeper
    than MAX_DEPTH... The message names the problem. Note [Loading untrusted files]."""


def _escape(key):
    return str(key).replace("%", "%25").replace("/", "%2F")


def _check_dtype(dtype, where, op):
    if dtype.kind not in _DTYPE_KINDS:
        what = "complex" if dtype.kind == "c" else str(dtype)
        raise TypeError(f"{op}: arrays of dtype {what} cannot be stored (at '{where}'); supported: bool, integer "
                        "and floating-point dtypes.")


def save(obj, f, pickle_module=None, pickle_protocol=None, _use_new_zipfile_serialization=True,
         _disable_byteorder_record=False):
    """Save tensors, numpy arrays, numbers, strings and nested dicts/lists/tuples of them (state dicts, optimizer
    states) to `f`, a path or a binary file object (.npz; see the module docstring). pickle_module and
    pickle_protocol are accepted for torch compatibility and unused: nothing is pickled."""
    arrays = {}
    on_path = set()         # ids of the containers being encoded: a container holding itself cannot be saved

    def store(path, array):
        key = path or "tensor"
        if key in arrays:
            raise ValueError(f"save: two entries map to the key '{key}' (e.g. dict keys 0 and '0')")
        arrays[key] = array
        return key

    def encode(value, path, depth):
        if depth > MAX_DEPTH:
            raise ValueError(f"save: the object is nested more than {MAX_DEPTH} levels deep (at '{path}'); "
                             "dyngrad.load would refuse it.")
        if isinstance(value, Tensor):
            array = np.array(value.detach().numpy(), order="C")   # (ascontiguousarray would make 0-d 1-d)
            _check_dtype(array.dtype, path or "<root>", "save")
            return {"t": "tensor", "key": store(path, array), "requires_grad": bool(value.requires_grad)}
        if isinstance(value, np.ndarray):
            if value.dtype == object:
                raise TypeError(f"save: numpy arrays of dtype object are not supported (at '{path}')")
            _check_dtype(value.dtype, path or "<root>", "save")
            return {"t": "ndarray", "key": store(path, value)}
        if isinstance(value, (dict, list, tuple)):
            if id(value) in on_path:
                raise ValueError(f"save: the object contains itself (at '{path or '<root>'}'); it cannot be saved.")
            on_path.add(id(value))
            try:
                if isinstance(value, dict):
                    items = []
                    for k, v in value.items():
                        if not isinstance(k, (str, int)) or isinstance(k, bool):
                            raise TypeError(f"save: dict keys must be str or int, got {type(k).__name__} at '{path}'")
                        items.append([k, encode(v, f"{path}/{_escape(k)}" if path else _escape(k), depth + 1)])
                    return {"t": "dict", "items": items}
                kind = "tuple" if isinstance(value, tuple) else "list"
                return {"t": kind, "items": [encode(v, f"{path}/{i}" if path else str(i), depth + 1)
                                             for i, v in enumerate(value)]}
            finally:
                on_path.discard(id(value))
        if isinstance(value, np.generic):
            value = value.item()
        if value is None or isinstance(value, (bool, int, str)):
            return {"t": "value", "v": value}
        if isinstance(value, float):
            return {"t": "value", "v": value if math.isfinite(value) else repr(value), "float": True}
        raise TypeError(f"save: cannot save an object of type {type(value).__name__} (at '{path or '<root>'}'); "
                        "supported: tensors, numpy arrays, numbers, strings, None and dicts/lists/tuples of them")

    root = encode(obj, "", 0)
    if _META in arrays:
        raise ValueError(f"save: the key '{_META}' is reserved")
    meta = json.dumps({"format": "dyngrad", "version": _VERSION, "root": root})
    arrays[_META] = np.frombuffer(meta.encode("utf-8"), dtype=np.uint8)
    if isinstance(f, (str, os.PathLike)):
        with open(f, "wb") as fh:             # open ourselves: np.savez would append ".npz" to the name
            np.savez(fh, **arrays)
    else:
        np.savez(f, **arrays)


# ----- loading -------------------------------------------------------------------------------------------------
def _bad(message):
    return InvalidCheckpointError("load: " + message)


def _read_npy_header(fp, name, available):
    """(shape, fortran_order, dtype, header_bytes) of the .npy entry `name` whose stream `fp` is at its start,
    with `available` bytes in all. Validated; nothing allocated beyond the header."""
    magic = fp.read(8)
    if len(magic) < 8 or magic[:6] != b"\x93NUMPY":
        raise _bad(f"entry '{name}' is not a .npy array (bad magic).")
    major = magic[6]
    if major == 1:
        size_bytes = fp.read(2)
        if len(size_bytes) < 2:
            raise _bad(f"entry '{name}' is truncated in its header.")
        header_len = struct.unpack("<H", size_bytes)[0]
        prefix = 10
    elif major in (2, 3):
        size_bytes = fp.read(4)
        if len(size_bytes) < 4:
            raise _bad(f"entry '{name}' is truncated in its header.")
        header_len = struct.unpack("<I", size_bytes)[0]
        prefix = 12
    else:
        raise _bad(f"entry '{name}' has an unsupported .npy version {major}.")
    if header_len > _MAX_HEADER or prefix + header_len > available:
        raise _bad(f"entry '{name}' claims a {header_len}-byte header, more than it holds.")
    raw = fp.read(header_len)
    if len(raw) < header_len:
        raise _bad(f"entry '{name}' is truncated in its header.")
    try:
        text = raw.decode("latin1" if major < 3 else "utf8")
        import ast
        header = ast.literal_eval(text)   # a literal dict, as numpy writes it; literal_eval runs no code
    except (ValueError, SyntaxError, UnicodeDecodeError, MemoryError, RecursionError) as e:
        raise _bad(f"entry '{name}' has a malformed .npy header ({type(e).__name__}).") from None
    if (not isinstance(header, dict) or set(header) != {"descr", "fortran_order", "shape"}
            or not isinstance(header["fortran_order"], bool) or not isinstance(header["shape"], tuple)
            or not all(isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in header["shape"])
            or len(header["shape"]) > 64):
        raise _bad(f"entry '{name}' has a malformed .npy header.")
    descr = header["descr"]
    if not isinstance(descr, str):
        raise _bad(f"entry '{name}' has dtype {descr!r}, which is not supported (structured arrays are not).")
    try:
        dtype = np.dtype(descr)
    except (TypeError, ValueError):
        raise _bad(f"entry '{name}' has an unknown dtype {descr!r}.") from None
    if dtype.kind == "O":
        raise _bad(f"entry '{name}' holds Python objects (dtype object), which would need pickle (allow_pickle is "
                   "never on); refused.")
    if dtype.kind == "c":
        raise _bad(f"entry '{name}' is a complex array ({dtype}); dyngrad has no complex tensors and refuses it "
                   "rather than dropping the imaginary part.")
    if dtype.kind not in _DTYPE_KINDS:
        raise _bad(f"entry '{name}' has dtype {dtype}, which is not supported (bool, integers and floats are).")
    return header["shape"], header["fortran_order"], dtype, prefix + header_len


def _expected_bytes(shape, dtype, name, available):
    count = 1
    for d in shape:
        count *= d
        if count * dtype.itemsize > available:
            break
    nbytes = count * dtype.itemsize
    if nbytes != available:
        raise _bad(f"entry '{name}' claims shape {tuple(shape)} of {dtype} ({nbytes} bytes) but holds {available} "
                   "bytes of data.")
    return count


class _Archive:
    """The arrays of a .npz file, read and checked one by one (Note [Loading untrusted files])."""

    def __init__(self, f, mmap):
        self.path = os.fspath(f) if isinstance(f, (str, os.PathLike)) else None
        self.mmap = mmap
        if self.path is not None:
            try:
                self.file_size = os.path.getsize(self.path)
                self.fh = open(self.path, "rb")
            except OSError as e:
                raise e
        else:
            self.fh = f
            try:
                here = f.tell()
                f.seek(0, os.SEEK_END)
                self.file_size = f.tell() - here
                f.seek(here)
            except (AttributeError, OSError):
                raise TypeError(f"load: f must be a path or a seekable binary file object, got {type(f).__name__}.")
        self._own = self.path is not None
        head = self.fh.read(8)
        self.fh.seek(-len(head), os.SEEK_CUR)
        try:
            self.zip = zipfile.ZipFile(self.fh)
        except Exception as e:   # zipfile raises many types for a corrupt archive (BadZipFile, ValueError, ...)
            self.close()
            if head.startswith(b"\x93NUMPY"):
                raise _bad("this is a single .npy array, not a dyngrad checkpoint (.npz): read it with "
                           "numpy.load and wrap it with dyngrad.from_numpy.") from None
            if head[:1] == b"\x80":
                raise _bad("this is a pickle file; dyngrad.load never unpickles (it could run code). Load it with "
                           "torch.load and save the tensors with dyngrad.save.") from None
            raise _bad(f"not a dyngrad checkpoint: not a zip/.npz archive ({e}).") from None
        try:
            self.infos = {}
            for info in self.zip.infolist():
                name = info.filename[:-4] if info.filename.endswith(".npy") else info.filename
                self.infos[name] = info
        except Exception:
            self.close()
            raise

    def close(self):
        if getattr(self, "zip", None) is not None:
            self.zip.close()
        if self._own:
            self.fh.close()

    @property
    def files(self):
        return list(self.infos)

    def __contains__(self, name):
        return name in self.infos

    def _check_sizes(self, info, name):
        if info.compress_type == zipfile.ZIP_STORED:
            if info.file_size != info.compress_size or info.header_offset + info.compress_size > self.file_size:
                raise _bad(f"entry '{name}' claims {info.file_size} bytes, more than the file holds "
                           f"({self.file_size} bytes): the file is truncated or corrupt.")
        elif info.compress_type == zipfile.ZIP_DEFLATED:
            if (info.header_offset + info.compress_size > self.file_size
                    or info.file_size > _DEFLATE_MAX_RATIO * max(info.compress_size, 1)):
                raise _bad(f"entry '{name}' claims {info.file_size} bytes from {info.compress_size} compressed "
                           "bytes, which the file cannot hold: it is truncated or corrupt.")
        else:
            raise _bad(f"entry '{name}' uses an unsupported zip compression ({info.compress_type}).")

    def array(self, name):
        if name not in self.infos:
            raise _bad(f"the metadata names an array '{name}' that the file does not hold.")
        info = self.infos[name]
        self._check_sizes(info, name)
        try:
            with self.zip.open(info) as fp:
                shape, fortran, dtype, header_bytes = _read_npy_header(fp, name, info.file_size)
                available = info.file_size - header_bytes
                count = _expected_bytes(shape, dtype, name, available)
                if self.mmap and info.compress_type == zipfile.ZIP_STORED and count > 0 and len(shape) > 0:
                    offset = self._data_offset(info) + header_bytes
                    # copy-on-write, as torch's mmap=True: writes stay in memory, the file is not changed
                    return np.memmap(self.path, dtype=dtype, mode="c", offset=offset, shape=shape,
                                     order="F" if fortran else "C")
                data = fp.read(available)
        except InvalidCheckpointError:
            raise
        except Exception as e:   # BadZipFile, zlib.error, NotImplementedError (odd zip flags), CRC errors...
            raise _bad(f"entry '{name}' could not be read ({type(e).__name__}: {e}): the file is truncated or "
                       "corrupt.") from None
        if len(data) != available:
            raise _bad(f"entry '{name}' is truncated: {len(data)} of {available} bytes.")
        array = np.frombuffer(data, dtype=dtype, count=count)
        return array.reshape(shape, order="F" if fortran else "C").copy(order="C")

    def _data_offset(self, info):
        """Where a stored entry's bytes start in the file: after its local header (30 bytes, name, extra)."""
        self.fh.seek(info.header_offset)
        local = self.fh.read(30)
        if len(local) < 30 or local[:4] != b"PK\x03\x04":
            raise _bad(f"entry '{info.filename}' has a corrupt zip header.")
        name_len, extra_len = struct.unpack("<HH", local[26:30])
        return info.header_offset + 30 + name_len + extra_len


def _target_device(map_location):
    """Checks map_location; returns a callable(tensor) -> tensor or None."""
    def check(dev, what):
        text = str(dev)
        if text != "cpu" and not text.startswith("cpu:"):
            raise RuntimeError(f"load: map_location {what} {text!r}, a device dyngrad does not have: it runs on the "
                               "CPU only. Use map_location='cpu' (or leave it out).")

    if map_location is None:
        return None
    if isinstance(map_location, dict):
        for k, v in map_location.items():
            if not isinstance(k, str) or not isinstance(v, str) and not hasattr(v, "type"):
                raise TypeError("load: a map_location dict must map device names to device names, got "
                                f"{k!r}: {v!r}.")
        if "cpu" in map_location:
            check(map_location["cpu"], "maps 'cpu' to")
        return None
    if callable(map_location) and not isinstance(map_location, str) and not hasattr(map_location, "type"):
        def apply(t):
            out = map_location(t, "cpu")
            if out is None:
                return t
            if not isinstance(out, Tensor):
                raise TypeError(f"load: map_location returned {type(out).__name__}; it must return a Tensor (or "
                                "None to keep the tensor as loaded).")
            return out
        return apply
    if isinstance(map_location, str) or hasattr(map_location, "type"):
        check(map_location, "names")
        return None
    raise TypeError(f"load: map_location must be None, a device, a str, a dict or a callable, got "
                    f"{type(map_location).__name__}.")


def load(f, map_location=None, pickle_module=None, *, weights_only=None, mmap=None, **pickle_load_args):
    """Load what save() wrote (or a plain numpy .npz, as a dict of tensors). Only arrays and JSON are read: no
    code runs, whatever weights_only says (it is accepted for torch compatibility; loading is always as safe as
    torch's weights_only=True, and stricter: docs/serialization.md).

    map_location: None, 'cpu', a device, a dict of device names (its 'cpu' entry applies) or a callable
    fn(tensor, 'cpu') returning a tensor or None; a non-CPU target raises RuntimeError. mmap=True: the tensors
    share memory-mapped pages of the file (copy-on-write, as torch: in-place writes stay in memory) instead of
    being read; needs a path. A file that is not a valid checkpoint raises InvalidCheckpointError."""
    if weights_only is not None and not isinstance(weights_only, bool):
        raise TypeError(f"load: weights_only must be a bool or None, got {type(weights_only).__name__}.")
    if mmap is not None and not isinstance(mmap, bool):
        raise TypeError(f"load: mmap must be a bool or None, got {type(mmap).__name__}.")
    if mmap and not isinstance(f, (str, os.PathLike)):
        raise ValueError("load: mmap=True needs a file path (a file object cannot be memory-mapped).")
    if pickle_load_args:
        raise TypeError(f"load: unexpected keyword arguments {sorted(pickle_load_args)}.")
    remap = _target_device(map_location)
    archive = _Archive(f, bool(mmap))
    try:
        return _decode_archive(archive, remap)
    finally:
        archive.close()


def _decode_archive(archive, remap):
    def as_tensor(array, requires_grad=False):
        if isinstance(array, np.memmap) and array.dtype in (np.float32, np.float64, np.int64, np.bool_):
            t = from_numpy(array)
            if requires_grad:
                t.requires_grad_(True)
        else:
            t = tensor(np.asarray(array), requires_grad=requires_grad)
        return remap(t) if remap is not None else t

    if _META not in archive:
        # a plain .npz written by numpy: a flat dict of tensors
        return {k: as_tensor(archive.array(k)) for k in archive.files}
    raw = archive.array(_META)
    if raw.dtype != np.uint8 or raw.ndim != 1:
        raise _bad(f"the '{_META}' entry must be a 1-d uint8 array of UTF-8 JSON, got {raw.dtype} of shape "
                   f"{raw.shape}.")
    try:
        meta = json.loads(raw.tobytes().decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as e:
        raise _bad(f"the metadata is not valid UTF-8 JSON ({e}).") from None
    except RecursionError:
        raise _bad("the metadata is nested too deeply to parse.") from None
    if not isinstance(meta, dict) or meta.get("format") != "dyngrad" or "root" not in meta:
        raise _bad("the metadata is not a dyngrad header ({\"format\": \"dyngrad\", \"version\": 1, "
                   "\"root\": ...}).")
    if meta.get("version") != _VERSION:
        raise _bad(f"unsupported file format version {meta.get('version')!r} (this dyngrad reads version "
                   f"{_VERSION}).")

    def field(node, name, types, where):
        if name not in node:
            raise _bad(f"malformed metadata at {where}: a {node.get('t')!r} node has no {name!r}.")
        value = node[name]
        if not isinstance(value, types):
            raise _bad(f"malformed metadata at {where}: {name!r} is a {type(value).__name__}.")
        return value

    def decode(node, where, depth):
        if depth > MAX_DEPTH:
            raise _bad(f"the metadata is nested more than {MAX_DEPTH} levels deep (at {where}).")
        if not isinstance(node, dict) or not isinstance(node.get("t"), str):
            raise _bad(f"malformed metadata at {where}: expected a node object with a 't' field.")
        kind = node["t"]
        if kind == "tensor":
            rg = node.get("requires_grad", False)
            if not isinstance(rg, bool):
                raise _bad(f"malformed metadata at {where}: requires_grad must be true or false.")
            array = archive.array(field(node, "key", str, where))
            if rg and array.dtype.kind != "f":
                raise _bad(f"malformed metadata at {where}: a {array.dtype} tensor cannot require grad.")
            return as_tensor(array, rg)
        if kind == "ndarray":
            return archive.array(field(node, "key", str, where))
        if kind == "dict":
            out = {}
            for i, item in enumerate(field(node, "items", list, where)):
                if (not isinstance(item, list) or len(item) != 2 or not isinstance(item[0], (str, int))
                        or isinstance(item[0], bool)):
                    raise _bad(f"malformed metadata at {where}: dict item {i} must be [str or int key, node].")
                out[item[0]] = decode(item[1], f"{where}/{item[0]}", depth + 1)
            return out
        if kind in ("list", "tuple"):
            items = [decode(v, f"{where}/{i}", depth + 1) for i, v in enumerate(field(node, "items", list, where))]
            return tuple(items) if kind == "tuple" else items
        if kind == "value":
            if "v" not in node:
                raise _bad(f"malformed metadata at {where}: a value node has no 'v'.")
            v = node["v"]
            if node.get("float"):
                if not isinstance(v, (int, float, str)):
                    raise _bad(f"malformed metadata at {where}: a float value must be a number or its repr.")
                try:
                    return float(v)
                except ValueError:
                    raise _bad(f"malformed metadata at {where}: {v!r} is not a float.") from None
            if v is not None and not isinstance(v, (bool, int, float, str)):
                raise _bad(f"malformed metadata at {where}: a value must be a number, string, bool or null.")
            return v
        raise _bad(f"malformed metadata at {where}: unknown node type {kind!r}.")

    return decode(meta["root"], "<root>", 0)
