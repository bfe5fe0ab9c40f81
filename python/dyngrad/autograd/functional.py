"""dyngrad.autograd.functional, for both engines: jacobian, hessian, vjp, jvp, hvp, vhp with torch's signatures.

Everything here is built on the reverse-mode engine (autograd.grad):
- vjp is one backward pass; vhp is two (the gradient, then its vjp);
- jvp is forward mode (autograd.forward_ad: one forward pass carrying tangents), and hvp forward-over-reverse
  (the gradient computed from dual inputs carries H v as its tangent);
- jacobian runs one backward pass per output element (reverse mode; vectorize=True gives the same numbers by the
  same loop, since the engine has no batched gradients), and hessian is the jacobian of the gradient.

Note [Double vjp] (used by nothing but kept for the record of why jvp was once two reverse passes): for f: R^n -> R^m at x, the vjp g(u) = J^T u is linear in u, so its own vjp with respect to u is
  d/du <J^T u, v> = J v.
Hence J v costs two reverse passes: g = grad(f(x), x, grad_outputs=u, create_graph=True) with a dummy u (zeros
that require grad), then grad(g, u, grad_outputs=v). The same trick gives H v for a scalar function (J of the
gradient). It needs the backward formulas of f to be differentiable, which every built-in op's are.
"""
from .. import _C
from .engine import grad as _autograd_grad
from . import forward_ad
from .grad_mode import enable_grad


# the core's factories: this module loads with autograd, below the API (Note [Layers of autograd] in __init__.py)
def _full_like(t, value):
    return _C.full(tuple(t.shape), value, t.dtype)


# ----- argument handling --------------------------------------------------------------------------------------
def _as_tuple(value, arg_name, fn_name):
    """(is_tuple, tuple of tensors): `value` is a Tensor or a tuple/list of Tensors."""
    if isinstance(value, _C.Tensor):
        return False, (value,)
    if isinstance(value, (tuple, list)):
        for i, t in enumerate(value):
            if not isinstance(t, _C.Tensor):
                raise TypeError(f"autograd.functional.{fn_name}: the {arg_name} must be a Tensor or a tuple of "
                                f"Tensors, but element {i} is {type(t).__name__}.")
        return True, tuple(value)
    raise TypeError(f"autograd.functional.{fn_name}: the {arg_name} must be a Tensor or a tuple of Tensors, got "
                    f"{type(value).__name__}.")


def _prepare_inputs(inputs, create_graph):
    """Inputs the function sees: with create_graph, a view of an input that requires grad (so the result stays
    connected to the caller's graph); otherwise a detached copy that requires grad."""
    out = []
    for t in inputs:
        if create_graph and t.requires_grad:
            out.append(t.view_as(t))
        else:
            out.append(t.detach().requires_grad_(True))
    return tuple(out)


def _finish(tensors, create_graph):
    """Results handed back: detached unless create_graph."""
    if create_graph:
        return tuple(tensors)
    return tuple(t.detach() if isinstance(t, _C.Tensor) else t for t in tensors)


def _restore(is_tuple, values):
    return tuple(values) if is_tuple else values[0]


def _check_same_shapes(vs, refs, v_name, ref_name, fn_name):
    if len(vs) != len(refs):
        raise RuntimeError(f"autograd.functional.{fn_name}: v has {len(vs)} tensors but the {ref_name} has "
                           f"{len(refs)}; they must match.")
    for i, (v, r) in enumerate(zip(vs, refs)):
        if tuple(v.shape) != tuple(r.shape):
            raise RuntimeError(f"autograd.functional.{fn_name}: entry {i} of {v_name} has shape {tuple(v.shape)} "
                               f"but entry {i} of the {ref_name} has shape {tuple(r.shape)}; they must match.")


def _call(func, inputs, is_tuple, fn_name):
    with enable_grad():
        out = func(*inputs)
    return (*_as_tuple(out, "output of the user-provided function", fn_name), out)


def _default_v(outputs, fn_name, what):
    for o in outputs:
        if o.numel() != 1:
            raise RuntimeError(f"autograd.functional.{fn_name}: v can be omitted only when the {what} has a single "
                               f"element, but it has shape {tuple(o.shape)}; pass v.")
    return tuple(_full_like(o, 1) for o in outputs)


