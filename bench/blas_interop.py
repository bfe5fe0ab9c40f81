"""Do dyngrad's and numpy's matrix products slow each other down in one process? (issue 11, Note [One BLAS] in
csrc/dyngrad/kernels/matmul.cpp)

For each BLAS configuration, one child process measures, at 1 and 2 threads (and at 2 dyngrad threads with a
single-threaded BLAS), float32 products of 128 x 128 and
512 x 512 matrices:
  numpy alone, dyngrad alone, numpy right after a dyngrad product, dyngrad right after a numpy product
and prints the interleaved/alone ratios of the median and of the 90th percentile (the tail, where fighting thread
pools show). Configurations (DYNGRAD_BLAS):
  numpy             dyngrad multiplies with numpy's own OpenBLAS: one library, one pool of BLAS threads
  scipy-openblas32  dyngrad loads a second OpenBLAS next to numpy's (the setup before issue 11): two pools

    python bench/blas_interop.py [--configs numpy,scipy-openblas32] [--repeats 1.0] [--json out.json]

"thr" is dg.set_num_threads(n), "blas" the thread count of numpy's OpenBLAS (dg.set_num_threads sets it to n when
the library is shared; the bench sets it either way). Timings depend on the machine and its load: the header prints nproc and the load average,
and the two configurations run one after the other in the same invocation so they see similar load. The tests
never time anything (tests/test_blas_interop.py checks the configuration itself).

Measured (2026-12-03 19:30 UTC, Intel Xeon family 6 model 167, 2 cores, KVM, load 8.6-9.7 from other jobs; three
runs of DYNGRAD_BLAS=numpy, one of scipy-openblas32): at 1 thread every median ratio of the shared library was
0.98-1.04 for 128 and 512 except one dyngrad-after-numpy 512 row at 1.25 (0.89 and 1.04 in the other runs), and the
p90 ratios 1.00-1.02. The 2-thread rows could not be measured at that load: numpy's 2-thread OpenBLAS product of
512 x 512 alone took 1.4 ms in one run and 40-62 ms in the two others (its threads waiting for a preempted
partner), so their ratios (0.37-39) follow the load, not the order of the calls.
"""
import argparse
import ctypes
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SIZES = (128, 512)
# (dyngrad's kernel threads, BLAS threads): dg.set_num_threads(n) gives (n, n); (2, 1) then sets the BLAS back to
# one thread, so that no BLAS worker ever runs (numpy's products single-threaded, dyngrad's split by its own pool)
THREADS = ((1, 1), (2, 2), (2, 1))


def _openblas_libraries():
    """Paths of the OpenBLAS copies mapped into this process."""
    paths = []
    with open("/proc/self/maps") as maps:
        for line in maps:
            fields = line.split(None, 5)
            if len(fields) == 6 and "openblas" in os.path.basename(fields[5]).lower():
                path = fields[5].strip()
                if path not in paths:
                    paths.append(path)
    return paths


def _numpy_set_threads():
    """openblas_set_num_threads of numpy's own OpenBLAS (numpy >= 2 wheels), or None."""
    import numpy
    root = os.path.dirname(os.path.dirname(os.path.abspath(numpy.__file__)))
    for path in _openblas_libraries():
        if path.startswith(os.path.join(root, "numpy")):
            lib = ctypes.CDLL(path)
            for name in ("scipy_openblas_set_num_threads64_", "openblas_set_num_threads64_",
                         "openblas_set_num_threads"):
                if hasattr(lib, name):
                    return getattr(lib, name)
    return None


def _times(step, repeats, before=None):
    """Seconds of each of `repeats` calls of step (after `before`, untimed, when given)."""
    out = []
    for _ in range(repeats):
        if before is not None:
            before()
        t0 = time.perf_counter()
        step()
        out.append(time.perf_counter() - t0)
    return out


def _summary(ts):
    ts = sorted(ts)
    return {"median_ms": statistics.median(ts) * 1e3, "p90_ms": ts[int(0.9 * (len(ts) - 1))] * 1e3}


