"""dyngrad.compiler: torch.compiler's names, and the statistics of compiled programs (programs()): see Note [Two
modes of compile] in python/dyngrad/_api/compiling.py and docs/compile.md."""
from .._api.compiling import (InvalidBackend, allow_in_graph, assume_constant_result, compile, disable,
                              get_default_backend, is_compiling, is_dynamo_compiling, is_exporting, list_backends,
                              programs, report, reset, set_default_backend, set_stance)

__all__ = ["InvalidBackend", "allow_in_graph", "assume_constant_result", "compile", "disable",
           "get_default_backend", "is_compiling", "is_dynamo_compiling", "is_exporting", "list_backends", "programs",
           "report", "reset",
           "set_default_backend", "set_stance"]
