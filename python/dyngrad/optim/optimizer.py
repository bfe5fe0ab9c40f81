"""Optimizer: parameter groups, per-parameter state, zero_grad, state_dict / load_state_dict.

Subclasses implement `_update_group(group, params, grads, states)`. Note [Fused optimiser steps]: on the C++ engine
a group's whole update is one call into a C++ kernel (`dyngrad._C._<name>_step`) that walks every parameter's
buffers in one loop, so a step costs one Python call per parameter group, not a dozen tensor ops per parameter.
The reference engine (and any tensor the kernel cannot take) runs the same update rule as in-place tensor ops.
Both follow torch's single-tensor update rules line by line.
"""
import importlib
from collections import OrderedDict

from .. import Tensor, no_grad, enable_grad, tensor


def _engine_kernels():
    """The engine's compiled extension (`_C`) if it has one; None on the reference engine."""
    root = importlib.import_module(__package__.rpartition(".")[0])
    return getattr(root, "_C", None)


_C = _engine_kernels()


class _RequiredParameter:
    def __repr__(self):
        return "<required parameter>"


required = _RequiredParameter()


class Optimizer:
    """Base class: holds param_groups (lists of parameters with their hyperparameters) and per-parameter state."""

    def __init__(self, params, defaults):
        self.defaults = dict(defaults)
        self.state = {}                 # parameter -> dict of its buffers (momentum, exp_avg, step, ...)
        self.param_groups = []
        if isinstance(params, Tensor):
            raise TypeError(f"{type(self).__name__}: params argument given to the optimizer should be an iterable "
                            "of Tensors or dicts, but got a Tensor")
        param_groups = list(params)
        if not param_groups:
            raise ValueError(f"{type(self).__name__}: optimizer got an empty parameter list")
        if not isinstance(param_groups[0], dict):
            param_groups = [{"params": param_groups}]
        for group in param_groups:
            self.add_param_group(group)

    def add_param_group(self, param_group):
        """Add a group of parameters (e.g. of a layer added to a growing model) with its own hyperparameters."""
        if not isinstance(param_group, dict):
            raise TypeError(f"add_param_group: param_group must be a dict, got {type(param_group).__name__}")
        group = dict(param_group)
        params = group["params"]
        group["params"] = [params] if isinstance(params, Tensor) else list(params)
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
                        state = self.state[p] = self._init_state(p, group)
                    states.append(state)
                self._update_group(group, params, grads, states)
        return loss

    def _init_state(self, p, group):
        return {}

    def _update_group(self, group, params, grads, states):
        raise NotImplementedError

    # ----- state dicts (torch's layout: parameters are numbered across groups in order) ---------------------
    def state_dict(self):
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
        parameter's dtype)."""
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
        self.state = {}
        for saved, own in zip(groups, self.param_groups):
            for i, p in zip(saved["params"], own["params"]):
                if int(i) in saved_state:
                    self.state[p] = {k: _restore(v, p, k) for k, v in saved_state[int(i)].items()}
            for k, v in saved.items():
                if k != "params":
                    own[k] = tuple(v) if isinstance(own.get(k), tuple) and isinstance(v, list) else v

    def __repr__(self):
        lines = [f"{type(self).__name__} ("]
        for i, group in enumerate(self.param_groups):
            lines.append(f"Parameter Group {i}")
            for k in sorted(group):
                if k != "params":
                    lines.append(f"    {k}: {group[k]}")
        return "\n".join(lines) + "\n)"


def _restore(value, param, key):
    if key == "step":
        return int(value.item()) if isinstance(value, Tensor) else int(value)
    if isinstance(value, Tensor):
        return value.detach().to(param.dtype).clone() if value.is_floating_point() else value.clone()
    if hasattr(value, "shape") and hasattr(value, "dtype"):        # numpy array
        return tensor(value, dtype=param.dtype)
    return value


def fused_kernel(name):
    """The C++ fused update for this optimiser, or None (reference engine). See Note [Fused optimiser steps]."""
    return getattr(_C, f"_{name}_step", None) if _C is not None else None
