"""The whole comparison: every workload on the C++ engine, the reference engine and PyTorch (when installed).

    python bench/bench_engines.py [--quick | --full] [--only NAME[,NAME]] [--engines cpp,reference,torch]

Same as `python -m dyngrad.bench`; see `--help`.
"""
import sys

import _path  # noqa: F401
from dyngrad.bench import main

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
