"""dyngrad.utils.data on both engines: datasets, batching, seeded shuffling, drop_last, collation."""
import importlib

import numpy as np
import pytest


@pytest.fixture(params=["cpp", "reference"])
def dg(request):
    return importlib.import_module("dyngrad" if request.param == "cpp" else "dyngrad.reference")


def test_tensor_dataset_and_loader(dg):
    data = dg.utils.data
    x = dg.arange(10).reshape(10, 1).float()
    y = dg.arange(10)
    ds = data.TensorDataset(x, y)
    assert len(ds) == 10 and ds[3][1].item() == 3
    batches = list(data.DataLoader(ds, batch_size=4))
    assert [tuple(b[0].shape) for b in batches] == [(4, 1), (4, 1), (2, 1)]
    assert batches[2][1].tolist() == [8, 9] and batches[0][0].dtype == dg.float32
    assert len(data.DataLoader(ds, batch_size=4)) == 3
    loader = data.DataLoader(ds, batch_size=4, drop_last=True)
    assert len(loader) == 2 and len(list(loader)) == 2
    with pytest.raises(ValueError, match="size mismatch"):
        data.TensorDataset(x, dg.arange(3))
    with pytest.raises(ValueError, match="batch_size"):
        data.DataLoader(ds, batch_size=0)


def test_shuffle_is_seeded_and_covers_everything(dg):
    data = dg.utils.data
    ds = data.TensorDataset(dg.arange(20))

    def epochs(seed):
        loader = data.DataLoader(ds, batch_size=6, shuffle=True, seed=seed)
        return [[v for b in loader for v in b[0].tolist()] for _ in range(2)]

    a, b = epochs(1), epochs(1)
    assert a == b                                   # same seed, same order
    assert a[0] != a[1]                             # a new permutation each epoch
    assert sorted(a[0]) == list(range(20)) and a[0] != list(range(20))
    assert epochs(2) != a


def test_collate_of_custom_datasets(dg):
    data = dg.utils.data

    class Pairs(data.Dataset):
        def __len__(self):
            return 5

        def __getitem__(self, i):
            return {"x": np.full(3, i, dtype=np.float32), "n": i, "t": dg.tensor([float(i)]), "name": f"s{i}"}

    batch = next(iter(data.DataLoader(Pairs(), batch_size=3)))
    assert tuple(batch["x"].shape) == (3, 3) and batch["x"].dtype == dg.float32
    assert batch["n"].tolist() == [0, 1, 2] and tuple(batch["t"].shape) == (3, 1)
    assert batch["name"] == ["s0", "s1", "s2"]
    tuples = data.default_collate([(1.0, np.int64(2)), (3.0, np.int64(4))])
    assert tuples[0].tolist() == [1.0, 3.0] and tuples[1].tolist() == [2, 4]
    custom = data.DataLoader(Pairs(), batch_size=2, collate_fn=lambda samples: len(samples))
    assert list(custom) == [2, 2, 1]
    with pytest.raises(TypeError, match="default_collate"):
        data.default_collate([object()])


def test_subset_and_random_split(dg):
    data = dg.utils.data
    ds = data.TensorDataset(dg.arange(10))
    a, b = data.random_split(ds, [7, 3], seed=0)
    assert len(a) == 7 and len(b) == 3
    assert sorted([a[i][0].item() for i in range(7)] + [b[i][0].item() for i in range(3)]) == list(range(10))
    assert [len(s) for s in data.random_split(ds, [0.5, 0.5])] == [5, 5]
    with pytest.raises(ValueError, match="does not equal the length"):
        data.random_split(ds, [3, 3])


# ----- collation as torch's ----------------------------------------------------------------------------------------
Point = __import__("collections").namedtuple("Point", ["x", "y"])


def _samples(lib):
    return [{"t": lib.tensor([float(i), 2.0 * i]), "a": np.arange(3, dtype=np.int64) + i, "s": np.float32(i / 2),
             "f": i / 3, "i": i, "b": i % 2 == 0, "name": f"s{i}",
             "nest": (np.full((2, 2), i, dtype=np.float64), [i, i + 1]), "p": Point(i, float(i))}
            for i in range(3)]


