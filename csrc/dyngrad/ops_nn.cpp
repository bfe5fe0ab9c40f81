// ops_nn.cpp: neural-net ops. softmax, log_softmax, cross_entropy and im2col/col2im are primitives;
// conv2d, pooling, linear, layer_norm, losses and dropout are composed from primitives.
#include <cmath>
#include <limits>

#include "kernels/conv.h"
#include "ops_common.h"
#include "random.h"

namespace dyngrad {

// out = exp(a) / sum(exp(a), dim)
Tensor softmax(const Tensor& a_in, int64_t dim) {
  if (is_half(a_in->dtype))  // Note [Half types]: computed in float32 (differentiably), rounded back
    return to_dtype(softmax(to_dtype(a_in, DType::Float32), dim), a_in->dtype);
  check_not_complex(a_in, "softmax");
  Tensor a = is_floating(a_in->dtype) ? a_in : to_dtype(a_in, DType::Float32);
  int64_t d = a->ndim() ? wrap_dim(dim, a->ndim(), "softmax") : (wrap_dim(dim, 0, "softmax"), 0);
  Tensor out = a->ndim() ? softmax_kernel(a, d, false) : full({}, 1.0, a->dtype);
  if (any_requires_grad({&a})) {
    auto& node = record<OpKind::softmax>(out, {&a});
    node.saved.out.save(out, true);
    node.saved.dim = d;
  }
  if (forward_ad::active()) forward_tangents<OpKind::softmax>(out, {&a}, SavesSoftmax{out, d});
  return out;
}

// out = a - logsumexp(a, dim)
Tensor log_softmax(const Tensor& a_in, int64_t dim) {
  if (is_half(a_in->dtype))  // Note [Half types]
    return to_dtype(log_softmax(to_dtype(a_in, DType::Float32), dim), a_in->dtype);
  check_not_complex(a_in, "log_softmax");
  Tensor a = is_floating(a_in->dtype) ? a_in : to_dtype(a_in, DType::Float32);
  int64_t d = a->ndim() ? wrap_dim(dim, a->ndim(), "log_softmax") : (wrap_dim(dim, 0, "log_softmax"), 0);
  Tensor out = a->ndim() ? softmax_kernel(a, d, true) : zeros({}, a->dtype);
  if (any_requires_grad({&a})) {
    auto& node = record<OpKind::log_softmax>(out, {&a});
    node.saved.out.save(out, true);
    node.saved.dim = d;
  }
  if (forward_ad::active()) forward_tangents<OpKind::log_softmax>(out, {&a}, SavesSoftmax{out, d});
  return out;
}

// What cross_entropy and cross_entropy_backward save alike.
template <class Stored>
static void save_cross_entropy(Stored& s, const Tensor& logits, const Tensor& target, int64_t reduction,
                               int64_t ignore_index, double label_smoothing) {
  s.logits.save(logits, false);
  s.target.save(target, false);
  s.reduction = reduction;
  s.ignore_index = ignore_index;
  s.label_smoothing = label_smoothing;
}

// loss_i = -(1-ls) * logp[i, t_i] - ls/C * sum_c logp[i, c], skipping t_i == ignore_index; reduced by mean
// (over the non-ignored rows), sum, or none.
Tensor cross_entropy(const Tensor& logits, const Tensor& target, int64_t reduction, int64_t ignore_index,
                     double label_smoothing) {
  check_float(logits, "cross_entropy");
  DG_CHECK(logits->ndim() == 1 || logits->ndim() == 2, RuntimeError,
           "cross_entropy: expected logits of shape (C,) or (N, C), got ", shape_str(logits->shape), ".");
  DG_CHECK(target->dtype == DType::Int64, RuntimeError, "cross_entropy: expected int64 class indices as target, got ",
           dtype_name(target->dtype), ".");
  const bool batched = logits->ndim() == 2;
  const int64_t N = batched ? logits->shape[0] : 1, C = logits->shape[batched ? 1 : 0];
  DG_CHECK(target->ndim() == (batched ? 1 : 0) && (!batched || target->shape[0] == N), ValueError,  // as torch
           "cross_entropy: target of shape ", shape_str(target->shape), " does not match logits of shape ",
           shape_str(logits->shape), " (expected ", batched ? shape_str(Shape{N}) : std::string("()"), ").");
  DG_CHECK(reduction >= 0 && reduction <= 2, ValueError, "cross_entropy: unknown reduction.");
  Tensor t = contiguous_data(target);
  const int64_t* tp = t->data<int64_t>();
  for (int64_t i = 0; i < N; ++i)
    DG_CHECK(tp[i] == ignore_index || (tp[i] >= 0 && tp[i] < C), IndexError, "cross_entropy: target ", tp[i],
             " is out of range for ", C, " classes.");
  Tensor rows = batched ? logits : reshape(alias(logits), {1, C});
  int64_t count = 0;
  Tensor losses;
  if (label_smoothing == 0 && N > 0 && C > 0) {  // Note [Cross entropy without the log_softmax] (kernels/reduce.cpp)
    losses = log_softmax_at_kernel(contiguous_data(rows), tp, ignore_index);
    DG_DISPATCH_FLOAT(losses->dtype, T, {
      T* l = losses->data<T>();
      for (int64_t i = 0; i < N; ++i) {
        if (tp[i] == ignore_index) continue;
        l[i] = (T)(-(double)l[i]);  // cross_entropy_kernel's -(1 - 0) * logp, exactly
        ++count;
      }
    });
  } else {
    losses = cross_entropy_kernel(softmax_kernel(rows, 1, true), t, ignore_index, label_smoothing, count);
  }
  Tensor out;
  if (reduction == 0) {
    out = batched ? losses : reshape(losses, {});
  } else {
    out = reduce_kernel(ReduceKind::Sum, losses, {0}, false);
    if (reduction == 1) {
      DG_DISPATCH_FLOAT(out->dtype, T, *out->data<T>() /= (T)count);
    }
  }
  if (any_requires_grad({&logits}))
    save_cross_entropy(record<OpKind::cross_entropy>(out, {&logits, nullptr}).saved, logits, t, reduction,
                       ignore_index, label_smoothing);
  if (forward_ad::active()) forward_tangents<OpKind::cross_entropy>(out, {&logits, nullptr}, SavesCrossEntropy{logits, t, reduction, ignore_index, label_smoothing});
  return out;
}

// The gradient of cross_entropy with respect to its logits (Note [Fused derivatives as primitives] in
// derivatives.cpp): ((softmax(logits) - q) * keep) * scale per row, one pass (kernels/loss.cpp).
Tensor cross_entropy_backward(const Tensor& grad, const Tensor& logits, const Tensor& target, int64_t reduction,
                              int64_t ignore_index, double label_smoothing) {
  const char* op = "cross_entropy_backward";
  check_float(logits, op);
  DG_CHECK(logits->ndim() == 1 || logits->ndim() == 2, RuntimeError, op,
           ": expected logits of shape (C,) or (N, C), got ", shape_str(logits->shape), ".");
  DG_CHECK(reduction >= 0 && reduction <= 2, ValueError, op, ": unknown reduction ", reduction, ".");
  const bool batched = logits->ndim() == 2;
  const int64_t N = batched ? logits->shape[0] : 1, C = logits->shape[batched ? 1 : 0];
  DG_CHECK(target->dtype == DType::Int64 && target->ndim() == (batched ? 1 : 0) && target->numel == N,
           RuntimeError, op, ": expected int64 targets of shape ", batched ? shape_str(Shape{N}) : std::string("()"),
           ", got ", dtype_name(target->dtype), " ", shape_str(target->shape), ".");
  const Shape grad_shape = reduction == 0 ? target->shape : Shape{};
  DG_CHECK(grad->shape == grad_shape && is_floating(grad->dtype), RuntimeError, op,
           ": expected a floating-point gradient of shape ", shape_str(grad_shape), ", got ", dtype_name(grad->dtype),
           " ", shape_str(grad->shape), ".");
  const DType dt = promote(grad->dtype, logits->dtype);
  DG_CHECK(dt == DType::Float32 || dt == DType::Float64, TypeError, op, ": expected float32 or float64 tensors, got ",
           dtype_name(dt), ".");
  auto in_dt = [&](const Tensor& t) { return t->dtype == dt ? contiguous_data(t) : contiguous_copy(t, dt); };
  Tensor t = contiguous_data(target);
  const int64_t* tp = t->data<int64_t>();
  for (int64_t i = 0; i < N; ++i)
    DG_CHECK(tp[i] == ignore_index || (tp[i] >= 0 && tp[i] < C), IndexError, op, ": target ", tp[i],
             " is out of range for ", C, " classes.");
  Tensor x = in_dt(logits);
  Tensor dx = cross_entropy_backward_kernel(in_dt(grad), batched ? x : reshape(x, {1, C}), t, reduction, ignore_index,
                                            label_smoothing);
  if (!batched) dx = reshape(dx, {C});
  if (any_requires_grad({&grad, &logits})) {
    auto& node = record<OpKind::cross_entropy_backward>(dx, {&grad, &logits, nullptr});
    if (node.needs_input_grad(1)) node.saved.grad.save(grad, false);
    save_cross_entropy(node.saved, logits, t, reduction, ignore_index, label_smoothing);
  }
  if (forward_ad::active()) forward_tangents<OpKind::cross_entropy_backward>(dx, {&grad, &logits, nullptr}, SavesCrossEntropyBackward{grad, logits, t, reduction, ignore_index, label_smoothing});
  return dx;
}

// The gradients of softmax and log_softmax given their output (Note [Fused derivatives as primitives] in
// derivatives.cpp), one pass over each row (kernels/reduce.cpp).
template <OpKind K>
static Tensor softmax_backward_op(const Tensor& grad, const Tensor& out, int64_t dim, bool log, const char* op) {
  const DType dt = promote(grad->dtype, out->dtype);  // (a float64 gradient of a float32 output: in float64)
  DG_CHECK(grad->shape == out->shape && is_floating(dt), RuntimeError, op,
           ": expected a gradient and an output of one shape and a floating dtype, got ", dtype_name(grad->dtype),
           " ", shape_str(grad->shape), " and ", dtype_name(out->dtype), " ", shape_str(out->shape), ".");
  const int64_t d = out->ndim() ? wrap_dim(dim, out->ndim(), op) : (wrap_dim(dim, 0, op), 0);
  const bool half = is_half(dt);  // Note [Half types]: computed in float32, rounded once
  const DType compute = half ? DType::Float32 : dt;
  auto wide = [&](const Tensor& t) { return t->dtype == compute ? t : contiguous_copy(t, compute); };
  Tensor r;
  if (out->ndim() == 0) {
    r = softmax_backward_kernel(reshape(alias(wide(grad)), {1}), reshape(alias(wide(out)), {1}), 0, log);
    r = reshape(r, {});
  } else {
    r = softmax_backward_kernel(wide(grad), wide(out), d, log);
  }
  if (half) r = contiguous_copy(r, dt);
  if (any_requires_grad({&grad, &out})) {
    auto& node = record<K>(r, {&grad, &out});
    if (node.needs_input_grad(1)) node.saved.grad.save(grad, false);
    node.saved.out.save(out, false);
    node.saved.dim = d;
  }
  if (forward_ad::active()) forward_tangents<K>(r, {&grad, &out}, SavesSoftmaxBackward{grad, out, d});
  return r;
}
Tensor softmax_backward(const Tensor& grad, const Tensor& out, int64_t dim) {
  return softmax_backward_op<OpKind::softmax_backward>(grad, out, dim, false, "softmax_backward");
}
Tensor log_softmax_backward(const Tensor& grad, const Tensor& out, int64_t dim) {
  return softmax_backward_op<OpKind::log_softmax_backward>(grad, out, dim, true, "log_softmax_backward");
}

static void check_image(const Tensor& x, const char* op) {
  DG_CHECK(x->ndim() == 4, RuntimeError, op, ": expected a 4-D input (N, C, H, W), got shape ", shape_str(x->shape), ".");
  check_float(x, op);
}

// Note [Window geometry]: kernel, stride, padding and dilation come from the user, so the sizes they imply are
// computed with overflow-checked arithmetic before anything is allocated: a padding of 2**61 once overflowed int64
// into a small output that im2col then wrote far past (SIGSEGV). A dilated kernel spans ekh = dh*(kh-1) + 1 rows;
// the output is (H + 2*ph - ekh) / sh + 1 rows (likewise columns); the unfolded input that conv2d and pooling work
// on has N * C*kh*kw * OH*OW elements.
static void check_window(const Shape& xs, int64_t kh, int64_t kw, int64_t sh, int64_t sw, int64_t ph, int64_t pw,
                         const char* op, int64_t dh = 1, int64_t dw = 1) {
  DG_CHECK(kh > 0 && kw > 0 && sh > 0 && sw > 0 && ph >= 0 && pw >= 0 && dh > 0 && dw > 0, RuntimeError, op,
           ": kernel size, stride and dilation must be positive and padding non-negative, got kernel (", kh, ", ",
           kw, "), stride (", sh, ", ", sw, "), padding (", ph, ", ", pw, "), dilation (", dh, ", ", dw, ").");
  auto padded = [&](int64_t size, int64_t pad) {
    int64_t twice = 0, out = 0;
    DG_CHECK(!__builtin_mul_overflow(pad, 2, &twice) && !__builtin_add_overflow(size, twice, &out), RuntimeError,
             op, ": padding (", ph, ", ", pw, ") is too large: the padded input of shape ", shape_str(xs),
             " would have more rows or columns than fit in 64 bits.");
    return out;
  };
  auto span = [&](int64_t k, int64_t d) {
    int64_t out = 0;
    DG_CHECK(!__builtin_mul_overflow(d, k - 1, &out) && !__builtin_add_overflow(out, 1, &out), RuntimeError, op,
             ": dilation (", dh, ", ", dw, ") with kernel (", kh, ", ", kw, ") spans more than fits in 64 bits.");
    return out;
  };
  const int64_t Hp = padded(xs[2], ph), Wp = padded(xs[3], pw), ekh = span(kh, dh), ekw = span(kw, dw);
  DG_CHECK(Hp >= ekh && Wp >= ekw, RuntimeError, op, ": kernel (", kh, ", ", kw, ") with dilation (", dh, ", ", dw,
           ") is larger than the padded input of shape ", shape_str(xs), " with padding (", ph, ", ", pw, ").");
  const int64_t OH = (Hp - ekh) / sh + 1, OW = (Wp - ekw) / sw + 1;
  int64_t rows = 0, positions = 0, numel = 0;  // C*kh*kw, OH*OW, and N times both (each a size in its own right)
  bool fits = !__builtin_mul_overflow(xs[1], kh, &rows) && !__builtin_mul_overflow(rows, kw, &rows) &&
              !__builtin_mul_overflow(OH, OW, &positions) && !__builtin_mul_overflow(xs[0], rows, &numel) &&
              !__builtin_mul_overflow(numel, positions, &numel);
  DG_CHECK(fits, RuntimeError, op, ": kernel (", kh, ", ", kw, "), stride (", sh, ", ", sw, ") and padding (", ph,
           ", ", pw, ") on an input of shape ", shape_str(xs), " give ", OH, " x ", OW,
           " windows: the unfolded input (N * C*kh*kw * OH*OW elements) would have more elements than fit in 64 bits.");
}

static void check_window(const Tensor& x, int64_t kh, int64_t kw, int64_t sh, int64_t sw, int64_t ph, int64_t pw,
                         const char* op, int64_t dh = 1, int64_t dw = 1) {
  check_window(x->shape, kh, kw, sh, sw, ph, pw, op, dh, dw);
}

static int64_t window_out(int64_t size, int64_t k, int64_t s, int64_t p, int64_t d) {
  return (size + 2 * p - d * (k - 1) - 1) / s + 1;
}

// out = im2col(x)
Tensor unfold(const Tensor& x, int64_t kh, int64_t kw, int64_t sh, int64_t sw, int64_t ph, int64_t pw, int64_t dh,
              int64_t dw) {
  check_image(x, "unfold");
  check_window(x, kh, kw, sh, sw, ph, pw, "unfold", dh, dw);
  Tensor out = im2col_kernel(x, kh, kw, sh, sw, ph, pw, dh, dw);
  if (any_requires_grad({&x})) record<OpKind::unfold>(out, {&x}).saved.window = {kh, kw, sh, sw, ph, pw, dh, dw};
  if (forward_ad::active()) forward_tangents<OpKind::unfold>(out, {&x}, SavesWindow{Dims{kh, kw, sh, sw, ph, pw, dh, dw}});
  return out;
}

// out = col2im(cols) (sums overlapping windows). cols must be exactly what unfold makes of an input of
// input_shape: the kernel trusts its shape.
Tensor fold(const Tensor& cols, const Shape& input_shape, int64_t kh, int64_t kw, int64_t sh, int64_t sw, int64_t ph,
            int64_t pw, int64_t dh, int64_t dw) {
  DG_CHECK(input_shape.size() == 4 && input_shape[0] >= 0 && input_shape[1] >= 0 && input_shape[2] >= 0 &&
           input_shape[3] >= 0, RuntimeError, "fold: expected a 4-D output shape (N, C, H, W), got ",
           shape_str(input_shape), ".");
  check_float(cols, "fold");
  check_window(input_shape, kh, kw, sh, sw, ph, pw, "fold", dh, dw);
  const int64_t L = window_out(input_shape[2], kh, sh, ph, dh) * window_out(input_shape[3], kw, sw, pw, dw);
  DG_CHECK(cols->ndim() == 3 && cols->shape[0] == input_shape[0] && cols->shape[1] == input_shape[1] * kh * kw &&
           cols->shape[2] == L, RuntimeError, "fold: expected columns of shape (", input_shape[0], ", ",
           input_shape[1] * kh * kw, ", ", L, ") for an output of shape ", shape_str(input_shape), ", got ",
           shape_str(cols->shape), ".");
  Tensor out = col2im_kernel(cols, input_shape, kh, kw, sh, sw, ph, pw, dh, dw);
  if (any_requires_grad({&cols}))
    record<OpKind::fold>(out, {&cols}).saved.window = {kh, kw, sh, sw, ph, pw, dh, dw};
  if (forward_ad::active()) forward_tangents<OpKind::fold>(out, {&cols}, SavesWindow{Dims{kh, kw, sh, sw, ph, pw, dh, dw}});
  return out;
}

// unfold's node over columns in conv2d's layout (Note [Columns layout] in kernels/conv.cpp): the same values as
// unfold(x), in (C*kh*kw, N, L) memory.
static Tensor unfold_batch_inner(const Tensor& x, int64_t kh, int64_t kw, int64_t sh, int64_t sw, int64_t ph,
                                 int64_t pw, int64_t dh, int64_t dw) {
  Tensor out = im2col_kernel(x, kh, kw, sh, sw, ph, pw, dh, dw, true);
  if (any_requires_grad({&x})) record<OpKind::unfold>(out, {&x}).saved.window = {kh, kw, sh, sw, ph, pw, dh, dw};
  if (forward_ad::active()) forward_tangents<OpKind::unfold>(out, {&x}, SavesWindow{Dims{kh, kw, sh, sw, ph, pw, dh, dw}});
  return out;
}

// conv2d = weight (O, C/G*kh*kw) @ im2col(x) (N, C*kh*kw, L), reshaped to (N, O, OH, OW). With G groups the
// columns split into G blocks of C/G*kh*kw rows (unfold orders rows by channel first) and the weight into G blocks
// of O/G filters: one batched product (G, O/G, K) @ (N, G, K, L) -> (N, G, O/G, L), which is (N, O, L).
// Note [conv2d as one product]: with at most 8 filters per group (LeNet's first layer, 6), the columns are laid
// out (C*kh*kw, N, L) instead (Note [Columns layout] in kernels/conv.cpp) and the whole batch is one product per
// group, (G, O/G, K) @ (G, K, N*L): the own kernel reads the columns in place for a single block of 8 rows, the
// weight's gradient is one product over k = N*L (not N products of (O, K) and a sum over them) and the columns'
// gradient one product that col2im reads in place. The output (O, N, L) is put back to (N, O, L) by the bias add
// (or a copy without a bias). LeNet's first layer, forward + backward, 1.58 -> 1.44 ms of CPU time. With more
// filters the own kernel packs the columns for its row blocks (a pass over all of them) where N products of the
// second layer's size (16 x 150 @ 150 x 100) run on OpenBLAS's small-matrix kernels unpacked: there one product
// was 5-20% slower forward + backward (Xeon family 6 model 167, 2 cores, KVM, load 11-13), so those stay N.
Tensor conv2d(const Tensor& x, const Tensor& w, const Tensor* bias, int64_t sh, int64_t sw, int64_t ph, int64_t pw,
              int64_t dh, int64_t dw, int64_t groups) {
  check_image(x, "conv2d");
  DG_CHECK(w->ndim() == 4, RuntimeError, "conv2d: expected a 4-D weight (O, C, kh, kw), got shape ",
           shape_str(w->shape), ".");
  DG_CHECK(groups > 0, RuntimeError, "conv2d: groups must be positive, got ", groups, ".");
  DG_CHECK(w->shape[0] % groups == 0, RuntimeError, "conv2d: the weight's ", w->shape[0],
           " output channels are not divisible by groups=", groups, ".");
  DG_CHECK(w->shape[1] * groups == x->shape[1], RuntimeError, "conv2d: input has ", x->shape[1],
           " channels but the weight expects ", w->shape[1] * groups, " (input ", shape_str(x->shape), ", weight ",
           shape_str(w->shape), ", groups=", groups, ").");
  const int64_t N = x->shape[0], O = w->shape[0], kh = w->shape[2], kw = w->shape[3];
  check_window(x, kh, kw, sh, sw, ph, pw, "conv2d", dh, dw);
  if (bias)
    DG_CHECK((*bias)->ndim() == 1 && (*bias)->shape[0] == O, RuntimeError, "conv2d: bias must have shape (", O,
             ",), got ", shape_str((*bias)->shape), ".");
  const int64_t OH = window_out(x->shape[2], kh, sh, ph, dh), OW = window_out(x->shape[3], kw, sw, pw, dw);
  const int64_t L = OH * OW;
  const int64_t K = w->shape[1] * kh * kw;  // rows of one group's columns (sizes, not -1: N or O may be 0)
  if (O / groups > 8 || N == 1) {
    Tensor cols = unfold(x, kh, kw, sh, sw, ph, pw, dh, dw);
    Tensor out = groups == 1 ? matmul(reshape(w, {O, K}), cols)  // (N, O, L)
                             : reshape(matmul(reshape(w, {groups, O / groups, K}),
                                              reshape(cols, {N, groups, K, L})), {N, O, L});
    if (bias) out = add(out, reshape(*bias, {O, 1}));
    return reshape(out, {N, O, OH, OW});
  }
  Tensor cols = unfold_batch_inner(x, kh, kw, sh, sw, ph, pw, dh, dw);  // (N, C*kh*kw, L), strides (L, N*L, 1)
  Tensor rows = permute(cols, {1, 0, 2});                                // (C*kh*kw, N, L), contiguous
  Tensor out = groups == 1 ? matmul(reshape(w, {O, K}), reshape(rows, {K, N * L}))  // (O, N*L)
                           : matmul(reshape(w, {groups, O / groups, K}), reshape(rows, {groups, K, N * L}));
  out = permute(reshape(out, {O, N, L}), {1, 0, 2});  // (N, O, L)
  out = bias ? add(out, reshape(*bias, {O, 1})) : contiguous(out);
  return reshape(out, {N, O, OH, OW});
}

static void check_pool_padding(int64_t kh, int64_t kw, int64_t ph, int64_t pw, const char* op) {
  DG_CHECK(ph <= kh / 2 && pw <= kw / 2, RuntimeError, op, ": padding should be at most half of the kernel size, got ",
           "padding (", ph, ", ", pw, ") for kernel (", kh, ", ", kw, ").");
}

static Tensor pool_windows(const Tensor& x, int64_t kh, int64_t kw, int64_t sh, int64_t sw, int64_t ph, int64_t pw,
                           const char* op) {
  check_image(x, op);
  check_window(x, kh, kw, sh, sw, ph, pw, op);
  check_pool_padding(kh, kw, ph, pw, op);
  const int64_t N = x->shape[0], C = x->shape[1];
  Tensor cols = unfold(x, kh, kw, sh, sw, ph, pw);  // (N, C*kh*kw, L)
  return reshape(cols, {N, C, kh * kw, -1});
}

static Tensor pooled_shape(const Tensor& r, const Tensor& x, int64_t kh, int64_t kw, int64_t sh, int64_t sw,
                           int64_t ph, int64_t pw) {
  const int64_t OH = (x->shape[2] + 2 * ph - kh) / sh + 1, OW = (x->shape[3] + 2 * pw - kw) / sw + 1;
  return reshape(r, {x->shape[0], x->shape[1], OH, OW});
}

// Note [Max pooling by positions] (kernels/conv.cpp): the maximum's flat position in x, then take; the gradient
// is take's (the first maximum of each window takes all of it, as in torch).
// Note [Max pooling in one pass]: the kernel also reads each window's maximum while the rows are in cache, and the
// node is take's (same saved positions, same gradient and tangent): take's own pass would gather them again and
// check every position against x's size, which the kernel's positions need not be.
Tensor max_pool2d(const Tensor& x, int64_t kh, int64_t kw, int64_t sh, int64_t sw, int64_t ph, int64_t pw) {
  check_image(x, "max_pool2d");
  check_window(x, kh, kw, sh, sw, ph, pw, "max_pool2d");
  check_pool_padding(kh, kw, ph, pw, "max_pool2d");
  Tensor out;
  Tensor positions = max_pool2d_positions_kernel(x, kh, kw, sh, sw, ph, pw, &out);
  if (any_requires_grad({&x})) record<OpKind::take>(out, {&x}).saved.positions.save(positions, false);
  if (forward_ad::active()) forward_tangents<OpKind::take>(out, {&x}, SavesPositions{positions});
  return out;
}

// avg_pool2d counts padded zeros in the average (torch's count_include_pad=True default)
Tensor avg_pool2d(const Tensor& x, int64_t kh, int64_t kw, int64_t sh, int64_t sw, int64_t ph, int64_t pw) {
  if (is_half(x->dtype))  // summed in float32 and rounded once (Note [Half types]), as torch
    return to_dtype(avg_pool2d(to_dtype(x, DType::Float32), kh, kw, sh, sw, ph, pw), x->dtype);
  Tensor win = pool_windows(x, kh, kw, sh, sw, ph, pw, "avg_pool2d");
  return pooled_shape(mean(win, {2}, false), x, kh, kw, sh, sw, ph, pw);
}

// Note [Fused layer_norm]: layer_norm is one node (torch's NativeLayerNorm) whose forward reads each row twice
// (mean, then the centred variance) and writes it once, instead of a chain of nine elementwise ops and reductions
// with nine nodes. Its backward recomputes each row's mean and 1/std from the saved input rather than saving
// them, as one kernel that also sums the weight's and bias's gradients over the rows (layer_norm_backward, below;
// kernels/reduce.cpp).
Tensor layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, int64_t ndims, double eps) {
  const char* op = "layer_norm";
  check_float(x, op);
  DG_CHECK(ndims >= 1 && ndims <= x->ndim(), RuntimeError, op, ": cannot normalise the last ", ndims,
           " dims of an input of shape ", shape_str(x->shape), ".");
  const Shape norm_shape(x->shape.end() - ndims, x->shape.end());
  for (const Tensor* t : {&weight, &bias})
    if (*t) {
      DG_CHECK((*t)->shape == norm_shape, RuntimeError, op, ": expected ", t == &weight ? "weight" : "bias",
               " of shape ", shape_str(norm_shape), ", got ", shape_str((*t)->shape), ".");
      DG_CHECK((*t)->dtype == x->dtype, RuntimeError, op, ": expected ", t == &weight ? "weight" : "bias",
               " of the input's dtype ", dtype_name(x->dtype), ", got ", dtype_name((*t)->dtype), ".");
    }
  if (is_half(x->dtype)) {  // Note [Half types]: computed in float32 (differentiably), rounded back
    auto wide = [](const Tensor& t) { return t ? to_dtype(t, DType::Float32) : t; };
    return to_dtype(layer_norm(wide(x), wide(weight), wide(bias), ndims, eps), x->dtype);
  }
  const int64_t D = shape_numel(norm_shape);
  Tensor out = empty(x->shape, x->dtype);
  if (D > 0)
    layer_norm_kernel(contiguous_data(x), weight ? contiguous_data(weight) : weight,
                      bias ? contiguous_data(bias) : bias, D, eps, out);
  if (any_requires_grad({&x, &weight, &bias})) {
    auto& node = record<OpKind::layer_norm>(out, {&x, &weight, &bias});
    node.saved.a.save(x, false);
    if (weight) node.saved.weight.save(weight, false);
    node.saved.ndims = ndims;
    node.saved.eps = eps;
  }
  if (forward_ad::active()) forward_tangents<OpKind::layer_norm>(out, {&x, &weight, &bias}, SavesLayerNorm{x, weight, ndims, eps});
  return out;
}

