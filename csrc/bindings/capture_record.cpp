// capture_record.cpp: the recorder of dyngrad.compile in C++ (python/dyngrad/_api/capture.py's Recorder).
//
// Note [Recording in C++]: a program's first call records every call it makes of `_C` as a Step (Note [Capture at
// the narrow surface] in capture.py). In Python each recorded call cost ~10 us on top of the op (measured on the
// 200-op chain of bench/record_cost.py, Intel Xeon, lscpu family 6 model 167, 2 cores, KVM): the wrapper's frame,
// Recorder.call and record_step, encoding the arguments into templates (a Slot per tensor, found by id in the slot
// map), the check that every constant is plain data, binding the result to a new slot, and Step's constructor,
// which specialised the step's Python runner and its spec for the C++ loop. Here the wrapper of each _C function
// (_RecordingFunction, which the recorder puts inside the verified stand-in, _VerifiedFunction) records a call
// with none of that Python: it encodes the arguments into the same templates (capture.Slot, Seq, ArrayConstant
// objects), gives tensors their slots in the recorder's own dict and list, runs the call, binds its result and
// appends the same Step object, with the same fields, that Recorder.record_step makes. The Python recorder stays
// the definition: a call this file does not take (a step whose arguments are not plain data, a backward, which is
// planned in Python, an array result, a call while the recorder serves, checks or verifies) goes to the Python
// wrapper as before, and tests/test_compile_recorder.py checks that both record the same variants.
// The user's line of a step that needs one (a value Python reads) is found here too, with the package test of each
// file name cached (capture.user_line, ~3 us a frame walk, was one os.path.abspath per frame).
// The fast paths record through record_fast_begin/end (capture_record.h, Note [Fast paths that record] in
// fast_paths.cpp): the same encoding, result binding and Step, for the steps a fast path runs itself.
// Measured (bench/record_cost.py, Intel Xeon, lscpu family 6 model 167, 2 cores, KVM, ratios in one run): the
// 200-op chain records in 4.9-5.7x one eager call, from 17-18x with the Python recorder, and a forward-only chain
// of 201 ops in ~3.1x, ~1.1 us a recorded op (0.44 us eager) plus ~46 us a recording; the rest is the planned
// backward (Note [The backward as a recorded program]) and the fixed cost of a call (docs/compile.md).
#include <Python.h>
#include <frameobject.h>
#include <structmember.h>

#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "capture_record.h"
#include "common.h"

