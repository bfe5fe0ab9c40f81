"""Graphviz DOT for a program recorded by dyngrad.compile (issue 20): its variants, their steps, where the guards are.

    src = dg.viz.draw_program(compiled_fn)          # DOT source of every variant of every entry guard
    src = dg.viz.draw_program(compiled_fn.compile_stats)   # the same, from the statistics object
    dg.viz.render_program(compiled_fn, path="program.svg")   # through Graphviz, when installed

Note [Drawing a recorded program]
A compiled program holds, per entry guard (the key of Note [Entry guards] in _api/capture.py), a list of variants;
variants recorded after a miss share the steps before it (the same Step objects), so together they form a tree. The
drawing follows that tree: one box per distinct Step (a shared prefix is drawn once), an edge from each step to the
next one of every variant that runs it, and an edge from the step that made a slot to every step that reads it
(dashed). Kinds of box:
- an entry guard (an octagon, one per key: what the key checks, in words, and how many variants hang below it);
- a step (grey: its `_C` function, where the recording saw its line, and how it replays: `core` for a direct call of
  the core function in the C++ loop, `loop` for a vectorcall there, `python` for a step Python builds; Note
  [Replaying steps in C++] in csrc/bindings/capture_bind.cpp);
- a value guard (gold diamond: a step whose result flowed into Python, with the recorded value and the user's line;
  a replay recomputes it and misses where it differs, Note [Values that flow into Python are guards]);
- a step that keeps its variant eager (pink: Note [Steps that stay eager]);
- the arguments and externals (blue; externals are read by reference at every call) and each variant's end (green,
  with its replay count). The C++ replay's fused groups of steps (Note [Fused steps] in
  csrc/bindings/replay_fuse.cpp: in-place updates, results computed into a dead operand) run the drawn steps'
  arithmetic; they are not drawn, and the legend says so.
"""
import sys

from .dot import COLORS, Drawing, render

_CAPTION_LIMIT = 40


def _program_of(obj):
    if hasattr(obj, "variant_table") and hasattr(obj, "program"):    # ProgramStats
        program = obj.program
    else:
        program = getattr(obj, "_program", None)       # a CompiledFunction or CompiledModule
    if program is None and hasattr(obj, "groups") and hasattr(obj, "stats"):
        program = obj
    if program is None:
        raise TypeError(f"draw_program: expected what dyngrad.compile returned (a compiled function or module), its "
                        f"compile_stats or a Program, got {type(obj).__name__}")
    return program


def _short(value):
    text = repr(value)
    return text if len(text) <= _CAPTION_LIMIT else text[:_CAPTION_LIMIT - 3] + "..."


def _capture_of(step):
    """The capture module of the step's engine (each engine has its own: dyngrad._api.capture and
    dyngrad.reference._api.capture), found from the step's class."""
    return sys.modules[type(step).__module__]


def _describe_args(step):
    capture = _capture_of(step)
    items = step.args.items if type(step.args) is capture.Seq else list(step.args)
    parts = []
    for a in items:
        if type(a) is capture.Slot:
            parts.append(f"%{a.i}")
        elif type(a) is capture.Seq:
            parts.append(f"[{len(a.items)} items]")
        elif type(a) is capture.ArrayConstant:
            parts.append(f"array{tuple(a.array.shape)}")
        elif callable(a):
            parts.append(getattr(a, "__name__", "fn"))
        else:
            parts.append(_short(a))
    if step.kwargs:
        parts.append(f"{len(step.kwargs)} keywords")
    text = ", ".join(parts)
    return text if len(text) <= 2 * _CAPTION_LIMIT else text[:2 * _CAPTION_LIMIT - 3] + "..."


def _how(step):
    """How the C++ loop runs the step (Note [Replaying steps in C++])."""
    if step.native is None and _capture_of(step)._native_seq_spec(step) is None:
        return "python"
    return "loop"


def _is_guard(step):
    """A value guard: the result flowed into Python (a value, an array), or a .grad read Python tests for None."""
    return step.result[0] in ("v", "a") or (step.name == "grad" and step.result[0] in ("none", "t"))


def _guard_text(step):
    kind = step.result[0]
    if kind == "v":
        return f"== {_short(step.result[1])}"
    if kind == "a":
        return f"== an array {tuple(step.result[2].shape)}"
    return "is None" if kind == "none" else "is a tensor"


