"""docs/coverage.md's evidence (tests/coverage_plugin.py, Note [Coverage evidence]): a recorded run of a few
known tests must credit exactly what each of them checks, on the engine it ran on, and nothing for a failing test.
The page itself comes from a recorded run of the whole suite (too slow to check here; the command is on the page).
"""
import json
import os
import subprocess
import sys
import textwrap

import pytest

from helpers import subprocess_env

HERE = os.path.dirname(os.path.abspath(__file__))

CONFTEST = f"""
import os, sys
sys.path.insert(0, {HERE!r})


def pytest_configure(config):
    import coverage_plugin
    config.pluginmanager.register(coverage_plugin.Recorder(os.environ["DYNGRAD_COVERAGE"]), "dyngrad_coverage")
"""

TESTS = """
import numpy as np
import torch

import dyngrad
import dyngrad.reference as ref
from helpers import check_op


def test_helper():
    check_op(dyngrad, [(3,)], lambda m, x: m.exp(x), np.exp, name="exp")


def test_torch_comparison():
    got = ref.sin(ref.tensor([1.0, 2.0])).numpy()
    np.testing.assert_allclose(got, torch.sin(torch.tensor([1.0, 2.0])).numpy(), rtol=1e-6)


def test_plain_assert():
    assert dyngrad.tensor([1.0, -2.0]).abs().tolist() == [1.0, 2.0]


def test_called_only():
    dyngrad.cos(dyngrad.ones(2))


def test_fails():
    assert dyngrad.cosh(dyngrad.zeros(1)).item() == 123.0


def test_gradient():
    x = ref.tensor([0.5], requires_grad=True)
    ref.sqrt(x).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [0.5 / np.sqrt(0.5)])


def test_gradcheck():
    x = dyngrad.tensor([0.3, 0.7], dtype=dyngrad.float64, requires_grad=True)
    assert dyngrad.autograd.gradcheck(lambda t: dyngrad.sigmoid(t) * 2, (x,))


def test_parity():
    a, b = dyngrad.log(dyngrad.ones(2) * 3), ref.log(ref.ones(2) * 3)
    np.testing.assert_allclose(a.numpy(), b.numpy())
"""


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    pytest.importorskip("torch")
    where = tmp_path_factory.mktemp("recorded")
    (where / "conftest.py").write_text(CONFTEST)
    (where / "test_known.py").write_text(textwrap.dedent(TESTS))
    out = where / "coverage.json"
    env = subprocess_env(DYNGRAD_COVERAGE=str(out), PYTHONPYCACHEPREFIX=str(where / "pyc"))
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-o",
                          "enable_assertion_pass_hook=true", "--rootdir", str(where), str(where)],
                         cwd=where, env=env, capture_output=True, text=True, timeout=300)
    assert "1 failed, 7 passed" in run.stdout, run.stdout + run.stderr
    with open(out, encoding="utf-8") as f:
        data = json.load(f)
    assert data["outcomes"] == {"passed": 7, "not passed": 1} and data["files"] == ["test_known.py"]
    assert data["ran"] == data["collected"] == {"test_known.py": 8}
    return data["names"]


def test_helper_checks_are_credited_to_the_names_fn_calls(recorded):
    exp = recorded["exp"]
    assert set(exp) == {"cpp"}                                   # only the engine the test ran on
    assert set(exp["cpp"]["fwd"]) == {"numpy"} and set(exp["cpp"]["bwd"]) == {"finite differences"}
    assert not recorded["tensor"]["cpp"]["fwd"]                  # check_op's own input building is not credited


def test_comparisons_and_asserts_name_their_oracle(recorded):
    assert set(recorded["sin"]["reference"]["fwd"]) == {"torch"}
    assert set(recorded["Tensor.abs"]["cpp"]["fwd"]) == {"values"}
    assert set(recorded["log"]["cpp"]["fwd"]) == {"other engine"}     # parity: shown, not counted as a check
    assert not recorded["cos"]["cpp"]["fwd"] and recorded["cos"]["cpp"]["tests"] == 1
    assert "cosh" not in recorded                                      # the failing test gives no evidence


def test_gradients_credit_the_graph(recorded):
    assert set(recorded["sqrt"]["reference"]["bwd"]) == {"vs values"}
    assert recorded["sqrt"]["reference"]["differentiable"]
    assert not recorded["tensor"]["reference"].get("differentiable")   # a leaf is not a differentiable result
    assert set(recorded["sigmoid"]["cpp"]["bwd"]) == {"gradcheck"}
    assert set(recorded["Tensor.__mul__"]["cpp"]["bwd"]) == {"gradcheck"}


def test_page_lists_every_table_name_and_the_gaps(recorded, tmp_path):
    import importlib.util
    spec = importlib.util.spec_from_file_location("gen_coverage_docs",
                                                  os.path.join(HERE, "..", "scripts", "gen_coverage_docs.py"))
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    path = tmp_path / "coverage.json"
    path.write_text(json.dumps({"format": 1, "names": recorded}))
    text, count, never, no_fwd, no_bwd = gen.render(gen.load([str(path)]))
    from dyngrad._api.table import rows
    assert count["total"] == len(list(gen.public_names(rows())))
    assert "| `dyngrad.exp` | fn |  | 1 tests | - | numpy (cpp only) | finite differences (cpp only) |" in text
    assert "| `dyngrad.sin` | fn |  | - | 1 tests | torch (reference only) |  |" in text
    assert "| `dyngrad.erfc` | fn | yes | - | - |  |  |" in text          # erfc crosses the numpy bridge
    assert "`dyngrad.cos`" in no_fwd and "`dyngrad.log` (the engines agree)" in no_fwd
    assert "dyngrad.erfc" in never
