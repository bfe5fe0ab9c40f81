"""dyngrad.profiler: torch.profiler's entry points over dyngrad.autograd.profiler (same recorder, same tables and
Chrome traces; Note [Profiling by wrapping the API] in autograd/profiler.py). CPU only: ProfilerActivity.CUDA is
refused. on_trace_ready is called once, at exit; the options that need what dyngrad does not record (a schedule,
memory, stacks, FLOPs, module hierarchy) are refused with NotImplementedError rather than ignored."""
import enum

from .autograd.profiler import record_function, EventList  # noqa: F401
from .autograd import profiler as _autograd_profiler

__all__ = ["profile", "record_function", "ProfilerActivity", "schedule"]


class ProfilerActivity(enum.Enum):
    CPU = "CPU"
    CUDA = "CUDA"
    XPU = "XPU"
    MTIA = "MTIA"


def schedule(*, wait, warmup, active, repeat=0, skip_first=0):
    """torch.profiler.schedule's arguments, checked; the callable it returns is refused by profile() (dyngrad's
    profile records every step of its block), so code that builds a schedule fails where it is used."""
    for name, v in (("wait", wait), ("warmup", warmup), ("active", active), ("repeat", repeat),
                    ("skip_first", skip_first)):
        if isinstance(v, bool) or not isinstance(v, int) or v < 0:
            raise ValueError(f"schedule: {name} must be a non-negative int, got {v!r}.")
    return lambda step: None


class profile(_autograd_profiler.profile):
    """torch.profiler.profile: records the ops run inside it; key_averages().table(...), export_chrome_trace(path).
    activities must be CPU only; step() is accepted (each call is recorded as a 'ProfilerStep#N' marker)."""

    def __init__(self, *, activities=None, schedule=None, on_trace_ready=None, record_shapes=False,
                 profile_memory=False, with_stack=False, with_flops=False, with_modules=False,
                 experimental_config=None, execution_trace_observer=None, acc_events=False, use_cuda=None,
                 custom_trace_id_callback=None):
        for a in activities or ():
            if a is not ProfilerActivity.CPU:
                raise RuntimeError(f"profile: dyngrad runs on the CPU only; activity {a} cannot be profiled.")
        _autograd_profiler.refuse_unrecorded(schedule=schedule is not None,
                                             execution_trace_observer=execution_trace_observer is not None)
        super().__init__(record_shapes=record_shapes, use_cuda=bool(use_cuda), profile_memory=profile_memory,
                         with_stack=with_stack, with_flops=with_flops, with_modules=with_modules,
                         experimental_config=experimental_config, acc_events=acc_events,
                         custom_trace_id_callback=custom_trace_id_callback)
        self.on_trace_ready = on_trace_ready
        self.step_num = 0
        self._step_range = None

    def start(self):
        self.__enter__()

    def stop(self):
        self.__exit__(None, None, None)

    def step(self):
        if self._step_range is not None:
            self._step_range.__exit__(None, None, None)
        self.step_num += 1
        self._step_range = record_function(f"ProfilerStep#{self.step_num}")
        self._step_range.__enter__()

    def __exit__(self, *exc):
        if self._step_range is not None:
            self._step_range.__exit__(None, None, None)
            self._step_range = None
        result = super().__exit__(*exc)
        if self.on_trace_ready is not None and self.enabled:
            self.on_trace_ready(self)
        return result