def _same_structure(ours, theirs):
    """ours (dyngrad) and theirs (torch) have the same containers, tensor dtypes and values."""
    if hasattr(theirs, "numpy") and not isinstance(theirs, np.ndarray):
        assert str(ours.dtype).split(".")[-1] == str(theirs.dtype).split(".")[-1]
        np.testing.assert_array_equal(ours.numpy(), theirs.numpy())
    elif isinstance(theirs, dict):
        assert type(ours) is type(theirs) and list(ours) == list(theirs)
        for k in theirs:
            _same_structure(ours[k], theirs[k])
    elif isinstance(theirs, (list, tuple)):
        assert type(ours) is type(theirs) and len(ours) == len(theirs), (type(ours), type(theirs))
        for a, b in zip(ours, theirs):
            _same_structure(a, b)
    else:
        assert ours == theirs and type(ours) is type(theirs)


def test_default_collate_and_convert_match_torch(dg):
    torch = pytest.importorskip("torch")
    from torch.utils.data import default_collate, default_convert
    _same_structure(dg.utils.data.default_collate(_samples(dg)), default_collate(_samples(torch)))
    for sample in _samples(dg)[:1] + [(np.ones(2), 3.0), [np.int64(4), "x"], np.zeros((2, 1), dtype=np.float32)]:
        theirs_sample = _samples(torch)[0] if isinstance(sample, dict) else sample
        _same_structure(dg.utils.data.default_convert(sample), default_convert(theirs_sample))
    with pytest.raises(RuntimeError, match="equal size"):
        dg.utils.data.default_collate([[1, 2], [3]])
    with pytest.raises(TypeError, match="default_collate"):
        dg.utils.data.default_collate([np.array(["a"]), np.array(["b"])])
    # numpy's narrow integers keep their dtype, as torch's
    assert dg.utils.data.default_collate([np.arange(2, dtype=np.int32)] * 2).dtype == dg.int32
    assert dg.utils.data.default_collate([np.uint8(3), np.uint8(4)]).tolist() == [3, 4]


# ----- samplers and datasets -------------------------------------------------------------------------------------
def test_samplers(dg):
    data = dg.utils.data
    ds = list(range(7))
    assert list(data.SequentialSampler(ds)) == list(range(7))
    order = list(data.RandomSampler(ds, generator=np.random.default_rng(3)))
    assert sorted(order) == list(range(7)) and order == list(data.RandomSampler(ds, generator=np.random.default_rng(3)))
    long = list(data.RandomSampler(ds, num_samples=16))
    assert len(long) == 16 and sorted(long[:7]) == list(range(7)) and sorted(long[7:14]) == list(range(7))
    drawn = list(data.RandomSampler(ds, replacement=True, num_samples=50))
    assert len(drawn) == 50 and set(drawn) <= set(range(7)) and len(set(drawn)) < 50
    dg.manual_seed(5)
    first = list(data.RandomSampler(ds))
    dg.manual_seed(5)
    assert list(data.RandomSampler(ds)) == first             # the engine's seed decides the order
    assert sorted(data.SubsetRandomSampler([10, 20, 30])) == [10, 20, 30]
    weighted = list(data.WeightedRandomSampler([0.0, 1.0, 3.0], 200))
    assert set(weighted) == {1, 2} and weighted.count(2) > weighted.count(1)
    unique = list(data.WeightedRandomSampler(dg.tensor([0.0, 1.0, 3.0, 2.0]), 4, replacement=False))
    assert sorted(unique) == [0, 1, 2, 3] and unique[-1] == 0            # zero weight: drawn only when it must
    batches = data.BatchSampler(data.SequentialSampler(ds), 3, drop_last=False)
    assert list(batches) == [[0, 1, 2], [3, 4, 5], [6]] and len(batches) == 3
    assert len(data.BatchSampler(ds, 3, True)) == 2


def test_sampler_errors_match_torch(dg):
    torch_data = pytest.importorskip("torch.utils.data")
    data = dg.utils.data
    cases = [("RandomSampler", ([1], ), dict(replacement=1)), ("RandomSampler", ([1],), dict(num_samples=0)),
             ("BatchSampler", ([1], 0, False), {}), ("BatchSampler", ([1], 2, 1), {}),
             ("WeightedRandomSampler", ([[1.0]], 1), {}), ("WeightedRandomSampler", ([1.0], -1), {})]
    for name, args, kwargs in cases:
        with pytest.raises(Exception) as theirs:
            getattr(torch_data, name)(*args, **kwargs)
        with pytest.raises(theirs.type):
            getattr(data, name)(*args, **kwargs)



