"""dyngrad.compile and the dyngrad.compiler namespace (torch.compile / torch.compiler's names).

Note [Two modes of compile]
dyngrad is define-by-run: every op runs when its line runs. `compile` offers what a recording of those ops buys,
under torch's API (docs/compile.md):
- static replay, `mode="reduce-overhead"` or `fullgraph=True`: the first call of a program (per entry guard, Note
  [Entry guards] in _api/capture.py) runs eagerly while the capture engine records its steps; later calls replay the
  steps without running the program's Python, checking every value that flowed into Python (Note [Values that flow
  into Python are guards]). A miss records a new variant, at most MAX_VARIANTS (8, torch's recompile_limit) per
  program; then the program runs eagerly, with one warning naming the guard and the line that read it. The contract
  is jax.jit's: Python that touches neither tensors nor the guarded state runs only while recording.
- verified replay, `mode="verified"`, `options={"verify": True}` or DYNGRAD_COMPILE_VERIFY=1 (Note [Verified
  replay] in _api/capture.py): the program's Python runs at every call exactly as in eager mode, every op checked
  against the recordings; where Python issues another op or reads another value, the rest of the call is recorded
  as a new variant (the same limit). Results are eager mode's by construction. It is meant to be the default mode;
  it is not yet, because it is still slower than eager mode: the comparison is in C++ (Note [Verified ops in the
  fast paths] in csrc/bindings/fast_paths.cpp) and matched ops run from the plan (Note [Verified ops run from the
  plan]), but the fixed cost of a call (~26 us, half of it the swap of the surface) and the planned backward keep
  it at 0.86-0.98x eager on the 200-op chain and ~0.45x on the MLP step (docs/compile.md; Intel Xeon, lscpu
  family 6 model 167, 2 cores, KVM); VERIFIED_BY_DEFAULT flips it.
- every other mode (the default): the program runs eagerly, so everything behaves as without compile; `compile`
  then hands back its argument. The arguments are checked as torch checks them, so a script with a typo in `mode=`
  fails here as it would under torch.
`compiler.is_compiling()` is True while this thread records a program; `compiler.reset()` drops every recording.
"""
import importlib
import inspect
import os
import threading
import weakref

from .. import _C
from . import capture
from .._user_frame import warn

autocast = importlib.import_module(".autocast", __package__)   # the module (its _state), not the function
_MODES = ("default", "lite", "reduce-overhead", "max-autotune-no-cudagraphs", "max-autotune")
# torch's registered backends (torch.compiler.list_backends(exclude_tags=())): all accepted, none changes anything
_BACKENDS = ("aot_eager", "aot_eager_decomp_partition", "aot_eager_default_partitioner", "aot_ts", "cudagraphs",
             "eager", "eager_debug", "eager_noexcept", "inductor", "invoke_subgraph", "openxla", "openxla_eval",
             "pre_dispatch_eager", "ts", "tvm")
_EXPERIMENTAL = ("aot_eager", "aot_eager_decomp_partition", "aot_eager_default_partitioner", "aot_ts", "eager",
                 "eager_debug", "eager_noexcept", "invoke_subgraph", "openxla_eval", "pre_dispatch_eager", "ts")
_default_backend = ["inductor"]
# Note [Two modes of compile]: verified replay becomes the default mode once it is faster than eager mode (it is not
# yet: docs/compile.md has the measurements); until then it is mode="verified", options={"verify": True} or
# DYNGRAD_COMPILE_VERIFY=1, and the default runs eagerly.
VERIFIED_BY_DEFAULT = False


class InvalidBackend(RuntimeError):
    """An unknown backend name (torch._dynamo.exc.InvalidBackend, a RuntimeError)."""


def _check_compile_args(fullgraph, dynamic, backend, mode, options, disable):
    if mode is not None and options is not None:
        raise RuntimeError("compile: pass mode= or options=, not both.")
    if mode is not None and mode not in _MODES and mode not in ("check", "verified"):
        raise RuntimeError(f"compile: unrecognized mode={mode!r}; expected one of {', '.join(_MODES)}.")
    if backend is None:
        backend = _default_backend[0]
    if isinstance(backend, str):
        if backend not in _BACKENDS:
            raise InvalidBackend(f"compile: invalid backend {backend!r}; dyngrad.compiler.list_backends() lists "
                                 f"the names torch accepts.")
    elif not callable(backend):
        raise InvalidBackend(f"compile: backend must be a name or a callable, got {type(backend).__name__}.")
    if options is not None and not isinstance(options, dict):
        raise TypeError(f"compile: options must be a dict, got {type(options).__name__}.")
    if not isinstance(disable, bool):
        raise TypeError(f"compile: disable must be a bool, got {type(disable).__name__}.")
    if not isinstance(fullgraph, bool):
        raise TypeError(f"compile: fullgraph must be a bool, got {type(fullgraph).__name__}.")
    if dynamic is not None and not isinstance(dynamic, bool):
        raise TypeError(f"compile: dynamic must be None or a bool, got {type(dynamic).__name__}.")


