"""Warnings that point at the user's line: every warning dyngrad raises goes through warn() here.

Note [Warnings at the user's line]
A fixed stacklevel is right for one call path only: mse_loss's warning with stacklevel=2 pointed at
_api/node_names.py (the wrapper that names graph nodes) because the loss is called through it, and the same
function reached through a Module, a method or the other engine has another depth. warn() counts the frames
instead: the warning is attributed to the first frame outside the dyngrad package (and outside the import
machinery and the stdlib's decorator wrappers, which sit between dyngrad's frames). Like torch's warnings, it is
then shown once per user line under Python's default filter, and `python -W error` turns it into an exception at
that line. The walk costs a few microseconds and runs only when a warning is raised.

This file imports nothing of dyngrad, so that both engines' cores (which load before the shared layer) and the C++
extension (tensor_bind.cpp calls dyngrad._user_frame.warn) can use it. Under dyngrad.reference it is loaded a second
time, as dyngrad.reference._user_frame, like every shared module; the package directory is the same.
"""
import contextlib
import functools
import os
import sys
import warnings

_PACKAGE = os.path.dirname(os.path.abspath(__file__)) + os.sep
_WRAPPERS = {os.path.abspath(contextlib.__file__), os.path.abspath(functools.__file__)}
_INTERNAL = {}    # co_filename -> whether the frame is dyngrad's own (or a wrapper between dyngrad's frames)


def _is_internal(filename):
    internal = _INTERNAL.get(filename)
    if internal is None:
        if filename.startswith("<frozen importlib"):
            internal = True
        else:
            path = os.path.abspath(filename)
            internal = path.startswith(_PACKAGE) or path in _WRAPPERS
        _INTERNAL[filename] = internal
    return internal


def user_stacklevel():
    """The stacklevel that makes a warnings.warn in the caller of this function name the first frame outside
    dyngrad (the outermost frame when every frame is dyngrad's: a script inside the package)."""
    frame, level = sys._getframe(1), 1
    while frame.f_back is not None and _is_internal(frame.f_code.co_filename):
        frame, level = frame.f_back, level + 1
    return level


def warn(message, category=UserWarning):
    """warnings.warn(message, category), attributed to the user's line (Note [Warnings at the user's line])."""
    warnings.warn(message, category, stacklevel=user_stacklevel())
