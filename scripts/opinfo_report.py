"""PyTorch's own op tests on dyngrad: every OpInfo of torch's `op_db`, every sample input, forward and backward.

    PYTHONPATH=python python scripts/opinfo_report.py                  # both dtypes, writes docs/opinfo.md
    PYTHONPATH=python python scripts/opinfo_report.py --engine reference --json /tmp/ref.json --no-doc
    PYTHONPATH=python python scripts/opinfo_report.py --only add,linalg.slogdet --verbose
    PYTHONPATH=python python scripts/opinfo_report.py --complex     # complex64/complex128, docs/opinfo_complex.md
    PYTHONPATH=python python scripts/opinfo_report.py --forward-ad  # jvp vs torch.func.jvp, docs/opinfo_forward_ad.md
    PYTHONPATH=python python scripts/opinfo_report.py --forward-ad --complex   # complex128, ..._forward_ad_complex.md

Needs torch (2.13) and its test package's `expecttest`. Each OpInfo is resolved to a dyngrad callable by its name
path (`torch.X`, `nn.functional.X`, `linalg.X`, `special.X`, `masked.X`, `fft.X`, or a Tensor method); an OpInfo
whose `op` is a lambda of torch's test module is run with that lambda's `torch` bound to dyngrad, so the
argument shuffling it does is the same on both sides. Every sample of `op.sample_inputs` in float32 and float64
(or, for an op without floating dtypes, its first integer/bool dtype) is converted to dyngrad through numpy and
compared with torch: output structure, shape, dtype and values; then, where the OpInfo supports autograd, the
vector-Jacobian product with one fixed cotangent against `torch.autograd.grad`. Ops whose output torch itself
does not reproduce between two calls (random ops) are compared by shape and dtype only.

Note [OpInfo harness isolation]: a crash (a segfault is a bug we want reported, not a dead run) or a hang must not
stop the run, and a process per OpInfo costs ~8 s of imports each (90 min for 677). So a few worker processes take
interleaved slices of the list and print one JSON line per OpInfo; the parent reads them with a deadline per
OpInfo and, on a crash or timeout, records it against the OpInfo being run and restarts the worker after it.

Note [Complex OpInfo samples]: `--complex` samples every OpInfo whose CPU dtypes include complex64 or complex128 in
those dtypes instead (the fft.* OpInfos of real-only transforms such as rfft have none and are not sampled). Values
are compared as complex numbers (numpy's isclose on complex: |a - e| <= atol + rtol |e|) with the tolerances of
the real dtype of the same width, and the backward pass draws a complex cotangent for a complex output, so the
vector-Jacobian product compared is torch's conjugate-Wirtinger one.

`--forward-ad` checks forward mode instead: Note [Forward-mode OpInfo check].
"""
import argparse
import collections
import json
import math
import os
import re
import select
import subprocess
import sys
import time
import types

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOC = os.path.join(ROOT, "docs", "opinfo.md")
DOC_COMPLEX = os.path.join(ROOT, "docs", "opinfo_complex.md")
DOC_FORWARD = os.path.join(ROOT, "docs", "opinfo_forward_ad.md")
DOC_FORWARD_COMPLEX = os.path.join(ROOT, "docs", "opinfo_forward_ad_complex.md")

# (forward rtol, atol), (backward rtol, atol) per dtype name. float64 forward is torch.testing.assert_close's
# default; float32 kernels differ from torch's in summation order and libm, so float32 is looser than that default
# (1.3e-6, 1e-5), and a vector-Jacobian product, a sum over many terms, looser again.
TOLERANCES = {
    "float32": ((1e-4, 1e-5), (1e-3, 1e-4)),
    "float64": ((1e-7, 1e-7), (1e-6, 1e-6)),
}
TOLERANCES["complex64"] = TOLERANCES["float32"]
TOLERANCES["complex128"] = TOLERANCES["float64"]
COMPLEX = os.environ.get("DYNGRAD_OPINFO_COMPLEX") == "1"  # --complex; the workers inherit it
FORWARD = os.environ.get("DYNGRAD_OPINFO_FORWARD") == "1"  # --forward-ad; the workers inherit it
INTEGER_DTYPES = ("int64", "int32", "uint8", "bool")


# --------------------------------------------------------------------------------------------------- selection

def import_op_db():
    # torch's common_methods_invocations builds CUDA/ROCm tables on import; keep its warnings off the report
    import warnings
    warnings.filterwarnings("ignore")
    from torch.testing._internal.common_methods_invocations import op_db
    return op_db


def sampled_dtypes(opinfo):
    """The dtypes an OpInfo is sampled in: float32/float64 where torch supports them on the CPU, otherwise the
    first integer dtype it supports (bitwise ops, bincount, the index factories); None for complex-only ops."""
    import torch
    supported = opinfo.supported_dtypes("cpu")
    if COMPLEX:  # Note [Complex OpInfo samples]
        return [d for d in (torch.complex64, torch.complex128) if d in supported] or None
    floats = [d for d in (torch.float32, torch.float64) if d in supported]
    if floats:
        return floats
    for name in INTEGER_DTYPES:
        if getattr(torch, name) in supported:
            return [getattr(torch, name)]
    return None


def selected(op_db):
    """(index, OpInfo) for every OpInfo sampled: private aten entry points (`torch.ops.aten.*`, `torch._*`,
    jiterator CUDA kernels) and complex-only ops are not part of the public surface."""
    out = []
    for i, opinfo in enumerate(op_db):
        if opinfo.name.startswith(("torch.", "jiterator_")) or sampled_dtypes(opinfo) is None:
            continue
        out.append((i, opinfo))
    return out


def opinfo_id(opinfo):
    return opinfo.name + ("." + opinfo.variant_test_name if opinfo.variant_test_name else "")


# -------------------------------------------------------------------------------------------------- resolution

class Unresolved(Exception):
    pass


def resolve(opinfo, dg):
    """The dyngrad callable standing for `opinfo.op`, or raise Unresolved naming what is missing."""
    import torch
    op = opinfo.op
    if is_test_code(op):
        return rebind(op, dg)  # torch's test lambda, with its `torch` being dyngrad
    if isinstance(op, (types.MethodDescriptorType, types.WrapperDescriptorType)) or (
            isinstance(op, types.FunctionType) and op.__module__ == "torch._tensor"):
        return method_caller(opinfo.name, dg)
    path = opinfo.name.split(".")
    target = dg
    for part in path:
        if not hasattr(target, part):
            if len(path) == 1 and opinfo.method_variant is not None:
                return method_caller(opinfo.name, dg)
            raise Unresolved(f"dyngrad.{opinfo.name}")
        target = getattr(target, part)
    if not callable(target):
        raise Unresolved(f"dyngrad.{opinfo.name} (not callable)")
    return target


