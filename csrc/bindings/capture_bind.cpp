// capture_bind.cpp: the replay loop of dyngrad.compile's static replay (python/dyngrad/_api/capture.py).
//
// Note [Replaying steps in C++]: a recorded variant is a list of calls of _C functions whose arguments are slots
// (earlier results, the call's arguments, externals) or constants. Run from Python, each step costs about 1 us of
// interpreter work around the call (reading the slots, building the call, storing the result). This loop makes
// the same calls with CPython's vectorcall from a fixed argument vector and stores each tensor result in its
// slot, returning to Python only at a step whose result must be compared (a value guard) or is not the tensor the
// recording expects, or at a step whose call Python must build (a tuple of tensors, keywords). It changes nothing
// the steps do; the reference engine's twin is reference/_C.py's
// _ReplayProgram, the same loop in Python.
//
// A step of a one- or two-tensor primitive of ops.def (signatures unary, unary_float, unary_backward, binary,
// binary_tensors) whose arguments are all slots calls the core function itself, as its binding would, without
// pybind11's dispatcher (about half a microsecond per call): the table comes from ops.def, so a new primitive of
// those signatures replays this way with no code of its own.
#include <algorithm>
#include <cstring>
#include <ctime>
#include <memory>
#include <optional>
#include <tuple>
#include <string>
#include <unordered_map>

#include "common.h"
#include "dyngrad/cycles.h"
#include "dyngrad/forward_ad.h"
#include "dyngrad/grad_mode.h"
#include "dyngrad/kernels/scalar.h"
#include "dyngrad/optim.h"
#include "replay_backward.h"
#include "replay_fuse.h"

namespace dyngrad {

namespace {

constexpr size_t kMaxStepArgs = 16;
// Note [Results compared in the loop]: a step that returns None (a setter, grad-mode switch, backward, optimiser
// step, value check) or a plain Python value (bool/int/float/str: is_grad_enabled, a guard's item()) is compared
// here instead of in Python; measured on the MLP training step, 10 of its 30 steps returned such results, which
// kept the whole program out of this loop (Variant.native: more than one step in 8 handed back).
constexpr int64_t kNone = -3, kValue = -4;
// Note [Sequence results in the loop]: a step returning a tuple or list of tensors (split, chunk, unbind) each
// into its own slot (Step::out_slots) was a round trip to Python at every replay; kSeq stores them here.
constexpr int64_t kSeq = -5;
// Note [Gradient steps in the loop]: reading a parameter's .grad and setting it to None (zero_grad, an optimiser's
// reads) were 14 of the MLP training step's 30 steps, each a call of the property's pybind11 accessor. A step whose
// function is _C.Tensor's own grad getter (or setter, with the constant None) reads (clears) the field here; a grad
// that is None, or a non-leaf's (whose getter warns), takes the accessor's call as before.
// Note [Target checks in the loop]: cross_entropy's check of its class targets (loss._check_target_range, through
// bridge.validate: Note [Checks of values replay as checks]) made a numpy view of the targets and ran three numpy
// comparisons at every replay, ~6 us of a ~50 us MLP training step (Intel Xeon, lscpu family 6 model 167, 2 cores,
// KVM). A step that is that check on an int64 tensor scans the targets here: every target is ignore_index or in
// [0, classes), as the check asks. Any other case, and a target out of range, takes the check's own call (which
// raises its error).
// Note [Grad mode steps in the loop]: is_grad_enabled() compared with its recorded value and _set_grad_enabled(b)
// with a constant, when the step's function is _C's own, are read and set here (a pybind11 call each, three per MLP
// training step); cross_entropy with constant reduction, ignore_index and label_smoothing calls the core function
// as its binding does (Special::cross_entropy).
// Note [Optimiser steps in the loop]: a fused optimiser step (_sgd_step, _adam_step) was a vectorcall through
// pybind11's dispatcher, which converts each list of tensors into a vector (and each number) at every replay: ~3 us
// of the ~36 us static MLP training step, whose SGD kernel itself is a few hundred ns (Intel Xeon, lscpu family 6
// model 167, 2 cores, KVM). A step that is _C's own function, whose tensor lists are lists of slots (or constant
// empty lists), whose numbers and flags are constants, calls the core function here with vectors of the slots'
// tensors; any other case takes the call as before.
struct OptimSpec {
  bool adam = false;
  std::vector<int> tensor_args;  // the arguments that are lists of tensors
  std::vector<double> numbers;   // lr, momentum, ... in the binding's order
  std::vector<char> flags;
  std::vector<bool> fresh;       // _sgd_step's fresh flags
};
enum class Special : char {
  none, read_grad, clear_grad, target_range, grad_enabled, set_grad_enabled, cross_entropy, optim
};
PyObject* g_module = nullptr;  // _C, whose own functions those steps must call (bind_capture; never released)
PyObject* g_target_range_check = nullptr;  // loss._check_target_range, registered by capture.py (never released)

bool targets_in_range(const Tensor& t, int64_t classes, int64_t ignore) {
  if (t->dtype != DType::Int64 || !t->is_contiguous()) return false;
  const int64_t* v = t->data<int64_t>();
  bool ok = true;
  for (int64_t i = 0; i < t->numel; ++i) ok &= (v[i] == ignore) | ((v[i] >= 0) & (v[i] < classes));
  return ok;
}

// Note [Sequence arguments in the loop]: a backward (_run_backward's tuple of outputs) and an optimiser step
// (_sgd_step's lists of parameters and gradients) take tuples or lists of tensors; such a step was handed back to
// Python at every replay (a round trip of ~2 us each on an Intel Xeon, lscpu family 6 model 167, KVM; two per MLP
// training step). An argument that is a tuple or
// list of slots and plain constants, one level deep, is built here from the slots at each call instead.
struct SeqArg {
  char kind = 0;                   // 0: not a sequence; 1: a tuple; 2: a list
  std::vector<int64_t> slots;      // per item: its slot, or -1 for the constant at the same position
  std::vector<py::object> consts;
};

using UnaryCore = Tensor (*)(const Tensor&);
using BinaryCore = Tensor (*)(const Tensor&, const Tensor&);
struct CoreCall {
  UnaryCore unary = nullptr;
  BinaryCore binary = nullptr;
};

// _C name -> the core function its binding calls (bindings/ops_bind.cpp's DG_BIND_* for the same signatures)
const std::unordered_map<std::string, CoreCall>& core_calls() {
  static const std::unordered_map<std::string, CoreCall> table = [] {
    std::unordered_map<std::string, CoreCall> t;
#define DG_CORE_unary(name) t[#name].unary = [](const Tensor& a) { return name(a); };
#define DG_CORE_unary_float(name) DG_CORE_unary(name)
#define DG_CORE_unary_backward(name) t[#name].binary = [](const Tensor& g, const Tensor& x) { return name(g, x); };
#define DG_CORE_binary(name) t[#name].binary = [](const Tensor& a, const Tensor& b) { return name(a, b); };
#define DG_CORE_binary_tensors(name) DG_CORE_binary(name)
#define DG_CORE_reduction(name)
#define DG_CORE_custom(name)
#define DG_OP(name, display, saves, signature, hot) DG_CORE_##signature(name)
#include "dyngrad/ops.def"
#undef DG_CORE_unary
#undef DG_CORE_unary_float
#undef DG_CORE_unary_backward
#undef DG_CORE_binary
#undef DG_CORE_binary_tensors
#undef DG_CORE_reduction
#undef DG_CORE_custom
    t["mT"].unary = [](const Tensor& a) { return mT(a); };  // _C.mT (ops_bind.cpp), a composite's core call
    return t;
  }();
  return table;
}

// Note [Scalar replay]: a static program whose every value is one float32 element (a chain of scalar arithmetic,
// the bench's 200 one-element ops) spends its replay in the tensors' machinery, not in arithmetic: an output
// allocated per op (~400 tensors per replay of the 200 ops), reference counts, the kernels' dispatch and set-up,
// a formula's tensors per node. Once a planned run (Note [The backward as a recorded program]) has shown that
// every step before the backward is one of add, sub, mul, div, neg, exp, tanh, sigmoid, relu (a core call, operands and
// result of one shape) or a full sum, and every value one float32 element, the program is kept as a list of those
// ops over one float per slot, and the plan's backward as the same formulas on floats (replay_backward.cpp,
// plan_scalar). A run takes it when the planned backward is usable (plan_usable) and every input slot (argument,
// external) holds a float32 tensor of its recorded shape; then it reads the inputs' values, computes every op with
// the kernels' own one-element code (Note [One-element kernels] in kernels/elementwise.cpp: the same bits as eager
// mode), sums each gradient in the plan's order, accumulates the leaves' .grad through accumulate_grad, and gives
// each output the program returns a fresh tensor (with the released grad_fn of Note [The backward as a recorded
// program]). The intermediates are floats: no tensor exists that a user could hold, so nothing is reused under
// anyone. A full sum runs the core's sum on a one-element buffer of the program's own (its rounding of a sum of
// one element is the kernel's). Otherwise the run goes as before; capture.SCALAR_REPLAY = False (or
// DYNGRAD_COMPILE_SCALAR=0) turns it off for programs built afterwards.
struct ScalarProgram {
  struct Op {
    char kind;  // 'u' unary, 'b' binary, 's' a full sum
    UnaryKind u = UnaryKind::Neg;
    BinaryKind b = BinaryKind::Add;
    int64_t out, x, y = -1;
    Tensor scratch;  // 's': the input buffer
  };
  std::vector<Op> ops;
  std::vector<std::pair<int64_t, Shape>> inputs, outputs;  // slots read but made by no step; slots returned
  std::shared_ptr<ScalarBackward> backward;
  std::vector<float> regs;
};

struct ReplayProgram {
  struct Step {
    py::object fn;
    std::vector<int64_t> slots;      // per argument: its slot, or -1 for the constant at the same position; for a
                                     // step Python runs (out == -2), the slots its call reads
    std::vector<py::object> consts;  // per argument: the constant (None where the argument is a slot)
    int64_t out;                     // the slot of a tensor result; -1: hand the result back to Python; -2: a step
                                     // Python runs itself (its call needs Python to build: nested arguments);
                                     // kNone / kValue: a result compared here (None; `expected`, same type and ==)
    CoreCall core;                   // set: call the core directly (every argument a slot holding a tensor)
    Special special;                 // Note [Gradient steps in the loop]
    std::vector<SeqArg> seqs;        // empty, or per argument (Note [Sequence arguments in the loop])
    py::object expected;             // the recorded value of a kValue step
    std::string name;                // the _C function's name (Note [The backward as a recorded program])
    std::vector<int64_t> out_slots;  // kSeq: the slot of each item of the result
    bool is_list = false;            // kSeq: a list, else a tuple
    int64_t classes = 0, ignore = 0;  // Special::target_range: the check's arguments; cross_entropy: reduction,
                                      // ignore_index
    double smoothing = 0;             // cross_entropy's label_smoothing
    bool flag = false;                // set_grad_enabled's mode
    std::shared_ptr<OptimSpec> optim;          // Special::optim: Note [Optimiser steps in the loop]
  };
  explicit ReplayProgram(py::handle tensor_type) : tensor_type((PyTypeObject*)tensor_type.ptr()) {}
  PyTypeObject* tensor_type;
  std::vector<Step> steps;
  // Note [Slots in C++]: a core step's result stays a C++ Tensor in `values` (no Python object, nothing for
  // Python's gc to count) unless `exported` says Python reads its slot (an output, a value guard's input, a step
  // Python runs); materialize() makes the Python object where one is needed. Cleared when a run ends.
  // Note [Slots live until the run ends]: every slot keeps its tensor to the end of the run, on purpose. Releasing
  // each at its last reader was tried (issue 20: the wide-MLP training step, 784-1024-1024-10, SGD, is 4-6% slower
  // static than eager) and did not pay: with the post-backward temporaries (lr * grad, the add before
  // assign_inplace, the grads read) and the forward's pre-activations the planned backward does not read released
  // at their last reader, static/eager was 0.93-0.97x against 0.92-0.96x without (bench/kernel_compile.py --blocks
  // 5 --only wide-mlp-train, 1 and 2 threads, 4 runs each, Intel Xeon, lscpu family 6 model 167, 2 cores, KVM,
  // load 2.7-4.3): noise. The gap is elsewhere: eager's p.add_(g, alpha=-lr) computes into p (fast_paths.cpp,
  // Note [In-place arithmetic without a temporary]), while the recording holds its general path, inplace_input,
  // mul, add, assign_inplace: two 4 MiB temporaries and a copy per weight, whatever their lifetime
  // (bench/sgd_inplace_paths.py, same machine, load 2.5: the step's six updates take 0.57 ms eagerly, 1.94 ms under
  // static replay, 1.89 ms as those calls issued eagerly; 1.4 ms of the ~38 ms step, most of the gap; since closed
  // by Note [Fused steps] in replay_fuse.cpp: 0.59 ms against eager's 0.575, static 0.99x eager). Early release
  // is also unsafe as the loop stands: a run that goes back to Python (a value guard's miss, a step Python runs)
  // needs every earlier step's result, for the served results of a catch-up (Note [Catching up after a miss] in
  // capture.py) and for a sibling variant's later steps, which may read a slot this variant never reads again;
  // nearly every step after the backward can go back (requires_grad and result_type guards per parameter).
  std::vector<Tensor> values;
  std::vector<char> exported;
  bool running = false;
  // Note [The backward as a recorded program] (replay_backward.cpp): the plan of step plan_step's backward; a run
  // takes it (plan_on) when plan_usable says so at its start. plan_dirty: a step that made a node when recorded
  // has run without one, so the run cannot go back to Python before the planned backward.
  std::shared_ptr<BackwardPlan> plan;
  PlanHeads plan_heads;
  size_t plan_step = SIZE_MAX;
  bool plan_on = false, plan_dirty = false, plan_ran = false;
  std::vector<char> makes_node;  // per step before plan_step: whether it made a node when recorded
  PlanHarvests plan_harvests;    // per step before plan_step: Note [Saved state no step returns]
  int64_t planned_runs = 0;
  // Note [Scalar replay]: the program on floats, once a planned run has shown every value is one float32 element
  std::vector<int64_t> output_slots;  // the slots the call returns (set_backward_plan)
  std::unique_ptr<ScalarProgram> scalar;
  int scalar_state = 0;  // 0: not tried yet; 1: `scalar` is built; -1: this program has none (or it is off)
  int64_t scalar_runs = 0;
  bool handed_back = false;  // this run went back to Python (a step Python runs, a result it compares)
  // Note [Profiling a replay]: set_profile(True) makes each run add the time of each step (and of the run's set-up:
  // the plan's check, the scalar program's) into step_ns (nanoseconds of the thread's CPU time, step i at i, the set-up
  // at steps.size()) and count the runs; profile() reads them. Off (the default) it costs one branch per step.
  bool profile = false;
  std::vector<int64_t> step_ns;
  int64_t profiled_runs = 0;
  std::shared_ptr<FusePlan> fused;  // Note [Fused steps] (replay_fuse.cpp): null when no group is fused

