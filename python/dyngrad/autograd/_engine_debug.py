"""The engine's debugging switches (csrc/dyngrad/debug.h, python/dyngrad/reference/debug.py) under the names the
shared anomaly.py and graph.py use."""
import os

from .. import _C

# Frames in python/dyngrad/ are dyngrad's own: a node's call site is the first frame outside it (Note [Call sites]).
# The benchmark's workloads (python/dyngrad/bench/) are written as user code and count as such. Anomaly mode's
# forward stack ends before the frames of the shared API layer (python/dyngrad/_api/).
_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
_C._set_call_site_skip_dir(_PACKAGE_DIR, os.path.join(_PACKAGE_DIR, "bench") + os.sep,
                           os.path.join(_PACKAGE_DIR, "_api") + os.sep)

set_record_call_sites = _C._set_record_call_sites
is_recording_call_sites = _C._is_recording_call_sites
set_anomaly_enabled = _C._set_anomaly_enabled
is_anomaly_enabled = _C._is_anomaly_enabled
set_track_nodes = _C._set_track_nodes
tracked_node_count = _C._tracked_node_count
bridging_nodes = _C._bridging_nodes
set_backward_observer = _C._set_backward_observer
