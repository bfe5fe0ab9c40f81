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
