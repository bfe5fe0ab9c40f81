"""One BLAS in the process (issue 11: Note [One BLAS] in csrc/dyngrad/kernels/matmul.cpp,
python/dyngrad/_cpp_blas.py).

dyngrad's matrix products use numpy's own OpenBLAS, so dyngrad and numpy share one pool of BLAS threads instead of
two fighting ones. These tests check that configuration and its invariants, never a timing (bench/blas_interop.py
measures): one OpenBLAS mapped, the same thread count seen from both sides, dg.set_num_threads governing it, a
dyngrad matmul leaving numpy's count as it found it, and the fallbacks giving the same bits.
"""
import ctypes
import hashlib
import json
import os
import subprocess
import sys
import threading

import numpy as np
import pytest

from helpers import subprocess_env

import dyngrad
from dyngrad import _cpp_blas


def _numpy_blas_name():
    try:
        return np.__config__.CONFIG["Build Dependencies"]["blas"]["name"]
    except (AttributeError, KeyError, TypeError):
        return None


needs_numpy_openblas = pytest.mark.skipif(
    _numpy_blas_name() != "scipy-openblas" or not os.path.exists("/proc/self/maps"),
    reason="numpy's BLAS is not the scipy-openblas of numpy's wheels (or no /proc): dyngrad uses a fallback")


def _numpy_get_threads():
    """openblas_get_num_threads of numpy's own copy, looked up independently of dyngrad."""
    blas, reason = _cpp_blas._find_numpy_blas()
    assert blas is not None, reason
    return blas.get_threads


