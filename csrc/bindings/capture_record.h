// capture_record.h: what the fast paths need of the C++ recorder (Note [Recording in C++], capture_record.cpp).
#pragma once
#include <Python.h>

namespace dyngrad {

// Note [Fast paths that record]: true while a plain recording runs on this thread outside any recorded call: a
// fast path whose core calls are exactly the steps its Python definition issues (the kinds of Note [Verified ops
// in the fast paths]) may then run them itself and record each as the step the Python definition would record.
bool fast_recording();

// One step recorded by a fast path: record_fast_begin encodes the arguments as the recorder would (its tensors'
// slots, an unknown one an external), record_fast_end binds the result the fast path computed and appends the
// step. begin returns 1, 0 when the step cannot be recorded here (the recorded surface's `name` is not the
// engine's own binding: a monkeypatch; no error set), or -1 with a Python error set.
struct FastStep {
  PyObject* core = nullptr;  // the recorder's core (a reference), while a step is under way
  PyObject* fn = nullptr;    // borrowed: the binding the step names
  PyObject* name = nullptr;  // borrowed
  PyObject* args = nullptr;  // the argument template
  PyObject* native = nullptr;
  ~FastStep();
};
// 1 when `name` can be recorded here (record_fast_begin would not return 0), 0 when not, -1 on an error.
int record_fast_known(const char* name);
// skip_first: the first argument need not be plain data (bridge.validate's check).
int record_fast_begin(const char* name, PyObject* const* args, Py_ssize_t n, FastStep& step, bool skip_first = false);
// Calls the step's own function with args, as a recorded call runs (its nested calls are not steps).
PyObject* record_fast_call(FastStep& step, PyObject* const* args, Py_ssize_t n);
// The shared layer's current target check of cross_entropy (loss._check_target_range), borrowed, or null.
PyObject* recorded_target_check();
// result: a new reference (or null: the op failed, nothing is recorded); returns it, or null on an error.
PyObject* record_fast_end(FastStep& step, PyObject* result);

}  // namespace dyngrad
