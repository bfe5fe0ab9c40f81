"""The C++ engine's buffer cache returns memory (Note [Bounded buffer cache] in csrc/dyngrad/pool.cpp): a loop whose
buffers grow at every step (a generator's sequence length) keeps at most its peak working set cached, so its resident
memory stays near what is live, while a loop of fixed shapes still gets every buffer back from the cache. Each case
runs in a child process, so the resident set is that loop's own."""
import json
import subprocess
import sys
import textwrap

import pytest

from helpers import subprocess_env

GROWING = textwrap.dedent('''
    import json
    import dyngrad as dg

    def rss():
        with open("/proc/self/status") as f:
            return next(int(l.split()[1]) * 1024 for l in f if l.startswith("VmRSS:"))

    MiB = 1 << 20
    start = rss()
    # step k: buffers of 2k MiB, a size (a 2 MiB class) no earlier step used; live at once: x, x + 1 and the
    # previous step's y while this step's is made, 4 x 2k MiB
    peak_live = 0
    for k in range(1, 41):
        x = dg.zeros(k * MiB // 2)                       # k * 2 MiB of float32
        y = (x + 1.0) * 2.0
        peak_live = max(peak_live, 4 * x.numel() * 4)
        assert y[-1].item() == 2.0
    del x, y
    print(json.dumps({"grown": rss() - start, "cached": dg._C._cached_buffer_bytes(), "peak_live": peak_live}))
''')

FIXED = textwrap.dedent('''
    import json
    import dyngrad as dg

    w = dg.randn(512, 512, requires_grad=True)
    x = dg.randn(256, 512)
    def step():
        h = (x @ w).tanh()
        loss = (h @ w.T).square().mean()
        loss.backward()
        w.grad = None
    step()
    cached = []
    for _ in range(3):
        step()
        cached.append(dg._C._cached_buffer_bytes())
    print(json.dumps({"cached": cached}))
''')


# Note [Cache capacity from re-asked sizes]: each step makes a 4 MiB and then a 6 MiB buffer, one live at a time:
# the peak working set is 6 MiB but the step asks for 10. Bounded by the peak, the cache evicted the 4 MiB buffer
# at the end of every step and the next step faulted it in afresh.
EARLY_FREES = textwrap.dedent('''
    import json, resource
    import dyngrad as dg

    MiB = 1 << 20
    def step():
        a = dg.zeros(MiB)               # 4 MiB of float32
        assert (a + 1.0)[0].item() == 1.0
        del a
        b = dg.zeros(3 * MiB // 2)      # 6 MiB
        assert (b + 1.0)[0].item() == 1.0
    for _ in range(3):
        step()
    start = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(20):
        step()
    print(json.dumps({"faults": resource.getrusage(resource.RUSAGE_SELF).ru_minflt - start}))
''')


def _child(source):
    done = subprocess.run([sys.executable, "-c", source], env=subprocess_env(), capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_growing_buffers_do_not_pile_up_in_the_cache():
    report = _child(GROWING)
    MiB = 1 << 20
    # the steps' sizes add up to 4.8 GiB; kept until 1 GiB was cached, they grew the process by 1.0 GB. Now the
    # cache holds at most the peak working set (320 MiB here), and the process grew by 0.33 GB.
    assert report["cached"] <= report["peak_live"] + 8 * MiB, report
    assert report["grown"] < 640 * MiB, report


def test_fixed_shapes_reuse_the_cached_buffers():
    """The cache still does its job: a step of fixed shapes takes its buffers from it and gives them back, so what
    it holds between steps does not change."""
    cached = _child(FIXED)["cached"]
    assert cached[0] > 0 and cached[0] == cached[1] == cached[2], cached


def test_sizes_a_step_asks_again_stay_cached():
    """A step whose buffers add up to more than its peak working set still gets them all back from the cache: no
    fresh pages (each fresh 4 MiB buffer costs at least two page faults, 1024 with small pages), so 20 steps fault
    at most a few times (the interpreter's own allocations)."""
    assert _child(EARLY_FREES)["faults"] < 20


def test_empty_cache_frees_everything(cpp):
    x = cpp.zeros(1 << 20)
    del x
    assert cpp._C._cached_buffer_bytes() >= 4 << 20
    cpp._C._empty_cache()
    assert cpp._C._cached_buffer_bytes() == 0


def test_most_recently_freed_buffer_comes_back_first(cpp):
    """Note [Hot buffers first]: of two cached buffers of one size, the next allocation of that size gets the one
    freed last (whose lines are likeliest still in the caches), not the one freed first."""
    n = 1 << 16                      # 256 KiB of float32: a cached size
    a, b = cpp.zeros(n) + 1.0, cpp.zeros(n) + 2.0
    first, last = a.data_ptr(), b.data_ptr()
    del a                            # freed first
    del b                            # freed last
    c = cpp.zeros(n)
    assert c.data_ptr() == last and c.data_ptr() != first
    d = cpp.zeros(n)
    assert d.data_ptr() == first     # and the other one after it
