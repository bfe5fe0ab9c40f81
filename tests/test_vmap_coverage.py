"""Batching-rule coverage over the whole API table (issue 21: "a missing batching rule is a test failure, never a
silent per-row loop"), on both engines.

tests/vmap_driver.py calls every op of the table (_api/table.py) that has a sample input, once under dyngrad.vmap
over a batch of rows, and checks the result against the explicit loop over the rows; it records whether the
fallback loop of _api/ops/vmap.py (`_loop`, which appends the key it runs for to vmap.FALLBACKS) did any of the
work. FALLS_BACK names the ops allowed to fall back, each with the reason; any other fallback fails, and so does an
entry that no longer falls back (the list stays true). NOT_BATCHED names the ops whose call under vmap raises or
disagrees with the loop today, with what goes wrong; it must stay exactly the set the driver sees.
"""
import pytest

from helpers import subprocess_env

FALLS_BACK = {
    'F.dropout2d': "the sample's 2-D row is not dropout2d/3d's shape (torch warns); the loop keeps its per-row reading",
    'F.dropout3d': "the sample's 2-D row is not dropout2d/3d's shape (torch warns); the loop keeps its per-row reading",
    'bincount': "its length is each row's max + 1 (data-dependent): the loop stacks rows that agree, and fails when they differ, as torch.func's fallback does",
    'feature_alpha_dropout': "the sample (p=0, train a tensor) reads train's truth value per row",
    'feature_alpha_dropout_': "the sample (p=0, train a tensor) reads train's truth value per row",
}
NOT_BATCHED = {
    'Size': 'not an op: Size(tensor) reads values (the sample is a constructor call)',
    'Tensor': 'vmap refuses Tensor(row) (the error says so): the legacy constructor initialises a new unbatched tensor in place, which cannot hold the row; the typed constructors (DoubleTensor(row), ...) return the row',
    'apply_': 'runs a Python callable per element: no out-of-place twin to batch (the error says so)',
    'batch_norm': "weight and running_mean are one tensor here: a row's stat update moves the next's weight",
    'instance_norm': "weight and running_mean are one tensor here: a row's stat update moves the next's weight",
    'map2_': 'runs a Python callable per element: no out-of-place twin to batch (the error says so)',
    'map_': 'runs a Python callable per element: no out-of-place twin to batch (the error says so)',
    'range': "reads the row's values as bounds (data-dependent; torch refuses)",
    'resize_': 'resizes storage, which a row does not own (the error says so)',
    'arange': "refused, as torch.func refuses it: a batched bound would size each row's result by its value",
    'argwhere': "refused, as torch.func refuses it: a dynamic shape (each row's count of nonzeros)",
    'nonzero': "refused, as torch.func refuses it: a dynamic shape (each row's count of nonzeros)",
    'one_hot': "refused as torch.func refuses it: the sample's num_classes=-1 sizes the result from the values (the error asks for num_classes; with one, a rule batches it)",
    'unique': "refused, as torch.func refuses it: a dynamic shape (each row's count of distinct values)",
    'unique_consecutive': "refused, as torch.func refuses it: a dynamic shape (each row's count of runs)",
    'where': "refused, as torch.func refuses it: where(condition) alone is nonzero's tuple (a dynamic shape)",
}


_REPORTS = {}


def _report(dg):
    if dg.__name__ not in _REPORTS:
        import json
        import os
        import subprocess
        import sys
        import tempfile
        driver = os.path.join(os.path.dirname(os.path.abspath(__file__)), "vmap_driver.py")
        with tempfile.TemporaryDirectory() as folder:
            path = os.path.join(folder, "vmap.json")
            done = subprocess.run([sys.executable, driver, "--engine", dg.__name__, "--report", path],
                                  env=subprocess_env(), timeout=900, capture_output=True, text=True)
            assert done.returncode == 0, done.stderr[-3000:]
            with open(path, encoding="utf-8") as f:
                _REPORTS[dg.__name__] = json.load(f)
    return _REPORTS[dg.__name__]


