"""The process group and its collectives over MPI (mpi4py), with torch.distributed's names and signatures.

One default group (the MPI world) per engine. Collectives work in place on the tensor's own memory: MPI reads and
writes the numpy view `t.detach().numpy()` of a contiguous tensor (a non-contiguous one goes through a contiguous
copy). Every collective is a non-blocking MPI request; waiting polls it against the group's timeout, so a rank that
never joins turns into a RuntimeError instead of a hang, and the GIL is free while MPI works.
"""
import datetime
import enum
import os
import sys
import time

import numpy as np

from .. import Tensor, float32, int64, no_grad
from .._user_frame import warn

_DEFAULT_TIMEOUT = datetime.timedelta(minutes=30)   # torch's default_pg_timeout


class ReduceOp(enum.Enum):
    """How all_reduce / reduce_scatter combine the ranks' values (torch.distributed.ReduceOp)."""
    SUM = 0
    AVG = 1
    PRODUCT = 2
    MIN = 3
    MAX = 4
    BAND = 5
    BOR = 6
    BXOR = 7

    def __repr__(self):
        return f"<ReduceOp.{self.name}: {self.value}>"


class ProcessGroup:
    """A communicator and what waiting on it may take. Only the default group (all ranks) exists."""

    def __init__(self, comm, timeout):
        self.comm, self.timeout = comm, timeout

    def rank(self):
        return self.comm.Get_rank()

    def size(self):
        return self.comm.Get_size()

    def __repr__(self):
        return f"<ProcessGroup mpi rank={self.rank()} size={self.size()}>"


class _State:
    group = None          # the default ProcessGroup, or None before init_process_group
    previous_excepthook = None


_state = _State()


class _GroupMember:
    """`dist.group.WORLD` (and `GroupMember.WORLD`): the default group once initialised, else None."""

    @property
    def WORLD(self):
        return _state.group


group = GroupMember = _GroupMember()


def _mpi():
    try:
        from mpi4py import MPI
    except ImportError as e:
        raise ImportError("dyngrad.distributed needs mpi4py and an MPI library for backend='mpi': "
                          "pip install 'dyngrad[distributed]' (or: pip install mpi4py mpich)") from e
    return MPI


def is_available():
    """True: the package is always there (the MPI backend needs mpi4py at init_process_group)."""
    return True


def is_mpi_available():
    try:
        import mpi4py  # noqa: F401
    except ImportError:
        return False
    return True


def is_initialized():
    return _state.group is not None


def _group(fn, grp):
    if _state.group is None:
        raise ValueError(f"{fn}: the default process group has not been initialized; call "
                         "dyngrad.distributed.init_process_group(backend='mpi') first.")
    if grp is not None and grp is not _state.group:
        raise ValueError(f"{fn}: group must be None or dist.group.WORLD (dyngrad has only the default group), "
                         f"got {grp!r}.")
    return _state.group


def init_process_group(backend=None, init_method=None, timeout=None, world_size=-1, rank=-1, store=None,
                       group_name="", pg_options=None, device_id=None):
    """Joins the MPI job this process was started in (`mpiexec -n N python script.py`; one process without
    mpiexec is a world of size 1). Rank and world size come from MPI, as with torch's MPI backend.

    While the group exists, an exception that nobody catches aborts the whole MPI job after printing its traceback
    (as `python -m mpi4py` does), so the other ranks stop at once instead of waiting for the failed one until their
    timeout; set DYNGRAD_MPI_ABORT_ON_ERROR=0 to keep Python's default behaviour.
    """
    if _state.group is not None:
        raise ValueError("init_process_group: trying to initialize the default process group twice!")
    if backend is not None and (not isinstance(backend, str) or backend.lower() != "mpi"):
        raise ValueError(f"init_process_group: backend must be 'mpi' (or None), got {backend!r}; dyngrad "
                         "communicates over MPI only.")
    if init_method is not None or store is not None:
        raise ValueError("init_process_group: init_method and store are not used by backend='mpi' (MPI's launcher "
                         "connects the ranks); leave them None.")
    if timeout is None:
        timeout = _DEFAULT_TIMEOUT
    if not isinstance(timeout, datetime.timedelta):
        raise TypeError(f"init_process_group: timeout must be a datetime.timedelta, got {type(timeout).__name__}.")
    if timeout.total_seconds() <= 0:
        raise ValueError(f"init_process_group: timeout must be positive, got {timeout}.")
    MPI = _mpi()
    comm = MPI.COMM_WORLD.Dup()    # our own communicator: the user's own mpi4py messages cannot interleave
    if (world_size != -1 and world_size != comm.Get_size()) or (rank != -1 and rank != comm.Get_rank()):
        warn(f"init_process_group: for backend='mpi', world_size ({world_size}) and rank ({rank}) are "
             f"ignored since they are assigned by the MPI runtime (world size {comm.Get_size()}, rank "
             f"{comm.Get_rank()}).", UserWarning)
    _state.group = ProcessGroup(comm, timeout.total_seconds())
    if comm.Get_size() > 1 and os.environ.get("DYNGRAD_MPI_ABORT_ON_ERROR", "1") != "0":
        _state.previous_excepthook = sys.excepthook
        sys.excepthook = _abort_on_uncaught_exception


