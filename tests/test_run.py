"""python -m dyngrad.run: a PyTorch tutorial-style script runs unchanged, with `torch` and every torch.* module
resolving to dyngrad (even with PyTorch installed), as `python script.py` would run it (argv, __main__, sys.path,
exit codes, tracebacks). Each case is a child process that imports the dyngrad under test."""
import os
import subprocess
import sys
import textwrap

import pytest

from helpers import subprocess_env

# A tutorial-style program, as PyTorch's "Learning PyTorch with examples" writes one: nothing dyngrad-specific.
TUTORIAL = textwrap.dedent('''
    import argparse
    import math
    import sys

    import torch
    import torch.nn as nn
    import torch.nn.functional as F
    import torch.optim as optim
    from torch.utils.data import DataLoader, TensorDataset


    class Poly(nn.Module):
        def __init__(self):
            super().__init__()
            self.hidden = nn.Linear(1, 16)
            self.out = nn.Linear(16, 1)

        def forward(self, x):
            return self.out(torch.tanh(self.hidden(x)))


    def main():
        parser = argparse.ArgumentParser()
        parser.add_argument("--epochs", type=int, default=1)
        parser.add_argument("--lr", type=float, default=0.01)
        args = parser.parse_args()
        torch.manual_seed(0)
        x = torch.linspace(-math.pi, math.pi, 256).unsqueeze(1)
        y = torch.sin(x)
        loader = DataLoader(TensorDataset(x, y), batch_size=32, shuffle=True)
        model = Poly()
        opt = optim.Adam(model.parameters(), lr=args.lr)
        losses = []
        for epoch in range(args.epochs):
            total = 0.0
            for xb, yb in loader:
                opt.zero_grad()
                loss = F.mse_loss(model(xb), yb)
                loss.backward()
                opt.step()
                total += loss.item() * len(xb)
            losses.append(total / len(x))
        print("modules", torch.__name__, nn.__name__, F.__name__, DataLoader.__module__, optim.Adam.__module__)
        print("same", nn is sys.modules["torch.nn"], nn.Linear is torch.nn.Linear)
        print("argv", sys.argv[1:], __name__)
        print("losses", losses[0] > losses[-1], f"{losses[-1]:.4f}")
        torch.save(model.state_dict(), "poly.pt")
        model.load_state_dict(torch.load("poly.pt"))


    if __name__ == "__main__":
        main()
''')


def _run(tmp_path, *args, script=None):
    if script is not None:
        (tmp_path / "script.py").write_text(script)
    return subprocess.run([sys.executable, *args], cwd=tmp_path, env=subprocess_env(), capture_output=True,
                          text=True, timeout=600)


@pytest.mark.parametrize("engine", ["dyngrad", "dyngrad.reference"])
def test_a_tutorial_script_runs_unchanged(tmp_path, engine):
    done = _run(tmp_path, "-m", f"{engine}.run", "script.py", "--epochs", "8", "--lr", "0.02", script=TUTORIAL)
    assert done.returncode == 0, done.stderr
    lines = dict(line.split(" ", 1) for line in done.stdout.splitlines())
    assert lines["modules"] == (f"{engine} {engine}.nn {engine}.nn.functional {engine}.utils.data.dataloader "
                                f"{engine}.optim.adam")
    assert lines["same"] == "True True"
    assert lines["argv"] == "['--epochs', '8', '--lr', '0.02'] __main__"
    assert lines["losses"].startswith("True")
    assert (tmp_path / "poly.pt").exists()


def test_the_tutorial_is_pytorch_code(tmp_path):
    """The same file under plain Python and PyTorch: the script above really is a PyTorch program."""
    pytest.importorskip("torch")
    done = _run(tmp_path, "script.py", "--epochs", "2", script=TUTORIAL)
    assert done.returncode == 0, done.stderr
    assert "modules torch torch.nn torch.nn.functional torch.utils.data.dataloader" in done.stdout


