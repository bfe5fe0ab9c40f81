// replay_fuse.cpp: fused groups of steps in a static replay (issue 20: "fusion of chains of elementwise ops ...
// each measured and kept only where it pays"; docs/compile.md).
//
// Note [Fused steps]: while recording, every fast path defers to its Python definition (Note [Fast paths while
// capturing] in fast_paths.cpp), so an in-place update records its general path: `p.add_(g, alpha=-lr)` under
// no_grad is inplace_input, scalar_operand, mul (g * alpha), add (p + that) and assign_inplace (the sum copied into
// p), two full-size temporaries and three passes over memory where eager mode's fast path makes one pass into p
// (Note [In-place arithmetic without a temporary] in inplace.cpp). An optimiser step is a chain of these per
// parameter. This pass finds, in a recorded program, the groups
//   scaled:  mul(g, c) -> m; add(b, m) -> a; assign_inplace(b, a, op)     c a 0-d wrapped number (alpha)
//   binary:  add|sub|mul|div(b, o) -> a; assign_inplace(b, a, op)
// whose intermediates (m, a) no other step reads and the call does not return, and runs each as the call eager
// mode's fast path makes, binary_inplace_without_graph: the same arithmetic per element (k_mul then k_add, never
// contracted into a fused multiply-add), so the results are bitwise the recorded steps' and eager mode's, and the
// same version bump. That function declines (returns false, having written nothing) wherever eager mode's fast path
// would fall back: a graph to record (grad mode on and a tensor requiring grad), tangents, another dtype than
// float32/float64 or mixed dtypes, operands that overlap, no broadcast into b, a non-contiguous scaled update. Then
// the loop runs the recorded steps as before. No group is made before a planned backward (there the forward runs
// without a graph and the plan may read the slots), so only steps after it (the optimiser's) and programs without a
// plan have groups.
//
// The skipped results are not made. A run that goes back to Python after a group ran (a value guard missed: the
// catch-up serves every earlier step's result, and a sibling variant may read the slots) gets them made first
// (fuse_restore, from _ReplayProgram.materialize): a is a copy of b as the group left it, m is mul(g, c) again, each
// equal to what the recorded step returned. (Every caller of assign_inplace in dyngrad's Python hands it a
// temporary of its own, and m is add's alpha product inside the in-place method: a user's own `u = g * c` is
// recorded before the method's inplace_input, so it is not one step before the add and forms no group.) That holds
// while b and g are unwritten since the group ran: a later group that writes the same memory (a second update of
// one parameter) makes the earlier group's results first; any other step that writes them before such a miss makes
// the miss raise a RuntimeError naming the step instead of serving a wrong value (no known program does this;
// every replay that does not miss is as eager mode).
//
// Note [Results into a dead operand]: the planned forward (Note [The backward as a recorded program]) runs its
// steps without a graph, and each binary step allocates its result: a bias add after a product (x @ w + b), a
// residual add, the difference before a squared error, 0.5-2 MiB each in the transformer block, fresh memory the
// kernel writes while the operand it read is never read again. Where the first operand is such a value, the step
// computes into its memory instead: binary_into_kernel, the same binary_typed loop as the step's own kernel
// (eager mode's in-place fast path), so the same bits; the result takes the operand's tensor, which leaves its
// slot. Made for a binary add/sub/mul/div before the planned backward whose first operand only this step reads,
// that the call does not return and the plan does not read (a saved tensor: layer norm's input, a product's
// operands), and only where no later step can go back to Python (no value guard but the values that follow from
// the entry guard and the recorded steps, no step Python runs or compares): a catch-up after a miss would be
// served the operand, whose values are gone. At each run the operand must be the slot's own C++ value, held by
// nothing else (its tensor and its storage have no other owner: no view, no Python object, no node's saved
// tensor), contiguous, float32 or float64 of the other operand's dtype, with the other operand broadcasting to its
// shape, no overlap, no tangents, at least 1024 elements, and grad mode off (the planned forward); otherwise the
// step runs as recorded.
//
// What does not pay, measured (bench/static_profile.py, Intel Xeon family 6 model 167, 2 cores, KVM; docs): one
// loop for a chain of elementwise ops in the forward. In the transformer block the chains end in ops whose
// backward reads their input (GELU, layer norm, the squared error), so each intermediate must be written anyway,
// and the products are ~70% of the step.
#include "replay_fuse.h"

#include <cstdlib>
#include <unordered_map>
#include <unordered_set>

#include "dyngrad/forward_ad.h"
#include "dyngrad/grad_mode.h"
#include "dyngrad/kernels/kernels.h"