// The gradients of layer_norm (da, dweight, dbias; null where output_mask says no), one pass over the rows
// (kernels/reduce.cpp). Its own derivative: Note [Fused derivatives as primitives] in derivatives.cpp.
std::vector<Tensor> layer_norm_backward(const Tensor& grad, const Tensor& a_in, const Tensor& weight_in, int64_t ndims,
                                        double eps, const std::array<bool, 3>& output_mask) {
  const char* op = "layer_norm_backward";
  check_float(a_in, op);
  DG_CHECK(ndims >= 1 && ndims <= a_in->ndim(), RuntimeError, op, ": cannot normalise the last ", ndims,
           " dims of an input of shape ", shape_str(a_in->shape), ".");
  const Shape norm_shape(a_in->shape.end() - ndims, a_in->shape.end());
  DG_CHECK(grad->shape == a_in->shape && is_floating(grad->dtype), RuntimeError, op,
           ": expected a floating-point gradient of the input's shape ", shape_str(a_in->shape), ", got ",
           dtype_name(grad->dtype), " ", shape_str(grad->shape), ".");
  DG_CHECK(!weight_in || (weight_in->shape == norm_shape && weight_in->dtype == a_in->dtype), RuntimeError, op,
           ": expected a ", dtype_name(a_in->dtype), " weight of shape ", shape_str(norm_shape), ".");
  // in one dtype: the promoted one (a float64 gradient of a float32 output), float32 for the half types
  DType dt = promote(grad->dtype, a_in->dtype);
  const DType result_dt = dt;
  if (is_half(dt)) dt = DType::Float32;
  auto in_dt = [&](const Tensor& t) { return !t ? t : t->dtype == dt ? contiguous_data(t) : contiguous_copy(t, dt); };
  const Tensor g = in_dt(grad), a = in_dt(a_in), w = in_dt(weight_in);
  Tensor da = output_mask[0] ? empty(a->shape, dt) : nullptr;
  Tensor dw = weight_in && output_mask[1] ? empty(norm_shape, dt) : nullptr;
  Tensor db = output_mask[2] ? empty(norm_shape, dt) : nullptr;
  layer_norm_backward_kernel(g, a, w, shape_numel(norm_shape), eps, da, dw, db);
  std::vector<Tensor> outs{da, dw, db};
  for (Tensor& t : outs)
    if (t && t->dtype != result_dt) t = contiguous_copy(t, result_dt);
  if (any_requires_grad({&grad, &a_in, &weight_in})) {
    auto& node = record_outputs<OpKind::layer_norm_backward>(outs, {&grad, &a_in, &weight_in});
    node.saved.grad.save(grad, false);
    node.saved.a.save(a_in, false);
    if (weight_in) node.saved.weight.save(weight_in, false);
    node.saved.ndims = ndims;
    node.saved.eps = eps;
  }
  if (forward_ad::active()) forward_tangents_outputs<OpKind::layer_norm_backward>(outs, {&grad, &a_in, &weight_in}, SavesLayerNormBackward{grad, a_in, weight_in, ndims, eps});
  return outs;
}

