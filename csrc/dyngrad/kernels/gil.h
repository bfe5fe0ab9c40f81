// gil.h: releases the GIL around long kernels so other Python threads run meanwhile (only if this thread holds it).
//
// Note [Daemon threads at exit]: when the interpreter exits while a daemon thread is inside a kernel, that thread
// must never run Python again. CPython (before 3.14) ends a thread that takes the GIL back during finalization with
// pthread_exit, which unwinds its C++ stack by a "forced unwind" exception; unwinding out of a noexcept destructor
// (a destructor's default) calls std::terminate: "terminate called without an active exception". So the destructor
// below parks such a thread for good once finalization has begun (the process is ending and nothing waits for it,
// which is what CPython 3.14 itself does) instead of taking the GIL back. The main thread, which runs the
// finalization (and may run kernels from __del__ methods meanwhile), takes it back as usual. The destructor is
// noexcept(false) too, so that a thread told to exit while it already waits for the GIL unwinds cleanly (the
// bindings' catch-alls rethrow abi::__forced_unwind).
#pragma once
#include <Python.h>
#include <pythread.h>
#include <unistd.h>

namespace dyngrad {

// threading.main_thread().ident, recorded when dyngrad._C is imported (module.cpp).
inline unsigned long& main_thread_ident() {
  static unsigned long ident = 0;
  return ident;
}

inline bool must_not_return_to_python() {
#if PY_VERSION_HEX >= 0x030D0000
  bool finalizing = Py_IsFinalizing();
#else
  bool finalizing = _Py_IsFinalizing();
#endif
  return finalizing && PyThread_get_thread_ident() != main_thread_ident();
}

// A deleter that drops a Python reference (a numpy array's owner, a saved-tensor hook's packed value) may run on
// a kernel or daemon thread; once finalization has begun such a thread must not take the GIL (CPython would end it
// by an unwind that cannot cross the deleter: std::terminate), so it leaks the reference instead (Note [Daemon
// threads at exit]).
inline bool may_take_gil() { return Py_IsInitialized() && !must_not_return_to_python(); }

struct GilRelease {
  PyThreadState* state = nullptr;
  explicit GilRelease(bool worth_it) {
    if (worth_it && Py_IsInitialized() && PyGILState_Check()) state = PyEval_SaveThread();
  }
  ~GilRelease() noexcept(false) {
    if (!state) return;
    while (must_not_return_to_python()) pause();  // Note [Daemon threads at exit]: never returns to Python
    PyEval_RestoreThread(state);
  }
  GilRelease(const GilRelease&) = delete;
  GilRelease& operator=(const GilRelease&) = delete;
};

}  // namespace dyngrad
