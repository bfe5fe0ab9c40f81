"""Recurrent layers: RNNCell, LSTMCell, GRUCell, and RNN, LSTM, GRU over whole sequences.

Parameter names, shapes and gate orders are torch's (LSTM gates i, f, g, o; GRU gates r, z, n), so weights move
between the two through numpy. The sequence layers take

- a tensor (L, N, input_size), or (N, L, input_size) with batch_first, or (L, input_size) unbatched;
- a padded tensor plus `lengths=[...]`: each sequence stops at its own length, padded outputs are zero;
- a list of tensors (L_i, input_size) of different lengths: the output is a list of (L_i, D * hidden_size).

Note [Variable-length sequences]: since the graph is recorded as the loop runs, sequences of different lengths
need neither padding nor masks. Sequences are sorted by decreasing length (a stable sort); step t runs the cell
on the k_t sequences still running, which are a prefix of that order, reading their rows of the input with one
index_select. When a sequence ends, its state is set aside as its final state. The input projection x @ W_ih.T + b_ih
of every row of every sequence is one matmul before the loop; each step adds only h @ W_hh.T.
"""
import math

import numpy as np

from .. import empty, zeros, tensor, cat, stack, int64, sigmoid, tanh, relu, Tensor
from . import functional as F, init
from .module import Module
from .parameter import Parameter


# ----- one time step, given the precomputed input projection gi = x @ W_ih.T + b_ih ---------------------------
# h' = tanh(gi + h @ W_hh.T + b_hh)   (or relu)
def rnn_tanh_step(gi, h, w_hh, b_hh):
    return tanh(gi + F.linear(h, w_hh, b_hh))


def rnn_relu_step(gi, h, w_hh, b_hh):
    return relu(gi + F.linear(h, w_hh, b_hh))


# i, f, g, o = gi + h @ W_hh.T + b_hh;  c' = σ(f) c + σ(i) tanh(g);  h' = σ(o) tanh(c')
def lstm_step(gi, state, w_hh, b_hh):
    h, c = state
    i, f, g, o = (gi + F.linear(h, w_hh, b_hh)).chunk(4, dim=-1)
    c = sigmoid(f) * c + sigmoid(i) * tanh(g)
    return sigmoid(o) * tanh(c), c


# r = σ(gi_r + gh_r), z = σ(gi_z + gh_z), n = tanh(gi_n + r gh_n), h' = (1 - z) n + z h
def gru_step(gi, h, w_hh, b_hh):
    gh = F.linear(h, w_hh, b_hh)
    i_r, i_z, i_n = gi.chunk(3, dim=-1)
    h_r, h_z, h_n = gh.chunk(3, dim=-1)
    r = sigmoid(i_r + h_r)
    z = sigmoid(i_z + h_z)
    n = tanh(i_n + r * h_n)
    return n + z * (h - n)


_STEPS = {"RNN_TANH": rnn_tanh_step, "RNN_RELU": rnn_relu_step, "LSTM": lstm_step, "GRU": gru_step}
_GATES = {"RNN_TANH": 1, "RNN_RELU": 1, "LSTM": 4, "GRU": 3}


def _map(fn, state):
    """Apply fn to the state, which is a tensor (RNN, GRU) or an (h, c) pair (LSTM)."""
    return tuple(fn(s) for s in state) if isinstance(state, tuple) else fn(state)


def _hidden(state):
    return state[0] if isinstance(state, tuple) else state


def _uniform_init(module, hidden_size):
    bound = 1.0 / math.sqrt(hidden_size) if hidden_size > 0 else 0
    for p in module.parameters():
        init.uniform_(p, -bound, bound)


