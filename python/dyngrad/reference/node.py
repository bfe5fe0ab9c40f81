"""Reference engine: graph nodes. Mirrors csrc/dyngrad/node.h (Node, Edge, SavedTensor, OpNode, AccumulateGrad).

A node is the `grad_fn` of the tensors an op produced. Its `next_edges` point, input by input, to where the
gradient of that input goes: `(node, input_nr)` of the op that produced the input, the input's `AccumulateGrad`
sink if it is a leaf requiring grad, or None if the input needs no gradient.
"""
import itertools
import threading
import types
import weakref

import numpy as np

from . import debug, errors, forward_ad
from .grad_mode import GradModeGuard, is_grad_enabled
from .tensor import Tensor, make_tensor, _HookList

_sequence_nr = itertools.count()   # creation order of nodes, as Node::sequence_nr in C++


def next_sequence_nr():
    """A number above every existing node's sequence_nr and below every later node's (node.h's
    next_sequence_nr)."""
    return next(_sequence_nr)


def gradient_edge(t):
    """Where the gradient of tensor `t` must be sent: (grad_fn, output_nr), (AccumulateGrad, 0) or None."""
    if t.grad_fn is not None:
        return (t.grad_fn, t.output_nr)
    if t._requires_grad:
        return (grad_accumulator(t), 0)
    return None


def grad_accumulator(leaf):
    """The leaf's AccumulateGrad node; cached weakly so every use of the leaf in one graph shares one sink."""
    node = leaf._grad_accumulator() if leaf._grad_accumulator is not None else None
    if node is None:
        node = AccumulateGrad(leaf)
        leaf._grad_accumulator = weakref.ref(node)
    return node


def camel_case(op):
    """`log_softmax` -> `LogSoftmax` (node names are `LogSoftmaxBackward`)."""
    return "".join(part[:1].upper() + part[1:] for part in op.split("_"))


class Node:
    """Base of every grad_fn. `apply(grads)` maps one gradient per output to one gradient per next edge."""

    __slots__ = ("next_edges", "_tensor_pre_hooks", "_retain_grad_refs", "_pre_hooks", "_post_hooks",
                 "sequence_nr", "_call_site", "_task_owner", "_display_name",
                 "__weakref__")  # _task_owner: engine.py's claims; _display_name: Note [Display names] (node.h)
    num_outputs = 1

    def __init__(self, next_edges=()):
        self.next_edges = next_edges
        self._tensor_pre_hooks = None
        self._retain_grad_refs = None
        self._pre_hooks = None
        self._post_hooks = None
        self.sequence_nr = next(_sequence_nr)
        self._call_site = None
        self._display_name = ""

    def name(self):
        return type(self).__name__

    def __repr__(self):
        return f"<{self.name()} object at {id(self):#x}>"

    @property
    def next_functions(self):
        return tuple(edge if edge is not None else (None, 0) for edge in self.next_edges)

    @property
    def metadata(self):
        return {}

    # ----- introspection, as the C++ Node binding (csrc/bindings/autograd_bind.cpp) -----------------------
    @property
    def released(self):
        return False

    @property
    def input_metadata(self):
        """(shape, dtype) of each forward input; ((), float32) for an absent one, as in C++."""
        from .dtypes import float32, from_numpy_dtype
        from .tensor import HELPERS as _HELPERS
        return [(_HELPERS["Size"](m[0]), from_numpy_dtype(m[1])) if m is not None else (_HELPERS["Size"](()), float32)
                for m in getattr(self, "input_meta", ())]

    @property
    def input_shapes(self):
        return [shape for shape, _ in self.input_metadata]

    def _saved_list(self):
        return ()

    def _saved_fields(self):
        """{name: value} of what the node saved for its backward formula; see OpNode._saved_fields."""
        return {}

    def saved_tensors_info(self):
        """(shape, dtype, bytes) of each tensor this node holds for backward."""
        from .dtypes import from_numpy_dtype
        from .tensor import HELPERS as _HELPERS
        out = []
        for s in self._saved_list():
            if s is None or isinstance(s, PackedSavedTensor):   # Note [Saved tensor hooks]: the hook's to hold
                continue
            arr = s.tensor._data if s.tensor is not None else s.data
            out.append((_HELPERS["Size"](arr.shape), from_numpy_dtype(arr.dtype), int(arr.size * arr.itemsize)))
        return out

    @property
    def call_site(self):
        """(file, line, function) of the Python code that created the node, or None (Note [Call sites])."""
        site = self._call_site
        if site is None or site[0] is None:
            return None
        return (debug.site_file(site), debug.site_lineno(site), debug.site_function(site))

    @property
    def forward_traceback(self):
        """The formatted stack of the forward call, recorded in anomaly mode only."""
        site = self._call_site
        return site[3] if site is not None else None

    def apply(self, grads):
        raise NotImplementedError

    def release_saved(self):
        """Free what the backward pass needed; see Note [Releasing the graph] in csrc/dyngrad/node.h."""

    # ----- hooks -----------------------------------------------------------------------------------------
    def tensor_pre_hooks(self, output_nr):
        """The hook list of the tensor that is this node's output `output_nr` (created on demand)."""
        if self._tensor_pre_hooks is None:
            self._tensor_pre_hooks = {}
        return self._tensor_pre_hooks.setdefault(output_nr, _HookList())

    def add_retain_grad(self, output_nr, tensor_ref):
        if self._retain_grad_refs is None:
            self._retain_grad_refs = {}
        self._retain_grad_refs[output_nr] = tensor_ref

    def register_hook(self, fn):
        """fn(grad_inputs, grad_outputs) runs after this node; a non-None return replaces grad_inputs."""
        from .tensor import RemovableHandle
        if self._post_hooks is None:
            self._post_hooks = _HookList()
        self._post_hooks.append(fn)
        return RemovableHandle(self._post_hooks, fn)

    def register_prehook(self, fn):
        """fn(grad_outputs) runs before this node; a non-None return replaces grad_outputs."""
        from .tensor import RemovableHandle
        if self._pre_hooks is None:
            self._pre_hooks = _HookList()
        self._pre_hooks.append(fn)
        return RemovableHandle(self._pre_hooks, fn)


