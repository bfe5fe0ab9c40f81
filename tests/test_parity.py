"""The two engines mirror each other: the same primitive ops, the same public names, the same node names.

A user script switches engines by changing one import (docs/design.md), so a name that exists in one engine and
not in the other is a bug in one of them. (Values and gradients are compared in test_differential.py.)
"""
import importlib
import types

import numpy as np
import pytest

# The public API of docs/design.md ("Public API (both engines)"), module level and Tensor methods.
DESIGN_MODULE_NAMES = """
float32 float64 int64 bool float double long dtype Tensor Size get_default_dtype
tensor from_numpy zeros ones empty full arange linspace eye rand randn randint zeros_like ones_like empty_like
full_like rand_like randn_like manual_seed
add sub mul div pow neg matmul maximum minimum where clamp exp log sqrt rsqrt abs sin cos tanh sigmoid relu sign
sum mean var std max min amax amin argmax argmin logsumexp reshape flatten transpose permute squeeze
unsqueeze cat stack split chunk gather index_select masked_fill eq ne lt le gt ge
softmax log_softmax cross_entropy nll_loss mse_loss binary_cross_entropy_with_logits linear embedding dropout one_hot
conv2d max_pool2d avg_pool2d layer_norm leaky_relu gelu softplus
no_grad enable_grad set_grad_enabled is_grad_enabled autograd
""".split()

DESIGN_AUTOGRAD_NAMES = "grad backward Function gradcheck gradgradcheck no_grad enable_grad set_grad_enabled".split()

DESIGN_TENSOR_NAMES = """
shape dtype ndim dim numel size stride is_contiguous data requires_grad grad grad_fn is_leaf T mT _version item
tolist numpy __array__ __len__ __iter__ __bool__ __float__ __int__ __repr__
to float double long bool type_as clone contiguous detach detach_ requires_grad_ retain_grad retains_grad
register_hook backward
add sub mul div pow neg matmul maximum minimum clamp exp log sqrt rsqrt abs sin cos tanh sigmoid relu sign
add_ sub_ mul_ div_ zero_ fill_ clamp_ copy_
sum mean var std max min amax amin argmax argmin logsumexp
reshape view flatten transpose permute squeeze unsqueeze expand expand_as split chunk
gather index_select masked_fill eq ne lt le gt ge softmax log_softmax
__add__ __radd__ __sub__ __rsub__ __mul__ __rmul__ __truediv__ __rtruediv__ __pow__ __rpow__ __matmul__ __neg__
__iadd__ __isub__ __imul__ __itruediv__ __getitem__ __setitem__ __eq__ __ne__ __lt__ __le__ __gt__ __ge__
""".split()


def public_names(module):
    return {n for n in dir(module) if not n.startswith("_") and not isinstance(getattr(module, n), types.ModuleType)}


def test_primitive_ops_match(cpp, ref):
    """ops.def and the reference's table (primitives.py, generated from it) list the same primitives, in the same
    order (docs/design.md, "How to add an op")."""
    c, r = list(cpp._C.op_names()), list(ref._C.op_names())
    assert set(c) == set(r), f"only in csrc/dyngrad/ops.def: {sorted(set(c) - set(r))}; only in the reference: " \
                             f"{sorted(set(r) - set(c))}"
    assert c == r


def test_reference_has_a_derivative_per_primitive(ref):
    derivatives = importlib.import_module("dyngrad.reference.derivatives")
    missing = [n for n in ref._C.op_names() if not hasattr(derivatives, f"{n}_backward")]
    assert not missing, f"reference/derivatives.py has no <op>_backward for {missing}"


@pytest.mark.parametrize("name", DESIGN_MODULE_NAMES)
def test_design_names_exported(dg, name):
    assert hasattr(dg, name), f"{dg.__name__} lacks {name} (docs/design.md, Public API)"


@pytest.mark.parametrize("name", DESIGN_AUTOGRAD_NAMES)
def test_design_autograd_names(dg, name):
    assert hasattr(dg.autograd, name), f"{dg.__name__}.autograd lacks {name}"


@pytest.mark.parametrize("name", DESIGN_TENSOR_NAMES)
def test_design_tensor_names(dg, name):
    assert hasattr(dg.Tensor, name), f"{dg.__name__}.Tensor lacks {name}"


def test_same_public_module_names(cpp, ref):
    c, r = public_names(cpp), public_names(ref)
    assert c == r, f"only in dyngrad: {sorted(c - r)}; only in dyngrad.reference: {sorted(r - c)}"


def test_same_public_tensor_names(cpp, ref):
    c = {n for n in dir(cpp.Tensor) if not n.startswith("_")}
    r = {n for n in dir(ref.Tensor) if not n.startswith("_")}
    assert c == r, f"only in dyngrad.Tensor: {sorted(c - r)}; only in dyngrad.reference.Tensor: {sorted(r - c)}"


def test_same_node_names_for_every_op_row(cpp, ref):
    """Each row of the op table gives its output a grad_fn of the same name in both engines (docs/design.md, Node
    names: what repr(t) shows as grad_fn=<...>). One test listing every mismatch, so the report is one table."""
    from helpers import as_list, as_spec, differentiable, draw_inputs, make_tensor
    from test_ops import OPS

    mismatches = []
    for op in OPS:
        if not op.cases or not op.grad:
            continue
        specs = [as_spec(s, op.check.get("low"), op.check.get("high"), op.check.get("away_from", ()))
                 for s in op.cases[0]]
        arrays = draw_inputs(specs, 0)
        diff = differentiable(specs, arrays)
        names = []
        for m in (cpp, ref):
            tensors = [make_tensor(m, a, "float64", k in diff) for k, a in enumerate(arrays)]
            try:
                out = as_list(op.fn(m, *tensors))[0]
                names.append(out.grad_fn.name() if out.grad_fn is not None else None)
            except Exception as exc:  # noqa: BLE001  reported in the table below
                names.append(f"raised {type(exc).__name__}")
        if names[0] != names[1]:
            mismatches.append(f"{op.name:28s} dyngrad {names[0]!s:22s} reference {names[1]}")
    assert not mismatches, f"{len(mismatches)} rows differ:\n" + "\n".join(mismatches)


