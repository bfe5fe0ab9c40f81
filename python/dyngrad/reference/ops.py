"""Reference engine: THE list of primitive (differentiable) ops, and how an op records its node.
Mirrors csrc/dyngrad/ops.def (the table) and csrc/dyngrad/ops_common.h (record, check_float, normalize_dims).

A primitive op is one row of PRIMITIVES, one forward function in ops_math.py / ops_shape.py / ops_nn.py, and one
formula `<name>_backward` in derivatives.py, in the same order. Everything else (sub with alpha, var, std,
conv2d, pooling, ...) is composed from primitives in those files or in the shared layer (python/dyngrad/_api/),
and needs no derivative of its own.

The third column names what the op's node saves for its formula, by field name (Note [Named saved state] in
csrc/dyngrad/saved.h, whose structs the Saves* tuples below mirror): the forward saves a tensor field with
node.save(name, t) and puts the others in node.args; the formula reads s.<name>. tests/test_parity.py checks that
both engines declare the same names for every op, and that the forward saves no name its row does not declare.
"""
from .grad_mode import _state as _grad_state
from .node import OpNode
from .tensor import wrap_dim

# The saved-field structs of csrc/dyngrad/saved.h, in the same order. An input's shape and dtype are not saved
# fields: every node has them (s.input_meta, as Node::input_meta in C++).
SavesNothing = ()
SavesAB = ("a", "b")                      # mul, div save an input only when the other one needs grad
SavesMatmul = ("a", "b", "a_transposed", "b_transposed")  # as SavesAB, plus each operand's layout
SavesABOut = ("a", "b", "out")            # pow: out only when the exponent needs grad
SavesPowScalar = ("a", "exponent")
SavesCond = ("cond",)
SavesClamp = ("a", "lo", "hi")            # lo/hi: None where absent
SavesOut = ("out",)
SavesA = ("a",)
SavesLeakyRelu = ("a", "slope")
SavesSoftplus = ("a", "beta", "threshold")
SavesReduction = ("dims", "keepdim")      # dims: sorted, wrapped
SavesReductionAOut = ("a", "out", "dims", "keepdim")
SavesPermute = ("dims",)
SavesSlice = ("dim", "start", "step")
SavesCat = ("dim", "sizes")               # sizes: each input's length along dim
SavesIndex = ("index", "dim")
SavesPositions = ("positions",)
SavesSoftmax = ("out", "dim")
SavesCrossEntropy = ("logits", "target", "reduction", "ignore_index", "count", "label_smoothing")
SavesWindow = ("window",)                 # (kh, kw, sh, sw, ph, pw, dh, dw)
# rnn_layer: its inputs, its output, the gate activations ws (None for RNN) and the cell kind and direction
SavesRnnLayer = ("gi", "h0", "c0", "w_hh", "b_hh", "out", "ws", "mode", "reverse")
SavesLayerNorm = ("a", "weight", "ndims", "eps")   # layer_norm: input, weight (None without), normalised dims

