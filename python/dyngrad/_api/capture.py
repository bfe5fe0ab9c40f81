"""The capture engine of dyngrad.compile (issue 20): records the calls a Python program makes of its engine's narrow
surface (_C) and replays them without the program's Python.

Note [Capture at the narrow surface]
Every op a program runs reaches the engine through a function of `_C` (the C++ extension or reference/_C.py, the
same names in both), or through a handful of core Tensor members (item, _numpy_view, grad, requires_grad, data,
detach, hooks). While a program is recorded those names are swapped, on the module and on the Tensor class, for
wrappers that note each call as a step (on the C++ engine the wrappers stay in place once put there, and pass
eager calls straight through: Note [The recorded surface stays in place]): the function, its arguments with every tensor replaced by the slot of the
value it came from (an argument, an earlier step's output, or an *external*: a parameter, buffer or closed-over
tensor, held by reference and read again at every replay, never copied), and its result. The C++ fast paths defer
to their Python definitions meanwhile (Note [Fast paths while capturing] in csrc/bindings/fast_paths.cpp), so no op
slips past, or record the very steps those definitions issue themselves (Note [Fast paths that record]). The
recording of a call is made in C++ where it can be (Note [Recording in C++] in csrc/bindings/capture_record.cpp);
the Recorder below is its definition and takes every other case. Nothing is per op: a primitive added to ops.def is a new `_C` function and is captured as it is.
A backward is one step (`_run_backward`); it re-runs the engine's backward on the replayed graph. Random ops are
steps, so each replay draws fresh numbers in eager order; in-place updates are steps on the same tensors.

Note [Values that flow into Python are guards]
A step whose result is not a tensor (item(), bool(t) and int(t) through item(), a numpy view read by host code, a
grad-mode query, `p.grad is None`) is a value the recorded Python may have branched on. The replay recomputes it
and compares it with the recorded value (bitwise for arrays). A difference is a guard miss at that step: the steps
before it have run, with their side effects, exactly as eager Python would have run them, so the engine re-runs
the Python function with those steps *served* from the replay (checked call by call, not executed again) and
records or executes the rest (Note [Catching up after a miss]). Variants sharing a prefix form a tree: a miss first
looks for a variant recorded from the same prefix that expects the new value.

Note [Catching up after a miss]
A replay that misses at step k has run steps 0..k-1 (and k itself) with their side effects: in-place updates,
random draws, a backward. Running the Python function again from the start would repeat them. Instead the Python
runs again with the recorder *serving* those steps: each call it issues is compared with the replayed step (the same
function, the same constants, tensors from the same slots) and answered with the replay's result, without
executing it. From step k+1 on the calls execute and are recorded, and the new variant is the old variant's prefix
(the same Step objects, so the prefix tree can be walked by identity) plus the new steps. If the re-run Python
issues another call within the served prefix, it depended on state no guard sees; that is an error naming the step
and line, since the steps have already run.

Note [Checking a recording]
mode="check" runs the program eagerly on every call, with the recorder comparing each call Python issues against
the next step of the recording, walking the prefix tree at value differences as a replay does. A new value is a
guard miss (the rest of the call is recorded as a variant, as static replay would); a different call, or a
different number of calls, while every guard held, is a divergence: static replay would have run the recorded
program where Python would run another, and the error names the step, the op and the user's line. This is also
the matching verified replay needs (each op checked against the plan as Python issues it).

Note [Verified replay]
A verified call runs the program's Python as eager mode does, every op executed when Python issues it, so prints,
Python counters, `self.training` checks and data-dependent branches behave as without compile. Each call Python
issues is compared with the next step of the recording it follows (the same function, constants, and tensors from
the same slots: a step with positional slots and constants only is compared without encoding the call, see
_same_positional), and each value it hands back to Python with the recorded value, walking the variant tree at a
difference as a replay does. Where the call or the value differs and no variant has it, the call leaves the
recordings: from there its steps are recorded as a new variant (the old one's prefix plus the rest), or, once the
program holds its limit of variants, just run. A call that follows a recording to its end is a hit. Every op runs
when Python issues it, so the result is eager mode's whatever the guards see. Where the variant's backward was
planned, the matched ops run without their graph node and the backward runs as the plan, and wherever the call
leaves the recording the graph of what ran is rebuilt first (Note [Verified ops run from the plan] in
csrc/bindings/fast_paths.cpp; _give_verify_plan). Measured (docs/compile.md) the checks cost more than
they could save while they were Python code around each op: the wrapper, the comparison and the op's Python
definition (the C++ fast paths defer to it while capturing, Note [Fast paths while capturing]) added ~4 us per op to
an op of ~1 us. The comparison is made in C++ now where it can be (Note [Verified ops in the fast paths] in
csrc/bindings/fast_paths.cpp: the fast paths and each _C function's _VerifiedFunction match the next step on this
recorder's state, held by its cursor), ~0.3 us per op; this class's comparison stays the definition and takes every
case the C++ side hands over. The swap of the surface is made once (_swap_plan), it cost ~200 us per call rebuilt
each time; on the C++ engine the surface is no longer swapped at all (Note [The recorded surface stays in place]).

Note [Entry guards]
Before a replay, the call must look like the recorded one in everything the engine cannot see as a step: the
arguments' structure, non-tensor values (by ==) and aliasing, each tensor's type, shape, strides, dtype and
requires_grad, grad mode, the default dtype, and for every module and optimiser reachable from the arguments, the
bound method's self, the function's closure or the globals it names: the training flags and the identity of every
parameter and buffer, an optimiser's hyperparameters and its state's keys and Python numbers. Shapes read in Python
need no guard of their own: they follow from the guarded input shapes.
"""
import operator
import os
import sys
import threading

import numpy as np

from .. import _C
from . import bridge

MAX_VARIANTS = 8  # per program, as torch's recompile_limit; then eager with one warning
# Note [Verified ops in the fast paths] (csrc/bindings/fast_paths.cpp); the reference engine has no fast paths
_VerifyTable = getattr(_C, "_VerifyTable", None)
_VerifyCursor = getattr(_C, "_VerifyCursor", None)
_VerifiedFunction = getattr(_C, "_VerifiedFunction", None)
_swap_dict = getattr(_VerifyCursor, "swap_dict", None)
# Note [Recording in C++] (csrc/bindings/capture_record.cpp); the reference engine records in Python
_RecorderCore = getattr(_C, "_RecorderCore", None)
_RecordingFunction = getattr(_C, "_RecordingFunction", None)
# False makes every recording from now on run in this file's Python recorder, the C++ one's definition (for tests
# that compare the two, and for measuring one against the other: bench/record_cost.py --python-recorder)
NATIVE_RECORDER = os.environ.get("DYNGRAD_COMPILE_NATIVE_RECORDER", "1") != "0"
_NATIVE_READY = [False]
# _C's own functions, as the engine made them: a fast path matches a step in C++ only where the step called the
# engine's binding of that name (its core call is the fast path's); a function put in _C's place later (a
# monkeypatch) is matched by its _VerifiedFunction, which calls it
_C_BINDINGS = {name: getattr(_C, name) for name in dir(_C) if not name.startswith("__")}
_BRIDGE_VALIDATE = bridge.validate    # the shared layer's own (Note [Fast paths that record])

# _C names that are machinery, not program steps
# (_collect_cycles: Python's gc calls it from a callback, dyngrad/__init__.py, whenever gc collects its oldest
# generation; recorded, a collection that happened to run while recording became a value guard of the program)
_NOT_STEPS = frozenset({"_install_fast_paths", "_register_helpers", "_fast_path_names", "_set_capturing",
                        "op_names", "op_saved_fields", "_live_node_count", "_live_storage_count",
                        "_entry_key", "_plan_backward", "_collect_cycles", "_cycle_suspects_noted",
                        "_recorder_setup", "_recorder_set_bindings", "_recorder_user_line"})
# results that are state to hand back, not values to compare (a generator's state, swapped around a draw)
_STATE_RESULTS = frozenset({"_get_rng_state"})
_TENSOR_METHODS = ("item", "_numpy_view", "detach", "detach_", "retain_grad", "register_hook",
                   "register_post_accumulate_grad_hook")
_TENSOR_PROPERTIES = ("grad", "requires_grad", "data")
_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

_lock = threading.RLock()
_active = [None]          # the Recorder of the thread that records, if any
_local = threading.local()
# the threads whose _local.depth is above 0: empty, no thread records, and a static call skips is_capturing's
# thread-local read (set.add and discard are atomic under the GIL)
_capturing_threads = set()


def is_capturing():
    """True while this thread records a program (torch.compiler.is_compiling's meaning here)."""
    return getattr(_local, "depth", 0) > 0


class GuardMiss(Exception):
    def __init__(self, reason, line, step=None):
        super().__init__(reason)
        self.reason, self.line, self.step = reason, line, step


_user_files = {}   # absolute file name -> its base name, or None for a file of the dyngrad package


def _file_of_user(path):
    """The base name of a file outside the dyngrad package, None for one inside (cached for absolute names: a
    relative one depends on the working directory)."""
    base = None if os.path.abspath(path).startswith(_PACKAGE_DIR) else os.path.basename(path)
    if os.path.isabs(path):
        _user_files[path] = base
    return base


def _user_line_py():
    """'file:line' of the innermost frame outside the dyngrad package: the user's line that read a value."""
    frame = sys._getframe(1)
    while frame is not None:
        path = frame.f_code.co_filename
        base = _user_files[path] if path in _user_files else _file_of_user(path)
        if base is not None:
            return f"{base}:{frame.f_lineno}"
        frame = frame.f_back
    return "<dyngrad>"


# Note [Recording in C++] (csrc/bindings/capture_record.cpp): the same walk, from the C++ recorder's setup on
_user_line_cpp = getattr(_C, "_recorder_user_line", None)


def user_line():
    """'file:line' of the innermost frame outside the dyngrad package: the user's line that read a value."""
    if _user_line_cpp is not None and _NATIVE_READY[0]:
        return _user_line_cpp()
    return _user_line_py()