def compile(model=None, *, fullgraph=False, dynamic=None, backend=None, mode=None, options=None, name=None,
            disable=False, recompile_limit=None, isolate_recompiles=False, shapes_spec=None):
    """torch.compile's signature and argument checks (Note [Two modes of compile]).

    With `mode="reduce-overhead"` or `fullgraph=True` (and not `disable=True`) a function comes back as a
    CompiledFunction and a module as a CompiledModule (its `_orig_mod` is the module), both replaying recordings of
    their calls (static replay). Otherwise the result is `model` itself, run eagerly; a module then answers
    `._orig_mod` (itself), as torch's compiled module does. Used as `@compile` or `@compile(mode=...)` it
    decorates. RuntimeError for an unknown mode, dyngrad.compiler.InvalidBackend (a RuntimeError) for an unknown
    backend, as torch.
    """
    _check_compile_args(fullgraph, dynamic, backend, mode, options, disable)
    if recompile_limit is not None and (not isinstance(recompile_limit, int) or recompile_limit < 1):
        raise ValueError(f"compile: recompile_limit must be a positive int, got {recompile_limit!r}.")
    if model is None:
        def decorate(fn):
            return compile(fn, fullgraph=fullgraph, dynamic=dynamic, backend=backend, mode=mode, options=options,
                           name=name, disable=disable, recompile_limit=recompile_limit,
                           isolate_recompiles=isolate_recompiles, shapes_spec=shapes_spec)
        return decorate
    if not callable(model):
        raise TypeError(f"compile: expected a callable (a function or an nn.Module), got {type(model).__name__}.")
    check = mode == "check" or (options or {}).get("check") is True or os.environ.get("DYNGRAD_COMPILE_CHECK") == "1"
    static = not disable and (mode == "reduce-overhead" or fullgraph or check)
    verified = not disable and not static and (
        mode == "verified" or (options or {}).get("verify") is True or VERIFIED_BY_DEFAULT
        or os.environ.get("DYNGRAD_COMPILE_VERIFY") == "1")
    if _is_module(model):
        if static or verified:
            return CompiledModule(model, Program(model._call_impl, name or type(model).__name__, recompile_limit,
                                                 owner=model, check=check, verified=verified))
        if "_orig_mod" not in vars(model):
            # torch's compiled module keeps the original as ._orig_mod, and scripts save
            # model._orig_mod.state_dict(): here the module is its own original (a plain attribute, not a submodule)
            object.__setattr__(model, "_orig_mod", model)
        return model
    if static or verified:
        return CompiledFunction(model, Program(model, name or getattr(model, "__name__", "program"),
                                               recompile_limit, check=check, verified=verified))
    return model


# ---- static replay (Note [Two modes of compile]) ----
_programs = weakref.WeakSet()     # every live Program, for compiler.reset() and compiler.programs()
_eager_flag = threading.local()   # set while a program falls back to eager inside its own call
_eager_threads = set()            # the threads whose _eager_flag.on is set (empty: no thread-local read per call)


class ProgramStats:
    """What dyngrad.compiler reports for one compiled program: the figures to read when it does not speed up."""

    def __init__(self, name, mode):
        self.name = name
        self.mode = mode          # "verified", "static" or "check" (Note [Two modes of compile])
        self.calls = 0
        self.recordings = 0       # variants recorded (from scratch or after a miss)
        self.replays = 0          # calls that ran a recording to its end
        self.eager_calls = 0      # calls that ran eagerly after the variant limit
        self.guard_misses = []    # (reason, source line)
        self._variants = lambda: []   # the program's variants (set by Program; a weak reference to it)
        self.matched_in_cpp = 0   # verified: steps matched in C++ (Note [Verified ops in the fast paths])
        # verified: calls whose backward ran from the plan, and calls that rebuilt the graph of the ops run from it
        # when they left their recording (Note [Verified ops run from the plan] in csrc/bindings/fast_paths.cpp)
        self.verified_planned = 0
        self.verified_rebuilt = 0
        self.eager_reasons = {}   # why calls ran eagerly: reason -> calls
        self._program = None      # a weak reference to the Program (variant_table; dg.viz.draw_program draws it)

    @property
    def planned_backwards(self):
        """Replays that ran their backward from the plan (Note [The backward as a recorded program] in
        csrc/bindings/replay_backward.cpp), not over a graph."""
        programs = [v.__dict__.get("_native") for v in self._variants()]
        return sum(getattr(p, "planned_runs", 0) for p in programs if p is not None)

    @property
    def backward_plans(self):
        """Per variant replayed in the C++ loop: None when its backward is planned, else why it is not."""
        return [v.plan_reason for v in self._variants() if v.__dict__.get("_native") is not None]

    @property
    def program(self):
        return self._program() if self._program is not None else None

    @property
    def variants(self):
        return self.recordings

    @property
    def hits(self):
        """Calls that followed a recording to its end (replayed, or verified op by op)."""
        return self.replays

    @property
    def misses(self):
        """Calls that left their recordings (or met none: a new entry guard), each with a reason and a line."""
        return len(self.guard_misses)

    def variant_table(self):
        """One dict per variant the program holds now: its entry guard, steps, value guards, replays (hits) and
        what it was recorded after (the first call of an entry guard, or a miss's reason and line)."""
        program = self.program
        if program is None:
            return []
        rows = []
        for g, group in enumerate(program.groups.values()):
            for variant in group:
                origin = getattr(variant, "origin", None) or ("", None)
                rows.append({"entry_guard": g, "steps": len(variant.steps),
                             "value_guards": sum(1 for s in variant.steps if s.result[0] in ("v", "a")),
                             "replays": variant.replays, "recorded_after": origin[0], "line": origin[1],
                             "eager": variant.eager_reason is not None})
        return rows

    def report(self):
        """The statistics as text: the figures to read when a program does not speed up."""
        lines = [f"{self.name} ({self.mode}): {self.calls} calls, {self.hits} hits, {self.misses} misses, "
                 f"{self.variants} variants recorded, {self.eager_calls} eager calls"
                 + (f", {self.matched_in_cpp} ops matched in C++" if self.mode == "verified" else "")]
        for row in self.variant_table():
            where = f" at {row['line']}" if row["line"] else ""
            lines.append(f"  variant (entry guard {row['entry_guard']}): {row['steps']} steps, {row['value_guards']} "
                         f"value guards, {row['replays']} replays{' (runs eagerly)' if row['eager'] else ''}; "
                         f"recorded after {row['recorded_after'] or 'a call'}{where}")
        for reason, line in self.guard_misses[-10:]:
            lines.append(f"  miss: {reason} (at {line})")
        if len(self.guard_misses) > 10:
            lines.append(f"  ... and {len(self.guard_misses) - 10} earlier misses (compile_stats.guard_misses)")
        for reason, n in self.eager_reasons.items():
            lines.append(f"  eager: {n} call{'s' if n != 1 else ''}: {reason}")
        return "\n".join(lines)

    def as_dict(self):
        return {"name": self.name, "mode": self.mode, "calls": self.calls, "variants": self.variants,
                "replays": self.replays, "hits": self.hits, "misses": self.misses, "eager_calls": self.eager_calls,
                "guard_misses": list(self.guard_misses), "planned_backwards": self.planned_backwards,
                "backward_plans": self.backward_plans, "eager_reasons": dict(self.eager_reasons),
                "matched_in_cpp": self.matched_in_cpp, "verified_planned": self.verified_planned,
                "verified_rebuilt": self.verified_rebuilt, "variant_table": self.variant_table()}

    def __repr__(self):
        return (f"ProgramStats({self.name!r}, {self.mode}: {self.calls} calls, {self.variants} variants, "
                f"{self.replays} hits, {self.eager_calls} eager, {len(self.guard_misses)} guard misses)")