// Note [Whole-sequence RNN layer]: nn.RNN/LSTM/GRU record one layer (one direction) of a uniform batch as ONE
// node instead of ~15 per time step. The input projection gi = x W_ih^T + b_ih of every step is one matmul before
// it (in the shared layer); the node runs the recurrence: per step one product h_prev W_hh^T (BLAS) and one fused
// pass for the gate nonlinearities and the state update (kernels/rnn.cpp). Its backward runs the recurrence in
// reverse with each cell's derivative fused into one pass and one product dgh_t W_hh per step, and gets dW_hh as
// ONE product over all steps (dgh^T h_prev, L*N rows, big enough for both cores) and db_hh as one column sum.
// The forward keeps the gate activations (ws) for that. That backward is the primitive rnn_layer_backward, whose
// own derivative is the VJP of the same recurrence in differentiable ops (Note [Derivatives of fused backwards]
// in derivatives.cpp), so double backward works as through the loop.
// The step-by-step loop of nn/rnn.py still serves what this node does not: LSTM projections, packed or ragged
// batches, half types.
static void check_rnn_inputs(const char* op, const Tensor& gi, const Tensor& h0, const Tensor& c0, const Tensor& w_hh,
                             const Tensor& b_hh, int64_t mode) {
  DG_CHECK(mode == kRnnTanh || mode == kRnnRelu || mode == kLstm || mode == kGru, ValueError, op,
           ": mode must be 0 (tanh), 1 (relu), 2 (LSTM) or 3 (GRU), got ", mode, ".");
  DG_CHECK(gi && h0 && w_hh && gi->ndim() == 3 && h0->ndim() == 2, RuntimeError, op,
           ": expected gi of shape (L, N, G*H) and h0 of shape (N, H), got ", gi ? shape_str(gi->shape) : "None",
           " and ", h0 ? shape_str(h0->shape) : "None", ".");
  const int64_t L = gi->shape[0], N = gi->shape[1], H = h0->shape[1], G = rnn_gates(mode);
  const bool lstm = mode == kLstm;
  DG_CHECK((bool)c0 == lstm, RuntimeError, op, ": c0 is given exactly for an LSTM (mode 2).");
  std::vector<std::pair<const Tensor*, Shape>> shapes = {{&gi, {L, N, G * H}}, {&h0, {N, H}}, {&w_hh, {G * H, H}}};
  if (lstm) shapes.push_back({&c0, {N, H}});
  if (b_hh) shapes.push_back({&b_hh, {G * H}});
  for (auto& [t, want] : shapes)
    DG_CHECK((*t)->shape == want && (*t)->dtype == gi->dtype, RuntimeError, op, ": expected a ", dtype_name(gi->dtype),
             " tensor of shape ", shape_str(want), ", got ", dtype_name((*t)->dtype), " ", shape_str((*t)->shape),
             ".");
  DG_CHECK(gi->dtype == DType::Float32 || gi->dtype == DType::Float64, TypeError, op,
           ": expected float32 or float64 tensors, got ", dtype_name(gi->dtype), ".");
}

