"""The identities torch's complex-number helpers are on real tensors (dyngrad has no complex dtypes): conj,
conj_physical, resolve_conj, resolve_neg, real, adjoint, H and mH return the input (or its transpose), is_conj,
is_neg and is_complex are False, imag raises as torch does for a real tensor, and angle is 0 or pi."""
import numpy as np

from ... import _C
from ..args import tensor_arg
from ..node_names import shows_as
from .pointwise import _float, _numpy_function


def is_complex(input):
    """False: dyngrad has no complex dtypes."""
    tensor_arg(input, "is_complex")
    return False


def _angle_kernel(x):
    return np.where(np.isnan(x), x, np.where(x < 0, np.pi, 0.0)).astype(x.dtype)


_Angle = _numpy_function("Angle", _angle_kernel, None)


def angle(input):
    """The argument of each element as a complex number: pi for negative reals, 0 otherwise (nan stays nan);
    float for integer inputs; zero gradient, as torch."""
    return _Angle.apply(_float(tensor_arg(input, "angle")))


def imag(input):
    tensor_arg(input, "imag")
    raise RuntimeError("imag: not implemented for tensors with non-complex dtypes (dyngrad has no complex dtypes).")


def is_conj(input):
    tensor_arg(input, "is_conj")
    return False


def is_neg(input):
    tensor_arg(input, "is_neg")
    return False


def _identity(op):
    def fn(input):
        return tensor_arg(input, op)
    fn.__name__ = fn.__qualname__ = op
    fn.__doc__ = f"{op} of a real tensor: the tensor itself, as torch returns it."
    return fn


resolve_conj = _identity("resolve_conj")


resolve_neg = _identity("resolve_neg")


conj = _identity("conj")


conj_physical = _identity("conj_physical")


real = _identity("real")


def conj_physical_(self):
    return tensor_arg(self, "conj_physical_")


@shows_as("Transpose")
def adjoint(input):
    """The conjugate transpose of the last two dims: their transpose, for real tensors (a view)."""
    a = tensor_arg(input, "adjoint")
    if a.ndim < 2:
        raise RuntimeError(f"adjoint: only supported on matrices or batches of matrices, got a {a.ndim}-D tensor.")
    return _C.mT(a)


def mH(self):
    return adjoint(self)


@shows_as("Transpose")
def H(self):
    if self.ndim != 2:
        raise RuntimeError(f"H: only supported on matrices (2-D tensors), got a {self.ndim}-D tensor"
                           + (". For batches of matrices, use mH." if self.ndim > 2 else "."))
    return _C.mT(self)
