"""Reference engine: the shared error messages. Mirrors the ERR_* constants of csrc/dyngrad/check.h.

Each message is copied verbatim from docs/design.md ("Error messages") so one regex matches both engines.
"""

ERR_BACKWARD_TWICE = (
    "backward() reached {node}, whose saved tensors were already freed by an earlier backward(). "
    "Pass retain_graph=True to the first backward() if you need to backpropagate through this graph twice."
)
ERR_SAVED_MODIFIED = (
    "a tensor of shape {shape} saved by {node} for the backward pass was modified in place: it is at version "
    "{now}, but version {saved} was saved. Use an out-of-place op (x = x + 1) instead of an in-place one "
    "(x += 1), or clone() before modifying."
)
ERR_COMPLEX_BACKWARD = ("backward(): a gradient can be created implicitly only for real scalar outputs, but this "
                        "output is {dtype}. Take .real or .abs() first, or pass gradient=...")
ERR_NONSCALAR_BACKWARD = (
    "backward() without a gradient argument needs a scalar output, but this output has shape {shape}. "
    "Call .sum() first or pass gradient=..."
)
ERR_NO_GRAD_FN = (
    "backward(): this tensor does not require grad and has no grad_fn. "
    "Set requires_grad=True on the leaves you want gradients for."
)
ERR_LEAF_INPLACE = (
    "{op}: a leaf tensor that requires grad is being used in an in-place operation. "
    "Wrap it in `with no_grad():` or operate on a clone."
)
ERR_CONCURRENT_BACKWARD = (  # engine.cpp, GraphTask::claim
    "backward() reached {node}, which another backward() is running through right now (a graph shared between "
    "threads, or backward() called from a hook). Backpropagate shared graphs one at a time, with "
    "retain_graph=True, or give each thread its own graph.")
ERR_INTERNAL_OVERLAP = (  # Note [Writable tensors] in csrc/dyngrad/tensor.h
    "{op}: unsupported operation: more than one element of the written-to tensor refers to a single memory location "
    "(shape {shape}, strides {strides}: an expanded view). Please clone() the tensor before performing the operation.")
ERR_READ_ONLY = (
    "{op}: the tensor's memory is read-only: it is shared with a numpy array that is not writeable (such as "
    "np.load(..., mmap_mode='r') or np.frombuffer(bytes)). Write into a copy instead (tensor.clone(), or "
    "dyngrad.tensor(array)).")
ERR_INT_REQUIRES_GRAD = "only floating-point tensors can require gradients; this tensor is {dtype}."
ERR_BROADCAST = (
    "{op}: shapes {a} and {b} cannot be broadcast: dimension {d} is {x} in the first and {y} in the second."
)
ERR_MATMUL = "matmul: inner dimensions do not match: {a} @ {b} ({k1} != {k2})."
ERR_RESHAPE = "reshape: shape {new} is invalid for a tensor of {numel} elements (shape {old})."
ERR_VIEW = "view: cannot view a tensor of shape {old} and strides {strides} as {new}; use reshape() instead."
ERR_DIM = "{op}: dim {d} is out of range for a tensor of {n} dimensions (expected {lo}..{hi})."
ERR_INDEX = "index {i} is out of range for dimension {d} of size {n}."


def shape_str(shape):
    """Shapes print as tuples: (3, 4), () for 0-d, (5,)."""
    return str(tuple(int(s) for s in shape))


def dim_error(op, dim, ndim):
    """The IndexError for a bad `dim`; a 0-d tensor accepts dims -1..0 as in torch."""
    n = max(ndim, 1)
    return IndexError(ERR_DIM.format(op=op, d=dim, n=ndim, lo=-n, hi=n - 1))