def test_same_saved_field_names_for_every_op(cpp, ref):
    """Each op saves the same named fields in both engines (Note [Named saved state] in csrc/dyngrad/saved.h):
    the structs that ops.def names, generated into _C.op_saved_fields(), against the reference's PRIMITIVES."""
    table = ref._C.op_saved_fields()
    c = cpp._C.op_saved_fields()
    rows = [f"{op:14s} dyngrad {c.get(op)!s:40s} reference {table.get(op)}"
            for op in sorted(set(c) | set(table)) if c.get(op) != table.get(op)]
    assert not rows, f"{len(rows)} ops differ:\n" + "\n".join(rows)


def _graph_pairs(c_root, r_root):
    """The nodes of the same graph in the two engines, in pairs (each node once, following next_functions)."""
    stack, seen = [(c_root, r_root)], set()
    while stack:
        c, r = stack.pop()
        if c is None or r is None:
            if c is not None or r is not None:
                yield c, r  # one engine has an edge the other has not: reported by the caller
            continue
        if id(r) in seen:
            continue
        seen.add(id(r))
        yield c, r
        if len(c.next_functions) == len(r.next_functions):
            stack.extend((a[0], b[0]) for a, b in zip(c.next_functions, r.next_functions))


def _same_value(a, b):
    if a is None or b is None:
        return a is None and b is None
    if hasattr(a, "grad_fn"):  # a tensor (already unpacked)
        from helpers import to_numpy
        x, y = to_numpy(a), to_numpy(b)
        return x.shape == y.shape and np.allclose(x, y, rtol=1e-12, atol=1e-12, equal_nan=True)
    return type(a) is type(b) and a == b if isinstance(a, (tuple, bool)) else a == b


def test_saved_fields_agree_for_every_op_row(cpp, ref):
    """Node._saved_fields() of every node of every op row's graph: the same names, in the same order, with the same
    values in both engines; a reference node saves nothing its op does not declare; and every primitive shows up."""
    from helpers import as_list, as_spec, differentiable, draw_inputs, make_tensor
    from test_ops import OPS

    problems, seen_ops = [], set()
    for op in OPS:
        if not op.cases or not op.grad:
            continue
        specs = [as_spec(s, op.check.get("low"), op.check.get("high"), op.check.get("away_from", ()))
                 for s in op.cases[0]]
        arrays = draw_inputs(specs, 0)
        diff = differentiable(specs, arrays)
        outs, m_leaves = [], {}
        for m in (cpp, ref):
            tensors = m_leaves[m] = [make_tensor(m, a, "float64", k in diff) for k, a in enumerate(arrays)]
            try:
                outs.append(as_list(op.fn(m, *tensors)))
            except Exception:  # noqa: BLE001  rows failing on this input are test_ops' business
                outs.append(None)
        if outs[0] is None or outs[1] is None:
            continue
        roots = list(zip(*outs))
        # and the graphs of the gradients (create_graph): the adjoint primitives (IndexAdd, Col2Im...) are there
        grads = []
        for m, engine_outs in zip((cpp, ref), outs):
            floats = [o for o in engine_outs if o.requires_grad and o.is_floating_point()]
            leaves = [t for t in m_leaves[m] if t.requires_grad]
            if not floats or not leaves:
                break
            loss = sum((o * o).sum() for o in floats)  # squares: the gradient flowing back has a history too
            try:
                grads.append(m.autograd.grad(loss, leaves, create_graph=True, allow_unused=True))
            except Exception as exc:  # noqa: BLE001  e.g. a formula reading a field its forward did not save
                problems.append(f"{op.name}: {m.__name__} backward raised {type(exc).__name__}: {exc}")
                break
        if len(grads) == 2:
            roots += [(c, r) for c, r in zip(*grads) if c is not None and r is not None]
        for c_out, r_out in roots:
            for c, r in _graph_pairs(c_out.grad_fn, r_out.grad_fn):
                if c is None or r is None or c.name() != r.name():
                    problems.append(f"{op.name}: graphs differ: {c and c.name()} vs {r and r.name()}")
                    break
                cf, rf = c._saved_fields(), r._saved_fields()
                if list(cf) != list(rf):
                    problems.append(f"{op.name}: {c.name()} saves {list(cf)} in dyngrad, {list(rf)} in the reference")
                    continue
                differ = [k for k in cf if not _same_value(cf[k], rf[k])]
                if differ:
                    problems.append(f"{op.name}: {c.name()} fields {differ} differ: "
                                    f"{[cf[k] for k in differ]} vs {[rf[k] for k in differ]}")
                fields = getattr(r, "fields", None)
                if fields is not None:
                    seen_ops.add(r.op)
                    extra = (set(r.saved or ()) | set(r.args or ())) - set(fields)
                    if extra:
                        problems.append(f"{op.name}: the reference {r.name()} saves undeclared {sorted(extra)}")
    assert not problems, f"{len(problems)} problems:\n" + "\n".join(problems)
    missing = {row[1] for row in importlib.import_module("dyngrad.reference.primitives").PRIMITIVES} - seen_ops
    assert not missing, f"no op row reaches these nodes, so their saved fields went unchecked: {sorted(missing)}"
