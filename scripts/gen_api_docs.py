"""Writes docs/api.md: every public name of dyngrad, which engine has it, and where it is defined.

Two parts. First the API table (python/dyngrad/_api/table.py): every name of `dyngrad.X`, `Tensor.X`,
`nn.functional.X`, `special.X` and `linalg.X`, its in-place variant, whether it has a C++ fast path, the file
defining it and the core ops it is built from. Then every other public name, found by walking the packages
(nn, optim, autograd, utils, distributions, viz, ...) under each engine. The *engine* column is computed by looking
each name up under `dyngrad` (the C++ engine) and `dyngrad.reference`: both, C++ only or reference only.
tests/test_api_table.py checks that the page is current:

    PYTHONPATH=python python scripts/gen_api_docs.py
"""
import argparse
import importlib
import inspect
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))

WHERE = {"fn": "`dyngrad.{}`", "F": "`nn.functional.{}`", "special": "`special.{}`", "linalg": "`linalg.{}`",
         "masked": "`masked.{}`", "fft": "`fft.{}`", "windows": "`signal.windows.{}`", "method": "`Tensor.{}()`", "prop": "`Tensor.{}`", "op": "`Tensor.{}`"}

# The packages walked for the second part, in this order (a name reachable twice is listed under the first path
# found, shallowest first). `bench` is the benchmark's command line, not a library API, and is left out.
PACKAGES = ("nn", "optim", "autograd", "utils", "distributions", "viz", "profiler", "testing", "distributed",
            "amp", "random", "serialization", "functional", "compiler", "backends", "cuda", "cpu", "onnx",
            "special", "linalg", "func", "masked", "fft", "signal")
ENGINES = ("dyngrad", "dyngrad.reference")
# the table's kinds that publish a row in a namespace of their own
NAMESPACES = {"F": "nn.functional", "special": "special", "linalg": "linalg", "masked": "masked", "fft": "fft",
              "windows": "signal.windows"}


# The table has no column for complex dtypes: what takes them is stated once here (the detail, and the list of what
# does not yet, is docs/numerics.md's "Complex numbers"; the measured coverage is docs/opinfo_complex.md).
COMPLEX_SUPPORT = [
    "## Complex tensors", "",
    "The table has no column for dtypes. `complex64` and `complex128` tensors, on both engines and with torch's",
    "gradients (for a real loss L of z = x + iy, `z.grad` is dL/dx + i dL/dy), are taken by: creation and",
    "conversion, torch's type promotion, the views (`view_as_real`, `real`, `imag`, `conj`), the pointwise ops and",
    "reductions that have complex kernels or composites, `matmul` and the BLAS family, `torch.linalg` (the",
    "factorisations and solvers, `geqrf`/`ormqr`/`householder_product`, the LDL family, `svd_lowrank`,",
    "`pca_lowrank`), `torch.fft`, `stft`/`istft`, and `autograd.gradcheck`/`gradgradcheck` (a complex tensor as its",
    "real and imaginary parts). A name without a complex implementation raises an error naming the op and the",
    "dtype; the \"Complex numbers\" section of `docs/numerics.md` lists what is covered in detail and, under *Not",
    "yet*, the names torch takes complex tensors for and dyngrad does not (or, for a few, computes wrongly).",
    "`complex32` (`chalf`) is not supported. What torch's own OpInfo samples in complex dtypes find, op by op:",
    "`docs/opinfo_complex.md` (`scripts/opinfo_report.py --complex`).", ""]


def _engine_text(present):
    """present: (on the C++ engine, on the reference engine)."""
    return {(True, True): "both", (True, False): "C++ only", (False, True): "reference only"}[present]


def _table_row_present(engine, row, kind):
    """Whether the engine publishes the table row under that kind."""
    if kind == "fn":
        return hasattr(engine, row.name)
    if kind in ("method", "prop", "op"):
        return hasattr(engine.Tensor, row.name)
    namespace = NAMESPACES[kind]
    return hasattr(importlib.import_module(f"{engine.__name__}.{namespace}"), row.name)


def _public_names(root):
    """{dotted path under the engine root: object} of every public name of PACKAGES, walked breadth first: a
    module's __all__ where it has one, else its names without a leading underscore, leaving out classes and
    functions imported from outside dyngrad (typing, numpy, ...)."""
    top = importlib.import_module(root)
    queue = [(name, getattr(top, name)) for name in PACKAGES]
    seen_modules, seen_objects, found = set(), set(), {}
    while queue:
        path, module = queue.pop(0)
        if id(module) in seen_modules:
            continue
        seen_modules.add(id(module))
        names = getattr(module, "__all__", None) or [n for n in dir(module) if not n.startswith("_")]
        for name in sorted(names):
            obj = getattr(module, name, None)
            if inspect.ismodule(obj):
                if obj.__name__.startswith(root + "."):
                    queue.append((f"{path}.{name}", obj))
                continue
            origin = getattr(obj, "__module__", None) or ""
            if (inspect.isclass(obj) or inspect.isfunction(obj)) and not origin.startswith("dyngrad"):
                continue
            if id(obj) in seen_objects:
                continue
            seen_objects.add(id(obj))
            found[f"{path}.{name}"] = obj
    return found


def _kind(obj):
    if inspect.isclass(obj):
        return "class"
    if callable(obj):
        return "function"
    return "value"