Tensor rnn_layer(const Tensor& gi, const Tensor& h0, const Tensor& c0, const Tensor& w_hh, const Tensor& b_hh,
                 int64_t mode, bool reverse) {
  check_rnn_inputs("rnn_layer", gi, h0, c0, w_hh, b_hh, mode);
  const int64_t L = gi->shape[0], N = gi->shape[1], H = h0->shape[1];
  const bool lstm = mode == kLstm;
  Tensor out = empty({lstm ? 2 : 1, L, N, H}, gi->dtype);
  Tensor ws = mode == kLstm || mode == kGru ? empty({L, N, (lstm ? 5 : 4) * H}, gi->dtype) : nullptr;
  rnn_layer_forward_kernel(contiguous_data(gi), contiguous_data(h0), c0 ? contiguous_data(c0) : nullptr,
                           contiguous_data(w_hh), b_hh ? contiguous_data(b_hh) : nullptr, mode, reverse, out, ws);
  if (any_requires_grad({&gi, &h0, &c0, &w_hh, &b_hh})) {
    auto& node = record<OpKind::rnn_layer>(out, {&gi, &h0, &c0, &w_hh, &b_hh});
    node.saved.gi.save(gi, false);
    node.saved.h0.save(h0, false);
    if (c0) node.saved.c0.save(c0, false);
    node.saved.w_hh.save(w_hh, false);
    if (b_hh) node.saved.b_hh.save(b_hh, false);
    node.saved.out.save(out, true);
    if (ws) node.saved.ws.save(ws, false);
    node.saved.mode = mode;
    node.saved.reverse = reverse;
  }
  if (forward_ad::active()) forward_tangents<OpKind::rnn_layer>(out, {&gi, &h0, &c0, &w_hh, &b_hh}, SavesRnnLayer{gi, h0, c0, w_hh, b_hh, out, ws, mode, reverse});
  return out;
}

