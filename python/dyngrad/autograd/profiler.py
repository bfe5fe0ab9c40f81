"""dyngrad.autograd.profiler, for both engines: profile (a per-op table of calls and CPU times, and a Chrome trace)
and record_function (a named range of your own).

    with dg.autograd.profiler.profile(record_shapes=True) as prof:
        with dg.autograd.profiler.record_function("step"):
            loss = model(x).sum(); loss.backward()
    print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=10))
    prof.export_chrome_trace("trace.json")      # chrome://tracing or https://ui.perfetto.dev

Note [Profiling by wrapping the API]: the engines' cores have no profiler slot, and every public op is reached
through the shared layer's namespaces (the engine root, nn.functional, Tensor methods and operators: one row each
of _api/table.py). While a profile is active, each of those callables is replaced by a wrapper that times the
call; leaving the profile puts the originals back. So the table lists the ops as the user called them (linear,
relu, add, not the primitives inside them: what a composite does inside counts as its own self time), and code
outside a profile pays nothing. In backward, each graph node gets a pre-hook (Node.register_prehook) that marks
the moment the engine reaches it; a node's time runs from its mark to the next node's (the engine runs nodes one
after another), so it includes the engine's bookkeeping for that node. Times are wall-clock microseconds from
time.perf_counter_ns, on the thread that entered the profile (ops on other threads are not recorded).
"""
import collections
import functools
import json
import os
import sys
import threading
import time

from .. import _C
from .._api import table
from .graph import walk

__all__ = ["profile", "record_function", "EventList", "FunctionEvent", "FunctionEventAvg"]

_state = threading.local()
_active = []          # the profiles entered (innermost last); ops are recorded into each
_lock = threading.Lock()


def _now_us():
    return time.perf_counter_ns() / 1000.0


class FunctionEvent:
    """One timed call: name, start/end (microseconds since the profile started), its input shapes (with
    record_shapes), its thread and its children (calls made inside it)."""

    __slots__ = ("id", "name", "start_us", "end_us", "input_shapes", "thread", "children", "parent", "is_backward")

    def __init__(self, id, name, start_us, thread, input_shapes, parent, is_backward=False):
        self.id = id
        self.name = name
        self.start_us = start_us
        self.end_us = start_us
        self.input_shapes = input_shapes
        self.thread = thread
        self.children = []
        self.parent = parent
        self.is_backward = is_backward

    key = property(lambda self: self.name)

    @property
    def cpu_time_total(self):
        return self.end_us - self.start_us

    @property
    def self_cpu_time_total(self):
        return self.cpu_time_total - sum(c.cpu_time_total for c in self.children)

    @property
    def count(self):
        return 1

    def __repr__(self):
        return (f"<FunctionEvent {self.name} cpu_time_total={self.cpu_time_total:.1f}us "
                f"self_cpu_time_total={self.self_cpu_time_total:.1f}us input_shapes={self.input_shapes}>")


class FunctionEventAvg:
    """The events of one key summed: count, cpu_time_total and self_cpu_time_total (microseconds), and their
    averages cpu_time and self_cpu_time."""

    def __init__(self, key, input_shapes=None):
        self.key = key
        self.input_shapes = input_shapes
        self.count = 0
        self.cpu_time_total = 0.0
        self.self_cpu_time_total = 0.0

    def add(self, event):
        self.count += 1
        self.cpu_time_total += event.cpu_time_total
        self.self_cpu_time_total += event.self_cpu_time_total
        if self.input_shapes is None:
            self.input_shapes = event.input_shapes
        return self

    @property
    def cpu_time(self):
        return self.cpu_time_total / self.count if self.count else 0.0

    @property
    def self_cpu_time(self):
        return self.self_cpu_time_total / self.count if self.count else 0.0

    def __repr__(self):
        return (f"<FunctionEventAvg key={self.key} count={self.count} cpu_time_total={self.cpu_time_total:.1f}us "
                f"self_cpu_time_total={self.self_cpu_time_total:.1f}us>")


