"""The legacy format dyngrad.save wrote before it wrote PyTorch's (still read), and plain numpy .npz files.

Format (version 1): an uncompressed numpy .npz (a zip of .npy arrays), one array per tensor named by its path in the
object ("fc.weight", "optim/state/0/exp_avg"; "/" and "%" inside keys escaped as "%2F" and "%25"), plus the entry
"__dyngrad__": UTF-8 JSON {"format": "dyngrad", "version": 1, "root": node}, where a node is {"t": "tensor", "key":
k, "requires_grad": b} | {"t": "ndarray", "key": k} | {"t": "dict", "items": [[key, node], ...]} | {"t": "list" or
"tuple", "items": [node, ...]} | {"t": "value", "v": number, string, bool or null} (a float that is not finite is
its repr with "float": true). A .npz without that entry (numpy.savez, savez_compressed) loads as a flat dict of
tensors. Nothing here unpickles; arrays are read by our own .npy reader (Note [Loading untrusted files]).
"""
import ast
import json
import struct

import numpy as np

from .. import from_numpy, no_grad
from ._errors import bad, describe
from ._zip import READ_ERRORS

META = "__dyngrad__"
VERSION = 1
MAX_DEPTH = 128                 # nesting of dicts/lists in a legacy checkpoint (a state dict needs 3 or 4)
_MAX_HEADER = 64 * 1024         # bytes of a .npy header (numpy writes well under 1 KiB)
_DTYPE_KINDS = "biuf"           # bool, signed and unsigned integers, floats


def is_npz(archive):
    names = archive.names()
    return bool(names) and all(n.endswith(".npy") for n in names)


def _read_npy_header(fp, name, available):
    """(shape, fortran_order, dtype, header_bytes) of the .npy entry `name` whose stream `fp` is at its start,
    with `available` bytes in all. Validated; nothing allocated beyond the header."""
    magic = fp.read(8)
    if len(magic) < 8 or magic[:6] != b"\x93NUMPY":
        raise bad(f"entry '{name}' is not a .npy array (bad magic).")
    major = magic[6]
    if major not in (1, 2, 3):
        raise bad(f"entry '{name}' has an unsupported .npy version {major}.")
    width = 2 if major == 1 else 4
    size_bytes = fp.read(width)
    if len(size_bytes) < width:
        raise bad(f"entry '{name}' is truncated in its header.")
    header_len = struct.unpack("<H" if width == 2 else "<I", size_bytes)[0]
    prefix = 8 + width
    if header_len > _MAX_HEADER or prefix + header_len > available:
        raise bad(f"entry '{name}' claims a {header_len}-byte header, more than it holds.")
    raw = fp.read(header_len)
    if len(raw) < header_len:
        raise bad(f"entry '{name}' is truncated in its header.")
    try:
        header = ast.literal_eval(raw.decode("latin1" if major < 3 else "utf8"))   # a literal: runs no code
    except (ValueError, SyntaxError, UnicodeDecodeError, MemoryError, RecursionError) as e:
        raise bad(f"entry '{name}' has a malformed .npy header ({type(e).__name__}).") from None
    if (not isinstance(header, dict) or set(header) != {"descr", "fortran_order", "shape"}
            or not isinstance(header["fortran_order"], bool) or not isinstance(header["shape"], tuple)
            or not all(isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in header["shape"])
            or len(header["shape"]) > 64):
        raise bad(f"entry '{name}' has a malformed .npy header.")
    descr = header["descr"]
    if not isinstance(descr, str):
        raise bad(f"entry '{name}' has dtype {descr!r}, which is not supported (structured arrays are not).")
    try:
        dtype = np.dtype(descr)
    except (TypeError, ValueError):
        raise bad(f"entry '{name}' has an unknown dtype {descr!r}.") from None
    if dtype.kind == "O":
        raise bad(f"entry '{name}' holds Python objects (dtype object), which would need pickle (allow_pickle is "
                  "never on); refused.")
    if dtype.kind == "c":
        raise bad(f"entry '{name}' is a complex array ({dtype}); dyngrad has no complex tensors and refuses it "
                  "rather than dropping the imaginary part.")
    if dtype.kind not in _DTYPE_KINDS:
        raise bad(f"entry '{name}' has dtype {dtype}, which is not supported (bool, integers and floats are).")
    return header["shape"], header["fortran_order"], dtype, prefix + header_len


def _count(shape, dtype, name, available):
    count = 1
    for d in shape:
        count *= d
        if count * dtype.itemsize > available:
            break
    if count * dtype.itemsize != available:
        raise bad(f"entry '{name}' claims shape {tuple(shape)} of {dtype} ({count * dtype.itemsize} bytes or "
                  f"more) but holds {available} bytes of data.")
    return count


