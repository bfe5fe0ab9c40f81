"""Reference engine: the backward pass. Mirrors csrc/dyngrad/engine.cpp.

    y = a * x * x + b      builds   AddBackward -> MulBackward -> MulBackward -> AccumulateGrad(a), (x) ...
    y.backward()           visits each node once, after all the gradients flowing into it have arrived.

Two phases, both iterative (no recursion, so a 1,000,000-op chain is fine):
  1. count how many gradients each node will receive (PyTorch's compute_dependencies);
  2. run a node once all its gradients have arrived, popping ready nodes from a stack.
"""
import itertools
import threading

from . import debug, errors, forward_ad
from .grad_mode import _state as _grad_state
from .node import AccumulateGrad, GraphRoot, OpNode, ZeroDerivative, gradient_edge
import numpy as np

from .tensor import Tensor, make_tensor


_claim_lock = threading.Lock()
_next_task_id = itertools.count(1)
_final_callbacks = threading.local()   # .list: the callbacks of the innermost backward running on this thread


def queue_callback(callback):
    """Note [Final callbacks] (csrc/dyngrad/engine.h): callback() runs when the backward pass now running on this
    thread has run every node, before backward() returns."""
    if not callable(callback):
        raise TypeError(f"_queue_callback: callback must be callable, got {type(callback).__name__}.")
    callbacks = getattr(_final_callbacks, "list", None)
    if callbacks is None:
        raise RuntimeError("queue_callback: final callbacks can only be queued while a backward pass runs "
                           "(from a hook).")
    callbacks.append(callback)


class GraphTask:
    """Note [One backward at a time] (engine.h): the nodes one backward has claimed in phase 1. A second backward
    reaching a claimed node (another thread sharing the graph) is refused with a clear error; the claims are
    released when the backward ends, normally or by an exception. (Counts and pending gradients live in this
    backward's own dicts, so what a claim protects here is the graph's release: without it two threads could both
    run a graph that only one may.)"""

    def __init__(self):
        self.id = next(_next_task_id)
        self.claimed = []

    def claim_all(self, nodes):
        """Claims every node of phase 1 under one lock acquisition (not one per node: this is the hot loop)."""
        with _claim_lock:
            for node in nodes:
                owner = getattr(node, "_task_owner", 0)
                if owner == self.id:
                    continue
                if owner != 0:
                    raise RuntimeError(errors.ERR_CONCURRENT_BACKWARD.format(node=node.name()))
                node._task_owner = self.id
                self.claimed.append(node)

    def release(self):
        with _claim_lock:
            for node in self.claimed:
                node._task_owner = 0
        self.claimed = []


def run_backward(roots, grads, inputs, retain_graph, create_graph, accumulate, allow_unused):
    """Backpropagate `grads` (one per root; None for a scalar root means ones) from the `roots` tensors.
    The one entry point of Tensor.backward, autograd.backward and autograd.grad, as _C._run_backward.

    accumulate=True: leaves' .grad receive the gradients (only those in `inputs` when some are given).
    accumulate=False (autograd.grad): nothing is written to .grad; the gradients of `inputs` are returned in order.
    """
    roots = [roots] if isinstance(roots, Tensor) else list(roots)
    grads = [None] * len(roots) if grads is None else ([grads] if isinstance(grads, Tensor) else list(grads))
    if len(grads) != len(roots):
        raise RuntimeError(f"backward: got {len(grads)} gradients for {len(roots)} outputs; they must match.")
    inputs = ([inputs] if isinstance(inputs, Tensor) else list(inputs)) if inputs else None
    root_grads = []
    for root, g in zip(roots, grads):
        if gradient_edge(root) is None:
            raise RuntimeError(errors.ERR_NO_GRAD_FN)
        if g is None:
            if root._data.size != 1:
                raise RuntimeError(errors.ERR_NONSCALAR_BACKWARD.format(shape=errors.shape_str(root.shape)))
            if root.dtype.is_complex:
                raise RuntimeError(errors.ERR_COMPLEX_BACKWARD.format(dtype=root.dtype.name))
            g = make_tensor(np.ones(root._data.shape, dtype=root._data.dtype))
        elif g.shape != root.shape:
            raise RuntimeError(f"backward(): the gradient has shape {errors.shape_str(g.shape)} but the output it is "
                               f"for has shape {errors.shape_str(root.shape)}.")
        root_grads.append(g)
    allow_unused = allow_unused or accumulate
    debug.note_backward()       # a new step for the graph-growth warning
    root_edges = []
    for t in roots:
        edge = gradient_edge(t)
        if edge is None:
            raise RuntimeError(errors.ERR_NO_GRAD_FN)
        root_edges.append(edge)
    graph_root = GraphRoot(root_edges, tuple(root_grads))

    # Where to capture (autograd.grad) or to which leaves to restrict accumulation (backward(inputs=...)).
    captures = {}
    if inputs is not None:
        for i, t in enumerate(inputs):
            edge = gradient_edge(t)
            if edge is None:
                raise RuntimeError(f"grad: input {i} (shape {errors.shape_str(t.shape)}) does not require grad, "
                                   "so no gradient can be computed for it; set requires_grad=True on it.")
            captures.setdefault(edge, []).append(i)

    task = GraphTask()
    callbacks, outer = [], getattr(_final_callbacks, "list", None)
    _final_callbacks.list = callbacks
    try:
        result = _run_claimed(task, graph_root, captures, retain_graph, create_graph, inputs, accumulate,
                              allow_unused)
        i = 0
        while i < len(callbacks):      # by index: a callback may queue another
            callbacks[i]()
            i += 1
        return result
    finally:
        _final_callbacks.list = outer
        task.release()


