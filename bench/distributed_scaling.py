"""Data-parallel scaling over MPI: DistributedDataParallel training steps on 1, 2, ... ranks.

    python bench/distributed_scaling.py [--ranks 1,2] [--steps 200] [--batch 64] [--engine cpp]
    mpiexec -n 2 python bench/distributed_scaling.py --worker      # one rank count, rows printed by rank 0

Without --worker the script runs itself under `mpiexec -n K --worker` for each K of --ranks (default: 1, 2, ...
up to the number of cores) and prints one table. Weak scaling: each rank trains on --batch samples per step, so K
ranks process K times the samples of one. Per model and rank count:
  ms/step      wall time of one training step (zero_grad, forward, backward with the gradient all-reduce, SGD step),
               the slowest rank's, median over --steps steps after warm-up (all times below are such medians);
  samples/s    K * batch / (ms/step);
  efficiency   samples/s on K ranks / (K * samples/s on 1 rank);
  comm ms      the same all-reduces (the DDP buckets) run alone, blocking, with nothing else to do;
  wait ms      time backward spent after its last node waiting for the all-reduces (communication not hidden,
               plus waiting for a slower rank);
  wait, no ovl the same with every bucket started only after the last node (no overlap);
  hidden       (wait without overlap - wait with overlap) / comm ms: the share of the communication that ran
               behind the rest of backward (clamped to 0..100%; noisy on a loaded machine). n/a for a model whose
               gradients fit one bucket: it starts after the last gradient, so nothing can hide it.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

import _path  # noqa: F401

MODELS = {
    "mlp": "64-128-128-10 MLP (the bench's mlp-train), digits-shaped input",
    "cnn": "the digits CNN of examples/digits_cnn.py: 2 conv + pool, 128-64-10",
    "mlp-wide": "64-1024-1024-10 MLP, 1.1M parameters: several buckets, communication worth hiding",
}


def build(nn, name):
    if name == "mlp":
        return nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 128), nn.ReLU(), nn.Linear(128, 10))
    if name == "mlp-wide":
        return nn.Sequential(nn.Linear(64, 1024), nn.ReLU(), nn.Linear(1024, 1024), nn.ReLU(), nn.Linear(1024, 10))
    return nn.Sequential(
        nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(128, 64), nn.ReLU(), nn.Linear(64, 10))


def worker(args):
    import importlib
    dg = importlib.import_module("dyngrad" if args.engine == "cpp" else "dyngrad.reference")
    dist, nn = dg.distributed, dg.nn
    dist.init_process_group(backend="mpi")
    rank, world = dist.get_rank(), dist.get_world_size()
    rows = []

    def slowest(seconds):
        """Per step, the slowest rank's time (a step ends for everyone when the slowest one is done)."""
        t = dg.tensor(np.asarray(seconds, dtype=np.float64))
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        return t.numpy()

    for name in args.models.split(","):
        dg.manual_seed(rank)
        model = build(nn, name)
        ddp = nn.parallel.DistributedDataParallel(model, bucket_cap_mb=args.bucket_cap_mb)
        opt = dg.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
        loss_fn = nn.CrossEntropyLoss()
        rng = np.random.default_rng(rank)
        shape = (args.batch, 64) if name.startswith("mlp") else (args.batch, 1, 8, 8)
        x = dg.tensor(rng.standard_normal(shape).astype(np.float32))
        y = dg.tensor(rng.integers(0, 10, args.batch))

        steps = max(10, args.steps // 4) if name == "mlp-wide" else args.steps

        def step():
            opt.zero_grad()
            loss_fn(ddp(x), y).backward()
            opt.step()

        # overlap on and off in alternate steps, so that a load that drifts (a shared machine) hits both alike;
        # medians over steps of the slowest rank
        for _ in range(args.warmup):
            step()
        dist.barrier()
        times, waits = np.zeros((2, steps)), np.zeros((2, steps))
        for i in range(2 * steps):
            ddp.reducer.overlap = i % 2 == 0
            start = time.perf_counter()
            step()
            times[i % 2, i // 2] = time.perf_counter() - start
            waits[i % 2, i // 2] = ddp.reducer.last_wait_seconds
        times, waits = slowest(times), slowest(waits)
        step_s, wait_s, wait_no_overlap_s = np.median(times[0]), np.median(waits[0]), np.median(waits[1])
        # the same buckets all-reduced alone, blocking
        buffers = [dg.from_numpy(b.flat) for b in ddp.reducer.buckets]
        dist.barrier()
        comm = np.zeros(steps)
        for i in range(steps):
            start = time.perf_counter()
            for b in buffers:
                dist.all_reduce(b)
            comm[i] = time.perf_counter() - start
        comm_s = np.median(slowest(comm))
        rows.append({"model": name, "ranks": world, "batch": args.batch,
                     "params": sum(p.numel() for p in model.parameters()),
                     "buckets": len(ddp.reducer.buckets), "step_s": float(step_s), "comm_s": float(comm_s),
                     "wait_s": float(wait_s), "wait_no_overlap_s": float(wait_no_overlap_s)})
    if rank == 0:
        if args.json:
            with open(args.json, "w") as f:
                json.dump(rows, f)
        else:
            print_table(rows, {})
    dist.destroy_process_group()


def print_table(rows, base):
    header = ["model", "params", "buckets", "ranks", "batch/rank", "ms/step", "samples/s", "efficiency",
              "comm ms", "wait ms", "wait, no ovl", "hidden"]
    lines = []
    for r in rows:
        throughput = r["ranks"] * r["batch"] / r["step_s"]
        one = base.get(r["model"])
        eff = f"{throughput / (r['ranks'] * one):.0%}" if one else "-"
        multi = r["ranks"] > 1
        # one bucket starts after the last gradient: nothing can be hidden, the difference would be noise
        share = (r["wait_no_overlap_s"] - r["wait_s"]) / r["comm_s"] if multi and r["buckets"] > 1 else None
        ms = (lambda key: f"{r[key] * 1e3:.3g}" if multi else "-")
        lines.append([r["model"], f"{r['params']:,}", str(r["buckets"]), str(r["ranks"]), str(r["batch"]),
                      f"{r['step_s'] * 1e3:.3g}", f"{throughput:,.0f}", eff, ms("comm_s"), ms("wait_s"),
                      ms("wait_no_overlap_s"), f"{min(1.0, max(0.0, share)):.0%}" if share is not None else
                      ("n/a" if multi else "-")])
    widths = [max(len(h), *(len(line[i]) for line in lines)) for i, h in enumerate(header)]
    print("  ".join(h.ljust(w) for h, w in zip(header, widths)))
    print("  ".join("-" * w for w in widths))
    for line in lines:
        print("  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(line, widths))))


def driver(args):
    mpiexec = os.path.join(os.path.dirname(sys.executable), "mpiexec")
    if not os.path.exists(mpiexec):
        raise SystemExit(f"no mpiexec next to {sys.executable}: pip install 'dyngrad[distributed]'")
    counts = [int(k) for k in args.ranks.split(",")] if args.ranks else \
        [k for k in (1, 2, 4, 8, 16) if k <= (os.cpu_count() or 1)]
    rows = []
    for k in counts:
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "rows.json")
            cmd = [mpiexec, "-n", str(k), sys.executable, os.path.abspath(__file__), "--worker", "--json", out,
                   "--steps", str(args.steps), "--warmup", str(args.warmup), "--batch", str(args.batch),
                   "--engine", args.engine, "--models", args.models, "--bucket-cap-mb", str(args.bucket_cap_mb)]
            print(f"running: {' '.join(cmd[:3])} ... ({k} rank{'s' if k > 1 else ''})", file=sys.stderr, flush=True)
            subprocess.run(cmd, check=True)
            with open(out) as f:
                rows.extend(json.load(f))
    base = {r["model"]: r["batch"] / r["step_s"] for r in rows if r["ranks"] == 1}
    rows.sort(key=lambda r: (list(MODELS).index(r["model"]), r["ranks"]))
    print_table(rows, base)
    load = os.getloadavg() if hasattr(os, "getloadavg") else None
    print(f"\n{args.engine} engine, {args.steps} timed steps after {args.warmup} warm-up, bucket_cap_mb="
          f"{args.bucket_cap_mb}; {os.cpu_count()} cores" + (f", load average {load[0]:.1f}" if load else ""))
    for name in args.models.split(","):
        print(f"{name}: {MODELS[name]}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--worker", action="store_true", help="measure in this MPI job (run under mpiexec)")
    parser.add_argument("--ranks", default=None, help="rank counts to run, e.g. 1,2 (default: 1, 2, 4... <= cores)")
    parser.add_argument("--steps", type=int, default=200, help="timed steps (a quarter of them for mlp-wide)")
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--batch", type=int, default=64, help="samples per rank per step")
    parser.add_argument("--engine", choices=["cpp", "reference"], default="cpp")
    parser.add_argument("--models", default="mlp,cnn,mlp-wide")
    parser.add_argument("--bucket-cap-mb", type=float, default=25.0)
    parser.add_argument("--json", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    for name in args.models.split(","):
        if name not in MODELS:
            parser.error(f"--models: unknown model {name!r} (expected some of {', '.join(MODELS)})")
    (worker if args.worker else driver)(args)


if __name__ == "__main__":
    main()
