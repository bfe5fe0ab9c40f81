"""Feeds every public function of an engine hostile arguments; tests/test_hostile.py runs it in a subprocess, so a
crash kills this process and not pytest.

    python tests/hostile_driver.py --engine dyngrad --start 0 --progress P --report R [--stride N] [--list]

Every call is numbered; before each call its number and a description are written into the progress file P, so
when the process dies (a segfault, an abort, the per-call watchdog) the parent knows which call did it and
restarts the driver after it. At the end the report R (JSON) holds: calls tried, how many returned, how many raised
each exception type, and the "unclear" ones: exceptions that are not one of the types a user is promised
(TypeError, ValueError, RuntimeError, IndexError, MemoryError, NotImplementedError, OverflowError, OSError,
ZeroDivisionError) or that have an empty message.

Hostile arguments: non-tensors (None, str, object(), complex, ragged lists, dicts), wrong dtypes (int/bool tensors
where floats are expected, numpy float16/complex/object/str arrays), negative and huge dims and sizes (up to
2**64), shapes whose element count overflows 64 bits, out-of-range indices, NaN/Inf scalars and tensors,
zero-size and 0-d tensors, non-contiguous views, wrong devices ("cuda") and dtype objects. The address space is
capped (--memory-limit-gb) so that a size that is merely too big for memory must raise MemoryError instead of
swapping the machine to death.

Then size calls (issue 11): every window op (conv2d, max_pool2d, avg_pool2d) on a real 4-D image with each huge,
negative or odd int as padding, stride or kernel size, and every creation function and view with it as a size
(linspace, randperm, arange, eye, randint, full, zeros, expand, reshape); the C++ engine also gets each as its
thread count (set_num_threads, then a parallel kernel). Then every pooling op with a kernel larger than its input
(issue 23), with its backward.
Then write calls (issue 10): numbers that do not fit the dtype (int8 300, uint8 -256, float16 70000, 2**64, NaN into
an int) through every write (fill_, full, masked_fill, setitem, index_fill, where, clamp, tensor); every method also
runs on a float16 and a bfloat16 receiver.
After those come HOOK_PROGRAMS random hook programs (tests/hook_programs.py, issue 11): hooks on leaves and
non-leaves and node pre-hooks that register and remove hooks (their own handle too), retain_grad, collect
garbage, return gradients of the wrong dtype or shape, or call backward while backward runs.
"""
import argparse
import faulthandler
import importlib
import inspect
import json
import os
import random
import resource
import sys
import warnings

import numpy as np

from hook_programs import random_program, run_program

# AssertionError: torch's own type for some constructor checks (Hardtanh, MultiheadAttention, Embedding's
# padding_idx); dyngrad raises it there too, with a message naming the module. BufferError: the DLPack protocol's
# type for a tensor that cannot be exported (__dlpack__, to_dlpack).
CLEAR = (TypeError, ValueError, RuntimeError, IndexError, MemoryError, NotImplementedError, OverflowError,
         OSError, ZeroDivisionError, AssertionError, BufferError)
WATCHDOG_SECONDS = 20
HOOK_PROGRAMS = 6000

# State-changing functions we call, then undo; and names we never call (they would break the run itself).
SKIP = {"save", "load", "manual_seed", "set_default_dtype", "seed", "bench"}
DUNDERS = ["__add__", "__radd__", "__sub__", "__rsub__", "__mul__", "__rmul__", "__truediv__", "__rtruediv__",
           "__pow__", "__rpow__", "__matmul__", "__rmatmul__", "__neg__", "__abs__", "__getitem__", "__setitem__",
           "__iadd__", "__isub__", "__imul__", "__itruediv__", "__eq__", "__ne__", "__lt__", "__le__", "__gt__",
           "__ge__", "__len__", "__bool__", "__float__", "__int__", "__index__", "__repr__", "__array__",
           "__iter__", "__contains__", "__and__", "__or__", "__xor__", "__invert__", "__mod__", "__floordiv__"]


def read_only_array():
    a = np.ones((3, 4), np.float32)
    a.flags.writeable = False
    return a


def mmap_file():
    """A .npy file in the working directory (the test's tmp_path), for np.load(mmap_mode="r")."""
    path = os.path.abspath("hostile_mmap.npy")
    if not os.path.exists(path):
        np.save(path, np.ones((3, 4), np.float32))
    return path


