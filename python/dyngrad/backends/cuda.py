"""torch.backends.cuda: not built with CUDA. `matmul.allow_tf32` is a plain attribute, as programs set it."""


class _MatmulFlags:
    allow_tf32 = False
    allow_fp16_reduced_precision_reduction = True
    allow_bf16_reduced_precision_reduction = True


matmul = _MatmulFlags()


def is_built():
    return False
