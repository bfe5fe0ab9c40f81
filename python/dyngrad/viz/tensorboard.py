"""TensorBoard export: the graph that this input actually built, written into a tensorboardX SummaryWriter.

    from tensorboardX import SummaryWriter
    writer = SummaryWriter("runs/exp1")
    for step, (x, y) in enumerate(data):
        loss = model(x, y)
        if step % 100 == 0:
            dg.viz.add_graph(writer, loss, params=model, step=step)   # the graph of this step's input
        writer.add_scalar("loss", loss.item(), step)

TensorBoard's Graphs tab shows the latest graph of the run, and each call's graph under its own tag ("graph at
step 100", ...) in the Tag menu, so the different graphs of a dynamic model can be compared. Nodes carry the op
name, the output shape and dtype, and the line that created them; leaves are named after the parameters.
Nodes are grouped in boxes (TensorBoard's name scopes, collapsed until opened): by module, as PyTorch's add_graph
groups them, when the forward pass ran under `module_scopes(model)` (SummaryWriter.add_graph(model, input) of
dyngrad.utils.tensorboard does this), else by the Python function that created them.

Note [Module scopes]
A node's module is the innermost module call that was running when the node was created. module_scopes(model)
puts a forward pre-hook and a hook on every submodule for the length of the block; each records the creation
counter (a node's sequence_nr, read by creating one throwaway node) when the call starts and ends, so the calls
are ranges of sequence numbers, and a node belongs to the smallest range holding its number. Scopes are named as
PyTorch's: the root module's class, then Class[attribute] per level ("Net/Linear[fc1]"); a parameter is named in
its module's scope ("Net/Linear[fc1]/weight"), so a collapsed Linear is one box holding its ops and parameters.
A module called twice (a loop, shared weights) has one scope; TensorBoard numbers the repeated op names in it.

tensorboardX is an optional dependency (pip install tensorboardX, or pip install 'dyngrad[viz]').
"""
import bisect
import re

from .. import zeros
from ..autograd.graph import walk
from .dot import param_names

# TensorFlow's DataType numbers, which TensorBoard shows as the dtype attribute
_TF_DTYPES = {"float32": 1, "float64": 2, "int64": 9, "bool": 10}
# The graphs plugin lists a RunMetadata summary with this plugin name as an op graph for its tag
_RUN_METADATA_WITH_GRAPH = "graph_run_metadata_graph"
_INSTALL_HINT = "add_graph() needs tensorboardX: pip install tensorboardX (or pip install 'dyngrad[viz]')."


def _protos():
    try:
        from tensorboardX.proto import (attr_value_pb2, event_pb2, graph_pb2, node_def_pb2, summary_pb2,
                                        tensor_pb2, tensor_shape_pb2, types_pb2, versions_pb2)
    except ImportError:
        raise ImportError(_INSTALL_HINT) from None
    return (attr_value_pb2, event_pb2, graph_pb2, node_def_pb2, summary_pb2, tensor_pb2, tensor_shape_pb2,
            types_pb2, versions_pb2)


def _clean(name):
    """A valid TensorFlow node name (letters, digits and . _ - /): "<module>" -> "module"."""
    name = re.sub(r"[^A-Za-z0-9_.\-/]+", "_", name).strip("_/-.")
    return name or "node"


def _next_sequence_nr():
    """The sequence_nr the next recorded node will get (this throwaway node took the one before it)."""
    probe = zeros((), requires_grad=True) * 1.0
    return probe.grad_fn.sequence_nr + 1 if probe.grad_fn is not None else None