def _grad(outputs, inputs, grad_outputs, create_graph, retain_graph=None):
    """autograd.grad over the outputs that require grad; None for inputs they do not reach."""
    pairs = [(o, g) for o, g in zip(outputs, grad_outputs) if isinstance(o, _C.Tensor) and o.requires_grad]
    if not pairs:
        return (None,) * len(inputs)
    outs, grads = zip(*pairs)
    return _autograd_grad(outs, inputs, grads, retain_graph=retain_graph, create_graph=create_graph,
                          allow_unused=True)


def _fill_unused(grads, refs, strict, fn_name, stage):
    out = []
    for i, (g, r) in enumerate(zip(grads, refs)):
        if g is None:
            if strict:
                raise RuntimeError(f"autograd.functional.{fn_name}: the {stage} is independent of input {i}, which "
                                   "is not allowed in strict mode.")
            g = _full_like(r, 0)
        out.append(g)
    return out


def _check_requires_grad(outputs, strict, fn_name, what):
    if not strict:
        return
    for i, o in enumerate(outputs):
        if not o.requires_grad:
            raise RuntimeError(f"autograd.functional.{fn_name}: {what} {i} does not require grad, so it is "
                               "independent of the inputs, which is not allowed in strict mode.")


# ----- vjp, jvp, vhp, hvp ---------------------------------------------------------------------------------------
def vjp(func, inputs, v=None, create_graph=False, strict=False):
    """(func(*inputs), v^T J): the vector-Jacobian product of func at inputs. v has the shape of func's output
    (optional when the output has one element); the result has the structure of `inputs`."""
    in_tuple, inputs = _as_tuple(inputs, "inputs", "vjp")
    inputs = _prepare_inputs(inputs, create_graph)
    out_tuple, outputs, _ = _call(func, inputs, in_tuple, "vjp")
    _check_requires_grad(outputs, strict, "vjp", "output")
    if v is None:
        vs = _default_v(outputs, "vjp", "output of the user-provided function")
    else:
        _, vs = _as_tuple(v, "v", "vjp")
        _check_same_shapes(vs, outputs, "v", "output of the user-provided function", "vjp")
    grads = _grad(outputs, inputs, vs, create_graph)
    grads = _fill_unused(grads, inputs, strict, "vjp", "output of the user-provided function")
    return _restore(out_tuple, _finish(outputs, create_graph)), _restore(in_tuple, _finish(grads, create_graph))


def _double_vjp(outputs, inputs, vs, create_graph, strict, fn_name):
    """J v by Note [Double vjp]: J is d outputs / d inputs; vs has the structure of inputs."""
    dummies = tuple(_full_like(o, 0).requires_grad_(True) for o in outputs)
    grad_inputs = _grad(outputs, inputs, dummies, create_graph=True)
    # inputs that no output depends on contribute nothing to J v
    pairs = [(g, v) for g, v in zip(grad_inputs, vs) if g is not None and g.requires_grad]
    if not pairs:
        result = (None,) * len(outputs)
    else:
        gs, gvs = zip(*pairs)
        result = _autograd_grad(gs, dummies, gvs, create_graph=create_graph, allow_unused=True)
    return _fill_unused(result, outputs, strict, fn_name, "output of the user-provided function")


def jvp(func, inputs, v=None, create_graph=False, strict=False):
    """(func(*inputs), J v): the Jacobian-vector product of func at inputs. v has the structure of `inputs`
    (optional when there is a single one-element input); the result has the structure of func's output.
    Forward mode: func runs once on dual inputs (autograd.forward_ad) and J v is its outputs' tangent."""
    in_tuple, inputs = _as_tuple(inputs, "inputs", "jvp")
    if v is None:
        vs = _default_v(inputs, "jvp", "input")
    else:
        _, vs = _as_tuple(v, "v", "jvp")
        _check_same_shapes(vs, inputs, "v", "inputs", "jvp")
    inputs = _prepare_inputs(inputs, create_graph)
    with forward_ad.dual_level():
        duals = tuple(forward_ad.make_dual(x, _C.to_dtype(t, x.dtype)) for x, t in zip(inputs, vs))
        out_tuple, outputs, _ = _call(func, duals, in_tuple, "jvp")
        _check_requires_grad(outputs, strict, "jvp", "output")
        unpacked = [forward_ad.unpack_dual(o) for o in outputs]
    primals = [u.primal for u in unpacked]
    result = _fill_unused([u.tangent for u in unpacked], outputs, strict, "jvp",
                          "output of the user-provided function")
    return _restore(out_tuple, _finish(primals, create_graph)), _restore(out_tuple, _finish(result, create_graph))