# ---- templates: a call's arguments and result with tensors as slots ----
class Slot:
    __slots__ = ("i",)

    def __init__(self, i):
        self.i = i

    def __eq__(self, other):
        return type(other) is Slot and other.i == self.i

    __hash__ = None


class ArrayConstant:
    """A numpy array passed to the core (from_numpy may share it): replayed as a fresh copy of the recorded one, or,
    for an array held outside the program, as that array itself (Note [Arrays read by reference])."""
    __slots__ = ("array", "source", "by_ref")

    def __init__(self, array):
        self.array = np.array(array, copy=True)
        self.source = array       # until the recording ends (_arrays_by_reference), then only if by_ref
        self.by_ref = False

    def value(self):
        return self.source if self.by_ref else self.array.copy()

    def __eq__(self, other):
        if type(other) is not ArrayConstant:
            return False
        if self.by_ref or other.by_ref:
            return self.source is other.source
        return (other.array.dtype == self.array.dtype
                and other.array.shape == self.array.shape and other.array.tobytes() == self.array.tobytes())


# Note [Arrays read by reference]: a numpy array a recorded step hands the core (`dg.from_numpy(a)`) used to be
# replayed as a copy of its recorded values. For an array the program made itself that is eager mode's value, but for
# one that outlives the call (a global, closed-over, argument or module-attribute array the caller refills between
# calls: `batch[:] = next_batch`) every replay read the first call's values: a silent wrong answer, where a tensor in
# its place is read by reference. Such an array is found where the guards look for tensors (the call's arguments,
# one level into tuples, lists and dicts; the function's closure cells and the globals its code names; the
# attributes of the modules it reaches, Note [State outside the arguments] in compiling.py) and is replayed as the
# array itself, as eager mode passes it; the others stay copies. A view of such an array, or a copy Python makes of
# it before the core sees it (`dg.tensor(a)` converts it), cannot be made again without the program's Python: its
# variant runs eagerly. Rebinding the name to another array is not seen.
def _outside_arrays(fn, args, kwargs):
    found = {}

    def add(v, depth=0):
        if isinstance(v, np.ndarray):
            found[id(v)] = v
        elif depth == 0 and type(v) in (tuple, list):
            for x in v:
                add(x, 1)
        elif depth == 0 and type(v) is dict:
            for x in v.values():
                add(x, 1)
    for v in list(args) + list(kwargs.values()):
        add(v)
    code = getattr(fn, "__code__", None)
    for cell in getattr(fn, "__closure__", None) or ():
        try:
            add(cell.cell_contents)
        except ValueError:
            pass
    if code is not None:
        g = getattr(fn, "__globals__", None) or {}
        for name in code.co_names:
            if name in g:
                add(g[name])
    owner = getattr(fn, "__self__", None)
    if owner is not None and hasattr(owner, "modules") and getattr(type(owner), "_compile_keeps_original", False):
        for m in owner.modules():
            for v in m.__dict__.values():
                add(v)
    return found


def _arrays_by_reference(variant, fn, args, kwargs, made=None):
    """`made`: every ArrayConstant of the variant, where the recorder knows them (Note [Recording in C++]), else
    the templates are walked for them."""
    if variant.eager_reason is not None:
        return
    if made is not None and not made:
        return
    constants = list(made) if made is not None else []

    def walk(template):
        t = type(template)
        if t is ArrayConstant:
            constants.append(template)
        elif t is Seq:
            for x in template.items:
                walk(x)
        elif t in (tuple, list):
            for x in template:
                walk(x)
        elif t is dict:
            for x in template.values():
                walk(x)
    if made is None:
        for step in variant.steps:
            walk(step.args)
            walk(step.kwargs)
        walk(variant.output)
    if not constants:
        return
    outside = _outside_arrays(fn, args, kwargs)
    for c in constants:
        src = c.source
        if src is None:
            continue
        if id(src) in outside and outside[id(src)] is src:
            c.by_ref = True
        elif isinstance(src, np.ndarray) and any(np.shares_memory(src, a) or (
                a.shape == src.shape and a.dtype.kind in "biufc" and src.dtype.kind in "biufc" and
                np.array_equal(a, src)) for a in outside.values()):
            variant.eager_reason = ("an array from outside the program", "the recording's end")
            variant.eager_why = ("hands the core a view or copy that Python made of a numpy array held outside "
                                 "the program, which a replay cannot make again (pass the array itself to "
                                 "dg.from_numpy, or a tensor)")
    for c in constants:
        if not c.by_ref:
            c.source = None


class _Maker:
    """Builds a tuple or list subclass from a list of items (Note [Named tuples in recordings]); one per type, so a
    Seq's kind compares by identity."""
    __slots__ = ("type", "make")

    def __init__(self, t):
        self.type = t
        self.make = getattr(t, "_make", t)

    def __call__(self, items):
        return self.make(items)


_makers = {}


def _maker(t):
    m = _makers.get(t)
    if m is None:
        m = _makers[t] = _Maker(t)
    return m


def _opaque_tensor_holder(template):
    """An object in an encoded output that holds tensors the encoding cannot rebuild (a dataclass, an object with
    tensor attributes): its type name, else None (Note [Named tuples in recordings])."""
    t = type(template)
    if t is Seq:
        for x in template.items:
            found = _opaque_tensor_holder(x)
            if found:
                return found
        return None
    if t in (tuple, list):
        for x in template:
            found = _opaque_tensor_holder(x)
            if found:
                return found
        return None
    if t is dict:
        for x in template.values():
            found = _opaque_tensor_holder(x)
            if found:
                return found
        return None
    if t in (Slot, ArrayConstant) or isinstance(template, _PLAIN) or isinstance(template, _C.dtype):
        return None
    values = list(getattr(template, "__dict__", {}).values())
    values += [getattr(template, k, None) for k in getattr(t, "__slots__", ()) if isinstance(k, str)]
    if isinstance(template, (tuple, list)):
        values += list(template)
    elif isinstance(template, dict):
        values += list(template.values())
    if any(isinstance(v, _C.Tensor) or type(v) in (tuple, list, dict) and any(isinstance(w, _C.Tensor) for w in
           (v.values() if type(v) is dict else v)) for v in values):
        return t.__name__
    return None


class Seq:
    __slots__ = ("kind", "items")

    def __init__(self, kind, items):
        self.kind, self.items = kind, items

    def __eq__(self, other):
        return type(other) is Seq and other.kind is self.kind and other.items == self.items

    __hash__ = None


# Note [Steps that stay eager]: a step that hands the engine a Python object other than data (a custom Function's
# ctx and backward, a hook, saved-tensor hooks, a callback) cannot be repeated: the object was made by the recorded
# call (a ctx holds that call's saved tensors) or runs Python the replay would skip. A variant with such a step is
# never replayed; its entry guard runs the program eagerly, with one warning.
_PLAIN = (int, float, bool, str, bytes, type(None), Slot, ArrayConstant, np.dtype, np.generic)


def _tail(args):
    """bridge.validate's arguments after its check, a module-level function of the shared layer (repeatable)."""
    items = args.items if type(args) is Seq else list(args)
    return items[1:]


def _plain(template):
    t = type(template)
    if t is Seq:
        return all(_plain(x) for x in template.items)
    if isinstance(template, (tuple, list)):          # dyngrad.Size too
        return all(_plain(x) for x in template)
    if t is dict:
        return all(_plain(v) for v in template.values())
    return isinstance(template, _PLAIN) or isinstance(template, _C.dtype)


def decode(template, slots):
    t = type(template)
    if t is dict:
        return {k: decode(v, slots) for k, v in template.items()}
    if t is Slot:
        return slots[template.i]
    if t is Seq:
        items = [decode(x, slots) for x in template.items]
        if template.kind is dict:
            return dict(items)
        return template.kind(items)
    if t is ArrayConstant:
        return template.value()
    return template


def _decoder(template):
    """decode(template, slots) made once into a function of the slots: a replay runs it at every call (an optimiser
    step's lists of parameters and gradients: decode's recursion cost ~30 Python calls per step)."""
    t = type(template)
    if t is Slot:
        i = template.i
        return lambda slots: slots[i]
    if t is ArrayConstant:
        return lambda slots: template.value()
    if t is dict:
        parts = [(k, _decoder(v)) for k, v in template.items()]
        return lambda slots: {k: d(slots) for k, d in parts}
    if t is not Seq:
        return lambda slots: template
    kind = template.kind
    if all(type(x) is Slot for x in template.items):
        index = [x.i for x in template.items]
        if kind is list:
            return lambda slots: [slots[i] for i in index]
        return lambda slots: kind([slots[i] for i in index])
    parts = [_decoder(x) for x in template.items]
    if kind is dict:
        return lambda slots: dict(d(slots) for d in parts)
    if kind is list:
        return lambda slots: [d(slots) for d in parts]
    return lambda slots: kind([d(slots) for d in parts])


def _has_slot(template):
    t = type(template)
    return t in (Slot, ArrayConstant) or (t is Seq and any(_has_slot(x) for x in template.items))


def _values_equal(a, b):
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        return a == b or (a != a and b != b)
    if isinstance(a, (tuple, list)):
        return len(a) == len(b) and all(_values_equal(x, y) for x, y in zip(a, b))
    try:
        return bool(a == b)
    except Exception:
        return a is b


# result templates: ("t", slot) a tensor, ("a", slot, copy) an array compared bitwise, ("v", value) a value
# compared, ("s", slot) state handed on, ("none",), ("seq", kind, [templates])
def match_result(template, result, slots):
    """Stores result's tensors in their slots; False where a value differs from the recording."""
    kind = template[0]
    if kind == "t":
        if not isinstance(result, _C.Tensor):
            return False
        slots[template[1]] = result
        return True
    if kind == "none":
        return result is None
    if kind == "v":
        return _values_equal(result, template[1])
    if kind == "a":
        recorded = template[2]
        if not (isinstance(result, np.ndarray) and result.dtype == recorded.dtype and result.shape == recorded.shape
                and result.tobytes() == recorded.tobytes()):
            return False
        slots[template[1]] = result
        return True
    if kind == "s":
        slots[template[1]] = result
        return True
    if not isinstance(result, template[1]) or len(result) != len(template[2]):
        return False
    return all(match_result(t, r, slots) for t, r in zip(template[2], result))


