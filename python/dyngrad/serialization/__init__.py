"""dyngrad.save / dyngrad.load: checkpoints in PyTorch's own file format, read safely (docs/serialization.md).

    dg.save({"model": model.state_dict(), "optim": opt.state_dict(), "step": 3}, "ckpt.pt")   # torch.load reads it
    ckpt = dg.load("ckpt.pt")                        # weights_only=True: no code runs (Note [weights_only])
    dg.save(model, "model.pt")                       # a whole module, pickled by reference to its classes
    with dg.serialization.safe_globals([MyModel]):
        model = dg.load("model.pt")                  # or dg.load("model.pt", weights_only=False) for a trusted file

Note [PyTorch's file format]: torch.save (since 1.6) writes a zip archive whose records sit in one folder
("archive/"): `data.pkl`, a pickle (protocol 2) of the object in which each tensor is
torch._utils._rebuild_tensor_v2(storage, storage_offset, size, stride, requires_grad, backward_hooks) and each
storage a persistent id ('storage', torch.FloatStorage, key, 'cpu', numel) whose bytes are the record `data/<key>`
(stored, little-endian, aligned to 64 bytes in the file so that it can be memory-mapped); `byteorder`, `version`,
`.format_version`, `.storage_alignment` and `.data/serialization_id` describe the file. Tensors sharing a storage
name the same key (Note [Shared storages] in _storage.py). dyngrad.save writes exactly that (_writer.py), and
dyngrad.load reads it (_reader.py), as well as safetensors files (safetensors.py) and the .npz format dyngrad.save
wrote before (_npz.py).

Note [Loading untrusted files]: a file that is not a valid checkpoint raises InvalidCheckpointError (a
RuntimeError and a pickle.UnpicklingError, as torch.load raises for a file it refuses) naming the problem, and a
file that would need code to run raises pickle.UnpicklingError naming the global (Note [weights_only]). Loading
never crashes, never recurses on the file's structure, and never allocates from a size claim the file cannot back:
zip members are checked against the file's size and against each other (no overlaps) when the archive is opened;
a stored member holds exactly the bytes it claims, a compressed one at most deflate's 1032:1, and each is read
into one array allocated once (no intermediate copies; a compressed member is decompressed in chunks into it); a
storage's byte count must match its record; every tensor must lie inside its storage; elements copied for a
layout that views cannot give are bounded by the file's size.
"""
import os
import pickle

from . import _npz
from ._errors import InvalidCheckpointError
from ._reader import read_torch, static_restrictions, check_map_location
from ._unpickler import (add_safe_globals, clear_safe_globals, get_safe_globals, globals_in_pickle, safe_globals)
from ._writer import save_torch
from ._zip import ZipReader, open_input
from . import safetensors
from .safetensors import save_file as save_safetensors, load_file as load_safetensors

__all__ = ["save", "load", "InvalidCheckpointError", "add_safe_globals", "clear_safe_globals", "get_safe_globals",
           "safe_globals", "get_unsafe_globals_in_checkpoint", "safetensors", "save_safetensors",
           "load_safetensors", "SourceChangeWarning", "DEFAULT_PROTOCOL"]

DEFAULT_PROTOCOL = 2            # torch.save's


class SourceChangeWarning(Warning):
    """torch's warning that a module's source changed since it was saved; dyngrad never issues it (whole modules
    are pickled by reference to their classes), but scripts filter it by name."""
# the start of torch's legacy format: a pickle of its magic number 0x1950A86A20F9469CFC6C
_TORCH_LEGACY_HEAD = b"\x80\x02\x8a\x0a" + (0x1950A86A20F9469CFC6C).to_bytes(10, "little")


