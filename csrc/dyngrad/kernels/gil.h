// gil.h: releases the GIL around long kernels so other Python threads run meanwhile (only if this thread holds it).
#pragma once
#include <Python.h>

namespace dyngrad {

struct GilRelease {
  PyThreadState* state = nullptr;
  explicit GilRelease(bool worth_it) {
    if (worth_it && Py_IsInitialized() && PyGILState_Check()) state = PyEval_SaveThread();
  }
  ~GilRelease() {
    if (state) PyEval_RestoreThread(state);
  }
  GilRelease(const GilRelease&) = delete;
  GilRelease& operator=(const GilRelease&) = delete;
};

}  // namespace dyngrad
