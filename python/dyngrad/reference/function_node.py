"""Reference engine: the node of a custom Python autograd.Function. Mirrors PyFunctionNode and _record_function in
csrc/bindings/autograd_bind.cpp; the Function class and its ctx are shared (python/dyngrad/autograd/function.py).
"""
import numpy as np

from . import debug
from .node import Node, fit_gradient, gradient_edge
from .tensor import Tensor, make_tensor


class FunctionNode(Node):
    """The grad_fn of a custom Function's outputs: runs `backward_fn(ctx, *grads)`."""

    __slots__ = ("ctx", "backward_fn", "_name", "input_meta", "output_meta", "is_tensor_arg", "_released")

    def __init__(self, ctx, backward_fn, name, args):
        tensors = [a for a in args if isinstance(a, Tensor)]
        super().__init__(tuple(gradient_edge(t) if t.requires_grad else None for t in tensors))
        self.ctx = ctx
        self.backward_fn = backward_fn
        self._name = name
        self.input_meta = tuple((t._data.shape, t._data.dtype) for t in tensors)
        self.is_tensor_arg = tuple(isinstance(a, Tensor) for a in args)
        self.output_meta = ()
        self._released = False
        if debug.active:
            debug.note_node_created(self)

    def name(self):
        return self._display_name or self._name

    @property
    def num_outputs(self):
        return len(self.output_meta)

    @property
    def released(self):
        return self._released

    @property
    def input_metadata(self):
        from .dtypes import from_numpy_dtype
        from .tensor import HELPERS
        return [(HELPERS["Size"](shape), from_numpy_dtype(dtype)) for shape, dtype in self.input_meta]

    def _saved_list(self):
        return ()

    def saved_tensors_info(self):
        from .dtypes import from_numpy_dtype
        from .tensor import HELPERS
        if self._released:
            return []
        out = []
        for t, _ in getattr(self.ctx, "_saved", None) or ():
            if t is not None:
                out.append((HELPERS["Size"](t._data.shape), from_numpy_dtype(t._data.dtype), int(t._data.nbytes)))
        return out

    def release_saved(self):
        self._released = True
        release = getattr(self.ctx, "_release", None)
        if release is not None:
            release()

    def apply(self, grads):
        if self._released:
            from . import errors
            raise RuntimeError(errors.ERR_BACKWARD_TWICE.format(node=self._name) + debug.created_at(self))
        materialize = getattr(self.ctx, "materialize_grads", True)
        args = []
        for g, meta in zip(grads, self.output_meta):
            if g is None and meta is not None and materialize:   # missing gradients are zeros (torch's default)
                g = make_tensor(np.zeros(meta[0], dtype=meta[1]))
            args.append(g)
        result = self.backward_fn(self.ctx, *args)
        results = result if isinstance(result, tuple) else (result,)
        fn = self._name[:-len("Backward")]
        n_args = len(self.is_tensor_arg)
        if len(results) > n_args and all(r is None for r in results[n_args:]):
            results = results[:n_args]             # torch allows trailing Nones
        if len(results) != n_args:
            raise RuntimeError(f"{fn}.backward returned {len(results)} gradient{'' if len(results) == 1 else 's'}, "
                               f"but forward had {n_args} input{'' if n_args == 1 else 's'}.")
        out = []
        edge = 0
        for i, (r, is_tensor) in enumerate(zip(results, self.is_tensor_arg)):
            if not is_tensor:
                continue
            g = None
            if r is not None:
                if not isinstance(r, Tensor):
                    raise TypeError(f"{fn}.backward returned a {type(r).__name__} for input {i}; expected a Tensor "
                                    "or None.")
                if self.next_edges[edge] is not None:
                    g = fit_gradient(r, self.input_meta[edge], self._name, i)
            out.append(g)
            edge += 1
        return tuple(out)


def record_function(ctx, backward_fn, name, args, outputs, non_differentiable):
    """Makes the tensors among `outputs` the outputs of a new FunctionNode whose inputs are the tensors among
    `args` (non-differentiable ones and non-float ones get no history). Returns the node."""
    node = FunctionNode(ctx, backward_fn, name, args)
    skip = {id(t) for t in non_differentiable}
    meta = []
    for nr, o in enumerate(outputs):
        if not isinstance(o, Tensor):
            meta.append(None)
            continue
        meta.append((o._data.shape, o._data.dtype))
        if id(o) not in skip and o._data.dtype.kind in "fc":
            o.grad_fn, o.output_nr = node, nr
    node.output_meta = tuple(meta)
    return node