def test_random_sampler_with_replacement_is_lazy(dg):
    """An endless DataLoader's sampler (issue 24): 10**10 indices are drawn 32 at a time, as torch draws them, so the
    first batches come at once and the stream under a Generator is that of randint 32 at a time."""
    data = dg.utils.data
    ds = list(range(7))
    sampler = data.RandomSampler(ds, replacement=True, num_samples=int(1e10), generator=dg.Generator().manual_seed(3))
    assert len(sampler) == 10 ** 10
    loader = data.DataLoader(ds, batch_size=5, sampler=sampler)
    assert len(loader) == 2 * 10 ** 9
    first = [b.tolist() for b, _ in zip(loader, range(20))]
    g = dg.Generator().manual_seed(3)
    expected = [i for _ in range(4) for i in dg.randint(0, 7, (32,), generator=g).tolist()][:100]
    assert sum(first, []) == expected
    # the tail: num_samples % 32 indices from one last draw
    g = dg.Generator().manual_seed(4)
    expected = dg.randint(0, 7, (32,), generator=g).tolist() + dg.randint(0, 7, (3,), generator=g).tolist()
    assert list(data.RandomSampler(ds, True, 35, generator=dg.Generator().manual_seed(4))) == expected
    numpy_drawn = list(data.RandomSampler(ds, True, 40, generator=np.random.default_rng(1)))
    rng = np.random.default_rng(1)
    assert numpy_drawn == rng.integers(0, 7, 32).tolist() + rng.integers(0, 7, 8).tolist()
    # torch's own stream has the same shape: 32 at a time
    torch = pytest.importorskip("torch")
    from torch.utils.data import RandomSampler
    theirs = list(RandomSampler(ds, True, 40, generator=torch.Generator().manual_seed(2)))
    g = torch.Generator().manual_seed(2)
    assert theirs == torch.randint(7, (32,), generator=g).tolist() + torch.randint(7, (8,), generator=g).tolist()


def test_weighted_sampler_errors_match_torch(dg):
    torch_data = pytest.importorskip("torch.utils.data")
    for args, kwargs in [(([1.0], 1), dict(replacement=1)), (([1.0], True), {}), (([1.0], 1.5), {})]:
        with pytest.raises(Exception) as theirs:
            torch_data.WeightedRandomSampler(*args, **kwargs)
        with pytest.raises(theirs.type, match="WeightedRandomSampler"):
            dg.utils.data.WeightedRandomSampler(*args, **kwargs)

def test_datasets(dg):
    torch_data = pytest.importorskip("torch.utils.data")
    data = dg.utils.data
    a, b = data.TensorDataset(dg.arange(3)), data.TensorDataset(dg.arange(10, 14))
    both = a + b
    assert isinstance(both, data.ConcatDataset) and len(both) == 7 and both.cumulative_sizes == [3, 7]
    assert [both[i][0].item() for i in range(7)] == [0, 1, 2, 10, 11, 12, 13] and both[-1][0].item() == 13
    with pytest.raises(ValueError, match="exceed dataset length"):
        both[-8]
    with pytest.raises(AssertionError):
        data.ConcatDataset([])

    class Stream(data.IterableDataset):
        def __init__(self, values):
            self.values = values

        def __iter__(self):
            return iter(self.values)

        def __len__(self):
            return len(self.values)
    chain = Stream([1, 2]) + Stream([3])
    assert isinstance(chain, data.ChainDataset) and list(chain) == [1, 2, 3] and len(chain) == 3
    stacked = data.StackDataset(x=a, y=a)
    assert stacked[1]["x"][0].item() == 1 and len(stacked) == 3
    class Typed(data.Dataset[int]):                     # torch's generic spelling
        def __getitem__(self, i):
            return i
    assert isinstance(Typed(), data.Dataset) and data.Sampler[int] is data.Sampler
    sub = data.Subset(b, [3, 0])
    assert [sub[i][0].item() for i in range(2)] == [13, 10] and len(sub) == 2
    for n, fractions in [(10, [0.5, 0.5]), (11, [0.3, 0.3, 0.4]), (7, [0.1, 0.9]), (5, [1 / 3] * 3)]:
        ours = [len(s) for s in data.random_split(list(range(n)), fractions, seed=0)]
        theirs = [len(s) for s in torch_data.random_split(list(range(n)), fractions)]
        assert ours == theirs, (n, fractions)
    parts = data.random_split(list(range(10)), [4, 6], generator=np.random.default_rng(1))
    again = data.random_split(list(range(10)), [4, 6], generator=np.random.default_rng(1))
    assert [list(p) for p in parts] == [list(p) for p in again]
    assert sorted(list(parts[0]) + list(parts[1])) == list(range(10))