# ----- cells ---------------------------------------------------------------------------------------------
class _CellBase(Module):
    mode = None

    def __init__(self, input_size, hidden_size, bias=True, dtype=None):
        super().__init__()
        self.input_size, self.hidden_size, self.bias = input_size, hidden_size, bias
        gates = _GATES[self.mode] * hidden_size
        self.weight_ih = Parameter(empty(gates, input_size, dtype=dtype))
        self.weight_hh = Parameter(empty(gates, hidden_size, dtype=dtype))
        self.bias_ih = Parameter(empty(gates, dtype=dtype)) if bias else None
        self.bias_hh = Parameter(empty(gates, dtype=dtype)) if bias else None
        self.reset_parameters()

    def reset_parameters(self):
        _uniform_init(self, self.hidden_size)

    def _check_input(self, x):
        if x.dim() not in (1, 2) or x.shape[-1] != self.input_size:
            raise ValueError(f"{type(self).__name__}: expected input of shape (N, {self.input_size}) or "
                             f"({self.input_size},), got {tuple(x.shape)}")

    def _zero_state(self, x):
        shape = tuple(x.shape[:-1]) + (self.hidden_size,)
        h = zeros(shape, dtype=x.dtype)
        return (h, zeros(shape, dtype=x.dtype)) if self.mode == "LSTM" else h

    def forward(self, input, hx=None):
        self._check_input(input)
        state = self._zero_state(input) if hx is None else hx
        gi = F.linear(input, self.weight_ih, self.bias_ih)
        return _STEPS[self.mode](gi, state, self.weight_hh, self.bias_hh)

    def extra_repr(self):
        s = f"{self.input_size}, {self.hidden_size}"
        if not self.bias:
            s += ", bias=False"
        if self.mode == "RNN_RELU":
            s += ", nonlinearity='relu'"
        return s


class RNNCell(_CellBase):
    """h' = tanh(x W_ih^T + b_ih + h W_hh^T + b_hh) (or relu)."""

    def __init__(self, input_size, hidden_size, bias=True, nonlinearity="tanh", dtype=None):
        if nonlinearity not in ("tanh", "relu"):
            raise ValueError(f"RNNCell: unknown nonlinearity '{nonlinearity}' (expected 'tanh' or 'relu')")
        self.mode = "RNN_TANH" if nonlinearity == "tanh" else "RNN_RELU"
        super().__init__(input_size, hidden_size, bias, dtype)
        self.nonlinearity = nonlinearity


class LSTMCell(_CellBase):
    """One LSTM step: returns (h', c'). hx is an (h, c) pair or None for zeros."""
    mode = "LSTM"


class GRUCell(_CellBase):
    """One GRU step: returns h'."""
    mode = "GRU"


# ----- sequence layers -------------------------------------------------------------------------------------
class _Schedule:
    """For each time step: how many sequences still run (k) and which input rows they read.

    `rows[n]` lists, in time order, the rows of the packed input that sequence n reads.
    See Note [Variable-length sequences] at the top of this file.
    """

    def __init__(self, rows, num_rows):
        self.num_sequences = len(rows)
        self.order = sorted(range(len(rows)), key=lambda n: -len(rows[n]))
        self.sorted_rows = [rows[n] for n in self.order]
        self.num_rows = num_rows
        self.max_len = len(self.sorted_rows[0]) if rows else 0
        self.active = [sum(1 for r in self.sorted_rows if len(r) > t) for t in range(self.max_len)]
        self._steps = {}

    def steps(self, reverse):
        """[(k_t, positions_t)] per step; reverse reads each sequence from its own last element backwards."""
        if reverse not in self._steps:
            seqs = [r[::-1] for r in self.sorted_rows] if reverse else self.sorted_rows
            self._steps[reverse] = [(k, [seqs[j][t] for j in range(k)]) for t, k in enumerate(self.active)]
        return self._steps[reverse]

    def is_identity_order(self):
        return self.order == list(range(self.num_sequences))


