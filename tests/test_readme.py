"""The README's claims that a test can check: its first example prints what its comment says, on both engines;
every example and the docs it names are linked and exist; it speaks of features, not of issue numbers."""
import contextlib
import io
import os
import re

import dyngrad as dg
import dyngrad.reference

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as _f:
    README = _f.read()


def test_first_example_prints_its_comment(dg):
    code = re.search(r"```python\n(.*?)```", README, re.S).group(1)
    expected = re.search(r"print\(x\.grad\)\s+# (.*)", code).group(1)
    code = code.replace("import dyngrad as dg", f"import {dg.__name__} as dg")
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, "README.md", "exec"), {"__name__": "__main__"})
    assert out.getvalue().strip() == expected


def test_every_example_is_named():
    examples = sorted(f for f in os.listdir(os.path.join(ROOT, "examples")) if f.endswith(".py") and f[0] != "_")
    missing = [f for f in examples if f"examples/{f}" not in README]
    assert not missing, f"README.md does not mention {missing}"


def test_links_resolve_and_the_docs_are_linked():
    targets = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", README)
    broken = [t for t in targets if "://" not in t and not os.path.exists(os.path.join(ROOT, t))]
    assert not broken, broken
    for page in ("docs/guide/index.md", "docs/serialization.md", "docs/api.md", "docs/pitfalls.md"):
        assert f"]({page}" in README, f"README.md does not link {page}"


def test_no_issue_numbers():
    assert not re.search(r"\bissues? \d+", README, re.I), "the README names features, not issue numbers"


def test_random_numbers_claim_is_true():
    """The README says both engines draw the same random numbers after the same seed: check that it is so."""
    assert "both engines run the same generator" in README
    draws = []
    for engine in (dg, dg.reference):
        engine.manual_seed(0)
        draws.append((engine.rand(5).tolist(), engine.randint(0, 100, (5,)).tolist()))
    assert draws[0] == draws[1]