def _run(code, **env):
    out = subprocess.run([sys.executable, "-c", code], env=subprocess_env(**env), capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr[-3000:]
    return out


# Products whose bits the tests compare across BLAS sources: float32 and float64, a panel-split one
# (Note [Deterministic matmul]), transposed operands, a batch split over threads (Note [Parallel batches]).
_PRODUCTS_CODE = """
import hashlib, json, numpy as np, dyngrad as dg
rng = np.random.default_rng(7)
digests = []
for dt in (np.float32, np.float64):
    for n, k, m in ((40, 50, 60), (130, 70, 90), (300, 200, 150), (257, 129, 513)):
        a = rng.standard_normal((n, k)).astype(dt); b = rng.standard_normal((k, m)).astype(dt)
        for x, y in ((dg.from_numpy(a), dg.from_numpy(b)),
                     (dg.from_numpy(np.ascontiguousarray(a.T)).t(), dg.from_numpy(np.ascontiguousarray(b.T)).t())):
            digests.append(hashlib.sha256((x @ y).numpy().tobytes()).hexdigest())
    q = rng.standard_normal((16, 64, 64)).astype(dt); kk = rng.standard_normal((16, 64, 64)).astype(dt)
    digests.append(hashlib.sha256((dg.from_numpy(q) @ dg.from_numpy(kk)).numpy().tobytes()).hexdigest())
print(json.dumps(digests))
"""


@needs_numpy_openblas
def test_dyngrad_uses_numpys_openblas():
    info = _cpp_blas.info
    assert info["source"] == "numpy" and info["shares_numpy_pool"], info
    assert info["ilp64"] is True and "USE64BITINT" in info["config"]
    assert dyngrad._C._blas_loaded()
    mapped = [line.split(None, 5)[5].strip() for line in open("/proc/self/maps") if len(line.split(None, 5)) == 6]
    assert info["path"] in mapped


@needs_numpy_openblas
def test_one_openblas_in_a_fresh_process():
    """After `import dyngrad` and products on both sides, the process maps one OpenBLAS (numpy's) and never
    imported scipy-openblas32 (this test run itself may have imported scipy, which brings its own: hence a child)."""
    out = _run("""
import json, os, sys, numpy as np, dyngrad as dg
x = dg.randn(300, 300); (x @ x).sum(); (x.numpy() @ x.numpy()).sum()
libs = sorted({l.split(None, 5)[5].strip() for l in open('/proc/self/maps')
               if len(l.split(None, 5)) == 6 and 'openblas' in os.path.basename(l.split(None, 5)[5]).lower()})
from dyngrad import _cpp_blas
print(json.dumps([libs, _cpp_blas.info['path'], 'scipy_openblas32' in sys.modules]))
""")
    libs, path, imported_32 = json.loads(out.stdout.strip().splitlines()[-1])
    assert libs == [path] and not imported_32, (libs, path)
    assert os.path.basename(path).startswith("libscipy_openblas64_")


@needs_numpy_openblas
def test_set_num_threads_sets_numpys_blas_pool():
    """dg.set_num_threads governs the shared pool (as torch.set_num_threads governs PyTorch's BLAS); the count is
    the one numpy's own products read, at most one thread per core."""
    get = _numpy_get_threads()
    before_dg, before_blas = dyngrad.get_num_threads(), get()
    try:
        dyngrad.set_num_threads(1)
        assert get() == 1 == dyngrad._C._blas_threads()
        dyngrad.set_num_threads(2)
        assert get() == min(2, os.cpu_count()) == dyngrad._C._blas_threads()
    finally:
        dyngrad.set_num_threads(before_dg)
        dyngrad._C._set_blas_threads(before_blas)
    assert get() == before_blas


@needs_numpy_openblas
@pytest.mark.parametrize("shape", [(200, 200, 200), (300, 300, 300), (16, 64, 64, 64)], ids=["one", "panels", "batch"])
def test_matmul_leaves_numpys_thread_count(shape):
    """dyngrad's products run the shared BLAS on one thread (Note [Deterministic matmul]) and put back the count
    numpy's products use, also when Python threads overlap their products."""
    get = _numpy_get_threads()
    before_dg, before_blas = dyngrad.get_num_threads(), get()
    rng = np.random.default_rng(0)
    *batch, n, k, m = shape
    a = dyngrad.from_numpy(rng.standard_normal((*batch, n, k)).astype(np.float32))
    b = dyngrad.from_numpy(rng.standard_normal((*batch, k, m)).astype(np.float32))
    try:
        dyngrad.set_num_threads(2)
        want = get()
        assert want == min(2, os.cpu_count())
        expected = (a @ b).numpy()
        assert get() == want
        errors = []

        def work():
            try:
                for _ in range(10):
                    if not np.array_equal((a @ b).numpy(), expected):
                        errors.append("a product changed its bits")
            except Exception as e:  # noqa: BLE001 (reported below)
                errors.append(repr(e))

        workers = [threading.Thread(target=work) for _ in range(3)]
        for w in workers:
            w.start()
        for w in workers:
            w.join()
        assert not errors
        assert get() == want == dyngrad._C._blas_threads()
    finally:
        dyngrad.set_num_threads(before_dg)
        dyngrad._C._set_blas_threads(before_blas)


def test_matmul_agrees_with_numpy_after_thread_changes(dg):
    """Both engines: products stay right while the thread count (and, on the C++ engine, the shared BLAS pool's)
    changes between them; numpy's own product is unaffected."""
    rng = np.random.default_rng(3)
    a = rng.standard_normal((150, 120)).astype(np.float64)
    b = rng.standard_normal((120, 170)).astype(np.float64)
    before = dg.get_num_threads()
    try:
        for threads in (1, 2, 1):
            dg.set_num_threads(threads)
            got = (dg.from_numpy(a) @ dg.from_numpy(b)).numpy()
            np.testing.assert_allclose(got, a @ b, rtol=1e-12, atol=1e-12)
            np.testing.assert_allclose(a @ b, np.einsum("ik,kj->ij", a, b), rtol=1e-12, atol=1e-12)
    finally:
        dg.set_num_threads(before)


@needs_numpy_openblas
def test_fallback_scipy_openblas32_gives_the_same_bits():
    """DYNGRAD_BLAS=scipy-openblas32 (the library dyngrad used before, and the fallback when numpy's BLAS cannot be
    shared) gives bit-identical products: both run one BLAS thread per row panel."""
    pytest.importorskip("scipy_openblas32")
    ours = json.loads(_run(_PRODUCTS_CODE).stdout.strip().splitlines()[-1])
    theirs = json.loads(_run(_PRODUCTS_CODE + """
from dyngrad import _cpp_blas
assert _cpp_blas.info['source'] == 'scipy-openblas32' and _cpp_blas.info['ilp64'] is False, _cpp_blas.info
assert not _cpp_blas.info['shares_numpy_pool']
""", DYNGRAD_BLAS="scipy-openblas32").stdout.strip().splitlines()[-1])
    assert ours == theirs


def test_without_a_blas_products_are_still_right():
    """DYNGRAD_BLAS=none: no library, dyngrad's own loop; an unknown value warns and chooses automatically."""
    out = _run("""
import numpy as np, dyngrad as dg
from dyngrad import _cpp_blas
assert not dg._C._blas_loaded() and _cpp_blas.info['source'] is None and _cpp_blas.info['reason']
rng = np.random.default_rng(1)
a = rng.standard_normal((70, 80)); b = rng.standard_normal((80, 90))
np.testing.assert_allclose((dg.from_numpy(a) @ dg.from_numpy(b)).numpy(), a @ b, rtol=1e-12, atol=1e-12)
print('ok')
""", DYNGRAD_BLAS="none")
    assert out.stdout.strip().endswith("ok")
    out = _run("import dyngrad", DYNGRAD_BLAS="mkl")
    assert "DYNGRAD_BLAS='mkl' is not one of" in out.stderr


@needs_numpy_openblas
def test_openblas_num_threads_caps_the_shared_pool():
    """OPENBLAS_NUM_THREADS=1: the BLAS keeps no workers (numpy's products single-threaded) while dyngrad's kernels
    use the threads dg.set_num_threads gives them: the configuration in which neither slows the other down on a
    busy machine (docs/pitfalls.md)."""
    out = _run("""
import dyngrad as dg
from dyngrad import _cpp_blas
get = _cpp_blas._find_numpy_blas()[0].get_threads
assert get() == 1
dg.set_num_threads(2)
x = dg.randn(300, 300); x @ x
print(dg.get_num_threads(), get(), dg._C._blas_threads())
""", OPENBLAS_NUM_THREADS="1")
    assert out.stdout.split() == ["2", "1", "1"]
