"""Seeing what dyngrad.compile recorded (issue 20): dg.viz.draw_program draws a compiled program's variants, steps
and guards (Note [Drawing a recorded program] in python/dyngrad/viz/program.py), on both engines."""
import re
import shutil

import numpy as np
import pytest

from helpers import array_tensor as t


def branchy(dg):
    def f(x):
        y = x.tanh() * 3
        if y.sum() > 0:
            return (y * y).sum(0)
        return (y - 1).exp().sum(0)
    return f


@pytest.mark.parametrize("mode", ["verified", "reduce-overhead"])
def test_draw_program_shows_steps_guards_and_variants(dg, mode):
    compiled = dg.compile(branchy(dg), mode=mode)
    for v in ([[1., 2.]], [[1., 3.]], [[-3., 1.]], [[-1., -1.]]):
        compiled(t(dg, v))
    src = dg.viz.draw_program(compiled)
    assert src.startswith("digraph program {") and src.rstrip().endswith("}")
    assert src == dg.viz.draw_program(compiled.compile_stats)
    labels = dict(re.findall(r'^  (\w+) \[label="([^"]*)"', src, re.M))
    # one entry guard, two variants sharing the prefix up to the value guard (drawn once); each variant has its own
    # guard step there, expecting its value
    assert sum(name.startswith("g0end") for name in labels) == 2
    assert sum(1 for lab in labels.values() if lab.startswith("entry guard")) == 1
    guards = sorted(lab for lab in labels.values() if "guard: ==" in lab)
    assert len(guards) == 2 and all("item" in g and "test_compile_viz.py:" in g for g in guards)
    assert "guard: == False" in guards[0] and "guard: == True" in guards[1]
    tanhs = [lab for lab in labels.values() if re.match(r"\d+: tanh\(", lab)]
    assert len(tanhs) == 1                                  # the shared prefix is one box
    assert any(re.match(r"\d+: exp\(", lab) for lab in labels.values())     # the second variant's own steps
    assert "variants recorded" in labels["legend"] and f"({compiled.compile_stats.mode})" in labels["legend"]
    # every edge joins drawn nodes; the guard has two successors (one per variant)
    edges = re.findall(r"^  (\w+) -> (\w+)", src, re.M)
    assert all(a in labels and b in labels for a, b in edges)
    guard_nodes = {name for name, lab in labels.items() if "guard: ==" in lab}
    before = {a for a, b in edges if b in guard_nodes and not a.startswith("g0")}
    assert len(before) == 1 and re.match(r"\d+: compare\(", labels[before.pop()])   # the branch point: y.sum() > 0


def test_draw_program_shows_data_flow_and_externals(dg):
    w = t(dg, [[0.5, -1.0], [2.0, 0.25]], requires_grad=True)

    def f(x):
        return (x @ w).relu().sum()
    compiled = dg.compile(f, mode="reduce-overhead")
    x = t(dg, [[1., 2.]])
    compiled(x), compiled(x)
    src = dg.viz.draw_program(compiled)
    labels = dict(re.findall(r'^  (\w+) \[label="([^"]*)"', src, re.M))
    external = next(name for name, lab in labels.items() if lab.startswith("external"))
    matmul = next(name for name, lab in labels.items() if re.match(r"\d+: matmul\(", lab))
    assert re.search(rf"^  {external} -> {matmul} \[.*dashed", src, re.M)     # w is read by reference
    assert "1 replays" in src and "1 hits" in labels["legend"]
    assert "dashed" not in dg.viz.draw_program(compiled, data_edges=False)


def test_draw_program_refuses_other_objects(dg):
    with pytest.raises(TypeError, match="draw_program: expected what dyngrad.compile returned"):
        dg.viz.draw_program(lambda x: x)


@pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz's dot is not installed")
def test_render_program(dg, tmp_path):
    compiled = dg.compile(branchy(dg), mode="verified")
    compiled(t(dg, [[1., 2.]])), compiled(t(dg, [[-1., -2.]]))
    path = dg.viz.render_program(compiled, path=str(tmp_path / "p.svg"))
    assert open(path).read().lstrip().startswith(("<?xml", "<svg"))


def test_compiler_reports_variants_misses_and_eager_fallbacks(dg):
    """dyngrad.compiler's figures per program (issue 20): variants with their steps, value guards, replays and what
    each was recorded after; misses with reasons and lines; eager calls with their reasons."""
    import warnings
    compiled = dg.compile(branchy(dg), mode="reduce-overhead", recompile_limit=2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        for v in ([[1., 2.]], [[1., 3.]], [[-3., 1.]], [[-1., -1.]], [[1., 1.]]):
            compiled(t(dg, v))
        compiled(t(dg, [[1., 2., 3.]]))              # a new shape: a new entry guard, over the limit: eager
    stats = compiled.compile_stats
    rows = stats.variant_table()
    assert len(rows) == 2 and sum(r["replays"] for r in rows) == stats.hits == 3
    first, = [r for r in rows if r["recorded_after"].startswith("the first call")]
    second, = [r for r in rows if r is not first]
    assert "item returned False where the recording has 'True'" in second["recorded_after"]
    assert second["line"].startswith("test_compile_viz.py:") and first["value_guards"] == 1
    assert stats.eager_calls == 1 and stats.eager_reasons == {"the variant limit (2) is reached": 1}
    text = stats.report()
    assert text.startswith(f"{stats.name} (static): 6 calls, 3 hits") and "eager: 1 call: the variant limit" in text
    assert "recorded after" in text and "miss: " in text
    assert text in dg.compiler.report()
    d = stats.as_dict()
    assert d["eager_reasons"] == stats.eager_reasons and len(d["variant_table"]) == 2


def test_verified_report_counts_ops_matched_in_cpp(dg):
    compiled = dg.compile(branchy(dg), mode="verified")
    for v in ([[1., 2.]], [[1., 3.]], [[2., 3.]]):
        compiled(t(dg, v))
    stats = compiled.compile_stats
    assert stats.hits == 2 and "ops matched in C++" in stats.report()
    if dg.__name__ == "dyngrad":                      # the reference engine compares in Python
        assert stats.matched_in_cpp > 0
    else:
        assert stats.matched_in_cpp == 0
