"""Complex numbers (Note [Complex dtypes] in csrc/dyngrad/dtype.h): complex, polar, real and imag as views,
view_as_real / view_as_complex (sharing memory), conj and its relatives, angle, sgn; and the identities torch's
helpers are on real tensors (conj, real, adjoint, ... return the input or its transpose, imag raises).

dyngrad has no lazy conjugate bit: conj() of a complex tensor is a new tensor holding the conjugate (torch's is a
view with the bit set), so is_conj is always False and resolve_conj the identity; the values are torch's.
"""
import numpy as np

from ... import _C
from ..args import tensor_arg
from ..node_names import shows_as
from .pointwise import _float, _numpy_function


def is_complex(input):
    """Whether the tensor's dtype is complex64 or complex128."""
    return tensor_arg(input, "is_complex").dtype.is_complex


def view_as_real(input):
    """The complex tensor's (real, imag) pairs as a real tensor of shape (..., 2), sharing its memory."""
    return _C.view_as_real(tensor_arg(input, "view_as_real"))


def view_as_complex(input):
    """A real tensor of shape (..., 2) (last dim of stride 1) as the complex tensor of its pairs, sharing memory."""
    return _C.view_as_complex(tensor_arg(input, "view_as_complex"))


def real(input):
    """The real part: for a complex tensor a view of its memory (writes reach the tensor), else the tensor itself."""
    a = tensor_arg(input, "real")
    if not a.dtype.is_complex:
        return a
    return _C.select(_C.view_as_real(a), -1, 0)


def imag(input):
    """The imaginary part of a complex tensor, a view of its memory; real tensors have none (torch raises)."""
    a = tensor_arg(input, "imag")
    if not a.dtype.is_complex:
        raise RuntimeError("imag: not implemented for tensors with non-complex dtypes.")
    return _C.select(_C.view_as_real(a), -1, 1)


def _part_setter(part):
    def set_part(self, value):
        """`z.real = v` / `z.imag = v`, as torch: v (a tensor or a number, broadcast) is copied into the part's view,
        so the write reaches z (and is an in-place op on it for autograd)."""
        view = part(self)
        if isinstance(value, _C.Tensor):
            view.copy_(value)
        else:
            view.fill_(value)
    set_part.__name__ = set_part.__qualname__ = "set_" + part.__name__
    return set_part


# the setters of the table's `prop` rows that have one (_api/__init__.py makes property(getter, setter))
PROPERTY_SETTERS = {"real": _part_setter(real), "imag": _part_setter(imag)}


def _complex_parts(real, imag, op):
    re, im = tensor_arg(real, op, "real"), tensor_arg(imag, op, "imag")
    if re.dtype.name not in ("float32", "float64") or im.dtype is not re.dtype:
        raise RuntimeError(f"{op}: expected both inputs to be float32 or both float64, got {re.dtype.name} and "
                           f"{im.dtype.name}.")
    return re, im


def complex(real, imag):
    """The complex tensor real + i imag (both float32 or both float64, broadcast), as torch.complex."""
    re, im = _complex_parts(real, imag, "complex")
    shape = np.broadcast_shapes(tuple(re.shape), tuple(im.shape))
    return _C.view_as_complex(_C.stack([_C.expand(re, shape), _C.expand(im, shape)], -1))


def polar(abs, angle):
    """The complex tensor abs * (cos(angle) + i sin(angle)), as torch.polar."""
    r, theta = _complex_parts(abs, angle, "polar")
    return complex(_C.mul(r, _C.cos(theta)), _C.mul(r, _C.sin(theta)))


def sgn(input):
    """z / |z| for complex tensors (0 at 0), the sign of real ones; torch's gradient (the composite's)."""
    a = tensor_arg(input, "sgn")
    if not a.dtype.is_complex:
        return _C.sign(a)
    magnitude = _C.abs(a)
    zero = _C.compare("eq", magnitude, _C.scalar_like(magnitude, 0.0, False))
    safe = _C.where(zero, _C.scalar_like(magnitude, 1.0, False), magnitude)
    return _C.where(zero, _C.scalar_like(a, 0.0, False), _C.div(a, safe))


def _angle_kernel(x):
    return np.where(np.isnan(x), x, np.where(x < 0, np.pi, 0.0)).astype(x.dtype)


_Angle = _numpy_function("Angle", _angle_kernel, None)


def angle(input):
    """The argument of each element: atan2(imag, real) for complex tensors (differentiable, as torch); pi for
    negative reals and 0 otherwise (nan stays nan; float for integer inputs; zero gradient, as torch)."""
    a = tensor_arg(input, "angle")
    if a.dtype.is_complex:
        pairs = _C.view_as_real(a)
        return _C.atan2(_C.select(pairs, -1, 1), _C.select(pairs, -1, 0))
    return _Angle.apply(_float(a, "angle"))


def is_conj(input):
    """False: dyngrad's conj() computes the conjugate (no lazy conjugate bit)."""
    tensor_arg(input, "is_conj")
    return False


def is_neg(input):
    tensor_arg(input, "is_neg")
    return False


def _identity(op):
    def fn(input):
        return tensor_arg(input, op)
    fn.__name__ = fn.__qualname__ = op
    fn.__doc__ = f"{op}: the tensor itself (dyngrad keeps no lazy conjugate or negative bit), as torch returns it " \
                 "for a tensor without one."
    return fn


resolve_conj = _identity("resolve_conj")


resolve_neg = _identity("resolve_neg")


def conj(input):
    """The complex conjugate (a new tensor: no lazy bit); a real tensor itself, as torch."""
    a = tensor_arg(input, "conj")
    return _C.conj(a) if a.dtype.is_complex else a


def conj_physical(input):
    """The complex conjugate, computed; a real tensor itself, as torch."""
    a = tensor_arg(input, "conj_physical")
    return _C.conj(a) if a.dtype.is_complex else a


def conj_physical_(self):
    """Conjugates a complex tensor in place."""
    a = tensor_arg(self, "conj_physical_")
    if a.dtype.is_complex:
        _C.assign_inplace(a, _C.conj(a), "conj_physical_")
    return a


@shows_as("Transpose")
def adjoint(input):
    """The conjugate transpose of the last two dims (their transpose, a view, for real tensors; for complex ones
    the transposed conjugate, a new tensor)."""
    a = tensor_arg(input, "adjoint")
    if a.ndim < 2:
        raise RuntimeError(f"adjoint: only supported on matrices or batches of matrices, got a {a.ndim}-D tensor.")
    return _C.conj(_C.mT(a)) if a.dtype.is_complex else _C.mT(a)


def mH(self):
    return adjoint(self)


def check_H_matrix(ndim):
    """Tensor.H takes matrices only (torch's error otherwise); vmap's rule checks each row with it."""
    if ndim != 2:
        raise RuntimeError(f"H: only supported on matrices (2-D tensors), got a {ndim}-D tensor"
                           + (". For batches of matrices, use mH." if ndim > 2 else "."))


@shows_as("Transpose")
def H(self):
    check_H_matrix(self.ndim)
    return _C.conj(_C.mT(self)) if self.dtype.is_complex else _C.mT(self)