// The gradients of rnn_layer (Note [Whole-sequence RNN layer]): the recurrence in reverse, each cell's derivative
// in one pass, from the gate activations ws its forward kept (kernels/rnn.cpp). Null where output_mask says no.
// Its own derivative: Note [Fused derivatives as primitives] in derivatives.cpp.
std::vector<Tensor> rnn_layer_backward(const Tensor& grad, const Tensor& gi, const Tensor& h0, const Tensor& c0,
                                       const Tensor& w_hh, const Tensor& b_hh, const Tensor& out, const Tensor& ws,
                                       int64_t mode, bool reverse, const std::array<bool, 5>& output_mask) {
  const char* op = "rnn_layer_backward";
  check_rnn_inputs(op, gi, h0, c0, w_hh, b_hh, mode);
  const int64_t L = gi->shape[0], N = gi->shape[1], H = h0->shape[1];
  const Shape out_shape{mode == kLstm ? 2 : 1, L, N, H};
  DG_CHECK(out && out->shape == out_shape && out->dtype == gi->dtype, RuntimeError, op, ": expected rnn_layer's ",
           dtype_name(gi->dtype), " output of shape ", shape_str(out_shape), ".");
  DG_CHECK(grad && grad->shape == out_shape && is_floating(grad->dtype), RuntimeError, op,
           ": expected a floating-point gradient of shape ", shape_str(out_shape), ", got ",
           grad ? shape_str(grad->shape) : "None", ".");
  const bool gated = mode == kLstm || mode == kGru;
  const Shape ws_shape{L, N, (mode == kLstm ? 5 : 4) * H};
  DG_CHECK(gated ? (ws && ws->shape == ws_shape && ws->dtype == gi->dtype) : !ws, RuntimeError, op,
           gated ? ": expected the gate activations of rnn_layer's forward, of shape " + shape_str(ws_shape) + "."
                 : std::string(": a plain RNN keeps no gate activations (ws is None)."));
  const bool need[5] = {output_mask[0], output_mask[1], output_mask[2] && (bool)c0, output_mask[3],
                        output_mask[4] && (bool)b_hh};
  Tensor g = grad->dtype == gi->dtype ? contiguous_data(grad) : contiguous_copy(grad, gi->dtype);
  RnnLayerGrads r = rnn_layer_backward_kernel(g, contiguous_data(h0), c0 ? contiguous_data(c0) : nullptr,
                                              contiguous_data(w_hh), (bool)b_hh, contiguous_data(out),
                                              ws ? contiguous_data(ws) : nullptr, mode, reverse, need);
  std::vector<Tensor> outs{need[0] ? r.dgi : nullptr, need[1] ? r.dh0 : nullptr, need[2] ? r.dc0 : nullptr,
                           need[3] ? r.dw : nullptr, need[4] ? r.db : nullptr};
  if (any_requires_grad({&grad, &gi, &h0, &c0, &w_hh, &b_hh, &out})) {
    auto& node = record_outputs<OpKind::rnn_layer_backward>(outs, {&grad, &gi, &h0, &c0, &w_hh, &b_hh, &out, nullptr});
    auto& saved = node.saved;
    saved.grad.save(grad, false);
    saved.gi.save(gi, false);
    saved.h0.save(h0, false);
    if (c0) saved.c0.save(c0, false);
    saved.w_hh.save(w_hh, false);
    if (b_hh) saved.b_hh.save(b_hh, false);
    saved.out.save(out, false);
    saved.mode = mode;
    saved.reverse = reverse;
  }
  if (forward_ad::active()) forward_tangents_outputs<OpKind::rnn_layer_backward>(outs, {&grad, &gi, &h0, &c0, &w_hh, &b_hh, &out, nullptr}, SavesRnnLayerBackward{grad, gi, h0, c0, w_hh, b_hh, out, mode, reverse});
  return outs;
}