def _scalar_output(func, inputs, in_tuple, fn_name):
    out_tuple, outputs, raw = _call(func, inputs, in_tuple, fn_name)
    if out_tuple or outputs[0].numel() != 1:
        what = "a tuple" if out_tuple else f"a Tensor of shape {tuple(outputs[0].shape)}"
        raise RuntimeError(f"autograd.functional.{fn_name}: the function must return a Tensor with a single "
                           f"element, but it returned {what}.")
    return outputs[0]


def vhp(func, inputs, v=None, create_graph=False, strict=False):
    """(func(*inputs), v^T H): the vector-Hessian product of a scalar function at inputs (two reverse passes:
    the gradient with create_graph, then its vjp with v). v and the result have the structure of `inputs`."""
    return _hessian_product(func, inputs, v, create_graph, strict, "vhp")


def hvp(func, inputs, v=None, create_graph=False, strict=False):
    """(func(*inputs), H v): the Hessian-vector product of a scalar function at inputs, forward over reverse: the
    gradient of func at dual inputs (tangent v) carries H v as its tangent, one forward and one backward pass.
    Equal to vhp for twice-differentiable functions (H is symmetric)."""
    return _hessian_product(func, inputs, v, create_graph, strict, "hvp")


def _hessian_product(func, inputs, v, create_graph, strict, fn_name):
    in_tuple, inputs = _as_tuple(inputs, "inputs", fn_name)
    if v is None:
        vs = _default_v(inputs, fn_name, "input")
    else:
        _, vs = _as_tuple(v, "v", fn_name)
        _check_same_shapes(vs, inputs, "v", "inputs", fn_name)
    inputs = _prepare_inputs(inputs, create_graph)
    if fn_name == "vhp":
        out = _scalar_output(func, inputs, in_tuple, fn_name)
        _check_requires_grad((out,), strict, fn_name, "output")
        grads = _grad((out,), inputs, (_full_like(out, 1),), create_graph=True)
        grads = _fill_unused(grads, inputs, strict, fn_name, "output of the user-provided function")
        result = _grad(grads, inputs, vs, create_graph=create_graph)
        result = _fill_unused(result, inputs, strict, fn_name, "gradient of the output")
        return out.detach() if not create_graph else out, _restore(in_tuple, _finish(result, create_graph))
    with forward_ad.dual_level():
        duals = tuple(forward_ad.make_dual(x, _C.to_dtype(t, x.dtype)) for x, t in zip(inputs, vs))
        out = _scalar_output(func, duals, in_tuple, fn_name)
        _check_requires_grad((out,), strict, fn_name, "output")
        grads = _grad((out,), inputs, (_full_like(out, 1),), create_graph=create_graph)
        grads = _fill_unused(grads, inputs, strict, fn_name, "output of the user-provided function")
        result = [forward_ad.unpack_dual(g).tangent for g in grads]
        out = forward_ad.unpack_dual(out).primal
    result = _fill_unused(result, inputs, strict, fn_name, "gradient of the output")
    return out.detach() if not create_graph else out, _restore(in_tuple, _finish(result, create_graph))


# ----- jacobian, hessian --------------------------------------------------------------------------------------
_STRATEGIES = ("reverse-mode", "forward-mode")


def _check_strategy(strategy, vectorize, strict, fn_name):
    if strategy not in _STRATEGIES:
        raise ValueError(f"autograd.functional.{fn_name}: strategy must be 'reverse-mode' or 'forward-mode', got "
                         f"{strategy!r}.")
    if strategy == "forward-mode" and not vectorize:
        raise ValueError(f"autograd.functional.{fn_name}: strategy='forward-mode' only works with vectorize=True "
                         "(as in torch).")
    if vectorize and strict:
        raise RuntimeError(f"autograd.functional.{fn_name}: strict=True is not supported with vectorize=True (as "
                           "in torch); pass one of them.")


