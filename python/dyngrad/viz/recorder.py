"""How the graph changes between iterations: structural signatures, a recorder that counts distinct graphs, and
diffs between two signatures.

    rec = dg.viz.GraphRecorder(params=model)
    for x in inputs:
        loss = model(x)
        sig = rec.record(loss)        # the structure of this iteration's graph
    rec.distinct()                    # how many different graphs the model built
    print(dg.viz.diff(rec.signatures[0], rec.signatures[1]))

A signature lists the graph's nodes in creation order. Each node is identified by its key (op name, the line that
created it, and how many nodes of that name were created at that line before it), and described by its output
shape and dtype and the keys of its inputs. Two iterations have equal signatures exactly when they ran the same ops
from the same lines on the same shapes, wired the same way. diff() matches nodes by key.
"""
import collections
import os

from ..autograd.graph import walk
from .dot import COLORS, Drawing, dtype_name, param_names, shape_text

NodeSig = collections.namedtuple("NodeSig", "key shape dtype inputs")
NodeSig.__doc__ = """One node of a signature. key = (name, site, occurrence), site = (file, line) or None (for a
leaf: its parameter name or None); shape: tuple or None; dtype: name; inputs: ((key, output_nr) or None, ...)."""


class GraphSignature:
    """The structure of one graph (see the module docstring); hashable, comparable, drawable."""

    __slots__ = ("nodes", "_hash")

    def __init__(self, nodes):
        self.nodes = tuple(nodes)
        self._hash = hash(self.nodes)

    def __eq__(self, other):
        return isinstance(other, GraphSignature) and self._hash == other._hash and self.nodes == other.nodes

    def __hash__(self):
        return self._hash

    def __len__(self):
        return len(self.nodes)

    def __iter__(self):
        return iter(self.nodes)

    def counts(self):
        """op name -> number of nodes."""
        return collections.Counter(n.key[0] for n in self.nodes)

    def __repr__(self):
        top = ", ".join(f"{name} x{k}" for name, k in self.counts().most_common(4))
        return f"<GraphSignature of {len(self.nodes)} nodes: {top}{', ...' if len(self.counts()) > 4 else ''}>"

    def to_dot(self):
        d = Drawing("signature")
        ids = {n.key: f"n{i}" for i, n in enumerate(self.nodes)}
        for n in self.nodes:
            d.node(ids[n.key], "leaf" if n.key[0] == LEAF else "op", node_label(n))
        for n in self.nodes:
            for inp in n.inputs:
                if inp is not None and inp[0] in ids:
                    d.edge(ids[inp[0]], ids[n.key])
        return d.source()


LEAF = "AccumulateGrad"


def signature(*roots, params=None):
    """The GraphSignature of the graph behind `roots` (tensors or grad_fn nodes)."""
    g = walk(*roots)
    meta = g.output_meta()
    names = param_names(params)
    producers = [[] for _ in g.nodes]
    for consumer, input_nr, producer, output_nr in g.edges:
        row = producers[consumer]
        if len(row) <= input_nr:
            row.extend([None] * (input_nr + 1 - len(row)))
        row[input_nr] = (producer, output_nr)

    # op nodes in creation order; leaves in the order ops first use them (their sinks may outlive one graph)
    ops = sorted((i for i in range(len(g.nodes)) if not g.is_leaf(i)), key=lambda i: g.nodes[i].sequence_nr)
    order, placed = [], set()
    for i in ops:
        for inp in producers[i]:
            if inp is not None and g.is_leaf(inp[0]) and inp[0] not in placed:
                placed.add(inp[0])
                order.append(inp[0])
        order.append(i)
    order.extend(i for i in range(len(g.nodes)) if i not in placed and g.is_leaf(i))

    keys, seen = {}, collections.Counter()
    for i in order:
        node = g.nodes[i]
        if g.is_leaf(i):
            where = names.get(id(node.variable))
            shape, dtype = tuple(node.variable.shape), dtype_name(node.variable.dtype)
        else:
            site = node.call_site
            where = (site[0], site[1]) if site is not None else None
            shape = meta[i][0] if meta[i] is not None else None
            dtype = dtype_name(meta[i][1]) if meta[i] is not None else None
        base = (node.name(), where)
        keys[i] = ((node.name(), where, seen[base]), shape, dtype)
        seen[base] += 1
    nodes = []
    for i in order:
        key, shape, dtype = keys[i]
        inputs = tuple((keys[p[0]][0], p[1]) if p is not None else None for p in producers[i])
        nodes.append(NodeSig(key, shape, dtype, inputs))
    return GraphSignature(nodes)


