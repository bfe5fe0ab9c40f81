"""Reference engine: forward-mode AD's dual levels and the attaching of tangents. Mirrors the levels part of
csrc/dyngrad/forward_derivatives.cpp and csrc/dyngrad/forward_ad.h (Note [Dual tensors], Note [Nested levels]).

A tensor is dual at a level when its `_tangents` list holds (level, tangent). Every primitive's forward ends with
`if forward_ad.active(): forward_ad.attach(op, out, inputs, field=value, ...)`, which runs the op's tangent
formula (forward_derivatives.py) for each open level where an input has a tangent, with the levels >= that one
hidden from the formula's own ops, lower levels first.
"""
import threading
import types

import numpy as np

from .tensor import Tensor

FORMULAS = {}          # op -> tangent formula, filled by forward_derivatives.py
_levels = []           # the open levels, innermost last
_next_level = [0]
_visible = threading.local()   # .below: levels >= this are hidden (a formula is running)


def active():
    return bool(_levels)


def enter_level():
    _levels.append(_next_level[0])
    _next_level[0] += 1
    return _levels[-1]


def exit_level(level):
    if not _levels or _levels[-1] != level:
        raise RuntimeError(f"exit_dual_level: level {level} is not the innermost open level "
                           f"({_levels[-1] if _levels else -1}); leave dual levels in the reverse order of entering "
                           "them.")
    _levels.pop()


def current_level():
    return _levels[-1] if _levels else -1


def open_levels():
    return list(_levels)


def take_tangents(self, value):
    """An in-place write of `value` into self (inplace.py): self takes value's tangents (inplace.cpp's)."""
    if not _levels or (not self.__dict__.get("_tangents") and (value is None or not value.__dict__.get("_tangents"))):
        return
    for level in list(_levels):
        t = tangent_of(value, level) if value is not None and self._data.dtype.kind in "fc" else None
        if t is not None:
            t = _fit(t, self)
        set_tangent(self, level, t)
    # a write into a view writes its base too: the base's tangent takes the view's at the view's positions (torch
    # keeps a view's tangent a view of its base's; here each tensor holds its own)
    base = getattr(self, "_base", None)
    if base is None or not base._data.flags["C_CONTIGUOUS"] or self._data.dtype.kind not in "fc":
        return
    pairs = base.dtype is not self.dtype      # a real view (real, imag, view_as_real) of a complex base
    if pairs and not base.dtype.is_complex:
        return
    from .inplace import _view_positions
    from .ops_index import put
    from .tensor import make_tensor
    positions = None
    for level in list(_levels):
        vt, bt = tangent_of(self, level), tangent_of(base, level)
        if vt is None and bt is None:
            continue
        if positions is None:
            positions = _view_positions(self, base)
        if bt is None:
            bt = make_tensor(np.zeros(base.shape, dtype=base._data.dtype))
        if vt is None:
            vt = make_tensor(np.zeros(self.shape, dtype=self._data.dtype))
        if pairs:                             # the put goes into the base tangent's (real, imag) pairs
            flat = np.ascontiguousarray(bt._data)
            as_pairs = make_tensor(flat.view(flat.real.dtype).reshape(flat.shape + (2,)))
            set_tangent(base, level, make_tensor(put(as_pairs, positions, vt)._data.view(flat.dtype)[..., 0]))
        else:
            set_tangent(base, level, put(bt, positions, vt))


def _below():
    return getattr(_visible, "below", float("inf"))


def tangent_of(t, level):
    if t is None or not isinstance(t, Tensor) or level >= _below():
        return None
    for lv, tangent in t.__dict__.get("_tangents", ()):
        if lv == level:
            return tangent if level in _levels else None
    return None


def tangent_list(t):
    """t's (level, tangent) list, made if missing; changed in place, so that an op's saved output, which shares it,
    sees the tangents attached after its node was recorded (forward_derivatives.cpp patches the alias instead)."""
    lst = t.__dict__.get("_tangents")
    if lst is None:
        lst = t._tangents = []
    return lst


def set_tangent(t, level, tangent):
    lst = tangent_list(t)
    lst[:] = [(lv, x) for lv, x in lst if lv != level and lv in _levels]
    if tangent is not None:
        lst.append((level, tangent))


def _fit(tangent, out):
    """A tangent expanded to its output's shape and cast to its dtype (as attach() in C++)."""
    from_shape = tuple(tangent.shape)
    if from_shape != tuple(out.shape):
        tangent = FORMULAS["_expand"](tangent, tuple(out.shape))
    if tangent._data.dtype != out._data.dtype:
        tangent = FORMULAS["_to_dtype"](tangent, out.dtype)
    return tangent


def attach(op, outs, inputs, **fields):
    """Runs op's tangent formula for each open level an input is dual at and attaches the result to `outs` (one
    output, or a list for the ops of several outputs). `fields` are the op's named fields (saved.h's names)."""
    if not any(isinstance(x, Tensor) and x.__dict__.get("_tangents") for x in inputs):
        return
    several = isinstance(outs, (list, tuple))
    out_list = list(outs) if several else [outs]
    s = types.SimpleNamespace(**fields)
    formula = FORMULAS[op]
    for level in list(_levels):
        if level >= _below():
            break
        t = [tangent_of(x, level) for x in inputs]
        if all(x is None for x in t):
            continue
        prev = _below()
        _visible.below = level
        try:
            result = formula(t, out_list if several else out_list[0], s)
            result = list(result) if several else [result]
            for j, (o, r) in enumerate(zip(out_list, result)):
                if o is not None and r is not None and o._data.dtype.kind in "fc":
                    result[j] = _fit(r, o)
        finally:
            _visible.below = prev
        for o, r in zip(out_list, result):
            if o is None or r is None or o._data.dtype.kind not in "fc" or any(o is x for x in inputs):
                continue
            set_tangent(o, level, r)


def copy_tangents(to, frm):
    if frm.__dict__.get("_tangents"):
        to._tangents = list(frm._tangents)