def hostile_values(dg):
    """(description, factory) pairs; factories make fresh objects, since some calls mutate their arguments."""
    def t(fn):
        return fn

    values = [
        ("None", lambda: None),
        ("'abc'", lambda: "abc"),
        ("object()", lambda: object()),
        ("1.5", lambda: 1.5),
        ("-1", lambda: -1),
        ("7", lambda: 7),
        ("True", lambda: True),
        ("2**31", lambda: 2 ** 31),
        ("2**63-1", lambda: 2 ** 63 - 1),
        ("2**64", lambda: 2 ** 64),
        ("nan", lambda: float("nan")),
        ("-inf", lambda: float("-inf")),
        ("1j", lambda: 1j),
        ("[1, 'a']", lambda: [1, "a"]),
        ("[[1, 2], [3]]", lambda: [[1, 2], [3]]),
        ("()", lambda: ()),
        ("(-1, 3)", lambda: (-1, 3)),
        ("(2**32, 2**32)", lambda: (2 ** 32, 2 ** 32)),
        ("(2**62, 4)", lambda: (2 ** 62, 4)),
        ("(3, 2**40)", lambda: (3, 2 ** 40)),
        ("[10**9]", lambda: [10 ** 9]),
        ("np.float16 (3, 4)", lambda: np.ones((3, 4), np.float16)),
        ("np.complex (3,)", lambda: np.ones(3, np.complex128)),
        ("np.object (2,)", lambda: np.array([None, 1], dtype=object)),
        # arrays no tensor can share (from_numpy copied them silently once)
        ("np big-endian (3, 4)", lambda: np.ones((3, 4), ">f4")),
        ("np negative stride (4,)", lambda: np.arange(4.0)[::-1]),
        ("np.str (2,)", lambda: np.array(["x", "y"])),
        ("np.int64 scalar 2**40", lambda: np.int64(2 ** 40)),
        ("float32 (3, 4)", t(lambda: dg.ones(3, 4))),
        ("float64 (4, 3)", t(lambda: dg.ones(4, 3, dtype=dg.float64))),
        ("int64 (3, 4) 10**12", t(lambda: dg.full((3, 4), 10 ** 12, dtype=dg.int64))),
        ("int64 [0, 5, 2**40]", t(lambda: dg.tensor([0, 5, 2 ** 40]))),
        ("bool (3, 4)", t(lambda: dg.ones(3, 4, dtype=dg.bool))),
        ("empty (0,)", t(lambda: dg.zeros(0))),
        ("empty (0, 3)", t(lambda: dg.zeros(0, 3))),
        ("0-d 2.0", t(lambda: dg.tensor(2.0))),
        ("nan (3, 4)", t(lambda: dg.full((3, 4), float("nan")))),
        ("transposed (4, 3).T", t(lambda: dg.ones(4, 3).T)),
        ("expanded (1,)->(3, 4)", t(lambda: dg.ones(1).expand(3, 4))),
        # memory that must not be written (issue 11): a read-only array, and a file mapped read-only
        ("read-only numpy (3, 4)", t(lambda: dg.from_numpy(read_only_array()))),
        ("mmap read-only (3, 4)", t(lambda: dg.from_numpy(np.load(mmap_file(), mmap_mode="r")))),
        ("requires_grad (3, 4)", t(lambda: dg.ones(3, 4, requires_grad=True))),
        ("5-d (1, 2, 1, 2, 1)", t(lambda: dg.ones(1, 2, 1, 2, 1))),
        ("'cuda'", lambda: "cuda"),
        ("dg.int64", lambda: dg.int64),
        ("np.float16", lambda: np.float16),
        ("lambda", lambda: (lambda *a, **k: None)),
    ]
    return values


def good_tensor(dg):
    return dg.ones(3, 4, requires_grad=False) * 0.5