class Program:
    """One compiled program's variants, grouped by entry key (Note [Entry guards] in _api/capture.py)."""

    def __init__(self, fn, name, recompile_limit=None, owner=None, check=False, verified=False):
        self.fn = fn
        self.check = check
        self.verified = verified and not check
        self.static = not self.verified and not check
        self.owner = owner
        self.limit = recompile_limit or capture.MAX_VARIANTS
        self.groups = {}          # entry key -> [Variant], the most recently run first
        self.stats = ProgramStats(name, "check" if check else "verified" if self.verified else "static")
        program = weakref.ref(self)
        self.stats._variants = lambda: [v for g in program().groups.values() for v in g] if program() else []
        self.stats._program = weakref.ref(self)
        self.warned = False
        self.warned_eager = False
        self.replaying = threading.Lock()
        self.last_key = None
        self.last_group = None     # the group of last_key (Note [Entry guards compared in place])
        self.fast = None           # Note [A static call in one C++ call]: (call, variant, layout, output slot)
        self.last_miss = None      # (reason, line) of the last miss: the origin of the variant recorded after it
        _programs.add(self)

    verified_shadow = None   # Note [Verified entry keys compared in place] (capture.py)

    def reset(self):
        self.fast = None
        self.groups.clear()
        self.last_key = None
        self.last_group = None

    def n_variants(self):
        return sum(len(v) for v in self.groups.values())

    def __call__(self, args, kwargs):
        stats = self.stats
        stats.calls += 1
        fast = self.fast
        if fast is not None and not (capture._capturing_threads or _eager_threads or autocast._active_threads) \
                and self.replaying.acquire(blocking=False):
            # Note [A static call in one C++ call] (csrc/bindings/capture_bind.cpp): the last call's variant, its
            # entry guard compared in place, slots laid out and run in one call of its loop
            call, variant, layout, out = fast
            try:
                done = call(self.last_key, args, kwargs, self.fn, self.owner, layout, out)
                ran = done is not None      # None: the key did not match, nothing ran
                if type(done) is tuple:     # the loop stopped, or the output is not one slot: as replay goes on
                    slots, tensors, stop = done
                    variant, done = capture.replay(self.last_group, variant, tensors, slots, stop)
                    group = self.last_group
                    if group[0] is not variant:     # a sibling ran (a value guard's miss moved to it)
                        self.fast = None
                        group.remove(variant)
                        group.insert(0, variant)
                elif ran:
                    variant.replays += 1
            except capture.Miss as miss:
                self.replaying.release()
                self.fast = None
                got = miss.results[-1]
                got = "a tensor" if isinstance(got, _C.Tensor) else _short(got)
                self.miss(f"{miss.step.name} returned {got} where the recording has "
                          f"{_short(capture.describe_result(miss.step.result))}", miss.step.line or "<unknown line>")
                return self.catch_up(self.last_key, self.last_group, miss, args, kwargs, tensors)
            except BaseException:
                self.replaying.release()
                raise
            self.replaying.release()
            if ran:
                stats.replays += 1
                return done
        self.fast = None
        if (capture._capturing_threads or _eager_threads) and (capture.is_capturing() or
                                                              getattr(_eager_flag, "on", False)):
            return self.fn(*args, **kwargs)      # a compiled program called inside a recording is part of it
        tensors = None
        if self.last_group is not None and self.static and KEY_IN_PLACE and _key_matches is not None and \
                not autocast._active_threads:
            # same_entry_key's call, inlined; None: the middle parts (grad mode, default dtype, autocast off) and
            # _reachable in C++
            tensors = _key_matches(self.last_key, _Tensor, args, kwargs, None, None, self.fn, self.owner)
        elif self.last_group is not None and self.verified and KEY_IN_PLACE and _key_matches is not None and \
                not autocast._active_threads:   # Note [Verified entry keys compared in place] (capture.py)
            tensors = _key_matches(self.verified_shadow, _Tensor, args, kwargs, None, (), self.fn, self.owner)
        if tensors is not None:   # the call's key is the last call's (Note [Entry guards compared in place])
            key, group = self.last_key, self.last_group
        else:
            key, tensors = entry_key(self, args, kwargs, reachable=not self.verified)
            group = self.groups.get(key)
            self.last_group = group
            if self.verified:
                self.verified_shadow = capture.verified_shadow_key(args, kwargs)
        if group is None:
            reason = describe_key_change(self.last_key, key)
            if self.last_key is not None:
                self.miss(reason, capture.user_line())
            return self.record_new(key, [], args, kwargs, tensors)
        self.last_key = key
        if group[0].eager_reason is not None:
            op, line = group[0].eager_reason
            why = getattr(group[0], "eager_why", None) or "a custom Function, a hook"
            self.eager(f"a step static replay cannot repeat: {op} at {line} ({why})")
            return self.run_eagerly(args, kwargs)
        if self.verified:
            return self.verified_call(group, args, kwargs, tensors)
        if self.check:
            return self.checked_call(key, group, args, kwargs, tensors)
        if not self.replaying.acquire(blocking=False):
            # replayed already, by another thread or inside its own replay (a hook of its backward): the C++ loop
            # holds one replay's slots (Note [Slots in C++]), so this call runs eagerly
            self.eager("replayed already (by another thread, or inside its own replay)")
            return self.run_eagerly(args, kwargs)
        try:
            try:
                variant, result = capture.replay(group, group[0], tensors)
            finally:
                self.replaying.release()
        except capture.Miss as miss:
            got = miss.results[-1]
            got = "a tensor" if isinstance(got, _C.Tensor) else _short(got)
            self.miss(f"{miss.step.name} returned {got} where the recording has "
                      f"{_short(capture.describe_result(miss.step.result))}", miss.step.line or "<unknown line>")
            return self.catch_up(key, group, miss, args, kwargs, tensors)
        if group[0] is not variant:
            group.remove(variant)
            group.insert(0, variant)
        elif FAST_CALL and KEY_IN_PLACE and _key_matches is not None:
            native = variant.__dict__.get("_native")
            if native is not None and hasattr(native, "call"):
                output = variant.output
                variant.fresh_slots(())                     # lays out the externals (Variant._layout)
                self.fast = (native.call, variant, variant._layout[3],
                             output.i if type(output) is capture.Slot else -1)
        stats.replays += 1
        return result

    def checked_call(self, key, group, args, kwargs, tensors):
        """mode="check": eager execution checked op by op against the recordings (Note [Checking a recording] in
        _api/capture.py); a divergence raises, a guard miss records a variant as static replay would."""
        result, variant = capture.check(group, self.fn, args, kwargs, tensors)
        if variant in group:
            group.remove(variant)
            group.insert(0, variant)
            self.stats.replays += 1
        else:
            step, value = variant.missed
            self.miss(f"{step.name} returned {_short(value)} where the recording has "
                      f"{_short(capture.describe_result(step.result))}", step.line or "<unknown line>")
            if not self.full():
                variant.origin = self.last_miss
                group.insert(0, variant)
                self.stats.recordings += 1
        return result

    def verified_call(self, group, args, kwargs, tensors):
        """Verified replay (Note [Verified replay] in _api/capture.py): the program runs as in eager mode, each op
        checked against the recordings; where it leaves them, the rest is recorded as a variant (or, once the
        program is full, just runs)."""
        can_record = self.n_variants() < self.limit
        result, followed, new = capture.verify(group, self.fn, args, kwargs, tensors, can_record)
        self.stats.matched_in_cpp += capture._local.matched_in_cpp
        self.stats.verified_planned += capture._local.planned_in_verified
        self.stats.verified_rebuilt += capture._local.rebuilt_in_verified
        if followed is not None:
            followed.replays += 1
            if group[0] is not followed:
                group.remove(followed)
                group.insert(0, followed)
            self.stats.replays += 1
            return result
        self.miss(*new.left)
        if can_record:
            new.origin = new.left
            group.insert(0, new)
            self.stats.recordings += 1
            self.warn_eager(new)
        else:
            self.full()
            self.eager(f"the variant limit ({self.limit}) is reached: the call is checked, nothing new is recorded")
        return result

    def miss(self, reason, line):
        self.stats.guard_misses.append((reason, line))
        self.last_miss = (reason, line)

    def eager(self, reason):
        """A call that runs eagerly, counted with its reason (compile_stats.eager_reasons)."""
        self.stats.eager_calls += 1
        self.stats.eager_reasons[reason] = self.stats.eager_reasons.get(reason, 0) + 1

    def full(self):
        if self.n_variants() < self.limit:
            return False
        if not self.warned:
            self.warned = True
            reason, line = self.stats.guard_misses[-1] if self.stats.guard_misses else ("", "")
            warn(f"compile: {self.stats.name} has recorded {self.limit} variants (recompile_limit); it runs "
                          f"eagerly from now on. Last guard miss: {reason} (at {line}). dyngrad.compiler.programs() "
                          f"lists every miss.", RuntimeWarning)
        return True

    def record_new(self, key, group, args, kwargs, tensors):
        if self.full():
            self.eager(f"the variant limit ({self.limit}) is reached")
            return self.run_eagerly(args, kwargs)
        variant = capture.Variant(len(tensors))
        variant.origin = (self.last_miss if self.last_key is not None and self.groups else None) or \
            ("the first call with these arguments' structure, shapes and dtypes", None)
        result = capture.record(variant, self.fn, args, kwargs, tensors)
        _mark_aliased_arguments(self, variant, args, kwargs, tensors)
        self.groups.setdefault(key, []).insert(0, variant)
        self.last_key = key
        self.last_group = self.groups[key]
        self.stats.recordings += 1
        self.warn_eager(variant)
        return result

    def warn_eager(self, variant):
        """Note [Steps that stay eager] (_api/capture.py): such a variant runs eagerly, said once per program."""
        if variant.eager_reason is None:
            return
        variant.steps, variant.externals = [], {}      # nothing of it is replayed: keep nothing alive
        if not self.warned_eager and not self.verified:   # verified calls run eagerly anyway: nothing is lost
            self.warned_eager = True
            op, line = variant.eager_reason
            why = getattr(variant, "eager_why", None)
            if why is not None:
                warn(f"compile: {self.stats.name} runs eagerly for these arguments: {op} ({line}) {why}.",
                     RuntimeWarning)
                return
            warn(f"compile: {self.stats.name} runs eagerly for these arguments: its call of {op} at {line} "
                          f"hands the engine a Python object (a custom autograd.Function, a hook, saved-tensor "
                          f"hooks), which static replay cannot repeat.", RuntimeWarning)

    def catch_up(self, key, group, miss, args, kwargs, tensors):
        """Note [Catching up after a miss] (_api/capture.py): the replayed steps are served to the program's Python
        run again; the rest is recorded as a new variant, or run eagerly once the limit is reached."""
        served = miss.variant.steps[:miss.index + 1]
        if self.full():
            self.eager(f"the variant limit ({self.limit}) is reached")
            return capture.record(capture.Variant(len(tensors)), self.fn, args, kwargs, tensors, serve=served,
                                  serve_results=miss.results, record_rest=False)
        variant = capture.Variant(len(tensors))
        variant.origin = self.last_miss
        variant.n_slots = miss.variant.n_slots
        variant.externals = dict(miss.variant.externals)
        result = capture.record(variant, self.fn, args, kwargs, tensors, serve=served, serve_results=miss.results)
        _mark_aliased_arguments(self, variant, args, kwargs, tensors)
        group.insert(0, variant)
        self.stats.recordings += 1
        self.warn_eager(variant)
        return result

    def run_eagerly(self, args, kwargs):
        _eager_flag.on = True
        _eager_threads.add(threading.get_ident())
        try:
            return self.fn(*args, **kwargs)
        finally:
            _eager_flag.on = False
            _eager_threads.discard(threading.get_ident())


