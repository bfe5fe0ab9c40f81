"""The one error type of a file the loaders refuse as malformed (Note [Loading untrusted files] in __init__.py)."""
import pickle


class InvalidCheckpointError(RuntimeError, pickle.UnpicklingError):
    """The file is not a valid checkpoint: truncated, corrupt, not a format dyngrad reads, a size claim the file
    cannot back, an unsupported dtype, a malformed pickle or header... The message names the problem. It is a
    RuntimeError and a pickle.UnpicklingError, the types torch.load raises for a file it refuses."""


def bad(message, op="load"):
    return InvalidCheckpointError(f"{op}: {message}")


def describe(obj):
    """A short, safe description of a value read from a file, for a message (the repr of a file's nested or huge
    value could itself fail or recurse without bound)."""
    if obj is None or isinstance(obj, (bool, float)) or isinstance(obj, int) and abs(obj) < 10 ** 30:
        return repr(obj)
    if isinstance(obj, (str, bytes)):
        return repr(obj[:60]) + ("..." if len(obj) > 60 else "")
    return f"a {type(obj).__name__}"
