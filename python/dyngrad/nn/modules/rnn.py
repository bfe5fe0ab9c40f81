"""Recurrent layers: RNNCell, LSTMCell, GRUCell, and RNN, LSTM, GRU over whole sequences, as torch's.

Parameter names, shapes, registration order and gate orders are torch's (LSTM gates i, f, g, o; GRU gates r, z, n;
weight_hr for an LSTM with proj_size), so state_dicts move between the two. The sequence layers take

- a tensor (L, N, input_size), or (N, L, input_size) with batch_first, or (L, input_size) unbatched;
- a PackedSequence (nn.utils.rnn): the output is a PackedSequence, as in torch;
- beyond torch: a padded tensor plus `lengths=[...]` (each sequence stops at its own length, padded outputs are
  zero), or a list of tensors (L_i, input_size) of different lengths (the output is a list of (L_i, D * H_out)).

Note [Variable-length sequences]: since the graph is recorded as the loop runs, sequences of different lengths
need neither padding nor masks. Sequences are sorted by decreasing length (a stable sort); step t runs the cell
on the k_t sequences still running, which are a prefix of that order, reading their rows of the input with one
index_select. When a sequence ends, its state is set aside as its final state. The input projection x @ W_ih.T + b_ih
of every row of every sequence is one matmul before the loop; each step adds only h @ W_hh.T.
"""
import math

import numpy as np

from ... import Tensor, _C, cat, empty, float32, float64, int64, relu, sigmoid, stack, tanh, tensor, zeros
from ..._api.dispatch import public
from ..._api.device import check_device
from ..._api.meta import is_meta
from .. import functional as F, init
from ..._user_frame import warn
from ..parameter import Parameter
from ..utils.rnn import PackedSequence
from .module import LAYER_ERRORS, Module, layer_error

__all__ = ["RNNCellBase", "RNNCell", "LSTMCell", "GRUCell", "RNNBase", "RNN", "LSTM", "GRU"]


# ----- one time step, given the precomputed input projection gi = x @ W_ih.T + b_ih ---------------------------
# h' = tanh(gi + h @ W_hh.T + b_hh)   (or relu)
def rnn_tanh_step(gi, h, w_hh, b_hh, w_hr=None):
    return tanh(gi + F.linear(h, w_hh, b_hh))


def rnn_relu_step(gi, h, w_hh, b_hh, w_hr=None):
    return relu(gi + F.linear(h, w_hh, b_hh))


# i, f, g, o = gi + h @ W_hh.T + b_hh;  c' = σ(f) c + σ(i) tanh(g);  h' = σ(o) tanh(c')  (then h' @ W_hr.T with
# a projection)
def lstm_step(gi, state, w_hh, b_hh, w_hr=None):
    h, c = state
    i, f, g, o = (gi + F.linear(h, w_hh, b_hh)).chunk(4, dim=-1)
    c = sigmoid(f) * c + sigmoid(i) * tanh(g)
    h = sigmoid(o) * tanh(c)
    return (h if w_hr is None else F.linear(h, w_hr)), c


# r = σ(gi_r + gh_r), z = σ(gi_z + gh_z), n = tanh(gi_n + r gh_n), h' = (1 - z) n + z h
def gru_step(gi, h, w_hh, b_hh, w_hr=None):
    gh = F.linear(h, w_hh, b_hh)
    i_r, i_z, i_n = gi.chunk(3, dim=-1)
    h_r, h_z, h_n = gh.chunk(3, dim=-1)
    r = sigmoid(i_r + h_r)
    z = sigmoid(i_z + h_z)
    n = tanh(i_n + r * h_n)
    return n + z * (h - n)


_STEPS = {"RNN_TANH": rnn_tanh_step, "RNN_RELU": rnn_relu_step, "LSTM": lstm_step, "GRU": gru_step}
_GATES = {"RNN_TANH": 1, "RNN_RELU": 1, "LSTM": 4, "GRU": 3}
_NAMES = {"RNN_TANH": "RNN", "RNN_RELU": "RNN", "LSTM": "LSTM", "GRU": "GRU"}
_MODES = {"RNN_TANH": 0, "RNN_RELU": 1, "LSTM": 2, "GRU": 3}   # the core's rnn_layer


