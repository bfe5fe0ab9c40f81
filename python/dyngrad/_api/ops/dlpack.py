"""DLPack exchange, with torch's names: Tensor.__dlpack__ / __dlpack_device__, from_dlpack and to_dlpack, through
numpy's DLPack support (zero-copy both ways: a tensor's own buffer is exported, another library's is shared)."""
import numpy as np

from .. import bridge
from ..args import tensor_arg, type_name
from ..device import check_device


# Note [Read-only DLPack exports]: DLPack 1.0 can flag a tensor read-only, but a consumer may ignore the flag (torch
# 2.13 does: torch.from_dlpack of a read-only array writes into it, and into a read-only memory map it segfaults).
# So a read-only tensor is exported as a private copy unless the consumer asks for no copy (copy=False: then it gets
# the memory, flagged read-only); dyngrad's own from_dlpack asks for no copy first, honours the flag (the tensor
# refuses in-place writes, Note [Writable tensors]) and so stays zero-copy.

_KDLCPU = 1


def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
    """A DLPack capsule of this tensor's memory (numpy's exporter over the tensor's own buffer: no copy; a
    read-only tensor is copied unless copy=False, Note [Read-only DLPack exports])."""
    if self.requires_grad:
        raise BufferError("__dlpack__: cannot export a tensor that requires grad; use tensor.detach().")
    if self.dtype.name == "bfloat16":
        raise BufferError("__dlpack__: bfloat16 tensors cannot be exported (numpy, which exports them, has no "
                          "bfloat16).")
    if dl_device is not None and tuple(dl_device) != (_KDLCPU, 0):
        raise BufferError(f"__dlpack__: dyngrad tensors live on the CPU; cannot export to device {dl_device}.")
    view = bridge.view(self)
    if copy is None and not view.flags.writeable:
        copy = True
    kwargs = {"stream": stream}
    if max_version is not None:
        kwargs["max_version"] = max_version
    if copy is not None:
        kwargs["copy"] = copy
    try:
        return view.__dlpack__(**kwargs)
    except BufferError as exc:     # e.g. read-only memory for a consumer older than DLPack 1.0: name the op
        raise BufferError(f"__dlpack__: cannot export this tensor: {exc}") from None


def __dlpack_device__(self):
    return (_KDLCPU, 0)


class _Capsule:
    """A bare DLPack capsule (to_dlpack's, or another library's) as the object numpy's from_dlpack reads."""

    def __init__(self, capsule):
        self.capsule = capsule

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        return self.capsule

    def __dlpack_device__(self):
        return (_KDLCPU, 0)


def from_dlpack(ext_tensor, *, device=None, copy=None):
    """A tensor sharing the memory of another library's tensor (anything with __dlpack__, or a DLPack capsule):
    no copy unless copy=True; a read-only producer gives a read-only tensor."""
    import warnings
    check_device(device, "from_dlpack")
    source = ext_tensor
    if type(ext_tensor).__name__ == "PyCapsule":
        source = _Capsule(ext_tensor)
    elif not hasattr(ext_tensor, "__dlpack__"):
        raise TypeError(f"from_dlpack: expected an object with __dlpack__ or a DLPack capsule, got "
                        f"{type_name(ext_tensor)}.")
    try:
        if copy is None:        # zero-copy if the producer can (Note [Read-only DLPack exports]), else its choice
            try:
                arr = np.from_dlpack(source, copy=False)
            except (BufferError, TypeError, ValueError):
                arr = np.from_dlpack(source)
        else:
            arr = np.from_dlpack(source, copy=copy)
    except (BufferError, TypeError, ValueError) as exc:
        raise RuntimeError(f"from_dlpack: cannot import this tensor ({exc}).") from None
    if arr.dtype.name not in ("bool", "uint8", "int8", "int16", "int32", "int64", "float16", "float32", "float64"):
        raise RuntimeError(f"from_dlpack: dtype {arr.dtype} is not supported by dyngrad.")
    with warnings.catch_warnings():     # a read-only producer: a read-only tensor, by design here
        warnings.simplefilter("ignore", UserWarning)
        return bridge.share(arr)


def to_dlpack(tensor):
    """A DLPack capsule of the tensor's memory (legacy form of tensor.__dlpack__())."""
    return __dlpack__(tensor_arg(tensor, "to_dlpack", "tensor"))