// Note [Fused attention]: scaled_dot_product_attention is one node (torch's name for it on the CPU) whose forward
// runs per (batch, head) over tiles of 64 query rows and blocks of 128 keys: one product scale * q k^T per block,
// the mask added and the causal mask applied as the scores are read (never materialised), an online softmax
// (running max and sum per row, the partial output rescaled when the max grows), one product P v per block; it
// saves the output and each row's logsumexp, from which the backward recomputes the weights block by block
// (FlashAttention's recipe, on the CPU: no (Lq, Lk) tensor lives beyond a block, and the weights are neither saved
// nor written). The (batch, head) pairs run in parallel on the pool, each on one thread, so the bits do not depend
// on the thread count. Its derivative is attention_backward, a fused primitive of its own whose derivative is the
// VJP of its differentiable definition (Note [Derivatives of fused backwards]), so double backward works. The mask
// gets no gradient (the API falls back to the composite when a float mask requires grad). Dropout: Note [Dropout
// inside attention] (kernels/attention.cpp). The API (_api/ops/attention.py) routes float32/float64 calls here,
// and nn.MultiheadAttention (need_weights=False) and the transformer layers reach it through the API.
// Measured (bench/attention.py, float32, 1 thread, best of 20, Intel Xeon family 6 model 167, 2 cores, KVM, load
// 9.4; ms): GPT-sized (12, 4, 64, 32) causal forward 0.50 (composite 1.16, torch 0.35), forward+backward 1.41
// (composite 2.10, torch 1.23); (2, 4, 512, 64) causal forward 3.5 (composite 26.4, torch 3.9), forward+backward
// 19.5 (51.5, 26.6). Two things made the first version (0.88 / 1.93 ms at the GPT size, 25 ms forward at 512)
// fast: float32 exp through fast_expf (std::exp does not vectorise) with the row max and sum in 8 lanes; the
// blocks' products on OpenBLAS (matmul.cpp's gemm_into), a plain loop being 1.4-4x slower. Head dims 16, 32, 48
// and 64 now take register-tiled products instead, with no packing (Note [Attention tiles for small head dims] in
// kernels/attention.cpp: the GPT step's 4 attention calls 5.68 -> 3.51 ms, 1 thread, Xeon family 6 model 167); other sizes
// keep gemm_into.
namespace {
bool attention_rows_ok(const Tensor& t);

struct AttentionInputs {
  Tensor q, k, v, mask;  // q, k, v with contiguous rows (any row stride); mask additive in q's dtype (or null)
  Shape batch;
};

AttentionInputs attention_inputs(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask_in,
                                 bool is_causal, double dropout_p, const char* op) {
  for (const Tensor* t : {&q, &k, &v})
    DG_CHECK(*t && (*t)->ndim() >= 2, RuntimeError, op, ": expected ", t == &q ? "query" : t == &k ? "key" : "value",
             " to be at least 2-D, got ", *t ? shape_str((*t)->shape) : std::string("None"), ".");
  DG_CHECK(q->dtype == DType::Float32 || q->dtype == DType::Float64, TypeError, op,
           ": expected float32 or float64 query, key and value, got ", dtype_name(q->dtype), ".");
  DG_CHECK(k->dtype == q->dtype && v->dtype == q->dtype, TypeError, op,
           ": expected query, key and value of one dtype, got ", dtype_name(q->dtype), ", ", dtype_name(k->dtype),
           " and ", dtype_name(v->dtype), ".");
  const int64_t E = q->shape.back(), Lk = k->shape[k->ndim() - 2];
  DG_CHECK(k->shape.back() == E, RuntimeError, op, ": expected key's last dim to be query's (", E, "), got shape ",
           shape_str(k->shape), ".");
  DG_CHECK(v->shape[v->ndim() - 2] == Lk, RuntimeError, op, ": expected value to have key's length ", Lk,
           " in dim -2, got shape ", shape_str(v->shape), ".");
  DG_CHECK(dropout_p >= 0 && dropout_p <= 1, RuntimeError, op, ": dropout_p must be in [0, 1], got ", dropout_p, ".");
  DG_CHECK(!(is_causal && mask_in), RuntimeError, op, ": attn_mask must not be given when is_causal=True.");
  auto lead = [](const Tensor& t) { return Shape(t->shape.begin(), t->shape.end() - 2); };
  AttentionInputs r;
  r.batch = broadcast_shapes(broadcast_shapes(lead(q), lead(k), op), lead(v), op);
  // Note [Attention on row-strided views]: the kernels take any row stride (the heads of a GPT's q, k, v are
  // (B, H, L, E) views of one (B, L, 3C) projection: rows C apart), so only a last dim that is not contiguous is
  // copied; the copies were 3 per layer forward and 3 again backward
  r.q = attention_rows_ok(q) ? q : contiguous_data(q);
  r.k = attention_rows_ok(k) ? k : contiguous_data(k);
  r.v = attention_rows_ok(v) ? v : contiguous_data(v);
  if (mask_in) {
    DG_CHECK(!mask_in->requires_grad, RuntimeError, op, ": the fused kernel does not differentiate attn_mask; got a "
             "mask that requires grad.");
    DG_CHECK(mask_in->dtype == DType::Bool || is_floating(mask_in->dtype), TypeError, op,
             ": expected attn_mask to be bool or floating point, got ", dtype_name(mask_in->dtype), ".");
    Shape full = r.batch;
    full.push_back(q->shape[q->ndim() - 2]);
    full.push_back(Lk);
    DG_CHECK(broadcast_shapes(mask_in->shape, full, op) == full, RuntimeError, op, ": attn_mask of shape ",
             shape_str(mask_in->shape), " does not broadcast to the scores' shape ", shape_str(full), ".");
    GradModeGuard off(false);
    r.mask = mask_in->dtype == DType::Bool
                 ? where(mask_in, scalar_tensor(0.0, q->dtype),
                         scalar_tensor(-std::numeric_limits<double>::infinity(), q->dtype))
                 : mask_in->dtype == q->dtype ? mask_in : to_dtype(mask_in, q->dtype);
  }
  return r;
}

Shape with_last2(const Shape& batch, int64_t a, int64_t b) {
  Shape s = batch;
  s.push_back(a);
  s.push_back(b);
  return s;
}

bool attention_rows_ok(const Tensor& t) {
  const int64_t nd = t->ndim();
  return (t->strides[nd - 1] == 1 || t->shape[nd - 1] == 1) &&
         (t->strides[nd - 2] >= t->shape[nd - 1] || t->shape[nd - 2] == 1);
}

// Note [Attention outputs in the heads' layout]: the heads of a GPT's q, k, v are (B, H, L, E) views of (B, L, H, E)
// memory (x.view(b, t, h, e).transpose(1, 2)), and the output goes back the same way (y.transpose(1, 2)
// .contiguous().view(b, t, c)). An output allocated (B, H, L, E)-contiguous made that .contiguous() a copy, and in
// the backward its gradient arrived as a strided view (copied to be read) and dq, dk, dv left as (B, H, L, E) had
// each to be copied to become (B, L, C) again (3 per layer). So an output (and each gradient) takes the layout of the
// input it mirrors: where that input's head dim (the last batch dim) steps by less than its rows do, its memory is
// (.., L, H, E) viewed as (.., H, L, E), as torch's CPU flash attention returns its output; otherwise contiguous.
// The kernels take any row stride for all of them; only the layout changes. The forward's first key block writes
// its output rows (beta 0) instead of adding to zeros, and the backward clears dq, dk, dv in loops, not row-sized
// memsets. Measured (Xeon family 6 model 167, 2 cores, KVM, 1 thread, load 4-5, best of 40, two processes
// alternating): a GPT layer's attention from its (12, 64, 384) projection to the (12, 64, 128) @ (128, 128) after it,
// forward 1.02 -> 0.95 ms, forward + backward 3.2 -> 3.0 ms; contiguous (12, 4, 64, 32) causal, forward + backward
// with the inputs' gradients 1.38 -> 1.31 ms.
Tensor empty_in_heads_layout(const Tensor& like, const Shape& batch, int64_t L, int64_t E, DType dtype) {
  const int64_t nd = like->ndim(), nb = (int64_t)batch.size();
  const bool interleaved = nd == nb + 2 && nb >= 1 && batch[nb - 1] > 1 && L > 1 &&
                           like->strides[nd - 3] < like->strides[nd - 2];
  if (!interleaved) return empty(with_last2(batch, L, E), dtype);
  const int64_t H = batch[nb - 1];
  Shape memory(batch.begin(), batch.end() - 1);
  memory.push_back(L);
  memory.push_back(H);
  memory.push_back(E);
  Tensor base = empty(memory, dtype);
  Shape strides(base->strides.begin(), base->strides.end() - 3);
  strides.push_back(E);      // the head
  strides.push_back(H * E);  // the row
  strides.push_back(1);
  return make_view(base, with_last2(batch, L, E), strides, 0);
}
}  // namespace