def _abort_on_uncaught_exception(exc_type, exc, tb):
    previous = _state.previous_excepthook or sys.__excepthook__
    previous(exc_type, exc, tb)
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:
            pass
    # mpiexec forwards a rank's output through a pipe; Abort kills the job at once, and under load the traceback
    # just written could be lost with it (seen: an empty stderr). A moment's grace lets it through.
    time.sleep(0.5)
    _mpi().COMM_WORLD.Abort(1)


def destroy_process_group(group=None):
    """Leaves the default group (MPI itself is finalised by mpi4py at exit); init_process_group may be called
    again."""
    grp = _group("destroy_process_group", group)
    if sys.excepthook is _abort_on_uncaught_exception:
        sys.excepthook = _state.previous_excepthook or sys.__excepthook__
    _state.previous_excepthook = None
    _state.group = None
    grp.comm.Free()


def get_rank(group=None):
    return _group("get_rank", group).rank()


def get_world_size(group=None):
    return _group("get_world_size", group).size()


def get_backend(group=None):
    _group("get_backend", group)
    return "mpi"


# ---- waiting ----

def _wait(requests, what, group, timeout=None):
    """Waits for MPI requests, polling (mpi4py releases the GIL inside each test) until `timeout` seconds pass."""
    MPI = _mpi()
    if MPI.Request.Testall(requests):
        return
    limit = group.timeout if timeout is None else timeout
    deadline = time.monotonic() + limit
    spins = 0
    while not MPI.Request.Testall(requests):
        if time.monotonic() > deadline:
            raise RuntimeError(
                f"{what}: timed out after {limit:g} s on rank {group.rank()} of {group.size()}: another rank did not "
                "join this collective (it may have failed, exited or be stuck elsewhere). Every rank must call the "
                "same collectives in the same order. The MPI job cannot continue; let the exception end it (an "
                "uncaught exception aborts every rank), or pass a larger timeout to init_process_group.")
        spins += 1
        if spins > 200:   # a few hundred microseconds of spinning first: most collectives finish by then
            time.sleep(min(1e-3, 1e-5 * (spins - 200)))


class Work:
    """What an async_op=True collective returns: wait() blocks (up to the timeout) until it has finished."""

    def __init__(self, requests, what, group, finish=None, result=()):
        self._requests, self._what, self._group = list(requests), what, group
        self._finish, self._result, self._done = finish, list(result), False

    def _complete(self):
        if not self._done:
            self._done = True
            if self._finish is not None:
                self._finish()

    def is_completed(self):
        if not self._done and _mpi().Request.Testall(self._requests):
            self._complete()
        return self._done

    def is_success(self):
        return self.is_completed()

    def wait(self, timeout=None):
        """timeout: a datetime.timedelta (default: the group's)."""
        if timeout is not None and not isinstance(timeout, datetime.timedelta):
            raise TypeError(f"Work.wait: timeout must be a datetime.timedelta, got {type(timeout).__name__}.")
        if not self._done:
            _wait(self._requests, self._what, self._group,
                  None if timeout is None else timeout.total_seconds())
            self._complete()
        return True

    def result(self):
        return self._result


def _run(requests, what, grp, async_op, finish=None, result=()):
    work = Work(requests, what, grp, finish, result)
    if async_op:
        return work
    work.wait()
    return None


# ---- buffers over tensor memory ----

_MPI_TYPE_NAMES = {np.dtype(np.float32): "FLOAT", np.dtype(np.float64): "DOUBLE", np.dtype(np.int64): "INT64_T",
                   np.dtype(np.bool_): "C_BOOL"}