namespace dyngrad {

namespace {

// What capture.py gives once (_recorder_setup): its template and step classes, the types to test, and the helpers
// the rare cases call. Never released (they live as long as the module).
struct Setup {
  PyObject* slot_type = nullptr;      // capture.Slot
  PyObject* seq_type = nullptr;       // capture.Seq
  PyObject* array_constant = nullptr;  // capture.ArrayConstant
  PyObject* step_type = nullptr;      // capture.Step
  PyTypeObject* tensor_type = nullptr;  // _C.Tensor
  PyTypeObject* ndarray_type = nullptr;  // numpy.ndarray
  PyObject* plain_types = nullptr;    // capture._PLAIN + (_C.dtype,)
  PyObject* maker = nullptr;          // capture._maker (a tuple or list subclass's kind)
  PyObject* classify = nullptr;       // capture._file_of_user: a file name -> its base name, or None (the package)
  PyObject* file_cache = nullptr;     // dict: absolute file name -> base name or None
  PyObject* dict_type = nullptr;      // `dict`, a Seq's kind for dicts
  PyObject* bindings = nullptr;       // dict name -> _C's own function, for the names swapped with it in place
                                      // (Note [Fast paths that record]; set at each swap plan)
  PyObject* loss_globals = nullptr;   // the globals of _api/ops/loss.py (cross_entropy's target check)
  // the member descriptors of Slot.i, Seq.kind/items and Step's fields (set with tp_descr_set, as Python does)
  PyObject* slot_i = nullptr;
  PyObject* seq_kind = nullptr;
  PyObject* seq_items = nullptr;
  PyObject* step_fields[9] = {};      // fn, name, args, kwargs, result, line, out, native, plan
  PyObject *s_t = nullptr, *s_none = nullptr, *s_s = nullptr, *s_v = nullptr, *s_seq = nullptr;  // result kinds
  PyObject *n_n_slots = nullptr, *n_externals = nullptr, *n_steps = nullptr, *n_record_step = nullptr,
           *n_bind_result = nullptr;
  std::vector<PyObject*> slots;       // Slot(i), made once per index (a Slot is never changed once made)
  std::vector<PyObject*> tensor_results;  // ("t", i), made once per slot (a result template is a tuple)
};
Setup g;
bool g_ready = false;

struct RecorderCore;
RecorderCore* g_active = nullptr;  // the core of the recorder whose swap is in place (capture._Swap), if any

struct RecorderCore {
  PyObject_HEAD
  PyObject* recorder;   // the Python Recorder: the rare cases call its record_step and bind_result
  PyObject* variant;    // the Variant recorded into
  PyObject* slot_of;    // the recorder's dict id(object) -> slot
  PyObject* keep;       // the recorder's list that keeps every slotted object alive
  PyObject* arrays;     // list: every ArrayConstant this core made (capture._arrays_by_reference's constants)
  unsigned long thread;
  long depth;           // > 0 while a recorded call runs (its nested calls are not steps)
  int plain;            // 1: a call is recorded (Recorder.call would go to record_step); 0: the Python wrapper
  long recorded;        // steps recorded here
};

PyObject* slot_object(Py_ssize_t i) {
  if (i < (Py_ssize_t)g.slots.size() && g.slots[i]) {
    Py_INCREF(g.slots[i]);
    return g.slots[i];
  }
  PyObject* n = PyLong_FromSsize_t(i);
  if (!n) return nullptr;
  PyObject* s = PyObject_CallOneArg(g.slot_type, n);
  Py_DECREF(n);
  if (!s) return nullptr;
  if ((Py_ssize_t)g.slots.size() <= i) g.slots.resize(i + 1, nullptr);
  Py_INCREF(s);
  g.slots[i] = s;
  return s;
}

// The offset of a __slots__ field in its instances (an object field, T_OBJECT_EX), or -1.
Py_ssize_t field_offset(PyObject* descr) {
  if (Py_TYPE(descr) != &PyMemberDescr_Type) return -1;
  PyMemberDef* m = reinterpret_cast<PyMemberDescrObject*>(descr)->d_member;
  return (m->type == T_OBJECT_EX && !(m->flags & READONLY)) ? m->offset : -1;
}

// An instance of a __slots__ class with its fields set, without its __init__ (which only sets them): written at
// their offsets, as the member descriptors write them (tp_descr_set where a field is not a plain object field).
PyObject* make_instance(PyObject* type, PyObject* const* descrs, PyObject* const* values, int n) {
  auto* t = reinterpret_cast<PyTypeObject*>(type);
  PyObject* o = t->tp_alloc(t, 0);
  if (!o) return nullptr;
  for (int k = 0; k < n; ++k) {
    const Py_ssize_t offset = field_offset(descrs[k]);
    if (offset >= 0) {
      PyObject** field = reinterpret_cast<PyObject**>(reinterpret_cast<char*>(o) + offset);
      Py_INCREF(values[k]);
      Py_XSETREF(*field, values[k]);
    } else if (Py_TYPE(descrs[k])->tp_descr_set(descrs[k], o, values[k]) < 0) {
      Py_DECREF(o);
      return nullptr;
    }
  }
  return o;
}

// Untracks a tuple or list that holds only objects no cycle can pass through (numbers, strings, None, Slots, and
// containers already untracked), as CPython's collector untracks such tuples at its first pass: a recording makes
// several of them per step (templates, loop specs, result tuples), and the collections of the youngest generation
// that they triggered cost ~15% of a recording (perf, the 200-op chain of bench/record_cost.py).
void untrack_if_atomic(PyObject* o) {
  if (!o || !PyObject_GC_IsTracked(o)) return;
  const Py_ssize_t n = PySequence_Fast_GET_SIZE(o);
  PyObject** items = PySequence_Fast_ITEMS(o);
  for (Py_ssize_t k = 0; k < n; ++k) {
    PyObject* x = items[k];
    if (reinterpret_cast<PyObject*>(Py_TYPE(x)) == g.slot_type) continue;  // (a Slot holds an int)
    if (PyObject_IS_GC(x) && (PyObject_GC_IsTracked(x) || PyType_Check(x))) return;
  }
  PyObject_GC_UnTrack(o);
}

PyObject* make_seq(PyObject* kind, PyObject* items) {
  PyObject* descrs[2] = {g.seq_kind, g.seq_items};
  PyObject* values[2] = {kind, items};
  return make_instance(g.seq_type, descrs, values, 2);
}

// Recorder.new_slot: the variant's next slot, for obj.
Py_ssize_t new_slot(RecorderCore* c, PyObject* obj) {
  PyObject* vd = PyObject_GenericGetDict(c->variant, nullptr);
  if (!vd) return -1;
  PyObject* n = PyDict_GetItemWithError(vd, g.n_n_slots);  // borrowed
  Py_ssize_t i = n ? PyLong_AsSsize_t(n) : -1;
  if (i < 0) {
    if (!PyErr_Occurred()) PyErr_SetString(PyExc_RuntimeError, "compile: the recorded variant has no n_slots");
    Py_DECREF(vd);
    return -1;
  }
  PyObject* next = PyLong_FromSsize_t(i + 1);
  PyObject* key = PyLong_FromVoidPtr(obj);
  PyObject* value = PyLong_FromSsize_t(i);
  bool ok = next && key && value && PyDict_SetItem(vd, g.n_n_slots, next) == 0 &&
            PyDict_SetItem(c->slot_of, key, value) == 0 && PyList_Append(c->keep, obj) == 0;
  Py_XDECREF(next);
  Py_XDECREF(key);
  Py_XDECREF(value);
  Py_DECREF(vd);
  return ok ? i : -1;
}

// The slot of obj in the recorder's map, -1 if none, -2 on an error.
Py_ssize_t find_slot(RecorderCore* c, PyObject* obj) {
  PyObject* key = PyLong_FromVoidPtr(obj);
  if (!key) return -2;
  PyObject* slot = PyDict_GetItemWithError(c->slot_of, key);  // borrowed
  Py_DECREF(key);
  if (!slot) return PyErr_Occurred() ? -2 : -1;
  Py_ssize_t i = PyLong_AsSsize_t(slot);
  return (i == -1 && PyErr_Occurred()) ? -2 : i;
}

inline bool is_plain_leaf(PyObject* o) {
  PyTypeObject* t = Py_TYPE(o);
  if (o == Py_None || t == &PyLong_Type || t == &PyFloat_Type || t == &PyBool_Type || t == &PyUnicode_Type) return true;
  int r = PyObject_IsInstance(o, g.plain_types);
  if (r < 0) PyErr_Clear();  // an odd __instancecheck__: not plain (the Python recorder then decides)
  return r > 0;
}

// Recorder.encode(obj): obj with every tensor (and numpy array) replaced by its Slot (an unknown tensor becomes an
// external; an unknown array an ArrayConstant). *has_slot: the result holds a Slot or ArrayConstant (capture._has_slot);
// *plain becomes false where a leaf is not plain data (capture._plain of the result).
PyObject* encode(RecorderCore* c, PyObject* obj, bool* has_slot, bool* plain, Py_ssize_t* slot = nullptr) {
  PyTypeObject* t = Py_TYPE(obj);
  bool tensor = t == g.tensor_type || PyType_IsSubtype(t, g.tensor_type);
  if (tensor || t == g.ndarray_type || PyType_IsSubtype(t, g.ndarray_type)) {
    Py_ssize_t i = find_slot(c, obj);
    if (i == -2) return nullptr;
    *has_slot = true;
    if (i < 0) {
      if (!tensor) {
        PyObject* a = PyObject_CallOneArg(g.array_constant, obj);
        if (a && PyList_Append(c->arrays, a) < 0) Py_CLEAR(a);
        return a;
      }
      i = new_slot(c, obj);
      if (i < 0) return nullptr;
      PyObject* vd = PyObject_GenericGetDict(c->variant, nullptr);
      if (!vd) return nullptr;
      PyObject* externals = PyDict_GetItemWithError(vd, g.n_externals);  // borrowed
      PyObject* key = PyLong_FromSsize_t(i);
      int r = (externals && key) ? PyObject_SetItem(externals, key, obj) : -1;
      if (!externals && !PyErr_Occurred()) PyErr_SetString(PyExc_RuntimeError, "compile: the variant has no externals");
      Py_XDECREF(key);
      Py_DECREF(vd);
      if (r < 0) return nullptr;
    }
    if (slot) *slot = i;
    return slot_object(i);
  }
  const bool exact = t == &PyTuple_Type || t == &PyList_Type;
  if (exact || PyTuple_Check(obj) || PyList_Check(obj)) {
    Py_ssize_t n = PySequence_Fast_GET_SIZE(obj);
    PyObject** src = PySequence_Fast_ITEMS(obj);
    PyObject* items = PyList_New(n);
    if (!items) return nullptr;
    bool any = false;
    for (Py_ssize_t k = 0; k < n; ++k) {
      bool h = false;
      PyObject* x = encode(c, src[k], &h, plain);
      if (!x) {
        Py_DECREF(items);
        return nullptr;
      }
      any |= h;
      PyList_SET_ITEM(items, k, x);
    }
    if (any) {
      *has_slot = true;
      PyObject* kind;
      if (exact) {
        kind = reinterpret_cast<PyObject*>(t);
        Py_INCREF(kind);
      } else {
        kind = PyObject_CallOneArg(g.maker, reinterpret_cast<PyObject*>(t));
        if (!kind) {
          Py_DECREF(items);
          return nullptr;
        }
      }
      untrack_if_atomic(items);
      PyObject* s = make_seq(kind, items);
      Py_DECREF(kind);
      Py_DECREF(items);
      return s;
    }
    Py_DECREF(items);
    if (t == &PyList_Type) return PyList_GetSlice(obj, 0, n);  // list(obj)
    Py_INCREF(obj);
    return obj;
  }
  if (t == &PyDict_Type) {
    PyObject* pairs = PyList_New(0);
    if (!pairs) return nullptr;
    bool any = false, keys_plain = true;
    PyObject *k, *v;
    Py_ssize_t pos = 0;
    while (PyDict_Next(obj, &pos, &k, &v)) {
      bool h = false;
      Py_INCREF(k);
      PyObject* ev = encode(c, v, &h, plain);
      PyObject* pair = ev ? PyList_New(2) : nullptr;
      PyObject* seq = nullptr;
      if (pair) {
        Py_INCREF(k);
        PyList_SET_ITEM(pair, 0, k);
        PyList_SET_ITEM(pair, 1, ev);
        ev = nullptr;
        seq = make_seq(reinterpret_cast<PyObject*>(&PyTuple_Type), pair);
      }
      if (keys_plain && !is_plain_leaf(k)) keys_plain = false;
      Py_DECREF(k);
      Py_XDECREF(ev);
      Py_XDECREF(pair);
      if (!seq || PyList_Append(pairs, seq) < 0) {
        Py_XDECREF(seq);
        Py_DECREF(pairs);
        return nullptr;
      }
      Py_DECREF(seq);
      any |= h;
    }
    if (any) {
      if (!keys_plain) *plain = false;  // _plain looks at a Seq(dict)'s keys, not at a dict's
      *has_slot = true;
      PyObject* s = make_seq(g.dict_type, pairs);
      Py_DECREF(pairs);
      return s;
    }
    Py_DECREF(pairs);
    return PyDict_Copy(obj);
  }
  if (*plain && !is_plain_leaf(obj)) *plain = false;
  if (PyErr_Occurred()) return nullptr;
  Py_INCREF(obj);
  return obj;
}

// The encoded arguments of a call: `a` (Seq(tuple, items), or the arguments' tuple when no item holds a slot),
// `native` (Step.native: ([slot or -1], [None or constant]) for positional slots and constants, or None).
struct Encoded {
  PyObject* a = nullptr;
  PyObject* native = nullptr;
  bool plain = true;
  ~Encoded() {
    Py_XDECREF(a);
    Py_XDECREF(native);
  }
};

bool encode_args(RecorderCore* c, PyObject* const* args, Py_ssize_t n, bool skip_first, bool keywords, Encoded& e) {
  PyObject* items = PyList_New(n);
  if (!items) return false;
  Py_ssize_t small[16];
  std::vector<Py_ssize_t> large;
  Py_ssize_t* slots = small;
  if (n > 16) {
    large.resize(n);
    slots = large.data();
  }
  for (Py_ssize_t k = 0; k < n; ++k) slots[k] = -1;
  bool any = false, nativable = !keywords && n <= 16;
  for (Py_ssize_t k = 0; k < n; ++k) {
    bool h = false, p = true;
    PyObject* x = encode(c, args[k], &h, &p, &slots[k]);
    if (!x) {
      Py_DECREF(items);
      return false;
    }
    if (!p && !(skip_first && k == 0)) e.plain = false;
    any |= h;
    PyObject* xt = reinterpret_cast<PyObject*>(Py_TYPE(x));
    if (xt == g.seq_type || xt == g.array_constant) nativable = false;
    PyList_SET_ITEM(items, k, x);
  }
  if (!any) {  // the template is the arguments' tuple itself (capture.Recorder.encode of tuple(args))
    for (Py_ssize_t k = 0; k < n; ++k) {
      Py_INCREF(args[k]);
      Py_SETREF(PyList_GET_ITEM(items, k), args[k]);
    }
  }
  if (nativable) {
    PyObject* slot_list = PyList_New(n);
    PyObject* consts = PyList_New(n);
    if (!slot_list || !consts) {
      Py_XDECREF(slot_list);
      Py_XDECREF(consts);
      Py_DECREF(items);
      return false;
    }
    for (Py_ssize_t k = 0; k < n; ++k) {
      PyObject* x = PyList_GET_ITEM(items, k);
      if (slots[k] >= 0) {  // a Slot (a tensor or a known array)
        PyList_SET_ITEM(slot_list, k, PyLong_FromSsize_t(slots[k]));
        Py_INCREF(Py_None);
        PyList_SET_ITEM(consts, k, Py_None);
      } else {
        PyList_SET_ITEM(slot_list, k, PyLong_FromLong(-1));
        Py_INCREF(x);
        PyList_SET_ITEM(consts, k, x);
      }
    }
    untrack_if_atomic(slot_list);
    untrack_if_atomic(consts);
    e.native = PyTuple_Pack(2, slot_list, consts);
    untrack_if_atomic(e.native);
    Py_DECREF(slot_list);
    Py_DECREF(consts);
    if (!e.native) {
      Py_DECREF(items);
      return false;
    }
  } else {
    Py_INCREF(Py_None);
    e.native = Py_None;
  }
  if (any) untrack_if_atomic(items);
  e.a = any ? make_seq(reinterpret_cast<PyObject*>(&PyTuple_Type), items) : PyList_AsTuple(items);
  if (!any) untrack_if_atomic(e.a);
  Py_DECREF(items);
  return e.a != nullptr;
}

// Whether a result holds a numpy array in its tuples and lists (the Python recorder binds such a result).
bool has_array(PyObject* r) {
  PyTypeObject* t = Py_TYPE(r);
  if (t == g.ndarray_type || PyType_IsSubtype(t, g.ndarray_type)) return true;
  if (t != &PyTuple_Type && t != &PyList_Type) return false;
  Py_ssize_t n = PySequence_Fast_GET_SIZE(r);
  PyObject** items = PySequence_Fast_ITEMS(r);
  for (Py_ssize_t k = 0; k < n; ++k)
    if (has_array(items[k])) return true;
  return false;
}

// Recorder.bind_result, but for an array result (nullptr with no error set: the Python recorder binds it).
// is_state: the step's name is in capture._STATE_RESULTS.
PyObject* bind_result(RecorderCore* c, bool is_state, PyObject* r, bool* python) {
  PyTypeObject* t = Py_TYPE(r);
  const bool tensor = t == g.tensor_type || PyType_IsSubtype(t, g.tensor_type);
  if (r == Py_None) {
    PyObject* out = PyTuple_Pack(1, g.s_none);
    untrack_if_atomic(out);
    return out;
  }
  if (tensor || is_state) {
    Py_ssize_t i = new_slot(c, r);
    if (i < 0) return nullptr;
    if (tensor && i < (Py_ssize_t)g.tensor_results.size() && g.tensor_results[i]) {
      Py_INCREF(g.tensor_results[i]);
      return g.tensor_results[i];
    }
    PyObject* n = PyLong_FromSsize_t(i);
    if (!n) return nullptr;
    PyObject* out = PyTuple_Pack(2, tensor ? g.s_t : g.s_s, n);
    untrack_if_atomic(out);
    Py_DECREF(n);
    if (out && tensor) {
      if ((Py_ssize_t)g.tensor_results.size() <= i) g.tensor_results.resize(i + 1, nullptr);
      Py_INCREF(out);
      g.tensor_results[i] = out;
    }
    return out;
  }
  if (t == g.ndarray_type || PyType_IsSubtype(t, g.ndarray_type)) {
    *python = true;
    return nullptr;
  }
  if (t == &PyTuple_Type || t == &PyList_Type) {
    Py_ssize_t n = PySequence_Fast_GET_SIZE(r);
    PyObject** src = PySequence_Fast_ITEMS(r);
    PyObject* items = PyList_New(n);
    if (!items) return nullptr;
    for (Py_ssize_t k = 0; k < n; ++k) {
      PyObject* x = bind_result(c, is_state, src[k], python);
      if (!x) {
        Py_DECREF(items);
        return nullptr;
      }
      PyList_SET_ITEM(items, k, x);
    }
    PyObject* out = PyTuple_Pack(3, g.s_seq, reinterpret_cast<PyObject*>(t), items);
    Py_DECREF(items);
    return out;
  }
  return PyTuple_Pack(2, g.s_v, r);
}

// capture.user_line(): "file:line" of the innermost frame outside the dyngrad package.
PyObject* user_line() {
  PyFrameObject* frame = PyEval_GetFrame();  // borrowed
  Py_XINCREF(frame);
  while (frame) {
    PyCodeObject* code = PyFrame_GetCode(frame);
    PyObject* file = code->co_filename;
    Py_INCREF(file);
    Py_DECREF(code);
    PyObject* base = PyDict_GetItemWithError(g.file_cache, file);  // borrowed
    PyObject* made = nullptr;
    if (!base) {
      if (PyErr_Occurred()) {
        Py_DECREF(file);
        Py_DECREF(frame);
        return nullptr;
      }
      base = made = PyObject_CallOneArg(g.classify, file);  // caches it when the name is absolute
      if (!made) {
        Py_DECREF(file);
        Py_DECREF(frame);
        return nullptr;
      }
    }
    Py_DECREF(file);
    if (base != Py_None) {
      PyObject* line = PyUnicode_FromFormat("%U:%d", base, PyFrame_GetLineNumber(frame));
      Py_XDECREF(made);
      Py_DECREF(frame);
      return line;
    }
    Py_XDECREF(made);
    PyFrameObject* back = PyFrame_GetBack(frame);
    Py_DECREF(frame);
    frame = back;
  }
  return PyUnicode_FromString("<dyngrad>");
}

// The Python recorder's record_step(fn, name, args, kwargs, a, k), for a call this file does not finish itself.
PyObject* python_record_step(RecorderCore* c, PyObject* fn, PyObject* name, PyObject* const* args, Py_ssize_t n,
                             PyObject* kwnames, PyObject* a, PyObject* k) {
  PyObject* tuple = PyTuple_New(n);
  if (!tuple) return nullptr;
  for (Py_ssize_t i = 0; i < n; ++i) {
    Py_INCREF(args[i]);
    PyTuple_SET_ITEM(tuple, i, args[i]);
  }
  PyObject* kwargs = PyDict_New();
  if (kwargs && kwnames)
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(kwnames); ++i)
      if (PyDict_SetItem(kwargs, PyTuple_GET_ITEM(kwnames, i), args[n + i]) < 0) Py_CLEAR(kwargs);
  PyObject* r = nullptr;
  if (kwargs) {
    PyObject* method = PyObject_GetAttr(c->recorder, g.n_record_step);
    if (method) {
      PyObject* call[6] = {fn, name, tuple, kwargs, a, k};
      r = PyObject_Vectorcall(method, call, 6, nullptr);
      Py_DECREF(method);
    }
  }
  Py_XDECREF(kwargs);
  Py_DECREF(tuple);
  return r;
}

struct RecordingFunction;
PyObject* record_call(RecorderCore* c, RecordingFunction* w, PyObject* const* args, Py_ssize_t n, PyObject* kwnames,
                      Py_ssize_t nk);

struct RecordingFunction {
  PyObject_HEAD
  vectorcallfunc vectorcall;
  PyObject* fn;
  PyObject* name;
  PyObject* fallback;  // capture._python_wrapper(fn, name): every call this does not record itself
  char is_property;    // the step needs its user line whatever it returns (a Tensor property's accessor)
  char is_state;       // its result is state handed on (capture._STATE_RESULTS)
  char python;         // its steps are recorded in Python (a backward's plan, a random state set from Python)
  char is_validate;    // bridge.validate: its first argument (the check) need not be plain data
};

// The arrays a call's encoding made, forgotten when the call raises (its step is not recorded).
struct ArraysMark {
  RecorderCore* c;
  Py_ssize_t n;
  bool keep = false;
  explicit ArraysMark(RecorderCore* core) : c(core), n(PyList_GET_SIZE(core->arrays)) {}
  ~ArraysMark() {
    if (!keep && c->arrays && PyList_GET_SIZE(c->arrays) > n) {
      PyObject *type, *value, *tb;
      PyErr_Fetch(&type, &value, &tb);
      PyList_SetSlice(c->arrays, n, PyList_GET_SIZE(c->arrays), nullptr);
      PyErr_Restore(type, value, tb);
    }
  }
};

PyObject* record(RecorderCore* c, RecordingFunction* w, PyObject* const* args, Py_ssize_t n, PyObject* kwnames) {
  const Py_ssize_t nk = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
  ArraysMark mark(c);
  PyObject* r = record_call(c, w, args, n, kwnames, nk);
  mark.keep = r != nullptr;
  return r;
}

PyObject* record_call(RecorderCore* c, RecordingFunction* w, PyObject* const* args, Py_ssize_t n, PyObject* kwnames,
                      Py_ssize_t nk) {
  Encoded e;
  if (!encode_args(c, args, n, w->is_validate, nk > 0, e)) return nullptr;
  PyObject* k;
  bool kplain = true;
  if (nk) {
    PyObject* kwargs = PyDict_New();
    if (!kwargs) return nullptr;
    for (Py_ssize_t i = 0; i < nk; ++i)
      if (PyDict_SetItem(kwargs, PyTuple_GET_ITEM(kwnames, i), args[n + i]) < 0) {
        Py_DECREF(kwargs);
        return nullptr;
      }
    bool h = false;
    k = encode(c, kwargs, &h, &kplain);
    Py_DECREF(kwargs);
    if (!k) return nullptr;
  } else {
    k = PyDict_New();
    if (!k) return nullptr;
  }
  if (w->python || !e.plain || !kplain) {  // the Python recorder decides (Note [Steps that stay eager])
    PyObject* r = python_record_step(c, w->fn, w->name, args, n, kwnames, e.a, k);
    Py_DECREF(k);
    return r;
  }
  ++c->depth;
  PyObject* r = PyObject_Vectorcall(w->fn, args, n, kwnames);
  --c->depth;
  if (!r) {
    Py_DECREF(k);
    return nullptr;
  }
  bool python = has_array(r);
  PyObject* result = python ? nullptr : bind_result(c, w->is_state, r, &python);
  if (!result && python && !PyErr_Occurred()) {
    PyObject* method = PyObject_GetAttr(c->recorder, g.n_bind_result);
    if (method) {
      PyObject* call[2] = {w->name, r};
      result = PyObject_Vectorcall(method, call, 2, nullptr);
      Py_DECREF(method);
    }
  }
  PyObject* line = nullptr;
  PyObject* out = nullptr;
  if (result) {
    const bool tensor = PyTuple_GET_ITEM(result, 0) == g.s_t;
    if (!tensor || w->is_property) {
      line = user_line();
    } else {
      line = Py_None;
      Py_INCREF(line);
    }
    out = tensor ? PyTuple_GET_ITEM(result, 1) : nullptr;
    if (out) Py_INCREF(out);
    else out = PyLong_FromLong(-1);
  }
  PyObject* step = nullptr;
  if (line && out) {
    PyObject* values[9] = {w->fn, w->name, e.a, k, result, line, out, e.native, Py_None};
    step = make_instance(g.step_type, g.step_fields, values, 9);
  }
  Py_XDECREF(line);
  Py_XDECREF(out);
  Py_XDECREF(result);
  Py_DECREF(k);
  if (step) {
    PyObject* vd = PyObject_GenericGetDict(c->variant, nullptr);
    PyObject* steps = vd ? PyDict_GetItemWithError(vd, g.n_steps) : nullptr;  // borrowed
    if (!steps && !PyErr_Occurred()) PyErr_SetString(PyExc_RuntimeError, "compile: the variant has no steps");
    int ok = steps ? PyList_Append(steps, step) : -1;
    Py_XDECREF(vd);
    Py_DECREF(step);
    if (ok == 0) {
      ++c->recorded;
      return r;
    }
  }
  Py_DECREF(r);
  return nullptr;
}

PyObject* recording_function_call(PyObject* self, PyObject* const* args, size_t nargsf, PyObject* kwnames) {
  auto* w = reinterpret_cast<RecordingFunction*>(self);
  RecorderCore* c = g_active;
  if (c && c->plain) {
    if (c->depth || c->thread != PyThread_get_thread_ident())
      return PyObject_Vectorcall(w->fn, args, nargsf, kwnames);
    Py_INCREF(c);  // (the recording may end inside the call)
    PyObject* r = record(c, w, args, PyVectorcall_NARGS(nargsf), kwnames);
    Py_DECREF(c);
    return r;
  }
  return PyObject_Vectorcall(w->fallback, args, nargsf, kwnames);
}

void recording_function_dealloc(PyObject* self) {
  auto* w = reinterpret_cast<RecordingFunction*>(self);
  PyObject_GC_UnTrack(self);
  Py_CLEAR(w->fn);
  Py_CLEAR(w->name);
  Py_CLEAR(w->fallback);
  Py_TYPE(self)->tp_free(self);
}

int recording_function_traverse(PyObject* self, visitproc visit, void* arg) {
  auto* w = reinterpret_cast<RecordingFunction*>(self);
  Py_VISIT(w->fn);
  Py_VISIT(w->fallback);
  return 0;
}

int recording_function_clear(PyObject* self) {
  auto* w = reinterpret_cast<RecordingFunction*>(self);
  Py_CLEAR(w->fn);
  Py_CLEAR(w->fallback);
  return 0;
}

PyObject* recording_function_new(PyTypeObject* type, PyObject* args, PyObject* kwargs) {
  PyObject *fn, *name, *fallback;
  int is_property = 0, is_state = 0, python = 0, is_validate = 0;
  static const char* names[] = {"fn", "name", "fallback", "is_property", "is_state", "python", "is_validate",
                                nullptr};
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OUO|pppp:_RecordingFunction", const_cast<char**>(names), &fn,
                                   &name, &fallback, &is_property, &is_state, &python, &is_validate))
    return nullptr;
  if (!PyCallable_Check(fn) || !PyCallable_Check(fallback)) {
    PyErr_SetString(PyExc_TypeError, "_RecordingFunction(fn, name, fallback): fn and fallback must be callable");
    return nullptr;
  }
  auto* w = reinterpret_cast<RecordingFunction*>(type->tp_alloc(type, 0));
  if (!w) return nullptr;
  w->vectorcall = &recording_function_call;
  Py_INCREF(fn);
  Py_INCREF(name);
  Py_INCREF(fallback);
  w->fn = fn;
  w->name = name;
  w->fallback = fallback;
  w->is_property = (char)is_property;
  w->is_state = (char)is_state;
  w->python = (char)python;
  w->is_validate = (char)is_validate;
  return reinterpret_cast<PyObject*>(w);
}

