"""Crashes and silent wrong answers found by an outside tester (issue 11), one class per section, on both engines.

Each test that crashed the process before the fix runs its code in a subprocess (`run_isolated`), so that a
regression is a failed test and not a dead pytest. The fuzzers generate the same classes: tests/hook_programs.py
(hook programs, in tests/hostile_driver.py and tests/test_properties.py) and the hostile driver's huge sizes.
torch 2.13 is the oracle where it behaves well; where it crashes or writes through read-only memory itself, the
expected behaviour is written here and in the docstrings.
"""
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from helpers import subprocess_env

ENGINE_MODULES = {"cpp": "dyngrad", "reference": "dyngrad.reference"}


def run_isolated(dg, code, timeout=120, env=None):
    """Runs `code` with `dg` imported as the engine under test in a fresh interpreter; returns the process."""
    module = dg.__name__
    source = f"import {module} as dg\n" + textwrap.dedent(code)
    return subprocess.run([sys.executable, "-c", source], env=subprocess_env(**(env or {})), capture_output=True,
                          text=True, timeout=timeout)


def assert_clean(proc, stdout=None):
    assert proc.returncode == 0, f"exit code {proc.returncode}\n{proc.stderr[-3000:]}"
    if stdout is not None:
        assert proc.stdout.strip() == stdout, proc.stdout + proc.stderr[-2000:]


# ---- 1. hooks that register or remove hooks during backward ----

def test_hook_registering_hooks_during_backward_does_not_crash(dg):
    """SIGSEGV before: the engine iterated the hook vector the hook appended to. As torch, a hook added to the
    list being run waits for the next backward; one added to a tensor backward reaches later runs this time."""
    proc = run_isolated(dg, """
        x = dg.ones(2, requires_grad=True)
        y = x * 2
        calls = []
        def grow(name, t):
            def hook(g):
                calls.append(name)
                for _ in range(100):
                    t.register_hook(lambda g: None)
            return hook
        x.register_hook(grow("x", x))
        y.register_hook(grow("y", y))
        y.register_hook(lambda g: x.register_hook(lambda g: g * 10) and None)   # x is reached later: runs now
        y.grad_fn.register_prehook(lambda gs: [y.grad_fn.register_prehook(lambda gs: None) for _ in range(100)] and None)
        (y * 1).sum().backward(retain_graph=True)
        print(calls, x.grad.tolist())
    """)
    assert_clean(proc, "['y', 'x'] [20.0, 20.0]")


def test_one_shot_hook_removes_itself(dg):
    """`handle.remove()` inside the hook raised bad_function_call in C++; torch applies the hook and removes it."""
    calls = []
    x = dg.ones(2, requires_grad=True)
    handles = {}

    def once(g):
        calls.append("once")
        handles["once"].remove()
        return g * 3

    handles["once"] = x.register_hook(once)
    x.register_hook(lambda g: calls.append("after"))
    (x * 2).sum().backward()
    assert calls == ["once", "after"] and x.grad.tolist() == [6.0, 6.0]
    x.grad = None
    (x * 2).sum().backward()
    assert calls == ["once", "after", "after"] and x.grad.tolist() == [2.0, 2.0]


def test_hook_removed_by_an_earlier_hook_still_runs_this_pass(dg):
    """torch copies a hook list before running it: removal takes effect from the next backward."""
    calls, handles = [], {}
    x = dg.ones(2, requires_grad=True)
    y = x * 2
    y.register_hook(lambda g: handles["late"].remove())
    handles["late"] = y.register_hook(lambda g: calls.append("late") or g * 5)
    y.sum().backward(retain_graph=True)
    assert calls == ["late"] and x.grad.tolist() == [10.0, 10.0]
    y.sum().backward()
    assert calls == ["late"] and x.grad.tolist() == [12.0, 12.0]


