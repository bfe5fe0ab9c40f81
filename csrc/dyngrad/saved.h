// saved.h: what each primitive op's node saves for its backward formula, by name.
//
// Note [Named saved state]: every line of ops.def names one of the structs below, declared once with
// DG_SAVED(Name, (type, field), ...). That one declaration gives
//   - Name::Stored: the fields as the node holds them (a tensor as a SavedTensor, Note [Saved tensor versions]).
//     The forward fills them by name: node.saved.a.save(a, false); node.saved.dims = dims;
//   - Name: the view a formula reads. s.a is the unpacked Tensor (version checked, and ERR_BACKWARD_TWICE once
//     released: Note [Releasing the graph]); s.dims is a const reference to the stored value, not a copy.
//   - Stored::each(visit): visit(name, field) for every field in declared order. Release, saved_tensors() (the
//     cycle collector, saved_tensors_info) and _saved_fields() are written once over it in SavedOpNode, so a
//     field added to a struct is released, traced and listed with no other code.
// A formula whose parameter is not the struct its op names in ops.def does not compile (derivatives.cpp).
// Field names are the reference engine's (python/dyngrad/reference/ops.py), so both engines' formulas read
// alike; tests/test_parity.py checks that the two declare the same names for every op.
#pragma once
#include <optional>
#include <type_traits>

#include "node.h"

