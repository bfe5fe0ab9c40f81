"""Runs the workloads: first a check that every engine computes the same numbers, then warm-up and timed repeats.

Timing runs in rounds: each round times a block of calls per engine, engine after engine, so that a burst of load
from another process on this shared machine hits every engine alike. Between two engines it pauses briefly: thread
pools (OpenBLAS, OpenMP, PyTorch's) keep spinning for a while after a call, and one engine's spinning workers must not
take the cores from the next engine's calls. Each engine's figure is the median of its calls.
"""
import contextlib
import gc
import statistics
import time
import traceback
from dataclasses import dataclass

import numpy as np

from .engines import NUMPY


@dataclass
class Mode:
    name: str
    budget: float           # seconds of timed calls per engine and workload
    reference_budget: float  # the reference is slow: fewer repeats (its figures are per unit, so still comparable)
    min_repeats: int
    max_repeats: int
    warmup_limit: float     # calls estimated longer than this skip the warm-up call (the check already warmed up)
    rounds: int             # blocks of calls per engine (see the module's docstring)
    pause: float            # seconds of idleness before each block


MODES = {
    "quick": Mode("quick", budget=0.05, reference_budget=0.05, min_repeats=1, max_repeats=3, warmup_limit=0.5,
                  rounds=1, pause=0.0),
    "default": Mode("default", budget=1.5, reference_budget=2.5, min_repeats=3, max_repeats=50, warmup_limit=2.0,
                    rounds=3, pause=0.05),
    "full": Mode("full", budget=5.0, reference_budget=10.0, min_repeats=5, max_repeats=200, warmup_limit=5.0,
                 rounds=3, pause=0.1),
}


def _error_text(exc):
    frames = traceback.extract_tb(exc.__traceback__)
    where = f" (at {frames[-1].filename.rsplit('/', 1)[-1]}:{frames[-1].lineno})" if frames else ""
    return f"{type(exc).__name__}: {exc}{where}"


