"""Module: the base class of layers and models, with torch.nn.Module's API and semantics (the containers
Sequential, ModuleList, ... are in container.py, as torch's).

A Module registers what is assigned to it: a Parameter goes to `_parameters`, a Module to `_modules`, a tensor
given to `register_buffer` to `_buffers`; assigning again to a registered name keeps its position (state_dict()
order is registration order, as in torch). Everything else (parameters(), state_dict(), train(), zero_grad(),
hooks, ...) walks that tree. Since dyngrad is define-by-run, `forward` is ordinary Python and may differ from call
to call.
"""
import functools
import inspect
import itertools
from collections import OrderedDict, abc, namedtuple

import numpy as np

from ... import Tensor, empty_like, no_grad, tensor
from ..._api.args import dtype_arg
from ..._api.compiling import _module_compile
from ..._api.device import (META, check_device, cuda_error, device as device_type, get_default_device, is_meta_device,
                            set_default_device)
from ..._api.meta import is_meta
from ..._user_frame import warn
from ..hooks import BackwardHook, HookDict, RemovableHandle
from ..parameter import Buffer, Parameter

__all__ = ["Module"]


class _IncompatibleKeys(namedtuple("IncompatibleKeys", ["missing_keys", "unexpected_keys"])):
    """What load_state_dict returns: (missing_keys, unexpected_keys), as torch's named tuple."""

    __slots__ = ()

    def __repr__(self):
        if not self.missing_keys and not self.unexpected_keys:
            return "<All keys matched successfully>"
        return super().__repr__()

    __str__ = __repr__


IncompatibleKeys = _IncompatibleKeys


def _addindent(s, num_spaces):
    lines = s.split("\n")
    if len(lines) == 1:
        return s
    return lines[0] + "\n" + "\n".join(num_spaces * " " + line for line in lines[1:])


def _float_dtype_arg(dtype, op):
    dt = dtype_arg(dtype, op)
    if not dt.is_floating_point:
        raise TypeError(f"nn.Module.{op} only accepts floating point dtypes, but got desired dtype={dt}")
    return dt


def _builds_on_meta(init):
    """A constructor taking torch's device= builds everything under the meta default device when device names
    "meta" (Note [Meta tensors] in _api/meta.py): its factories and the layers it makes are meta, whichever way it
    passes device on (or not)."""
    try:
        params = list(inspect.signature(init).parameters)
    except (TypeError, ValueError):
        return init
    if "device" not in params:
        return init
    position = params.index("device") - 1          # in args, which start after self

    @functools.wraps(init)
    def __init__(self, *args, **kwargs):
        if is_meta_device(kwargs.get("device")):
            kwargs["device"] = None
        elif 0 <= position < len(args) and is_meta_device(args[position]):
            args = args[:position] + (None,) + args[position + 1:]
        else:
            return init(self, *args, **kwargs)
        previous = get_default_device()
        set_default_device(META)
        try:
            init(self, *args, **kwargs)
        finally:
            set_default_device(previous)
    return __init__


