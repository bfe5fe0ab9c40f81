"""gradcheck and gradgradcheck, shared by both engines (see "Shared code" in docs/design.md).

Only relative imports of the engine root: in `dyngrad.autograd.gradcheck` they give the C++ engine, in
`dyngrad.reference.autograd.gradcheck` the reference engine. Analytic gradients (vector-Jacobian products from
`grad`) are compared with float64 central differences, as torch.autograd.gradcheck does.

Note [gradcheck of complex functions]: as torch's, a complex tensor counts as its real and imaginary parts, so a
function of complex inputs and outputs is checked as the real function of twice as many real variables. The
numerical Jacobian perturbs the real and the imaginary part of each complex input element (through
view_as_real); each complex output element gives two rows, its real and its imaginary part. Analytically, by
torch's convention (Note [Complex gradients] in csrc/dyngrad/derivatives.cpp), backward with grad_output v
differentiates Re(sum(conj(v) * out)): v = e_r gives the row of Re(out_r), v = i e_r that of Im(out_r), and a
complex input's gradient g holds the row's two columns as (Re g, Im g).
"""
from collections.abc import Iterator

import numpy as np

from .. import _C
from .._user_frame import warn

Tensor, float64 = _C.Tensor, _C.float64
from .engine import grad
from .grad_mode import no_grad


class GradcheckError(RuntimeError):
    """Raised by gradcheck / gradgradcheck when a Jacobian does not match (raise_exception=True)."""


def _as_tuple(x):
    if isinstance(x, Tensor):
        return (x,)
    if isinstance(x, (list, tuple)) or isinstance(x, Iterator):
        return tuple(x)       # a generator of inputs too: taken as its items, not as one opaque input
    return (x,)


def _describe(inputs):
    """The inputs as a message shows them: a tensor by dtype, shape and requires_grad, anything else by repr."""
    def one(x):
        if isinstance(x, Tensor):
            return f"Tensor({x.dtype}, shape {tuple(x.shape)}, requires_grad={x.requires_grad})"
        return repr(x) if len(repr(x)) <= 60 else type(x).__name__
    return "(" + ", ".join(one(x) for x in inputs) + ")"


def _differentiable(inputs):
    return [i for i, x in enumerate(inputs) if isinstance(x, Tensor) and x.requires_grad]


def _float_outputs(outputs):
    return [i for i, o in enumerate(outputs) if isinstance(o, Tensor) and (o.is_floating_point() or
                                                                         o.dtype.is_complex)]


def _real_size(t):
    """The number of real variables of t: twice its elements when complex (Note [gradcheck of complex functions])."""
    return t.numel() * (2 if t.dtype.is_complex else 1)


def _real_values(t):
    """t's values as float64, a complex element as its (real, imag) pair, flattened."""
    arr = np.asarray(t.detach().numpy())
    if arr.dtype.kind == "c":
        arr = np.stack([arr.real, arr.imag], -1)
    return np.array(arr, dtype=np.float64).reshape(-1)


def _numerical_jacobians(fn, inputs, wrt, out_idx, eps):
    """J[o][k] has shape (real size of output o, real size of input k): central differences, one real variable
    at a time (a complex element's real, then imaginary part)."""
    outputs = _as_tuple(fn(*inputs))
    jac = {(o, k): np.zeros((_real_size(outputs[o]), _real_size(inputs[k]))) for o in out_idx for k in wrt}
    for k in wrt:
        x = inputs[k]
        # shares memory with x: writing to it perturbs x (a complex x through its real view)
        alias = _C.view_as_real(x.detach()) if x.dtype.is_complex else x.detach()
        for j in range(_real_size(x)):
            position = np.unravel_index(j, tuple(alias.shape)) if alias.ndim else ()
            original = float(alias[position].item())
            with no_grad():
                alias[position] = original + eps
            plus = [_real_values(o) for o in _as_tuple(fn(*inputs))]
            with no_grad():
                alias[position] = original - eps
            minus = [_real_values(o) for o in _as_tuple(fn(*inputs))]
            with no_grad():
                alias[position] = original
            for o in out_idx:
                jac[(o, k)][:, j] = (plus[o] - minus[o]) / (2 * eps)
    return jac


