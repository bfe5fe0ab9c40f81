"""The torch-facing API, written once for both engines.

Each engine exposes a narrow core, `_C` (the C++ extension, or python/dyngrad/reference/_C.py): the tensor core,
the ops of ops.def with one fixed signature each, and the autograd machinery. This package builds everything a
PyTorch user calls on top of it (signatures, keywords, defaults, numbers as operands, dtype rules, composites,
methods, operators) and install() publishes it, row by row of table.py, into the engine's namespace and onto its
Tensor. Like nn/ and optim/, it runs once per engine: `from .. import _C` gives that engine's core (see "Shared
code" in docs/design.md).
"""
import importlib
import inspect

from .. import _C
from . import table
from .autocast import with_policy
from .batching import METHODS
from .args import RemovableHandle, Size
from .inplace import inplace_variant
from .dispatch import public
from .meta import register_unary
from .node_names import saved_attribute
from .out import with_out

# nn.functional's, torch.special's, linalg's, torch.masked's, torch.fft's and torch.signal.windows' names, filled by
# install() (python/dyngrad/nn/functional.py, special/__init__.py, linalg.py, masked/__init__.py, fft/__init__.py
# and signal/windows/__init__.py publish them)
FUNCTIONAL = {}
SPECIAL = {}
LINALG = {}
MASKED = {}
FFT = {}
WINDOWS = {}


def _module(row):
    module_name = row.impl.rpartition(".")[0]
    if module_name.split(".")[0] == "autograd":      # a shared package beside this one
        return importlib.import_module(f"..{module_name}", __name__)
    return importlib.import_module(f".{module_name}", __name__)


def _resolve(row):
    """The object a row's impl names."""
    impl = row.impl
    if impl == "core":
        return getattr(_C, row.name, None)
    if impl.startswith("core:"):
        return getattr(_C, impl[len("core:"):])
    obj = getattr(_module(row), impl.rpartition(".")[2])
    return obj[row.name] if isinstance(obj, dict) else obj


def _setter(row):
    """A `prop` row's setter: its module's PROPERTY_SETTERS[name] (z.real = v), or None (read-only)."""
    if row.impl == "core" or row.impl.startswith("core:"):
        return None
    return getattr(_module(row), "PROPERTY_SETTERS", {}).get(row.name)


def _doc_with_signature(fn, key):
    """fn's docstring headed by `name(params)\n--\n\n`, which CPython reads as a builtin's signature (methods take
    `$self`), so the C++ fast path keeps the signature of its Python definition."""
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return fn.__doc__ or ""
    method = key.startswith("Tensor.")
    text, star = ["$self" if method else "$module"], False
    for param in list(sig.parameters.values())[1 if method else 0:]:
        if param.kind == param.KEYWORD_ONLY and not star:      # the marker before the first keyword-only one
            text.append("*")
        star = star or param.kind in (param.KEYWORD_ONLY, param.VAR_POSITIONAL)
        text.append(str(param))
    head = f"{key.rpartition('.')[2]}({', '.join(text)})"
    return f"{head}\n--\n\n{fn.__doc__ or ''}"