class Step:
    __slots__ = ("fn", "name", "args", "kwargs", "result", "line", "run", "out", "native", "plan")

    # (the C++ recorder makes Steps without this __init__, with the same fields: Note [Recording in C++])
    def __init__(self, fn, name, args, kwargs, result, line):
        self.fn, self.name, self.args, self.kwargs, self.result, self.line = fn, name, args, kwargs, result, line
        self.out = result[1] if result[0] == "t" else -1    # the slot of a plain tensor result
        self.native = _native_spec(args, kwargs)             # (slots, constants) for the C++ loop, or None
        self.plan = None     # a _run_backward's _C._BackwardPlan, or why it has none (Note [The backward as a ...])

    def __getattr__(self, name):
        # `run`, the step's call from the slots in Python, is made the first time a replay runs the step in Python
        # (most steps run in the C++ loop, so a recording no longer specialises a runner per step)
        if name == "run":
            run = self.run = _runner(self.fn, self.args, self.kwargs)
            return run
        raise AttributeError(f"'Step' object has no attribute '{name}'")

    def same_call(self, fn, args, kwargs):
        return fn is self.fn and args == self.args and kwargs == self.kwargs


_LOOP_VALUES = (bool, int, float, str)
# steps whose result is a dtype that follows from guarded state (the default dtype, the slots' dtypes): compared in
# the loop too, and a planned backward may be replayed across them (Note [Saved state no step returns])
_LOOP_DTYPES = ("_get_default_dtype", "result_type", "promote_types")


def _loop_out(step):
    """The C++ loop's `out` for a step (Note [Results compared in the loop] in csrc/bindings/capture_bind.cpp): its
    tensor's slot, -3 for None, -4 for a plain value compared there, -1 for a result Python compares."""
    kind = step.result[0]
    if kind == "t":
        return step.out
    if kind == "none":
        return -3
    if kind == "v" and type(step.result[1]) in _LOOP_VALUES and step.result[1] == step.result[1]:   # not NaN
        return -4
    if kind == "v" and step.name in _LOOP_DTYPES:   # a dtype, compared there too (and planned across)
        return -4
    if _seq_out_slots(step) is not None:
        return -5
    return -1


def _seq_out_kwargs(step, out):
    return {"out_slots": _seq_out_slots(step), "out_is_list": step.result[1] is list} if out == -5 else {}


def _seq_out_slots(step):
    """The slots of a tuple or list of tensors a step returns (split, chunk), stored by the C++ loop itself (Note
    [Sequence results in the loop] in csrc/bindings/capture_bind.cpp), or None."""
    r = step.result
    if (r[0] == "seq" and r[1] in (tuple, list) and r[2] and all(x[0] == "t" for x in r[2])
            and getattr(_C, "_replay_seq_results", False)):
        return [x[1] for x in r[2]]
    return None


# Note [The backward as a recorded program]: False makes every program built from now on replay its backward over
# the graph its forward builds, as before the plan (for measuring one against the other: bench/planned_backward.py)
PLANNED_BACKWARD = os.environ.get("DYNGRAD_COMPILE_PLAN", "1") != "0"
# Note [Scalar replay] (csrc/bindings/capture_bind.cpp): False makes every program built from now on replay its
# one-element programs with the tensors' kernels, as before (for measuring one against the other)
SCALAR_REPLAY = os.environ.get("DYNGRAD_COMPILE_SCALAR", "1") != "0"
# Note [Target checks in the loop] (csrc/bindings/capture_bind.cpp): False makes programs built from now on call
# cross_entropy's target check through bridge.validate at every replay, as before
TARGET_CHECKS_IN_LOOP = True


def _set_backward_plan(variant, program):
    """Note [The backward as a recorded program]: gives the C++ loop the plan of the variant's first backward;
    returns None when it took it, else why not (Variant.plan_reason, for tests and compile_stats)."""
    if not PLANNED_BACKWARD:
        return "planned backwards are off (capture.PLANNED_BACKWARD, DYNGRAD_COMPILE_PLAN=0)"
    for i, step in enumerate(variant.steps):
        if step.name == "_run_backward":
            if isinstance(step.plan, str) or step.plan is None:
                return step.plan or "the backward was not planned"
            return program.set_backward_plan(i, step.plan, sorted(_slots_in(variant.output)))
    return "no backward"


def _native_spec(args, kwargs):
    """The arguments as the C++ loop takes them (Note [Replaying steps in C++] in csrc/bindings/capture_bind.cpp):
    positional slots and constants only."""
    items = args.items if type(args) is Seq else list(args)
    if kwargs or len(items) > 16 or any(type(a) in (Seq, ArrayConstant) for a in items):
        return None
    return [a.i if type(a) is Slot else -1 for a in items], [None if type(a) is Slot else a for a in items]


def _native_seq_spec(step):
    """(slots, constants, seqs) of a step whose positional arguments include tuples or lists of slots and plain
    constants, one level deep (Note [Sequence arguments in the loop] in csrc/bindings/capture_bind.cpp), or None:
    keywords, deeper nesting, arrays, or a loop without the feature (the reference engine's twin)."""
    args, kwargs = step.args, step.kwargs
    items = args.items if type(args) is Seq else list(args)
    if kwargs or len(items) > 16 or not getattr(_C, "_replay_seq_args", False):
        return None
    slots, consts, seqs = [], [], []
    for a in items:
        if type(a) is Slot:
            slots.append(a.i), consts.append(None), seqs.append(None)
        elif type(a) is Seq:
            if a.kind is not tuple and a.kind is not list:
                return None
            inner = a.items
            if any(type(x) in (Seq, ArrayConstant) or isinstance(x, (tuple, list, dict)) for x in inner):
                return None
            slots.append(-1), consts.append(None)
            seqs.append((a.kind is list, [x.i if type(x) is Slot else -1 for x in inner],
                         [None if type(x) is Slot else x for x in inner]))
        elif type(a) is ArrayConstant:
            return None
        else:
            slots.append(-1), consts.append(a), seqs.append(None)
    return slots, consts, seqs


def _slots_in(template):
    """The slots a template reads."""
    t = type(template)
    if t is Slot:
        return {template.i}
    if t is Seq:
        return set().union(*(_slots_in(x) for x in template.items)) if template.items else set()
    if t in (tuple, list):
        return set().union(*(_slots_in(x) for x in template)) if template else set()
    if t is dict:
        return set().union(*(_slots_in(x) for x in template.values())) if template else set()
    return set()


def _runner(fn, args, kwargs):
    """run(slots): the step's call with its arguments read from the slots, specialised for the common shapes of a
    call (one or two tensors, tensors and constants) so that a replay spends its time in the core."""
    items = args.items if type(args) is Seq else list(args)
    simple = not kwargs and all(type(a) is not Seq and type(a) is not ArrayConstant for a in items)
    if not simple:
        if not _has_slot(args) and not _has_slot(kwargs):
            return lambda slots: fn(*args, **kwargs)
        read_args, read_kwargs = _decoder(args), _decoder(kwargs)
        if not kwargs:
            return lambda slots: fn(*read_args(slots))
        return lambda slots: fn(*read_args(slots), **read_kwargs(slots))
    args = tuple(items)
    kinds = [type(a) is Slot for a in args]
    if all(kinds):
        index = [a.i for a in args]
        if len(index) == 1:
            i0, = index
            return lambda slots: fn(slots[i0])
        if len(index) == 2:
            i0, i1 = index
            return lambda slots: fn(slots[i0], slots[i1])
        return lambda slots: fn(*[slots[i] for i in index])
    if not any(kinds):
        return lambda slots: fn(*args)
    pairs = [(a.i, None) if k else (-1, a) for a, k in zip(args, kinds)]
    return lambda slots: fn(*[slots[i] if i >= 0 else c for i, c in pairs])


def _register_checks(steps):
    """Note [Target checks in the loop] (csrc/bindings/capture_bind.cpp): the C++ loop checks cross_entropy's
    class targets itself; it is told which function that check is (found among the steps' checks, by its module
    and name: the shared layer imports no op module from here)."""
    register = getattr(_C._ReplayProgram, "set_target_range_check", None)
    if register is None:
        return
    if not TARGET_CHECKS_IN_LOOP:
        register(None)
        return
    for step in steps:
        if step.name == "validate" and type(step.args) is Seq and step.args.items:
            check = step.args.items[0]
            if (getattr(check, "__name__", None) == "_check_target_range"
                    and getattr(check, "__module__", "").endswith("_api.ops.loss")):
                register(check)
                return


