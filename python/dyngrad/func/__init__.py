"""dyngrad.func (torch.func) for both engines: function transforms over the define-by-run engine.

grad, grad_and_value and vjp run the reverse-mode engine; jvp and linearize run forward mode
(autograd.forward_ad); jacrev is vmap of vjp over the rows of the identity and jacfwd vmap of jvp over its columns;
hessian is jacfwd(jacrev(f)). vmap is dyngrad.vmap (batching rules: Note [vmap by batching rules] in
_api/ops/vmap.py); grad, vjp and jvp called inside vmap differentiate the batched computation (Note [Transforms
inside vmap] there). The transforms compose in any order (Note [Composing transforms]).

Note [Composing transforms]: each transform hands func inputs that stand for the caller's: an input that already
requires grad (an outer grad/jacrev is differentiating through it) is passed as a differentiable view, and the
inner gradient is then taken with create_graph so the outer transform sees its history; any other input becomes a
fresh leaf that requires grad, carrying the caller's forward-AD tangents at every open level, so an outer jvp sees
through the inner gradient (forward over reverse). Forward-mode transforms open a new dual level each, and levels
nest (Note [Nested levels] in csrc/dyngrad/forward_ad.h), so jvp(jvp(f)) and jacfwd(jacfwd(f)) are exact too.
Results leave a transform detached from its internal graph unless an input had history.
"""
import contextlib
import functools

from .. import _C, vmap as _vmap
from .._api.ops import vmap as _batching
from .._api.ops.vmap import BatchedTensor, tree_flatten, tree_unflatten   # pytrees of tensors
from ..autograd import forward_ad as _fwad
from ..autograd.engine import grad as _autograd_grad
from ..autograd.grad_mode import enable_grad

__all__ = ["grad", "grad_and_value", "vjp", "jvp", "linearize", "jacrev", "jacfwd", "hessian", "vmap",
           "functional_call", "stack_module_state", "functionalize"]

Tensor = _C.Tensor
vmap = _vmap


def _open_levels():
    return _C._open_dual_levels()


def _vmap_levels():
    """The ids of the open vmap levels (Note [Transforms inside vmap] in _api/ops/vmap.py)."""
    return tuple(level for level, _ in _batching.active_levels())


def _physical(x, levels):
    """x (a tensor or a BatchedTensor) as the physical tensor of every open vmap level (expanded where x is not
    batched at one: each row gets its own copy to differentiate)."""
    return _batching._phys(x, levels, expand=True)


def _stand_in(x):
    """What func sees for the caller's tensor x (Note [Composing transforms]); inside vmap, a BatchedTensor of
    every open level over the stand-in of the physical tensor."""
    levels = _vmap_levels()
    if levels:
        # vmapsp: the physical tensors are plain ones: their unsqueeze, expand, detach and requires_grad_ need
        # not pass through vmap's dispatcher (which would call them as they are; ~12 dispatches a call of grad)
        state = _batching.STATE
        was, state.active = state.active, False
        try:
            stand, history = _stand_in_plain(_physical(x, levels))
        finally:
            state.active = was
        return BatchedTensor(stand, levels), history
    return _stand_in_plain(x)


def _stand_in_plain(x):
    if x.requires_grad:
        return x.view_as(x), True
    leaf = x.detach().requires_grad_(True) if x.dtype.is_floating_point or x.dtype.is_complex else x.detach()
    for level in _open_levels():
        t = _C._get_tangent(x, level)
        if t is not None:
            _C._set_tangent(leaf, level, t)
    return leaf, False


def _argnums_tuple(argnums, nargs, fn):
    nums = (argnums,) if isinstance(argnums, int) and not isinstance(argnums, bool) else argnums
    if not isinstance(nums, tuple) or not nums or \
            not all(isinstance(n, int) and not isinstance(n, bool) for n in nums):
        raise RuntimeError(f"{fn}: argnums must be an int or a non-empty tuple of ints, got {argnums!r}.")
    out = []
    for n in nums:
        if not -nargs <= n < nargs:
            raise RuntimeError(f"{fn}: got argnums={argnums!r}, but only {nargs} positional inputs were given.")
        out.append(n % nargs)
    if len(set(out)) != len(out):
        raise RuntimeError(f"{fn}: argnums {argnums!r} names an input more than once.")
    return tuple(out)


