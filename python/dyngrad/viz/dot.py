"""Graphviz DOT for a recorded graph. to_dot() needs nothing installed; render() writes SVG/PNG with Graphviz.

    src = dg.viz.to_dot(loss, params=model)       # DOT source: one box per op, leaves named after parameters
    dg.viz.render(loss, path="graph.svg", params=model)

Data flows top to bottom: leaves (blue) -> ops (grey, with output shape, dtype and the line that created them)
-> outputs (green). Saved tensors (orange) are shown with show_saved=True. collapse_chains=k replaces every run
of more than k ops that each have at most one op input and one consumer by a single summary node, so that a
graph of 100,000 nodes can still be drawn, and a loop of more than k passes by its first and last pass around
one summary node that counts the rest.

Note [Loop passes]
A graph recorded by a Python loop repeats the loop's body once per pass. The body is found without help from the
user: a kind of op is its name and the line that created it (call_site), and a loop of n passes makes most of its
body's kinds n times (the most common repeat count). Of those, the kind created last in a pass is the anchor: pass
i is every repeated op created (sequence_nr) after the anchor's (i-1)-th node and up to its i-th. Creation order,
not counts, decides, so a first pass that records fewer ops (x = x * x before anything requires grad) or a branch
taken in some passes only still lands in the right pass; repeated ops outside the loop's span (another loop
before it) are left ungrouped. Each pass is drawn as a Graphviz cluster "pass i" (passes=True, the default). A
loop of one op a pass (y = y * a) is a chain, left to collapse_chains, which summarises it better.
"""
import bisect
import collections
import os
import shutil
import subprocess

from ..autograd.graph import walk

COLORS = {"op": "lightgrey", "leaf": "lightblue", "output": "darkolivegreen1", "saved": "orange",
          "summary": "lightyellow", "guard": "gold", "added": "palegreen", "removed": "lightpink", "changed": "gold"}


class Drawing:
    """What a DOT file shows: nodes (id -> kind, label) and edges (src, dst, style attributes), in order."""

    def __init__(self, name="dyngrad"):
        self.name = name
        self.nodes = {}            # id -> [kind, label, extra attributes]
        self.edges = []            # (src, dst, attributes)
        self.passes = {}           # id -> loop pass (1-based, Note [Loop passes]); drawn as clusters

    def node(self, node_id, kind, label, **attrs):
        self.nodes[node_id] = [kind, label, attrs]

    def edge(self, src, dst, **attrs):
        self.edges.append((src, dst, attrs))

    def source(self):
        lines = [f"digraph {self.name} {{",
                 '  graph [rankdir=TB, fontname="Helvetica"];',
                 '  node [shape=box, style="filled,rounded", fontname="Helvetica", fontsize=10];',
                 '  edge [arrowsize=0.6];']
        styled = {}                # (kind, label, attributes) -> their text: long graphs repeat a few labels
        for node_id, (kind, label, attrs) in self.nodes.items():
            key = (kind, label, tuple(attrs.items()))
            text = styled.get(key)
            if text is None:
                full = dict({"label": label, "fillcolor": COLORS.get(kind, "white")}, **attrs)
                if kind == "saved":
                    full.setdefault("shape", "note")
                text = styled[key] = _attrs(full)
            lines.append(f"  {node_id} [{text}];")
        members = collections.defaultdict(list)
        for node_id, number in self.passes.items():
            if node_id in self.nodes:
                members[number].append(node_id)
        for number in sorted(members):
            lines.append(f'  subgraph cluster_pass{number} {{ label="pass {number}"; style="rounded,dashed"; '
                         f'color=grey50; fontname="Helvetica"; fontsize=9; {"; ".join(members[number])}; }}')
        for src, dst, attrs in self.edges:
            lines.append(f"  {src} -> {dst} [{_attrs(attrs)}];" if attrs else f"  {src} -> {dst};")
        lines.append("}")
        return "\n".join(lines) + "\n"