namespace dyngrad {

// How a formula sees a stored field: a tensor unpacked and owned (unpacking an output makes a new alias), any
// other field by const reference (no copy of a list on every backward call).
template <class T>
struct SavedView {
  using type = const T&;
};
template <>
struct SavedView<SavedTensor> {
  using type = Tensor;
};
template <class T>
using saved_view_t = typename SavedView<T>::type;

inline Tensor unpack_field(const SavedTensor& s, Node& owner) { return s.unpack(owner); }
template <class T>
const T& unpack_field(const T& value, Node&) { return value; }

// DG_SAVED_EACH(M, (T1, f1), (T2, f2), ...) is M(T1, f1) M(T2, f2) ...: up to 10 fields.
#define DG_SAVED_EXPAND(x) x
#define DG_SAVED_APPLY(M, field) DG_SAVED_EXPAND(M field)
#define DG_SAVED_EACH_1(M, f) DG_SAVED_APPLY(M, f)
#define DG_SAVED_EACH_2(M, f, ...) DG_SAVED_APPLY(M, f) DG_SAVED_EXPAND(DG_SAVED_EACH_1(M, __VA_ARGS__))
#define DG_SAVED_EACH_3(M, f, ...) DG_SAVED_APPLY(M, f) DG_SAVED_EXPAND(DG_SAVED_EACH_2(M, __VA_ARGS__))
#define DG_SAVED_EACH_4(M, f, ...) DG_SAVED_APPLY(M, f) DG_SAVED_EXPAND(DG_SAVED_EACH_3(M, __VA_ARGS__))
#define DG_SAVED_EACH_5(M, f, ...) DG_SAVED_APPLY(M, f) DG_SAVED_EXPAND(DG_SAVED_EACH_4(M, __VA_ARGS__))
#define DG_SAVED_EACH_6(M, f, ...) DG_SAVED_APPLY(M, f) DG_SAVED_EXPAND(DG_SAVED_EACH_5(M, __VA_ARGS__))
#define DG_SAVED_EACH_7(M, f, ...) DG_SAVED_APPLY(M, f) DG_SAVED_EXPAND(DG_SAVED_EACH_6(M, __VA_ARGS__))
#define DG_SAVED_EACH_8(M, f, ...) DG_SAVED_APPLY(M, f) DG_SAVED_EXPAND(DG_SAVED_EACH_7(M, __VA_ARGS__))
#define DG_SAVED_EACH_9(M, f, ...) DG_SAVED_APPLY(M, f) DG_SAVED_EXPAND(DG_SAVED_EACH_8(M, __VA_ARGS__))
#define DG_SAVED_EACH_10(M, f, ...) DG_SAVED_APPLY(M, f) DG_SAVED_EXPAND(DG_SAVED_EACH_9(M, __VA_ARGS__))
#define DG_SAVED_PICK(_1, _2, _3, _4, _5, _6, _7, _8, _9, _10, N, ...) N
#define DG_SAVED_EACH(M, ...)                                                                                     \
  DG_SAVED_EXPAND(DG_SAVED_PICK(__VA_ARGS__, DG_SAVED_EACH_10, DG_SAVED_EACH_9, DG_SAVED_EACH_8, DG_SAVED_EACH_7, DG_SAVED_EACH_6, \
                                DG_SAVED_EACH_5, DG_SAVED_EACH_4, DG_SAVED_EACH_3, DG_SAVED_EACH_2,              \
                                DG_SAVED_EACH_1)(M, __VA_ARGS__))

#define DG_SAVED_VIEW_FIELD(T, f) saved_view_t<T> f;
#define DG_SAVED_STORED_FIELD(T, f) T f{};
#define DG_SAVED_VISIT(T, f) visit(#f, f);
#define DG_SAVED_UNPACK(T, f) unpack_field(f, owner),

// The fields are unpacked in declared order, so a formula meets the same error as the reference engine does.
#define DG_SAVED(Name, ...)                                                                          \
  struct Name {                                                                                      \
    DG_SAVED_EACH(DG_SAVED_VIEW_FIELD, __VA_ARGS__)                                                  \
    struct Stored {                                                                                  \
      DG_SAVED_EACH(DG_SAVED_STORED_FIELD, __VA_ARGS__)                                              \
      template <class V>                                                                             \
      void each(V&& visit) {                                                                         \
        DG_SAVED_EACH(DG_SAVED_VISIT, __VA_ARGS__)                                                   \
      }                                                                                              \
      template <class V>                                                                             \
      void each(V&& visit) const {                                                                   \
        DG_SAVED_EACH(DG_SAVED_VISIT, __VA_ARGS__)                                                   \
      }                                                                                              \
      Name unpack(Node& owner) const { return Name{DG_SAVED_EACH(DG_SAVED_UNPACK, __VA_ARGS__)}; }  \
    };                                                                                               \
  }

// ---- the structs, in the order ops.def first names them ----

// add, sub, neg, sign, to_dtype, clone, reshape, expand: the input shapes and dtypes (Node::input_meta) suffice.
struct SavesNothing {
  struct Stored {
    template <class V>
    void each(V&&) const {}
    template <class V>
    void each(V&&) {}
    SavesNothing unpack(Node&) const { return {}; }
  };
};
// mul, div, maximum, minimum, atan2, remainder, fmod. mul and div save an input only when the other input needs grad.
DG_SAVED(SavesAB, (SavedTensor, a), (SavedTensor, b));
// matmul: as SavesAB, plus whether each operand is a transposed view (Note [Gradient in the operand's layout]),
// known even when that operand itself is not saved (as torch's mm saves its operands' strides)
DG_SAVED(SavesMatmul, (SavedTensor, a), (SavedTensor, b), (bool, a_transposed), (bool, b_transposed));
// pow: out only when the exponent needs grad
DG_SAVED(SavesABOut, (SavedTensor, a), (SavedTensor, b), (SavedTensor, out));
DG_SAVED(SavesPowScalar, (SavedTensor, a), (double, exponent));
DG_SAVED(SavesCond, (SavedTensor, cond));  // where: the bool condition
DG_SAVED(SavesClamp, (SavedTensor, a), (std::optional<double>, lo), (std::optional<double>, hi));
// exp, sqrt, rsqrt, tanh, sigmoid, relu, expm1, tan: the output (Note [Saving an output])
DG_SAVED(SavesOut, (SavedTensor, out));
DG_SAVED(SavesA, (SavedTensor, a));  // log, abs, sin, cos, gelu, erf, log1p, log2, log10, asin, acos, atan
DG_SAVED(SavesLeakyRelu, (SavedTensor, a), (double, slope));
DG_SAVED(SavesSoftplus, (SavedTensor, a), (double, beta), (double, threshold));
// sum, mean: the reduced dims (sorted, wrapped) and keepdim
DG_SAVED(SavesReduction, (Dims, dims), (bool, keepdim));
DG_SAVED(SavesReductionAOut, (SavedTensor, a), (SavedTensor, out), (Dims, dims), (bool, keepdim));  // amax...
DG_SAVED(SavesPermute, (Dims, dims));                                     // the wrapped permutation
DG_SAVED(SavesSlice, (int64_t, dim), (int64_t, start), (int64_t, step));  // slice, slice_scatter
DG_SAVED(SavesCat, (int64_t, dim), (Dims, sizes));                        // sizes: each input's length along dim
DG_SAVED(SavesIndex, (SavedTensor, index), (int64_t, dim));               // index_select, index_add, gather...
DG_SAVED(SavesPositions, (SavedTensor, positions));                       // take, put, put_add: flat positions
DG_SAVED(SavesScan, (int64_t, dim), (bool, reverse));                     // cumsum
// cumprod, logcumsumexp: the input, the output, the dim and the direction
DG_SAVED(SavesScanAOut, (SavedTensor, a), (SavedTensor, out), (int64_t, dim), (bool, reverse));
// linear_recurrence: the coefficients c and the output (b enters linearly)
DG_SAVED(SavesRecurrence, (SavedTensor, c), (SavedTensor, out), (int64_t, dim), (bool, reverse));
DG_SAVED(SavesSoftmax, (SavedTensor, out), (int64_t, dim));               // softmax, log_softmax
// reduction: 0 none, 1 mean (over the rows not ignored), 2 sum
DG_SAVED(SavesCrossEntropy, (SavedTensor, logits), (SavedTensor, target), (int64_t, reduction),
         (int64_t, ignore_index), (double, label_smoothing));
DG_SAVED(SavesWindow, (Dims, window));  // unfold, fold: (kh, kw, sh, sw, ph, pw, dh, dw)
// layer_norm: the input, the weight (when given), how many trailing dims are normalised, and eps
DG_SAVED(SavesLayerNorm, (SavedTensor, a), (SavedTensor, weight), (int64_t, ndims), (double, eps));
// rnn_layer: its inputs, its output, the gate activations ws (none for RNN), the cell kind and the direction
DG_SAVED(SavesRnnLayer, (SavedTensor, gi), (SavedTensor, h0), (SavedTensor, c0), (SavedTensor, w_hh),
         (SavedTensor, b_hh), (SavedTensor, out), (SavedTensor, ws), (int64_t, mode), (bool, reverse));
// attention: q, k, v, the additive mask (bool masks made additive; not differentiated), the output and each query
// row's logsumexp (the backward recomputes the weights from them), causal, scale, and the dropout p and seed
DG_SAVED(SavesAttention, (SavedTensor, q), (SavedTensor, k), (SavedTensor, v), (SavedTensor, mask),
         (SavedTensor, out), (SavedTensor, lse), (bool, is_causal), (double, scale), (double, dropout_p),
         (int64_t, seed));

// the fused derivatives of ops.def (Note [Fused derivatives as primitives] in derivatives.cpp): what their own
// formulas read. tanh_backward, sigmoid_backward, gelu_backward: grad (when x needs a gradient) and x
DG_SAVED(SavesGradX, (SavedTensor, grad), (SavedTensor, x));
DG_SAVED(SavesX, (SavedTensor, x));  // threshold_backward: its gradient with respect to x is zero
DG_SAVED(SavesSoftmaxBackward, (SavedTensor, grad), (SavedTensor, out), (int64_t, dim));  // and log_softmax's
DG_SAVED(SavesCrossEntropyBackward, (SavedTensor, grad), (SavedTensor, logits), (SavedTensor, target),
         (int64_t, reduction), (int64_t, ignore_index), (double, label_smoothing));
DG_SAVED(SavesLayerNormBackward, (SavedTensor, grad), (SavedTensor, a), (SavedTensor, weight), (int64_t, ndims),
         (double, eps));
DG_SAVED(SavesRnnLayerBackward, (SavedTensor, grad), (SavedTensor, gi), (SavedTensor, h0), (SavedTensor, c0),
         (SavedTensor, w_hh), (SavedTensor, b_hh), (SavedTensor, out), (int64_t, mode), (bool, reverse));
DG_SAVED(SavesAttentionBackward, (SavedTensor, grad), (SavedTensor, q), (SavedTensor, k), (SavedTensor, v),
         (SavedTensor, mask), (bool, is_causal), (double, scale), (double, dropout_p), (int64_t, seed));

// ---- the node ----

inline void release_field(SavedTensor& s) { s.release(); }
template <class T>
void release_field(T&) {}  // non-tensor fields stay readable after release, as torch's grad_fn._saved_dim

inline SavedValue saved_value(bool v) { return v; }
inline SavedValue saved_value(int64_t v) { return v; }
inline SavedValue saved_value(double v) { return v; }
inline SavedValue saved_value(const std::optional<double>& v) { return v ? SavedValue(*v) : SavedValue(); }
inline SavedValue saved_value(const Dims& v) { return v; }

// The node of a primitive op whose ops.def line names S. Everything generic about saved state is here, over
// S::Stored::each; no op has code of its own.
template <class S>
struct SavedOpNode final : OpNode {
  typename S::Stored saved;

