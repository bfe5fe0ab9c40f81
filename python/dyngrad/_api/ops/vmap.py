"""torch.vmap (torch.func.vmap): a function mapped over a dimension of its inputs (Note [vmap as a loop])."""
import builtins

from ... import _C
from ..args import Tensor, to_int, type_name


# Note [vmap as a loop]: torch's vmap runs func once on batched tensors through batching rules. dyngrad has no
# batching rules, so vmap runs func once per index of the mapped dimension, on that slice of each mapped input
# (a view: in-place writes reach the input, as in torch), and stacks the results along out_dims. Values and
# gradients are torch's; the cost is a Python loop. Random ops inside func draw different values per element
# (torch's randomness='different'); 'same' cannot be honoured by a loop and is refused.


def _tree_map_dims(obj, dims, fn, op):
    """fn(tensor, dim) over the tensors of obj (nested tuples, lists and dicts), dims an int/None for all of them
    or a structure matching obj's."""
    if isinstance(obj, Tensor):
        if isinstance(dims, (tuple, list, dict)):
            raise ValueError(f"{op}: in_dims is not compatible with the structure of the inputs.")
        return fn(obj, dims)
    if isinstance(obj, (tuple, list)):
        if isinstance(dims, (tuple, list)):
            if len(dims) != len(obj):
                raise ValueError(f"{op}: in_dims is not compatible with the structure of the inputs "
                                 f"({len(dims)} in_dims for {len(obj)} inputs).")
            items = [_tree_map_dims(o, d, fn, op) for o, d in zip(obj, dims)]
        else:
            items = [_tree_map_dims(o, dims, fn, op) for o in obj]
        return type(obj)(items) if isinstance(obj, list) else tuple(items)
    if isinstance(obj, dict):
        if isinstance(dims, dict):
            return {k: _tree_map_dims(v, dims.get(k), fn, op) for k, v in obj.items()}
        return {k: _tree_map_dims(v, dims, fn, op) for k, v in obj.items()}
    return obj


def _leaves(obj):
    if isinstance(obj, (tuple, list)):
        return [x for o in obj for x in _leaves(o)]
    if isinstance(obj, dict):
        return [x for o in obj.values() for x in _leaves(o)]
    return [obj]


def vmap(func, in_dims=0, out_dims=0, randomness="error", *, chunk_size=None):
    """func mapped over a dimension of its inputs: vmap(f)(x) stacks f(x[i]) for every i (in_dims says which dim
    of each input is mapped, None for an input passed whole; out_dims where the mapped dim goes in each output).
    Note [vmap as a loop]."""
    if not callable(func):
        raise TypeError(f"vmap: expected a function as func, got {type_name(func)}.")
    if randomness not in ("error", "different", "same"):
        raise RuntimeError(f"vmap: the allowed values for randomness are 'error', 'different' or 'same', got "
                           f"{randomness!r}.")
    if randomness == "same":
        raise NotImplementedError("vmap: randomness='same' is not supported: dyngrad's vmap calls func once per "
                                  "element, so random ops draw different values (Note [vmap as a loop]).")
    if chunk_size is not None and (isinstance(chunk_size, bool) or not isinstance(chunk_size, int) or
                                   chunk_size < 1):
        raise ValueError(f"vmap: chunk_size must be None or a positive int, got {chunk_size!r}.")
    name = getattr(func, "__name__", type(func).__name__)
    op = f"vmap({name}, ...)"

    def mapped(*args, **kwargs):
        dims = in_dims if isinstance(in_dims, (tuple, list)) else (in_dims,) * len(args)
        if isinstance(in_dims, (tuple, list)) and len(in_dims) != len(args):
            raise ValueError(f"{op}: in_dims has {len(in_dims)} entries but {len(args)} inputs were given.")
        sizes = []

        def wrap(t, d):
            if d is None:
                return (t, None)
            d = to_int(d, op, "in_dims")
            if not -t.ndim <= d < max(t.ndim, 0) or t.ndim == 0:
                raise ValueError(f"{op}: got in_dim={d} for an input of {t.ndim} dimensions; expected "
                                 f"{-t.ndim} <= in_dim < {t.ndim}.")
            d = d + t.ndim if d < 0 else d
            sizes.append(t.shape[d])
            return (t, d)
        plan = _tree_map_dims(tuple(args), tuple(dims), wrap, op)
        if not sizes:
            raise ValueError(f"{op}: expected at least one Tensor to vmap over.")
        if len(set(sizes)) != 1:
            raise ValueError(f"{op}: expected all tensors to have the same size in the mapped dimension, got sizes "
                             f"{sizes}.")
        n = sizes[0]
        if n == 0:
            raise RuntimeError(f"{op}: cannot map over a dimension of size 0 (Note [vmap as a loop]).")

        def pick(i):
            def take(x):
                if isinstance(x, tuple) and len(x) == 2 and isinstance(x[0], Tensor) and (
                        x[1] is None or isinstance(x[1], int)):
                    t, d = x
                    return t if d is None else _C.select(t, d, i)
                if isinstance(x, (tuple, list)):
                    items = [take(o) for o in x]
                    return type(x)(items) if isinstance(x, list) else tuple(items)
                if isinstance(x, dict):
                    return {k: take(v) for k, v in x.items()}
                return x
            return take(plan)
        results = [func(*pick(i), **kwargs) for i in builtins.range(n)]
        single = not isinstance(results[0], tuple)
        outs = [(r,) if single else tuple(r) for r in results]
        odims = (out_dims,) * len(outs[0]) if not isinstance(out_dims, (tuple, list)) else tuple(out_dims)
        if len(odims) != len(outs[0]):
            raise ValueError(f"{op}: out_dims has {len(odims)} entries but func returned {len(outs[0])} outputs.")
        stacked = []
        for k, od in enumerate(odims):
            column = [o[k] for o in outs]
            if od is None:
                stacked.append(column[0])
                continue
            if not all(isinstance(c, Tensor) for c in column):
                raise ValueError(f"{op}: `{name}` must only return Tensors, got {type_name(column[0])}; set out_dims "
                                 "to None for that output to return it unmapped.")
            od = to_int(od, op, "out_dims")
            rank = column[0].ndim + 1
            if not -rank <= od < rank:
                raise IndexError(f"{op}: out_dims {od} is out of range for an output of {rank} dimensions.")
            stacked.append(_C.stack(column, od))
        return stacked[0] if single else tuple(stacked)
    mapped.__name__ = mapped.__qualname__ = f"vmap_{name}"
    mapped.__doc__ = f"{name} mapped by vmap over in_dims={in_dims!r}, out_dims={out_dims!r}."
    return mapped
