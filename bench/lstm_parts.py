"""Where an nn.LSTM training step's time goes, dyngrad against PyTorch in one process (issue 26): the layer's
forward without grad, forward + backward, and the 50 step products 32x128 @ 128x512 of its recurrence as plain
matmuls (dyngrad's layer does them with its weight packed once per layer call, Notes [Recurrent products without
repacking] and [Recurrent products on the own kernel] in csrc/dyngrad/kernels/rnn.cpp; torch calls MKL). Also max_pool2d 2x2 of LeNet's first map. Best of --repeat timed
calls after a warm-up, wall and CPU time, at 1 and 2 threads; ratios are torch / dyngrad (> 1: dyngrad faster).

    python bench/lstm_parts.py [--repeat 30] [--phases]

--phases: instead, the bench's lstm-train step (python/dyngrad/bench/workloads.py's _lstm: forward with the head and
the loss, backward, the SGD step) and the word-lstm-train step's parts (embedding 10000 x 200, the 2-layer LSTM 200 over
35 x 20, the decoder 200 -> 10000, cross entropy over 700 x 10000 rows, clip_grad_norm_ + SGD), each forward +
backward, dyngrad and torch taking turns call by call; best CPU ms at 1 thread, best wall at 2.

Measured (issue 26, Xeon family 6 model 167, 2 cores, KVM, 2026-12-03 19:20-19:35 UTC, load 7-9 from other sessions;
torch / dyngrad, > 1: dyngrad faster):
- lstm-train step at 1 thread, two runs: forward 1.10 / 1.19 (3.5-3.8 ms), backward 1.16 / 1.25 (6.0 ms), SGD 1.20
  (0.12 ms); the step 1.13 / 1.23. In dyngrad's step (perf, 1 thread): the step products on the own kernel ~33%,
  OpenBLAS ~30% (x W_ih^T forward, dW_ih and dW_hh, each one product over all 50 steps already: rnn_layer takes
  gi = x W_ih^T made by one linear, and its backward makes dW_hh as one product; dW_ih is linear's one product of
  dgates^T x), the fused cell loops ~18% (forward and backward about equal), memset/memmove of the zero-filled output
  gradients (out[:, -1] and the (2, L, N, H) layer output's c half) ~4-5%, Python ~2%.
- Tried and not kept (A/B in one process, an environment switch read per call, 300 alternating calls each, the
  layer's forward 32 x 50 x 64 -> 128): the forward cell in AVX-512 intrinsics with rcp14 + a Newton step instead of
  the five divisions (best 2.09 -> 2.08-2.29 ms, median 2.37-2.42 -> 2.44-2.52: no gain; the cell is not bound by
  vdivps), and a software prefetch of the next step's gi rows before each step product (best 1.92-2.06 -> 2.03, no
  gain). One product for dW_ih and dW_hh ((512 x 1600) @ (1600 x 192) against 128 and 64 columns apart, the proposal
  of issue 26's lstm note): 2.25 ms against 1.53 + 0.86 = 2.39 (torch's MKL 1.29 + 0.71): ~0.14 ms of a ~8.3 ms quiet
  step, before the cost of building the [x | h_prev] operand; not done (it needs rnn_layer to take x and W_ih).
- word-lstm-train parts at 1 thread: embedding 0.90, LSTM 1.12, decoder 0.88 (80 ms against 71: the three
  700 x 200 x 10000 products, matmul.cpp's), cross entropy 1.64, clip + SGD 0.65 (9.7 ms against 6.3).
"""
import argparse
import time

import numpy as np

import _path  # noqa: F401
import dyngrad as dg
from dyngrad.bench.engines import machine_line


def best(fn, repeat):
    fn()
    wall, cpu = [], []
    for _ in range(repeat):
        w0, c0 = time.perf_counter(), time.process_time()
        fn()
        wall.append(time.perf_counter() - w0)
        cpu.append(time.process_time() - c0)
    return 1e3 * min(wall), 1e3 * min(cpu)


def cases(lib, rng):
    x = rng.normal(size=(32, 50, 64)).astype(np.float32)
    lstm = lib.nn.LSTM(64, 128, batch_first=True)
    xx = lib.tensor(x)

    def forward():
        with lib.no_grad():
            lstm(xx)

    def step():
        out, _ = lstm(xx)
        out[:, -1].sum().backward()

    a = lib.tensor(rng.normal(size=(32, 128)).astype(np.float32))
    b = lib.tensor(rng.normal(size=(128, 512)).astype(np.float32))
    img = lib.tensor(rng.normal(size=(64, 6, 28, 28)).astype(np.float32))
    return {"lstm forward (no grad)": forward, "lstm forward + backward": step,
            "50 x (32x128 @ 128x512)": lambda: [a @ b for _ in range(50)],
            "max_pool2d 2x2 (64,6,28,28)": lambda: lib.nn.functional.max_pool2d(img, 2)}