def _analytical_jacobians(fn, inputs, wrt, out_idx):
    """J[o][k]: row r is the gradient of element r of output o, from one backward pass with a one-hot vector."""
    outputs = _as_tuple(fn(*inputs))
    diff_inputs = [inputs[k] for k in wrt]
    jac = {(o, k): np.zeros((_real_size(outputs[o]), _real_size(inputs[k]))) for o in out_idx for k in wrt}
    for o in out_idx:
        out = outputs[o]
        if not out.requires_grad:
            continue
        parts = (1.0, 1j) if out.dtype.is_complex else (1.0,)       # the rows of Re(out_r) and Im(out_r)
        for r in range(out.numel()):
            for p, unit in enumerate(parts):
                onehot = np.zeros(out.numel(), dtype=complex if out.dtype.is_complex else float)
                onehot[r] = unit
                grad_output = out.new_tensor(onehot.reshape(tuple(out.shape)))
                grads = grad(out, diff_inputs, grad_outputs=grad_output, retain_graph=True, allow_unused=True)
                for k, g in zip(wrt, grads):
                    if g is not None:
                        jac[(o, k)][len(parts) * r + p, :] = _real_values(g)
    return jac


def gradcheck(fn, inputs, eps=1e-6, atol=1e-5, rtol=1e-3, raise_exception=True, **unused_torch_options):
    """True if fn's analytic gradients match float64 finite differences for every differentiable input;
    otherwise raises GradcheckError (or returns False when raise_exception=False)."""
    inputs = _as_tuple(inputs)
    wrt = _differentiable(inputs)
    if not wrt:
        raise ValueError("gradcheck: expected at least one input tensor with requires_grad=True; got inputs "
                         f"{_describe(inputs)}.")
    for k in wrt:
        if inputs[k].dtype is not float64 and inputs[k].dtype.name != "complex128":
            warn(f"gradcheck: input {k} is {inputs[k].dtype}, not float64; finite differences may be too "
                 "imprecise to compare.", UserWarning)
    out_idx = _float_outputs(_as_tuple(fn(*inputs)))
    numerical = _numerical_jacobians(fn, inputs, wrt, out_idx, eps)
    analytical = _analytical_jacobians(fn, inputs, wrt, out_idx)
    for (o, k), num in numerical.items():
        ana = analytical[(o, k)]
        if not np.allclose(ana, num, rtol=rtol, atol=atol):
            # printed as torch.autograd.gradcheck prints them: a row per input element, a column per output
            # element (the transpose of the (output, input) Jacobians computed above)
            num, ana = num.T, ana.T
            worst = np.unravel_index(np.argmax(np.abs(ana - num)), ana.shape) if ana.size else ()
            message = (f"gradcheck: Jacobian mismatch for output {o} with respect to input {k},\n"
                       f"numerical:\n{num}\nanalytical:\n{ana}\n(rows: elements of input {k}, columns: elements "
                       f"of output {o}; worst at {tuple(int(i) for i in worst)}: analytical "
                       f"{ana[worst] if ana.size else None}, numerical {num[worst] if num.size else None})")
            if raise_exception:
                raise GradcheckError(message)
            return False
    return True


def gradgradcheck(fn, inputs, grad_outputs=None, eps=1e-6, atol=1e-5, rtol=1e-3, gen_non_contig_grad_outputs=False,
                  raise_exception=True, **unused_torch_options):
    """gradcheck of the first derivatives: checks that backward's own graph (create_graph=True) is right."""
    inputs = _as_tuple(inputs)
    outputs = _as_tuple(fn(*inputs))
    out_idx = [o for o in _float_outputs(outputs) if outputs[o].requires_grad]
    if grad_outputs is None:
        rng = np.random.default_rng(0)

        def random_like(out):
            values = rng.standard_normal(tuple(out.shape))
            if out.dtype.is_complex:
                return out.new_tensor(values + 1j * rng.standard_normal(tuple(out.shape)), dtype=_C.complex128,
                                      requires_grad=True)
            return out.new_tensor(values, dtype=float64, requires_grad=True)
        grad_outputs = tuple(random_like(outputs[o]) for o in out_idx)
    else:
        grad_outputs = _as_tuple(grad_outputs)
    n = len(inputs)

    def first_derivatives(*args):
        ins, gos = args[:n], args[n:]
        outs = _as_tuple(fn(*ins))
        wrt = [ins[k] for k in _differentiable(ins)]
        grads = grad([outs[o] for o in out_idx], wrt, grad_outputs=gos, create_graph=True, allow_unused=True)
        return tuple(g for g in grads if g is not None)

    return gradcheck(first_derivatives, inputs + tuple(grad_outputs), eps=eps, atol=atol, rtol=rtol,
                     raise_exception=raise_exception)
