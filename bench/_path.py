"""Lets the scripts in bench/ run from a source checkout after a dev build (python/ holds the package)."""
import os
import sys

try:
    import dyngrad  # noqa: F401  (installed with pip, or PYTHONPATH already set)
except ImportError:
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, "python"))
