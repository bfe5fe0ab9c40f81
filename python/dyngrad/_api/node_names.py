"""What a graph node shows the user: torch's node names for composite ops, and torch's `_saved_<name>` attributes.

Note [Display names] (csrc/dyngrad/node.h): a composite op records its last primitive's node as its output's
grad_fn; `@shows_as("MseLoss")` names that node after the op the user called (`MseLossBackward`), as torch shows
it. The node keeps its formula and its inputs (next_functions are those of the last primitive). Renaming never
touches a node the op did not make (an op that returns an input, or a view that reuses its node).
"""
import functools
import itertools

from .. import _C

Tensor = _C.Tensor


def _input_nodes(args, kwargs):
    """The grad_fns of the op's tensor arguments (they hold them alive, so a node comes back as the same object)."""
    nodes = []
    for a in itertools.chain(args, kwargs.values()) if kwargs else args:
        if isinstance(a, Tensor):
            node = a.grad_fn
            if node is not None:
                nodes.append(node)
        elif isinstance(a, (list, tuple)):
            nodes.extend(t.grad_fn for t in a if isinstance(t, Tensor) and t.grad_fn is not None)
    return nodes


def rename(out, display, args=(), kwargs=None):
    """Shows out's node (each output's, for a tuple) as `display` if the op made it (not an input's node). The
    caller names only ops whose last primitive has another name (Note [Display names])."""
    if isinstance(out, Tensor):
        node = out.grad_fn
        if node is not None and all(node is not n for n in _input_nodes(args, kwargs)):
            node._display_name = display
    elif isinstance(out, tuple):
        inputs = None
        for o in out:
            if isinstance(o, Tensor):
                node = o.grad_fn
                if node is not None:
                    inputs = _input_nodes(args, kwargs) if inputs is None else inputs
                    if all(node is not n for n in inputs):
                        node._display_name = display
    return out


def shows_as(name):
    """Decorator: the op's output node is shown as `<name>Backward` (torch's node name for the op)."""
    display = name + "Backward"

    def decorate(fn):
        @functools.wraps(fn)
        def op(*args, **kwargs):
            return rename(fn(*args, **kwargs), display, args, kwargs)
        return op
    return decorate


# ----- torch's _saved_<name> attributes ----------------------------------------------------------------------------

# the core's field names (Node._saved_fields(), csrc/dyngrad/saved.h) as torch's derivatives.yaml names them
TORCH_FIELD_NAMES = {"a": "self", "b": "other", "out": "result", "dims": "dim", "lo": "min", "hi": "max",
                     "cond": "condition", "slope": "negative_slope", "logits": "self"}
TORCH_FIELD_NAMES_OF = {"PowBackward": {"b": "exponent"}, "PermuteBackward": {"dims": "dims"}}


def saved_attribute(node, name):
    """node._saved_self and friends: what the node saved, under torch's names (Node.__getattr__ on both cores)."""
    if not name.startswith("_saved_"):
        raise AttributeError(f"'{type(node).__name__}' object has no attribute '{name}'")
    if getattr(node, "_display_name", ""):
        raise AttributeError(f"{node.name()} has no attribute '{name}': it is the node of the last primitive inside "
                             "a composite op, whose saved values are not torch's; see node._saved_fields().")
    wanted = name[len("_saved_"):]
    fields = node._saved_fields()
    names = TORCH_FIELD_NAMES_OF.get(node.name(), {})
    for field, value in fields.items():
        if names.get(field, TORCH_FIELD_NAMES.get(field, field)) == wanted:
            return value
    saved = ", ".join("_saved_" + names.get(f, TORCH_FIELD_NAMES.get(f, f)) for f in fields) or "nothing"
    raise AttributeError(f"{node.name()} has no attribute '{name}' (it saved: {saved}).")