# Note [Collectives of other dtypes]: MPI works on the dtypes above; a half type travels as float32 (exact for
# broadcast and gathers; a reduction is computed in float32 and rounded once into the dtype) and a narrow integer
# as int64 (its sums and products wrap back into the dtype as torch's do in it), through a staging copy.
_STAGED_AS = {"float16": float32, "bfloat16": float32, "uint8": int64, "int8": int64, "int16": int64,
              "int32": int64}
_DTYPE_CODES = ["bool", "uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16", "float32", "float64"]
_META_DIMS = 8


def _staged(t):
    """(the tensor MPI works on, a function copying its result back into t, or None): t itself for MPI's dtypes."""
    wide = _STAGED_AS.get(t.dtype.name)
    if wide is None:
        return t, None
    with no_grad():
        stage = t.detach().to(wide).contiguous()

    def back():
        with no_grad():
            t.detach().copy_(stage)
    return stage, back


def _same_on_every_rank(fn, grp, t):
    """Every rank's tensor must have the same shape and dtype: a cheap exchange of (dtype, rank, shape) first, so
    that a mismatch raises on every rank (MPI itself would combine garbage, or fail on one rank only)."""
    shape = tuple(t.shape)
    meta = np.full(3 + _META_DIMS, -1, dtype=np.int64)
    meta[0], meta[1], meta[2] = _DTYPE_CODES.index(t.dtype.name), len(shape), int(np.prod(shape, dtype=np.int64))
    meta[3:3 + min(len(shape), _META_DIMS)] = shape[:_META_DIMS]
    everyone = np.empty((grp.size(), meta.size), dtype=np.int64)
    MPI = _mpi()
    _wait([grp.comm.Iallgather([meta, MPI.INT64_T], [everyone, MPI.INT64_T])], fn, grp)
    if (everyone == everyone[0]).all():
        return

    def describe(row):
        dims = tuple(int(d) for d in row[3:3 + min(int(row[1]), _META_DIMS)])
        return f"shape {dims if row[1] <= _META_DIMS else f'({row[2]} elements)'} {_DTYPE_CODES[int(row[0])]}"
    ranks = ", ".join(f"rank {k} has {describe(row)}" for k, row in enumerate(everyone))
    raise RuntimeError(f"{fn}: the tensors differ between ranks ({ranks}); every rank must pass a tensor of the "
                       "same shape and dtype.")


def _check_tensor(fn, arg, t):
    if not isinstance(t, Tensor):
        raise TypeError(f"{fn}: expected a dyngrad Tensor for argument '{arg}', got {type(t).__name__}.")


def _array(fn, arg, t, writable=True):
    """The numpy view of t's memory (no copy)."""
    _check_tensor(fn, arg, t)
    arr = t.detach().numpy()
    if writable and (not arr.flags.writeable or any(st == 0 and n > 1 for st, n in zip(arr.strides, arr.shape))):
        raise RuntimeError(f"{fn}: argument '{arg}' is a read-only view or has elements sharing memory (an "
                           "expanded tensor?); the result is written into it in place. Pass a tensor with its own "
                           "memory (.clone()).")
    return arr


def _contiguous(arr):
    """(what MPI works on, where to copy it back afterwards or None): arr itself when it is contiguous."""
    if arr.flags.c_contiguous:
        return arr, None
    return np.asarray(arr, order="C"), arr


def _message(arr):
    return [arr, getattr(_mpi(), _MPI_TYPE_NAMES[arr.dtype])]


def _mpi_op(fn, op, dtype):
    if not isinstance(op, ReduceOp):
        raise TypeError(f"{fn}: op must be a dyngrad.distributed.ReduceOp, got {op!r}.")
    MPI = _mpi()
    if dtype == np.bool_:
        if op is ReduceOp.AVG:
            raise ValueError(f"{fn}: ReduceOp.AVG is not defined for bool tensors.")
        return {ReduceOp.SUM: MPI.LOR, ReduceOp.MAX: MPI.LOR, ReduceOp.BOR: MPI.LOR, ReduceOp.MIN: MPI.LAND,
                ReduceOp.PRODUCT: MPI.LAND, ReduceOp.BAND: MPI.LAND, ReduceOp.BXOR: MPI.LXOR}[op]
    if op in (ReduceOp.BAND, ReduceOp.BOR, ReduceOp.BXOR) and dtype.kind == "f":
        raise ValueError(f"{fn}: ReduceOp.{op.name} needs an integer or bool tensor, got {dtype} values.")
    return {ReduceOp.SUM: MPI.SUM, ReduceOp.AVG: MPI.SUM, ReduceOp.PRODUCT: MPI.PROD, ReduceOp.MIN: MPI.MIN,
            ReduceOp.MAX: MPI.MAX, ReduceOp.BAND: MPI.BAND, ReduceOp.BOR: MPI.BOR, ReduceOp.BXOR: MPI.BXOR}[op]