def is_test_code(fn):
    """A function of torch's OpInfo definitions (not of its test utilities: wrapper_set_seed must keep torch's
    seeding and dispatch modes)."""
    return isinstance(fn, types.FunctionType) and (fn.__module__ or "").startswith(
        ("torch.testing._internal.common_methods_invocations", "torch.testing._internal.opinfo.definitions"))


def rebind(fn, dg, memo=None):
    """A function of torch's test code run with `torch` (and `F`) meaning dyngrad: its globals are copied with
    those two names replaced, and the test-code functions it reaches through its globals and closure cells are
    rebound the same way (svd's output_process_fn_grad calls a local `uniformize`)."""
    memo = {} if memo is None else memo
    if id(fn) in memo:
        return memo[id(fn)] or fn  # None: being rebound further up (a recursive helper keeps torch's)
    memo[id(fn)] = None
    env = dict(fn.__globals__)
    env["torch"] = dg
    env["F"] = dg.nn.functional
    for name in global_names(fn.__code__):
        if is_test_code(env.get(name)):
            env[name] = rebind(env[name], dg, memo)
    cells = None
    if fn.__closure__:
        cells = tuple(types.CellType(rebind(c.cell_contents, dg, memo)) if is_test_code(cell_value(c))
                      else c for c in fn.__closure__)
    out = types.FunctionType(fn.__code__, env, fn.__name__, fn.__defaults__, cells)
    out.__kwdefaults__ = fn.__kwdefaults__
    memo[id(fn)] = out
    return out


def cell_value(cell):
    try:
        return cell.cell_contents
    except ValueError:  # an empty cell
        return None


def global_names(code):
    names = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= global_names(const)
    return names


def method_caller(name, dg):
    if not hasattr(dg.Tensor, name):
        raise Unresolved(f"dyngrad.Tensor.{name}")

    def call(self, *args, **kwargs):
        return getattr(self, name)(*args, **kwargs)
    return call


# -------------------------------------------------------------------------------------------------- conversion

class Unconvertible(Exception):
    pass


def to_dg(value, dg, leaves, torch_leaves):
    """A sample's argument with every torch tensor as a dyngrad tensor (a leaf where torch's requires grad)."""
    import numpy as np
    import torch
    if isinstance(value, torch.Tensor):
        if value.dtype not in (torch.float32, torch.float64, torch.complex64, torch.complex128, torch.int64,
                               torch.int32, torch.int16, torch.int8, torch.uint8, torch.bool):
            raise Unconvertible(f"input dtype {value.dtype}")
        if value.layout != torch.strided:
            raise Unconvertible(f"input layout {value.layout}")
        array = np.array(value.detach().numpy(), copy=True)
        out = dg.tensor(array, requires_grad=bool(value.requires_grad))
        if value.requires_grad:
            leaves.append(out)
            torch_leaves.append(value)
        return out
    if isinstance(value, torch.dtype):
        name = str(value).split(".")[1]
        if not hasattr(dg, name):
            raise Unconvertible(f"dtype argument {value}")
        return getattr(dg, name)
    if isinstance(value, torch.device):
        return str(value)
    if isinstance(value, torch.Size):
        return tuple(value)
    if isinstance(value, torch.memory_format):
        name = str(value).split(".")[1]
        if not hasattr(dg, name):
            raise Unconvertible(f"memory_format {value}")
        return getattr(dg, name)
    if isinstance(value, torch.layout):
        if not hasattr(dg, str(value).split(".")[1]):
            raise Unconvertible(f"layout argument {value}")
        return getattr(dg, str(value).split(".")[1])
    if isinstance(value, torch.Generator):
        raise Unconvertible("torch.Generator argument")
    if isinstance(value, torch.nn.LinearCrossEntropyOptions):       # torch's dataclass: ours, field by field
        import dataclasses
        return dg.nn.LinearCrossEntropyOptions(**{f.name: to_dg(getattr(value, f.name), dg, leaves, torch_leaves)
                                                  for f in dataclasses.fields(value)})
    if isinstance(value, (list, tuple)) and not hasattr(value, "_fields"):
        return type(value)(to_dg(v, dg, leaves, torch_leaves) for v in value)
    if isinstance(value, dict):
        return {k: to_dg(v, dg, leaves, torch_leaves) for k, v in value.items()}
    if callable(value) and getattr(value, "__module__", "") and value.__module__.startswith("torch"):
        raise Unconvertible(f"callable argument {getattr(value, '__name__', value)}")
    return value


def flatten(value):
    """The leaves of an op's result (tensors and Python scalars) in order; namedtuples and lists are walked."""
    if isinstance(value, (list, tuple)):
        out = []
        for v in value:
            out.extend(flatten(v))
        return out
    return [value]


def is_tensor(value):
    return hasattr(value, "shape") and hasattr(value, "dtype") and hasattr(value, "requires_grad")


def as_numpy(value):
    import numpy as np
    import torch
    if isinstance(value, torch.Tensor):
        value = value.detach()
        if value.layout != torch.strided:
            value = value.to_dense()
        if value._is_zerotensor():
            value = torch.zeros(value.shape, dtype=value.dtype)
        if value.dtype in (torch.bfloat16, torch.float16):
            value = value.float()
        if value.dtype == torch.complex32:
            value = value.to(torch.complex64)
        return value.resolve_conj().numpy()
    if is_tensor(value):
        value = value.detach()
        if dtype_name(value) in ("bfloat16", "float16"):
            value = value.float()
        return np.asarray(value.numpy())
    return np.asarray(value)


def dtype_name(value):
    return str(value.dtype).split(".")[-1]


def compare(expected, actual, tolerance, what):
    """None when dyngrad's leaf matches torch's, else (failure class, detail)."""
    import numpy as np
    import torch
    if isinstance(expected, torch.Tensor):
        if not is_tensor(actual):
            return (f"{what}: returns {type(actual).__name__} where torch returns a tensor", "")
        if tuple(expected.shape) != tuple(actual.shape):
            return (f"{what}: wrong shape", f"{tuple(actual.shape)} vs torch {tuple(expected.shape)}")
        if dtype_name(expected) != dtype_name(actual):
            return (f"{what}: wrong dtype", f"{dtype_name(actual)} vs torch {dtype_name(expected)}")
    elif expected is None:
        return None if actual is None else (f"{what}: returns a value where torch returns None", "")
    elif isinstance(expected, (bool, int, float)) and is_tensor(actual):
        return (f"{what}: returns a tensor where torch returns a Python {type(expected).__name__}", "")
    e, a = as_numpy(expected), as_numpy(actual)
    if e.shape != a.shape:
        return (f"{what}: wrong shape", f"{a.shape} vs torch {e.shape}")
    if e.size == 0:
        return None
    if e.dtype.kind in "biu" and a.dtype.kind in "biu":
        if not np.array_equal(e, a):
            return (f"{what}: wrong values", f"{int((e != a).sum())} of {e.size} differ")
        return None
    rtol, atol = tolerance
    wide = np.complex128 if np.iscomplexobj(e) or np.iscomplexobj(a) else np.float64
    e64, a64 = e.astype(wide), a.astype(wide)
    close = np.isclose(a64, e64, rtol=rtol, atol=atol, equal_nan=True)
    if not close.all():
        err = np.nanmax(np.abs(np.where(close, 0.0, a64 - e64)))
        return (f"{what}: wrong values", f"{int((~close).sum())} of {e.size} differ, max |err| {err:.3g}")
    return None


