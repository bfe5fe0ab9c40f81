"""Grad mode switches: no_grad, enable_grad, set_grad_enabled and inference_mode, as context managers and as
decorators (of functions and generators). Thread-local: the flag lives in each engine's core (_C)."""
import functools
import inspect
import threading

from .. import _C


def is_grad_enabled():
    return _C.is_grad_enabled()


class _GradModeContext:
    """Base of the three grad-mode switches: a context manager that can also decorate functions."""

    def _target_mode(self):
        raise NotImplementedError

    def __enter__(self):
        self._previous = _C.is_grad_enabled()
        _C._set_grad_enabled(self._target_mode())
        return None

    def __exit__(self, *exc):
        _C._set_grad_enabled(self._previous)
        return False

    def __call__(self, func):
        mode_factory = self._clone

        if inspect.isgeneratorfunction(func):
            @functools.wraps(func)
            def generator_wrapper(*args, **kwargs):
                gen = func(*args, **kwargs)
                value = None
                while True:
                    with mode_factory():
                        try:
                            value = gen.send(value)
                        except StopIteration as stop:
                            return stop.value
                    value = yield value
            return generator_wrapper

        @functools.wraps(func)
        def wrapper(*args, **kwargs):
            with mode_factory():
                return func(*args, **kwargs)
        return wrapper

    def _clone(self):
        return type(self)()


class no_grad(_GradModeContext):
    """Disable gradient recording: `with no_grad():`, `@no_grad()` or `@no_grad`."""

    def __new__(cls, func=None):
        self = super().__new__(cls)
        if callable(func):                      # used bare as a decorator: @no_grad
            return self(func)
        return self

    def __init__(self, func=None):
        pass

    def _target_mode(self):
        return False


class enable_grad(_GradModeContext):
    """Enable gradient recording (e.g. inside a no_grad block)."""

    def __new__(cls, func=None):
        self = super().__new__(cls)
        if callable(func):
            return self(func)
        return self

    def __init__(self, func=None):
        pass

    def _target_mode(self):
        return True


_inference = threading.local()   # .enabled: inside inference_mode(True) on this thread (torch's flag is thread-local)


def is_inference_mode_enabled():
    return getattr(_inference, "enabled", False)


class inference_mode(_GradModeContext):
    """no_grad under torch's name for inference: this engine has no cheaper mode. inference_mode(False) leaves
    the grad mode as it is. is_inference_mode_enabled() tells whether one is active on this thread."""

    def __enter__(self):
        self._previous_inference = is_inference_mode_enabled()
        _inference.enabled = self.mode
        return super().__enter__()

    def __exit__(self, *exc):
        _inference.enabled = self._previous_inference
        return super().__exit__(*exc)

    def __new__(cls, mode=True):
        self = super().__new__(cls)
        if callable(mode):                      # used bare as a decorator: @inference_mode
            self.mode = True
            return self(mode)
        return self

    def __init__(self, mode=True):
        self.mode = True if callable(mode) else bool(mode)

    def _target_mode(self):
        return False if self.mode else _C.is_grad_enabled()

    def _clone(self):
        return inference_mode(self.mode)


class set_grad_enabled(_GradModeContext):
    """`set_grad_enabled(mode)` switches at once (as a plain call) and restores on leaving a `with` block."""

    def __init__(self, mode):
        self.mode = bool(mode)
        self._previous = _C.is_grad_enabled()
        _C._set_grad_enabled(self.mode)

    def __enter__(self):
        return None

    def __exit__(self, *exc):
        _C._set_grad_enabled(self._previous)
        return False

    def __call__(self, func):
        _C._set_grad_enabled(self._previous)          # decorating must not leave the mode switched
        mode = self.mode

        @functools.wraps(func)
        def wrapper(*args, **kwargs):
            previous = _C.is_grad_enabled()
            _C._set_grad_enabled(mode)
            try:
                return func(*args, **kwargs)
            finally:
                _C._set_grad_enabled(previous)
        return wrapper