#             name             DisplayName (the node shows as DisplayNameBackward), what its node saves
PRIMITIVES = (
    # arithmetic
    ("add",             "Add",          SavesNothing),
    ("sub",             "Sub",          SavesNothing),
    ("mul",             "Mul",          SavesAB),
    ("div",             "Div",          SavesAB),
    ("neg",             "Neg",          SavesNothing),
    ("pow",             "Pow",          SavesABOut),          # tensor ** tensor
    ("pow_scalar",      "Pow",          SavesPowScalar),      # tensor ** number
    ("maximum",         "Maximum",      SavesAB),
    ("minimum",         "Minimum",      SavesAB),
    ("where",           "Where",        SavesCond),           # where(cond, a, b): cond is not differentiable
    ("clamp",           "Clamp",        SavesClamp),
    # unary
    ("exp",             "Exp",          SavesOut),
    ("log",             "Log",          SavesA),
    ("sqrt",            "Sqrt",         SavesOut),
    ("rsqrt",           "Rsqrt",        SavesOut),
    ("abs",             "Abs",          SavesA),
    ("sin",             "Sin",          SavesA),
    ("cos",             "Cos",          SavesA),
    ("tanh",            "Tanh",         SavesOut),
    ("sigmoid",         "Sigmoid",      SavesOut),
    ("relu",            "Relu",         SavesOut),
    ("sign",            "Sign",         SavesNothing),        # zero gradient, as torch (the output requires grad)
    ("leaky_relu",      "LeakyRelu",    SavesLeakyRelu),
    ("gelu",            "Gelu",         SavesA),
    ("softplus",        "Softplus",     SavesSoftplus),
    ("erf",             "Erf",          SavesA),
    # reductions
    ("sum",             "Sum",          SavesReduction),
    ("mean",            "Mean",         SavesReduction),
    ("amax",            "Amax",         SavesReductionAOut),
    ("amin",            "Amin",         SavesReductionAOut),
    ("logsumexp",       "Logsumexp",    SavesReductionAOut),
    # linear algebra
    ("matmul",          "Matmul",       SavesMatmul),         # both inputs at least 2-D; 1-D cases reshaped around it
    # conversion and movement
    ("to_dtype",        "ToCopy",       SavesNothing),
    ("clone",           "Clone",        SavesNothing),
    ("reshape",         "Reshape",      SavesNothing),        # a view when strides allow, else a copy
    ("permute",         "Permute",      SavesPermute),        # view
    ("expand",          "Expand",       SavesNothing),        # view
    ("slice",           "Slice",        SavesSlice),          # view
    ("slice_scatter",   "SliceScatter", SavesSlice),          # zeros of the input shape, grad written into the slice
    ("cat",             "Cat",          SavesCat),
    # indexing
    ("index_select",    "IndexSelect",  SavesIndex),
    ("index_add",       "IndexAdd",     SavesIndex),          # zeros(size) + rows at index (index_select's adjoint)
    ("gather",          "Gather",       SavesIndex),
    ("scatter_add",     "ScatterAdd",   SavesIndex),          # gather's adjoint
    ("take",            "Take",         SavesPositions),      # flat positions: advanced indexing
    ("put",             "Put",          SavesPositions),      # out = a with a.flat[pos] = v: setitem
    ("put_add",         "PutAdd",       SavesPositions),      # zeros(size) + v at flat positions (take's adjoint)
    # neural-net primitives
    ("softmax",         "Softmax",      SavesSoftmax),
    ("log_softmax",     "LogSoftmax",   SavesSoftmax),
    ("cross_entropy",   "CrossEntropy", SavesCrossEntropy),   # fused log_softmax + nll with class indices
    ("unfold",          "Im2Col",       SavesWindow),         # im2col: (N,C,H,W) -> (N, C*kh*kw, L)
    ("fold",            "Col2Im",       SavesWindow),         # col2im, unfold's adjoint
    ("rnn_layer",       "RnnLayer",     SavesRnnLayer),       # an RNN/LSTM/GRU layer over a whole sequence
    ("layer_norm",      "NativeLayerNorm", SavesLayerNorm),   # over the last `ndims` dims, weight and bias optional
)
OP_NAMES = tuple(name for name, _, _ in PRIMITIVES)
DISPLAY_NAMES = {name: display for name, display, _ in PRIMITIVES}
SAVED_FIELDS = {name: fields for name, _, fields in PRIMITIVES}

_formulas = {}   # op name -> derivatives.<op>_backward, looked up once


def record(op, out, inputs):
    """Records an OpNode of `op` as the grad_fn of `out`, with one edge per input (None = not differentiable).
    The caller then fills the fields that op's row of PRIMITIVES declares: tensors with node.save(name, t), the
    rest in node.args."""
    formula = _formulas.get(op)
    if formula is None:
        from . import derivatives
        formula = _formulas[op] = getattr(derivatives, op + "_backward")
    node = OpNode(DISPLAY_NAMES[op], formula, inputs, SAVED_FIELDS[op])
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

