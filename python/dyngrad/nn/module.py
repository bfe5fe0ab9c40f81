"""Module: the base class of layers and models, and the containers Sequential, ModuleList, ModuleDict.

A Module registers what is assigned to it: a Parameter goes to `_parameters`, a Module to `_modules`, a tensor
given to `register_buffer` to `_buffers`. Everything else (parameters(), state_dict(), train(), zero_grad(), ...)
walks that tree. Since dyngrad is define-by-run, `forward` is ordinary Python and may differ from call to call.
"""
from collections import OrderedDict, namedtuple

from .. import Tensor, no_grad
from .parameter import Parameter, Buffer

IncompatibleKeys = namedtuple("IncompatibleKeys", ["missing_keys", "unexpected_keys"])


class RemovableHandle:
    """Returned by register_forward_hook; `remove()` unregisters the hook."""

    _next_id = 0

    def __init__(self, hooks):
        self.hooks = hooks
        self.id = RemovableHandle._next_id
        RemovableHandle._next_id += 1

    def remove(self):
        self.hooks.pop(self.id, None)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.remove()


class Module:
    """Base class for all layers and models: subclass it, assign layers/parameters in __init__, define forward."""

    training = True

    def __init__(self):
        # object.__setattr__: our own __setattr__ needs these dicts to exist
        object.__setattr__(self, "training", True)
        object.__setattr__(self, "_parameters", OrderedDict())
        object.__setattr__(self, "_buffers", OrderedDict())
        object.__setattr__(self, "_non_persistent_buffers", set())
        object.__setattr__(self, "_modules", OrderedDict())
        object.__setattr__(self, "_forward_hooks", OrderedDict())
        object.__setattr__(self, "_forward_pre_hooks", OrderedDict())

    def forward(self, *args, **kwargs):
        raise NotImplementedError(f'Module [{type(self).__name__}] is missing the required "forward" function')

    def __call__(self, *args, **kwargs):
        for hook in list(self._forward_pre_hooks.values()):
            new_args = hook(self, args)
            if new_args is not None:
                args = new_args if isinstance(new_args, tuple) else (new_args,)
        out = self.forward(*args, **kwargs)
        for hook in list(self._forward_hooks.values()):
            new_out = hook(self, args, out)
            if new_out is not None:
                out = new_out
        return out

    # ----- registration ---------------------------------------------------------------------------------
    def _check_init(self, what):
        if "_parameters" not in self.__dict__:
            raise AttributeError(f"cannot assign {what} before Module.__init__() call "
                                 f"(call super().__init__() first in {type(self).__name__}.__init__)")

    def __setattr__(self, name, value):
        params = self.__dict__.get("_parameters")
        if isinstance(value, Parameter):
            self._check_init("parameters")
            self._discard(name)
            params[name] = value
        elif isinstance(value, Module):
            self._check_init("module")
            self._discard(name)
            self._modules[name] = value
        elif isinstance(value, Buffer):
            self._check_init("buffer")
            self._discard(name)
            self.register_buffer(name, value.data, value.persistent)
        elif params is not None and name in params:
            if value is not None:
                raise TypeError(f"cannot assign '{type(value).__name__}' as parameter '{name}' "
                                "(dyngrad.nn.Parameter or None expected)")
            params[name] = None
        elif params is not None and name in self._modules:
            if value is not None:
                raise TypeError(f"cannot assign '{type(value).__name__}' as child module '{name}' "
                                "(dyngrad.nn.Module or None expected)")
            self._modules[name] = None
        elif params is not None and name in self._buffers:
            if value is not None and not isinstance(value, Tensor):
                raise TypeError(f"cannot assign '{type(value).__name__}' as buffer '{name}' "
                                "(dyngrad.Tensor or None expected)")
            self._buffers[name] = value
        else:
            object.__setattr__(self, name, value)

    def _discard(self, name):
        self.__dict__.pop(name, None)
        for d in (self._parameters, self._buffers, self._modules):
            d.pop(name, None)
        self._non_persistent_buffers.discard(name)

    def __getattr__(self, name):
        # only called when normal lookup fails: look in the registries
        d = self.__dict__
        for registry in ("_parameters", "_buffers", "_modules"):
            if registry in d and name in d[registry]:
                return d[registry][name]
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def __delattr__(self, name):
        for registry in (self._parameters, self._buffers, self._modules):
            if name in registry:
                del registry[name]
                self._non_persistent_buffers.discard(name)
                return
        object.__delattr__(self, name)

    def __dir__(self):
        return sorted(set(super().__dir__()) | set(self._parameters) | set(self._buffers) | set(self._modules))

    def register_parameter(self, name, param):
        self._check_init("parameters")
        if param is not None and not isinstance(param, Parameter):
            raise TypeError(f"register_parameter: cannot assign '{type(param).__name__}' as parameter '{name}' "
                            "(dyngrad.nn.Parameter or None expected)")
        self._check_name(name, "parameter")
        self._discard(name)
        self._parameters[name] = param

    def register_buffer(self, name, tensor, persistent=True):
        """A tensor that is part of the module's state but not a parameter (BatchNorm's running mean)."""
        self._check_init("buffer")
        if tensor is not None and not isinstance(tensor, Tensor):
            raise TypeError(f"register_buffer: cannot assign '{type(tensor).__name__}' as buffer '{name}' "
                            "(dyngrad.Tensor or None expected)")
        self._check_name(name, "buffer")
        self._discard(name)
        self._buffers[name] = tensor
        if not persistent:
            self._non_persistent_buffers.add(name)

    def add_module(self, name, module):
        self._check_init("module")
        if module is not None and not isinstance(module, Module):
            raise TypeError(f"add_module: {type(module).__name__} is not a Module subclass")
        self._check_name(name, "module")
        self._discard(name)
        self._modules[name] = module

    register_module = add_module

    @staticmethod
    def _check_name(name, what):
        if not isinstance(name, str):
            raise TypeError(f"{what} name should be a string, got {type(name).__name__}")
        if "." in name or name == "":
            raise KeyError(f"{what} name can't contain \".\" or be empty, got '{name}'")

    def get_submodule(self, target):
        mod = self
        for item in target.split(".") if target else []:
            if item not in mod._modules:
                raise AttributeError(f"{type(mod).__name__} has no submodule '{item}' (looking up '{target}')")
            mod = mod._modules[item]
        return mod

    def get_parameter(self, target):
        mod_path, _, name = target.rpartition(".")
        mod = self.get_submodule(mod_path)
        if name not in mod._parameters:
            raise AttributeError(f"{type(mod).__name__} has no parameter '{name}'")
        return mod._parameters[name]

    # ----- traversal -------------------------------------------------------------------------------------
    def named_modules(self, memo=None, prefix="", remove_duplicate=True):
        # iterative pre-order walk (deep dynamic models should not hit the recursion limit)
        memo = set() if memo is None else memo
        stack = [(prefix, self)]
        while stack:
            name, mod = stack.pop()
            if remove_duplicate:
                if id(mod) in memo:
                    continue
                memo.add(id(mod))
            yield name, mod
            children = [(name + ("." if name else "") + k, m) for k, m in mod._modules.items() if m is not None]
            stack.extend(reversed(children))

    def modules(self):
        for _, m in self.named_modules():
            yield m

    def named_children(self):
        seen = set()
        for name, m in self._modules.items():
            if m is not None and id(m) not in seen:
                seen.add(id(m))
                yield name, m

    def children(self):
        for _, m in self.named_children():
            yield m

    def _named_members(self, registry, prefix, recurse, remove_duplicate=True):
        seen = set()
        mods = self.named_modules(prefix=prefix, remove_duplicate=remove_duplicate) if recurse else [(prefix, self)]
        for mod_prefix, mod in mods:
            for name, value in getattr(mod, registry).items():
                if value is None or (remove_duplicate and id(value) in seen):
                    continue
                seen.add(id(value))
                yield mod_prefix + ("." if mod_prefix else "") + name, value

    def named_parameters(self, prefix="", recurse=True, remove_duplicate=True):
        yield from self._named_members("_parameters", prefix, recurse, remove_duplicate)

    def parameters(self, recurse=True):
        for _, p in self.named_parameters(recurse=recurse):
            yield p

    def named_buffers(self, prefix="", recurse=True, remove_duplicate=True):
        yield from self._named_members("_buffers", prefix, recurse, remove_duplicate)

    def buffers(self, recurse=True):
        for _, b in self.named_buffers(recurse=recurse):
            yield b

    def apply(self, fn):
        """Call fn on every submodule (children first) and then on self, as torch does (e.g. custom init)."""
        for m in self.children():
            m.apply(fn)
        fn(self)
        return self

    # ----- modes and gradients ---------------------------------------------------------------------------
    def train(self, mode=True):
        if not isinstance(mode, bool):
            raise ValueError(f"train: mode is expected to be a bool, got {type(mode).__name__}")
        for m in self.modules():
            object.__setattr__(m, "training", mode)
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

    # ----- dtype conversion ------------------------------------------------------------------------------
    def _apply_to_tensors(self, fn):
        # in place on the same Parameter objects (like torch), so an optimiser built earlier keeps working
        with no_grad():
            for m in self.modules():
                for p in m._parameters.values():
                    if p is not None:
                        p.data = fn(p.data)
                        if p.grad is not None:
                            p.grad = fn(p.grad)
                for name, b in m._buffers.items():
                    if b is not None and b.is_floating_point():
                        m._buffers[name] = fn(b)
        return self

    def to(self, dtype):
        return self._apply_to_tensors(lambda t: t.to(dtype))

    def double(self):
        return self._apply_to_tensors(lambda t: t.double())

    def float(self):
        return self._apply_to_tensors(lambda t: t.float())

    def cpu(self):
        return self

    # ----- state dicts -----------------------------------------------------------------------------------
    def state_dict(self, destination=None, prefix="", keep_vars=False):
        """An OrderedDict of name -> tensor for every parameter and persistent buffer (torch's names).

        The tensors share memory with the module's (detached unless keep_vars=True): copy them if you need a
        snapshot, e.g. `{k: v.clone() for k, v in m.state_dict().items()}`.
        """
        destination = OrderedDict() if destination is None else destination
        for mod_prefix, mod in self.named_modules(prefix=prefix.rstrip(".")):
            dot = mod_prefix + ("." if mod_prefix else "")
            for name, p in mod._parameters.items():
                if p is not None:
                    destination[dot + name] = p if keep_vars else p.detach()
            for name, b in mod._buffers.items():
                if b is not None and name not in mod._non_persistent_buffers:
                    destination[dot + name] = b if keep_vars else b.detach()
        return destination

    def load_state_dict(self, state_dict, strict=True):
        """Copy tensors (dyngrad tensors or numpy arrays) into this module's parameters and buffers.

        With strict=True, missing or unexpected keys raise; shape mismatches always raise. Returns
        (missing_keys, unexpected_keys).
        """
        own = self.state_dict(keep_vars=True)
        missing = [k for k in own if k not in state_dict]
        unexpected = [k for k in state_dict if k not in own]
        errors = []
        if strict and (missing or unexpected):
            if unexpected:
                errors.append("Unexpected key(s) in state_dict: " + ", ".join(f'"{k}"' for k in unexpected) + ".")
            if missing:
                errors.append("Missing key(s) in state_dict: " + ", ".join(f'"{k}"' for k in missing) + ".")
        pending = []
        for key, dst in own.items():
            if key not in state_dict:
                continue
            src = _as_engine_tensor(state_dict[key], dst)
            if tuple(src.shape) != tuple(dst.shape):
                errors.append(f'size mismatch for {key}: copying a param with shape {tuple(src.shape)} from '
                              f'checkpoint, the shape in current model is {tuple(dst.shape)}.')
            else:
                pending.append((dst, src))
        if errors:
            raise RuntimeError(f"Error(s) in loading state_dict for {type(self).__name__}:\n\t" + "\n\t".join(errors))
        with no_grad():
            for dst, src in pending:
                dst.copy_(src)
        return IncompatibleKeys(missing, unexpected)

    # ----- hooks -----------------------------------------------------------------------------------------
    def register_forward_hook(self, hook):
        """hook(module, args, output) runs after forward; a non-None return value replaces the output."""
        handle = RemovableHandle(self._forward_hooks)
        self._forward_hooks[handle.id] = hook
        return handle

    def register_forward_pre_hook(self, hook):
        """hook(module, args) runs before forward; a non-None return value replaces the args."""
        handle = RemovableHandle(self._forward_pre_hooks)
        self._forward_pre_hooks[handle.id] = hook
        return handle

    # ----- printing --------------------------------------------------------------------------------------
    def extra_repr(self):
        return ""

    def _get_name(self):
        return type(self).__name__

    def __repr__(self):
        lines = [line for line in self.extra_repr().split("\n") if line]
        for name, m in self._modules.items():
            child = repr(m).replace("\n", "\n  ")
            lines.append(f"({name}): {child}")
        if not self._modules:
            return f"{self._get_name()}({', '.join(lines)})" if len(lines) <= 1 else \
                f"{self._get_name()}(\n  " + "\n  ".join(lines) + "\n)"
        return f"{self._get_name()}(\n  " + "\n  ".join(lines) + "\n)"


