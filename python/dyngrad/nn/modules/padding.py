"""Padding layers: ZeroPad, ConstantPad, ReflectionPad, ReplicationPad and CircularPad in 1, 2 and 3 dims, over
nn.functional.pad (python/dyngrad/_api/ops/padding.py)."""
from .. import functional as F
from .module import Module

__all__ = ["ConstantPad1d", "ConstantPad2d", "ConstantPad3d", "ZeroPad1d", "ZeroPad2d", "ZeroPad3d",
           "ReflectionPad1d", "ReflectionPad2d", "ReflectionPad3d", "ReplicationPad1d", "ReplicationPad2d",
           "ReplicationPad3d", "CircularPad1d", "CircularPad2d", "CircularPad3d"]


def _padding(padding, dims):
    """An int pads every side; a tuple is (last_left, last_right, ...) as F.pad reads it."""
    if isinstance(padding, (tuple, list)):
        return tuple(padding)
    return (padding,) * (2 * dims)


class _PadNd(Module):
    mode = "constant"
    dims = 1

    def __init__(self, padding):
        super().__init__()
        self.padding = _padding(padding, self.dims)

    def forward(self, input):
        return F.pad(input, self.padding, self.mode)

    def extra_repr(self):
        return f"{self.padding}"


class _ConstantPadNd(_PadNd):
    def __init__(self, padding, value):
        super().__init__(padding)
        self.value = value

    def forward(self, input):
        return F.pad(input, self.padding, "constant", self.value)

    def extra_repr(self):
        return f"padding={self.padding}, value={self.value}"


class ConstantPad1d(_ConstantPadNd):
    """Pads the last dim with a constant value."""
    dims = 1


class ConstantPad2d(_ConstantPadNd):
    """Pads the last 2 dims with a constant value."""
    dims = 2


class ConstantPad3d(_ConstantPadNd):
    """Pads the last 3 dims with a constant value."""
    dims = 3


class _ZeroPad:
    def __init__(self, padding):
        super().__init__(padding, 0.0)

    def extra_repr(self):
        return f"{self.padding}"


class ZeroPad1d(_ZeroPad, ConstantPad1d):
    """Pads the last dim with zeros."""


class ZeroPad2d(_ZeroPad, ConstantPad2d):
    """Pads the last 2 dims with zeros."""


class ZeroPad3d(_ZeroPad, ConstantPad3d):
    """Pads the last 3 dims with zeros."""


class _MappedPadNd(_PadNd):
    def forward(self, input):
        if input.dim() not in (self.dims + 1, self.dims + 2) and self.mode == "circular":
            # torch's CircularPad layers check the rank themselves (the others leave it to F.pad)
            raise ValueError(f"{type(self).__name__}: expected a {self.dims + 1}-D or {self.dims + 2}-D input, got "
                             f"a {input.dim()}-D input.")
        return F.pad(input, self.padding, self.mode)


def _mapped(name, mode, dims, doc):
    return type(name, (_MappedPadNd,), {"mode": mode, "dims": dims, "__doc__": doc, "__module__": __name__})


ReflectionPad1d = _mapped("ReflectionPad1d", "reflect", 1, "Pads the last dim with its reflection (edge not repeated).")
ReflectionPad2d = _mapped("ReflectionPad2d", "reflect", 2, "Pads the last 2 dims with their reflection.")
ReflectionPad3d = _mapped("ReflectionPad3d", "reflect", 3, "Pads the last 3 dims with their reflection.")
ReplicationPad1d = _mapped("ReplicationPad1d", "replicate", 1, "Pads the last dim by repeating its edge values.")
ReplicationPad2d = _mapped("ReplicationPad2d", "replicate", 2, "Pads the last 2 dims by repeating their edges.")
ReplicationPad3d = _mapped("ReplicationPad3d", "replicate", 3, "Pads the last 3 dims by repeating their edges.")
CircularPad1d = _mapped("CircularPad1d", "circular", 1, "Pads the last dim by wrapping around (periodic).")
CircularPad2d = _mapped("CircularPad2d", "circular", 2, "Pads the last 2 dims by wrapping around (periodic).")
CircularPad3d = _mapped("CircularPad3d", "circular", 3, "Pads the last 3 dims by wrapping around (periodic).")
