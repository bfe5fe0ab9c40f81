"""Writes docs/coverage.md: for every public name of python/dyngrad/_api/table.py, which engines the test suite
exercised it on, what its forward was checked against and what checked its backward, from a recorded run of the
suite (tests/coverage_plugin.py, Note [Coverage evidence]); nothing on the page is written by hand.

    DYNGRAD_COVERAGE=/tmp/coverage.json PYTHONPYCACHEPREFIX=/tmp/dyngrad-coverage-pyc PYTHONPATH=python \\
        python -m pytest -q -p no:warnings -o enable_assertion_pass_hook=true tests/
    PYTHONPATH=python python scripts/gen_coverage_docs.py [--note TEXT] /tmp/coverage.json [more.json ...]

Several recordings (the suite run in parts) are merged; --note says on the page how they were made when that was
not the one command above. Names added to the table after the recording appear as
not exercised until the next recording.
"""
import argparse
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))

ENGINES = ("cpp", "reference")
ORACLES = ("torch", "numpy", "exact values", "values")          # forward checks against an independent answer
ORDER = ORACLES + ("other engine", "finite differences", "gradcheck", "gradgradcheck", "vs torch", "exact values",
                  "vs values", "vs other engine")
UNTRACED = {"Tensor.__init__"}     # not wrapped: a wrapper would change pybind11 construction (the C++ engine)
PLACE = {"fn": "dyngrad.{}", "F": "nn.functional.{}", "special": "special.{}", "linalg": "linalg.{}",
         "masked": "masked.{}", "fft": "fft.{}", "windows": "signal.windows.{}",
         "method": "Tensor.{}()", "inplace": "Tensor.{}()", "prop": "Tensor.{}", "op": "Tensor.{}"}


def public_names(rows):
    """(qualified name, kind, attribute) of every public name, in table order. The qualified name is the key of
    the recording: NAME (dyngrad.NAME), F.NAME, special.NAME, linalg.NAME, masked.NAME, Tensor.NAME (methods, in-place
    methods, properties and operators)."""
    seen = set()
    for row in rows:
        places = [(k, row.name) for k in row.kinds if k != "out"]
        if row.inplace:
            places.append(("inplace", row.inplace))
        for kind, attr in places:
            if kind in ("method", "op", "prop", "inplace"):
                name = "Tensor." + attr
            elif kind == "fn":
                name = attr
            else:
                name = f"{kind}.{attr}"
            if name not in seen:
                seen.add(name)
                yield name, kind, attr


def numpy_names(rows):
    """The qualified names whose row says `numpy` in its uses: their calls cross the numpy bridge (Note [The numpy
    bridge] in python/dyngrad/_api/bridge.py; tests/test_numpy_bridge.py keeps the column true). A row's in-place
    method crosses when the row does."""
    out = set()
    for row in rows:
        if "numpy" not in row.uses:
            continue
        single = type(row)(row.name, row.impl, ",".join(row.kinds), row.inplace or "-", "-", "-")
        out |= {name for name, _, _ in public_names([single])}
    return out


def load(paths):
    """The recordings merged: {name: {engine: entry}}, plus "" -> {"outcomes": ..., "files": [...]}."""
    names, run = {}, {"outcomes": {}, "files": set(), "ran": {}, "collected": {}}
    for path in paths:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
        for k, v in data.get("outcomes", {}).items():
            run["outcomes"][k] = run["outcomes"].get(k, 0) + v
        run["files"] |= set(data.get("files", ()))
        for key in ("ran", "collected"):      # recordings of disjoint parts of the suite add up
            for where, n in data.get(key, {}).items():
                run[key][where] = run[key].get(where, 0) + n
        for name, engines in data["names"].items():
            for engine, entry in engines.items():
                mine = names.setdefault(name, {}).setdefault(engine, {"tests": 0, "fwd": {}, "bwd": {}})
                mine["tests"] += entry["tests"]
                mine.setdefault("example", entry["example"])
                mine["differentiable"] = mine.get("differentiable", False) or entry.get("differentiable", False)
                for side in ("fwd", "bwd"):
                    for how, test in entry[side].items():
                        mine[side].setdefault(how, test)
    names[""] = run
    return names