PyObject* recording_function_wrapped(PyObject* self, void*) {
  PyObject* fn = reinterpret_cast<RecordingFunction*>(self)->fn;
  Py_INCREF(fn);
  return fn;
}

PyObject* recording_function_name(PyObject* self, void*) {
  return PyObject_GetAttrString(reinterpret_cast<RecordingFunction*>(self)->fallback, "__name__");
}

PyGetSetDef recording_function_getset[] = {
    {"__wrapped__", &recording_function_wrapped, nullptr, "the function it stands for", nullptr},
    {"__name__", &recording_function_name, nullptr, "the function's name", nullptr},
    {nullptr, nullptr, nullptr, nullptr, nullptr}};

PyTypeObject* recording_function_type() {
  static PyTypeObject type = [] {
    PyTypeObject t{PyVarObject_HEAD_INIT(nullptr, 0)};
    t.tp_name = "dyngrad._C._RecordingFunction";
    t.tp_basicsize = sizeof(RecordingFunction);
    t.tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL;
    t.tp_doc = "the recorder's stand-in for one _C function while a program records (Note [Recording in C++])";
    t.tp_new = &recording_function_new;
    t.tp_dealloc = &recording_function_dealloc;
    t.tp_traverse = &recording_function_traverse;
    t.tp_clear = &recording_function_clear;
    t.tp_call = &PyVectorcall_Call;
    t.tp_vectorcall_offset = offsetof(RecordingFunction, vectorcall);
    t.tp_getset = recording_function_getset;
    return t;
  }();
  return &type;
}