def save(obj, f, pickle_module=None, pickle_protocol=DEFAULT_PROTOCOL, _use_new_zipfile_serialization=True,
         _disable_byteorder_record=False):
    """Saves `obj` (tensors, state dicts, optimizer states, whole modules, any picklable object) to `f`, a path or
    a binary file object, in PyTorch's file format (Note [PyTorch's file format]): torch.load reads a file dyngrad
    wrote. Tensors sharing memory share one storage in the file. pickle_module may be None or the standard pickle
    module (dyngrad pickles with its own pickler); _use_new_zipfile_serialization=False (torch's pre-1.6 format) is
    accepted and the zip format written, which every torch since 1.6 reads."""
    if pickle_module is not None and pickle_module is not pickle:
        raise TypeError("save: pickle_module must be None or the pickle module; dyngrad.save writes the pickle "
                        f"itself (got {getattr(pickle_module, '__name__', pickle_module)!r}).")
    if not isinstance(pickle_protocol, int) or isinstance(pickle_protocol, bool) or not 2 <= pickle_protocol <= 5:
        raise ValueError(f"save: pickle_protocol must be an int from 2 to 5, got {pickle_protocol!r}.")
    if not isinstance(f, (str, bytes, os.PathLike)) and not hasattr(f, "write"):
        raise TypeError(f"save: f must be a path or a binary file object, got {type(f).__name__}.")
    try:
        save_torch(obj, f, pickle_protocol, not _disable_byteorder_record)
    except RecursionError:
        raise ValueError("save: the object is nested too deeply to pickle (raise sys.getrecursionlimit() to save "
                         "it).") from None


def _archive_prefix(archive):
    """The folder of a PyTorch archive's records (the one holding data.pkl), or None."""
    found = [n[:-len("/data.pkl")] for n in archive.names() if n.endswith("/data.pkl") and n.count("/") == 1]
    return found[0] if len(found) == 1 else None


def _what_it_is(head):
    """The refusal for a file that is not a zip archive, naming what it is and what to do."""
    if head.startswith(b"\x93NUMPY"):
        return ("this is a single .npy array, not a checkpoint: read it with numpy.load and wrap it with "
                "dyngrad.from_numpy.")
    if head.startswith(_TORCH_LEGACY_HEAD):
        return ("this is a PyTorch checkpoint in torch's legacy format (torch.save(..., "
                "_use_new_zipfile_serialization=False), or PyTorch before 1.6), which dyngrad does not read: load it "
                "with torch.load and save it again with torch.save or dyngrad.save (the zip format).")
    if head[:1] == b"\x80":
        return ("this is a pickle, not a checkpoint: dyngrad.load reads the zip format of torch.save and "
                "dyngrad.save (a pickle alone could run code when loaded).")
    return f"this is not a checkpoint dyngrad reads (a PyTorch zip, safetensors or .npz file): it starts {head!r}."


def _is_safetensors(head, size):
    if len(head) < 9:
        return False
    n = int.from_bytes(head[:8], "little")
    return 8 + n <= size and head[8:9] == b"{"


def _open_checkpoint(f, op):
    fh, size, own = open_input(f, op)
    try:
        here = fh.tell()
        head = fh.read(16)
        fh.seek(here)
        if head[:4] not in (b"PK\x03\x04", b"PK\x05\x06"):
            return fh, own, head, size, None
        return fh, own, head, size, ZipReader(fh, size, "the checkpoint")
    except BaseException:
        if own:
            fh.close()
        raise