class Module:
    """Base class for all layers and models: subclass it, assign layers/parameters in __init__, define forward."""

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if "__init__" in cls.__dict__:
            cls.__init__ = _builds_on_meta(cls.__dict__["__init__"])

    training: bool
    _version = 1
    call_super_init = False
    _compile_keeps_original = True      # dyngrad.compile(module) sets module._orig_mod (_api/compiling.py)

    def __init__(self, *args, **kwargs):
        if args or kwargs:
            raise TypeError(f"{type(self).__name__}.__init__() got unexpected arguments: Module.__init__ takes none")
        # object.__setattr__: our own __setattr__ needs these dicts to exist
        setattr_ = object.__setattr__
        setattr_(self, "training", True)
        setattr_(self, "_parameters", OrderedDict())
        setattr_(self, "_buffers", OrderedDict())
        setattr_(self, "_non_persistent_buffers_set", set())
        setattr_(self, "_backward_pre_hooks", HookDict())
        setattr_(self, "_backward_hooks", HookDict())
        setattr_(self, "_is_full_backward_hook", None)
        setattr_(self, "_forward_hooks", HookDict())
        setattr_(self, "_forward_hooks_with_kwargs", HookDict())
        setattr_(self, "_forward_hooks_always_called", HookDict())
        setattr_(self, "_forward_pre_hooks", HookDict())
        setattr_(self, "_forward_pre_hooks_with_kwargs", HookDict())
        setattr_(self, "_modules", OrderedDict())

    def forward(self, *args, **kwargs):
        raise NotImplementedError(f'Module [{type(self).__name__}] is missing the required "forward" function')

    # ----- calling ----------------------------------------------------------------------------------------------
    def __call__(self, *args, **kwargs):
        compiled = self.__dict__.get("_compiled_call")     # Module.compile(mode="reduce-overhead")
        if compiled is not None:
            return compiled(args, kwargs)
        return self._call_impl(*args, **kwargs)

    def _call_impl(self, *args, **kwargs):
        if not (self._forward_hooks or self._forward_pre_hooks or self._backward_hooks or self._backward_pre_hooks):
            return self.forward(*args, **kwargs)
        return self._call_with_hooks(args, kwargs)

    def compile(self, *args, **kwargs):
        """torch's Module.compile: compiles the module in place with dyngrad.compile's arguments (Note [Two modes of
        compile] in _api/compiling.py). Returns None."""
        _module_compile(self, *args, **kwargs)

    def _call_with_hooks(self, args, kwargs):
        """torch's Module._call_impl: forward pre-hooks, the backward hooks' input side, forward, forward hooks,
        the backward hooks' output side."""
        for hook_id, hook in list(self._forward_pre_hooks.items()):
            if hook_id in self._forward_pre_hooks_with_kwargs:
                result = hook(self, args, kwargs)
                if result is not None:
                    if not (isinstance(result, tuple) and len(result) == 2):
                        raise RuntimeError("forward pre-hook must return None or a tuple of (new_args, new_kwargs), "
                                           f"but got {result}.")
                    args, kwargs = result
            else:
                result = hook(self, args)
                if result is not None:
                    args = result if isinstance(result, tuple) else (result,)
        backward_hook = None
        if self._backward_hooks or self._backward_pre_hooks:
            backward_hook = BackwardHook(self, list(self._backward_hooks.values()),
                                         list(self._backward_pre_hooks.values()))
            args = backward_hook.setup_input_hook(args)
        called = set()
        try:
            result = self.forward(*args, **kwargs)
            for hook_id, hook in list(self._forward_hooks.items()):
                called.add(hook_id)
                if hook_id in self._forward_hooks_with_kwargs:
                    hook_result = hook(self, args, kwargs, result)
                else:
                    hook_result = hook(self, args, result)
                if hook_result is not None:
                    result = hook_result
        except Exception:
            for hook_id, hook in list(self._forward_hooks.items()):      # always_call=True hooks still run
                if hook_id in self._forward_hooks_always_called and hook_id not in called:
                    try:
                        if hook_id in self._forward_hooks_with_kwargs:
                            hook(self, args, kwargs, None)
                        else:
                            hook(self, args, None)
                    except Exception as e:  # noqa: BLE001  as torch: warn and re-raise the original error
                        warn(f"forward hook with ``always_call=True`` raised an exception that was "
                             f"silenced as another error was raised in forward: {e}")
            raise
        if backward_hook is not None:
            if not isinstance(result, (Tensor, tuple)):
                warn("For backward hooks to be called, module output should be a Tensor or a tuple of "
                     f"Tensors but received {type(result)}")
            else:
                result = backward_hook.setup_output_hook(result)
        return result

    # ----- registration -----------------------------------------------------------------------------------------
    def __setattr__(self, name, value):
        def remove_from(*dicts_or_sets):
            for d in dicts_or_sets:
                if name in d:
                    if isinstance(d, dict):
                        del d[name]
                    else:
                        d.discard(name)

        params = self.__dict__.get("_parameters")
        if isinstance(value, Parameter):
            if params is None:
                raise AttributeError("cannot assign parameters before Module.__init__() call")
            remove_from(self.__dict__, self._buffers, self._modules, self._non_persistent_buffers_set)
            self.register_parameter(name, value)
        elif params is not None and name in params:
            if value is not None:
                raise TypeError(f"cannot assign '{type(value).__module__}.{type(value).__name__}' as parameter "
                                f"'{name}' (dyngrad.nn.Parameter or None expected)")
            self.register_parameter(name, value)
        else:
            modules = self.__dict__.get("_modules")
            if isinstance(value, Module):
                if modules is None:
                    raise AttributeError("cannot assign module before Module.__init__() call")
                remove_from(self.__dict__, self._parameters, self._buffers, self._non_persistent_buffers_set)
                modules[name] = value
            elif modules is not None and name in modules:
                if value is not None:
                    raise TypeError(f"cannot assign '{type(value).__module__}.{type(value).__name__}' as child "
                                    f"module '{name}' (dyngrad.nn.Module or None expected)")
                modules[name] = value
            else:
                buffers = self.__dict__.get("_buffers")
                if isinstance(value, Buffer) or (buffers is not None and name in buffers):
                    if buffers is None:
                        raise AttributeError("cannot assign buffer before Module.__init__() call")
                    if value is not None and not isinstance(value, (Tensor, Buffer)):
                        raise TypeError(f"cannot assign '{type(value).__module__}.{type(value).__name__}' as buffer "
                                        f"'{name}' (dyngrad.nn.Buffer, dyngrad.Tensor or None expected)")
                    if isinstance(value, Buffer):
                        persistent, value = value.persistent, value.data
                    else:
                        persistent = name not in self._non_persistent_buffers_set
                    remove_from(self.__dict__, self._parameters, self._modules)
                    self.register_buffer(name, value, persistent)
                else:
                    object.__setattr__(self, name, value)

    def __getattr__(self, name):
        # only called when normal lookup fails: look in the registries
        d = self.__dict__
        for registry in ("_parameters", "_buffers", "_modules"):
            if registry in d and name in d[registry]:
                return d[registry][name]
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def __delattr__(self, name):
        if name in self._parameters:
            del self._parameters[name]
        elif name in self._buffers:
            del self._buffers[name]
            self._non_persistent_buffers_set.discard(name)
        elif name in self._modules:
            del self._modules[name]
        else:
            object.__delattr__(self, name)

    def __dir__(self):
        keys = set(super().__dir__()) | set(self._parameters) | set(self._buffers) | set(self._modules)
        return sorted(k for k in keys if not k[0].isdigit())

    def _check_new_name(self, name, registry, what):
        if "_parameters" not in self.__dict__:
            raise AttributeError(f"cannot assign {what} before Module.__init__() call")
        if not isinstance(name, str):
            raise TypeError(f"{what} name should be a string. Got {type(name).__name__}")
        if "." in name:
            raise KeyError(f'{what} name can\'t contain "."')
        if name == "":
            raise KeyError(f'{what} name can\'t be empty string ""')
        if hasattr(self, name) and name not in registry:
            raise KeyError(f"attribute '{name}' already exists")

    def register_parameter(self, name, param):
        """Adds a parameter (or None) under `name`; assigning a Parameter attribute does the same."""
        self._check_new_name(name, self.__dict__.get("_parameters", {}), "parameter")
        if param is None:
            self._parameters[name] = None
        elif not isinstance(param, Parameter):
            raise TypeError(f"cannot assign '{type(param).__module__}.{type(param).__name__}' object to parameter "
                            f"'{name}' (dyngrad.nn.Parameter or None required)")
        elif param.grad_fn is not None:
            raise ValueError(f"Cannot assign non-leaf Tensor to parameter '{name}'. Model parameters must be created "
                             "explicitly. To express '{name}' as a function of another Tensor, compute the value in "
                             "the forward() method.")
        else:
            self._parameters[name] = param

    def register_buffer(self, name, tensor, persistent=True):
        """A tensor that is part of the module's state but not a parameter (BatchNorm's running mean); a buffer
        with persistent=False is left out of state_dict()."""
        self._check_new_name(name, self.__dict__.get("_buffers", {}), "buffer")
        if tensor is not None and not isinstance(tensor, Tensor):
            raise TypeError(f"cannot assign '{type(tensor).__module__}.{type(tensor).__name__}' object to buffer "
                            f"'{name}' (dyngrad Tensor or None required)")
        self._buffers[name] = tensor
        if persistent:
            self._non_persistent_buffers_set.discard(name)
        else:
            self._non_persistent_buffers_set.add(name)

    def add_module(self, name, module):
        if module is not None and not isinstance(module, Module):
            raise TypeError(f"{type(module).__module__}.{type(module).__name__} is not a Module subclass")
        self._check_new_name(name, self.__dict__.get("_modules", {}), "module")
        self._modules[name] = module

    def register_module(self, name, module):
        self.add_module(name, module)

    # ----- lookup by dotted name --------------------------------------------------------------------------------
    def get_submodule(self, target):
        if target == "":
            return self
        mod = self
        for item in target.split("."):
            if not hasattr(mod, item):
                raise AttributeError(mod._get_name() + " has no attribute `" + item + "`")
            mod = getattr(mod, item)
            if not isinstance(mod, Module):
                raise AttributeError("`" + item + "` is not an nn.Module")
        return mod

    def _get_member(self, target, is_kind, kind):
        """get_parameter / get_buffer: the attribute at the dotted path, if it is of the asked kind."""
        module_path, _, name = target.rpartition(".")
        mod = self.get_submodule(module_path)
        if not hasattr(mod, name):
            raise AttributeError(mod._get_name() + " has no attribute `" + name + "`")
        value = getattr(mod, name)
        if not is_kind(mod, name, value):
            raise AttributeError("`" + name + "` is not " + kind)
        return value

    def get_parameter(self, target):
        return self._get_member(target, lambda mod, name, value: isinstance(value, Parameter), "an nn.Parameter")

    def get_buffer(self, target):
        return self._get_member(target, lambda mod, name, value: name in mod._buffers, "a buffer")

    # ----- traversal --------------------------------------------------------------------------------------------
    def named_modules(self, memo=None, prefix="", remove_duplicate=True):
        """(name, module) for self and every submodule, pre-order; a module reached twice is listed once unless
        remove_duplicate=False."""
        # iterative (deep dynamic models should not hit the recursion limit)
        memo = set() if memo is None else memo
        stack = [(prefix, self)]
        while stack:
            name, mod = stack.pop()
            if mod in memo:
                continue
            if remove_duplicate:
                memo.add(mod)
            yield name, mod
            children = [(name + ("." if name else "") + k, m) for k, m in mod._modules.items() if m is not None]
            stack.extend(reversed(children))

    def modules(self):
        for _, m in self.named_modules():
            yield m

    def named_children(self):
        memo = set()
        for name, m in self._modules.items():
            if m is not None and m not in memo:
                memo.add(m)
                yield name, m

    def children(self):
        for _, m in self.named_children():
            yield m

    def _named_members(self, get_members, prefix="", recurse=True, remove_duplicate=True):
        memo = set()
        mods = self.named_modules(prefix=prefix, remove_duplicate=remove_duplicate) if recurse else [(prefix, self)]
        for mod_prefix, mod in mods:
            for name, value in get_members(mod):
                if value is None or value in memo:
                    continue
                if remove_duplicate:
                    memo.add(value)
                yield mod_prefix + ("." if mod_prefix else "") + name, value

    def named_parameters(self, prefix="", recurse=True, remove_duplicate=True):
        yield from self._named_members(lambda m: m._parameters.items(), prefix, recurse, remove_duplicate)

    def parameters(self, recurse=True):
        for _, p in self.named_parameters(recurse=recurse):
            yield p

    def named_buffers(self, prefix="", recurse=True, remove_duplicate=True):
        yield from self._named_members(lambda m: m._buffers.items(), prefix, recurse, remove_duplicate)

    def buffers(self, recurse=True):
        for _, b in self.named_buffers(recurse=recurse):
            yield b

    def apply(self, fn):
        """Calls fn on every submodule (children first) and then on self, as torch does (e.g. custom init)."""
        for m in self.children():
            m.apply(fn)
        fn(self)
        return self

    # ----- modes and gradients ----------------------------------------------------------------------------------
    def train(self, mode=True):
        if not isinstance(mode, bool):
            raise ValueError("training mode is expected to be boolean")
        self.training = mode
        for m in self.children():
            m.train(mode)
        return self

    def eval(self):
        return self.train(False)

    def requires_grad_(self, requires_grad=True):
        for p in self.parameters():
            p.requires_grad_(requires_grad)
        return self

    def zero_grad(self, set_to_none=True):
        for p in self.parameters():
            if p.grad is None:
                continue
            if set_to_none:
                p.grad = None
            else:
                with no_grad():
                    p.grad.zero_()

    # ----- dtype and device -------------------------------------------------------------------------------------
    def _apply(self, fn):
        """fn applied to every parameter, gradient and buffer, in place on the same Parameter objects (like torch,
        so that an optimiser built earlier keeps working); a parameter moving to or from the meta device becomes a
        new Parameter, as torch's does when the tensor types differ."""
        with no_grad():
            for m in self.modules():
                for name, p in m._parameters.items():
                    if p is not None:
                        new = fn(p.data)
                        grad = None if p.grad is None else fn(p.grad)
                        if is_meta(new) != is_meta(p):
                            m._parameters[name] = p = Parameter(new, p.requires_grad)
                        else:
                            p.data = new
                        if grad is not None:
                            p.grad = grad
                for name, b in m._buffers.items():
                    if b is not None:
                        m._buffers[name] = fn(b)
        return self

    def to(self, *args, **kwargs):
        """to(device), to(dtype), to(tensor), to(device, dtype): floating-point parameters and buffers take the
        dtype (a device other than the CPU raises, naming it)."""
        device, dtype = kwargs.pop("device", None), kwargs.pop("dtype", None)
        kwargs.pop("non_blocking", None)
        kwargs.pop("memory_format", None)
        if kwargs:
            raise TypeError(f"to() received an invalid keyword argument '{next(iter(kwargs))}'")
        for arg in args:
            if isinstance(arg, Tensor):
                dtype = arg.dtype
            elif isinstance(arg, (str, device_type)) or (isinstance(arg, int) and not isinstance(arg, bool)):
                device = arg
            elif isinstance(arg, bool):
                continue                     # non_blocking
            elif arg is not None:
                dtype = arg
        dt = None if dtype is None else _float_dtype_arg(dtype, "to")
        if is_meta_device(device):
            return self._apply(lambda t: t.to("meta", dtype=dt if dt is not None and t.is_floating_point() else None))
        check_device(device, "Module.to")
        if device is not None and any(is_meta(t) for t in itertools.chain(self.parameters(), self.buffers())):
            raise NotImplementedError(f"{self._get_name()}.to({str(device)!r}): cannot copy out of meta tensors: "
                                      "they have no data. Use Module.to_empty(device=...) to give the module "
                                      "memory, then load its weights (load_state_dict).")
        if dt is None:
            return self
        return self._apply(lambda t: t.to(dt) if t.is_floating_point() else t)

    def to_empty(self, *, device, recurse=True):
        """Every parameter and buffer replaced by an uninitialised tensor of its shape and dtype on `device` (how a
        module built on the meta device gets memory; then load_state_dict or an init fills it)."""
        if not recurse:
            raise NotImplementedError("Module.to_empty(recurse=False) is not supported: dyngrad applies it to "
                                      "every submodule.")
        if not is_meta_device(device):
            check_device(device, "Module.to_empty")
        return self._apply(lambda t: empty_like(t, device=device))

    def double(self):
        return self._apply(lambda t: t.double() if t.is_floating_point() else t)

    def float(self):
        return self._apply(lambda t: t.float() if t.is_floating_point() else t)

    def type(self, dst_type):
        return self._apply(lambda t: t.type(dst_type))

    def cpu(self):
        return self

    def cuda(self, device=None):
        raise cuda_error(f"{self._get_name()}.cuda()")

    # ----- state dicts ------------------------------------------------------------------------------------------
    def _save_to_state_dict(self, destination, prefix, keep_vars):
        for name, p in self._parameters.items():
            if p is not None:
                destination[prefix + name] = p if keep_vars else p.detach()
        for name, b in self._buffers.items():
            if b is not None and name not in self._non_persistent_buffers_set:
                destination[prefix + name] = b if keep_vars else b.detach()

    def state_dict(self, *args, destination=None, prefix="", keep_vars=False):
        """An OrderedDict of name -> tensor for every parameter and persistent buffer (torch's names and order:
        each module's own parameters and buffers, then its children's; a module reached twice appears twice).

        The tensors share memory with the module's (detached unless keep_vars=True): copy them if you need a
        snapshot, e.g. `{k: v.clone() for k, v in m.state_dict().items()}`.
        """
        if args:                          # torch's deprecated positional form: (destination, prefix, keep_vars)
            destination, prefix, keep_vars = (list(args) + [destination, prefix, keep_vars][len(args):])[:3]
        destination = OrderedDict() if destination is None else destination
        stack = [(prefix, self)]          # iterative pre-order, as torch's recursion visits it
        while stack:
            mod_prefix, mod = stack.pop()
            mod._save_to_state_dict(destination, mod_prefix, keep_vars)
            stack.extend(reversed([(mod_prefix + name + ".", child) for name, child in mod._modules.items()
                                   if child is not None]))
        return destination

    def _load_from_state_dict(self, state_dict, prefix, assign, missing_keys, unexpected_keys, error_msgs):
        persistent = {k: v for k, v in self._buffers.items() if k not in self._non_persistent_buffers_set}
        local_state = {k: v for k, v in itertools.chain(self._parameters.items(), persistent.items()) if v is not None}
        for name, param in local_state.items():
            key = prefix + name
            if key not in state_dict:
                missing_keys.append(key)
                continue
            value = state_dict[key]
            if not isinstance(value, Tensor) and not hasattr(value, "__array__"):
                error_msgs.append(f'While copying the parameter named "{key}", expected a Tensor or Tensor-like '
                                  f"object from checkpoint but received {type(value)}")
                continue
            src = _as_engine_tensor(value, param)
            if tuple(src.shape) != tuple(param.shape):
                error_msgs.append(f"size mismatch for {key}: copying a param with shape {src.shape} from "
                                  f"checkpoint, the shape in current model is {param.shape}.")
                continue
            if is_meta(param) and not assign and not is_meta(src):
                warn(f"for {key}: copying from a non-meta parameter in the checkpoint to a meta parameter in the "
                     "current model, which is a no-op. (Did you mean to pass `assign=True` to assign items in the "
                     "state dictionary to their corresponding key in the module instead of copying them in place?)")
            if assign:
                if isinstance(param, Parameter):
                    src = src if isinstance(src, Parameter) else Parameter(src, requires_grad=param.requires_grad)
                    src.requires_grad_(param.requires_grad)
                setattr(self, name, src)
            else:
                with no_grad():
                    param.copy_(src)
        for key in state_dict:
            if key.startswith(prefix):
                input_name = key[len(prefix):].split(".", 1)
                if len(input_name) > 1:
                    if input_name[0] not in self._modules:
                        unexpected_keys.append(key)
                elif input_name[0] not in local_state:
                    unexpected_keys.append(key)

    def load_state_dict(self, state_dict, strict=True, assign=False):
        """Copies tensors (dyngrad tensors, numpy arrays or anything with __array__, such as torch tensors) into
        this module's parameters and persistent buffers (assign=True: makes them the module's tensors instead).

        Returns (missing_keys, unexpected_keys); with strict=True those raise, as shape mismatches always do."""
        if not isinstance(state_dict, abc.Mapping):
            raise TypeError(f"Expected state_dict to be dict-like, got {type(state_dict)}.")
        missing_keys, unexpected_keys, error_msgs = [], [], []
        stack = [(self, "")]
        while stack:
            module, prefix = stack.pop()
            module._load_from_state_dict(state_dict, prefix, assign, missing_keys, unexpected_keys, error_msgs)
            stack.extend(reversed([(child, prefix + name + ".") for name, child in module._modules.items()
                                   if child is not None]))
        if strict:
            if unexpected_keys:
                error_msgs.insert(0, "Unexpected key(s) in state_dict: {}. ".format(
                    ", ".join(f'"{k}"' for k in unexpected_keys)))
            if missing_keys:
                error_msgs.insert(0, "Missing key(s) in state_dict: {}. ".format(
                    ", ".join(f'"{k}"' for k in missing_keys)))
        if error_msgs:
            raise RuntimeError("Error(s) in loading state_dict for {}:\n\t{}".format(
                type(self).__name__, "\n\t".join(error_msgs)))
        return _IncompatibleKeys(missing_keys, unexpected_keys)

    # ----- hooks ------------------------------------------------------------------------------------------------
    def register_forward_pre_hook(self, hook, *, prepend=False, with_kwargs=False):
        """hook(module, args) runs before forward; a non-None return replaces args (a single value is wrapped in a
        tuple). with_kwargs=True: hook(module, args, kwargs) returning None or (args, kwargs)."""
        handle = RemovableHandle(self._forward_pre_hooks, extra_dict=self._forward_pre_hooks_with_kwargs)
        self._forward_pre_hooks[handle.id] = hook
        if with_kwargs:
            self._forward_pre_hooks_with_kwargs[handle.id] = True
        if prepend:
            self._forward_pre_hooks.move_to_end(handle.id, last=False)
        return handle

    def register_forward_hook(self, hook, *, prepend=False, with_kwargs=False, always_call=False):
        """hook(module, args, output) runs after forward; a non-None return replaces the output.
        with_kwargs=True: hook(module, args, kwargs, output); always_call=True: also runs if forward raised."""
        handle = RemovableHandle(self._forward_hooks, extra_dict=[self._forward_hooks_with_kwargs,
                                                                  self._forward_hooks_always_called])
        self._forward_hooks[handle.id] = hook
        if with_kwargs:
            self._forward_hooks_with_kwargs[handle.id] = True
        if always_call:
            self._forward_hooks_always_called[handle.id] = True
        if prepend:
            self._forward_hooks.move_to_end(handle.id, last=False)
        return handle

    def register_full_backward_pre_hook(self, hook, prepend=False):
        """hook(module, grad_output) runs when the gradients of the module's outputs are known; a non-None return
        replaces grad_output."""
        handle = RemovableHandle(self._backward_pre_hooks)
        self._backward_pre_hooks[handle.id] = hook
        if prepend:
            self._backward_pre_hooks.move_to_end(handle.id, last=False)
        return handle

    def register_full_backward_hook(self, hook, prepend=False):
        """hook(module, grad_input, grad_output) runs when the gradients of the module's inputs are known
        (grad_input has a None for each argument that is not a tensor requiring grad); a non-None return replaces
        grad_input."""
        if self._is_full_backward_hook is False:
            raise RuntimeError("Cannot use both regular backward hooks and full backward hooks on a single Module. "
                               "Please use only one of them.")
        object.__setattr__(self, "_is_full_backward_hook", True)
        handle = RemovableHandle(self._backward_hooks)
        self._backward_hooks[handle.id] = hook
        if prepend:
            self._backward_hooks.move_to_end(handle.id, last=False)
        return handle

    def register_backward_hook(self, hook):
        """Deprecated in torch for register_full_backward_hook. Here it runs as a full backward hook: torch's old
        variant reported the gradients of the last op inside forward, which torch itself warns is wrong whenever
        forward runs more than one op."""
        if self._is_full_backward_hook is True:
            raise RuntimeError("Cannot use both regular backward hooks and full backward hooks on a single Module. "
                               "Please use only one of them.")
        object.__setattr__(self, "_is_full_backward_hook", False)
        handle = RemovableHandle(self._backward_hooks)
        self._backward_hooks[handle.id] = hook
        return handle

    # ----- printing ---------------------------------------------------------------------------------------------
    def extra_repr(self):
        return ""

    def _get_name(self):
        return type(self).__name__

    def __repr__(self):
        extra = self.extra_repr()
        extra_lines = extra.split("\n") if extra else []
        child_lines = [f"({key}): {_addindent(repr(module), 2)}" for key, module in self._modules.items()]
        lines = extra_lines + child_lines
        main = self._get_name() + "("
        if lines:
            if len(extra_lines) == 1 and not child_lines:      # the one-line form most layers use
                main += extra_lines[0]
            else:
                main += "\n  " + "\n  ".join(lines) + "\n"
        return main + ")"