// ---- _RecorderCore ----
void core_clear_refs(RecorderCore* c) {
  Py_CLEAR(c->recorder);
  Py_CLEAR(c->variant);
  Py_CLEAR(c->slot_of);
  Py_CLEAR(c->keep);
  Py_CLEAR(c->arrays);
}

void core_dealloc(PyObject* self) {
  auto* c = reinterpret_cast<RecorderCore*>(self);
  if (g_active == c) g_active = nullptr;
  PyObject_GC_UnTrack(self);
  core_clear_refs(c);
  Py_TYPE(self)->tp_free(self);
}

int core_traverse(PyObject* self, visitproc visit, void* arg) {
  auto* c = reinterpret_cast<RecorderCore*>(self);
  Py_VISIT(c->recorder);
  Py_VISIT(c->variant);
  Py_VISIT(c->slot_of);
  Py_VISIT(c->keep);
  Py_VISIT(c->arrays);
  return 0;
}

int core_clear(PyObject* self) {
  auto* c = reinterpret_cast<RecorderCore*>(self);
  if (g_active == c) g_active = nullptr;
  core_clear_refs(c);
  return 0;
}

PyObject* core_new(PyTypeObject* type, PyObject* args, PyObject* kwargs) {
  PyObject *recorder, *variant, *slot_of, *keep;
  static const char* names[] = {"recorder", "variant", "slot_of", "keep", nullptr};
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OOO!O!:_RecorderCore", const_cast<char**>(names), &recorder,
                                   &variant, &PyDict_Type, &slot_of, &PyList_Type, &keep))
    return nullptr;
  if (!g_ready) {
    PyErr_SetString(PyExc_RuntimeError, "_RecorderCore: _recorder_setup has not run");
    return nullptr;
  }
  auto* c = reinterpret_cast<RecorderCore*>(type->tp_alloc(type, 0));
  if (!c) return nullptr;
  c->arrays = PyList_New(0);
  if (!c->arrays) {
    Py_DECREF(c);
    return nullptr;
  }
  Py_INCREF(recorder);
  Py_INCREF(variant);
  Py_INCREF(slot_of);
  Py_INCREF(keep);
  c->recorder = recorder;
  c->variant = variant;
  c->slot_of = slot_of;
  c->keep = keep;
  c->thread = PyThread_get_thread_ident();
  return reinterpret_cast<PyObject*>(c);
}

