"""`python -m dyngrad.bench`: the same workloads timed on the C++ engine, the pure-Python reference engine and
PyTorch (when installed), in one process, after checking that they agree.

    python -m dyngrad.bench             # default sizes, about two minutes on 2 cores
    python -m dyngrad.bench --quick     # a smoke run of seconds
    python -m dyngrad.bench --only gemm,op-overhead --engines cpp,torch

Each workload in workloads.py is a function of the engine module `dg`; runner.py checks and times them;
report.py prints the table and writes bench_results/latest.json (and a PNG chart when matplotlib is installed).
"""
from .cli import main  # noqa: F401
from .workloads import WORKLOADS, select  # noqa: F401