def _check_tensors(leaves, fn, what, error=ValueError):
    """torch.func's errors: ValueError for a non-tensor differentiated input, RuntimeError for a non-tensor output
    of func (and for jvp's primals and tangents)."""
    for x in leaves:
        if not isinstance(x, (Tensor, BatchedTensor)):
            raise error(f"{fn}: expected {what} to be Tensors (or pytrees of them), got "
                        f"{type(x).__name__}.")


def _prepare(args, argnums, fn):
    """The arguments with the differentiated ones replaced by stand-ins: (args, flat stand-ins, their specs,
    whether any had history)."""
    nums = _argnums_tuple(argnums, len(args), fn)
    args = list(args)
    flat, specs, history = [], [], False
    for n in nums:
        leaves, spec = tree_flatten(args[n])
        _check_tensors(leaves, fn, "the differentiated inputs")
        made = [_stand_in(x) for x in leaves]
        history = history or any(h for _, h in made)
        stand = [m for m, _ in made]
        args[n] = tree_unflatten(stand, spec)
        flat.append(stand)
        specs.append(spec)
    return args, flat, specs, history, isinstance(argnums, int)


def _split_aux(out, has_aux, fn):
    if not has_aux:
        return out, None
    if not isinstance(out, tuple) or len(out) != 2:
        raise RuntimeError(f"{fn}(f)(*args): output of function f should be a tuple: (output, aux) if has_aux "
                           "is True.")
    return out


def _detach(x):
    """x cut from the transform's internal graph, keeping its forward-AD tangents (an outer jvp reads them)."""
    if isinstance(x, BatchedTensor):
        return BatchedTensor(_detach(x._value), x._levels)
    d = x.detach()
    for level in _open_levels():
        t = _C._get_tangent(x, level)
        if t is not None:
            _C._set_tangent(d, level, t)
    return d


def _detached(obj, keep):
    if keep:
        return obj
    leaves, spec = tree_flatten(obj)
    return tree_unflatten([_detach(x) if isinstance(x, (Tensor, BatchedTensor)) and x.requires_grad else x
                       for x in leaves], spec)


def _zeros_like(x):
    if isinstance(x, BatchedTensor):
        return BatchedTensor(_zeros_like(x._value), x._levels)
    return _C.full(tuple(x.shape), 0.0, x.dtype)


def _unbatched(xs, levels):
    """The physical tensors of xs at `levels` (Note [Transforms inside vmap])."""
    return [_physical(x, levels) if levels else x for x in xs]


def _rebatched(gs, levels):
    return [g if g is None or not levels else BatchedTensor(g, levels) for g in gs]


def _grads_of(out, flat, create_graph, retain_graph=None, grad_outputs=None):
    inputs = [x for group in flat for x in group]
    levels = _vmap_levels()
    if out.requires_grad:
        # inside vmap: the rows' outputs summed (ones as the cotangent) give every row's gradient, each row
        # depending only on its own inputs
        root = _physical(out, levels) if levels else out
        if levels and grad_outputs is None:
            grad_outputs = [_C.full(tuple(root.shape), 1.0, root.dtype)]
        grads = _autograd_grad([root], _unbatched(inputs, levels), grad_outputs, retain_graph=retain_graph,
                               create_graph=create_graph, allow_unused=True)
        grads = _rebatched(grads, levels)
    else:
        grads = [None] * len(inputs)
    grads = [_zeros_like(x) if g is None else g for g, x in zip(grads, inputs)]
    out_groups, pos = [], 0
    for group in flat:
        out_groups.append(grads[pos:pos + len(group)])
        pos += len(group)
    return out_groups


# ----- grad, grad_and_value, vjp ---------------------------------------------------------------------------------
def grad_and_value(func, argnums=0, has_aux=False):
    """torch.func.grad_and_value: a function returning (gradient, value) of func with respect to the argnums
    inputs; with has_aux, func returns (output, aux) and the result is (gradient, (value, aux))."""
    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        with enable_grad():
            args2, flat, specs, history, single = _prepare(args, argnums, "grad_and_value")
            out, aux = _split_aux(func(*args2, **kwargs), has_aux, "grad_and_value")
            if not isinstance(out, (Tensor, BatchedTensor)):
                raise RuntimeError(f"grad_and_value(f)(*args): Expected f(*args) to return a Tensor, got "
                                   f"{type(out).__name__}.")
            if out.numel() != 1 or out.ndim != 0:
                raise RuntimeError(f"grad_and_value(f)(*args): Expected f(*args) to return a scalar Tensor, got "
                                   f"tensor with {out.ndim} dims. Maybe you wanted to use the vjp or jacrev APIs "
                                   "instead?")
            groups = _grads_of(out, flat, create_graph=history or _C._current_dual_level() >= 0)
        grads = [_detached(tree_unflatten(g, sp), history) for g, sp in zip(groups, specs)]
        g = grads[0] if single else tuple(grads)
        value = _detached(out, history)
        return (g, (value, _detached(aux, history))) if has_aux else (g, value)
    return wrapper