def missing_dyngrad_name(err):
    """Whether an AttributeError says dyngrad lacks a name (a test lambda's x.chalf() names no module: the Tensor
    method is missing): the OpInfo is unresolved, not failed."""
    text = str(err)
    return "has no attribute" in text and ("dyngrad" in text or text.startswith("'Tensor' object"))


def exception_class(phase, err):
    """A failure class from an exception: its type and message with the numbers and names of this sample cut."""
    message = str(err).split("\n")[0]
    message = re.sub(r"\(?-?\d+(\.\d+)?(e-?\d+)?(, ?-?\d+)*,?\)?", "N", message)
    message = re.sub(r"'[^']*'", "'…'", message)
    return (f"{phase} raises {type(err).__name__}: {message[:90]}", str(err).split("\n")[0][:200])


# ----------------------------------------------------------------------------------------------------- running

def torch_call(opinfo, sample):
    return opinfo.op(sample.input, *sample.args, **sample.kwargs)


def fresh(sample):
    """A copy of a sample whose tensors are new leaves with the same values (ops such as zero_ mutate)."""
    import torch

    def copy(v):
        if isinstance(v, torch.Tensor):
            c = v.detach().clone()
            return c.requires_grad_(v.requires_grad) if (c.is_floating_point() or c.is_complex()) else c
        if isinstance(v, (list, tuple)) and not hasattr(v, "_fields"):
            return type(v)(copy(x) for x in v)
        if isinstance(v, dict):
            return {k: copy(x) for k, x in v.items()}
        return v
    out = types.SimpleNamespace(input=copy(sample.input), args=copy(tuple(sample.args)),
                                kwargs=copy(dict(sample.kwargs)))
    return out


# Note [A more accurate oracle]: where dyngrad's forward values differ from torch's, the sample is judged again
# against a more accurate answer: torch's own op on the sample widened to float64 (for a float32 sample; complex128
# for a complex64 one), or mpmath at 30 digits (for the float64 Bessel functions, whose Cephes approximations in
# torch are ~2e-7 off near the zeros of J0). The sample passes when dyngrad agrees with that answer within the dtype's tolerance and torch does not:
# dyngrad is then the more accurate of the two (the only cases so far: one ill-conditioned float32 matrix_exp
# sample, where torch is 1.3e-2 and dyngrad 2.4e-4 away from the float64 value, and bessel_j0/bessel_y1 at x ~ 5.5).
# Gradients that differ are judged the same way against torch's vector-Jacobian product on the widened sample
# (complex64 logsumexp of z ~ 1e6 + 1e6i: torch's gradient is 0.025 off the float64 one, dyngrad's is not).
MPMATH_ORACLES = {"special.bessel_j0": ("besselj", 0), "special.bessel_j1": ("besselj", 1),
                  "special.bessel_y0": ("bessely", 0), "special.bessel_y1": ("bessely", 1)}


def precise_answer(opinfo, sample, dtype_key):
    """The more accurate answer of Note [A more accurate oracle], or None where there is none."""
    import numpy as np
    import torch
    if dtype_key in ("float32", "complex64"):
        def widen(v):
            if isinstance(v, torch.Tensor):
                if v.dtype in (torch.float32, torch.complex64):
                    return v.detach().to(torch.float64 if v.dtype == torch.float32 else torch.complex128)
                return v.detach()
            if isinstance(v, (list, tuple)) and not hasattr(v, "_fields"):
                return type(v)(widen(x) for x in v)
            if isinstance(v, dict):
                return {k: widen(x) for k, x in v.items()}
            return v
        wide = types.SimpleNamespace(input=widen(sample.input), args=widen(tuple(sample.args)),
                                     kwargs=widen(dict(sample.kwargs)))
        try:
            return torch_call(opinfo, wide)
        except Exception:
            return None
    oracle = MPMATH_ORACLES.get(opinfo_id(opinfo))
    if dtype_key != "float64" or oracle is None or sample.args or sample.kwargs:
        return None
    try:
        import mpmath
    except ImportError:
        return None
    fn, order = getattr(mpmath, oracle[0]), oracle[1]
    x = sample.input.detach().numpy().astype(np.float64)
    with mpmath.workdps(30):
        values = [float("nan") if not np.isfinite(v) or (oracle[0] == "bessely" and v < 0) else
                  -float("inf") if oracle[0] == "bessely" and v == 0 else float(fn(order, float(v)))
                  for v in x.reshape(-1)]
    return torch.tensor(np.array(values).reshape(x.shape))


def precise_grads(opinfo, sample, dtype_key, process, indices, cotangents):
    """torch's vector-Jacobian product on the float32/complex64 sample widened to float64/complex128 (the leaves
    in the order to_dg meets them, the outputs at `indices` of the flattened result), or None (Note [A more
    accurate oracle])."""
    import torch
    if dtype_key not in ("float32", "complex64"):
        return None
    wide_of = {torch.float32: torch.float64, torch.complex64: torch.complex128}
    leaves = []

    def widen(v):
        if isinstance(v, torch.Tensor):
            w = v.detach().to(wide_of.get(v.dtype, v.dtype))
            if v.requires_grad:
                w.requires_grad_(True)
                leaves.append(w)
            return w
        if isinstance(v, (list, tuple)) and not hasattr(v, "_fields"):
            return type(v)(widen(x) for x in v)
        if isinstance(v, dict):
            return {k: widen(x) for k, x in v.items()}
        return v
    wide = types.SimpleNamespace(input=widen(sample.input), args=widen(tuple(sample.args)),
                                 kwargs=widen(dict(sample.kwargs)))
    try:
        out = torch_call(opinfo, wide)
        flat = flatten(process(out) if process is not None else out)
        outputs = [flat[i] for i in indices]
        return list(torch.autograd.grad(outputs, leaves, [c.to(wide_of.get(c.dtype, c.dtype)) for c in cotangents],
                                        allow_unused=True))
    except Exception:
        return None


def more_accurate(precise, expected, actual, tolerance):
    """Whether dyngrad's leaf agrees with the precise answer (rounded to torch's dtype) and torch's does not."""
    import torch
    if not (isinstance(precise, torch.Tensor) and isinstance(expected, torch.Tensor)) or \
            tuple(precise.shape) != tuple(expected.shape):
        return False
    rounded = precise.detach().to(expected.dtype)
    return compare(rounded, actual, tolerance, "forward") is None and \
        compare(rounded, expected.detach(), tolerance, "forward") is not None


