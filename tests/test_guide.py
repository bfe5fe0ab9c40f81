"""The user guide cannot drift: every ```python block of docs/guide/*.md runs here, and what it prints must be the
text the page shows under it.

A page's blocks run in order in one fresh interpreter (like a notebook: a block sees the names of the blocks
before it), once per engine: on the reference engine, `import dyngrad as X` is read as
`import dyngrad.reference as X`. A ```text block right after a ```python block is that block's expected output,
compared exactly (the pages print round numbers so that no CPU or BLAS changes them). An HTML comment on the line
before a block changes how it runs:

    <!-- guide: skip -->        shown, not run (a sketch needing a cluster, a file, ...; say why in the text)
    <!-- guide: cpp -->         run on the C++ engine only
    <!-- guide: torch -->       needs PyTorch (the page's other blocks still run without it)

    python tests/test_guide.py docs/guide/PAGE.md [--engine reference]   # print each block's output
"""
import json
import os
import re
import subprocess
import sys

import pytest

from helpers import subprocess_env

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GUIDE = os.path.join(ROOT, "docs", "guide")
PAGES = sorted(f for f in os.listdir(GUIDE) if f.endswith(".md"))
FENCE = re.compile(r"(?:<!-- guide: (\w+) -->\n)?```(python|text)\n(.*?)```\n", re.S)
ENGINES = {"cpp": "dyngrad", "reference": "dyngrad.reference"}
MARK = "\x00--guide-block-end--\x00"


def page_blocks(page):
    """[(mark, code, expected output or None)] of a page, in order."""
    with open(os.path.join(GUIDE, page), encoding="utf-8") as f:
        text = f.read()
    blocks = []
    matches = list(FENCE.finditer(text))
    for i, m in enumerate(matches):
        mark, lang, body = m.groups()
        if lang != "python":
            continue
        expected = None
        nxt = matches[i + 1] if i + 1 < len(matches) else None
        if nxt is not None and nxt.group(2) == "text" and not text[m.end():nxt.start()].strip():
            expected = nxt.group(3)
        assert mark in (None, "skip", "cpp", "torch"), f"{page}: unknown mark <!-- guide: {mark} -->"
        blocks.append((mark, body, expected))
    return blocks


def runnable(blocks, engine, have_torch):
    return [(code, expected) for mark, code, expected in blocks
            if mark != "skip" and not (mark == "cpp" and engine != "cpp") and not (mark == "torch" and not have_torch)]


def run_page(page, engine, have_torch):
    """The stdout of each runnable block of the page, run in one subprocess on the engine."""
    codes = []
    for code, _ in runnable(page_blocks(page), engine, have_torch):
        if engine == "reference":
            code = re.sub(r"^(\s*)import dyngrad as (\w+)", r"\1import dyngrad.reference as \2", code, flags=re.M)
        codes.append(code)
    driver = (
        "import json, sys\n"
        f"blocks = json.loads({json.dumps(json.dumps(codes))})\n"
        "namespace = {'__name__': '__main__'}\n"
        "for i, code in enumerate(blocks):\n"
        "    exec(compile(code, f'guide_block_{i}.py', 'exec'), namespace)\n"
        f"    print({MARK!r}, flush=True)\n")
    result = subprocess.run([sys.executable, "-c", driver], capture_output=True, text=True, timeout=300,
                            env=subprocess_env(), cwd=GUIDE)
    outputs = result.stdout.split(MARK + "\n")
    if result.returncode != 0:
        done = len(outputs) - 1
        raise AssertionError(f"{page} on {engine}: block {done + 1} of {len(codes)} failed:\n{codes[done]}\n"
                             f"{result.stderr[-3000:]}")
    return outputs[:-1]


def _have_torch():
    try:
        import torch  # noqa: F401
    except ImportError:
        return False
    return True


def test_the_guide_has_its_pages():
    assert "index.md" in PAGES and len(PAGES) >= 12, PAGES
    for page in PAGES:
        assert page == "index.md" or page_blocks(page) or page.startswith(("06-", "11-")), \
            f"{page} has no runnable example"


@pytest.mark.parametrize("engine", list(ENGINES))
@pytest.mark.parametrize("page", [p for p in PAGES if page_blocks(p)])
def test_page_runs_and_prints_what_it_shows(page, engine):
    have_torch = _have_torch()
    blocks = runnable(page_blocks(page), engine, have_torch)
    if not blocks:
        pytest.skip(f"{page} has no block for the {engine} engine here")
    outputs = run_page(page, engine, have_torch)
    for (code, expected), actual in zip(blocks, outputs):
        if expected is not None:
            actual = "\n".join(line.rstrip() for line in actual.rstrip("\n").split("\n"))
            assert actual == expected.rstrip("\n"), \
                f"{page} on {engine}: the block\n{code}\nprints\n{actual}\ninstead of\n{expected}"


def test_the_guide_links_resolve():
    """Relative links of the guide point at files that exist."""
    broken = []
    for page in PAGES:
        with open(os.path.join(GUIDE, page), encoding="utf-8") as f:
            text = f.read()
        for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text):
            if "://" not in target and not os.path.exists(os.path.join(GUIDE, target)):
                broken.append(f"{page}: {target}")
    assert not broken, broken


def test_the_figures_are_current(tmp_path):
    """docs/guide/figures/*.dot are what docs/guide/make_figures.py draws today (the SVGs are redrawn, not compared:
    they depend on the Graphviz version)."""
    result = subprocess.run([sys.executable, os.path.join(GUIDE, "make_figures.py"), "--out", str(tmp_path)],
                            capture_output=True, text=True, timeout=120, env=subprocess_env())
    assert result.returncode == 0, result.stderr
    fresh = sorted(p for p in os.listdir(tmp_path) if p.endswith(".dot"))
    kept = sorted(p for p in os.listdir(os.path.join(GUIDE, "figures")) if p.endswith(".dot"))
    assert fresh == kept
    for name in fresh:
        with open(tmp_path / name, encoding="utf-8") as a, \
                open(os.path.join(GUIDE, "figures", name), encoding="utf-8") as b:
            assert a.read() == b.read(), f"docs/guide/figures/{name} is stale: run docs/guide/make_figures.py"


if __name__ == "__main__":
    path, engine = sys.argv[1], "reference" if "--engine" in sys.argv and sys.argv[-1] == "reference" else "cpp"
    for (code, _), out in zip(runnable(page_blocks(os.path.basename(path)), engine, _have_torch()),
                              run_page(os.path.basename(path), engine, _have_torch())):
        print(code + "----- prints:\n" + out)