  void materialize(PyObject* list, int64_t slot) {
    if (slot < 0 || slot >= (int64_t)values.size() || !values[slot]) return;
    if (PyList_GET_ITEM(list, slot) != Py_None) return;
    PyList_SetItem(list, slot, py::cast(values[slot]).release().ptr());
  }
  void materialize_all(PyObject* list) {
    for (int64_t i = 0; i < (int64_t)values.size(); ++i) materialize(list, i);
  }
  void finish() {
    values.clear();
    running = false;
    if (plan) plan_drop_harvested(*plan);  // Note [Saved state no step returns]: a run that raised keeps no node
    if (fused) fuse_end_run(*fused);
    plan_on = plan_dirty = plan_ran = false;
  }
};

bool is_tensor(PyObject* o, PyTypeObject* type) {
  return Py_TYPE(o) == type || PyType_IsSubtype(Py_TYPE(o), type);
}

// A slot's tensor: the C++ value of Note [Slots in C++], else the Python object's; null if it holds no tensor.
const Tensor* slot_tensor(const ReplayProgram& p, PyObject* list, int64_t slot) {
  if (slot < (int64_t)p.values.size() && p.values[slot]) return &p.values[slot];
  return held_tensor(PyList_GET_ITEM(list, slot), p.tensor_type);
}

bool scalar_op_of(const std::string& name, char& kind, UnaryKind& u, BinaryKind& b, OpKind& op) {
  static const std::unordered_map<std::string, std::tuple<char, UnaryKind, BinaryKind, OpKind>> table = {
      {"add", {'b', UnaryKind::Neg, BinaryKind::Add, OpKind::add}},
      {"sub", {'b', UnaryKind::Neg, BinaryKind::Sub, OpKind::sub}},
      {"mul", {'b', UnaryKind::Neg, BinaryKind::Mul, OpKind::mul}},
      {"neg", {'u', UnaryKind::Neg, BinaryKind::Add, OpKind::neg}},
      {"exp", {'u', UnaryKind::Exp, BinaryKind::Add, OpKind::exp}},
      {"tanh", {'u', UnaryKind::Tanh, BinaryKind::Add, OpKind::tanh}},
      {"sigmoid", {'u', UnaryKind::Sigmoid, BinaryKind::Add, OpKind::sigmoid}},
      {"div", {'b', UnaryKind::Neg, BinaryKind::Div, OpKind::div}},
      {"relu", {'u', UnaryKind::Relu, BinaryKind::Add, OpKind::relu}},
  };
  auto it = table.find(name);
  if (it == table.end()) return false;
  std::tie(kind, u, b, op) = it->second;
  return true;
}

// Note [Scalar replay]: after a whole planned run, with every slot's tensor still at hand
void scalar_build(ReplayProgram& p, PyObject* list) {
  p.scalar_state = -1;
  // with a plan, the backward is the last step; without one (a forward-only program), no step is a backward
  const size_t forward_steps = p.plan ? p.plan_step : p.steps.size();
  if (p.plan && p.plan_step + 1 != p.steps.size()) return;
  const int64_t n_slots = PyList_GET_SIZE(list);
  auto sp = std::make_unique<ScalarProgram>();
  std::unordered_map<int64_t, std::tuple<OpKind, int64_t, int64_t>> producer;
  std::vector<char> made(n_slots, 0);
  auto scalar_tensor = [&](int64_t slot) -> const Tensor* {  // the slot's tensor if it is one float32 element
    if (slot < 0 || slot >= n_slots) return nullptr;
    const Tensor* t = slot_tensor(p, list, slot);
    return t && *t && (*t)->dtype == DType::Float32 && (*t)->numel == 1 ? t : nullptr;
  };
  auto note_input = [&](int64_t slot) -> bool {
    const Tensor* t = scalar_tensor(slot);
    if (!t) return false;
    if (!made[slot] && std::none_of(sp->inputs.begin(), sp->inputs.end(), [&](const auto& i) { return i.first == slot; }))
      sp->inputs.push_back({slot, (*t)->shape});
    return true;
  };
  for (size_t i = 0; i < forward_steps; ++i) {
    const ReplayProgram::Step& s = p.steps[i];
    if (s.out < 0 || s.out >= n_slots || made[s.out] || s.special != Special::none) return;
    ScalarProgram::Op op;
    OpKind kind;
    op.out = s.out;
    const Tensor* out = scalar_tensor(s.out);
    if (!out) return;
    if ((s.core.unary || s.core.binary) && scalar_op_of(s.name, op.kind, op.u, op.b, kind)) {
      if ((op.kind == 'b') != (s.core.binary != nullptr) || s.slots.size() != (op.kind == 'b' ? 2u : 1u)) return;
      for (int64_t slot : s.slots) {
        if (!note_input(slot)) return;
        if ((*scalar_tensor(slot))->shape != (*out)->shape) return;  // no broadcast: the gradients need no sum_to
      }
      op.x = s.slots[0];
      op.y = op.kind == 'b' ? s.slots[1] : -1;
    } else if (s.name == "sum" && s.slots.size() == 4 && s.slots[0] >= 0 && s.slots[1] < 0 && s.slots[2] < 0 &&
               s.slots[3] < 0 && PyTuple_Check(s.consts[1].ptr()) && PyTuple_GET_SIZE(s.consts[1].ptr()) == 0 &&
               s.consts[2].ptr() == Py_False && s.consts[3].is_none() && (*out)->ndim() == 0) {
      if (!note_input(s.slots[0])) return;
      op.kind = 's';
      kind = OpKind::sum;
      op.x = s.slots[0];
      op.scratch = empty((*scalar_tensor(op.x))->shape, DType::Float32);
    } else {
      return;
    }
    producer[s.out] = {kind, op.x, op.y};
    made[s.out] = 1;
    sp->ops.push_back(std::move(op));
  }
  for (int64_t slot : p.output_slots)
    if (slot >= 0 && slot < n_slots && made[slot]) sp->outputs.push_back({slot, (*scalar_tensor(slot))->shape});
  if (!p.plan) {  // forward only: taken where no input requires grad (or grad mode is off), as recorded here
    for (const auto& [slot, shape] : sp->inputs)
      if ((*scalar_tensor(slot))->requires_grad && GradMode::is_enabled()) return;
    if (sp->ops.empty()) return;
    p.scalar = std::move(sp);
    p.scalar_state = 1;
    return;
  }
  sp->backward = plan_scalar(*p.plan, [&](int64_t slot, OpKind& kind, int64_t& a, int64_t& b) {
    auto it = producer.find(slot);
    if (it == producer.end()) return false;
    std::tie(kind, a, b) = it->second;
    return true;
  });
  if (!sp->backward) return;
  // every leaf and every slot the backward reads is one of the program's float32 elements
  p.scalar = std::move(sp);
  p.scalar_state = 1;
}

// Runs the scalar program, or returns false (nothing has run) when an input is not as recorded.
bool scalar_run(ReplayProgram& p, PyObject* list) {
  ScalarProgram& sp = *p.scalar;
  const int64_t n_slots = PyList_GET_SIZE(list);
  if ((int64_t)sp.regs.size() != n_slots) sp.regs.assign(n_slots, 0.0f);
  for (const auto& [slot, shape] : sp.inputs) {
    const Tensor* t = slot < n_slots ? slot_tensor(p, list, slot) : nullptr;
    if (!t || !*t || (*t)->dtype != DType::Float32 || (*t)->shape != shape) return false;
    // a forward-only program: eager mode's outputs would have history (or tangents) otherwise
    if (!p.plan && (forward_ad::active() || ((*t)->requires_grad && GradMode::is_enabled()))) return false;
  }
  for (const auto& [slot, shape] : sp.inputs) sp.regs[slot] = (*slot_tensor(p, list, slot))->data<float>()[0];
  float* r = sp.regs.data();
  for (auto& op : sp.ops) {
    if (op.kind == 'b') {
      scalar_binary_f32(op.b, r[op.x], r[op.y], r[op.out]);
    } else if (op.kind == 'u') {
      scalar_unary_f32(op.u, r[op.x], r[op.out]);
    } else {
      op.scratch->data<float>()[0] = r[op.x];
      GradModeGuard no_grad(false);
      Tensor s = sum(op.scratch, Dims{}, false);
      if (s->dtype != DType::Float32 || s->numel != 1) throw std::logic_error("a scalar replay's sum changed dtype");
      r[op.out] = s->data<float>()[0];
    }
  }
  auto reader = [&](int64_t slot) { return slot < n_slots ? slot_tensor(p, list, slot) : nullptr; };
  if (p.plan) scalar_backward_run(*p.plan, *sp.backward, sp.regs, reader);
  for (const auto& [slot, shape] : sp.outputs) {  // fresh tensors: the user may hold the last call's
    Tensor t = empty(shape, DType::Float32);
    t->data<float>()[0] = r[slot];
    PyList_SetItem(list, slot, py::cast(t).release().ptr());
  }
  if (p.plan) plan_set_heads(*p.plan, p.plan_heads, reader);
  return true;
}

// Note [Optimiser steps in the loop]: the step's spec, or null. kinds: per argument 't' a list of tensors (slots,
// or a constant empty list), 'f' fresh flags (a list of bool constants), 'n' a number, 'b' a bool.
std::shared_ptr<OptimSpec> optim_spec_of(const std::string& name, const std::vector<int64_t>& slots,
                                         const std::vector<py::object>& consts, const std::vector<SeqArg>& seqs) {
  const char* kinds = name == "_sgd_step" ? "ttttnnnnbb" : name == "_adam_step" ? "ttttttnnnnnbbb" : nullptr;
  if (!kinds || slots.size() != strlen(kinds) || seqs.size() != slots.size()) return nullptr;
  auto spec = std::make_shared<OptimSpec>();
  spec->adam = name == "_adam_step";
  for (size_t k = 0; k < slots.size(); ++k) {
    if (slots[k] >= 0) return nullptr;
    PyObject* c = consts[k].ptr();
    const bool empty_list = !seqs[k].kind && PyList_CheckExact(c) && PyList_GET_SIZE(c) == 0;
    char kind = kinds[k];
    if (kind == 't' && !spec->adam && k == 3) kind = 'f';
    if (kind == 't') {
      if (!empty_list && (seqs[k].kind != 2 || std::any_of(seqs[k].slots.begin(), seqs[k].slots.end(),
                                                          [](int64_t slot) { return slot < 0; })))
        return nullptr;
      spec->tensor_args.push_back((int)k);
    } else if (kind == 'f') {
      if (!seqs[k].kind && PyList_CheckExact(c)) {  // a constant list of flags
        for (Py_ssize_t j = 0; j < PyList_GET_SIZE(c); ++j) {
          if (!PyBool_Check(PyList_GET_ITEM(c, j))) return nullptr;
          spec->fresh.push_back(PyList_GET_ITEM(c, j) == Py_True);
        }
      } else {
        if (seqs[k].kind != 2) return nullptr;
        for (size_t j = 0; j < seqs[k].slots.size(); ++j) {
          if (seqs[k].slots[j] >= 0 || !PyBool_Check(seqs[k].consts[j].ptr())) return nullptr;
          spec->fresh.push_back(seqs[k].consts[j].ptr() == Py_True);
        }
      }
    } else if (kind == 'n') {
      if (seqs[k].kind || !(PyFloat_CheckExact(c) || PyLong_CheckExact(c))) return nullptr;
      const double v = PyFloat_AsDouble(c);
      if (v == -1.0 && PyErr_Occurred()) {
        PyErr_Clear();
        return nullptr;
      }
      spec->numbers.push_back(v);
    } else {
      if (seqs[k].kind || !PyBool_Check(c)) return nullptr;
      spec->flags.push_back(c == Py_True);
    }
  }
  return spec;
}

// Runs the step, or returns false (nothing ran) when a slot holds no tensor
bool optim_run(const ReplayProgram& p, PyObject* list, const ReplayProgram::Step& s) {
  const OptimSpec& o = *s.optim;
  std::vector<std::vector<Tensor>> lists;
  lists.reserve(o.tensor_args.size());
  for (int k : o.tensor_args) {
    std::vector<Tensor> ts;
    const SeqArg& q = s.seqs[k];
    if (q.kind) {
      ts.reserve(q.slots.size());
      for (int64_t slot : q.slots) {
        const Tensor* t = slot < PyList_GET_SIZE(list) ? slot_tensor(p, list, slot) : nullptr;
        if (!t || !*t) return false;
        ts.push_back(*t);
      }
    }
    lists.push_back(std::move(ts));
  }
  const auto& d = o.numbers;
  const auto& b = o.flags;
  if (o.adam)
    adam_step(lists[0], lists[1], lists[2], lists[3], lists[4], lists[5],
              {d[0], d[1], d[2], d[3], d[4], (bool)b[0], (bool)b[1], (bool)b[2]});
  else
    sgd_step(lists[0], lists[1], lists[2], o.fresh, {d[0], d[1], d[2], d[3], (bool)b[0], (bool)b[1]});
  return true;
}

int64_t now_ns() {  // this thread's CPU time: on a shared machine the wall clock mostly measures waiting for a core
  timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

// Note [Profiling a replay]: adds the time from its construction to its destruction to p.step_ns[i]
struct StepTimer {
  ReplayProgram* p;
  size_t i;
  int64_t t0;
  StepTimer(ReplayProgram& prog, size_t index) : p(prog.profile ? &prog : nullptr), i(index), t0(p ? now_ns() : 0) {}
  ~StepTimer() {
    if (p && i < p->step_ns.size()) p->step_ns[i] += now_ns() - t0;
  }
};

// Note [Fused steps] (replay_fuse.cpp): the program's fused groups, after set_exported and set_backward_plan
std::shared_ptr<FusePlan> build_fused(const ReplayProgram& p) {
  std::vector<FuseStepInfo> steps;
  std::vector<std::vector<int64_t>> reads;
  for (const auto& s : p.steps) {
    steps.push_back({s.fn.ptr(), &s.name, &s.slots, &s.consts, s.out, (bool)(s.core.unary || s.core.binary)});
    std::vector<int64_t> r;
    for (int64_t slot : s.slots)
      if (slot >= 0) r.push_back(slot);
    for (const SeqArg& q : s.seqs)
      for (int64_t slot : q.slots)
        if (slot >= 0) r.push_back(slot);
    reads.push_back(std::move(r));
  }
  return fuse_build(steps, reads, p.output_slots, p.plan ? p.plan_step : SIZE_MAX,
                    p.plan ? plan_read_slots(*p.plan) : std::vector<int64_t>{});
}

py::object run_steps(ReplayProgram& p, py::list slots, size_t start) {
  PyObject* list = slots.ptr();
  const Py_ssize_t n_slots = PyList_GET_SIZE(list);
  if (p.profile) {
    p.step_ns.resize(p.steps.size() + 1, 0);
    if (start == 0) ++p.profiled_runs;
  }
  std::optional<StepTimer> setup_timer(std::in_place, p, p.steps.size());
  if (start == 0 || !p.running) {  // a new run, or one continued on a sibling's slots (Python holds them all)
    p.values.assign(n_slots, Tensor());
    if ((Py_ssize_t)p.exported.size() < n_slots) p.exported.resize(n_slots, 1);
    p.running = true;
    p.handed_back = false;
    p.plan_on = p.plan_dirty = p.plan_ran = false;
    if (start == 0 && p.plan)
      p.plan_on = plan_usable(*p.plan, [&](int64_t slot) { return slot < n_slots ? slot_tensor(p, list, slot) : nullptr; });
    if (p.plan_on) ++p.planned_runs;
    if (start == 0 && (p.plan_on || !p.plan) && p.scalar_state == 1 && scalar_run(p, list)) {
      ++p.scalar_runs;
      p.finish();
      return py::none();
    }
  }
  setup_timer.reset();
  PyObject* argv[kMaxStepArgs];
  const SlotReader reader = [&](int64_t slot) { return slot < n_slots ? slot_tensor(p, list, slot) : nullptr; };
  for (size_t i = start; i < p.steps.size(); ++i) {
    const StepTimer timer(p, i);
    const ReplayProgram::Step& s = p.steps[i];
    const size_t n = s.slots.size();
    for (size_t k = 0; k < n; ++k)
      DG_CHECK(s.slots[k] < n_slots, IndexError, "_ReplayProgram.run: slot ", s.slots[k], " of step ", i,
               " is beyond the ", n_slots, " slots.");
    if (s.out == -2) {
      for (int64_t slot : s.slots) p.materialize(list, slot);
      p.handed_back = true;
      return py::make_tuple(i);
    }
    // Note [The backward as a recorded program]: the forward's tensor steps make no node, the backward is planned
    std::optional<GradModeGuard> no_node;
    std::optional<PlanHarvest> harvest;  // Note [Saved state no step returns] (replay_backward.cpp)
    if (p.plan_on && i < p.plan_step && (s.out >= 0 || s.out == kSeq)) {
      if (!p.plan_harvests[i].entries.empty()) harvest.emplace(*p.plan, p.plan_harvests[i], reader);
      else no_node.emplace(false);
      if (p.makes_node[i]) p.plan_dirty = true;
    }
    if (p.fused) {  // Note [Fused steps] (replay_fuse.cpp): a group of steps run as one (with grad mode as above)
      const size_t last = fuse_run(*p.fused, i, p.values, reader, [&](int64_t slot, Tensor r) {
        if (p.exported[slot]) PyList_SetItem(list, slot, py::cast(r).release().ptr());
        p.values[slot] = std::move(r);
      });
      if (last != SIZE_MAX) {
        i = last;
        continue;
      }
    }
    if (p.plan_on && i == p.plan_step) {
      plan_run(*p.plan, p.plan_heads, [&](int64_t slot) { return slot < n_slots ? slot_tensor(p, list, slot) : nullptr; });
      p.plan_ran = true;
      continue;
    }
    if (s.special == Special::read_grad) {
      const Tensor* a = slot_tensor(p, list, s.slots[0]);
      if (a && (*a)->grad) {
        Tensor r = (*a)->grad;
        if (p.exported[s.out]) PyList_SetItem(list, s.out, py::cast(r).release().ptr());
        p.values[s.out] = std::move(r);
        continue;
      }
    } else if (s.special == Special::target_range) {
      const Tensor* t = slot_tensor(p, list, s.slots[1]);
      if (t && targets_in_range(*t, s.classes, s.ignore)) continue;
    } else if (s.special == Special::clear_grad) {
      if (const Tensor* a = slot_tensor(p, list, s.slots[0])) {
        (*a)->grad = nullptr;
        note_grad_assigned(*a);
        continue;
      }
    }
    if (s.special == Special::optim && optim_run(p, list, s)) continue;  // Note [Optimiser steps in the loop]
    if (s.special == Special::grad_enabled) {
      if ((GradMode::is_enabled() ? Py_True : Py_False) == s.expected.ptr()) continue;
    } else if (s.special == Special::set_grad_enabled) {
      GradMode::set_enabled(s.flag);
      continue;
    } else if (s.special == Special::cross_entropy) {
      const Tensor* a = slot_tensor(p, list, s.slots[0]);
      const Tensor* b = slot_tensor(p, list, s.slots[1]);
      if (a && b) {
        Tensor r = cross_entropy(*a, *b, s.classes, s.ignore, s.smoothing);
        if (p.exported[s.out]) PyList_SetItem(list, s.out, py::cast(r).release().ptr());
        p.values[s.out] = std::move(r);
        continue;
      }
    }
    if (s.core.unary || s.core.binary) {
      const Tensor* a = slot_tensor(p, list, s.slots[0]);
      const Tensor* b = s.core.binary ? slot_tensor(p, list, s.slots[1]) : nullptr;
      if (a && (s.core.unary || b)) {
        Tensor r = s.core.unary ? s.core.unary(*a) : s.core.binary(*a, *b);
        if (p.exported[s.out]) PyList_SetItem(list, s.out, py::cast(r).release().ptr());
        p.values[s.out] = std::move(r);
        continue;
      }
    }
    py::object built[kMaxStepArgs];  // the sequence arguments, alive until the call returns
    for (size_t k = 0; k < n; ++k) {
      const int64_t slot = s.slots[k];
      if (slot >= 0) p.materialize(list, slot);
      argv[k] = slot >= 0 ? PyList_GET_ITEM(list, slot) : s.consts[k].ptr();
      if (slot < 0 && !s.seqs.empty() && s.seqs[k].kind) {
        const SeqArg& q = s.seqs[k];
        const Py_ssize_t m = (Py_ssize_t)q.slots.size();
        built[k] = py::reinterpret_steal<py::object>(q.kind == 1 ? PyTuple_New(m) : PyList_New(m));
        if (!built[k]) throw py::error_already_set();
        for (Py_ssize_t j = 0; j < m; ++j) {
          const int64_t item = q.slots[j];
          DG_CHECK(item < n_slots, IndexError, "_ReplayProgram.run: slot ", item, " of step ", i, " is beyond the ",
                   n_slots, " slots.");
          if (item >= 0) p.materialize(list, item);
          PyObject* o = item >= 0 ? PyList_GET_ITEM(list, item) : q.consts[j].ptr();
          Py_INCREF(o);
          if (q.kind == 1) PyTuple_SET_ITEM(built[k].ptr(), j, o);
          else PyList_SET_ITEM(built[k].ptr(), j, o);
        }
        argv[k] = built[k].ptr();
      }
    }
    PyObject* result = PyObject_Vectorcall(s.fn.ptr(), argv, n, nullptr);
    if (!result) throw py::error_already_set();
    if (s.out >= 0 && s.out < n_slots && is_tensor(result, p.tensor_type)) {
      PyList_SetItem(list, s.out, result);  // steals the reference, drops the slot's previous value
      continue;
    }
    if (s.out == kNone && result == Py_None) {
      Py_DECREF(result);
      continue;
    }
    if (s.out == kSeq && (s.is_list ? PyList_CheckExact(result) : PyTuple_CheckExact(result)) &&
        PySequence_Fast_GET_SIZE(result) == (Py_ssize_t)s.out_slots.size()) {
      bool all_tensors = true;
      for (Py_ssize_t j = 0; j < PySequence_Fast_GET_SIZE(result); ++j)
        all_tensors = all_tensors && is_tensor(PySequence_Fast_GET_ITEM(result, j), p.tensor_type) &&
                      s.out_slots[j] < n_slots;
      if (all_tensors) {
        for (Py_ssize_t j = 0; j < PySequence_Fast_GET_SIZE(result); ++j) {
          PyObject* item = PySequence_Fast_GET_ITEM(result, j);
          Py_INCREF(item);
          PyList_SetItem(list, s.out_slots[j], item);
          if (s.out_slots[j] < (int64_t)p.values.size()) p.values[s.out_slots[j]].reset();
        }
        Py_DECREF(result);
        continue;
      }
    }
    if (s.out == kValue && Py_TYPE(result) == Py_TYPE(s.expected.ptr())) {
      const int same = PyObject_RichCompareBool(result, s.expected.ptr(), Py_EQ);
      if (same < 0) {
        Py_DECREF(result);
        throw py::error_already_set();
      }
      if (same == 1) {
        Py_DECREF(result);
        continue;
      }
    }
    if (p.plan_on && i < p.plan_step) {
      DG_CHECK(!p.plan_dirty, RuntimeError, "compile: step ", i, " (", s.name, ") of a static replay returned another ",
               "kind of result than when recorded, after its forward ran without a graph (Note [The backward as a ",
               "recorded program]); the replay cannot go back to Python from here. Please report this program.");
      p.plan_on = false;  // nothing has run without its graph yet: the run goes on as unplanned
    }
    p.handed_back = true;
    return py::make_tuple(i, py::reinterpret_steal<py::object>(result));
  }
  if (p.scalar_state == 0 && !p.handed_back && (p.plan_ran || (!p.plan && start == 0))) scalar_build(p, list);
  p.finish();
  return py::none();
}


// Note [Entry guards in C++]: the static mode's entry key (Note [Entry guards] in python/dyngrad/_api/capture.py)
// is built at every call. In Python (compiling.entry_key: _describe, _module_state, _optimizer_state) it cost
// 11-20 us of a 50 us MLP training step (Intel Xeon, lscpu family 6 model 167, 2 cores, KVM, loaded; 6.7 us here);
// this is the same walk in C++ and builds the same tuple, element for
// element (tests/test_compile.py compares the two), so a key recorded by either matches the other's and
// describe_key_change reads it unchanged. The reference engine has no twin: its _C lacks _entry_key and
// compiling.entry_key keeps the Python walk there.
namespace guard {

// The walk is written against CPython's API with interned names: through pybind11's accessors (a new str per
// attribute, a list then a tuple per part) the same walk took 7.9 us for the MLP step's key (same CPU as above).
py::object own(PyObject* o) {  // a new reference, or the Python error it raised
  if (!o) throw py::error_already_set();
  return py::reinterpret_steal<py::object>(o);
}
py::object borrow(PyObject* o) { return py::reinterpret_borrow<py::object>(o); }
void append(PyObject* list, PyObject* o) {
  if (PyList_Append(list, o) < 0) throw py::error_already_set();
}
py::object id_of(PyObject* o) { return own(PyLong_FromVoidPtr(o)); }

struct Names {
  PyObject *shape, *dtype, *stride, *requires_grad, *training, *parameters, *buffers, *modules, *param_groups,
      *state, *params, *keeps, *tensor, *object, *value, *dict, *args, *kwargs;
};
const Names& names() {
  static const Names n = {
      PyUnicode_InternFromString("shape"),         PyUnicode_InternFromString("dtype"),
      PyUnicode_InternFromString("stride"),        PyUnicode_InternFromString("requires_grad"),
      PyUnicode_InternFromString("training"),      PyUnicode_InternFromString("_parameters"),
      PyUnicode_InternFromString("_buffers"),      PyUnicode_InternFromString("_modules"),
      PyUnicode_InternFromString("param_groups"),  PyUnicode_InternFromString("state"),
      PyUnicode_InternFromString("params"),        PyUnicode_InternFromString("_compile_keeps_original"),
      PyUnicode_InternFromString("tensor"),        PyUnicode_InternFromString("object"),
      PyUnicode_InternFromString("value"),         PyUnicode_InternFromString("dict"),
      PyUnicode_InternFromString("args"),          PyUnicode_InternFromString("kwargs")};
  return n;
}

// Calls f(key, value) for each item of a mapping in its items() order: a dict or a dict subclass (modules keep
// OrderedDicts) by its own key iterator and the dict's values, anything else by items().
template <class F>
void for_each_item(PyObject* mapping, F f) {
  if (PyDict_Check(mapping)) {
    if (PyDict_GET_SIZE(mapping) == 0) return;  // no iterator made for an empty one (most of a module's dicts)
    py::object keys = own(PyObject_GetIter(mapping));
    while (PyObject* k = PyIter_Next(keys.ptr())) {
      py::object key = own(k);
      PyObject* v = PyDict_GetItemWithError(mapping, k);
      if (!v) {
        if (!PyErr_Occurred()) PyErr_SetObject(PyExc_KeyError, k);
        throw py::error_already_set();
      }
      py::object value = borrow(v);
      f(k, v);
    }
  } else {
    py::object items = own(PyMapping_Items(mapping));
    for (py::handle kv : items) f(PyTuple_GET_ITEM(kv.ptr(), 0), PyTuple_GET_ITEM(kv.ptr(), 1));
  }
  if (PyErr_Occurred()) throw py::error_already_set();
}

bool is_module(PyObject* o) {  // compiling._is_module: type(o)._compile_keeps_original is True
  return _PyType_Lookup(Py_TYPE(o), names().keeps) == Py_True;
}

PyObject* dict_of(PyObject* o) {  // borrowed; null when o has no __dict__
  if (PyType_Check(o)) return nullptr;
  PyObject** dictptr = _PyObject_GetDictPtr(o);
  return dictptr ? *dictptr : nullptr;
}

bool is_optimizer(PyObject* o) {  // compiling._is_optimizer: param_groups and state in a plain __dict__
  if (PyType_Check(o)) return false;
  PyObject* d = dict_of(o);
  return d && PyDict_CheckExact(d) && PyDict_GetItemWithError(d, names().param_groups) &&
         PyDict_GetItemWithError(d, names().state);
}

struct Walk {
  PyTypeObject* tensor_type = nullptr;
  py::object parts = own(PyList_New(0)), tensors = own(PyList_New(0)), states = own(PyList_New(0));
  std::vector<std::pair<PyObject*, Py_ssize_t>> seen;  // a call has a few tensors: a linear search

  void add(PyObject* where, py::object what) {
    py::object part = own(PyTuple_Pack(2, where, what.ptr()));
    append(parts.ptr(), part.ptr());
  }

  void describe(PyObject* o, PyObject* where) {
    const Names& n = names();
    PyTypeObject* type = Py_TYPE(o);
    py::object keep = borrow(o);
    if (type == tensor_type || PyType_IsSubtype(type, tensor_type)) {
      const Py_ssize_t count = PyList_GET_SIZE(tensors.ptr());
      Py_ssize_t first = count;
      for (const auto& entry : seen)
        if (entry.first == o) first = entry.second;
      if (first == count) {
        seen.emplace_back(o, count);
        append(tensors.ptr(), o);
      }
      py::object shape = own(PyObject_GetAttr(o, n.shape));
      py::object shape_tuple = own(PySequence_Tuple(shape.ptr()));
      py::object dtype = own(PyObject_GetAttr(o, n.dtype));
      py::object stride = own(PyObject_CallMethodNoArgs(o, n.stride));
      py::object requires_grad = own(PyObject_GetAttr(o, n.requires_grad));
      py::object index = own(PyLong_FromSsize_t(first));
      add(where, own(PyTuple_Pack(7, n.tensor, (PyObject*)type, shape_tuple.ptr(), dtype.ptr(), stride.ptr(),
                                  requires_grad.ptr(), index.ptr())));
    } else if (PyTuple_CheckExact(o) || PyList_CheckExact(o)) {
      py::object length = own(PyLong_FromSsize_t(PySequence_Fast_GET_SIZE(o)));
      add(where, own(PyTuple_Pack(2, (PyObject*)type, length.ptr())));
      // as Python's enumerate: a list's length is read again at each item (a shape read may run Python)
      for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(o); ++i) {
        py::object item = borrow(PySequence_Fast_GET_ITEM(o, i));
        py::object index = own(PyLong_FromSsize_t(i));
        py::object at = own(PyTuple_Pack(2, where, index.ptr()));
        describe(item.ptr(), at.ptr());
      }
    } else if (PyDict_CheckExact(o)) {
      py::object keys = own(PySequence_Tuple(o));
      add(where, own(PyTuple_Pack(2, n.dict, keys.ptr())));
      py::object items = own(PyDict_Items(o));
      for (Py_ssize_t i = 0; i < PyList_GET_SIZE(items.ptr()); ++i) {
        PyObject* kv = PyList_GET_ITEM(items.ptr(), i);
        py::object at = own(PyTuple_Pack(2, where, PyTuple_GET_ITEM(kv, 0)));
        describe(PyTuple_GET_ITEM(kv, 1), at.ptr());
      }
    } else if (is_module(o) || is_optimizer(o)) {
      append(states.ptr(), o);
      add(where, own(PyTuple_Pack(2, n.object, id_of(o).ptr())));
    } else if (PyObject_Hash(o) != -1) {
      add(where, own(PyTuple_Pack(3, n.value, (PyObject*)type, o)));
    } else {
      if (!PyErr_ExceptionMatches(PyExc_TypeError)) throw py::error_already_set();
      PyErr_Clear();
      add(where, own(PyTuple_Pack(3, n.object, (PyObject*)type, id_of(o).ptr())));
    }
  }
};

// Note [State outside the arguments] (python/dyngrad/_api/compiling.py): a module's plain attributes (exact
// int, bool, float, complex, str or None by value; tensors by identity) in its __dict__'s order, then the keys of
// its non-empty hook dicts, as compiling._module_state lists them.
const std::vector<PyObject*>& hook_dict_names() {
  static const std::vector<PyObject*> names = {
      PyUnicode_InternFromString("_forward_pre_hooks"), PyUnicode_InternFromString("_forward_hooks"),
      PyUnicode_InternFromString("_backward_pre_hooks"), PyUnicode_InternFromString("_backward_hooks")};
  return names;
}

void module_attributes(PyObject* out, PyObject* d, PyTypeObject* tensor_type) {
  const std::vector<PyObject*>& hook_dicts = hook_dict_names();
  Py_ssize_t pos = 0;
  PyObject *k, *v;
  while (PyDict_Next(d, &pos, &k, &v)) {
    PyTypeObject* t = Py_TYPE(v);
    if (PyLong_CheckExact(v) || PyBool_Check(v) || PyFloat_CheckExact(v) || PyComplex_CheckExact(v) ||
        PyUnicode_CheckExact(v) || v == Py_None) {
      append(out, k);
      append(out, v);
    } else if (tensor_type && (t == tensor_type || PyType_IsSubtype(t, tensor_type))) {
      append(out, k);
      append(out, id_of(v).ptr());
    }
  }
  for (PyObject* name : hook_dicts) {
    PyObject* hooks = PyDict_GetItemWithError(d, name);  // borrowed
    if (!hooks) {
      if (PyErr_Occurred()) throw py::error_already_set();
      continue;
    }
    const int nonempty = PyObject_IsTrue(hooks);
    if (nonempty < 0) throw py::error_already_set();
    if (!nonempty) continue;
    append(out, name);
    append(out, own(PySequence_Tuple(hooks)).ptr());
  }
}

py::object module_state(PyObject* module, PyTypeObject* tensor_type) {  // compiling._module_state, the same walk
  const Names& n = names();                                               // (a stack, last in first out)
  py::object out = own(PyList_New(0));
  std::vector<py::object> stack{borrow(module)};
  std::vector<PyObject*> seen;
  while (!stack.empty()) {
    py::object m = std::move(stack.back());
    stack.pop_back();
    if (m.ptr() == Py_None || std::find(seen.begin(), seen.end(), m.ptr()) != seen.end()) continue;
    seen.push_back(m.ptr());  // held by its parent's _modules (Python's walk keeps a set of ids too)
    PyObject* d = dict_of(m.ptr());
    DG_CHECK(d, TypeError, "compile: the entry guard expected a module with a __dict__, got ",
             Py_TYPE(m.ptr())->tp_name, ".");
    py::object dict = borrow(d);
    append(out.ptr(), id_of(m.ptr()).ptr());
    append(out.ptr(), own(PyObject_GetAttr(m.ptr(), n.training)).ptr());
    py::object params = own(PyObject_GetItem(d, n.parameters));
    py::object buffers = own(PyObject_GetItem(d, n.buffers));
    py::object modules = own(PyObject_GetItem(d, n.modules));
    // (shape, dtype) of a parameter or buffer: `p.data = t` keeps p's identity and may change both (Note [State
    // outside the arguments])
    auto layout = [&](PyObject* t) -> py::object {
      if (t == Py_None) return borrow(Py_None);
      py::object shape = own(PyObject_GetAttr(t, n.shape));
      py::object shape_tuple = own(PySequence_Tuple(shape.ptr()));
      py::object dtype = own(PyObject_GetAttr(t, n.dtype));
      return own(PyTuple_Pack(2, shape_tuple.ptr(), dtype.ptr()));
    };
    for_each_item(params.ptr(), [&](PyObject* k, PyObject* p) {
      append(out.ptr(), k);
      append(out.ptr(), id_of(p).ptr());
      append(out.ptr(), p == Py_None ? Py_False : own(PyObject_GetAttr(p, n.requires_grad)).ptr());
      append(out.ptr(), layout(p).ptr());
    });
    for_each_item(buffers.ptr(), [&](PyObject* k, PyObject* b) {
      append(out.ptr(), k);
      append(out.ptr(), id_of(b).ptr());
      append(out.ptr(), layout(b).ptr());
    });
    module_attributes(out.ptr(), d, tensor_type);
    append(out.ptr(), Py_None);
    for_each_item(modules.ptr(), [&](PyObject*, PyObject* sub) { stack.push_back(borrow(sub)); });
  }
  return own(PyList_AsTuple(out.ptr()));
}

bool plain_hyperparameter(PyObject* v) {  // isinstance(v, (int, float, bool, str, type(None), tuple))
  return PyLong_Check(v) || PyFloat_Check(v) || PyUnicode_Check(v) || v == Py_None || PyTuple_Check(v);
}

py::object optimizer_state(PyObject* opt) {  // compiling._optimizer_state
  const Names& n = names();
  py::object groups = own(PyList_New(0));
  py::object param_groups = own(PyObject_GetAttr(opt, n.param_groups));
  py::object group_iter = own(PyObject_GetIter(param_groups.ptr()));
  while (PyObject* g_raw = PyIter_Next(group_iter.ptr())) {
    py::object g = own(g_raw);
    py::object entries = own(PyList_New(0));
    for_each_item(g.ptr(), [&](PyObject* k, PyObject* v) {
      const int is_params = PyObject_RichCompareBool(k, n.params, Py_EQ);
      if (is_params < 0) throw py::error_already_set();
      if (!is_params && plain_hyperparameter(v)) append(entries.ptr(), own(PyTuple_Pack(2, k, v)).ptr());
    });
    py::object ids = own(PyList_New(0));
    py::object params = own(PyObject_GetItem(g.ptr(), n.params));
    py::object param_iter = own(PyObject_GetIter(params.ptr()));
    while (PyObject* p = PyIter_Next(param_iter.ptr())) {
      py::object keep = own(p);
      append(ids.ptr(), id_of(p).ptr());
    }
    if (PyErr_Occurred()) throw py::error_already_set();
    py::object id_tuple = own(PyList_AsTuple(ids.ptr()));
    append(entries.ptr(), own(PyTuple_Pack(2, n.params, id_tuple.ptr())).ptr());
    append(groups.ptr(), own(PyList_AsTuple(entries.ptr())).ptr());
  }
  if (PyErr_Occurred()) throw py::error_already_set();
  py::object state = own(PyList_New(0));
  py::object state_attr = own(PyObject_GetAttr(opt, n.state));
  for_each_item(state_attr.ptr(), [&](PyObject* p, PyObject* s) {
    py::object entries = own(PyList_New(0));
    for_each_item(s, [&](PyObject* k, PyObject* v) {
      py::object value = PyLong_Check(v) || PyFloat_Check(v) ? borrow(v) : id_of(v);
      append(entries.ptr(), own(PyTuple_Pack(2, k, value.ptr())).ptr());
    });
    py::object entry_tuple = own(PyList_AsTuple(entries.ptr()));
    append(state.ptr(), own(PyTuple_Pack(2, id_of(p).ptr(), entry_tuple.ptr())).ptr());
  });
  py::object group_tuple = own(PyList_AsTuple(groups.ptr())), state_tuple = own(PyList_AsTuple(state.ptr()));
  return own(PyTuple_Pack(2, group_tuple.ptr(), state_tuple.ptr()));
}

// Note [Entry guards compared in place]: building the key at every call (~80 objects for the MLP training step) and
// hashing it for the dict of recordings cost ~12 us of a ~45 us static MLP step (Intel Xeon, lscpu family 6 model
// 167, 2 cores, KVM). The call that replays what the last call replayed (the common case) needs only to know that
// its key equals the last one: this walk compares each part of the last key with the call's arguments and state,
// in the order the walk above builds them, and builds nothing. It answers "equal" only where the key built would be
// equal, element for element (the same reads, the same == with identity first as tuple equality): anything it
// does not know (a Tensor subclass, an error raised by a read) is "not known", and the caller builds the key.
// Note [Module state compared in place]: module_matches used to build module_state (a flat tuple of ~40 objects for
// the MLP's Sequential: a Size per parameter, a tuple per layout) at every call, ~5 us of the MLP training step's ~7
// us entry guard (Intel Xeon, lscpu family 6 model 167, 2 cores, KVM); it now reads the same state in the same
// order and compares each item with the recorded one as it goes. A parameter whose class keeps the Tensor class's
// shape, dtype and requires_grad properties is read from its C++ tensor (what those properties return); any other
// is read through its attributes. False (_entry_key_matches_set_module_in_place) builds and compares the tuple, as
// before (tests compare the two).
bool MODULE_STATE_IN_PLACE = true;

struct Match {
  PyTypeObject* tensor_type;
  PyObject* key;  // a tuple of (where, what)
  Py_ssize_t next = 0;
  py::object tensors = own(PyList_New(0));
  std::vector<PyObject*> states;  // borrowed: held by the arguments or the reachable list for the whole comparison
  std::vector<std::pair<PyObject*, Py_ssize_t>> seen;

  PyObject* part() {  // the next part's `what`, or null past the end
    if (next >= PyTuple_GET_SIZE(key)) return nullptr;
    PyObject* p = PyTuple_GET_ITEM(key, next++);
    return PyTuple_CheckExact(p) && PyTuple_GET_SIZE(p) == 2 ? PyTuple_GET_ITEM(p, 1) : nullptr;
  }
  static bool eq(PyObject* a, PyObject* b) {  // tuple equality's: identity, then ==
    if (a == b) return true;
    const int r = PyObject_RichCompareBool(a, b, Py_EQ);
    if (r < 0) throw py::error_already_set();
    return r == 1;
  }
  static bool is_what(PyObject* what, Py_ssize_t size, PyObject* tag) {
    return what && PyTuple_CheckExact(what) && PyTuple_GET_SIZE(what) == size && eq(PyTuple_GET_ITEM(what, 0), tag);
  }
  static bool ints_equal(PyObject* tuple, const Shape& v) {
    if (!PyTuple_CheckExact(tuple) || PyTuple_GET_SIZE(tuple) != (Py_ssize_t)v.size()) return false;
    for (size_t i = 0; i < v.size(); ++i) {
      PyObject* x = PyTuple_GET_ITEM(tuple, i);
      if (!PyLong_CheckExact(x)) return false;
      int overflow = 0;
      const long long n = PyLong_AsLongLongAndOverflow(x, &overflow);
      if (overflow || n != v[i]) return false;
    }
    return true;
  }
  static bool id_equal(PyObject* recorded, PyObject* o) {
    return PyLong_CheckExact(recorded) && PyLong_AsVoidPtr(recorded) == (void*)o && !PyErr_Occurred();
  }

  bool describe(PyObject* o) {
    const Names& n = names();
    PyObject* what = part();
    if (!what) return false;
    PyTypeObject* type = Py_TYPE(o);
    if (type == tensor_type) {
      const Tensor* t = held_tensor(o, tensor_type);
      if (!t || !is_what(what, 7, n.tensor) || PyTuple_GET_ITEM(what, 1) != (PyObject*)type) return false;
      const Py_ssize_t count = PyList_GET_SIZE(tensors.ptr());
      Py_ssize_t first = count;
      for (const auto& entry : seen)
        if (entry.first == o) first = entry.second;
      if (first == count) {
        seen.emplace_back(o, count);
        append(tensors.ptr(), o);
      }
      PyObject* index = PyTuple_GET_ITEM(what, 6);
      return ints_equal(PyTuple_GET_ITEM(what, 2), (*t)->shape) && eq(PyTuple_GET_ITEM(what, 3), dtype_object((*t)->dtype).ptr()) &&
             ints_equal(PyTuple_GET_ITEM(what, 4), (*t)->strides) &&
             PyTuple_GET_ITEM(what, 5) == ((*t)->requires_grad ? Py_True : Py_False) && PyLong_CheckExact(index) &&
             PyLong_AsSsize_t(index) == first;
    }
    if (PyType_IsSubtype(type, tensor_type)) return false;  // a subclass may read its attributes otherwise
    if (PyTuple_CheckExact(o) || PyList_CheckExact(o)) {
      if (!PyTuple_CheckExact(what) || PyTuple_GET_SIZE(what) != 2 || PyTuple_GET_ITEM(what, 0) != (PyObject*)type)
        return false;
      PyObject* length = PyTuple_GET_ITEM(what, 1);
      if (!PyLong_CheckExact(length) || PyLong_AsSsize_t(length) != PySequence_Fast_GET_SIZE(o)) return false;
      for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(o); ++i) {
        py::object item = borrow(PySequence_Fast_GET_ITEM(o, i));
        if (!describe(item.ptr())) return false;
      }
      return true;
    }
    if (PyDict_CheckExact(o)) {
      if (!is_what(what, 2, n.dict)) return false;
      PyObject* keys = PyTuple_GET_ITEM(what, 1);
      if (!PyTuple_CheckExact(keys) || PyTuple_GET_SIZE(keys) != PyDict_GET_SIZE(o)) return false;
      Py_ssize_t pos = 0, i = 0;
      PyObject *k, *v;
      std::vector<py::object> values;
      while (PyDict_Next(o, &pos, &k, &v)) {
        if (!eq(PyTuple_GET_ITEM(keys, i++), k)) return false;
        values.push_back(borrow(v));
      }
      for (const auto& value : values)
        if (!describe(value.ptr())) return false;
      return true;
    }
    if (is_module(o) || is_optimizer(o)) {
      states.push_back(o);
      return is_what(what, 2, n.object) && id_equal(PyTuple_GET_ITEM(what, 1), o);
    }
    if (PyObject_Hash(o) != -1)
      return is_what(what, 3, n.value) && PyTuple_GET_ITEM(what, 1) == (PyObject*)type && eq(PyTuple_GET_ITEM(what, 2), o);
    if (!PyErr_ExceptionMatches(PyExc_TypeError)) throw py::error_already_set();
    PyErr_Clear();
    return is_what(what, 3, n.object) && PyTuple_GET_ITEM(what, 1) == (PyObject*)type && id_equal(PyTuple_GET_ITEM(what, 2), o);
  }

  // t's C++ tensor when t is a Tensor whose class keeps the Tensor class's own shape, dtype and requires_grad
  // properties (a Parameter: the properties would return what the tensor holds), else null
  static const Tensor* plain_core(PyObject* t, PyTypeObject* tensor_type) {
    const Names& n = names();
    PyTypeObject* type = Py_TYPE(t);
    if (type != tensor_type) {
      // the last subclass found plain, while neither it nor the Tensor class has changed (a class's version tag
      // changes with its attributes and its bases'; 0: not valid)
      static PyTypeObject *plain_type = nullptr, *plain_base = nullptr;
      static unsigned int plain_version = 0, base_version = 0;
      const bool known = type == plain_type && tensor_type == plain_base && type->tp_version_tag != 0 &&
                         type->tp_version_tag == plain_version && tensor_type->tp_version_tag == base_version &&
                         base_version != 0;
      if (!known) {
        if (!PyType_IsSubtype(type, tensor_type) ||
            _PyType_Lookup(type, n.shape) != _PyType_Lookup(tensor_type, n.shape) ||
            _PyType_Lookup(type, n.dtype) != _PyType_Lookup(tensor_type, n.dtype) ||
            _PyType_Lookup(type, n.requires_grad) != _PyType_Lookup(tensor_type, n.requires_grad))
          return nullptr;
        plain_type = type;
        plain_base = tensor_type;
        plain_version = type->tp_version_tag;  // set by the lookups above (0 if the class cannot be cached)
        base_version = tensor_type->tp_version_tag;
      }
    }
    return held_tensor(t, tensor_type);
  }

  // module_state's walk, compared with the recorded flat tuple item by item, building nothing (Note [Module state
  // compared in place]); false at the first difference (the caller then builds the key with every read).
  static bool module_matches(PyObject* module, PyObject* state, PyTypeObject* tensor_type) {
    if (!PyTuple_CheckExact(state)) return false;
    if (!MODULE_STATE_IN_PLACE) return eq(module_state(module, tensor_type).ptr(), state);
    const Names& n = names();
    Py_ssize_t at = 0;
    const Py_ssize_t size = PyTuple_GET_SIZE(state);
    auto next = [&]() -> PyObject* { return at < size ? PyTuple_GET_ITEM(state, at++) : nullptr; };
    auto core_of = [&](PyObject* t) { return plain_core(t, tensor_type); };
    // layout(t) of module_state: None, or (shape tuple, dtype)
    auto layout_equal = [&](PyObject* t, PyObject* rec) -> bool {
      if (!rec) return false;
      if (t == Py_None) return rec == Py_None;
      if (!PyTuple_CheckExact(rec) || PyTuple_GET_SIZE(rec) != 2) return false;
      if (const Tensor* core = core_of(t))
        return ints_equal(PyTuple_GET_ITEM(rec, 0), (*core)->shape) &&
               eq(PyTuple_GET_ITEM(rec, 1), dtype_object((*core)->dtype).ptr());
      py::object shape = own(PyObject_GetAttr(t, n.shape));
      py::object shape_tuple = own(PySequence_Tuple(shape.ptr()));
      py::object dtype = own(PyObject_GetAttr(t, n.dtype));
      return eq(PyTuple_GET_ITEM(rec, 0), shape_tuple.ptr()) && eq(PyTuple_GET_ITEM(rec, 1), dtype.ptr());
    };
    auto requires_grad_equal = [&](PyObject* t, PyObject* rec) -> bool {
      if (!rec) return false;
      if (t == Py_None) return eq(rec, Py_False);
      if (const Tensor* core = core_of(t)) {
        verified_autograd_read();  // what the property's read does first
        return eq(rec, (*core)->requires_grad ? Py_True : Py_False);
      }
      return eq(rec, own(PyObject_GetAttr(t, n.requires_grad)).ptr());
    };
    std::vector<py::object> stack{borrow(module)};
    std::vector<PyObject*> seen;
    while (!stack.empty()) {
      py::object m = std::move(stack.back());
      stack.pop_back();
      if (m.ptr() == Py_None || std::find(seen.begin(), seen.end(), m.ptr()) != seen.end()) continue;
      seen.push_back(m.ptr());
      PyObject* d = dict_of(m.ptr());
      if (!d) return false;  // module_state raises its TypeError when the key is built
      py::object dict = borrow(d);
      PyObject* rec = next();
      if (!rec || !id_equal(rec, m.ptr())) return false;
      rec = next();
      if (!rec || !eq(rec, own(PyObject_GetAttr(m.ptr(), n.training)).ptr())) return false;
      py::object params = own(PyObject_GetItem(d, n.parameters));
      py::object buffers = own(PyObject_GetItem(d, n.buffers));
      py::object modules = own(PyObject_GetItem(d, n.modules));
      bool ok = true;
      for_each_item(params.ptr(), [&](PyObject* k, PyObject* t) {
        if (!ok) return;
        PyObject* rk = next();
        PyObject* rid = next();
        ok = rk && rid && eq(rk, k) && id_equal(rid, t) && requires_grad_equal(t, next()) && layout_equal(t, next());
      });
      if (!ok) return false;
      for_each_item(buffers.ptr(), [&](PyObject* k, PyObject* t) {
        if (!ok) return;
        PyObject* rk = next();
        PyObject* rid = next();
        ok = rk && rid && eq(rk, k) && id_equal(rid, t) && layout_equal(t, next());
      });
      if (!ok || !attributes_match(next, d, tensor_type)) return false;
      if (next() != Py_None) return false;
      for_each_item(modules.ptr(), [&](PyObject*, PyObject* sub) { stack.push_back(borrow(sub)); });
    }
    return at == size;
  }

  // module_attributes, compared with what `next` gives item by item
  template <class Next>
  static bool attributes_match(Next& next, PyObject* d, PyTypeObject* tensor_type) {
    Py_ssize_t pos = 0;
    PyObject *k, *v;
    while (PyDict_Next(d, &pos, &k, &v)) {
      PyTypeObject* t = Py_TYPE(v);
      if (PyLong_CheckExact(v) || PyBool_Check(v) || PyFloat_CheckExact(v) || PyComplex_CheckExact(v) ||
          PyUnicode_CheckExact(v) || v == Py_None) {
        PyObject* rk = next();
        PyObject* rv = next();
        if (!rk || !rv || !eq(rk, k) || !eq(rv, v)) return false;
      } else if (PyDict_Check(v) || PyAnySet_Check(v)) {
        continue;  // a module's dicts and sets (no class is both one and a Tensor): module_attributes skips them
      } else if (tensor_type && (t == tensor_type || PyType_IsSubtype(t, tensor_type))) {
        PyObject* rk = next();
        PyObject* rv = next();
        if (!rk || !rv || !eq(rk, k) || !id_equal(rv, v)) return false;
      }
    }
    for (PyObject* name : hook_dict_names()) {
      PyObject* hooks = PyDict_GetItemWithError(d, name);  // borrowed
      if (!hooks) {
        if (PyErr_Occurred()) throw py::error_already_set();
        continue;
      }
      const int nonempty = PyObject_IsTrue(hooks);
      if (nonempty < 0) throw py::error_already_set();
      if (!nonempty) continue;
      PyObject* rk = next();
      PyObject* rv = next();
      if (!rk || !rv || !eq(rk, name) || !eq(rv, own(PySequence_Tuple(hooks)).ptr())) return false;
    }
    return true;
  }

  static bool optimizer_matches(PyObject* opt, PyObject* recorded) {
    const Names& nm = names();
    if (!PyTuple_CheckExact(recorded) || PyTuple_GET_SIZE(recorded) != 2) return false;
    PyObject* groups = PyTuple_GET_ITEM(recorded, 0);
    PyObject* states_rec = PyTuple_GET_ITEM(recorded, 1);
    if (!PyTuple_CheckExact(groups) || !PyTuple_CheckExact(states_rec)) return false;
    py::object param_groups = own(PyObject_GetAttr(opt, nm.param_groups));
    py::object group_iter = own(PyObject_GetIter(param_groups.ptr()));
    Py_ssize_t gi = 0;
    while (PyObject* g_raw = PyIter_Next(group_iter.ptr())) {
      py::object g = own(g_raw);
      if (gi >= PyTuple_GET_SIZE(groups)) return false;
      PyObject* entries = PyTuple_GET_ITEM(groups, gi++);
      if (!PyTuple_CheckExact(entries)) return false;
      Py_ssize_t ei = 0;
      const Py_ssize_t en = PyTuple_GET_SIZE(entries);
      bool ok = true;
      for_each_item(g.ptr(), [&](PyObject* k, PyObject* v) {
        if (!ok) return;
        const int is_params = PyObject_RichCompareBool(k, nm.params, Py_EQ);
        if (is_params < 0) throw py::error_already_set();
        if (is_params || !plain_hyperparameter(v)) return;
        PyObject* e = ei < en ? PyTuple_GET_ITEM(entries, ei++) : nullptr;
        if (!e || !PyTuple_CheckExact(e) || PyTuple_GET_SIZE(e) != 2 || !eq(PyTuple_GET_ITEM(e, 0), k) ||
            !eq(PyTuple_GET_ITEM(e, 1), v))
          ok = false;
      });
      if (!ok || ei + 1 != en) return false;
      PyObject* last = PyTuple_GET_ITEM(entries, ei);
      if (!PyTuple_CheckExact(last) || PyTuple_GET_SIZE(last) != 2 || !eq(PyTuple_GET_ITEM(last, 0), nm.params))
        return false;
      PyObject* ids = PyTuple_GET_ITEM(last, 1);
      if (!PyTuple_CheckExact(ids)) return false;
      py::object params = own(PyObject_GetItem(g.ptr(), nm.params));
      py::object param_iter = own(PyObject_GetIter(params.ptr()));
      Py_ssize_t pi = 0;
      while (PyObject* p = PyIter_Next(param_iter.ptr())) {
        py::object keep = own(p);
        if (pi >= PyTuple_GET_SIZE(ids) || !id_equal(PyTuple_GET_ITEM(ids, pi++), p)) return false;
      }
      if (PyErr_Occurred()) throw py::error_already_set();
      if (pi != PyTuple_GET_SIZE(ids)) return false;
    }
    if (PyErr_Occurred()) throw py::error_already_set();
    if (gi != PyTuple_GET_SIZE(groups)) return false;
    py::object state_attr = own(PyObject_GetAttr(opt, nm.state));
    Py_ssize_t si = 0;
    bool ok = true;
    for_each_item(state_attr.ptr(), [&](PyObject* p, PyObject* st) {
      if (!ok) return;
      PyObject* rec = si < PyTuple_GET_SIZE(states_rec) ? PyTuple_GET_ITEM(states_rec, si++) : nullptr;
      if (!rec || !PyTuple_CheckExact(rec) || PyTuple_GET_SIZE(rec) != 2 || !id_equal(PyTuple_GET_ITEM(rec, 0), p)) {
        ok = false;
        return;
      }
      PyObject* entries = PyTuple_GET_ITEM(rec, 1);
      if (!PyTuple_CheckExact(entries)) { ok = false; return; }
      Py_ssize_t ei = 0;
      for_each_item(st, [&](PyObject* k, PyObject* v) {
        if (!ok) return;
        PyObject* e = ei < PyTuple_GET_SIZE(entries) ? PyTuple_GET_ITEM(entries, ei++) : nullptr;
        if (!e || !PyTuple_CheckExact(e) || PyTuple_GET_SIZE(e) != 2 || !eq(PyTuple_GET_ITEM(e, 0), k)) {
          ok = false;
          return;
        }
        const bool number = PyLong_Check(v) || PyFloat_Check(v);
        ok = number ? eq(PyTuple_GET_ITEM(e, 1), v) : id_equal(PyTuple_GET_ITEM(e, 1), v);
      });
      if (ok && ei != PyTuple_GET_SIZE(entries)) ok = false;
    });
    return ok && si == PyTuple_GET_SIZE(states_rec);
  }
};

// compiling._reachable(fn, owner), the same reads: the owner, a bound method's module or optimiser self, the
// modules and optimisers in the function's closure cells and in the globals its code names. (Any difference from
// the Python walk could only make the in-place comparison fail: the caller then builds the key with the Python one.)
// outside (when given) receives the tensors held by closure cells and by globals the code names, with their names:
// compiling._reachable(with_tensors=True) guards them by identity, shape and dtype (Note [State outside the
// arguments]), in this order (the cells, then the globals).
struct OutsideTensor {
  bool closure;
  py::object name;
  PyObject* tensor;  // borrowed: held by its cell or global for the caller's call
};

py::object reachable_of(PyObject* fn, PyObject* owner, PyTypeObject* tensor_type = nullptr,
                        std::vector<OutsideTensor>* outside = nullptr) {
  py::object found = own(PyList_New(0));
  auto is_tensor = [&](PyObject* v) {
    return outside && tensor_type && (Py_TYPE(v) == tensor_type || PyType_IsSubtype(Py_TYPE(v), tensor_type));
  };
  if (owner != Py_None) append(found.ptr(), owner);
  auto attr = [](PyObject* o, const char* name) -> py::object {
    PyObject* v = PyObject_GetAttrString(o, name);
    if (!v) {
      if (!PyErr_ExceptionMatches(PyExc_AttributeError)) throw py::error_already_set();
      PyErr_Clear();
      return py::none();
    }
    return own(v);
  };
  auto state_holder = [](PyObject* v) { return is_module(v) || is_optimizer(v); };
  // a plain function (no __self__ of its own in its __dict__) or a bound method of one: their fields, read
  // directly (the attribute reads of a missing __self__ raise and catch an AttributeError: slower than Python's)
  PyObject* func = PyMethod_Check(fn) ? PyMethod_GET_FUNCTION(fn) : fn;
  PyObject* func_dict = PyFunction_Check(func) ? ((PyFunctionObject*)func)->func_dict : nullptr;
  if (PyFunction_Check(func) && (!func_dict || !PyDict_GetItemString(func_dict, "__self__"))) {
    if (PyMethod_Check(fn) && state_holder(PyMethod_GET_SELF(fn))) append(found.ptr(), PyMethod_GET_SELF(fn));
    PyObject* closure = PyFunction_GET_CLOSURE(func);
    PyCodeObject* code = (PyCodeObject*)PyFunction_GET_CODE(func);
    py::object freevars;  // read only when a cell holds a tensor
    for (Py_ssize_t i = 0; closure && i < PyTuple_GET_SIZE(closure); ++i) {
      PyObject* value = PyCell_GET(PyTuple_GET_ITEM(closure, i));
      if (value && state_holder(value)) append(found.ptr(), value);
      else if (value && is_tensor(value)) {
        if (!freevars) freevars = own(PyCode_GetFreevars(code));
        outside->push_back({true, borrow(PyTuple_GET_ITEM(freevars.ptr(), i)), value});
      }
    }
    PyObject* globals = PyFunction_GET_GLOBALS(func);
    PyObject* co_names = code->co_names;
    for (Py_ssize_t i = 0; PyDict_CheckExact(globals) && i < PyTuple_GET_SIZE(co_names); ++i) {
      PyObject* value = PyDict_GetItemWithError(globals, PyTuple_GET_ITEM(co_names, i));
      if (!value && PyErr_Occurred()) throw py::error_already_set();
      if (value && value != Py_None && state_holder(value)) append(found.ptr(), value);
      else if (value && is_tensor(value)) outside->push_back({false, borrow(PyTuple_GET_ITEM(co_names, i)), value});
    }
    return found;
  }
  py::object self_ = attr(fn, "__self__");
  if (!self_.is_none() && state_holder(self_.ptr())) append(found.ptr(), self_.ptr());
  py::object code = attr(fn, "__code__");
  py::object closure = attr(fn, "__closure__");
  if (!closure.is_none()) {
    if (!PyTuple_Check(closure.ptr())) throw std::runtime_error("__closure__ is not a tuple");
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(closure.ptr()); ++i) {
      PyObject* cell = PyTuple_GET_ITEM(closure.ptr(), i);
      if (!PyCell_Check(cell)) throw std::runtime_error("a closure item is not a cell");
      PyObject* value = PyCell_GET(cell);
      if (value && state_holder(value)) append(found.ptr(), value);
      else if (value && is_tensor(value)) {
        py::object freevars = code.is_none() ? py::none() : attr(code.ptr(), "co_freevars");
        if (!PyTuple_Check(freevars.ptr()) || PyTuple_GET_SIZE(freevars.ptr()) <= i)
          throw std::runtime_error("a closure's names are not readable");  // the caller builds the key
        outside->push_back({true, borrow(PyTuple_GET_ITEM(freevars.ptr(), i)), value});
      }
    }
  }
  if (!code.is_none()) {
    py::object globals = attr(fn, "__globals__");
    py::object co_names = attr(code.ptr(), "co_names");
    if (!globals.is_none() && !PyDict_CheckExact(globals.ptr())) throw std::runtime_error("__globals__ is not a dict");
    if (!PyTuple_Check(co_names.ptr())) throw std::runtime_error("co_names is not a tuple");
    for (Py_ssize_t i = 0; !globals.is_none() && i < PyTuple_GET_SIZE(co_names.ptr()); ++i) {
      PyObject* value = PyDict_GetItemWithError(globals.ptr(), PyTuple_GET_ITEM(co_names.ptr(), i));
      if (!value && PyErr_Occurred()) throw py::error_already_set();
      if (value && value != Py_None && state_holder(value)) append(found.ptr(), value);
      else if (value && is_tensor(value)) outside->push_back({false, borrow(PyTuple_GET_ITEM(co_names.ptr(), i)), value});
    }
  }
  return found;
}

}  // namespace guard