def _core_rnn_layer(gi, h0, c0, w_hh, b_hh, mode, reverse):
    return _C.rnn_layer(gi, h0, c0, w_hh, b_hh, mode, reverse)


# vmap sees the core op (its rule folds the batch into N: Note [Batching at the public API] in _api/batching.py)
_rnn_layer = public(_core_rnn_layer, batch_key="rnn_layer")


def _whole_layer(mode, gi, state, w_hh, b_hh, w_hr, reverse):
    """The steps above for every time step of one (layer, direction) as ONE node of the core (Note [Whole-sequence
    RNN layer] in csrc/dyngrad/ops_nn.cpp): its backward runs the recurrence in one loop and the weight gradient
    as one product. Returns (hidden states (L, N, H), final state), or None where it does not apply (LSTM with a
    projection, half types, mixed dtypes, empty sequences or batches), which the step-by-step loop handles."""
    if _whole_layer_unfit(gi, state, w_hh, b_hh, w_hr):
        return None
    h0, c0 = state if isinstance(state, tuple) else (state, None)
    y = _rnn_layer(gi, h0, c0, w_hh, b_hh, _MODES[mode], bool(reverse))
    last = 0 if reverse else gi.shape[0] - 1
    hs = y[0]
    return hs, ((hs[last], y[1][last]) if mode == "LSTM" else hs[last])


def _whole_layer_unfit(gi, state, w_hh, b_hh, w_hr):
    """True where rnn_layer does not apply (_whole_layer's docstring); gi is (L, N, G*H) or a cell's (N, G*H)."""
    h0, c0 = state if isinstance(state, tuple) else (state, None)
    tensors = [gi, h0, w_hh] + [t for t in (c0, b_hh) if t is not None]
    # (meta tensors: the steps' ops know their shapes, the core's layer does not)
    return w_hr is not None or gi.dtype not in (float32, float64) or any(t.dtype != gi.dtype for t in tensors) \
        or 0 in gi.shape[:-1] or any(is_meta(t) for t in tensors)


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
class RNNCellBase(Module):
    mode = None

    def __init__(self, input_size, hidden_size, bias, num_chunks, device=None, dtype=None):
        super().__init__()
        check_device(device, type(self).__name__)
        self.input_size, self.hidden_size, self.bias = input_size, hidden_size, bias
        self.weight_ih = Parameter(empty(num_chunks * hidden_size, input_size, dtype=dtype))
        self.weight_hh = Parameter(empty(num_chunks * hidden_size, hidden_size, dtype=dtype))
        if bias:
            self.bias_ih = Parameter(empty(num_chunks * hidden_size, dtype=dtype))
            self.bias_hh = Parameter(empty(num_chunks * hidden_size, dtype=dtype))
        else:
            self.register_parameter("bias_ih", None)
            self.register_parameter("bias_hh", None)
        self.reset_parameters()

    def reset_parameters(self):
        _uniform_init(self, self.hidden_size)

    def extra_repr(self):
        s = f"{self.input_size}, {self.hidden_size}"
        if self.bias is not True:
            s += f", bias={self.bias}"
        if getattr(self, "nonlinearity", "tanh") != "tanh":
            s += f", nonlinearity={self.nonlinearity}"
        return s

    def forward(self, input, hx=None):
        try:
            return self._checked_forward(input, hx)
        except LAYER_ERRORS as err:
            raise layer_error(self, err) from None

    def _checked_forward(self, input, hx):
        name = type(self).__name__
        if input.dim() not in (1, 2):
            raise ValueError(f"{name}: Expected input to be 1D or 2D, got {input.dim()}D instead")
        if input.shape[-1] != self.input_size:
            raise RuntimeError(f"input has inconsistent input_size: got {input.shape[-1]} expected "
                               f"{self.input_size}")
        batched = input.dim() == 2
        if hx is not None:
            for i, s in enumerate(hx if isinstance(hx, tuple) else (hx,)):
                if s.dim() != input.dim():
                    raise ValueError(f"{name}: Expected hidden to be {input.dim()}D (as the input), got "
                                     f"{s.dim()}D instead")
                if batched and s.shape[0] != input.shape[0]:
                    raise RuntimeError(f"Input batch size {input.shape[0]} doesn't match hidden{i} batch size "
                                       f"{s.shape[0]}")
        x = input if batched else input.unsqueeze(0)
        if hx is None:
            h = zeros(x.shape[0], self.hidden_size, dtype=x.dtype, device=x.device)
            state = (h, zeros(x.shape[0], self.hidden_size, dtype=x.dtype, device=x.device)) if self.mode == "LSTM" \
                else h
        else:
            state = hx if batched else _map(lambda s: s.unsqueeze(0), hx)
        # Note [Both biases in the cell] (RNNBase._forward_uniform) for the cells too: b_ih + b_hh (G*H elements) is
        # added in rnn_layer's cell loop instead of b_ih to every row of gi by linear, and its gradient is one
        # column sum, not two. The float64 LSTMCell + LBFGS bench row (batch 97, hidden 51): linear's bias add was
        # 3.9% of its samples (perf, Xeon family 6 model 167, 1 thread).
        fold = self.mode != "GRU" and self.bias_ih is not None and self.bias_hh is not None
        gi = F.linear(x, self.weight_ih, None if fold else self.bias_ih)
        out = _fused_cell(self.mode, gi, state, self.weight_hh,
                          self.bias_ih + self.bias_hh if fold else self.bias_hh)
        if out is None:
            if fold:
                gi = gi + self.bias_ih
            out = _STEPS[self.mode](gi, state, self.weight_hh, self.bias_hh)
        return out if batched else _map(lambda s: s.squeeze(0), out)


