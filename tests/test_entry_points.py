"""Every entry point a user can run has a real `--help`: it exits 0, prints a usage line, and changes nothing (no
tracked or untracked file of the checkout is written, emptied or deleted). A `--help` that ran the script instead
emptied docs/api.md once, and started a 7-minute build in another (issue 25)."""
import glob
import os
import re
import shutil
import subprocess
import sys

import pytest

from helpers import subprocess_env

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _python_files(directory):
    return sorted(os.path.relpath(p, ROOT) for p in glob.glob(os.path.join(ROOT, directory, "*.py"))
                  if not os.path.basename(p).startswith("_"))


ENTRY_POINTS = ([[sys.executable, path] for path in _python_files("scripts") + _python_files("bench")
                 + _python_files("examples")]
                + [["bash", os.path.relpath(p, ROOT)] for p in sorted(glob.glob(os.path.join(ROOT, "scripts", "*.sh")))]
                + [[sys.executable, "-m", "dyngrad.bench"], [sys.executable, "-m", "dyngrad.run"]])


def _checkout_state():
    """What `git status` sees, ignored files included (a --help must not write build output or results either)."""
    proc = subprocess.run(["git", "status", "--porcelain", "--ignored", "--untracked-files=all"], cwd=ROOT,
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


needs_git = pytest.mark.skipif(shutil.which("git") is None or not os.path.exists(os.path.join(ROOT, ".git")),
                               reason="needs a git checkout of the source tree")


@needs_git
@pytest.mark.parametrize("command", ENTRY_POINTS, ids=lambda c: " ".join(c[1:]))
def test_help_prints_usage_and_changes_nothing(command):
    env = dict(subprocess_env(), PYTHONDONTWRITEBYTECODE="1")
    before = _checkout_state()
    proc = subprocess.run([*command, "--help"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert re.search(r"^usage: ", proc.stdout, re.M | re.I), proc.stdout
    assert len(proc.stdout.splitlines()) >= 3, proc.stdout        # a description, not only the usage line
    assert _checkout_state() == before


def test_the_list_covers_every_script():
    names = {os.path.basename(c[-1]) for c in ENTRY_POINTS}
    assert {"gen_api_docs.py", "gen_coverage_docs.py", "gen_ops.py", "sanitize.sh", "dev_build.sh",
            "bench_engines.py", "loop_graph.py", "dyngrad.bench"} <= names


def test_bench_list_is_aligned():
    proc = subprocess.run([sys.executable, "-m", "dyngrad.bench", "--list"], cwd=ROOT, env=subprocess_env(),
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    rows = [line for line in proc.stdout.splitlines() if line.strip()]
    assert len(rows) >= 10, proc.stdout
    # the first three columns (name, group, unit) are single words: each starts in the same column in every row
    starts = {tuple(m.start() for m in list(re.finditer(r"(?:^|(?<=\s))\S+", row))[:4]) for row in rows}
    assert len(starts) == 1, proc.stdout
