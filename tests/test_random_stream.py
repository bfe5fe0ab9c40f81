"""Same script, same answers, with random numbers: both engines run one generator (Note [One random stream for both
engines] in python/dyngrad/reference/rng.py), so after the same manual_seed the same calls draw the same numbers:
uniforms, integers, masks and permutations bit for bit, normals to the rounding of log/cos (numpy's against the C
library's). The reference engine's Python is an independent implementation of random.cpp's algorithm, so each
comparison checks both."""
import subprocess
import sys

import numpy as np
import pytest

from helpers import subprocess_env

EXACT = [
    ("rand float64", lambda m: m.rand(4, 5, dtype=m.float64)),
    ("rand float32", lambda m: m.rand(33)),
    ("rand float16", lambda m: m.rand(9, dtype=m.float16).float()),
    ("rand bfloat16", lambda m: m.rand(9, dtype=m.bfloat16).float()),
    ("rand_like", lambda m: m.rand_like(m.ones(3, 2))),
    ("uniform_", lambda m: m.empty(10, dtype=m.float64).uniform_(-2, 3)),
    ("randint", lambda m: m.randint(-5, 10, (17,))),
    ("randint int8", lambda m: m.randint(0, 100, (8,), dtype=m.int8)),
    ("randint wide", lambda m: m.randint(-2 ** 62, 2 ** 62, (6,))),
    ("randperm", lambda m: m.randperm(25)),
    ("dropout", lambda m: m.nn.functional.dropout(m.ones(40), 0.3)),
    ("bernoulli", lambda m: m.bernoulli(m.full((16,), 0.3))),
    ("multinomial", lambda m: m.multinomial(m.tensor([0.2, 0.3, 0.5]), 12, replacement=True)),
    ("Linear init", lambda m: m.nn.Linear(6, 5).weight.detach()),
    ("a sequence of calls", lambda m: m.cat([m.rand(3), m.randint(0, 9, (2,)).float(), m.rand(4)])),
    ("a Generator", lambda m: m.rand(5, generator=m.Generator().manual_seed(3), dtype=m.float64)),
]
CLOSE = [
    ("randn float64", lambda m: m.randn(101, dtype=m.float64)),      # odd: the last pair's sine is dropped
    ("randn float32", lambda m: m.randn(8, 8)),
    ("randn float16", lambda m: m.randn(16, dtype=m.float16).float()),
    ("normal_", lambda m: m.empty(12, dtype=m.float64).normal_(2.0, 3.0)),
    ("normal with tensors", lambda m: m.normal(m.zeros(7, dtype=m.float64), m.ones(7, dtype=m.float64))),
    ("randn then rand", lambda m: m.cat([m.randn(3, dtype=m.float64), m.rand(3, dtype=m.float64)])),
]


def _both(cpp, ref, draw, seed=1234):
    cpp.manual_seed(seed)
    ref.manual_seed(seed)
    ours, theirs = draw(cpp).numpy(), draw(ref).numpy()
    assert ours.dtype == theirs.dtype and ours.shape == theirs.shape
    return ours, theirs


@pytest.mark.parametrize("what,draw", EXACT, ids=[c[0] for c in EXACT])
def test_same_numbers_on_both_engines(cpp, ref, what, draw):
    ours, theirs = _both(cpp, ref, draw)
    assert np.array_equal(ours, theirs), f"{what}:\n{ours}\n{theirs}"


@pytest.mark.parametrize("what,draw", CLOSE, ids=[c[0] for c in CLOSE])
def test_same_normals_to_rounding(cpp, ref, what, draw):
    ours, theirs = _both(cpp, ref, draw)
    rtol = 1e-12 if ours.dtype == np.float64 else 1e-3 if what.endswith("float16") else 1e-6
    np.testing.assert_allclose(ours, theirs, rtol=rtol, atol=rtol, err_msg=what)


def test_the_stream_continues_alike(cpp, ref):
    """Not only the first numbers: after thousands of draws of mixed kinds the streams are still in step."""
    for m in (cpp, ref):
        m.manual_seed(99)
    for m in (cpp, ref):
        m.randn(1001)
        m.randint(0, 7, (500,))
        m.randperm(300)
    ours, theirs = cpp.rand(50, dtype=cpp.float64).numpy(), ref.rand(50, dtype=ref.float64).numpy()
    assert np.array_equal(ours, theirs)
    assert cpp.initial_seed() == ref.initial_seed() == 99


SCRIPT = r"""
import importlib, sys
dg = importlib.import_module(sys.argv[1])
print(dg.initial_seed())
print(dg.rand(4, dtype=dg.float64).tolist())
if len(sys.argv) > 2:
    dg.manual_seed(int(sys.argv[2]))
    nn = dg.nn
    model = nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Dropout(0.25), nn.Linear(16, 3))
    opt = dg.optim.SGD(model.parameters(), lr=0.1)
    x, y = dg.randn(32, 8), dg.randint(0, 3, (32,))
    for step in range(5):
        order = dg.randperm(32)[:16]
        loss = nn.functional.cross_entropy(model(x[order]), y[order])
        opt.zero_grad()
        loss.backward()
        opt.step()
        print(f"{loss.item():.6f}")
"""


def _run(engine, *args):
    proc = subprocess.run([sys.executable, "-c", SCRIPT, engine, *map(str, args)], capture_output=True, text=True,
                          env=subprocess_env(), timeout=120)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.splitlines()


def test_a_fresh_process_starts_from_torchs_seed_on_both_engines():
    ours, theirs = _run("dyngrad"), _run("dyngrad.reference")
    assert ours == theirs
    assert int(ours[0]) == 67280421310721          # torch.initial_seed() of a fresh process


def test_same_script_same_losses():
    """A seeded training script with init, random data, dropout and shuffles prints the same losses on both
    engines (to 6 decimals; the engines' float32 kernels may differ in the last bits)."""
    ours, theirs = _run("dyngrad", 5), _run("dyngrad.reference", 5)
    assert ours[:2] == theirs[:2]
    np.testing.assert_allclose([float(v) for v in ours[2:]], [float(v) for v in theirs[2:]], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("n", [4096, 70001, 2 ** 17])
def test_long_draws_in_lanes_are_the_same_stream(cpp, ref, n):
    """Long runs of words are drawn in lanes on the reference engine (Note [Xoshiro in lanes]): still the same
    stream as the C++ engine's sequential one, and the generator ends where the sequential one would."""
    ours, theirs = _both(cpp, ref, lambda m: m.cat([m.rand(n, dtype=m.float64), m.rand(3, dtype=m.float64)]), n)
    assert np.array_equal(ours, theirs)
    ours, theirs = _both(cpp, ref, lambda m: m.randperm(5000), n)
    assert np.array_equal(ours, theirs)