def _attrs(attrs):
    return ", ".join(f"{k}={_quote(v)}" for k, v in attrs.items())


def _quote(value):
    text = str(value).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return f'"{text}"'


def dtype_name(dtype):
    return str(dtype).replace("dyngrad.", "")


def shape_text(shape):
    return str(tuple(int(s) for s in shape))


def site_text(site):
    """'model.py:42' from a node's call_site (file, line, function), or ''."""
    if site is None:
        return ""
    return f"{os.path.basename(site[0])}:{site[1]}"


def param_names(params):
    """id(tensor) -> name from a Module (named_parameters()), a dict name -> tensor, or (name, tensor) pairs."""
    if params is None:
        return {}
    if hasattr(params, "named_parameters"):
        params = params.named_parameters()
    elif hasattr(params, "items"):
        params = params.items()
    names = {}
    for name, tensor in params:
        names.setdefault(id(tensor), name)
    return names


def loop_passes(graph):
    """{node index: pass number (1-based)} for the op nodes of a walked graph that a loop repeated, or {} when
    no loop is found (Note [Loop passes])."""
    by_kind = collections.defaultdict(list)
    for i, node in enumerate(graph.nodes):
        site = None if graph.is_leaf(i) else node.call_site
        if site is not None:
            by_kind[(node.name(), tuple(site))].append((node.sequence_nr, i))
    repeated = [sorted(nodes) for nodes in by_kind.values() if len(nodes) > 1]
    if not repeated:
        return {}
    counts = collections.Counter(len(nodes) for nodes in repeated)
    passes = max(counts, key=lambda n: (counts[n], -n))      # the most common repeat count: once a pass
    # the anchor: of the kinds made once a pass, the one made last in a pass; pass i ends with its i-th node
    anchor = max((nodes for nodes in repeated if len(nodes) == passes), key=lambda nodes: nodes[0][0])
    ends = [seq for seq, _ in anchor]
    start = ends[0] - (ends[1] - ends[0])                   # pass 1 is taken as long as pass 2
    members = [nodes for nodes in repeated if start < nodes[0][0] and nodes[-1][0] <= ends[-1]]
    if sum(len(nodes) for nodes in members) < 2 * passes:  # one op a pass: a chain (collapse_chains)
        return {}
    found = {}
    for nodes in members:
        for seq, i in nodes:
            found[i] = bisect.bisect_left(ends, seq) + 1
    return found


def graph_drawing(*roots, params=None, show_saved=False, passes=True):
    """The Drawing of the live graph behind `roots` (tensors or grad_fn nodes)."""
    g = walk(*roots)
    names = param_names(params)
    meta = g.output_meta()
    d = Drawing()
    labels = {}                    # (name, output meta, call site) -> label
    for i, node in enumerate(g.nodes):
        if g.is_leaf(i):
            variable = node.variable
            label = names.get(id(variable), "leaf")
            shape_dtype = f"{shape_text(variable.shape)} {dtype_name(variable.dtype)}"
            d.node(f"n{i}", "leaf", f"{label}\n{shape_dtype}")
            continue
        key = (node.name(), meta[i], node.call_site)
        label = labels.get(key)
        if label is None:
            shape_dtype = f"{shape_text(meta[i][0])} {dtype_name(meta[i][1])}" if meta[i] is not None else ""
            label = labels[key] = "\n".join(line for line in (key[0], shape_dtype, site_text(key[2])) if line)
        d.node(f"n{i}", "op", label)
        if show_saved:
            for k, (shape, dtype, nbytes) in enumerate(node.saved_tensors_info()):
                d.node(f"s{i}_{k}", "saved", f"saved\n{shape_text(shape)} {dtype_name(dtype)}\n{nbytes} bytes")
                d.edge(f"s{i}_{k}", f"n{i}", style="dashed", arrowhead="none")
    for consumer, input_nr, producer, output_nr in g.edges:
        d.edge(f"n{producer}", f"n{consumer}", **({"label": str(output_nr)} if output_nr else {}))
    for k, (tensor, i, _) in enumerate(g.roots):
        if tensor is not None:
            d.node(f"out{k}", "output", f"output\n{shape_text(tensor.shape)} {dtype_name(tensor.dtype)}")
            d.edge(f"n{i}", f"out{k}")
    if passes:
        d.passes = {f"n{i}": number for i, number in loop_passes(g).items()}
    return d