class Variant:
    """One recorded program: its steps, the externals it reads by reference, where its outputs come from."""

    def __init__(self, n_args):
        self.n_args = n_args
        self.steps = []
        self.externals = {}       # slot -> the tensor (or array) read by reference at every replay
        self.n_slots = n_args
        self.output = None
        self.replays = 0
        self.eager_reason = None  # (op, line) of a step static replay cannot repeat (Note [Steps that stay eager])
        self.origin = None        # (reason, line) it was recorded after: a miss, or the first call of an entry guard

    def native(self):
        """The C++ replay loop over this variant's steps (those whose call Python must build are handed back), or
        None when more than one step in 8 would go back to Python anyway."""
        program = self.__dict__.get("_native", False)
        if program is False:
            program = None
            # each step the loop hands back to Python costs a round trip through pybind11 (~2 us: measured on the
            # MLP step, 25 of 50 steps handed back, the C++ loop took 198 us where the Python loop took 152)
            seq_specs = [_native_seq_spec(step) if step.native is None else None for step in self.steps]
            trips = sum((step.native is None and spec is None) or _loop_out(step) == -1
                        for step, spec in zip(self.steps, seq_specs))
            if trips * 8 <= len(self.steps):
                _register_checks(self.steps)
                program = _C._ReplayProgram(_C.Tensor)
                for step, spec in zip(self.steps, seq_specs):
                    if spec is not None:              # sequences of slots, built in the loop
                        out = _loop_out(step)
                        program.add(step.fn, spec[0], spec[1], out, step.name,
                                    step.result[1] if out == -4 else None, spec[2], **_seq_out_kwargs(step, out))
                    elif step.native is None:         # Python builds and runs this one, from these slots
                        reads = sorted(_slots_in(step.args) | _slots_in(step.kwargs))
                        program.add(None, reads, [None] * len(reads), -2, step.name)
                    else:
                        out = _loop_out(step)
                        program.add(step.fn, step.native[0], step.native[1], out, step.name,
                                    step.result[1] if out == -4 else None, **_seq_out_kwargs(step, out))
                exported = [False] * self.n_slots
                for i in _slots_in(self.output):
                    exported[i] = True
                program.set_exported(exported)
                self.plan_reason = _set_backward_plan(self, program)
                if hasattr(program, "set_scalar"):
                    program.set_scalar(SCALAR_REPLAY)
            self._native = program
        return program

    plan_reason = "no C++ replay loop"

    def verify_table(self):
        """The steps as the C++ fast paths compare them while a verified call follows this variant (Note [Verified
        ops in the fast paths] in csrc/bindings/fast_paths.cpp), or None on an engine without them."""
        table = self.__dict__.get("_verify_table", False)
        if table is False:
            table = None
            if _VerifyTable is not None:
                entries = []
                for step in self.steps:
                    spec = step.native
                    seqs = None
                    if spec is None and not step.kwargs:
                        seq_spec = _native_seq_spec(step)   # tuples or lists of slots: a backward, an optimiser
                        if seq_spec is not None:
                            spec, seqs = seq_spec[:2], seq_spec[2]
                    if spec is None or step.kwargs:
                        entries.append(None)
                        continue
                    out = _loop_out(step)
                    entries.append((step.fn, step.name, spec[0], spec[1], out, step.result[1] if out == -4 else None,
                                    _C_BINDINGS.get(step.name) is step.fn, seqs))
                table = _VerifyTable(entries)
                self.verify_plan_reason = _give_verify_plan(self, table)
            self._verify_table = table
        return table

    verify_plan_reason = "no C++ comparison"

    def fresh_slots(self, arg_tensors):
        # the externals laid out once (an external is only ever added, at a new slot, while recording: the layout is
        # made again when the dict, its size or the slot count changed)
        layout = self.__dict__.get("_layout")
        externals = self.externals
        if layout is None or layout[0] is not externals or layout[1] != len(externals) or layout[2] != self.n_slots:
            template = [None] * self.n_slots
            for i, t in externals.items():
                template[i] = t
            layout = self._layout = (externals, len(externals), self.n_slots, template)
        slots = layout[3].copy()
        slots[:len(arg_tensors)] = arg_tensors
        return slots


# Note [Verified ops run from the plan] (csrc/bindings/fast_paths.cpp): the ops that may make their node only later,
# when a verified call leaves its recording, by running again: pure functions of their inputs. The one- and
# two-tensor primitives, sum, mean and mT (the table's kinds 1, 2 and 4) are, and these
_RERUNNABLE = frozenset({"cross_entropy", "log_softmax", "softmax", "matmul", "reshape", "permute", "transpose",
                         "mT", "expand", "squeeze", "unsqueeze", "mse_loss", "relu", "sum", "mean", "tanh",
                         "sigmoid", "exp", "log"})


_HOOK_METHODS = ("detach_", "retain_grad", "register_hook", "register_post_accumulate_grad_hook")


def _give_verify_plan(variant, table):
    """Note [Verified ops run from the plan]: gives the verified table the plan of the variant's backward when the
    variant fits; returns None, or why not (Variant.verify_plan_reason, for tests)."""
    if not PLANNED_BACKWARD:
        return "planned backwards are off (capture.PLANNED_BACKWARD, DYNGRAD_COMPILE_PLAN=0)"
    steps = variant.steps
    b = next((i for i, step in enumerate(steps) if step.name == "_run_backward"), None)
    if b is None:
        return "no backward"
    plan = steps[b].plan
    if plan is None or isinstance(plan, str):
        return plan or "the backward was not planned"
    kinds = table.kinds()
    history = table.set_plan(b, plan, [kinds[k] in (1, 2, 4) or steps[k].name in _RERUNNABLE
                                       for k in range(len(steps))])
    with_history = {steps[k].result[1] for k in range(b) if history[k]}
    why = None
    for k in range(b):
        step = steps[k]
        name = step.name
        if name.endswith("_"):
            why = f"{name} writes in place before the backward"
        elif history[k] and kinds[k] == 0 and name not in _RERUNNABLE:
            why = f"{name} is not known to be a pure op"
        elif (name in _TENSOR_PROPERTIES or name.endswith(".set") or name in _HOOK_METHODS) and \
                (_slots_in(step.args) | _slots_in(step.kwargs)) & with_history:
            why = f"{name} of a tensor with history before the backward"
        if why is not None:
            table.set_plan(-1, None)
            return why
    return None


def _native_setup():
    """Gives the C++ recorder this file's template and step classes (once)."""
    if _NATIVE_READY[0]:
        return
    _C._recorder_setup(Slot, Seq, ArrayConstant, Step, _C.Tensor, np.ndarray, _PLAIN + (_C.dtype,), _maker,
                       _file_of_user, _user_files)
    _NATIVE_READY[0] = True