SCRIPT = textwrap.dedent('''
    import os, sys
    import torch.cuda.amp, torch.onnx           # submodules of submodules resolve too
    from torch import nn
    print("main", __name__, os.path.basename(__file__), os.path.isabs(__file__), sys.argv,
          os.path.basename(sys.path[0]), nn.__name__)
    import pickle
    class Point:                                # classes of __main__ pickle, as under plain Python
        pass
    assert type(pickle.loads(pickle.dumps(Point()))) is Point
    mode = sys.argv[1] if len(sys.argv) > 1 else ""
    if mode == "exit":
        sys.exit(3)
    if mode == "raise":
        def inner():
            raise ValueError("boom from the script")
        inner()
    if mode == "missing":
        import torch.distributed.fsdp
''')


def test_argv_exit_codes_and_tracebacks_are_plain_pythons(tmp_path):
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "script.py").write_text(SCRIPT)
    done = _run(tmp_path, "-m", "dyngrad.run", "sub/script.py", "a", "--b")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[0] == "main __main__ script.py True ['sub/script.py', 'a', '--b'] sub dyngrad.nn"
    assert _run(tmp_path, "-m", "dyngrad.run", "sub/script.py", "exit").returncode == 3
    raised = _run(tmp_path, "-m", "dyngrad.run", "sub/script.py", "raise")
    assert raised.returncode == 1
    frames = [line for line in raised.stderr.splitlines() if line.startswith("  File ")]
    assert len(frames) == 2 and "script.py" in frames[0] and "in inner" in frames[1], raised.stderr
    assert raised.stderr.strip().endswith("ValueError: boom from the script")
    missing = _run(tmp_path, "-m", "dyngrad.run", "sub/script.py", "missing")
    assert missing.returncode == 1
    assert ("ModuleNotFoundError: No module named 'torch.distributed.fsdp': dyngrad.run runs torch as dyngrad, "
            "which has no module 'dyngrad.distributed.fsdp'") in missing.stderr
    nofile = _run(tmp_path, "-m", "dyngrad.run", "nothere.py")
    assert nofile.returncode == 2 and "can't open file 'nothere.py'" in nofile.stderr
    usage = _run(tmp_path, "-m", "dyngrad.run")
    assert usage.returncode == 2 and "usage: python -m dyngrad.run" in usage.stderr


def test_modules_and_the_console_script_entry_point(tmp_path):
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "tool.py").write_text(SCRIPT)
    # `dyngrad-run` is dyngrad.run:main ([project.scripts] in pyproject.toml), here called as the wrapper pip writes
    entry = "import sys; from dyngrad.run import main; sys.exit(main())"
    done = _run(tmp_path, "-c", entry, "-m", "pkg.tool", "x")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[0].startswith("main __main__ tool.py True [")
    assert done.stdout.splitlines()[0].endswith(", 'x'] " + os.path.basename(str(tmp_path)) + " dyngrad.nn")
    assert _run(tmp_path, "-c", entry, "-m", "pkg.tool", "exit").returncode == 3
    tomllib = pytest.importorskip("tomllib")
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    with open(os.path.join(root, "pyproject.toml"), "rb") as f:
        assert tomllib.load(f)["project"]["scripts"]["dyngrad-run"] == "dyngrad.run:main"


def test_alias_in_process_keeps_dyngrads_own_module_specs():
    """alias_torch() in this process (then undone): torch.X is dyngrad.X, and dyngrad.X keeps its own __spec__."""
    import dyngrad
    import dyngrad.run
    saved_modules = {k: v for k, v in sys.modules.items() if k == "torch" or k.startswith("torch.")}
    saved_path = list(sys.meta_path)
    try:
        dyngrad.run.alias_torch()
        import torch.nn.functional as F
        import torch.utils.data
        assert F is dyngrad.nn.functional and torch.utils.data is dyngrad.utils.data
        assert F.__spec__.name == "dyngrad.nn.functional" and F.__name__ == "dyngrad.nn.functional"
        with pytest.raises(ModuleNotFoundError) as e:
            import torch.no_such_module  # noqa: F401
        assert e.value.name == "torch.no_such_module"
    finally:
        for k in [k for k in sys.modules if k == "torch" or k.startswith("torch.")]:
            del sys.modules[k]
        sys.modules.update(saved_modules)
        sys.meta_path[:] = saved_path
