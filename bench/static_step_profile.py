"""Where a static replay's time goes, per step kind (issue 20: the MLP training step's static/eager ratio).

    python bench/static_step_profile.py [--workload mlp|wide-sgd] [--calls 3000]

Runs a workload of bench/compile_modes.py under dyngrad.compile(mode="reduce-overhead") with the C++ loop's
profile on (Note [Profiling a replay] in csrc/bindings/capture_bind.cpp) and prints, per step kind (the _C
function and how the loop runs it: a core call, in the loop itself, a vectorcall, the planned backward), the mean
time per call, beside the whole call, the entry guard's in-place comparison and eager mode, measured in the same
run (CPU time of this thread, best of 5 blocks; inside the loop the mean, less the clock's own cost, so the loop and
the guard need not add up to the C++ call exactly). Threads of the pool are not counted: at 2 threads a kernel's
share on the other core is missing.
"""
import argparse
import collections

import _path  # noqa: F401

import dyngrad as dg
from dyngrad._api import compiling
from dyngrad.bench.engines import machine_line

import compile_modes


def best(fn, calls):
    fn()
    return compile_modes.best_of_blocks(fn, calls)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--calls", type=int, default=3000)
    p.add_argument("--threads", type=int, default=None, help="dg.set_num_threads (default: as it is)")
    args = p.parse_args()
    if args.threads:
        dg.set_num_threads(args.threads)
    step, inputs = compile_modes.mlp(dg)
    compiled = dg.compile(step, mode="reduce-overhead")
    for _ in range(5):
        compiled(*inputs)
    program = compiled._program
    variant = program.last_group[0]
    native = variant.native()
    print(machine_line(), f"threads {dg.get_num_threads()}")
    eager = best(lambda: step(*inputs), args.calls)
    whole = best(lambda: compiled(*inputs), args.calls)
    key = program.last_key

    def match():
        return compiling._key_matches(key, compiling._Tensor, inputs, {}, None, None, program.fn, program.owner)
    assert match() is not None
    guard = best(match, args.calls)
    fast = program.fast      # Note [A static call in one C++ call]: (call, variant, layout, output slot)
    assert fast is not None and fast[1] is variant
    call, _, layout, out = fast
    one_call = best(lambda: call(key, inputs, {}, program.fn, program.owner, layout, out), args.calls)
    native.set_profile(True)
    for _ in range(args.calls):
        compiled(*inputs)
    runs, rows, clock = native.profile()
    rows = [(name, how, max(0, ns - clock * runs)) for name, how, ns in rows]
    native.set_profile(False)
    kinds = collections.OrderedDict()
    for name, how, ns in rows:
        k = kinds.setdefault((name, how), [0, 0])
        k[0] += ns
        k[1] += 1
    loop = sum(ns for _, _, ns in rows) / runs
    print(f"MLP step b32 64-128-10: eager {eager * 1e6:.1f} us, static {whole * 1e6:.1f} us "
          f"({eager / whole:.2f}x eager) = the C++ call {one_call * 1e6:.1f} us (entry guard {guard * 1e6:.1f} us, "
          f"the loop {loop / 1e3:.1f} us) + Python around it {(whole - one_call) * 1e6:.1f} us")
    print(f"inside the loop ({len(variant.steps)} steps, {runs} profiled runs), per run:")
    print(f"{'step':<22} {'how':<18} {'steps':>5} {'us/run':>8} {'share':>7}")
    for (name, how), (ns, n) in sorted(kinds.items(), key=lambda kv: -kv[1][0]):
        print(f"{name:<22} {how:<18} {n:>5} {ns / runs / 1e3:>8.2f} {ns / runs / loop:>6.1%}")


if __name__ == "__main__":
    main()