def _fused_cell(mode, gi, state, w_hh, b_hh):
    """Note [Cells as one-step layers]: a cell's step after its input projection gi (the hidden product, the gate
    nonlinearities, the state update) is the core's rnn_layer over a sequence of one step: one node instead of
    ~12 (LSTM: add, chunk, four gates, three products and a sum, each a node and a pass over the batch), with the
    fused derivative and its own derivative (double backward, forward AD, vmap) as for the sequence layers. Same
    numbers as the step functions above to rounding. None where rnn_layer does not apply (_whole_layer's cases).
    The bench's float64 LSTMCell + LBFGS row (python -m dyngrad.bench --only lstmcell-lbfgs --engines cpp,torch,
    Xeon family 6 model 167, 2 cores, KVM, load 2.2): 1 thread 695 -> 534 ms per step against torch's 692-770,
    1.11x -> 1.30x.
    The states are read as one reshape of the (S, 1, N, H) output and slices of it (3 nodes for an LSTM, not the 8
    of y[0][0], y[1][0]: each integer index is a slice and a reshape)."""
    if _whole_layer_unfit(gi, state, w_hh, b_hh, None):
        return None
    h0, c0 = state if isinstance(state, tuple) else (state, None)
    n, hidden = h0.shape
    y = _rnn_layer(gi.unsqueeze(0), h0, c0, w_hh, b_hh, _MODES[mode], False)
    if mode != "LSTM":
        return y.reshape(n, hidden)
    flat = y.reshape(2 * n, hidden)
    return flat[:n], flat[n:]


class RNNCell(RNNCellBase):
    """h' = tanh(x W_ih^T + b_ih + h W_hh^T + b_hh) (or relu)."""

    def __init__(self, input_size, hidden_size, bias=True, nonlinearity="tanh", device=None, dtype=None):
        if nonlinearity not in ("tanh", "relu"):
            raise ValueError(f"Unknown nonlinearity: {nonlinearity}")
        self.mode = "RNN_TANH" if nonlinearity == "tanh" else "RNN_RELU"
        super().__init__(input_size, hidden_size, bias, 1, device, dtype)
        self.nonlinearity = nonlinearity


