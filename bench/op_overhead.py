"""Per-op overhead on a 1-element tensor: `y = tanh(y * a + b)` repeated, forward only and forward + backward,
in microseconds per op, for the C++ engine, PyTorch (when installed), the reference engine, and numpy doing the same
work by hand. Writes bench_results/op_overhead.json.

    python bench/op_overhead.py [--quick | --full] [--engines cpp,torch]
"""
import sys

import _path  # noqa: F401
from dyngrad.bench import main

if __name__ == "__main__":
    sys.exit(main(["--only", "op-overhead", "--json", "bench_results/op_overhead.json", *sys.argv[1:]]))