def read_array(archive, key, mapped):
    """The array of entry `key` (without ".npy"): its header checked against the bytes the entry holds, then read
    into one new array, or (mapped: a np.memmap of the file) a view of the file's pages."""
    name = key + ".npy"
    if name not in archive:
        raise bad(f"the metadata names an array '{key}' that the file does not hold.")
    member = archive.member(name)
    try:
        with archive.open(name) as fp:
            shape, fortran, dtype, header_bytes = _read_npy_header(fp, key, member.size)
    except READ_ERRORS as e:
        raise bad(f"entry '{key}' could not be read ({type(e).__name__}: {e}): the file is truncated or "
                  "corrupt.") from None
    count = _count(shape, dtype, key, member.size - header_bytes)
    start = member.data_offset + header_bytes
    if mapped is not None and archive.mappable(name) and count > 0 and start % dtype.itemsize == 0:
        flat = mapped[start:start + count * dtype.itemsize].view(dtype)
    else:
        flat = archive.read_array(name, dtype, count, skip=header_bytes)
    array = flat.reshape(shape, order="F" if fortran else "C")
    return array if array.dtype.isnative else array.astype(array.dtype.newbyteorder("="))


def read_npz(archive, restore, mapped):
    def as_tensor(array, requires_grad=False):
        with no_grad():
            t = restore(from_numpy(array), "cpu")
        if requires_grad:
            t.requires_grad_(True)
        return t

    if META + ".npy" not in archive:
        return {k[:-4]: as_tensor(read_array(archive, k[:-4], mapped)) for k in archive.names()}
    raw = read_array(archive, META, None)
    if raw.dtype != np.uint8 or raw.ndim != 1:
        raise bad(f"the '{META}' entry must be a 1-d uint8 array of UTF-8 JSON, got {raw.dtype} of shape "
                  f"{raw.shape}.")
    try:
        meta = json.loads(raw.tobytes().decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as e:
        raise bad(f"the metadata is not valid UTF-8 JSON ({e}).") from None
    except RecursionError:
        raise bad("the metadata is nested too deeply to parse.") from None
    if not isinstance(meta, dict) or meta.get("format") != "dyngrad" or "root" not in meta:
        raise bad("the metadata is not a dyngrad header ({\"format\": \"dyngrad\", \"version\": 1, "
                  "\"root\": ...}).")
    if meta.get("version") != VERSION:
        raise bad(f"unsupported file format version {describe(meta.get('version'))} (this dyngrad reads version "
                  f"{VERSION}).")

    def field(node, name, types, where):
        if name not in node:
            raise bad(f"malformed metadata at {where}: a {describe(node.get('t'))} node has no {name!r}.")
        value = node[name]
        if not isinstance(value, types):
            raise bad(f"malformed metadata at {where}: {name!r} is a {type(value).__name__}.")
        return value

    def decode(node, where, depth):
        if depth > MAX_DEPTH:
            raise bad(f"the metadata is nested more than {MAX_DEPTH} levels deep (at {where}).")
        if not isinstance(node, dict) or not isinstance(node.get("t"), str):
            raise bad(f"malformed metadata at {where}: expected a node object with a 't' field.")
        kind = node["t"]
        if kind == "tensor":
            rg = node.get("requires_grad", False)
            if not isinstance(rg, bool):
                raise bad(f"malformed metadata at {where}: requires_grad must be true or false.")
            array = read_array(archive, field(node, "key", str, where), mapped)
            if rg and array.dtype.kind != "f":
                raise bad(f"malformed metadata at {where}: a {array.dtype} tensor cannot require grad.")
            return as_tensor(array, rg)
        if kind == "ndarray":
            return np.array(read_array(archive, field(node, "key", str, where), None))
        if kind == "dict":
            out = {}
            for i, item in enumerate(field(node, "items", list, where)):
                if (not isinstance(item, list) or len(item) != 2 or not isinstance(item[0], (str, int))
                        or isinstance(item[0], bool)):
                    raise bad(f"malformed metadata at {where}: dict item {i} must be [str or int key, node].")
                out[item[0]] = decode(item[1], f"{where}/{item[0]}", depth + 1)
            return out
        if kind in ("list", "tuple"):
            items = [decode(v, f"{where}/{i}", depth + 1) for i, v in enumerate(field(node, "items", list, where))]
            return tuple(items) if kind == "tuple" else items
        if kind == "value":
            if "v" not in node:
                raise bad(f"malformed metadata at {where}: a value node has no 'v'.")
            v = node["v"]
            if node.get("float"):
                if not isinstance(v, (int, float, str)):
                    raise bad(f"malformed metadata at {where}: a float value must be a number or its repr.")
                try:
                    return float(v)
                except ValueError:
                    raise bad(f"malformed metadata at {where}: {v!r} is not a float.") from None
            if v is not None and not isinstance(v, (bool, int, float, str)):
                raise bad(f"malformed metadata at {where}: a value must be a number, string, bool or null.")
            return v
        raise bad(f"malformed metadata at {where}: unknown node type {describe(kind)}.")

    return decode(meta["root"], "<root>", 0)
