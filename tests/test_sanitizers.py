"""Sanitizers in CI: scripts/sanitize.sh builds dyngrad._C with AddressSanitizer + UndefinedBehaviorSanitizer and
runs a subset of this suite under it (the C++ engine only; the reference has no C++). Any sanitizer report, or any
failure of that subset, fails this test. The full run is `bash scripts/sanitize.sh` (README, "Development").

The build needs what `pip install .` needs (a C++ compiler, CMake, ninja, pybind11; the `test` extra installs the
last three) and the compiler's ASan runtime. Where one is missing the test skips and says which.
"""
import os
import shutil
import subprocess
import sys
import time

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = os.path.join(ROOT, "scripts", "sanitize.sh")
# The engine, graph lifetimes and the cycle collector, threads, every public function fed hostile arguments, and
# the crashes of issue 11 (hooks changing hooks, read-only and overlapping memory, huge sizes, threads at exit).
SUBSET = ["tests/test_engine.py", "tests/test_leaks.py", "tests/test_threads.py", "tests/test_hostile.py",
          "tests/test_crash_regressions.py", "-k", "not reference", "-q"]


def missing_tools(env):
    missing = [tool for tool in ("cmake", "ninja", "bash") if shutil.which(tool, path=env["PATH"]) is None]
    compiler = shutil.which(os.environ.get("CXX", "c++"), path=env["PATH"])
    if compiler is None:
        return missing + ["a C++ compiler"]
    runtime = subprocess.run([compiler, "-print-file-name=libasan.so"], capture_output=True, text=True).stdout.strip()
    if not os.path.isabs(runtime):
        missing.append("the compiler's ASan runtime (libasan.so)")
    try:
        import pybind11  # noqa: F401
    except ImportError:
        missing.append("pybind11")
    return missing


@pytest.mark.skipif(bool(os.environ.get("DYNGRAD_SANITIZED")), reason="already running under the sanitizers")
@pytest.mark.skipif(not os.path.exists(SCRIPT), reason="needs the source tree (scripts/, csrc/)")
def say(config, message):
    """A line on the terminal while the test runs, with or without -s: the build takes minutes and pytest would
    otherwise sit at one percentage with no sign of life."""
    reporter = config.pluginmanager.getplugin("terminalreporter")
    capture = config.pluginmanager.getplugin("capturemanager")
    if reporter is None:
        return
    if capture is not None:
        with capture.global_and_fixture_disabled():
            reporter.write_line(message)
    else:
        reporter.write_line(message)


def test_subset_under_address_and_undefined_behavior_sanitizers(tmp_path, request):
    # the interpreter's own bin first: a venv's cmake/ninja from pip live there, even when it is not activated
    path = os.pathsep.join([os.path.dirname(sys.executable), os.environ.get("PATH", "")])
    env = dict(os.environ, PATH=path, PYTHON=sys.executable, SANITIZE_BUILD_DIR=str(tmp_path / "build"))
    missing = missing_tools(env)
    if missing:
        pytest.skip("cannot build the sanitized extension: missing " + ", ".join(missing))
    log = tmp_path / "sanitize.log"
    files = sum(arg.endswith(".py") for arg in SUBSET)
    say(request.config, f"\ntest_sanitizers: building _C with ASan + UBSan and running {files} test files under it "
                        f"(5-10 minutes on 2 cores); follow it with: tail -f {log}")
    started = time.monotonic()
    with open(log, "w") as out:
        proc = subprocess.run(["bash", SCRIPT, *SUBSET], cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT,
                              text=True, timeout=40 * 60)
    output = log.read_text()
    say(request.config, f"test_sanitizers: done in {time.monotonic() - started:.0f} s (exit status {proc.returncode})")
    tail = output[-8000:].strip()
    print(tail)
    assert "sanitizer reports: 0 " in output, tail
    assert proc.returncode == 0, tail


def test_progress_message_reaches_the_terminal_under_capture(tmp_path):
    """The message before the long build shows without -s (pytest captures the test's own prints)."""
    (tmp_path / "test_says.py").write_text(
        "from test_sanitizers import say\n\n"
        "def test_says(request):\n"
        "    print('captured print')\n"
        "    say(request.config, 'progress line for the user')\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([os.path.dirname(os.path.abspath(__file__)),
                                                       os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tmp_path)],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "progress line for the user" in proc.stdout
    assert "captured print" not in proc.stdout
