// ops_bind.cpp: every op as a function of dyngrad and (where torch has it) a method of Tensor, bound once.
#include <cmath>
#include <limits>

#include "common.h"
#include "dyngrad/random.h"

namespace dyngrad {

namespace {

using TensorClass = py::class_<TensorImpl, Tensor>;

// Binds f as dyngrad.name and as Tensor.name (whose first argument, self, takes no annotation).
template <typename F>
void def_both(py::module_& m, TensorClass& cls, const char* name, F&& f) {
  m.def(name, f);
  cls.def(name, f);
}
template <typename F, typename... Rest>
void def_both(py::module_& m, TensorClass& cls, const char* name, F&& f, const py::arg& self, const Rest&... rest) {
  m.def(name, f, self, rest...);
  cls.def(name, f, rest...);
}

// The first operand may be a number when the second is a tensor: dg.add(2, t).
std::pair<Tensor, Tensor> operands(py::handle a, py::handle b, const char* op) {
  if (is_tensor(a)) {
    Tensor ta = a.cast<Tensor>();
    return {ta, as_operand_or_throw(b, &ta, op)};
  }
  if (is_tensor(b)) {
    Tensor tb = b.cast<Tensor>();
    return {as_operand_or_throw(a, &tb, op), tb};
  }
  Tensor ta = as_operand_or_throw(a, nullptr, op);
  return {ta, as_operand_or_throw(b, &ta, op)};
}

Tensor with_alpha(const Tensor& b, py::handle alpha) {
  if (!alpha || alpha.is_none()) return b;
  if (PyLong_Check(alpha.ptr()) && alpha.cast<int64_t>() == 1) return b;
  return mul(b, as_operand_or_throw(alpha, &b, "alpha"));
}

std::optional<double> opt_double(py::handle o) {
  if (!o || o.is_none()) return std::nullopt;
  return o.cast<double>();
}

int64_t reduction_code(const std::string& r, const char* op) {
  if (r == "none") return 0;
  if (r == "mean") return 1;
  if (r == "sum") return 2;
  throw ValueError(str_cat(op, ": reduction must be 'none', 'mean' or 'sum', got '", r, "'."));
}

Tensor reduce_loss(const Tensor& losses, int64_t code) {
  if (code == 0) return losses;
  if (code == 1) return mean(losses, {}, false);
  return sum(losses, {}, false);
}

std::pair<int64_t, int64_t> pair_arg(py::handle o, const char* op, const char* what) {
  if (PyLong_Check(o.ptr())) {
    int64_t v = o.cast<int64_t>();
    return {v, v};
  }
  Shape s = parse_shape(o, op);
  DG_CHECK(s.size() == 2, ValueError, op, ": ", what, " must be an int or a pair of ints, got ", shape_str(s), ".");
  return {s[0], s[1]};
}

py::object named_pair(const char* type, const Tensor& values, const Tensor& indices) {
  return py_helper(type)(values, indices);
}

// max/min: (input) -> value; (input, dim, keepdim) -> (values, indices); (input, other tensor) -> elementwise
py::object extremum_dispatch(const Tensor& self, py::handle dim, bool keepdim, bool is_max) {
  if (!dim || dim.is_none()) return py::cast(is_max ? amax(self, {}, false) : amin(self, {}, false));
  if (is_tensor(dim)) return py::cast(is_max ? maximum(self, dim.cast<Tensor>()) : minimum(self, dim.cast<Tensor>()));
  int64_t d = wrap_dim(dim.cast<int64_t>(), self->ndim(), is_max ? "max" : "min");
  // values are gathered at the returned indices, so with ties the gradient goes to that one element (as torch)
  Tensor indices = is_max ? argmax(self, d, true) : argmin(self, d, true);
  Tensor values = gather(self, d, indices);
  if (!keepdim && self->ndim() > 0) {
    values = squeeze(values, Dims{d});
    indices = squeeze(indices, Dims{d});
  }
  return named_pair(is_max ? "return_max" : "return_min", values, indices);
}

double correction_of(py::handle unbiased, py::handle correction) {
  if (correction && !correction.is_none()) return correction.cast<double>();
  if (unbiased && !unbiased.is_none()) return unbiased.cast<bool>() ? 1.0 : 0.0;
  return 1.0;
}

}  // namespace

void bind_ops(py::module_& m) {
  auto cls = py::reinterpret_borrow<TensorClass>(py::type::of<TensorImpl>());
  using py::arg;
  auto none = py::none();

  // ---- arithmetic ----
  def_both(m, cls, "add", [](py::handle a, py::handle b, py::handle alpha) {
    auto [x, y] = operands(a, b, "add");
    return add(x, with_alpha(y, alpha));
  }, arg("input"), arg("other"), py::kw_only(), arg("alpha") = none);
  def_both(m, cls, "sub", [](py::handle a, py::handle b, py::handle alpha) {
    auto [x, y] = operands(a, b, "sub");
    return sub(x, with_alpha(y, alpha));
  }, arg("input"), arg("other"), py::kw_only(), arg("alpha") = none);
  def_both(m, cls, "mul", [](py::handle a, py::handle b) {
    auto [x, y] = operands(a, b, "mul");
    return mul(x, y);
  }, arg("input"), arg("other"));
  def_both(m, cls, "div", [](py::handle a, py::handle b, py::handle rounding_mode) {
    DG_CHECK(!rounding_mode || rounding_mode.is_none(), NotImplementedError,
             "div: rounding_mode is not supported yet; use true division.");
    auto [x, y] = operands(a, b, "div");
    return div(x, y);
  }, arg("input"), arg("other"), py::kw_only(), arg("rounding_mode") = none);
  def_both(m, cls, "true_divide", [](py::handle a, py::handle b) {
    auto [x, y] = operands(a, b, "div");
    return div(x, y);
  });
  def_both(m, cls, "pow", [](py::handle a, py::handle b) -> Tensor {
    if (is_tensor(a) && (PyFloat_Check(b.ptr()) || (PyLong_Check(b.ptr()) && !PyBool_Check(b.ptr()))))
      return pow_scalar(a.cast<Tensor>(), b.cast<double>());
    auto [x, y] = operands(a, b, "pow");
    return pow(x, y);
  }, arg("input"), arg("exponent"));
  def_both(m, cls, "maximum", [](const Tensor& a, py::handle b) { return maximum(a, as_operand_or_throw(b, &a, "maximum")); });
  def_both(m, cls, "minimum", [](const Tensor& a, py::handle b) { return minimum(a, as_operand_or_throw(b, &a, "minimum")); });
  m.def("where", [](const Tensor& cond, py::handle a, py::handle b) {
    auto [x, y] = operands(a, b, "where");
    return where(cond, x, y);
  }, arg("condition"), arg("input"), arg("other"));
  cls.def("where", [](const Tensor& self, const Tensor& cond, py::handle other) {
    return where(cond, self, as_operand_or_throw(other, &self, "where"));
  }, arg("condition"), arg("other"));
  auto clamp_fn = [](const Tensor& a, py::handle lo, py::handle hi) -> Tensor {
    if (is_tensor(lo) || is_tensor(hi)) {  // tensor bounds: compose from maximum/minimum
      Tensor r = a;
      if (lo && !lo.is_none()) r = maximum(r, as_operand_or_throw(lo, &a, "clamp"));
      if (hi && !hi.is_none()) r = minimum(r, as_operand_or_throw(hi, &a, "clamp"));
      return r;
    }
    // an integer tensor clamped to float bounds is float32, as torch promotes it
    bool float_bound = PyFloat_Check(lo.ptr()) || PyFloat_Check(hi.ptr());
    return clamp(float_bound && !is_floating(a->dtype) ? to_dtype(a, DType::Float32) : a, opt_double(lo),
                 opt_double(hi));
  };
  def_both(m, cls, "clamp", clamp_fn, arg("input"), arg("min") = none, arg("max") = none);
  def_both(m, cls, "clip", clamp_fn, arg("input"), arg("min") = none, arg("max") = none);
  def_both(m, cls, "neg", [](const Tensor& a) { return neg(a); });
  def_both(m, cls, "negative", [](const Tensor& a) { return neg(a); });

  // ---- unary ----
#define DG_UNARY(name) def_both(m, cls, #name, [](const Tensor& a) { return name(a); }, arg("input"));
  DG_UNARY(exp) DG_UNARY(log) DG_UNARY(sqrt) DG_UNARY(rsqrt) DG_UNARY(abs) DG_UNARY(sin) DG_UNARY(cos)
  DG_UNARY(tanh) DG_UNARY(sigmoid) DG_UNARY(relu) DG_UNARY(sign) DG_UNARY(erf)
  DG_UNARY(logical_not) DG_UNARY(isnan) DG_UNARY(isfinite)
#undef DG_UNARY
  def_both(m, cls, "square", [](const Tensor& a) { return mul(a, a); });
  def_both(m, cls, "leaky_relu", [](const Tensor& a, double slope) { return leaky_relu(a, slope); }, arg("input"),
           arg("negative_slope") = 0.01);
  def_both(m, cls, "gelu", [](const Tensor& a, const std::string& approximate) {
    DG_CHECK(approximate == "none", NotImplementedError, "gelu: approximate='", approximate,
             "' is not supported; only the exact (erf) form is.");
    return gelu(a);
  }, arg("input"), arg("approximate") = "none");
  def_both(m, cls, "softplus", [](const Tensor& a, double beta, double threshold) {
    return softplus(a, beta, threshold);
  }, arg("input"), arg("beta") = 1.0, arg("threshold") = 20.0);

  // ---- comparisons and logic ----
  const std::pair<const char*, CompareOp> cmps[] = {{"eq", CompareOp::Eq}, {"ne", CompareOp::Ne},
                                                    {"lt", CompareOp::Lt}, {"le", CompareOp::Le},
                                                    {"gt", CompareOp::Gt}, {"ge", CompareOp::Ge}};
  for (auto [name, op] : cmps) {
    def_both(m, cls, name, [op = op, name = name](py::handle a, py::handle b) {
      auto [x, y] = operands(a, b, name);
      return compare(op, x, y);
    }, arg("input"), arg("other"));
  }
  def_both(m, cls, "logical_and", [](const Tensor& a, py::handle b) { return logical_and(a, as_operand_or_throw(b, &a, "logical_and")); });
  def_both(m, cls, "logical_or", [](const Tensor& a, py::handle b) { return logical_or(a, as_operand_or_throw(b, &a, "logical_or")); });
  def_both(m, cls, "logical_xor", [](const Tensor& a, py::handle b) { return logical_xor(a, as_operand_or_throw(b, &a, "logical_xor")); });

  // ---- reductions ----
  def_both(m, cls, "sum", [](const Tensor& a, py::handle dim, bool keepdim, py::handle dtype) {
    return sum(a, parse_dims(dim, "sum"), keepdim, parse_optional_dtype(dtype));
  }, arg("input"), arg("dim") = none, arg("keepdim") = false, py::kw_only(), arg("dtype") = none);
  def_both(m, cls, "mean", [](const Tensor& a, py::handle dim, bool keepdim) {
    return mean(a, parse_dims(dim, "mean"), keepdim);
  }, arg("input"), arg("dim") = none, arg("keepdim") = false);
  def_both(m, cls, "var", [](const Tensor& a, py::handle dim, py::handle unbiased, bool keepdim, py::handle correction) {
    return var(a, parse_dims(dim, "var"), correction_of(unbiased, correction), keepdim);
  }, arg("input"), arg("dim") = none, arg("unbiased") = none, arg("keepdim") = false, py::kw_only(),
     arg("correction") = none);
  def_both(m, cls, "std", [](const Tensor& a, py::handle dim, py::handle unbiased, bool keepdim, py::handle correction) {
    return std_(a, parse_dims(dim, "std"), correction_of(unbiased, correction), keepdim);
  }, arg("input"), arg("dim") = none, arg("unbiased") = none, arg("keepdim") = false, py::kw_only(),
     arg("correction") = none);
  def_both(m, cls, "max", [](const Tensor& a, py::handle dim, bool keepdim) {
    return extremum_dispatch(a, dim, keepdim, true);
  }, arg("input"), arg("dim") = none, arg("keepdim") = false);
  def_both(m, cls, "min", [](const Tensor& a, py::handle dim, bool keepdim) {
    return extremum_dispatch(a, dim, keepdim, false);
  }, arg("input"), arg("dim") = none, arg("keepdim") = false);
  def_both(m, cls, "amax", [](const Tensor& a, py::handle dim, bool keepdim) {
    return amax(a, parse_dims(dim, "amax"), keepdim);
  }, arg("input"), arg("dim") = none, arg("keepdim") = false);
  def_both(m, cls, "amin", [](const Tensor& a, py::handle dim, bool keepdim) {
    return amin(a, parse_dims(dim, "amin"), keepdim);
  }, arg("input"), arg("dim") = none, arg("keepdim") = false);
  def_both(m, cls, "argmax", [](const Tensor& a, std::optional<int64_t> dim, bool keepdim) {
    return argmax(a, dim, keepdim);
  }, arg("input"), arg("dim") = none, arg("keepdim") = false);
  def_both(m, cls, "argmin", [](const Tensor& a, std::optional<int64_t> dim, bool keepdim) {
    return argmin(a, dim, keepdim);
  }, arg("input"), arg("dim") = none, arg("keepdim") = false);
  def_both(m, cls, "logsumexp", [](const Tensor& a, py::handle dim, bool keepdim) {
    return logsumexp(a, parse_dims(dim, "logsumexp"), keepdim);
  }, arg("input"), arg("dim") = none, arg("keepdim") = false);

  // ---- linear algebra ----
  def_both(m, cls, "matmul", [](const Tensor& a, const Tensor& b) { return matmul(a, b); }, arg("input"), arg("other"));
  def_both(m, cls, "mm", [](const Tensor& a, const Tensor& b) {
    DG_CHECK(a->ndim() == 2 && b->ndim() == 2, RuntimeError, "mm: expected 2-D tensors, got ", shape_str(a->shape),
             " and ", shape_str(b->shape), ".");
    return matmul(a, b);
  }, arg("input"), arg("mat2"));
  def_both(m, cls, "bmm", [](const Tensor& a, const Tensor& b) {
    DG_CHECK(a->ndim() == 3 && b->ndim() == 3 && a->shape[0] == b->shape[0], RuntimeError,
             "bmm: expected 3-D tensors with the same batch size, got ", shape_str(a->shape), " and ",
             shape_str(b->shape), ".");
    return matmul(a, b);
  }, arg("input"), arg("mat2"));

  // ---- shape ----
  m.def("reshape", [](const Tensor& a, py::handle shape) { return reshape(a, parse_shape(shape, "reshape")); },
        arg("input"), arg("shape"));
  cls.def("reshape", [](const Tensor& a, py::args shape) { return reshape(a, parse_shape_args(shape, "reshape")); });
  cls.def("view", [](const Tensor& a, py::args shape) -> Tensor {
    if (shape.size() == 1 && !PyLong_Check(shape[0].ptr()) && !py::isinstance<py::sequence>(shape[0]))
      return to_dtype(a, parse_dtype(shape[0]));  // view(dtype): only same-size reinterpretation in torch
    return view(a, parse_shape_args(shape, "view"));
  });
  cls.def("view_as", [](const Tensor& a, const Tensor& o) { return view(a, o->shape); });
  cls.def("reshape_as", [](const Tensor& a, const Tensor& o) { return reshape(a, o->shape); });
  def_both(m, cls, "flatten", [](const Tensor& a, int64_t s, int64_t e) { return flatten(a, s, e); }, arg("input"),
           arg("start_dim") = 0, arg("end_dim") = -1);
  def_both(m, cls, "transpose", [](const Tensor& a, int64_t d0, int64_t d1) { return transpose(a, d0, d1); },
           arg("input"), arg("dim0"), arg("dim1"));
  def_both(m, cls, "swapaxes", [](const Tensor& a, int64_t d0, int64_t d1) { return transpose(a, d0, d1); });
  def_both(m, cls, "t", [](const Tensor& a) {
    DG_CHECK(a->ndim() <= 2, RuntimeError, "t: expects a tensor with <= 2 dimensions, got shape ",
             shape_str(a->shape), "; use transpose or mT.");
    return a->ndim() < 2 ? a : transpose(a, 0, 1);
  });
  m.def("permute", [](const Tensor& a, py::handle dims) { return permute(a, parse_shape(dims, "permute")); });
  cls.def("permute", [](const Tensor& a, py::args dims) { return permute(a, parse_shape_args(dims, "permute")); });
  def_both(m, cls, "squeeze", [](const Tensor& a, py::handle dim) {
    if (!dim || dim.is_none()) return squeeze(a, std::nullopt);
    return squeeze(a, parse_dims(dim, "squeeze"));
  }, arg("input"), arg("dim") = none);
  def_both(m, cls, "unsqueeze", [](const Tensor& a, int64_t d) { return unsqueeze(a, d); }, arg("input"), arg("dim"));
  cls.def("expand", [](const Tensor& a, py::args sizes) { return expand(a, parse_shape_args(sizes, "expand")); });
  cls.def("expand_as", [](const Tensor& a, const Tensor& o) { return expand(a, o->shape); });
  m.def("broadcast_to", [](const Tensor& a, py::handle shape) { return expand(a, parse_shape(shape, "broadcast_to")); });
  auto cat_fn = [](const std::vector<Tensor>& ts, int64_t dim) { return cat(ts, dim); };
  m.def("cat", cat_fn, arg("tensors"), arg("dim") = 0);
  m.def("concat", cat_fn, arg("tensors"), arg("dim") = 0);
  m.def("stack", [](const std::vector<Tensor>& ts, int64_t dim) { return stack(ts, dim); }, arg("tensors"),
        arg("dim") = 0);
  def_both(m, cls, "split", [](const Tensor& a, py::handle split, int64_t dim) {
    std::vector<Tensor> parts = PyLong_Check(split.ptr()) ? split_size(a, split.cast<int64_t>(), dim)
                                                          : dyngrad::split(a, parse_shape(split, "split"), dim);
    return py::tuple(py::cast(parts));
  }, arg("tensor"), arg("split_size_or_sections"), arg("dim") = 0);
  def_both(m, cls, "chunk", [](const Tensor& a, int64_t chunks, int64_t dim) {
    return py::tuple(py::cast(chunk(a, chunks, dim)));
  }, arg("input"), arg("chunks"), arg("dim") = 0);
  def_both(m, cls, "unbind", [](const Tensor& a, int64_t dim) {
    int64_t d = wrap_dim(dim, a->ndim(), "unbind");
    std::vector<Tensor> parts;
    for (int64_t i = 0; i < a->shape[d]; ++i) parts.push_back(select(a, d, i));
    return py::tuple(py::cast(parts));
  }, arg("input"), arg("dim") = 0);
  def_both(m, cls, "narrow", [](const Tensor& a, int64_t dim, int64_t start, int64_t length) {
    return slice(a, dim, start, start + length, 1);
  });
  def_both(m, cls, "select", [](const Tensor& a, int64_t dim, int64_t index) { return select(a, dim, index); });

  // ---- indexing ----
  def_both(m, cls, "gather", [](const Tensor& a, int64_t dim, const Tensor& index) { return gather(a, dim, index); },
           arg("input"), arg("dim"), arg("index"));
  def_both(m, cls, "index_select", [](const Tensor& a, int64_t dim, const Tensor& index) {
    return index_select(a, dim, index);
  }, arg("input"), arg("dim"), arg("index"));
  def_both(m, cls, "take", [](const Tensor& a, const Tensor& index) {
    Tensor idx = index;
    if (a->numel > 0) idx = add(index, mul(scalar_tensor(a->numel, DType::Int64),
                                           to_dtype(compare(CompareOp::Lt, index, scalar_tensor(0, DType::Int64)), DType::Int64)));
    return take(a, idx);
  }, arg("input"), arg("index"));
  def_both(m, cls, "masked_fill", [](const Tensor& a, const Tensor& mask, py::handle value) {
    return masked_fill(a, mask, as_operand_or_throw(value, &a, "masked_fill"));
  }, arg("input"), arg("mask"), arg("value"));

  // ---- neural-net ops (also re-exported by dyngrad.nn.functional) ----
  def_both(m, cls, "softmax", [](const Tensor& a, int64_t dim, py::handle dtype) {
    auto dt = parse_optional_dtype(dtype);
    return softmax(dt ? to_dtype(a, *dt) : a, dim);
  }, arg("input"), arg("dim"), arg("dtype") = none);
  def_both(m, cls, "log_softmax", [](const Tensor& a, int64_t dim, py::handle dtype) {
    auto dt = parse_optional_dtype(dtype);
    return log_softmax(dt ? to_dtype(a, *dt) : a, dim);
  }, arg("input"), arg("dim"), arg("dtype") = none);
  m.def("cross_entropy", [](const Tensor& input, const Tensor& target, py::handle weight, int64_t ignore_index,
                            const std::string& reduction, double label_smoothing) {
    DG_CHECK(weight.is_none(), NotImplementedError, "cross_entropy: class weights are not supported yet.");
    DG_CHECK(label_smoothing >= 0 && label_smoothing <= 1, ValueError,
             "cross_entropy: label_smoothing must be in [0, 1], got ", label_smoothing, ".");
    if (target->dtype != DType::Int64 && is_floating(target->dtype) && target->shape == input->shape) {
      // class probabilities as target: -(target * log_softmax).sum(1)
      int64_t code = reduction_code(reduction, "cross_entropy");
      Tensor l = neg(sum(mul(target, log_softmax(input, input->ndim() > 1 ? 1 : 0)), Dims{input->ndim() > 1 ? 1 : 0}, false));
      return reduce_loss(l, code);
    }
    if (input->ndim() > 2 && target->ndim() == input->ndim() - 1) {
      // (N, C, d1, ...) logits with (N, d1, ...) targets: classes moved last, one row per position
      const int64_t c = input->shape[1];
      Dims perm{0};
      for (int64_t d = 2; d < input->ndim(); ++d) perm.push_back(d);
      perm.push_back(1);
      int64_t code = reduction_code(reduction, "cross_entropy");
      Tensor rows = reshape(permute(input, perm), {-1, c});
      Tensor l = cross_entropy(rows, reshape(target, {-1}), code, ignore_index, label_smoothing);
      return code == 0 ? reshape(l, target->shape) : l;
    }
    return cross_entropy(input, target, reduction_code(reduction, "cross_entropy"), ignore_index, label_smoothing);
  }, arg("input"), arg("target"), arg("weight") = none, arg("ignore_index") = -100, arg("reduction") = "mean",
     arg("label_smoothing") = 0.0);
  m.def("nll_loss", [](const Tensor& input, const Tensor& target, py::handle weight, int64_t ignore_index,
                       const std::string& reduction) {
    DG_CHECK(weight.is_none(), NotImplementedError, "nll_loss: class weights are not supported yet.");
    DG_CHECK(input->ndim() == 2 && target->ndim() == 1 && target->shape[0] == input->shape[0], RuntimeError,
             "nll_loss: expected input (N, C) and target (N,), got ", shape_str(input->shape), " and ",
             shape_str(target->shape), ".");
    DG_CHECK(target->dtype == DType::Int64, RuntimeError, "nll_loss: expected int64 class indices as target, got ",
             dtype_name(target->dtype), ".");
    int64_t code = reduction_code(reduction, "nll_loss");
    Tensor keep = compare(CompareOp::Ne, target, scalar_tensor((double)ignore_index, DType::Int64));
    Tensor safe_t = where(keep, target, scalar_tensor(0, DType::Int64));
    Tensor picked = squeeze(gather(input, 1, unsqueeze(safe_t, 1)), Dims{1});
    Tensor keepf = to_dtype(keep, input->dtype);
    Tensor losses = neg(mul(picked, keepf));
    if (code == 1) return div(sum(losses, {}, false), sum(keepf, {}, false));
    return reduce_loss(losses, code);
  }, arg("input"), arg("target"), arg("weight") = none, arg("ignore_index") = -100, arg("reduction") = "mean");
  m.def("mse_loss", [](const Tensor& input, const Tensor& target, const std::string& reduction) {
    Tensor d = sub(input, target);
    return reduce_loss(mul(d, d), reduction_code(reduction, "mse_loss"));
  }, arg("input"), arg("target"), arg("reduction") = "mean");
  m.def("binary_cross_entropy_with_logits", [](const Tensor& x, const Tensor& y, py::handle weight,
                                               const std::string& reduction, py::handle pos_weight) {
    DG_CHECK(pos_weight.is_none(), NotImplementedError,
             "binary_cross_entropy_with_logits: pos_weight is not supported yet.");
    DG_CHECK(x->shape == y->shape, ValueError, "binary_cross_entropy_with_logits: target size ", shape_str(y->shape),
             " must be the same as input size ", shape_str(x->shape), ".");  // torch does not broadcast here
    // loss = x - x*y + log(1 + exp(-x)), with softplus keeping exp from overflowing
    Tensor l = add(sub(x, mul(x, y)), softplus(neg(x), 1.0, 20.0));
    if (!weight.is_none()) l = mul(l, as_operand_or_throw(weight, &x, "binary_cross_entropy_with_logits"));
    return reduce_loss(l, reduction_code(reduction, "binary_cross_entropy_with_logits"));
  }, arg("input"), arg("target"), arg("weight") = none, arg("reduction") = "mean", arg("pos_weight") = none);
  m.def("linear", [](const Tensor& x, const Tensor& w, std::optional<Tensor> b) {
    DG_CHECK(w->ndim() == 2 || w->ndim() == 1, RuntimeError, "linear: weight must be 1-D or 2-D, got shape ",
             shape_str(w->shape), ".");
    Tensor out = matmul(x, w->ndim() == 2 ? mT(w) : w);
    return b ? add(out, *b) : out;
  }, arg("input"), arg("weight"), arg("bias") = none);
  m.def("embedding", [](const Tensor& input, const Tensor& weight, py::handle padding_idx) {
    DG_CHECK(weight->ndim() == 2, RuntimeError, "embedding: weight must be 2-D (num_embeddings, dim), got ",
             shape_str(weight->shape), ".");
    DG_CHECK(input->dtype == DType::Int64, IndexError, "embedding: indices must be int64, got ",
             dtype_name(input->dtype), ".");
    {
      Tensor idx = contiguous_data(input);
      for (int64_t i = 0; i < idx->numel; ++i) {
        int64_t v = idx->data<int64_t>()[i];
        DG_CHECK(v >= 0 && v < weight->shape[0], IndexError, "embedding: index ", v,
                 " is out of range for dimension 0 of size ", weight->shape[0], ".");
      }
    }
    Tensor rows = index_select(weight, 0, reshape(input, {input->numel}));
    if (!padding_idx.is_none()) {  // the padding row gets no gradient
      Tensor keep = compare(CompareOp::Ne, reshape(input, {input->numel, 1}),
                            scalar_tensor((double)padding_idx.cast<int64_t>(), DType::Int64));
      rows = where(keep, rows, alias(rows));
    }
    Shape shape = input->shape;
    shape.push_back(weight->shape[1]);
    return reshape(rows, shape);
  }, arg("input"), arg("weight"), arg("padding_idx") = none);
  m.def("dropout", [](const Tensor& x, double p, bool training) {
    DG_CHECK(p >= 0 && p <= 1, ValueError, "dropout: probability must be in [0, 1], got ", p, ".");
    if (!training || p == 0) return x;
    if (p == 1) return mul(x, scalar_tensor(0, x->dtype));
    Tensor mask = bernoulli_mask(x->shape, 1 - p, x->dtype);
    return mul(x, mul(mask, scalar_tensor(1.0 / (1 - p), x->dtype)));
  }, arg("input"), arg("p") = 0.5, arg("training") = true);
  m.def("one_hot", [](const Tensor& t, int64_t num_classes) {
    DG_CHECK(t->dtype == DType::Int64, RuntimeError, "one_hot: expected an int64 tensor of class indices, got ",
             dtype_name(t->dtype), ".");
    Tensor idx = contiguous_data(t);
    const int64_t* p = idx->data<int64_t>();
    int64_t n = num_classes;
    if (n < 0) {
      DG_CHECK(idx->numel > 0, RuntimeError, "one_hot: cannot infer num_classes from an empty tensor.");
      for (int64_t i = 0; i < idx->numel; ++i) n = std::max(n, p[i] + 1);
    }
    Shape shape = t->shape;
    shape.push_back(n);
    Tensor out = zeros(shape, DType::Int64);
    for (int64_t i = 0; i < idx->numel; ++i) {
      DG_CHECK(p[i] >= 0 && p[i] < n, RuntimeError, "one_hot: class index ", p[i], " is out of range for ", n,
               " classes.");
      out->data<int64_t>()[i * n + p[i]] = 1;
    }
    return out;
  }, arg("tensor"), arg("num_classes") = -1);
  m.def("conv2d", [](const Tensor& x, const Tensor& w, std::optional<Tensor> b, py::handle stride, py::handle padding,
                     py::handle dilation, int64_t groups) {
    auto [sh, sw] = pair_arg(stride, "conv2d", "stride");
    auto [ph, pw] = pair_arg(padding, "conv2d", "padding");
    auto [dh, dw] = pair_arg(dilation, "conv2d", "dilation");
    DG_CHECK(dh == 1 && dw == 1 && groups == 1, NotImplementedError,
             "conv2d: dilation and groups other than 1 are not supported yet.");
    return conv2d(x, w, b ? &*b : nullptr, sh, sw, ph, pw);
  }, arg("input"), arg("weight"), arg("bias") = none, arg("stride") = 1, arg("padding") = 0, arg("dilation") = 1,
     arg("groups") = 1);
  auto pool = [](bool is_max) {
    return [is_max](const Tensor& x, py::handle kernel_size, py::handle stride, py::handle padding) {
      const char* op = is_max ? "max_pool2d" : "avg_pool2d";
      auto [kh, kw] = pair_arg(kernel_size, op, "kernel_size");
      auto [sh, sw] = stride.is_none() ? std::make_pair(kh, kw) : pair_arg(stride, op, "stride");
      auto [ph, pw] = pair_arg(padding, op, "padding");
      return is_max ? max_pool2d(x, kh, kw, sh, sw, ph, pw) : avg_pool2d(x, kh, kw, sh, sw, ph, pw);
    };
  };
  m.def("max_pool2d", pool(true), arg("input"), arg("kernel_size"), arg("stride") = none, arg("padding") = 0);
  m.def("avg_pool2d", pool(false), arg("input"), arg("kernel_size"), arg("stride") = none, arg("padding") = 0);
  m.def("layer_norm", [](const Tensor& x, py::handle normalized_shape, std::optional<Tensor> w,
                         std::optional<Tensor> b, double eps) {
    Shape ns = parse_shape(normalized_shape, "layer_norm");
    const int64_t k = (int64_t)ns.size();
    // () would make `dims` empty, which mean() reads as "all dims": torch refuses it
    DG_CHECK(k >= 1, RuntimeError, "layer_norm: normalized_shape must have at least one dim, got ().");
    DG_CHECK(k <= x->ndim() && Shape(x->shape.end() - k, x->shape.end()) == ns, RuntimeError,
             "layer_norm: normalized_shape ", shape_str(ns), " does not match the last dims of the input shape ",
             shape_str(x->shape), ".");
    Dims dims;
    for (int64_t d = x->ndim() - k; d < x->ndim(); ++d) dims.push_back(d);
    Tensor mu = mean(x, dims, true);
    Tensor centered = sub(x, mu);
    Tensor v = mean(mul(centered, centered), dims, true);
    Tensor y = mul(centered, rsqrt(add(v, scalar_tensor(eps, x->dtype))));
    if (w) y = mul(y, *w);
    if (b) y = add(y, *b);
    return y;
  }, arg("input"), arg("normalized_shape"), arg("weight") = none, arg("bias") = none, arg("eps") = 1e-5);
  m.def("_im2col", [](const Tensor& x, int64_t kh, int64_t kw, int64_t sh, int64_t sw, int64_t ph, int64_t pw) {
    return unfold(x, kh, kw, sh, sw, ph, pw);
  });
}

}  // namespace dyngrad