def _mark_aliased_arguments(program, variant, args, kwargs, tensors):
    """Note [Arguments that are also externals]: a recording maps every object to one slot, and an argument takes
    its slot first. An argument tensor that the program also reads another way (a parameter or buffer of a
    module it reaches, a tensor attribute, an optimiser's parameter or state, a closed-over or global tensor:
    `compiled(model.weight)` where the forward reads self.weight) was therefore recorded as the argument at both
    reads, and a replay with another tensor there would use it at both: a silent wrong answer. The guards cannot
    see the difference (the same shapes), so such a variant runs eagerly, with one warning. Static modes only:
    verified replay compares each op's tensors with the call's own."""
    if program.verified or variant.eager_reason is not None or not tensors:
        return
    found, parts = _reachable(program.fn, program.owner, with_tensors=True)
    objs = list(found)
    for value in list(args) + list(kwargs.values()):
        if _is_module(value) or _is_optimizer(value):
            objs.append(value)
    ids = {i for _, (i, _shape, _dtype) in parts}
    for obj in objs:
        if _is_module(obj):
            for m in obj.modules():
                for v in m.__dict__.values():
                    if isinstance(v, _C.Tensor):
                        ids.add(id(v))
                ids.update(id(p) for p in m._parameters.values() if p is not None)
                ids.update(id(b) for b in m._buffers.values() if b is not None)
        else:
            for g in obj.param_groups:
                ids.update(id(p) for p in g["params"])
            for s in obj.state.values():
                ids.update(id(v) for v in s.values() if isinstance(v, _C.Tensor))
    aliased = [i for i, t in enumerate(tensors) if id(t) in ids]
    if aliased:
        variant.eager_reason = (f"argument tensor {aliased[0]}", "the call's arguments")
        variant.eager_why = ("is also a parameter, buffer or closed-over tensor that the program reads, which a "
                             "replay with another argument would confuse with it")


