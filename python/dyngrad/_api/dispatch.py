"""The one wrapper between a public name and its Python definition (Note [One dispatch wrapper]).

Note [One dispatch wrapper]: install() passes every function, nn.functional function, method, operator, in-place
variant and torch.masked function of the table through public() once. The wrapper decides, in this order:
- vmap: while a vmap runs (batching.STATE.active) the call goes to vmap's dispatcher (Note [Batching at the public
  API] in batching.py), which receives the definition still deciding the meta device, so that a rule or the loop
  fallback that calls it on physical tensors gets meta tensors' shape rules too;
- the meta device (Note [Meta tensors] in meta.py): a call that involves it goes to meta_call (an in-place variant
  to meta's in-place rule);
- otherwise the definition itself.
Until a vmap runs or the meta device is first used, a call costs one Python frame and two flag tests (it was two
frames, one per concern: bench/dispatch_wrapper.py). The hot rows' C++ fast paths sit in front of it and hand
it only the calls they do not take (Note [Fast paths]); the core's own methods and the properties' getters that
vmap does not see are not wrapped for batching."""
import functools
import types

from . import meta
from .batching import STATE
from .device import META_LIVE as _live, default_is_meta, is_meta_device


def public(fn, meta_name=None, batch_key=None, inplace=False):
    """fn behind the one wrapper: `meta_name`, the name the meta device's rules know it by (None: no meta check);
    `batch_key`, the name vmap's rules know it by (None: vmap does not see it); `inplace`, an in-place variant
    (a write into a meta tensor is meta's in-place rule)."""
    if meta_name is not None and (fn is None or not callable(fn) or isinstance(fn, type)):
        meta_name = None
    if batch_key is not None and meta_name is None and not isinstance(fn, types.FunctionType):
        batch_key = None                 # a builtin (the core's): vmap's dispatcher calls it by name per row
    if meta_name is None and batch_key is None:
        return fn
    if meta_name is None:
        direct = fn
    elif inplace:
        direct = _meta_inplace(fn, meta_name)
    else:
        direct = _meta(fn, meta_name)
    if batch_key is None:
        return direct
    if meta_name is None:
        @functools.wraps(fn)
        def call(*args, **kwargs):
            if STATE.active:
                return STATE.dispatch(batch_key, fn, args, kwargs)
            return fn(*args, **kwargs)
    elif inplace:
        name = meta_name

        @functools.wraps(fn)
        def call(*args, **kwargs):
            if STATE.active:
                return STATE.dispatch(batch_key, direct, args, kwargs)
            if _live[0] and meta._has_meta(args, kwargs):
                return meta._inplace(name, fn, args, kwargs)
            return fn(*args, **kwargs)
    else:
        name = meta_name
        factory = name in meta.FACTORIES or meta._takes_device(fn)
        converts = name == "to"

        @functools.wraps(fn)
        def call(*args, **kwargs):
            if STATE.active:
                return STATE.dispatch(batch_key, direct, args, kwargs)
            if _live[0]:
                if (meta._has_meta(args, kwargs) or meta._names_meta_device(args, kwargs) or
                        (factory and default_is_meta() and kwargs.get("device") is None)):
                    return meta.meta_call(name, fn, args, kwargs)
            elif (factory and kwargs and is_meta_device(kwargs.get("device")) or
                  converts and meta._names_meta_device(args, kwargs)):        # the first use of the meta device
                return meta.meta_call(name, fn, args, kwargs)
            return fn(*args, **kwargs)
    call.__wrapped__ = direct            # what vmap's dispatcher runs for a BatchedTensor's method (vmap._method)
    call._batching_name = batch_key
    return call


def _meta(fn, name):
    """fn deciding the meta device only: what vmap's dispatcher calls, and the wrapper of the names vmap does not
    see (the properties' getters)."""
    factory = name in meta.FACTORIES or meta._takes_device(fn)
    converts = name == "to"

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        if _live[0]:
            if (meta._has_meta(args, kwargs) or meta._names_meta_device(args, kwargs) or
                    (factory and default_is_meta() and kwargs.get("device") is None)):
                return meta.meta_call(name, fn, args, kwargs)
        elif (factory and kwargs and is_meta_device(kwargs.get("device")) or
              converts and meta._names_meta_device(args, kwargs)):             # the first use of the meta device
            return meta.meta_call(name, fn, args, kwargs)
        return fn(*args, **kwargs)
    return wrapper


def _meta_inplace(fn, name):
    """An in-place variant deciding the meta device only: on a meta tensor the write is meta's rule."""
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        if _live[0] and meta._has_meta(args, kwargs):
            return meta._inplace(name, fn, args, kwargs)
        return fn(*args, **kwargs)
    return wrapper