def install(namespace):
    """Publishes the table into an engine root's `namespace` (its globals()) and onto its Tensor."""
    _C._register_helpers({"Size": Size, "RemovableHandle": RemovableHandle})
    _C.Node.__getattr__ = saved_attribute         # grad_fn._saved_self and friends (_api/node_names.py)
    Tensor = _C.Tensor
    # numpy defers `np.int64(300) / tensor` and `ndarray * tensor` to the tensor's reflected operator, as for torch's
    # tensors; without it numpy read the C++ engine's tensor through __array__ and returned numpy's float64
    Tensor.__array_priority__ = 1000
    fallbacks = {}
    implementations = {}                  # the row's own function behind each fallback
    hot_names = set(_C._fast_path_names())
    canonical_inplace = {}                         # id(impl) -> the in-place name of its first row
    for row in table.rows():
        own = _resolve(row)
        obj = with_policy(row.name, own)      # torch's autocast policy, if the row has one (Note [Autocast wrappers])
        # the one wrapper (Note [One dispatch wrapper], dispatch.py): meta tensors take their shape rules (Note [Meta
        # tensors], meta.py) unless the core implements the row; vmap sees the call (Note [Batching at the public
        # API]) unless it is a property; F.unfold is not Tensor.unfold, masked.sum not sum
        own_code = row.impl != "core" and not row.impl.startswith("core:")
        if own_code and row.impl == "ops.pointwise.UNARY_PRIMITIVES":
            register_unary([row.name])
        key = None
        if "prop" not in row.kinds:
            key = row.name if set(row.kinds) & {"fn", "method", "op"} else row.kinds[0] + "." + row.name
        plain = obj
        obj = public(obj, meta_name=row.name if own_code else None, batch_key=key)
        function = with_out(obj, row.name) if "out" in row.kinds else obj   # torch's out= on the function
        if "prop" in row.kinds and "fn" in row.kinds:      # dyngrad.real(x) is a call vmap sees; x.real is not
            function = public(plain, meta_name=row.name if own_code else None, batch_key=row.name)
        for kind in row.kinds:
            if kind == "out":
                continue
            if kind == "linalg":
                LINALG[row.name] = with_out(obj, "linalg." + row.name) if "out" in row.kinds else obj
                continue
            if kind == "masked":
                MASKED[row.name] = obj
                continue
            if kind == "fft":
                FFT[row.name] = with_out(obj, "fft." + row.name) if "out" in row.kinds else obj
                continue
            if kind == "windows":
                WINDOWS[row.name] = obj
                continue
            if row.impl == "core" and kind in ("method", "prop"):
                if not hasattr(Tensor, row.name):
                    raise AttributeError(f"api table: the engine core's Tensor has no {row.name!r}")
                continue
            if obj is None:
                raise AttributeError(f"api table: {row.impl} has nothing called {row.name!r}")
            if kind == "fn":
                namespace[row.name] = function
            elif kind == "F":
                FUNCTIONAL[row.name] = obj
            elif kind == "special":
                SPECIAL[row.name] = function
            elif kind == "prop":
                setter = _setter(row)
                setattr(Tensor, row.name, property(obj, setter))
            else:                                  # method, op
                setattr(Tensor, row.name, obj)
                METHODS[row.name] = obj            # vmap's methods of a BatchedTensor, behind any fast path
            if kind == "special":
                continue
            key = row.name if kind in ("fn", "F") else "Tensor." + row.name
            if row.hot and key in hot_names and key not in fallbacks:
                fallbacks[key] = function if kind in ("fn", "F") else obj
                implementations[key] = obj
        if row.inplace:
            # an alias's in-place method records as the first one of the same implementation (greater_ as gt_:
            # GtBackward, a zero gradient), while its errors name the alias
            records_as = canonical_inplace.setdefault(id(own), row.inplace)
            method = public(inplace_variant(own, row.inplace, records_as), meta_name=row.inplace,
                            batch_key=row.inplace, inplace=True)
            setattr(Tensor, row.inplace, method)
            if row.hot and "Tensor." + row.inplace in hot_names:
                fallbacks["Tensor." + row.inplace] = method
    # Note [Fast paths] (csrc/bindings/fast_paths.cpp): the hot rows get C++ entry points in front of their Python
    # definitions; the reference engine returns none.
    docs = {key: _doc_with_signature(fallback, key) for key, fallback in fallbacks.items()}
    for name, fast in _C._install_fast_paths(fallbacks, docs).items():
        if name in namespace:
            namespace[name] = fast
        # only where nn.functional's NAME is the same function (F.relu, with inplace=, is not dyngrad.relu)
        if name in FUNCTIONAL and FUNCTIONAL[name] is implementations.get(name):
            FUNCTIONAL[name] = fast
