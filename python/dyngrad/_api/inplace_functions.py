"""torch.X_(input, ...): the function forms torch gives its in-place Tensor methods (torch.abs_(x) is x.abs_()).
table.INPLACE_FUNCTIONS lists them once; each is made here from the engine's Tensor method of the same name, so
its signature, checks and errors are the method's (looked up on the engine's Tensor when called)."""
import inspect

from .args import Tensor, type_name
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
