"""Smoke tests of `python -m dyngrad.bench`: the workloads run and agree on both engines, the check catches engines
that disagree, and the command writes its JSON. Speed is never asserted here (numbers come only from bench/)."""
import json

import numpy as np
import pytest

from dyngrad.bench import cli, runner, workloads
from dyngrad.bench.engines import engine_names, load_engines
from dyngrad.bench.progress import progress_bar

SMOKE = "op-overhead,graph-loop,gemm"


def test_quick_run_writes_json(tmp_path, capsys):
    out = tmp_path / "bench.json"
    rc = cli.main(["--quick", "--only", SMOKE, "--engines", "cpp,reference", "--json", str(out), "--png", "",
                   "--no-progress"])
    printed = capsys.readouterr().out
    assert rc == 0, printed
    data = json.loads(out.read_text())
    names = [r["name"] for r in data["results"]]
    assert names == ["op-overhead-fwd", "op-overhead", "graph-loop", "gemm"]
    for result in data["results"]:
        for engine in ("dyngrad", "reference"):
            record = result["runs"][engine]
            assert record["check_ok"], (result["name"], engine, record)
            assert record["median_s"] > 0 and record["per_unit_s"] > 0
        assert result["ratios_vs_dyngrad"]["reference"] > 0
    assert data["results"][-1]["runs"]["numpy"]["check_ok"]   # numpy's by-hand version computes the same numbers
    assert data["machine"]["mode"] == "quick" and data["machine"]["cores"] >= 1
    assert "op-overhead" in printed and "ref/dg" in printed


@pytest.mark.parametrize("name", [w.name for w in workloads.WORKLOADS])
def test_every_workload_agrees_on_both_engines(name, monkeypatch):
    """The check phase alone, at the check size: both engines (and numpy's version) give the same numbers."""
    import dyngrad
    import dyngrad.reference
    # the fallback used where scikit-learn is absent (and importing scikit-learn takes seconds)
    monkeypatch.setattr(workloads, "_digits", workloads._synthetic_digits)
    (workload,) = [w for w in workloads.WORKLOADS if w.name == name]
    checked = runner.check(workload, {"dyngrad": dyngrad, "reference": dyngrad.reference}, progress_bar(0, False))
    for engine, outcome in checked.items():
        assert "error" not in outcome, (engine, outcome)
        assert outcome["agrees"], (engine, outcome["diff"])


def test_check_catches_engines_that_disagree():
    import dyngrad
    import dyngrad.reference

    def build(dg, size):
        x = dg.tensor([1.0, 2.0])
        scale = 1.0 if dg is dyngrad else 1.001    # the reference "engine" is off by 0.1%
        return workloads.Case(lambda: None, 1, lambda: workloads._values(x * scale))

    fake = workloads.Workload("fake", "fake", "us/op", "", build, {"check": {}, "quick": {}})
    checked = runner.check(fake, {"dyngrad": dyngrad, "reference": dyngrad.reference}, progress_bar(0, False))
    assert checked["dyngrad"]["agrees"]
    assert not checked["reference"]["agrees"]
    assert "2 of 2 numbers differ" in checked["reference"]["diff"]


def test_an_engine_error_is_reported_not_raised(tmp_path):
    import dyngrad

    def build(dg, size):
        raise RuntimeError("broken op")

    fake = workloads.Workload("fake", "fake", "us/op", "", build, {"check": {}, "quick": {}})
    result = runner.run_workload(fake, {"dyngrad": dyngrad}, runner.MODES["quick"], progress_bar(0, False))
    assert "RuntimeError: broken op" in result["runs"]["dyngrad"]["error"]


def test_selection_and_engine_names():
    assert runner._split(7, 3) == [3, 2, 2] and runner._split(1, 3) == [1, 0, 0]
    assert [w.name for w in workloads.select(["mlp-train"])] == ["mlp-train-32", "mlp-train-256"]
    assert len(workloads.select(None)) == len(workloads.WORKLOADS)
    with pytest.raises(ValueError, match="unknown workload nope"):
        workloads.select(["nope"])
    assert engine_names("cpp,torch,ref") == ["dyngrad", "pytorch", "reference"]
    with pytest.raises(ValueError, match="unknown engine"):
        engine_names("cpp,jax")
    assert cli.main(["--only", "nope"]) == 2


