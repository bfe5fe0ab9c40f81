"""The `dg` fixture: every test that takes `dg` runs once per engine, with the engine module as its argument.

    def test_mul(dg):                       # test_mul[cpp] and test_mul[reference]
        x = dg.tensor([1.0, 2.0], requires_grad=True)

Inputs that both engines must agree on are built with numpy and passed to each (docs/design.md: the engines'
random generators are independent).
"""
import gc
import importlib
import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # `import helpers` from any test file

ENGINES = {"cpp": "dyngrad", "reference": "dyngrad.reference"}


@pytest.fixture(params=list(ENGINES), scope="session")
def dg(request):
    return importlib.import_module(ENGINES[request.param])


@pytest.fixture(scope="session")
def cpp():
    return importlib.import_module("dyngrad")


@pytest.fixture(scope="session")
def ref():
    return importlib.import_module("dyngrad.reference")


def pytest_addoption(parser):
    parser.addoption("--runslow", action="store_true", default=False, help="also run tests marked slow")


def pytest_collection_modifyitems(config, items):
    """Tests marked slow (e.g. the 1e6-op chain on the pure-Python engine) run with --runslow or -m slow."""
    if config.getoption("--runslow") or "slow" in (config.getoption("-m") or ""):
        return
    skip = pytest.mark.skip(reason="slow: run with --runslow or -m slow")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)


def pytest_collection_finish(session):
    """Freeze what collection loaded (torch, numpy, both engines, the test tables): the collector then skips those
    objects, so every later gc.collect() and automatic full collection walks only what the tests create (the
    tests that count live objects call gc.collect() hundreds of times). Freezing never frees anything, so a
    leak check cannot pass because of it."""
    gc.collect()
    gc.freeze()


def pytest_configure(config):
    """DYNGRAD_COVERAGE=FILE: record which public names each test checks, for docs/coverage.md (opt-in: slower;
    the command is in tests/coverage_plugin.py)."""
    path = os.environ.get("DYNGRAD_COVERAGE")
    if path:
        import coverage_plugin
        config.pluginmanager.register(coverage_plugin.Recorder(os.path.abspath(path)), "dyngrad_coverage")