namespace dyngrad {

namespace {
bool g_fusion_on = true;  // _C._set_replay_fusion
constexpr int64_t kIntoMinElements = 1024;  // Note [Results into a dead operand]: smaller results are made as usual
}  // namespace

struct FusePlan {
  struct Group {
    bool scaled = false;
    bool into = false;           // Note [Results into a dead operand]: op(a, o) -> out, computed in a's memory
    BinaryKind kind = BinaryKind::Add;
    size_t first = 0, last = 0;  // step indices
    int64_t x = -1, y = -1;      // scaled: mul's operands (one is the 0-d alpha); binary: b, o
    int64_t b = -1;              // the tensor written
    int64_t m = -1, a = -1;      // the skipped results: mul's (scaled), the op's; into: the dead operand
    int64_t out = -1;            // into: the op's result slot
    std::string op;              // assign_inplace's op name (errors)
    // this run: g and c (scaled), and the versions of b and g after the group ran
    int64_t g = -1, c = -1;
    uint64_t b_version = 0, g_version = 0;
  };
  std::vector<Group> groups;
  std::vector<int32_t> at;   // per step: the group starting there, or -1
  std::vector<size_t> ran;   // groups that ran fused in this run
  int64_t runs = 0;
};

bool is_c_function(PyObject* fn, const char* name) {
  static PyObject* module = [] {
    PyObject* m = PyImport_ImportModule("dyngrad._C");
    if (!m) PyErr_Clear();
    return m;  // kept for good
  }();
  if (!module) return false;
  PyObject* f = PyObject_GetAttrString(module, name);
  if (!f) {
    PyErr_Clear();
    return false;
  }
  const bool same = stand_in_target(f) == fn;  // the function behind the recorder's stand-in (fast_paths.cpp)
  Py_DECREF(f);
  return same;
}

namespace {

bool binary_of(const std::string& name, BinaryKind& k) {
  if (name == "add") k = BinaryKind::Add;
  else if (name == "sub") k = BinaryKind::Sub;
  else if (name == "mul") k = BinaryKind::Mul;
  else if (name == "div") k = BinaryKind::Div;
  else return false;
  return true;
}

// assign_inplace(b, a, "op") with b and a slots and a constant str: its op name, or false
bool assign_of(const FuseStepInfo& s, int64_t b, int64_t a, std::string& op) {
  if (*s.name != "assign_inplace" || s.out != -3 || s.slots->size() != 3) return false;
  if ((*s.slots)[0] != b || (*s.slots)[1] != a || (*s.slots)[2] >= 0) return false;
  PyObject* name = (*s.consts)[2].ptr();
  if (!PyUnicode_Check(name) || !is_c_function(s.fn, "assign_inplace")) return false;
  op = py::reinterpret_borrow<py::str>(name).cast<std::string>();
  return true;
}

// Note [Results into a dead operand]: whether the loop can go back to Python at this step (then the catch-up reads
// every earlier result): a value other than those that follow from the entry guard and the recorded steps, a step
// Python runs or compares, a None from a function that may return something else.
bool may_hand_back(const FuseStepInfo& s) {
  static const std::unordered_set<std::string> kNoneOnly = {
      "_set_grad_enabled", "grad.set", "validate", "set_grad_enabled", "assign_inplace", "copy_", "fill_", "zero_",
      "_sgd_step", "_adam_step", "_adagrad_step", "_rmsprop_step", "_run_backward"};
  static const std::unordered_set<std::string> kFollows = {"is_grad_enabled", "_get_default_dtype", "result_type",
                                                           "promote_types", "requires_grad"};
  if (s.out == -1 || s.out == -2) return true;
  if (s.out == -3) return !kNoneOnly.count(*s.name);
  if (s.out == -4) return !kFollows.count(*s.name);
  return false;  // a tensor (or a sequence of them): the recorded steps' functions return one
}

}  // namespace

std::shared_ptr<FusePlan> fuse_build(const std::vector<FuseStepInfo>& steps,
                                     const std::vector<std::vector<int64_t>>& reads,
                                     const std::vector<int64_t>& outputs, size_t plan_step,
                                     const std::vector<int64_t>& plan_reads) {
  if (!replay_fusion_on()) return nullptr;
  std::unordered_map<int64_t, int64_t> readers;  // slot -> how many step arguments read it
  for (const auto& r : reads)
    for (int64_t slot : r) readers[slot] += 1;
  for (int64_t slot : outputs) readers[slot] += 1000;  // the call returns it: never skipped
  auto read_once = [&](int64_t slot) { auto it = readers.find(slot); return it != readers.end() && it->second == 1; };
  auto plan = std::make_shared<FusePlan>();
  plan->at.assign(steps.size(), -1);
  // Note [Results into a dead operand]: the planned forward's binary steps whose first operand nothing reads after
  // them, where no later step can go back to Python
  if (plan_step != SIZE_MAX) {
    const std::unordered_set<int64_t> planned(plan_reads.begin(), plan_reads.end());
    size_t quiet = steps.size();  // every step from here on cannot go back to Python
    while (quiet > 0 && !may_hand_back(steps[quiet - 1])) --quiet;
    for (size_t i = quiet; i < plan_step && i < steps.size(); ++i) {
      const FuseStepInfo& s = steps[i];
      BinaryKind kind;
      if (!s.core || s.out < 0 || s.slots->size() != 2 || !binary_of(*s.name, kind)) continue;
      const int64_t a = (*s.slots)[0], o = (*s.slots)[1];
      if (a == o || a == s.out || !read_once(a) || planned.count(a)) continue;
      FusePlan::Group g;
      g.into = true;
      g.kind = kind;
      g.first = g.last = i;
      g.a = a;
      g.y = o;
      g.out = s.out;
      plan->at[i] = (int32_t)plan->groups.size();
      plan->groups.push_back(std::move(g));
    }
  }
  const size_t from = plan_step == SIZE_MAX ? 0 : plan_step + 1;
  for (size_t i = from; i + 1 < steps.size(); ++i) {
    const FuseStepInfo& s = steps[i];
    if (!s.core || s.out < 0 || s.slots->size() != 2) continue;
    BinaryKind kind;
    if (!binary_of(*s.name, kind)) continue;
    FusePlan::Group g;
    g.first = i;
    // scaled: mul(x, y) -> m; add(b, m) -> a; assign_inplace(b, a)
    if (kind == BinaryKind::Mul && i + 2 < steps.size()) {
      const FuseStepInfo& add = steps[i + 1];
      if (add.core && *add.name == "add" && add.out >= 0 && add.slots->size() == 2 && (*add.slots)[1] == s.out &&
          (*add.slots)[0] != s.out && read_once(s.out) && read_once(add.out) &&
          assign_of(steps[i + 2], (*add.slots)[0], add.out, g.op)) {
        g.scaled = true;
        g.x = (*s.slots)[0];
        g.y = (*s.slots)[1];
        g.m = s.out;
        g.b = (*add.slots)[0];
        g.a = add.out;
        g.last = i + 2;
        plan->at[i] = (int32_t)plan->groups.size();
        plan->groups.push_back(std::move(g));
        i += 2;
        continue;
      }
    }
    // binary: op(b, o) -> a; assign_inplace(b, a)
    if ((*s.slots)[0] != s.out && read_once(s.out) && assign_of(steps[i + 1], (*s.slots)[0], s.out, g.op)) {
      g.kind = kind;
      g.b = (*s.slots)[0];
      g.y = (*s.slots)[1];
      g.a = s.out;
      g.last = i + 1;
      plan->at[i] = (int32_t)plan->groups.size();
      plan->groups.push_back(std::move(g));
      i += 1;
    }
  }
  if (plan->groups.empty()) return nullptr;
  return plan;
}

namespace {

// Makes group k's skipped results into `values`, from b and g as the group left them.
void restore_group(const FusePlan::Group& g, std::vector<Tensor>& values, const SlotReader& slot) {
  GradModeGuard no_grad(false);  // (a group ran only where no graph was recorded)
  const Tensor* b = slot(g.b);
  DG_CHECK(b && *b && (*b)->version() == g.b_version, RuntimeError, "compile: step ", g.first, " of a static ",
           "replay ran fused (Note [Fused steps]), and its result cannot be served to Python after its tensor ",
           "was written again by another step. Please report this program; DYNGRAD_COMPILE_FUSE=0 runs it unfused.");
  if (g.a >= 0 && g.a < (int64_t)values.size() && !values[g.a]) values[g.a] = contiguous_copy(*b, (*b)->dtype);
  if (g.scaled && g.m >= 0 && g.m < (int64_t)values.size() && !values[g.m]) {
    const Tensor* grad = slot(g.g);
    const Tensor* c = slot(g.c);
    DG_CHECK(grad && c && *grad && *c && (*grad)->version() == g.g_version, RuntimeError, "compile: step ",
             g.first, " of a static replay ran fused (Note [Fused steps]), and its result cannot be served to ",
             "Python after its operand was written again by another step. Please report this program; ",
             "DYNGRAD_COMPILE_FUSE=0 runs it unfused.");
    values[g.m] = mul(*grad, *c);
  }
}

}  // namespace

void fuse_restore(FusePlan& f, std::vector<Tensor>& values, const SlotReader& slot) {
  for (size_t k : f.ran) restore_group(f.groups[k], values, slot);
  f.ran.clear();
}

bool replay_fusion_on() {
  static const bool env_on = [] {
    const char* v = std::getenv("DYNGRAD_COMPILE_FUSE");
    return !(v && std::string(v) == "0");
  }();
  return g_fusion_on && env_on;
}

size_t fuse_run(FusePlan& f, size_t i, std::vector<Tensor>& values, const SlotReader& slot, const SlotStore& store) {
  if (i >= f.at.size() || f.at[i] < 0) return SIZE_MAX;
  FusePlan::Group& g = f.groups[f.at[i]];
  if (g.into) {  // Note [Results into a dead operand]
    if (GradMode::is_enabled() || forward_ad::active()) return SIZE_MAX;
    if (g.a >= (int64_t)values.size() || !values[g.a]) return SIZE_MAX;  // (an argument, an external: Python's)
    Tensor& a = values[g.a];
    const Tensor* o = slot(g.y);
    if (!o || !*o || a.use_count() != 1 || a->storage.use_count() != 1 || a->storage == (*o)->storage) return SIZE_MAX;
    const DType dt = a->dtype;
    // (a small result comes from the thread's free lists at no cost, and a program of one-element values is
    // Note [Scalar replay]'s, which reads every slot after a planned run)
    if (a->numel < kIntoMinElements) return SIZE_MAX;
    if ((dt != DType::Float32 && dt != DType::Float64) || (*o)->dtype != dt || !a->is_contiguous()) return SIZE_MAX;
    if (a->requires_grad || a->grad_fn || !a->tangents.empty() || !(*o)->tangents.empty() || a->wrapped_number)
      return SIZE_MAX;
    if ((*o)->ndim() > a->ndim()) return SIZE_MAX;
    for (int64_t d = 1; d <= (*o)->ndim(); ++d) {  // o broadcasts to a's shape: the result has a's shape
      const int64_t od = (*o)->shape[(*o)->ndim() - d];
      if (od != 1 && od != a->shape[a->ndim() - d]) return SIZE_MAX;
    }
    binary_into_kernel(g.kind, a, *o);
    Tensor r = std::move(a);
    a = Tensor();
    store(g.out, std::move(r));
    ++f.runs;
    return g.last;
  }
  const Tensor* b = slot(g.b);
  if (!b || !*b) return SIZE_MAX;
  // a group that ran earlier in this run and whose b or g this one writes (a second update of one tensor): its
  // results are made now, while they can be (fuse_restore)
  for (size_t r = 0; r < f.ran.size();) {
    const FusePlan::Group& earlier = f.groups[f.ran[r]];
    const Tensor* eb = slot(earlier.b);
    const Tensor* eg = earlier.scaled ? slot(earlier.g) : nullptr;
    if ((eb && *eb && (*eb)->storage == (*b)->storage) || (eg && *eg && (*eg)->storage == (*b)->storage)) {
      restore_group(earlier, values, slot);
      f.ran.erase(f.ran.begin() + (std::ptrdiff_t)r);
    } else {
      ++r;
    }
  }
  if (g.scaled) {
    const Tensor* x = slot(g.x);
    const Tensor* y = slot(g.y);
    if (!x || !y || !*x || !*y) return SIZE_MAX;
    // the 0-d number is alpha (mul is commutative to the bit), the other operand the tensor added
    const bool y_alpha = (*y)->ndim() == 0 && (*y)->wrapped_number;
    const Tensor& c = y_alpha ? *y : *x;
    const Tensor& grad = y_alpha ? *x : *y;
    if (c->ndim() != 0 || !c->wrapped_number || c->dtype != grad->dtype || c->storage == grad->storage) return SIZE_MAX;
    double alpha;
    if (c->dtype == DType::Float32) alpha = (double)c->data<float>()[0];
    else if (c->dtype == DType::Float64) alpha = c->data<double>()[0];
    else return SIZE_MAX;
    if (!binary_inplace_without_graph(BinaryKind::Add, *b, grad, &alpha, g.op.c_str())) return SIZE_MAX;
    g.g = y_alpha ? g.x : g.y;
    g.c = y_alpha ? g.y : g.x;
    g.g_version = grad->version();
  } else {
    const Tensor* o = slot(g.y);
    if (!o || !*o) return SIZE_MAX;
    if (!binary_inplace_without_graph(g.kind, *b, *o, nullptr, g.op.c_str())) return SIZE_MAX;
  }
  g.b_version = (*b)->version();
  f.ran.push_back((size_t)f.at[i]);
  ++f.runs;
  return g.last;
}

void fuse_end_run(FusePlan& f) { f.ran.clear(); }
int64_t fuse_groups(const FusePlan* f) { return f ? (int64_t)f->groups.size() : 0; }
int64_t fuse_runs(const FusePlan* f) { return f ? f->runs : 0; }

void bind_replay_fuse(py::module_& m) {
  // Note [Fused steps]: on for programs built afterwards (the default), or off
  m.def("_set_replay_fusion", [](bool on) {
    const bool was = g_fusion_on;
    g_fusion_on = on;
    return was;
  }, py::arg("on"), "fused groups of steps in static replay (Note [Fused steps]) for programs built afterwards; "
                    "returns the previous setting");
}

}  // namespace dyngrad
