"""Padding and packing of variable-length sequences, as torch.nn.utils.rnn. A PackedSequence holds the sequences'
elements time step by time step (at each step, the sequences still running, longest first): `data` (sum of the
lengths, *), `batch_sizes` (how many sequences run at each step), and the permutation from the caller's order to the
sorted one and back. The recurrent layers take and return it. Every function here moves rows with one index_select,
so gradients flow through packing and padding."""
from collections import namedtuple

import numpy as np

from ... import Tensor, cat, float32, float64, full, int64, tensor


def _index(values):
    return tensor(np.asarray(values, dtype=np.int64), dtype=int64)


def invert_permutation(permutation):
    if permutation is None:
        return None
    inverse = np.empty(len(permutation), dtype=np.int64)
    inverse[np.asarray(permutation.tolist(), dtype=np.int64)] = np.arange(len(permutation))
    return _index(inverse)


class PackedSequence(namedtuple("PackedSequence_", ["data", "batch_sizes", "sorted_indices", "unsorted_indices"])):
    """(data, batch_sizes, sorted_indices, unsorted_indices), as torch's; made by pack_padded_sequence or
    pack_sequence rather than by hand."""

    __slots__ = ()

    def __new__(cls, data, batch_sizes=None, sorted_indices=None, unsorted_indices=None):
        if unsorted_indices is None:
            unsorted_indices = invert_permutation(sorted_indices)
        if batch_sizes is None:          # torch's legacy PackedSequence((data, batch_sizes))
            data, batch_sizes = data
        return super().__new__(cls, data, batch_sizes, sorted_indices, unsorted_indices)

    def to(self, *args, **kwargs):
        data = self.data.to(*args, **kwargs)
        return self if data is self.data else type(self)(data, self.batch_sizes, self.sorted_indices,
                                                         self.unsorted_indices)

    def float(self):
        return self.to(dtype=float32)

    def double(self):
        return self.to(dtype=float64)

    def long(self):
        return self.to(dtype=int64)

    def cpu(self):
        return self

    def cuda(self, *args, **kwargs):
        return self.data.cuda()          # raises, naming CUDA

    @property
    def is_cuda(self):
        return False

    def is_pinned(self):
        return False


def _lengths_list(lengths):
    if isinstance(lengths, Tensor):
        return [int(n) for n in lengths.reshape(-1).tolist()]
    return [int(n) for n in lengths]


def pack_padded_sequence(input, lengths, batch_first=False, enforce_sorted=True):
    """A PackedSequence of the padded batch `input` ((T, B, *), or (B, T, *) with batch_first) whose sequence b has
    lengths[b] elements. enforce_sorted=True requires decreasing lengths."""
    lengths = _lengths_list(lengths)
    batch_dim = 0 if batch_first else 1
    if len(lengths) != input.shape[batch_dim]:
        raise RuntimeError(f"Expected `len(lengths)` to be equal to batch_size, but got {len(lengths)} (batch_size="
                           f"{input.shape[batch_dim]})")
    if any(n <= 0 for n in lengths):
        raise RuntimeError("Length of all samples has to be greater than 0, but found an element in 'lengths' that "
                           "is <= 0")
    T = input.shape[1 if batch_first else 0]
    if max(lengths, default=0) > T:
        raise RuntimeError(f"pack_padded_sequence: a length of {max(lengths)} is longer than the input's "
                           f"{T} time steps.")
    if enforce_sorted:
        if any(a < b for a, b in zip(lengths, lengths[1:])):
            raise RuntimeError("`lengths` array must be sorted in decreasing order when `enforce_sorted` is True. You "
                               "can pass `enforce_sorted=False` to pack_padded_sequence and/or pack_sequence to "
                               "sidestep this requirement if you do not need ONNX exportability.")
        order, sorted_indices = list(range(len(lengths))), None
    else:
        order = np.argsort(-np.asarray(lengths), kind="stable").tolist()
        sorted_indices = _index(order)
    sorted_lengths = [lengths[i] for i in order]
    batch_sizes = [sum(1 for n in sorted_lengths if n > t) for t in range(sorted_lengths[0] if lengths else 0)]
    B = len(lengths)
    # row of (t, b) in the flattened input: b * T + t with batch_first, else t * B + b
    rows = [(order[j] * T + t) if batch_first else (t * B + order[j]) for t, k in enumerate(batch_sizes)
            for j in range(k)]
    flat = input.reshape((T * B,) + tuple(input.shape[2:]))
    return PackedSequence(flat.index_select(0, _index(rows)), _index(batch_sizes), sorted_indices, None)