def targets(dg):
    """(name, fn) for every public callable: module functions, nn.functional, autograd, nn/optim classes, and
    Tensor methods bound to a fresh tensor (a factory, so each call gets its own)."""
    out = []
    for name in sorted(dir(dg)):
        if name.startswith("_") or name in SKIP:
            continue
        obj = getattr(dg, name)
        if callable(obj) and not inspect.ismodule(obj):
            out.append((f"dg.{name}", lambda obj=obj: obj))
    F = dg.nn.functional
    for name in sorted(dir(F)):
        obj = getattr(F, name)
        if not name.startswith("_") and inspect.isfunction(obj) or type(obj).__name__ == "builtin_function_or_method":
            if not name.startswith("_"):
                out.append((f"F.{name}", lambda obj=obj: obj))
    for space, prefix in ((dg.fft, "fft"), (dg.signal.windows, "signal.windows")):
        for name in sorted(space.__all__):
            out.append((f"{prefix}.{name}", lambda obj=getattr(space, name): obj))
    for name in ("grad", "backward", "gradcheck", "gradgradcheck", "graph_stats"):
        if hasattr(dg.autograd, name):
            out.append((f"autograd.{name}", lambda name=name: getattr(dg.autograd, name)))
    for pkg, base in ((dg.nn, dg.nn.Module), (dg.optim, dg.optim.Optimizer)):
        for name in sorted(dir(pkg)):
            obj = getattr(pkg, name)
            if inspect.isclass(obj) and issubclass(obj, base) and obj is not base:
                out.append((f"{pkg.__name__.split('.')[-1]}.{name}", lambda obj=obj: obj))
    method_names = sorted(n for n in dir(dg.Tensor) if not n.startswith("_") and n not in SKIP)
    method_names += [n for n in DUNDERS if hasattr(dg.Tensor, n)]
    for name in method_names:
        out.append((f"Tensor.{name}", lambda name=name: getattr(good_tensor(dg), name)))
    return out


def calls(dg):
    """Yields (description, thunk) for every call, in a fixed order."""
    hostile = hostile_values(dg)
    receivers = [("float32 (3, 4)", lambda: good_tensor(dg))] + [h for h in hostile if h[0] in (
        "int64 (3, 4) 10**12", "bool (3, 4)", "empty (0, 3)", "0-d 2.0", "nan (3, 4)", "transposed (4, 3).T",
        "expanded (1,)->(3, 4)", "requires_grad (3, 4)", "5-d (1, 2, 1, 2, 1)", "read-only numpy (3, 4)",
        "mmap read-only (3, 4)")]
    # the 16-bit floats as receivers too: every method on a float16 and a bfloat16 tensor (issue 10)
    receivers += [("float16 (3, 4)", lambda: dg.ones(3, 4, dtype=dg.float16) * 0.5),
                  ("bfloat16 (3, 4)", lambda: dg.ones(3, 4, dtype=dg.bfloat16) * 0.5)]
    for name, get in targets(dg):
        patterns = [((), {})]
        patterns += [((h,), {}) for h in hostile]
        patterns += [((("good", lambda: good_tensor(dg)), h), {}) for h in hostile]
        if not name.startswith("Tensor."):  # (a method's receiver is already the good first argument)
            patterns += [((h, ("good", lambda: good_tensor(dg))), {}) for h in hostile]
            patterns += [((("good", lambda: good_tensor(dg)),), {"dim": h}) for h in hostile[:20]]
            patterns += [((("3", lambda: 3), ("4", lambda: 4)), {"dtype": h}) for h in hostile[:20]]
        for args, kwargs in patterns:
            desc = f"{name}({', '.join(d for d, _ in args)}" \
                   f"{''.join(f', {k}={d}' for k, (d, _) in kwargs.items())})"

            def thunk(get=get, args=args, kwargs=kwargs):
                return get()(*[f() for _, f in args], **{k: f() for k, (_, f) in kwargs.items()})
            yield desc, thunk
        if name.startswith("Tensor."):
            method = name.split(".", 1)[1]
            for rdesc, make in receivers[1:]:
                for args in [()] + [(h,) for h in hostile if h[0] in ("None", "-1", "2**63-1", "nan", "7")]:
                    desc = f"({rdesc}).{method}({', '.join(d for d, _ in args)})"

                    def thunk(make=make, method=method, args=args):
                        return getattr(make(), method)(*[f() for _, f in args])
                    yield desc, thunk
    yield from size_calls(dg)
    yield from write_calls(dg)
    for seed in range(HOOK_PROGRAMS):
        def thunk(seed=seed):
            prog = random_program(random.Random(seed), hostile=True)
            run_program(dg, prog, hostile=True, reraise=True)
        yield f"hook program {seed}: {random_program(random.Random(seed), hostile=True)}", thunk


