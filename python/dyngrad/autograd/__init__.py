"""dyngrad.autograd, for both engines: backward, grad, Function, grad modes, gradcheck, anomaly mode, graph stats.
The engine's core runs the backward pass and records custom Functions; this package gives torch's signatures.
(help() shows this text to users: it names no internal module.)"""
import importlib

from .grad_mode import no_grad, enable_grad, set_grad_enabled, is_grad_enabled, inference_mode  # noqa: F401
from .function import Function, FunctionCtx, once_differentiable  # noqa: F401
from .engine import backward, grad, _queue_callback  # noqa: F401
from .gradcheck import GradcheckError, gradcheck, gradgradcheck  # noqa: F401
from .anomaly import detect_anomaly, set_detect_anomaly, is_anomaly_enabled, set_record_call_sites, is_recording_call_sites  # noqa: F401,E501
from .graph import graph_stats, set_graph_growth_warning, GraphGrowthWarning  # noqa: F401
from . import functional, graph, forward_ad  # noqa: F401


# Note [Layers of autograd]: this package is imported by the shared API (_api builds its ops on grad_mode and
# Function), so what it imports when it loads may use only the engine's core: gradcheck and functional call the
# API's ops on tensors at run time, never at import. The profiler is above the API at import (it wraps the table's
# functions), so it is loaded on first use, as the engine root loads nn and optim (_api/lazy.py).
def __getattr__(name):
    if name == "profiler":
        return importlib.import_module(f"{__name__}.profiler")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
