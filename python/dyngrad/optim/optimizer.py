"""Optimizer: parameter groups, per-parameter state, zero_grad, state_dict / load_state_dict.

Subclasses implement `_update_group(group, params, grads, states)`. Note [Fused optimiser steps]: on the C++ engine
a group's whole update is one call into a C++ kernel (`dyngrad._C._<name>_step`) that walks every parameter's
buffers in one loop, so a step costs one Python call per parameter group, not a dozen tensor ops per parameter.
The reference engine (and any tensor the kernel cannot take) runs the same update rule as in-place tensor ops.
Both follow torch's single-tensor update rules line by line.
"""
import functools
import importlib
from collections import OrderedDict, defaultdict

import numpy as np

from .. import Tensor, no_grad, enable_grad, tensor
from ..nn.hooks import HookDict, RemovableHandle


def _engine_kernels():
    """The engine's compiled extension (`_C`) if it has one; None on the reference engine."""
    root = importlib.import_module(__package__.rpartition(".")[0])
    return getattr(root, "_C", None)


_C = _engine_kernels()


class _RequiredParameter:
    def __repr__(self):
        return "<required parameter>"


required = _RequiredParameter()

# Hooks run around every optimizer's step (torch.optim.optimizer.register_optimizer_step_pre_hook / _post_hook).
_global_step_pre_hooks = HookDict()
_global_step_post_hooks = HookDict()


def register_optimizer_step_pre_hook(hook):
    """hook(optimizer, args, kwargs) -> None or (new_args, new_kwargs), before every optimizer's step."""
    handle = RemovableHandle(_global_step_pre_hooks)
    _global_step_pre_hooks[handle.id] = hook
    return handle


def register_optimizer_step_post_hook(hook):
    """hook(optimizer, args, kwargs) -> None, after every optimizer's step."""
    handle = RemovableHandle(_global_step_post_hooks)
    _global_step_post_hooks[handle.id] = hook
    return handle


def _with_step_hooks(step):
    """Wrap a step method so the global and per-optimizer step hooks run around it (once, even when a subclass's
    step calls super().step())."""
    if getattr(step, "_dg_hooked", False):
        return step

    @functools.wraps(step)
    def wrapper(self, *args, **kwargs):
        if getattr(self, "_in_step", False):
            return step(self, *args, **kwargs)
        for hook in list(_global_step_pre_hooks.values()) + list(self._optimizer_step_pre_hooks.values()):
            result = hook(self, args, kwargs)
            if result is not None:
                if not (isinstance(result, tuple) and len(result) == 2):
                    raise RuntimeError(f"{type(self).__name__}.step: a step pre-hook must return None or a tuple "
                                       f"(new_args, new_kwargs), but returned {result!r}")
                args, kwargs = result
        self._in_step = True
        try:
            out = step(self, *args, **kwargs)
        finally:
            self._in_step = False
        for hook in list(self._optimizer_step_post_hooks.values()) + list(_global_step_post_hooks.values()):
            hook(self, args, kwargs)
        return out

    wrapper._dg_hooked = True
    return wrapper


def torch_flags(name, **flags):
    """torch's implementation switches (foreach, fused, capturable, differentiable), kept in the param groups so that
    state_dict() has torch's keys. In torch they select a kernel (for-each, fused, CUDA-graph capturable); dyngrad
    has one implementation per engine, so they are validated and recorded only. A differentiable step (autograd
    through the update) is not supported."""
    if flags.get("differentiable"):
        raise NotImplementedError(f"{name}: differentiable=True (autograd through the optimizer step) is not "
                                  "supported by dyngrad's optimizers")
    if flags.get("foreach") and flags.get("fused"):
        raise RuntimeError(f"{name}: `fused` and `foreach` cannot be `True` together.")
    return {k: bool(v) if k in ("capturable", "differentiable") else v for k, v in flags.items()}


def f32(x):
    """x rounded to float32: torch keeps some scalar state (NAdam's mu_product, ASGD's eta and mu) as float32
    0-d tensors, and we round the same way so that trajectories agree with torch's to the last bit."""
    return float(np.float32(x))


