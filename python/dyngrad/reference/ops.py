"""Reference engine: how an op records its node, and the forwards of ops.def's kernel ops. Mirrors
csrc/dyngrad/ops_common.h (record, the unary_op templates, check_float, normalize_dims).

The table of primitives is primitives.py, generated from csrc/dyngrad/ops.def and saved.h by scripts/gen_ops.py:
a primitive op is one row there, one forward (written in ops_<family>.py, or made here for a kernel op from the
kernel of the same name in kernels.py), and one formula `<name>_backward` in derivatives.py. Everything else (sub
with alpha, var, std, conv2d, pooling, ...) is composed from primitives in those files or in the shared layer
(python/dyngrad/_api/), and needs no derivative of its own.

Each row names what the op's node saves for its formula, by field name (Note [Named saved state] in
csrc/dyngrad/saved.h): the forward saves a tensor field with node.save(name, t) and puts the others in node.args;
the formula reads s.<name>. tests/test_parity.py checks that both engines declare the same names for every op, and
that the forward saves no name its row does not declare.
"""
import numpy as np

from . import dtypes as _dt
from .grad_mode import _state as _grad_state
from . import forward_ad
from .node import OpNode
from .tensor import broadcast_shapes, make_tensor, wrap_dim

_rows = {}   # op name -> (display name, saved fields, derivatives.<op>_backward), looked up once


def _row(op):
    row = _rows.get(op)
    if row is None:
        # (primitives.py imports the op modules, which import this one: the table is read on first use)
        from . import derivatives, primitives
        row = _rows[op] = (primitives.DISPLAY_NAMES[op], primitives.SAVED_FIELDS[op],
                           getattr(derivatives, op + "_backward"))
    return row


def record(op, out, inputs):
    """Records an OpNode of `op` as the grad_fn of `out`, with one edge per input (None = not differentiable).
    The caller then fills the fields that op's row of primitives.PRIMITIVES declares: tensors with
    node.save(name, t), the rest in node.args."""
    display, fields, formula = _row(op)
    node = OpNode(display, formula, inputs, fields)
    out.grad_fn = node
    out.output_nr = 0
    return node


def record_outputs(op, outs, inputs):
    """record() for an op of several outputs: its node is the grad_fn of each output not None, output_nr its
    position (ops_common.h's record_outputs)."""
    display, fields, formula = _row(op)
    node = OpNode(display, formula, inputs, fields)
    node.num_outputs = len(outs)
    for nr, out in enumerate(outs):
        if out is not None:
            out.grad_fn = node
            out.output_nr = nr
    return node


def fresh(arr):
    """A kernel's result as a new C-contiguous array, as the C++ kernels allocate it (numpy keeps the inputs'
    memory order, e.g. Fortran order for a transposed input)."""
    return arr if arr.flags.c_contiguous else np.array(arr, order="C")


# ----- the forwards of ops.def's DG_KERNEL_OP lines (primitives.py makes one per line) ---------------------------

def save_unary(node, a, out):
    """What a one-input op saves, by the fields its row names (ops_common.h's save_unary overloads)."""
    if "a" in node.fields:
        node.save("a", a)
    if "out" in node.fields:
        node.save("out", out, is_output=True)


# Note [Complex dtypes] (csrc/dyngrad/dtype.h): the kernel ops that take complex tensors, as elementwise.cpp's
# unary_complex (numpy would also give relu, gelu and erf a meaning on complex numbers that torch refuses)
COMPLEX_KERNEL_OPS = frozenset((
    "exp", "log", "sqrt", "rsqrt", "abs", "sin", "cos", "tanh", "tanh_backward", "sigmoid", "sigmoid_backward",
    "sign", "log1p", "expm1", "log2", "log10", "tan", "asin", "acos", "atan", "sinh", "asinh", "atanh", "cosh",
    "acosh", "conj"))


def check_complex_kernel(op, a):
    if a._data.dtype.kind == "c" and op not in COMPLEX_KERNEL_OPS:
        raise TypeError(f"{op}: not supported for complex tensors (dtype {a.dtype.name}).")


def unary_forward(op, kernel):
    """`unary`: out = kernel(a) in a's dtype."""
    def forward(a):
        check_complex_kernel(op, a)
        out = make_tensor(fresh(kernel(a._data)))
        if any_requires_grad(a):
            save_unary(record(op, out, (a,)), a, out)
        if forward_ad.active(): forward_ad.attach(op, out, (a,), a=a, out=out)
        return out
    forward.__name__ = forward.__qualname__ = op
    return forward


def unary_float_op(op, kernel, a, **args):
    """out = kernel(a), integers computed in the default float dtype; saves what op's row names, and `args` (the
    parameters of leaky_relu and softplus) in node.args."""
    check_complex_kernel(op, a)
    dtype = a.dtype if a.dtype.is_floating_point or a.dtype.is_complex else _dt.get_default_dtype()
    arr = a._data if a.dtype is dtype else dtype.cast(a._data)
    if dtype is _dt.float16:                  # in float32, rounded once (as C++ and torch; numpy's float16
        with np.errstate(over="ignore"):      # kernels round every step); beyond 65504 is inf, as torch
            res = kernel(arr.astype(np.float32)).astype(np.float16)
    else:
        res = kernel(arr)
    if dtype is _dt.bfloat16:                 # Note [Reference bfloat16]: computed in float32, rounded back
        res = dtype.cast(res)
    out = make_tensor(fresh(res))
    if any_requires_grad(a):
        node = record(op, out, (a,))
        save_unary(node, a, out)
        if args:
            node.args = args
    if forward_ad.active(): forward_ad.attach(op, out, (a,), a=a, out=out, **args)
    return out


def unary_float_forward(op, kernel):
    """`unary_float`: unary_float_op of the kernel."""
    def forward(a):
        return unary_float_op(op, kernel, a)
    forward.__name__ = forward.__qualname__ = op
    return forward


def unary_backward_forward(op, kernel):
    """`unary_backward`: out = grad * kernel(x), a unary op's derivative; saves x, and grad when x needs a gradient
    and the row names it (ops_common.h's unary_backward_op)."""
    def forward(grad, x):
        check_complex_kernel(op, x)
        dtype = _dt.promote(grad.dtype, x.dtype)
        if not (dtype.is_floating_point or dtype.is_complex):
            dtype = _dt.get_default_dtype()
        compute = _dt.float32 if dtype.itemsize == 2 else dtype        # half types: in float32, rounded once
        if grad.shape != x.shape:
            broadcast_shapes(grad.shape, x.shape, op)
        g, a = compute.cast(grad._data), compute.cast(x._data)
        factor = kernel(a)
        if factor.dtype.kind == "c":      # grad * conj(f'(x)) (ops_common.h's derivative_factor)
            factor = np.conj(factor)
        out = make_tensor(fresh(dtype.cast(g * factor)))
        if any_requires_grad(grad, x):
            node = record(op, out, (grad, x))
            node.save("x", x)
            if "grad" in node.fields and needs_input_grad(node, 1):
                node.save("grad", grad)
        if forward_ad.active(): forward_ad.attach(op, out, (grad, x), grad=grad, x=x)
        return out
    forward.__name__ = forward.__qualname__ = op
    return forward


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