def untraced(m, kind, attr):
    """'class', 'value' or 'constructor' for the names the recording cannot see (it wraps calls), else None."""
    if kind in ("method", "op", "prop", "inplace"):
        return "constructor" if "Tensor." + attr in UNTRACED else None
    space = {"fn": m, "F": m.nn.functional, "special": m.special, "linalg": m.linalg, "masked": m.masked,
             "fft": m.fft, "windows": m.signal.windows}[kind]
    obj = getattr(space, attr)
    return "class" if isinstance(obj, type) else None if callable(obj) else "value"


def _hows(entries, side, keep=None):
    """'torch, numpy (reference only)': what checked `side` on each engine; a check seen on one engine says so."""
    hows = {}
    for engine in ENGINES:
        for how in entries.get(engine, {}).get(side, {}):
            if keep is None or how in keep:
                hows.setdefault(how, []).append(engine)
    out = []
    for how in sorted(hows, key=lambda h: (ORDER.index(h) if h in ORDER else len(ORDER), h)):
        where = hows[how]
        out.append(how if len(where) == len(ENGINES) else f"{how} ({where[0]} only)")
    return ", ".join(out)


def render(names, note=""):
    import dyngrad
    from dyngrad._api.table import rows
    table = list(public_names(rows()))
    host = numpy_names(rows())
    lines, gaps_fwd, gaps_bwd, unexercised = [], [], [], []
    count = {"total": len(table), "untraced": 0, "both": 0, "one": 0, "fwd_both": 0, "fwd_any": 0, "bwd_both": 0,
             "bwd_any": 0, "diff": 0}
    for name, kind, attr in table:
        shown = PLACE[kind].format(attr)
        what = untraced(dyngrad, kind, attr)
        if what:
            count["untraced"] += 1
            lines.append(f"| `{shown}` | {what} | {'yes' if name in host else ''} | not traced | not traced | | |")
            continue
        e = names.get(name, {})
        ran = [eng for eng in ENGINES if e.get(eng, {}).get("tests")]
        count["both" if len(ran) == 2 else "one"] += len(ran) > 0
        fwd_by = [eng for eng in ENGINES if set(e.get(eng, {}).get("fwd", {})) & set(ORACLES)]
        bwd_by = [eng for eng in ENGINES if e.get(eng, {}).get("bwd")]
        differentiable = any(e.get(eng, {}).get("differentiable") for eng in ENGINES)
        count["fwd_both"] += len(fwd_by) == 2
        count["fwd_any"] += bool(fwd_by)
        count["bwd_both"] += len(bwd_by) == 2
        count["bwd_any"] += bool(bwd_by)
        count["diff"] += differentiable
        if not ran:
            unexercised.append(shown)
        elif not fwd_by:
            parity = "other engine" in _hows(e, "fwd")
            gaps_fwd.append(f"`{shown}`" + (" (the engines agree)" if parity else ""))
        if differentiable and not bwd_by:
            gaps_bwd.append(f"`{shown}`")
        cells = [f"{e[eng]['tests']} tests" if eng in ran else "-" for eng in ENGINES]
        fwd = _hows(e, "fwd")
        bwd = _hows(e, "bwd") or ("**none**" if differentiable else "")
        lines.append(f"| `{shown}` | {kind} | {'yes' if name in host else ''} | {cells[0]} | {cells[1]} | {fwd} | "
                     f"{bwd} |")

    traced_n = count["total"] - count["untraced"]
    run = names.get("", {"outcomes": {}, "files": ()})
    files = sorted(os.path.basename(f) for f in run["files"])
    cut = sorted((os.path.basename(f), run["ran"].get(f, 0), m) for f, m in run["collected"].items()
                 if run["ran"].get(f, 0) < m)
    partial = (" Recorded in part (the run was cut short): " + ", ".join(f"`{f}` ({n} of {m} tests)" for f, n, m in cut)
               + ".") if cut else ""
    ran = sum(run["outcomes"].values())
    collected = sum(n for f, n in run.get("collected", {}).items() if f in run["files"])
    if not run.get("ran") and ran < collected:      # a recording without per-file counts, cut short
        partial = (f" The recording was cut short: {ran} of the {collected} tests collected from these files ran, "
                   "so some of them were covered in part.")
    missing = sorted(set(f for f in os.listdir(os.path.join(HERE, "..", "tests")) if f.startswith("test_")
                         and f.endswith(".py")) - set(files))
    head = [
        "# Test coverage of the public API",
        "",
        "Generated by `scripts/gen_coverage_docs.py` from a recorded run of the test suite",
        "(`tests/coverage_plugin.py`, Note [Coverage evidence]); nothing here is written by hand. Regenerate:",
        "",
        "    DYNGRAD_COVERAGE=/tmp/coverage.json PYTHONPYCACHEPREFIX=/tmp/dyngrad-coverage-pyc PYTHONPATH=python \\",
        "        python -m pytest -q -p no:warnings -o enable_assertion_pass_hook=true tests/",
        "    PYTHONPATH=python python scripts/gen_coverage_docs.py /tmp/coverage.json",
        "",
        "One row per public name of `python/dyngrad/_api/table.py` (a method, its in-place form and the function",
        "of the same name are separate rows). Only tests that passed count. How each column is determined:",
        "",
        "- **numpy**: *yes* when a call of the name crosses the numpy bridge (`python/dyngrad/_api/bridge.py`,",
        "  Note [The numpy bridge]): it computes on the host with numpy (an op without a core kernel, index",
        "  arithmetic, a check that reads values, a conversion). From the table's `uses` column, which",
        "  `tests/test_numpy_bridge.py` keeps true by calling every row; these are the names a C++ kernel would serve.",
        "- **C++ engine / reference engine**: the number of passing tests that called the name on that engine",
        "  directly: from the test, a check helper's `fn`, or library code the test drives (a module, an",
        "  optimizer); a call a public composite makes inside itself does not count. Classes and values (dtypes,",
        "  `no_grad`, `finfo`, the legacy `FloatTensor` constructors) and `Tensor.__init__` are not traced.",
        "- **forward checked against**: the result of the name was found equal (close) to an independent answer:",
        "  *torch* (`helpers.check_torch`, or compared with a torch tensor), *numpy* (`helpers.check_op`'s numpy",
        "  oracle), *exact values* (`helpers.check_exact`), *values* (compared with a numpy array or literal in",
        "  `np.testing.assert_*`, `helpers.assert_close` or an `assert` that passed). *other engine* means the",
        "  two engines were compared with each other only; it is shown but does not count as a forward check.",
        "  Inside `check_op`/`check_torch`/`check_exact`, every name the checked `fn` calls counts (they",
        "  compose its result). Elsewhere a value is attributed to the name that produced it (through",
        "  `.numpy()`, `.detach()`, `.tolist()`...). Limits: a dyngrad value that went through numpy code (a",
        "  copy, arithmetic) loses its origin: compared, it is missed; as the expected side it counts as *values*",
        "  (independent), which is wrong only when a test compares an engine's result with a numpy copy of that",
        "  same engine's result. A plain assert credits every dyngrad value read in it (against *torch* if it",
        "  also reads a torch tensor, else *values*), so `assert a.tolist() == b.tolist()` credits both sides",
        "  even when b is the same engine's own result.",
        "- **backward checked by**: *finite differences* (`check_op`, float64), *gradcheck* / *gradgradcheck*",
        "  (`dyngrad.autograd`, `check_gradgrad`), *vs torch* / *vs values* / *exact values* (a gradient compared).",
        "  Limit: inside a check helper only the names the checked `fn` calls count; a gradient compared",
        "  elsewhere (`x.grad`, `autograd.grad`) counts for every name that built a graph earlier in the same",
        "  test, which can over-report for a name that was in the test but not on the path to that gradient.",
        "  *differentiable* = seen returning a non-leaf tensor that requires grad; **none** marks one with no",
        "  backward check.",
        "- *(cpp only)* / *(reference only)*: the check was seen on that engine only.",
        "",
        "## Summary",
        "",
        f"Recorded from {run['outcomes'].get('passed', 0)} passing tests ({run['outcomes'].get('not passed', 0)} "
        f"more were skipped or failed under the recording and give no evidence) of {len(files)} test files"
        + ". Test files not in the recording: " + (", ".join(f"`{f}`" for f in missing) or "none")
        + " (a test that runs dyngrad in a child process cannot be traced in any case)." + partial
        + (f" How this recording was made: {note}" if note else ""),
        "",
        f"- {count['total']} public names; {traced_n} traced (the {count['untraced']} classes, values and "
        "`Tensor.__init__` are not).",
        f"- crossing the numpy bridge: {sum(1 for name, _, _ in table if name in host)} names.",
        f"- exercised on both engines: {count['both']}; on one engine only: {count['one']}; never: "
        f"{len(unexercised)}.",
        f"- forward checked against an independent answer: {count['fwd_any']} ({count['fwd_both']} on both "
        f"engines); exercised but not forward checked: {len(gaps_fwd)}.",
        f"- seen differentiable: {count['diff']}; backward checked: {count['bwd_any']} names "
        f"({count['bwd_both']} on both engines); differentiable without a backward check: {len(gaps_bwd)}.",
        "",
        "| name | kind | numpy | C++ engine | reference engine | forward checked against | backward checked by |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    tail = ["", "## Gaps", "",
            f"Never exercised by a passing test ({len(unexercised)}): "
            + (", ".join(f"`{n}`" for n in unexercised) or "none") + ".", "",
            f"Exercised, no forward check ({len(gaps_fwd)}): " + (", ".join(gaps_fwd) or "none") + ".", "",
            f"Differentiable, no backward check ({len(gaps_bwd)}): " + (", ".join(gaps_bwd) or "none") + ".", ""]
    return "\n".join(head + lines + tail), count, unexercised, gaps_fwd, gaps_bwd


