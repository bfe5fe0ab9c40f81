"""Looking at a recorded graph: an iterative walk over the grad_fn nodes behind some tensors, graph_stats(), and
the opt-in warning for graphs that pile up across iterations. Shared by both engines: nodes are read only through
name(), next_functions, input_metadata, saved_tensors_info(), call_site and .variable.

    stats = dg.autograd.graph_stats(loss)   # {'nodes': 7, 'saved_bytes': 96, 'depth': 5, 'leaves': 2}
"""
import collections
import threading
import warnings

from .. import _C
from . import _engine_debug as _engine
from .._user_frame import warn

LEAF = "AccumulateGrad"
# The class of every grad_fn, as torch.autograd.graph.Node (isinstance(y.grad_fn, Node)); the C++ engine names it
# here in its messages (Note [Public type names] in csrc/bindings/common.h).
Node = _C.Node


class Graph:
    """The nodes behind some roots, each once, in depth-first order from the roots (an explicit stack, so a
    graph of a million nodes is fine).

    nodes:   the node objects (kept here, so each stays one Python object while the Graph lives)
    index:   node -> its position in `nodes`
    edges:   (consumer, input_nr, producer, output_nr) as positions: the gradient of the consumer's input
             `input_nr` flows to the producer's output `output_nr`; in the forward pass data flows producer ->
             consumer
    roots:   (tensor or None, position, output_nr) of each root
    """

    def __init__(self):
        self.nodes = []
        self.index = {}
        self.edges = []
        self.roots = []

    def __len__(self):
        return len(self.nodes)

    def is_leaf(self, i):
        return self.nodes[i].name() == LEAF

    def output_meta(self):
        """(shape, dtype) of output 0 (else the first known output) of each node, read off its consumers'
        input metadata, or off the root tensors; None where unknown."""
        meta = [None] * len(self.nodes)
        for tensor, i, output_nr in self.roots:
            if tensor is not None and meta[i] is None:
                meta[i] = (tuple(tensor.shape), tensor.dtype)
        inputs = [None] * len(self.nodes)
        for consumer, input_nr, producer, output_nr in self.edges:
            if meta[producer] is not None and output_nr != 0:
                continue
            if inputs[consumer] is None:
                inputs[consumer] = self.nodes[consumer].input_metadata
            shape, dtype = inputs[consumer][input_nr]
            meta[producer] = (tuple(shape), dtype)
        return meta


def _root_items(roots):
    """Flatten tensors, nodes and lists of them into (tensor or None, node, output_nr)."""
    out, stack = [], list(reversed(roots))
    while stack:
        r = stack.pop()
        if r is None:
            continue
        if isinstance(r, (list, tuple)):
            stack.extend(reversed(r))
        elif hasattr(r, "next_functions"):
            out.append((None, r, 0))
        elif hasattr(r, "grad_fn"):
            if r.grad_fn is not None:
                out.append((r, r.grad_fn, getattr(r, "output_nr", 0)))
        else:
            raise TypeError(f"expected tensors or graph nodes (grad_fn), got {type(r).__name__}.")
    return out


def walk(*roots):
    """The Graph behind `roots` (tensors, grad_fn nodes, or lists of them). Tensors without a grad_fn add
    nothing."""
    g = Graph()
    stack = []

    def visit(node):
        i = g.index.get(node)
        if i is None:
            i = g.index[node] = len(g.nodes)
            g.nodes.append(node)
            stack.append(i)
        return i

    for tensor, node, output_nr in _root_items(roots):
        g.roots.append((tensor, visit(node), output_nr))
    while stack:
        i = stack.pop()
        for input_nr, (nxt, output_nr) in enumerate(g.nodes[i].next_functions):
            if nxt is not None:
                g.edges.append((i, input_nr, visit(nxt), output_nr))
    return g


def topological_order(g):
    """Positions of g's nodes, consumers before producers (roots first), by Kahn's algorithm."""
    consumers = [0] * len(g.nodes)
    producers = [[] for _ in g.nodes]
    for consumer, _, producer, _ in g.edges:
        consumers[producer] += 1
        producers[consumer].append(producer)
    ready = [i for i in range(len(g.nodes)) if consumers[i] == 0]
    order = []
    while ready:
        i = ready.pop()
        order.append(i)
        for p in producers[i]:
            consumers[p] -= 1
            if consumers[p] == 0:
                ready.append(p)
    return order


