// fast_paths.cpp: hand-written CPython entry points for the calls a dynamic model makes on every op: the arithmetic
// operators, indexing with ints and slices, the one-tensor functions and methods (dg.tanh(x), x.relu()), matmul,
// linear, sum/mean, cross_entropy and the optimiser's add_.
//
// Note [Fast paths]: every public function and method is written once, in Python, for both engines
// (python/dyngrad/_api/, listed in its table). For the entries the table marks `hot`, the shared layer hands this
// file its Python function (the *fallback*) and gets back a builtin that checks it was given exactly the common
// case it handles (tensors and Python numbers, a plain dim), runs the same core calls the Python function would
// make, and otherwise calls the fallback, which stays the one definition of the signature, the defaults and the
// error messages. pybind11's general dispatcher costs about as much as a 1-element op itself; here an operator
// is the type's number slot and a function is a METH_FASTCALL builtin. Results are made by pybind11 (py::cast), so
// every Tensor object is an ordinary pybind11 instance.
#include <cxxabi.h>

#include <algorithm>
#include <atomic>
#include <memory>
#include <set>
#include <string>
#include <unordered_map>

#include "capture_record.h"
#include "common.h"
#include "dyngrad/kernels/kernels.h"
#include "dyngrad/node.h"
#include "dyngrad/ops_sort.h"
#include "dyngrad/grad_mode.h"
#include "replay_backward.h"

