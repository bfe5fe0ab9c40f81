"""dyngrad.cuda: torch.cuda's queries, answered honestly: there is no GPU. Queries that tutorials make before
choosing a device (is_available, device_count, ...) answer as torch does without CUDA; seeding is a no-op, as in
torch; anything that needs a GPU raises at once, naming CUDA."""
from .._api.device import cuda_error
from . import amp  # noqa: F401  torch.cuda.amp (GradScaler, autocast: they disable themselves)


def is_available():
    return False


def device_count():
    return 0


def is_initialized():
    return False


def is_bf16_supported(including_emulation=True):
    return False


def manual_seed(seed):
    """A no-op without CUDA (as torch, which ignores it until CUDA is used)."""


def manual_seed_all(seed):
    """A no-op without CUDA."""


def seed():
    """A no-op without CUDA."""


def seed_all():
    """A no-op without CUDA."""


def empty_cache():
    """Nothing is cached on a GPU: a no-op, as in torch without CUDA."""


def memory_allocated(device=None):
    return 0


def max_memory_allocated(device=None):
    return 0


def memory_reserved(device=None):
    return 0


def max_memory_reserved(device=None):
    return 0


def _needs_cuda(name):
    def fn(*args, **kwargs):
        raise cuda_error(f"dyngrad.cuda.{name}()")
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"torch.cuda.{name}: needs a GPU, so it raises."
    return fn


init = _needs_cuda("init")
current_device = _needs_cuda("current_device")
set_device = _needs_cuda("set_device")
get_device_name = _needs_cuda("get_device_name")
get_device_properties = _needs_cuda("get_device_properties")
get_device_capability = _needs_cuda("get_device_capability")
synchronize = _needs_cuda("synchronize")
current_stream = _needs_cuda("current_stream")
mem_get_info = _needs_cuda("mem_get_info")
get_rng_state = _needs_cuda("get_rng_state")
set_rng_state = _needs_cuda("set_rng_state")
get_rng_state_all = _needs_cuda("get_rng_state_all")
set_rng_state_all = _needs_cuda("set_rng_state_all")
reset_peak_memory_stats = _needs_cuda("reset_peak_memory_stats")


class device:
    """torch.cuda.device(i): a context manager that selects a GPU; entering it raises."""

    def __init__(self, device):
        self.idx = device

    def __enter__(self):
        raise cuda_error(f"dyngrad.cuda.device({self.idx!r})")

    def __exit__(self, *exc):
        return False
