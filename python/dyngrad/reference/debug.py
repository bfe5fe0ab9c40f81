"""Reference engine: the Python line that created each node, anomaly mode, and the registry behind the
graph-growth warning. Mirrors csrc/dyngrad/debug.h: see Note [Call sites] and Note [Anomaly mode] there.

The switches are module globals, read on every op; dyngrad.reference.autograd sets them.
"""
import os
import sys
import traceback
import weakref

import numpy as np

from .errors import shape_str

record_call_sites = True     # Note [Call sites]
anomaly_mode = False         # Note [Anomaly mode]
track_nodes = False          # the graph-growth registry
backward_observer = None     # called at the start of every backward() (a "step")

# Frames in files under python/dyngrad/ (this engine, nn, optim, ...) are dyngrad's own and are skipped.
SKIP_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
_MAX_FRAMES_WALKED = 32
_internal_file = {}          # co_filename -> inside dyngrad?


class CallSite:
    """Where a node was created: the code object and instruction offset, turned into a line when asked."""

    __slots__ = ("code", "lasti", "line", "traceback")

    def __init__(self, code, lasti, line=None, stack=None):
        self.code = code
        self.lasti = lasti
        self.line = line
        self.traceback = stack

    def file(self):
        return self.code.co_filename if self.code is not None else ""

    def lineno(self):
        if self.line is None and self.code is not None:
            self.line = _line_of(self.code, self.lasti)
        return self.line if self.line is not None else -1

    def function(self):
        if self.code is None:
            return ""
        return getattr(self.code, "co_qualname", self.code.co_name)

    def describe(self):
        return f"{self.file()}:{self.lineno()}" if self.code is not None else ""


def _line_of(code, lasti):
    for start, end, line in code.co_lines():
        if start <= lasti < end:
            return line
    return None


def capture(frame):
    """The CallSite of the first frame outside dyngrad, starting at `frame` (else of `frame` itself)."""
    code, lasti, line = None, -1, None
    if record_call_sites:
        f = frame
        for _ in range(_MAX_FRAMES_WALKED):
            if f is None:
                break
            filename = f.f_code.co_filename
            internal = _internal_file.get(filename)
            if internal is None:
                internal = _internal_file[filename] = filename.startswith(SKIP_DIR)
            if not internal or code is None:      # the first user frame, else the innermost frame
                code, lasti = f.f_code, f.f_lasti
                line = None if hasattr(code, "co_lines") else f.f_lineno   # Python 3.9: resolve now
            if not internal:
                break
            f = f.f_back
    stack = "".join(traceback.format_stack(frame)) if anomaly_mode else None
    if code is None and stack is None:
        return None
    return CallSite(code, lasti, line, stack)


# ----- nodes -----------------------------------------------------------------------------------------------
_registry = weakref.WeakKeyDictionary()   # tracked live node -> the step it was created in
_step = 0


def note_node_created(node):
    """Called by every new OpNode / FunctionNode when a switch is on (the caller checks `any_on`)."""
    node._call_site = capture(sys._getframe(2)) if (record_call_sites or anomaly_mode) else None
    if track_nodes:
        _registry[node] = _step


def any_on():
    return record_call_sites or anomaly_mode or track_nodes


def _traceback_text(node):
    site = node._call_site
    if site is None or site.traceback is None:
        return ""
    return (f"\nTraceback of the forward call that created {node.name()} (recorded by anomaly mode):\n"
            f"{site.traceback}")


def created_at(node):
    """' (MulBackward was created at model.py:42)', plus the forward stack in anomaly mode; '' if none."""
    site = getattr(node, "_call_site", None)
    if site is None:
        return ""
    where = site.describe()
    out = f" ({node.name()} was created at {where})" if where else ""
    return out + _traceback_text(node)


# ----- anomaly mode ----------------------------------------------------------------------------------------
def check_gradients_finite(node, grads):
    """Raise if a gradient `node` returned (one per input) holds NaN or Inf; see Note [Anomaly mode]."""
    for i, g in enumerate(grads):
        if g is None or g._data.dtype.kind != "f":
            continue
        arr = g._data
        nans = int(np.count_nonzero(np.isnan(arr)))
        infs = int(np.count_nonzero(np.isinf(arr)))
        if nans == 0 and infs == 0:
            continue
        what = ("NaN and Inf" if infs else "NaN") if nans else "Inf"
        msg = (f"anomaly detection: {node.name()} returned a gradient containing {what} for its input {i} "
               f"(shape {shape_str(arr.shape)}: {nans} NaN, {infs} Inf of {arr.size} values).")
        site = getattr(node, "_call_site", None)
        where = site.describe() if site is not None else ""
        if where:
            msg += f" {node.name()} was created at {where}."
        raise RuntimeError(msg + _traceback_text(node))


# ----- the graph-growth registry ---------------------------------------------------------------------------
def note_backward():
    """A new step begins (one backward() call); runs the observer, whose exceptions propagate."""
    global _step
    _step += 1
    if backward_observer is not None:
        backward_observer()


def set_track_nodes(on):
    global track_nodes
    track_nodes = bool(on)
    if not on:
        _registry.clear()


def tracked_node_count():
    return len(_registry)


def bridging_nodes():
    """Live tracked nodes created in a later step than a (non-leaf) node they point to."""
    out = []
    for node, step in list(_registry.items()):
        for edge in node.next_edges:
            if edge is None:
                continue
            other = _registry.get(edge[0])        # leaves' AccumulateGrad sinks are never registered
            if other is not None and other < step:
                out.append(node)
                break
    return out