def grad(func, argnums=0, has_aux=False):
    """torch.func.grad: a function returning the gradient of the scalar func with respect to the argnums inputs
    (and aux when has_aux)."""
    gv = grad_and_value(func, argnums, has_aux)

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        g, value = gv(*args, **kwargs)
        return (g, value[1]) if has_aux else g
    return wrapper


def vjp(func, *primals, has_aux=False):
    """torch.func.vjp: (func(*primals), vjp_fn[, aux]); vjp_fn(cotangents) returns one gradient per primal (a
    tuple), cotangents having the structure of func's output."""
    with enable_grad():
        args, flat, specs, history, _ = _prepare(primals, tuple(range(len(primals))), "vjp") if primals else \
            ([], [], [], False, False)
        out, aux = _split_aux(func(*args), has_aux, "vjp")
    out_leaves, out_spec = tree_flatten(out)
    _check_tensors(out_leaves, "vjp", "the outputs of func", RuntimeError)

    levels = _vmap_levels()

    def vjp_fn(cotangents):
        ct_leaves, ct_spec = tree_flatten(cotangents)
        if len(ct_leaves) != len(out_leaves):
            raise RuntimeError(f"vjp_fn: expected cotangents with the structure of the output "
                               f"({len(out_leaves)} tensors), got {len(ct_leaves)}.")
        for o, c in zip(out_leaves, ct_leaves):
            if not isinstance(c, (Tensor, BatchedTensor)):     # torch's TypeError (from autograd.grad)
                raise TypeError(f"vjp_fn: expected the cotangents to be Tensors (or pytrees of them), got "
                                f"{type(c).__name__}.")
            if tuple(c.shape) != tuple(o.shape):
                raise RuntimeError(f"vjp_fn: expected a cotangent of shape {tuple(o.shape)}, got "
                                   f"{tuple(c.shape) if isinstance(c, (Tensor, BatchedTensor)) else type(c).__name__}.")
        later = set(_batching._levels_of(ct_leaves)) - set(levels)
        if later:
            # vmap(vjp_fn) (jacrev's rows): the cotangents are batched at a level vjp's graph was not built at.
            # The graph's backward runs on whole tensors and cannot take a batch of cotangents, so the forward is
            # built again once, batched: func on the primals seen from every open level (each row a copy of them,
            # Note [Transforms inside vmap]), and one backward pass of that graph takes every row's cotangent. func
            # runs a second time (as a Python function it must be free of side effects for any transform).
            again = vjp(func, *primals, has_aux=has_aux)
            return again[1](cotangents)
        inputs = [x for group in flat for x in group]
        pairs = [(o, c) for o, c in zip(out_leaves, ct_leaves) if o.requires_grad]
        with enable_grad():
            if pairs:
                roots = _unbatched([o for o, _ in pairs], levels)
                cts = [_batching._phys(c, levels, o.dim(), expand=True) if levels else c for o, c in pairs]
                grads = _autograd_grad(roots, _unbatched(inputs, levels), cts, retain_graph=True,
                                       create_graph=history or any(c.requires_grad for _, c in pairs) or
                                       _C._current_dual_level() >= 0,
                                       allow_unused=True)
                grads = _rebatched(grads, levels)
            else:
                grads = [None] * len(inputs)
        grads = [_zeros_like(x) if g is None else g for g, x in zip(grads, inputs)]
        result, pos = [], 0
        for group, sp in zip(flat, specs):
            result.append(tree_unflatten(grads[pos:pos + len(group)], sp))
            pos += len(group)
        return tuple(result)

    value = _detached(out, history)
    return (value, vjp_fn, _detached(aux, history)) if has_aux else (value, vjp_fn)


