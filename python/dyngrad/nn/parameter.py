"""Parameter: a leaf Tensor that a Module registers as one of its learnable weights."""
from .. import Tensor
from .. import empty
from .._api.meta import MetaMixin, is_meta, meta_class_of, register_meta_class


class Parameter(Tensor):
    """A tensor that is a module's parameter: assigning it as a Module attribute registers it.

    `Parameter(data)` shares data's memory (as torch does) and is a leaf that requires grad by default.
    """

    def __new__(cls, data=None, requires_grad=True):
        # a meta tensor's Parameter is a meta Parameter (Note [Meta tensors] in _api/meta.py)
        return super().__new__(meta_class_of(cls) if is_meta(data) else cls)

    def __init__(self, data=None, requires_grad=True):
        if data is None:
            data = empty(0)
        if not isinstance(data, Tensor):
            raise TypeError(f"Parameter: data must be a Tensor, got {type(data).__name__}.")
        # Tensor.__init__(t) makes a new tensor object sharing t's memory, without history
        super().__init__(data.detach())
        if is_meta(data):
            self._meta_stride = data._meta_stride
        self.requires_grad = requires_grad

    def __repr__(self):
        return "Parameter containing:\n" + super().__repr__()

    def __reduce_ex__(self, protocol):
        raise TypeError("Parameter: pickling is not supported; use dyngrad.save(module.state_dict(), path).")

    def __deepcopy__(self, memo):
        copy = type(self)(self.detach().clone(), self.requires_grad)
        memo[id(self)] = copy
        return copy


class _MetaParameter(MetaMixin, Parameter):
    """A Parameter on the meta device: a shape and a dtype, no values (Note [Meta tensors] in _api/meta.py)."""

    def __repr__(self):
        return "Parameter containing:\n" + MetaMixin.__repr__(self)


_MetaParameter.__name__ = _MetaParameter.__qualname__ = "Parameter"
register_meta_class(Parameter, _MetaParameter)


class Buffer:
    """Marks a tensor as a buffer when assigned to a Module attribute (torch.nn.Buffer)."""

    def __init__(self, data, persistent=True):
        self.data = data
        self.persistent = persistent