def _timed(fn):
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def _split(calls, rounds):
    """7 calls over 3 rounds -> [3, 2, 2]; fewer calls than rounds leaves the last rounds empty."""
    return [calls // rounds + (1 if r < calls % rounds else 0) for r in range(rounds)]


def _compare(values, expected, rtol, atol):
    """(ok, description) for two flat float64 arrays."""
    if values.shape != expected.shape:
        return False, f"{values.size} numbers instead of {expected.size}"
    if np.isnan(values).any() != np.isnan(expected).any():
        return False, "NaN where the other engine has a number (or a missing gradient)"
    diff = np.abs(values - expected)
    bad = diff > atol + rtol * np.abs(expected)
    if bad.any():
        i = int(np.argmax(diff - rtol * np.abs(expected)))
        return False, (f"{int(bad.sum())} of {values.size} numbers differ (worst: {values[i]:.6g} vs "
                       f"{expected[i]:.6g}; rtol={rtol}, atol={atol})")
    return True, f"max abs diff {float(diff.max()) if diff.size else 0.0:.2g}"


def _builders(workload, modules):
    """(name, build(size) -> Case) for every engine and, where the workload has one, numpy's by-hand version."""
    builders = [(name, (lambda size, dg=dg: workload.build(dg, size))) for name, dg in modules.items()]
    if workload.numpy is not None:
        builders.append((NUMPY, workload.numpy))
    return builders


def check(workload, modules, bar):
    """Runs every engine once on the small check size and compares the numbers with the C++ engine's."""
    size = workload.sizes["check"]
    outcome = {}
    for name, build in _builders(workload, modules):
        bar.set_description(f"{workload.name}: check {name}")
        try:
            case = build(size)
            seconds = _timed(case.run)
            outcome[name] = {"values": case.result(), "seconds": seconds, "units": case.units}
        except Exception as exc:  # noqa: BLE001  (one engine failing must not stop the others)
            outcome[name] = {"error": _error_text(exc)}
        bar.update()
    ok_names = [n for n in outcome if "error" not in outcome[n]]
    baseline = "dyngrad" if "dyngrad" in ok_names else (ok_names[0] if ok_names else None)
    for name in ok_names:
        if name == baseline:
            outcome[name]["agrees"], outcome[name]["diff"] = True, f"baseline of the check"
        else:
            outcome[name]["agrees"], outcome[name]["diff"] = _compare(
                outcome[name]["values"], outcome[baseline]["values"], workload.rtol, workload.atol)
    return outcome


def _budget(mode, name):
    return mode.reference_budget if name == "reference" else mode.budget


def _min_repeats(mode, name):
    return 1 if name == "reference" else mode.min_repeats


def _prepare(workload, name, build, size, mode, checked, bar, reference_limit):
    """Builds the timing-size case and warms it up; returns (record, case, repeats), case None when not to time."""
    bar.set_description(f"{workload.name}: prepare {name}")
    try:
        case = build(size)
    except Exception as exc:  # noqa: BLE001
        return {"error": _error_text(exc)}, None, 0
    # a per-unit estimate from the check run, scaled to this size (crude: the check size is small)
    estimate = checked[name]["seconds"] / checked[name]["units"] * case.units
    record = {"units": case.units, "seconds": [], "estimate_s": estimate}
    if name == "reference" and estimate > reference_limit:
        record["skipped"] = f"estimated {estimate:.0f} s per call (limit {reference_limit:.0f} s)"
        return record, None, 0
    if name != "reference" or estimate < mode.warmup_limit:   # the warm-up call also gives the real estimate
        bar.set_description(f"{workload.name}: warm up {name}")
        try:
            estimate = _timed(case.run)
        except Exception as exc:  # noqa: BLE001
            record["error"] = _error_text(exc)
            return record, None, 0
    repeats = int(_budget(mode, name) / max(estimate, 1e-9))
    return record, case, max(_min_repeats(mode, name), min(mode.max_repeats, repeats))


def _time_block(case, seconds, calls, limit, at_least):
    """Appends the time of up to `calls` calls; stops early once past `limit` seconds in all (a busy machine)."""
    for _ in range(calls):
        seconds.append(_timed(case.run))
        if len(seconds) >= at_least and sum(seconds) > limit:
            return True
    return False


def measure(workload, modules, mode, checked, bar, reference_limit):
    """Times every engine that passed its check run: warm-up, then rounds of blocks. Returns {name: record}."""
    size = workload.sizes[mode.name]
    records, cases, blocks = {}, {}, {}
    for name, build in _builders(workload, modules):
        if "error" in checked[name]:
            records[name] = {"error": checked[name]["error"]}
            continue
        records[name], case, repeats = _prepare(workload, name, build, size, mode, checked, bar, reference_limit)
        if case is not None:
            cases[name], blocks[name] = case, _split(repeats, mode.rounds)
    for name in records:
        if name not in cases:
            bar.update()

    for round_ in range(mode.rounds):
        for name, case in cases.items():
            calls = blocks[name][round_]
            if not calls:
                continue
            bar.set_description(f"{workload.name}: time {name}")
            gc.collect()   # another engine's garbage is not this engine's cost
            time.sleep(mode.pause)
            try:
                over = _time_block(case, records[name]["seconds"], calls, 2 * _budget(mode, name),
                                   _min_repeats(mode, name))
            except Exception as exc:  # noqa: BLE001
                records[name]["error"] = _error_text(exc)
                over = True
            if over:
                blocks[name] = [0] * mode.rounds
            if not any(blocks[name][round_ + 1:]):
                bar.update()
    cases.clear()

    for record in records.values():
        if record.get("seconds") and "error" not in record:
            record["median_s"] = statistics.median(record["seconds"])
            record["per_unit_s"] = record["median_s"] / record["units"]
    return records


@contextlib.contextmanager
def engine_threads(modules, threads):
    """Every engine (torch included) at `threads` threads for the duration; None leaves them as they are."""
    if threads is None:
        yield
        return
    before = {name: dg.get_num_threads() for name, dg in modules.items()}
    try:
        for dg in modules.values():
            dg.set_num_threads(threads)
        yield
    finally:
        for name, dg in modules.items():
            dg.set_num_threads(before[name])


def run_workload(workload, modules, mode, bar, reference_limit=20.0):
    start = time.perf_counter()
    with engine_threads(modules, workload.threads):
        checked = check(workload, modules, bar)
        records = measure(workload, modules, mode, checked, bar, reference_limit)
    for name, record in records.items():
        if "agrees" in checked[name]:
            record["check_ok"], record["check"] = checked[name]["agrees"], checked[name]["diff"]
    base = records.get("dyngrad", {}).get("per_unit_s")
    ratios = {name: record["per_unit_s"] / base for name, record in records.items()
              if base and name != "dyngrad" and "per_unit_s" in record}
    # a ratio resting on one timed call on either side is an anecdote (warm-up, a page fault, another process):
    # the table and the chart mark it rather than show it as a measurement
    single = [name for name in ratios if len(records[name]["seconds"]) == 1 or len(records["dyngrad"]["seconds"]) == 1]
    return {"name": workload.name, "group": workload.group, "unit": workload.unit, "about": workload.about,
            "size": workload.sizes[mode.name], "threads": workload.threads, "runs": records, "ratios_vs_dyngrad": ratios,
            "single_call_ratios": single, "wall_s": time.perf_counter() - start}


def progress_steps(workloads, modules):
    """How many bar ticks a run makes: one per engine for the check and one per engine for the timing."""
    return sum(2 * len(_builders(w, modules)) for w in workloads)


def run_benchmark(workloads, modules, mode, bar, reference_limit=20.0):
    results = []
    for workload in workloads:
        results.append(run_workload(workload, modules, mode, bar, reference_limit))
    return results