PyObject* core_activate(PyObject* self, PyObject*) {
  g_active = reinterpret_cast<RecorderCore*>(self);  // borrowed: the Python recorder holds it while its swap is in
  Py_RETURN_NONE;                                     // place, and dealloc/clear take it out
}

PyObject* core_deactivate(PyObject* self, PyObject*) {
  if (g_active == reinterpret_cast<RecorderCore*>(self)) g_active = nullptr;
  Py_RETURN_NONE;
}

PyObject* core_encode(PyObject* self, PyObject* obj) {
  bool h = false, p = true;
  return encode(reinterpret_cast<RecorderCore*>(self), obj, &h, &p);
}

PyObject* core_set_variant(PyObject* self, PyObject* variant) {
  auto* c = reinterpret_cast<RecorderCore*>(self);
  Py_INCREF(variant);
  Py_SETREF(c->variant, variant);
  Py_RETURN_NONE;
}

PyObject* core_drop(PyObject* self, PyObject*) {
  auto* c = reinterpret_cast<RecorderCore*>(self);
  if (g_active == c) g_active = nullptr;
  core_clear_refs(c);
  Py_RETURN_NONE;
}

// Recorder.plan_backward's (slot, tensor) pairs: `pairs` (the externals') extended by every other tensor the
// recorder keeps, first occurrence first, with its slot in the map (an object given a later slot has that one).
PyObject* core_tensor_pairs(PyObject* self, PyObject* pairs) {
  auto* c = reinterpret_cast<RecorderCore*>(self);
  if (!PyList_Check(pairs) || !c->keep) {
    PyErr_SetString(PyExc_TypeError, "tensor_pairs(pairs): a list of (slot, tensor), while recording");
    return nullptr;
  }
  PyObject* out = PyList_GetSlice(pairs, 0, PyList_GET_SIZE(pairs));
  if (!out) return nullptr;
  std::unordered_set<PyObject*> seen;
  for (Py_ssize_t k = 0; k < PyList_GET_SIZE(pairs); ++k) {
    PyObject* pair = PyList_GET_ITEM(pairs, k);
    if (PyTuple_Check(pair) && PyTuple_GET_SIZE(pair) == 2) seen.insert(PyTuple_GET_ITEM(pair, 1));
  }
  for (Py_ssize_t k = 0; k < PyList_GET_SIZE(c->keep); ++k) {
    PyObject* obj = PyList_GET_ITEM(c->keep, k);
    PyTypeObject* t = Py_TYPE(obj);
    if (!(t == g.tensor_type || PyType_IsSubtype(t, g.tensor_type)) || !seen.insert(obj).second) continue;
    PyObject* key = PyLong_FromVoidPtr(obj);
    PyObject* slot = key ? PyDict_GetItemWithError(c->slot_of, key) : nullptr;  // borrowed
    Py_XDECREF(key);
    if (!slot) {
      if (PyErr_Occurred()) {
        Py_DECREF(out);
        return nullptr;
      }
      continue;
    }
    PyObject* pair = PyTuple_Pack(2, slot, obj);
    if (!pair || PyList_Append(out, pair) < 0) {
      Py_XDECREF(pair);
      Py_DECREF(out);
      return nullptr;
    }
    Py_DECREF(pair);
  }
  return out;
}

