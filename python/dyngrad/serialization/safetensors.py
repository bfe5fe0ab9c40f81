"""safetensors files (what model hubs ship), with the API of the `safetensors` package's torch module:
save_file / load_file, save / load (bytes), safe_open. Written from the format, without the package.

The format: an 8-byte little-endian header length N, N bytes of UTF-8 JSON {name: {"dtype": "F32", "shape": [...],
"data_offsets": [begin, end]}, "__metadata__": {str: str}} (padded with spaces), then the tensors' bytes
(little-endian, C order) at those offsets from the end of the header. Loading checks the header as the reference
implementation does before anything is allocated: a header of at most 100 MB, known dtypes, offsets that tile the
data exactly (no gaps, no overlaps, nothing past the end of the file) and byte counts that match each shape.
"""
import io
import json
import math
import os
import struct

import numpy as np

from .. import Tensor
from ._errors import bad, describe
from ._reader import tensor_from_file_array
from ._storage import BY_NAME, BY_SAFETENSORS, MAX_DIMS
from ._writer import _file_values

MAX_HEADER = 100_000_000
# the order of the safetensors package's Dtype enum (files list tensors by it, descending)
_RANK = {"BOOL": 0, "U8": 1, "I8": 2, "I16": 3, "F16": 5, "BF16": 6, "I32": 7, "F32": 9, "F64": 11, "I64": 12}
_UNSUPPORTED = {"U16": "uint16", "U32": "uint32", "U64": "uint64", "F8_E4M3": "float8_e4m3fn",
                "F8_E5M2": "float8_e5m2", "C64": "complex64", "C128": "complex128", "F8_E8M0": "float8_e8m0fnu",
                "F4": "float4_e2m1fn_x2", "F6_E2M3": "float6", "F6_E3M2": "float6"}


def _header_bytes(tensors, metadata, op):
    if not isinstance(tensors, dict):
        raise TypeError(f"{op}: tensors must be a dict of str to Tensor, got {type(tensors).__name__}.")
    if metadata is not None and (not isinstance(metadata, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in metadata.items())):
        raise TypeError(f"{op}: metadata must be a dict of str to str (or None).")
    spans = {}
    for name, t in tensors.items():
        if not isinstance(name, str) or name == "__metadata__":
            raise TypeError(f"{op}: tensor names must be str (and not '__metadata__'), got {name!r}.")
        if not isinstance(t, Tensor):
            raise TypeError(f"{op}: tensors[{name!r}] is a {type(t).__name__}, not a Tensor.")
        if t.numel():
            first = t.data_ptr()
            last = first + sum((n - 1) * s for n, s in zip(t.shape, t.stride())) * t.element_size()
            spans.setdefault(t._storage_id(), []).append((first, last, name))
    for group in spans.values():
        group.sort()
        for (_, last, a), (first, _, b) in zip(group, group[1:]):
            if first <= last:
                raise RuntimeError(f"{op}: tensors {a!r} and {b!r} share memory; safetensors stores each tensor "
                                   "on its own, so loading would give two unrelated tensors. Save one of them, or "
                                   "clone() the other (as the safetensors package asks).")
    # as the safetensors package: by its dtype order, largest first (so data stays aligned), then by name
    order = sorted(tensors, key=lambda k: (-_RANK[BY_NAME[tensors[k].dtype.name].safetensors], k))
    header, offset = {}, 0
    if metadata:
        header["__metadata__"] = dict(metadata)
    for name in order:
        t = tensors[name]
        fd = BY_NAME[t.dtype.name]
        nbytes = t.numel() * fd.itemsize
        header[name] = {"dtype": fd.safetensors, "shape": list(t.shape), "data_offsets": [offset, offset + nbytes]}
        offset += nbytes
    text = json.dumps(header, separators=(",", ":")).encode("utf-8")
    text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text, order


def _write(tensors, metadata, fh, op):
    head, order = _header_bytes(tensors, metadata, op)
    fh.write(head)
    for name in order:
        t = tensors[name]
        values = np.asarray(_file_values(t, BY_NAME[t.dtype.name]), order="C")
        fh.write(memoryview(values.reshape(-1)).cast("B"))


def save(tensors, metadata=None):
    """The safetensors bytes of a dict of tensors (and optional str -> str metadata)."""
    buf = io.BytesIO()
    _write(tensors, metadata, buf, "save")
    return buf.getvalue()


def save_file(tensors, filename, metadata=None):
    """Writes a dict of tensors to a .safetensors file (safetensors.torch.save_file)."""
    with open(filename, "wb") as fh:
        _write(tensors, metadata, fh, "save_file")