class LSTMCell(RNNCellBase):
    """One LSTM step: returns (h', c'). hx is an (h, c) pair or None for zeros."""
    mode = "LSTM"

    def __init__(self, input_size, hidden_size, bias=True, device=None, dtype=None):
        super().__init__(input_size, hidden_size, bias, 4, device, dtype)


class GRUCell(RNNCellBase):
    """One GRU step: returns h'."""
    mode = "GRU"

    def __init__(self, input_size, hidden_size, bias=True, device=None, dtype=None):
        super().__init__(input_size, hidden_size, bias, 3, device, dtype)


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


class RNNBase(Module):
    mode = None

    def __init__(self, mode, input_size, hidden_size, num_layers=1, bias=True, batch_first=False, dropout=0.0,
                 bidirectional=False, proj_size=0, device=None, dtype=None):
        super().__init__()
        check_device(device, _NAMES[mode])
        self.mode = mode
        if not isinstance(dropout, (int, float)) or isinstance(dropout, bool) or not 0 <= dropout <= 1:
            raise ValueError("dropout should be a number in range [0, 1] representing the probability of an "
                             "element being zeroed")
        if dropout > 0 and num_layers == 1:
            warn("dropout option adds dropout after all but last recurrent layer, so non-zero dropout "
                 f"expects num_layers greater than 1, but got dropout={dropout} and num_layers={num_layers}")
        if not isinstance(hidden_size, int) or isinstance(hidden_size, bool):
            raise TypeError(f"hidden_size should be of type int, got: {type(hidden_size).__name__}")
        if hidden_size <= 0:
            raise ValueError("hidden_size must be greater than zero")
        if num_layers <= 0:
            raise ValueError("num_layers must be greater than zero")
        if proj_size < 0:
            raise ValueError("proj_size should be a positive integer or zero to disable projections")
        if proj_size >= hidden_size:
            raise ValueError("proj_size has to be smaller than hidden_size")
        if proj_size and mode != "LSTM":
            raise ValueError("proj_size argument is only supported for LSTM, not RNN or GRU")
        self.input_size, self.hidden_size, self.num_layers = input_size, hidden_size, num_layers
        self.bias, self.batch_first, self.dropout = bias, batch_first, float(dropout)
        self.bidirectional, self.proj_size = bidirectional, proj_size
        num_directions = 2 if bidirectional else 1
        gates = _GATES[mode] * hidden_size
        real_hidden = proj_size if proj_size > 0 else hidden_size
        self._flat_weights_names, self._all_weights = [], []
        for layer in range(num_layers):
            layer_in = input_size if layer == 0 else real_hidden * num_directions
            for suffix in self._suffixes():
                shapes = [("weight_ih", (gates, layer_in)), ("weight_hh", (gates, real_hidden))]
                if bias:
                    shapes += [("bias_ih", (gates,)), ("bias_hh", (gates,))]
                if proj_size > 0:
                    shapes.append(("weight_hr", (proj_size, hidden_size)))
                names = []
                for kind, shape in shapes:
                    name = f"{kind}_l{layer}{suffix}"
                    setattr(self, name, Parameter(empty(*shape, dtype=dtype)))
                    names.append(name)
                self._flat_weights_names.extend(names)
                self._all_weights.append(names)
        self.reset_parameters()

    def _suffixes(self):
        return ("", "_reverse") if self.bidirectional else ("",)

    @property
    def num_directions(self):
        return 2 if self.bidirectional else 1

    def reset_parameters(self):
        _uniform_init(self, self.hidden_size)

    def flatten_parameters(self):
        """A no-op: torch packs the weights for cuDNN; dyngrad reads them where they are."""

    @property
    def all_weights(self):
        return [[getattr(self, name) for name in names] for names in self._all_weights]

    @property
    def _flat_weights(self):
        return [getattr(self, name) for name in self._flat_weights_names]

    def _weights(self, layer, suffix):
        get = self._parameters.get
        return (get(f"weight_ih_l{layer}{suffix}"), get(f"bias_ih_l{layer}{suffix}"),
                get(f"weight_hh_l{layer}{suffix}"), get(f"bias_hh_l{layer}{suffix}"),
                get(f"weight_hr_l{layer}{suffix}"))

    def extra_repr(self):
        s = f"{self.input_size}, {self.hidden_size}"
        if self.proj_size != 0:
            s += f", proj_size={self.proj_size}"
        if self.num_layers != 1:
            s += f", num_layers={self.num_layers}"
        if self.bias is not True:
            s += f", bias={self.bias}"
        if self.batch_first is not False:
            s += f", batch_first={self.batch_first}"
        if self.dropout != 0:
            s += f", dropout={self.dropout}"
        if self.bidirectional is not False:
            s += f", bidirectional={self.bidirectional}"
        return s

    # ----- forward -----------------------------------------------------------------------------------------
    def _state_shapes(self, batch):
        n = self.num_layers * self.num_directions
        h_out = self.proj_size if self.proj_size > 0 else self.hidden_size
        return ((n, batch, h_out), (n, batch, self.hidden_size)) if self.mode == "LSTM" else ((n, batch, h_out),)

    def _check_hidden(self, hx, batch):
        """torch's check_forward_args for hx of a batch of `batch` sequences."""
        if (self.mode == "LSTM") != isinstance(hx, tuple):
            raise TypeError(f"{_NAMES[self.mode]}: hx must be " +
                            ("an (h_0, c_0) pair of tensors" if self.mode == "LSTM" else "a tensor"))
        for i, (s, expected) in enumerate(zip(hx if isinstance(hx, tuple) else (hx,), self._state_shapes(batch))):
            if tuple(s.shape) != expected:
                which = f"hidden[{i}] size" if self.mode == "LSTM" else "hidden size"
                raise RuntimeError(f"Expected {which} {expected}, got {list(s.shape)}")

    def forward(self, input, hx=None, *, lengths=None):
        """Returns (output, h_n) (LSTM: (output, (h_n, c_n))) shaped like torch's; see the module docstring."""
        try:
            return self._checked_forward(input, hx, lengths)
        except LAYER_ERRORS as err:
            raise layer_error(self, err) from None

    def _checked_forward(self, input, hx, lengths):
        name = _NAMES[self.mode]
        if isinstance(input, PackedSequence):
            return self._forward_packed_sequence(input, hx)
        if isinstance(input, (list, tuple)):
            if lengths is not None:
                raise ValueError(f"{name}: pass either a list of sequences or a padded tensor with lengths, not both")
            return self._forward_list(list(input), hx)
        if not isinstance(input, Tensor):
            raise TypeError(f"{name}: input must be a Tensor, a PackedSequence or a list of Tensors, got "
                            f"{type(input).__name__}")
        if input.dim() not in (2, 3):
            raise ValueError(f"{name}: Expected input to be 2D or 3D, got {input.dim()}D instead")
        if input.shape[-1] != self.input_size:
            raise RuntimeError(f"input.size(-1) must be equal to input_size. Expected {self.input_size}, got "
                               f"{input.shape[-1]}")
        if input.dim() == 2:
            if lengths is not None:
                raise ValueError(f"{name}: lengths needs a batched (3-D) input, got shape {tuple(input.shape)}")
            if hx is not None:
                dims = [s.dim() for s in (hx if isinstance(hx, tuple) else (hx,))]
                if any(d != 2 for d in dims):
                    if self.mode == "LSTM":
                        raise RuntimeError(f"For unbatched 2-D input, hx and cx should also be 2-D but got "
                                           f"({dims[0]}-D, {dims[1]}-D) tensors")
                    raise RuntimeError(f"For unbatched 2-D input, hx should also be 2-D but got {dims[0]}-D tensor")
                hx = _map(lambda s: s.unsqueeze(1), hx)
            out, h_n = self._forward_uniform(input.unsqueeze(1), hx)
            return out.squeeze(1), _map(lambda s: s.squeeze(1), h_n)
        if hx is not None:
            dims = [s.dim() for s in (hx if isinstance(hx, tuple) else (hx,))]
            if any(d != 3 for d in dims):
                if self.mode == "LSTM":
                    raise RuntimeError(f"For batched 3-D input, hx and cx should also be 3-D but got "
                                       f"({dims[0]}-D, {dims[1]}-D) tensors")
                raise RuntimeError(f"For batched 3-D input, hx should also be 3-D but got {dims[0]}-D tensor")
        if lengths is not None:
            return self._forward_lengths(input, hx, lengths)
        x = input.transpose(0, 1) if self.batch_first else input
        out, h_n = self._forward_uniform(x, hx)
        return (out.transpose(0, 1) if self.batch_first else out), h_n

    def _initial_state(self, hx, batch, dtype, order=None, device=None):
        """The state of each (layer, direction), shaped (N, H); `order` reorders the batch for a schedule."""
        n_states = self.num_layers * self.num_directions
        if hx is None:
            shapes = self._state_shapes(batch)
            hx = tuple(zeros(s, dtype=dtype, device=device) for s in shapes) if self.mode == "LSTM" else \
                zeros(shapes[0], dtype=dtype, device=device)
        else:
            self._check_hidden(hx, batch)
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
        """x: (L, N, input_size), every sequence of length L. Returns (L, N, D*H_out) and the final states."""
        step_fn = _STEPS[self.mode]
        states = self._initial_state(hx, x.shape[1], x.dtype, device=x.device)
        finals = []
        for layer in range(self.num_layers):
            outs = []
            for d, suffix in enumerate(self._suffixes()):
                w_ih, b_ih, w_hh, b_hh, w_hr = self._weights(layer, suffix)
                state = states[layer * self.num_directions + d]
                # Note [Both biases in the cell]: where both biases add to the gates (LSTM, RNN; not GRU, whose
                # b_hn is inside r * (...)), the layer adds b_ih + b_hh in its cell loop: one pass over the gates
                # fewer forward, and one column sum fewer backward (both biases get the same gradient)
                fold = self.mode != "GRU" and b_ih is not None and b_hh is not None and w_hr is None
                gi = F.linear(x, w_ih, None if fold else b_ih)   # all time steps in one matmul
                whole = _whole_layer(self.mode, gi, state, w_hh, b_ih + b_hh if fold else b_hh, w_hr, suffix)
                if whole is not None:
                    outs.append(whole[0])
                    finals.append(whole[1])
                    continue
                if fold:
                    gi = gi + b_ih
                steps = range(x.shape[0] - 1, -1, -1) if suffix else range(x.shape[0])
                hs = []
                for t in steps:
                    state = step_fn(gi[t], state, w_hh, b_hh, w_hr)
                    hs.append(_hidden(state))
                outs.append(stack(hs[::-1] if suffix else hs))
                finals.append(state)
            x = self._layer_dropout(outs[0] if len(outs) == 1 else cat(outs, dim=-1), layer)
        return x, self._stack_states(finals)

    def _forward_packed(self, x, schedule, hx):
        """x: (R, input_size) rows; the schedule says which rows each sequence reads. Returns (R, D*H_out) rows
        (rows no sequence reads are zero) and the final states in the caller's sequence order."""
        step_fn = _STEPS[self.mode]
        order = None if schedule.is_identity_order() else schedule.order
        states = self._initial_state(hx, schedule.num_sequences, x.dtype, order)
        finals = []
        for layer in range(self.num_layers):
            outs = []
            for d, suffix in enumerate(self._suffixes()):
                w_ih, b_ih, w_hh, b_hh, w_hr = self._weights(layer, suffix)
                gi = F.linear(x, w_ih, b_ih)
                state = states[layer * self.num_directions + d]
                hs, positions, finished = [], [], []
                for k, rows in schedule.steps(reverse=bool(suffix)):
                    if k < _hidden(state).shape[0]:               # some sequences ended: set their state aside
                        finished.append(_map(lambda s: s[k:], state))
                        state = _map(lambda s: s[:k], state)
                    state = step_fn(gi.index_select(0, tensor(rows, dtype=int64)), state, w_hh, b_hh, w_hr)
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

    def _forward_packed_sequence(self, packed, hx):
        """A PackedSequence in, a PackedSequence out (torch's layout: time-major rows, sequences sorted by length
        within each step); hx and h_n are in the caller's sequence order, as torch's."""
        data, batch_sizes = packed.data, [int(b) for b in packed.batch_sizes.tolist()]
        if data.dim() != 2:
            raise RuntimeError(f"input must have 2 dimensions, got {data.dim()}")
        if data.shape[-1] != self.input_size:
            raise RuntimeError(f"input.size(-1) must be equal to input_size. Expected {self.input_size}, got "
                               f"{data.shape[-1]}")
        if hx is not None:
            dims = [s.dim() for s in (hx if isinstance(hx, tuple) else (hx,))]
            if any(d != 3 for d in dims):
                raise RuntimeError(f"For batched 3-D input, hx should also be 3-D but got {dims[0]}-D tensor")
        offsets = np.concatenate([[0], np.cumsum(batch_sizes)]).tolist()
        num = batch_sizes[0] if batch_sizes else 0
        # sorted position j reads row offsets[t] + j at each step t it is still running
        sorted_rows = [[offsets[t] + j for t in range(len(batch_sizes)) if batch_sizes[t] > j] for j in range(num)]
        if packed.sorted_indices is None:
            rows = sorted_rows
        else:
            unsorted = packed.unsorted_indices.tolist()
            rows = [sorted_rows[unsorted[n]] for n in range(num)]
        y, h_n = self._forward_packed(data, _Schedule(rows, offsets[-1]), hx)
        return PackedSequence(y, packed.batch_sizes, packed.sorted_indices, packed.unsorted_indices), h_n

    def _forward_list(self, seqs, hx):
        name = _NAMES[self.mode]
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
        name = _NAMES[self.mode]
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