def seeds_itself(opinfo):
    """Whether the OpInfo's values cannot be compared: its op reseeds torch's generator before each call (torch's
    random ops in op_db do, through `wrapper_set_seed`, and dyngrad's generator cannot reproduce torch's stream),
    or it returns uninitialised memory (the empty factories)."""
    code = getattr(opinfo.op, "__code__", None)
    return (code is not None and "wrapper_set_seed" in code.co_names) or "empty" in opinfo.name


def torch_disclaims(opinfo, dtype, classes=("TestBwdGradients", "TestGradients"), test="test_fn_grad"):
    """Whether torch's own test `test` (in one of `classes`) of this OpInfo is marked expectedFailure or skipped on
    the CPU for dtype: torch's result is then no oracle (as_strided_scatter's backward is wrong in torch 2.13).
    The default is the gradient test; the forward-AD report asks about test_forward_mode_AD."""
    import unittest
    for info in opinfo.decorators:
        if getattr(info, "cls_name", None) not in classes or getattr(info, "test_name", None) not in (test, None):
            continue
        if info.device_type not in (None, "cpu") or (info.dtypes is not None and dtype not in info.dtypes):
            continue
        for decorator in info.decorators:
            if decorator is unittest.expectedFailure or getattr(decorator, "__qualname__", "").startswith("skip"):
                return True
    return False


def outputs_agree(a, b):
    """Whether two torch results are equal (random ops are not)."""
    import numpy as np
    import torch
    fa, fb = flatten(a), flatten(b)
    if len(fa) != len(fb):
        return False
    for x, y in zip(fa, fb):
        if isinstance(x, torch.Tensor):
            if not isinstance(y, torch.Tensor) or x.shape != y.shape:
                return False
            if x.numel() and not np.array_equal(as_numpy(x), as_numpy(y), equal_nan=x.dtype.is_floating_point):
                return False
    return True


def run_sample(opinfo, fn, sample, dtype_key, dg, check_grad):
    """None if the sample passes, else (class, detail); raises Unconvertible for samples dyngrad cannot take."""
    import torch
    first = fresh(sample)
    try:
        expected = torch_call(opinfo, first)
    except Exception:
        return "skip"
    deterministic = not seeds_itself(opinfo) and outputs_agree(expected, torch_call(opinfo, fresh(sample)))
    leaves, torch_leaves = [], []  # the gradient pass differentiates torch's `first` and dyngrad's copy of it
    dg_input = to_dg(first.input, dg, leaves, torch_leaves)
    dg_args = to_dg(tuple(first.args), dg, leaves, torch_leaves)
    dg_kwargs = to_dg(dict(first.kwargs), dg, leaves, torch_leaves)
    try:
        actual = fn(dg_input, *dg_args, **dg_kwargs)
    except Unresolved:
        raise
    except AttributeError as err:
        if missing_dyngrad_name(err):
            raise Unresolved(str(err))
        return exception_class("forward", err)
    except Exception as err:
        return exception_class("forward", err)
    # the sample's own view of the result (svd's singular vectors up to sign, ...): what torch's tests compare
    process = getattr(sample, "output_process_fn_grad", None)
    if process is not None:
        expected = process(expected)
        try:
            actual = (rebind(process, dg) if is_test_code(process) else process)(actual)
        except Exception as err:
            return exception_class("forward (the sample's output_process_fn_grad)", err)
    fwd_tol, bwd_tol = TOLERANCES.get(dtype_key, ((0, 0), (0, 0)))
    flat_e, flat_a = flatten(expected), flatten(actual)
    if len(flat_e) != len(flat_a):
        return ("forward: wrong number of outputs", f"{len(flat_a)} vs torch {len(flat_e)}")
    precise = None
    for index, (e, a) in enumerate(zip(flat_e, flat_a)):
        if deterministic:
            failure = compare(e, a, fwd_tol, "forward")
            if failure and failure[0] == "forward: wrong values":     # Note [A more accurate oracle]
                if precise is None:
                    answer = precise_answer(opinfo, first, dtype_key)
                    precise = [] if answer is None else flatten(process(answer) if process is not None else answer)
                if len(precise) == len(flat_e) and more_accurate(precise[index], e, a, fwd_tol):
                    failure = None
        elif isinstance(e, torch.Tensor):
            failure = compare(e, a, fwd_tol, "forward") if not is_tensor(a) else (
                (("forward: wrong shape", "") if tuple(e.shape) != tuple(a.shape) else None) or
                (("forward: wrong dtype", "") if dtype_name(e) != dtype_name(a) else None))
        else:
            failure = None
        if failure:
            return failure
    if not (check_grad and deterministic and torch_leaves):
        return None
    # backward: one fixed cotangent per differentiable output
    pairs = [(e, a, i) for i, (e, a) in enumerate(zip(flat_e, flat_a))
             if isinstance(e, torch.Tensor) and e.requires_grad and (e.is_floating_point() or e.is_complex())]
    if not pairs:
        return None
    generator = torch.Generator().manual_seed(0)
    cotangents = [torch.randn(e.shape, dtype=e.dtype, generator=generator) for e, _, _ in pairs]
    # an output dyngrad does not record (slogdet's sign) is fine when torch's gradient through it is zero
    kept = []
    for (e, a, i), c in zip(pairs, cotangents):
        if is_tensor(a) and a.requires_grad:
            kept.append((e, a, i, c))
            continue
        try:
            through = torch.autograd.grad([e], torch_leaves, [c], allow_unused=True, retain_graph=True)
        except Exception:
            continue
        if any(g is not None and as_numpy(g).any() for g in through):
            return ("backward: output does not require grad", "")
    if not kept:
        return None
    pairs, cotangents = [(e, a) for e, a, _, _ in kept], [c for _, _, _, c in kept]
    try:
        expected_grads = torch.autograd.grad([e for e, _ in pairs], torch_leaves, cotangents, allow_unused=True)
    except Exception:
        return None
    if all(g is None for g in expected_grads):
        return None
    try:
        dg_cotangents = [dg.tensor((c.to(torch.complex128) if c.is_complex() else c.double()).numpy())
                         .to(getattr(dg, str(c.dtype).split(".")[1])) for c in cotangents]
        actual_grads = dg.autograd.grad([a for _, a in pairs], leaves, dg_cotangents, allow_unused=True)
    except Exception as err:
        return exception_class("backward", err)
    precise = None
    for index, (e, a) in enumerate(zip(expected_grads, actual_grads)):
        if e is None:
            continue
        if a is None:
            if not as_numpy(e).any():
                continue
            return ("backward: gradient missing (None) for an input torch differentiates", "")
        failure = compare(e, a, bwd_tol, "backward")
        if failure and failure[0] == "backward: wrong values":     # Note [A more accurate oracle]
            if precise is None:
                precise = precise_grads(opinfo, first, dtype_key, process, [i for _, _, i, _ in kept],
                                        cotangents) or []
            if len(precise) == len(expected_grads) and more_accurate(precise[index], e, a, bwd_tol):
                failure = None
        if failure:
            return failure
    return None


