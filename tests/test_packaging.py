"""The `test` extra of pyproject.toml installs every package the suite imports, so that the README's test command
(`pip install ".[test]" "torch==2.13.0"`) runs every test the machine can run, none skipped for a missing package.

The imports are read from the source (import statements, pytest.importorskip and importlib.import_module with a
literal name) of what the suite runs: tests/, examples/ (tests/test_examples.py runs them), bench/ and the package."""
import ast
import os
import re
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCANNED = ["tests", "examples", "bench", os.path.join("python", "dyngrad")]
# PyTorch is the optional oracle, installed on its own (a 200 MB wheel is no part of an extra).
INSTALLED_APART = {"torch"}
# import name -> distribution name, where they differ
DISTRIBUTION = {"sklearn": "scikit-learn", "PIL": "pillow", "google": "protobuf", "tensorboardX": "tensorboardx",
                "scipy_openblas32": "scipy-openblas32", "yaml": "pyyaml"}


def _normalise(distribution):
    return re.sub(r"[-_.]+", "-", distribution).lower()


def _requirement_name(requirement):
    return _normalise(re.split(r"[\s<>=!~;\[]", requirement, maxsplit=1)[0])


def _local_modules():
    """Modules the scanned directories import from themselves (tests/helpers.py, examples/_common.py, ...)."""
    names = {"dyngrad"}
    for directory in SCANNED:
        for base, _, files in os.walk(os.path.join(ROOT, directory)):
            names.update(f[:-3] for f in files if f.endswith(".py"))
    return names


def imported_top_level_modules():
    """{top-level module: [files importing it]} over the scanned sources."""
    found = {}
    for directory in SCANNED:
        for base, _, files in os.walk(os.path.join(ROOT, directory)):
            for name in files:
                if not name.endswith(".py"):
                    continue
                path = os.path.join(base, name)
                with open(path, encoding="utf-8") as f:
                    tree = ast.parse(f.read(), path)
                for node in ast.walk(tree):
                    modules = []
                    if isinstance(node, ast.Import):
                        modules = [alias.name for alias in node.names]
                    elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                        modules = [node.module]
                    elif (isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant)
                          and isinstance(node.args[0].value, str) and not node.args[0].value.startswith(".")
                          and getattr(node.func, "attr", getattr(node.func, "id", None))
                          in ("importorskip", "import_module")):
                        modules = [node.args[0].value]
                    for module in modules:
                        found.setdefault(module.split(".")[0], []).append(os.path.relpath(path, ROOT))
    return found


def _project():
    tomllib = pytest.importorskip("tomllib")
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
        return tomllib.load(f)["project"]


def test_test_extra_installs_every_package_the_suite_imports():
    project = _project()
    provided = {_requirement_name(r) for r in project["optional-dependencies"]["test"] + project["dependencies"]}
    local = _local_modules()
    missing = {}
    for module, files in imported_top_level_modules().items():
        if module in sys.stdlib_module_names or module in local or module in INSTALLED_APART or module == "_C":
            continue
        if _normalise(DISTRIBUTION.get(module, module)) not in provided:
            missing[module] = sorted(set(files))[:3]
    assert not missing, ("imported by the suite but not in pyproject.toml's `test` extra (add them, or to "
                         f"INSTALLED_APART with a reason): {missing}")


def test_scan_sees_the_optional_imports():
    """The scan must find the imports the extra exists for, or the test above could not fail."""
    modules = imported_top_level_modules()
    for module in ("tensorboardX", "sklearn", "hypothesis", "mpi4py", "torch"):
        assert module in modules, module


def test_requirement_names():
    assert _requirement_name("scipy-openblas32>=0.3.27; platform_system == 'Darwin'") == "scipy-openblas32"
    assert _requirement_name("tensorboardX>=2.6") == "tensorboardx"
    assert _requirement_name("mpich") == "mpich"
