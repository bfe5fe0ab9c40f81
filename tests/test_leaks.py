"""No leaks: the C++ core counts live graph nodes (`_C._live_node_count()`) and live tensor storages
(`_C._live_storage_count()`); after backward() and after the tensors go out of scope both return to where they
started. A 10,000-step training loop keeps its resident memory flat, under a bound that a control run (the same
loop, leaking one graph per step) is shown to break. Cycles through Python hooks, `create_graph` gradients or a
custom Function's ctx are freed by gc (the C++ collector of Note [Cycles through C++] runs with it).

The reference engine has no counters (its storages are numpy arrays, its nodes Python objects that gc owns), so
its node lifetimes are checked through weak references instead.
"""
import gc
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from helpers import subprocess_env
from test_properties import OPS, OP_NAMES


@pytest.fixture(scope="module", autouse=True)
def frozen_heap():
    """Every gc.collect() here walks every tracked object; late in a full run (torch and twenty thousand tests
    loaded) that made each of this file's ~600 collections take most of a second. Frozen, the objects that
    existed before this module are skipped by the collector, and what the tests create is still collected."""
    gc.collect()
    gc.freeze()
    yield
    gc.unfreeze()


def live(cpp):
    gc.collect()
    return cpp._C._live_node_count(), cpp._C._live_storage_count()


def rss_bytes():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def test_counters_see_what_is_alive(cpp):
    nodes, storages = live(cpp)
    x = cpp.ones(3, requires_grad=True)
    y = x.exp()
    assert live(cpp) == (nodes + 2, storages + 2)  # ExpBackward + AccumulateGrad(x); x, y (saved as output)
    z = y * 2
    assert live(cpp) == (nodes + 3, storages + 4)  # + MulBackward; z and the scalar 2 it saved
    del z
    del y
    assert live(cpp) == (nodes, storages + 1)
    del x
    assert live(cpp) == (nodes, storages)


def test_backward_frees_saved_tensors_then_scope_frees_the_graph(cpp):
    nodes, storages = live(cpp)
    x = cpp.randn(4, 5, requires_grad=True)
    w = cpp.randn(5, 3, requires_grad=True)
    h = x @ w
    loss = (h.tanh() * h.sigmoid()).exp().sum()
    del h
    held = live(cpp)[1] - storages - 3       # beyond x, w and loss: what the graph saved for backward
    assert held >= 3, held                   # h, tanh(h), sigmoid(h), exp(...)
    loss.backward()
    assert live(cpp)[1] == storages + 5      # x, w, loss, x.grad, w.grad: the saved tensors are gone
    assert live(cpp)[0] > nodes              # the nodes stay while `loss` refers to them, as in torch
    del loss
    assert live(cpp) == (nodes, storages + 4)
    del x, w
    assert live(cpp) == (nodes, storages)


def test_retain_graph_keeps_saved_tensors_until_scope_ends(cpp):
    nodes, storages = live(cpp)
    x = cpp.randn(6, requires_grad=True)
    loss = (x.exp() * x.sin()).sum()
    loss.backward(retain_graph=True)
    kept = live(cpp)[1]
    loss.backward()
    assert live(cpp)[1] < kept
    del loss, x
    assert live(cpp) == (nodes, storages)


@pytest.mark.parametrize("op", OP_NAMES)
def test_every_op_returns_to_baseline(cpp, op):
    """Each row of the property-test table, on ordinary, non-contiguous and empty inputs: backward, then drop."""
    arity, fn = OPS[op]
    rng = np.random.default_rng(0)
    for shape in [(3, 4), (0, 4)]:
        for transposed in (False, True):
            nodes, storages = live(cpp)
            leaves = []
            for _ in range(2):
                a = rng.standard_normal(shape[::-1] if transposed else shape)
                leaves.append(cpp.tensor(a, requires_grad=True))
            args = [t.T if transposed else t for t in leaves]
            try:
                out = fn(cpp, args[0], args[1], 5)
            except Exception:  # noqa: BLE001  an invalid param for this shape: it must not leak either
                out = None
            if out is not None and out.requires_grad:
                (out * 1.5).sum().backward()
            del out, args, leaves
            assert live(cpp) == (nodes, storages), f"{op} on {shape} (transposed={transposed}) leaked"


