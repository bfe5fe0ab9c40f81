"""default_collate and default_convert (torch.utils.data's): how a DataLoader turns samples into a batch.

default_collate merges a list of samples of the same structure: tensors are stacked (a new first dimension),
numpy arrays become stacked tensors, numpy scalars a tensor of their dtype, Python floats a float64 tensor, ints an
int64 tensor, bools a bool tensor, strings and bytes stay a list; dicts, namedtuples and sequences are collated
field by field (a tuple gives a list, as torch's). default_convert (batch_size=None, no batching) converts numpy
arrays and scalars to tensors inside the same structures and leaves the rest.
"""
import collections.abc
import copy
import re

import numpy as np

from ... import Tensor, tensor, stack, from_numpy, float64

_NP_STRING = re.compile(r"[SaUO]")


def _collate_error(kind):
    return TypeError(f"default_collate: batch must contain tensors, numpy arrays, numbers, dicts or lists; found "
                     f"{kind}")


def _is_namedtuple(x):
    return isinstance(x, tuple) and hasattr(x, "_fields")


_SHARED_DTYPES = (np.float32, np.float64, np.int64, np.bool_)


def _numpy_to_tensor(a):
    """Shares the array's memory where the engine has its dtype; other dtypes (int32, uint8, float16, ...) are
    converted to the nearest engine dtype (dyngrad has float32, float64, int64 and bool)."""
    a = np.asarray(a, order="C")
    if a.dtype.type in _SHARED_DTYPES and a.dtype.isnative:
        return from_numpy(a)
    return tensor(a)


def default_collate(batch):
    """Merge a list of samples into a batch (see the module's docstring)."""
    elem = batch[0]
    if isinstance(elem, Tensor):
        return stack(list(batch), 0)
    if type(elem).__module__ == "numpy" and not isinstance(elem, (np.str_, np.bytes_)):
        if isinstance(elem, np.ndarray):
            if _NP_STRING.search(elem.dtype.str) is not None:
                raise _collate_error(elem.dtype)
            return stack([_numpy_to_tensor(b) for b in batch], 0)
        if getattr(elem, "shape", None) == ():                 # numpy scalar: keeps its dtype
            return _numpy_to_tensor(np.array(batch))
    if isinstance(elem, bool):
        return tensor(list(batch))
    if isinstance(elem, float):
        return tensor(list(batch), dtype=float64)
    if isinstance(elem, int):
        return tensor(list(batch))
    if isinstance(elem, (str, bytes)):
        return list(batch)
    if isinstance(elem, collections.abc.Mapping):
        fields = {key: default_collate([d[key] for d in batch]) for key in elem}
        if isinstance(elem, collections.abc.MutableMapping):
            clone = copy.copy(elem)
            clone.update(fields)
            return clone
        try:
            return type(elem)(fields)
        except TypeError:
            return fields
    if _is_namedtuple(elem):
        return type(elem)(*(default_collate(list(s)) for s in zip(*batch)))
    if isinstance(elem, collections.abc.Sequence):
        size = len(elem)
        if any(len(s) != size for s in batch):
            raise RuntimeError("default_collate: each element in list of batch should be of equal size")
        transposed = [default_collate(list(s)) for s in zip(*batch)]
        if isinstance(elem, tuple):
            return transposed
        if isinstance(elem, collections.abc.MutableSequence):
            clone = copy.copy(elem)
            for i, value in enumerate(transposed):
                clone[i] = value
            return clone
        try:
            return type(elem)(transposed)
        except TypeError:
            return transposed
    raise _collate_error(type(elem).__name__)


def default_convert(data):
    """numpy arrays and scalars to tensors, inside dicts, namedtuples and sequences; everything else unchanged."""
    if isinstance(data, Tensor):
        return data
    if type(data).__module__ == "numpy" and not isinstance(data, (np.str_, np.bytes_)):
        if isinstance(data, np.ndarray):
            return data if _NP_STRING.search(data.dtype.str) is not None else _numpy_to_tensor(data)
        if getattr(data, "shape", None) == ():
            return _numpy_to_tensor(np.array(data))
        return data
    if isinstance(data, collections.abc.Mapping):
        fields = {key: default_convert(v) for key, v in data.items()}
        if isinstance(data, collections.abc.MutableMapping):
            clone = copy.copy(data)
            clone.update(fields)
            return clone
        try:
            return type(data)(fields)
        except TypeError:
            return fields
    if _is_namedtuple(data):
        return type(data)(*(default_convert(d) for d in data))
    if isinstance(data, tuple):
        return [default_convert(d) for d in data]
    if isinstance(data, collections.abc.Sequence) and not isinstance(data, (str, bytes)):
        converted = [default_convert(d) for d in data]
        if isinstance(data, collections.abc.MutableSequence):
            clone = copy.copy(data)
            for i, value in enumerate(converted):
                clone[i] = value
            return clone
        try:
            return type(data)(converted)
        except TypeError:
            return converted
    return data
