"""docs/pitfalls.md cannot drift: every example on the page is run here, on both engines, and what it prints
(output, warnings, the error it raises) must be exactly the text the page shows under it.

The page marks each example with `<!-- run: NAME -->` before a ```python block and `<!-- output: NAME -->` before
the ```text block of what it prints. Examples run as a file named train.py (so call sites read train.py:LINE);
in the expected text, a line `...` stands for any number of lines (used for stack traces).

    python tests/test_pitfalls_doc.py NAME [--engine reference]    # print what an example gives, to update the page
"""
import contextlib
import io
import linecache
import os
import re
import sys
import warnings

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PAGE = os.path.join(ROOT, "docs", "pitfalls.md")
BLOCK = re.compile(r"<!-- (run|output): ([\w-]+) -->\n```(?:python|text)\n(.*?)```", re.S)
ENGINES = {"cpp": "dyngrad", "reference": "dyngrad.reference"}


def page_blocks():
    """{name: code}, {name: expected output} from the page."""
    with open(PAGE) as f:
        text = f.read()
    code, output = {}, {}
    for kind, name, body in BLOCK.findall(text):
        target = code if kind == "run" else output
        assert name not in target, f"pitfalls.md: two '{kind}' blocks named {name}"
        target[name] = body
    return code, output


def run_example(source, engine):
    """What the example prints: stdout, then each warning as 'Category: message', then 'Type: message' of the
    exception that ended it (if any). Switches are reset to their defaults afterwards."""
    import importlib
    module = ENGINES[engine]
    source = source.replace("import dyngrad as dg", f"import {module} as dg")
    dg = importlib.import_module(module)
    linecache.cache["train.py"] = (len(source), None, source.splitlines(True), "train.py")   # stack traces show code
    out = io.StringIO()
    tail = []
    try:
        with warnings.catch_warnings(record=True) as caught, contextlib.redirect_stdout(out):
            warnings.simplefilter("always")
            try:
                exec(compile(source, "train.py", "exec"), {"__name__": "__main__"})
            except Exception as e:  # noqa: BLE001  the error is part of the output
                tail.append(f"{type(e).__name__}: {e}")
        lines = out.getvalue().splitlines()
        lines += [f"{w.category.__name__}: {w.message}" for w in caught]
        lines += tail
        return "\n".join(line.rstrip() for line in "\n".join(lines).splitlines())
    finally:
        dg.autograd.set_record_call_sites(True)
        dg.autograd.set_detect_anomaly(False)
        dg.autograd.set_graph_growth_warning(False)
        linecache.cache.pop("train.py", None)


def matches(expected, actual):
    """Line-by-line equality, where an expected line `...` matches any number of actual lines."""
    pattern = "\n".join(".*?" if line == "..." else re.escape(line) for line in expected.rstrip("\n").split("\n"))
    pattern = pattern.replace("\n.*?\n", "(?:\n.*?)?\n")
    return re.fullmatch(pattern, actual, re.S) is not None


CODE, OUTPUT = page_blocks()


def test_every_example_has_its_output_and_the_page_has_examples():
    assert len(CODE) >= 7, "pitfalls.md lost its examples"
    assert set(CODE) == set(OUTPUT), f"examples without output: {set(CODE) ^ set(OUTPUT)}"


@pytest.mark.parametrize("engine", list(ENGINES))
@pytest.mark.parametrize("name", sorted(CODE))
def test_page_shows_what_dyngrad_says(name, engine):
    actual = run_example(CODE[name], engine)
    assert matches(OUTPUT[name], actual), (f"docs/pitfalls.md, example {name} on the {engine} engine: the page "
                                           f"shows\n{OUTPUT[name]}\nbut the example prints\n{actual}")


def test_matches_wildcards():
    assert matches("a\n...\nd\n", "a\nb\nc\nd")
    assert matches("a\n...\nd\n", "a\nd")
    assert not matches("a\nd\n", "a\nb\nd")
    assert not matches("a (x)\n", "a (y)")


if __name__ == "__main__":
    sys.path.insert(0, os.path.join(ROOT, "python"))
    engine = "reference" if "--engine" in sys.argv and sys.argv[-1] == "reference" else "cpp"
    print(run_example(CODE[sys.argv[1]], engine))