def step_phases(lib, rng):
    """The lstm-train step of the bench in three calls: forward (with the head and the loss), backward, SGD."""
    from dyngrad.bench import workloads
    size = {"batch": 32, "seq": 50, "hidden": 128, "steps": 1, "lr": 0.05}
    params, batches, loss_fn = workloads._lstm(lib, size)
    x, y = batches[0]
    state = {}

    def forward():
        state["loss"] = loss_fn(x, y)

    def backward():
        state["loss"].backward()

    return {"lstm-train forward": forward, "lstm-train backward": backward,
            "lstm-train SGD": lambda: workloads._sgd_step(lib, params, size["lr"])}


def word_parts(lib, rng):
    """The word-lstm-train step's parts, each forward + backward (vocabulary 10000, width 200, bptt 35, batch 20)."""
    V, W, T, B = 10000, 200, 35, 20
    nn, F = lib.nn, lib.nn.functional
    emb, rnn, dec = nn.Embedding(V, W), nn.LSTM(W, W, 2), nn.Linear(W, V)
    idx = lib.tensor(rng.integers(0, V, (T, B)), dtype=lib.int64)
    tgt = lib.tensor(rng.integers(0, V, (T * B,)), dtype=lib.int64)
    e_in = lib.tensor(rng.normal(size=(T, B, W)).astype(np.float32), requires_grad=True)
    h_in = lib.tensor(rng.normal(size=(T * B, W)).astype(np.float32), requires_grad=True)
    logits = lib.tensor(rng.normal(size=(T * B, V)).astype(np.float32), requires_grad=True)
    g_e = lib.tensor(rng.normal(size=(T, B, W)).astype(np.float32))
    g_l = lib.tensor(rng.normal(size=(T * B, V)).astype(np.float32))
    params = list(emb.parameters()) + list(rnn.parameters()) + list(dec.parameters())

    def clip_sgd():
        nn.utils.clip_grad_norm_(params, 0.25)
        with lib.no_grad():
            for p in params:
                p.add_(p.grad, alpha=-0.1)

    cases = {"word embedding f+b": lambda: emb(idx).backward(g_e),
             "word LSTM 2x200 f+b": lambda: rnn(e_in)[0].backward(g_e),
             "word decoder 200->10000 f+b": lambda: dec(h_in).backward(g_l),
             "word cross_entropy f+b": lambda: F.cross_entropy(logits, tgt).backward()}
    for fn in cases.values():  # every parameter has a gradient before clip + SGD runs
        fn()
    cases["word clip + SGD"] = clip_sgd
    return cases


def phases(torch, repeat):
    """--phases: the pieces above, dyngrad and torch taking turns call by call."""
    for threads in (1, 2):
        dg.set_num_threads(threads)
        torch.set_num_threads(threads)
        clock = time.process_time if threads == 1 else time.perf_counter
        for build in (step_phases, word_parts):
            ours, theirs = build(dg, np.random.default_rng(0)), build(torch, np.random.default_rng(0))
            times = {name: ([], []) for name in ours}
            for _ in range(repeat if build is step_phases else max(3, repeat // 4)):
                for name in ours:
                    for slot, fn in enumerate((ours[name], theirs[name])):
                        t0 = clock()
                        fn()
                        times[name][slot].append(clock() - t0)
            what = "cpu" if threads == 1 else "wall"
            print(f"\n{threads} thread{'s' if threads > 1 else ''}: best {what} ms      dyngrad     torch  torch/dg")
            for name, (a, b) in times.items():
                print(f"  {name:30s} {1e3 * min(a):8.3f}  {1e3 * min(b):8.3f}  {min(b) / min(a):5.2f}x")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=30)
    parser.add_argument("--phases", action="store_true", help="the lstm-train step's phases and word-lstm's parts")
    args = parser.parse_args()
    try:
        import torch
    except ImportError:
        torch = None
    print(machine_line())
    if args.phases:
        if torch is None:
            raise SystemExit("--phases compares with torch, which is not installed")
        phases(torch, args.repeat)
        print("\n" + machine_line())
        return
    for threads in (1, 2):
        dg.set_num_threads(threads)
        if torch:
            torch.set_num_threads(threads)
        ours = cases(dg, np.random.default_rng(0))
        theirs = cases(torch, np.random.default_rng(0)) if torch else {}
        print(f"\n{threads} thread{'s' if threads > 1 else ''}: ms (wall / cpu)      dyngrad            torch      torch/dg")
        for name, fn in ours.items():
            w, c = best(fn, args.repeat)
            line = f"  {name:30s} {w:7.3f} / {c:7.3f}"
            if name in theirs:
                tw, tc = best(theirs[name], args.repeat)
                line += f"  {tw:7.3f} / {tc:7.3f}  {tw / w:5.2f}x"
            print(line)
    print("\n" + machine_line())


if __name__ == "__main__":
    main()