def _short(value):
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


class CompiledFunction:
    """What compile(fn, mode="reduce-overhead") returns: calls replay fn's recordings (Note [Two modes of
    compile]); `_torchdynamo_orig_callable` and `__wrapped__` are fn, as torch's."""

    def __init__(self, fn, program):
        self._program = program
        self.__wrapped__ = fn
        self._torchdynamo_orig_callable = fn
        self.__name__ = getattr(fn, "__name__", "program")
        self.__doc__ = getattr(fn, "__doc__", None)

    def __call__(self, *args, **kwargs):
        return self._program(args, kwargs)

    def __get__(self, obj, objtype=None):   # a compiled method binds its instance, as a function does
        if obj is None:
            return self
        return _BoundCompiled(self, obj)

    @property
    def compile_stats(self):
        return self._program.stats


class _BoundCompiled:
    def __init__(self, compiled, obj):
        self._compiled, self._obj = compiled, obj

    def __call__(self, *args, **kwargs):
        return self._compiled._program((self._obj,) + args, kwargs)


class CompiledModule:
    """What compile(module, mode="reduce-overhead") returns (torch's OptimizedModule): calling it replays the
    module's recordings; every other attribute is the module's (`_orig_mod` is the module itself)."""

    def __init__(self, module, program):
        object.__setattr__(self, "_orig_mod", module)
        object.__setattr__(self, "_program", program)

    def __call__(self, *args, **kwargs):
        return self._program(args, kwargs)

    def __getattr__(self, name):
        return getattr(object.__getattribute__(self, "_orig_mod"), name)

    def __setattr__(self, name, value):
        setattr(self._orig_mod, name, value)

    def __repr__(self):
        return f"CompiledModule({self._orig_mod!r})"

    @property
    def compile_stats(self):
        return self._program.stats


