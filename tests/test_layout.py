"""The folders say which code is shared and which belongs to one engine (docs/design.md, Layout).

python/dyngrad/__init__.py and _cpp_*.py are the C++ engine's, python/dyngrad/reference/ is the reference engine,
everything else under python/dyngrad/ is shared: it serves both engines through `from .. import _C` and must not
reach for one engine by name, and the reference folder must not shadow a shared module.
"""
import ast
import importlib
import os

import pytest

import dyngrad

PACKAGE = os.path.dirname(os.path.abspath(dyngrad.__file__))
REFERENCE = os.path.join(PACKAGE, "reference")


def shared_files():
    for folder, dirs, files in os.walk(PACKAGE):
        # bench/ drives every engine (and torch) side by side: it is a tool over the engines, not code of one
        dirs[:] = [d for d in dirs if d not in ("reference", "__pycache__", "bench")]
        for f in files:
            path = os.path.join(folder, f)
            rel = os.path.relpath(path, PACKAGE)
            if f.endswith(".py") and rel != "__init__.py" and not rel.startswith("_cpp_"):
                yield rel, path


def top_level_shared_names():
    names = set()
    for entry in os.listdir(PACKAGE):
        if entry in ("reference", "__pycache__", "__init__.py") or entry.startswith("_cpp_"):
            continue
        if entry.endswith(".py"):
            names.add(entry[:-3])
        elif os.path.isfile(os.path.join(PACKAGE, entry, "__init__.py")):
            names.add(entry)
    return names


def engine_imports(source):
    """The imports in `source` that name one engine: `import dyngrad...`, `from dyngrad...`, `from ..reference`,
    `from .._cpp_...` (docstrings and comments do not count)."""
    bad = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            bad += [a.name for a in node.names if a.name.split(".")[0] == "dyngrad"]
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            names = [module] + [a.name for a in node.names] if node.level else [module]
            if (node.level == 0 and module.split(".")[0] == "dyngrad") or (
                    node.level and any(n.split(".")[0] in ("reference",) or n.startswith("_cpp_") for n in names)):
                bad.append("." * node.level + module)
    return bad


@pytest.mark.parametrize("rel,path", sorted(shared_files()))
def test_shared_code_names_no_engine(rel, path):
    bad = engine_imports(open(path, encoding="utf-8").read())
    assert not bad, f"{rel} is shared code but imports one engine: {bad}"


def test_reference_shadows_no_shared_module():
    own = {f[:-3] if f.endswith(".py") else f for f in os.listdir(REFERENCE) if not f.startswith("__")}
    shadowed = own & top_level_shared_names()
    assert not shadowed, f"python/dyngrad/reference/ has modules named like shared ones: {sorted(shadowed)}"


@pytest.mark.parametrize("name", sorted(top_level_shared_names() - {"bench"}))
def test_shared_modules_load_under_both_engines(name):
    for root in ("dyngrad", "dyngrad.reference"):
        module = importlib.import_module(f"{root}.{name}")
        assert module.__name__ == f"{root}.{name}"
