"""torch.autograd.forward_ad for both engines: dual tensors for forward-mode AD.

    with forward_ad.dual_level():
        x = forward_ad.make_dual(primal, tangent)
        y = f(x)
        value, jvp = forward_ad.unpack_dual(y)      # jvp = J(primal) @ tangent, in one forward pass

Every primitive of the engine's core carries the tangents forward (Note [Dual tensors] in
csrc/dyngrad/forward_ad.h, formulas in forward_derivatives.cpp / reference/forward_derivatives.py), so every op
of the API, composite or primitive, is forward-differentiable. Unlike torch, which supports a single level,
levels nest (Note [Nested levels]): jvp of jvp gives second derivatives. Grad mode does not stop forward AD (as in
torch); a tangent is recorded by reverse mode like any value, so reverse-over-forward works, and saved outputs
keep their tangents, so forward-over-reverse (hvp) works.

Note [Complex forward AD]: a complex primal takes a tangent of its own dtype (make_dual refuses another dtype;
func.jvp converts a real tangent of a complex primal, and refuses a complex tangent of a real one: it is no
direction in the primal's space). The tangent of f at z along v is the R-linear directional derivative
lim_{h -> 0, h real} (f(z + h v) - f(z)) / h, torch's: f'(z) v for a holomorphic f (the default tangents,
conj(backward(conj v)): Note [Tangents from backward formulas] in csrc/dyngrad/derivatives.cpp), conj(v) for conj,
Re(conj(sgn z) v) for abs, and a real tangent for a real output (real, imag, angle, view_as_real) and a complex one
for a complex output of real inputs (view_as_complex, complex, polar). Custom Functions (the FFTs, linalg) carry
complex tangents through their jvp like real ones. jacfwd, jacrev and hessian still refuse complex inputs and
outputs, as torch.func's; a real function with complex insides (an FFT, a complex matrix) has its Hessian.
tests/test_forward_ad_complex.py checks all this against central finite differences and torch.func.jvp.
"""
import collections
import functools

from .. import _C

__all__ = ["UnpackedDualTensor", "dual_level", "enter_dual_level", "exit_dual_level", "make_dual", "unpack_dual"]


class UnpackedDualTensor(collections.namedtuple("UnpackedDualTensor", ["primal", "tangent"])):
    """What unpack_dual returns: the primal (a view of the dual tensor) and its tangent at the level (None when
    the tensor is not dual there)."""


def enter_dual_level():
    """Opens a new (innermost) dual level and returns its number."""
    return _C._enter_dual_level()


def exit_dual_level(*, level=None):
    """Closes `level` (the innermost one by default); every tangent of that level becomes invisible."""
    if level is None:
        level = _C._current_dual_level()
        if level < 0:
            raise RuntimeError("exit_dual_level: no dual level is open (enter one with dual_level() or "
                               "enter_dual_level()).")
    _C._exit_dual_level(level)


def _level_or_current(level, fn):
    if level is None:
        level = _C._current_dual_level()
        if level < 0:
            raise RuntimeError(f"{fn}: no dual level is open; create dual tensors inside `with "
                               "forward_ad.dual_level():`.")
    elif not isinstance(level, int) or isinstance(level, bool):
        raise TypeError(f"{fn}: level must be an int, got {type(level).__name__}.")
    return level


def make_dual(tensor, tangent, *, level=None):
    """A view of `tensor` whose tangent at `level` (the innermost open one by default) is `tangent`. The view keeps
    `tensor`'s autograd history and its tangents at other levels."""
    if not isinstance(tensor, _C.Tensor):
        raise TypeError(f"make_dual: expected a Tensor as the primal, got {type(tensor).__name__}.")
    if not isinstance(tangent, _C.Tensor):
        raise TypeError(f"make_dual: expected a Tensor as the tangent, got {type(tangent).__name__}.")
    level = _level_or_current(level, "make_dual")
    if not (tensor.dtype.is_floating_point or tensor.dtype.is_complex):
        raise ValueError(f"make_dual: expected a floating-point or complex primal, got {tensor.dtype}; only "
                         "floating-point and complex tensors have tangents.")
    if tuple(tangent.shape) != tuple(tensor.shape):
        raise RuntimeError(f"make_dual: the tangent's shape {tuple(tangent.shape)} differs from the primal's "
                           f"{tuple(tensor.shape)}; a tangent has the shape of its primal.")
    if tangent.dtype != tensor.dtype:
        raise RuntimeError(f"make_dual: the tangent's dtype {tangent.dtype} differs from the primal's "
                           f"{tensor.dtype}; convert the tangent with .to(primal.dtype).")
    dual = _C.reshape(tensor, tuple(tensor.shape))   # a view; its node keeps tensor's history
    _C._set_tangent(dual, level, tangent)
    return dual


def unpack_dual(tensor, *, level=None):
    """(primal, tangent) of `tensor` at `level` (the innermost open one by default); tangent is None where the
    tensor is not dual there, and outside every level."""
    if not isinstance(tensor, _C.Tensor):
        raise TypeError(f"unpack_dual: expected a Tensor, got {type(tensor).__name__}.")
    if level is None:
        level = _C._current_dual_level()
        if level < 0:
            return UnpackedDualTensor(tensor, None)
    tangent = _C._get_tangent(tensor, level)
    if tangent is None:
        return UnpackedDualTensor(tensor, None)
    primal = _C.reshape(tensor, tuple(tensor.shape))
    _C._set_tangent(primal, level, None)
    return UnpackedDualTensor(primal, tangent)


class dual_level:
    """Context manager (and decorator) of one dual level: `with dual_level() as level:` opens it, leaving the
    block closes it, making its tangents invisible."""

    def __enter__(self):
        self._level = enter_dual_level()
        return self._level

    def __exit__(self, *exc):
        exit_dual_level(level=self._level)
        return False

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with dual_level():
                return fn(*args, **kwargs)
        return wrapper
