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


def _engine_code(code, engine):
    if engine == "reference":
        code = re.sub(r"^(\s*)import dyngrad as (\w+)", r"\1import dyngrad.reference as \2", code, flags=re.M)
    return code


# One interpreter per engine runs every page, each page in a fresh namespace (an interpreter per page would cost
# seconds each). After each block the driver prints MARK; a block that raises prints ERROR and its traceback
# instead of its output, and the page's later blocks are not run (their chunks are empty).
DRIVER = """
import json, sys, traceback
for page, codes in json.load(sys.stdin).items():
    namespace, failed = {"__name__": "__main__"}, False
    for i, code in enumerate(codes):
        if not failed:
            try:
                exec(compile(code, f"guide_block_{i}.py", "exec"), namespace)
            except BaseException:
                failed = True
                print(ERROR + traceback.format_exc())
        print(MARK, flush=True)
"""
ERROR = "\x00--guide-block-error--\x00"


def run_pages(engine, have_torch, pages=None):
    """{page: [stdout of each runnable block]} of every page (or of `pages`) run on the engine; the output of a
    block that raised is ERROR + its traceback."""
    codes = {page: [_engine_code(code, engine) for code, _ in runnable(page_blocks(page), engine, have_torch)]
             for page in pages or PAGES}
    result = subprocess.run([sys.executable, "-c", f"MARK, ERROR = {MARK!r}, {ERROR!r}" + DRIVER],
                            input=json.dumps(codes), capture_output=True, text=True, timeout=600,
                            env=subprocess_env(), cwd=GUIDE)
    assert result.returncode == 0, result.stderr
    chunks = result.stdout.split(MARK + "\n")
    outputs = {}
    for page, page_codes in codes.items():
        outputs[page], chunks = chunks[:len(page_codes)], chunks[len(page_codes):]
    return outputs


_OUTPUTS = {}


def page_outputs(page, engine, have_torch):
    """The outputs of one page's blocks, from one run of every page per engine."""
    if engine not in _OUTPUTS:
        _OUTPUTS[engine] = run_pages(engine, have_torch)
    return _OUTPUTS[engine][page]


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
    outputs = page_outputs(page, engine, have_torch)
    for (code, expected), actual in zip(blocks, outputs):
        assert not actual.startswith(ERROR), f"{page} on {engine}: the block\n{code}\nraised:\n{actual[len(ERROR):]}"
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
    page, engine = os.path.basename(sys.argv[1]), "reference" if sys.argv[-1] == "reference" else "cpp"
    for (code, _), out in zip(runnable(page_blocks(page), engine, _have_torch()),
                              run_pages(engine, _have_torch(), [page])[page]):
        print(code + "----- prints:\n" + out)
