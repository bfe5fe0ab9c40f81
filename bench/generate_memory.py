"""Resident memory of a text generator whose sequence grows by one token per step (issue 24: 1.3 GB on dyngrad
against PyTorch's 0.5 GB), and of a training loop of fixed shapes (the case the buffer cache is for).

Each engine runs in its own child process: a small GPT (minGPT's generate: the whole context through the model at
every step, no key/value cache) samples --tokens tokens without grad, then reports its peak and final resident
set (VmHWM, VmRSS), the bytes the buffer cache holds (dyngrad._C._cached_buffer_bytes) and the time per token.

    python bench/generate_memory.py [--engines dyngrad,pytorch] [--tokens 400] [--vocab 33278] [--train-steps 30]
                                    [--json out.json]

`--train-steps` also times a training step of fixed shapes (batch 8 x 256 tokens), where a cache that keeps the
step's buffers saves a page fault per 4 KiB of every fresh buffer. The tests never time anything
(tests/test_memory_pool.py bounds the resident memory of a shorter generation in a child process).
"""
import argparse
import json
import os
import resource
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ENGINE_MODULES = {"dyngrad": "dyngrad", "reference": "dyngrad.reference", "pytorch": "torch"}


def _status(field):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    return 0


def build_gpt(m, vocab, n_embd=256, n_head=4, n_layer=4, block=512):
    """A minGPT-shaped decoder written once for any torch-like module `m`."""
    nn, F = m.nn, m.nn.functional

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1, self.ln2 = nn.LayerNorm(n_embd), nn.LayerNorm(n_embd)
            self.qkv, self.proj = nn.Linear(n_embd, 3 * n_embd), nn.Linear(n_embd, n_embd)
            self.fc, self.out = nn.Linear(n_embd, 4 * n_embd), nn.Linear(4 * n_embd, n_embd)

        def forward(self, x):
            b, t, c = x.shape
            q, k, v = self.qkv(self.ln1(x)).split(n_embd, dim=2)
            q, k, v = (z.view(b, t, n_head, c // n_head).transpose(1, 2) for z in (q, k, v))
            att = (q @ k.transpose(-2, -1)) * (1.0 / (c // n_head) ** 0.5)
            mask = m.ones(t, t).tril() == 0
            att = F.softmax(att.masked_fill(mask, float("-inf")), dim=-1)
            y = (att @ v).transpose(1, 2).contiguous().view(b, t, c)
            x = x + self.proj(y)
            return x + self.out(F.gelu(self.fc(self.ln2(x))))

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.tok, self.pos = nn.Embedding(vocab, n_embd), nn.Embedding(block, n_embd)
            self.blocks = nn.ModuleList([Block() for _ in range(n_layer)])
            self.ln, self.head = nn.LayerNorm(n_embd), nn.Linear(n_embd, vocab, bias=False)

        def forward(self, idx):
            t = idx.shape[1]
            x = self.tok(idx) + self.pos(m.arange(t))
            for blk in self.blocks:
                x = blk(x)
            return self.head(self.ln(x))

    return GPT()


def generate(m, model, tokens):
    idx = m.zeros(1, 1, dtype=m.int64)
    with m.no_grad():
        for _ in range(tokens):
            logits = model(idx)[:, -1, :]
            probs = m.nn.functional.softmax(logits, dim=-1)
            idx = m.cat([idx, m.multinomial(probs, 1)], dim=1)
    return idx


def child(engine, tokens, train_steps, vocab):
    m = __import__(ENGINE_MODULES[engine], fromlist=["nn"])
    m.manual_seed(0)
    model = build_gpt(m, vocab)
    start_rss = _status("VmRSS")
    faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    t0 = time.perf_counter()
    generate(m, model, tokens)
    per_token = (time.perf_counter() - t0) / tokens
    faults = (resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults) / tokens
    report = {"engine": engine, "tokens": tokens, "start_rss": start_rss, "peak_rss": _status("VmHWM"),
              "final_rss": _status("VmRSS"), "ms_per_token": per_token * 1e3,
              "faults_per_token": faults}
    core = getattr(m, "_C", None)
    if hasattr(core, "_cached_buffer_bytes"):
        report["cached_bytes"] = core._cached_buffer_bytes()
    if train_steps:
        opt = m.optim.AdamW(model.parameters(), lr=1e-4)
        x = m.randint(0, vocab, (8, 256))
        times = []
        for step in range(train_steps):
            if step == 3:                  # after the warm-up steps: what a steady step costs
                faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
            t0 = time.perf_counter()
            logits = model(x)
            loss = m.nn.functional.cross_entropy(logits.view(-1, vocab), x.view(-1))
            opt.zero_grad()
            loss.backward()
            opt.step()
            times.append(time.perf_counter() - t0)
        report["train_faults_per_step"] = (resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults) / max(
            1, train_steps - 3)
        times = sorted(times[3:])
        report["train_ms_per_step"] = times[len(times) // 2] * 1e3
        report["train_peak_rss"] = _status("VmHWM")
    print(json.dumps(report))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--engines", default="dyngrad,pytorch")
    parser.add_argument("--tokens", type=int, default=400)
    parser.add_argument("--train-steps", type=int, default=0)
    parser.add_argument("--vocab", type=int, default=33278, help="33278: a word-level model of WikiText-2")
    parser.add_argument("--json")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        return child(args.child, args.tokens, args.train_steps, args.vocab)
    sys.path.insert(0, HERE)
    import _path  # noqa: F401
    results = []
    print(f"nproc {os.cpu_count()}, load average {os.getloadavg()[0]:.1f}")
    for engine in args.engines.split(","):
        out = subprocess.run([sys.executable, __file__, "--child", engine, "--tokens", str(args.tokens),
                              "--train-steps", str(args.train_steps), "--vocab", str(args.vocab)], capture_output=True, text=True,
                             env=dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path)))
        if out.returncode:
            print(f"{engine}: failed\n{out.stderr}")
            continue
        r = json.loads(out.stdout.strip().splitlines()[-1])
        results.append(r)
        mb = 1 << 20
        line = (f"{engine:10s} peak {r['peak_rss'] / mb:7.0f} MiB  final {r['final_rss'] / mb:7.0f} MiB  "
                f"(model loaded: {r['start_rss'] / mb:5.0f})  {r['ms_per_token']:6.1f} ms/token "
                f"{r['faults_per_token']:6.0f} faults/token")
        if "cached_bytes" in r:
            line += f"  cache {r['cached_bytes'] / mb:6.0f} MiB"
        if "train_ms_per_step" in r:
            line += (f"  train {r['train_ms_per_step']:7.1f} ms/step {r['train_faults_per_step']:6.0f} faults/step "
                     f"(peak {r['train_peak_rss'] / mb:.0f} MiB)")
        print(line)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