class SavedTensor:
    """A tensor kept for the backward pass, with the version it had when saved.

    See Note [Saved tensor versions] in csrc/dyngrad/node.h. An op's own output is saved as its memory only
    (not the Tensor object, which would form a cycle out -> grad_fn -> out); unpacking rebuilds a tensor whose
    grad_fn is the node itself, so create_graph can differentiate through it.
    """

    __slots__ = ("tensor", "data", "storage", "version", "output_nr", "tangents")

    def __init__(self, t, is_output=False):
        self.version = t._storage.version
        self.tangents = None
        if is_output:
            self.tensor = None
            self.data = t._data
            self.storage = t._storage
            self.output_nr = t.output_nr
            # its forward-AD tangents too (node.cpp's alias_with_tangents): forward-over-reverse reads them
            self.tangents = forward_ad.tangent_list(t) if forward_ad.active() else None
        else:
            self.tensor = t
            self.data = None
            self.storage = t._storage

    def unpack(self, node):
        now = self.storage.version
        if now != self.version:
            shape = self.tensor.shape if self.tensor is not None else self.data.shape
            raise RuntimeError(errors.ERR_SAVED_MODIFIED.format(
                shape=errors.shape_str(shape), node=node.name(), now=now, saved=self.version) + debug.created_at(node))
        if self.tensor is not None:
            return self.tensor
        out = make_tensor(self.data, self.storage)
        out.grad_fn = node
        out.output_nr = self.output_nr
        if self.tangents:
            out._tangents = list(self.tangents)   # (a copy: set_tangent on the unpacked tensor stays its own)
        return out


# Note [Saved tensor hooks] (csrc/dyngrad/node.h): the (pack, unpack) of this thread, set by saved_tensors_hooks.
_pack_hooks = threading.local()


def _set_saved_tensors_hooks(pack, unpack):
    _pack_hooks.value = (pack, unpack) if pack is not None else None


