"""LazyModuleMixin: modules whose input size is read from their first input (LazyLinear, LazyBatchNorm*d,
LazyInstanceNorm*d), as torch's.

Until then the size attribute (in_features, num_features) is 0 and the tensors that depend on it are empty
placeholders (`_lazy_tensors` names them). A forward pre-hook registered at construction (so it runs before any
hook the user adds) gives them their shapes in place, keeping the same Parameter objects (an optimiser built before
the first call sees them), initialises them, removes itself, and turns the module into its non-lazy class
(`cls_to_become`). load_state_dict before the first call takes the shapes from the checkpoint instead."""
from ... import empty, no_grad

__all__ = ["LazyModuleMixin"]


class LazyModuleMixin:
    cls_to_become = None
    _lazy_tensors = ()
    _size_attr = None           # the attribute inferred (in_features / num_features)
    _size_dim = 0               # ... which is this dim of the first lazy tensor's shape

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._initialize_hook = self.register_forward_pre_hook(self._infer_parameters)

    def has_uninitialized_params(self):
        return getattr(self, self._size_attr) == 0

    def _materialize(self, shapes):
        """Gives the lazy tensors their shapes (name -> shape) in place and sets the size attribute."""
        with no_grad():
            for name in self._lazy_tensors:
                t = getattr(self, name)
                if t is not None and name in shapes:
                    t.data = empty(shapes[name], dtype=t.dtype)
        first = next((shapes[n] for n in self._lazy_tensors if n in shapes), None)
        if first is not None:
            setattr(self, self._size_attr, first[self._size_dim])

    def _infer_parameters(self, module, args):
        if self.has_uninitialized_params():
            self.initialize_parameters(*args)
        self._initialize_hook.remove()
        del self._initialize_hook
        if self.cls_to_become is not None:
            self.__class__ = self.cls_to_become

    def _load_from_state_dict(self, state_dict, prefix, assign, missing_keys, unexpected_keys, error_msgs):
        if self.has_uninitialized_params():
            self._materialize({n: tuple(state_dict[prefix + n].shape) for n in self._lazy_tensors
                               if prefix + n in state_dict and getattr(self, n) is not None})
        super()._load_from_state_dict(state_dict, prefix, assign, missing_keys, unexpected_keys, error_msgs)
