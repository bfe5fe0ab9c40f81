"""dyngrad.backends: torch.backends' switches and availability queries. dyngrad computes on the CPU with its own
kernels: there is no cuDNN, MPS or CUDA; the cuDNN flags programs set are plain attributes with torch's defaults
and change nothing."""
from . import cuda, cudnn, mkldnn, mps, openmp  # noqa: F401