_SORT_KEYS = ("cpu_time_total", "self_cpu_time_total", "cpu_time", "self_cpu_time", "count")
# torch's device sort keys: there is no device time here, so they sort by the CPU time of the same kind
_SORT_ALIASES = {"cuda_time_total": "cpu_time_total", "self_cuda_time_total": "self_cpu_time_total",
                 "device_time_total": "cpu_time_total", "self_device_time_total": "self_cpu_time_total",
                 "cuda_time": "cpu_time", "device_time": "cpu_time"}


def _format_time(us):
    if us >= 1e6:
        return f"{us / 1e6:.3f}s"
    if us >= 1e3:
        return f"{us / 1e3:.3f}ms"
    return f"{us:.3f}us"


class EventList(list):
    """A list of FunctionEvent (from profile.events()) or FunctionEventAvg (from key_averages())."""

    def __init__(self, events=(), record_shapes=False):
        super().__init__(events)
        self._record_shapes = record_shapes

    @property
    def self_cpu_time_total(self):
        return sum(e.self_cpu_time_total for e in self)

    def key_averages(self, group_by_input_shape=False):
        """One FunctionEventAvg per op name (and per input shapes, with group_by_input_shape=True)."""
        if group_by_input_shape and not self._record_shapes:
            raise RuntimeError("key_averages: group_by_input_shape=True needs a profile taken with "
                               "record_shapes=True.")
        groups = collections.OrderedDict()
        for e in self:
            k = (e.key, str(e.input_shapes)) if group_by_input_shape else e.key
            if k not in groups:
                groups[k] = FunctionEventAvg(e.key, e.input_shapes if group_by_input_shape else None)
            groups[k].add(e)
        return EventList(groups.values(), self._record_shapes)

    def table(self, sort_by=None, row_limit=100, max_src_column_width=75, max_name_column_width=55,
              max_shapes_column_width=80, header=None, top_level_events_only=False):
        """A text table: Name, Self CPU %, Self CPU, CPU total %, CPU total, CPU time avg, # of Calls (and Input
        Shapes when the profile recorded shapes), sorted by `sort_by` (descending) when given: one of
        cpu_time_total, self_cpu_time_total, cpu_time, self_cpu_time, count."""
        rows = list(self)
        if top_level_events_only:
            rows = [e for e in rows if getattr(e, "parent", None) is None]
        if sort_by is not None:
            key = _SORT_ALIASES.get(sort_by, sort_by)
            if key not in _SORT_KEYS:
                raise ValueError(f"table: sort_by must be one of {', '.join(_SORT_KEYS)}, got {sort_by!r}.")
            rows.sort(key=lambda e: getattr(e, key), reverse=True)
        if row_limit is not None and row_limit >= 0:
            rows = rows[:row_limit]
        total_self = sum(e.self_cpu_time_total for e in self) or 1.0
        shapes = self._record_shapes
        headers = ["Name", "Self CPU %", "Self CPU", "CPU total %", "CPU total", "CPU time avg", "# of Calls"]
        if shapes:
            headers.append("Input Shapes")
        body = []
        for e in rows:
            name = e.key if len(e.key) <= max_name_column_width else e.key[:max_name_column_width - 3] + "..."
            line = [name, f"{100 * e.self_cpu_time_total / total_self:.2f}%", _format_time(e.self_cpu_time_total),
                    f"{100 * e.cpu_time_total / total_self:.2f}%", _format_time(e.cpu_time_total),
                    _format_time(e.cpu_time_total / max(e.count, 1)), str(e.count)]
            if shapes:
                text = str(e.input_shapes) if e.input_shapes is not None else ""
                line.append(text if len(text) <= max_shapes_column_width else
                            text[:max_shapes_column_width - 3] + "...")
            body.append(line)
        widths = [max([len(h)] + [len(r[i]) for r in body]) for i, h in enumerate(headers)]
        rule = "-" * (sum(widths) + 2 * (len(widths) - 1))

        def fmt(cells):
            return "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths)))

        out = []
        if header is not None:
            out.append(str(header))
        out += [rule, fmt(headers), rule] + [fmt(r) for r in body]
        out += [rule, f"Self CPU time total: {_format_time(self.self_cpu_time_total)}"]
        return "\n".join(out) + "\n"

    def __str__(self):
        return self.table()

    def export_chrome_trace(self, path):
        _write_chrome_trace(self, path)