# ---- the recorder: swaps the surface for wrappers while one thread records ----
class Recorder:
    """Records (or serves, then records) the steps of one call of a program."""
    _cursor = None                    # a verified call's C++ cursor (Note [Verified ops in the fast paths]), if any

    def __init__(self, variant, serve=None, serve_results=None, record_rest=True):
        self.variant = variant
        self.thread = threading.get_ident()
        self._depth = 0
        self.slot_of = {}             # id(object) -> slot
        self.keep = []                # every object given a slot stays alive while recording (ids stay unique)
        self.serve = serve or []      # steps to serve from a replay before recording (Note [Catching up after a miss])
        self.serve_results = serve_results or []
        self.served = 0
        self.record_rest = record_rest
        self.checking = None          # (Note [Checking a recording]) the variant the calls are checked against
        self.group = ()
        self._checked = 0             # (the `checked`, `depth` and `verifying` properties, without their cursor)
        self.missed = None            # (step, result) where a checked call saw a new value: recording from there
        self._verifying = None        # (Note [Verified replay]) the variant the calls are verified against
        self.left = None              # (reason, line) where a verified call left its recording
        # Note [Recording in C++]: the C++ recorder, holding the depth, which records the calls this class's
        # record_step would record (_sync_core) with the same slot map and list
        core = None
        if _RecorderCore is not None and NATIVE_RECORDER:
            _native_setup()
            core = _RecorderCore(self, variant, self.slot_of, self.keep)
            core.depth = self._depth
        self._core = core
        self.merge_externals = False  # verify(): the group's externals are new's once the call leaves (leave)

    # Note [Verified ops in the fast paths]: while a verified call has a cursor, the index of the next step and the
    # depth live in it, so the C++ fast paths read and move them; the variant followed is its table.
    @property
    def checked(self):
        cursor = self._cursor
        return cursor.index if cursor is not None else self._checked

    @checked.setter
    def checked(self, value):
        cursor = self._cursor
        if cursor is not None:
            cursor.index = value
        else:
            self._checked = value

    @property
    def depth(self):
        cursor = self._cursor
        if cursor is not None:
            return cursor.depth
        core = self.__dict__.get("_core")
        return core.depth if core is not None else self._depth

    @depth.setter
    def depth(self, value):
        cursor = self._cursor
        if cursor is not None:
            cursor.depth = value
            return
        core = self.__dict__.get("_core")
        if core is not None:
            core.depth = value
        self._depth = value

    def _sync_core(self):
        """Note [Recording in C++]: the C++ recorder records a call exactly where call() would go to record_step:
        nothing to verify, check or serve (and no verified call's cursor, which holds the depth then)."""
        core = self._core
        if core is not None:
            core.plain = (self._verifying is None and self.checking is None and self.served >= len(self.serve)
                          and self.record_rest and self._cursor is None)

    def close(self):
        """The recording has ended: the C++ recorder lets go of this recorder, its variant and its maps."""
        core = self._core
        if core is not None:
            core.plain = False
            core.drop()
            self._core = None

    @property
    def verifying(self):
        return self._verifying

    @verifying.setter
    def verifying(self, variant):
        self._verifying = variant
        cursor = self._cursor
        if cursor is not None:
            cursor.follow(variant.verify_table() if variant is not None else None)
        if self.__dict__.get("_core") is not None:
            self._sync_core()

    def bind_args(self, tensors):
        for i, t in enumerate(tensors):
            self.slot_of.setdefault(id(t), i)
            self.keep.append(t)

    def new_slot(self, obj):
        i = self.variant.n_slots
        self.variant.n_slots += 1
        self.slot_of[id(obj)] = i
        self.keep.append(obj)
        return i

    def encode(self, obj):
        core = self._core
        if core is not None:
            return core.encode(obj)     # Note [Recording in C++]: _encode_py's templates, made in C++
        return self._encode_py(obj)

    def _encode_py(self, obj):
        """Recorder.encode's definition (the C++ recorder's encode gives the same templates)."""
        if isinstance(obj, _C.Tensor) or isinstance(obj, np.ndarray):
            i = self.slot_of.get(id(obj))
            if i is None:
                if isinstance(obj, np.ndarray):
                    return ArrayConstant(obj)
                i = self.new_slot(obj)
                self.variant.externals[i] = obj
            return Slot(i)
        t = type(obj)
        if t is tuple or t is list:
            items = [self._encode_py(x) for x in obj]
            return Seq(t, items) if any(_has_slot(x) for x in items) else (obj if t is tuple else list(obj))
        if t is dict:
            items = [Seq(tuple, [k, self._encode_py(v)]) for k, v in obj.items()]
            return Seq(dict, items) if any(_has_slot(x) for x in items) else dict(obj)
        if isinstance(obj, (tuple, list)):
            # Note [Named tuples in recordings]: a namedtuple (the (values, indices) of max, sort, topk, ...) or
            # another tuple or list subclass holding tensors is rebuilt from its slots at every replay; kept as the
            # object, a replay returned the recording's own tensors (a silent wrong answer, and a leak)
            items = [self._encode_py(x) for x in obj]
            return Seq(_maker(t), items) if any(_has_slot(x) for x in items) else obj
        return obj

    def bind_result(self, name, result):
        if isinstance(result, _C.Tensor):
            return ("t", self.new_slot(result))
        if result is None:
            return ("none",)
        if name in _STATE_RESULTS:
            return ("s", self.new_slot(result))
        if isinstance(result, np.ndarray):
            return ("a", self.new_slot(result), np.array(result, copy=True))
        if type(result) in (tuple, list):
            return ("seq", type(result), [self.bind_result(name, r) for r in result])
        return ("v", result)

    def call(self, fn, name, args, kwargs):
        if self.verifying is not None:
            return self.verify_next(fn, name, args, kwargs)
        if self.checking is not None:
            return self.check_next(fn, name, args, kwargs)
        if self.served < len(self.serve):
            return self.serve_next(fn, name, args, kwargs)
        if not self.record_rest:
            return fn(*args, **kwargs)
        core = self._core
        if core is None:
            return self.record_step(fn, name, args, kwargs, self.encode(tuple(args)), self.encode(kwargs))
        made = len(core.arrays)
        try:
            return self.record_step(fn, name, args, kwargs, self.encode(tuple(args)), self.encode(kwargs))
        except BaseException:
            del core.arrays[made:]     # a call that raised is no step: its arrays are none of the variant's
            raise

    def record_step(self, fn, name, args, kwargs, a, k):
        if self.variant.eager_reason is None and not (_plain(a if name != "validate" else _tail(a)) and _plain(k)):
            self.variant.eager_reason = (name, user_line())
        if name == "_set_rng_state" and type(a) is not Seq and self.variant.eager_reason is None:
            # Note [Random states set from Python]: the core's generator set to a state Python holds (a Generator's
            # own, passed as generator=; set_rng_state(t)). Recorded, it is a constant: every replay would draw the
            # recording's numbers again, and the Generator, whose state Python updates, would never advance. A
            # state the program took with _get_rng_state (a slot: the swap back, checkpoint's preserved state) is
            # not this case
            self.variant.eager_reason = (name, user_line())
            self.variant.eager_why = ("sets the random generator to a state held in Python (a Generator passed "
                                      "as generator=, set_rng_state), which a replay would repeat as a constant")
        plan = self.plan_backward(args, kwargs) if name == "_run_backward" else None
        self.depth += 1
        try:
            result = fn(*args, **kwargs)
        finally:
            self.depth -= 1
        template = self.bind_result(name, result)
        line = user_line() if template[0] != "t" or name in _TENSOR_PROPERTIES else None
        step = Step(fn, name, a, k, template, line)
        step.plan = plan
        self.variant.steps.append(step)
        return result

    def plan_backward(self, args, kwargs):
        """Note [The backward as a recorded program] (csrc/bindings/replay_backward.cpp): the plan of the backward
        this _run_backward step is about to run, made from the graph the recorded forward built, or why there is
        none (a str)."""
        planner = getattr(_C, "_plan_backward", None)
        if planner is None:
            return "this engine has no planned backward"
        if kwargs or len(args) != 7:
            return "_run_backward called with keywords"
        roots, grads, inputs, retain_graph, create_graph, accumulate, _ = args
        if retain_graph or create_graph or not accumulate or inputs:
            return "retain_graph, create_graph, inputs= or autograd.grad"
        if not isinstance(roots, (tuple, list)) or not all(isinstance(r, _C.Tensor) for r in roots):
            return "roots that are not a sequence of tensors"
        grads = [None] * len(roots) if grads is None else list(grads)
        if len(grads) != len(roots) or not all(g is None or isinstance(g, _C.Tensor) for g in grads):
            return "gradients that are not tensors"
        slot_of = self.slot_of
        if any(slot_of.get(id(t)) is None for t in list(roots) + [g for g in grads if g is not None]):
            return "a root or gradient without a slot"
        pairs = [(i, t) for i, t in self.variant.externals.items() if isinstance(t, _C.Tensor)]
        if self._core is not None:
            pairs = self._core.tensor_pairs(pairs)    # the loop below, in C++ (~0.2 us a kept object here)
        else:
            seen = {id(t) for _, t in pairs}   # (a catch-up's recorder knows the externals by slot_of alone)
            for obj in self.keep:
                if isinstance(obj, _C.Tensor) and id(obj) not in seen:
                    seen.add(id(obj))
                    slot = slot_of.get(id(obj))
                    if slot is not None:
                        pairs.append((slot, obj))
        inputs = list(range(self.variant.n_args)) + list(self.variant.externals)
        return planner(pairs, inputs, [slot_of[id(r)] for r in roots],
                       [-1 if g is None else slot_of[id(g)] for g in grads])

    def serve_next(self, fn, name, args, kwargs):
        """Note [Catching up after a miss]: the Python function, run again, must issue the steps the replay ran."""
        step = self.serve[self.served]
        a, k = self.encode(tuple(args)), self.encode(kwargs)
        if not step.same_call(fn, a, k):
            raise RuntimeError(
                f"compile: re-running the program after a guard miss, its Python issued {name} where the recording "
                f"has {step.name} (step {self.served}, {step.line or user_line()}): it depends on state the guards "
                f"cannot see (Python state that changed between calls). Its earlier steps have run; run it eagerly "
                f"(compile(..., disable=True)) or make that state an argument.")
        result = self.serve_results[self.served]
        self.served += 1
        if self.served == len(self.serve):
            self._sync_core()
        self._register_served(step.result, result)
        if self.record_rest:
            new = step
            if self.served == len(self.serve):   # the step that missed: the new value becomes its guard
                line = step.line or user_line()
                new = Step(step.fn, step.name, step.args, step.kwargs, self._rebind(step.result, result), line)
            self.variant.steps.append(new)
        return result

    def check_next(self, fn, name, args, kwargs):
        """Note [Checking a recording]: the call Python issues must be the recording's next step; it runs as in eager
        mode. A new value is a guard miss (the rest is recorded as a variant); another call is a divergence."""
        variant = self.checking
        a, k = self.encode(tuple(args)), self.encode(kwargs)
        if self.checked >= len(variant.steps) or not variant.steps[self.checked].same_call(fn, a, k):
            recorded = variant.steps[self.checked] if self.checked < len(variant.steps) else None
            raise Divergence(self.checked, name, user_line(), recorded)
        step = variant.steps[self.checked]
        self.depth += 1
        try:
            result = fn(*args, **kwargs)
        finally:
            self.depth -= 1
        if not match_result(step.result, result, _Scratch()):
            sibling = _sibling(self.group, variant, self.checked, result)
            if sibling is None:                 # a guard miss: record a new variant from here
                self.missed = (step, result)
                self.variant.n_slots = max(v.n_slots for v in self.group)
                for v in self.group:
                    self.variant.externals.update(v.externals)
                self.variant.steps = variant.steps[:self.checked] + [
                    Step(step.fn, step.name, step.args, step.kwargs, self._rebind(step.result, result),
                         step.line or user_line())]
                self.checking = None
                self._sync_core()
                self._register_served(self.variant.steps[-1].result, result)
                return result
            self.checking = variant = sibling
            step = variant.steps[self.checked]
        self._register_served(step.result, result)
        self.checked += 1
        return result

    def verify_next(self, fn, name, args, kwargs):
        """Note [Verified replay]: the call Python issues runs as in eager mode, checked against the recording's next
        step (the same function, constants and slots, then the same values back); where it is not, the recording is
        left and the rest of the call is recorded as a new variant (or just runs, once the program is full)."""
        cursor = self._cursor
        if cursor is not None:      # Note [Verified ops run from the plan]: Python compares or runs this one
            cursor.sync()
        variant, i = self.verifying, self.checked
        steps = variant.steps
        if i < len(steps) and not kwargs:       # the common case, compared without encoding the call
            step = steps[i]
            native = step.native
            if native is not None and step.fn is fn and _same_positional(args, native, self.slot_of):
                self.depth += 1
                try:
                    result = fn(*args)
                finally:
                    self.depth -= 1
                if step.out >= 0 and isinstance(result, _C.Tensor):
                    self.slot_of[id(result)] = step.out
                    self.keep.append(result)
                    self.checked = i + 1
                    return result
                return self.verify_result(variant, step, i, result)
        a, k = self.encode(tuple(args)), self.encode(kwargs)
        if i >= len(steps) or not steps[i].same_call(fn, a, k):
            sibling = _call_sibling(self.group, variant, i, fn, a, k)
            if sibling is None:
                line = user_line()
                if i < len(steps) and steps[i].fn is fn:
                    reason = f"the program called {name} with {_argument_difference(steps[i], a, k)}"
                else:
                    expected = (steps[i].name + (f" (recorded at {steps[i].line})" if steps[i].line else "")
                                if i < len(steps) else "the end of the program")
                    reason = f"the program issued {name} where the recording has {expected}"
                self.leave(variant, i, reason, line)
                if not self.record_rest:
                    return fn(*args, **kwargs)
                return self.record_step(fn, name, args, kwargs, a, k)
            self.verifying = variant = sibling
            steps = variant.steps
        step = steps[i]
        self.depth += 1
        try:
            result = fn(*args, **kwargs)
        finally:
            self.depth -= 1
        return self.verify_result(variant, step, i, result)

    def result_from_cpp(self, result):
        """The result of a call the C++ side matched with the next step (_VerifiedFunction) but cannot compare itself
        (a value that differs, an array, a sequence): compared here, as verify_next would."""
        i = self.checked
        return self.verify_result(self._verifying, self._verifying.steps[i], i, result)

    def verify_result(self, variant, step, i, result):
        name = step.name
        # a step recorded with a tensor result that now gives None (`p.grad` of a parameter the last backward did
        # not reach) is a value Python reads, as `p.grad is None` is: a miss, not an error
        if (step.out < 0 or not isinstance(result, _C.Tensor)) and not match_result(step.result, result, _Scratch()):
            sibling = _sibling(self.group, variant, i, result)
            if sibling is None:                 # a value Python reads changed: the step ran, its new value is a guard
                line = step.line or user_line()
                self.leave(variant, i, f"{step.name} returned {_short(result)} where the recording has "
                                       f"{_short(describe_result(step.result))}", line)
                if self.record_rest:
                    new = Step(step.fn, step.name, step.args, step.kwargs, self._rebind(step.result, result), line)
                    self.variant.steps.append(new)
                    self._register_served(new.result, result)
                return result
            self.verifying = variant = sibling
            step = variant.steps[i]
        elif step.out >= 0 and not isinstance(result, _C.Tensor):
            raise RuntimeError(f"compile: {name} returned {type(result).__name__} where its recording returned a "
                               f"tensor (step {i}, {step.line or user_line()}).")
        self._register_served(step.result, result)
        self.checked += 1
        return result

    def leave(self, variant, i, reason, line):
        """A verified call parts from `variant` at step i: its steps so far are the new variant's prefix."""
        self.left = (reason, line)
        self.verifying = None
        self.variant.steps = variant.steps[:i]
        if self.merge_externals:      # what verify() left for here: the new variant reads the group's externals
            self.merge_externals = False
            externals = self.variant.externals
            for v in self.group:
                for slot, x in v.externals.items():
                    externals.setdefault(slot, x)

    def _register_served(self, template, result):
        kind = template[0]
        if kind in ("t", "a", "s"):
            self.slot_of[id(result)] = template[1]
            self.keep.append(result)
        elif kind == "seq" and type(result) in (tuple, list):
            for t, r in zip(template[2], result):
                self._register_served(t, r)

    def _rebind(self, template, result):
        kind = template[0]
        if kind == "v":
            return ("v", result)
        if kind == "a":
            return ("a", template[1], np.array(result, copy=True)) if isinstance(result, np.ndarray) else \
                self.bind_result(None, result)
        if kind == "seq" and type(result) is template[1] and len(result) == len(template[2]):
            return ("seq", template[1], [self._rebind(t, r) for t, r in zip(template[2], result)])
        if kind == "t" and isinstance(result, _C.Tensor):
            return template
        return self.bind_result(None, result)


