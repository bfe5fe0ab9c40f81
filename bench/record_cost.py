"""What recording a program costs (issue 20's target: at most 3x one eager call of it). For each workload of
bench/compile_modes.py: one warm eager call (best of blocks, thread CPU time), and the recording call of a freshly
compiled static program (best of several fresh programs, so the recorder's one-time set-up in the process is not
counted), and their ratio, in one run; the recording by the C++ recorder (Note [Recording in C++] in
csrc/bindings/capture_record.cpp) and by its definition, the Python recorder (capture.NATIVE_RECORDER off), and
the floor neither can go below while the fast paths defer to the ops' Python definitions: the program run with the
surface swapped and nothing recorded (Note [Fast paths while capturing]).

    python bench/record_cost.py [--repeats N] [--profile WORKLOAD] [--python-recorder]

--profile prints the cProfile of one workload's recordings (where the recording's time goes); with
--python-recorder, of the Python recorder's.
"""
import argparse
import cProfile
import pstats
import time

import _path  # noqa: F401

import dyngrad
from compile_modes import WORKLOADS, timed
from dyngrad._api import capture
from dyngrad.bench.engines import machine_line


def record_once(step, inputs):
    compiled = dyngrad.compile(step, mode="reduce-overhead")
    t0 = time.thread_time()
    compiled(*inputs)
    spent = time.thread_time() - t0
    assert compiled.compile_stats.recordings == 1
    return spent


def swapped_floor(step, inputs):
    """One call of the program with the recorder's surface in place but nothing recorded (its depth held above 0):
    the ops' Python definitions and the wrappers' pass-through, the swap in and out."""
    recorder = capture.Recorder(capture.Variant(len(inputs)))

    def call():
        with capture._Swap(recorder):
            recorder.depth = 1
            try:
                step(*inputs)
            finally:
                recorder.depth = 0
    return timed(call, 0.5)


def record_best(step, inputs, repeats, native):
    capture.NATIVE_RECORDER = native
    try:
        return min(record_once(step, inputs) for _ in range(repeats))
    finally:
        capture.NATIVE_RECORDER = True


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--repeats", type=int, default=7)
    p.add_argument("--profile", choices=list(WORKLOADS))
    p.add_argument("--python-recorder", action="store_true")
    args = p.parse_args()
    capture.NATIVE_RECORDER = not args.python_recorder
    print(machine_line())
    if args.profile:
        step, inputs = WORKLOADS[args.profile](dyngrad)
        record_once(step, inputs)
        prof = cProfile.Profile()
        prof.enable()
        for _ in range(args.repeats):
            record_once(step, inputs)
        prof.disable()
        pstats.Stats(prof).sort_stats("tottime").print_stats(25)
        return
    print("CPU time of this thread, best of blocks (record: best of --repeats fresh programs); ratios to eager")
    print(f"{'workload':<30} {'eager':>8} {'floor':>8} {'C++ rec':>8} {'Py rec':>8} {'floor/e':>8} {'C++/e':>7} "
          f"{'Py/e':>7} {'Py/C++':>7}")
    for name, build in WORKLOADS.items():
        step, inputs = build(dyngrad)
        eager = timed(lambda: step(*inputs), 0.5)
        floor = swapped_floor(step, inputs)
        native = record_best(step, inputs, args.repeats, True)
        python = record_best(step, inputs, args.repeats, False)
        print(f"{name[:30]:<30} {eager * 1e6:>6.0f}us {floor * 1e6:>6.0f}us {native * 1e6:>6.0f}us "
              f"{python * 1e6:>6.0f}us {floor / eager:>7.2f}x {native / eager:>6.2f}x {python / eager:>6.2f}x "
              f"{python / native:>6.2f}x", flush=True)


if __name__ == "__main__":
    main()
