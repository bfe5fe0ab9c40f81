"""dyngrad.reference: the pure-Python (numpy) engine with the same API as the C++ engine `dyngrad`.

    import dyngrad.reference as dg          # instead of `import dyngrad as dg`
    x = dg.tensor([1.0, 2.0], requires_grad=True)
    y = (x * x).sum()                        # builds SumBackward -> MulBackward -> AccumulateGrad(x)
    y.backward()                             # x.grad == tensor([2., 4.])

The file names mirror the C++ ones (docs/design.md, Layout): ops.py is csrc/dyngrad/ops.def + ops_common.h,
ops_math.py / ops_shape.py / ops_nn.py are csrc/dyngrad/ops_*.cpp, derivatives.py is derivatives.cpp, tensor.py,
node.py, engine.py, grad_mode.py, kernels.py, errors.py and dtypes.py are their .h/.cpp twins, and ops_bind.py /
tensor_bind.py are csrc/bindings/ops_bind.cpp / tensor_bind.cpp. The shared packages nn, optim, utils and viz
(python/dyngrad/nn, ...) are loaded as dyngrad.reference.nn etc. through this package's __path__, so their
`from .. import Tensor` gives this engine's classes (see "Shared code" in docs/design.md).
"""
import importlib as _importlib
import os as _os

# The shared packages live next to this one, in python/dyngrad; see "Shared code" in docs/design.md.
__path__.append(_os.path.dirname(_os.path.dirname(_os.path.abspath(__file__))))

from .dtypes import (DType as dtype, float32, float64, int64, bool_ as bool,  # noqa: E402,F401
                     get_default_dtype)  # set_default_dtype stays in .dtypes: the C++ engine's default is fixed
from .grad_mode import no_grad, enable_grad, set_grad_enabled, is_grad_enabled, inference_mode  # noqa: E402,F401
from .tensor import Tensor, Size  # noqa: E402,F401
from . import tensor_bind as _tensor_bind  # noqa: E402,F401  (installs operators and methods on Tensor)
from . import errors, ops, ops_math, ops_shape, ops_nn, derivatives, engine, node, kernels  # noqa: E402,F401
from .ops_creation import (tensor, as_tensor, from_numpy, zeros, ones, empty, full, zeros_like, ones_like,  # noqa
                           empty_like, full_like, rand_like, randn_like, arange, linspace, eye, rand, randn,
                           randint, randperm, normal, bernoulli, manual_seed, seed, initial_seed)
from .ops_bind import (  # noqa: E402,F401  every op as a function, as csrc/bindings/ops_bind.cpp binds them
    add, sub, mul, div, true_divide, pow, neg, negative, matmul, mm, bmm, maximum, minimum, where, clamp, clip,
    exp, log, sqrt, rsqrt, abs, sin, cos, tanh, sigmoid, relu, sign, erf, square, leaky_relu, gelu, softplus,
    eq, ne, lt, le, gt, ge, logical_and, logical_or, logical_xor, logical_not, isnan, isfinite,
    sum, mean, var, std, max, min, amax, amin, argmax, argmin, logsumexp,
    reshape, flatten, transpose, swapaxes, t, permute, squeeze, unsqueeze, broadcast_to, cat, concat, stack,
    split, chunk, unbind, narrow, select, gather, index_select, take, masked_fill,
    softmax, log_softmax, cross_entropy, nll_loss, mse_loss, binary_cross_entropy_with_logits, linear, embedding,
    dropout, one_hot, conv2d, max_pool2d, avg_pool2d, layer_norm,
)
from . import ops_extra as _extra  # noqa: E402  (torch names the C++ engine lacks; see ops_extra.py)
from . import autograd  # noqa: E402

# The torch names of ops_extra.py have no C++ twin yet, so they stay out of the public namespace (the two engines
# export the same names; tests/test_parity.py): reach them as dyngrad.reference.ops_extra.NAME.

float = float32       # torch's aliases
double = float64
long = int64

_SHARED_PACKAGES = ("nn", "optim", "utils", "viz", "distributed")


def __getattr__(name):
    """`dg.nn`, `dg.optim`, ... and `dg.save` / `dg.load` load the shared Python on first use."""
    if name in _SHARED_PACKAGES:
        return _importlib.import_module(f"{__name__}.{name}")
    if name in ("save", "load"):
        return getattr(_importlib.import_module(f"{__name__}.serialization"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def is_tensor(obj):
    return isinstance(obj, Tensor)


def numel(t):
    if not isinstance(t, Tensor):
        raise TypeError(f"numel: expected a Tensor, got {type(t).__name__}.")
    return t.numel()