// Note [Entry guards compared in place]: the argument tensors when _entry_key(...)[0] would equal `key`, None when
// it would not or this cannot tell (the caller then builds the key); _entry_key_matches and _ReplayProgram.call
py::object entry_matches(py::handle key, py::handle tensor_type, py::handle args, py::handle kwargs,
                         py::handle middle, py::handle reachable_in, py::handle fn, py::handle owner) {
  if (!PyTuple_CheckExact(key.ptr())) return py::none();
  guard::Match w{(PyTypeObject*)tensor_type.ptr(), key.ptr()};
  try {
    std::vector<guard::OutsideTensor> outside;
    py::object reachable = reachable_in.is_none()
                               ? guard::reachable_of(fn.ptr(), owner.ptr(), w.tensor_type, &outside)
                               : py::reinterpret_borrow<py::object>(reachable_in);
    if (!w.describe(args.ptr()) || !w.describe(kwargs.ptr())) return py::none();
    if (middle.is_none()) {  // compiling.entry_key's middle, (("grad mode", ...), ("default dtype", ...),
                             // ("autocast", None)), read here: the caller checked that autocast is off
      static PyObject* grad_mode = PyUnicode_InternFromString("grad mode");
      static PyObject* default_dtype = PyUnicode_InternFromString("default dtype");
      static PyObject* autocast = PyUnicode_InternFromString("autocast");
      PyObject* values[3] = {GradMode::is_enabled() ? Py_True : Py_False, nullptr, Py_None};
      py::object dtype = dtype_object(default_float_dtype());
      values[1] = dtype.ptr();
      PyObject* labels[3] = {grad_mode, default_dtype, autocast};
      for (int k = 0; k < 3; ++k) {
        if (w.next >= PyTuple_GET_SIZE(key.ptr())) return py::none();
        PyObject* p = PyTuple_GET_ITEM(key.ptr(), w.next++);
        if (!PyTuple_CheckExact(p) || PyTuple_GET_SIZE(p) != 2 || !guard::Match::eq(PyTuple_GET_ITEM(p, 0), labels[k]) ||
            !guard::Match::eq(PyTuple_GET_ITEM(p, 1), values[k]))
          return py::none();
      }
    }
    const guard::Names& nm = guard::names();
    for (const guard::OutsideTensor& o : outside) {  // compiling._reachable's parts, (label, (id, shape, dtype))
      if (w.next >= PyTuple_GET_SIZE(key.ptr())) return py::none();
      PyObject* p = PyTuple_GET_ITEM(key.ptr(), w.next++);
      if (!PyTuple_CheckExact(p) || PyTuple_GET_SIZE(p) != 2) return py::none();
      // the label, "the closure's tensor NAME" or "the global tensor NAME", compared without building it
      static PyObject* closure_prefix = PyUnicode_InternFromString("the closure's tensor ");
      static PyObject* global_prefix = PyUnicode_InternFromString("the global tensor ");
      PyObject* prefix = o.closure ? closure_prefix : global_prefix;
      PyObject* rec_label = PyTuple_GET_ITEM(p, 0);
      const Py_ssize_t np = PyUnicode_GET_LENGTH(prefix);
      if (!PyUnicode_CheckExact(rec_label) || !PyUnicode_CheckExact(o.name.ptr()) ||
          PyUnicode_GET_LENGTH(rec_label) != np + PyUnicode_GET_LENGTH(o.name.ptr()) ||
          PyUnicode_Tailmatch(rec_label, prefix, 0, np, -1) != 1 ||
          PyUnicode_Tailmatch(rec_label, o.name.ptr(), np, PY_SSIZE_T_MAX, 1) != 1)
        return py::none();
      PyObject* rec = PyTuple_GET_ITEM(p, 1);  // (id, shape, dtype)
      if (!PyTuple_CheckExact(rec) || PyTuple_GET_SIZE(rec) != 3 || !guard::Match::id_equal(PyTuple_GET_ITEM(rec, 0), o.tensor))
        return py::none();
      if (const Tensor* core = guard::Match::plain_core(o.tensor, w.tensor_type)) {
        if (!guard::Match::ints_equal(PyTuple_GET_ITEM(rec, 1), (*core)->shape) ||
            !guard::Match::eq(PyTuple_GET_ITEM(rec, 2), dtype_object((*core)->dtype).ptr()))
          return py::none();
        continue;
      }
      py::object shape = guard::own(PySequence_Tuple(guard::own(PyObject_GetAttr(o.tensor, nm.shape)).ptr()));
      py::object dtype = guard::own(PyObject_GetAttr(o.tensor, nm.dtype));
      if (!guard::Match::eq(PyTuple_GET_ITEM(rec, 1), shape.ptr()) || !guard::Match::eq(PyTuple_GET_ITEM(rec, 2), dtype.ptr()))
        return py::none();
    }
    for (py::handle part : middle.is_none() ? py::tuple() : py::reinterpret_borrow<py::object>(middle)) {
      if (w.next >= PyTuple_GET_SIZE(key.ptr()) || !guard::Match::eq(PyTuple_GET_ITEM(key.ptr(), w.next++), part.ptr()))
        return py::none();
    }
    for (py::handle obj : reachable) w.states.push_back(obj.ptr());
    std::vector<PyObject*> done;
    for (size_t i = 0; i < w.states.size(); ++i) {
      PyObject* obj = w.states[i];
      if (std::find(done.begin(), done.end(), obj) != done.end()) continue;
      done.push_back(obj);
      const bool module = guard::is_module(obj);
      if (w.next >= PyTuple_GET_SIZE(key.ptr())) return py::none();
      PyObject* p = PyTuple_GET_ITEM(key.ptr(), w.next++);
      if (!PyTuple_CheckExact(p) || PyTuple_GET_SIZE(p) != 2) return py::none();
      // "module NAME" / "optimizer NAME", made once per class name and kept
      struct Label {
        std::string name;
        py::object module, optimizer;
      };
      static std::unordered_map<PyTypeObject*, Label> labels;
      Label& cached = labels[Py_TYPE(obj)];
      const char* type_name = _PyType_Name(Py_TYPE(obj));
      if (!cached.module || cached.name != type_name) {
        cached.name = type_name;
        cached.module = guard::own(PyUnicode_FromFormat("module %s", type_name));
        cached.optimizer = guard::own(PyUnicode_FromFormat("optimizer %s", type_name));
      }
      PyObject* recorded_label = PyTuple_GET_ITEM(p, 0);
      if (!PyUnicode_Check(recorded_label) ||
          !guard::Match::eq(recorded_label, (module ? cached.module : cached.optimizer).ptr()))
        return py::none();
      if (!(module ? guard::Match::module_matches(obj, PyTuple_GET_ITEM(p, 1), w.tensor_type)
                   : guard::Match::optimizer_matches(obj, PyTuple_GET_ITEM(p, 1))))
        return py::none();
    }
    if (w.next != PyTuple_GET_SIZE(key.ptr())) return py::none();
  } catch (py::error_already_set&) {
    PyErr_Clear();
    return py::none();
  } catch (const std::exception&) {  // any read that failed: the caller's walk raises it, or builds another key
    PyErr_Clear();
    return py::none();
  }
  if (PyErr_Occurred()) {
    PyErr_Clear();
    return py::none();
  }
  return w.tensors;
}

}  // namespace