# ---- entry guards (Note [Entry guards] in _api/capture.py) ----
def entry_key(program, args, kwargs, reachable=True):
    """(key, argument tensors): what a recording's entry guard compares, and the tensors the replay reads. A verified
    program (Note [Verified replay]) leaves out the modules and optimisers it reaches: its Python runs, and every
    parameter, buffer and Python number it hands an op is checked with the op. A static program's key is built in
    C++ where the engine has it (Note [Entry guards in C++] in csrc/bindings/capture_bind.cpp: the same tuple as
    entry_key_python's), else by entry_key_python."""
    native = getattr(_C, "_entry_key", None)
    if reachable and native is not None:
        found, outside = _reachable(program.fn, program.owner, with_tensors=True)
        return native(_C.Tensor, args, kwargs,
                      (("grad mode", _C.is_grad_enabled()), ("default dtype", _C._get_default_dtype()),
                       ("autocast", _autocast_state()), *outside), found)
    return entry_key_python(program, args, kwargs, reachable)


# Note [Entry guards compared in place]: False builds the key at every call, as before (for measuring)
KEY_IN_PLACE = True
# Note [A static call in one C++ call] (csrc/bindings/capture_bind.cpp): False takes the general path at every call
FAST_CALL = True
_key_matches = getattr(_C, "_entry_key_matches", None)
_Tensor = _C.Tensor


def same_entry_key(program, key, args, kwargs):
    """The argument tensors if entry_key(program, args, kwargs) would be `key` (a static program's), else None
    (also when the engine cannot tell without building the key): Note [Entry guards compared in place] in
    csrc/bindings/capture_bind.cpp. The reference engine always builds the key."""
    native = getattr(_C, "_entry_key_matches", None)
    if native is None or key is None or autocast._active_threads:
        return None
    return native(key, _C.Tensor, args, kwargs, None, None, program.fn, program.owner)   # None: read in C++


def entry_key_python(program, args, kwargs, reachable=True):
    """entry_key in Python: the reference engine's, the verified mode's, and the specification of the C++ walk."""
    tensors, seen, parts, states = [], {}, [], []
    _describe(args, parts, tensors, seen, states, ("args",))
    _describe(kwargs, parts, tensors, seen, states, ("kwargs",))
    parts.append(("grad mode", _C.is_grad_enabled()))
    parts.append(("default dtype", _C._get_default_dtype()))
    parts.append(("autocast", _autocast_state()))
    if not reachable:      # verified: Python numbers and objects are seen by the ops they reach, not by value
        return tuple((w, (d[0], d[1] if isinstance(d[1], type) else None))
                     if type(d) is tuple and d and d[0] in ("value", "object") else (w, d) for w, d in parts), tensors
    fn = program.fn
    found, outside = _reachable(fn, program.owner, with_tensors=True)
    parts += outside
    for obj in found:
        states.append(obj)
    done = set()
    for obj in states:
        if id(obj) in done:
            continue
        done.add(id(obj))
        if _is_module(obj):
            parts.append((f"module {type(obj).__name__}", _module_state(obj)))
        else:
            parts.append((f"optimizer {type(obj).__name__}", _optimizer_state(obj)))
    return tuple(parts), tensors


