"""Runs the workloads: first a check that every engine computes the same numbers, then warm-up and timed repeats.

Timing is interleaved (round-robin over engines, one call each per round), so that a burst of load from another
process on this shared machine hits every engine alike; each engine's figure is the median of its calls.
"""
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


MODES = {
    "quick": Mode("quick", budget=0.05, reference_budget=0.05, min_repeats=1, max_repeats=3, warmup_limit=0.5),
    "default": Mode("default", budget=1.5, reference_budget=2.5, min_repeats=3, max_repeats=50, warmup_limit=2.0),
    "full": Mode("full", budget=5.0, reference_budget=10.0, min_repeats=5, max_repeats=200, warmup_limit=5.0),
}


def _error_text(exc):
    frames = traceback.extract_tb(exc.__traceback__)
    where = f" (at {frames[-1].filename.rsplit('/', 1)[-1]}:{frames[-1].lineno})" if frames else ""
    return f"{type(exc).__name__}: {exc}{where}"


def _timed(fn):
    gc.collect()   # garbage left by the previous call is not this call's cost
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


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


def measure(workload, modules, mode, checked, bar, reference_limit):
    """Times every engine that passed its check run: warm-up, then interleaved repeats. Returns {name: record}."""
    size = workload.sizes[mode.name]
    records, cases, repeats = {}, {}, {}
    for name, build in _builders(workload, modules):
        if "error" in checked[name]:
            records[name] = {"error": checked[name]["error"]}
            bar.update()
            continue
        bar.set_description(f"{workload.name}: prepare {name}")
        try:
            case = build(size)
        except Exception as exc:  # noqa: BLE001
            records[name] = {"error": _error_text(exc)}
            bar.update()
            continue
        # a per-unit estimate from the check run, scaled to this size
        estimate = checked[name]["seconds"] / checked[name]["units"] * case.units
        records[name] = {"units": case.units, "seconds": [], "estimate_s": estimate}
        if name == "reference" and estimate > reference_limit:
            records[name]["skipped"] = f"estimated {estimate:.0f} s per call (limit {reference_limit:.0f} s)"
            bar.update()
            continue
        if estimate < mode.warmup_limit:
            bar.set_description(f"{workload.name}: warm up {name}")
            try:
                estimate = _timed(case.run)
            except Exception as exc:  # noqa: BLE001
                records[name]["error"] = _error_text(exc)
                bar.update()
                continue
        budget = mode.reference_budget if name == "reference" else mode.budget
        lowest = 1 if name == "reference" else mode.min_repeats
        repeats[name] = max(lowest, min(mode.max_repeats, int(budget / max(estimate, 1e-9))))
        cases[name] = case

    for round_ in range(max(repeats.values(), default=0)):
        for name, case in cases.items():
            if round_ >= repeats[name] or "error" in records[name]:
                continue
            bar.set_description(f"{workload.name}: time {name}")
            try:
                records[name]["seconds"].append(_timed(case.run))
            except Exception as exc:  # noqa: BLE001
                records[name]["error"] = _error_text(exc)
            if round_ == repeats[name] - 1 or "error" in records[name]:
                bar.update()
    cases.clear()

    for record in records.values():
        if record.get("seconds") and "error" not in record:
            record["median_s"] = statistics.median(record["seconds"])
            record["per_unit_s"] = record["median_s"] / record["units"]
    return records


def run_workload(workload, modules, mode, bar, reference_limit=20.0):
    checked = check(workload, modules, bar)
    records = measure(workload, modules, mode, checked, bar, reference_limit)
    for name, record in records.items():
        if "agrees" in checked[name]:
            record["check_ok"], record["check"] = checked[name]["agrees"], checked[name]["diff"]
    base = records.get("dyngrad", {}).get("per_unit_s")
    ratios = {name: record["per_unit_s"] / base for name, record in records.items()
              if base and name != "dyngrad" and "per_unit_s" in record}
    return {"name": workload.name, "group": workload.group, "unit": workload.unit, "about": workload.about,
            "size": workload.sizes[mode.name], "runs": records, "ratios_vs_dyngrad": ratios}


def progress_steps(workloads, modules):
    """How many bar ticks a run makes: one per engine for the check and one per engine for the timing."""
    return sum(2 * len(_builders(w, modules)) for w in workloads)


def run_benchmark(workloads, modules, mode, bar, reference_limit=20.0):
    results = []
    for workload in workloads:
        results.append(run_workload(workload, modules, mode, bar, reference_limit))
    return results