namespace dyngrad {

namespace {

PyTypeObject* g_tensor_type = nullptr;
// Note [Meta tensors] (python/dyngrad/_api/meta.py): instances of this class (the shared layer's MetaMixin) are meta
// tensors, whose core is a one-element proxy: the fast paths hand them to their Python definitions.
PyTypeObject* g_meta_class = nullptr;

// The Tensor held by a Python Tensor (or subclass) object; nullptr for anything else, and for a meta tensor.
const Tensor* tensor_of(PyObject* o) {
  if (g_meta_class && Py_TYPE(o) != g_tensor_type && PyType_IsSubtype(Py_TYPE(o), g_meta_class)) return nullptr;
  return held_tensor(o, g_tensor_type);
}

// A Tensor (or subclass) object, meta tensors included: an operator slot hands those to its Python fallback.
bool is_tensor_object(PyObject* o) {
  return Py_TYPE(o) == g_tensor_type || PyType_IsSubtype(Py_TYPE(o), g_tensor_type);
}

bool is_number(PyObject* o) { return PyLong_Check(o) || PyFloat_Check(o); }  // bool is a PyLong

PyObject* to_python(Tensor&& t) { return py::cast(std::move(t)).release().ptr(); }

// C++ exceptions become the Python exceptions pybind11's translators map them to (check.h). A thread that CPython
// ends at exit unwinds by abi::__forced_unwind, which must be rethrown (Note [Daemon threads at exit], gil.h).
#define DG_PY_TRY try {
#define DG_PY_CATCH                          \
  }                                          \
  catch (py::error_already_set & e) {        \
    e.restore();                             \
    return nullptr;                          \
  }                                          \
  catch (abi::__forced_unwind&) {            \
    throw;                                   \
  }                                          \
  catch (...) {                              \
    py::detail::try_translate_exceptions();  \
    return nullptr;                          \
  }

// Note [Fallbacks of methods]: a builtin method's `self` is the tensor, so its Python fallback cannot travel as the
// builtin's self as a module function's does. Each method and operator slot is a template instance of its own, and
// finds its fallback in a variable of that instance (fallback_of<its own address>): no table of slot numbers, so no
// number can name another method's fallback. install_fast_paths sets them.
using Fast = PyObject* (*)(PyObject*, PyObject* const*, Py_ssize_t, PyObject*);
template <Fast Method>
inline PyObject* fallback_of = nullptr;
template <binaryfunc Slot>
inline PyObject* forward_fallback_of = nullptr;  // the shared layer's __add__, for a + b with a a tensor
template <binaryfunc Slot>
inline PyObject* reflected_fallback_of = nullptr;  // its __radd__, for a + b with b a tensor

// Calls fallback(self, *args, **kwnames): a method's slow path.
PyObject* call_method_fallback(PyObject* fallback, PyObject* self, PyObject* const* args, Py_ssize_t nargsf,
                               PyObject* kwnames) {
  Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
  Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
  PyObject* small[8];
  std::vector<PyObject*> big;
  PyObject** full = small;
  if (1 + nargs + nkw > 8) {
    big.resize(1 + nargs + nkw);
    full = big.data();
  }
  full[0] = self;
  for (Py_ssize_t i = 0; i < nargs + nkw; ++i) full[1 + i] = args[i];
  return PyObject_Vectorcall(fallback, full, 1 + nargs, kwnames);
}

using UnaryOp = Tensor (*)(const Tensor&);
using BinaryOp = Tensor (*)(const Tensor&, const Tensor&);
using ReduceOp = Tensor (*)(const Tensor&, const Dims&, bool);

// A Python number the fast path of Op takes: sub leaves a Python bool to the shared layer, which refuses it as torch
// does (the core cannot: the number arrives as a tensor of the other operand's dtype).
template <BinaryOp Op>
bool fast_number(PyObject* o) {
  // a plain if: a comparison of function addresses is not a constant expression in every compiler mode (the
  // sanitizer build refuses `if constexpr` here); the optimiser folds it all the same
  if (Op == &sub) {
    if (PyBool_Check(o)) return false;
  }
  return is_number(o);
}

// Note [Fast paths under autocast]: torch's autocast changes the dtype matmul, linear and cross_entropy compute in;
// python/dyngrad/_api/autocast.py applies its policies around their Python definitions, reading the calling thread's
// autocast state. While some thread has autocast enabled (the flag is process-wide), the fast paths of these three
// call their fallback, so the policy applies; another thread's plain matmul meanwhile takes the equal, slower path.
std::atomic<bool> g_autocast_active{false};

// Note [Fast paths while capturing]: while dyngrad.compile records a program (python/dyngrad/_api/capture.py), every
// op must reach the engine through a _C function, where the recorder sees it; these builtins call the core directly,
// so while some thread records (the flag is process-wide, as autocast's) every fast path calls its fallback, except
// where it records the steps its fallback would issue itself (Note [Fast paths that record], below).
std::atomic<bool> g_capturing{false};
inline bool fast_on() { return !g_capturing.load(std::memory_order_relaxed); }

// Note [Verified ops in the fast paths]: while a verified call (mode="verified", Note [Verified replay] in
// python/dyngrad/_api/capture.py) follows a recording, each op Python issues is compared with the recording's next
// step: the same _C function, tensors from the same slots (the recorder's map from id(object) to slot), constants
// of the same type and value. In Python that costs a wrapper, the comparison and the op's Python definition,
// ~4-5 us an op (docs/compile.md). Here a fast path whose core calls are exactly the steps its Python definition
// issues (a one-tensor function or method: one step; two tensors: one step; a tensor and a Python number:
// scalar_operand then the op, the number as scalar_operand's constant; linear: mT, matmul and add; sum and mean: one
// step with their dims and keepdim; cross_entropy(x, y): validate, the target check, then the op) makes the same comparison in C++ on the
// recorder's own state (the cursor: the variant's steps as a table, the index of the next step, the recorder's
// depth, its slot map and the list that keeps every slotted object alive), and on a match runs the core calls as
// in eager mode, gives the result its slot and moves the index on. Anything else (no match, the recording left, a
// nested call inside an op, another thread, a step Python has to see) takes the fallback, the Python definition,
// whose call the Python recorder compares as before: the hits, the misses and their reasons are the ones the
// Python path alone gives, and the results are eager mode's either way.
struct VerifyStep {
  int kind = 0;  // 0: no fast path issues it; 1: a one-tensor core call; 2: two tensors; 3: scalar_operand;
                 // 4: a reduction (sum or mean) over `dims`, `keepdim`; 5: bridge.validate; 6: _C.cross_entropy
  Dims dims;
  bool keepdim = false;
  void* core = nullptr;        // the core function (UnaryOp or BinaryOp) of kinds 1 and 2
  int64_t slots[2] = {-1, -1};  // the inputs' slots (scalar_operand: slots[1], its `like`)
  PyObject* constant = nullptr;  // scalar_operand's number (kept alive by the table's `constants`)
  int64_t out = -1;             // the slot of the result
  // any step with positional slots and constants, matched by its _C function's wrapper (_VerifiedFunction)
  PyObject* fn = nullptr;        // the step's function (kept alive by `constants`); null: no entry
  std::vector<int64_t> args;     // per argument: its slot, or -1 for the constant
  std::vector<PyObject*> arg_consts;
  int64_t result = -1;           // the tensor's slot; kNoneResult, kValueResult: compared here; -1: by Python
  PyObject* expected = nullptr;  // a kValueResult's recorded value
  struct Seq {                   // an argument that is a tuple (kind 1) or list (2) of slots and constants
    char kind = 0;
    std::vector<int64_t> slots;
    std::vector<PyObject*> consts;
  };
  std::vector<Seq> seqs;         // empty, or per argument (kind 0: not a sequence)
};
constexpr int64_t kNoneResult = -3, kValueResult = -4;  // capture._loop_out's codes
struct VerifyTable {
  std::vector<VerifyStep> steps;
  std::vector<py::object> constants;
  // Note [Verified ops run from the plan]: the plan of the backward at step plan_step (a _run_backward), and per
  // step before it whether its output had history when recorded (its node is what a rebuild makes)
  std::shared_ptr<BackwardPlan> plan;
  int64_t plan_step = -1;
  std::vector<char> history;
  std::vector<char> rerunnable;  // per step: a pure op (capture._RERUNNABLE or the fast paths' kinds)
};
struct VerifyCursor {
  py::object table_owner;       // the VerifyTable followed, or None: the recording was left
  const VerifyTable* table = nullptr;
  int64_t index = 0;            // the next step
  int64_t depth = 0;            // the recorder's depth: > 0 while an op runs (its nested calls are not steps)
  py::object slot_of, keep;     // the recorder's dict id(object) -> slot and list of slotted objects
  py::object on_result;         // recorder.result_from_cpp: a matched call's result Python must compare
  int64_t matched = 0;          // steps matched here (a test's and compile_stats' count)
  // Note [Verified ops run from the plan]: plan_on while this call follows a table with a plan from its start and
  // the plan is usable; slot_tensors the slots' tensors (the arguments', externals' and every step run here, also
  // the steps inside one fast path); py_objects the Python object of a slot where one exists (borrowed: `keep`
  // holds it); deferred the steps run without their node that had one when recorded, in order, with the display
  // name their fast path gives the node (or null); plan_ran once the backward ran from the plan.
  bool plan_on = false, plan_ran = false;
  std::vector<Tensor> slot_tensors;
  // mirror: while on, the slots of the objects live here (py_objects: per slot its object, kept alive so that
  // addresses stay unique; stale: the object took a later slot since) and not yet in the recorder's dict and
  // list, which sync() brings up to date before any Python comparison reads them. An object's slot is then the
  // one slot that holds it and is not stale: a compare of the expected slot's object, no lookup.
  bool mirror = false;
  std::vector<py::object> py_objects;
  std::vector<char> stale;
  std::vector<char> grad_slots;  // per slot: its tensor requires grad, or would have (a deferred step's output)
  std::vector<std::pair<int64_t, const char*>> deferred;
  int64_t planned = 0;          // calls whose backward ran from the plan
  int64_t rebuilt = 0;          // calls that rebuilt the graph of their forward
  ~VerifyCursor();
};
thread_local VerifyCursor* t_cursor = nullptr;
// A cursor dropped while still active on its thread (capture.verify deactivates it in a finally) takes itself out.
VerifyCursor::~VerifyCursor() {
  if (t_cursor == this) t_cursor = nullptr;
}

// The cursor of this thread while it can match a step here, else null.
inline VerifyCursor* verifying() {
  VerifyCursor* c = t_cursor;
  if (!c || !c->table || c->depth != 0 || c->index >= (int64_t)c->table->steps.size()) return nullptr;
  return c;
}

// The recorder's slot of a Python object, or -1.
int64_t slot_of_object(VerifyCursor* c, PyObject* o) {
  if (c->mirror) {
    for (size_t slot = c->py_objects.size(); slot-- > 0;)
      if (c->py_objects[slot].ptr() == o && !c->stale[slot]) return (int64_t)slot;
    return -1;
  }
  PyObject* key = PyLong_FromVoidPtr(o);
  if (!key) throw py::error_already_set();
  PyObject* slot = PyDict_GetItemWithError(c->slot_of.ptr(), key);  // borrowed
  Py_DECREF(key);
  if (!slot) {
    if (PyErr_Occurred()) throw py::error_already_set();
    return -1;
  }
  return PyLong_AsLongLong(slot);
}

// Note [Verified ops run from the plan]
// While a verified call follows a variant whose backward was planned when recorded (capture.Variant.verify_table
// gives its table the plan when the variant fits: below), the ops it matches before that backward run as a static
// replay runs them: grad mode off, so no node, no edge, no saved tensor; their tensors are kept by slot here
// (slot_tensors), and the _run_backward step runs the plan (replay_backward.cpp) on them: the same formulas in the
// engine's order, the same sums, the leaves' .grad from AccumulateGrad's own code, so the gradients are eager
// mode's bitwise. Afterwards every tensor that had history and that Python still holds (its object has a reference
// besides the recorder's `keep`) gets the released grad_fn a static replay gives (plan_departed), as eager mode's
// graph would be released. The check of a matched op stays what it was: the step's op, slots and constants.
// Where the call leaves the recording before the backward (another op, another value, a sibling variant, the
// return, an exception), or a step Python compares or runs itself comes (a sequence result, a step without a table
// entry), the graph of what ran is rebuilt first (materialize): each deferred step is run again, in order, with
// grad mode on, on the same slot tensors, and its new node is moved onto the tensor Python holds (grad_fn,
// output_nr, requires_grad, view state; a saved output re-aimed at that tensor). The values are not replaced: the
// same kernel on the same inputs. Only steps that can run twice are deferred: the table takes a plan only when no
// step before the backward writes in place, draws random numbers into a tensor with history, reads a tensor
// property of a tensor with history, or has history without being a pure op (capture.Variant.verify_table), so
// every value a rerun reads is the one the first run read. From the rebuild on the call runs as before: eager
// execution, checked.
bool plan_forward(const VerifyCursor* c) { return c && c->plan_on && !c->plan_ran && c->index < c->table->plan_step; }

// Grad mode off for a step run from the plan.
struct PlanGradOff {
  alignas(GradModeGuard) unsigned char storage[sizeof(GradModeGuard)];
  bool on;
  explicit PlanGradOff(const VerifyCursor* c) : on(plan_forward(c)) {
    if (on) new (storage) GradModeGuard(false);
  }
  ~PlanGradOff() {
    if (on) reinterpret_cast<GradModeGuard*>(storage)->~GradModeGuard();
  }
};

void set_slot_tensor(VerifyCursor* c, int64_t slot, const Tensor& t) {
  if (slot < 0) return;
  if ((size_t)slot >= c->slot_tensors.size()) c->slot_tensors.resize(slot + 1);
  c->slot_tensors[slot] = t;
}

// obj takes slot `slot`, as the recorder's slot_of[id(obj)] = slot and keep.append(obj).
void assign_slot(VerifyCursor* c, int64_t slot, PyObject* obj) {
  if (c->mirror) {
    if (slot < 0) return;
    // an object made by the step has only the reference its caller got; any other may hold a slot already
    if (Py_REFCNT(obj) > 1)
      for (size_t k = 0; k < c->py_objects.size(); ++k)
        if (c->py_objects[k].ptr() == obj) c->stale[k] = 1;
    if ((size_t)slot >= c->py_objects.size()) {
      c->py_objects.resize(slot + 1);
      c->stale.resize(slot + 1, 0);
    }
    c->py_objects[slot] = py::reinterpret_borrow<py::object>(obj);
    c->stale[slot] = 0;
    return;
  }
  py::object key = py::reinterpret_steal<py::object>(PyLong_FromVoidPtr(obj));
  py::object value = py::reinterpret_steal<py::object>(PyLong_FromLongLong(slot));
  if (!key || !value || PyDict_SetItem(c->slot_of.ptr(), key.ptr(), value.ptr()) < 0 ||
      PyList_Append(c->keep.ptr(), obj) < 0)
    throw py::error_already_set();
}

PyObject* py_object_of(VerifyCursor* c, int64_t slot) {
  return slot >= 0 && (size_t)slot < c->py_objects.size() ? c->py_objects[slot].ptr() : nullptr;
}

// The mirror written into the recorder's dict and list; from here on they are the slots' record.
void flush(VerifyCursor* c) {
  if (!c->mirror) return;
  // the steps inside a fast path (linear's mT and matmul, a scalar operand) get objects too: the recorder's slots
  // are every step's, as a recording's are (a plan made from here on names them)
  for (size_t slot = 0; slot < c->slot_tensors.size(); ++slot)
    if (c->slot_tensors[slot] && !py_object_of(c, (int64_t)slot)) {
      py::object obj = py::cast(c->slot_tensors[slot]);
      if (slot_of_object(c, obj.ptr()) < 0) assign_slot(c, (int64_t)slot, obj.ptr());
    }
  c->mirror = false;
  for (size_t slot = 0; slot < c->py_objects.size(); ++slot) {
    PyObject* obj = c->py_objects[slot].ptr();
    if (!obj) continue;
    if (PyList_Append(c->keep.ptr(), obj) < 0) throw py::error_already_set();
    if (c->stale[slot]) continue;
    py::object key = py::reinterpret_steal<py::object>(PyLong_FromVoidPtr(obj));
    py::object value = py::reinterpret_steal<py::object>(PyLong_FromLongLong((int64_t)slot));
    if (!key || !value || PyDict_SetItem(c->slot_of.ptr(), key.ptr(), value.ptr()) < 0)
      throw py::error_already_set();
  }
  c->py_objects.clear();
  c->stale.clear();
}


bool grad_slot(const VerifyCursor* c, int64_t slot) {
  return slot >= 0 && (size_t)slot < c->grad_slots.size() && c->grad_slots[slot];
}

// Step k of the table ran here with result t: kept by slot, deferred if it had history when recorded, or if it is
// a pure op with an input that requires grad (the plan may not name every slot of a variant recorded after a rebuild)
void note_plan_step(VerifyCursor* c, int64_t k, int64_t out, const Tensor& t, const char* rename = nullptr) {
  if (!plan_forward(c)) return;
  set_slot_tensor(c, out, t);
  const VerifyTable& table = *c->table;
  bool history = (size_t)k < table.history.size() && table.history[k];
  if (!history && (size_t)k < table.rerunnable.size() && table.rerunnable[k])
    for (int64_t a : table.steps[k].args) history = history || grad_slot(c, a);
  if (!history) return;
  c->deferred.emplace_back(k, rename);
  if ((size_t)out >= c->grad_slots.size()) c->grad_slots.resize(out + 1);
  c->grad_slots[out] = 1;
}

const Tensor* plan_slot(VerifyCursor* c, int64_t slot) {
  if (slot < 0 || (size_t)slot >= c->slot_tensors.size() || !c->slot_tensors[slot]) return nullptr;
  return &c->slot_tensors[slot];
}

// The node that a rerun of a deferred step made for `fresh`, moved onto `held` (the tensor Python holds).
void move_history(const Tensor& held, const Tensor& fresh) {
  held->requires_grad = fresh->requires_grad;
  held->grad_fn = fresh->grad_fn;
  held->output_nr = fresh->output_nr;
  held->is_view = fresh->is_view;
  held->view_base = fresh->view_base;
  if (!held->grad_fn) return;
  for (const SavedTensor* saved : held->grad_fn->saved_tensors()) {
    if (!saved || !saved->is_output || !saved->data || saved->data->storage != fresh->storage) continue;
    auto* field = const_cast<SavedTensor*>(saved);
    field->data = make_view(held, held->shape, held->strides, held->offset);  // an alias, as save() keeps outputs
    field->saved_version = held->version();
  }
}

// Rebuilds the graph of the deferred steps and ends planned execution for the rest of the call.
void materialize(VerifyCursor* c) {
  if (!c->plan_on) return;
  c->plan_on = false;
  if (c->plan_ran || c->deferred.empty()) {
    c->deferred.clear();
    return;
  }
  std::vector<std::pair<int64_t, const char*>> deferred;
  deferred.swap(c->deferred);
  ++c->rebuilt;
  GradModeGuard grad(true);  // each deferred step made its node when recorded
  ++c->depth;                // the calls a rerun makes are not steps
  struct Depth {
    VerifyCursor* c;
    ~Depth() { --c->depth; }
  } depth{c};
  const auto& steps = c->table->steps;
  for (const auto& [k, rename] : deferred) {
    const VerifyStep& s = steps[k];
    const Tensor* held = plan_slot(c, s.result);
    if (!held) throw std::logic_error("a verified call's rebuild found no tensor for a step it ran");
    std::vector<py::object> args;
    std::vector<PyObject*> argv;
    for (size_t a = 0; a < s.args.size(); ++a) {
      if (s.args[a] >= 0) {
        const Tensor* in = plan_slot(c, s.args[a]);
        if (!in) throw std::logic_error("a verified call's rebuild found no tensor for a step's input");
        PyObject* obj = py_object_of(c, s.args[a]);
        args.push_back(obj ? py::reinterpret_borrow<py::object>(obj) : py::cast(*in));
      } else {
        args.push_back(py::reinterpret_borrow<py::object>(s.arg_consts[a]));
      }
      argv.push_back(args.back().ptr());
    }
    PyObject* r = PyObject_Vectorcall(s.fn, argv.data(), argv.size(), nullptr);
    if (!r) throw py::error_already_set();
    py::object result = py::reinterpret_steal<py::object>(r);
    const Tensor* fresh = g_tensor_type ? held_tensor(r, g_tensor_type) : nullptr;
    if (!fresh) throw std::logic_error("a verified call's rebuild: a step returned no tensor");
    move_history(*held, *fresh);
    if (rename && (*held)->grad_fn) (*held)->grad_fn->display_name = rename;
  }
}

// The _run_backward step from the plan; then the released grad_fns of what Python still holds.
void run_planned_backward(VerifyCursor* c) {
  const VerifyTable& table = *c->table;
  c->deferred.clear();
  c->plan_ran = true;
  ++c->planned;
  plan_run(*table.plan, PlanHeads{}, [&](int64_t slot) { return plan_slot(c, slot); });
  plan_departed(*table.plan, [&](int64_t slot) -> const Tensor* {
    const Tensor* t = plan_slot(c, slot);
    PyObject* obj = t ? py_object_of(c, slot) : nullptr;
    return obj && Py_REFCNT(obj) > 1 ? t : nullptr;  // more than the cursor's own reference
  });
}

// Whether o's slot is `expected` (slot_of_object(c, o) == expected): in the mirror, one compare.
inline bool has_slot(VerifyCursor* c, PyObject* o, int64_t expected) {
  if (c->mirror)
    return expected >= 0 && (size_t)expected < c->py_objects.size() && c->py_objects[expected].ptr() == o &&
           !c->stale[expected];
  return slot_of_object(c, o) == expected;
}

// The result of a matched step as the Python recorder would hold it: in its slot, kept alive; the index moves on.
PyObject* verified_result(VerifyCursor* c, Tensor&& t, int64_t out, int64_t consumed, const char* rename = nullptr) {
  py::object r = py::cast(std::move(t));
  if (plan_forward(c)) note_plan_step(c, c->index + consumed - 1, out, *held_tensor(r.ptr(), g_tensor_type), rename);
  assign_slot(c, out, r.ptr());
  c->index += consumed;
  c->matched += consumed;
  return r.release().ptr();
}

// A Python value equal to a recorded constant as the Python recorder compares them: the same type and ==.
bool same_constant(PyObject* a, PyObject* recorded) {
  if (Py_TYPE(a) != Py_TYPE(recorded)) return false;
  // == of floats (numpy's too), without the identity shortcut of PyObject_RichCompareBool: NaN is never equal
  if (PyFloat_Check(a)) return PyFloat_AS_DOUBLE(a) == PyFloat_AS_DOUBLE(recorded);
  const int eq = PyObject_RichCompareBool(a, recorded, Py_EQ);
  if (eq < 0) throw py::error_already_set();
  return eq == 1;
}

// The shared layer's add, sub and atan2 (function and method) issue result_type before the op
// (tests/test_compile_verified.py's test of the fast paths' steps checks every entry): their fast paths match nothing,
// or an `a + b` recorded where Python now calls dg.add(a, b) would match here where the Python recorder misses.
template <BinaryOp Op>
bool issues_result_type() {
  return Op == &add || Op == &sub || Op == &atan2;  // a plain if's condition (see fast_number)
}

// op(x): step `op(slot of x)`. Returns the result, or null (no error set) for the fallback.
PyObject* verified_unary(VerifyCursor* c, UnaryOp op, PyObject* x, const Tensor& tx) {
  const VerifyStep& s = c->table->steps[c->index];
  if (s.kind != 1 || s.core != reinterpret_cast<void*>(op) || !has_slot(c, x, s.slots[0])) return nullptr;
  Tensor out;
  {
    PlanGradOff off(c);
    out = op(tx);
  }
  return verified_result(c, std::move(out), s.out, 1);
}

// x.sum(dims, keepdim) and x.mean(...) (function or method): step `sum(slot of x, dims, keepdim, None)` or
// `mean(slot of x, dims, keepdim)`, with the dims as the shared layer passed them.
PyObject* verified_reduce(VerifyCursor* c, ReduceOp op, PyObject* x, const Tensor& tx, const Dims& dims, bool keep) {
  const VerifyStep& s = c->table->steps[c->index];
  if (s.kind != 4 || s.core != reinterpret_cast<void*>(op) || s.keepdim != keep || s.dims != dims ||
      !has_slot(c, x, s.slots[0]))
    return nullptr;
  Tensor out;
  {
    PlanGradOff off(c);
    out = op(tx, dims, keep);
  }
  return verified_result(c, std::move(out), s.out, 1);
}

// op(a, b), both tensors: step `op(slot of a, slot of b)`.
PyObject* verified_binary(VerifyCursor* c, BinaryOp op, PyObject* a, const Tensor& ta, PyObject* b, const Tensor& tb) {
  const VerifyStep& s = c->table->steps[c->index];
  if (s.kind != 2 || s.core != reinterpret_cast<void*>(op)) return nullptr;
  if (!has_slot(c, a, s.slots[0]) || !has_slot(c, b, s.slots[1])) return nullptr;
  Tensor out;
  {
    PlanGradOff off(c);
    out = op(ta, tb);
  }
  return verified_result(c, std::move(out), s.out, 1);
}

// A tensor t and a Python number n, as the shared layer issues them: scalar_operand(n, t), then
// op(t, scalar) (tensor_first) or op(scalar, t). run: the fast path's own core calls on (t, scalar).
template <class Run>
PyObject* verified_with_number(VerifyCursor* c, BinaryOp op, bool tensor_first, PyObject* t, PyObject* n,
                               Run&& run) {
  const auto& steps = c->table->steps;
  if (c->index + 1 >= (int64_t)steps.size()) return nullptr;
  const VerifyStep& s = steps[c->index];
  const VerifyStep& o = steps[c->index + 1];
  if (s.kind != 3 || o.kind != 2 || o.core != reinterpret_cast<void*>(op)) return nullptr;
  const int64_t slot = s.slots[1];
  if (!has_slot(c, t, slot) || o.slots[tensor_first ? 0 : 1] != slot || o.slots[tensor_first ? 1 : 0] != s.out)
    return nullptr;
  if (!same_constant(n, s.constant)) return nullptr;
  Tensor out;
  {
    PlanGradOff off(c);
    Tensor scalar = scalar_operand(py::handle(n), tensor_of(t));  // number_operand's call
    if (plan_forward(c)) set_slot_tensor(c, s.out, scalar);  // the plan may read it (mul saves it)
    out = run(scalar);
  }
  // 2 - t: the fast path names the node as torch does (a rebuild's rerun of _C.sub would not)
  return verified_result(c, std::move(out), o.out, 2, !tensor_first && op == &sub ? "RsubBackward" : nullptr);
}

template <BinaryOp Op>
bool autocast_defers() {
  if (Op == &matmul) return g_autocast_active.load(std::memory_order_relaxed);  // a plain if (see fast_number)
  return false;
}

// A Python number as the operand of an op whose other operand is `like` (the core rule, module.cpp).
Tensor number_operand(PyObject* o, const Tensor& like) { return scalar_operand(py::handle(o), &like); }

// Note [Display names] (node.h): out's node, if the op just made one, shows torch's name for what was called.
void rename_new_node(const Tensor& out, const Tensor& input, const char* name) {
  if (out->grad_fn && out->grad_fn != input->grad_fn) out->grad_fn->display_name = name;
}

// Note [Fast paths that record] (capture_record.h): while a program records, a one-tensor op, a two-tensor op
// and a tensor with a Python number (scalar_operand, then the op) run here and are recorded as the steps their
// Python definitions issue (the same calls verified_unary, verified_binary and verified_with_number match), instead
// of taking the Python definition (~1 us of Python an op, Note [Fast paths while capturing]); so are linear's and
// cross_entropy's steps (recorded_linear, recorded_cross_entropy, as verified_linear and verified_cross_entropy
// match them). The name of a step is the ops.def name of its core function, and a step is recorded here only where
// the recorder swapped that name with the engine's own function (not a monkeypatch, which the fallback then calls).
// tests/test_compile_recorder.py checks each against the Python recorder's steps.
const std::unordered_map<std::string, VerifyStep>& verify_kinds();
const char* recorded_name(void* core) {
  static const std::unordered_map<void*, std::string> names = [] {
    std::unordered_map<void*, std::string> t;
    for (const auto& [name, step] : verify_kinds())
      if ((step.kind == 1 || step.kind == 2) && step.core) t.emplace(step.core, name);
    return t;
  }();
  auto found = names.find(core);
  return found == names.end() ? nullptr : found->second.c_str();
}

// op(x) recorded as the step op(x); null (no error set): the fallback records it.
PyObject* recorded_unary(UnaryOp op, PyObject* x, const Tensor& tx) {
  const char* name = recorded_name(reinterpret_cast<void*>(op));
  FastStep step;
  const int ok = name ? record_fast_begin(name, &x, 1, step) : 0;
  if (ok < 0) throw py::error_already_set();
  if (!ok) return nullptr;
  PyObject* r = record_fast_end(step, to_python(op(tx)));
  if (!r) throw py::error_already_set();
  return r;
}

PyObject* recorded_binary(BinaryOp op, PyObject* a, const Tensor& ta, PyObject* b, const Tensor& tb) {
  const char* name = recorded_name(reinterpret_cast<void*>(op));
  PyObject* args[2] = {a, b};
  FastStep step;
  const int ok = name ? record_fast_begin(name, args, 2, step) : 0;
  if (ok < 0) throw py::error_already_set();
  if (!ok) return nullptr;
  PyObject* r = record_fast_end(step, to_python(op(ta, tb)));
  if (!r) throw py::error_already_set();
  return r;
}

// scalar_operand(n, t), then op(t, scalar) (tensor_first) or op(scalar, t), as verified_with_number matches them;
// run: the fast path's own core calls on (t, scalar).
template <class Run>
PyObject* recorded_with_number(BinaryOp op, bool tensor_first, PyObject* t, PyObject* n, Run&& run) {
  const char* name = recorded_name(reinterpret_cast<void*>(op));
  const int known = name ? record_fast_known(name) : 0;
  if (known < 0) throw py::error_already_set();
  if (!known) return nullptr;
  FastStep first;
  PyObject* args[2] = {n, t};
  int ok = record_fast_begin("scalar_operand", args, 2, first);
  if (ok < 0) throw py::error_already_set();
  if (!ok) return nullptr;
  Tensor scalar = scalar_operand(py::handle(n), tensor_of(t));  // number_operand's call
  py::object scalar_object = py::reinterpret_steal<py::object>(record_fast_end(first, to_python(Tensor(scalar))));
  if (!scalar_object) throw py::error_already_set();
  FastStep second;
  PyObject* op_args[2] = {tensor_first ? t : scalar_object.ptr(), tensor_first ? scalar_object.ptr() : t};
  ok = record_fast_begin(name, op_args, 2, second);
  if (ok < 0) throw py::error_already_set();
  if (!ok)  // (scalar_operand's binding kept, the op's replaced: the op's Python definition cannot run now)
    throw std::logic_error("compile: a fast path recorded scalar_operand but not its op");
  PyObject* r = record_fast_end(second, to_python(run(scalar)));
  if (!r) throw py::error_already_set();
  return r;
}

// ---- operators: nb_add and friends get (a, b) for both a + b and the reflected b + a ----
// A number on the left is recorded as torch records it, the tensor first (the shared layer's __radd__ and friends
// in python/dyngrad/_api/tensor_methods.py do the same): `2 * t` is mul(t, 2); `2 - t` is sub(2, t) shown as
// torch's RsubBackward; `2 / t` is reciprocal(t) * 2, torch's formula (and rounding).
using ReflectedOp = Tensor (*)(const Tensor& t, const Tensor& number);
Tensor reflected_add(const Tensor& t, const Tensor& number) { return add(t, number); }
Tensor reflected_mul(const Tensor& t, const Tensor& number) { return mul(t, number); }
Tensor reflected_sub(const Tensor& t, const Tensor& number) {
  Tensor out = sub(number, t);
  rename_new_node(out, t, "RsubBackward");
  return out;
}
Tensor reflected_div(const Tensor& t, const Tensor& number) {
  Tensor reciprocal = div(scalar_operand(py::int_(1), &t), t);
  rename_new_node(reciprocal, t, "ReciprocalBackward");
  return mul(reciprocal, number);
}

template <BinaryOp Op, bool Numbers = true, ReflectedOp Reflected = nullptr>
PyObject* binary_slot(PyObject* a, PyObject* b) {
  const Tensor* ta = tensor_of(a);
  const Tensor* tb = tensor_of(b);
  const bool fast = fast_on() && !autocast_defers<Op>();
  DG_PY_TRY
  if (fast && ta && tb) return to_python(Op(*ta, *tb));
  if (fast && Numbers && ta && fast_number<Op>(b)) return to_python(Op(*ta, number_operand(b, *ta)));
  if constexpr (Reflected != nullptr)
    if (fast && tb && fast_number<Op>(a)) return to_python(Reflected(*tb, number_operand(a, *tb)));
  // Note [Verified ops in the fast paths]
  if (VerifyCursor* c = fast || autocast_defers<Op>() ? nullptr : verifying()) {
    PyObject* r = nullptr;
    if (ta && tb) r = verified_binary(c, Op, a, *ta, b, *tb);
    else if (Numbers && ta && fast_number<Op>(b))
      r = verified_with_number(c, Op, true, a, b, [&](const Tensor& n) { return Op(*ta, n); });
    else if constexpr (Reflected != nullptr) {
      // 2 * t and 2 + t issue scalar_operand(2, t), op(t, scalar); 2 - t: sub(scalar, t); 2 / t: four steps (Python)
      if (tb && fast_number<Op>(a) && (Reflected == &reflected_add || Reflected == &reflected_mul ||
                                       Reflected == &reflected_sub))
        r = verified_with_number(c, Op, Reflected != &reflected_sub, b, a,
                                 [&](const Tensor& n) { return Reflected(*tb, n); });
    }
    if (r) return r;
  }
  if (!fast && !autocast_defers<Op>() && fast_recording()) {  // Note [Fast paths that record]
    PyObject* r = nullptr;
    if (ta && tb) r = recorded_binary(Op, a, *ta, b, *tb);
    else if (Numbers && ta && fast_number<Op>(b))
      r = recorded_with_number(Op, true, a, b, [&](const Tensor& n) { return Op(*ta, n); });
    else if constexpr (Reflected != nullptr) {
      if (tb && fast_number<Op>(a) && (Reflected == &reflected_add || Reflected == &reflected_mul ||
                                       Reflected == &reflected_sub))
        r = recorded_with_number(Op, Reflected != &reflected_sub, b, a,
                                 [&](const Tensor& n) { return Reflected(*tb, n); });
    }
    if (r) return r;
  }
  DG_PY_CATCH
  constexpr binaryfunc self = &binary_slot<Op, Numbers, Reflected>;
  if (ta || is_tensor_object(a)) return PyObject_CallFunctionObjArgs(forward_fallback_of<self>, a, b, nullptr);
  if (tb || is_tensor_object(b)) return PyObject_CallFunctionObjArgs(reflected_fallback_of<self>, b, a, nullptr);
  Py_RETURN_NOTIMPLEMENTED;
}

// mp_subscript: ints, slices, None and Ellipsis are views made here; anything else goes to the shared __getitem__.
bool is_basic_item(PyObject* o) {
  return o == Py_None || o == Py_Ellipsis || PySlice_Check(o) || (PyLong_Check(o) && !PyBool_Check(o));
}

bool is_basic_index(PyObject* idx) {
  if (PyTuple_Check(idx)) {
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(idx); ++i)
      if (!is_basic_item(PyTuple_GET_ITEM(idx, i))) return false;
    return true;
  }
  return is_basic_item(idx);
}