def _write_chrome_trace(events, path):
    """Chrome's JSON trace-event format (complete events, ph 'X'; ts and dur in microseconds), which
    chrome://tracing and Perfetto read."""
    pid = os.getpid()
    trace = []
    for e in events:
        item = {"name": e.name, "ph": "X", "ts": round(e.start_us, 3), "dur": round(e.cpu_time_total, 3),
                "pid": pid, "tid": e.thread, "cat": "backward" if e.is_backward else "cpu_op",
                "args": {"External id": e.id}}
        if e.input_shapes is not None:
            item["args"]["Input Dims"] = e.input_shapes
        trace.append(item)
    trace.append({"name": "process_name", "ph": "M", "pid": pid, "tid": 0, "args": {"name": "dyngrad"}})
    with open(path, "w") as f:
        json.dump({"traceEvents": trace, "displayTimeUnit": "ms"}, f)


# ----- recording ----------------------------------------------------------------------------------------------
def _shapes(args, kwargs):
    """The input shapes as torch lists them: a tensor's shape, [] for anything else."""
    out = []
    for a in list(args) + list(kwargs.values()):
        if isinstance(a, _C.Tensor):
            out.append(list(a.shape))
        elif isinstance(a, (list, tuple)) and a and all(isinstance(t, _C.Tensor) for t in a):
            out.append([list(t.shape) for t in a])
        else:
            out.append([])
    return out


class _Recorder:
    """Events of one profile on one thread, with the stack of calls now open."""

    def __init__(self, record_shapes, origin):
        self.record_shapes = record_shapes
        self.origin = origin
        self.events = []
        self.stack = []
        self.thread = threading.get_ident() % 2 ** 31

    def begin(self, name, args=(), kwargs=None, is_backward=False):
        shapes = _shapes(args, kwargs or {}) if self.record_shapes else None
        parent = self.stack[-1] if self.stack else None
        e = FunctionEvent(len(self.events), name, _now_us() - self.origin, self.thread, shapes, parent, is_backward)
        self.events.append(e)
        if parent is not None:
            parent.children.append(e)
        self.stack.append(e)
        return e

    def end(self, e):
        e.end_us = _now_us() - self.origin
        # pop up to and including e (an exception may have skipped inner ends)
        while self.stack:
            top = self.stack.pop()
            if top is e:
                break
            top.end_us = e.end_us


def _recorders():
    """The recorders of the active profiles that belong to this thread."""
    me = threading.get_ident()
    return [p._recorder for p in _active if p._thread == me]


def _timed(name, fn):
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        recs = _recorders()
        if not recs:
            return fn(*args, **kwargs)
        events = [r.begin(name, args, kwargs) for r in recs]
        try:
            return fn(*args, **kwargs)
        finally:
            for r, e in zip(recs, events):
                r.end(e)
    wrapper.__dyngrad_profiled__ = fn
    return wrapper


# names that are not ops: never wrapped (conversions, printing, introspection)
_SKIP = frozenset("""
__init__ __repr__ __str__ __format__ __len__ __iter__ __bool__ __float__ __int__ __complex__ __index__ __contains__
__array__ __reduce_ex__ __deepcopy__ __hash__ __getattr__ __setattr__ __dir__ __array_priority__ size dim numel
item tolist numpy element_size nelement ndimension is_contiguous stride storage_offset data_ptr type is_floating_point
is_complex get_device register_hook retain_grad requires_grad_ backward register_post_accumulate_grad_hook
is_tensor is_grad_enabled get_default_dtype is_floating_point_dtype is_inference_mode_enabled
""".split())

_BINARY = {"add", "sub", "mul", "truediv", "floordiv", "mod", "matmul", "pow", "and", "or", "xor", "lshift",
           "rshift", "div"}