def _autocast_state():
    """Note [Autocast under compile]: this thread's autocast state (None when it is off, the common case: one
    global read), a part of the entry key. Recorded outside an autocast region and replayed inside one, the
    matmuls ran in float32 where eager mode runs them in bfloat16 (a silent wrong answer); inside, the ops of the
    lower-precision list issue other steps. While recording, a cast of a weight does not come from autocast's
    weight cache (_api/autocast.py: _cast), so it is a step from the weight and not an external holding the cast
    of another call."""
    if not autocast._active_threads:
        return None
    st = autocast._state
    if not any(st.enabled.values()):
        return None
    return tuple(st.enabled.items()), tuple(st.dtype.items()), st.cache_enabled, st.excluded


def _describe(obj, parts, tensors, seen, states, where):
    if isinstance(obj, _C.Tensor):
        first = seen.setdefault(id(obj), len(tensors))
        if first == len(tensors):
            tensors.append(obj)
        parts.append((where, ("tensor", type(obj), tuple(obj.shape), obj.dtype, obj.stride(), obj.requires_grad,
                              first)))
    elif type(obj) in (tuple, list):
        parts.append((where, (type(obj), len(obj))))
        for i, x in enumerate(obj):
            _describe(x, parts, tensors, seen, states, (where, i))
    elif type(obj) is dict:
        parts.append((where, ("dict", tuple(obj))))
        for k, v in obj.items():
            _describe(v, parts, tensors, seen, states, (where, k))
    elif _is_module(obj) or _is_optimizer(obj):
        states.append(obj)
        parts.append((where, ("object", id(obj))))
    else:
        try:
            hash(obj)
            parts.append((where, ("value", type(obj), obj)))
        except TypeError:
            parts.append((where, ("object", type(obj), id(obj))))


def _is_optimizer(obj):
    """An optimiser (torch's duck type: param_groups and state in its __dict__, a step method); a plain dict look-up,
    as a failing getattr on a tensor costs microseconds."""
    d = getattr(obj, "__dict__", None)
    return type(d) is dict and "param_groups" in d and "state" in d and not isinstance(obj, type)


def _reachable(fn, owner, with_tensors=False):
    """Modules and optimisers the program may read besides its arguments: its module, the self of a bound method,
    the cells of its closure and the globals its code names (one level, as written in the function). With
    with_tensors, also the guard parts of the tensors found there: (found, parts), Note [State outside the
    arguments]."""
    found = [owner] if owner is not None else []
    parts = []
    self_ = getattr(fn, "__self__", None)
    if self_ is not None and (_is_module(self_) or _is_optimizer(self_)):
        found.append(self_)
    code = getattr(fn, "__code__", None)
    cells = getattr(fn, "__closure__", None)
    if cells:
        names = code.co_freevars if code is not None else ("?",) * len(cells)
        for name, cell in zip(names, cells):
            try:
                value = cell.cell_contents
            except ValueError:
                continue
            if _is_module(value) or _is_optimizer(value):
                found.append(value)
            elif with_tensors and isinstance(value, _C.Tensor):
                parts.append((f"the closure's tensor {name}", (id(value), tuple(value.shape), value.dtype)))
    if code is not None:
        g = getattr(fn, "__globals__", {})
        for name in code.co_names:
            value = g.get(name)
            if value is None:
                continue
            if _is_module(value) or _is_optimizer(value):
                found.append(value)
            elif with_tensors and isinstance(value, _C.Tensor):
                parts.append((f"the global tensor {name}", (id(value), tuple(value.shape), value.dtype)))
    return (found, parts) if with_tensors else found


# Note [State outside the arguments]
# What a static program reads besides its arguments, guarded beyond the parameters, buffers and training flags.
# Without these parts each case was a silent wrong answer (the replay ran the recording made before the change):
# - a tensor bound to a closure cell or to a global the function's code names, by identity (_reachable with
#   with_tensors): rebinding it (`W = new_tensor`) is a miss, as rebinding a parameter is. Writes into the same
#   tensor need no guard: an external is read by reference at every replay;
# - for every submodule of a reachable module (_module_state, and guard::module_attributes in
#   csrc/bindings/capture_bind.cpp, element for element): its plain attributes in its __dict__'s order, tensors by
#   identity (`self.mask = ...`, neither parameter nor buffer) and Python numbers, strings and None by value
#   (`self.scale = 2.0`; torch guards on these too), then the keys of its non-empty forward and backward hook dicts
#   (a hook registered after the recording is a miss, and the new variant records the hook's ops).
# One level, as _reachable: a tensor inside a list held by a global, or a global read by a helper function, is not
# seen (mode="check" finds it). A module that writes a Python number attribute at every call (a counter) misses at
# every call and runs eagerly after recompile_limit variants: eager mode's results, with the warning.
_PLAIN = (int, float, bool, complex, str, type(None))
_HOOK_DICTS = ("_forward_pre_hooks", "_forward_hooks", "_backward_pre_hooks", "_backward_hooks")