  // Use make_op_node<K>(), which pairs K with the struct its ops.def line names (derivatives.cpp relies on it).
  explicit SavedOpNode(OpKind k) : OpNode(k) {}

  void release_saved() override {
    released = true;
    saved.each([](const char*, auto& field) { release_field(field); });
  }
  std::vector<const SavedTensor*> saved_tensors() const override {
    std::vector<const SavedTensor*> out;
    saved.each([&](const char*, const auto& field) {
      if constexpr (std::is_same_v<std::decay_t<decltype(field)>, SavedTensor>)
        if (field.was_saved) out.push_back(&field);
    });
    return out;
  }
  std::vector<SavedField> saved_fields() const override {
    std::vector<SavedField> out;
    saved.each([&](const char* name, const auto& field) {
      if constexpr (std::is_same_v<std::decay_t<decltype(field)>, SavedTensor>)
        out.push_back({name, &field, {}});
      else
        out.push_back({name, nullptr, saved_value(field)});
    });
    return out;
  }
};

// OpKind -> the saved struct its ops.def line names, and the node type that holds it.
template <OpKind K>
struct OpSaves;
#define DG_OP(name, display, saves, signature, hot) \
  template <>                                       \
  struct OpSaves<OpKind::name> {                    \
    using type = saves;                             \
  };
#include "ops.def"
template <OpKind K>
using OpNodeOf = SavedOpNode<typename OpSaves<K>::type>;

template <OpKind K>
std::shared_ptr<OpNodeOf<K>> make_op_node() {
  return make_pooled<OpNodeOf<K>>(K);
}

}  // namespace dyngrad
