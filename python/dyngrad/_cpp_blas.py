"""Finds the OpenBLAS that scipy-openblas32 ships and hands its sgemm/dgemm to the C++ core.

Loading it at run time (instead of linking at build time) keeps the build free of any BLAS and lets pip resolve
the library like any other dependency.
"""
import ctypes
import glob
import os


def load_blas(core):
    try:
        import scipy_openblas32
    except ImportError:  # the core then multiplies matrices with its own (slow) loop
        return False
    libdir = scipy_openblas32.get_lib_dir()
    candidates = sorted(glob.glob(os.path.join(libdir, "*.so*")) + glob.glob(os.path.join(libdir, "*.dylib")))
    if not candidates:
        return False
    lib = ctypes.CDLL(candidates[0], mode=ctypes.RTLD_LOCAL)
    prefix = "scipy_"  # scipy-openblas32 prefixes every symbol so that it never clashes with numpy's own copy
    sgemm = getattr(lib, prefix + "cblas_sgemm")
    dgemm = getattr(lib, prefix + "cblas_dgemm")
    set_threads = getattr(lib, prefix + "openblas_set_num_threads", None)
    address = (lambda f: ctypes.cast(f, ctypes.c_void_p).value if f is not None else 0)
    core._set_blas(address(sgemm), address(dgemm), address(set_threads))
    core._blas_library = lib  # keep the handle alive
    return True
