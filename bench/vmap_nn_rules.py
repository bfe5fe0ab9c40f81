"""The nn.functional and torch.masked batching rules (the vmapA section of _api/ops/vmap.py) against the fallback
loop they replace: each case runs once under dyngrad.vmap with its rule, and once with the rule taken out of
vmap.RULES (the loop over the rows, _loop), in one run; the figure is loop time / rule time.

    python bench/vmap_nn_rules.py [--repeat 7] [--batch 64] [--engine dyngrad]

Each time is the best of `repeat` calls after a warm-up (the machine is shared). float32. The loop's warning is
silenced.
"""
import argparse
import importlib
import warnings

import numpy as np

import _path  # noqa: F401
from dyngrad.bench.engines import best_seconds, machine_line


def cases(m, b, rng):
    F = m.nn.functional

    def t(*shape):
        return m.tensor(rng.standard_normal(shape).astype(np.float32))
    x, mask = t(b, 16, 32), m.tensor(rng.uniform(size=(b, 16, 32)) > 0.3)
    labels = m.tensor(rng.integers(0, 32, (b, 16)))
    img, wt = t(b, 4, 8, 8, 8), t(8, 4, 3, 3)
    lp = F.log_softmax(t(b, 20, 4, 6), -1)
    tg = m.tensor(rng.integers(1, 6, (b, 4, 5)))
    il, tl = m.tensor(np.full((b, 4), 20)), m.tensor(np.full((b, 4), 5))
    q, inw, inb, outw, outb = t(b, 6, 2, 16), t(48, 16), t(48), t(16, 16), t(16)
    return [
        ("masked.sum", (x, mask), lambda a, k: m.masked.sum(a, 1, mask=k)),
        ("masked.softmax", (x, mask), lambda a, k: m.masked.softmax(a, -1, mask=k)),
        ("F.cosine_embedding_loss", (x, x * 0.5, m.ones(b, 16)),
         lambda a, c, y: F.cosine_embedding_loss(a, c, y)),
        ("F.multi_margin_loss", (x, labels), lambda a, y: F.multi_margin_loss(a, y)),
        ("F.batch_norm", (img,), lambda a: F.batch_norm(a, None, None, training=True)),
        ("conv_transpose2d", (img,), lambda a: m.conv_transpose2d(a, wt, stride=2)),
        ("F.ctc_loss", (lp, tg, il, tl), lambda a, y, i, j: F.ctc_loss(a, y, i, j)),
        ("F.multi_head_attention_forward", (q,),
         lambda a: F.multi_head_attention_forward(a, a, a, 16, 2, inw, inb, None, None, False, 0.0, outw, outb)[0]),
    ]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--engine", default="dyngrad")
    opts = parser.parse_args()
    m = importlib.import_module(opts.engine)
    vm = importlib.import_module(opts.engine + "._api.ops.vmap")
    rng = np.random.default_rng(0)
    print(f"{opts.engine}, batch {opts.batch}, best of {opts.repeat}; {machine_line()}")
    print(f"{'case':34s} {'rule ms':>9s} {'loop ms':>9s} {'loop/rule':>9s}")
    for key, args, fn in cases(m, opts.batch, rng):
        run = m.vmap(fn)
        vm.FALLBACKS.clear()
        rule = best_seconds(lambda: run(*args), opts.repeat)
        assert not vm.FALLBACKS, f"{key}: the rule did not run ({sorted(set(vm.FALLBACKS))})"
        saved = vm.RULES.pop(key)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                loop = best_seconds(lambda: run(*args), opts.repeat)
                assert key in vm.FALLBACKS
        finally:
            vm.RULES[key] = saved
        print(f"{key:34s} {rule * 1e3:9.2f} {loop * 1e3:9.2f} {loop / rule:9.1f}")


if __name__ == "__main__":
    main()