def _jacobian_rows(outputs, inputs, create_graph, strict, fn_name):
    """jac[i][j] of shape outputs[i].shape + inputs[j].shape, one backward pass per output element (reverse
    mode). vectorize=True and strategy='forward-mode' give the same numbers through this same loop: the engine has
    no batched gradients, so there is nothing to vectorize over."""
    jac = []
    for i, out in enumerate(outputs):
        rows = [[] for _ in inputs]
        flat_n = out.numel()
        reaches = out.requires_grad
        if strict and not reaches:
            raise RuntimeError(f"autograd.functional.{fn_name}: output {i} does not require grad, so it is "
                               "independent of the inputs, which is not allowed in strict mode.")
        for k in range(flat_n):
            if reaches:
                onehot = _C.full((flat_n,), 0, out.dtype)
                onehot[k] = 1
                grads = _autograd_grad((out,), inputs, (onehot.reshape(out.shape),), retain_graph=True,
                                       create_graph=create_graph, allow_unused=True)
            else:
                grads = (None,) * len(inputs)
            for j, (g, inp) in enumerate(zip(grads, inputs)):
                if g is None:
                    if strict:
                        raise RuntimeError(f"autograd.functional.{fn_name}: output {i} is independent of input "
                                           f"{j}, which is not allowed in strict mode.")
                    g = _full_like(inp, 0)
                rows[j].append(g)
        row = []
        for j, inp in enumerate(inputs):
            shape = tuple(out.shape) + tuple(inp.shape)
            if rows[j]:
                block = _C.stack(rows[j], 0).reshape(shape)
            else:
                block = _C.full(shape, 0, inp.dtype)
            row.append(block if create_graph else block.detach())
        jac.append(tuple(row))
    return jac


def jacobian(func, inputs, create_graph=False, strict=False, vectorize=False, strategy="reverse-mode"):
    """The Jacobian of func at inputs. For one input and one output a Tensor of shape output.shape + input.shape;
    a tuple over inputs (or outputs) when that side is a tuple; a tuple of tuples [output][input] when both are.
    Reverse mode: one backward pass per output element. vectorize=True (and strategy='forward-mode', which torch
    allows only with it) is accepted and computes the same values by the same loop."""
    _check_strategy(strategy, vectorize, strict, "jacobian")
    in_tuple, inputs = _as_tuple(inputs, "inputs", "jacobian")
    inputs = _prepare_inputs(inputs, create_graph)
    out_tuple, outputs, _ = _call(func, inputs, in_tuple, "jacobian")
    jac = _jacobian_rows(outputs, inputs, create_graph, strict, "jacobian")
    if out_tuple:
        return tuple(_restore(in_tuple, row) for row in jac)
    return _restore(in_tuple, jac[0])


def hessian(func, inputs, create_graph=False, strict=False, vectorize=False, outer_jacobian_strategy="reverse-mode"):
    """The Hessian of a scalar function at inputs: a Tensor of shape input.shape + input.shape for one input,
    a tuple of tuples [i][j] (d^2 f / d input_i d input_j) for a tuple of inputs. The Jacobian (reverse mode) of
    the gradient."""
    _check_strategy(outer_jacobian_strategy, vectorize, strict, "hessian")
    in_tuple, inputs = _as_tuple(inputs, "inputs", "hessian")
    inputs = _prepare_inputs(inputs, create_graph)
    out = _scalar_output(func, inputs, in_tuple, "hessian")
    if strict and not out.requires_grad:
        raise RuntimeError("autograd.functional.hessian: the output does not require grad, so it is independent "
                           "of the inputs, which is not allowed in strict mode.")
    grads = _grad((out,), inputs, (_full_like(out, 1),), create_graph=True)
    grads = _fill_unused(grads, inputs, strict, "hessian", "output of the user-provided function")
    jac = _jacobian_rows(grads, inputs, create_graph, strict, "hessian")
    return _restore(in_tuple, [_restore(in_tuple, row) for row in jac])