# Note [Forward-mode OpInfo check]: `--forward-ad` samples every OpInfo whose `supports_forward_ad` is set, in
# float64 (complex128 with --complex), and compares dyngrad's `func.jvp` of the op with `torch.func.jvp` on the same
# inputs and tangents: the differentiable inputs are the sample's tensors that require grad, each with a random
# tangent of its shape and dtype (seeded: the same numbers on both sides), and the outputs compared are the op's
# floating/complex tensor outputs (after the sample's output_process_fn_grad, as torch's own forward-AD test does).
# Tangents are compared within the backward tolerances (a jvp is a sum over many terms). Where they differ, the
# detail also says which side a central finite difference of torch's op along the tangent agrees with, so a
# mismatch names the wrong side. OpInfos without forward AD in torch are recorded as such and not run; samples
# whose torch.func.jvp raises, or whose op is random, are skipped; OpInfos whose forward-AD test torch marks
# expectedFailure or skip on the CPU are recorded as disclaimed.

def torch_forward_disclaimed(opinfo, dtype):
    """Whether torch's own forward-AD test of this OpInfo is marked expectedFailure or skipped on the CPU."""
    return torch_disclaims(opinfo, dtype, ("TestFwdGradients", "TestGradients"), "test_forward_mode_AD")


def substitute(value, replacements, tensor_type):
    """`value` (a sample's structure) with the tensors whose id is a key of `replacements` replaced and every other
    tensor cloned (an in-place op must not change the sample between calls)."""
    if id(value) in replacements:
        return replacements[id(value)]
    if isinstance(value, tensor_type):
        return value.clone()
    if isinstance(value, (list, tuple)) and not hasattr(value, "_fields"):
        return type(value)(substitute(v, replacements, tensor_type) for v in value)
    if isinstance(value, dict):
        return {k: substitute(v, replacements, tensor_type) for k, v in value.items()}
    return value


def differentiable_outputs(result, process, tensor_type):
    """The floating/complex tensor outputs of an op's (processed) result, and their indices in its flattening."""
    flat = flatten(process(result) if process is not None else result)
    pairs = [(i, v) for i, v in enumerate(flat) if isinstance(v, tensor_type) and
             (v.dtype.is_floating_point or v.dtype.is_complex)]
    return tuple(v for _, v in pairs), [i for i, _ in pairs]


def gradcheck_wrapper_for(opinfo, sample, dg):
    """dyngrad's side of the OpInfo's gradcheck_wrapper (torch's forward-AD test runs the op through it: Hermitian
    or triangular inputs made so inside the function, masked-out outputs zeroed): None for the identity, torch's
    wrapper rebound to dyngrad, or for the masked wrappers ("masked", the output mask torch's wrapper computes,
    as a dyngrad tensor, or None)."""
    import numpy as np
    import torch
    wrapper = opinfo.gradcheck_wrapper
    name = wrapper.__name__
    if name == "<lambda>" and wrapper.__module__ == "torch.testing._internal.opinfo.core":
        return None
    if name not in ("gradcheck_wrapper_masked_operation", "gradcheck_wrapper_masked_pointwise_operation"):
        return rebind(wrapper, dg)
    x, args, kwargs = sample.input.detach(), tuple(sample.args), dict(sample.kwargs)
    mask = None
    if name == "gradcheck_wrapper_masked_operation":
        if kwargs.get("mask") is not None:
            mask = torch.masked._output_mask(opinfo.op, x, *args, **kwargs)
    elif kwargs.get("input_mask") is not None and kwargs.get("other_mask") is not None:
        combined = torch.logical_and(kwargs["input_mask"], kwargs["other_mask"])
        mask = torch.masked._input_mask(x, *args, **dict(mask=combined, **kwargs))
    return ("masked", None if mask is None else dg.tensor(np.array(mask.numpy(), copy=True)))


def run_sample_forward(opinfo, fn, sample, dtype_key, dg):
    """None if dyngrad's jvp of the sample matches torch.func.jvp's, "skip", or (class, detail)."""
    import numpy as np
    import torch
    if seeds_itself(opinfo):
        return "skip"
    process = getattr(sample, "output_process_fn_grad", None)
    dg_process = None if process is None else (rebind(process, dg) if is_test_code(process) else process)
    # torch's side
    first = fresh(sample)
    leaves, torch_leaves = [], []
    to_dg(first.input, dg, leaves, torch_leaves)        # which tensors are differentiable (raises Unconvertible)
    to_dg(tuple(first.args), dg, leaves, torch_leaves)
    to_dg(dict(first.kwargs), dg, leaves, torch_leaves)
    if not torch_leaves:
        return "skip"
    generator = torch.Generator().manual_seed(0)
    tangents = tuple(torch.randn(t.shape, dtype=t.dtype, generator=generator) for t in torch_leaves)
    primals = tuple(t.detach() for t in torch_leaves)
    indices = []

    wrapper = opinfo.gradcheck_wrapper
    if wrapper.__name__ == "wrapper_set_seed":
        return "skip"                                            # a random op

    def torch_f(*xs):
        swap = {id(old): new for old, new in zip(torch_leaves, xs)}
        args = substitute((first.input,) + tuple(first.args), swap, torch.Tensor)
        result = wrapper(opinfo.op, *args, **substitute(dict(first.kwargs), swap, torch.Tensor))
        outs, idx = differentiable_outputs(result, process, torch.Tensor)
        indices[:] = idx
        return outs
    try:
        with torch.no_grad():
            again = [torch_f(*primals), torch_f(*primals)]
        if not outputs_agree(again[0], again[1]):
            return "skip"                                        # a random op
        expected_out, expected_tan = torch.func.jvp(torch_f, primals, tangents)
    except Exception:
        return "skip"
    if not expected_out:
        return "skip"
    expected_indices = list(indices)
    # dyngrad's side: the same values, plain tensors
    dg_leaves = [dg.tensor(np.array(t.detach().numpy(), copy=True)) for t in torch_leaves]
    dg_tangents = tuple(dg.tensor(np.array(t.numpy(), copy=True)) for t in tangents)
    second = fresh(sample)
    s_leaves, s_torch_leaves = [], []
    dg_input = to_dg(second.input, dg, s_leaves, s_torch_leaves)
    dg_args = to_dg(tuple(second.args), dg, s_leaves, s_torch_leaves)
    dg_kwargs = to_dg(dict(second.kwargs), dg, s_leaves, s_torch_leaves)
    dg_indices = []
    try:
        dg_wrapper = gradcheck_wrapper_for(opinfo, first, dg)
    except Exception:
        return "skip"

    def dg_f(*xs):
        swap = {id(old): new for old, new in zip(s_leaves, xs)}
        args = substitute((dg_input,) + dg_args, swap, dg.Tensor)
        kwargs = substitute(dg_kwargs, swap, dg.Tensor)
        if dg_wrapper is None:
            result = fn(*args, **kwargs)
        elif isinstance(dg_wrapper, tuple):                      # a masked wrapper: torch's mask, applied to ours
            result = fn(*args, **kwargs)
            if dg_wrapper[1] is not None:
                result = dg.where(dg_wrapper[1], result, dg.zeros((), dtype=result.dtype))
        else:
            result = dg_wrapper(fn, *args, **kwargs)
        outs, idx = differentiable_outputs(result, dg_process, dg.Tensor)
        dg_indices[:] = idx
        return outs
    try:
        actual_out, actual_tan = dg.func.jvp(dg_f, tuple(dg_leaves), dg_tangents)
    except Unresolved:
        raise
    except AttributeError as err:
        if missing_dyngrad_name(err):
            raise Unresolved(str(err))
        return exception_class("jvp", err)
    except Exception as err:
        return exception_class("jvp", err)
    if dg_indices != expected_indices:
        return ("jvp: different differentiable outputs", f"outputs {dg_indices} vs torch {expected_indices}")
    _, (rtol, atol) = TOLERANCES[dtype_key]
    for k, (e, a) in enumerate(zip(expected_tan, actual_tan)):
        if a is None:
            return (f"jvp: tangent missing (None)", f"output {expected_indices[k]}")
        failure = compare(e, a, (rtol, atol), "jvp")
        if failure is None:
            continue
        if failure[0] != "jvp: wrong values":
            return (failure[0], f"output {expected_indices[k]}: {failure[1]}")
        verdict = finite_difference_verdict(torch_f, primals, tangents, k, e, a)
        scale = float(np.nanmax(np.abs(as_numpy(e)))) if e.numel() else 0.0
        cls = ("jvp: wrong values, torch's tangent is the one finite differences disagree with"
               if verdict.startswith("finite difference agrees with dyngrad") else
               "jvp: wrong values (a silent wrong answer)")
        return (cls, f"output {expected_indices[k]}: {failure[1]} (torch's tangent max |.| {scale:.3g}); {verdict}")
    return None