def test_dataloader_options(dg):
    torch_data = pytest.importorskip("torch.utils.data")
    data = dg.utils.data
    ds = [(np.float32(i), i) for i in range(5)]
    unbatched = list(data.DataLoader(ds, batch_size=None))
    assert len(unbatched) == 5 and isinstance(unbatched[0], list) and unbatched[0][0].dtype == dg.float32
    by_batch_sampler = list(data.DataLoader(ds, batch_sampler=[[4, 0], [2]]))
    assert [b[1].tolist() for b in by_batch_sampler] == [[4, 0], [2]]
    assert [b[1].tolist() for b in data.DataLoader(ds, batch_size=2, sampler=[3, 1, 4])] == [[3, 1], [4]]

    class Stream(data.IterableDataset):
        def __iter__(self):
            return iter(range(7))

        def __len__(self):
            return 7
    loader = data.DataLoader(Stream(), batch_size=3, drop_last=True)
    assert [b.tolist() for b in loader] == [[0, 1, 2], [3, 4, 5]] and len(loader) == 2
    assert len(data.DataLoader(Stream(), batch_size=3)) == 3
    bad = [dict(num_workers=-1), dict(timeout=-1), dict(prefetch_factor=2), dict(persistent_workers=True),
           dict(batch_sampler=[[0]], batch_size=2), dict(batch_sampler=[[0]], drop_last=True),
           dict(batch_size=None, drop_last=True), dict(sampler=[0], shuffle=True),
           dict(num_workers=1, multiprocessing_context="bogus"), dict(num_workers=1, multiprocessing_context=3)]
    for kwargs in bad:
        with pytest.raises(Exception) as theirs:
            torch_data.DataLoader(ds, **kwargs)
        with pytest.raises(theirs.type):
            data.DataLoader(ds, **kwargs)
    for kwargs in (dict(shuffle=True), dict(sampler=[0]), dict(batch_sampler=[[0]])):
        with pytest.raises(ValueError, match="IterableDataset"):
            data.DataLoader(Stream(), **kwargs)
    assert data.get_worker_info() is None


# ----- worker processes (few tests: each starts processes) -------------------------------------------------------
class Records:
    """A map-style dataset of mixed samples (module level: picklable for any start method)."""

    def __init__(self, dg, n=11):
        self.dg, self.n = dg, n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        if i >= self.n:
            raise IndexError(i)
        return {"t": self.dg.tensor([float(i), i * 0.5]), "a": np.arange(2) * i, "name": f"r{i}", "i": i}

    def __reduce__(self):                          # the engine module travels by name
        return (_records, (self.dg.__name__, self.n))


def _records(engine, n):
    return Records(importlib.import_module(engine), n)


def _flatten(batches):
    return [(b["t"].tolist(), b["a"].tolist(), b["name"], b["i"].tolist()) for b in batches]


def test_workers_give_the_batches_of_the_main_process(dg):
    data = dg.utils.data
    ds = Records(dg)
    expected = _flatten(data.DataLoader(ds, batch_size=3))
    assert _flatten(data.DataLoader(ds, batch_size=3, num_workers=2, prefetch_factor=1)) == expected
    # persistent workers, shuffled with a seeded generator: the same epochs as without workers
    loader = data.DataLoader(ds, batch_size=4, shuffle=True, num_workers=2, persistent_workers=True,
                             generator=np.random.default_rng(7), pin_memory=True)
    plain = data.DataLoader(ds, batch_size=4, shuffle=True, generator=np.random.default_rng(7))
    plain_epochs = [_flatten(plain) for _ in range(3)]
    first = _flatten(loader)
    workers = list(loader._iterator._workers)
    assert first == plain_epochs[0]
    it = iter(loader)                              # an epoch abandoned after one batch ...
    assert _flatten([next(it)]) == plain_epochs[1][:1]
    assert _flatten(loader) == plain_epochs[2]     # ... leaks nothing into the next one
    assert loader._iterator._workers == workers and all(w.is_alive() for w in workers)


