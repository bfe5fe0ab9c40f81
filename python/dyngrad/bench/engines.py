"""Which engines take part (the C++ engine, the reference engine, PyTorch when importable) and what machine ran them."""
import datetime
import importlib
import os
import platform
import subprocess
import time

import numpy as np

ENGINE_MODULES = {"dyngrad": "dyngrad", "reference": "dyngrad.reference", "pytorch": "torch"}
ALIASES = {"cpp": "dyngrad", "c++": "dyngrad", "ref": "reference", "torch": "pytorch"}
NUMPY = "numpy"  # the by-hand baseline; not an engine, but measured beside them


def engine_names(spec):
    """'cpp,reference,torch' -> ['dyngrad', 'reference', 'pytorch'] (the display names), in the given order."""
    names = []
    for raw in spec.split(","):
        name = ALIASES.get(raw.strip().lower(), raw.strip().lower())
        if name not in ENGINE_MODULES:
            raise ValueError(f"unknown engine '{raw}'; choose from: cpp, reference, torch")
        if name not in names:
            names.append(name)
    return names


def load_engines(names):
    """Imports each engine; returns ({name: module}, {name: why it is missing}). PyTorch is optional, never required."""
    modules, missing = {}, {}
    for name in names:
        try:
            modules[name] = importlib.import_module(ENGINE_MODULES[name])
        except ImportError as e:
            missing[name] = "not installed" if name == "pytorch" else f"cannot be imported: {e}"
    return modules, missing


def _cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def machine_line():
    """The machine a bench ran on, in one line to print beside its timings: the CPU model (lscpu's "Model name"),
    the core count and the load average (on a machine shared with other jobs, timings mean little without it)."""
    load = " ".join(f"{v:.2f}" for v in os.getloadavg()) if hasattr(os, "getloadavg") else "unknown"
    return f"{_cpu_model()}, {os.cpu_count()} cores, load average {load}"


def best_seconds(fn, repeat, warmup=1):
    """The fastest of `repeat` timed calls of fn after `warmup` untimed ones (the small benches in bench/)."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def _git_commit():
    here = os.path.dirname(os.path.abspath(__file__))
    try:
        out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=here, capture_output=True, text=True,
                             timeout=5)
        return out.stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        return None


def _numpy_blas():
    try:
        blas = np.__config__.CONFIG["Build Dependencies"]["blas"]
        return f"{blas.get('name')} {blas.get('version')}"
    except (AttributeError, KeyError, TypeError):
        return None


def machine_info(modules):
    """Everything needed to tell two result files apart: date, machine, versions, thread counts, load."""
    info = {
        "date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
        "cpu": _cpu_model(),
        "cores": os.cpu_count(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "numpy": np.__version__,
        "numpy_blas": _numpy_blas(),
        "load_average": list(os.getloadavg()) if hasattr(os, "getloadavg") else None,
        "git_commit": _git_commit(),
    }
    if "dyngrad" in modules or "reference" in modules:
        import dyngrad
        info["dyngrad"] = getattr(dyngrad, "__version__", None)
    if "pytorch" in modules:
        torch = modules["pytorch"]
        info["torch"] = torch.__version__
        info["torch_threads"] = torch.get_num_threads()
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "OPENBLAS_CORETYPE"):
        if os.environ.get(var):
            info[var] = os.environ[var]
    return info