# ----- jvp, linearize ---------------------------------------------------------------------------------------------
def jvp(func, primals, tangents, *, strict=False, has_aux=False):
    """torch.func.jvp: (func(*primals), J tangents) in one forward pass (forward mode). primals and tangents are
    tuples of the same structure."""
    if not strict and not has_aux and _plain_pairs(primals, tangents):
        return _jvp_plain(func, primals, tangents)
    for name, value in (("primals", primals), ("tangents", tangents)):
        if not isinstance(value, tuple):
            raise RuntimeError(f"jvp(f, primals, tangents): Expected {name} to be a tuple. E.g. it should be "
                               f"valid to call f(*{name}).")
    p_leaves, p_spec = tree_flatten(primals)
    t_leaves, t_spec = tree_flatten(tangents)
    _check_tensors(p_leaves, "jvp", "primals", RuntimeError)
    _check_tensors(t_leaves, "jvp", "tangents", RuntimeError)
    if len(p_leaves) != len(t_leaves) or p_spec != t_spec:
        raise RuntimeError("jvp(f, primals, tangents): Expected primals and tangents to have the same python "
                           "structure.")
    for p, t in zip(p_leaves, t_leaves):
        if tuple(p.shape) != tuple(t.shape):
            raise RuntimeError(f"jvp(f, primals, tangents): Expected primals and tangents to have the same shape, "
                               f"got {tuple(p.shape)} and {tuple(t.shape)}.")
        if t.dtype.is_complex and not p.dtype.is_complex:
            raise RuntimeError(f"jvp(f, primals, tangents): got a complex tangent ({t.dtype}) for a real primal "
                               f"({p.dtype}); a tangent is a direction in its primal's space: pass a real tangent, or "
                               "make the primal complex.")
    if strict:
        raise RuntimeError("jvp(f, primals, tangents, strict=True): strict=True is not supported (as in "
                           "torch.func.jvp).")
    levels = _vmap_levels()
    level = _C._enter_dual_level()
    try:
        if levels:     # inside vmap: the physical tensors are dual (Note [Transforms inside vmap])
            duals = [BatchedTensor(_fwad.make_dual(_physical(p, levels), _same_dtype(_physical(t, levels), p),
                                                   level=level), levels) for p, t in zip(p_leaves, t_leaves)]
        else:
            duals = [_dual(p, t, level) for p, t in zip(p_leaves, t_leaves)]
        out, aux = _split_aux(func(*tree_unflatten(duals, p_spec)), has_aux, "jvp")
        o_leaves, o_spec = tree_flatten(out)
        _check_tensors(o_leaves, "jvp", "the outputs of func", RuntimeError)
        unpacked = [_unpack(o, level) for o in o_leaves]
        if has_aux:
            a_leaves, a_spec = tree_flatten(aux)
            aux = tree_unflatten([_unpack(a, level).primal if isinstance(a, (Tensor, BatchedTensor)) else a
                              for a in a_leaves], a_spec)
    finally:
        _C._exit_dual_level(level)
    history = any(p.requires_grad for p in p_leaves) or any(t.requires_grad for t in t_leaves)
    primals_out = [u.primal for u in unpacked]
    tangents_out = [u.tangent if u.tangent is not None else _zeros_like(u.primal) for u in unpacked]
    if not history:     # cut from jvp's internal graph (what _detached does, on the leaves at hand)
        primals_out = [_detach(x) if x.requires_grad else x for x in primals_out]
        tangents_out = [_detach(x) if x.requires_grad else x for x in tangents_out]
    primal_out = tree_unflatten(primals_out, o_spec)
    tangent_out = tree_unflatten(tangents_out, o_spec)
    return (primal_out, tangent_out, aux) if has_aux else (primal_out, tangent_out)


def _plain_pairs(primals, tangents):
    """jvp's common case, taken without its pytree walks and checks: flat tuples of plain floating-point tensors
    without history, pairwise of one shape and dtype, outside vmap (jvp's own cost was 9 us a call of the 400 of
    bench/forward_ad.py's jvp, whose target is <= 2x a 200 us forward pass; Intel Xeon, lscpu family 6 model 167)."""
    if type(primals) is not tuple or type(tangents) is not tuple or len(primals) != len(tangents) or \
            _batching.STATE.levels:
        return False
    for p, t in zip(primals, tangents):
        if type(p) is not Tensor or type(t) is not Tensor or p.requires_grad or t.requires_grad or \
                p.dtype != t.dtype or not p.dtype.is_floating_point or p.shape != t.shape:
            return False
    return True


