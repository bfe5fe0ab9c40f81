"""Threads: several Python threads build and backpropagate independent graphs at once, and every result equals
the serial run bit for bit; a graph shared between threads either works (retain_graph=True) or raises the clear
error of csrc/dyngrad/engine.cpp; tensors made in one thread and freed in another leak nothing.

The workload mixes small ops (run with the GIL held) with kernels big enough to release it (matmul above 2**18
multiply-adds, elementwise ops above 65,536 elements), so threads really are inside C++ kernels at the same time.
That the overlap buys speed is shown by bench/threads_gil.py, not timed here.
"""
import threading

import numpy as np
import pytest

THREADS = 4
CONCURRENT_ERROR = "another backward\\(\\) is running through right now"


def run_threads(fn, n):
    """fn(i) in n threads started together; re-raises the first exception of any thread."""
    barrier = threading.Barrier(n)
    results, errors = [None] * n, [None] * n

    def target(i):
        barrier.wait()
        try:
            results[i] = fn(i)
        except BaseException as exc:  # noqa: BLE001  handed to the main thread
            errors[i] = exc

    threads = [threading.Thread(target=target, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return results, errors


def inputs_for(i):
    rng = np.random.default_rng(100 + i)
    return (rng.standard_normal((96, 128)).astype(np.float32), rng.standard_normal((128, 64)).astype(np.float32),
            rng.standard_normal((300, 300)).astype(np.float32))


def workload(m, a_np, w_np, big_np, steps=3):
    """A graph with big and small ops, a diamond, a hook and a view; returns everything as numpy."""
    a = m.tensor(a_np, requires_grad=True)
    w = m.tensor(w_np, requires_grad=True)
    big = m.tensor(big_np, requires_grad=True)
    seen = []
    w.register_hook(lambda g: seen.append(float(g.abs().sum())))
    for _ in range(steps):
        h = (a @ w).tanh()                                   # matmul: 786k multiply-adds, GIL released
        e = (big * 0.5).sigmoid() * big.exp().clamp(max=5.0)  # 90,000 elements: parallel kernels
        loss = (h * h).mean() + m.log_softmax(h, 1)[:, ::3].sum() * 1e-3 + e.sum() * 1e-4
        loss.backward()
    return [t.grad.numpy().copy() for t in (a, w, big)] + [np.array(seen), loss.detach().numpy().copy()]


def test_independent_graphs_match_the_serial_run_bit_for_bit(dg):
    serial = [workload(dg, *inputs_for(i)) for i in range(THREADS)]
    for repeat in range(2):
        results, errors = run_threads(lambda i: workload(dg, *inputs_for(i)), THREADS)
        assert not any(errors), errors
        for i, (got, want) in enumerate(zip(results, serial)):
            for k, (g, s) in enumerate(zip(got, want)):
                assert g.dtype == s.dtype and np.array_equal(g, s), f"thread {i}, result {k}, repeat {repeat}"


def test_threads_running_the_same_computation_agree(dg):
    """All threads on the same inputs (one shared numpy source, separate tensors): identical results."""
    data = inputs_for(0)
    results, errors = run_threads(lambda i: workload(dg, *data, steps=2), THREADS)
    assert not any(errors), errors
    for got in results[1:]:
        for g, s in zip(got, results[0]):
            assert np.array_equal(g, s)


def shared_graph(m):
    x = m.tensor(np.linspace(-1, 1, 200 * 300).reshape(200, 300), requires_grad=True)
    y = ((x * 3).sin() * x.exp()).sum()   # 60,000-element kernels: slow enough for backward passes to overlap
    single = (3 * (x * 3).cos() * x.exp() + (x * 3).sin() * x.exp()).detach().numpy().copy()
    return x, y, single




def test_shared_graph_with_retain_graph_works_or_raises_clearly(dg):
    x, y, single = shared_graph(dg)
    done = []

    def backward(i):
        for _ in range(5):
            try:
                y.backward(retain_graph=True)
                done.append(i)
            except RuntimeError as exc:
                assert "another backward() is running through" in str(exc), exc
    _, errors = run_threads(backward, THREADS)
    assert not any(errors), errors
    assert done, "no backward pass went through"
    # each pass that went through added exactly one gradient; none was lost or half-applied
    np.testing.assert_allclose(x.grad.numpy(), len(done) * single, rtol=1e-10, atol=1e-10)
    y.backward()  # the graph is intact after the contention


def test_shared_graph_without_retain_graph_runs_once(dg):
    x, y, single = shared_graph(dg)
    outcomes = []

    def backward(i):
        try:
            y.backward()
            outcomes.append("ok")
        except RuntimeError as exc:
            message = str(exc)
            assert ("another backward() is running through" in message
                    or "saved tensors were already freed" in message), message
            outcomes.append("error")
    _, errors = run_threads(backward, THREADS)
    assert not any(errors), errors
    assert outcomes.count("ok") == 1, outcomes
    np.testing.assert_allclose(x.grad.numpy(), single, rtol=1e-10, atol=1e-10)


def test_graphs_sharing_a_leaf_work_or_raise_clearly(dg):
    """Threads with their own graphs over one shared parameter (Hogwild-style). torch serialises the
    accumulation into .grad; dyngrad's C++ engine may instead refuse a backward that reaches the shared
    AccumulateGrad while another is inside it. Either way no gradient is lost or half-added."""
    w = dg.tensor(np.linspace(-1, 1, 300 * 300).reshape(300, 300), requires_grad=True)
    single = 1 + 2 * np.cos(2 * w.detach().numpy())
    done = []

    def backward(i):
        for _ in range(3):
            loss = (w + (w * 2).sin()).sum()   # 90,000-element kernels: the passes overlap
            try:
                loss.backward()
                done.append(i)
            except RuntimeError as exc:
                assert "another backward() is running through" in str(exc), exc
    _, errors = run_threads(backward, THREADS)
    assert not any(errors), errors
    assert done
    np.testing.assert_allclose(w.grad.numpy(), len(done) * single, rtol=1e-9, atol=1e-9)


def test_concurrent_backward_error_names_the_node(cpp):
    """The engine's error, raised deterministically: backward() started from a hook of the same graph."""
    x = cpp.ones(3, requires_grad=True)
    y = (x * 2).sum()
    x.register_hook(lambda g: y.backward(retain_graph=True))
    with pytest.raises(RuntimeError, match=r"backward\(\) reached \w+Backward, which " + CONCURRENT_ERROR):
        y.backward(retain_graph=True)


def test_tensors_freed_in_another_thread_leak_nothing(cpp):
    """Pooled TensorImpl/Storage/node blocks made in one thread and released in another."""
    import gc
    gc.collect()
    nodes, storages = cpp._C._live_node_count(), cpp._C._live_storage_count()
    made = []

    def produce(i):
        rng = np.random.default_rng(i)
        for _ in range(200):
            x = cpp.tensor(rng.standard_normal((4, 4)), requires_grad=True)
            made.append((x, (x @ x).tanh()))
    run_threads(produce, THREADS)

    def consume(i):
        while True:
            try:
                x, y = made.pop()
            except IndexError:
                return
            y.sum().backward()
            del x, y
    _, errors = run_threads(consume, THREADS)
    assert not any(errors), errors
    gc.collect()
    assert (cpp._C._live_node_count(), cpp._C._live_storage_count()) == (nodes, storages)


def test_grad_mode_stays_per_thread_under_load(dg):
    """Threads switching no_grad on and off never see each other's mode."""
    def run(i):
        for k in range(200):
            if (i + k) % 2:
                with dg.no_grad():
                    assert not (dg.ones(2, requires_grad=True) * 2).requires_grad
            else:
                assert (dg.ones(2, requires_grad=True) * 2).requires_grad
        return True
    results, errors = run_threads(run, THREADS)
    assert not any(errors) and all(results), errors


# ---- dg.set_num_threads / dg.get_num_threads (torch's top-level names) ----

def test_set_num_threads_is_top_level_and_results_do_not_depend_on_it(dg):
    """torch.set_num_threads's contract: top level, round-trips, RuntimeError for n < 1 and for non-ints; the
    kernels and BLAS panels it controls give the same bits at 1 and 2 threads (Note [Deterministic matmul])."""
    before = dg.get_num_threads()
    try:
        for bad in (0, -2, 1.5, True):
            with pytest.raises(RuntimeError, match="set_num_threads expects"):
                dg.set_num_threads(bad)
        outs = []
        for n in (1, 2):
            dg.set_num_threads(n)
            assert dg.get_num_threads() == n
            outs.append(workload(dg, *inputs_for(0), steps=1))
        for k, (one, two) in enumerate(zip(*outs)):
            assert np.array_equal(one, two), f"result {k} differs between 1 and 2 threads"
    finally:
        dg.set_num_threads(before)