def finite_difference_verdict(torch_f, primals, tangents, k, expected, actual):
    """Which of torch's and dyngrad's tangent a float64 central difference of torch's op agrees with."""
    import numpy as np
    import torch
    h = 1e-6
    try:
        with torch.no_grad():
            plus = torch_f(*(p + h * t for p, t in zip(primals, tangents)))[k]
            minus = torch_f(*(p - h * t for p, t in zip(primals, tangents)))[k]
        fd = as_numpy((plus - minus) / (2 * h)).astype(np.complex128)
    except Exception:
        return "no finite difference"
    e, a = as_numpy(expected).astype(np.complex128), as_numpy(actual).astype(np.complex128)
    scale = max(1.0, float(np.nanmax(np.abs(fd))) if fd.size else 1.0)
    de, da = float(np.nanmax(np.abs(e - fd))) / scale, float(np.nanmax(np.abs(a - fd))) / scale
    # the side within 1e-4 of the difference and 100 times closer to it than the other (the difference itself is
    # good to ~1e-9 on these samples)
    side = "torch" if de < 1e-4 and 100 * de < da else "dyngrad" if da < 1e-4 and 100 * da < de else "neither/both"
    return f"finite difference agrees with {side} (rel err torch {de:.2g}, dyngrad {da:.2g})"


def run_opinfo(opinfo, dg, max_samples=None):
    """One OpInfo's record: resolved?, samples run/passed, the first failure of each class."""
    import torch
    record = {"id": opinfo_id(opinfo), "resolved": True, "samples": 0, "passed": 0, "skipped": 0, "failures": {}}
    try:
        fn = resolve(opinfo, dg)
    except Unresolved as err:
        return dict(record, resolved=False, missing=str(err))
    dtypes = sampled_dtypes(opinfo)
    if FORWARD:     # Note [Forward-mode OpInfo check]
        if not opinfo.supports_forward_ad:
            return dict(record, torch_unsupported=True)
        wide = torch.complex128 if COMPLEX else torch.float64
        if wide not in dtypes:
            return dict(record, torch_unsupported=True)
        if torch_forward_disclaimed(opinfo, wide):
            return dict(record, torch_disclaimed=True)
        dtypes = [wide]
    for dtype in dtypes:
        key = str(dtype).split(".")[1]
        check_grad = FORWARD or opinfo.supports_autograd and (dtype.is_floating_point or dtype.is_complex) and \
            not torch_disclaims(opinfo, dtype)
        try:
            samples = list(opinfo.sample_inputs("cpu", dtype, requires_grad=check_grad))
        except Exception as err:
            record["failures"].setdefault("torch cannot make its samples", f"{type(err).__name__}: {err}"[:200])
            continue
        if max_samples is not None:
            samples = samples[:max_samples]
        for sample in samples:
            torch.manual_seed(0)
            try:
                failure = (run_sample_forward(opinfo, fn, sample, key, dg) if FORWARD else
                           run_sample(opinfo, fn, sample, key, dg, check_grad))
            except Unconvertible as err:
                record["skipped"] += 1
                record.setdefault("unconvertible", str(err))
                continue
            except Unresolved as err:
                return dict(record, resolved=False, missing=str(err), samples=0, passed=0, failures={})
            except Exception as err:  # the harness's own comparison must never stop the run
                failure = exception_class("harness", err)
            if failure == "skip":
                record["skipped"] += 1
                continue
            record["samples"] += 1
            if failure is None:
                record["passed"] += 1
            else:
                record["failures"].setdefault(failure[0], f"{key}: {failure[1]}")
    return record


# ----------------------------------------------------------------------------------------------------- workers

def worker(engine, indices, max_samples):
    import torch
    torch.set_num_threads(1)
    dg = load_engine(engine)
    op_db = import_op_db()
    for i in indices:
        print(json.dumps({"start": i}), flush=True)
        opinfo = op_db[i]
        started = time.time()
        record = run_opinfo(opinfo, dg, max_samples)
        record["index"] = i
        record["seconds"] = round(time.time() - started, 2)
        print(json.dumps(record), flush=True)


def load_engine(engine):
    if engine == "reference":
        import dyngrad.reference as dg
    else:
        import dyngrad as dg
    return dg