def graph_stats(*roots):
    """Size of the graph behind `roots`: a dict with
    nodes        the number of distinct nodes, AccumulateGrad sinks of leaves included
    saved_bytes  the bytes of the tensors the nodes hold for backward (a tensor saved by two nodes counts twice)
    depth        the number of nodes on the longest path from a root to a leaf
    leaves       the number of leaves that will receive a gradient (AccumulateGrad sinks)
    """
    g = walk(*roots)
    depth = [1] * len(g.nodes)
    producers = [[] for _ in g.nodes]
    for consumer, _, producer, _ in g.edges:
        producers[consumer].append(producer)
    for i in reversed(topological_order(g)):    # producers first
        if producers[i]:
            depth[i] = 1 + max(depth[p] for p in producers[i])
    return {
        "nodes": len(g.nodes),
        "saved_bytes": sum(b for node in g.nodes for _, _, b in node.saved_tensors_info()),
        "depth": max(depth, default=0),
        "leaves": sum(1 for node in g.nodes if node.name() == LEAF),
    }


# ----- graphs that pile up across iterations ----------------------------------------------------------------
class GraphGrowthWarning(UserWarning):
    """The graphs kept alive grow from one backward() to the next (e.g. `total_loss += loss`)."""


class _GrowthWatch:
    """Called at the start of every backward(): the live tracked nodes are counted; when the count rose at each
    of the last `steps` calls, the nodes that link a newer iteration's graph to an older one are what keep the
    old graphs alive, and the line that created most of them is reported."""

    def __init__(self, steps):
        self.steps = steps
        self.counts = collections.deque(maxlen=steps + 1)
        self.warned = set()

    def __call__(self):
        self.counts.append(_engine.tracked_node_count())
        counts = list(self.counts)
        if len(counts) <= self.steps or any(b <= a for a, b in zip(counts, counts[1:])):
            return
        sites = collections.Counter()
        names = {}
        for node in _engine.bridging_nodes():
            site = node.call_site
            key = (site[0], site[1]) if site is not None else None
            sites[key] += 1
            names.setdefault(key, collections.Counter())[node.name()] += 1
        if not sites:
            return                               # growth without old graphs being held: e.g. longer inputs
        key, count = sites.most_common(1)[0]
        if count < 2:
            return
        self.counts.clear()                      # look again only after another `steps` steps of growth
        if key in self.warned:
            return
        self.warned.add(key)
        name = names[key].most_common(1)[0][0]
        where = f"{key[0]}:{key[1]}" if key is not None else "an unrecorded line (call-site recording is off)"
        message = (f"the graph nodes kept alive grew at each of the last {self.steps} backward() calls "
                   f"({counts[0]} -> {counts[-1]}): graphs of earlier iterations are not being freed. Likely line: "
                   f"{where}, which created {count} live {name} nodes that link a new iteration's graph to an "
                   f"earlier one's, as `total_loss += loss` does. Accumulate `loss.item()` (or `loss.detach()`) "
                   f"instead, and detach state carried between iterations (`h = h.detach()`).")
        if key is None:
            warn(message, GraphGrowthWarning)
        else:
            warnings.warn_explicit(message, GraphGrowthWarning, key[0], key[1])


def set_graph_growth_warning(enabled=True, steps=5):
    """Opt in (or out) of the warning for graphs that pile up across iterations.

    While on, every node created is counted, and at each backward() call the number of live nodes is compared
    with the previous calls'. When it has grown at each of the last `steps` calls and some live nodes link the
    current iteration's graph to an earlier one, a GraphGrowthWarning names the line that created them (the
    classic `total_loss += loss`). Costs a hash-table insert per op while on.
    """
    if enabled:
        if int(steps) < 1:
            raise ValueError(f"set_graph_growth_warning: steps must be at least 1, got {steps}.")
        _engine.set_track_nodes(True)
        _engine.set_backward_observer(_GrowthWatch(int(steps)))
    else:
        _engine.set_backward_observer(None)
        _engine.set_track_nodes(False)


