"""dyngrad's FFT (csrc/dyngrad/kernels/fft.cpp, Note [FFT plans]) against numpy.fft (pocketfft) and torch.fft, on
one thread (issue 22's targets: rfft/irfft of 2^20 float32 points and fft2 of 1024 x 1024 complex64 within 1.5x
of numpy's).

    python bench/fft.py [--repeats 15] [--threads 1] [--json out.json]

Every row times the same transform on the same values in each library, the libraries interleaved within each
repeat so that they see the same machine load; it prints the median CPU time per call (time.process_time: on one
thread the work itself, which a machine shared with other jobs disturbs much less than the wall clock) and the
ratios to numpy's and to torch's, then the same for the wall clock. dyngrad's rows call the layout-level kernels (_C._fft_r2c/_fft_c2r/_fft_c2c over complex numbers as a
trailing dim of 2, Note [FFT over the real layout]); the `dg.fft.irfft` row adds the public function's argument
handling and the conversion of its real input. The header prints the CPU and the load average: timings on a
shared machine are noisy, ratios within one run less so. The tests never time anything.
"""
import argparse
import json
import os
import statistics
import time

import numpy as np

import _path  # noqa: F401  (a source checkout after a dev build)
import dyngrad as dg
from dyngrad.bench.engines import machine_line


def _pairs(z):
    return np.ascontiguousarray(np.stack([z.real, z.imag], -1))


def cases(torch):
    """(row name, {library: a call}) for each transform."""
    rng = np.random.default_rng(0)
    n = 1 << 20
    x = rng.standard_normal(n).astype(np.float32)
    X = np.fft.rfft(x).astype(np.complex64)
    z = (rng.standard_normal((1024, 1024)) + 1j * rng.standard_normal((1024, 1024))).astype(np.complex64)
    odd = (rng.standard_normal((64, 4093)) + 1j * rng.standard_normal((64, 4093))).astype(np.complex64)
    xt, Xt, zt, oddt = dg.tensor(x), dg.tensor(_pairs(X)), dg.tensor(_pairs(z)), dg.tensor(_pairs(odd))
    Xr = dg.tensor(np.abs(X).astype(np.float32))          # a real half-spectrum, for the public irfft
    rows = [
        ("rfft 2^20 float32", {
            "dyngrad": lambda: dg._C._fft_r2c(xt, [0], True, "backward", True),
            "numpy": lambda: np.fft.rfft(x)}),
        ("irfft 2^20 float32", {
            "dyngrad": lambda: dg._C._fft_c2r(Xt, [0], False, "backward", n),
            "numpy": lambda: np.fft.irfft(X, n)}),
        ("dg.fft.irfft 2^20 (public, real input)", {
            "dyngrad": lambda: dg.fft.irfft(Xr, n),
            "numpy": lambda: np.fft.irfft(np.abs(X).astype(np.float32), n)}),
        ("fft2 1024x1024 complex64", {
            "dyngrad": lambda: dg._C._fft_c2c(zt, [0, 1], True, "backward"),
            "numpy": lambda: np.fft.fft2(z)}),
        ("fft 64 x 4093 (prime, Bluestein) complex64", {
            "dyngrad": lambda: dg._C._fft_c2c(oddt, [1], True, "backward"),
            "numpy": lambda: np.fft.fft(odd, axis=1)}),
    ]
    if torch is not None:
        tx, tX, tz, todd = (torch.from_numpy(a) for a in (x, X, z, odd))
        tXr = torch.from_numpy(np.abs(X).astype(np.float32))
        extra = [lambda: torch.fft.rfft(tx), lambda: torch.fft.irfft(tX, n), lambda: torch.fft.irfft(tXr, n),
                 lambda: torch.fft.fft2(tz), lambda: torch.fft.fft(todd, dim=1)]
        for (_, calls), call in zip(rows, extra):
            calls["torch"] = call
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--json", default="")
    opts = parser.parse_args()
    try:
        import torch
        torch.set_num_threads(opts.threads)
    except ImportError:
        torch = None
    dg.set_num_threads(opts.threads)
    print(f"{machine_line()}; {opts.threads} thread(s); numpy {np.__version__}"
          + (f", torch {torch.__version__}" if torch is not None else ""))
    results, rows = [], []
    for name, calls in cases(torch):
        for call in calls.values():                # warm up: plans, caches, first-touch of buffers
            call()
        cpu, wall = {lib: [] for lib in calls}, {lib: [] for lib in calls}
        for _ in range(opts.repeats):
            for lib, call in calls.items():
                c0, t0 = time.process_time(), time.perf_counter()
                call()
                wall[lib].append(time.perf_counter() - t0)
                cpu[lib].append(time.process_time() - c0)
        median = {lib: statistics.median(ts) * 1e3 for lib, ts in cpu.items()}
        median_wall = {lib: statistics.median(ts) * 1e3 for lib, ts in wall.items()}
        rows.append((name, median, median_wall))
        results.append({"name": name, "median_cpu_ms": median, "median_wall_ms": median_wall})
    for label, which in (("CPU time", 1), ("wall clock", 2)):
        print(f"{label}:")
        print(f"  {'transform':44} {'dyngrad ms':>10} {'numpy ms':>9} {'torch ms':>9} {'dg/numpy':>9} {'dg/torch':>9}")
        for row in rows:
            name, m = row[0], row[which]
            torch_ms = m.get("torch", float("nan"))
            print(f"  {name:44} {m['dyngrad']:10.2f} {m['numpy']:9.2f} {torch_ms:9.2f} "
                  f"{m['dyngrad'] / m['numpy']:9.2f} {m['dyngrad'] / torch_ms:9.2f}")
    print(f"load average after: {os.getloadavg()[0]:.2f}")
    if opts.json:
        with open(opts.json, "w") as f:
            json.dump({"machine": machine_line(), "threads": opts.threads, "load": os.getloadavg(),
                       "results": results}, f, indent=1)


if __name__ == "__main__":
    main()
