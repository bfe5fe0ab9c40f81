"""Finds the BLAS for the C++ core's matrix products and hands its sgemm/dgemm to csrc/dyngrad/kernels/matmul.cpp.

The first choice is numpy's own OpenBLAS, the copy the loaded numpy already mapped (numpy >= 2
wheels ship scipy-openblas64: 64-bit integers, symbols `scipy_cblas_sgemm64_`; numpy 1.2x wheels: `cblas_sgemm64_`).
One library means one pool of BLAS threads in the process, sized by one setting (dg.set_num_threads, as
torch.set_num_threads governs PyTorch's BLAS); dyngrad used to load scipy-openblas32 next to numpy's copy, a second
library with its own threads, memory and thread setting. dyngrad's calls run the shared library on one thread
(Note [Deterministic matmul]) without changing what numpy's calls use (Note [One BLAS] in
csrc/dyngrad/kernels/matmul.cpp). What one pool cannot remove is OpenBLAS's own busy-waiting between its threads,
which stalls on a loaded machine: bench/blas_interop.py measures it, docs/pitfalls.md section 8 gives the
configuration (OPENBLAS_NUM_THREADS=1) in which numpy and dyngrad never slow each other down.

When numpy's BLAS is not an OpenBLAS that can be shared (Accelerate, MKL, an OpenMP build, a distribution's
generic libblas), dyngrad falls back to scipy-openblas32 (`pip install dyngrad[openblas32]`; a dependency on
macOS, where numpy uses Accelerate), and without it to its own (slow) loop.

DYNGRAD_BLAS=numpy | scipy-openblas32 | none forces one source (benchmarks and tests compare them).
Loading at run time (instead of linking at build time) keeps the build free of any BLAS.
"""
import ctypes
import glob
import os

from ._user_frame import warn

# What load_blas chose: source ("numpy", "scipy-openblas32" or None), path, ilp64, config (openblas_get_config),
# shares_numpy_pool (whether numpy's products use the same library and threads), reason (why nothing was loaded).
info = {"source": None, "path": None, "ilp64": None, "config": None, "shares_numpy_pool": False, "reason": None}

_CHOICES = ("numpy", "scipy-openblas32", "none")


class _Blas:
    """The entry points of one OpenBLAS found under one symbol naming."""

    def __init__(self, lib, path, prefix, suffix):
        self.lib, self.path = lib, path
        name = (lambda base: prefix + base + suffix)
        self.sgemm = getattr(lib, name("cblas_sgemm"))
        self.dgemm = getattr(lib, name("cblas_dgemm"))
        self.set_threads = getattr(lib, name("openblas_set_num_threads"))
        self.get_threads = getattr(lib, name("openblas_get_num_threads"))
        get_config = getattr(lib, name("openblas_get_config"))
        get_config.restype = ctypes.c_char_p
        self.config = (get_config() or b"").decode("ascii", "replace").strip()
        get_parallel = getattr(lib, name("openblas_get_parallel"), None)
        self.parallel = get_parallel() if get_parallel is not None else 1  # 0 none, 1 pthreads, 2 OpenMP
        # the configuration string is the authority on the integer width (a wrong width would corrupt arguments)
        self.ilp64 = "USE64BITINT" in self.config


def _open(path):
    """The OpenBLAS at `path` under whichever naming it exports, or None. dlopen of a library the process already
    mapped returns that same copy (and pool), it does not load a second one."""
    try:
        lib = ctypes.CDLL(path, mode=ctypes.RTLD_LOCAL)
    except OSError:
        return None
    for prefix in ("scipy_", ""):
        for suffix in ("64_", ""):
            try:
                return _Blas(lib, path, prefix, suffix)
            except AttributeError:
                continue
    return None


def _numpy_blas_paths():
    """Paths of the BLAS libraries the loaded numpy uses: those mapped into this process (Linux), numpy's vendored
    ones first; elsewhere, the libraries vendored next to the numpy package."""
    import numpy
    try:
        import numpy._core._multiarray_umath  # noqa: F401  (numpy >= 2: this extension links the BLAS)
    except ImportError:
        import numpy.core._multiarray_umath  # noqa: F401
    root = os.path.dirname(os.path.abspath(numpy.__file__))
    vendored = [os.path.join(os.path.dirname(root), "numpy.libs"), os.path.join(root, ".libs"),
                os.path.join(root, ".dylibs")]
    paths = []
    try:
        with open("/proc/self/maps") as maps:
            for line in maps:
                fields = line.split(None, 5)
                if len(fields) == 6 and "blas" in os.path.basename(fields[5]).lower():
                    path = fields[5].strip()
                    if path.startswith("/") and path not in paths:
                        paths.append(path)
    except OSError:
        for d in vendored:
            paths += sorted(p for p in glob.glob(os.path.join(d, "*")) if "blas" in os.path.basename(p).lower())
    return sorted(paths, key=lambda p: not any(p.startswith(d + os.sep) for d in vendored))


def _find_numpy_blas():
    reasons = []
    for path in _numpy_blas_paths():
        blas = _open(path)
        if blas is None:
            reasons.append(f"{os.path.basename(path)} is not an OpenBLAS")
        elif blas.parallel == 2:  # its thread count is OpenMP's, process-wide: ours to change only at a cost
            reasons.append(f"{os.path.basename(path)} is an OpenMP build")
        else:
            return blas, None
    return None, "; ".join(reasons) or "numpy maps no BLAS library"


def _find_scipy_openblas32():
    try:
        import scipy_openblas32
    except ImportError:
        return None, "scipy-openblas32 is not installed"
    libdir = scipy_openblas32.get_lib_dir()
    for path in sorted(glob.glob(os.path.join(libdir, "*.so*")) + glob.glob(os.path.join(libdir, "*.dylib"))):
        blas = _open(path)
        if blas is not None:
            return blas, None
    return None, f"no OpenBLAS in {libdir}"


def load_blas(core):
    """Hands the chosen BLAS to the C++ core; returns whether one was loaded (`info` says which)."""
    choice = os.environ.get("DYNGRAD_BLAS", "").strip().lower() or "auto"
    if choice not in _CHOICES + ("auto",):
        warn(f"DYNGRAD_BLAS={choice!r} is not one of {', '.join(_CHOICES)}; choosing automatically")
        choice = "auto"
    blas, reasons = None, []
    if choice in ("auto", "numpy"):
        blas, reason = _find_numpy_blas()
        source = "numpy"
        reasons.append(f"numpy's BLAS: {reason}")
    if blas is None and choice in ("auto", "scipy-openblas32"):
        blas, reason = _find_scipy_openblas32()
        source = "scipy-openblas32"
        reasons.append(reason)
    if blas is None:
        info.update(source=None, path=None, ilp64=None, config=None, shares_numpy_pool=False,
                    reason="DYNGRAD_BLAS=none" if choice == "none" else "; ".join(reasons))
        if choice == "auto":
            warn("dyngrad found no BLAS it can use (" + info["reason"] + "): matrix products use its own "
                 "slow loop. `pip install dyngrad[openblas32]` gives it one.")
        return False
    address = (lambda f: ctypes.cast(f, ctypes.c_void_p).value)
    core._set_blas(address(blas.sgemm), address(blas.dgemm), address(blas.set_threads), address(blas.get_threads),
                   blas.ilp64)
    core._blas_library = blas.lib  # keep the handle alive
    info.update(source=source, path=blas.path, ilp64=blas.ilp64, config=blas.config,
                shares_numpy_pool=source == "numpy", reason=None)
    return True
