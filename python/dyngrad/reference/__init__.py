"""dyngrad.reference: the pure-Python (numpy) engine with the same API as the C++ engine `dyngrad`.

    import dyngrad.reference as dg          # instead of `import dyngrad as dg`
    x = dg.tensor([1.0, 2.0], requires_grad=True)
    y = (x * x).sum()                        # builds SumBackward -> MulBackward -> AccumulateGrad(x)
    y.backward()                             # x.grad == tensor([2., 4.])

Its core is `_C.py`, the twin of the C++ extension dyngrad._C; the files behind it mirror csrc/dyngrad/ one to
one (tensor.py, node.py, engine.py, ops.py = ops.def, ops_math.py / ops_shape.py / ops_nn.py, derivatives.py,
kernels.py, rng.py = random.cpp, debug.py, ...). The public API is the shared layer python/dyngrad/_api/, installed
over this core exactly as over the C++ one. The shared packages (_api, autograd, nn, optim, utils, viz) are found
through this package's __path__, so their `from .. import _C` gives this engine's core (see "Shared code" in
docs/design.md).
"""
import os as _os
import warnings as _warnings

# The shared packages live next to this one, in python/dyngrad; see "Shared code" in docs/design.md.
__path__.append(_os.path.dirname(_os.path.dirname(_os.path.abspath(__file__))))

# Note [numpy's floating-point warnings]
# torch computes inf - inf, 0 * inf, sin(inf) and log(-1) to nan/inf silently; numpy warns ("invalid value
# encountered in subtract"). np.errstate costs ~1.7 us a call (a quarter of a small op), so the kernels that call a
# ufunc directly (add, mul, sin, matmul, ...) rely on this filter instead, which costs nothing until a warning
# fires: it drops numpy's floating-point RuntimeWarnings raised from the reference core's own files. A numpy
# function written in Python (np.sum, np.mean) warns from numpy's frames, so those kernels keep `quiet`. Shared
# code (nn, _api, ...) is not covered: it runs on the C++ engine too and silences its numpy calls with np.errstate.
# A filter installed inside a `warnings.catch_warnings()` block (an import of this package inside one) is dropped
# with the block: pytest's per-test warning capture is such a block, hence the fresh interpreter of the test.
_CORE_MODULES = sorted(f[:-3] for f in _os.listdir(_os.path.dirname(_os.path.abspath(__file__))) if f.endswith(".py"))
_warnings.filterwarnings("ignore", message=r".* encountered in ", category=RuntimeWarning,
                         module=r"dyngrad\.reference\.(%s)\Z" % "|".join(_CORE_MODULES))

from . import _C  # noqa: E402
from . import _api  # noqa: E402

_api.install(globals())   # every public name of _api/table.py, onto this namespace and _C.Tensor

from . import autograd  # noqa: E402,F401
from ._api.lazy import __getattr__  # noqa: E402,F401  nn, optim, utils, viz, save, load on first use