class _RNNBase(Module):
    mode = None

    def __init__(self, input_size, hidden_size, num_layers=1, bias=True, batch_first=False, dropout=0.0,
                 bidirectional=False, dtype=None):
        super().__init__()
        if not 0 <= dropout <= 1:
            raise ValueError(f"{type(self).__name__}: dropout should be a number in [0, 1], got {dropout}")
        if num_layers < 1 or hidden_size < 1:
            raise ValueError(f"{type(self).__name__}: num_layers and hidden_size must be positive, got "
                             f"{num_layers} and {hidden_size}")
        self.input_size, self.hidden_size, self.num_layers = input_size, hidden_size, num_layers
        self.bias, self.batch_first, self.dropout, self.bidirectional = bias, batch_first, dropout, bidirectional
        self.num_directions = 2 if bidirectional else 1
        gates = _GATES[self.mode] * hidden_size
        for layer in range(num_layers):
            layer_in = input_size if layer == 0 else hidden_size * self.num_directions
            for suffix in self._suffixes():
                setattr(self, f"weight_ih_l{layer}{suffix}", Parameter(empty(gates, layer_in, dtype=dtype)))
                setattr(self, f"weight_hh_l{layer}{suffix}", Parameter(empty(gates, hidden_size, dtype=dtype)))
                if bias:
                    setattr(self, f"bias_ih_l{layer}{suffix}", Parameter(empty(gates, dtype=dtype)))
                    setattr(self, f"bias_hh_l{layer}{suffix}", Parameter(empty(gates, dtype=dtype)))
        self.reset_parameters()

    def _suffixes(self):
        return ("", "_reverse") if self.bidirectional else ("",)

    def reset_parameters(self):
        _uniform_init(self, self.hidden_size)

    def _weights(self, layer, suffix):
        get = self._parameters.get
        return (get(f"weight_ih_l{layer}{suffix}"), get(f"bias_ih_l{layer}{suffix}"),
                get(f"weight_hh_l{layer}{suffix}"), get(f"bias_hh_l{layer}{suffix}"))

    def extra_repr(self):
        s = f"{self.input_size}, {self.hidden_size}"
        for name, default in (("num_layers", 1), ("bias", True), ("batch_first", False), ("dropout", 0.0),
                              ("bidirectional", False)):
            if getattr(self, name) != default:
                s += f", {name}={getattr(self, name)}"
        return s

    # ----- forward -----------------------------------------------------------------------------------------
    def forward(self, input, hx=None, lengths=None):
        """Returns (output, h_n) (LSTM: (output, (h_n, c_n))) shaped like torch's; see the module docstring."""
        name = type(self).__name__
        if isinstance(input, (list, tuple)):
            if lengths is not None:
                raise ValueError(f"{name}: pass either a list of sequences or a padded tensor with lengths, not both")
            return self._forward_list(list(input), hx)
        if not isinstance(input, Tensor):
            raise TypeError(f"{name}: input must be a Tensor or a list of Tensors, got {type(input).__name__}")
        if input.dim() not in (2, 3) or input.shape[-1] != self.input_size:
            raise ValueError(f"{name}: expected input of shape (L, N, {self.input_size}), (N, L, {self.input_size}) "
                             f"with batch_first, or (L, {self.input_size}); got {tuple(input.shape)}")
        if input.dim() == 2:
            if lengths is not None:
                raise ValueError(f"{name}: lengths needs a batched (3-D) input, got shape {tuple(input.shape)}")
            hx = None if hx is None else _map(lambda s: s.unsqueeze(1), hx)
            out, h_n = self._forward_uniform(input.unsqueeze(1), hx)
            return out.squeeze(1), _map(lambda s: s.squeeze(1), h_n)
        if lengths is not None:
            return self._forward_lengths(input, hx, lengths)
        x = input.transpose(0, 1) if self.batch_first else input
        out, h_n = self._forward_uniform(x, hx)
        return (out.transpose(0, 1) if self.batch_first else out), h_n

    def _initial_state(self, hx, batch, dtype, order=None):
        """The state of each (layer, direction), shaped (N, H); `order` reorders the batch for a schedule."""
        n_states = self.num_layers * self.num_directions
        expected = (n_states, batch, self.hidden_size)
        if hx is None:
            h = zeros(expected, dtype=dtype)
            hx = (h, zeros(expected, dtype=dtype)) if self.mode == "LSTM" else h
        else:
            if (self.mode == "LSTM") != isinstance(hx, tuple):
                raise TypeError(f"{type(self).__name__}: hx must be " +
                                ("an (h_0, c_0) pair" if self.mode == "LSTM" else "a tensor"))
            for s in (hx if isinstance(hx, tuple) else (hx,)):
                if tuple(s.shape) != expected:
                    raise ValueError(f"{type(self).__name__}: expected hidden state of shape {expected}, "
                                     f"got {tuple(s.shape)}")
            if order is not None:
                index = tensor(order, dtype=int64)
                hx = _map(lambda s: s.index_select(1, index), hx)
        if isinstance(hx, tuple):
            return [tuple(s[i] for s in hx) for i in range(n_states)]
        return [hx[i] for i in range(n_states)]

    def _stack_states(self, states):
        if self.mode == "LSTM":
            return stack([s[0] for s in states]), stack([s[1] for s in states])
        return stack(states)

    def _layer_dropout(self, y, layer):
        if self.dropout > 0 and self.training and layer < self.num_layers - 1:
            return F.dropout(y, self.dropout, True)
        return y

    def _forward_uniform(self, x, hx):
        """x: (L, N, input_size), every sequence of length L. Returns (L, N, D*H) and the final states."""
        step_fn = _STEPS[self.mode]
        states = self._initial_state(hx, x.shape[1], x.dtype)
        finals = []
        for layer in range(self.num_layers):
            outs = []
            for d, suffix in enumerate(self._suffixes()):
                w_ih, b_ih, w_hh, b_hh = self._weights(layer, suffix)
                gi = F.linear(x, w_ih, b_ih)                     # all time steps in one matmul
                state = states[layer * self.num_directions + d]
                steps = range(x.shape[0] - 1, -1, -1) if suffix else range(x.shape[0])
                hs = []
                for t in steps:
                    state = step_fn(gi[t], state, w_hh, b_hh)
                    hs.append(_hidden(state))
                outs.append(stack(hs[::-1] if suffix else hs))
                finals.append(state)
            x = self._layer_dropout(outs[0] if len(outs) == 1 else cat(outs, dim=-1), layer)
        return x, self._stack_states(finals)

    def _forward_packed(self, x, schedule, hx):
        """x: (R, input_size) rows; the schedule says which rows each sequence reads. Returns (R, D*H) rows
        (rows no sequence reads are zero) and the final states in the caller's sequence order."""
        step_fn = _STEPS[self.mode]
        order = None if schedule.is_identity_order() else schedule.order
        states = self._initial_state(hx, schedule.num_sequences, x.dtype, order)
        finals = []
        for layer in range(self.num_layers):
            outs = []
            for d, suffix in enumerate(self._suffixes()):
                w_ih, b_ih, w_hh, b_hh = self._weights(layer, suffix)
                gi = F.linear(x, w_ih, b_ih)
                state = states[layer * self.num_directions + d]
                hs, positions, finished = [], [], []
                for k, rows in schedule.steps(reverse=bool(suffix)):
                    if k < _hidden(state).shape[0]:               # some sequences ended: set their state aside
                        finished.append(_map(lambda s: s[k:], state))
                        state = _map(lambda s: s[:k], state)
                    state = step_fn(gi.index_select(0, tensor(rows, dtype=int64)), state, w_hh, b_hh)
                    hs.append(_hidden(state))
                    positions.extend(rows)
                pieces = [state] + finished[::-1]
                final = pieces[0] if len(pieces) == 1 else \
                    _map_pairs(lambda *ss: cat(list(ss)), pieces)
                finals.append(final)
                outs.append(_scatter_rows(cat(hs), positions, schedule.num_rows))
            x = self._layer_dropout(outs[0] if len(outs) == 1 else cat(outs, dim=-1), layer)
        if order is not None:
            inverse = tensor(np.argsort(order), dtype=int64)
            finals = [_map(lambda s: s.index_select(0, inverse), f) for f in finals]
        return x, self._stack_states(finals)

    def _forward_list(self, seqs, hx):
        name = type(self).__name__
        if not seqs:
            raise ValueError(f"{name}: got an empty list of sequences")
        for i, s in enumerate(seqs):
            if not isinstance(s, Tensor) or s.dim() != 2 or s.shape[-1] != self.input_size or s.shape[0] == 0:
                got = tuple(s.shape) if isinstance(s, Tensor) else type(s).__name__
                raise ValueError(f"{name}: sequence {i} must be a non-empty (L_i, {self.input_size}) tensor, "
                                 f"got {got}")
        offsets = np.cumsum([0] + [s.shape[0] for s in seqs]).tolist()
        rows = [list(range(offsets[i], offsets[i + 1])) for i in range(len(seqs))]
        y, h_n = self._forward_packed(cat(seqs), _Schedule(rows, offsets[-1]), hx)
        return [y[offsets[i]:offsets[i + 1]] for i in range(len(seqs))], h_n

    def _forward_lengths(self, input, hx, lengths):
        name = type(self).__name__
        lengths = [int(n) for n in (lengths.tolist() if isinstance(lengths, Tensor) else lengths)]
        L, N = (input.shape[1], input.shape[0]) if self.batch_first else (input.shape[0], input.shape[1])
        if len(lengths) != N or any(not 1 <= n <= L for n in lengths):
            raise ValueError(f"{name}: lengths must hold {N} values in 1..{L} for input of shape "
                             f"{tuple(input.shape)}, got {lengths}")
        # rows of the flattened input: (n, t) is row n*L + t with batch_first, else t*N + n
        if self.batch_first:
            rows = [[n * L + t for t in range(lengths[n])] for n in range(N)]
        else:
            rows = [[t * N + n for t in range(lengths[n])] for n in range(N)]
        y, h_n = self._forward_packed(input.reshape(L * N, self.input_size), _Schedule(rows, L * N), hx)
        out_shape = (N, L, y.shape[-1]) if self.batch_first else (L, N, y.shape[-1])
        return y.reshape(out_shape), h_n