def _op_name(name):
    """The name shown for a Tensor operator: __radd__ -> add, __iadd__ -> add_, __getitem__ -> getitem."""
    if not (name.startswith("__") and name.endswith("__")):
        return name
    core = name[2:-2]
    if core.startswith("r") and core[1:] in _BINARY:
        return core[1:]
    if core.startswith("i") and core[1:] in _BINARY:
        return core[1:] + "_"
    return core


def _targets():
    """(namespace, attribute, shown name) of every op the profile wraps (Note [Profiling by wrapping the API])."""
    root = sys.modules[__name__.rpartition(".autograd.")[0]]
    functional = sys.modules.get(root.__name__ + ".nn.functional")
    out = []
    for row in table.rows():
        if row.name in _SKIP:
            continue
        for kind in row.kinds:
            if kind == "fn":
                out.append((root, row.name, row.name))
            elif kind == "F" and functional is not None:
                out.append((functional, row.name, row.name))
            elif kind in ("method", "op"):
                out.append((_C.Tensor, row.name, _op_name(row.name)))
        if row.inplace:
            out.append((_C.Tensor, row.inplace, row.inplace))
    return out


class _Patch:
    """Installs the timing wrappers while at least one profile is active; shared by nested profiles."""

    depth = 0
    saved = []

    @classmethod
    def install(cls):
        cls.depth += 1
        if cls.depth > 1:
            return
        saved = []
        seen = set()
        for namespace, attr, shown in _targets():
            if (id(namespace), attr) in seen:
                continue
            seen.add((id(namespace), attr))
            original = namespace.__dict__.get(attr) if isinstance(namespace, type) else getattr(namespace, attr, None)
            if original is None or isinstance(original, (type, property)) or not callable(original):
                continue
            if hasattr(original, "__dyngrad_profiled__"):
                continue
            setattr(namespace, attr, _timed(shown, original))
            saved.append((namespace, attr, original))
        saved.append((_C, "_run_backward", _C._run_backward))
        _C._run_backward = _timed_backward(_C._run_backward)
        cls.saved = saved

    @classmethod
    def uninstall(cls):
        cls.depth -= 1
        if cls.depth > 0:
            return
        for namespace, attr, original in reversed(cls.saved):
            setattr(namespace, attr, original)
        cls.saved = []


def _timed_backward(run_backward):
    """The engine's backward entry, timed as a whole ('autograd::backward'), with a pre-hook on each node of the
    graph to time the nodes (Note [Profiling by wrapping the API])."""

    def wrapper(roots, grads, inputs, *rest):
        recs = _recorders()
        if not recs:
            return run_backward(roots, grads, inputs, *rest)
        outer = [r.begin("autograd::backward", roots, {}, is_backward=True) for r in recs]
        current = [None] * len(recs)
        handles = []

        def mark(name):
            def hook(grad_outputs):
                for i, r in enumerate(recs):
                    if current[i] is not None:
                        r.end(current[i])
                    current[i] = r.begin(name, grad_outputs if r.record_shapes else (), {}, is_backward=True)
            return hook

        try:
            for node in walk(*roots).nodes:
                handles.append(node.register_prehook(mark(node.name())))
        except Exception:
            pass                      # a graph we cannot hook is still run, only timed as a whole
        try:
            return run_backward(roots, grads, inputs, *rest)
        finally:
            for h in handles:
                h.remove()
            for i, r in enumerate(recs):
                if current[i] is not None:
                    r.end(current[i])
                r.end(outer[i])
    return wrapper


def refuse_unrecorded(**asked):
    """Raises for the first profiling option asked for (true) that this profiler cannot honour."""
    for name, on in asked.items():
        if on:
            raise NotImplementedError(f"profile: {name} is not supported by dyngrad's profiler (it records every "
                                      "op of the block, with times and, with record_shapes=True, shapes).")