def node_label(n):
    name, where, occurrence = n.key
    if name == LEAF:
        first = where if where is not None else "leaf"
    else:
        first = name
    lines = [first]
    if n.shape is not None:
        lines.append(f"{shape_text(n.shape)} {n.dtype}")
    if name != LEAF and where is not None:
        lines.append(f"{os.path.basename(where[0])}:{where[1]}")
    return "\n".join(lines)


def describe(n):
    """'MulBackward (3,) float64 at loop_graph.py:21' (one line)."""
    name, where, _ = n.key
    shape = f" {shape_text(n.shape)} {n.dtype}" if n.shape is not None else ""
    if name == LEAF:
        return f"leaf{' ' + where if where else ''}{shape}"
    at = f" at {os.path.basename(where[0])}:{where[1]}" if where is not None else ""
    return f"{name}{shape}{at}"


class GraphRecorder:
    """Records the signature of each iteration's graph; distinct() counts the different graphs seen."""

    def __init__(self, params=None):
        self.params = params
        self.signatures = []
        self._first_index = {}     # signature -> index of its first occurrence

    def record(self, *outputs):
        sig = signature(*outputs, params=self.params)
        self._first_index.setdefault(sig, len(self.signatures))
        self.signatures.append(sig)
        return sig

    def distinct(self):
        """The number of different graphs recorded so far."""
        return len(self._first_index)

    def distinct_signatures(self):
        """The different signatures, in the order first seen."""
        return sorted(self._first_index, key=self._first_index.get)

    def __len__(self):
        return len(self.signatures)


class GraphDiff:
    """What changed from signature `a` to signature `b`: added, removed and changed nodes (NodeSig lists;
    changed holds (old, new) pairs). str() is a readable report; to_dot() draws the union, coloured."""

    def __init__(self, a, b):
        self.a, self.b = a, b
        old = {n.key: n for n in a.nodes}
        new = {n.key: n for n in b.nodes}
        self.added = [n for n in b.nodes if n.key not in old]
        self.removed = [n for n in a.nodes if n.key not in new]
        self.changed = [(old[n.key], n) for n in b.nodes if n.key in old and old[n.key] != n]

    def __bool__(self):
        return bool(self.added or self.removed or self.changed)

    def __str__(self):
        lines = [f"graph diff: {len(self.added)} nodes added, {len(self.removed)} removed, {len(self.changed)} "
                 f"changed ({len(self.a)} -> {len(self.b)} nodes)"]
        for sign, group in (("+", self.added), ("-", self.removed)):
            for text, count in collections.Counter(describe(n) for n in group).items():
                lines.append(f"  {sign} {count} x {text}" if count > 1 else f"  {sign} {text}")
        for old, new in self.changed:
            what = []
            if (old.shape, old.dtype) != (new.shape, new.dtype):
                what.append(f"output {shape_text(old.shape) if old.shape is not None else '?'} {old.dtype} -> "
                            f"{shape_text(new.shape) if new.shape is not None else '?'} {new.dtype}")
            if old.inputs != new.inputs:
                what.append("inputs rewired")
            lines.append(f"  ~ {new.key[0]} #{new.key[2]}{_at(new)}: {', '.join(what)}")
        if not self:
            lines[0] = f"graph diff: the two graphs are identical ({len(self.a)} nodes)"
        return "\n".join(_cap(lines, 60))

    def to_dot(self):
        """The union of both graphs: added nodes green, removed red, changed gold, the rest grey."""
        d = Drawing("diff")
        status = {n.key: "added" for n in self.added}
        status.update({n.key: "removed" for n in self.removed})
        status.update({new.key: "changed" for _, new in self.changed})
        nodes = list(self.b.nodes) + self.removed
        ids = {n.key: f"n{i}" for i, n in enumerate(nodes)}
        for n in nodes:
            kind = status.get(n.key, "leaf" if n.key[0] == LEAF else "op")
            d.node(ids[n.key], kind, node_label(n), fillcolor=COLORS[kind])
        for n in nodes:
            for inp in n.inputs:
                if inp is not None and inp[0] in ids:
                    style = {"color": "red", "style": "dashed"} if n.key in status and status[n.key] == "removed" \
                        else {}
                    d.edge(ids[inp[0]], ids[n.key], **style)
        return d.source()


def _at(n):
    where = n.key[1]
    return f" at {os.path.basename(where[0])}:{where[1]}" if where is not None and n.key[0] != LEAF else ""


def _cap(lines, limit):
    if len(lines) <= limit:
        return lines
    return lines[:limit] + [f"  ... and {len(lines) - limit} more lines"]


def diff(a, b):
    """The GraphDiff from signature `a` to signature `b` (tensors are accepted too: their signatures are taken)."""
    if not isinstance(a, GraphSignature):
        a = signature(a)
    if not isinstance(b, GraphSignature):
        b = signature(b)
    return GraphDiff(a, b)