def test_node_prehook_follows_torch(dg):
    """grad_fn.register_prehook(fn): fn gets the tuple of output gradients and may return a replacement tuple;
    it returns a removable handle; on a leaf's AccumulateGrad it runs after the leaf's tensor hooks."""
    log = []
    x = dg.ones(2, requires_grad=True)
    x.register_hook(lambda g: log.append("tensor") or g * 10)
    y = x * 2
    acc = y.grad_fn.next_functions[0][0]
    handle = acc.register_prehook(lambda gs: log.append(("acc", gs[0].tolist())) or None)
    y.grad_fn.register_prehook(lambda gs: (gs[0] * 3,))
    y.sum().backward(retain_graph=True)
    assert log == ["tensor", ("acc", [60.0, 60.0])] and x.grad.tolist() == [60.0, 60.0]
    handle.remove()
    y.sum().backward()
    assert log == ["tensor", ("acc", [60.0, 60.0]), "tensor"]


def test_leaf_hooks_apply_to_autograd_grad(dg):
    """autograd.grad returns a leaf's gradient after its hooks, as torch (C++ skipped them before)."""
    x = dg.ones(2, requires_grad=True)
    x.register_hook(lambda g: g * 10)
    (g,) = dg.autograd.grad((x * 2).sum(), x)
    assert g.tolist() == [20.0, 20.0]


@pytest.mark.parametrize("leaf", [True, False])
@pytest.mark.parametrize("make, error, match", [
    (lambda g: g.double(), RuntimeError, r"hook 'bad' changed the dtype of the gradient from float32 to float64"),
    (lambda g: g.long(), RuntimeError, r"hook 'bad' changed the dtype of the gradient from float32 to int64"),
    (lambda g: g.bool(), RuntimeError, r"hook 'bad' changed the dtype of the gradient from float32 to bool"),
    (lambda g: g[:2], RuntimeError, r"hook 'bad' changed the shape of the gradient from \(3,\) to \(2,\)"),
    (lambda g: g.sum(), RuntimeError, r"hook 'bad' changed the shape of the gradient from \(3,\) to \(\)"),
    (lambda g: 3, TypeError, r"hook 'bad' must return a Tensor or None, got int"),
])
def test_hook_result_of_the_wrong_dtype_or_shape_is_refused(dg, leaf, make, error, match):
    """A leaf's hook could turn its .grad into int64/bool/float64 (which the .grad setter refuses); torch: "hook
    'bad' has changed the type of value"."""
    x = dg.ones(3, requires_grad=True)
    y = x * 2

    def bad(g):
        return make(g)

    (x if leaf else y).register_hook(bad)
    with pytest.raises(error, match=match):
        (y * 1).sum().backward()
    assert x.grad is None


def test_node_prehook_result_is_checked(dg):
    x = dg.ones(3, requires_grad=True)
    y = x * 2

    def bad(gs):
        return (gs[0], gs[0])

    y.grad_fn.register_prehook(bad)
    with pytest.raises(RuntimeError, match=r"hook 'bad' returned 2 gradients, but the node has 1 output"):
        y.sum().backward(retain_graph=True)
    z = x * 3

    def wrong_dtype(gs):
        return (gs[0].double(),)

    z.grad_fn.register_prehook(wrong_dtype)
    with pytest.raises(RuntimeError, match=r"hook 'wrong_dtype' changed the dtype of the gradient"):
        z.sum().backward()


def test_node_prehook_handle_in_its_own_closure_is_collected(cpp):
    """A pre-hook whose closure holds its own handle (which holds the node): a cycle through C++ that
    gc.collect() must free (the collector did not follow a Python Node object to its C++ node)."""
    import gc

    def program():
        x = cpp.ones(2, requires_grad=True)
        y = x * x
        handles = []
        handles.append(y.grad_fn.next_functions[0][0].register_prehook(lambda gs: handles and None))
        handles.append(y.grad_fn.register_prehook(lambda gs: handles and None))
        y.sum().backward()

    gc.collect()
    before = cpp._C._live_node_count()
    for _ in range(20):
        program()
    gc.collect()
    assert cpp._C._live_node_count() == before