def _average_in_place(arr, n):
    if arr.dtype.kind == "f":
        arr /= n
    else:   # integers: the quotient rounded toward zero, as C's integer division (and NCCL's AVG) do
        np.copyto(arr, np.sign(arr) * (np.abs(arr) // n))


def _describe_list(x):
    return f"{len(x)}" if isinstance(x, (list, tuple)) else f"a {type(x).__name__}"


def _check_async(fn, async_op):
    if not isinstance(async_op, bool):
        raise TypeError(f"{fn}: async_op must be a bool, got {type(async_op).__name__}.")


def _check_src(fn, arg, value, grp):
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{fn}: {arg} must be an int rank, got {type(value).__name__}.")
    if not 0 <= value < grp.size():
        raise ValueError(f"{fn}: {arg}={value} is not a rank of this group (expected 0..{grp.size() - 1}).")
    return int(value)


# ---- collectives ----

def barrier(group=None, async_op=False, device_ids=None):
    """Returns once every rank has called barrier()."""
    grp = _group("barrier", group)
    _check_async("barrier", async_op)
    return _run([grp.comm.Ibarrier()], "barrier", grp, async_op)


def broadcast(tensor, src=None, group=None, async_op=False, group_src=None):
    """Copies rank src's tensor into `tensor` on every other rank (same shape and dtype everywhere)."""
    grp = _group("broadcast", group)
    _check_async("broadcast", async_op)
    src = _check_src("broadcast", "src", src if src is not None else group_src, grp)
    _check_tensor("broadcast", "tensor", tensor)
    _same_on_every_rank("broadcast", grp, tensor)
    staged, cast_back = _staged(tensor)
    arr, back = _contiguous(_array("broadcast", "tensor", staged))

    def finish():
        if back is not None:
            np.copyto(back, arr)
        if cast_back is not None:
            cast_back()
    return _run([grp.comm.Ibcast(_message(arr), root=src)], "broadcast", grp, async_op, finish, [tensor])


def all_reduce(tensor, op=ReduceOp.SUM, group=None, async_op=False):
    """Combines `tensor` over all ranks with `op`, in place: afterwards every rank holds the result.
    bool tensors: SUM/MAX/BOR are logical or, PRODUCT/MIN/BAND logical and. AVG of integers rounds toward zero."""
    grp = _group("all_reduce", group)
    _check_async("all_reduce", async_op)
    _check_tensor("all_reduce", "tensor", tensor)
    staged, cast_back = _staged(tensor)
    arr, back = _contiguous(_array("all_reduce", "tensor", staged))
    mpi_op = _mpi_op("all_reduce", op, arr.dtype)
    _same_on_every_rank("all_reduce", grp, tensor)
    request = grp.comm.Iallreduce(_mpi().IN_PLACE, _message(arr), op=mpi_op)

    def finish():
        if op is ReduceOp.AVG:
            _average_in_place(arr, grp.size())
        if back is not None:
            np.copyto(back, arr)
        if cast_back is not None:
            cast_back()
    return _run([request], "all_reduce", grp, async_op, finish, [tensor])


def all_gather_into_tensor(output_tensor, input_tensor, group=None, async_op=False):
    """output_tensor (world_size * input's first dim, ... or world_size, *input.shape) receives every rank's
    input_tensor, rank 0's first. Contiguous tensors are written by MPI directly (no copy)."""
    fn = "all_gather_into_tensor"
    grp = _group(fn, group)
    _check_async(fn, async_op)
    out, back = _contiguous(_array(fn, "output_tensor", output_tensor))
    inp, _ = _contiguous(_array(fn, "input_tensor", input_tensor, writable=False))
    if out.dtype != inp.dtype:
        raise TypeError(f"{fn}: output_tensor is {out.dtype} but input_tensor is {inp.dtype}; they must match.")
    if out.size != inp.size * grp.size():
        raise ValueError(f"{fn}: output_tensor has {out.size} elements, expected world_size * input numel = "
                         f"{grp.size()} * {inp.size}.")
    finish = (lambda: np.copyto(back, out)) if back is not None else None
    request = grp.comm.Iallgather(_message(inp), _message(out))
    return _run([request], fn, grp, async_op, finish, [output_tensor])


def all_gather(tensor_list, tensor, group=None, async_op=False):
    """tensor_list[i] receives rank i's `tensor` (every tensor of the same shape and dtype)."""
    fn = "all_gather"
    grp = _group(fn, group)
    _check_async(fn, async_op)
    inp, _ = _contiguous(_array(fn, "tensor", tensor, writable=False))
    if not isinstance(tensor_list, (list, tuple)) or len(tensor_list) != grp.size():
        raise ValueError(f"{fn}: tensor_list must be a list of world_size ({grp.size()}) tensors, got "
                         f"{_describe_list(tensor_list)}.")
    outs = [_array(fn, f"tensor_list[{i}]", t) for i, t in enumerate(tensor_list)]
    for i, out in enumerate(outs):
        if out.shape != inp.shape or out.dtype != inp.dtype:
            raise ValueError(f"{fn}: tensor_list[{i}] has shape {tuple(out.shape)} and dtype {out.dtype}, but "
                             f"tensor has shape {tuple(inp.shape)} and dtype {inp.dtype}; they must match.")
    gathered = np.empty((grp.size(),) + inp.shape, dtype=inp.dtype)

    def finish():
        for i, out in enumerate(outs):
            np.copyto(out, gathered[i])
    request = grp.comm.Iallgather(_message(inp), _message(gathered))
    return _run([request], fn, grp, async_op, finish, list(tensor_list))


def reduce_scatter_tensor(output, input, op=ReduceOp.SUM, group=None, async_op=False):
    """input (world_size blocks of output's size, along the first dim) is reduced over ranks with `op`; rank i
    receives block i in `output`. Contiguous tensors are read and written by MPI directly."""
    fn = "reduce_scatter_tensor"
    grp = _group(fn, group)
    _check_async(fn, async_op)
    out, back = _contiguous(_array(fn, "output", output))
    inp, _ = _contiguous(_array(fn, "input", input, writable=False))
    if out.dtype != inp.dtype:
        raise TypeError(f"{fn}: output is {out.dtype} but input is {inp.dtype}; they must match.")
    if inp.size != out.size * grp.size():
        raise ValueError(f"{fn}: input has {inp.size} elements, expected world_size * output numel = "
                         f"{grp.size()} * {out.size}.")
    mpi_op = _mpi_op(fn, op, out.dtype)
    request = grp.comm.Ireduce_scatter_block(_message(inp), _message(out), op=mpi_op)

    def finish():
        if op is ReduceOp.AVG:
            _average_in_place(out, grp.size())
        if back is not None:
            np.copyto(back, out)
    return _run([request], fn, grp, async_op, finish, [output])


def reduce_scatter(output, input_list, op=ReduceOp.SUM, group=None, async_op=False):
    """input_list[i] of every rank is reduced with `op` into `output` on rank i (one copy packs the list)."""
    fn = "reduce_scatter"
    grp = _group(fn, group)
    _check_async(fn, async_op)
    if not isinstance(input_list, (list, tuple)) or len(input_list) != grp.size():
        raise ValueError(f"{fn}: input_list must be a list of world_size ({grp.size()}) tensors, got "
                         f"{_describe_list(input_list)}.")
    out, back = _contiguous(_array(fn, "output", output))
    ins = [_array(fn, f"input_list[{i}]", t, writable=False) for i, t in enumerate(input_list)]
    for i, a in enumerate(ins):
        if a.shape != out.shape or a.dtype != out.dtype:
            raise ValueError(f"{fn}: input_list[{i}] has shape {tuple(a.shape)} and dtype {a.dtype}, but output "
                             f"has shape {tuple(out.shape)} and dtype {out.dtype}; they must match.")
    packed = np.stack(ins)
    mpi_op = _mpi_op(fn, op, out.dtype)
    request = grp.comm.Ireduce_scatter_block(_message(packed), _message(out), op=mpi_op)

    def finish():
        if op is ReduceOp.AVG:
            _average_in_place(out, grp.size())
        if back is not None:
            np.copyto(back, out)
    return _run([request], fn, grp, async_op, finish, [output])
