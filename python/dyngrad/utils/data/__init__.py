"""dyngrad.utils.data (torch.utils.data): datasets, samplers, collation and the DataLoader, with worker processes."""
from .dataset import (Dataset, IterableDataset, TensorDataset, StackDataset, ConcatDataset, ChainDataset, Subset,
                      random_split)
from .sampler import (Sampler, SequentialSampler, RandomSampler, SubsetRandomSampler, WeightedRandomSampler,
                      BatchSampler)
from .distributed import DistributedSampler
from .collate import default_collate, default_convert
from .worker import get_worker_info, WorkerInfo
from .dataloader import DataLoader

__all__ = ["Dataset", "IterableDataset", "TensorDataset", "StackDataset", "ConcatDataset", "ChainDataset", "Subset",
           "random_split", "Sampler", "SequentialSampler", "RandomSampler", "SubsetRandomSampler",
           "WeightedRandomSampler", "BatchSampler", "DistributedSampler", "default_collate", "default_convert",
           "get_worker_info", "WorkerInfo", "DataLoader"]
