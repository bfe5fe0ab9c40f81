"""Attention with torch.nn.functional's signatures: scaled_dot_product_attention (torch's math path, composite) and
multi_head_attention_forward, the function behind nn.MultiheadAttention."""
import math

import numpy as np

from ... import _C
from .. import bridge
from ..._user_frame import warn
from ..args import number, optional_tensor, shape_str, tensor_arg, to_int
from .dropout import dropout
from .linear import linear


def _k(value, like):
    return _C.scalar_operand(value, like)


def _as_additive_mask(mask, dtype):
    """A bool mask (True = take part) as 0 / -inf of `dtype`; a float mask is added as it is."""
    if mask.dtype is _C.bool:
        return _C.where(mask, _C.full((), 0.0, dtype), _C.full((), -math.inf, dtype))
    return mask


def _safe_softmax(scores):
    """softmax over the last dim, with rows that are entirely -inf (fully masked) giving zeros instead of nan, as
    torch's math path."""
    masked = _C.compare("eq", _C.amax(scores.detach(), (-1,), True), _k(-math.inf, scores))
    safe = _C.where(masked, _k(0.0, scores), scores)
    return _C.where(masked, _k(0.0, scores), _C.softmax(safe, -1))


def _repeat_heads(t, repeats):
    """t with each head (dim -3) repeated `repeats` times in place (repeat_interleave)."""
    index = np.repeat(np.arange(t.shape[-3]), repeats).astype(np.int64)
    return _C.index_select(t, t.ndim - 3, bridge.copy(index, False))


def _fused(q, k, v, mask):
    """Whether the fused primitive takes the call: float32/float64 operands of one dtype and a mask (if any) that
    needs no gradient and carries no tangent (the kernel differentiates neither way through it: a dual mask's
    tangent was dropped, a silent wrong jvp); other calls take the composite below."""
    return (q.dtype in (_C.float32, _C.float64) and k.dtype is q.dtype and v.dtype is q.dtype
            and (mask is None or not (mask.requires_grad or
                                      any(_C._get_tangent(mask, level) is not None
                                          for level in _C._open_dual_levels()))))


