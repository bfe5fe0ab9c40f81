"""DataParallel (torch.nn.DataParallel): the wrapper tutorials put around a model before training on several GPUs.

dyngrad has one device, the CPU, which is what torch does when it finds no GPU: the wrapper keeps the module as
`.module` (so state_dict keys gain the `module.` prefix, and a checkpoint saved from a wrapped torch model loads into
a wrapped dyngrad one) and forward() calls it with the inputs unchanged; device_ids and output_device are ignored.
"""
from ..modules.module import Module
from ...autograd.profiler import record_function


class DataParallel(Module):
    """Wraps `module`; forward(*inputs, **kwargs) is module(*inputs, **kwargs) on the CPU, as torch without GPUs."""

    def __init__(self, module, device_ids=None, output_device=None, dim=0):
        super().__init__()
        self.module = module
        self.device_ids = []              # torch's value without GPUs: nothing is scattered or replicated

    def forward(self, *inputs, **kwargs):
        with record_function("DataParallel.forward"):
            return self.module(*inputs, **kwargs)


def data_parallel(module, inputs, device_ids=None, output_device=None, dim=0, module_kwargs=None):
    """torch.nn.parallel.data_parallel: needs GPUs, so it raises RuntimeError, as torch does without one."""
    raise RuntimeError("data_parallel: no GPU device type is available (dyngrad runs on the CPU); call "
                       "module(*inputs) directly, or wrap the module in nn.DataParallel, which runs it on the CPU")