def _run_claimed(task, graph_root, captures, retain_graph, create_graph, inputs, accumulate, allow_unused):
    # 1. count how many gradients each node will receive, then claim them all (Note [One backward at a time])
    deps, stack = {graph_root: 0}, [graph_root]
    parents = {} if inputs is not None else None
    while stack:
        node = stack.pop()
        for edge in node.next_edges:
            if edge is None:
                continue
            nxt = edge[0]
            if nxt not in deps:
                deps[nxt] = 0
                stack.append(nxt)
            deps[nxt] += 1
            if parents is not None:
                parents.setdefault(nxt, []).append(node)
    task.claim_all(deps)

    # With `inputs`, only nodes on a path to one of them need to run (PyTorch's exec_info).
    needed = None
    if inputs is not None:
        needed = set()
        stack = [edge[0] for edge in captures if edge[0] in deps]
        while stack:
            node = stack.pop()
            if node in needed:
                continue
            needed.add(node)
            stack.extend(parents.get(node, ()))

    captured = [None] * (len(inputs) if inputs is not None else 0)

    # 2. run a node once all its gradients have arrived; sum them first (Note [Gradient accumulation])
    pending, ready = {graph_root: [None]}, [graph_root]
    previous_mode = _grad_state.enabled
    _grad_state.enabled = create_graph      # Note [Grad mode during backward]
    try:
        while ready:
            node = ready.pop()
            grads = pending.pop(node, None)
            if grads is not None:
                # Note [Hooks that change hooks] in csrc/dyngrad/engine.h
                if node._tensor_pre_hooks or node._retain_grad_refs or \
                        (type(node) is AccumulateGrad and node.variable._hooks):
                    grads = _run_tensor_pre_hooks(node, grads, create_graph)
                if inputs is not None:
                    for nr, g in enumerate(grads):
                        for i in captures.get((node, nr), ()):
                            captured[i] = g
                if node._pre_hooks:
                    grads = _run_node_pre_hooks(node, grads)
            if type(node) is AccumulateGrad:
                if accumulate and grads is not None and (inputs is None or (node, 0) in captures):
                    node.apply(grads, create_graph)
                continue
            if needed is not None and node not in needed:
                continue
            if grads is None:
                input_grads = (None,) * len(node.next_edges)   # nothing arrived: only release the counts
            else:
                input_grads = node.apply(grads)
                if debug.anomaly_mode:
                    debug.check_gradients_finite(node, input_grads)   # Note [Anomaly mode]
                if node._post_hooks:
                    for hook in tuple(node._post_hooks):
                        replaced = hook(input_grads, grads)
                        if replaced is not None:
                            input_grads = tuple(replaced)
            if not retain_graph:
                node.release_saved()   # enables the "backward twice" error; Note [Releasing the graph]
            for i, (edge, g) in enumerate(zip(node.next_edges, input_grads)):
                if edge is None:
                    continue
                nxt, nr = edge
                if needed is not None and nxt not in needed:
                    continue
                if create_graph and g is not None and not g.requires_grad and isinstance(node, OpNode):
                    g = _zero_derivative(g, edge, node.input_meta[i], node.name())
                if g is not None:
                    slots = pending.get(nxt)
                    if slots is None:
                        slots = pending[nxt] = [None] * nxt.num_outputs
                    slots[nr] = g if slots[nr] is None else slots[nr] + g
                deps[nxt] -= 1
                if deps[nxt] == 0:
                    ready.append(nxt)
    finally:
        _grad_state.enabled = previous_mode

    if inputs is not None and accumulate:
        for t, g in zip(inputs, captured):            # non-leaf inputs of backward(inputs=...) get .grad too
            if t.grad_fn is not None and g is not None:
                t._grad = g if create_graph else (g.detach() if t._grad is None else (t._grad + g).detach())
    if inputs is not None and not accumulate:
        for i, g in enumerate(captured):
            if g is None and not allow_unused:
                raise RuntimeError(f"grad: input {i} (shape {errors.shape_str(inputs[i].shape)}) was not used "
                                   "to compute the outputs; pass allow_unused=True if this is intended.")
        return tuple(captured)
    return None