// ints, slices (step > 0), None and Ellipsis: always a view of self. The shared layer's __getitem__ does the
// same with the same core calls (python/dyngrad/_api/indexing.py, basic_index).
Tensor basic_index(const Tensor& self, PyObject* idx) {
  PyObject* single[1] = {idx};
  PyObject* const* items = PyTuple_Check(idx) ? &PyTuple_GET_ITEM(idx, 0) : single;
  const Py_ssize_t n_items = PyTuple_Check(idx) ? PyTuple_GET_SIZE(idx) : 1;
  int64_t consumed = 0;
  bool seen_ellipsis = false;
  for (Py_ssize_t k = 0; k < n_items; ++k) {
    if (items[k] == Py_Ellipsis) {
      DG_CHECK(!seen_ellipsis, IndexError, "an index can only have a single ellipsis ('...').");
      seen_ellipsis = true;
    } else if (items[k] != Py_None) {
      ++consumed;
    }
  }
  DG_CHECK(consumed <= self->ndim(), IndexError, "too many indices for a tensor of dimension ", self->ndim(),
           " (shape ", shape_str(self->shape), "): got ", consumed, ".");
  Tensor r = self;
  int64_t d = 0;
  for (Py_ssize_t k = 0; k < n_items; ++k) {
    PyObject* item = items[k];
    if (item == Py_None) {
      r = unsqueeze(r, d);
      ++d;
    } else if (item == Py_Ellipsis) {
      d += self->ndim() - consumed;
    } else if (PySlice_Check(item)) {
      Py_ssize_t start, stop, step;
      if (PySlice_Unpack(item, &start, &stop, &step) < 0) throw py::error_already_set();
      DG_CHECK(step > 0, ValueError, "slicing with a step of ", (int64_t)step,
               ": step must be greater than zero (negative steps are not supported, as in torch).");
      PySlice_AdjustIndices(r->shape[d], &start, &stop, step);
      r = slice(r, d, start, stop, step);
      ++d;
    } else {
      int overflow = 0;
      long long i = PyLong_AsLongLongAndOverflow(item, &overflow);
      if (i == -1 && PyErr_Occurred()) throw py::error_already_set();
      const int64_t size = r->shape[d];
      DG_CHECK(!overflow && i >= -size && i < size, IndexError, "index ",
               py::str(py::handle(item)).cast<std::string>(), " is out of range for dimension ", d, " of size ",
               size, ".");
      r = select(r, d, i);
    }
  }
  if (r == self) r = reshape(self, self->shape);  // x[...] is still a new view
  return r;
}

PyObject* getitem_slot(PyObject* self, PyObject* idx) {
  const Tensor* t = fast_on() ? tensor_of(self) : nullptr;
  if (t && is_basic_index(idx)) {
    DG_PY_TRY
    return to_python(basic_index(*t, idx));
    DG_PY_CATCH
  }
  return PyObject_CallFunctionObjArgs(forward_fallback_of<&getitem_slot>, self, idx, nullptr);
}

// Tensor.__getitem__(idx), Tensor.__add__(other), ... as written in the type's dict: the slot itself. A Python
// function there would be called by CPython's specialising interpreter instead of the slot (BINARY_SUBSCR turns
// into a direct call of a Python __getitem__ after a few runs), so the dict holds these builtins.
template <binaryfunc Slot>
PyObject* slot_method(PyObject* self, PyObject* const* args, Py_ssize_t nargsf, PyObject* kwnames) {
  if (PyVectorcall_NARGS(nargsf) != 1 || kwnames) {
    PyErr_SetString(PyExc_TypeError, "expected exactly one argument");
    return nullptr;
  }
  return Slot(self, args[0]);
}

// ---- functions: `self` of the builtin is the Python function it stands for ----
template <UnaryOp Op>
PyObject* unary_function(PyObject* fallback, PyObject* const* args, Py_ssize_t nargsf, PyObject* kwnames) {
  if (PyVectorcall_NARGS(nargsf) == 1 && !kwnames)
    if (const Tensor* t = tensor_of(args[0])) {
      DG_PY_TRY
      if (fast_on()) return to_python(Op(*t));
      if (VerifyCursor* c = verifying())  // Note [Verified ops in the fast paths]
        if (PyObject* r = verified_unary(c, Op, args[0], *t)) return r;
      if (fast_recording())  // Note [Fast paths that record]
        if (PyObject* r = recorded_unary(Op, args[0], *t)) return r;
      DG_PY_CATCH
    }
  return PyObject_Vectorcall(fallback, args, nargsf, kwnames);
}

// Numbers: whether the op takes a Python number as its second operand (add does, matmul does not).
template <BinaryOp Op, bool Numbers>
PyObject* binary_function(PyObject* fallback, PyObject* const* args, Py_ssize_t nargsf, PyObject* kwnames) {
  if (PyVectorcall_NARGS(nargsf) == 2 && !kwnames && !autocast_defers<Op>()) {
    const Tensor* ta = tensor_of(args[0]);
    const Tensor* tb = tensor_of(args[1]);
    if (ta && (tb || (Numbers && fast_number<Op>(args[1])))) {
      DG_PY_TRY
      if (fast_on()) return to_python(tb ? Op(*ta, *tb) : Op(*ta, number_operand(args[1], *ta)));
      // Note [Verified ops in the fast paths]: dg.add(a, b), dg.sub, dg.atan2 stay in Python (issues_result_type)
      if (VerifyCursor* c = issues_result_type<Op>() ? nullptr : verifying()) {
        PyObject* r = tb ? verified_binary(c, Op, args[0], *ta, args[1], *tb)
                         : verified_with_number(c, Op, true, args[0], args[1],
                                                [&](const Tensor& n) { return Op(*ta, n); });
        if (r) return r;
      }
      if (!issues_result_type<Op>() && fast_recording()) {  // Note [Fast paths that record]
        PyObject* r = tb ? recorded_binary(Op, args[0], *ta, args[1], *tb)
                         : recorded_with_number(Op, true, args[0], args[1],
                                                [&](const Tensor& n) { return Op(*ta, n); });
        if (r) return r;
      }
      DG_PY_CATCH
    }
  }
  return PyObject_Vectorcall(fallback, args, nargsf, kwnames);
}

// (tensor), (tensor, dim) or (tensor, dim, keepdim), dim and keepdim also as keywords; dim a Python int.
bool parse_reduce(PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames, Dims& dims, bool& keepdim) {
  PyObject* dim = nargs > 0 ? args[0] : nullptr;
  PyObject* keep = nargs > 1 ? args[1] : nullptr;
  if (nargs > 2) return false;
  Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
  for (Py_ssize_t i = 0; i < nkw; ++i) {
    PyObject* key = PyTuple_GET_ITEM(kwnames, i);
    if (PyUnicode_CompareWithASCIIString(key, "dim") == 0 && !dim) dim = args[nargs + i];
    else if (PyUnicode_CompareWithASCIIString(key, "keepdim") == 0 && !keep) keep = args[nargs + i];
    else return false;
  }
  if (keep && !PyBool_Check(keep)) return false;
  keepdim = keep == Py_True;
  if (!dim || dim == Py_None) return true;  // all dims
  if (!PyLong_Check(dim) || PyBool_Check(dim)) return false;
  int overflow = 0;
  long long d = PyLong_AsLongLongAndOverflow(dim, &overflow);
  if (overflow || (d == -1 && PyErr_Occurred())) {
    PyErr_Clear();
    return false;
  }
  dims.push_back(d);
  return true;
}

template <ReduceOp Op>
PyObject* reduce_function(PyObject* fallback, PyObject* const* args, Py_ssize_t nargsf, PyObject* kwnames) {
  Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
  VerifyCursor* c = fast_on() ? nullptr : verifying();  // Note [Verified ops in the fast paths]
  if (nargs >= 1 && (fast_on() || c))
    if (const Tensor* t = tensor_of(args[0])) {
      Dims dims;
      bool keepdim = false;
      if (parse_reduce(args + 1, nargs - 1, kwnames, dims, keepdim)) {
        DG_PY_TRY
        if (!c) return to_python(Op(*t, dims, keepdim));
        if (PyObject* r = verified_reduce(c, Op, args[0], *t, dims, keepdim)) return r;
        DG_PY_CATCH
      }
    }
  return PyObject_Vectorcall(fallback, args, nargsf, kwnames);
}

Tensor sum_op(const Tensor& a, const Dims& dims, bool keepdim) { return sum(a, dims, keepdim); }

// linear(x, w) or linear(x, w, b) with a 2-D weight matching x's last dim: x @ w.mT + b, as the shared composite
// computes it (which names linear, not matmul, when the features do not match).
// linear(x, w[, b]) as the shared layer (python/dyngrad/_api/ops/linear.py) issues it for a 2-D weight: mT(w),
// matmul(x, that), and add(that, b) when there is a bias (Note [Verified ops in the fast paths]).
PyObject* verified_linear(VerifyCursor* c, PyObject* const* args, const Tensor& x, const Tensor& w, const Tensor* b) {
  const auto& steps = c->table->steps;
  const int64_t need = b ? 3 : 2;
  if (c->index + need > (int64_t)steps.size()) return nullptr;
  const VerifyStep& t = steps[c->index];
  const VerifyStep& m = steps[c->index + 1];
  if (t.kind != 1 || t.core != reinterpret_cast<void*>(static_cast<UnaryOp>(&mT)) ||
      m.kind != 2 || m.core != reinterpret_cast<void*>(static_cast<BinaryOp>(&matmul)) || m.slots[1] != t.out)
    return nullptr;
  if (b) {
    const VerifyStep& a = steps[c->index + 2];
    if (a.kind != 2 || a.core != reinterpret_cast<void*>(static_cast<BinaryOp>(&add)) || a.slots[0] != m.out ||
        !has_slot(c, args[2], a.slots[1]))
      return nullptr;
  }
  if (!has_slot(c, args[1], t.slots[0]) || !has_slot(c, args[0], m.slots[0])) return nullptr;
  const char* name = x->ndim() == 2 ? (b ? "AddmmBackward" : "MmBackward") : nullptr;
  Tensor out;
  if (plan_forward(c)) {  // Note [Verified ops run from the plan]: each of the three steps keeps its slot
    GradModeGuard off(false);
    Tensor wt = mT(w);
    note_plan_step(c, c->index, t.out, wt);
    out = matmul(x, wt);
    if (b) {
      note_plan_step(c, c->index + 1, m.out, out);
      out = add(out, *b);
    }
  } else {
    out = matmul(x, mT(w));
    if (b) out = add(out, *b);
    if (name) rename_new_node(out, x, name);
  }
  return verified_result(c, std::move(out), steps[c->index + need - 1].out, need, name);
}