def _python_wrapper(fn, name):
    def captured(*args, **kwargs):
        rec = _active[0]
        if rec is None or rec.depth or rec.thread != threading.get_ident():
            return fn(*args, **kwargs)
        return rec.call(fn, name, args, kwargs)
    captured.__name__ = getattr(fn, "__name__", name)
    captured.__wrapped__ = fn
    return captured


def _function_wrapper(fn, name, method=False):
    """What the recorder puts in place of fn: on the C++ engine a _VerifiedFunction, which matches the next step of
    a verified call itself (Note [Verified ops in the fast paths]) and hands every other call to a _RecordingFunction,
    which records it in C++ (Note [Recording in C++]) or hands it to the Python wrapper; a Tensor method keeps the
    Python wrapper (a class attribute must bind self as a function does)."""
    wrapper = _python_wrapper(fn, name)
    if _VerifiedFunction is None or method:
        return wrapper
    if _RecordingFunction is not None:
        # steps the Python recorder records itself: a backward (planned there) and a random state set from Python
        wrapper = _RecordingFunction(fn, name, wrapper, is_property=name in _TENSOR_PROPERTIES,
                                     is_state=name in _STATE_RESULTS,
                                     python=name in ("_run_backward", "_set_rng_state"),
                                     is_validate=name == "validate")
    return _VerifiedFunction(fn, wrapper)


def _surface():
    """(module or class, name, original) of everything a program's steps go through."""
    names = []
    for name in dir(_C):
        if name in _NOT_STEPS or name.startswith("__"):
            continue
        obj = getattr(_C, name)
        if isinstance(obj, type) or not callable(obj):
            continue
        names.append((_C, name, obj))
    return names


class _Swap:
    """Puts the wrappers in place for one recording and takes them out again (Note [Capture at the narrow
    surface])."""

    def __init__(self, recorder):
        self.recorder = recorder
        self.saved = []

    def __enter__(self):
        _lock.acquire()
        try:
            if _stays_in_place():
                _keep_in_place()            # Note [The recorded surface stays in place]: nothing to swap back
            else:
                plan = _swap_plan()
                if not _put_in_place(plan):     # an original was replaced since the plan was made: make it again
                    _plan[1] = []
                    plan = _swap_plan()
                    if not _put_in_place(plan):
                        raise RuntimeError("compile: the recorded surface (dyngrad._C) changed while it was swapped")
                self.saved = plan
            _active[0] = self.recorder
            core = self.recorder._core
            if core is not None:
                self.recorder._sync_core()
                core.activate()
            _local.depth = getattr(_local, "depth", 0) + 1
            _capturing_threads.add(threading.get_ident())
            _C._set_capturing(True)
        except BaseException:
            self.__exit__()
            raise
        return self

    def __exit__(self, *exc):
        _C._set_capturing(False)
        _active[0] = None
        core = self.recorder._core
        if core is not None:
            core.deactivate()
        _local.depth = max(0, getattr(_local, "depth", 0) - 1)
        if not _local.depth:
            _capturing_threads.discard(threading.get_ident())
        for owner, is_type, names, raws, _ in reversed(self.saved):
            if is_type:
                for name, raw in zip(names, raws):
                    setattr(owner, name, raw)
            elif _swap_dict is not None:
                _swap_dict(vars(owner), names, None, raws)
            else:
                vars(owner).update(zip(names, raws))
        self.saved = []
        _lock.release()
        return False


_plan = [None, [], 0]   # the _C module it was made for, [(owner, is_type, names, originals, wrappers)], len(vars(_C))


# Note [The recorded surface stays in place]
# On the C++ engine the wrappers are put in place once, at the first recording, and stay: a _VerifiedFunction (or
# _VerifiedMethod, a Tensor method's, which binds self) passes a call straight to its function while no thread
# records (csrc/bindings/fast_paths.cpp, the same process-wide flag the fast paths read, _C._set_capturing), so an
# eager call of a _C function pays one indirection, ~20 ns, and a verified call no longer swaps ~200 names in and
# out (~12 us of its ~26 us fixed cost, measured on an Intel Xeon family 6 model 167: docs/compile.md). Each
# recording still checks that its wrappers are in place (a _C function monkeypatched since is wrapped in its turn):
# an unchanged _C dict is not searched again (its version, _VerifyCursor.surface_in_place). The reference engine,
# without these types, swaps the surface per recording as before; so does STAY_IN_PLACE = False (for measuring).
STAY_IN_PLACE = os.environ.get("DYNGRAD_COMPILE_SWAP", "0") != "1"
_VerifiedMethod = getattr(_C, "_VerifiedMethod", None)
_surface_check = getattr(_VerifyCursor, "surface_in_place", None)
_installed = [None, [], 0]   # the _C it was made for, [[owner, is_type, names, wrappers, version]], len(vars(_C))
_originals = {}              # id(stand-in) -> (stand-in, original): every stand-in ever put in place
_stand_ins = {}              # (id(owner), name) -> (original, stand-in): made once per original


def _stays_in_place():
    return STAY_IN_PLACE and _VerifiedMethod is not None and _surface_check is not None


def _original(value):
    """What a stand-in stands for (the value itself when it is none of ours)."""
    entry = _originals.get(id(value))
    return entry[1] if entry is not None and entry[0] is value else value


def _in_place():
    """Whether every stand-in of the last install is where it was put (cheap when _C's dict has not changed)."""
    groups = _installed[1]
    return _installed[0] is _C and groups and _installed[2] == len(vars(_C)) and _surface_check(groups)


def _keep_in_place():
    """Note [The recorded surface stays in place]: the stand-ins in place, put there again where something else
    (a monkeypatch) replaced one since."""
    if _in_place():
        return
    Tensor = _C.Tensor
    entries = []                 # (owner, name, original, the stand-in)
    for name in dir(_C):
        if name in _NOT_STEPS or name.startswith("__"):
            continue
        value = _original(getattr(_C, name))
        if isinstance(value, type) or not callable(value):
            continue
        entries.append((_C, name, value, lambda fn, name: _function_wrapper(fn, name)))
    entries.append((bridge, "validate", _original(bridge.validate), lambda fn, name: _function_wrapper(fn, name)))
    for name in _TENSOR_METHODS:
        raw = _class_attr(Tensor, name)
        if raw is not None:
            entries.append((Tensor, name, _original(raw), _method_stand_in))
    for name in _TENSOR_PROPERTIES:
        raw = _class_attr(Tensor, name)
        if raw is not None:
            entries.append((Tensor, name, _original(raw), lambda prop, name: _property_wrapper(prop, name)))
    groups, index = [], {}
    for owner, name, original, make in entries:
        made = _stand_ins.get((id(owner), name))
        if made is None or made[0] is not original:
            made = _stand_ins[(id(owner), name)] = (original, make(original, name))
            _originals[id(made[1])] = (made[1], original)
        stand_in = made[1]
        if id(owner) not in index:
            index[id(owner)] = len(groups)
            groups.append([owner, isinstance(owner, type), [], [], -1])
        group = groups[index[id(owner)]]
        group[2].append(name), group[3].append(stand_in)
        if group[1]:
            if owner.__dict__.get(name) is not stand_in:
                setattr(owner, name, stand_in)        # a class's type cache must see it
        elif vars(owner).get(name) is not stand_in:
            vars(owner)[name] = stand_in
    _installed[0], _installed[1], _installed[2] = _C, groups, len(vars(_C))
    if not _in_place():
        raise RuntimeError("compile: the recorded surface (dyngrad._C) changed while it was put in place")