def _module_state(module):
    """Every submodule's identity and training flag, its parameters' and buffers' names and identities, its plain
    attributes and its hooks (Note [State outside the arguments]), flat (a walk of the _modules dicts:
    Module.modules() costs twice as much, and this runs at every call)."""
    out, stack, seen = [], [module], set()
    while stack:
        m = stack.pop()
        if m is None or id(m) in seen:
            continue
        seen.add(id(m))
        d = m.__dict__
        out += (id(m), m.training)
        for k, p in d["_parameters"].items():
            out += (k, id(p), p is not None and p.requires_grad, None if p is None else (tuple(p.shape), p.dtype))
        for k, b in d["_buffers"].items():
            out += (k, id(b), None if b is None else (tuple(b.shape), b.dtype))
        for k, v in d.items():          # Note [State outside the arguments]
            if type(v) in _PLAIN:
                out += (k, v)
            elif isinstance(v, _C.Tensor):
                out += (k, id(v))
        for k in _HOOK_DICTS:
            hooks = d.get(k)
            if hooks:
                out += (k, tuple(hooks))
        out.append(None)
        stack.extend(d["_modules"].values())
    return tuple(out)


def _optimizer_state(opt):
    groups = tuple(tuple((k, v) for k, v in g.items() if k != "params" and isinstance(v, (int, float, bool, str,
                                                                                          type(None), tuple)))
                   + (("params", tuple(id(p) for p in g["params"])),) for g in opt.param_groups)
    state = tuple((id(p), tuple((k, v if isinstance(v, (int, float, bool)) else id(v)) for k, v in s.items()))
                  for p, s in opt.state.items())
    return groups, state


def _label(where):
    """("args",) -> 'args', (("args",), 1) -> 'args[1]': the path of a guarded item, as written."""
    if isinstance(where, str):
        return where
    if len(where) == 1:
        return where[0]
    return f"{_label(where[0])}[{where[1]!r}]"


def describe_key_change(old, new):
    if old is None:
        return "first call"
    if len(old) != len(new):
        return f"the arguments' structure changed ({len(old)} -> {len(new)} guarded items)"
    for (label, a), (_, b) in zip(old, new):
        if a != b:
            return f"{_label(label)} changed: {_short(a)} -> {_short(b)}"
    return "a guard changed"


def _is_module(obj):
    """An nn.Module: nn/modules/module.py is above this layer, so its Module says so itself (a class attribute)."""
    return getattr(type(obj), "_compile_keeps_original", False) is True


def is_compiling():
    """True while this thread records a program for static replay (Note [Two modes of compile])."""
    return capture.is_capturing()


def is_dynamo_compiling():
    """False: dyngrad never traces."""
    return False


def is_exporting():
    """False: dyngrad never exports a graph."""
    return False


def disable(fn=None, recursive=True, *, reason=None):
    """torch.compiler.disable: `fn` unchanged (nothing is ever compiled); usable as a decorator with or without
    arguments."""
    if fn is None:
        return lambda f: disable(f, recursive, reason=reason)
    if not callable(fn):
        raise TypeError(f"compiler.disable: expected a callable, got {type(fn).__name__}.")
    return fn


def reset():
    """Drops every recorded variant of every compiled program (their statistics stay)."""
    for program in list(_programs):
        program.reset()


def programs():
    """The statistics of every live compiled program (static replay): variants, replays, eager calls and guard
    misses with their reasons and source lines."""
    return [p.stats for p in list(_programs)]


def report():
    """Every live compiled program's statistics as text (ProgramStats.report): calls, hits, misses with their
    reasons and lines, each variant (steps, value guards, replays, what it was recorded after), eager calls with
    their reasons."""
    return "\n".join(stats.report() for stats in programs())


def allow_in_graph(fn):
    """Returns fn (there is no graph to allow it into)."""
    return fn


def assume_constant_result(fn):
    """Returns fn."""
    return fn


def list_backends(exclude_tags=("debug", "experimental")):
    """The backend names compile accepts (torch's), less the tagged ones, as torch.compiler.list_backends."""
    if exclude_tags is None:
        exclude_tags = ()
    names = [b for b in _BACKENDS if not ("experimental" in exclude_tags and b in _EXPERIMENTAL)
             and not ("debug" in exclude_tags and "debug" in b)]
    return sorted(names)


def get_default_backend():
    """The backend compile uses when given none."""
    return _default_backend[0]


def set_default_backend(backend):
    """Sets the backend name compile reports as default (validated; it changes nothing else)."""
    _check_compile_args(False, None, backend, None, None, False)
    _default_backend[0] = backend


def set_stance(stance="default", *, skip_guard_eval_unsafe=False, force_backend=None):
    """torch.compiler.set_stance: accepted and checked; a no-op under eager execution. Usable as a context manager
    or decorator like torch's."""
    stances = ("default", "force_eager", "eager_on_recompile", "fail_on_recompile", "eager_then_compile",
               "aot_eager_then_compile")
    if stance not in stances:
        raise RuntimeError(f"compiler.set_stance: unknown stance {stance!r}; expected one of {', '.join(stances)}.")
    return _Stance()


class _Stance:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def __call__(self, fn):
        return fn


def _module_compile(self, *args, **kwargs):
    """nn.Module.compile(*args, **kwargs), torch's: compiles the module in place (its calls replay recordings in the
    static modes; otherwise it keeps running eagerly: Note [Two modes of compile]). Returns None."""
    params = inspect.signature(compile).bind(self, *args, **kwargs).arguments
    params.pop("model")
    compiled = compile(self, **params)
    if isinstance(compiled, CompiledModule):
        object.__setattr__(self, "_compiled_call", compiled._program)