void bind_capture(py::module_& m) {
  g_module = m.inc_ref().ptr();  // Note [Grad mode steps in the loop]
  bind_replay_backward(m);  // _plan_backward and _BackwardPlan (replay_backward.cpp)
  bind_replay_fuse(m);      // _set_replay_fusion (replay_fuse.cpp)
  // Note [Entry guards in C++]: (key, argument tensors) of compiling.entry_key for a static program; `middle`
  // are the parts between the arguments' and the modules' (grad mode, default dtype), `reachable` the modules and
  // optimisers compiling._reachable found.
  m.def("_entry_key", [](py::handle tensor_type, py::handle args, py::handle kwargs, py::handle middle,
                         py::handle reachable) {
    const guard::Names& n = guard::names();
    guard::Walk w;
    w.tensor_type = (PyTypeObject*)tensor_type.ptr();
    w.describe(args.ptr(), guard::own(PyTuple_Pack(1, n.args)).ptr());
    w.describe(kwargs.ptr(), guard::own(PyTuple_Pack(1, n.kwargs)).ptr());
    for (py::handle part : middle) guard::append(w.parts.ptr(), part.ptr());
    for (py::handle obj : reachable) guard::append(w.states.ptr(), obj.ptr());
    std::vector<PyObject*> done;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(w.states.ptr()); ++i) {
      PyObject* obj = PyList_GET_ITEM(w.states.ptr(), i);
      if (std::find(done.begin(), done.end(), obj) != done.end()) continue;
      done.push_back(obj);
      const bool module = guard::is_module(obj);
      py::object label = guard::own(PyUnicode_FromFormat(module ? "module %s" : "optimizer %s",
                                                         _PyType_Name(Py_TYPE(obj))));
      w.add(label.ptr(), module ? guard::module_state(obj, w.tensor_type) : guard::optimizer_state(obj));
    }
    py::object key = guard::own(PyList_AsTuple(w.parts.ptr()));
    return guard::own(PyTuple_Pack(2, key.ptr(), w.tensors.ptr()));
  }, py::arg("tensor_type"), py::arg("args"), py::arg("kwargs"), py::arg("middle"), py::arg("reachable"));
  // Note [Entry guards compared in place]
  // reachable: the list compiling._reachable gives, or None for this file's reachable_of(fn, owner)
  m.def("_entry_key_matches", &entry_matches, py::arg("key"), py::arg("tensor_type"), py::arg("args"),
        py::arg("kwargs"), py::arg("middle"), py::arg("reachable"), py::arg("fn") = py::none(),
        py::arg("owner") = py::none());
  // compiling._reachable's walk in C++ (for tests: the two must agree)
  m.def("_reachable", [](py::handle fn, py::handle owner) { return guard::reachable_of(fn.ptr(), owner.ptr()); },
        py::arg("fn"), py::arg("owner"));
  m.attr("_replay_seq_args") = true;  // Note [Sequence arguments in the loop]: _ReplayProgram.add takes seqs
  m.attr("_replay_seq_results") = true;  // Note [Sequence results in the loop]: out = -5 and out_slots
  py::class_<ReplayProgram>(m, "_ReplayProgram")
      .def(py::init<py::handle>(), py::arg("tensor_type"))
      // Note [Target checks in the loop]: the function whose validate steps the loop checks itself
      // (None: no step is checked here, for programs built afterwards; the function is kept alive for good)
      // Note [Module state compared in place]: False compares a module's state by building it (for tests)
      .def_static("set_module_state_in_place", [](bool on) { guard::MODULE_STATE_IN_PLACE = on; }, py::arg("on"))
      .def_static("set_target_range_check", [](py::object fn) {
        g_target_range_check = fn.is_none() ? nullptr : fn.inc_ref().ptr();
      }, py::arg("fn"))
      // name: the _C function's name, which picks its core call when every argument is a slot
      // seqs: None, or per argument None or (is_list, item slots, item constants): Note [Sequence arguments in
      // the loop]
      .def("add", [](ReplayProgram& p, py::object fn, std::vector<int64_t> slots, std::vector<py::object> consts,
                     int64_t out, const std::string& name, py::object expected, py::object seqs,
                     std::vector<int64_t> out_slots, bool out_is_list) {
        // a step Python runs (out == -2) lists the slots it reads, any number; a call here has at most 16
        DG_CHECK(slots.size() == consts.size() && (slots.size() <= kMaxStepArgs || out == -2), ValueError,
                 "_ReplayProgram.add: expected as many slots as constants, at most ", kMaxStepArgs, ", got ",
                 slots.size(), " and ", consts.size(), ".");
        CoreCall core;
        auto found = core_calls().find(name);
        const bool all_slots = std::all_of(slots.begin(), slots.end(), [](int64_t s) { return s >= 0; });
        if (found != core_calls().end() && out >= 0 && all_slots &&
            slots.size() == (found->second.unary ? 1u : 2u))
          core = found->second;
        DG_CHECK(out > kSeq || (out == kSeq && !out_slots.empty()), ValueError, "_ReplayProgram.add: out is a slot, ",
                 "-1, -2, -3 (None), -4 (a value) or -5 (a sequence of tensors, with out_slots), got ", out, ".");
        DG_CHECK(out == kSeq || out_slots.empty(), ValueError, "_ReplayProgram.add: out_slots go with out = -5.");
        Special special = Special::none;
        if ((name == "grad" || name == "grad.set") && !fn.is_none()) {
          py::object prop = py::handle((PyObject*)p.tensor_type).attr("__dict__").attr("get")("grad");
          // the accessors behind the recorder's stand-ins, which stay in place (Note [The recorded surface stays
          // in place] in python/dyngrad/_api/capture.py): a stand-in's __wrapped__ is the accessor it stands for
          auto accessor = [&](const char* which) {
            py::object f = prop.attr(which);
            return py::reinterpret_borrow<py::object>(stand_in_target(f.ptr()));
          };
          if (name == "grad" && out >= 0 && slots.size() == 1 && slots[0] >= 0 && fn.is(accessor("fget")))
            special = Special::read_grad;
          if (name == "grad.set" && out == kNone && slots.size() == 2 && slots[0] >= 0 && slots[1] < 0 &&
              consts[1].is_none() && fn.is(accessor("fset")))
            special = Special::clear_grad;
        }
        int64_t classes = 0, ignore = 0;
        if (name == "validate" && g_target_range_check && out == kNone && slots.size() == 5 && slots[0] < 0 &&
            consts[0].ptr() == g_target_range_check && slots[1] >= 0 && slots[2] < 0 && slots[3] < 0 &&
            PyLong_CheckExact(consts[2].ptr()) && PyLong_CheckExact(consts[3].ptr())) {
          int overflow = 0;
          classes = PyLong_AsLongLongAndOverflow(consts[2].ptr(), &overflow);
          const int overflow_c = overflow;
          ignore = PyLong_AsLongLongAndOverflow(consts[3].ptr(), &overflow);
          if (!overflow && !overflow_c && !PyErr_Occurred()) special = Special::target_range;
          PyErr_Clear();
        }
        double smoothing = 0;
        bool flag = false;
        auto is_own = [&](const char* own_name) { return is_c_function(fn.ptr(), own_name); };
        if (special == Special::none && name == "is_grad_enabled" && out == kValue && slots.empty() &&
            (expected.ptr() == Py_True || expected.ptr() == Py_False) && is_own("is_grad_enabled"))
          special = Special::grad_enabled;
        if (special == Special::none && name == "_set_grad_enabled" && out == kNone && slots.size() == 1 &&
            slots[0] < 0 && (consts[0].ptr() == Py_True || consts[0].ptr() == Py_False) && is_own("_set_grad_enabled")) {
          special = Special::set_grad_enabled;
          flag = consts[0].ptr() == Py_True;
        }
        if (special == Special::none && name == "cross_entropy" && out >= 0 && slots.size() == 5 && slots[0] >= 0 &&
            slots[1] >= 0 && slots[2] < 0 && slots[3] < 0 && slots[4] < 0 && PyLong_CheckExact(consts[2].ptr()) &&
            PyLong_CheckExact(consts[3].ptr()) && PyFloat_CheckExact(consts[4].ptr()) && is_own("cross_entropy")) {
          int o1 = 0, o2 = 0;
          const long long reduction = PyLong_AsLongLongAndOverflow(consts[2].ptr(), &o1);
          const long long ignore_index = PyLong_AsLongLongAndOverflow(consts[3].ptr(), &o2);
          if (!o1 && !o2 && !PyErr_Occurred()) {
            special = Special::cross_entropy;
            classes = reduction;
            ignore = ignore_index;
            smoothing = PyFloat_AS_DOUBLE(consts[4].ptr());
          }
          PyErr_Clear();
        }
        std::vector<SeqArg> seq_args;
        if (!seqs.is_none()) {
          DG_CHECK(out != -2 && py::len(seqs) == slots.size(), ValueError, "_ReplayProgram.add: seqs has one entry ",
                   "per argument, got ", py::len(seqs), " for ", slots.size(), " arguments.");
          seq_args.resize(slots.size());
          size_t k = 0;
          for (py::handle entry : seqs) {
            if (!entry.is_none()) {
              DG_CHECK(slots[k] < 0, ValueError, "_ReplayProgram.add: argument ", k, " is both a slot and a sequence.");
              auto spec = entry.cast<py::tuple>();
              SeqArg& q = seq_args[k];
              q.kind = spec[0].cast<bool>() ? 2 : 1;
              q.slots = spec[1].cast<std::vector<int64_t>>();
              q.consts = spec[2].cast<std::vector<py::object>>();
              DG_CHECK(q.slots.size() == q.consts.size(), ValueError, "_ReplayProgram.add: a sequence argument ",
                       "needs as many slots as constants, got ", q.slots.size(), " and ", q.consts.size(), ".");
            }
            ++k;
          }
        }
        std::shared_ptr<OptimSpec> optim;
        if (special == Special::none && out == kNone && (name == "_sgd_step" || name == "_adam_step") &&
            is_own(name.c_str())) {
          optim = optim_spec_of(name, slots, consts, seq_args);
          if (optim) special = Special::optim;
        }
        p.steps.push_back({std::move(fn), std::move(slots), std::move(consts), out, core, special,
                           std::move(seq_args), std::move(expected), name, std::move(out_slots), out_is_list,
                           classes, ignore, smoothing, flag, std::move(optim)});
      }, py::arg("fn"), py::arg("slots"), py::arg("consts"), py::arg("out"), py::arg("name"),
         py::arg("expected") = py::none(), py::arg("seqs") = py::none(),
         py::arg("out_slots") = std::vector<int64_t>{}, py::arg("out_is_list") = false)
      // exported: per slot, whether Python reads it besides the steps (the outputs); the slots the steps outside
      // the core calls read are exported by the steps themselves (Note [Slots in C++]).
      .def("set_exported", [](ReplayProgram& p, const std::vector<bool>& flags) {
        std::vector<char> exported(flags.begin(), flags.end());
        for (const auto& s : p.steps)
          if (!(s.core.unary || s.core.binary) && s.special != Special::cross_entropy &&
              s.special != Special::read_grad && s.special != Special::clear_grad && s.special != Special::optim) {
            for (int64_t slot : s.slots)
              if (slot >= 0 && slot < (int64_t)exported.size()) exported[slot] = 1;
            for (const SeqArg& q : s.seqs)
              for (int64_t slot : q.slots)
                if (slot >= 0 && slot < (int64_t)exported.size()) exported[slot] = 1;
          }
        p.exported = std::move(exported);
        if (!p.plan) {  // Note [Scalar replay]: the slots returned (set_backward_plan sets them again with a plan)
          p.output_slots.clear();
          for (size_t slot = 0; slot < flags.size(); ++slot)
            if (flags[slot]) p.output_slots.push_back((int64_t)slot);
        }
        p.fused = build_fused(p);  // Note [Fused steps]
      }, py::arg("exported"))
      // Note [The backward as a recorded program]: takes `plan` (a _BackwardPlan of step `step`, a _run_backward)
      // for its runs; returns None, or why the program cannot take it (then it runs as before). `outputs`: the slots
      // the call returns. After set_exported.
      .def("set_backward_plan", [](ReplayProgram& p, size_t step, py::object plan_obj,
                                   const std::vector<int64_t>& outputs) -> py::object {
        std::shared_ptr<BackwardPlan> plan = plan_of(plan_obj);
        DG_CHECK(plan && step < p.steps.size() && p.steps[step].name == "_run_backward", ValueError,
                 "_ReplayProgram.set_backward_plan: expected a _BackwardPlan and the index of a _run_backward step.");
        std::vector<int64_t> outs;
        std::vector<std::vector<int64_t>> reads, seq_outs;
        std::vector<std::string> names;
        for (const auto& s : p.steps) {
          outs.push_back(s.out);
          seq_outs.push_back(s.out_slots);
          names.push_back(s.name);
          std::vector<int64_t> r;
          for (int64_t slot : s.slots)
            if (slot >= 0) r.push_back(slot);
          for (const SeqArg& q : s.seqs)
            for (int64_t slot : q.slots)
              if (slot >= 0) r.push_back(slot);
          reads.push_back(std::move(r));
        }
        std::vector<char> exported(p.exported.size(), 0);
        for (int64_t slot : outputs)
          if (slot >= 0 && slot < (int64_t)exported.size()) exported[slot] = 1;
        PlanHeads heads;
        PlanHarvests harvests;
        std::string why = plan_fits(*plan, outs, seq_outs, reads, names, step, exported, heads, harvests);
        if (!why.empty()) return py::str(why);
        p.plan_heads = std::move(heads);
        p.plan_harvests = std::move(harvests);
        p.makes_node.assign(step, 0);
        for (size_t i = 0; i < step; ++i) {
          const auto& s = p.steps[i];
          bool made = s.out >= 0 && plan_has_history(*plan, s.out);
          for (int64_t slot : s.out_slots) made = made || plan_has_history(*plan, slot);
          p.makes_node[i] = made;
        }
        p.plan = std::move(plan);
        p.plan_step = step;
        p.output_slots = outputs;
        p.fused = build_fused(p);  // Note [Fused steps]: none before the planned backward
        return py::none();
      }, py::arg("step"), py::arg("plan"), py::arg("outputs"))
      // Note [Fused steps] (replay_fuse.cpp): how many groups of steps run fused; how many times one did
      .def_property_readonly("fused_groups", [](const ReplayProgram& p) { return fuse_groups(p.fused.get()); })
      .def_property_readonly("fused_runs", [](const ReplayProgram& p) { return fuse_runs(p.fused.get()); })
      // how many runs took the planned backward, for tests and compile_stats
      .def_property_readonly("planned_runs", [](const ReplayProgram& p) { return p.planned_runs; })
      // Note [Scalar replay]: how many runs took the scalar program; off: never build one
      .def_property_readonly("scalar_runs", [](const ReplayProgram& p) { return p.scalar_runs; })
      .def("set_scalar", [](ReplayProgram& p, bool on) {
        if (!on) {
          p.scalar.reset();
          p.scalar_state = -1;
        } else if (p.scalar_state == -1 && !p.scalar) {
          p.scalar_state = 0;
        }
      }, py::arg("on"))
      // Note [Profiling a replay]
      .def("set_profile", [](ReplayProgram& p, bool on) {
        p.profile = on;
        p.step_ns.assign(p.steps.size() + 1, 0);
        p.profiled_runs = 0;
      }, py::arg("on"))
      // (runs, [(step name, how it runs, total ns)] per step, then ("<set-up>", "loop", ns)) since set_profile, and
      // the cost of one read of the clock (in each step's time once)
      .def("profile", [](const ReplayProgram& p) {
        py::list out;
        for (size_t i = 0; i <= p.steps.size(); ++i) {
          const int64_t ns = i < p.step_ns.size() ? p.step_ns[i] : 0;
          if (i == p.steps.size()) {
            out.append(py::make_tuple("<set-up>", "loop", ns));
            break;
          }
          const ReplayProgram::Step& s = p.steps[i];
          const char* how = i == p.plan_step && p.plan ? "planned backward"
                            : s.out == -2                ? "python"
                            : s.core.unary || s.core.binary ? "core call"
                            : s.special != Special::none ? "in the loop"
                                                         : "vectorcall";
          out.append(py::make_tuple(s.name, how, ns));
        }
        int64_t t0 = now_ns(), t1 = t0;
        for (int k = 0; k < 100; ++k) t1 = now_ns();
        return py::make_tuple(p.profiled_runs, out, (t1 - t0) / 100);  // the clock's own cost per read
      })
      .def("__len__", [](const ReplayProgram& p) { return p.steps.size(); })
      // how many steps the loop hands back for Python to build and run (out == -2), for tests
      .def_property_readonly("python_steps", [](const ReplayProgram& p) {
        return std::count_if(p.steps.begin(), p.steps.end(), [](const ReplayProgram::Step& s) { return s.out == -2; });
      })
      // how many steps read or clear a .grad in the loop itself (Note [Gradient steps in the loop]), for tests
      .def_property_readonly("grad_steps", [](const ReplayProgram& p) {
        return std::count_if(p.steps.begin(), p.steps.end(),
                             [](const ReplayProgram::Step& s) {
                               return s.special == Special::read_grad || s.special == Special::clear_grad;
                             });
      })
      // how many steps of Note [Grad mode steps in the loop] the loop runs itself, for tests
      .def_property_readonly("direct_steps", [](const ReplayProgram& p) {
        return std::count_if(p.steps.begin(), p.steps.end(), [](const ReplayProgram::Step& s) {
          return s.special == Special::grad_enabled || s.special == Special::set_grad_enabled ||
                 s.special == Special::cross_entropy;
        });
      })
      // Note [Optimiser steps in the loop]: how many optimiser steps the loop calls itself, for tests
      .def_property_readonly("optim_steps", [](const ReplayProgram& p) {
        return std::count_if(p.steps.begin(), p.steps.end(), [](const ReplayProgram::Step& s) {
          return s.special == Special::optim;
        });
      })
      // how many steps check class targets in the loop itself (Note [Target checks in the loop]), for tests
      .def_property_readonly("target_checks", [](const ReplayProgram& p) {
        return std::count_if(p.steps.begin(), p.steps.end(),
                             [](const ReplayProgram::Step& s) { return s.special == Special::target_range; });
      })
      // Runs the steps from `start` on, the slots being a Python list; returns None when every step ran, else
      // (index, result) of the first step whose result Python must look at, or (index,) for a step Python runs.
      // A step that raises ends the run.
      .def("run", [](ReplayProgram& p, py::list slots, size_t start) -> py::object {
        try {
          return run_steps(p, slots, start);
        } catch (...) {
          p.finish();
          throw;
        }
      }, py::arg("slots"), py::arg("start"))
      // Note [A static call in one C++ call]: compiling.Program.__call__'s common case, the entry guard compared in
      // place (entry_matches, as _entry_key_matches(key, ..., None, None, fn, owner)), the slots laid out from
      // `layout` (Variant.fresh_slots' template: the externals at their slots) with the argument tensors first, and
      // the run from step 0. Returns None when the key does not match (nothing ran: the caller takes its general
      // path), the tensor in slot `out` when every step ran in the loop and out >= 0, else (slots, argument tensors,
      // the run's stop) for the caller to go on with as capture.replay would.
      .def("call", [](ReplayProgram& p, py::handle key, py::handle args, py::handle kwargs, py::handle fn,
                      py::handle owner, py::list layout, int64_t out) -> py::object {
        py::object tensors = entry_matches(key, (PyObject*)p.tensor_type, args, kwargs, py::none(), py::none(), fn, owner);
        if (tensors.is_none()) return tensors;
        PyObject* t = tensors.ptr();
        const Py_ssize_t n_args = PyList_GET_SIZE(t);
        const Py_ssize_t n = PyList_GET_SIZE(layout.ptr());
        DG_CHECK(n_args <= n, ValueError, "_ReplayProgram.call: ", n_args, " argument tensors for ", n, " slots.");
        py::list slots = py::reinterpret_steal<py::list>(PyList_GetSlice(layout.ptr(), 0, n));
        if (!slots) throw py::error_already_set();
        for (Py_ssize_t i = 0; i < n_args; ++i) {
          PyObject* a = PyList_GET_ITEM(t, i);
          Py_INCREF(a);
          PyList_SetItem(slots.ptr(), i, a);
        }
        py::object stop;
        try {
          stop = run_steps(p, slots, 0);
        } catch (...) {
          p.finish();
          throw;
        }
        if (stop.is_none() && out >= 0 && out < n) {
          PyObject* r = PyList_GET_ITEM(slots.ptr(), out);
          if (is_tensor(r, p.tensor_type)) return py::reinterpret_borrow<py::object>(r);
        }
        return py::make_tuple(slots, tensors, stop);
      }, py::arg("key"), py::arg("args"), py::arg("kwargs"), py::arg("fn"), py::arg("owner"), py::arg("layout"),
         py::arg("out"))
      // Every slot a C++ value holds gets its Python object (a miss reads the served results), and the run ends.
      .def("materialize", [](ReplayProgram& p, py::list slots) {
        if (p.fused) {  // Note [Fused steps]: the results the fused groups did not make, made now
          const Py_ssize_t n = PyList_GET_SIZE(slots.ptr());
          if ((Py_ssize_t)p.values.size() < n) p.values.resize(n);
          fuse_restore(*p.fused, p.values, [&](int64_t slot) { return slot < n ? slot_tensor(p, slots.ptr(), slot) : nullptr; });
        }
        p.materialize_all(slots.ptr());
        if (p.plan_ran) {  // Note [The backward as a recorded program]: leaving the program after a planned backward
          const Py_ssize_t n = PyList_GET_SIZE(slots.ptr());
          plan_departed(*p.plan, [&](int64_t slot) { return slot < n ? held_tensor(PyList_GET_ITEM(slots.ptr(), slot), p.tensor_type) : nullptr; });
        }
        p.finish();
      }, py::arg("slots"));
}

}  // namespace dyngrad