PyMethodDef core_methods[] = {
    {"tensor_pairs", &core_tensor_pairs, METH_O, "Recorder.plan_backward's (slot, tensor) pairs, in C++"},
    {"activate", &core_activate, METH_NOARGS, "its _RecordingFunctions record into it (capture._Swap.__enter__)"},
    {"deactivate", &core_deactivate, METH_NOARGS, "they no longer do (capture._Swap.__exit__)"},
    {"encode", &core_encode, METH_O, "Recorder.encode(obj), in C++"},
    {"set_variant", &core_set_variant, METH_O, "the variant recorded into from now on"},
    {"drop", &core_drop, METH_NOARGS, "lets go of the recorder, its variant and maps (the recording has ended)"},
    {nullptr, nullptr, 0, nullptr}};

PyObject* core_get_arrays(PyObject* self, void*) {
  PyObject* a = reinterpret_cast<RecorderCore*>(self)->arrays;
  if (!a) Py_RETURN_NONE;
  Py_INCREF(a);
  return a;
}

PyObject* core_get_depth(PyObject* self, void*) { return PyLong_FromLong(reinterpret_cast<RecorderCore*>(self)->depth); }

int core_set_depth(PyObject* self, PyObject* value, void*) {
  if (!value) {
    PyErr_SetString(PyExc_AttributeError, "depth cannot be deleted");
    return -1;
  }
  long d = PyLong_AsLong(value);
  if (d == -1 && PyErr_Occurred()) return -1;
  reinterpret_cast<RecorderCore*>(self)->depth = d;
  return 0;
}