Tensor attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask, bool is_causal, double scale,
                 double dropout_p, int64_t seed) {
  const AttentionInputs in = attention_inputs(q, k, v, mask, is_causal, dropout_p, "attention");
  const int64_t Lq = q->shape[q->ndim() - 2], Ev = v->shape.back();
  Tensor out = empty_in_heads_layout(in.q, in.batch, Lq, Ev, q->dtype);
  Shape lse_shape = in.batch;
  lse_shape.push_back(Lq);
  Tensor lse = empty(lse_shape, q->dtype);
  attention_kernel(in.q, in.k, in.v, in.mask, in.batch, is_causal, scale, dropout_p, seed, out, lse);
  if (any_requires_grad({&q, &k, &v})) {
    auto& node = record<OpKind::attention>(out, {&q, &k, &v});
    node.saved.q.save(q, false);
    node.saved.k.save(k, false);
    node.saved.v.save(v, false);
    if (in.mask) node.saved.mask.save(in.mask, false);
    node.saved.out.save(out, true);
    node.saved.lse.save(lse, false);
    node.saved.is_causal = is_causal;
    node.saved.scale = scale;
    node.saved.dropout_p = dropout_p;
    node.saved.seed = seed;
  }
  if (forward_ad::active())
    forward_tangents<OpKind::attention>(out, {&q, &k, &v}, SavesAttention{q, k, v, in.mask, out, lse, is_causal, scale,
                                                                         dropout_p, seed});
  return out;
}

