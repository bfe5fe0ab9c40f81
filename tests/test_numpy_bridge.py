"""The numpy bridge (python/dyngrad/_api/bridge.py, Note [The numpy bridge]) is the only way from a tensor's values to
numpy and back, and the table's `uses` column says truthfully which rows take it.

tests/bridge_driver.py calls every row of the table on small inputs in a child process, counting the calls of the
bridge's crossing functions made during each row's call. The static rule in tests/test_layout.py (no
`_numpy_view`, `_C.from_numpy` or `_C.copy_from_numpy` outside the bridge, crossing functions only called through
the module) makes that count complete: every way to numpy goes through a counted function. A row that crossed must
say `numpy`; one that says `numpy` must have crossed; and all but a short list of rows must have been called.
"""
import ast
import os

import pytest

from helpers import bridge_report
from test_layout import PACKAGE, shared_files

CROSSING = ("view", "host_array", "host_values", "share", "copy", "from_array", "host_result", "round_to")

# rows the driver cannot call, with the reason; their `uses` is then read, not checked
NOT_CALLED = {
    **{name: "a dtype object, not a function" for name in (
        "dtype float32 float64 int64 bool float double long int32 int16 int8 uint8 float16 bfloat16 int short "
        "half complex64 complex128 cfloat cdouble").split()},
    "default_generator": "a Generator object, not a function",
    "pin_memory": "raises: pinned memory needs an accelerator",
    "cuda": "raises: dyngrad has no CUDA",
}


@pytest.fixture(scope="module")
def report():
    return bridge_report()


@pytest.fixture(scope="module")
def table_rows():
    from dyngrad._api.table import rows
    return rows()


def test_rows_that_cross_say_numpy(report, table_rows):
    missing = [f"{table_rows[i].name} ({table_rows[i].impl}; called as {e['how']})" for i, e in report.items()
               if e["crossed"] and "numpy" not in table_rows[i].uses]
    assert not missing, f"rows that cross the numpy bridge without `numpy` in their uses: {missing}"


def test_rows_that_say_numpy_cross(report, table_rows):
    false = [f"{table_rows[i].name} ({table_rows[i].impl}; called as {e['how']})" for i, e in report.items()
             if e["called"] and not e["crossed"] and "numpy" in table_rows[i].uses]
    assert not false, f"rows whose uses say `numpy` but whose call did not cross the bridge: {false}"


def test_every_row_is_called(report, table_rows):
    """The driver calls all rows but those of NOT_CALLED (each with its reason), so the two checks above see them."""
    uncalled = sorted({table_rows[i].name for i, e in report.items() if not e["called"]} - set(NOT_CALLED))
    assert not uncalled, f"rows the bridge driver could not call (give them SAMPLES in bridge_driver.py): {uncalled}"
    stale = sorted(set(NOT_CALLED) - {table_rows[i].name for i, e in report.items() if not e["called"]})
    assert not stale, f"NOT_CALLED lists rows the driver does call: {stale}"


def test_the_count_sees_a_crossing_and_its_absence(report, table_rows):
    """The driver's count is not vacuous: erfc computes with numpy (crossed), add is the core's (not crossed)."""
    by_name = {}
    for i, e in report.items():
        by_name.setdefault(table_rows[i].name, []).append(e)
    assert all(e["crossed"] for e in by_name["erfc"]) and "host_values" in by_name["erfc"][0]["functions"]
    assert not any(e["crossed"] for e in by_name["add"])
    assert sum(e["crossed"] for e in report.values()) > 300


def test_crossings_go_through_the_bridge_only():
    """Only _api/bridge.py touches a tensor's memory as numpy (`_numpy_view`) or makes tensors of arrays
    (`_C.from_numpy`, `_C.copy_from_numpy`), and its crossing functions are called through the module
    (`bridge.host_values(t)`), never imported by name: so the driver's count of a call's crossings is complete."""
    bad = []
    for rel, path in sorted(shared_files()):
        if rel == os.path.join("_api", "bridge.py"):
            continue
        tree = ast.parse(open(path, encoding="utf-8").read())
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and (node.attr == "_numpy_view" or (
                    node.attr in ("from_numpy", "copy_from_numpy") and isinstance(node.value, ast.Name)
                    and node.value.id == "_C")):
                bad.append(f"{rel}:{node.lineno}: {node.attr}")
            elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[-1] == "bridge":
                bad += [f"{rel}:{node.lineno}: imports {a.name} by name" for a in node.names if a.name in CROSSING]
    assert not bad, f"numpy crossings outside the bridge: {bad}"


def test_bridge_imports_only_the_core():
    tree = ast.parse(open(os.path.join(PACKAGE, "_api", "bridge.py"), encoding="utf-8").read())
    ours = [n for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.level]
    assert [(n.level, n.module, [a.name for a in n.names]) for n in ours] == [(2, None, ["_C"])]