# ----- saved tensor hooks -------------------------------------------------------------------------------------
# Note [Saved tensor hooks] (csrc/dyngrad/node.h). The stack of active contexts is per thread, as torch's; only
# the innermost pair applies. The engine's core is told the top of the stack; custom Functions read it here.
_hooks_state = threading.local()


def _hook_stack():
    stack = getattr(_hooks_state, "stack", None)
    if stack is None:
        stack = _hooks_state.stack = []
    return stack


def _current_hooks():
    """The innermost active (pack, unpack), or None."""
    stack = getattr(_hooks_state, "stack", None)
    return stack[-1] if stack else None


class saved_tensors_hooks:
    """Context manager: every tensor saved for backward while it is active goes through `pack_hook(tensor)`,
    and the node keeps only what that returns; in backward, `unpack_hook(packed)` must give the tensor back (same
    shape and dtype and values, or the gradients will be wrong).

    Applies to the tensors saved by every node created inside the block: built-in ops (both engines' cores call
    the hooks when a node saves, Note [Saved tensor hooks]) and custom Functions (`ctx.save_for_backward`, packed
    when the node is recorded). Nested contexts: the innermost one wins. A packed tensor is not checked for
    in-place modification (the hooks may have copied it), and the hooks are not called for nodes created on
    other threads. An op's own output is handed to `pack_hook` as a history-free alias (so the hook cannot form a
    reference cycle through it); it gets its grad_fn back when unpacked. With grad mode on (create_graph), a
    built-in node's unpacked tensor gets the saved tensor's history back, as in torch, so double backward works;
    a custom Function's `ctx.saved_tensors` are returned as the unpack hook gives them (no history).

        with dg.autograd.graph.saved_tensors_hooks(lambda t: t.numpy().copy(), lambda a: dg.from_numpy(a)):
            y = (x * x).sum()
    """

    def __init__(self, pack_hook, unpack_hook):
        if not callable(pack_hook) or not callable(unpack_hook):
            raise TypeError("saved_tensors_hooks: pack_hook and unpack_hook must be callables, got "
                            f"{type(pack_hook).__name__} and {type(unpack_hook).__name__}.")
        self.pack_hook = pack_hook
        self.unpack_hook = unpack_hook

    def __enter__(self):
        disabled = getattr(_hooks_state, "disabled", None)
        if disabled:
            raise RuntimeError(disabled)
        stack = _hook_stack()
        stack.append((self.pack_hook, self.unpack_hook))
        _C._set_saved_tensors_hooks(self.pack_hook, self.unpack_hook)
        return self

    def __exit__(self, *exc):
        stack = _hook_stack()
        stack.pop()
        top = stack[-1] if stack else (None, None)
        _C._set_saved_tensors_hooks(*top)
        return False


class save_on_cpu(saved_tensors_hooks):
    """torch's context manager that moves saved tensors to (pinned) CPU memory and back in backward. dyngrad's
    tensors are always on the CPU, so this packs each saved tensor as a copy of its data (values unchanged), which
    frees nothing on a CPU-only engine but keeps programs written for torch running. pin_memory is accepted."""

    def __init__(self, pin_memory=False, device_type="cuda"):
        if not isinstance(pin_memory, bool):
            raise TypeError(f"save_on_cpu: pin_memory must be a bool, got {type(pin_memory).__name__}.")
        self.pin_memory = pin_memory
        self.device_type = device_type

        def pack(t):
            return t.detach().clone()

        def unpack(t):
            return t

        super().__init__(pack, unpack)


class disable_saved_tensors_hooks:
    """Context manager: inside it, entering saved_tensors_hooks raises RuntimeError with `error_message`."""

    def __init__(self, error_message):
        self.error_message = str(error_message)

    def __enter__(self):
        self._previous = getattr(_hooks_state, "disabled", None)
        _hooks_state.disabled = self.error_message
        return self

    def __exit__(self, *exc):
        _hooks_state.disabled = self._previous
        return False