// The gradients of attention (Note [Fused attention]): one pass over the blocks per (batch, head), recomputing
// the weights from lse. Its own derivative: Note [Fused derivatives as primitives] in derivatives.cpp.
std::vector<Tensor> attention_backward(const Tensor& grad, const Tensor& q, const Tensor& k, const Tensor& v,
                                       const Tensor& mask, const Tensor& out_in, const Tensor& lse_in, bool is_causal,
                                       double scale, double dropout_p, int64_t seed,
                                       const std::array<bool, 3>& output_mask) {
  const char* op = "attention_backward";
  const AttentionInputs in = attention_inputs(q, k, v, mask, is_causal, dropout_p, op);
  const int64_t Lq = q->shape[q->ndim() - 2], Lk = k->shape[k->ndim() - 2], E = q->shape.back(),
                Ev = v->shape.back();
  const Shape out_shape = with_last2(in.batch, Lq, Ev);
  Shape lse_shape = in.batch;
  lse_shape.push_back(Lq);
  DG_CHECK(grad && grad->shape == out_shape && is_floating(grad->dtype), RuntimeError, op,
           ": expected a floating-point gradient of the output's shape ", shape_str(out_shape), ", got ",
           grad ? dtype_name(grad->dtype) + std::string(" ") + shape_str(grad->shape) : std::string("None"), ".");
  DG_CHECK(!out_in == !lse_in, RuntimeError, op, ": out and lse are given together or not at all.");
  Tensor out = out_in, lse = lse_in;
  if (!out) {  // recomputed (dropout_p and seed as the forward's)
    out = empty_in_heads_layout(in.q, in.batch, Lq, Ev, q->dtype);
    lse = empty(lse_shape, q->dtype);
    attention_kernel(in.q, in.k, in.v, in.mask, in.batch, is_causal, scale, dropout_p, seed, out, lse);
  }
  DG_CHECK(out->shape == out_shape && lse->shape == lse_shape && out->dtype == q->dtype && lse->dtype == q->dtype,
           RuntimeError, op, ": expected out of shape ", shape_str(out_shape), " and lse of shape ",
           shape_str(lse_shape), " in the query's dtype.");
  // read in place where its rows are contiguous (Note [Attention outputs in the heads' layout]), as out
  const Tensor g = grad->dtype != q->dtype ? contiguous_copy(grad, q->dtype)
                   : attention_rows_ok(grad) ? grad : contiguous_data(grad);
  const Tensor o = attention_rows_ok(out) ? out : contiguous_data(out);
  Tensor dq = output_mask[0] ? empty_in_heads_layout(in.q, in.batch, Lq, E, q->dtype) : nullptr;
  Tensor dk = output_mask[1] ? empty_in_heads_layout(in.k, in.batch, Lk, E, q->dtype) : nullptr;
  Tensor dv = output_mask[2] ? empty_in_heads_layout(in.v, in.batch, Lk, Ev, q->dtype) : nullptr;
  if (dq || dk || dv)
    attention_backward_kernel(g, in.q, in.k, in.v, in.mask, o, contiguous_data(lse), in.batch, is_causal, scale,
                              dropout_p, seed, dq, dk, dv);
  std::vector<Tensor> outs{dq, dk, dv};
  if (any_requires_grad({&grad, &q, &k, &v})) {
    auto& node = record_outputs<OpKind::attention_backward>(outs, {&grad, &q, &k, &v});
    node.saved.grad.save(grad, false);
    node.saved.q.save(q, false);
    node.saved.k.save(k, false);
    node.saved.v.save(v, false);
    if (in.mask) node.saved.mask.save(in.mask, false);
    node.saved.is_causal = is_causal;
    node.saved.scale = scale;
    node.saved.dropout_p = dropout_p;
    node.saved.seed = seed;
  }
  if (forward_ad::active())
    forward_tangents_outputs<OpKind::attention_backward>(outs, {&grad, &q, &k, &v},
                                                         SavesAttentionBackward{grad, q, k, v, in.mask, is_causal,
                                                                                scale, dropout_p, seed});
  return outs;
}

}  // namespace dyngrad