def load(f, map_location=None, pickle_module=None, *, weights_only=None, mmap=None, **pickle_load_args):
    """Loads what torch.save or dyngrad.save wrote (or a safetensors file, or the .npz format dyngrad.save wrote
    before), as tensors of the engine that loads.

    weights_only (default True, as PyTorch's since 2.6): the pickle is read by dyngrad's restricted unpickler, which
    builds tensors, storages, containers, numbers, strings, Size, dtypes and devices and calls only the globals
    allowed with add_safe_globals / safe_globals; anything else raises pickle.UnpicklingError naming the global
    (Note [weights_only]). weights_only=False unpickles with the standard library's unpickler: only for a file you
    trust, as it runs any code the file names. map_location: None, 'cpu', a device, a dict of device names, or a
    callable fn(storage, location) returning a storage (a 1-d tensor) or None, as torch's; a target other than the
    CPU raises RuntimeError. mmap=True (needs a path): storages share copy-on-write pages of the file instead of
    being read (in-place writes stay in memory). A malformed file raises InvalidCheckpointError."""
    if weights_only is not None and not isinstance(weights_only, bool):
        raise TypeError(f"load: weights_only must be a bool or None, got {type(weights_only).__name__}.")
    weights_only = True if weights_only is None else weights_only
    if mmap is not None and not isinstance(mmap, bool):
        raise TypeError(f"load: mmap must be a bool or None, got {type(mmap).__name__}.")
    if mmap and not isinstance(f, (str, os.PathLike)):
        raise ValueError("load: mmap=True needs a file path (a file object cannot be memory-mapped).")
    if pickle_module is not None:
        if weights_only:
            raise RuntimeError("load: cannot load safely (weights_only=True) with an explicit pickle_module; pass "
                               "weights_only=False to unpickle with it, for a file you trust.")
        if pickle_module is not pickle:
            raise TypeError("load: pickle_module must be None or the pickle module.")
    encoding = pickle_load_args.pop("encoding", "utf-8")
    if pickle_load_args:
        raise TypeError(f"load: unexpected keyword arguments {sorted(pickle_load_args)}.")
    if not isinstance(encoding, str):
        raise TypeError(f"load: encoding must be a str, got {type(encoding).__name__}.")
    restore = check_map_location(map_location)
    if isinstance(f, (str, os.PathLike)) and os.fspath(f).endswith(".safetensors"):
        return _load_safetensors(f, map_location)
    fh, own, head, size, archive = _open_checkpoint(f, "load")
    try:
        path = os.fspath(f) if mmap else None
        if archive is None:
            if _is_safetensors(head, size):
                return _load_safetensors(fh if not own else f, map_location)
            raise InvalidCheckpointError("load: " + _what_it_is(head))
        prefix = _archive_prefix(archive)
        if prefix is not None:
            if f"{prefix}/constants.pkl" in archive:
                raise InvalidCheckpointError(
                    "load: this is a TorchScript archive (torch.jit.save), not a torch.save checkpoint; dyngrad "
                    "cannot run TorchScript. Load it with torch.jit.load in PyTorch and save its state_dict().")
            return read_torch(archive, prefix, map_location, weights_only, path, encoding)
        if _npz.is_npz(archive):
            mapped = None
            if path is not None:
                import numpy as np
                mapped = np.memmap(path, dtype=np.uint8, mode="c")
            return _npz.read_npz(archive, restore, mapped)
        raise InvalidCheckpointError("load: this zip archive is not a checkpoint dyngrad reads: it has no "
                                     "'<folder>/data.pkl' (torch.save's format) and is not a numpy .npz.")
    finally:
        if archive is not None:
            archive.close()
        if own:
            fh.close()


def _load_safetensors(f, map_location):
    if map_location is not None and not isinstance(map_location, (str,)) and not hasattr(map_location, "type"):
        raise RuntimeError("load: a safetensors file takes map_location as a device ('cpu'), not a dict or a "
                           "callable (as torch.load).")
    if isinstance(f, (str, os.PathLike)):
        return load_safetensors(f, device=map_location or "cpu")
    f.seek(0)
    return safetensors.load(f.read())


def get_unsafe_globals_in_checkpoint(f):
    """The globals a checkpoint names that dyngrad.load(weights_only=True) would refuse (not allowed by default
    nor by add_safe_globals / safe_globals), as 'module.name' strings. The pickle is scanned, not run: a global
    built at load time is not seen (as torch's)."""
    fh, own, head, size, archive = _open_checkpoint(f, "get_unsafe_globals_in_checkpoint")
    try:
        prefix = _archive_prefix(archive) if archive is not None else None
        if prefix is None:
            raise ValueError("get_unsafe_globals_in_checkpoint: expected a checkpoint written by torch.save or "
                             "dyngrad.save (a zip archive with data.pkl).")
        rules = static_restrictions()
        data = archive.read_bytes(f"{prefix}/data.pkl")
        return [f"{m}.{n}" for m, n in globals_in_pickle(data) if not rules.allows(m, n)]
    finally:
        if archive is not None:
            archive.close()
        if own:
            fh.close()