def main(argv=None):
    parser = argparse.ArgumentParser(
        description="Write docs/coverage.md from recordings of the test suite (tests/coverage_plugin.py).",
        epilog="Record with: DYNGRAD_COVERAGE=/tmp/coverage.json PYTHONPATH=python python -m pytest -q "
               "-p no:warnings -o enable_assertion_pass_hook=true tests/")
    parser.add_argument("recordings", nargs="+", metavar="RECORDING.json",
                        help="the JSON files the suite wrote; several (the suite run in parts) are merged")
    parser.add_argument("--note", default="",
                        help="how the recordings were made, said on the page, when not by the one command above")
    args = parser.parse_args(argv)
    sys.path.insert(0, os.path.join(HERE, "..", "python"))
    missing = [name for name in args.recordings if not os.path.exists(name)]
    if missing:
        parser.error(f"no such recording: {', '.join(missing)} (--help says how to record one)")
    text, count, never, fwd, bwd = render(load(args.recordings), args.note)
    path = os.path.join(HERE, "..", "docs", "coverage.md")
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)
    print(f"wrote {os.path.normpath(path)}: {count['total']} names, {count['fwd_any']} forward checked, "
          f"{count['bwd_any']} backward checked; gaps: {len(never)} never exercised, {len(fwd)} no forward check, "
          f"{len(bwd)} differentiable without a backward check")
    return 0


if __name__ == "__main__":
    sys.exit(main())