class module_scopes:
    """Records which module call creates which nodes while a forward pass runs (Note [Module scopes]):

        with dg.viz.module_scopes(model) as scopes:
            loss = criterion(model(x), y)
        dg.viz.add_graph(writer, loss, params=model, scopes=scopes)
    """

    def __init__(self, model):
        if not hasattr(model, "named_modules"):
            raise TypeError(f"module_scopes: expected a Module, got {type(model).__name__}.")
        self.model = model
        self.root = _clean(type(model).__name__)
        self.names = {}              # module path ("" for the root, "layers.0") -> scope ("Net/Sequential[layers]/...")
        self.calls = []              # (first sequence_nr, last sequence_nr + 1, scope) of each finished call
        self._handles = []

    def _scope_names(self):
        modules = dict(self.model.named_modules())
        for path in modules:
            parts, scope = path.split(".") if path else [], self.root
            for k in range(len(parts)):
                prefix = ".".join(parts[:k + 1])
                scope += f"/{_clean(type(modules[prefix]).__name__)}[{_clean(parts[k])}]"
            self.names[path] = scope
        return modules

    def __enter__(self):
        starts = {}

        def pre_hook(module, args):
            starts.setdefault(id(module), []).append(_next_sequence_nr())

        def make_post_hook(scope):
            def post_hook(module, args, output):
                start, end = starts[id(module)].pop(), _next_sequence_nr()
                if start is not None and end is not None:
                    self.calls.append((start, end, scope))
            return post_hook

        for path, module in self._scope_names().items():
            self._handles.append(module.register_forward_pre_hook(pre_hook))
            self._handles.append(module.register_forward_hook(make_post_hook(self.names[path])))
        return self

    def __exit__(self, *exc):
        for handle in self._handles:
            handle.remove()
        self._handles = []
        return False

    def scope_of(self, sequence_nr):
        """The scope of the innermost recorded call that created node `sequence_nr`, or None."""
        best = None
        for start, end, scope in self.calls:
            if start <= sequence_nr < end and (best is None or end - start < best[0]):
                best = (end - start, scope)
        return None if best is None else best[1]

    def scope_of_parameter(self, name):
        """'Net/Linear[fc1]/weight' for the parameter 'fc1.weight'."""
        path, _, leaf = name.rpartition(".")
        return f"{self.names.get(path, self.root)}/{_clean(leaf)}"


def graph_def(*roots, params=None, scopes=None):
    """The GraphDef (tensorboardX proto) of the graph behind `roots`: one NodeDef per node, inputs in data-flow
    direction, attributes _output_shapes, dtype, call_site (ops) and parameter (leaves). scopes: a
    module_scopes record of the forward pass, to name nodes by module (else by the Python function)."""
    attr_value_pb2, _, graph_pb2, node_def_pb2, _, _, tensor_shape_pb2, _, versions_pb2 = _protos()
    g = walk(*roots)
    meta = g.output_meta()
    names = param_names(params)

    def shape_attr(shape):
        dims = [tensor_shape_pb2.TensorShapeProto.Dim(size=int(s)) for s in shape]
        return attr_value_pb2.AttrValue(list=attr_value_pb2.AttrValue.ListValue(
            shape=[tensor_shape_pb2.TensorShapeProto(dim=dims)]))

    def dtype_attr(dtype):
        return attr_value_pb2.AttrValue(type=_TF_DTYPES.get(str(dtype).replace("dyngrad.", ""), 0))

    # Unique names: the k-th node with a taken base name gets "base_k". next_suffix remembers where each base's
    # search stopped, so n nodes of one name cost O(n) in all, not O(n^2) (issue 11: 18 s at 16k nodes).
    node_names, taken, next_suffix = [], set(), {}
    for i, node in enumerate(g.nodes):
        if g.is_leaf(i):
            name = names.get(id(node.variable))
            if name is None:
                base = "leaf"
            elif scopes is not None:
                base = scopes.scope_of_parameter(name)
            else:
                base = _clean(name.replace(".", "/"))
        elif scopes is not None:
            scope = scopes.scope_of(node.sequence_nr)
            base = f"{scope}/{node.name()}" if scope else node.name()
        else:
            site = node.call_site
            scope = _clean(site[2]) + "/" if site is not None and site[2] else ""
            base = f"{scope}{node.name()}"
        name, k = base, next_suffix.get(base, 0)
        if k or name in taken:
            while name in taken:
                k += 1
                name = f"{base}_{k}"
            next_suffix[base] = k
        taken.add(name)
        node_names.append(name)

    inputs = [[] for _ in g.nodes]
    for consumer, input_nr, producer, output_nr in sorted(g.edges, key=lambda e: (e[0], e[1])):
        inputs[consumer].append(node_names[producer] + (f":{output_nr}" if output_nr else ""))

    gd = graph_pb2.GraphDef(versions=versions_pb2.VersionDef(producer=22))
    for i, node in enumerate(g.nodes):
        attr = {}
        if g.is_leaf(i):
            variable = node.variable
            attr["_output_shapes"] = shape_attr(variable.shape)
            attr["dtype"] = dtype_attr(variable.dtype)
            if id(variable) in names:
                attr["parameter"] = attr_value_pb2.AttrValue(s=names[id(variable)].encode())
            op = "Parameter" if id(variable) in names else "Leaf"
        else:
            if meta[i] is not None:
                attr["_output_shapes"] = shape_attr(meta[i][0])
                attr["dtype"] = dtype_attr(meta[i][1])
            site = node.call_site
            if site is not None:
                attr["call_site"] = attr_value_pb2.AttrValue(s=f"{site[0]}:{site[1]} ({site[2]})".encode())
            saved = sum(b for _, _, b in node.saved_tensors_info())
            if saved:
                attr["saved_bytes"] = attr_value_pb2.AttrValue(i=saved)
            op = node.name()
        gd.node.append(node_def_pb2.NodeDef(name=node_names[i], op=op, input=inputs[i], attr=attr))
    for k, (tensor, i, output_nr) in enumerate(g.roots):
        if tensor is None:
            continue
        gd.node.append(node_def_pb2.NodeDef(
            name=f"output_{k}", op="Output", input=[node_names[i] + (f":{output_nr}" if output_nr else "")],
            attr={"_output_shapes": shape_attr(tensor.shape), "dtype": dtype_attr(tensor.dtype)}))
    return gd


