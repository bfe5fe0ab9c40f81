"""Where the program rows of `python -m dyngrad.bench --only programs` spend their time, dyngrad beside PyTorch in
one process: the phases of a step (forward, backward, optimiser; for the word LSTM model also the embedding, the
LSTM and the decoder + loss), and the causal attention alone, in CPU milliseconds (time.process_time), engine after
engine, median of the repeats. CPU time rather than wall time because the development machines are shared: with
a load of 15 on 2 cores wall times are mostly waiting, while a process's CPU time still counts its own work
(at 1 thread; at 2 it also counts workers that spin).

    python bench/program_phases.py [--threads 1] [--repeats 10] [--only gpt,word-lstm,attention]

Prints the CPU, the load and one line per engine and workload. Nothing here is asserted (no test times anything).
"""
import argparse
import os
import statistics
import time

import _path  # noqa: F401
import numpy as np

import dyngrad
from dyngrad.bench import workloads as W
from dyngrad.bench.engines import machine_line

try:
    import torch
except ImportError:   # dyngrad alone then
    torch = None


def _gpt(dg):
    rng = W._rng(14)
    model = W._gpt_model(dg, 65, 128, 4, 4, 64)
    W._seed_module(dg, model, rng, std=0.02)
    params = [p for _, p in sorted(model.named_parameters())]
    optimizer = dg.optim.AdamW(params, lr=1e-3, betas=(0.9, 0.99), weight_decay=0.1)
    x, y = W._token_batches(dg, rng, 65, 12, 64)[0]

    def step():
        t0 = time.process_time()
        loss = model(x, y)
        t1 = time.process_time()
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        t2 = time.process_time()
        optimizer.step()
        return {"forward": t1 - t0, "backward": t2 - t1, "adamw": time.process_time() - t2}
    return step


def _word_lstm(dg):
    nn = dg.nn
    rng = W._rng(15)
    vocab, width, bptt, batch = 10000, 200, 35, 20
    encoder, rnn, decoder = nn.Embedding(vocab, width), nn.LSTM(width, width, 2), nn.Linear(width, vocab)
    for module in (encoder, rnn, decoder):
        W._seed_module(dg, module, rng)
    params = [p for m in (encoder, rnn, decoder) for _, p in sorted(m.named_parameters())]
    stream = rng.integers(0, vocab, (bptt + 1, batch))
    x, y = W._const(dg, stream[:-1], np.int64), W._const(dg, stream[1:], np.int64)
    h = W._const(dg, np.zeros((2, batch, width)))

    def step():
        for p in params:
            p.grad = None
        t0 = time.process_time()
        e = encoder(x)
        t1 = time.process_time()
        out, _ = rnn(e, (h, h))
        t2 = time.process_time()
        loss = dg.nn.functional.cross_entropy(decoder(out).view(-1, vocab), y.view(-1))
        t3 = time.process_time()
        loss.backward()
        t4 = time.process_time()
        nn.utils.clip_grad_norm_(params, 0.25)
        with dg.no_grad():
            for p in params:
                p.add_(p.grad, alpha=-20.0)
        return {"embedding": t1 - t0, "lstm": t2 - t1, "decoder+loss": t3 - t2, "backward": t4 - t3,
                "clip+sgd": time.process_time() - t4}
    return step


def _attention(dg):
    rng = np.random.default_rng(0)
    q, k, v = (dg.tensor(rng.normal(size=(12, 4, 64, 32)).astype(np.float32), requires_grad=True) for _ in range(3))
    sdpa = dg.nn.functional.scaled_dot_product_attention

    def step():
        t0 = time.process_time()
        out = sdpa(q, k, v, is_causal=True)
        t1 = time.process_time()
        out.sum().backward()
        return {"forward": t1 - t0, "backward": time.process_time() - t1}
    return step


WORKLOADS = {"gpt": _gpt, "word-lstm": _word_lstm, "attention": _attention}


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--repeats", type=int, default=10)
    p.add_argument("--only", default=",".join(WORKLOADS))
    args = p.parse_args()
    engines = {"dyngrad": dyngrad}
    if torch is not None:
        engines["pytorch"] = torch
    for module in engines.values():
        module.set_num_threads(args.threads)
    print(f"{machine_line()}, {args.threads} thread(s), CPU ms")
    for name in args.only.split(","):
        steps = {engine: WORKLOADS[name](module) for engine, module in engines.items()}
        phases = {engine: [] for engine in steps}
        for _ in range(args.repeats + 1):          # the first call warms up
            for engine, step in steps.items():
                phases[engine].append(step())
        for engine, runs in phases.items():
            medians = {key: 1e3 * statistics.median(r[key] for r in runs[1:]) for key in runs[0]}
            total = sum(medians.values())
            print(f"{name:10s} {engine:8s} total {total:7.2f}  " +
                  "  ".join(f"{key} {value:.2f}" for key, value in medians.items()))
    print(f"load at the end {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