// Note [Fast paths that record]: linear's three steps, as verified_linear matches them; null (no error set): the
// fallback records them.
PyObject* recorded_linear(PyObject* const* args, const Tensor& x, const Tensor& w, const Tensor* b) {
  for (const char* name : {"mT", "matmul", "add"}) {
    const int known = record_fast_known(name);
    if (known < 0) throw py::error_already_set();
    if (!known) return nullptr;
  }
  // each step's arguments are encoded before its op runs, as the Python recorder encodes them
  Tensor wt;
  py::object wt_object;
  {
    PyObject* call[1] = {args[1]};
    FastStep s;
    if (record_fast_begin("mT", call, 1, s) != 1) throw py::error_already_set();
    wt = mT(w);
    PyObject* r = record_fast_end(s, to_python(Tensor(wt)));
    if (!r) throw py::error_already_set();
    wt_object = py::reinterpret_steal<py::object>(r);
  }
  const char* name = x->ndim() == 2 ? (b ? "AddmmBackward" : "MmBackward") : nullptr;
  PyObject* call[2] = {args[0], wt_object.ptr()};
  FastStep s;
  if (record_fast_begin("matmul", call, 2, s) != 1) throw py::error_already_set();
  Tensor out = matmul(x, wt);
  if (!b) {
    if (name) rename_new_node(out, x, name);
    PyObject* r = record_fast_end(s, to_python(std::move(out)));
    if (!r) throw py::error_already_set();
    return r;
  }
  PyObject* r = record_fast_end(s, to_python(Tensor(out)));
  if (!r) throw py::error_already_set();
  py::object mm = py::reinterpret_steal<py::object>(r);
  FastStep a;
  PyObject* add_call[2] = {mm.ptr(), args[2]};
  if (record_fast_begin("add", add_call, 2, a) != 1) throw py::error_already_set();
  Tensor sum = add(out, *b);
  if (name) rename_new_node(sum, x, name);
  r = record_fast_end(a, to_python(std::move(sum)));
  if (!r) throw py::error_already_set();
  return r;
}

PyObject* linear_function(PyObject* fallback, PyObject* const* args, Py_ssize_t nargsf, PyObject* kwnames) {
  Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
  if (!kwnames && (nargs == 2 || nargs == 3) && !fast_on() && !g_autocast_active.load(std::memory_order_relaxed) &&
      fast_recording()) {  // Note [Fast paths that record]
    const Tensor* x = tensor_of(args[0]);
    const Tensor* w = tensor_of(args[1]);
    const Tensor* b = nargs == 3 ? tensor_of(args[2]) : nullptr;
    const bool no_bias = nargs == 2 || args[2] == Py_None;
    if (x && w && (*w)->ndim() == 2 && (b || no_bias) && (*x)->ndim() > 0 && (*x)->shape.back() == (*w)->shape[1]) {
      DG_PY_TRY
      if (PyObject* r = recorded_linear(args, *x, *w, b)) return r;
      DG_PY_CATCH
    }
  }
  if (!kwnames && (nargs == 2 || nargs == 3) && !fast_on() && !g_autocast_active.load(std::memory_order_relaxed))
    if (VerifyCursor* c = verifying()) {
      const Tensor* x = tensor_of(args[0]);
      const Tensor* w = tensor_of(args[1]);
      const Tensor* b = nargs == 3 ? tensor_of(args[2]) : nullptr;
      const bool no_bias = nargs == 2 || args[2] == Py_None;
      if (x && w && (*w)->ndim() == 2 && (b || no_bias) && (*x)->ndim() > 0 &&
          (*x)->shape.back() == (*w)->shape[1]) {
        DG_PY_TRY
        if (PyObject* r = verified_linear(c, args, *x, *w, b)) return r;
        DG_PY_CATCH
      }
    }
  if (!kwnames && (nargs == 2 || nargs == 3) && fast_on() && !g_autocast_active.load(std::memory_order_relaxed)) {
    const Tensor* x = tensor_of(args[0]);
    const Tensor* w = tensor_of(args[1]);
    const Tensor* b = nargs == 3 ? tensor_of(args[2]) : nullptr;
    bool no_bias = nargs == 2 || args[2] == Py_None;
    if (x && w && (*w)->ndim() == 2 && (b || no_bias) && (*x)->ndim() > 0 &&
        (*x)->shape.back() == (*w)->shape[1]) {
      DG_PY_TRY
      Tensor out = b ? matmul_add(*x, mT(*w), *b) : matmul(*x, mT(*w));
      // torch's node names for a 2-D input, as the shared composite (python/dyngrad/_api/nn_ops.py) sets them
      if ((*x)->ndim() == 2) rename_new_node(out, *x, b ? "AddmmBackward" : "MmBackward");
      return to_python(std::move(out));
      DG_PY_CATCH
    }
  }
  return PyObject_Vectorcall(fallback, args, nargsf, kwnames);
}

// cross_entropy(logits (N, C), int64 targets (N,)) with the defaults: the fused primitive, mean reduction.
bool is_int(PyObject* o, int64_t v) { return PyLong_CheckExact(o) && PyLong_AsLongLong(o) == v; }

// cross_entropy(x, y) as the shared layer (python/dyngrad/_api/ops/loss.py) issues it for (N, C) logits and (N,)
// int64 targets: validate(_check_target_range, y, C, -100, "cross_entropy"), then cross_entropy(x, y, 1, -100, 0.0).
// On a match the core op runs as eager mode's fast path runs it (its own range check; the recorded check function
// is not called, as eager mode's fast path does not call it).
PyObject* verified_cross_entropy(VerifyCursor* c, PyObject* const* args, const Tensor& x, const Tensor& y) {
  const auto& steps = c->table->steps;
  if (c->index + 2 > (int64_t)steps.size()) return nullptr;
  const VerifyStep& v = steps[c->index];
  const VerifyStep& e = steps[c->index + 1];
  if (v.kind != 5 || e.kind != 6 || v.args.size() != 5 || e.args.size() != 5) return nullptr;
  if (v.args[0] >= 0 || v.args[1] < 0 || v.args[2] >= 0 || v.args[3] >= 0 || v.args[4] >= 0) return nullptr;
  if (!PyFunction_Check(v.arg_consts[0]) || !is_int(v.arg_consts[2], x->shape[1]) || !is_int(v.arg_consts[3], -100) ||
      !PyUnicode_Check(v.arg_consts[4]) || PyUnicode_CompareWithASCIIString(v.arg_consts[4], "cross_entropy") != 0)
    return nullptr;
  if (e.args[1] != v.args[1] || e.args[0] < 0 || e.args[2] >= 0 || e.args[3] >= 0 || e.args[4] >= 0) return nullptr;
  if (!is_int(e.arg_consts[2], 1) || !is_int(e.arg_consts[3], -100) || !PyFloat_CheckExact(e.arg_consts[4]) ||
      PyFloat_AS_DOUBLE(e.arg_consts[4]) != 0.0)
    return nullptr;
  if (!has_slot(c, args[0], e.args[0]) || !has_slot(c, args[1], v.args[1])) return nullptr;
  Tensor out;
  {
    PlanGradOff off(c);
    out = cross_entropy(x, y, 1, -100, 0.0);
  }
  return verified_result(c, std::move(out), e.result, 2);
}

// Note [Fast paths that record]: cross_entropy(x, y)'s two steps, as verified_cross_entropy matches them: the target
// check through bridge.validate (run as the recorded call runs it: Python, numpy), then the op. Null (no error set):
// the fallback records them.
PyObject* recorded_cross_entropy(const Tensor& x, PyObject* const* args, const Tensor& y) {
  PyObject* check = recorded_target_check();
  if (!check) return nullptr;
  for (const char* name : {"validate", "cross_entropy"}) {
    const int known = record_fast_known(name);
    if (known < 0) throw py::error_already_set();
    if (!known) return nullptr;
  }
  static PyObject* op_name = PyUnicode_InternFromString("cross_entropy");  // never released
  if (!op_name) throw py::error_already_set();
  py::object classes = py::int_(x->shape[1]), ignore = py::int_(-100), mean = py::int_(1), smoothing = py::float_(0.0);
  {
    PyObject* call[5] = {check, args[1], classes.ptr(), ignore.ptr(), op_name};
    FastStep s;
    const int ok = record_fast_begin("validate", call, 5, s, true);
    if (ok < 0) throw py::error_already_set();
    if (!ok) return nullptr;  // (nothing recorded yet)
    PyObject* r = record_fast_end(s, record_fast_call(s, call, 5));
    if (!r) throw py::error_already_set();
    Py_DECREF(r);
  }
  PyObject* call[5] = {args[0], args[1], mean.ptr(), ignore.ptr(), smoothing.ptr()};
  FastStep s;
  if (record_fast_begin("cross_entropy", call, 5, s) != 1) throw py::error_already_set();
  PyObject* r = record_fast_end(s, to_python(cross_entropy(x, y, 1, -100, 0.0)));
  if (!r) throw py::error_already_set();
  return r;
}

PyObject* cross_entropy_function(PyObject* fallback, PyObject* const* args, Py_ssize_t nargsf, PyObject* kwnames) {
  if (PyVectorcall_NARGS(nargsf) == 2 && !kwnames && !fast_on() && !g_autocast_active.load(std::memory_order_relaxed) &&
      fast_recording()) {
    const Tensor* x = tensor_of(args[0]);
    const Tensor* y = tensor_of(args[1]);
    if (x && y && (*x)->ndim() == 2 && (*y)->ndim() == 1 && (*y)->dtype == DType::Int64 &&
        (*y)->shape[0] == (*x)->shape[0]) {
      DG_PY_TRY
      if (PyObject* r = recorded_cross_entropy(*x, args, *y)) return r;
      DG_PY_CATCH
    }
  }
  if (PyVectorcall_NARGS(nargsf) == 2 && !kwnames && !fast_on() && !g_autocast_active.load(std::memory_order_relaxed))
    if (VerifyCursor* c = verifying()) {  // Note [Verified ops in the fast paths]
      const Tensor* x = tensor_of(args[0]);
      const Tensor* y = tensor_of(args[1]);
      if (x && y && (*x)->ndim() == 2 && (*y)->ndim() == 1 && (*y)->dtype == DType::Int64 &&
          (*y)->shape[0] == (*x)->shape[0]) {
        DG_PY_TRY
        if (PyObject* r = verified_cross_entropy(c, args, *x, *y)) return r;
        DG_PY_CATCH
      }
    }
  if (PyVectorcall_NARGS(nargsf) == 2 && !kwnames && fast_on() && !g_autocast_active.load(std::memory_order_relaxed)) {
    const Tensor* x = tensor_of(args[0]);
    const Tensor* y = tensor_of(args[1]);
    if (x && y && (*x)->ndim() == 2 && (*y)->ndim() == 1 && (*y)->dtype == DType::Int64) {
      DG_PY_TRY
      return to_python(cross_entropy(*x, *y, 1, -100, 0.0));
      DG_PY_CATCH
    }
  }
  return PyObject_Vectorcall(fallback, args, nargsf, kwnames);
}

// ---- sort, topk, the scans: a tensor, then positional arguments ----
// Each run_X takes the arguments after the tensor and either sets *result and returns true, or returns false for
// any call that is not the plain one it handles (the fallback then runs, and raises the errors).
using TensorCall = bool (*)(const Tensor& t, PyObject* const* rest, Py_ssize_t nrest, PyObject** result);

bool parse_int(PyObject* o, int64_t& v) {
  if (!PyLong_Check(o) || PyBool_Check(o)) return false;
  int overflow = 0;
  long long x = PyLong_AsLongLongAndOverflow(o, &overflow);
  if (overflow || (x == -1 && PyErr_Occurred())) {
    PyErr_Clear();
    return false;
  }
  v = x;
  return true;
}
// a dim of t, wrapped (a 0-d tensor takes -1 and 0, as one of a single dim); false out of range
bool parse_dim(PyObject* o, const Tensor& t, int64_t& dim) {
  int64_t d = 0;
  const int64_t n = std::max<int64_t>(t->ndim(), 1);
  if (!parse_int(o, d) || d < -n || d >= n) return false;
  dim = d < 0 ? d + n : d;
  return true;
}
bool parse_bool(PyObject* o, bool& v) {
  if (o != Py_True && o != Py_False) return false;
  v = o == Py_True;
  return true;
}
// (values, indices) as the shared layer's namedtuple (return_sort, return_topk, return_cummax, return_cummin:
// `type`, registered by _register_helpers), made as tuple.__new__(type, (values, indices)) makes it (CPython's
// tuple_subtype_new: the type's tp_alloc, then the items), without the two argument tuples: its Python __new__
// would cost a third of a 16-element sort
PyObject* pair_result(PyObject* type, Tensor&& values, Tensor&& indices) {
  py::object v = py::cast(std::move(values)), i = py::cast(std::move(indices));
  PyTypeObject* tp = reinterpret_cast<PyTypeObject*>(type);
  PyObject* r = tp->tp_alloc(tp, 2);
  if (!r) return nullptr;
  PyTuple_SET_ITEM(r, 0, v.release().ptr());
  PyTuple_SET_ITEM(r, 1, i.release().ptr());
  return r;
}
PyObject* sort_result_type() {
  static PyObject* type = py_helper("return_sort").release().ptr();
  return type;
}
PyObject* topk_result_type() {
  static PyObject* type = py_helper("return_topk").release().ptr();
  return type;
}
PyObject* cummax_result_type() {
  static PyObject* type = py_helper("return_cummax").release().ptr();
  return type;
}
PyObject* cummin_result_type() {
  static PyObject* type = py_helper("return_cummin").release().ptr();
  return type;
}

// sort(t), sort(t, dim), sort(t, dim, descending)
bool run_sort(const Tensor& t, PyObject* const* rest, Py_ssize_t n, PyObject** result) {
  int64_t dim = std::max<int64_t>(t->ndim(), 1) - 1;
  bool descending = false;
  if (n > 2 || (n >= 1 && !parse_dim(rest[0], t, dim)) || (n == 2 && !parse_bool(rest[1], descending))) return false;
  auto [values, indices] = dyngrad::sort(t, dim, descending, false);
  *result = pair_result(sort_result_type(), std::move(values), std::move(indices));
  return true;
}

// argsort(t), argsort(t, dim), argsort(t, dim, descending)
bool run_argsort(const Tensor& t, PyObject* const* rest, Py_ssize_t n, PyObject** result) {
  int64_t dim = std::max<int64_t>(t->ndim(), 1) - 1;
  bool descending = false;
  if (n > 2 || (n >= 1 && !parse_dim(rest[0], t, dim)) || (n == 2 && !parse_bool(rest[1], descending))) return false;
  *result = to_python(dyngrad::argsort(t, dim, descending, false));
  return true;
}

// topk(t, k), topk(t, k, dim), topk(t, k, dim, largest) of a tensor with dims, not bool
bool run_topk(const Tensor& t, PyObject* const* rest, Py_ssize_t n, PyObject** result) {
  int64_t k = 0, dim = t->ndim() - 1;
  bool largest = true;
  if (n < 1 || n > 3 || t->ndim() == 0 || t->dtype == DType::Bool || !parse_int(rest[0], k) ||
      (n >= 2 && !parse_dim(rest[1], t, dim)) || (n == 3 && !parse_bool(rest[2], largest)) || k < 0 ||
      k > t->shape[dim])
    return false;
  auto [values, indices] = dyngrad::topk(t, k, dim, largest);
  *result = pair_result(topk_result_type(), std::move(values), std::move(indices));
  return true;
}

// cumsum(t, dim) of a float32, float64 or int64 tensor (the shared layer converts the others first)
bool run_cumsum(const Tensor& t, PyObject* const* rest, Py_ssize_t n, PyObject** result) {
  int64_t dim = 0;
  const DType dt = t->dtype;
  if (n != 1 || !(dt == DType::Float32 || dt == DType::Float64 || dt == DType::Int64) || !parse_dim(rest[0], t, dim))
    return false;
  *result = to_python(cumsum(t, dim, false));
  return true;
}

// cumprod(t, dim) of a float32, float64 or int64 tensor, as cumsum
bool run_cumprod(const Tensor& t, PyObject* const* rest, Py_ssize_t n, PyObject** result) {
  int64_t dim = 0;
  const DType dt = t->dtype;
  if (n != 1 || !(dt == DType::Float32 || dt == DType::Float64 || dt == DType::Int64) || !parse_dim(rest[0], t, dim))
    return false;
  *result = to_python(cumprod(t, dim, false));
  return true;
}

// logcumsumexp(t, dim) of a float32 or float64 tensor (the shared layer refuses the others)
bool run_logcumsumexp(const Tensor& t, PyObject* const* rest, Py_ssize_t n, PyObject** result) {
  int64_t dim = 0;
  const DType dt = t->dtype;
  if (n != 1 || !(dt == DType::Float32 || dt == DType::Float64) || !parse_dim(rest[0], t, dim)) return false;
  *result = to_python(logcumsumexp(t, dim, false));
  return true;
}