def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
                                 enable_gqa=False):
    """softmax(q k^T * scale + mask) v over the last two dims; is_causal masks keys after each query, a bool mask
    keeps the True positions, a float mask is added; fully masked rows give zeros."""
    op = "scaled_dot_product_attention"
    q = tensor_arg(query, op, "query")
    k = tensor_arg(key, op, "key")
    v = tensor_arg(value, op, "value")
    mask = optional_tensor(attn_mask, op, "attn_mask")
    if q.ndim < 2 or k.ndim < 2 or v.ndim < 2:
        raise RuntimeError(f"{op}: expected query, key and value to be at least 2-D, got shapes "
                           f"{shape_str(q.shape)}, {shape_str(k.shape)} and {shape_str(v.shape)}.")
    if not (q.dtype is k.dtype is v.dtype):
        raise RuntimeError(f"{op}: expected query, key and value to have the same dtype, got {q.dtype.name}, "
                           f"{k.dtype.name} and {v.dtype.name}.")
    if mask is not None and mask.dtype is not _C.bool and not mask.dtype.is_floating_point:
        raise RuntimeError(f"{op}: expected attn_mask to be bool or floating point, got {mask.dtype.name}.")
    if is_causal and mask is not None:
        raise RuntimeError(f"{op}: attn_mask must not be given when is_causal=True.")
    if enable_gqa and q.ndim >= 3 and k.ndim >= 3 and k.shape[-3] != q.shape[-3]:
        heads, kv_heads = q.shape[-3], k.shape[-3]
        if kv_heads == 0 or heads % kv_heads or v.shape[-3] != kv_heads:
            raise RuntimeError(f"{op}: with enable_gqa the number of query heads ({heads}) must be a multiple of the "
                               f"number of key/value heads ({kv_heads}, {v.shape[-3]}).")
        k, v = _repeat_heads(k, heads // kv_heads), _repeat_heads(v, heads // kv_heads)
    s = 1.0 / math.sqrt(q.shape[-1]) if scale is None else float(number(scale, op, "scale"))
    p = float(number(dropout_p, op, "dropout_p"))
    if not 0.0 <= p <= 1.0:
        raise RuntimeError(f"{op}: dropout_p must be in [0, 1], got {p}.")
    if _fused(q, k, v, mask):
        # Note [Fused attention] (csrc/dyngrad/ops_nn.cpp): one node, no (L, S) weights saved; dropout's mask is a
        # hash of one seed, drawn by the op itself (seed -1: Note [Dropout inside attention]) so that both engines
        # draw the same and a static replay draws a fresh one
        return _C.attention(q, k, v, mask, bool(is_causal), s, p, -1 if p > 0.0 else 0)
    # torch's math path scales q and k by sqrt(scale) each before the product
    root = math.sqrt(s)
    scores = _C.matmul(_C.mul(q, _k(root, q)), _C.mT(_C.mul(k, _k(root, k))))
    n_q, n_k = q.shape[-2], k.shape[-2]
    if is_causal:
        keep = bridge.copy(np.tril(np.ones((n_q, n_k), dtype=bool)), False)
        scores = _C.add(scores, _as_additive_mask(keep, scores.dtype))
    elif mask is not None:
        scores = _C.add(scores, _as_additive_mask(mask, scores.dtype))
    # Note [Plain softmax where no row is masked out]: only a given mask can mask out a whole row (a causal mask
    # keeps key 0 for every query), so without one the plain softmax is the safe one. The safe softmax costs an
    # amax, a compare and two wheres over the scores forward and backward: a causal GPT attention of (12, 4, 64, 32)
    # at 1 thread took 7.1 ms forward + 2.4 ms backward, 1.1 + 1.5 ms with the plain one, against torch's fused
    # kernel's 1.1 + 7.1 (wall time, Xeon Sapphire Rapids 2 cores, load 10, so noisy); after the change
    # `python bench/program_phases.py --only attention` gave 1.7 + 1.6 ms of CPU, torch 1.1 + 2.6 (load 7-15).
    weights = _safe_softmax(scores) if mask is not None or n_k == 0 else _C.softmax(scores, -1)
    if p > 0.0:
        weights = dropout(weights, p, True)
    return _C.matmul(weights, v)


# ----- multi-head attention --------------------------------------------------------------------------------------

def _mha_is_batched(query, key, value, key_padding_mask, attn_mask, num_heads):
    """torch's shape checks: (L, N, E) batched or (L, E) unbatched query, with matching key, value and masks."""
    if query.ndim == 3:
        if key.ndim != 3 or value.ndim != 3:
            raise AssertionError(f"multi_head_attention_forward: for a batched (3-D) query, key and value must be 3-D, "
                                 f"got {key.ndim}-D and {value.ndim}-D tensors.")
        if key_padding_mask is not None and key_padding_mask.ndim != 2:
            raise AssertionError(f"multi_head_attention_forward: for a batched (3-D) query, key_padding_mask must be "
                                 f"None or 2-D, got a {key_padding_mask.ndim}-D tensor.")
        if attn_mask is not None and attn_mask.ndim not in (2, 3):
            raise AssertionError(f"multi_head_attention_forward: for a batched (3-D) query, attn_mask must be None, "
                                 f"2-D or 3-D, got a {attn_mask.ndim}-D tensor.")
        return True
    if query.ndim == 2:
        if key.ndim != 2 or value.ndim != 2:
            raise AssertionError(f"multi_head_attention_forward: for an unbatched (2-D) query, key and value must be "
                                 f"2-D, got {key.ndim}-D and {value.ndim}-D tensors.")
        if key_padding_mask is not None and key_padding_mask.ndim != 1:
            raise AssertionError(f"multi_head_attention_forward: for an unbatched (2-D) query, key_padding_mask must "
                                 f"be None or 1-D, got a {key_padding_mask.ndim}-D tensor.")
        if attn_mask is not None:
            if attn_mask.ndim not in (2, 3):
                raise AssertionError(f"multi_head_attention_forward: for an unbatched (2-D) query, attn_mask must be "
                                     f"None, 2-D or 3-D, got a {attn_mask.ndim}-D tensor.")
            expected = (num_heads, query.shape[0], key.shape[0])
            if attn_mask.ndim == 3 and tuple(attn_mask.shape) != expected:
                raise AssertionError(f"multi_head_attention_forward: expected attn_mask of shape {expected}, got "
                                     f"{shape_str(attn_mask.shape)}.")
        return False
    raise AssertionError(f"multi_head_attention_forward: query must be 2-D (unbatched) or 3-D (batched), got a "
                         f"{query.ndim}-D tensor.")


def _float_mask(mask, name, other, other_name, dtype, check_other=True):
    """A bool or float mask as an additive float mask of `dtype` (True -> -inf), warning when two masks differ in
    type, as torch's _canonical_mask."""
    if mask is None:
        return None
    if mask.dtype is not _C.bool and not mask.dtype.is_floating_point:
        raise AssertionError(f"multi_head_attention_forward: only bool and floating-point {name} are supported, got "
                             f"{mask.dtype.name}.")
    if check_other and other is not None and other.dtype is not mask.dtype:
        warn(f"multi_head_attention_forward: mismatched {name} and {other_name} types are deprecated; use "
             "the same type for both.", UserWarning)
    if mask.dtype is _C.bool:
        return _C.where(mask, _C.full((), -math.inf, dtype), _C.full((), 0.0, dtype))
    return mask


def _pad_last(t):
    """One more position (a zero) at the end of the last dim."""
    return _C.cat([t, _C.full(tuple(t.shape[:-1]) + (1,), 0.0, t.dtype)], t.ndim - 1)


def _in_projection_packed(q, k, v, w, b):
    """q, k, v projected by the three (E, E) blocks of the packed in_proj_weight (3E, E)."""
    e = q.shape[-1]
    ws = _C.split_size(w, e, 0)
    bs = _C.split_size(b, e, 0) if b is not None else (None, None, None)
    if k is v and q is k:                        # self-attention: one product
        proj = linear(q, w, b)
        return tuple(_C.split_size(proj, e, proj.ndim - 1))
    if k is v:                                   # encoder-decoder attention: one product for k and v
        kv = linear(k, _C.cat([ws[1], ws[2]], 0), None if b is None else _C.cat([bs[1], bs[2]], 0))
        k_proj, v_proj = _C.split_size(kv, e, kv.ndim - 1)
        return linear(q, ws[0], bs[0]), k_proj, v_proj
    return linear(q, ws[0], bs[0]), linear(k, ws[1], bs[1]), linear(v, ws[2], bs[2])


def _in_projection(q, k, v, w_q, w_k, w_v, b_q, b_k, b_v):
    eq, ek, ev = q.shape[-1], k.shape[-1], v.shape[-1]
    for t, want, name in ((w_q, (eq, eq), "query weights"), (w_k, (eq, ek), "key weights"),
                          (w_v, (eq, ev), "value weights"), (b_q, (eq,), "query bias"), (b_k, (eq,), "key bias"),
                          (b_v, (eq,), "value bias")):
        if t is not None and tuple(t.shape) != want:
            raise AssertionError(f"multi_head_attention_forward: expected {name} of shape {want}, got "
                                 f"{shape_str(t.shape)}.")
    return linear(q, w_q, b_q), linear(k, w_k, b_k), linear(v, w_v, b_v)


def multi_head_attention_forward(query, key, value, embed_dim_to_check, num_heads, in_proj_weight, in_proj_bias,
                                 bias_k, bias_v, add_zero_attn, dropout_p, out_proj_weight, out_proj_bias,
                                 training=True, key_padding_mask=None, need_weights=True, attn_mask=None,
                                 use_separate_proj_weight=False, q_proj_weight=None, k_proj_weight=None,
                                 v_proj_weight=None, static_k=None, static_v=None, average_attn_weights=True,
                                 is_causal=False):
    """Multi-head attention of (L, N, E) query and (S, N, E) key/value (or unbatched (L, E), (S, E)): in
    projections (packed or separate), optional bias_k/bias_v and zero attention rows, masks, attention per head,
    out projection. Returns (output, weights averaged over heads, or per head, or None)."""
    op = "multi_head_attention_forward"
    q_in = tensor_arg(query, op, "query")
    k_in = tensor_arg(key, op, "key")
    v_in = tensor_arg(value, op, "value")
    kpm = optional_tensor(key_padding_mask, op, "key_padding_mask")
    mask = optional_tensor(attn_mask, op, "attn_mask")
    num_heads = to_int(num_heads, op, "num_heads")
    batched = _mha_is_batched(q_in, k_in, v_in, kpm, mask, num_heads)
    if not batched:                      # a batch of one (three new tensors, as torch: projected separately)
        q_in, k_in, v_in = _C.unsqueeze(q_in, 1), _C.unsqueeze(k_in, 1), _C.unsqueeze(v_in, 1)
        if kpm is not None:
            kpm = _C.unsqueeze(kpm, 0)
    tgt_len, bsz, embed_dim = q_in.shape
    src_len = k_in.shape[0]
    kpm = _float_mask(kpm, "key_padding_mask", mask, "attn_mask", q_in.dtype)
    if is_causal and mask is None:
        raise RuntimeError(f"{op}: is_causal needs attn_mask (a causal mask); the hint alone is not enough.")
    if is_causal and kpm is None and not need_weights:
        mask = None                      # the hint is passed on to scaled_dot_product_attention
    else:
        mask = _float_mask(mask, "attn_mask", None, "", q_in.dtype, check_other=False)
        if kpm is not None:
            is_causal = False
    if embed_dim != embed_dim_to_check:
        raise AssertionError(f"{op}: expected embedding dimension {embed_dim_to_check}, got {embed_dim}.")
    head_dim = embed_dim // num_heads
    if head_dim * num_heads != embed_dim:
        raise AssertionError(f"{op}: embed_dim {embed_dim} is not divisible by num_heads {num_heads}.")
    if use_separate_proj_weight:
        if tuple(k_in.shape[:2]) != tuple(v_in.shape[:2]):
            raise AssertionError(f"{op}: key's sequence and batch dims {tuple(k_in.shape[:2])} do not match value's "
                                 f"{tuple(v_in.shape[:2])}.")
    elif tuple(k_in.shape) != tuple(v_in.shape):
        raise AssertionError(f"{op}: key shape {shape_str(k_in.shape)} does not match value shape "
                             f"{shape_str(v_in.shape)}.")

    if not use_separate_proj_weight:
        if in_proj_weight is None:
            raise AssertionError(f"{op}: use_separate_proj_weight is False but in_proj_weight is None.")
        q, k, v = _in_projection_packed(q_in, k_in, v_in, in_proj_weight, in_proj_bias)
    else:
        for t, name in ((q_proj_weight, "q_proj_weight"), (k_proj_weight, "k_proj_weight"),
                        (v_proj_weight, "v_proj_weight")):
            if t is None:
                raise AssertionError(f"{op}: use_separate_proj_weight is True but {name} is None.")
        b_q = b_k = b_v = None
        if in_proj_bias is not None:
            b_q, b_k, b_v = _C.chunk(in_proj_bias, 3, 0)
        q, k, v = _in_projection(q_in, k_in, v_in, q_proj_weight, k_proj_weight, v_proj_weight, b_q, b_k, b_v)

    if mask is not None:
        if mask.ndim == 2:
            if tuple(mask.shape) != (tgt_len, src_len):
                raise RuntimeError(f"{op}: the 2-D attn_mask has shape {shape_str(mask.shape)}, but should be "
                                   f"{(tgt_len, src_len)}.")
            mask = _C.unsqueeze(mask, 0)
        elif mask.ndim == 3:
            if tuple(mask.shape) != (bsz * num_heads, tgt_len, src_len):
                raise RuntimeError(f"{op}: the 3-D attn_mask has shape {shape_str(mask.shape)}, but should be "
                                   f"{(bsz * num_heads, tgt_len, src_len)}.")
        else:
            raise RuntimeError(f"{op}: attn_mask of {mask.ndim} dimensions is not supported.")

    if bias_k is not None and bias_v is not None:
        if static_k is not None:
            raise AssertionError(f"{op}: bias cannot be added to static key.")
        if static_v is not None:
            raise AssertionError(f"{op}: bias cannot be added to static value.")
        k = _C.cat([k, _C.expand(_C.reshape(bias_k, (1, 1, embed_dim)), (1, bsz, embed_dim))], 0)
        v = _C.cat([v, _C.expand(_C.reshape(bias_v, (1, 1, embed_dim)), (1, bsz, embed_dim))], 0)
        if mask is not None:
            mask = _pad_last(mask)
        if kpm is not None:
            kpm = _pad_last(kpm)
    elif bias_k is not None:
        raise AssertionError(f"{op}: bias_k is set but bias_v is None.")
    elif bias_v is not None:
        raise AssertionError(f"{op}: bias_v is set but bias_k is None.")

    # heads: (L, N, E) -> (N * heads, L, head_dim)
    q = _C.transpose(_C.reshape(q, (tgt_len, bsz * num_heads, head_dim)), 0, 1)
    k = _heads(k, static_k, bsz, num_heads, head_dim, "static_k", op)
    v = _heads(v, static_v, bsz, num_heads, head_dim, "static_v", op)

    if add_zero_attn:
        zeros = _C.full((bsz * num_heads, 1, head_dim), 0.0, k.dtype)
        k = _C.cat([k, zeros], 1)
        v = _C.cat([v, zeros], 1)
        if mask is not None:
            mask = _pad_last(mask)
        if kpm is not None:
            kpm = _pad_last(kpm)
    src_len = k.shape[1]

    if kpm is not None:
        if tuple(kpm.shape) != (bsz, src_len):
            raise AssertionError(f"{op}: expected key_padding_mask of shape {(bsz, src_len)}, got "
                                 f"{shape_str(kpm.shape)}.")
        kpm = _C.reshape(_C.expand(_C.reshape(kpm, (bsz, 1, 1, src_len)), (bsz, num_heads, 1, src_len)),
                         (bsz * num_heads, 1, src_len))
        mask = kpm if mask is None else _C.add(mask, kpm)

    p = float(number(dropout_p, op, "dropout_p")) if training else 0.0

    if need_weights:
        if is_causal and mask is None:
            raise AssertionError(f"{op}: is_causal without attn_mask is not implemented for need_weights=True.")
        scores = _C.matmul(_C.mul(q, _k(math.sqrt(1.0 / head_dim), q)), _C.mT(k))
        if mask is not None:
            scores = _C.add(mask, scores)
        weights = _C.softmax(scores, -1)
        if p > 0.0:
            weights = dropout(weights, p)
        out = _C.matmul(weights, v)
        out = _C.reshape(_C.transpose(out, 0, 1), (tgt_len * bsz, embed_dim))
        out = _C.reshape(linear(out, out_proj_weight, out_proj_bias), (tgt_len, bsz, -1))
        weights = _C.reshape(weights, (bsz, num_heads, tgt_len, src_len))
        if average_attn_weights:
            weights = _C.mean(weights, (1,), False)
        if not batched:
            out, weights = _C.squeeze(out, (1,)), _C.squeeze(weights, (0,))
        return out, weights

    if mask is not None:
        if mask.shape[0] == 1 and mask.ndim == 3:
            mask = _C.unsqueeze(mask, 0)
        else:
            mask = _C.reshape(mask, (bsz, num_heads, -1, src_len))
    q = _C.reshape(q, (bsz, num_heads, tgt_len, head_dim))
    k = _C.reshape(k, (bsz, num_heads, src_len, head_dim))
    v = _C.reshape(v, (bsz, num_heads, src_len, head_dim))
    out = scaled_dot_product_attention(q, k, v, mask, p, is_causal)
    out = _C.reshape(_C.permute(out, (2, 0, 1, 3)), (bsz * tgt_len, embed_dim))
    out = _C.reshape(linear(out, out_proj_weight, out_proj_bias), (tgt_len, bsz, -1))
    if not batched:
        out = _C.squeeze(out, (1,))
    return out, None


def _heads(t, static, bsz, num_heads, head_dim, name, op):
    """(S, N, E) -> (N * heads, S, head_dim), or the given static_k / static_v, checked."""
    if static is None:
        return _C.transpose(_C.reshape(t, (t.shape[0], bsz * num_heads, head_dim)), 0, 1)
    if static.shape[0] != bsz * num_heads:
        raise AssertionError(f"{op}: expected {name}.size(0) of {bsz * num_heads}, got {static.shape[0]}.")
    if static.shape[2] != head_dim:
        raise AssertionError(f"{op}: expected {name}.size(2) of {head_dim}, got {static.shape[2]}.")
    return static