def _hook_name(hook):
    return f"'{getattr(hook, '__name__', type(hook).__name__)}'"


def checked_hook_result(hook, replaced, g):
    """Note [Hook results] in csrc/dyngrad/node.h: None, or a tensor of the shape and dtype of the gradient."""
    if replaced is None:
        return None
    if not isinstance(replaced, Tensor):
        raise TypeError(f"hook {_hook_name(hook)} must return a Tensor or None, got {type(replaced).__name__}.")
    if g is None:
        return replaced
    if replaced.shape != g.shape:
        raise RuntimeError(f"hook {_hook_name(hook)} changed the shape of the gradient from {errors.shape_str(g.shape)} "
                           f"to {errors.shape_str(replaced.shape)}; a hook must return a gradient of the same shape "
                           "and dtype, or None.")
    if replaced.dtype is not g.dtype:
        raise RuntimeError(f"hook {_hook_name(hook)} changed the dtype of the gradient from {g.dtype.name} to "
                           f"{replaced.dtype.name}; a hook must return a gradient of the same shape and dtype, or None.")
    return replaced


def _zero_derivative(g, edge, meta, of):
    """g as a tensor of the backward's graph whose derivative for the input `edge` leads to is zero (Note [Constant
    gradients under create_graph] in csrc/dyngrad/engine.cpp)."""
    linked = g.detach()
    linked.grad_fn = ZeroDerivative(edge, meta, of)
    linked.output_nr = 0
    forward_ad.copy_tangents(linked, g)   # the same value: a dual incoming gradient keeps its tangents (jvp of a vjp)
    return linked


def _run_tensor_pre_hooks(node, grads, create_graph):
    """The tensor hooks of the node's outputs (a leaf's, for its AccumulateGrad), then retain_grad. Each hook list is
    copied before it runs: see Note [Hooks that change hooks] in csrc/dyngrad/engine.h."""
    grads = list(grads)
    for nr in range(len(grads)):
        if grads[nr] is None:
            continue
        if isinstance(node, AccumulateGrad):
            hooks = node.variable._hooks
        else:
            hooks = node._tensor_pre_hooks.get(nr) if node._tensor_pre_hooks else None
        for hook in tuple(hooks or ()):
            replaced = checked_hook_result(hook, hook(grads[nr]), grads[nr])
            if replaced is not None:
                grads[nr] = replaced
    retain = node._retain_grad_refs    # (read after the hooks: one of them may have called retain_grad)
    for nr, ref in tuple(retain.items()) if retain else ():
        tensor = ref()
        g = grads[nr] if nr < len(grads) else None
        if tensor is None or g is None:
            continue
        if tensor._grad is None:
            tensor._grad = g if create_graph else g.detach().clone()
        else:
            tensor._grad = tensor._grad + g if create_graph else (tensor._grad + g).detach()
    return grads