def _as_engine_tensor(value, like):
    """A tensor of like's engine and dtype from a tensor, numpy array or nested list (for load_state_dict)."""
    from .. import tensor
    if isinstance(value, Tensor):
        return value if value.dtype == like.dtype else value.to(like.dtype)
    return tensor(value, dtype=like.dtype)


class Sequential(Module):
    """Modules applied one after the other: Sequential(Linear(2, 8), ReLU(), Linear(8, 1))."""

    def __init__(self, *args):
        super().__init__()
        if len(args) == 1 and isinstance(args[0], OrderedDict):
            for name, m in args[0].items():
                self.add_module(name, m)
        else:
            for i, m in enumerate(args):
                self.add_module(str(i), m)

    def forward(self, x):
        for m in self._modules.values():
            x = m(x)
        return x

    def _index(self, idx):
        n = len(self._modules)
        if not -n <= idx < n:
            raise IndexError(f"index {idx} is out of range for {type(self).__name__} of length {n}")
        return idx % n

    def __getitem__(self, idx):
        if isinstance(idx, slice):
            return type(self)(OrderedDict(list(self._modules.items())[idx]))
        return list(self._modules.values())[self._index(idx)]

    def __setitem__(self, idx, module):
        key = list(self._modules.keys())[self._index(idx)]
        self.add_module(key, module)

    def __delitem__(self, idx):
        keys = list(self._modules.keys())
        for key in (keys[idx] if isinstance(idx, slice) else [keys[self._index(idx)]]):
            del self._modules[key]

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules.values())

    def append(self, module):
        self.add_module(str(len(self)), module)
        return self

    def insert(self, index, module):
        mods = list(self._modules.values())
        mods.insert(index if index >= 0 else len(mods) + index, module)
        self._modules.clear()
        for i, m in enumerate(mods):
            self.add_module(str(i), m)
        return self


