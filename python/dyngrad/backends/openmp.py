"""torch.backends.openmp: dyngrad's kernels use their own thread pool (dyngrad.set_num_threads), not OpenMP."""


def is_available():
    return False
