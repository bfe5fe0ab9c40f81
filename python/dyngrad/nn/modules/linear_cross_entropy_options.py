"""torch.nn.modules.linear_cross_entropy_options: the options of F.linear_cross_entropy (_api/ops/loss.py, which
knows this class by its name and fields: it sits below nn)."""
import dataclasses

from ... import _C

__all__ = ["LinearCrossEntropyOptions"]


@dataclasses.dataclass(slots=True, frozen=True)
class LinearCrossEntropyOptions:
    """torch 2.13's nn.LinearCrossEntropyOptions: how F.linear_cross_entropy may evaluate in chunks of batch rows
    (allow_retain_graph, batch_chunk_size, chunking_method, acc_policy, acc_dtype), checked as torch checks them.
    dyngrad evaluates the whole product whatever the options say (the result is the same: torch's chunked path is
    a memory saving), and warns where torch warns that they are ignored."""
    allow_retain_graph: bool = False
    batch_chunk_size: "int | None" = None
    chunking_method: "str | None" = "auto"
    acc_policy: str = "auto"
    acc_dtype: object = None

    def __post_init__(self):
        if self.acc_policy not in {"auto", "accurate", "balanced", "compact"}:
            raise ValueError(f"invalid acc_policy: {self.acc_policy!r}")
        if self.chunking_method is not None and self.chunking_method != "auto":
            name, sep, factor = str(self.chunking_method).partition(":")
            factor = factor if sep else "1"
            if not (name == "aspect_ratio" and factor.isdigit() and int(factor) > 0):
                raise ValueError(f"invalid chunking_method: {self.chunking_method!r}")
        if not (self.batch_chunk_size is None or (isinstance(self.batch_chunk_size, int) and
                                                  not isinstance(self.batch_chunk_size, bool) and
                                                  self.batch_chunk_size > 0)):
            raise ValueError(f"batch_chunk_size must be positive int or None, got {self.batch_chunk_size!r}")
        if self.acc_dtype is not None and (not isinstance(self.acc_dtype, _C.dtype) or self.acc_dtype.name not in
                                           ("float16", "bfloat16", "float32", "float64")):
            raise ValueError(f"acc_dtype must be one of {{None, float16, bfloat16, float32, float64}}, got "
                             f"{self.acc_dtype!r}. Pass acc_dtype=None to let the op pick automatically.")