def collapse_loop_passes(d, max_passes):
    """A loop of more than `max_passes` passes keeps its first and last pass; the passes between become one
    summary node counting their ops (edges into and out of them go to it; their saved tensors are dropped)."""
    count = max(d.passes.values(), default=0)
    if count <= max(max_passes, 2):
        return d
    hidden = {node_id for node_id, number in d.passes.items() if 1 < number < count}
    kinds = collections.Counter(d.nodes[m][1].split("\n", 1)[0] for m in hidden)
    top = ", ".join(f"{name} x{n}" for name, n in kinds.most_common(3))
    more = f", {len(kinds) - 3} more kinds" if len(kinds) > 3 else ""
    out = Drawing(d.name)
    saved_of = {src: dst for src, dst, _ in d.edges if d.nodes[src][0] == "saved"}
    for node_id, entry in d.nodes.items():
        if node_id not in hidden and saved_of.get(node_id) not in hidden:
            out.nodes[node_id] = entry
    out.node("passes", "summary", f"passes 2-{count - 1} collapsed ({count - 2} passes, {len(hidden)} nodes)\n"
                                  f"{top}{more}", shape="box3d")
    out.passes = {node_id: number for node_id, number in d.passes.items() if node_id not in hidden}
    seen = set()
    for src, dst, attrs in d.edges:
        src2 = "passes" if src in hidden else src
        dst2 = "passes" if dst in hidden else dst
        if src2 == dst2 or src2 not in out.nodes or dst2 not in out.nodes or (src2, dst2) in seen:
            continue
        seen.add((src2, dst2))
        out.edges.append((src2, dst2, attrs))
    return out


def collapse_long_chains(d, min_length):
    """Replace every run of more than `min_length` op nodes, each with at most one op input and one consumer,
    by one summary node; leaves feeding the run feed the summary node, saved tensors of the run are dropped."""
    kind = {node_id: entry[0] for node_id, entry in d.nodes.items()}
    op_inputs = collections.Counter()              # leaves and saved tensors do not break a chain
    consumer_count = collections.Counter()
    consumer_of = {}
    pairs = set()
    for src, dst, _ in d.edges:
        if (src, dst) in pairs:
            continue
        pairs.add((src, dst))
        if kind[src] == "op":
            op_inputs[dst] += 1
        consumer_count[src] += 1
        consumer_of[src] = dst
    # ops of a loop pass are grouped already (and kept whole by collapse_loop_passes): not part of a chain
    links = {node_id for node_id, k in kind.items()
             if k == "op" and op_inputs[node_id] <= 1 and consumer_count[node_id] == 1 and node_id not in d.passes}
    # a link fed by a link is not the first of its run (a link's one consumer has that link as its op input)
    followers = {consumer_of[node_id] for node_id in links}

    member_of = {}                                 # node id -> summary id
    summaries = []
    for node_id in kind:
        if node_id not in links or node_id in followers:
            continue
        run, cur = [], node_id
        while cur in links:
            run.append(cur)
            cur = consumer_of[cur]
        if len(run) <= min_length:
            continue
        summary_id = f"c{len(summaries)}"
        kinds = collections.Counter(d.nodes[m][1].split("\n", 1)[0] for m in run)
        top = ", ".join(f"{name} x{count}" for name, count in kinds.most_common(3))
        more = f", {len(kinds) - 3} more kinds" if len(kinds) > 3 else ""
        summaries.append((summary_id, f"{len(run)} nodes collapsed\n{top}{more}"))
        for m in run:
            member_of[m] = summary_id
    if not summaries:
        return d
    out = Drawing(d.name)
    for node_id, (k, label, attrs) in d.nodes.items():
        if node_id in member_of or (k == "saved" and consumer_of.get(node_id) in member_of):
            continue
        out.nodes[node_id] = [k, label, attrs]
    for summary_id, label in summaries:
        out.node(summary_id, "summary", label, shape="box3d")
    out.passes = {node_id: number for node_id, number in d.passes.items() if node_id in out.nodes}
    seen = set()
    for src, dst, attrs in d.edges:
        src2, dst2 = member_of.get(src, src), member_of.get(dst, dst)
        if src2 == dst2 or src2 not in out.nodes or dst2 not in out.nodes or (src2, dst2) in seen:
            continue
        seen.add((src2, dst2))
        out.edges.append((src2, dst2, attrs))
    return out


