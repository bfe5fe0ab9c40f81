"""The engine root's module __getattr__: the shared packages (nn, optim, utils, viz, bench, distributed, special,
linalg, cuda, backends, functional, profiler, random, distributions, testing, compiler, serialization, onnx, amp,
cpu, func, masked, fft, signal) and save/load are imported on first use, under the engine that asks (dyngrad.nn or
dyngrad.reference.nn)."""
import importlib

_ROOT = __name__.rpartition("._api.")[0]
SUBPACKAGES = ("nn", "optim", "utils", "viz", "bench", "distributed", "special", "linalg", "cuda", "backends",
               "functional", "profiler", "random", "distributions", "testing", "compiler", "serialization", "onnx",
               "amp", "cpu", "func", "masked", "fft", "signal")


def __getattr__(name):
    if name in SUBPACKAGES:
        return importlib.import_module(f"{_ROOT}.{name}")
    if name in ("save", "load"):
        return getattr(importlib.import_module(f"{_ROOT}.serialization"), name)
    raise AttributeError(f"module {_ROOT!r} has no attribute {name!r}")