class PackedSavedTensor:
    """What the pack hook returned for a saved tensor; unpacking calls the unpack hook (no version check, as in
    the C++ engine). An output is packed as a history-free alias and gets its node back as grad_fn when unpacked;
    any other saved tensor gets its history back when grad mode is on (a leaf is returned itself), as in
    autograd_bind.cpp's PyPackedSaved."""

    __slots__ = ("value", "unpack_fn", "output_nr", "grad_fn", "leaf")

    def __init__(self, t, is_output, pack, unpack):
        self.output_nr = t.output_nr if is_output else None
        self.grad_fn = self.leaf = None
        if is_output:
            t = make_tensor(t._data, t._storage)
        elif t.grad_fn is not None:
            self.grad_fn = (t.grad_fn, t.output_nr)
        elif t._requires_grad:
            self.leaf = t
        with GradModeGuard(False):    # as node.cpp: the hook's own ops record (and so pack) nothing
            self.value = pack(t)
        self.unpack_fn = unpack

    def unpack(self, node):
        out = self.unpack_fn(self.value)
        if not isinstance(out, Tensor):
            raise TypeError(f"saved_tensors_hooks: the unpack hook must return a Tensor, got {type(out).__name__}.")
        if self.output_nr is not None:
            out = make_tensor(out._data, out._storage)
            out.grad_fn = node
            out.output_nr = self.output_nr
        elif is_grad_enabled():
            if self.leaf is not None:
                return self.leaf
            if self.grad_fn is not None:
                out = make_tensor(out._data, out._storage)
                out.grad_fn, out.output_nr = self.grad_fn
        return out


class OpNode(Node):
    """The node of one primitive op: its derivative lives in derivatives.py as `<op>_backward(grad, s)`, where
    `s` holds the op's saved fields by name (`fields`, its row of ops.PRIMITIVES: see Note [Named saved state] in
    csrc/dyngrad/saved.h), with `needs_input_grad` and `input_meta` (each input's numpy shape and dtype)."""

    __slots__ = ("op", "backward_fn", "fields", "saved", "args", "input_meta", "released", "num_outputs")

    def __init__(self, op, backward_fn, inputs, fields=()):
        edges, meta = [], []
        for t in inputs:
            if t is None:
                edges.append(None)
                meta.append(None)
                continue
            if t.grad_fn is not None:
                edges.append((t.grad_fn, t.output_nr))
            elif t._requires_grad:
                edges.append((grad_accumulator(t), 0))
            else:
                edges.append(None)
            meta.append((t._data.shape, t._data.dtype))
        self.next_edges = tuple(edges)
        self.input_meta = tuple(meta)
        self._tensor_pre_hooks = self._retain_grad_refs = self._pre_hooks = self._post_hooks = None
        self.op = op
        self.backward_fn = backward_fn
        self.fields = fields
        self.saved = None
        self.args = None
        self.released = False
        self.num_outputs = 1       # layer_norm_backward and rnn_layer_backward have several (ops.record_outputs)
        self.sequence_nr = next(_sequence_nr)
        self._display_name = ""
        if debug.active:
            debug.note_node_created(self)
        else:
            self._call_site = None

    def name(self):
        return self._display_name or camel_case(self.op) + "Backward"   # Note [Display names] (node.h)

    def _saved_list(self):
        return tuple(self.saved.values()) if self.saved is not None else ()

    def save(self, name, t, is_output=False):
        if self.saved is None:
            self.saved = {}
        if t is None:
            self.saved[name] = None
            return
        hooks = getattr(_pack_hooks, "value", None)
        self.saved[name] = SavedTensor(t, is_output) if hooks is None else PackedSavedTensor(t, is_output, *hooks)

    def release_saved(self):
        if self.saved is not None:
            self.saved = None
            self.released = True

    def _saved_fields(self):
        """{name: value} for every declared field, in declared order, as the C++ Node._saved_fields(): tensors
        unpacked (version checked), None for a tensor the forward did not need to save. Raises the backward-twice
        error once released."""
        if self.released:
            raise RuntimeError(errors.ERR_BACKWARD_TWICE.format(node=self.name()) + debug.created_at(self))
        saved, args = self.saved or {}, self.args or {}
        out = {}
        for name in self.fields:
            t = saved.get(name)
            out[name] = t.unpack(self) if t is not None else args.get(name)
        return out

    def unpack(self):
        """The formula's `s`: the saved fields by name, needs_input_grad, and input_meta."""
        s = types.SimpleNamespace(**self._saved_fields())
        s.needs_input_grad = tuple(edge is not None for edge in self.next_edges)
        s.input_meta = self.input_meta
        return s

    def apply(self, grads):
        """The formula gets the gradient of the output, or, for an op of several outputs, all of them (None where
        none arrived)."""
        if self.num_outputs == 1:
            grad = grads[0]
            if grad is None:
                return (None,) * len(self.next_edges)
        else:
            grad = list(grads) + [None] * (self.num_outputs - len(grads))
            if all(g is None for g in grad):
                return (None,) * len(self.next_edges)
        result = self.backward_fn(grad, self.unpack())
        if len(result) != len(self.next_edges):
            raise RuntimeError(f"{self.name()} returned {len(result)} gradients, but the op had "
                               f"{len(self.next_edges)} inputs.")
        fitted = []
        for i, g in enumerate(result):
            if g is None or self.next_edges[i] is None:
                fitted.append(None)
                continue
            shape, np_dtype = self.input_meta[i]
            if g._data.shape != shape or g._data.dtype != np_dtype:
                g = fit_gradient(g, self.input_meta[i], self.name(), i)
            fitted.append(g)
        return fitted


