"""dyngrad.compile and the dyngrad.compiler namespace (torch.compile / torch.compiler's names).

Note [compile is the identity]
dyngrad is define-by-run by design: every op runs when its line runs and the graph is recorded as a side effect, so
there is no tracer, no graph capture and no code generator. `compile` therefore checks its arguments as torch does
(so a script with a typo in `mode=` fails here as it would under torch) and hands back the very function or module
it was given; the program computes the same numbers at the same speed as without it. `compiler.is_compiling()` is
always False, and `compiler.disable` returns its function unchanged.
"""
import inspect

_MODES = ("default", "lite", "reduce-overhead", "max-autotune-no-cudagraphs", "max-autotune")
# torch's registered backends (torch.compiler.list_backends(exclude_tags=())): all accepted, none changes anything
_BACKENDS = ("aot_eager", "aot_eager_decomp_partition", "aot_eager_default_partitioner", "aot_ts", "cudagraphs",
             "eager", "eager_debug", "eager_noexcept", "inductor", "invoke_subgraph", "openxla", "openxla_eval",
             "pre_dispatch_eager", "ts", "tvm")
_EXPERIMENTAL = ("aot_eager", "aot_eager_decomp_partition", "aot_eager_default_partitioner", "aot_ts", "eager",
                 "eager_debug", "eager_noexcept", "invoke_subgraph", "openxla_eval", "pre_dispatch_eager", "ts")
_default_backend = ["inductor"]


class InvalidBackend(RuntimeError):
    """An unknown backend name (torch._dynamo.exc.InvalidBackend, a RuntimeError)."""


def _check_compile_args(fullgraph, dynamic, backend, mode, options, disable):
    if mode is not None and options is not None:
        raise RuntimeError("compile: pass mode= or options=, not both.")
    if mode is not None and mode not in _MODES:
        raise RuntimeError(f"compile: unrecognized mode={mode!r}; expected one of {', '.join(_MODES)}.")
    if backend is None:
        backend = _default_backend[0]
    if isinstance(backend, str):
        if backend not in _BACKENDS:
            raise InvalidBackend(f"compile: invalid backend {backend!r}; dyngrad.compiler.list_backends() lists "
                                 f"the names torch accepts.")
    elif not callable(backend):
        raise InvalidBackend(f"compile: backend must be a name or a callable, got {type(backend).__name__}.")
    if options is not None and not isinstance(options, dict):
        raise TypeError(f"compile: options must be a dict, got {type(options).__name__}.")
    if not isinstance(disable, bool):
        raise TypeError(f"compile: disable must be a bool, got {type(disable).__name__}.")
    if not isinstance(fullgraph, bool):
        raise TypeError(f"compile: fullgraph must be a bool, got {type(fullgraph).__name__}.")
    if dynamic is not None and not isinstance(dynamic, bool):
        raise TypeError(f"compile: dynamic must be None or a bool, got {type(dynamic).__name__}.")


def compile(model=None, *, fullgraph=False, dynamic=None, backend=None, mode=None, options=None, name=None,
            disable=False, recompile_limit=None, isolate_recompiles=False, shapes_spec=None):
    """torch.compile's signature and argument checks; returns `model` itself (a function or an nn.Module).

    dyngrad runs eagerly by design (define-by-run: each op executes as its line runs), so there is nothing to
    compile: the result is the very object passed in, and it runs exactly as before, at the same speed. Used as
    `@compile` or `@compile(mode=...)` it decorates unchanged. A module also answers `._orig_mod` (itself), as
    torch's compiled module does. `mode` and `backend` are checked against torch's names
    (RuntimeError for an unknown mode, dyngrad.compiler.InvalidBackend, a RuntimeError, for an unknown backend), so
    a script that torch rejects is rejected here too. See Note [compile is the identity].
    """
    _check_compile_args(fullgraph, dynamic, backend, mode, options, disable)
    if model is None:
        def decorate(fn):
            return compile(fn, fullgraph=fullgraph, dynamic=dynamic, backend=backend, mode=mode, options=options,
                           name=name, disable=disable, recompile_limit=recompile_limit,
                           isolate_recompiles=isolate_recompiles, shapes_spec=shapes_spec)
        return decorate
    if not callable(model):
        raise TypeError(f"compile: expected a callable (a function or an nn.Module), got {type(model).__name__}.")
    if _is_module(model) and "_orig_mod" not in vars(model):
        # torch's compiled module keeps the original as ._orig_mod, and scripts save model._orig_mod.state_dict():
        # here the module is its own original (a plain attribute, not a registered submodule)
        object.__setattr__(model, "_orig_mod", model)
    return model


def _is_module(obj):
    """An nn.Module: nn/modules/module.py is above this layer, so its Module says so itself (a class attribute)."""
    return getattr(type(obj), "_compile_keeps_original", False) is True


def is_compiling():
    """False: dyngrad never traces (Note [compile is the identity])."""
    return False


def is_dynamo_compiling():
    """False: dyngrad never traces."""
    return False


def is_exporting():
    """False: dyngrad never exports a graph."""
    return False


def disable(fn=None, recursive=True, *, reason=None):
    """torch.compiler.disable: `fn` unchanged (nothing is ever compiled); usable as a decorator with or without
    arguments."""
    if fn is None:
        return lambda f: disable(f, recursive, reason=reason)
    if not callable(fn):
        raise TypeError(f"compiler.disable: expected a callable, got {type(fn).__name__}.")
    return fn


def reset():
    """Clears compilation caches: there are none."""


def allow_in_graph(fn):
    """Returns fn (there is no graph to allow it into)."""
    return fn


def assume_constant_result(fn):
    """Returns fn."""
    return fn


def list_backends(exclude_tags=("debug", "experimental")):
    """The backend names compile accepts (torch's), less the tagged ones, as torch.compiler.list_backends."""
    if exclude_tags is None:
        exclude_tags = ()
    names = [b for b in _BACKENDS if not ("experimental" in exclude_tags and b in _EXPERIMENTAL)
             and not ("debug" in exclude_tags and "debug" in b)]
    return sorted(names)


def get_default_backend():
    """The backend compile uses when given none."""
    return _default_backend[0]


def set_default_backend(backend):
    """Sets the backend name compile reports as default (validated; it changes nothing else)."""
    _check_compile_args(False, None, backend, None, None, False)
    _default_backend[0] = backend


def set_stance(stance="default", *, skip_guard_eval_unsafe=False, force_backend=None):
    """torch.compiler.set_stance: accepted and checked; a no-op under eager execution. Usable as a context manager
    or decorator like torch's."""
    stances = ("default", "force_eager", "eager_on_recompile", "fail_on_recompile", "eager_then_compile",
               "aot_eager_then_compile")
    if stance not in stances:
        raise RuntimeError(f"compiler.set_stance: unknown stance {stance!r}; expected one of {', '.join(stances)}.")
    return _Stance()


class _Stance:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def __call__(self, fn):
        return fn


def _module_compile(self, *args, **kwargs):
    """nn.Module.compile(*args, **kwargs): checks the arguments as dyngrad.compile does; the module keeps running
    eagerly (Note [compile is the identity])."""
    params = inspect.signature(compile).bind(self, *args, **kwargs).arguments
    params.pop("model")
    compile(self, **params)
