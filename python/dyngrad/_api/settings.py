"""Process-wide settings: the number of threads the engine's kernels (and its BLAS) use."""
from .. import _C


def get_num_threads():
    """Threads used by the engine's large kernels and matrix products."""
    return _C.get_num_threads()


def set_num_threads(n):
    """Threads for the engine's large kernels and matrix products (1: run on the calling thread).

    On the C++ engine this also sets the BLAS's threads, as torch.set_num_threads does for PyTorch's: the BLAS is
    numpy's own OpenBLAS (one pool per process, shared with numpy: Note [One BLAS]), so numpy's products then use
    `n` threads too (at most one per core). dyngrad's own products run that BLAS on one thread per call and split
    large ones over its kernel threads (Note [Deterministic matmul]). The reference engine leaves numpy's BLAS as
    it is."""
    if isinstance(n, bool) or not isinstance(n, int):
        raise RuntimeError(f"set_num_threads expects an int, but got {type(n).__name__}")
    if n < 1:
        raise RuntimeError(f"set_num_threads expects a positive integer, got {n}")
    _C.set_num_threads(n)