// cummax(t, dim), cummin(t, dim)
template <bool IsMax>
bool run_cumulative_extremum(const Tensor& t, PyObject* const* rest, Py_ssize_t n, PyObject** result) {
  int64_t dim = 0;
  if (n != 1 || !parse_dim(rest[0], t, dim)) return false;
  auto [values, indices] = cumulative_extremum(t, dim, IsMax);
  *result = pair_result(IsMax ? cummax_result_type() : cummin_result_type(), std::move(values), std::move(indices));
  return true;
}

// ---- the shape calls and layer_norm of a transformer's forward ----
// Note [Fast paths of the gpt step]: the bench's gpt-train forward (bench/workloads.py, nanoGPT's model) makes per
// step 20 view calls, 16 transposes, 9 layer_norms, 4 splits and 2 embeddings on top of its 17 linears; through their
// Python definitions (shape_args and to_int per dim, the shows_as rename that walks the inputs' nodes, layer_norm's
// checks, embedding's index check through numpy) they cost 4.2, 3.0, 10.3, 6.0 and 11.5 us a call against torch's
// 0.9, 1.0, 5.5, 5.2 and 5.6. Here view/reshape(ints), transpose(int, int) and split/chunk(int, dim) run the core
// call the Python definition makes and name the nodes as its shows_as does; _layer_norm_fast and _embedding_fast
// are called by the shared layer's layer_norm and embedding (python/dyngrad/_api/ops/) for the plain case they would
// take, and return None for everything else (the Python checks then raise or compose). A bool or an int that does
// not fit int64 among the ints, a keyword other than dim, goes to the fallback, which stays the definition of the
// errors. After: 0.45, 0.50, 2.3, 1.3 and 2.9 us; the tiny gpt step's forward (bench/gpt_overhead.py: the same
// calls, kernels of next to nothing) 1.09 -> 0.69 ms, torch's 1.07 (Intel Xeon family 6 model 167, 2 cores, KVM,
// 1 thread, load 8-9, the base tree's build and this one alternated twice).

// The ints of view(2, 3) / view((2, 3)) / view([2, 3]) as shape_args reads them (Python ints that fit int64, not
// bools); false for anything else (a dtype, numpy ints, no argument at all).
bool parse_shape_args(PyObject* const* rest, Py_ssize_t n, Shape& shape) {
  PyObject* const* items = rest;
  if (n == 1 && (PyTuple_Check(rest[0]) || PyList_Check(rest[0]))) {
    items = PySequence_Fast_ITEMS(rest[0]);
    n = PySequence_Fast_GET_SIZE(rest[0]);
  } else if (n == 0) {
    return false;
  }
  shape.resize(n);
  for (Py_ssize_t i = 0; i < n; ++i)
    if (!parse_int(items[i], shape[i])) return false;
  return true;
}

// Tensor.view(*shape): python/dyngrad/_api/ops/shape.py's view, @shows_as("View")
bool run_view(const Tensor& t, PyObject* const* rest, Py_ssize_t n, PyObject** result) {
  Shape shape;
  if (!parse_shape_args(rest, n, shape)) return false;
  Tensor out = view(t, shape);
  rename_new_node(out, t, "ViewBackward");
  *result = to_python(std::move(out));
  return true;
}

// Tensor.reshape(*shape): shape.py's reshape_method
bool run_reshape(const Tensor& t, PyObject* const* rest, Py_ssize_t n, PyObject** result) {
  Shape shape;
  if (!parse_shape_args(rest, n, shape)) return false;
  *result = to_python(reshape(t, shape));
  return true;
}

// transpose(t, dim0, dim1) / t.transpose(dim0, dim1): shape.py's transpose, @shows_as("Transpose") (the core wraps
// and checks the dims, as for the Python definition)
bool run_transpose(const Tensor& t, PyObject* const* rest, Py_ssize_t n, PyObject** result) {
  int64_t d0 = 0, d1 = 0;
  if (n != 2 || !parse_int(rest[0], d0) || !parse_int(rest[1], d1)) return false;
  Tensor out = transpose(t, d0, d1);
  rename_new_node(out, t, "TransposeBackward");
  *result = to_python(std::move(out));
  return true;
}

// _layer_norm_fast(input, normalized_shape, weight, bias, eps): layer_norm's fused case (normalization.py): a real
// floating input, weight and bias None or of its dtype and of the shape normalized_shape (an int or a tuple or list
// of ints, at least one, the input's last dims), eps a Python int or float; the result named NativeLayerNormBackward
// as its shows_as names it. None for any other call (and while a program records: its steps are the Python's).
PyObject* layer_norm_fast(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  if (nargs != 5 || !fast_on()) Py_RETURN_NONE;
  const Tensor* x = tensor_of(args[0]);
  const Tensor* w = args[2] == Py_None ? nullptr : tensor_of(args[2]);
  const Tensor* b = args[3] == Py_None ? nullptr : tensor_of(args[3]);
  if (!x || (!w && args[2] != Py_None) || (!b && args[3] != Py_None)) Py_RETURN_NONE;
  const DType dt = (*x)->dtype;
  if (!is_floating(dt) || (w && (*w)->dtype != dt) || (b && (*b)->dtype != dt)) Py_RETURN_NONE;
  Shape ns;
  if (PyLong_Check(args[1])) {
    ns.resize(1);
    if (!parse_int(args[1], ns[0])) Py_RETURN_NONE;
  } else if (!parse_shape_args(args + 1, 1, ns)) {
    Py_RETURN_NONE;
  }
  const int64_t k = (int64_t)ns.size(), nd = (*x)->ndim();
  if (k < 1 || k > nd) Py_RETURN_NONE;
  for (int64_t i = 0; i < k; ++i)
    if ((*x)->shape[nd - k + i] != ns[i]) Py_RETURN_NONE;
  if ((w && (*w)->shape != ns) || (b && (*b)->shape != ns)) Py_RETURN_NONE;
  double eps = 0;
  if (PyFloat_Check(args[4])) {
    eps = PyFloat_AS_DOUBLE(args[4]);
  } else if (PyLong_Check(args[4])) {
    eps = PyLong_AsDouble(args[4]);
    if (eps == -1.0 && PyErr_Occurred()) {
      PyErr_Clear();
      Py_RETURN_NONE;
    }
  } else {
    Py_RETURN_NONE;
  }
  DG_PY_TRY
  Tensor out = layer_norm(*x, w ? *w : Tensor(), b ? *b : Tensor(), k, eps);
  if (out->grad_fn && out->grad_fn != (*x)->grad_fn && (!w || out->grad_fn != (*w)->grad_fn) &&
      (!b || out->grad_fn != (*b)->grad_fn))
    out->grad_fn->display_name = "NativeLayerNormBackward";
  return to_python(std::move(out));
  DG_PY_CATCH
}

// split(n, dim=0) / chunk(n, dim=0), a tensor's and dg.split(t, ...) / dg.chunk(t, ...): `rest` the arguments after
// the tensor, the keyword values after them (vectorcall's layout); n and dim plain ints, dim positional or the one
// keyword `dim`. false for anything else (a list of sections, another keyword): the fallback.
bool parse_int_and_dim(PyObject* const* rest, Py_ssize_t n, PyObject* kwnames, int64_t& size, int64_t& dim) {
  const Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
  dim = 0;
  if (n < 1 || n + nkw > 2 || !parse_int(rest[0], size)) return false;
  if (n == 2) return parse_int(rest[1], dim);
  if (nkw == 1) return PyUnicode_CompareWithASCIIString(PyTuple_GET_ITEM(kwnames, 0), "dim") == 0 &&
                       parse_int(rest[1], dim);
  return true;
}

// The pieces as a tuple, each named SplitBackward where it made a node (split's and chunk's @shows_as("Split"))
PyObject* split_result(std::vector<Tensor>&& pieces, const Tensor& input) {
  PyObject* tuple = PyTuple_New((Py_ssize_t)pieces.size());
  if (!tuple) throw py::error_already_set();
  for (size_t i = 0; i < pieces.size(); ++i) {
    rename_new_node(pieces[i], input, "SplitBackward");
    PyTuple_SET_ITEM(tuple, (Py_ssize_t)i, to_python(std::move(pieces[i])));
  }
  return tuple;
}

template <bool Chunk>
std::vector<Tensor> run_pieces(const Tensor& t, int64_t n, int64_t dim) {
  return Chunk ? chunk(t, n, dim) : split_size(t, n, dim);
}

template <bool Chunk>
PyObject* pieces_method(PyObject* self, PyObject* const* args, Py_ssize_t nargsf, PyObject* kwnames) {
  int64_t n = 0, dim = 0;
  if (fast_on())
    if (const Tensor* t = tensor_of(self))
      if (parse_int_and_dim(args, PyVectorcall_NARGS(nargsf), kwnames, n, dim)) {
        DG_PY_TRY
        return split_result(run_pieces<Chunk>(*t, n, dim), *t);
        DG_PY_CATCH
      }
  return call_method_fallback(fallback_of<&pieces_method<Chunk>>, self, args, nargsf, kwnames);
}

template <bool Chunk>
PyObject* pieces_function(PyObject* fallback, PyObject* const* args, Py_ssize_t nargsf, PyObject* kwnames) {
  const Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
  int64_t n = 0, dim = 0;
  if (nargs >= 1 && fast_on())
    if (const Tensor* t = tensor_of(args[0]))
      if (parse_int_and_dim(args + 1, nargs - 1, kwnames, n, dim)) {
        DG_PY_TRY
        return split_result(run_pieces<Chunk>(*t, n, dim), *t);
        DG_PY_CATCH
      }
  return PyObject_Vectorcall(fallback, args, nargsf, kwnames);
}

// _embedding_fast(input, weight): embedding's plain case (python/dyngrad/_api/ops/embedding.py, no padding_idx,
// max_norm, scale_grad_by_freq or sparse): int64 indices all in range of a 2-D weight; the same core calls
// (reshape, index_select, reshape) and the name EmbeddingBackward. None for any other call, an index out of range
// included (the Python definition raises its error), and while a program records.
PyObject* embedding_fast(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  if (nargs != 2 || !fast_on()) Py_RETURN_NONE;
  const Tensor* idx = tensor_of(args[0]);
  const Tensor* w = tensor_of(args[1]);
  if (!idx || !w || (*idx)->dtype != DType::Int64 || (*w)->ndim() != 2) Py_RETURN_NONE;
  DG_PY_TRY
  Tensor flat = reshape(*idx, Shape{(*idx)->numel});
  const Tensor values = flat->is_contiguous() ? flat : contiguous(flat);
  const int64_t* v = values->data<int64_t>();
  const int64_t rows = (*w)->shape[0];
  for (int64_t i = 0; i < values->numel; ++i)
    if (v[i] < 0 || v[i] >= rows) Py_RETURN_NONE;
  Shape shape = (*idx)->shape;
  shape.push_back((*w)->shape[1]);
  Tensor out = reshape(index_select(*w, 0, flat), shape);
  if (out->grad_fn && out->grad_fn != (*w)->grad_fn && out->grad_fn != (*idx)->grad_fn)
    out->grad_fn->display_name = "EmbeddingBackward";
  return to_python(std::move(out));
  DG_PY_CATCH
}

template <TensorCall Run>
PyObject* tensor_call_function(PyObject* fallback, PyObject* const* args, Py_ssize_t nargsf, PyObject* kwnames) {
  const Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
  if (nargs >= 1 && !kwnames && fast_on())
    if (const Tensor* t = tensor_of(args[0])) {
      PyObject* result = nullptr;
      DG_PY_TRY
      if (Run(*t, args + 1, nargs - 1, &result)) return result;
      DG_PY_CATCH
    }
  return PyObject_Vectorcall(fallback, args, nargsf, kwnames);
}

// ---- methods: `self` is the tensor (Note [Fallbacks of methods]) ----
template <UnaryOp Op>
PyObject* unary_method(PyObject* self, PyObject* const* args, Py_ssize_t nargsf, PyObject* kwnames) {
  if (PyVectorcall_NARGS(nargsf) == 0 && !kwnames)
    if (const Tensor* t = tensor_of(self)) {
      DG_PY_TRY
      if (fast_on()) return to_python(Op(*t));
      if (VerifyCursor* c = verifying())  // Note [Verified ops in the fast paths]
        if (PyObject* r = verified_unary(c, Op, self, *t)) return r;
      if (fast_recording())  // Note [Fast paths that record]
        if (PyObject* r = recorded_unary(Op, self, *t)) return r;
      DG_PY_CATCH
    }
  return call_method_fallback(fallback_of<&unary_method<Op>>, self, args, nargsf, kwnames);
}

template <BinaryOp Op, bool Numbers>
PyObject* binary_method(PyObject* self, PyObject* const* args, Py_ssize_t nargsf, PyObject* kwnames) {
  if (PyVectorcall_NARGS(nargsf) == 1 && !kwnames && !autocast_defers<Op>()) {
    const Tensor* ta = tensor_of(self);
    const Tensor* tb = tensor_of(args[0]);
    if (ta && (tb || (Numbers && fast_number<Op>(args[0])))) {
      DG_PY_TRY
      if (fast_on()) return to_python(tb ? Op(*ta, *tb) : Op(*ta, number_operand(args[0], *ta)));
      // Note [Verified ops in the fast paths]
      if (VerifyCursor* c = issues_result_type<Op>() ? nullptr : verifying()) {
        PyObject* r = tb ? verified_binary(c, Op, self, *ta, args[0], *tb)
                         : verified_with_number(c, Op, true, self, args[0],
                                                [&](const Tensor& n) { return Op(*ta, n); });
        if (r) return r;
      }
      if (!issues_result_type<Op>() && fast_recording()) {  // Note [Fast paths that record]
        PyObject* r = tb ? recorded_binary(Op, self, *ta, args[0], *tb)
                         : recorded_with_number(Op, true, self, args[0],
                                                [&](const Tensor& n) { return Op(*ta, n); });
        if (r) return r;
      }
      DG_PY_CATCH
    }
  }
  return call_method_fallback(fallback_of<&binary_method<Op, Numbers>>, self, args, nargsf, kwnames);
}

template <ReduceOp Op>
PyObject* reduce_method(PyObject* self, PyObject* const* args, Py_ssize_t nargsf, PyObject* kwnames) {
  VerifyCursor* c = fast_on() ? nullptr : verifying();  // Note [Verified ops in the fast paths]
  if (const Tensor* t = fast_on() || c ? tensor_of(self) : nullptr) {
    Dims dims;
    bool keepdim = false;
    if (parse_reduce(args, PyVectorcall_NARGS(nargsf), kwnames, dims, keepdim)) {
      DG_PY_TRY
      if (!c) return to_python(Op(*t, dims, keepdim));
      if (PyObject* r = verified_reduce(c, Op, self, *t, dims, keepdim)) return r;
      DG_PY_CATCH
    }
  }
  return call_method_fallback(fallback_of<&reduce_method<Op>>, self, args, nargsf, kwnames);
}

template <TensorCall Run>
PyObject* tensor_call_method(PyObject* self, PyObject* const* args, Py_ssize_t nargsf, PyObject* kwnames) {
  if (!kwnames && fast_on())
    if (const Tensor* t = tensor_of(self)) {
      PyObject* result = nullptr;
      DG_PY_TRY
      if (Run(*t, args, PyVectorcall_NARGS(nargsf), &result)) return result;
      DG_PY_CATCH
    }
  return call_method_fallback(fallback_of<&tensor_call_method<Run>>, self, args, nargsf, kwnames);
}