def child(repeats_scale):
    """Runs in the child process: measures one configuration, prints one JSON line."""
    import numpy as np

    sys.path.insert(0, HERE)
    import _path  # noqa: F401
    import dyngrad as dg

    set_np_threads = _numpy_set_threads()
    blas = getattr(sys.modules.get("dyngrad._cpp_blas"), "info", None)
    rng = np.random.default_rng(0)
    rows = []
    for threads, blas_threads in THREADS:
        dg.set_num_threads(threads)
        if set_np_threads is not None:
            set_np_threads(blas_threads)
        for n in SIZES:
            a = rng.standard_normal((n, n), dtype=np.float32)
            b = rng.standard_normal((n, n), dtype=np.float32)
            da, db = dg.from_numpy(a), dg.from_numpy(b)
            np_mm = (lambda: a @ b)
            dg_mm = (lambda: da @ db)
            repeats = max(5, int((300 if n <= 128 else 40) * repeats_scale))
            _times(np_mm, 5), _times(dg_mm, 5)  # warm-up: pools started, buffers allocated
            row = {"threads": threads, "blas_threads": blas_threads, "n": n, "repeats": repeats,
                   "numpy": _summary(_times(np_mm, repeats)),
                   "dyngrad": _summary(_times(dg_mm, repeats)),
                   "numpy_after_dyngrad": _summary(_times(np_mm, repeats, before=dg_mm)),
                   "dyngrad_after_numpy": _summary(_times(dg_mm, repeats, before=np_mm))}
            rows.append(row)
    with open("/proc/self/status") as f:
        os_threads = next(int(line.split()[1]) for line in f if line.startswith("Threads:"))
    print(json.dumps({"blas": blas, "openblas_libraries": _openblas_libraries(), "os_threads": os_threads,
                      "rows": rows}))


def _ratio(row, mixed, alone, key):
    return row[mixed][key] / row[alone][key]


def report(config, result):
    libs = result["openblas_libraries"]
    print(f"\n== DYNGRAD_BLAS={config}: {len(libs)} OpenBLAS librar{'y' if len(libs) == 1 else 'ies'} mapped "
          f"({', '.join(os.path.basename(p) for p in libs)}), {result['os_threads']} OS threads at the end")
    if result["blas"]:
        print(f"   dyngrad's BLAS: {result['blas'].get('source')} {result['blas'].get('path')}")
    print("   thr blas    n | numpy ms      dyngrad ms    | numpy after dyngrad          | dyngrad after numpy")
    print("                 | med    p90    med    p90    | med    p90    ratio med  p90 | med    p90    ratio med  p90")
    for r in result["rows"]:
        cells = [r["numpy"]["median_ms"], r["numpy"]["p90_ms"], r["dyngrad"]["median_ms"], r["dyngrad"]["p90_ms"]]
        nd, dn = r["numpy_after_dyngrad"], r["dyngrad_after_numpy"]
        print(f"   {r['threads']:3d} {r['blas_threads']:4d} {r['n']:4d} | " + " ".join(f"{c:6.2f}" for c in cells) +
              f" | {nd['median_ms']:6.2f} {nd['p90_ms']:6.2f}"
              f" {_ratio(r, 'numpy_after_dyngrad', 'numpy', 'median_ms'):9.2f}"
              f" {_ratio(r, 'numpy_after_dyngrad', 'numpy', 'p90_ms'):4.2f}"
              f" | {dn['median_ms']:6.2f} {dn['p90_ms']:6.2f}"
              f" {_ratio(r, 'dyngrad_after_numpy', 'dyngrad', 'median_ms'):9.2f}"
              f" {_ratio(r, 'dyngrad_after_numpy', 'dyngrad', 'p90_ms'):4.2f}")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--configs", default="numpy,scipy-openblas32", help="DYNGRAD_BLAS values, comma-separated")
    p.add_argument("--repeats", type=float, default=1.0, help="scale the number of timed calls")
    p.add_argument("--json", help="write all results to this file")
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        child(args.repeats)
        return 0
    print(f"blas_interop: nproc {os.cpu_count()}, load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}, "
          f"float32 products, times per call in ms, ratio = interleaved / alone (1.0: no slow-down)")
    results = {}
    for config in [c.strip() for c in args.configs.split(",") if c.strip()]:
        env = dict(os.environ, DYNGRAD_BLAS=config)
        out = subprocess.run([sys.executable, os.path.abspath(__file__), "--child", "--repeats", str(args.repeats)],
                             env=env, capture_output=True, text=True)
        if out.returncode != 0:
            print(f"\n== DYNGRAD_BLAS={config}: failed\n{out.stderr[-2000:]}")
            continue
        results[config] = json.loads(out.stdout.strip().splitlines()[-1])
        report(config, results[config])
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