def _run_node_pre_hooks(node, grads):
    """grad_fn.register_prehook(fn): fn(grads tuple) -> None or a tuple replacing them."""
    for hook in tuple(node._pre_hooks):
        replaced = hook(tuple(grads))
        if replaced is None:
            continue
        if not isinstance(replaced, (tuple, list)):
            raise TypeError(f"hook {_hook_name(hook)} must return a tuple of gradients or None, got "
                            f"{type(replaced).__name__}.")
        if len(replaced) != len(grads):
            raise RuntimeError(f"hook {_hook_name(hook)} returned {len(replaced)} gradient"
                               f"{'' if len(replaced) == 1 else 's'}, but the node has {len(grads)} output"
                               f"{'' if len(grads) == 1 else 's'}.")
        grads = [checked_hook_result(hook, r, g) for r, g in zip(replaced, grads)]
    return grads


def vjp(outputs, cotangents, inputs, first_node):
    """The vector-Jacobian product of a graph a formula has just recorded (engine.h's vjp): the gradients of `inputs`
    (None where unused or not requiring grad) given `cotangents` for `outputs`, running only the nodes between them
    made since next_sequence_nr() gave `first_node` (older ones cannot lead to the inputs: dead ends, their
    gradients dropped, as in engine.cpp). The nodes behind the inputs never run; with grad mode on
    it records, through the inputs' own histories. No hooks, no callbacks. Note [Derivatives of fused backwards] in
    csrc/dyngrad/derivatives.cpp."""
    captured = [None] * len(inputs)
    boundary = {}                              # node -> [(output_nr, input index)]
    for i, t in enumerate(inputs):
        edge = gradient_edge(t) if t is not None else None
        if edge is not None:
            boundary.setdefault(edge[0], []).append((edge[1], i))

    def fresh(node):
        return node.sequence_nr >= first_node

    # 1. count the gradients each node between the outputs and the inputs will receive
    deps, stack, roots = {}, [], []
    for out, g in zip(outputs, cotangents):
        edge = gradient_edge(out) if out is not None and g is not None else None
        if edge is None:
            continue
        if edge[0] not in boundary and not fresh(edge[0]):
            continue
        roots.append((edge, g))
        if edge[0] in boundary:
            continue                           # an output that is an input
        if edge[0] not in deps:
            deps[edge[0]] = 0
            stack.append(edge[0])
    while stack:
        node = stack.pop()
        for edge in node.next_edges:
            if edge is None or edge[0] in boundary or not fresh(edge[0]):
                continue
            if edge[0] not in deps:
                deps[edge[0]] = 0
                stack.append(edge[0])
            deps[edge[0]] += 1

    # 2. run each node once its gradients have arrived (in the caller's grad mode: it records when that records)
    pending = {}

    def deliver(node, nr, g):
        if node in boundary:
            found = False
            for output_nr, i in boundary[node]:
                if output_nr == nr:
                    captured[i] = g if captured[i] is None else captured[i] + g
                    found = True
            if not found:
                raise AssertionError("vjp: the graph reaches an input's node through an edge of no input")
            return
        slots = pending.setdefault(node, [None] * node.num_outputs)
        slots[nr] = g if slots[nr] is None else slots[nr] + g

    for (node, nr), g in roots:
        deliver(node, nr, g)
    ready = [node for node, count in deps.items() if count == 0]
    recording = _grad_state.enabled
    while ready:
        node = ready.pop()
        grads = pending.pop(node, None)
        results = node.apply(grads) if grads is not None else (None,) * len(node.next_edges)
        if debug.anomaly_mode:
            debug.check_gradients_finite(node, results)    # Note [Anomaly mode]
        if not recording:
            node.release_saved()           # recording: the result's graph may differentiate through these nodes
        for edge, g in zip(node.next_edges, results):
            if edge is None or (edge[0] not in boundary and not fresh(edge[0])):
                continue
            if g is not None:
                deliver(edge[0], edge[1], g)
            if edge[0] not in boundary:
                deps[edge[0]] -= 1
                if deps[edge[0]] == 0:
                    ready.append(edge[0])
    return captured
