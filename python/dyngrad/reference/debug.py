"""Reference engine: the Python line that created each node, anomaly mode, and the registry behind the
graph-growth warning. Mirrors csrc/dyngrad/debug.h: see Note [Call sites] and Note [Anomaly mode] there.

The switches are module globals, read on every op; dyngrad.reference.autograd sets them.
"""
import os
import sys
import traceback
import types
import weakref

import numpy as np

from .errors import shape_str

record_call_sites = True     # Note [Call sites]
anomaly_mode = False         # Note [Anomaly mode]
track_nodes = False          # the graph-growth registry
active = True                # any of the three: checked by every new node
backward_observer = None     # called at the start of every backward() (a "step")

# Frames in files under python/dyngrad/ (this engine, nn, optim, ...) are dyngrad's own and are skipped.
SKIP_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
USER_DIR = os.path.join(SKIP_DIR, "bench") + os.sep   # the benchmark's workloads are written as user code
ENGINE_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep
API_DIR = os.path.join(SKIP_DIR, "_api") + os.sep     # the shared API layer: anomaly stacks end before it
_MAX_FRAMES_WALKED = 16
_internal_file = {}          # co_filename -> inside dyngrad?
_LAZY_LINES = hasattr(types.CodeType, "co_lines")   # Python >= 3.10: resolve lines only when asked


def _update_active():
    global active
    active = record_call_sites or anomaly_mode or track_nodes


def set_record_call_sites(on):
    global record_call_sites
    record_call_sites = bool(on)
    _update_active()


def set_anomaly_mode(on):
    global anomaly_mode
    anomaly_mode = bool(on)
    _update_active()


# A node's call site is the tuple (code, lasti, line, stack): the code object and instruction offset of the
# frame (line resolved when asked; eagerly on Python 3.9), and the formatted forward stack in anomaly mode.
def site_file(site):
    return site[0].co_filename if site is not None and site[0] is not None else ""


def site_lineno(site):
    if site is None or site[0] is None:
        return -1
    if site[2] is not None:
        return site[2]
    for start, end, line in site[0].co_lines():
        if start <= site[1] < end:
            return line if line is not None else -1
    return -1


def site_function(site):
    if site is None or site[0] is None:
        return ""
    return getattr(site[0], "co_qualname", site[0].co_name)


def describe(site):
    """'path/model.py:42', or '' if nothing was recorded."""
    return f"{site_file(site)}:{site_lineno(site)}" if site is not None and site[0] is not None else ""


def capture(frame):
    """The call site of the first frame outside dyngrad, starting at `frame` (else of `frame` itself)."""
    chosen = None
    if record_call_sites:
        f = frame
        internal_file = _internal_file
        for _ in range(_MAX_FRAMES_WALKED):
            if f is None:
                break
            filename = f.f_code.co_filename
            internal = internal_file.get(filename)
            if internal is None:
                internal = internal_file[filename] = filename.startswith(SKIP_DIR) and \
                    not filename.startswith(USER_DIR)
            if not internal or chosen is None:    # the first user frame, else the innermost frame
                chosen = f
                if not internal:
                    break
            f = f.f_back
    stack = "".join(traceback.format_stack(_outside_engine(frame))) if anomaly_mode else None
    if chosen is None:
        return (None, -1, None, stack) if stack is not None else None
    return (chosen.f_code, chosen.f_lasti, None if _LAZY_LINES else chosen.f_lineno, stack)


def _outside_engine(frame):
    """The innermost frame outside this engine's own files and the shared API layer: the stack then ends where the
    C++ engine's does (shared Python such as nn layers stays in it)."""
    f = frame
    while f is not None and f.f_code.co_filename.startswith((ENGINE_DIR, API_DIR)):
        f = f.f_back
    return f if f is not None else frame


# ----- nodes -----------------------------------------------------------------------------------------------
_registry = weakref.WeakKeyDictionary()   # tracked live node -> the step it was created in
_step = 0


def note_node_created(node):
    """Called by every new OpNode / FunctionNode when `active`."""
    node._call_site = capture(sys._getframe(2)) if (record_call_sites or anomaly_mode) else None
    if track_nodes:
        _registry[node] = _step


def _traceback_text(node):
    site = node._call_site
    if site is None or site[3] is None:
        return ""
    return (f"\nTraceback of the forward call that created {node.name()} (recorded by anomaly mode):\n"
            f"{site[3]}")


def created_at(node):
    """' (MulBackward was created at model.py:42)', plus the forward stack in anomaly mode; '' if none."""
    site = getattr(node, "_call_site", None)
    if site is None:
        return ""
    where = describe(site)
    out = f" ({node.name()} was created at {where})" if where else ""
    return out + _traceback_text(node)


# ----- anomaly mode ----------------------------------------------------------------------------------------
def check_gradients_finite(node, grads):
    """Raise if a gradient `node` returned (one per input) holds NaN or Inf; see Note [Anomaly mode]."""
    for i, g in enumerate(grads):
        if g is None or g._data.dtype.kind not in "fc":
            continue
        arr = g._data
        nan = np.isnan(arr)                     # a complex element: NaN if either part is, else Inf if either is
        nans = int(np.count_nonzero(nan))
        infs = int(np.count_nonzero(np.isinf(arr) & ~nan))
        if nans == 0 and infs == 0:
            continue
        what = ("NaN and Inf" if infs else "NaN") if nans else "Inf"
        msg = (f"anomaly detection: {node.name()} returned a gradient containing {what} for its input {i} "
               f"(shape {shape_str(arr.shape)}: {nans} NaN, {infs} Inf of {arr.size} values).")
        where = describe(getattr(node, "_call_site", None))
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
    _update_active()


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


# ----- the switches under the names of the C++ engine's _C (reference/_C.py exports them) ---------------------
def is_recording_call_sites():
    return record_call_sites


def is_anomaly_enabled():
    return anomaly_mode


def set_call_site_skip_dir(skip_dir, user_dir, api_dir):
    """Frames in files under skip_dir are dyngrad's own (except under user_dir): Note [Call sites]."""
    global SKIP_DIR, USER_DIR, API_DIR
    SKIP_DIR, USER_DIR, API_DIR = skip_dir, user_dir, api_dir
    _internal_file.clear()


def set_backward_observer(fn):
    global backward_observer
    backward_observer = fn