class Optimizer:
    """Base class: holds param_groups (lists of parameters with their hyperparameters) and per-parameter state."""

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if "step" in cls.__dict__:
            cls.step = _with_step_hooks(cls.__dict__["step"])

    def __init__(self, params, defaults):
        self.defaults = dict(defaults)
        # parameter -> dict of its buffers (momentum, exp_avg, step, ...); a defaultdict as torch's, so that a
        # torch-style custom optimizer's `state = self.state[p]; if not state: ...` works
        self.state = defaultdict(dict)
        self.param_groups = []
        self._optimizer_step_pre_hooks = HookDict()
        self._optimizer_step_post_hooks = HookDict()
        if isinstance(params, Tensor):
            raise TypeError(f"{type(self).__name__}: params argument given to the optimizer should be an iterable "
                            "of Tensors or dicts, but got a Tensor")
        param_groups = list(params)
        if not param_groups:
            raise ValueError(f"{type(self).__name__}: optimizer got an empty parameter list")
        if not isinstance(param_groups[0], dict):
            param_groups = [{"params": param_groups}]
        for group in param_groups:
            if isinstance(group, dict):
                _split_named(group)
        for group in param_groups:
            self.add_param_group(group)

    def add_param_group(self, param_group):
        """Add a group of parameters (e.g. of a layer added to a growing model) with its own hyperparameters."""
        if not isinstance(param_group, dict):
            raise TypeError(f"add_param_group: param_group must be a dict, got {type(param_group).__name__}")
        group = dict(param_group)
        params = group["params"]
        group["params"] = [params] if isinstance(params, Tensor) else list(params)
        _split_named(group)
        if self.param_groups and ("param_names" in group) != ("param_names" in self.param_groups[0]):
            raise ValueError(f"{type(self).__name__}: all optimizer param groups should be with/without names.")
        for p in group["params"]:
            if not isinstance(p, Tensor):
                raise TypeError(f"{type(self).__name__} can only optimize Tensors, but one of the params is "
                                f"{type(p).__name__}")
            if not p.is_leaf:
                raise ValueError(f"{type(self).__name__}: can't optimize a non-leaf Tensor")
        for name, default in self.defaults.items():
            if default is required and name not in group:
                raise ValueError(f"{type(self).__name__}: parameter group didn't specify a value of required "
                                 f"optimization parameter {name}")
            group.setdefault(name, default)
        seen = {id(p) for g in self.param_groups for p in g["params"]}
        if len({id(p) for p in group["params"]}) != len(group["params"]):
            raise ValueError(f"{type(self).__name__}: a parameter group contains the same parameter twice")
        if any(id(p) in seen for p in group["params"]):
            raise ValueError(f"{type(self).__name__}: some parameters appear in more than one parameter group")
        self._check_hyperparameters(group)
        self.param_groups.append(group)

    def register_step_pre_hook(self, hook):
        """hook(optimizer, args, kwargs) -> None or (new_args, new_kwargs), run before this optimizer's step."""
        handle = RemovableHandle(self._optimizer_step_pre_hooks)
        self._optimizer_step_pre_hooks[handle.id] = hook
        return handle

    def register_step_post_hook(self, hook):
        """hook(optimizer, args, kwargs) -> None, run after this optimizer's step."""
        handle = RemovableHandle(self._optimizer_step_post_hooks)
        self._optimizer_step_post_hooks[handle.id] = hook
        return handle

    def __getstate__(self):
        return {"defaults": self.defaults, "state": self.state, "param_groups": self.param_groups}

    def __setstate__(self, state):      # hooks are not pickled (as torch's)
        self.__dict__.update(state)
        self._optimizer_step_pre_hooks = HookDict()
        self._optimizer_step_post_hooks = HookDict()

    def _check_hyperparameters(self, group):
        for name in ("lr", "eps", "weight_decay", "momentum", "lr_decay"):
            value = group.get(name)
            if isinstance(value, (int, float)) and value < 0:
                raise ValueError(f"{type(self).__name__}: invalid {name} value: {value} (must be >= 0)")

    def zero_grad(self, set_to_none=True):
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                if set_to_none:
                    p.grad = None
                else:
                    with no_grad():
                        p.grad.zero_()

    @_with_step_hooks
    def step(self, closure=None):
        """Update every parameter that has a gradient; `closure` re-evaluates the model and returns the loss."""
        loss = None
        if closure is not None:
            with enable_grad():
                loss = closure()
        with no_grad():
            for group in self.param_groups:
                params = [p for p in group["params"] if p.grad is not None]
                if not params:
                    continue
                grads = [p.grad for p in params]
                states = []
                for p in params:
                    state = self.state.get(p)
                    if state is None:
                        state = self._init_state(p, group)
                        if state is None:          # nothing to keep (torch's SGD without momentum)
                            state = {}
                        else:
                            self.state[p] = state
                    states.append(state)
                self._update_group(group, params, grads, states)
        return loss

    def _init_state(self, p, group):
        return {}

    def _update_group(self, group, params, grads, states):
        raise NotImplementedError

    # ----- state dicts (torch's layout: parameters are numbered across groups in order) ---------------------
    def _hook_dict(self, name):
        hooks = self.__dict__.get(name)
        if hooks is None:
            hooks = self.__dict__[name] = HookDict()
        return hooks

    def _register(self, name, hook, prepend):
        hooks = self._hook_dict(name)
        handle = RemovableHandle(hooks)
        hooks[handle.id] = hook
        if prepend:
            hooks.move_to_end(handle.id, last=False)
        return handle

    def register_state_dict_pre_hook(self, hook, prepend=False):
        """hook(optimizer) -> None, run before state_dict() builds the dict."""
        return self._register("_optimizer_state_dict_pre_hooks", hook, prepend)

    def register_state_dict_post_hook(self, hook, prepend=False):
        """hook(optimizer, state_dict) -> None or a replacement state_dict, run on state_dict()'s result."""
        return self._register("_optimizer_state_dict_post_hooks", hook, prepend)

    def register_load_state_dict_pre_hook(self, hook, prepend=False):
        """hook(optimizer, state_dict) -> None or a replacement state_dict, run before load_state_dict() loads it."""
        return self._register("_optimizer_load_state_dict_pre_hooks", hook, prepend)

    def register_load_state_dict_post_hook(self, hook, prepend=False):
        """hook(optimizer) -> None, run after load_state_dict()."""
        return self._register("_optimizer_load_state_dict_post_hooks", hook, prepend)

    def state_dict(self):
        """{'state': {index: {buffer name: value}}, 'param_groups': [{hyperparameters..., 'params': [indices]}]}, the
        parameters numbered in group order, as torch's (values are the live buffers, not copies)."""
        for hook in list(self._hook_dict("_optimizer_state_dict_pre_hooks").values()):
            hook(self)
        result = self._build_state_dict()
        for hook in list(self._hook_dict("_optimizer_state_dict_post_hooks").values()):
            replaced = hook(self, result)
            if replaced is not None:
                result = replaced
        return result

    def _build_state_dict(self):
        index = {}
        groups = []
        for group in self.param_groups:
            packed = {k: v for k, v in group.items() if k != "params"}
            packed["params"] = []
            for p in group["params"]:
                index.setdefault(id(p), len(index))
                packed["params"].append(index[id(p)])
            groups.append(packed)
        state = OrderedDict()
        for group in self.param_groups:
            for p in group["params"]:
                if p in self.state:
                    state[index[id(p)]] = dict(self.state[p])
        return {"state": state, "param_groups": groups}

    def load_state_dict(self, state_dict):
        """Restore hyperparameters and buffers saved by state_dict() (tensors are copied, cast to each
        parameter's dtype). Takes our state dicts from either engine and torch's."""
        for hook in list(self._hook_dict("_optimizer_load_state_dict_pre_hooks").values()):
            replaced = hook(self, state_dict)
            if replaced is not None:
                state_dict = replaced
        self._load(state_dict)
        for hook in list(self._hook_dict("_optimizer_load_state_dict_post_hooks").values()):
            hook(self)

    def _load(self, state_dict):
        groups = state_dict["param_groups"]
        if len(groups) != len(self.param_groups):
            raise ValueError(f"{type(self).__name__}.load_state_dict: loaded state dict has {len(groups)} parameter "
                             f"groups, but the optimizer has {len(self.param_groups)}")
        for saved, own in zip(groups, self.param_groups):
            if len(saved["params"]) != len(own["params"]):
                raise ValueError(f"{type(self).__name__}.load_state_dict: loaded state dict contains a parameter "
                                 f"group of {len(saved['params'])} parameters that doesn't match the size of the "
                                 f"optimizer's group ({len(own['params'])})")
        saved_state = {int(k): v for k, v in state_dict["state"].items()}
        for saved, own in zip(groups, self.param_groups):
            if "param_names" in saved and "param_names" in own and list(saved["param_names"]) != own["param_names"]:
                raise ValueError(f"{type(self).__name__}.load_state_dict: the param_names of a loaded group "
                                 f"{list(saved['param_names'])} differ from the optimizer's {own['param_names']}")
        self.state = defaultdict(dict)
        for saved, own in zip(groups, self.param_groups):
            for i, p in zip(saved["params"], own["params"]):
                if int(i) in saved_state:
                    self.state[p] = {k: _restore(v, p, k) for k, v in saved_state[int(i)].items()}
            for k, v in saved.items():
                if k not in ("params", "param_names"):
                    own[k] = tuple(v) if isinstance(own.get(k), tuple) and isinstance(v, list) else v

    def __repr__(self):
        lines = [f"{type(self).__name__} ("]
        for i, group in enumerate(self.param_groups):
            lines.append(f"Parameter Group {i}")
            for k in sorted(group):
                if k != "params":
                    lines.append(f"    {k}: {group[k]}")
        return "\n".join(lines) + "\n)"


