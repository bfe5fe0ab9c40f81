"""Reference engine: THE list of primitive (differentiable) ops, and how an op records its node.
Mirrors csrc/dyngrad/ops.def (the table) and csrc/dyngrad/ops_common.h (record, check_float, normalize_dims).

A primitive op is one row of PRIMITIVES, one forward function in ops_math.py / ops_shape.py / ops_nn.py, and one
formula `<name>_backward` in derivatives.py, in the same order. Everything else (sub with alpha, var, std,
conv2d, pooling, losses, indexing, ...) is composed from primitives in those files and in ops_bind.py, and needs
no derivative of its own.
"""
from .grad_mode import _state as _grad_state
from .node import OpNode
from .tensor import wrap_dim

#             name             DisplayName (the node shows as DisplayNameBackward)
PRIMITIVES = (
    # arithmetic
    ("add",            "Add"),
    ("sub",            "Sub"),
    ("mul",            "Mul"),
    ("div",            "Div"),
    ("neg",            "Neg"),
    ("pow",            "Pow"),            # tensor ** tensor
    ("pow_scalar",     "Pow"),            # tensor ** number
    ("maximum",        "Maximum"),
    ("minimum",        "Minimum"),
    ("where",          "Where"),          # where(cond, a, b): cond is not differentiable
    ("clamp",          "Clamp"),
    # unary
    ("exp",            "Exp"),
    ("log",            "Log"),
    ("sqrt",           "Sqrt"),
    ("rsqrt",          "Rsqrt"),
    ("abs",            "Abs"),
    ("sin",            "Sin"),
    ("cos",            "Cos"),
    ("tanh",           "Tanh"),
    ("sigmoid",        "Sigmoid"),
    ("relu",           "Relu"),
    ("sign",           "Sign"),           # zero gradient, as torch (the output still requires grad)
    ("leaky_relu",     "LeakyRelu"),
    ("gelu",           "Gelu"),
    ("softplus",       "Softplus"),
    ("erf",            "Erf"),
    # reductions
    ("sum",            "Sum"),
    ("mean",           "Mean"),
    ("amax",           "Amax"),
    ("amin",           "Amin"),
    ("logsumexp",      "Logsumexp"),
    # linear algebra
    ("matmul",         "Matmul"),         # both inputs at least 2-D; 1-D cases are reshaped around it
    # conversion and movement
    ("to_dtype",       "ToCopy"),
    ("clone",          "Clone"),
    ("reshape",        "Reshape"),        # a view when strides allow, else a copy
    ("permute",        "Permute"),        # view
    ("expand",         "Expand"),         # view
    ("slice",          "Slice"),          # view: dim, start, step
    ("slice_scatter",  "SliceScatter"),   # zeros of the input shape with grad written into the slice
    ("cat",            "Cat"),
    # indexing
    ("index_select",   "IndexSelect"),
    ("index_add",      "IndexAdd"),       # zeros(size) with rows added at index (index_select's adjoint)
    ("gather",         "Gather"),
    ("scatter_add",    "ScatterAdd"),     # gather's adjoint
    ("take",           "Take"),           # flat positions: advanced indexing
    ("put",            "Put"),            # out = a with a.flat[pos] = v: setitem
    ("put_add",        "PutAdd"),         # zeros(size) with v added at flat positions (take's adjoint)
    # neural-net primitives
    ("softmax",        "Softmax"),
    ("log_softmax",    "LogSoftmax"),
    ("cross_entropy",  "CrossEntropy"),   # fused log_softmax + nll with class indices
    ("unfold",         "Im2Col"),         # im2col: (N,C,H,W) -> (N, C*kh*kw, L)
    ("fold",           "Col2Im"),         # col2im, unfold's adjoint
)
OP_NAMES = tuple(name for name, _ in PRIMITIVES)
DISPLAY_NAMES = dict(PRIMITIVES)

_formulas = {}   # op name -> derivatives.<op>_backward, looked up once


def record(op, out, inputs):
    """Records an OpNode of `op` as the grad_fn of `out`, with one edge per input (None = not differentiable).
    The caller then saves what the formula needs (node.save) and the op's arguments (node.args)."""
    formula = _formulas.get(op)
    if formula is None:
        from . import derivatives
        formula = _formulas[op] = getattr(derivatives, op + "_backward")
    node = OpNode(DISPLAY_NAMES[op], formula, inputs)
    out.grad_fn = node
    out.output_nr = 0
    return node


def any_requires_grad(*tensors):
    """Record only in grad mode, and only if an input requires grad."""
    if not _grad_state.enabled:
        return False
    for t in tensors:
        if t is not None and (t._requires_grad or t.grad_fn is not None):
            return True
    return False


def needs_input_grad(node, i):
    return node.next_edges[i] is not None


def check_float(a, op):
    if a._data.dtype.kind != "f":
        raise TypeError(f"{op}: expected a floating-point tensor, got {a.dtype.name}.")


def normalize_dims(dims, ndim, op):
    """Sorted, unique, wrapped dims; empty input means every dim. A 0-d tensor takes dim 0/-1 (the identity)."""
    if not dims:
        return tuple(range(ndim))
    out, seen = [], []
    for d in dims:
        w = wrap_dim(d, ndim, op)
        if w in seen:
            raise RuntimeError(f"{op}: dim {d} appears more than once in the list of dims.")
        seen.append(w)
        if ndim == 0:
            continue                    # reducing a 0-d tensor over dim 0/-1 is the identity
        out.append(w)
    return tuple(sorted(out))

