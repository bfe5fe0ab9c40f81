"""dyngrad.reference: the pure-Python (numpy) engine with the same API as the C++ engine `dyngrad`.

    import dyngrad.reference as dg          # instead of `import dyngrad as dg`
    x = dg.tensor([1.0, 2.0], requires_grad=True)
    y = (x * x).sum()                        # builds SumBackward -> MulBackward -> AccumulateGrad(x)
    y.backward()                             # x.grad == tensor([2., 4.])

Its core is `_C.py`, the twin of the C++ extension dyngrad._C; the files behind it mirror csrc/dyngrad/ one to
one (tensor.py, node.py, engine.py, ops.py = ops.def, ops_math.py / ops_shape.py / ops_nn.py, derivatives.py,
kernels.py, random.py, debug.py, ...). The public API is the shared layer python/dyngrad/_api/, installed over this
core exactly as over the C++ one. The shared packages (_api, autograd, nn, optim, utils, viz) are found through
this package's __path__, so their `from .. import _C` gives this engine's core (see "Shared code" in
docs/design.md).
"""
import os as _os

# The shared packages live next to this one, in python/dyngrad; see "Shared code" in docs/design.md.
__path__.append(_os.path.dirname(_os.path.dirname(_os.path.abspath(__file__))))

from . import _C  # noqa: E402
from . import _api  # noqa: E402

_api.install(globals())   # every public name of _api/table.py, onto this namespace and _C.Tensor

from . import autograd  # noqa: E402,F401
from ._api.lazy import __getattr__  # noqa: E402,F401  nn, optim, utils, viz, save, load on first use
