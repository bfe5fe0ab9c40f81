"""dyngrad.save / dyngrad.load: tensors and (nested) state dicts in a safe .npz file.

Format (version 1). The file is an ordinary numpy .npz archive written with allow_pickle=False and read with
allow_pickle=False, so loading never executes code:

- every tensor (or numpy array) in `obj` is one array entry; its key is its path in the object, the keys of
  the enclosing dicts/lists joined with "/" (e.g. a model's state dict gives "fc.weight", "fc.bias", so
  `numpy.load(path)["fc.weight"]` works; an optimizer's gives "state/0/exp_avg"). "/" and "%" inside a key are
  written as "%2F" and "%25". An object that is a single tensor is stored under the key "tensor".
- the entry "__dyngrad__" holds UTF-8 JSON describing the structure: {"format": "dyngrad", "version": 1,
  "root": node}, where a node is {"t": "tensor", "key": k, "requires_grad": b} | {"t": "ndarray", "key": k} |
  {"t": "dict", "items": [[key, node], ...]} (keys are str or int) | {"t": "list" or "tuple", "items": [node, ...]}
  | {"t": "value", "v": number, string, bool or null}.

The dtypes are numpy's (float32, float64, int64, bool). dyngrad.load gives C++-engine tensors and
dyngrad.reference's load gives reference tensors.
"""
import json
import math
import os

import numpy as np

from . import Tensor, tensor

_META = "__dyngrad__"
_VERSION = 1


def _escape(key):
    return str(key).replace("%", "%25").replace("/", "%2F")


def save(obj, f):
    """Save tensors, numpy arrays, numbers, strings and nested dicts/lists/tuples of them to `f` (.npz)."""
    arrays = {}

    def store(path, array):
        key = path or "tensor"
        if key in arrays:
            raise ValueError(f"save: two entries map to the key '{key}' (e.g. dict keys 0 and '0')")
        arrays[key] = array
        return key

    def encode(value, path):
        if isinstance(value, Tensor):
            key = store(path, np.array(value.detach().numpy(), order="C"))  # (ascontiguousarray would make 0-d 1-d)
            return {"t": "tensor", "key": key, "requires_grad": bool(value.requires_grad)}
        if isinstance(value, np.ndarray):
            if value.dtype == object:
                raise TypeError(f"save: numpy arrays of dtype object are not supported (at '{path}')")
            return {"t": "ndarray", "key": store(path, value)}
        if isinstance(value, dict):
            items = []
            for k, v in value.items():
                if not isinstance(k, (str, int)) or isinstance(k, bool):
                    raise TypeError(f"save: dict keys must be str or int, got {type(k).__name__} at '{path}'")
                items.append([k, encode(v, f"{path}/{_escape(k)}" if path else _escape(k))])
            return {"t": "dict", "items": items}
        if isinstance(value, (list, tuple)):
            kind = "tuple" if isinstance(value, tuple) else "list"
            return {"t": kind, "items": [encode(v, f"{path}/{i}" if path else str(i)) for i, v in enumerate(value)]}
        if isinstance(value, np.generic):
            value = value.item()
        if value is None or isinstance(value, (bool, int, str)):
            return {"t": "value", "v": value}
        if isinstance(value, float):
            return {"t": "value", "v": value if math.isfinite(value) else repr(value), "float": True}
        raise TypeError(f"save: cannot save an object of type {type(value).__name__} (at '{path or '<root>'}'); "
                        "supported: tensors, numpy arrays, numbers, strings, None and dicts/lists/tuples of them")

    root = encode(obj, "")
    if _META in arrays:
        raise ValueError(f"save: the key '{_META}' is reserved")
    meta = json.dumps({"format": "dyngrad", "version": _VERSION, "root": root})
    arrays[_META] = np.frombuffer(meta.encode("utf-8"), dtype=np.uint8)
    if isinstance(f, (str, os.PathLike)):
        with open(f, "wb") as fh:             # open ourselves: np.savez would append ".npz" to the name
            np.savez(fh, **arrays)
    else:
        np.savez(f, **arrays)


def load(f):
    """Load what save() wrote. Only arrays and JSON are read (allow_pickle=False): no code runs."""
    with np.load(f, allow_pickle=False) as archive:
        if _META not in archive.files:
            # a plain .npz written by numpy: a flat dict of tensors
            return {k: tensor(archive[k]) for k in archive.files}
        meta = json.loads(bytes(archive[_META]).decode("utf-8"))
        if meta.get("format") != "dyngrad" or meta.get("version") != _VERSION:
            raise ValueError(f"load: unsupported file format {meta.get('format')!r} version {meta.get('version')!r}")

        def decode(node):
            kind = node["t"]
            if kind == "tensor":
                return tensor(archive[node["key"]], requires_grad=node.get("requires_grad", False))
            if kind == "ndarray":
                return archive[node["key"]]
            if kind == "dict":
                return {k: decode(v) for k, v in node["items"]}
            if kind in ("list", "tuple"):
                items = [decode(v) for v in node["items"]]
                return tuple(items) if kind == "tuple" else items
            if kind == "value":
                return float(node["v"]) if node.get("float") else node["v"]
            raise ValueError(f"load: unknown node type {kind!r}")

        return decode(meta["root"])
