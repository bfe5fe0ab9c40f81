"""`python -m dyngrad.bench`: the command line."""
import argparse
import os
import sys

from . import report, workloads
from .engines import engine_names, load_engines, machine_info
from .progress import progress_bar
from .runner import MODES, progress_steps, run_benchmark


def parse_args(argv):
    p = argparse.ArgumentParser(
        prog="python -m dyngrad.bench",
        description="Times the same workloads on the C++ engine, the pure-Python reference engine and PyTorch "
                    "(when installed), in one process, after checking that they compute the same numbers.")
    size = p.add_mutually_exclusive_group()
    size.add_argument("--quick", action="store_true", help="tiny sizes, a few calls each: a smoke run of seconds")
    size.add_argument("--full", action="store_true", help="larger sizes and more repeats")
    p.add_argument("--only", metavar="NAME[,NAME]", help="workloads or groups to run (see --list)")
    p.add_argument("--engines", default="cpp,reference,torch", metavar="E[,E]",
                   help="engines to compare, among cpp, reference, torch (default: all three)")
    p.add_argument("--json", default=os.path.join("bench_results", "latest.json"), metavar="PATH",
                   help="where to write the results (default: %(default)s); '' for none")
    p.add_argument("--png", default=None, metavar="PATH",
                   help="bar chart path (default: the JSON path with .png); '' for none")
    p.add_argument("--reference-limit", type=float, default=20.0, metavar="SECONDS",
                   help="skip the reference engine on a workload whose one call would take longer (default 20)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument("--list", action="store_true", help="list the workloads and exit")
    return p.parse_args(argv)


def _list():
    """The workloads as a table whose columns are as wide as their longest entry (names grow: a fixed width
    misaligned the rows of transformer-train-1t)."""
    rows = [("workload", "group", "unit", "what it measures")]
    rows += [(w.name, w.group, w.unit, w.about) for w in workloads.WORKLOADS]
    widths = [max(len(row[column]) for row in rows) for column in range(3)]
    for row in rows:
        print("  ".join(cell.ljust(width) for cell, width in zip(row, widths)) + "  " + row[3])


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    if args.list:
        _list()
        return 0
    try:
        chosen = workloads.select([n.strip() for n in args.only.split(",")] if args.only else None)
        names = engine_names(args.engines)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    modules, missing = load_engines(names)
    for name, why in missing.items():
        print(f"note: {name} {why}; it is left out.", file=sys.stderr)
    if not modules:
        print("error: no engine to run.", file=sys.stderr)
        return 2
    mode = MODES["quick" if args.quick else "full" if args.full else "default"]

    info = machine_info(modules)
    info["mode"] = mode.name
    info["engines_missing"] = missing
    # a static row's torch column is torch.compile with this (workloads._compiled), else torch eager
    info["torch_compile"] = os.environ.get("DYNGRAD_BENCH_TORCH_COMPILE") == "1"
    if any(w.group == "mlp-train" for w in chosen):
        info["digits"] = workloads.digits_source()

    bar = progress_bar(progress_steps(chosen, modules), enabled=not args.no_progress)
    try:
        results = run_benchmark(chosen, modules, mode, bar, reference_limit=args.reference_limit)
    finally:
        bar.close()

    print(report.table(results, list(modules), info))
    if "pytorch" in missing:
        print("hint: PyTorch is not installed, so there is no PyTorch column (pip install torch==2.13.0 adds it)")
    if args.json:
        report.write_json(args.json, results, info)
        print(f"\nresults: {args.json}")
    png = args.png if args.png is not None else (os.path.splitext(args.json)[0] + ".png" if args.json else "")
    if png:
        if report.write_png(png, results, info):
            print(f"chart:   {png}")
        else:
            print("chart:   not drawn (matplotlib is not installed: pip install 'dyngrad[bench]')")

    failed = [f"{r['name']} ({name})" for r in results for name, rec in r["runs"].items()
              if "error" in rec or rec.get("check_ok") is False]
    if failed:
        print(f"\nFAILED: errors or mismatching results in {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0