def run_all(indices, ids, engine, jobs, timeout, max_samples, verbose):
    """Records for every index, with crashes and timeouts recorded against the OpInfo that caused them."""
    slices = [indices[k::jobs] for k in range(jobs)]
    records = {}
    procs = {}

    def spawn(remaining):
        cmd = [sys.executable, os.path.abspath(__file__), "--worker", "--engine", engine,
               "--indices", ",".join(map(str, remaining))]
        if max_samples is not None:
            cmd += ["--max-samples", str(max_samples)]
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, bufsize=1)
        procs[proc.stdout.fileno()] = {"proc": proc, "remaining": list(remaining), "current": None,
                                       "deadline": time.time() + timeout + 60}  # + import time

    for s in slices:
        if s:
            spawn(s)
    while procs:
        ready, _, _ = select.select(list(procs), [], [], 1.0)
        now = time.time()
        for fd in list(procs):
            state = procs[fd]
            line = state["proc"].stdout.readline() if fd in ready else None
            if line:
                message = json.loads(line)
                if "start" in message:
                    state["current"] = message["start"]
                    state["deadline"] = now + timeout
                else:
                    records[message["index"]] = message
                    state["remaining"].remove(message["index"])
                    state["current"] = None
                    if verbose:
                        print(summary_line(message), flush=True)
                continue
            if line is None and now < state["deadline"]:
                continue
            # EOF (the worker died) or past the deadline
            proc = state["proc"]
            if proc.poll() is None:
                proc.kill()
            proc.wait()
            del procs[fd]
            current = state["current"]
            if current is not None:
                kind = "timeout" if line is None else f"crash (exit {proc.returncode})"
                records[current] = {"index": current, "id": ids[current], "resolved": True, "samples": 1,
                                    "passed": 0, "skipped": 0, "failures": {kind: f"after {timeout} s"
                                                                            if line is None else ""}}
                state["remaining"].remove(current)
                if verbose:
                    print(summary_line(records[current]), flush=True)
            if state["remaining"]:
                spawn(state["remaining"])
    return [records[i] for i in indices if i in records]


def summary_line(record):
    if not record["resolved"]:
        return f"{record['id']}: unresolved ({record['missing']})"
    if record.get("torch_unsupported"):
        return f"{record['id']}: no forward AD in torch"
    if record.get("torch_disclaimed"):
        return f"{record['id']}: torch's own forward-AD test disclaimed"
    status = "pass" if fully_passing(record) else "FAIL " + "; ".join(record["failures"])
    return f"{record['id']}: {record['passed']}/{record['samples']} {status}"


def fully_passing(record):
    return record["resolved"] and not record["failures"] and record["samples"] > 0


# ------------------------------------------------------------------------------------------------------ report

def report(records, engine, seconds, max_samples):
    """docs/opinfo.md: the counts, then the failure classes with the OpInfos in each, then the unresolved."""
    import torch
    resolved = [r for r in records if r["resolved"]]
    passing = [r for r in resolved if fully_passing(r)]
    no_samples = [r for r in resolved if r["samples"] == 0 and not r["failures"]]
    classes = collections.defaultdict(list)
    for r in resolved:
        for cls, detail in r["failures"].items():
            classes[cls].append((r["id"], detail))
    lines = [
        "# PyTorch's OpInfo samples on dyngrad" + (" in complex dtypes" if COMPLEX else ""),
        "",
        "Generated by `scripts/opinfo_report.py` (nothing here is written by hand); regenerate with",
        "",
        "    PYTHONPATH=python python scripts/opinfo_report.py" + (" --complex" if COMPLEX else ""),
        "",
        f"torch {torch.__version__} `op_db`, engine `{engine}`, " + (
            "complex64 and complex128 samples of every OpInfo with a complex CPU dtype (Note [Complex OpInfo "
            "samples] in the script), forward values" if COMPLEX else
            "float32 and float64 samples (integer dtypes for ops without floating ones), forward values") +
        " and, where the OpInfo supports autograd, one vector-Jacobian",
        "product against `torch.autograd.grad`. An OpInfo *passes* when every sample it ran passes; samples dyngrad",
        "cannot take (sparse inputs, a torch.Generator argument) and samples torch itself rejects are",
        "skipped and counted apart. Sampled: every `op_db` entry but private ATen entry points (`torch.ops.*`,",
        "`torch._*`), the CUDA jiterator kernels and complex-only ops. Where torch's OpInfo marks its own gradient",
        "test expectedFailure or skip (as_strided_scatter), torch's gradient is not compared. Random ops and the",
        "empty factories are compared by shape and dtype. A sample whose values differ from torch's passes when",
        "they agree with a more accurate answer that torch's do not (torch's own op in float64 for a float32",
        "sample, mpmath for the float64 Bessel functions: Note [A more accurate oracle] in the script)." +
        (f" At most {max_samples} samples per dtype." if max_samples else ""),
        "",
        "| | count |",
        "| --- | ---: |",
        f"| OpInfos sampled | {len(records)} |",
        f"| resolved to a dyngrad function | {len(resolved)} |",
        f"| pass every sample | {len(passing)} ({100.0 * len(passing) / max(1, len(resolved)):.1f} % of resolved) |",
        f"| resolved, no sample dyngrad can take | {len(no_samples)} |",
        f"| samples run / passed / skipped | {sum(r['samples'] for r in resolved)} / "
        f"{sum(r['passed'] for r in resolved)} / {sum(r['skipped'] for r in resolved)} |",
        "",
        f"Run time {seconds:.0f} s.",
        "",
        "## Failures by class",
        "",
        "Each OpInfo is listed under every class one of its samples fell in, with the first such sample's detail.",
        "",
    ]
    for cls, members in sorted(classes.items(), key=lambda kv: (-len(kv[1]), kv[0])):
        lines.append(f"### {cls} ({len(members)})")
        lines.append("")
        for op_id, detail in sorted(members):
            lines.append(f"- `{op_id}`" + (f": {detail}" if detail else ""))
        lines.append("")
    lines += ["## Unresolved", "", "OpInfos with no dyngrad function of the same name path:", ""]
    lines.append(", ".join(f"`{r['id']}`" for r in sorted(records, key=lambda r: r["id"]) if not r["resolved"]))
    lines.append("")
    if no_samples:
        lines += ["## Resolved without a sample dyngrad can take", ""]
        lines.append(", ".join(f"`{r['id']}` ({r.get('unconvertible', 'torch rejects every sample')})"
                               for r in no_samples))
        lines.append("")
    return "\n".join(lines)