def _jvp_plain(func, primals, tangents):
    """jvp of _plain_pairs's case: what the general path does there, step for step."""
    level = _C._enter_dual_level()
    try:
        duals = []
        for p, t in zip(primals, tangents):
            dual = _C.reshape(p, tuple(p.shape))   # a view (as make_dual)
            _C._set_tangent(dual, level, t)
            duals.append(dual)
        out = func(*duals)
        if type(out) is Tensor:
            primal, tangent = _unpack(out, level)
        else:
            o_leaves, o_spec = tree_flatten(out)
            _check_tensors(o_leaves, "jvp", "the outputs of func", RuntimeError)
            unpacked = [_unpack(o, level) for o in o_leaves]
    finally:
        _C._exit_dual_level(level)
    if type(out) is Tensor:     # no input has history: cut from jvp's internal graph (a closure's parameter)
        if tangent is None:
            tangent = _zeros_like(primal)
        return (_detach(primal) if primal.requires_grad else primal,
                _detach(tangent) if tangent.requires_grad else tangent)
    primals_out = [_detach(u.primal) if u.primal.requires_grad else u.primal for u in unpacked]
    tangents_out = [(u.tangent if u.tangent is not None else _zeros_like(u.primal)) for u in unpacked]
    tangents_out = [_detach(x) if x.requires_grad else x for x in tangents_out]
    return tree_unflatten(primals_out, o_spec), tree_unflatten(tangents_out, o_spec)


def _same_dtype(t, p):
    return t if t.dtype == p.dtype else t.to(p.dtype)


def _dual(p, t, level):
    """make_dual(p, t) at `level` for plain tensors of one shape (jvp checked it), without make_dual's checks
    when they hold: jvp's own cost is a few microseconds per call (bench/forward_ad.py)."""
    if type(p) is not Tensor or type(t) is not Tensor or not (p.dtype.is_floating_point or p.dtype.is_complex):
        return _fwad.make_dual(p, _same_dtype(t, p), level=level)
    if t.dtype != p.dtype:
        t = t.to(p.dtype)
    dual = _C.reshape(p, tuple(p.shape))   # a view; its node keeps p's history (as make_dual)
    _C._set_tangent(dual, level, t)
    return dual


def _unpack(x, level):
    """unpack_dual of a tensor or of a BatchedTensor's physical tensor."""
    if not isinstance(x, BatchedTensor):
        if type(x) is Tensor:        # unpack_dual's work without its checks (x is a tensor, level is open)
            tangent = _C._get_tangent(x, level)
            if tangent is None:
                return _fwad.UnpackedDualTensor(x, None)
            primal = _C.reshape(x, tuple(x.shape))
            _C._set_tangent(primal, level, None)
            return _fwad.UnpackedDualTensor(primal, tangent)
        return _fwad.unpack_dual(x, level=level)
    u = _fwad.unpack_dual(x._value, level=level)
    tangent = None if u.tangent is None else BatchedTensor(u.tangent, x._levels)
    return _fwad.UnpackedDualTensor(BatchedTensor(u.primal, x._levels), tangent)


def linearize(func, *primals):
    """torch.func.linearize: (func(*primals), jvp_fn) with jvp_fn(*tangents) = J tangents. torch traces func once;
    dyngrad runs eagerly, so each jvp_fn call is one forward-mode pass of func at the primals."""
    out = func(*primals)

    def jvp_fn(*tangents):
        return jvp(func, primals, tangents)[1]
    return out, jvp_fn


# ----- jacrev, jacfwd, hessian ------------------------------------------------------------------------------------
def _check_chunk_size(chunk_size, fn):
    if chunk_size is not None and (not isinstance(chunk_size, int) or isinstance(chunk_size, bool)
                                   or chunk_size <= 0):
        raise ValueError(f"{fn}: `chunk_size` should be greater than 0.")