def fit_gradient(g, meta, node_name, index):
    """See Note [Unbroadcast] in csrc/dyngrad/node.h: sum a gradient down to its input's shape (the formulas
    ignore broadcasting) and cast it to the input's dtype."""
    from .dtypes import from_numpy_dtype
    from .ops_math import sum_to
    from .ops_shape import to_dtype
    shape, np_dtype = meta
    if g._data.shape != shape:
        try:
            g = sum_to(g, shape)
        except RuntimeError:
            raise RuntimeError(f"{node_name} returned an invalid gradient for input {index}: got shape "
                               f"{errors.shape_str(g.shape)}, expected shape {errors.shape_str(shape)}.") from None
    if g._data.dtype != np_dtype and np_dtype.kind in "fc":    # complex to real: its real part (torch)
        g = to_dtype(g, from_numpy_dtype(np_dtype))
    return g


class AccumulateGrad(Node):
    """The sink of a leaf: adds the incoming gradient to `variable.grad`; see Note [Gradient accumulation]."""

    __slots__ = ("variable",)

    def __init__(self, variable):
        super().__init__(())
        self.variable = variable

    @property
    def input_metadata(self):
        from .tensor import HELPERS as _HELPERS
        return [(_HELPERS["Size"](self.variable.shape), self.variable.dtype)]

    def tensor_pre_hooks(self, output_nr):
        if self.variable._hooks is None:
            self.variable._hooks = _HookList()
        return self.variable._hooks

    def apply(self, grads, create_graph=False):
        from .grad_mode import GradModeGuard
        g = grads[0]
        if g is None:
            return ()
        v = self.variable
        if v._grad is None:
            # a fresh tensor: .grad never aliases an upstream gradient or a user's `gradient=` argument
            v._grad = g if create_graph else make_tensor(g._data.copy())
        elif create_graph:
            v._grad = v._grad + g
        else:
            with GradModeGuard(False):
                from .inplace import has_internal_overlap
                if v._grad._data.flags.writeable and v._grad._data.shape == g._data.shape and \
                        not has_internal_overlap(v._grad._data):
                    v._grad._data += g._data
                    v._grad._storage.version += 1
                else:
                    v._grad = make_tensor(v._grad._data + g._data)
        run_post_accumulate_hooks(v)
        return ()


def run_post_accumulate_hooks(variable):
    """The leaf's post-accumulate-grad hooks, after its .grad was updated. See Note [Hooks that change hooks] in
    csrc/dyngrad/engine.h: a copy of the list is run (one removed meanwhile still runs this time, as in torch)."""
    hooks = variable._post_accumulate_grad_hooks
    if not hooks:
        return
    for hook in tuple(hooks):
        result = hook(variable)
        if result is not None:
            raise RuntimeError(f"a post-accumulate-grad hook must return None, got {type(result).__name__}.")


class ZeroDerivative(Node):
    """Note [Constant gradients under create_graph] (csrc/dyngrad/engine.cpp): the grad_fn of a primitive's
    gradient that came out constant (a piecewise-linear op's mask times a constant incoming gradient); its one edge
    is the input the gradient is for, which gets zeros."""

    __slots__ = ("input_meta", "_of")

    def __init__(self, edge, meta, of):
        super().__init__((edge,))
        self.input_meta = (meta,)
        self._of = of

    def name(self):
        return self._of + "Backward"

    def apply(self, grads):
        shape, dtype = self.input_meta[0]
        return (make_tensor(np.zeros(shape, dtype=dtype)),)


class GraphRoot(Node):
    """The virtual start of a backward pass: sends each root tensor its initial gradient."""

    __slots__ = ("grads",)

    def __init__(self, edges, grads):
        super().__init__(tuple(edges))
        self.grads = grads

    def apply(self, grads):
        return self.grads