PyObject* core_get_plain(PyObject* self, void*) { return PyBool_FromLong(reinterpret_cast<RecorderCore*>(self)->plain); }

int core_set_plain(PyObject* self, PyObject* value, void*) {
  int b = value ? PyObject_IsTrue(value) : -1;
  if (b < 0) {
    if (!value) PyErr_SetString(PyExc_AttributeError, "plain cannot be deleted");
    return -1;
  }
  reinterpret_cast<RecorderCore*>(self)->plain = b;
  return 0;
}

PyObject* core_get_recorded(PyObject* self, void*) {
  return PyLong_FromLong(reinterpret_cast<RecorderCore*>(self)->recorded);
}

PyGetSetDef core_getset[] = {
    {"arrays", &core_get_arrays, nullptr, "the ArrayConstants this core made", nullptr},
    {"depth", &core_get_depth, &core_set_depth, "the recorder's depth (> 0 while a recorded call runs)", nullptr},
    {"plain", &core_get_plain, &core_set_plain, "true while a call is recorded here (not served, checked, verified)",
     nullptr},
    {"recorded", &core_get_recorded, nullptr, "steps recorded here", nullptr},
    {nullptr, nullptr, nullptr, nullptr, nullptr}};

PyTypeObject* core_type() {
  static PyTypeObject type = [] {
    PyTypeObject t{PyVarObject_HEAD_INIT(nullptr, 0)};
    t.tp_name = "dyngrad._C._RecorderCore";
    t.tp_basicsize = sizeof(RecorderCore);
    t.tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC;
    t.tp_doc = "the C++ state of one capture.Recorder (Note [Recording in C++])";
    t.tp_new = &core_new;
    t.tp_dealloc = &core_dealloc;
    t.tp_traverse = &core_traverse;
    t.tp_clear = &core_clear;
    t.tp_methods = core_methods;
    t.tp_getset = core_getset;
    return t;
  }();
  return &type;
}

PyObject* member(PyObject* type, const char* name) {
  PyObject* d = PyObject_GetAttrString(type, name);  // the member descriptor of a __slots__ field
  if (d && !Py_TYPE(d)->tp_descr_set) {
    PyErr_Format(PyExc_TypeError, "_recorder_setup: %s is not a __slots__ field", name);
    Py_CLEAR(d);
  }
  return d;
}

// ---- Note [Fast paths that record] ----
PyObject* make_step(PyObject* fn, PyObject* name, PyObject* a, PyObject* k, PyObject* result, PyObject* line,
                    PyObject* out, PyObject* native) {
  PyObject* values[9] = {fn, name, a, k, result, line, out, native, Py_None};
  return make_instance(g.step_type, g.step_fields, values, 9);
}

int append_step(RecorderCore* c, PyObject* step) {
  PyObject* vd = PyObject_GenericGetDict(c->variant, nullptr);
  PyObject* steps = vd ? PyDict_GetItemWithError(vd, g.n_steps) : nullptr;  // borrowed
  if (!steps && !PyErr_Occurred()) PyErr_SetString(PyExc_RuntimeError, "compile: the variant has no steps");
  int ok = steps ? PyList_Append(steps, step) : -1;
  Py_XDECREF(vd);
  if (ok == 0) ++c->recorded;
  return ok;
}

}  // namespace

bool fast_recording() {
  RecorderCore* c = g_active;
  return c && c->plain && !c->depth && g.bindings && c->thread == PyThread_get_thread_ident();
}

FastStep::~FastStep() {
  Py_XDECREF(args);
  Py_XDECREF(native);
  Py_XDECREF(core);
}

namespace {
// name as an interned str (cached by its address: the fast paths pass names that live as long as the module)
PyObject* name_object(const char* name) {
  static std::unordered_map<const char*, PyObject*> names;  // never released
  PyObject*& text = names[name];
  if (!text) text = PyUnicode_InternFromString(name);
  return text;
}
}  // namespace

int record_fast_known(const char* name) {
  PyObject* text = name_object(name);
  if (!text) return -1;
  if (PyDict_GetItemWithError(g.bindings, text)) return 1;
  return PyErr_Occurred() ? -1 : 0;
}

int record_fast_begin(const char* name, PyObject* const* args, Py_ssize_t n, FastStep& step, bool skip_first) {
  PyObject* text = name_object(name);
  if (!text) return -1;
  PyObject* fn = PyDict_GetItemWithError(g.bindings, text);  // borrowed
  if (!fn) return PyErr_Occurred() ? -1 : 0;
  RecorderCore* c = g_active;
  Encoded e;
  if (!encode_args(c, args, n, skip_first, false, e)) return -1;
  if (!e.plain) return 0;  // (tensors and numbers only: never)
  Py_INCREF(c);
  step.core = reinterpret_cast<PyObject*>(c);
  step.fn = fn;
  step.name = text;
  step.args = e.a;
  step.native = e.native;
  e.a = e.native = nullptr;
  return 1;
}