def jacrev(func, argnums=0, *, has_aux=False, chunk_size=None, _preallocate_and_copy=False):
    """torch.func.jacrev: the Jacobian of func with respect to the argnums inputs by reverse mode: vmap, over the
    rows of the identity (one per output element), of vjp (chunk_size rows at a time). The result nests output
    structure outside input structure, each block of shape output.shape + input.shape.

    torch's vjp_fn runs batched backward formulas; dyngrad's backward runs on whole tensors, so the vmap is over
    vjp itself: func runs once unbatched (the output's structure, aux) and once batched over the rows, and one
    backward pass gives every row (Note [Transforms inside vmap] in _api/ops/vmap.py)."""
    _check_chunk_size(chunk_size, "jacrev")

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        nums = _argnums_tuple(argnums, len(args), "jacrev")
        with enable_grad():
            args2, flat, specs, history, single = _prepare(args, argnums, "jacrev")
            out, aux = _split_aux(func(*args2, **kwargs), has_aux, "jacrev")
        o_leaves, o_spec = tree_flatten(out)
        _check_tensors(o_leaves, "jacrev", "the outputs of func", RuntimeError)
        inputs = [x for group in flat for x in group]
        _check_real(inputs, "jacrev", "inputs")
        _check_real(o_leaves, "jacrev", "outputs")
        sizes = [o.numel() for o in o_leaves]
        total = sum(sizes)
        if total == 0 or not any(o.requires_grad for o in o_leaves):
            per_output = [[_C.full(tuple(o.shape) + tuple(x.shape), 0.0, x.dtype) for x in inputs]
                          for o in o_leaves]
        else:
            eye = _identity(total, o_leaves[0].dtype)
            basis, pos = [], 0
            for o, n in zip(o_leaves, sizes):
                block = eye[:, pos:pos + n] if n else _C.full((total, 0), 0.0, eye.dtype)
                basis.append(_C.reshape(_C.to_dtype(block, o.dtype) if o.dtype != eye.dtype else block,
                                        (total,) + tuple(o.shape)))
                pos += n

            def one_row(*cts):
                def of_diff(*diff):
                    call = list(args)
                    for n, d in zip(nums, diff):
                        call[n] = d
                    result = func(*call, **kwargs)
                    return result[0] if has_aux else result
                _, pullback = vjp(of_diff, *[args[n] for n in nums])
                grads = pullback(tree_unflatten(list(cts), o_spec))
                return tuple(g for group in grads for g in tree_flatten(group)[0])
            rows = _vmap(one_row, chunk_size=chunk_size, randomness="same")(*basis)   # per input (total, *x)
            per_output, pos = [], 0
            for o, n in zip(o_leaves, sizes):
                per_output.append([r[pos:pos + n].reshape(tuple(o.shape) + tuple(x.shape))
                                   for r, x in zip(rows, inputs)])
                pos += n
        blocks = []
        for per_input in per_output:
            grouped, at = [], 0
            for group, sp in zip(flat, specs):
                grouped.append(tree_unflatten(per_input[at:at + len(group)], sp))
                at += len(group)
            blocks.append(_detached(grouped[0] if single else tuple(grouped), history))
        jac = tree_unflatten(blocks, o_spec)
        return (jac, _detached(aux, history)) if has_aux else jac
    return wrapper


def _check_real(tensors, fn, what):
    """jacrev/jacfwd (and so hessian) refuse complex inputs and outputs, as torch.func's: the Jacobian of a function
    of complex numbers is not one complex matrix unless the function is holomorphic (use jvp / vjp, which take
    complex tensors: Note [Complex forward AD] in autograd/forward_ad.py)."""
    for i, t in enumerate(tensors):
        if isinstance(t, (Tensor, BatchedTensor)) and t.dtype.is_complex:
            raise RuntimeError(f"{fn}: Expected all {what} to be real but received complex tensor at flattened "
                               f"{what[:-1]} idx: {i}")


def _identity(n, dtype):
    eye = _C.full((n * n,), 0.0, dtype)
    eye[::n + 1] = 1.0
    return _C.reshape(eye, (n, n))