def _length_delimited(field_number, payload):
    """One protobuf field of wire type 2 (bytes / embedded message)."""
    def varint(n):
        out = bytearray()
        while True:
            low, n = n & 0x7F, n >> 7
            out.append(low | (0x80 if n else 0))
            if not n:
                return bytes(out)
    return varint((field_number << 3) | 2) + varint(len(payload)) + payload


def run_metadata_bytes(graph_bytes):
    """A serialized TensorFlow RunMetadata holding the graph as function_graphs[0].pre_optimization_graph
    (fields 4 and 2): what the graphs plugin draws for a tag. Written by hand: tensorboardX has no RunMetadata."""
    return _length_delimited(4, _length_delimited(2, graph_bytes))


def add_graph(writer, *roots, params=None, step=None, tag=None, scopes=None):
    """Write the graph behind `roots` (tensors or grad_fn nodes) into `writer` (a tensorboardX SummaryWriter).

    params: a Module, a dict name -> tensor, or (name, tensor) pairs, to name the leaves.
    scopes: a module_scopes record of the forward pass: nodes grouped by module (Note [Module scopes]).
    step:   the training step, recorded with the events.
    tag:    the name under which this graph is listed in the Graphs tab's Tag menu (default "graph at step N",
            or "graph N" for the N-th call without a step).
    Returns the tag.
    """
    (_, event_pb2, _, _, summary_pb2, tensor_pb2, tensor_shape_pb2, types_pb2, _) = _protos()
    if not hasattr(writer, "_get_file_writer"):
        raise TypeError(f"add_graph: expected a tensorboardX SummaryWriter, got {type(writer).__name__}.")
    gd = graph_def(*roots, params=params, scopes=scopes)
    graph_bytes = gd.SerializeToString()
    count = getattr(writer, "_dyngrad_graphs", 0)
    writer._dyngrad_graphs = count + 1
    if tag is None:
        tag = f"graph at step {step}" if step is not None else f"graph {count}"
    file_writer = writer._get_file_writer()
    file_writer.add_event(event_pb2.Event(graph_def=graph_bytes), step)      # the run's graph: latest wins
    tensor = tensor_pb2.TensorProto(dtype=types_pb2.DT_STRING, string_val=[run_metadata_bytes(graph_bytes)],
                                    tensor_shape=tensor_shape_pb2.TensorShapeProto())
    metadata = summary_pb2.SummaryMetadata(plugin_data=summary_pb2.SummaryMetadata.PluginData(
        plugin_name=_RUN_METADATA_WITH_GRAPH, content=b"1"))
    value = summary_pb2.Summary.Value(tag=tag, tensor=tensor, metadata=metadata)
    file_writer.add_event(event_pb2.Event(summary=summary_pb2.Summary(value=[value])), step)
    writer.flush()
    return tag