def to_dot(*roots, params=None, show_saved=False, collapse_chains=None, passes=True):
    """DOT source of the graph behind `roots` (tensors or grad_fn nodes; several roots share one drawing).

    params:          a Module, a dict name -> tensor, or (name, tensor) pairs: leaves are labelled with names
    show_saved:      also draw each tensor a node saved for backward (shape, dtype, bytes)
    collapse_chains: an int k: runs of more than k single-input ops become one summary node, and a loop of more
                     than k passes keeps its first and last pass around one summary node
    passes:          draw each pass of a loop as a cluster "pass i" (Note [Loop passes]); False: no grouping
    """
    d = graph_drawing(*roots, params=params, show_saved=show_saved, passes=passes)
    if collapse_chains is not None:
        d = collapse_long_chains(collapse_loop_passes(d, int(collapse_chains)), int(collapse_chains))
    return d.source()


INSTALL_HINT = ("render() needs Graphviz: the `dot` program (apt-get install graphviz, brew install graphviz or "
                "conda install graphviz) and preferably the Python package (pip install graphviz, or pip install "
                "'dyngrad[viz]'). to_dot() needs neither: it returns the DOT source as a string.")


def render(*roots, path="graph.svg", format=None, params=None, show_saved=False, collapse_chains=None,
           max_nodes=5000, passes=True):
    """Draw the graph behind `roots` (or a DOT source string, e.g. from diff(...).to_dot()) into `path` with
    Graphviz and return the path. The format comes from the extension (svg, png, pdf) unless given.

    Graphs of more than `max_nodes` nodes are refused (dot would take very long): pass collapse_chains=k, or a
    larger max_nodes.
    """
    if len(roots) == 1 and isinstance(roots[0], str):
        source = roots[0]
    else:
        source = to_dot(*roots, params=params, show_saved=show_saved, collapse_chains=collapse_chains, passes=passes)
    count = sum(1 for line in source.splitlines() if _is_node_line(line))
    if count > max_nodes:
        raise ValueError(f"render: the graph has {count} nodes, more than max_nodes={max_nodes}; Graphviz would "
                         "take very long to lay it out. Pass collapse_chains=k to summarise long chains, or a "
                         "larger max_nodes.")
    fmt = format or os.path.splitext(path)[1].lstrip(".").lower() or "svg"
    try:
        import graphviz
    except ImportError:
        graphviz = None
    if graphviz is not None:
        try:
            graphviz.Source(source).render(outfile=path, format=fmt, cleanup=True)
            return path
        except graphviz.ExecutableNotFound:
            raise RuntimeError(f"render: Graphviz's `dot` program was not found. {INSTALL_HINT}") from None
    dot = shutil.which("dot")
    if dot is None:
        raise RuntimeError(f"render: neither the graphviz Python package nor the `dot` program is installed. "
                           f"{INSTALL_HINT}")
    subprocess.run([dot, f"-T{fmt}", "-o", path], input=source.encode(), check=True, capture_output=True)
    return path


def _is_node_line(line):
    line = line.strip()
    return bool(line) and "->" not in line and line.endswith("];") and not line.startswith(("graph ", "node ",
                                                                                            "edge ", "subgraph "))
