"""dyngrad.nn: modules, layers, losses and initialisers, written once over the Tensor API for both engines.

`import dyngrad.nn` runs this package over the C++ engine and `import dyngrad.reference.nn` over the reference
engine: every `from .. import X` below resolves to the engine root that loaded it (see "Shared code" in
docs/design.md). The layers live in nn/modules/, one file per family under torch's file names; each file's
__all__ lists its classes once, and they are re-exported here.
"""
from .parameter import Parameter, Buffer
from .modules import *  # noqa: F401,F403
from .modules import __all__ as _layers
from . import functional, init, utils, parallel
from .parallel import DataParallel  # noqa: F401  torch.nn.DataParallel, as torch exports it

__all__ = ["Parameter", "Buffer", *_layers, "functional", "init", "utils", "parallel"]