class profile:
    """Records the ops run inside it (on this thread) with their CPU times (torch.autograd.profiler.profile).

    enabled=False records nothing. record_shapes=True adds each call's input shapes. use_cuda / use_device are
    accepted and must not ask for a GPU; use_kineto and use_cpu are accepted (they choose torch's backend);
    with_flops, profile_memory, with_stack, with_modules and the experimental options ask for what this profiler
    does not record and are refused (NotImplementedError), not ignored. After the block: events(), key_averages(),
    table(), export_chrome_trace(path), self_cpu_time_total. See Note [Profiling by wrapping the API]."""

    def __init__(self, enabled=True, *, use_cuda=False, use_device=None, record_shapes=False, with_flops=False,
                 profile_memory=False, with_stack=False, with_modules=False, use_kineto=False, use_cpu=True,
                 experimental_config=None, acc_events=False, custom_trace_id_callback=None):
        if use_cuda or (use_device is not None and str(use_device) not in ("cpu",)):
            raise RuntimeError("profile: dyngrad runs on the CPU only; use_cuda/use_device cannot be used "
                               f"(got use_cuda={use_cuda!r}, use_device={use_device!r}).")
        refuse_unrecorded(profile_memory=profile_memory, with_stack=with_stack, with_flops=with_flops,
                          with_modules=with_modules, acc_events=acc_events,
                          experimental_config=experimental_config is not None,
                          custom_trace_id_callback=custom_trace_id_callback is not None)
        self.enabled = bool(enabled)
        self.record_shapes = bool(record_shapes)
        self._recorder = None
        self._thread = None
        self._entered = False
        self._function_events = None

    def __enter__(self):
        if not self.enabled:
            return self
        if self._entered:
            raise RuntimeError("profile: this profiler is already running; a profile object can be entered once "
                               "at a time.")
        self._entered = True
        self._thread = threading.get_ident()
        self._recorder = _Recorder(self.record_shapes, _now_us())
        with _lock:
            _Patch.install()
            _active.append(self)
        return self

    def __exit__(self, *exc):
        if not self.enabled:
            return False
        with _lock:
            _active.remove(self)
            _Patch.uninstall()
        rec = self._recorder
        while rec.stack:                      # a record_function left open by an exception
            rec.end(rec.stack[0])
        self._function_events = EventList(rec.events, self.record_shapes)
        self._entered = False
        return False

    def _events(self):
        if self._function_events is None:
            if self._entered:
                raise RuntimeError("profile: results are available once the profile block has ended.")
            raise RuntimeError("profile: the profiler was not run (or was disabled), so there are no results.")
        return self._function_events

    def events(self):
        return self._events()

    @property
    def function_events(self):
        return self._events()

    def key_averages(self, group_by_input_shape=False, group_by_stack_n=0):
        return self._events().key_averages(group_by_input_shape)

    def table(self, sort_by=None, row_limit=100, **kwargs):
        return self.key_averages().table(sort_by=sort_by, row_limit=row_limit, **kwargs)

    @property
    def self_cpu_time_total(self):
        return self._events().self_cpu_time_total

    def total_average(self):
        avg = FunctionEventAvg("Total")
        for e in self._events():
            avg.add(e)
        return avg

    def export_chrome_trace(self, path):
        """Writes the events as a Chrome trace (JSON trace events), for chrome://tracing or Perfetto."""
        _write_chrome_trace(self._events(), path)

    def __str__(self):
        return self.table()


class record_function:
    """A named range in the profile (a row of its own; the ops inside are its children): a context manager or a
    decorator. Costs nothing when no profile is active."""

    def __init__(self, name, args=None):
        if not isinstance(name, str):
            raise TypeError(f"record_function: name must be a str, got {type(name).__name__}.")
        self.name = name
        self.args = args
        self._open = None

    def __enter__(self):
        recs = _recorders()
        self._open = [(r, r.begin(self.name)) for r in recs]
        return self

    def __exit__(self, *exc):
        for r, e in self._open or ():
            r.end(e)
        self._open = None
        return False

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with record_function(self.name, self.args):
                return fn(*args, **kwargs)
        return wrapper