def test_pytorch_is_optional(monkeypatch):
    from dyngrad.bench import engines
    monkeypatch.setitem(engines.ENGINE_MODULES, "pytorch", "no_such_module_named_torch")
    modules, missing = load_engines(["dyngrad", "pytorch"])
    assert list(modules) == ["dyngrad"] and missing == {"pytorch": "not installed"}


def test_values_flattens_tensors_numbers_and_missing_grads():
    import dyngrad as dg
    v = workloads._values(dg.tensor([[1.0, 2.0]]), 3.0, np.array([4.0]), None)
    assert v[:4].tolist() == [1.0, 2.0, 3.0, 4.0] and np.isnan(v[4])


def test_kernel_workloads_run_at_their_thread_count_and_restore_it():
    import dyngrad
    names = [w.name for w in workloads.select(["kernels"])]
    assert names == [f"{n}-{t}t" for n in ("cnn-train", "lstm-train", "transformer-train", "wide-mlp-train")
                     for t in (1, 2)]
    before = dyngrad.get_num_threads()
    seen = []

    def build(dg, size):
        return workloads.Case(lambda: seen.append(dg.get_num_threads()), 1, lambda: np.zeros(1))

    for threads in (1, 2):
        fake = workloads.Workload("fake", "fake", "us/op", "", build, {"check": {}, "quick": {}}, threads=threads)
        result = runner.run_workload(fake, {"dyngrad": dyngrad}, runner.MODES["quick"], progress_bar(0, False))
        assert result["threads"] == threads and set(seen) == {threads}
        assert dyngrad.get_num_threads() == before
        seen.clear()


def test_programs_group_selects_the_three_programs_at_both_thread_counts():
    """issue 26: the GPT step, the word-level LSTM step and the LSTMCell + LBFGS example, at 1 and 2 threads."""
    chosen = workloads.select(["programs"])
    assert [w.name for w in chosen] == [f"{n}-{t}t" for n in ("gpt-train", "word-lstm-train", "lstmcell-lbfgs")
                                        for t in (1, 2)]
    assert [w.threads for w in chosen] == [1, 2] * 3
    assert not set(w.name for w in chosen) & set(w.name for w in workloads.select(["kernels"]))


def test_ratios_from_a_single_timed_call_are_marked(tmp_path):
    """issue 11: --quick cells timed by one call gave wild ratios (1273x, then 4.9x) drawn as if measured."""
    import time
    import dyngrad
    import dyngrad.reference
    from dyngrad.bench import report

    def build(dg, size):
        slow = dg is dyngrad.reference
        return workloads.Case(lambda: time.sleep(0.06 if slow else 0.0), 1, lambda: np.zeros(1))

    fake = workloads.Workload("fake", "fake", "us/op", "", build, {"check": {}, "quick": {}})
    modules = {"dyngrad": dyngrad, "reference": dyngrad.reference}
    result = runner.run_workload(fake, modules, runner.MODES["quick"], progress_bar(0, False))
    assert len(result["runs"]["reference"]["seconds"]) == 1 and len(result["runs"]["dyngrad"]["seconds"]) > 1
    assert result["single_call_ratios"] == ["reference"]
    info = {"mode": "quick", "date": "d", "cpu": "c", "cores": 2, "python": "3", "numpy": "2"}
    row = [line for line in report.table([result], ["dyngrad", "reference"], info).splitlines()
           if line.startswith("fake")][0]
    assert row.split()[-1].endswith("x*"), row
    if report.write_png(str(tmp_path / "chart.png"), [result], info):
        assert (tmp_path / "chart.png").stat().st_size > 0


