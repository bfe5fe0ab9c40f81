"""The reference engine's debugging switches (reference/debug.py) under the names the shared anomaly.py and
graph.py use; mirrors python/dyngrad/autograd/_engine_debug.py."""
from .. import debug as _debug
from ..debug import set_record_call_sites, set_track_nodes, tracked_node_count, bridging_nodes  # noqa: F401
from ..debug import set_anomaly_mode as set_anomaly_enabled  # noqa: F401


def is_recording_call_sites():
    return _debug.record_call_sites


def is_anomaly_enabled():
    return _debug.anomaly_mode


def set_backward_observer(fn):
    _debug.backward_observer = fn