def _method_stand_in(raw, name):
    """A Tensor method's stand-in: a _VerifiedMethod over the function the class attribute gives (a pybind11
    method's function, a Python function)."""
    if not hasattr(raw, "__get__"):        # a class attribute that binds nothing: its stand-in binds nothing either
        return _VerifiedFunction(raw, _python_wrapper(raw, name))
    fn = raw.__get__(None, _C.Tensor)
    return _VerifiedMethod(fn, _python_wrapper(fn, name))


def _take_out_of_place():
    """The originals back where the stand-ins are (STAY_IN_PLACE measured against the swap: bench/verified_plan.py
    --surface); the next recording puts the stand-ins in place again."""
    with _lock:
        for owner, is_type, names, stand_ins, _ in _installed[1]:
            for name, stand_in in zip(names, stand_ins):
                current = owner.__dict__.get(name) if is_type else vars(owner).get(name)
                if current is stand_in:
                    if is_type:
                        setattr(owner, name, _original(stand_in))
                    else:
                        vars(owner)[name] = _original(stand_in)
        _installed[1] = []


def _put_in_place(plan):
    """Writes the plan's wrappers where its originals are; False, with nothing changed, where some original is no
    longer in place. A module's names are checked and written in its dict at C speed (_VerifyCursor.swap_dict; ~190
    names of _C at every verified call), a class's with setattr (its type cache must see them)."""
    done = []
    for group in plan:
        owner, is_type, names, raws, wrappers = group
        if is_type:
            ok = all(map(operator.is_, map(owner.__dict__.get, names), raws))
            if ok:
                for name, wrapper in zip(names, wrappers):
                    setattr(owner, name, wrapper)
        elif _swap_dict is not None:
            ok = _swap_dict(vars(owner), names, raws, wrappers)
        else:
            d = vars(owner)
            ok = all(map(operator.is_, map(d.get, names), raws))
            if ok:
                d.update(zip(names, wrappers))
        if not ok:
            for owner, is_type, names, raws, _ in reversed(done):
                if is_type:
                    for name, raw in zip(names, raws):
                        setattr(owner, name, raw)
                else:
                    vars(owner).update(zip(names, raws))
            return False
        done.append(group)
    return True


def _swap_plan():
    """What _Swap puts in place, made once and kept while every original is still in place (making the wrappers
    costs ~200 us, which a verified call would pay every time: Note [Verified replay]); checked at C speed (a
    check written as a loop over ~200 names cost ~18 us per call on an Intel Xeon, family 6 model 167)."""
    plan = _plan[1]
    if _plan[0] is _C and plan and _plan[2] == len(vars(_C)):
        return plan        # _put_in_place checks that every original is still in place
    entries = []
    for owner, name, fn in _surface():
        entries.append((owner, name, fn, _function_wrapper(fn, name)))
    entries.append((bridge, "validate", bridge.validate, _function_wrapper(bridge.validate, "validate")))
    Tensor = _C.Tensor
    for name in _TENSOR_METHODS:
        raw = _class_attr(Tensor, name)
        if raw is not None:
            entries.append((Tensor, name, raw, _function_wrapper(getattr(Tensor, name), name, method=True)))
    for name in _TENSOR_PROPERTIES:
        raw = _class_attr(Tensor, name)
        if raw is not None:
            entries.append((Tensor, name, raw, _property_wrapper(raw, name)))
    plan, index = [], {}
    for owner, name, raw, wrapper in entries:
        if id(owner) not in index:
            index[id(owner)] = len(plan)
            plan.append((owner, isinstance(owner, type), [], [], []))
        group = plan[index[id(owner)]]
        group[2].append(name), group[3].append(raw), group[4].append(wrapper)
    _plan[0], _plan[1], _plan[2] = _C, plan, len(vars(_C))
    if _RecordingFunction is not None:
        # Note [Fast paths that record] (csrc/bindings/fast_paths.cpp): the names a fast path may record as steps
        # of the engine's own function, those whose original in the plan is that function (not a monkeypatch)
        # (and bridge.validate, with the globals of the loss module whose target check cross_entropy's fast path
        # passes it, read at each call as the Python definition reads it)
        bindings = {name: raw for owner, name, raw, _ in entries if owner is _C and _C_BINDINGS.get(name) is raw}
        if bridge.validate is _BRIDGE_VALIDATE:
            bindings["validate"] = _BRIDGE_VALIDATE
        loss = sys.modules.get(__package__ + ".ops.loss")
        _C._recorder_set_bindings(bindings, vars(loss) if loss is not None else None)
    return plan


def _class_attr(cls, name):
    for klass in cls.__mro__:
        if name in klass.__dict__:
            return klass.__dict__[name]
    return None


_property_wrappers = {}   # id(property) -> (property, its wrapper): one accessor per property, so steps compare


def _property_wrapper(prop, name):
    cached = _property_wrappers.get(id(prop))
    if cached is not None and cached[0] is prop:
        return cached[1]

    # the accessors themselves (C++ functions on the C++ engine): a replayed step calls them with no Python frame;
    # the property calls the wrappers (_VerifiedFunction on the C++ engine) directly
    getter = _function_wrapper(prop.fget, name)
    setter = _function_wrapper(prop.fset if prop.fset is not None else lambda t, v: prop.__set__(t, v), name + ".set")
    wrapper = property(getter, setter if prop.fset is not None else None)
    _property_wrappers[id(prop)] = (prop, wrapper)
    return wrapper


def record(variant, fn, args, kwargs, arg_tensors, serve=None, serve_results=None, record_rest=True):
    """Runs fn(*args, **kwargs) eagerly while recording its steps into `variant`; returns fn's result."""
    recorder = Recorder(variant, serve, serve_results, record_rest)
    recorder.bind_args(arg_tensors)
    for i, t in variant.externals.items():
        recorder.slot_of[id(t)] = i
    with _Swap(recorder):
        result = fn(*args, **kwargs)
        if record_rest:
            variant.output = recorder.encode(result)
            core = recorder._core
            # every ArrayConstant of a variant this recorder recorded from its start was made by its C++ encode
            _arrays_by_reference(variant, fn, args, kwargs, core.arrays if core is not None and not serve else None)
            holder = _opaque_tensor_holder(variant.output)
            if holder is not None and variant.eager_reason is None:
                variant.eager_reason = ("the return", user_line())
                variant.eager_why = (f"returns tensors inside a {holder} object, which a replay cannot rebuild "
                                     f"(return them in tuples, lists, dicts or namedtuples)")
    recorder.close()
    recorder.keep.clear()
    return result


def check(group, fn, args, kwargs, arg_tensors):
    """Note [Checking a recording]: runs fn eagerly, checking each call against the variants of `group` (the
    recordings of this entry guard). Returns (result, variant): the variant it followed to its end, or a new one
    recorded from a guard miss (its `missed` attribute says where). Raises Divergence where Python issued a call
    the recording does not have although every guard so far held: static replay would have run the wrong
    program."""
    new = Variant(len(arg_tensors))
    recorder = Recorder(new)
    recorder.checking, recorder.group = group[0], group
    recorder.bind_args(arg_tensors)
    for v in group:
        for i, t in v.externals.items():
            recorder.slot_of[id(t)] = i
    with _Swap(recorder):
        result = fn(*args, **kwargs)
        if recorder.checking is not None:
            followed = recorder.checking
            if recorder.checked != len(followed.steps):
                raise Divergence(recorder.checked, "the return", user_line(), followed.steps[recorder.checked])
            output = recorder.encode(result)
            if not _same_output(output, followed.output):
                raise Divergence(recorder.checked, "the return", user_line(), None,
                                 "the program returned other values or tensors than the recording")
            recorder.close()
            recorder.keep.clear()
            return result, followed
        new.output = recorder.encode(result)
        _arrays_by_reference(new, fn, args, kwargs)
        new.missed = recorder.missed
    recorder.close()
    recorder.keep.clear()
    return result, new


def verify(group, fn, args, kwargs, arg_tensors, can_record):
    """Note [Verified replay]: runs fn eagerly, each call checked against the variants of `group`. Returns (result,
    followed, new): the variant the call followed to its end (or None), and the variant recorded from where the call
    left the recordings (None when it followed one, or when `can_record` is false); new.left says why it left.
    _local.matched_in_cpp is then the number of its calls the C++ side matched (Note [Verified ops in the fast
    paths]; 0 on the reference engine)."""
    first = group[0]
    new = Variant(len(arg_tensors))
    new.n_slots = first.n_slots if len(group) == 1 else max(v.n_slots for v in group)
    recorder = Recorder(new, record_rest=can_record)
    recorder._verifying, recorder.group = first, group
    cursor = None
    if _VerifyCursor is None:
        recorder.bind_args(arg_tensors)
        for v in group:
            new.externals.update(v.externals)
            for i, t in v.externals.items():
                recorder.slot_of[id(t)] = i
    else:
        # Note [A verified call's setup in one call] (csrc/bindings/fast_paths.cpp): the cursor's mirror takes the
        # arguments' and externals' slots, and writes them into the recorder's dict and list when Python first
        # compares a step (sync); the externals become the new variant's when the call leaves (Recorder.leave)
        recorder.merge_externals = True
    try:
        with _Swap(recorder):
            try:
                if _VerifyCursor is not None:
                    cursor = recorder._cursor = _VerifyCursor(recorder.slot_of, recorder.keep)
                    cursor.start(first.verify_table(), recorder.result_from_cpp,
                                 arg_tensors if type(arg_tensors) is list else list(arg_tensors), group)
                result = fn(*args, **kwargs)
            except BaseException:
                if cursor is not None:
                    recorder._cursor = None
                    _finish(recorder, cursor, -1)
                    cursor = None
                raise
            if cursor is not None:   # a call that ends elsewhere than its table's end: its graph, its slots
                recorder._cursor = None
                followed = recorder._verifying
                _finish(recorder, cursor, len(followed.steps) if followed is not None else -1)
                cursor = None
            followed = recorder._verifying
            if followed is not None:
                i = recorder._checked
                if i != len(followed.steps):     # a variant of the same prefix may end here
                    followed = next((v for v in group if len(v.steps) == i and (i == 0 or v.steps[i - 1] is
                                                                                 followed.steps[i - 1])), followed)
                if i == len(followed.steps):
                    recorder.close()
                    recorder.keep.clear()
                    return result, followed, None
                ended = followed.steps[i]
                recorder.leave(followed, i, f"the program returned where the recording has {ended.name}"
                               + (f" (recorded at {ended.line})" if ended.line else ""), user_line())
            if can_record:
                new.output = recorder.encode(result)
    finally:
        if _VerifyCursor is None:
            _local.matched_in_cpp = _local.planned_in_verified = _local.rebuilt_in_verified = 0
    new.left = recorder.left
    recorder.close()
    recorder.keep.clear()
    return result, None, (new if can_record else _Left(recorder.left))


