"""Where a static replay's time goes, per step: the kernel-bound training steps of `python -m dyngrad.bench` (CNN,
LSTM, transformer block, wide MLP, section 9 of dyngrad/bench/workloads.py) and bench/compile_modes.py's transformer
block (nn.TransformerEncoderLayer), replayed under dyngrad.compile(mode="reduce-overhead").

    python bench/static_profile.py [--only transformer-train,block,...] [--steps 30] [--threads 1] [--top 25]

Three figures per workload, in the calling thread's CPU time (time.thread_time; at 1 thread every kernel runs on
it), averaged over --steps replays:
- the whole replayed call;
- the planned backward, per node kind (_C._plan_profile: each plan entry's formula, the sums of its gradients and a
  leaf's accumulation; Note [The backward as a recorded program] in csrc/bindings/replay_backward.cpp);
- the forward, per step: the recorded steps before the backward, run again from Python with grad mode off (as the
  planned replay runs them), on arguments of the recorded shapes, each as recorded (the C++ loop's fused groups,
  Note [Fused steps], do not apply there). Python's call of each step adds ~1 us to it.
The rest of the call (the optimiser's steps after the backward, the entry guard, the loop) is the difference.
Timings on a shared machine: read the shares, and the machine line printed with them.
"""
import argparse
import collections
import time

import _path  # noqa: F401

import dyngrad
from dyngrad import _C
from dyngrad._api import capture
from dyngrad.bench import workloads as W
from dyngrad.bench.engines import machine_line

_SIZES = {"cnn-train": {"batch": 64, "steps": 1, "lr": 0.05},
          "lstm-train": {"batch": 32, "seq": 50, "hidden": 128, "steps": 1, "lr": 0.05},
          "transformer-train": {"batch": 16, "seq": 64, "steps": 1, "lr": 0.05},
          "wide-mlp-train": {"batch": 512, "width": 1024, "steps": 1, "lr": 0.05}}


def build(name):
    """(run, compiled step, its argument tensors): one static replay per run()."""
    if name == "block":
        import compile_modes
        step, inputs = compile_modes.transformer(dyngrad)
        compiled = dyngrad.compile(step, mode="reduce-overhead")
        return (lambda: compiled(*inputs)), compiled, list(inputs)
    params, batches, loss_fn = getattr(W, W._KERNEL_PARTS[name])(dyngrad, _SIZES[name])
    lr = _SIZES[name]["lr"]

    def train_step(*batch):
        loss = loss_fn(*batch)
        loss.backward()
        W._sgd_step(dyngrad, params, lr)
        return loss.detach()
    compiled = dyngrad.compile(train_step, mode="reduce-overhead")
    return (lambda: compiled(*batches[0])), compiled, list(batches[0])


def forward_times(variant, inputs, steps):
    """{(index, name): seconds per replay} of the steps before the backward, run from Python with grad mode off."""
    back = next(i for i, s in enumerate(variant.steps) if s.name == "_run_backward")
    times = collections.defaultdict(float)
    with dyngrad.no_grad():
        for _ in range(steps):
            slots = variant.fresh_slots(inputs)
            for i, s in enumerate(variant.steps[:back]):
                t0 = time.thread_time()
                r = s.run(slots)
                times[(i, s.name)] += time.thread_time() - t0
                if s.result[0] == "t":
                    slots[s.result[1]] = r
                elif s.result[0] == "seq":
                    for (_, j), x in zip(s.result[2], r):
                        slots[j] = x
    return {k: v / steps for k, v in times.items()}


def profile(name, steps, top):
    run, compiled, inputs = build(name)
    for _ in range(3):
        run()
    variants = [v for group in compiled._program.groups.values() for v in group]
    variant = max(variants, key=lambda v: v.replays)
    planned = variant.plan_reason
    t0 = time.thread_time()
    for _ in range(steps):
        run()
    total = (time.thread_time() - t0) / steps
    _C._plan_profile(True)
    try:
        for _ in range(steps):
            run()
    finally:
        backward = _C._plan_profile(False)
    forward = forward_times(variant, inputs, steps)
    fwd = sum(forward.values())
    bwd = sum(s for s, _ in backward.values()) / steps
    print(f"{name}: {total * 1e3:.2f} ms per call (backward plan: {'yes' if planned is None else planned}); "
          f"{machine_line()}")
    print(f"  forward steps {fwd * 1e3:6.2f} ms ({fwd / total:5.1%})   planned backward {bwd * 1e3:6.2f} ms "
          f"({bwd / total:5.1%})   the rest {(total - fwd - bwd) * 1e3:6.2f} ms ({(total - fwd - bwd) / total:5.1%})")
    by_kind = collections.defaultdict(lambda: [0.0, 0])
    for (_, op), t in forward.items():
        by_kind[op][0] += t
        by_kind[op][1] += 1
    rows = [(f"fwd {op}", t, n) for op, (t, n) in by_kind.items()]
    rows += [(f"bwd {node}", s / steps, n // steps) for node, (s, n) in backward.items()]
    for label, t, n in sorted(rows, key=lambda r: -r[1])[:top]:
        print(f"    {label:<40} {t * 1e3:7.3f} ms  {t / total:6.1%}  x{n}")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--only", default="transformer-train,block")
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--top", type=int, default=25)
    args = p.parse_args()
    dyngrad.set_num_threads(args.threads)
    print(machine_line())
    for name in args.only.split(","):
        profile(name, args.steps, args.top)


if __name__ == "__main__":
    main()