# The errors a layer's functional op raises for a bad input; re-raised naming the layer (layer_error).
LAYER_ERRORS = (RuntimeError, ValueError, IndexError, TypeError)


def layer_error(module, err):
    """err, raised by the functional op a layer's forward called, as the same exception naming the layer first as
    repr shows it, so that the message says which layer of a model refused its input: `Linear(in_features=3,
    out_features=4, bias=True): linear: the input (2, 5) has 5 features...` rather than the op alone. A message
    that names the layer's class already (`LSTM: Expected input to be 2D...`) gets the configuration in its place.
    Subclasses of these exception types keep their own (their constructors may take other arguments)."""
    if type(err) not in LAYER_ERRORS:
        return err
    name, message = module._get_name(), str(err)
    extra = module.extra_repr()
    described = f"{name}({extra})" if extra and "\n" not in extra else name
    if message.startswith(name + ":"):
        message = message[len(name) + 1:].lstrip()
    return type(err)(f"{described}: {message}").with_traceback(err.__traceback__)


def _as_engine_tensor(value, like):
    """A tensor of like's engine and dtype from a tensor, numpy array or anything with __array__ (load_state_dict
    accepts torch's tensors and numpy arrays)."""
    if isinstance(value, Tensor):
        return value if value.dtype == like.dtype else value.to(like.dtype)
    return tensor(np.asarray(value), dtype=like.dtype)


# ----- containers ------------------------------------------------------------------------------------------------