# per-parameter state that dyngrad keeps as a Python number: NAdam's mu_product, ASGD's eta and mu
_SCALAR_STATE = ("mu_product", "eta", "mu")


def _split_named(group):
    """torch accepts named parameters, [(name, tensor), ...]: the names go to group['param_names']."""
    params = group["params"]
    if isinstance(params, Tensor):
        return
    params = list(params)
    if params and all(isinstance(p, tuple) and len(p) == 2 and isinstance(p[0], str) for p in params):
        group["param_names"] = [name for name, _ in params]
        params = [p for _, p in params]
    group["params"] = params


def _restore(value, param, key):
    """A saved state value as this engine's object: tensors (ours, the other engine's, torch's, numpy arrays)
    become tensors of this engine, floating ones cast to the parameter's dtype; 'step' becomes a number."""
    if key == "step":
        number = value.item() if hasattr(value, "item") else value
        return int(number) if float(number).is_integer() else float(number)
    if key in _SCALAR_STATE:           # kept as Python numbers here, as 0-d tensors by torch
        return float(value.item() if hasattr(value, "item") else value)
    if isinstance(value, (list, tuple)):
        return type(value)(_restore(v, param, None) for v in value)
    if isinstance(value, Tensor):
        return value.detach().to(param.dtype).clone() if value.is_floating_point() else value.clone()
    if hasattr(value, "shape") and hasattr(value, "dtype"):        # the other engine's tensor, torch's, numpy
        array = _as_numpy(value)
        return tensor(array, dtype=param.dtype if array.dtype.kind == "f" else None)
    return value


def _as_numpy(value):
    if hasattr(value, "detach"):
        value = value.detach()
    if hasattr(value, "numpy"):
        return np.array(value.numpy())
    return np.asarray(value)


def fused_kernel(name):
    """The C++ fused update for this optimiser, or None (reference engine). See Note [Fused optimiser steps]."""
    return getattr(_C, f"_{name}_step", None) if _C is not None else None