def _no_projection(kwargs, name):
    """RNN and GRU refuse proj_size with torch's ValueError (and other unknown keywords with a TypeError)."""
    if "proj_size" in kwargs:
        raise ValueError("proj_size argument is only supported for LSTM, not RNN or GRU")
    if kwargs:
        raise TypeError(f"{name}.__init__() got an unexpected keyword argument '{next(iter(kwargs))}'")


class RNN(RNNBase):
    """Elman RNN over sequences: h_t = tanh(x_t W_ih^T + b_ih + h_{t-1} W_hh^T + b_hh) (or relu)."""

    def __init__(self, input_size, hidden_size, num_layers=1, nonlinearity="tanh", bias=True, batch_first=False,
                 dropout=0.0, bidirectional=False, device=None, dtype=None, **kwargs):
        _no_projection(kwargs, "RNN")
        if nonlinearity not in ("tanh", "relu"):
            raise ValueError(f"Unknown nonlinearity '{nonlinearity}'. Select from 'tanh' or 'relu'.")
        super().__init__("RNN_TANH" if nonlinearity == "tanh" else "RNN_RELU", input_size, hidden_size, num_layers,
                         bias, batch_first, dropout, bidirectional, 0, device, dtype)
        self.nonlinearity = nonlinearity


class LSTM(RNNBase):
    """LSTM over sequences; returns (output, (h_n, c_n)). With proj_size > 0, h is projected to proj_size."""

    def __init__(self, input_size, hidden_size, num_layers=1, bias=True, batch_first=False, dropout=0.0,
                 bidirectional=False, proj_size=0, device=None, dtype=None):
        super().__init__("LSTM", input_size, hidden_size, num_layers, bias, batch_first, dropout, bidirectional,
                         proj_size, device, dtype)


class GRU(RNNBase):
    """GRU over sequences; returns (output, h_n)."""

    def __init__(self, input_size, hidden_size, num_layers=1, bias=True, batch_first=False, dropout=0.0,
                 bidirectional=False, device=None, dtype=None, **kwargs):
        _no_projection(kwargs, "GRU")
        super().__init__("GRU", input_size, hidden_size, num_layers, bias, batch_first, dropout, bidirectional, 0,
                         device, dtype)