class _Header:
    """The checked header of a safetensors file: each tensor's dtype, shape and byte range in the file."""

    def __init__(self, fh, size, op):
        self.op = op
        raw = fh.read(8)
        if len(raw) < 8:
            raise bad("the file is too short for a safetensors header (8 bytes of length).", op)
        n = struct.unpack("<Q", raw)[0]
        if n > MAX_HEADER or 8 + n > size:
            raise bad(f"the safetensors header claims {n} bytes; the file holds {size} bytes in all (at most "
                      f"{MAX_HEADER} are allowed).", op)
        text = fh.read(n)
        if len(text) < n or not text.startswith(b"{"):
            raise bad(_not_safetensors(text), op)
        try:
            header = json.loads(text.decode("utf-8"))
        except (UnicodeDecodeError, ValueError, RecursionError) as e:
            raise bad(f"the safetensors header is not valid UTF-8 JSON ({type(e).__name__}).", op) from None
        if not isinstance(header, dict):
            raise bad("the safetensors header is not a JSON object.", op)
        meta = header.pop("__metadata__", None)
        if meta is not None and (not isinstance(meta, dict) or not all(isinstance(v, str) for v in meta.values())):
            raise bad("the safetensors __metadata__ is not an object of strings.", op)
        self.meta = meta
        self.start = 8 + n
        self.entries = {}
        spans = []
        for name, info in header.items():
            self.entries[name] = self._entry(name, info)
            spans.append((self.entries[name][2], self.entries[name][3], name))
        spans.sort()
        at = 0
        for begin, end, name in spans:
            if begin != at:
                raise bad(f"tensor '{name}' starts at byte {begin} of the data, not at {at}: the offsets leave a "
                          "gap or overlap.", op)
            at = end
        if self.start + at != size:
            raise bad(f"the tensors end at byte {self.start + at}, but the file holds {size} bytes: it is "
                      "truncated or has trailing data.", op)

    def _entry(self, name, info):
        op = self.op
        if (not isinstance(info, dict) or not isinstance(info.get("dtype"), str)
                or not isinstance(info.get("shape"), list) or not isinstance(info.get("data_offsets"), list)):
            raise bad(f"tensor '{name}' has a malformed header entry (dtype, shape, data_offsets).", op)
        code = info["dtype"]
        if code not in BY_SAFETENSORS:
            what = _UNSUPPORTED.get(code)
            raise bad(f"tensor '{name}' has dtype {code}" + (f" ({what}), which dyngrad does not have." if what
                                                              else ", which is not a safetensors dtype."), op)
        fd = BY_SAFETENSORS[code]
        shape, offsets = info["shape"], info["data_offsets"]
        if (len(shape) > MAX_DIMS or len(offsets) != 2
                or not all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in shape + offsets)):
            raise bad(f"tensor '{name}' has a malformed shape or data_offsets ({describe(shape)}, "
                      f"{describe(offsets)}).", op)
        begin, end = offsets
        if end - begin != math.prod(shape) * fd.itemsize:
            raise bad(f"tensor '{name}' of shape {tuple(shape)} and dtype {code} needs "
                      f"{math.prod(shape) * fd.itemsize} bytes, but its data_offsets span {end - begin}.", op)
        return fd, tuple(shape), begin, end


def _not_safetensors(head):
    if head[:2] == b"PK":
        return ("this is a zip archive (a PyTorch checkpoint written by torch.save or dyngrad.save), not a "
                "safetensors file: read it with dyngrad.load.")
    if head[:1] == b"\x80":
        return "this is a pickle, not a safetensors file: read it with dyngrad.load."
    return "this is not a safetensors file (its header is not JSON)."


def _read_tensor(fh, header, name):
    fd, shape, begin, end = header.entries[name]
    out = np.empty(math.prod(shape), dtype=fd.file_np)
    fh.seek(header.start + begin)
    if fh.readinto(memoryview(out).cast("B")) != end - begin:
        raise bad(f"tensor '{name}' is truncated.", header.op)
    return tensor_from_file_array(out, fd).reshape(shape)


def _check_device(device, op):
    text = str(device)
    if text != "cpu" and not text.startswith("cpu:"):
        raise RuntimeError(f"{op}: device {text!r}: dyngrad runs on the CPU only (device='cpu').")


def _open(filename, op):
    fh = open(filename, "rb")
    head = fh.read(8)
    fh.seek(0)
    if head[:2] == b"PK" or head[:1] == b"\x80":
        fh.close()
        raise bad(_not_safetensors(head), op)
    return fh, os.fstat(fh.fileno()).st_size


def load_file(filename, device="cpu"):
    """The dict of tensors of a .safetensors file (safetensors.torch.load_file)."""
    _check_device(device, "load_file")
    fh, size = _open(filename, "load_file")
    with fh:
        header = _Header(fh, size, "load_file")
        return {name: _read_tensor(fh, header, name) for name in header.entries}


def load(data):
    """The dict of tensors of safetensors bytes (safetensors.torch.load)."""
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise TypeError(f"load: data must be bytes, got {type(data).__name__}.")
    fh = io.BytesIO(data)
    header = _Header(fh, len(data), "load")
    return {name: _read_tensor(fh, header, name) for name in header.entries}


class safe_open:
    """`with safe_open(path, framework="pt") as f:` then f.keys(), f.get_tensor(name), f.metadata(): reads the
    header once and each tensor when asked (safetensors.safe_open)."""

    def __init__(self, filename, framework="pt", device="cpu"):
        if framework not in ("pt", "torch", "numpy", "np"):
            raise ValueError(f"safe_open: framework {framework!r} is not supported (dyngrad gives tensors: 'pt').")
        _check_device(device, "safe_open")
        self._numpy = framework in ("numpy", "np")
        self._fh, size = _open(filename, "safe_open")
        try:
            self._header = _Header(self._fh, size, "safe_open")
        except Exception:
            self._fh.close()
            raise

    def keys(self):
        return sorted(self._header.entries)

    def metadata(self):
        return self._header.meta

    def get_tensor(self, name):
        if name not in self._header.entries:
            raise KeyError(f"safe_open: the file has no tensor named {name!r}.")
        t = _read_tensor(self._fh, self._header, name)
        return t.numpy() if self._numpy and t.dtype.name != "bfloat16" else t

    def close(self):
        self._fh.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