def _summary(obj):
    """The first line of a class's or function's own docstring (not one inherited from a base class; a value's
    docstring is its type's: none)."""
    if inspect.isclass(obj):
        doc = inspect.cleandoc(obj.__dict__.get("__doc__") or "")
    elif callable(obj):
        doc = inspect.getdoc(obj) or ""
    else:
        return ""
    line = doc.strip().splitlines()[0] if doc.strip() else ""
    if len(line) > 110:
        line = line[:107].rstrip() + "..."
    return line.replace("|", "\\|")


def _defined_in(impl):
    """The file of a row's implementation: the engine core, a module of _api/ (ops/<family>.py, the machinery) or
    of a shared package beside it (autograd.X)."""
    if impl.startswith("core"):
        return "the core (`_C`)"
    module = impl.rpartition(".")[0]
    base = os.path.join(HERE, "..", "python", "dyngrad")
    path = module.replace(".", "/") if module.split(".")[0] == "autograd" else "_api/" + module.replace(".", "/")
    while path and not os.path.exists(os.path.join(base, path + ".py")):
        path = path.rpartition("/")[0]
    return f"`{path}.py`"


def render():
    from dyngrad._api.table import rows
    engines = [importlib.import_module(name) for name in ENGINES]
    lines = ["# dyngrad's public API", "",
             "Generated by `scripts/gen_api_docs.py`; do not edit by hand. *engine*: which engine publishes the name,",
             "computed by looking it up under `dyngrad` (the C++ engine) and `dyngrad.reference` (the pure-numpy",
             "engine): `both`, `C++ only` or `reference only`.", "",
             "## The API table", "",
             "From `python/dyngrad/_api/table.py`, the one table both engines publish: the names of `dyngrad`,",
             "`Tensor`, `nn.functional`, `special` and `linalg`. *fast path*: on the C++ engine a hand-written entry",
             "point handles the common call (Note [Fast paths] in `csrc/bindings/fast_paths.cpp`). *built from*: the",
             "core ops it calls (`prim` = the primitive of `ops.def` of the same name; `core` = the engine core",
             "itself), and `numpy` when a call crosses the numpy bridge (Note [The numpy bridge] in",
             "`python/dyngrad/_api/bridge.py`, kept true by `tests/test_numpy_bridge.py`). *defined in*: the file",
             "under `python/dyngrad/`.",
             "", "| name | where | engine | in-place | fast path | defined in | built from |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    in_table = set()
    for row in rows():
        kinds = [k for k in row.kinds if k != "out"]
        where = ", ".join(WHERE[k].format(row.name) for k in kinds)
        if "out" in row.kinds:
            where += " (out=)"
        present = tuple(all(_table_row_present(e, row, k) for k in kinds) for e in engines)
        in_table |= {NAMESPACES[k] + "." + row.name for k in kinds if k in NAMESPACES}
        uses = "core" if row.impl.startswith("core") else ", ".join(row.uses) or "-"
        lines.append(f"| `{row.name}` | {where} | {_engine_text(present)} | "
                     f"{f'`{row.inplace}`' if row.inplace else ''} | "
                     f"{'yes' if row.hot else ''} | {_defined_in(row.impl)} | {uses} |")
    names = {next((NAMESPACES[k] + "." for k in ("linalg", "masked", "fft", "windows") if k in row.kinds), "")
             + row.name for row in rows()}
    lines += ["", f"{len(names)} names, {len(rows())} rows.", ""]
    lines += COMPLEX_SUPPORT

    cpp_names, ref_names = (_public_names(name) for name in ENGINES)
    paths = [p for p in cpp_names if p not in in_table] + \
        [p for p in ref_names if p not in cpp_names and p not in in_table]
    by_package = {}
    for path in paths:
        by_package.setdefault(path.rpartition(".")[0], []).append(path)
    lines += ["## The packages", "",
              "Every other public name: the packages walked from `dyngrad` and from `dyngrad.reference` (a module's",
              "`__all__` where it has one, else its names without a leading underscore; a name reachable twice is",
              "listed once, under its shortest path). *summary*: the first line of its docstring.", ""]
    for package in sorted(by_package, key=lambda p: (PACKAGES.index(p.split(".")[0]), p)):
        lines += [f"### `dyngrad.{package}`", "", "| name | kind | engine | summary |", "| --- | --- | --- | --- |"]
        for path in sorted(by_package[package]):
            obj = cpp_names.get(path, ref_names.get(path))
            present = (path in cpp_names, path in ref_names)
            lines.append(f"| `{path.rpartition('.')[2]}` | {_kind(obj)} | {_engine_text(present)} | "
                         f"{_summary(obj)} |")
        lines.append("")
    lines += [f"{len(paths)} names in {len(by_package)} packages.", ""]
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(
        description="Write docs/api.md from the API table (python/dyngrad/_api/table.py). Imports dyngrad from "
                    "python/ of this checkout, so the extension must be built (scripts/dev_build.sh).")
    parser.add_argument("--check", action="store_true",
                        help="write nothing; exit with status 1 if docs/api.md differs from what would be written")
    args = parser.parse_args(argv)
    sys.path.insert(0, os.path.join(HERE, "..", "python"))
    path = os.path.normpath(os.path.join(HERE, "..", "docs", "api.md"))
    text = render()                      # before opening the page: a failing import must not empty it
    with open(path, encoding="utf-8") as f:
        current = f.read()
    if args.check:
        if current != text:
            print(f"{path} is stale: run `PYTHONPATH=python python scripts/gen_api_docs.py`")
            return 1
        return 0
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