// self.add_(other) or self.add_(other, alpha=number): the optimiser's step. The same core calls as the shared
// in-place method: inplace_input, add, assign_inplace.
PyObject* add_inplace_method(PyObject* self, PyObject* const* args, Py_ssize_t nargsf, PyObject* kwnames) {
  Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
  Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
  const Tensor* t = fast_on() ? tensor_of(self) : nullptr;
  const Tensor* other = nargs == 1 ? tensor_of(args[0]) : nullptr;
  PyObject* alpha = nullptr;
  if (nkw == 1 && PyUnicode_CompareWithASCIIString(PyTuple_GET_ITEM(kwnames, 0), "alpha") == 0)
    alpha = args[nargs];
  if (t && other && (nkw == 0 || (alpha && is_number(alpha)))) {
    DG_PY_TRY
    if (!alpha && binary_inplace_without_graph(BinaryKind::Add, *t, *other, nullptr, "add_")) {
      Py_INCREF(self);
      return self;
    }
    if (alpha && !PyBool_Check(alpha)) {  // alpha as the core rounds it: a 0-d tensor of other's dtype
      const double a = item_double(number_operand(alpha, *other));
      if (binary_inplace_without_graph(BinaryKind::Add, *t, *other, &a, "add_")) {
        Py_INCREF(self);
        return self;
      }
    }
    Tensor o = alpha ? mul(*other, number_operand(alpha, *other)) : *other;
    Tensor before = inplace_input(*t, "add_", o->requires_grad);
    assign_inplace(*t, add(before, o), "add_");
    Py_INCREF(self);
    return self;
    DG_PY_CATCH
  }
  return call_method_fallback(fallback_of<&add_inplace_method>, self, args, nargsf, kwnames);
}

// self.mul_(other), self.sub_(other), self.div_(other) with a tensor or a number and nothing else: computed
// straight into self when no graph is built (Note [In-place arithmetic without a temporary]), else the fallback.
template <BinaryOp Op, BinaryKind Kind>
PyObject* binary_inplace_method(PyObject* self, PyObject* const* args, Py_ssize_t nargsf, PyObject* kwnames) {
  const Tensor* t = fast_on() && !kwnames && PyVectorcall_NARGS(nargsf) == 1 ? tensor_of(self) : nullptr;
  if (t) {
    const Tensor* other = tensor_of(args[0]);
    if (other || fast_number<Op>(args[0])) {
      DG_PY_TRY
      if (binary_inplace_without_graph(Kind, *t, other ? *other : number_operand(args[0], *t), nullptr,
                                       Kind == BinaryKind::Mul ? "mul_" : Kind == BinaryKind::Sub ? "sub_" : "div_")) {
        Py_INCREF(self);
        return self;
      }
      DG_PY_CATCH
    }
  }
  return call_method_fallback(fallback_of<&binary_inplace_method<Op, Kind>>, self, args, nargsf, kwnames);
}

struct Entry {
  const char* name;
  Fast function;              // dg.NAME(...), or null
  Fast method;                // tensor.NAME(...), or null
  PyObject** method_fallback;  // fallback_of<method> (Note [Fallbacks of methods])
};

template <UnaryOp Op>
constexpr Entry unary_entry(const char* name) {
  return {name, &unary_function<Op>, &unary_method<Op>, &fallback_of<&unary_method<Op>>};
}
template <BinaryOp Op, bool Numbers>
constexpr Entry binary_entry(const char* name) {
  return {name, &binary_function<Op, Numbers>, &binary_method<Op, Numbers>,
          &fallback_of<&binary_method<Op, Numbers>>};
}
template <ReduceOp Op>
constexpr Entry reduction_entry(const char* name) {
  return {name, &reduce_function<Op>, &reduce_method<Op>, &fallback_of<&reduce_method<Op>>};
}

template <TensorCall Run>
constexpr Entry tensor_call_entry(const char* name) {
  return {name, &tensor_call_function<Run>, &tensor_call_method<Run>, &fallback_of<&tensor_call_method<Run>>};
}

// The hot primitives of ops.def whose signature is custom: their entries, written here.
constexpr Entry fast_entry_sum() { return reduction_entry<&sum_op>("sum"); }
constexpr Entry fast_entry_cumsum() { return tensor_call_entry<&run_cumsum>("cumsum"); }
constexpr Entry fast_entry_cumprod() { return tensor_call_entry<&run_cumprod>("cumprod"); }
constexpr Entry fast_entry_logcumsumexp() { return tensor_call_entry<&run_logcumsumexp>("logcumsumexp"); }
constexpr Entry fast_entry_cross_entropy() { return {"cross_entropy", &cross_entropy_function, nullptr, nullptr}; }

const Entry kEntries[] = {
// every hot primitive of ops.def, made from its signature (a custom one by its fast_entry_<name>() above)
#define DG_FAST_ENTRY_unary(name) unary_entry<&name>(#name),
#define DG_FAST_ENTRY_unary_float(name) unary_entry<&name>(#name),
#define DG_FAST_ENTRY_binary(name) binary_entry<&name, true>(#name),
#define DG_FAST_ENTRY_binary_tensors(name) binary_entry<&name, false>(#name),
#define DG_FAST_ENTRY_reduction(name) reduction_entry<&name>(#name),
#define DG_FAST_ENTRY_custom(name) fast_entry_##name(),
#define DG_FAST_hot(signature, name) DG_FAST_ENTRY_##signature(name)
#define DG_FAST_cold(signature, name)
#define DG_OP(name, display, saves, signature, hot) DG_FAST_##hot(signature, name)
#include "dyngrad/ops.def"
#undef DG_FAST_ENTRY_unary
#undef DG_FAST_ENTRY_unary_float
#undef DG_FAST_ENTRY_binary
#undef DG_FAST_ENTRY_binary_tensors
#undef DG_FAST_ENTRY_reduction
#undef DG_FAST_ENTRY_custom
#undef DG_FAST_hot
#undef DG_FAST_cold
    // and the hot rows of the shared layer that are not primitives
    {"add_", nullptr, &add_inplace_method, &fallback_of<&add_inplace_method>},
    {"mul_", nullptr, &binary_inplace_method<&mul, BinaryKind::Mul>,
     &fallback_of<&binary_inplace_method<&mul, BinaryKind::Mul>>},
    {"sub_", nullptr, &binary_inplace_method<&sub, BinaryKind::Sub>,
     &fallback_of<&binary_inplace_method<&sub, BinaryKind::Sub>>},
    {"div_", nullptr, &binary_inplace_method<&div, BinaryKind::Div>,
     &fallback_of<&binary_inplace_method<&div, BinaryKind::Div>>},
    {"linear", &linear_function, nullptr, nullptr},
    {"view", nullptr, &tensor_call_method<&run_view>, &fallback_of<&tensor_call_method<&run_view>>},
    {"reshape", nullptr, &tensor_call_method<&run_reshape>, &fallback_of<&tensor_call_method<&run_reshape>>},
    tensor_call_entry<&run_transpose>("transpose"),
    {"split", &pieces_function<false>, &pieces_method<false>, &fallback_of<&pieces_method<false>>},
    {"chunk", &pieces_function<true>, &pieces_method<true>, &fallback_of<&pieces_method<true>>},
    tensor_call_entry<&run_sort>("sort"),
    tensor_call_entry<&run_argsort>("argsort"),
    tensor_call_entry<&run_topk>("topk"),
    tensor_call_entry<&run_cumulative_extremum<true>>("cummax"),
    tensor_call_entry<&run_cumulative_extremum<false>>("cummin"),
};
constexpr size_t kEntryCount = sizeof(kEntries) / sizeof(kEntries[0]);

// The operator slots: the shared layer's dunders (forward and reflected) behind each.
struct SlotEntry {
  const char* forward;
  const char* reflected;  // or null
  PyObject** forward_fallback;
  PyObject** reflected_fallback;
};
constexpr binaryfunc kAddSlot = &binary_slot<&add, true, &reflected_add>;
constexpr binaryfunc kSubSlot = &binary_slot<&sub, true, &reflected_sub>;
constexpr binaryfunc kMulSlot = &binary_slot<&mul, true, &reflected_mul>;
constexpr binaryfunc kDivSlot = &binary_slot<&div, true, &reflected_div>;
constexpr binaryfunc kMatmulSlot = &binary_slot<&matmul, false>;
template <binaryfunc Slot>
constexpr SlotEntry slot_entry(const char* forward, const char* reflected) {
  return {forward, reflected, &forward_fallback_of<Slot>, &reflected_fallback_of<Slot>};
}
const SlotEntry kSlots[] = {slot_entry<kAddSlot>("__add__", "__radd__"), slot_entry<kSubSlot>("__sub__", "__rsub__"),
                            slot_entry<kMulSlot>("__mul__", "__rmul__"),
                            slot_entry<kDivSlot>("__truediv__", "__rtruediv__"),
                            slot_entry<kMatmulSlot>("__matmul__", "__rmatmul__"),
                            slot_entry<&getitem_slot>("__getitem__", nullptr)};

// PyMethodDef must outlive the functions made from it: static storage.
PyMethodDef g_function_defs[kEntryCount];
PyMethodDef g_method_defs[kEntryCount];
std::string g_docs[kEntryCount], g_method_docs[kEntryCount];

// docs[key]: the fallback's docstring headed by its signature in CPython's `name(...)\n--\n\n` form, so that
// inspect.signature and help() of the builtin show the signature of the Python definition.
std::string doc_of(const py::dict& docs, const std::string& key, py::handle fn) {
  if (docs.contains(key.c_str())) return docs[key.c_str()].cast<std::string>();
  py::object doc = py::getattr(fn, "__doc__", py::none());
  return doc.is_none() ? std::string() : doc.cast<std::string>();
}

// _C name -> the core function of a one- or two-tensor primitive (the functions the fast paths' templates take)
const std::unordered_map<std::string, VerifyStep>& verify_kinds() {
  static const std::unordered_map<std::string, VerifyStep> table = [] {
    std::unordered_map<std::string, VerifyStep> t;
    auto unary = [&](const char* name, UnaryOp f) { t[name].kind = 1, t[name].core = reinterpret_cast<void*>(f); };
    auto binary = [&](const char* name, BinaryOp f) { t[name].kind = 2, t[name].core = reinterpret_cast<void*>(f); };
#define DG_VERIFY_unary(name) unary(#name, &name);
#define DG_VERIFY_unary_float(name) unary(#name, &name);
#define DG_VERIFY_unary_backward(name)
#define DG_VERIFY_binary(name) binary(#name, &name);
#define DG_VERIFY_binary_tensors(name) binary(#name, &name);
#define DG_VERIFY_reduction(name)
#define DG_VERIFY_custom(name)
#define DG_OP(name, display, saves, signature, hot) DG_VERIFY_##signature(name)
#include "dyngrad/ops.def"
#undef DG_VERIFY_unary
#undef DG_VERIFY_unary_float
#undef DG_VERIFY_unary_backward
#undef DG_VERIFY_binary
#undef DG_VERIFY_binary_tensors
#undef DG_VERIFY_reduction
#undef DG_VERIFY_custom
    unary("mT", &mT);  // _C.mT (ops_bind.cpp) is the composite's own call
    // the reductions with fast paths: _C.sum(a, dims, keepdim, None) is sum_op's call; _C.mean is mean
    t["sum"].kind = 4, t["sum"].core = reinterpret_cast<void*>(static_cast<ReduceOp>(&sum_op));
    t["mean"].kind = 4, t["mean"].core = reinterpret_cast<void*>(static_cast<ReduceOp>(&mean));
    t["scalar_operand"].kind = 3;
    return t;
  }();
  return table;
}

// _VerifiedFunction(fn, wrapper): what the recorder puts in place of a _C function (or a Tensor property's accessor)
// while it records or verifies. A call that is the next recorded step of the verified call on this thread (the same
// function, positional arguments only: tensors from the same slots, constants of the same type and value) runs
// fn itself; its tensor result takes its slot, a None or plain value equal to the recorded one moves the index on,
// and any other result goes to the recorder's Python comparison (cursor.on_result). Every other call goes to
// `wrapper`, the recorder's Python wrapper, which records, serves, checks or verifies it as before.
struct VerifiedFunction {
  PyObject_HEAD
  vectorcallfunc vectorcall;
  PyObject* fn;
  PyObject* wrapper;
};

PyObject* verified_function_call(PyObject* self, PyObject* const* args, size_t nargsf, PyObject* kwnames) {
  auto* w = reinterpret_cast<VerifiedFunction*>(self);
  // Note [The recorded surface stays in place]: no thread records, so this is an eager call: straight to fn
  if (fast_on()) return PyObject_Vectorcall(w->fn, args, nargsf, kwnames);
  const Py_ssize_t n = PyVectorcall_NARGS(nargsf);
  VerifyCursor* c = kwnames ? nullptr : verifying();
  if (c) {
    const VerifyStep& s = c->table->steps[c->index];
    if (s.fn == w->fn && (Py_ssize_t)s.args.size() == n) {
      DG_PY_TRY
      bool same = true;
      for (Py_ssize_t k = 0; k < n && same; ++k) {
        if (!s.seqs.empty() && s.seqs[k].kind) {  // a backward's outputs, an optimiser's parameter lists
          const VerifyStep::Seq& q = s.seqs[k];
          PyObject* a = args[k];
          same = (q.kind == 1 ? PyTuple_CheckExact(a) : PyList_CheckExact(a)) &&
                 PySequence_Fast_GET_SIZE(a) == (Py_ssize_t)q.slots.size();
          PyObject** items = same ? PySequence_Fast_ITEMS(a) : nullptr;
          for (size_t j = 0; same && j < q.slots.size(); ++j)
            same = q.slots[j] >= 0 ? has_slot(c, items[j], q.slots[j]) : same_constant(items[j], q.consts[j]);
          continue;
        }
        same = s.args[k] >= 0 ? has_slot(c, args[k], s.args[k]) : same_constant(args[k], s.arg_consts[k]);
      }
      if (same && c->plan_on && !c->plan_ran && c->index == c->table->plan_step) {
        run_planned_backward(c);  // Note [Verified ops run from the plan]
        if (s.result == kNoneResult) {
          ++c->index;
          ++c->matched;
          Py_RETURN_NONE;
        }
        flush(c);
        return PyObject_CallOneArg(c->on_result.ptr(), Py_None);
      }
      if (same) {
        // Note [Verified ops run from the plan]: a step whose result Python compares (a sequence) gets its inputs'
        // graph first; a tensor step runs from the plan
        if (plan_forward(c) && s.result < 0 && s.result != kNoneResult && s.result != kValueResult) materialize(c);
        const int64_t k = c->index;
        PyObject* r;
        {
          PlanGradOff off(s.result >= 0 ? c : nullptr);
          ++c->depth;  // the calls fn makes itself (a Python check, a backward's hooks) are not steps
          r = PyObject_Vectorcall(w->fn, args, n, nullptr);
          --c->depth;
        }
        if (!r) return nullptr;
        py::object result = py::reinterpret_steal<py::object>(r);
        if (s.result >= 0 && g_tensor_type && is_tensor_object(r)) {
          if (plan_forward(c)) note_plan_step(c, k, s.result, *held_tensor(r, g_tensor_type));
          assign_slot(c, s.result, r);
        } else if (!((s.result == kNoneResult && r == Py_None) ||
                     (s.result == kValueResult && same_constant(r, s.expected)))) {
          materialize(c);  // Note [Verified ops run from the plan]: Python reads the slots from here
          flush(c);
          return PyObject_CallOneArg(c->on_result.ptr(), r);  // the recorder compares it (and moves the index)
        }
        ++c->index;
        ++c->matched;
        return result.release().ptr();
      }
      DG_PY_CATCH
    }
  }
  return PyObject_Vectorcall(w->wrapper, args, nargsf, kwnames);
}

void verified_function_dealloc(PyObject* self) {
  auto* w = reinterpret_cast<VerifiedFunction*>(self);
  PyObject_GC_UnTrack(self);
  Py_CLEAR(w->fn);
  Py_CLEAR(w->wrapper);
  Py_TYPE(self)->tp_free(self);
}

int verified_function_traverse(PyObject* self, visitproc visit, void* arg) {
  auto* w = reinterpret_cast<VerifiedFunction*>(self);
  Py_VISIT(w->fn);
  Py_VISIT(w->wrapper);
  return 0;
}

int verified_function_clear(PyObject* self) {
  auto* w = reinterpret_cast<VerifiedFunction*>(self);
  Py_CLEAR(w->fn);
  Py_CLEAR(w->wrapper);
  return 0;
}

