"""dyngrad.reference: the pure-Python (numpy) engine with the same API as the C++ engine `dyngrad`.

    import dyngrad.reference as dg          # instead of `import dyngrad as dg`
    x = dg.tensor([1.0, 2.0], requires_grad=True)
    y = (x * x).sum()                        # builds SumBackward -> MulBackward -> AccumulateGrad(x)
    y.backward()                             # x.grad == tensor([2., 4.])

The file names mirror csrc/dyngrad one to one: tensor.py, node.py, engine.py, grad_mode.py, ops.py (+ ops_nn.py,
ops_creation.py), derivatives.py, kernels.py, errors.py, dtype.py. The shared packages nn, optim, utils and viz
(python/dyngrad/nn, ...) are loaded as dyngrad.reference.nn etc. through this package's __path__, so their
`from .. import Tensor` gives this engine's classes (see "Shared code" in docs/design.md).
"""
import importlib as _importlib
import os as _os

# The shared packages live next to this one, in python/dyngrad; see "Shared code" in docs/design.md.
__path__.append(_os.path.dirname(_os.path.dirname(_os.path.abspath(__file__))))

from .dtypes import (DType as dtype, float32, float64, int64, bool_ as bool,  # noqa: E402,F401
                    get_default_dtype, set_default_dtype)
from .grad_mode import no_grad, enable_grad, set_grad_enabled, is_grad_enabled  # noqa: E402
from .tensor import Tensor, Size  # noqa: E402
from . import errors, ops, ops_nn, derivatives, engine, node, kernels  # noqa: E402,F401
from .ops_creation import (tensor, as_tensor, from_numpy, zeros, ones, empty, full, zeros_like, ones_like,  # noqa
                           empty_like, full_like, rand_like, randn_like, arange, linspace, eye, rand, randn,
                           randint, randperm, normal, bernoulli, manual_seed, seed, initial_seed)
from .ops import *  # noqa: E402,F401,F403  (every op as a function: dg.add, dg.exp, dg.sum, dg.cat, ...)
from .ops import (OP_NAMES, sum, max, min, abs, pow, all, any, round, where,  # noqa: E402,F401
                  index_put, masked_fill, clamp, clip)
from .ops_nn import (softmax, log_softmax, cross_entropy, nll_loss,  # noqa: E402,F401
                     binary_cross_entropy_with_logits, embedding, dropout, conv2d, im2col, col2im, max_pool2d,
                     avg_pool2d, layer_norm, mse_loss, linear, one_hot)
from .ops import leaky_relu, gelu, softplus, relu, sigmoid, tanh  # noqa: E402,F401
from . import autograd  # noqa: E402

float = float32       # torch's aliases
double = float64
long = int64

_SHARED_PACKAGES = ("nn", "optim", "utils", "viz")


def __getattr__(name):
    """`dg.nn`, `dg.optim`, ... load the shared packages on first use (they may not exist yet)."""
    if name in _SHARED_PACKAGES:
        return _importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def is_tensor(obj):
    return isinstance(obj, Tensor)


def is_floating_point(t):
    return t.is_floating_point()


def numel(t):
    return t.numel()