def _map_pairs(fn, pieces):
    """fn applied across a list of states (tensors or (h, c) pairs), component by component."""
    if isinstance(pieces[0], tuple):
        return tuple(fn(*[p[i] for p in pieces]) for i in range(len(pieces[0])))
    return fn(*pieces)


def _scatter_rows(values, positions, num_rows):
    """A (num_rows, H) tensor whose row positions[j] is values[j] and whose other rows are zero (differentiable)."""
    if positions == list(range(num_rows)):
        return values
    source = np.full(num_rows, len(positions), dtype=np.int64)   # unread rows point at an appended zero row
    source[np.asarray(positions, dtype=np.int64)] = np.arange(len(positions))
    if len(positions) == num_rows:
        return values.index_select(0, tensor(source, dtype=int64))
    padded = cat([values, zeros((1, values.shape[-1]), dtype=values.dtype)])
    return padded.index_select(0, tensor(source, dtype=int64))


class RNN(_RNNBase):
    """Elman RNN over sequences: h_t = tanh(x_t W_ih^T + b_ih + h_{t-1} W_hh^T + b_hh) (or relu)."""

    def __init__(self, input_size, hidden_size, num_layers=1, nonlinearity="tanh", bias=True, batch_first=False,
                 dropout=0.0, bidirectional=False, dtype=None):
        if nonlinearity not in ("tanh", "relu"):
            raise ValueError(f"RNN: unknown nonlinearity '{nonlinearity}' (expected 'tanh' or 'relu')")
        self.mode = "RNN_TANH" if nonlinearity == "tanh" else "RNN_RELU"
        super().__init__(input_size, hidden_size, num_layers, bias, batch_first, dropout, bidirectional, dtype)
        self.nonlinearity = nonlinearity


class LSTM(_RNNBase):
    """LSTM over sequences; returns (output, (h_n, c_n))."""
    mode = "LSTM"


class GRU(_RNNBase):
    """GRU over sequences; returns (output, h_n)."""
    mode = "GRU"
