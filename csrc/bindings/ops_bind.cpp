// ops_bind.cpp: the engine's ops as dyngrad._C functions, one fixed signature each (the functions of ops.h,
// argument for argument). No parsing, no defaults, no dispatch: the torch-facing signatures (keywords, numbers as
// operands, dim=None, ...) are written once, in Python, for both engines (python/dyngrad/_api/). The reference
// engine's twin of this file is python/dyngrad/reference/_C.py: same names, same parameter names.
#include "common.h"
#include "dyngrad/kernels/fft.h"
#include "dyngrad/ops_sort.h"
#include "dyngrad/random.h"

namespace dyngrad {

namespace {

CompareOp compare_op(const std::string& op) {
  static const std::pair<const char*, CompareOp> ops[] = {{"eq", CompareOp::Eq}, {"ne", CompareOp::Ne},
                                                          {"lt", CompareOp::Lt}, {"le", CompareOp::Le},
                                                          {"gt", CompareOp::Gt}, {"ge", CompareOp::Ge}};
  for (auto [name, value] : ops)
    if (op == name) return value;
  throw ValueError(str_cat("compare: op must be one of eq, ne, lt, le, gt, ge; got '", op, "'."));
}

py::tuple as_tuple(const std::vector<Tensor>& ts) { return py::tuple(py::cast(ts)); }

}  // namespace

void bind_ops(py::module_& m) {
  using py::arg;
  auto none = py::none();
  using T = const Tensor&;

  // ---- the primitives whose signature ops.def names, bound from it (parameter names as reference/_C.py) ----
#define DG_BIND_unary(name) m.def(#name, [](T a) { return name(a); }, arg("a"));
#define DG_BIND_unary_float(name) DG_BIND_unary(name)
#define DG_BIND_unary_backward(name) \
  m.def(#name, [](T grad, T x) { return name(grad, x); }, arg("grad"), arg("x"));
#define DG_BIND_binary(name) m.def(#name, [](T a, T b) { return name(a, b); }, arg("a"), arg("b"));
#define DG_BIND_binary_tensors(name) DG_BIND_binary(name)
#define DG_BIND_reduction(name)                                                                    \
  m.def(#name, [](T a, const Dims& dims, bool keepdim) { return name(a, dims, keepdim); }, arg("a"), \
        arg("dims"), arg("keepdim"));
#define DG_BIND_custom(name)
#define DG_OP(name, display, saves, signature, hot) DG_BIND_##signature(name)
#include "dyngrad/ops.def"
#undef DG_BIND_unary
#undef DG_BIND_unary_float
#undef DG_BIND_unary_backward
#undef DG_BIND_binary
#undef DG_BIND_binary_tensors
#undef DG_BIND_reduction
#undef DG_BIND_custom

  // ---- the custom-signature primitives and the composites, by family: arithmetic ----
  m.def("pow_scalar", [](T a, double p) { return pow_scalar(a, p); }, arg("a"), arg("p"));
  m.def("where", [](T cond, T a, T b) { return where(cond, a, b); }, arg("cond"), arg("a"), arg("b"));
  m.def("clamp", [](T a, std::optional<double> lo, std::optional<double> hi) { return clamp(a, lo, hi); },
        arg("a"), arg("lo").none(true), arg("hi").none(true));
  m.def("cumsum", [](T a, int64_t dim, bool reverse) { return cumsum(a, dim, reverse); }, arg("a"), arg("dim"),
        arg("reverse"));
  m.def("cumprod", [](T a, int64_t dim, bool reverse) { return cumprod(a, dim, reverse); }, arg("a"), arg("dim"),
        arg("reverse"));
  m.def("logcumsumexp", [](T a, int64_t dim, bool reverse) { return logcumsumexp(a, dim, reverse); }, arg("a"),
        arg("dim"), arg("reverse"));
  m.def("linear_recurrence", [](T b, T c, int64_t dim, bool reverse) { return linear_recurrence(b, c, dim, reverse); },
        arg("b"), arg("c"), arg("dim"), arg("reverse"));
  m.def("scalar_like", [](T t, double v, bool is_integral) { return scalar_like(t, v, is_integral); }, arg("t"),
        arg("v"), arg("is_integral"));
  m.def("result_type", [](T a, T b) { return dtype_object(result_type(a, b)); }, arg("a"), arg("b"));

  // ---- unary ----
  m.def("leaky_relu", [](T a, double slope) { return leaky_relu(a, slope); }, arg("a"), arg("slope"));
  m.def("softplus", [](T a, double beta, double threshold) { return softplus(a, beta, threshold); }, arg("a"),
        arg("beta"), arg("threshold"));

  // ---- comparisons and logic (no grad) ----
  m.def("compare", [](const std::string& op, T a, T b) { return compare(compare_op(op), a, b); }, arg("op"),
        arg("a"), arg("b"));
  m.def("logical_and", [](T a, T b) { return logical_and(a, b); }, arg("a"), arg("b"));
  m.def("logical_or", [](T a, T b) { return logical_or(a, b); }, arg("a"), arg("b"));
  m.def("logical_xor", [](T a, T b) { return logical_xor(a, b); }, arg("a"), arg("b"));
  m.def("logical_not", [](T a) { return logical_not(a); }, arg("a"));
  m.def("isnan", [](T a) { return isnan(a); }, arg("a"));
  m.def("isfinite", [](T a) { return isfinite(a); }, arg("a"));

  // ---- reductions: dims () = all dims ----
  m.def("sum", [](T a, const Dims& dims, bool keepdim, py::handle dtype) {
    return sum(a, dims, keepdim, parse_optional_dtype(dtype));
  }, arg("a"), arg("dims"), arg("keepdim"), arg("dtype") = none);
  m.def("var", [](T a, const Dims& dims, double correction, bool keepdim) { return var(a, dims, correction, keepdim); },
        arg("a"), arg("dims"), arg("correction"), arg("keepdim"));
  m.def("std", [](T a, const Dims& dims, double correction, bool keepdim) { return std_(a, dims, correction, keepdim); },
        arg("a"), arg("dims"), arg("correction"), arg("keepdim"));
  m.def("argmax", [](T a, std::optional<int64_t> dim, bool keepdim) { return argmax(a, dim, keepdim); }, arg("a"),
        arg("dim").none(true), arg("keepdim"));
  m.def("argmin", [](T a, std::optional<int64_t> dim, bool keepdim) { return argmin(a, dim, keepdim); }, arg("a"),
        arg("dim").none(true), arg("keepdim"));

  // ---- conversion and movement ----
  m.def("to_dtype", [](T a, py::handle dtype) { return to_dtype(a, parse_dtype(dtype)); }, arg("a"), arg("dtype"));
  m.def("contiguous", [](T a) { return contiguous(a); }, arg("a"));
  m.def("reshape", [](T a, const Shape& shape) { return reshape(a, shape); }, arg("a"), arg("shape"));
  m.def("view", [](T a, const Shape& shape) { return view(a, shape); }, arg("a"), arg("shape"));
  m.def("permute", [](T a, const Dims& dims) { return permute(a, dims); }, arg("a"), arg("dims"));
  m.def("transpose", [](T a, int64_t dim0, int64_t dim1) { return transpose(a, dim0, dim1); }, arg("a"),
        arg("dim0"), arg("dim1"));
  m.def("mT", [](T a) { return mT(a); }, arg("a"));
  m.def("expand", [](T a, const Shape& shape) { return expand(a, shape); }, arg("a"), arg("shape"));
  m.def("squeeze", [](T a, std::optional<Dims> dims) { return squeeze(a, dims); }, arg("a"), arg("dims").none(true));
  m.def("unsqueeze", [](T a, int64_t dim) { return unsqueeze(a, dim); }, arg("a"), arg("dim"));
  m.def("flatten", [](T a, int64_t start_dim, int64_t end_dim) { return flatten(a, start_dim, end_dim); }, arg("a"),
        arg("start_dim"), arg("end_dim"));
  m.def("slice", [](T a, int64_t dim, int64_t start, int64_t stop, int64_t step) {
    return slice(a, dim, start, stop, step);
  }, arg("a"), arg("dim"), arg("start"), arg("stop"), arg("step"));
  m.def("slice_scatter", [](T grad, const Shape& input_shape, int64_t dim, int64_t start, int64_t step) {
    return slice_scatter(grad, input_shape, dim, start, step);
  }, arg("grad"), arg("input_shape"), arg("dim"), arg("start"), arg("step"));
  m.def("select", [](T a, int64_t dim, int64_t index) { return select(a, dim, index); }, arg("a"), arg("dim"),
        arg("index"));
  m.def("cat", [](const std::vector<Tensor>& tensors, int64_t dim) { return cat(tensors, dim); }, arg("tensors"),
        arg("dim"));
  m.def("stack", [](const std::vector<Tensor>& tensors, int64_t dim) { return stack(tensors, dim); },
        arg("tensors"), arg("dim"));
  m.def("split", [](T a, const Dims& sizes, int64_t dim) { return as_tuple(split(a, sizes, dim)); }, arg("a"),
        arg("sizes"), arg("dim"));
  m.def("split_size", [](T a, int64_t size, int64_t dim) { return as_tuple(split_size(a, size, dim)); }, arg("a"),
        arg("size"), arg("dim"));
  m.def("chunk", [](T a, int64_t chunks, int64_t dim) { return as_tuple(chunk(a, chunks, dim)); }, arg("a"),
        arg("chunks"), arg("dim"));

  // ---- indexing ----
  m.def("index_select", [](T a, int64_t dim, T index) { return index_select(a, dim, index); }, arg("a"), arg("dim"),
        arg("index"));
  m.def("index_add", [](T src, int64_t dim, T index, const Shape& out_shape) {
    return index_add(src, dim, index, out_shape);
  }, arg("src"), arg("dim"), arg("index"), arg("out_shape"));
  m.def("gather", [](T a, int64_t dim, T index) { return gather(a, dim, index); }, arg("a"), arg("dim"),
        arg("index"));
  m.def("scatter_add", [](T src, int64_t dim, T index, const Shape& out_shape) {
    return scatter_add(src, dim, index, out_shape);
  }, arg("src"), arg("dim"), arg("index"), arg("out_shape"));
  m.def("take", [](T a, T positions) { return take(a, positions); }, arg("a"), arg("positions"));
  m.def("put", [](T a, T positions, T v) { return put(a, positions, v); }, arg("a"), arg("positions"), arg("v"));
  m.def("put_add", [](T v, T positions, const Shape& out_shape) { return put_add(v, positions, out_shape); },
        arg("v"), arg("positions"), arg("out_shape"));

  // ---- sorting (ops_sort.h): the values are a gather, (values, indices) a tuple ----
  m.def("sort", [](T a, int64_t dim, bool descending, bool stable) { return sort(a, dim, descending, stable); },
        arg("a"), arg("dim"), arg("descending"), arg("stable"));
  m.def("argsort", [](T a, int64_t dim, bool descending, bool stable) {
    return argsort(a, dim, descending, stable);
  }, arg("a"), arg("dim"), arg("descending"), arg("stable"));
  m.def("topk", [](T a, int64_t k, int64_t dim, bool largest) { return topk(a, k, dim, largest); }, arg("a"),
        arg("k"), arg("dim"), arg("largest"));
  m.def("cummax", [](T a, int64_t dim) { return cumulative_extremum(a, dim, true); }, arg("a"), arg("dim"));
  m.def("cummin", [](T a, int64_t dim) { return cumulative_extremum(a, dim, false); }, arg("a"), arg("dim"));
  m.def("masked_fill", [](T a, T mask, T value) { return masked_fill(a, mask, value); }, arg("a"), arg("mask"),
        arg("value"));

  // ---- in-place (Note [In-place writes into views] in inplace.cpp) ----
  m.def("inplace_input", [](T self, const std::string& op, bool other_requires_grad) {
    return inplace_input(self, op.c_str(), other_requires_grad);
  }, arg("self"), arg("op"), arg("other_requires_grad"));
  m.def("assign_inplace", [](T self, T result, const std::string& op) { assign_inplace(self, result, op.c_str()); },
        arg("self"), arg("result"), arg("op"));
  m.def("copy_", [](T self, T src) { copy_(self, src); }, arg("self"), arg("src"));
  m.def("fill_", [](T self, py::handle value) {
    if (PyLong_Check(value.ptr()) && !PyBool_Check(value.ptr()))  // exact: a Python int never passes a double
      return fill_(self, scalar_operand(value, &self));
    fill_(self, value.cast<double>());
  }, arg("self"), arg("value"));
  m.def("zero_", [](T self) { zero_(self); }, arg("self"));

  // ---- neural-net primitives and composites ----
  m.def("softmax", [](T a, int64_t dim) { return softmax(a, dim); }, arg("a"), arg("dim"));
  m.def("log_softmax", [](T a, int64_t dim) { return log_softmax(a, dim); }, arg("a"), arg("dim"));
  m.def("rnn_layer", [](T gi, T h0, std::optional<Tensor> c0, T w_hh, std::optional<Tensor> b_hh, int64_t mode,
                        bool reverse) {
    return rnn_layer(gi, h0, c0 ? *c0 : Tensor(), w_hh, b_hh ? *b_hh : Tensor(), mode, reverse);
  }, arg("gi"), arg("h0"), arg("c0"), arg("w_hh"), arg("b_hh"), arg("mode"), arg("reverse"));
  m.def("layer_norm", [](T x, std::optional<Tensor> weight, std::optional<Tensor> bias, int64_t ndims, double eps) {
    return layer_norm(x, weight ? *weight : Tensor(), bias ? *bias : Tensor(), ndims, eps);
  }, arg("x"), arg("weight"), arg("bias"), arg("ndims"), arg("eps"));
  m.def("cross_entropy", [](T logits, T target, int64_t reduction, int64_t ignore_index, double label_smoothing) {
    return cross_entropy(logits, target, reduction, ignore_index, label_smoothing);
  }, arg("logits"), arg("target"), arg("reduction"), arg("ignore_index"), arg("label_smoothing"));
  // the fused derivatives (Note [Fused derivatives as primitives] in derivatives.cpp)
  m.def("softmax_backward", [](T grad, T out, int64_t dim) { return softmax_backward(grad, out, dim); },
        arg("grad"), arg("out"), arg("dim"));
  m.def("log_softmax_backward", [](T grad, T out, int64_t dim) { return log_softmax_backward(grad, out, dim); },
        arg("grad"), arg("out"), arg("dim"));
  m.def("cross_entropy_backward", [](T grad, T logits, T target, int64_t reduction, int64_t ignore_index,
                                     double label_smoothing) {
    return cross_entropy_backward(grad, logits, target, reduction, ignore_index, label_smoothing);
  }, arg("grad"), arg("logits"), arg("target"), arg("reduction"), arg("ignore_index"), arg("label_smoothing"));
  m.def("layer_norm_backward", [](T grad, T a, std::optional<Tensor> weight, int64_t ndims, double eps,
                                  const std::array<bool, 3>& output_mask) {
    return as_tuple(layer_norm_backward(grad, a, weight ? *weight : Tensor(), ndims, eps, output_mask));
  }, arg("grad"), arg("a"), arg("weight"), arg("ndims"), arg("eps"), arg("output_mask"));
  m.def("attention", [](T q, T k, T v, std::optional<Tensor> mask, bool is_causal, double scale, double dropout_p,
                        int64_t seed) {
    // Note [Dropout inside attention]: seed -1 draws it here, as randint(0, 2**62, (), int64).item() would: the
    // draw is then part of the op, so a static replay draws a fresh one (no value flows into Python to guard)
    if (seed < 0) seed = randint(0, int64_t(1) << 62, {}, DType::Int64)->data<int64_t>()[0];
    return attention(q, k, v, mask ? *mask : Tensor(), is_causal, scale, dropout_p, seed);
  }, arg("q"), arg("k"), arg("v"), arg("mask"), arg("is_causal"), arg("scale"), arg("dropout_p"), arg("seed"));
  m.def("attention_backward", [](T grad, T q, T k, T v, std::optional<Tensor> mask, std::optional<Tensor> out,
                                 std::optional<Tensor> lse, bool is_causal, double scale, double dropout_p,
                                 int64_t seed, const std::array<bool, 3>& output_mask) {
    return as_tuple(attention_backward(grad, q, k, v, mask ? *mask : Tensor(), out ? *out : Tensor(),
                                       lse ? *lse : Tensor(), is_causal, scale, dropout_p, seed, output_mask));
  }, arg("grad"), arg("q"), arg("k"), arg("v"), arg("mask"), arg("out"), arg("lse"), arg("is_causal"), arg("scale"),
        arg("dropout_p"), arg("seed"), arg("output_mask"));
  m.def("rnn_layer_backward", [](T grad, T gi, T h0, std::optional<Tensor> c0, T w_hh, std::optional<Tensor> b_hh,
                                 T out, std::optional<Tensor> ws, int64_t mode, bool reverse,
                                 const std::array<bool, 5>& output_mask) {
    return as_tuple(rnn_layer_backward(grad, gi, h0, c0 ? *c0 : Tensor(), w_hh, b_hh ? *b_hh : Tensor(), out,
                                       ws ? *ws : Tensor(), mode, reverse, output_mask));
  }, arg("grad"), arg("gi"), arg("h0"), arg("c0"), arg("w_hh"), arg("b_hh"), arg("out"), arg("ws"), arg("mode"),
     arg("reverse"), arg("output_mask"));
  // dilation and groups default to 1 so that callers of the 6-number window keep working
  m.def("unfold", [](T x, int64_t kh, int64_t kw, int64_t sh, int64_t sw, int64_t ph, int64_t pw, int64_t dh,
                     int64_t dw) { return unfold(x, kh, kw, sh, sw, ph, pw, dh, dw); },
        arg("x"), arg("kh"), arg("kw"), arg("sh"), arg("sw"), arg("ph"), arg("pw"), arg("dh") = 1, arg("dw") = 1);
  m.def("fold", [](T cols, const Shape& input_shape, int64_t kh, int64_t kw, int64_t sh, int64_t sw, int64_t ph,
                   int64_t pw, int64_t dh, int64_t dw) {
    return fold(cols, input_shape, kh, kw, sh, sw, ph, pw, dh, dw);
  },
        arg("cols"), arg("input_shape"), arg("kh"), arg("kw"), arg("sh"), arg("sw"), arg("ph"), arg("pw"),
        arg("dh") = 1, arg("dw") = 1);
  m.def("conv2d", [](T x, T w, std::optional<Tensor> bias, int64_t sh, int64_t sw, int64_t ph, int64_t pw,
                     int64_t dh, int64_t dw, int64_t groups) {
    return conv2d(x, w, bias ? &*bias : nullptr, sh, sw, ph, pw, dh, dw, groups);
  }, arg("x"), arg("w"), arg("bias").none(true), arg("sh"), arg("sw"), arg("ph"), arg("pw"), arg("dh") = 1,
     arg("dw") = 1, arg("groups") = 1);
  m.def("max_pool2d", [](T x, int64_t kh, int64_t kw, int64_t sh, int64_t sw, int64_t ph, int64_t pw) {
    return max_pool2d(x, kh, kw, sh, sw, ph, pw);
  }, arg("x"), arg("kh"), arg("kw"), arg("sh"), arg("sw"), arg("ph"), arg("pw"));
  m.def("avg_pool2d", [](T x, int64_t kh, int64_t kw, int64_t sh, int64_t sw, int64_t ph, int64_t pw) {
    return avg_pool2d(x, kh, kw, sh, sw, ph, pw);
  }, arg("x"), arg("kh"), arg("kw"), arg("sh"), arg("sw"), arg("ph"), arg("pw"));

  // ---- the FFT (kernels/fft.h) over complex numbers as real tensors with a trailing dim of 2 (view_as_real's
  // layout), no autograd: python/dyngrad/_api/ops/fft.py builds dyngrad.fft on them ----
  m.def("_fft_c2c", [](T x, const std::vector<int64_t>& dims, bool forward, const std::string& norm) {
    return fft_c2c(x, dims, forward, parse_fft_norm(norm, "_fft_c2c"));
  }, arg("x"), arg("dims"), arg("forward"), arg("norm"));
  m.def("_fft_r2c", [](T x, const std::vector<int64_t>& dims, bool forward, const std::string& norm, bool onesided) {
    return fft_r2c(x, dims, forward, parse_fft_norm(norm, "_fft_r2c"), onesided);
  }, arg("x"), arg("dims"), arg("forward"), arg("norm"), arg("onesided"));
  m.def("_fft_c2r", [](T x, const std::vector<int64_t>& dims, bool forward, const std::string& norm,
                       int64_t last_dim_size) {
    return fft_c2r(x, dims, forward, parse_fft_norm(norm, "_fft_c2r"), last_dim_size);
  }, arg("x"), arg("dims"), arg("forward"), arg("norm"), arg("last_dim_size"));
  m.def("_fft_plan", &fft_plan_description, arg("n"), arg("double_precision"),
        "how an n-point transform is planned (Note [FFT plans] in kernels/fft.cpp)");
  m.def("_fft_cached_plan_count", &fft_cached_plan_count);
  m.def("_fft_clear_plan_cache", &fft_clear_plan_cache);

  // ---- creation and random numbers (random.h) ----
  m.def("empty", [](const Shape& shape, py::handle dtype) { return empty(shape, parse_dtype(dtype)); },
        arg("shape"), arg("dtype"));
  m.def("full", [](const Shape& shape, py::handle value, py::handle dtype) {
    if (PyLong_Check(value.ptr()) && !PyBool_Check(value.ptr()))  // exact: 2**62 + 1 stays odd
      return full_int(shape, scalar_operand(value, nullptr)->data<int64_t>()[0], parse_dtype(dtype));
    if (PyComplex_Check(value.ptr())) {
      Py_complex v = PyComplex_AsCComplex(value.ptr());
      return full_complex(shape, v.real, v.imag, parse_dtype(dtype));
    }
    return full(shape, value.cast<double>(), parse_dtype(dtype));
  }, arg("shape"), arg("value"), arg("dtype"));
  m.def("rand", [](const Shape& shape, py::handle dtype) { return rand(shape, parse_dtype(dtype)); }, arg("shape"),
        arg("dtype"));
  m.def("randn", [](const Shape& shape, py::handle dtype) { return randn(shape, parse_dtype(dtype)); },
        arg("shape"), arg("dtype"));
  m.def("randint", [](int64_t low, int64_t high, const Shape& shape, py::handle dtype) {
    return randint(low, high, shape, parse_dtype(dtype));
  }, arg("low"), arg("high"), arg("shape"), arg("dtype"));
  m.def("bernoulli_mask", [](const Shape& shape, double p, py::handle dtype) {
    return bernoulli_mask(shape, p, parse_dtype(dtype));
  }, arg("shape"), arg("p"), arg("dtype"));
  m.def("randperm", [](int64_t n) {
    DG_CHECK(n >= 0, RuntimeError, "randperm: n must be non-negative, got ", n, ".");
    Tensor t = empty({n}, DType::Int64);
    int64_t* p = t->data<int64_t>();
    for (int64_t i = 0; i < n; ++i) p[i] = i;
    for (int64_t i = n - 1; i > 0; --i) {  // Fisher-Yates with our generator
      Tensor r = randint(0, i + 1, {}, DType::Int64);
      std::swap(p[i], p[*r->data<int64_t>()]);
    }
    return t;
  }, arg("n"));
  m.def("manual_seed", [](uint64_t seed) { manual_seed(seed); }, arg("seed"));
  m.def("initial_seed", &initial_seed);
  m.def("_get_rng_state", [] { auto s = rng_state(); return py::make_tuple(s[0], s[1], s[2], s[3], s[4]); });
  m.def("_set_rng_state", [](const std::array<uint64_t, 5>& s) { set_rng_state(s); }, arg("state"));
}

}  // namespace dyngrad
