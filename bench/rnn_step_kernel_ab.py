"""The recurrent step products of rnn_layer on the own AVX-512 kernel against rnn.cpp's tile loop (issue 26, Note
[Recurrent products on the own kernel] in csrc/dyngrad/kernels/rnn.cpp): nn.LSTM(64, 128) and nn.GRU(64, 128) over
50 steps of a batch of 32, forward without grad and forward + backward, at 1 and 2 threads, with torch in the
same run. The variants run in child processes taking turns (A B C A B C ...), best of --repeat calls per turn,
the median over --rounds turns, of wall and of CPU time:

    new      this checkout's build (the own kernel where the CPU has AVX-512F)
    fallback this build with DYNGRAD_GEMM=blas (the tile loop for the steps, the BLAS for the other products)
    before   --before DIR: another build's python/ directory (e.g. a copy of the package before the change)

    python bench/rnn_step_kernel_ab.py [--before /tmp/rnn_before] [--rounds 5] [--repeat 15]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
CASES = ["lstm fwd", "lstm fwd+bwd", "gru fwd", "gru fwd+bwd"]


def child(lib_name, repeat):
    import numpy as np
    if lib_name == "torch":
        import torch as lib
    else:
        import dyngrad as lib
    res = {}
    for threads in (1, 2):
        lib.set_num_threads(threads)
        rng = np.random.default_rng(0)
        xx = lib.tensor(rng.normal(size=(32, 50, 64)).astype(np.float32))
        for kind in ("LSTM", "GRU"):
            layer = getattr(lib.nn, kind)(64, 128, batch_first=True)

            def fwd():
                with lib.no_grad():
                    layer(xx)

            def step():
                out, _ = layer(xx)
                out[:, -1].sum().backward()

            for name, fn in ((f"{kind.lower()} fwd", fwd), (f"{kind.lower()} fwd+bwd", step)):
                fn()
                times, cpu = [], []
                for _ in range(repeat):
                    t0, c0 = time.perf_counter(), time.process_time()
                    fn()
                    times.append(time.perf_counter() - t0)
                    cpu.append(time.process_time() - c0)
                res[f"{name} @{threads}"] = 1e3 * min(times)
                res[f"{name} @{threads} cpu"] = 1e3 * min(cpu)
    if lib_name != "torch":
        from dyngrad import _C
        res["kernel"] = _C._gemm_kernel()
    print(json.dumps(res))


def run(variant, env_extra, pythonpath, lib_name, repeat):
    env = dict(os.environ, **env_extra)
    env["PYTHONPATH"] = pythonpath
    out = subprocess.run([sys.executable, os.path.abspath(__file__), "--child", lib_name, "--repeat", str(repeat)],
                         env=env, capture_output=True, text=True, check=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", help="python/ directory of the build before the change")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        return child(args.child, args.repeat)
    sys.path.insert(0, os.path.join(HERE, os.pardir, "python"))
    from dyngrad.bench.engines import machine_line
    ours = os.path.join(HERE, os.pardir, "python")
    variants = {"new": ({}, ours, "dyngrad"), "fallback": ({"DYNGRAD_GEMM": "blas"}, ours, "dyngrad")}
    if args.before:
        variants["before"] = ({}, args.before, "dyngrad")
    try:
        import torch  # noqa: F401
        variants["torch"] = ({}, ours, "torch")
    except ImportError:
        pass
    print(machine_line())
    got = {v: [] for v in variants}
    for _ in range(args.rounds):
        for v, (env, path, lib) in variants.items():
            got[v].append(run(v, env, path, lib, args.repeat))
    for v in variants:
        if "kernel" in got[v][0]:
            print(f"  {v}: gemm kernel {got[v][0]['kernel']}")
    med = {v: {k: statistics.median(r[k] for r in got[v]) for k in got[v][0] if k != "kernel"} for v in variants}
    names = list(variants)
    head = "".join(f"{v:>10s}" for v in names)
    ratios = [("before/new", "before", "new"), ("fallb/new", "fallback", "new"), ("torch/new", "torch", "new")]
    ratios = [r for r in ratios if r[1] in variants]
    print(f"\nms, median over {args.rounds} turns of best of {args.repeat}   {head}" +
          "".join(f"{r[0]:>12s}" for r in ratios))
    for threads, suffix in ((1, ""), (2, ""), (1, " cpu"), (2, " cpu")):
        if suffix and threads == 1:
            print("CPU time (process_time, all threads: less disturbed by a loaded machine than wall time)")
        for case in CASES:
            key = f"{case} @{threads}{suffix}"
            line = f"  {key:44s}" + "".join(f"{med[v][key]:10.3f}" for v in names)
            line += "".join(f"{med[a][key] / med[b][key]:11.2f}x" for _, a, b in ratios)
            print(line)
    print("\n(> 1x: the new build faster)\n" + machine_line())


if __name__ == "__main__":
    main()