def forward_counts(records):
    """The summary counts of a --forward-ad run (Note [Forward-mode OpInfo check])."""
    run = [r for r in records if r["resolved"] and not r.get("torch_unsupported") and not r.get("torch_disclaimed")]
    def has(r, prefix):
        return any(cls.startswith(prefix) for cls in r["failures"])
    return collections.OrderedDict([
        ("OpInfos sampled", len(records)),
        ("no forward AD in torch (supports_forward_ad=False or no float64 dtype)",
         sum(1 for r in records if r.get("torch_unsupported"))),
        ("torch's own forward-AD test disclaimed (expectedFailure/skip)",
         sum(1 for r in records if r.get("torch_disclaimed"))),
        ("unresolved (no dyngrad function)",
         sum(1 for r in records if not r["resolved"] and not r.get("torch_unsupported"))),
        ("checked", len(run)),
        ("pass every sample", sum(1 for r in run if fully_passing(r))),
        ("mismatch (a silent wrong tangent)", sum(1 for r in run if has(r, "jvp: wrong values (a silent"))),
        ("mismatch where finite differences side with dyngrad (torch's tangent off)",
         sum(1 for r in run if has(r, "jvp: wrong values, torch's") and not has(r, "jvp: wrong values (a silent"))),
        ("jvp raises", sum(1 for r in run if has(r, "jvp raises"))),
        ("other failure (shape, dtype, None tangent, crash)", sum(
            1 for r in run if r["failures"] and not has(r, "jvp: wrong values") and not has(r, "jvp raises"))),
        ("no sample with a differentiable input", sum(1 for r in run if r["samples"] == 0 and not r["failures"])),
    ])


def report_forward(records, engine, seconds, max_samples):
    """docs/opinfo_forward_ad.md: the counts, then the failure classes with the OpInfos in each."""
    import torch
    counts = forward_counts(records)
    dtype = "complex128" if COMPLEX else "float64"
    lines = [
        "# Forward-mode AD (jvp) on PyTorch's OpInfo samples" + (" in complex128" if COMPLEX else ""),
        "",
        "Generated by `scripts/opinfo_report.py` (nothing here is written by hand); regenerate with",
        "",
        "    PYTHONPATH=python python scripts/opinfo_report.py --forward-ad" + (" --complex" if COMPLEX else ""),
        "",
        f"torch {torch.__version__} `op_db`, engine `{engine}`: every OpInfo with `supports_forward_ad=True`, each "
        f"{dtype} sample; dyngrad's",
        "`func.jvp` of the op against `torch.func.jvp` with the same random tangent for every input that requires",
        "grad, compared output by output within rtol/atol "
        f"{TOLERANCES[dtype][1][0]:g}/{TOLERANCES[dtype][1][1]:g}. A wrong value is a silent wrong answer; its",
        "detail says which side a central finite difference of torch's op agrees with (Note [Forward-mode OpInfo",
        "check] in the script). Random ops and samples torch's jvp rejects are skipped." +
        (f" At most {max_samples} samples per OpInfo." if max_samples else ""),
        "",
        "| | count |",
        "| --- | ---: |",
    ]
    lines += [f"| {k} | {v} |" for k, v in counts.items()]
    run = [r for r in records if r["resolved"] and not r.get("torch_unsupported") and not r.get("torch_disclaimed")]
    lines += [f"| samples run / passed / skipped | {sum(r['samples'] for r in run)} / "
              f"{sum(r['passed'] for r in run)} / {sum(r['skipped'] for r in run)} |", "",
              f"Run time {seconds:.0f} s.", "", "## Failures by class", "",
              "Each OpInfo is listed under every class one of its samples fell in, with the first such sample's "
              "detail.", ""]
    classes = collections.defaultdict(list)
    for r in run:
        for cls, detail in r["failures"].items():
            classes[cls].append((r["id"], detail))
    for cls, members in sorted(classes.items(), key=lambda kv: (not kv[0].startswith("jvp: wrong values"),
                                                                -len(kv[1]), kv[0])):
        lines.append(f"### {cls} ({len(members)})")
        lines.append("")
        for op_id, detail in sorted(members):
            lines.append(f"- `{op_id}`" + (f": {detail}" if detail else ""))
        lines.append("")
    lines += ["## Unresolved", "", ", ".join(f"`{r['id']}`" for r in sorted(records, key=lambda r: r["id"])
                                            if not r["resolved"] and not r.get("torch_unsupported")), ""]
    lines += ["## Not checked: torch's own forward-AD test disclaimed", "",
              ", ".join(f"`{r['id']}`" for r in sorted(records, key=lambda r: r["id"]) if r.get("torch_disclaimed")),
              ""]
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--engine", choices=("cpp", "reference"), default="cpp")
    parser.add_argument("--only", help="comma-separated OpInfo names or name.variant ids")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds per OpInfo")
    parser.add_argument("--max-samples", type=int, default=None, help="samples per dtype (default: all)")
    parser.add_argument("--json", help="also write the records here")
    parser.add_argument("--no-doc", action="store_true", help="do not write the docs/opinfo*.md page")
    parser.add_argument("--verbose", action="store_true")
    parser.add_argument("--complex", action="store_true",
                        help="complex64/complex128 samples (Note [Complex OpInfo samples]); docs/opinfo_complex.md")
    parser.add_argument("--forward-ad", action="store_true",
                        help="forward mode: dyngrad's func.jvp against torch.func.jvp (Note [Forward-mode OpInfo "
                             "check]); docs/opinfo_forward_ad.md")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--indices", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    global COMPLEX
    if args.complex:
        os.environ["DYNGRAD_OPINFO_COMPLEX"] = "1"
        COMPLEX = True
    global FORWARD
    if args.forward_ad:
        os.environ["DYNGRAD_OPINFO_FORWARD"] = "1"
        FORWARD = True
    if args.worker:
        worker(args.engine, [int(i) for i in args.indices.split(",")], args.max_samples)
        return 0
    op_db = import_op_db()
    chosen = selected(op_db)
    if args.only:
        wanted = set(args.only.split(","))
        chosen = [(i, o) for i, o in chosen if o.name in wanted or opinfo_id(o) in wanted]
    ids = {i: opinfo_id(o) for i, o in chosen}
    started = time.time()
    records = run_all([i for i, _ in chosen], ids, args.engine, args.jobs, args.timeout, args.max_samples,
                      args.verbose)
    seconds = time.time() - started
    if FORWARD:
        counts = forward_counts(records)
        print(f"forward AD ({args.engine}): " + ", ".join(f"{k}: {v}" for k, v in counts.items()) +
              f"; {seconds:.0f} s")
        if args.json:
            with open(args.json, "w") as f:
                json.dump(records, f, indent=1)
        if not args.no_doc and not args.only:
            with open(DOC_FORWARD_COMPLEX if COMPLEX else DOC_FORWARD, "w") as f:
                f.write(report_forward(records, args.engine, seconds, args.max_samples))
        return 0
    resolved = [r for r in records if r["resolved"]]
    passing = [r for r in resolved if fully_passing(r)]
    print(f"{len(records)} OpInfos, {len(resolved)} resolved, {len(passing)} pass every sample "
          f"({100.0 * len(passing) / max(1, len(resolved)):.1f} %), {seconds:.0f} s")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(records, f, indent=1)
    if not args.no_doc and not args.only:
        with open(DOC_COMPLEX if COMPLEX else DOC, "w") as f:
            f.write(report(records, args.engine, seconds, args.max_samples))
    return 0


if __name__ == "__main__":
    sys.exit(main())