def jacfwd(func, argnums=0, has_aux=False, *, randomness="error"):
    """torch.func.jacfwd: the Jacobian of func with respect to the argnums inputs by forward mode: vmap, over the
    rows of the identity (one per input element), of jvp; one batched dual pass. Same layout as jacrev.
    randomness is vmap's ('error', 'different', 'same')."""
    if randomness not in ("error", "different", "same"):
        raise RuntimeError(f"jacfwd: only allowed values for randomness are 'error', 'different', or 'same'. Got "
                           f"{randomness}")

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        nums = _argnums_tuple(argnums, len(args), "jacfwd")
        groups = []
        for n in nums:
            leaves, spec = tree_flatten(args[n])
            _check_tensors(leaves, "jacfwd", "the differentiated inputs")
            groups.append((leaves, spec))
        inputs = [x for leaves, _ in groups for x in leaves]
        _check_real(inputs, "jacfwd", "inputs")
        sizes = [x.numel() for x in inputs]
        total = sum(sizes)

        def of_diff(*diff):
            call = list(args)
            for n, d in zip(nums, diff):
                call[n] = d
            return func(*call, **kwargs)

        def primals_and(leaves_of_tangents):
            tangents, pos = [], 0
            for leaves, spec in groups:
                tangents.append(tree_unflatten(list(leaves_of_tangents[pos:pos + len(leaves)]), spec))
                pos += len(leaves)
            return tuple(args[n] for n in nums), tuple(tangents)

        if total == 0:      # no input element: run func once for the output's structure
            result, aux = _split_aux(of_diff(*[args[n] for n in nums]), has_aux, "jacfwd")
            o_leaves, o_spec = tree_flatten(result)
            columns = [_C.full((0,) + tuple(o.shape), 0.0, o.dtype) for o in o_leaves]
        else:
            basis, pos = [], 0
            for x, n in zip(inputs, sizes):
                dtype = x.dtype if x.dtype.is_floating_point else _C.float32
                eye = _identity(total, dtype)
                basis.append(_C.reshape(eye[:, pos:pos + n], (total,) + tuple(x.shape)))
                pos += n
            spec_box = []

            def one_column(*tangent_leaves):
                primals, tangents = primals_and(tangent_leaves)
                got = jvp(of_diff, primals, tangents, has_aux=has_aux)
                t_leaves, t_spec = tree_flatten(got[1])
                spec_box[:] = [t_spec]
                return (tuple(t_leaves), got[2]) if has_aux else tuple(t_leaves)
            got = _vmap(one_column, randomness=randomness)(*basis)
            columns, aux = (got[0], got[1]) if has_aux else (got, None)
            if has_aux:
                aux = tree_flatten(aux)
                aux = tree_unflatten([a[0] if isinstance(a, (Tensor, BatchedTensor)) else a for a in aux[0]], aux[1])
            o_spec = spec_box[0]
            o_leaves = [c[0] for c in columns]
        _check_real(o_leaves, "jacfwd", "outputs")
        blocks = []
        for o, col in zip(o_leaves, columns):
            per_input, pos = [], 0
            for x, n in zip(inputs, sizes):
                part = col[pos:pos + n]                          # (n, *o.shape)
                part = part.movedim(0, -1) if o.ndim else part
                per_input.append(part.reshape(tuple(o.shape) + tuple(x.shape)))
                pos += n
            grouped, at = [], 0
            for leaves, spec in groups:
                grouped.append(tree_unflatten(per_input[at:at + len(leaves)], spec))
                at += len(leaves)
            blocks.append(grouped[0] if isinstance(argnums, int) else tuple(grouped))
        history = any(x.requires_grad for x in inputs)
        jac = _detached(tree_unflatten(blocks, o_spec), history)
        return (jac, _detached(aux, history)) if has_aux else jac
    return wrapper


def hessian(func, argnums=0):
    """torch.func.hessian: jacfwd(jacrev(func, argnums), argnums), forward over reverse."""
    return jacfwd(jacrev(func, argnums), argnums)


# ----- modules ------------------------------------------------------------------------------------------------
def _named_tensors(module):
    """{name: tensor} of the module's parameters and buffers, every name of a tied tensor included."""
    out = {}
    for name, p in module.named_parameters(remove_duplicate=False):
        out[name] = p
    for name, b in module.named_buffers(remove_duplicate=False):
        out[name] = b
    return out


def _owner(module, name):
    *path, leaf = name.split(".")
    for p in path:
        module = getattr(module, p)
    return module, leaf


@contextlib.contextmanager
def _swapped(module, values):
    saved = []
    try:
        for name, value in values.items():
            owner, leaf = _owner(module, name)
            registry = owner._parameters if leaf in owner._parameters else \
                owner._buffers if leaf in owner._buffers else None
            if registry is None:
                saved.append((owner, leaf, None, owner.__dict__.get(leaf, None)))
                object.__setattr__(owner, leaf, value)
                continue
            saved.append((owner, leaf, registry, registry[leaf]))
            registry[leaf] = value
        yield
    finally:
        for owner, leaf, registry, old in reversed(saved):
            if registry is None:
                if old is None:
                    owner.__dict__.pop(leaf, None)
                else:
                    object.__setattr__(owner, leaf, old)
            else:
                registry[leaf] = old


