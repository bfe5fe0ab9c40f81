"""dyngrad.compiler: torch.compiler's names. dyngrad executes eagerly (define-by-run), so nothing is compiled:
see Note [compile is the identity] in python/dyngrad/_api/compiling.py."""
from .._api.compiling import (InvalidBackend, allow_in_graph, assume_constant_result, compile, disable,
                              get_default_backend, is_compiling, is_dynamo_compiling, is_exporting, list_backends,
                              reset, set_default_backend, set_stance)

__all__ = ["InvalidBackend", "allow_in_graph", "assume_constant_result", "compile", "disable",
           "get_default_backend", "is_compiling", "is_dynamo_compiling", "is_exporting", "list_backends", "reset",
           "set_default_backend", "set_stance"]
