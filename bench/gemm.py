"""float32 1024 x 1024 matmul, forward + backward (c = a @ b, then dA = g b^T and dB = a^T g), in GFLOPS and in
milliseconds per call, for the C++ engine, PyTorch (when installed), the reference engine, and numpy doing the same
three products. Writes bench_results/gemm.json. `--full` uses 2048 x 2048.

    python bench/gemm.py [--quick | --full] [--engines cpp,torch]
"""
import sys

import _path  # noqa: F401
from dyngrad.bench import main

if __name__ == "__main__":
    sys.exit(main(["--only", "gemm", "--json", "bench_results/gemm.json", *sys.argv[1:]]))