def test_error_paths_do_not_leak(cpp):
    nodes, storages = live(cpp)
    x = cpp.randn(3, 4, requires_grad=True)
    for bad in (lambda: x @ x, lambda: x + cpp.ones(5), lambda: x.reshape(5), lambda: x[10],
                lambda: cpp.cat([x, cpp.ones(2, 2)]), lambda: x.sum(dim=7)):
        with pytest.raises(Exception):
            bad()
    y = (x * 2).sum()
    y.backward()
    with pytest.raises(RuntimeError, match="saved tensors were already freed|backward"):
        (x * x).sum().backward() or y.backward()
    del x, y
    assert live(cpp) == (nodes, storages)


def training_loop(m, steps, leak=None):
    """A small MLP with SGD; returns RSS in bytes after warm-up and at the end. `leak` (a list) keeps each step's
    loss alive, with its graph: the control run that the RSS bound must catch."""
    m.manual_seed(0)
    nn = m.nn
    model = nn.Sequential(nn.Linear(32, 64), nn.Tanh(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 1))
    opt = m.optim.SGD(model.parameters(), lr=1e-3, momentum=0.9)
    x, y = m.randn(16, 32), m.randn(16, 1)
    warm = min(1000, steps // 5)
    start = None
    for step in range(steps):
        loss = ((model(x) - y) ** 2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        if leak is not None:
            leak.append(loss)
        if step == warm:
            gc.collect()
            empty_cache = getattr(getattr(m, "_C", None), "_empty_cache", None)
            if empty_cache:  # blocks cached by earlier tests would otherwise absorb a leak
                empty_cache()
            start = rss_bytes()
    gc.collect()
    return start, rss_bytes(), float(loss.item())


# ASan keeps freed memory in a quarantine (scripts/sanitize.sh), so resident memory is no measure there
not_under_asan = pytest.mark.skipif(bool(os.environ.get("DYNGRAD_SANITIZED")), reason="RSS is meaningless under ASan")
RSS_BOUND = 4 << 20  # bytes of growth allowed over 9,000 steps (a leaked 64-byte object per step is 0.6 MB)


def training_loop_in_fresh_process(steps, leak):
    """training_loop in a new interpreter: a heap that earlier tests left full of free blocks would absorb a leak
    (or a control's growth) and make RSS a measure of the test order."""
    proc = subprocess.run([sys.executable, __file__, str(steps), "leak" if leak else "clean"], env=subprocess_env(),
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


@not_under_asan
def test_training_loop_keeps_rss_flat():
    r = training_loop_in_fresh_process(10_000, leak=False)
    start, end = r["start"], r["end"]
    print(f"10,000 steps: RSS {start / 2**20:.1f} MB after 1,000 steps, {end / 2**20:.1f} MB at the end "
          f"({(end - start) / 2**10:+.0f} KB); loss {r['loss']:.4f}; live nodes/storages {r['live']}")
    assert np.isfinite(r["loss"])
    assert end - start < RSS_BOUND, f"RSS grew by {(end - start) / 2**20:.1f} MB over 9,000 steps"
    assert r["live"] == r["live_before"]


@not_under_asan
def test_rss_bound_catches_a_leaking_loop():
    """The control: the same loop keeping each step's graph alive must exceed the bound within 2,000 steps."""
    r = training_loop_in_fresh_process(2_000, leak=True)
    grown = r["end"] - r["start"]
    print(f"leaking control: RSS +{grown / 2**20:.1f} MB over 1,600 steps")
    assert grown > 2 * RSS_BOUND, f"a leaking loop grew only {grown / 2**20:.1f} MB: the bound would not see a leak"


# ---- cycles (Note [Cycles through C++] in csrc/dyngrad/cycles.h) ----

def hook_cycle(m):
    """x's hook holds y, and y's graph holds x (through AccumulateGrad): a cycle through a Python closure."""
    x = m.ones(3, requires_grad=True)
    y = x * 2
    x.register_hook(lambda g: g + 0 * y.sum())
    y.sum().backward()
    return y.grad_fn


def nonleaf_hook_cycle(m):
    """A hook on a non-leaf (kept by its grad_fn) whose closure holds that tensor."""
    x = m.ones(3, requires_grad=True)
    y = x * 2
    y.register_hook(lambda g: g * y.detach())
    return y.grad_fn


def create_graph_cycle(m):
    """backward(create_graph=True) gives w a .grad whose graph reaches w itself (torch warns of this cycle)."""
    w = m.ones(3, requires_grad=True)
    (w * w * w).sum().backward(create_graph=True)
    return w.grad.grad_fn


def function_ctx_cycle(m):
    """A custom Function saving its output: ctx holds y, y's grad_fn holds ctx (forward only, never backward)."""
    class Exp(m.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            y = x.exp()
            ctx.save_for_backward(y)
            return y

        @staticmethod
        def backward(ctx, g):
            (y,) = ctx.saved_tensors
            return g * y

    x = m.ones(3, requires_grad=True)
    return Exp.apply(x).grad_fn


CYCLES = [hook_cycle, nonleaf_hook_cycle, create_graph_cycle, function_ctx_cycle]


@pytest.mark.parametrize("make", CYCLES)
def test_cycles_are_freed_by_gc(cpp, make):
    nodes, storages = live(cpp)
    make(cpp)
    assert cpp._C._live_node_count() > nodes           # the cycle is there before gc runs
    gc.collect()
    assert live(cpp) == (nodes, storages)


@pytest.mark.parametrize("make", CYCLES)
def test_cycles_are_freed_by_gc_reference(ref, make):
    import weakref
    node = weakref.ref(make(ref))
    gc.collect()
    assert node() is None


def test_gc_keeps_cycles_that_are_still_reachable(cpp):
    """The collector frees only what nothing outside holds: reachable cycles keep working after gc.collect()."""
    seen = []
    x = cpp.ones(3, requires_grad=True)
    y = x * 2
    x.register_hook(lambda g: seen.append(y.shape) or g)
    w = cpp.ones(3, requires_grad=True)
    (w * w * w).sum().backward(create_graph=True)
    grad_of_grad_fn = w.grad.grad_fn
    gc.collect()
    (y * 3).sum().backward()
    assert seen == [(3,)] and x.grad.tolist() == [6.0, 6.0, 6.0]
    assert w.grad.grad_fn is grad_of_grad_fn
    w.grad.sum().backward()                          # the second derivative still flows: d/dw sum(3 w^2) = 6 w
    assert w.grad.tolist() == [9.0, 9.0, 9.0]        # 3 (first) + 6 (second), as torch accumulates


def test_cycles_freed_by_backward_when_gc_does_not_run(cpp):
    """A loop that makes a create_graph cycle per step and never calls gc: backward() collects once enough
    suspects piled up, so the live counts stay bounded."""
    gc.disable()
    try:
        nodes, _ = cpp._C._live_node_count(), None
        peak = 0
        for _ in range(3000):
            create_graph_cycle(cpp)
            peak = max(peak, cpp._C._live_node_count() - nodes)
    finally:
        gc.enable()
    per_cycle = 10   # (8 before the ZeroDerivative nodes of constant gradients: Note [Constant gradients under create_graph])
    assert peak < 1100 * per_cycle, f"{peak} nodes alive at the peak: cycles were not collected"


def test_autograd_grad_with_create_graph_does_not_cycle(cpp):
    """The cycle-free way to take second derivatives (torch's advice too): autograd.grad."""
    nodes, storages = live(cpp)
    w = cpp.ones(3, requires_grad=True)
    (g,) = cpp.autograd.grad((w * w * w).sum(), [w], create_graph=True)
    g.sum().backward()
    assert w.grad.tolist() == [6.0, 6.0, 6.0]
    del w, g
    assert live(cpp) == (nodes, storages)


if __name__ == "__main__":  # training_loop_in_fresh_process: python test_leaks.py STEPS leak|clean
    import dyngrad
    live_before = (dyngrad._C._live_node_count(), dyngrad._C._live_storage_count())
    kept = [] if sys.argv[2] == "leak" else None
    start, end, loss = training_loop(dyngrad, int(sys.argv[1]), leak=kept)
    loss_value = float(loss)
    print(json.dumps({"start": start, "end": end, "loss": loss_value, "live_before": list(live_before),
                      "live": list(live(dyngrad)) if kept is None else None}))