def _with(report, *statuses):
    return {k: v for k, v in report.items() if v["status"] in statuses}


def test_the_driver_reaches_the_table(dg):
    report = _report(dg)
    assert len(report) > 700, f"only {len(report)} ops of the table were run under vmap"
    # the count sees both outcomes: a rule (sum, matmul) and the fallback (an op listed as falling back)
    assert report["sum"]["status"] == "rule" and report["matmul"]["status"] == "rule"
    assert any(v["status"] == "fallback" for v in report.values()) == bool(FALLS_BACK)


def test_only_the_listed_ops_fall_back(dg):
    fell = _with(_report(dg), "fallback")
    extra = {k: v["how"] for k, v in fell.items() if k not in FALLS_BACK}
    assert not extra, f"these ops ran through the fallback loop, with no batching rule: {extra}"


def test_every_listed_op_still_falls_back(dg):
    report = _report(dg)
    stale = {k: report.get(k, {}).get("status", "not run") for k in FALLS_BACK
             if report.get(k, {}).get("status") != "fallback"}
    assert not stale, f"FALLS_BACK lists ops that no longer fall back (remove them): {stale}"


def test_batched_values_match_the_loop(dg):
    report = _report(dg)
    bad = {k: v["status"] + ": " + v["error"] for k, v in _with(report, "error", "mismatch").items()
           if k not in NOT_BATCHED}
    assert not bad, f"under vmap these ops raise or disagree with the loop over the rows: {bad}"
    stale = sorted(k for k in NOT_BATCHED if report.get(k, {}).get("status") not in ("error", "mismatch"))
    assert not stale, f"NOT_BATCHED lists ops that now batch (remove them): {stale}"


def test_both_engines_agree():
    import dyngrad
    import dyngrad.reference
    a, b = _report(dyngrad), _report(dyngrad.reference)
    differ = {k: (a.get(k, {}).get("status"), b.get(k, {}).get("status")) for k in set(a) | set(b)
              if a.get(k, {}).get("status") != b.get(k, {}).get("status")}
    assert not differ, f"the engines batch these ops differently (C++, reference): {differ}"


@pytest.mark.parametrize("name", ["alpha_dropout", "feature_alpha_dropout"])
def test_alpha_dropout_follows_randomness(dg, name):
    """'error' refuses the draw; 'same' gives equal rows on equal inputs; 'different' draws each row's own mask
    (per channel for the feature variant), each value being the kept input's affine image or the dropped value."""
    import numpy as np
    F = dg.nn.functional
    op = getattr(F, name)
    x = dg.tensor(np.random.default_rng(1).uniform(0.5, 1.5, (4, 6, 8, 3)))
    rows = x[:1].expand(4, 6, 8, 3).contiguous()
    with pytest.raises(RuntimeError, match="randomness"):
        dg.vmap(lambda r: op(r, 0.5, True))(x)
    same = dg.vmap(lambda r: op(r, 0.5, True), randomness="same")(rows).numpy()
    assert all(np.array_equal(same[0], same[k]) for k in range(1, 4))
    diff = dg.vmap(lambda r: op(r, 0.5, True), randomness="different")(rows).numpy()
    assert not all(np.array_equal(diff[0], diff[k]) for k in range(1, 4))
    for out in (same, diff):
        alpha = -1.7580993408473766
        a = (0.5 * (1 + alpha * alpha * 0.5)) ** -0.5
        b = -a * alpha * 0.5
        kept = np.isclose(out, a * rows.numpy() + b)
        dropped = np.isclose(out, a * alpha + b)
        assert (kept | dropped).all() and kept.any() and dropped.any()
        if name == "feature_alpha_dropout":            # one decision per (row, sample, channel)
            assert (kept.all(axis=3) | dropped.all(axis=3)).all()
    inplace = rows.clone()
    got = dg.vmap(lambda r: op(r, 0.5, True, True), randomness="same")(inplace)
    assert np.array_equal(got.numpy()[0], got.numpy()[1])