def pad_packed_sequence(sequence, batch_first=False, padding_value=0.0, total_length=None):
    """(padded, lengths): the inverse of pack_padded_sequence, in the caller's sequence order; total_length pads
    the time dim to that length."""
    data, batch_sizes = sequence.data, [int(b) for b in sequence.batch_sizes.tolist()]
    max_len, B = len(batch_sizes), (batch_sizes[0] if batch_sizes else 0)
    if total_length is not None:
        if total_length < max_len:
            raise ValueError("Expected total_length to be at least the length of the longest sequence in input, but "
                             f"got total_length={total_length} and max sequence length being {max_len}")
        max_len = total_length
    lengths = [sum(1 for b in batch_sizes if b > j) for j in range(B)]     # in sorted order
    unsorted = list(range(B)) if sequence.unsorted_indices is None else sequence.unsorted_indices.tolist()
    offsets = np.concatenate([[0], np.cumsum(batch_sizes)]).astype(np.int64)
    pad_row = data.shape[0]
    # the padded tensor as (T, B) rows in the caller's order: sorted position unsorted[b] for sequence b
    source = np.full((max_len, B), pad_row, dtype=np.int64)
    for b in range(B):
        j = unsorted[b]
        source[:lengths[j], b] = offsets[:lengths[j]] + j
    if batch_first:
        source = source.T
    feature = tuple(data.shape[1:])
    padded = cat([data, full((1,) + feature, padding_value, dtype=data.dtype)]).index_select(
        0, _index(source.reshape(-1)))
    out_lengths = _index([lengths[unsorted[b]] for b in range(B)])
    return padded.reshape(source.shape + feature), out_lengths


def pad_sequence(sequences, batch_first=False, padding_value=0.0, padding_side="right"):
    """Sequences (L_i, *) padded to the longest: (T, B, *), or (B, T, *) with batch_first; padding_side='left'
    puts the padding first."""
    if padding_side not in ("left", "right"):
        raise ValueError(f"Expected padding_side to be one of left or right, but got {padding_side}.")
    if isinstance(sequences, Tensor):
        sequences = list(sequences.unbind(0))
    sequences = list(sequences)
    if not sequences:
        raise RuntimeError("received an empty list of sequences")
    lengths = [s.shape[0] for s in sequences]
    T, B = max(lengths), len(sequences)
    feature = tuple(sequences[0].shape[1:])
    pad_row = sum(lengths)
    source = np.full((B, T), pad_row, dtype=np.int64)
    start = 0
    for b, n in enumerate(lengths):
        where = slice(0, n) if padding_side == "right" else slice(T - n, T)
        source[b, where] = np.arange(start, start + n)
        start += n
    if not batch_first:
        source = source.T
    pad = full((1,) + feature, padding_value, dtype=sequences[0].dtype)
    padded = cat(sequences + [pad]).index_select(0, _index(source.reshape(-1)))
    return padded.reshape(source.shape + feature)


def unpad_sequence(padded_sequences, lengths, batch_first=False):
    """The list of sequences of a padded batch, each cut to its length."""
    if not batch_first:
        padded_sequences = padded_sequences.transpose(0, 1)
    return [seq[:n] for seq, n in zip(padded_sequences, _lengths_list(lengths))]


def pack_sequence(sequences, enforce_sorted=True):
    """A PackedSequence of a list of sequences (L_i, *)."""
    lengths = [s.shape[0] for s in sequences]
    return pack_padded_sequence(pad_sequence(sequences), lengths, enforce_sorted=enforce_sorted)


def unpack_sequence(packed_sequences):
    """The list of sequences of a PackedSequence, in the caller's order."""
    padded, lengths = pad_packed_sequence(packed_sequences, batch_first=True)
    return unpad_sequence(padded, lengths, batch_first=True)


__all__ = ["PackedSequence", "invert_permutation", "pack_padded_sequence", "pad_packed_sequence", "pad_sequence",
           "unpad_sequence", "pack_sequence", "unpack_sequence"]