class ModuleList(Module):
    """A list of modules whose parameters are registered (a plain Python list would hide them)."""

    def __init__(self, modules=None):
        super().__init__()
        if modules is not None:
            self.extend(modules)

    def _index(self, idx):
        n = len(self._modules)
        if not -n <= idx < n:
            raise IndexError(f"index {idx} is out of range for ModuleList of length {n}")
        return idx % n

    def __getitem__(self, idx):
        if isinstance(idx, slice):
            return ModuleList(list(self._modules.values())[idx])
        return self._modules[str(self._index(idx))]

    def __setitem__(self, idx, module):
        self.add_module(str(self._index(idx)), module)

    def __delitem__(self, idx):
        mods = list(self._modules.values())
        del mods[idx]
        self._modules.clear()
        self.extend(mods)

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules.values())

    def __iadd__(self, modules):
        return self.extend(modules)

    def append(self, module):
        self.add_module(str(len(self)), module)
        return self

    def extend(self, modules):
        for m in modules:
            self.append(m)
        return self

    def insert(self, index, module):
        mods = list(self._modules.values())
        mods.insert(index, module)
        self._modules.clear()
        self.extend(mods)

    def forward(self, *args):
        raise NotImplementedError("ModuleList has no forward(); iterate over it in your own forward()")


class ModuleDict(Module):
    """A dict of modules whose parameters are registered, in insertion order."""

    def __init__(self, modules=None):
        super().__init__()
        if modules is not None:
            self.update(modules)

    def __getitem__(self, key):
        return self._modules[key]

    def __setitem__(self, key, module):
        self.add_module(key, module)

    def __delitem__(self, key):
        del self._modules[key]

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules)

    def __contains__(self, key):
        return key in self._modules

    def keys(self):
        return self._modules.keys()

    def items(self):
        return self._modules.items()

    def values(self):
        return self._modules.values()

    def pop(self, key):
        return self._modules.pop(key)

    def clear(self):
        self._modules.clear()

    def update(self, modules):
        items = modules.items() if hasattr(modules, "items") else modules
        for key, m in items:
            self[key] = m

    def forward(self, *args):
        raise NotImplementedError("ModuleDict has no forward(); index it in your own forward()")