PyObject* verified_function_new(PyTypeObject* type, PyObject* args, PyObject* kwargs) {
  PyObject *fn, *wrapper;
  static const char* names[] = {"fn", "wrapper", nullptr};
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OO:_VerifiedFunction", const_cast<char**>(names), &fn, &wrapper))
    return nullptr;
  if (!PyCallable_Check(fn) || !PyCallable_Check(wrapper)) {
    PyErr_SetString(PyExc_TypeError, "_VerifiedFunction(fn, wrapper): both must be callable");
    return nullptr;
  }
  auto* w = reinterpret_cast<VerifiedFunction*>(type->tp_alloc(type, 0));
  if (!w) return nullptr;
  w->vectorcall = &verified_function_call;
  Py_INCREF(fn);
  Py_INCREF(wrapper);
  w->fn = fn;
  w->wrapper = wrapper;
  return reinterpret_cast<PyObject*>(w);
}

PyObject* verified_function_wrapped(PyObject* self, void*) {
  PyObject* fn = reinterpret_cast<VerifiedFunction*>(self)->fn;
  Py_INCREF(fn);
  return fn;
}

PyObject* verified_function_name(PyObject* self, void*) {
  return PyObject_GetAttrString(reinterpret_cast<VerifiedFunction*>(self)->wrapper, "__name__");
}

// fn's own attributes (its __doc__, __module__, __qualname__, __text_signature__, ...): the stand-in stays in _C for
// the process's life (Note [The recorded surface stays in place]), so help(), inspect and the docs see fn's
PyObject* verified_function_doc(PyObject* self, void*) {
  return PyObject_GetAttrString(reinterpret_cast<VerifiedFunction*>(self)->fn, "__doc__");
}

PyObject* verified_function_getattro(PyObject* self, PyObject* name) {
  PyObject* r = PyObject_GenericGetAttr(self, name);
  if (r || !PyErr_ExceptionMatches(PyExc_AttributeError)) return r;
  PyErr_Clear();
  return PyObject_GetAttr(reinterpret_cast<VerifiedFunction*>(self)->fn, name);
}

PyObject* verified_function_repr(PyObject* self) {
  return PyObject_Repr(reinterpret_cast<VerifiedFunction*>(self)->fn);
}

// A _VerifiedMethod (the stand-in of a Tensor method, a class attribute) binds self as a function does; with
// Py_TPFLAGS_METHOD_DESCRIPTOR, `t.item()` calls it with t first and makes no bound method.
PyObject* verified_method_get(PyObject* self, PyObject* obj, PyObject*) {
  if (!obj || obj == Py_None) {
    Py_INCREF(self);
    return self;
  }
  return PyMethod_New(self, obj);
}

// pickle: fn's own reduction (a builtin's is its qualified name, which finds the stand-in in _C again)
PyObject* verified_function_reduce(PyObject* self, PyObject*) {
  return PyObject_CallMethod(reinterpret_cast<VerifiedFunction*>(self)->fn, "__reduce__", nullptr);
}

PyMethodDef verified_function_methods[] = {
    {"__reduce__", &verified_function_reduce, METH_NOARGS, "fn's own reduction"},
    {nullptr, nullptr, 0, nullptr}};

PyGetSetDef verified_function_getset[] = {
    {"__wrapped__", &verified_function_wrapped, nullptr, "the function it stands for", nullptr},
    {"__name__", &verified_function_name, nullptr, "the function's name", nullptr},
    {"__doc__", &verified_function_doc, nullptr, "the function's docstring", nullptr},
    {nullptr, nullptr, nullptr, nullptr, nullptr}};

PyTypeObject* verified_function_type() {
  static PyTypeObject type = [] {
    PyTypeObject t{PyVarObject_HEAD_INIT(nullptr, 0)};
    t.tp_name = "dyngrad._C._VerifiedFunction";
    t.tp_basicsize = sizeof(VerifiedFunction);
    t.tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL;
    t.tp_doc = "a recorded program's stand-in for one _C function (Note [Verified ops in the fast paths])";
    t.tp_new = &verified_function_new;
    t.tp_dealloc = &verified_function_dealloc;
    t.tp_traverse = &verified_function_traverse;
    t.tp_clear = &verified_function_clear;
    t.tp_call = &PyVectorcall_Call;
    t.tp_vectorcall_offset = offsetof(VerifiedFunction, vectorcall);
    t.tp_getset = verified_function_getset;
    t.tp_methods = verified_function_methods;
    t.tp_getattro = &verified_function_getattro;
    t.tp_repr = &verified_function_repr;
    return t;
  }();
  return &type;
}

PyTypeObject* verified_method_type() {
  static PyTypeObject type = [] {
    PyTypeObject t{PyVarObject_HEAD_INIT(nullptr, 0)};
    t.tp_name = "dyngrad._C._VerifiedMethod";
    t.tp_basicsize = sizeof(VerifiedFunction);
    t.tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL | Py_TPFLAGS_METHOD_DESCRIPTOR;
    t.tp_doc = "a recorded program's stand-in for one Tensor method: a _VerifiedFunction that binds self";
    t.tp_base = verified_function_type();
    t.tp_new = &verified_function_new;
    t.tp_dealloc = &verified_function_dealloc;
    t.tp_traverse = &verified_function_traverse;
    t.tp_clear = &verified_function_clear;
    t.tp_call = &PyVectorcall_Call;
    t.tp_vectorcall_offset = offsetof(VerifiedFunction, vectorcall);
    t.tp_descr_get = &verified_method_get;
    t.tp_getset = verified_function_getset;  // its own: tp_doc would shadow the base's __doc__ (fn's)
    t.tp_methods = verified_function_methods;
    t.tp_getattro = &verified_function_getattro;
    t.tp_repr = &verified_function_repr;
    return t;
  }();
  return &type;
}

// The dict behind a module or a class (a class's real dict, not its mappingproxy).
PyObject* owner_dict(PyObject* owner) {
  if (PyType_Check(owner)) return reinterpret_cast<PyTypeObject*>(owner)->tp_dict;
  if (PyModule_Check(owner)) return PyModule_GetDict(owner);
  return nullptr;
}

// A number that changes whenever the dict does (CPython's ma_version_tag, 3.11), or -1 where there is none.
int64_t dict_version(PyObject* d) {
#if PY_VERSION_HEX >= 0x030B0000 && PY_VERSION_HEX < 0x030C0000
  return (int64_t)(reinterpret_cast<PyDictObject*>(d)->ma_version_tag & 0x7fffffffffffffffULL);
#else
  (void)d;
  return -1;
#endif
}


void cursor_follow(VerifyCursor& c, py::object table) {
  const VerifyTable* next = table.is_none() ? nullptr : &table.cast<const VerifyTable&>();
  if (next != c.table) {  // Note [Verified ops run from the plan]: another variant, or none
    materialize(&c);
    if (next) flush(&c);
  }
  c.table = next;
  c.table_owner = table;
  if (!next) c.slot_tensors.clear();
}

// The slots so far are exactly `slots` (the recorder's arguments and externals): the mirror takes them; then the
// call runs from the plan if it can.
bool cursor_start_plan(VerifyCursor& c, const std::vector<std::pair<int64_t, PyObject*>>& slots) {
  c.plan_on = c.plan_ran = false;
  c.deferred.clear();
  c.py_objects.clear();
  c.stale.clear();
  c.mirror = true;
  for (const auto& [slot, obj] : slots) assign_slot(&c, slot, obj);
  if (!c.table || !c.table->plan || c.index != 0 || c.depth != 0) return false;
  c.grad_slots.clear();
  for (const auto& [slot, obj] : slots) {
    const Tensor* t = g_tensor_type ? held_tensor(obj, g_tensor_type) : nullptr;
    if (!t) continue;
    set_slot_tensor(&c, slot, *t);
    if ((size_t)slot >= c.grad_slots.size()) c.grad_slots.resize(slot + 1);
    c.grad_slots[slot] = (*t)->requires_grad;
  }
  c.plan_on = plan_usable(*c.table->plan, [&](int64_t slot) { return plan_slot(&c, slot); });
  return c.plan_on;
}

// Note [A verified call's setup in one call]: capture.verify's start of a call, which was seven calls of this
// object from Python (~2 us on an Intel Xeon family 6 model 167, loaded): the table followed, the recorder's
// on_result, this thread's cursor, and the slots of the arguments (an object passed twice keeps its first slot, as
// the recorder's bind_args) and of the externals (`externals`: the variants of the group, whose `externals` dicts
// are read here; an external passed as an argument takes the external's slot, and a tensor external to two
// variants the later one's, as the recorder's slot_of), then the plan.
bool cursor_start(VerifyCursor& c, py::object table, py::object on_result, py::handle args, py::handle externals) {
  if (t_cursor && t_cursor != &c)
    throw RuntimeError("_VerifyCursor.start: this thread already follows another verified call.");
  if (!PyList_Check(args.ptr()) || !PyList_Check(externals.ptr()))
    throw py::type_error("_VerifyCursor.start: args and externals must be lists");
  c.index = c.depth = 0;
  c.on_result = std::move(on_result);
  cursor_follow(c, std::move(table));
  std::vector<std::pair<int64_t, PyObject*>> slots;
  // the externals of every variant of the group, in order (each variant's `externals`, a dict slot -> tensor)
  static PyObject* externals_name = PyUnicode_InternFromString("externals");
  std::vector<py::object> dicts;
  std::vector<int64_t> ext_slots;
  std::vector<PyObject*> ext_objects;
  for (Py_ssize_t v = 0; v < PyList_GET_SIZE(externals.ptr()); ++v) {
    py::object d = py::reinterpret_steal<py::object>(PyObject_GetAttr(PyList_GET_ITEM(externals.ptr(), v),
                                                                      externals_name));
    if (!d) throw py::error_already_set();
    if (!PyDict_Check(d.ptr())) throw py::type_error("_VerifyCursor.start: a variant's externals must be a dict");
    Py_ssize_t pos = 0;
    PyObject *key, *value;
    while (PyDict_Next(d.ptr(), &pos, &key, &value)) {
      const int64_t slot = PyLong_AsLongLong(key);
      if (slot == -1 && PyErr_Occurred()) throw py::error_already_set();
      ext_slots.push_back(slot);
      ext_objects.push_back(value);
    }
    dicts.push_back(std::move(d));  // keeps the values alive while they are read
  }
  const Py_ssize_t n_ext = (Py_ssize_t)ext_objects.size();
  const Py_ssize_t n_args = PyList_GET_SIZE(args.ptr());
  for (Py_ssize_t i = 0; i < n_args; ++i) {
    PyObject* x = PyList_GET_ITEM(args.ptr(), i);
    bool seen = std::find(ext_objects.begin(), ext_objects.end(), x) != ext_objects.end();
    for (const auto& [slot, obj] : slots) seen = seen || obj == x;
    if (!seen) slots.emplace_back(i, x);
  }
  for (Py_ssize_t k = 0; k < n_ext; ++k) {
    bool later = false;  // the same tensor again, later (a later variant): its slot is the recorder's slot_of's
    for (Py_ssize_t m = k + 1; m < n_ext && !later; ++m) later = ext_objects[m] == ext_objects[k];
    if (!later) slots.emplace_back(ext_slots[k], ext_objects[k]);
  }
  const bool plan = cursor_start_plan(c, slots);
  t_cursor = &c;
  return plan;
}

// The end of a verified call: the graph and slots brought up to date unless the call followed its table to its end
// (`complete`: the number of its steps, or -1), this thread's cursor let go, and everything held dropped; returns
// (index, depth, matched, planned, rebuilt).
py::tuple cursor_finish(VerifyCursor& c, int64_t complete) {
  struct Off {
    VerifyCursor& c;
    ~Off() {
      if (t_cursor == &c) t_cursor = nullptr;
    }
  } off{c};
  if (complete < 0 || c.index != complete) {
    materialize(&c);
    flush(&c);
  }
  py::tuple out = py::make_tuple(c.index, c.depth, c.matched, c.planned, c.rebuilt);
  return out;
}

void cursor_drop(VerifyCursor& c) {
  c.table = nullptr;
  c.table_owner = py::none();
  c.plan_on = false;
  c.deferred.clear();
  c.slot_tensors.clear();
  c.py_objects.clear();
  c.stale.clear();
  c.mirror = false;
}
}  // namespace