def functional_call(module, parameter_and_buffer_dicts, args=None, kwargs=None, *, tie_weights=True, strict=False):
    """torch.func.functional_call: module(*args, **kwargs) with its parameters and buffers replaced by the given
    tensors (one dict, or a tuple of dicts whose keys must not repeat) for this call only. tie_weights: a value
    given for one name of a tied tensor is used for all its names. strict: every parameter and buffer must be
    given, and nothing else."""
    if isinstance(parameter_and_buffer_dicts, dict):
        dicts = (parameter_and_buffer_dicts,)
    elif isinstance(parameter_and_buffer_dicts, (tuple, list)) and \
            all(isinstance(d, dict) for d in parameter_and_buffer_dicts):
        dicts = tuple(parameter_and_buffer_dicts)
    else:
        raise ValueError(f"Expected all elements of parameter_and_buffer_dicts to be dictionaries, got "
                         f"{type(parameter_and_buffer_dicts).__name__}.")
    values, repeated = {}, []
    for d in dicts:
        for k, v in d.items():
            if k in values:
                repeated.append(k)
            values[k] = v
    if repeated:
        raise ValueError(f"{repeated} appeared in multiple dictionaries; behavior of functional call is ambiguous")
    current = _named_tensors(module)
    if tie_weights:
        by_id = {}
        for name, t in current.items():
            by_id.setdefault(id(t), []).append(name)
        for names in by_id.values():
            given = [n for n in names if n in values]
            if len(given) > 1 and any(values[n] is not values[given[0]] for n in given[1:]):
                raise ValueError(f"functional_call got multiple values for keys {given}, which are tied. Consider "
                                 "using tie_weights=False")
            if given:
                for n in names:
                    values.setdefault(n, values[given[0]])
    if strict:
        missing = sorted(set(current) - set(values))
        unexpected = sorted(set(values) - set(current))
        if missing or unexpected:
            parts = []
            if unexpected:
                parts.append("Unexpected key(s): " + ", ".join(repr(k) for k in unexpected) + ".")
            if missing:
                parts.append("Missing key(s): " + ", ".join(repr(k) for k in missing) + ".")
            raise RuntimeError(f"Error(s) in reparametrizing for {type(module).__name__}:\n\t"
                               + "\n\t".join(parts))
    if args is None:
        args = ()
    elif not isinstance(args, tuple):
        args = (args,)
    with _swapped(module, values):
        return module(*args, **(kwargs or {}))


def stack_module_state(models):
    """torch.func.stack_module_state: (params, buffers), each {name: the models' tensors stacked on a new leading
    dim}; the stacked parameters are new leaves that require grad (as torch), the buffers plain tensors."""
    models = list(models)
    if not models:
        raise RuntimeError("stack_module_state: Expected at least one model, got 0.")
    first = models[0]
    if not all(type(m) is type(first) for m in models):
        raise RuntimeError("stack_module_state: Expected all models to be of the same class.")
    if not all(m.training == first.training for m in models):
        raise RuntimeError("stack_module_state: Expected all models to have the same training/eval mode.")
    params = {}
    for name, _ in first.named_parameters():
        stacked = _C.stack([dict(m.named_parameters())[name].detach() for m in models], 0)
        params[name] = stacked.detach().requires_grad_(True)
    buffers = {name: _C.stack([dict(m.named_buffers())[name] for m in models], 0)
               for name, _ in first.named_buffers()}
    return params, buffers


def functionalize(func, *, remove="mutations"):
    """torch.func.functionalize: returns func itself. torch removes in-place ops so that its tracing transforms
    (vmap's batching rules, make_fx) see pure functions. dyngrad's transforms trace nothing: they run func eagerly,
    and the engine already gets in-place ops right under autograd (version counters, views' history: Note
    [In-place writes into views]) and forward AD. So there is nothing to remove, and the values are torch's."""
    if remove not in ("mutations", "mutations_and_views"):
        raise RuntimeError(f"functionalize(f, remove='mutations'): got invalid remove argument '{remove}'. Valid "
                           "options are:\n    remove='mutations': all inplace and out= operators will be removed "
                           "from the program, and replaced with their out-of-place equivalents.\n    "
                           "remove='mutations_and_views': In addition to the above, all aliasing operators {view} "
                           "will be replaced with their non-aliasing counterparts, {view}_copy.\n")
    return func