PyObject* record_fast_call(FastStep& step, PyObject* const* args, Py_ssize_t n) {
  auto* c = reinterpret_cast<RecorderCore*>(step.core);
  ++c->depth;
  PyObject* r = PyObject_Vectorcall(step.fn, args, n, nullptr);
  --c->depth;
  return r;
}

PyObject* recorded_target_check() {
  if (!g.loss_globals) return nullptr;
  PyObject* check = PyDict_GetItemString(g.loss_globals, "_check_target_range");  // borrowed
  return check && PyFunction_Check(check) ? check : nullptr;
}

PyObject* record_fast_end(FastStep& step, PyObject* r) {
  if (!r) return nullptr;
  auto* c = reinterpret_cast<RecorderCore*>(step.core);
  bool python = false;
  PyObject* result = bind_result(c, false, r, &python);
  PyObject* k = result ? PyDict_New() : nullptr;
  PyObject* step_object = nullptr;
  if (k) {
    const bool tensor = PyTuple_GET_ITEM(result, 0) == g.s_t;
    PyObject* line = tensor ? (Py_INCREF(Py_None), Py_None) : user_line();
    PyObject* out = tensor ? (Py_INCREF(PyTuple_GET_ITEM(result, 1)), PyTuple_GET_ITEM(result, 1)) : PyLong_FromLong(-1);
    if (line && out) step_object = make_step(step.fn, step.name, step.args, k, result, line, out, step.native);
    Py_XDECREF(line);
    Py_XDECREF(out);
  }
  Py_XDECREF(k);
  Py_XDECREF(result);
  if (!step_object || append_step(c, step_object) < 0) {
    Py_XDECREF(step_object);
    Py_DECREF(r);
    return nullptr;
  }
  Py_DECREF(step_object);
  return r;
}

void bind_capture_record(py::module_& m) {
  for (PyTypeObject* t : {recording_function_type(), core_type()})
    if (PyType_Ready(t) < 0) throw py::error_already_set();
  m.attr("_RecordingFunction") = py::reinterpret_borrow<py::object>(reinterpret_cast<PyObject*>(recording_function_type()));
  m.attr("_RecorderCore") = py::reinterpret_borrow<py::object>(reinterpret_cast<PyObject*>(core_type()));
  m.def("_recorder_setup", [](py::object slot, py::object seq, py::object array_constant, py::object step,
                              py::object tensor, py::object ndarray, py::tuple plain_types, py::object maker,
                              py::object classify, py::dict file_cache) {
    if (!PyType_Check(tensor.ptr()) || !PyType_Check(ndarray.ptr()) || !PyType_Check(slot.ptr()) ||
        !PyType_Check(seq.ptr()) || !PyType_Check(step.ptr()))
      throw py::type_error("_recorder_setup: Slot, Seq, Step, Tensor and ndarray must be classes");
    g.slot_type = slot.release().ptr();
    g.seq_type = seq.release().ptr();
    g.array_constant = array_constant.release().ptr();
    g.step_type = step.release().ptr();
    g.tensor_type = reinterpret_cast<PyTypeObject*>(tensor.release().ptr());
    g.ndarray_type = reinterpret_cast<PyTypeObject*>(ndarray.release().ptr());
    g.plain_types = plain_types.release().ptr();
    g.maker = maker.release().ptr();
    g.classify = classify.release().ptr();
    g.file_cache = file_cache.release().ptr();
    g.dict_type = reinterpret_cast<PyObject*>(&PyDict_Type);
    g.slot_i = member(g.slot_type, "i");
    g.seq_kind = member(g.seq_type, "kind");
    g.seq_items = member(g.seq_type, "items");
    const char* fields[9] = {"fn", "name", "args", "kwargs", "result", "line", "out", "native", "plan"};
    for (int k = 0; k < 9; ++k) g.step_fields[k] = member(g.step_type, fields[k]);
    if (!g.slot_i || !g.seq_kind || !g.seq_items) throw py::error_already_set();
    for (PyObject* f : g.step_fields)
      if (!f) throw py::error_already_set();
    g.s_t = PyUnicode_InternFromString("t");
    g.s_none = PyUnicode_InternFromString("none");
    g.s_s = PyUnicode_InternFromString("s");
    g.s_v = PyUnicode_InternFromString("v");
    g.s_seq = PyUnicode_InternFromString("seq");
    g.n_n_slots = PyUnicode_InternFromString("n_slots");
    g.n_externals = PyUnicode_InternFromString("externals");
    g.n_steps = PyUnicode_InternFromString("steps");
    g.n_record_step = PyUnicode_InternFromString("record_step");
    g.n_bind_result = PyUnicode_InternFromString("bind_result");
    for (PyObject* s : g.slots) Py_XDECREF(s);
    g.slots.clear();
    for (PyObject* s : g.tensor_results) Py_XDECREF(s);
    g.tensor_results.clear();
    g_ready = true;
  }, "capture.py's classes and helpers for the C++ recorder (Note [Recording in C++])");
  m.def("_recorder_set_bindings", [](py::object bindings, py::object loss_globals) {
    if ((!bindings.is_none() && !PyDict_CheckExact(bindings.ptr())) ||
        (!loss_globals.is_none() && !PyDict_Check(loss_globals.ptr())))
      throw py::type_error("_recorder_set_bindings: a dict name -> function (or None), and a module's globals (or None)");
    PyObject* old = g.bindings;
    g.bindings = bindings.is_none() ? nullptr : bindings.release().ptr();
    Py_XDECREF(old);
    old = g.loss_globals;
    g.loss_globals = loss_globals.is_none() ? nullptr : loss_globals.release().ptr();
    Py_XDECREF(old);
  }, py::arg("bindings"), py::arg("loss_globals"),
     "the names whose own function the recorder's swap keeps, and the loss module's globals (Note [Fast paths that "
     "record])");
  m.def("_recorder_user_line", [] {
    if (!g_ready) throw py::value_error("_recorder_user_line: _recorder_setup has not run");
    PyObject* line = user_line();
    if (!line) throw py::error_already_set();
    return py::reinterpret_steal<py::object>(line);
  }, "capture.user_line() in C++: 'file:line' of the innermost frame outside the dyngrad package");
}

}  // namespace dyngrad