// Note [Verified ops in the fast paths]: the Python side (capture.Recorder) makes one table per variant and one
// cursor per verified call, sets the cursor's table as it follows the variant tree (None once it leaves), and its
// index and depth as its own `checked` and `depth`.
void bind_verify(py::module_& m) {
  py::class_<VerifyTable>(m, "_VerifyTable")
      .def(py::init([](py::list entries) {
             // per step: None, or (fn, name, slots, constants, result, expected, is _C.<name>) of a step with
             // positional slots and constants only (result: capture._loop_out's code)
             auto table = std::make_unique<VerifyTable>();
             const auto& kinds = verify_kinds();
             for (py::handle e : entries) {
               VerifyStep step;
               if (!e.is_none()) {
                 py::tuple entry = py::reinterpret_borrow<py::tuple>(e);
                 py::list slots = entry[2], consts = entry[3];
                 const int64_t out = entry[4].cast<int64_t>();
                 table->constants.push_back(py::reinterpret_borrow<py::object>(entry[0]));
                 step.fn = entry[0].ptr();
                 for (size_t k = 0; k < slots.size(); ++k) {
                   step.args.push_back(slots[k].cast<int64_t>());
                   table->constants.push_back(py::reinterpret_borrow<py::object>(consts[k]));
                   step.arg_consts.push_back(consts[k].ptr());
                 }
                 step.result = out;
                 if (entry.size() > 7 && !entry[7].is_none()) {  // (is_list, slots, constants) per argument, or None
                   for (py::handle q : py::reinterpret_borrow<py::list>(entry[7])) {
                     VerifyStep::Seq seq;
                     if (!q.is_none()) {
                       py::tuple spec = py::reinterpret_borrow<py::tuple>(q);
                       seq.kind = spec[0].cast<bool>() ? 2 : 1;
                       py::list item_slots = spec[1], item_consts = spec[2];
                       for (size_t j = 0; j < item_slots.size(); ++j) {
                         seq.slots.push_back(item_slots[j].cast<int64_t>());
                         table->constants.push_back(py::reinterpret_borrow<py::object>(item_consts[j]));
                         seq.consts.push_back(item_consts[j].ptr());
                       }
                     }
                     step.seqs.push_back(std::move(seq));
                   }
                   if (step.seqs.size() != step.args.size())
                     throw py::value_error("_VerifyTable: a step's sequence specs do not match its arguments");
                 }
                 if (out == kValueResult) {
                   table->constants.push_back(py::reinterpret_borrow<py::object>(entry[5]));
                   step.expected = entry[5].ptr();
                 }
                 const std::string step_name = entry[1].cast<std::string>();
                 // cross_entropy's fast path (Note [Verified ops in the fast paths]): the target check, then the op
                 if (step_name == "validate" && !entry[6].cast<bool>() && out == kNoneResult) step.kind = 5;
                 if (step_name == "cross_entropy" && entry[6].cast<bool>() && out >= 0) step.kind = 6;
                 auto found = entry[6].cast<bool>() ? kinds.find(step_name) : kinds.end();
                 if (found != kinds.end() && out >= 0 && found->second.kind == 4) {
                   // sum(a, dims, keepdim, None) or mean(a, dims, keepdim): dims a tuple of ints, keepdim a bool
                   const bool is_sum = entry[1].cast<std::string>() == "sum";
                   const size_t n = slots.size();
                   bool ok = n == (is_sum ? 4u : 3u) && slots[0].cast<int64_t>() >= 0 &&
                             PyTuple_CheckExact(consts[1].ptr()) && PyBool_Check(consts[2].ptr()) &&
                             (!is_sum || consts[3].is_none());
                   Dims dims;
                   if (ok)
                     for (py::handle d : py::reinterpret_borrow<py::tuple>(consts[1])) {
                       if (!PyLong_CheckExact(d.ptr())) { ok = false; break; }
                       dims.push_back(d.cast<int64_t>());
                     }
                   if (ok) {
                     step.kind = 4;
                     step.core = found->second.core;
                     step.slots[0] = slots[0].cast<int64_t>();
                     step.dims = std::move(dims);
                     step.keepdim = consts[2].ptr() == Py_True;
                     step.out = out;
                   }
                 } else if (found != kinds.end() && out >= 0) {
                   const VerifyStep& k = found->second;
                   const size_t n = slots.size();
                   if ((k.kind == 1 && n == 1 && slots[0].cast<int64_t>() >= 0) ||
                       (k.kind == 2 && n == 2 && slots[0].cast<int64_t>() >= 0 && slots[1].cast<int64_t>() >= 0)) {
                     step.kind = k.kind;
                     step.core = k.core;
                     for (size_t i = 0; i < n; ++i) step.slots[i] = slots[i].cast<int64_t>();
                   } else if (k.kind == 3 && n == 2 && slots[0].cast<int64_t>() < 0 && slots[1].cast<int64_t>() >= 0 &&
                              (PyLong_Check(consts[0].ptr()) || PyFloat_Check(consts[0].ptr()))) {
                     step.kind = 3;
                     step.slots[1] = slots[1].cast<int64_t>();
                     table->constants.push_back(py::reinterpret_borrow<py::object>(consts[0]));
                     step.constant = table->constants.back().ptr();
                   }
                   if (step.kind) step.out = out;
                 }
               }
               table->steps.push_back(step);
             }
             return table;
           }),
           py::arg("entries"))
      .def("set_plan", [](VerifyTable& t, int64_t step, py::object plan, std::vector<bool> rerunnable) {
        // Note [Verified ops run from the plan]: the plan of step `step` (a _run_backward); returns per step before
        // it whether its result had history when recorded (capture decides from that whether the table keeps it)
        t.plan = plan.is_none() ? nullptr : plan_of(plan);
        t.plan_step = t.plan ? step : -1;
        t.history.assign(t.steps.size(), 0);
        t.rerunnable.assign(t.steps.size(), 0);
        for (size_t k = 0; k < rerunnable.size() && k < t.steps.size(); ++k) t.rerunnable[k] = rerunnable[k];
        std::vector<bool> history;
        for (int64_t k = 0; t.plan && k < step && k < (int64_t)t.steps.size(); ++k) {
          const VerifyStep& s = t.steps[k];
          t.history[k] = s.fn && s.result >= 0 && plan_has_history(*t.plan, s.result);
          history.push_back(t.history[k]);
        }
        return history;
      }, py::arg("step"), py::arg("plan").none(true), py::arg("rerunnable") = std::vector<bool>{})
      .def("__len__", [](const VerifyTable& t) { return t.steps.size(); })
      .def("kinds", [](const VerifyTable& t) {
        std::vector<int> kinds;
        for (const VerifyStep& s : t.steps) kinds.push_back(s.kind);
        return kinds;
      }, "per step: 0 matched only in Python, 1 a one-tensor op, 2 a two-tensor op, 3 scalar_operand");
  py::class_<VerifyCursor> cursor(m, "_VerifyCursor");
  cursor.def(py::init([](py::dict slot_of, py::list keep) {
             auto c = std::make_unique<VerifyCursor>();
             c->slot_of = slot_of;
             c->keep = keep;
             c->table_owner = py::none();
             return c;
           }),
           py::arg("slot_of"), py::arg("keep"))
      .def_readwrite("index", &VerifyCursor::index)
      .def_readwrite("depth", &VerifyCursor::depth)
      .def_readonly("matched", &VerifyCursor::matched)
      .def_readwrite("on_result", &VerifyCursor::on_result)
      .def("follow", &cursor_follow, py::arg("table").none(true),
           "the table of the variant followed, or None: the recording was left")
      // Note [Verified ops run from the plan]
      .def("start_plan", [](VerifyCursor& c, const std::vector<std::pair<int64_t, py::object>>& slots) {
        std::vector<std::pair<int64_t, PyObject*>> raw;
        for (const auto& [slot, obj] : slots) raw.emplace_back(slot, obj.ptr());
        return cursor_start_plan(c, raw);
      }, py::arg("slots"), "the arguments' and externals' (slot, tensor): runs the call from the plan if it can")
      .def("sync", [](VerifyCursor& c) {
        materialize(&c);
        flush(&c);
      }, "before Python compares or runs a step: the graph of the ops run from the plan rebuilt (the rest of the "
         "call runs eagerly), the slots written into the recorder's dict and list")
      .def("drop", &cursor_drop,
           "lets go of everything, after a call that followed its variant to the end (nothing left to rebuild)")
      .def("start", &cursor_start, py::arg("table").none(true), py::arg("on_result"), py::arg("args"),
           py::arg("externals"), "Note [A verified call's setup in one call]: follow, on_result, activate and "
           "start_plan; returns whether the call runs from the plan")
      .def("finish", [](VerifyCursor& c, int64_t complete) {
        py::tuple out;
        {
          struct Drop {
            VerifyCursor& c;
            ~Drop() {
              c.on_result = py::none();  // the recorder's bound method: a cycle through this object otherwise
              cursor_drop(c);
            }
          } drop{c};
          out = cursor_finish(c, complete);
        }
        return out;
      }, py::arg("complete"), "sync (unless the call followed its table to its end: complete is the number "
         "of its steps), deactivate and drop; returns (index, depth, matched, planned, rebuilt)")
      .def_readonly("planned", &VerifyCursor::planned)
      .def_readonly("rebuilt", &VerifyCursor::rebuilt)
      .def_property_readonly("plan_on", [](const VerifyCursor& c) { return c.plan_on && !c.plan_ran; })
      .def("activate", [](VerifyCursor& c) {
        if (t_cursor && t_cursor != &c)
          throw RuntimeError("_VerifyCursor.activate: this thread already follows another verified call.");
        t_cursor = &c;
      }, "this thread's fast paths match against this cursor")
      .def("deactivate", [](VerifyCursor& c) {
        if (t_cursor == &c) t_cursor = nullptr;
      });
  cursor.def_static("swap_dict", [](py::dict d, py::list names, py::object expected, py::list values) {
    // d[names[i]] = values[i] for every i, when every d[names[i]] is expected[i] (None: no check); returns whether
    // it swapped. capture._Swap's writes of the recorded surface into _C's dict, checked at C speed (Note
    // [Verified ops in the fast paths]: a verified call swaps the ~190 names at every call).
    const Py_ssize_t n = PyList_GET_SIZE(names.ptr());
    if (PyList_GET_SIZE(values.ptr()) != n || (!expected.is_none() && py::len(expected) != (size_t)n))
      throw py::value_error("_VerifyCursor.swap_dict: names, expected and values differ in length");
    if (!expected.is_none()) {
      if (!PyList_Check(expected.ptr())) throw py::type_error("_VerifyCursor.swap_dict: expected must be a list");
      for (Py_ssize_t i = 0; i < n; ++i) {
        PyObject* current = PyDict_GetItemWithError(d.ptr(), PyList_GET_ITEM(names.ptr(), i));  // borrowed
        if (!current && PyErr_Occurred()) throw py::error_already_set();
        if (current != PyList_GET_ITEM(expected.ptr(), i)) return false;
      }
    }
    for (Py_ssize_t i = 0; i < n; ++i)
      if (PyDict_SetItem(d.ptr(), PyList_GET_ITEM(names.ptr(), i), PyList_GET_ITEM(values.ptr(), i)) < 0)
        throw py::error_already_set();
    return true;
  }, py::arg("d"), py::arg("names"), py::arg("expected").none(true), py::arg("values"));
  cursor.def_static("surface_in_place", [](py::list groups) {
    // Note [The recorded surface stays in place]: per group [owner, is_type, names, expected, version], whether
    // owner's names[i] is expected[i] for every i. A group's version is its dict's when they are (an unchanged
    // dict is not searched again at the next call), written back into the group.
    for (py::handle g : groups) {
      if (!PyList_Check(g.ptr()) || PyList_GET_SIZE(g.ptr()) != 5)
        throw py::type_error("_VerifyCursor.surface_in_place: expected [owner, is_type, names, expected, version]");
      PyObject* d = owner_dict(PyList_GET_ITEM(g.ptr(), 0));
      PyObject* names = PyList_GET_ITEM(g.ptr(), 2);
      PyObject* expected = PyList_GET_ITEM(g.ptr(), 3);
      if (!d || !PyList_Check(names) || !PyList_Check(expected) || PyList_GET_SIZE(names) != PyList_GET_SIZE(expected))
        throw py::type_error("_VerifyCursor.surface_in_place: a module or class and two lists of one length");
      const int64_t version = PyLong_AsLongLong(PyList_GET_ITEM(g.ptr(), 4));
      if (version == -1 && PyErr_Occurred()) throw py::error_already_set();
      const int64_t now = dict_version(d);
      if (version >= 0 && now == version) continue;
      for (Py_ssize_t i = 0; i < PyList_GET_SIZE(names); ++i) {
        PyObject* current = PyDict_GetItemWithError(d, PyList_GET_ITEM(names, i));  // borrowed
        if (!current && PyErr_Occurred()) throw py::error_already_set();
        if (current != PyList_GET_ITEM(expected, i)) return false;
      }
      PyObject* v = PyLong_FromLongLong(now);  // -1 on a Python without dict versions: searched every time
      if (!v || PyList_SetItem(g.ptr(), 4, v) < 0) throw py::error_already_set();
    }
    return true;
  }, py::arg("groups"));
  PyTypeObject* type = verified_function_type();
  if (PyType_Ready(type) < 0) throw py::error_already_set();
  Py_INCREF(type);
  m.attr("_VerifiedFunction") = py::reinterpret_borrow<py::object>(reinterpret_cast<PyObject*>(type));
  PyTypeObject* method = verified_method_type();
  if (PyType_Ready(method) < 0) throw py::error_already_set();
  Py_INCREF(method);
  m.attr("_VerifiedMethod") = py::reinterpret_borrow<py::object>(reinterpret_cast<PyObject*>(method));
}

void set_autocast_active(bool active) { g_autocast_active.store(active, std::memory_order_relaxed); }
void set_capturing(bool active) { g_capturing.store(active, std::memory_order_relaxed); }
PyObject* stand_in_target(PyObject* f) {
  return PyObject_TypeCheck(f, verified_function_type()) ? reinterpret_cast<VerifiedFunction*>(f)->fn : f;
}
void verified_autograd_read() {
  VerifyCursor* c = t_cursor;
  if (c && plan_forward(c) && !c->deferred.empty() && c->depth == 0) materialize(c);
}
void set_meta_class(py::handle cls) {
  if (!PyType_Check(cls.ptr())) throw py::type_error("_set_meta_class: expected a class");
  Py_XDECREF(g_meta_class);
  g_meta_class = reinterpret_cast<PyTypeObject*>(cls.inc_ref().ptr());  // kept for the process's life
}

// The names _install_fast_paths can speed up: functions, methods ("Tensor.NAME") and operator slots.
std::vector<std::string> fast_path_names() {
  std::vector<std::string> names;
  for (const Entry& e : kEntries) {
    if (e.function) names.push_back(e.name);
    if (e.method) names.push_back(std::string("Tensor.") + e.name);
  }
  for (const SlotEntry& s : kSlots) {
    names.push_back(std::string("Tensor.") + s.forward);
    if (s.reflected) names.push_back(std::string("Tensor.") + s.reflected);
  }
  return names;
}

// fallbacks: {name: Python function} for every entry of fast_path_names(); docs: {name: docstring}. Installs the
// methods and slots on Tensor and returns {name: builtin} for the module functions.
py::dict install_fast_paths(py::dict fallbacks, py::dict docs) {
  g_tensor_type = reinterpret_cast<PyTypeObject*>(py::type::of<TensorImpl>().ptr());
  auto fallback = [&](const std::string& key) -> py::object {
    if (!fallbacks.contains(key.c_str()))
      throw RuntimeError(str_cat("_install_fast_paths: no Python definition given for '", key, "'."));
    return fallbacks[key.c_str()];
  };
  py::dict functions;
  py::dict type_dict = py::reinterpret_borrow<py::dict>(g_tensor_type->tp_dict);
  std::set<PyObject**> assigned;
  size_t i = 0;
  for (const Entry& e : kEntries) {
    if (e.function) {
      py::object slow = fallback(e.name);
      g_docs[i] = doc_of(docs, e.name, slow);
      g_function_defs[i] = {e.name, reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(e.function)),
                            METH_FASTCALL | METH_KEYWORDS, g_docs[i].c_str()};
      py::object fast = py::reinterpret_steal<py::object>(PyCFunction_NewEx(&g_function_defs[i], slow.ptr(),
                                                                            py::str("dyngrad").ptr()));
      if (!fast) throw py::error_already_set();
      functions[e.name] = fast;
    }
    if (e.method) {
      py::object slow = fallback(std::string("Tensor.") + e.name);
      if (!assigned.insert(e.method_fallback).second)  // two entries with one method instance: one would be lost
        throw RuntimeError(str_cat("_install_fast_paths: the method of '", e.name, "' shares its fallback."));
      Py_XDECREF(*e.method_fallback);
      *e.method_fallback = slow.release().ptr();
      g_method_docs[i] = doc_of(docs, std::string("Tensor.") + e.name, py::handle(*e.method_fallback));
      g_method_defs[i] = {e.name, reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(e.method)),
                          METH_FASTCALL | METH_KEYWORDS, g_method_docs[i].c_str()};
      PyObject* descr = PyDescr_NewMethod(g_tensor_type, &g_method_defs[i]);
      if (!descr) throw py::error_already_set();
      type_dict[e.name] = py::reinterpret_steal<py::object>(descr);
    }
    ++i;
  }
  for (const SlotEntry& s : kSlots) {
    Py_XDECREF(*s.forward_fallback);
    *s.forward_fallback = fallback(std::string("Tensor.") + s.forward).release().ptr();
    if (s.reflected) {
      Py_XDECREF(*s.reflected_fallback);
      *s.reflected_fallback = fallback(std::string("Tensor.") + s.reflected).release().ptr();
    }
  }
  // The Python dunders stay in the type's dict (explicit calls, subclasses); the C slots replace what CPython
  // derived from them. Subclasses made later (nn.Parameter) inherit these slots.
  PyNumberMethods* number = g_tensor_type->tp_as_number;
  number->nb_add = kAddSlot;
  number->nb_subtract = kSubSlot;
  number->nb_multiply = kMulSlot;
  number->nb_true_divide = kDivSlot;
  number->nb_matrix_multiply = kMatmulSlot;
  g_tensor_type->tp_as_mapping->mp_subscript = &getitem_slot;
  static PyMethodDef slot_defs[] = {
      {"__add__", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(&slot_method<kAddSlot>)),
       METH_FASTCALL | METH_KEYWORDS, "self + other"},
      {"__sub__", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(&slot_method<kSubSlot>)),
       METH_FASTCALL | METH_KEYWORDS, "self - other"},
      {"__mul__", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(&slot_method<kMulSlot>)),
       METH_FASTCALL | METH_KEYWORDS, "self * other"},
      {"__truediv__", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(&slot_method<kDivSlot>)),
       METH_FASTCALL | METH_KEYWORDS, "self / other"},
      {"__matmul__", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(&slot_method<kMatmulSlot>)),
       METH_FASTCALL | METH_KEYWORDS, "self @ other"},
      {"__getitem__", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(&slot_method<&getitem_slot>)),
       METH_FASTCALL | METH_KEYWORDS, "self[index]: a view for ints, slices, None and Ellipsis"},
  };
  for (PyMethodDef& def : slot_defs) {  // written into the dict directly: setattr would re-derive the slots
    PyObject* descr = PyDescr_NewMethod(g_tensor_type, &def);
    if (!descr) throw py::error_already_set();
    type_dict[def.ml_name] = py::reinterpret_steal<py::object>(descr);
  }
  PyType_Modified(g_tensor_type);
  return functions;
}

// _C._layer_norm_fast and _C._embedding_fast (Note [Fast paths of the gpt step]), added to the module by bind_tensor (tensor_bind.cpp)
void bind_fast_helpers(py::module_& m) {
  static PyMethodDef defs[] = {
      {"_layer_norm_fast", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(&layer_norm_fast)),
       METH_FASTCALL,
       "_layer_norm_fast(input, normalized_shape, weight, bias, eps): layer_norm's fused case, or None"},
      {"_embedding_fast", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(&embedding_fast)), METH_FASTCALL,
       "_embedding_fast(input, weight): embedding's plain case, or None"},
  };
  for (PyMethodDef& def : defs) {
    PyObject* fn = PyCFunction_NewEx(&def, nullptr, m.ptr());
    if (!fn) throw py::error_already_set();
    m.attr(def.ml_name) = py::reinterpret_steal<py::object>(fn);
  }
}

}  // namespace dyngrad