def _key_text(key):
    """An entry key (compiling.entry_key's tuple of (where, what) parts) in a few lines: each argument tensor's
    shape and dtype, grad mode, and the modules and optimisers whose state it guards."""
    lines, tensors = [], []
    for part in key:
        if not (type(part) is tuple and len(part) == 2):
            continue
        where, what = part
        if type(what) is tuple and what and what[0] == "tensor" and len(what) > 3:
            tensors.append(f"{tuple(what[2])} {str(what[3]).replace('dyngrad.', '')}")
        elif type(where) is str and where.startswith(("module ", "optimizer ")):
            lines.append(where)
        elif where == "grad mode":
            lines.append(f"grad mode {'on' if what else 'off'}")
    if tensors:
        lines.insert(0, "tensors " + ", ".join(tensors[:4]) + (" ..." if len(tensors) > 4 else ""))
    return "\n".join(lines)


def program_drawing(obj, data_edges=True):
    """The Drawing of a compiled program's recordings (Note [Drawing a recorded program])."""
    program = _program_of(obj)
    stats = program.stats
    d = Drawing("program")
    d.node("legend", "summary",
           f"{stats.name} ({stats.mode})\n{stats.calls} calls, {stats.variants} variants recorded, {stats.hits} hits,"
           f"\n{stats.misses} misses, {stats.eager_calls} eager calls\nfused groups of the C++ replay not drawn",
           shape="note")
    ids = {}                      # id(step) -> node id

    for g, (key, group) in enumerate(program.groups.items()):
        guard = f"g{g}"
        plural = "s" if len(group) != 1 else ""
        d.node(guard, "guard", f"entry guard {g}\n{_key_text(key)}\n{len(group)} variant{plural}", shape="octagon")
        made = {}                 # slot -> node id of what made it (argument, external, step)
        for v, variant in enumerate(group):
            for i in range(variant.n_args):
                made.setdefault(i, f"g{g}a{i}")
                if f"g{g}a{i}" not in d.nodes:
                    d.node(f"g{g}a{i}", "leaf", f"argument %{i}")
            for slot, tensor in variant.externals.items():
                node = f"g{g}x{slot}"
                made.setdefault(slot, node)
                if node not in d.nodes:
                    shape = getattr(tensor, "shape", None)
                    d.node(node, "leaf", f"external %{slot}" + (f"\n{tuple(int(s) for s in shape)}"
                                                               if shape is not None else ""))
            previous = guard
            for i, step in enumerate(variant.steps):
                node = ids.get(id(step))
                if node is None:
                    node = ids[id(step)] = f"s{len(ids)}"
                    line = step.line or ""
                    reads = _describe_args(step)
                    if _is_guard(step):
                        out = f" -> %{step.out}" if step.out >= 0 else ""
                        d.node(node, "guard", f"{i}: {step.name}({reads}){out}\nguard: {_guard_text(step)}"
                               + (f"\n{line}" if line else ""), shape="diamond")
                    elif variant.eager_reason is not None and variant.eager_reason[0] == step.name:
                        d.node(node, "removed",
                               f"{i}: {step.name}({reads})\nstays eager" + (f"\n{line}" if line else ""))
                    else:
                        out = f" -> %{step.out}" if step.out >= 0 else ""
                        d.node(node, "op", f"{i}: {step.name}({reads}){out}\n[{_how(step)}]"
                               + (f"\n{line}" if line else ""))
                    if data_edges:
                        capture = _capture_of(step)
                        for slot in sorted(capture._slots_in(step.args) | capture._slots_in(step.kwargs)):
                            if slot in made:
                                d.edge(made[slot], node, style="dashed", color="grey50", arrowhead="open")
                    for slot in _result_slots(step.result):
                        made[slot] = node
                if not any(src == previous and dst == node for src, dst, _ in d.edges):
                    d.edge(previous, node, penwidth=2)
                previous = node
            end = f"g{g}end{v}"
            d.node(end, "output", f"variant {v} ends\n{len(variant.steps)} steps, {variant.replays} replays",
                   shape="oval")
            d.edge(previous, end, penwidth=2)
    return d


def _result_slots(template):
    kind = template[0]
    if kind in ("t", "a", "s"):
        return [template[1]]
    if kind == "seq":
        return [s for t in template[2] for s in _result_slots(t)]
    return []


def draw_program(obj, data_edges=True):
    """DOT source of the recordings of a compiled program (what dyngrad.compile returned, its compile_stats, or the
    Program): entry guards, steps, value guards and data flow (Note [Drawing a recorded program])."""
    return program_drawing(obj, data_edges=data_edges).source()


def render_program(obj, path="program.svg", format=None, data_edges=True):
    """Writes draw_program(obj) through Graphviz's `dot` (SVG or PNG by the path's suffix); returns the path."""
    return render(draw_program(obj, data_edges=data_edges), path=path, format=format)


__all__ = ["draw_program", "render_program", "program_drawing", "COLORS"]