HUGE = [("2**31", 2 ** 31), ("2**32+1", 2 ** 32 + 1), ("2**40", 2 ** 40), ("2**61", 2 ** 61), ("2**62", 2 ** 62),
        ("2**63-1", 2 ** 63 - 1), ("2**63", 2 ** 63), ("-2**63", -2 ** 63), ("-1", -1), ("0", 0), ("3", 3),
        ("100000", 100000)]


def size_calls(dg):
    """Huge sizes where they become geometry, element counts and thread counts (a padding of 2**61 crashed)."""
    F = dg.nn.functional
    image = lambda: dg.ones(1, 2, 5, 5)  # noqa: E731
    weight = lambda: dg.ones(3, 2, 2, 2)  # noqa: E731
    sized = {
        "conv2d(x, w, padding={h})": lambda h: F.conv2d(image(), weight(), padding=h),
        "conv2d(x, w, padding=({h}, 1))": lambda h: F.conv2d(image(), weight(), padding=(h, 1)),
        "conv2d(x, w, stride={h})": lambda h: F.conv2d(image(), weight(), stride=h),
        "conv2d(x, w, stride={h}, padding={h})": lambda h: F.conv2d(image(), weight(), stride=h, padding=h),
        "max_pool2d(x, {h})": lambda h: F.max_pool2d(image(), h),
        "max_pool2d(x, {h}, padding={h} // 2)": lambda h: F.max_pool2d(image(), h, padding=h // 2),
        "max_pool2d(x, 2, stride={h}, padding=1)": lambda h: F.max_pool2d(image(), 2, stride=h, padding=1),
        "avg_pool2d(x, ({h}, 2), padding=({h} // 2, 1))":
            lambda h: F.avg_pool2d(image(), (h, 2), padding=(h // 2, 1)),
        "linspace(0, 1, {h})": lambda h: dg.linspace(0, 1, h),
        "randperm({h})": lambda h: dg.randperm(h),
        "arange({h})": lambda h: dg.arange(h),
        "arange(-{h}, {h}, 3)": lambda h: dg.arange(-h, h, 3),
        "arange(0.0, {h}, 0.5)": lambda h: dg.arange(0.0, h, 0.5),
        "eye({h})": lambda h: dg.eye(h),
        "randint(0, {h}, (3,))": lambda h: dg.randint(0, h, (3,)),
        "randint({h} - 10, {h}, (3,))": lambda h: dg.randint(h - 10, h, (3,)),
        "full(({h},), 1.0)": lambda h: dg.full((h,), 1.0),
        "full((3,), {h})": lambda h: dg.full((3,), h),
        "zeros({h}, 4, 2)": lambda h: dg.zeros(h, 4, 2),
        "ones(1).expand({h}, 4)": lambda h: dg.ones(1).expand(h, 4),
        "ones(4).reshape({h}, -1)": lambda h: dg.ones(4).reshape(h, -1),
        "zeros(0).reshape({h}, 4, 0)": lambda h: dg.zeros(0).reshape(h, 4, 0),
        "int tensor + {h}": lambda h: dg.tensor([1, 2]) + h,
        "int tensor == {h}": lambda h: dg.tensor([1, 2]) == h,
        "int tensor.fill_({h})": lambda h: dg.zeros(2, dtype=dg.int64).fill_(h),
        "clamp(int tensor, {h}, {h})": lambda h: dg.tensor([1, 2]).clamp(h, h),
    }
    set_threads = getattr(getattr(dg, "_C", None), "set_num_threads", None)
    if set_threads is not None:
        default = dg._C.get_num_threads()

        def threads(h):
            try:
                set_threads(h)
                return (dg.ones(10 ** 6) * 2).sum()
            finally:
                set_threads(default)
        sized["set_num_threads({h}), then a kernel"] = threads
    for name, fn in sized.items():
        for hdesc, h in HUGE:
            yield name.replace("{h}", hdesc), lambda fn=fn, h=h: fn(h)
    yield from pool_calls(dg)


def pool_calls(dg):
    """Every pooling op with a kernel (or an adaptive output) larger than its input (issue 23: max_pool2d read the
    next channel, or far outside its input, when the kernel was larger), with padding, stride, dilation and
    ceil_mode, then a backward; the values are checked against the engines and torch in tests/test_pool_sweep.py."""
    F = dg.nn.functional

    def image(n, size):
        return dg.arange(2 * 2 * size ** n, dtype=dg.float32).reshape((2, 2) + (size,) * n).requires_grad_()

    def run(make):
        out = make()
        (out[0] if isinstance(out, tuple) else out).sum().backward()
        return out
    for n in (1, 2, 3):
        for size, k in ((1, 2), (1, 3), (2, 5), (3, 2 ** 20)):
            for pad, stride, dil, ceil in ((0, 1, 1, False), (k // 2, 2, 1, True), (k // 2, 1, 2, False),
                                           (k // 2, None, 1, True)):
                geometry = f"{n}d on {size}s, kernel {k}, padding {pad}, stride {stride}, dilation {dil}, ceil {ceil}"
                maxp, avgp, lpp = (getattr(F, f"{kind}_pool{n}d") for kind in ("max", "avg", "lp"))
                yield f"max_pool {geometry}", lambda m=maxp, a=(n, size, k, pad, stride, dil, ceil): run(
                    lambda: m(image(*a[:2]), a[2], a[4], a[3], a[5], a[6], return_indices=True))
                yield f"avg_pool {geometry}", lambda m=avgp, a=(n, size, k, pad, stride, ceil): run(
                    lambda: m(image(*a[:2]), a[2], a[4], a[3], a[5], False))
                yield f"lp_pool {geometry}", lambda m=lpp, a=(n, size, k, stride, ceil): run(
                    lambda: m(image(*a[:2]), 2, a[2], a[3], a[4]))
            for kind in ("max", "avg"):
                yield f"adaptive_{kind}_pool{n}d({size}s, {2 * k + 1})", lambda f=getattr(
                    F, f"adaptive_{kind}_pool{n}d"), a=(n, size, 2 * min(k, 9) + 1): run(lambda: f(image(*a[:2]), a[2]))
        if n > 1:
            for k, out in ((3, 1), (2, 2), (2 ** 20, 1)):
                yield f"fractional_max_pool{n}d(2s, {k}, output {out})", lambda f=getattr(
                    F, f"fractional_max_pool{n}d"), a=(n, k, out): run(lambda: f(image(a[0], 2), a[1], output_size=a[2]))


WRITTEN = [("300", 300), ("-256", -256), ("70000", 70000), ("2**31", 2 ** 31), ("2**63", 2 ** 63), ("2**64", 2 ** 64),
           ("-2**63-1", -2 ** 63 - 1), ("nan", float("nan")), ("-inf", float("-inf")), ("1e300", 1e300),
           ("65520.0", 65520.0), ("-0.5", -0.5), ("np.int64(300)", np.int64(300))]


def write_calls(dg):
    """Numbers that do not fit the dtype they are written into (issue 10: int8 300 wrapped silently), through every
    write: each must be written or refused with a clear error, never crash."""
    mask = lambda: dg.tensor([True, False, True])  # noqa: E731

    def setitem(t, idx, v):
        t[idx] = v
        return t
    writes = {
        "zeros(3, {d}).fill_({v})": lambda d, v: dg.zeros(3, dtype=d).fill_(v),
        "full((3,), {v}, dtype={d})": lambda d, v: dg.full((3,), v, dtype=d),
        "zeros(3, {d}).masked_fill(mask, {v})": lambda d, v: dg.zeros(3, dtype=d).masked_fill(mask(), v),
        "zeros(3, {d})[0] = {v}": lambda d, v: setitem(dg.zeros(3, dtype=d), 0, v),
        "zeros(3, {d})[mask] = {v}": lambda d, v: setitem(dg.zeros(3, dtype=d), mask(), v),
        "zeros(3, {d})[[0, 2]] = {v}": lambda d, v: setitem(dg.zeros(3, dtype=d), [0, 2], v),
        "zeros(3, {d}).index_fill(0, [0], {v})":
            lambda d, v: dg.zeros(3, dtype=d).index_fill(0, dg.tensor([0]), v),
        "where(mask, zeros(3, {d}), {v})": lambda d, v: dg.where(mask(), dg.zeros(3, dtype=d), v),
        "zeros(3, {d}).clamp({v})": lambda d, v: dg.zeros(3, dtype=d).clamp(v),
        "tensor([{v}], dtype={d})": lambda d, v: dg.tensor([v], dtype=d),
        "zeros(3, {d}) - {v}": lambda d, v: dg.zeros(3, dtype=d) - v,
        # a 0-d tensor next to an unfitting number (issue 23: it ranks below 0-d tensors, torch's wrapped number)
        "tensor(7, {d}) / {v}": lambda d, v: dg.tensor(7, dtype=d) / v,
        "{v} / tensor(7, {d})": lambda d, v: v / dg.tensor(7, dtype=d),
        "tensor(7, {d}) * {v}": lambda d, v: dg.tensor(7, dtype=d) * v,
        "tensor(7, {d}).add_({v})": lambda d, v: dg.tensor(7, dtype=d).add_(v),
        "add(tensor(7, {d}), {v}, alpha=2)": lambda d, v: dg.add(dg.tensor(7, dtype=d), v, alpha=2),
        "tensor(7, {d}) < {v}": lambda d, v: dg.tensor(7, dtype=d) < v,
    }
    for name, fn in writes.items():
        for dname in ("bool", "uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16", "float32"):
            for vdesc, v in WRITTEN:
                yield name.replace("{d}", dname).replace("{v}", vdesc), \
                    lambda fn=fn, d=getattr(dg, dname), v=v: fn(d, v)


def touch(dg, result):
    """Reads every element of a returned tensor (a tensor over freed or too-small memory shows up here)."""
    items = result if isinstance(result, (tuple, list)) else [result]
    for r in items[:8]:
        if isinstance(r, dg.Tensor) and 0 < r.numel() <= 10 ** 6:
            v = r.detach()
            np.asarray(v.float() if v.dtype is dg.bfloat16 else v).sum()    # (numpy has no bfloat16)
            repr(r)


def reset(dg):
    dg.autograd.set_grad_enabled(True) if hasattr(dg.autograd, "set_grad_enabled") else None


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--engine", default="dyngrad")
    parser.add_argument("--start", type=int, default=0)
    parser.add_argument("--progress", required=True)
    parser.add_argument("--report", required=True)
    parser.add_argument("--memory-limit-gb", type=float, default=2)
    parser.add_argument("--stride", type=int, default=1, help="run only every stride-th call (a sample)")
    parser.add_argument("--list", action="store_true", help="print the numbered calls and exit")
    opts = parser.parse_args()

    if not os.environ.get("DYNGRAD_SANITIZED"):  # ASan reserves terabytes of shadow memory; it caps sizes itself
        limit = int(opts.memory_limit_gb * 2 ** 30)
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    warnings.simplefilter("ignore")
    dg = importlib.import_module(opts.engine)
    faulthandler.enable()
    progress = os.open(opts.progress, os.O_WRONLY | os.O_CREAT, 0o644)
    outcomes, unclear, tried = {}, [], 0
    for index, (desc, thunk) in enumerate(calls(dg)):
        if opts.list:
            print(index, desc)
            continue
        if index < opts.start or index % opts.stride:
            continue
        os.pwrite(progress, f"{index}\t{desc}".encode()[:1000].ljust(1024), 0)
        faulthandler.dump_traceback_later(WATCHDOG_SECONDS, exit=True)
        tried += 1
        try:
            touch(dg, thunk())
            kind = "returned"
        except CLEAR as exc:
            kind = type(exc).__name__
            if not str(exc).strip():
                unclear.append(f"{desc}: {kind} with an empty message")
        except Exception as exc:  # noqa: BLE001  what we are here to count
            kind = type(exc).__name__
            unclear.append(f"{desc}: {kind}: {str(exc)[:200]}")
        finally:
            reset(dg)
        outcomes[kind] = outcomes.get(kind, 0) + 1
    faulthandler.cancel_dump_traceback_later()
    with open(opts.report, "w") as f:
        json.dump({"tried": tried, "outcomes": outcomes, "unclear": unclear}, f)


if __name__ == "__main__":
    sys.exit(main())
