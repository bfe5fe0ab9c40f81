"""Run a PyTorch script unchanged on dyngrad:

    python -m dyngrad.run train.py --epochs 3          # or: dyngrad-run train.py --epochs 3
    python -m dyngrad.run -m package.module args...    # a module, as `python -m package.module`
    python -m dyngrad.reference.run train.py           # the same, on the pure-Python reference engine

`torch` and every `torch.X.Y` the script (or anything it imports) asks for resolve to this engine's modules:
`import torch.nn as nn` gives dyngrad.nn itself, `from torch.utils.data import DataLoader` dyngrad's DataLoader,
even when PyTorch is installed (Note [The torch alias]). The script then runs as `python train.py ...` would run it:
as the module `__main__`, with sys.argv = [script, args...], its folder first on sys.path, and the same exit code
(0, its sys.exit code, or 1 after an uncaught exception, whose traceback starts at the script's own frames).

A `torch.X` that dyngrad does not have is a ModuleNotFoundError naming both modules. Child processes started with
the "spawn" or "forkserver" method re-import the script without the alias (DataLoader workers fork, and keep it).
"""
import importlib
import importlib.abc
import importlib.machinery
import os
import runpy
import sys
import types

# the engine this module belongs to: "dyngrad" (python -m dyngrad.run) or "dyngrad.reference"
_ENGINE = __spec__.name.rpartition(".")[0] if __spec__ is not None else __name__.rpartition(".")[0]

USAGE = """usage: python -m dyngrad.run [-h] (script.py | -m module) [args ...]

Runs a PyTorch script (or module) unchanged, with `torch` and every torch.* module resolving to dyngrad
(`import torch.nn` gives dyngrad.nn). The console script `dyngrad-run` is the same command.

  python -m dyngrad.run train.py --epochs 3       # the script's own arguments follow it
  python -m dyngrad.run -m my_package.train       # a module, as `python -m`

options:
  -h, --help  print this and exit"""


# Note [The torch alias]: sys.modules["torch"] is the engine's root module, and a finder first on sys.meta_path
# answers every "torch.X.Y" with the engine's own module "dyngrad.X.Y", imported under its real name and shared:
# `torch.nn is dyngrad.nn`, so isinstance checks, pickled class names and module state are the same whichever name
# the code used. The import system sets the alias's spec on the module it is handed; exec_module puts the module's
# own spec back, so that dyngrad's relative imports keep resolving under "dyngrad.".
class TorchAlias(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """The meta-path finder of Note [The torch alias], for the engine named `engine`."""

    def __init__(self, engine):
        self.engine = engine

    def _target(self, fullname):
        return self.engine + fullname[len("torch"):]

    def find_spec(self, fullname, path=None, target=None):
        if fullname != "torch" and not fullname.startswith("torch."):
            return None
        name = self._target(fullname)
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as e:
            if e.name is None or not name.startswith(e.name):     # a module that dyngrad's module itself imports
                raise
            raise ModuleNotFoundError(f"No module named {fullname!r}: dyngrad.run runs torch as {self.engine}, "
                                      f"which has no module {e.name!r}", name=fullname) from None
        return importlib.machinery.ModuleSpec(fullname, self, origin=getattr(module, "__file__", None),
                                              loader_state=(module, module.__spec__),
                                              is_package=hasattr(module, "__path__"))

    def create_module(self, spec):
        return spec.loader_state[0]

    def exec_module(self, module):
        module.__spec__ = module.__spec__.loader_state[1]       # the import system set the alias's spec

    def __repr__(self):
        return f"TorchAlias({self.engine!r})"


def alias_torch(engine=_ENGINE):
    """Makes `torch` and every `torch.*` module resolve to `engine`'s (Note [The torch alias]). Modules already
    imported under `torch` (PyTorch's own) are dropped from sys.modules first. Returns the finder."""
    root = importlib.import_module(engine)
    for name in [n for n in sys.modules if n == "torch" or n.startswith("torch.")]:
        del sys.modules[name]
    sys.meta_path[:] = [f for f in sys.meta_path if not isinstance(f, TorchAlias)]
    finder = TorchAlias(engine)
    sys.meta_path.insert(0, finder)
    sys.modules["torch"] = root
    return finder


def _strip_own_frames(tb):
    """The traceback from the script's first frame on: the frames of this file and of runpy are not the script's."""
    own = {os.path.abspath(__file__), os.path.abspath(runpy.__file__)}
    while tb is not None and os.path.abspath(tb.tb_frame.f_code.co_filename) in own:
        tb = tb.tb_next
    return tb


def _run_file(path):
    """Runs the file at `path` as `python path` would: in a fresh module `__main__`, its folder first on sys.path."""
    path = os.path.abspath(path)                          # __file__ and tracebacks, as Python 3.9+ gives them
    main = types.ModuleType("__main__")
    main.__file__ = path
    main.__cached__ = None
    main.__builtins__ = __builtins__
    main.__loader__ = importlib.machinery.SourceFileLoader("__main__", path)
    sys.modules["__main__"] = main
    sys.path[0] = os.path.dirname(os.path.realpath(path))
    with open(path, "rb") as f:
        source = f.read()
    code = compile(source, path, "exec", dont_inherit=True)
    exec(code, main.__dict__)


def main(argv=None):
    """The console script `dyngrad-run` and `python -m dyngrad.run`: runs argv[0] (a script, or -m and a module)
    with argv[1:] as its arguments."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help"):
        print(USAGE, file=sys.stdout if argv else sys.stderr)
        return 0 if argv else 2
    as_module = argv[0] == "-m"
    if as_module:
        if len(argv) < 2:
            print("dyngrad.run: -m needs a module name\n" + USAGE, file=sys.stderr)
            return 2
        argv = argv[1:]
    elif not os.path.isfile(argv[0]):
        print(f"dyngrad.run: can't open file {argv[0]!r}: no such file", file=sys.stderr)
        return 2
    alias_torch(_ENGINE)
    sys.argv[:] = argv
    try:
        if as_module:
            sys.path[0] = os.getcwd()                      # as `python -m`: the current folder first (not ours)
            runpy.run_module(argv[0], run_name="__main__", alter_sys=True)
        else:
            _run_file(argv[0])
    except SystemExit:
        raise
    except KeyboardInterrupt:
        raise                                              # Python's own exit for it (the SIGINT status)
    except BaseException as e:
        tb = _strip_own_frames(e.__traceback__)
        sys.excepthook(type(e), e.with_traceback(tb), tb)   # the default hook prints e.__traceback__
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