def test_iterable_dataset_sharding_and_worker_info(dg):
    torch = pytest.importorskip("torch")
    results = []
    for lib in (dg, torch):
        data = lib.utils.data

        class Shards(data.IterableDataset):
            def __iter__(self):
                info = data.get_worker_info()
                return iter(range(info.id, 11, info.num_workers))

        loader = data.DataLoader(Shards(), batch_size=2, num_workers=2, worker_init_fn=_check_worker_info)
        results.append([b.tolist() for b in loader])
    assert results[0] == results[1] == [[0, 2], [1, 3], [4, 6], [5, 7], [8, 10], [9]]


def _check_worker_info(worker_id):
    import sys
    for name in ("dyngrad.utils.data", "dyngrad.reference.utils.data", "torch.utils.data"):
        module = sys.modules.get(name)
        info = module.get_worker_info() if module is not None else None
        if info is not None:
            assert info.id == worker_id and info.num_workers == 2 and isinstance(info.seed, int)
            return
    raise AssertionError("get_worker_info() returned None in a worker")


class Failing:
    def __init__(self, sleep=0.0):
        self.sleep = sleep

    def __len__(self):
        return 4

    def __getitem__(self, i):
        if self.sleep:
            import time
            time.sleep(self.sleep)
        if i == 2:
            raise KeyError(f"no sample {i}")
        return i


def test_worker_errors_and_timeout(dg):
    data = dg.utils.data
    loader = data.DataLoader(Failing(), batch_size=1, num_workers=2)
    with pytest.raises(KeyError, match="Caught KeyError in DataLoader worker process 0") as info:
        list(loader)
    assert "no sample 2" in str(info.value)
    with pytest.raises(RuntimeError, match="DataLoader timed out after 0.2 seconds"):
        list(data.DataLoader(Failing(sleep=1.0), batch_size=1, num_workers=1, timeout=0.2))


def test_timeout_raises_without_waiting_for_stuck_workers(dg):
    """Issue 23: timeout=2 raised after 7 s (one worker; 12 s with two): the shutdown then waited 5 s for each
    worker, which was stuck in the dataset. The bound below is the timeout plus a margin for starting and stopping
    processes on a loaded machine, far below the 5 s per worker it took."""
    import time
    start = time.monotonic()
    with pytest.raises(RuntimeError, match="DataLoader timed out after 1 seconds"):
        next(iter(dg.utils.data.DataLoader(Failing(sleep=60.0), batch_size=1, num_workers=2, timeout=1)))
    assert time.monotonic() - start < 1 + 4


class GradSamples:
    """Samples that require grad: leaves (`leaf`), or with autograd history (`history`)."""

    def __init__(self, engine, kind):
        self.engine, self.kind = engine, kind

    def __len__(self):
        return 2

    def __getitem__(self, i):
        t = importlib.import_module(self.engine).ones(2, requires_grad=True)
        return t * 2 if self.kind == "history" else t


@pytest.mark.parametrize("kind, batch_size, refused", [("leaf", None, False), ("leaf", 2, True),
                                                      ("history", None, True), ("history", 2, True)])
def test_workers_refuse_tensors_with_autograd_history(dg, kind, batch_size, refused):
    """Issue 23: a worker's tensor with autograd history arrived as a leaf that requires grad, its gradient stopping
    silently; torch refuses it (a leaf that requires grad crosses; a batch stacked from such leaves has history)."""
    loader = dg.utils.data.DataLoader(GradSamples(dg.__name__, kind), batch_size=batch_size, num_workers=1)
    if refused:
        with pytest.raises(RuntimeError, match="autograd history cannot cross from a worker process"):
            next(iter(loader))
    else:
        batch = next(iter(loader))
        assert batch.requires_grad and batch.grad_fn is None and batch.tolist() == [1.0, 1.0]
