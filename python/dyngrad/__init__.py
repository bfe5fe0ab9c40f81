"""dyngrad: a define-by-run autograd engine with a C++ core.

    import dyngrad as dg
    x = dg.tensor([1.0, 2.0], requires_grad=True)
    y = (x * x).sum()          # the graph is recorded as this line runs
    y.backward()               # and walked, iteratively, by the C++ engine
    x.grad                     # tensor([2., 4.])

The same script runs on the pure-Python reference engine with `import dyngrad.reference as dg`.

This file is the C++ engine's package: its core is the extension `_C` (csrc/), and the public API is the shared
layer `_api` (written once for both engines) installed over it. `_cpp_*` modules are the C++ engine's own Python;
`reference/` is the other engine; every other module here is shared (see "Layout" in docs/design.md).
"""
import gc as _gc

from . import _C
from . import _api
from ._cpp_blas import load_blas as _load_blas

_api.install(globals())   # every public name of _api/table.py, onto this namespace and _C.Tensor
_load_blas(_C)


def _collect_cycles_through_cpp(phase, info):
    """Python's gc cannot see references held by C++ objects; when it collects its oldest generation (as
    gc.collect() does), the C++ collector frees the cycles that pass through them (csrc/dyngrad/cycles.h)."""
    if phase == "start" and info["generation"] == 2:
        _C._collect_cycles()


_gc.callbacks.append(_collect_cycles_through_cpp)


def _dtype_from_name(name):
    """Unpickles a dtype (the C++ dtype's __reduce__ names this function)."""
    return getattr(_C, name)


from . import autograd  # noqa: E402
from ._api.lazy import __getattr__  # noqa: E402,F401  nn, optim, utils, viz, save, load on first use

__version__ = "0.1.0"