def _finish(recorder, cursor, complete):
    """The end of a verified call's cursor (_VerifyCursor.finish): the recorder takes back the index and depth,
    _local the counts."""
    (recorder._checked, depth, _local.matched_in_cpp, _local.planned_in_verified,
     _local.rebuilt_in_verified) = cursor.finish(complete)
    recorder.depth = depth      # (into the C++ recorder too, which holds the depth once no cursor does)
    recorder._sync_core()


# Note [Verified entry keys compared in place]
# A verified program's entry key (compiling.entry_key_python with reachable=False: the arguments' structure, tensor
# shapes, dtypes, strides and requires_grad, the types of Python values, grad mode, the default dtype, autocast) is
# built in Python at every call, 3-7 us (a third of the fixed cost of a call, measured on an Intel Xeon family 6
# model 167). Beside it the program keeps the static key of the same arguments (_C._entry_key without the
# reachable walk: the same parts, with Python values by value and the state of modules passed as arguments), and the
# next call compares that in place (_C._entry_key_matches, Note [Entry guards compared in place] in
# csrc/bindings/capture_bind.cpp, ~0.7 us). The verified key is a function of the static one (values become their
# types, the modules' state is left out), so an equal static key means the same verified key and group; a
# different one (another Python number, say) only means the verified key is built as before.
_native_entry_key = getattr(_C, "_entry_key", None)


def verified_shadow_key(args, kwargs):
    """The static key Program.__call__ compares a verified call's arguments with in place, or None."""
    if _native_entry_key is None:
        return None
    autocast = sys.modules.get(__package__ + ".autocast")   # (it imports this module)
    if autocast is not None and autocast._active_threads:
        return None   # compared in place only while no thread autocasts: this key would be another one's
    middle = (("grad mode", _C.is_grad_enabled()), ("default dtype", _C._get_default_dtype()), ("autocast", None))
    try:
        return _native_entry_key(_C.Tensor, args, kwargs, middle, ())[0]
    except (TypeError, ValueError, RuntimeError):   # an argument the C++ walk refuses: built at every call, as before
        return None


class _Left:
    """Where a verified call left the recordings, once the program records no more variants."""

    def __init__(self, left):
        self.left = left


def _argument_difference(step, args, kwargs):
    """Which argument of a call differs from its recorded step's, in words (a verified call's miss reason)."""
    def say(x):
        return "a tensor" if type(x) in (Slot, Seq) else _short(x)
    new = args.items if type(args) is Seq else list(args)
    old = step.args.items if type(step.args) is Seq else list(step.args)
    if len(new) != len(old):
        return f"{len(new)} arguments where the recording has {len(old)}"
    for i, (x, y) in enumerate(zip(new, old)):
        if not (x == y):
            if type(x) in (Slot, Seq) and type(y) in (Slot, Seq):
                return f"argument {i} another tensor than the recorded one (a new tensor, or another op's result)"
            return f"argument {i} = {say(x)} where the recording has {say(y)}"
    return "other keyword arguments than the recording"


def _same_positional(args, native, slot_of):
    """The call's positional arguments are the recorded ones (Step.native: per argument a slot or a constant), as
    Step.same_call would find, without encoding them; constants of another type do not match (1 is not 1.0)."""
    slots, consts = native
    if len(args) != len(slots):
        return False
    for a, i, c in zip(args, slots, consts):
        if i >= 0:
            if slot_of.get(id(a)) != i:
                return False
        elif type(a) is not type(c) or not (a == c):
            return False
    return True


def _call_sibling(variants, variant, i, fn, args, kwargs):
    """A variant sharing `variant`'s first i steps whose step i is this call."""
    for other in variants:
        if other is variant or len(other.steps) <= i:
            continue
        if (i == 0 or (i <= len(variant.steps) and other.steps[i - 1] is variant.steps[i - 1])) and \
                other.steps[i].same_call(fn, args, kwargs):
            return other
    return None


def _short(value):
    text = "a tensor" if isinstance(value, _C.Tensor) else repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _same_output(a, b):
    try:
        return bool(a == b)
    except Exception:
        return False


class _Scratch:
    """Slots that forget what is stored in them (a result's match, when only the comparison matters)."""

    def __setitem__(self, i, value):
        pass


class Divergence(RuntimeError):
    def __init__(self, index, name, line, recorded, detail=None):
        what = (f"the recording has {recorded.name} there (recorded at {recorded.line or 'an op without a line'})"
                if recorded is not None else "the recording had ended")
        super().__init__(
            f"compile(mode='check'): the program diverged from its recording at step {index}: its Python issued "
            f"{name} at {line}, where {detail or what}, although every guard before held. Static replay would "
            f"have run the recorded program instead: the program depends on state the guards cannot see (a "
            f"Python value that changed between calls, a tensor rebound outside the arguments). Make that state "
            f"an argument, or do not compile this function in a static mode.")
        self.index, self.name, self.line, self.recorded = index, name, line, recorded


def replay(variants, first, arg_tensors, slots=None, stop=None):
    """Runs `first`'s steps on the call's argument tensors, moving to a sibling variant on a value miss (the tree
    of Note [Values that flow into Python are guards]). Returns (variant, output) when a whole program ran, or
    raises Miss with what a catch-up needs. The steps run in the C++ loop where every step allows it (Note
    [Replaying steps in C++]), else here. `slots` given: the C++ loop's run from step 0 has been made already on
    them (_ReplayProgram.call: Note [A static call in one C++ call]), and `stop` is what it returned."""
    variant = first
    program = variant.__dict__.get("_native")
    if slots is None:
        slots = variant.fresh_slots(arg_tensors)
        pending = None
        if program is not None:      # the common case, a whole variant in the C++ loop, without the loop below
            pending = program.run(slots, 0)
    else:
        pending = stop
    if program is not None and pending is None:
        variant.replays += 1
        output = variant.output
        return variant, slots[output.i] if type(output) is Slot else decode(output, slots)
    i = 0
    Tensor = _C.Tensor
    while True:
        steps = variant.steps
        program = variant.native()
        if program is not None:
            stop = pending if pending is not None else program.run(slots, i)   # (pending: the first run's stop)
            pending = None
            if stop is None:
                break
            if len(stop) == 1:               # a step Python runs itself
                i = stop[0]
                result = steps[i].run(slots)
                if steps[i].out >= 0 and isinstance(result, Tensor):
                    slots[steps[i].out] = result
                    i += 1
                    continue
            else:
                i, result = stop
        else:
            if i >= len(steps):
                break
            result = steps[i].run(slots)
            if steps[i].out >= 0 and isinstance(result, Tensor):
                slots[steps[i].out] = result
                i += 1
                continue
        step = steps[i]
        if not match_result(step.result, result, slots):
            if program is not None:
                program.materialize(slots)          # Note [Slots in C++]: Python reads every slot from here on
            sibling = _sibling(variants, variant, i, result)
            if sibling is None:
                raise Miss(variant, i, _served_results(steps[:i], slots) + [result], step)
            slots = _extend(slots, sibling)
            match_result(sibling.steps[i].result, result, slots)
            variant = sibling
        i += 1
    variant.replays += 1
    return variant, decode(variant.output, slots)


def _served_results(steps, slots):
    """The results the steps returned in this replay, read back from the slots (Note [Catching up after a miss])."""
    return [_result_of(step.result, slots) for step in steps]


def _result_of(template, slots):
    kind = template[0]
    if kind in ("t", "a", "s"):
        return slots[template[1]]
    if kind == "none":
        return None
    if kind == "v":
        return template[1]
    return template[1](_result_of(t, slots) for t in template[2])


def _extend(slots, variant):
    if len(slots) < variant.n_slots:
        slots = slots + [None] * (variant.n_slots - len(slots))
    for i, t in variant.externals.items():
        if slots[i] is None:
            slots[i] = t
    return slots


def _sibling(variants, variant, i, result):
    for other in variants:
        if other is variant or len(other.steps) <= i:
            continue
        if (i == 0 or other.steps[i - 1] is variant.steps[i - 1]) and other.steps[i].fn is variant.steps[i].fn:
            if match_result(other.steps[i].result, result, [None] * other.n_slots):
                return other
    return None


def describe_result(template):
    """What a recording expected from a step, for a guard miss's reason."""
    kind = template[0]
    if kind == "none":
        return "None"
    if kind == "t":
        return "a tensor"
    if kind == "a":
        return f"other values (an array of shape {template[2].shape})"
    if kind == "v":
        return repr(template[1])
    return "another result"


class Miss(Exception):
    def __init__(self, variant, index, results, step):
        super().__init__(step.name)
        self.variant, self.index, self.results, self.step = variant, index, results, step