def test_chart_colours_are_fixed_per_engine():
    """issue 25: orange was numpy in one run and PyTorch in the next, and hollow single-call bars lost their colour.
    Each engine has one colour in every chart; a hollow bar keeps it as its outline (and hatch)."""
    pytest.importorskip("matplotlib")
    from matplotlib.colors import to_rgba
    from dyngrad.bench import report
    info = {"mode": "quick", "date": "2026-01-01", "cpu": "c"}

    def bar_colours(results):
        fig = report.chart(results, info)
        ax = fig.axes[0]
        legend = {text.get_text().split()[0]: handle for text, handle in
                  zip(ax.get_legend().get_texts(), ax.get_legend().legend_handles)}
        colours = {}
        for container in ax.containers:
            engine = container.get_label().split()[0]
            for bar in container.patches:
                colours.setdefault(engine, set()).add((bar.get_fill(), bar.get_facecolor() if bar.get_fill()
                                                       else bar.get_edgecolor()))
        assert set(legend) == set(colours)
        return colours

    only_numpy = [{"name": "gemm", "ratios_vs_dyngrad": {"numpy": 1.5}}]
    everything = [{"name": "gemm", "ratios_vs_dyngrad": {"reference": 40.0, "pytorch": 0.8, "numpy": 1.5},
                   "single_call_ratios": ["reference"]},
                  {"name": "mlp", "ratios_vs_dyngrad": {"reference": 20.0, "pytorch": 1.2}}]
    first, second = bar_colours(only_numpy), bar_colours(everything)
    assert first["numpy"] == second["numpy"] == {(True, to_rgba(report.CHART_COLOURS["numpy"]))}
    assert second["pytorch"] == {(True, to_rgba(report.CHART_COLOURS["pytorch"]))}
    # the reference's single-call gemm bar is hollow, outlined in the reference's colour; its mlp bar is filled
    assert second["reference"] == {(False, to_rgba(report.CHART_COLOURS["reference"])),
                                   (True, to_rgba(report.CHART_COLOURS["reference"]))}
    assert len({report.CHART_COLOURS[e] for e in ("reference", "pytorch", "numpy")}) == 3


def test_compile_group_compares_each_kernel_step_eager_verified_and_static(tmp_path):
    """issue 20 "Seeing it": `--only compile` holds, for each of the four kernel-bound steps at 1 and 2 threads, its
    eager row and its verified and static replay rows; the report pairs them in one comparison (table, JSON, chart)."""
    from dyngrad.bench import report

    names = [w.name for w in workloads.select(["compile"])]
    for group in workloads.KERNEL_GROUPS:
        for t in (1, 2):
            assert {f"{group}-{t}t", f"{group}-{t}t-verified", f"{group}-{t}t-static"} <= set(names)

    def result(name, dg_s, torch_s):
        runs = {"dyngrad": {"per_unit_s": dg_s, "seconds": [dg_s] * 3},
                "pytorch": {"per_unit_s": torch_s, "seconds": [torch_s] * 3}}
        return {"name": name, "unit": "ms/step", "threads": 1, "runs": runs,
                "ratios_vs_dyngrad": {"pytorch": torch_s / dg_s}, "single_call_ratios": [], "size": {}}

    results = [result("cnn-train-1t", 0.02, 0.03), result("cnn-train-1t-verified", 0.025, 0.03),
               result("cnn-train-1t-static", 0.01, 0.012)]
    info = {"mode": "quick", "date": "d", "cpu": "c", "cores": 2, "python": "3", "numpy": "2", "torch_compile": True}
    (row,) = report.comparison(results, info)
    assert row["workload"] == "cnn-train-1t"
    assert (row["eager"], row["verified"], row["static"], row["torch_eager"], row["torch_compile"]) == \
        (0.02, 0.025, 0.01, 0.03, 0.012)
    assert row["ratios"]["eager/static"] == pytest.approx(2.0)
    assert row["ratios"]["torch eager/static"] == pytest.approx(3.0)
    assert report.comparison(results, dict(info, torch_compile=False))[0]["torch_compile"] is None
    text = report.table(results, ["dyngrad", "pytorch"], info)
    assert "torch.compile/static" in text and "3.00x" in text.split("Dynamic against static")[1]
    report.write_json(str(tmp_path / "r.json"), results, info)
    assert json.loads((tmp_path / "r.json").read_text())["compile_comparison"][0]["workload"] == "cnn-train-1t"
    if report.write_png(str(tmp_path / "chart.png"), results, info):
        assert (tmp_path / "chart.png").stat().st_size > 0
