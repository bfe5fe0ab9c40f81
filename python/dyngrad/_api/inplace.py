"""The in-place variants the table makes: `x.NAME_(...)` from a row's function (run it, write the result into x,
with torch's checks and graph record; inplace_variant), and torch.X_(input, ...), the function forms torch gives
its in-place Tensor methods (torch.abs_(x) is x.abs_()). table.INPLACE_FUNCTIONS lists the latter once; each is
made here from the engine's Tensor method of the same name, so its signature, checks and errors are the method's
(looked up on the engine's Tensor when called)."""
import inspect

from .. import _C
from .args import Tensor, type_name
from .node_names import rename
from .table import INPLACE_FUNCTIONS


class _FunctionForm:
    """dyngrad.NAME_(input, *args, **kwargs) = input.NAME_(*args, **kwargs), with the method's signature (its
    self named input)."""

    def __init__(self, name):
        self.__name__ = self.__qualname__ = name
        self.__doc__ = f"In-place {name[:-1]}: writes the result into input and returns it (as input.{name}())."

    def __call__(self, input, *args, **kwargs):
        if not isinstance(input, Tensor):
            raise TypeError(f"{self.__name__}: expected a Tensor as input, got {type_name(input)}.")
        try:                  # the same TypeError on both engines (a core method's own message is the engine's)
            self.__signature__.bind(input, *args, **kwargs)
        except TypeError as exc:
            raise TypeError(f"{self.__name__}(): {exc}.") from None
        return getattr(input, self.__name__)(*args, **kwargs)

    def __repr__(self):
        return f"<function {self.__name__}>"

    @property
    def __signature__(self):
        try:
            params = list(inspect.signature(getattr(Tensor, self.__name__)).parameters.values())
        except (TypeError, ValueError):      # a C++ core method (detach_): these take no argument
            params = [inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)]
        if params and params[0].name == "self":
            params[0] = params[0].replace(name="input")
        return inspect.Signature(params)


FUNCTIONS = {name: _FunctionForm(name) for name in INPLACE_FUNCTIONS}


# in-place ops whose result has no gradient and which torch records with a zero gradient (EqBackward, and the
# random fills: UniformBackward, ...); torch's logical_and_ & co. leave the old history on the new value, and so do we
_ZERO_GRAD_INPLACE = {"eq_", "ne_", "lt_", "le_", "gt_", "ge_", "bernoulli_", "uniform_", "normal_", "random_",
                      "exponential_", "geometric_", "cauchy_", "log_normal_"}


def overwrite(before, result, op):
    """What an in-place op writes: its result, which replaces the old value. A comparison written over a value
    with history cuts the gradient to zero, as torch records it (`EqBackward`)."""
    if op not in _ZERO_GRAD_INPLACE or result.requires_grad or not before.requires_grad or \
            not _C.is_grad_enabled():
        return result
    written = _C.where(_C.full(tuple(before.shape), True, _C.bool), _C.to_dtype(result, before.dtype), before)
    return rename(written, "".join(p[:1].upper() + p[1:] for p in op.strip("_").split("_")) + "Backward", (before,))


def inplace_variant(fn, op, records_as=None):
    """`x.op_(*args)` from the function `fn(x, *args)`: in-place, as torch's `op_` methods. records_as: the
    in-place name whose graph record it makes (an alias's, e.g. greater_ records as gt_), default op."""
    records_as = records_as or op

    def method(self, *args, **kwargs):
        other_requires_grad = any(isinstance(a, Tensor) and a.requires_grad for a in args) or any(
            isinstance(a, Tensor) and a.requires_grad for a in kwargs.values())
        before = _C.inplace_input(self, op, other_requires_grad)
        _C.assign_inplace(self, overwrite(before, fn(before, *args, **kwargs), records_as), op)
        return self
    method.__name__ = method.__qualname__ = op
    method.__doc__ = f"In-place {op[:-1]}: the result is written into this tensor."
    try:                                  # fn's signature, its first parameter as self
        params = list(inspect.signature(fn).parameters.values())
        params[0] = params[0].replace(name="self")
        method.__signature__ = inspect.Signature(params)
    except (TypeError, ValueError, IndexError):
        pass
    return method
