"""Devices, honestly: dyngrad computes on the CPU. `device` parses and compares like torch.device, so that
`device = torch.device("cuda" if torch.cuda.is_available() else "cpu")` runs unchanged; any use of a device
other than the CPU (a factory's device=, .to(), .cuda(), a default device) fails at once, naming the device. The
one exception is torch's "meta" device, tensors with a shape and a dtype but no values (_api/meta.py: Note [Meta
tensors]): it can be named by a factory, a module constructor, .to() and as the default device."""
import re

from .args import tensor_arg, type_name

# torch's device types, in the order its error message lists them
DEVICE_TYPES = ("cpu", "cuda", "ipu", "xpu", "mkldnn", "opengl", "opencl", "ideep", "hip", "ve", "fpga", "maia",
                "xla", "lazy", "vulkan", "mps", "meta", "hpu", "mtia", "privateuseone")


# torch's grammar of a device string: a type, then optionally ':' and an index without leading zeros
_DEVICE_STRING = re.compile(r"([a-zA-Z_]+)(?::([1-9]\d*|0))?$")


class CudaUnavailableError(RuntimeError, AssertionError):
    """Raised where a program asks for CUDA. torch raises AssertionError("Torch not compiled with CUDA enabled")
    there; this is both, so code catching either keeps working."""


def cuda_error(what):
    return CudaUnavailableError(f"{what} needs CUDA, which dyngrad does not have: dyngrad runs on the CPU only "
                                "(dyngrad.cuda.is_available() is False). Use device='cpu'.")


def _parse(text):
    """'cpu', 'cuda:1' -> (type, index or None), with torch's errors."""
    if not text:
        raise RuntimeError("Device string must not be empty")
    match = _DEVICE_STRING.match(text)
    if match is None:
        raise RuntimeError(f"Invalid device string: '{text}'")
    kind, index = match.groups()
    if kind not in DEVICE_TYPES:
        raise RuntimeError(f"Expected one of {', '.join(DEVICE_TYPES)} device type at start of device string: "
                           f"{text}")
    return kind, None if index is None else int(index)


class device:
    """torch.device: device('cpu'), device('cpu:0'), device('cpu', 0), device(type='cuda', index=1).

    Any device can be named (so device-selecting code runs); only the CPU and "meta" can be used. As a context
    manager it sets the default device of the factories inside the block (entering another device raises)."""

    __slots__ = ("_type", "_index", "_previous")

    def __init__(self, type=None, index=None):
        if isinstance(type, device):
            if index is not None:
                raise TypeError("device(): a device and an index cannot be given together.")
            kind, idx = type._type, type._index
        elif isinstance(type, str):
            kind, idx = _parse(type)
            if index is not None:
                if idx is not None:
                    raise RuntimeError(f"type (string) must not include an index because index was passed "
                                       f"explicitly: {type}")
                if isinstance(index, bool) or not isinstance(index, int):
                    raise TypeError(f"device(): argument 'index' (position 2) must be int, not "
                                    f"{type_name(index)}")
                if index < 0:
                    raise RuntimeError("Device index must not be negative")
                idx = index
        elif isinstance(type, int) and not isinstance(type, bool):
            # torch reads a bare index as the accelerator's
            raise RuntimeError("Cannot access accelerator device when none is available.")
        else:
            raise TypeError(f"device(): expected a device type string such as 'cpu' or a device, got "
                            f"{type_name(type)}.")
        object.__setattr__(self, "_type", kind)
        object.__setattr__(self, "_index", idx)
        object.__setattr__(self, "_previous", None)

    @property
    def type(self):
        return self._type

    @property
    def index(self):
        return self._index

    def __setattr__(self, name, value):
        raise AttributeError(f"'device' object attribute '{name}' is read-only")

    def __eq__(self, other):
        if not isinstance(other, device):
            return NotImplemented
        return self._type == other._type and self._index == other._index

    def __hash__(self):
        return hash((self._type, self._index))

    def __repr__(self):
        if self._index is None:
            return f"device(type='{self._type}')"
        return f"device(type='{self._type}', index={self._index})"

    def __str__(self):
        return self._type if self._index is None else f"{self._type}:{self._index}"

    def __reduce__(self):
        return (device, (self._type, self._index))

    def __enter__(self):
        object.__setattr__(self, "_previous", get_default_device())
        set_default_device(self)
        return self

    def __exit__(self, *exc):
        set_default_device(self._previous)
        object.__setattr__(self, "_previous", None)


CPU = device("cpu")
META = device("meta")

# the default device of the factories: CPU, or META inside `with dg.device("meta"):` / set_default_device("meta")
_default = [CPU]
# true once the meta device was used (a meta tensor or the meta default device): until then the meta wrappers of
# _api/meta.py cost one read
META_LIVE = [False]


def is_meta_device(o):
    """Whether a device argument (a string, a device, None) names the meta device."""
    if o is None:
        return False
    if isinstance(o, device):
        return o._type == "meta"
    return isinstance(o, str) and (o == "meta" or o.startswith("meta:"))


def default_is_meta():
    return _default[0] is META


def device_arg(o, op):
    """The device an argument names (None: the default device), which must be the CPU; else the error that
    says which device was asked for."""
    if o is None:
        return CPU
    d = o if isinstance(o, device) else device(o) if isinstance(o, (str, int)) else None
    if d is None:
        raise TypeError(f"{op}: expected a device (a string such as 'cpu' or a dyngrad.device), got "
                        f"{type_name(o)}.")
    if d._type == "cpu":
        return d
    if d._type == "cuda":
        raise cuda_error(f"{op}: device '{d}'")
    raise RuntimeError(f"{op}: device '{d}' is not available: dyngrad runs on the CPU only. Use device='cpu'.")


def set_default_device(device):
    """The device factories use when given none: the CPU or "meta" (None resets it to the CPU)."""
    if is_meta_device(device):
        META_LIVE[0] = True
        _default[0] = META
    else:
        device_arg(device, "set_default_device")
        _default[0] = CPU


def get_default_device():
    return _default[0]


# ----- on tensors (installed by the table) --------------------------------------------------------------------

def tensor_device(self):
    return CPU


def is_cpu(self):
    return True


def is_cuda(self):
    return False


def is_meta(self):
    return False


def get_device(input):
    """-1: the tensor is on the CPU (torch's answer for CPU tensors); torch.get_device and Tensor.get_device."""
    tensor_arg(input, "get_device")
    return -1


def cuda(self, device=None, non_blocking=False, memory_format=None):
    raise cuda_error("Tensor.cuda()")


def check_device(device, op):
    """dyngrad runs on the CPU: "cpu", "cpu:0", a dyngrad.device of the CPU (or None) are accepted, anything else
    is refused, naming the device."""
    if device is None or device == "cpu":
        return
    device_arg(device, op)
