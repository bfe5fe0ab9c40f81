// debug.cpp: call sites, anomaly mode and the graph-growth registry (see the Notes in debug.h).
#include "debug.h"

#include <Python.h>
#include <frameobject.h>

#include <cmath>
#include <cstring>
#include <mutex>
#include <unordered_map>

#include "check.h"
#include "node.h"

namespace dyngrad {

bool g_record_call_sites = true;
bool g_anomaly_mode = false;
bool g_track_nodes = false;
std::function<void()> g_backward_observer;

namespace {

// Holds the GIL for the scope if this thread does not hold it already (errors are built with it held; node
// destructors normally run with it held too).
struct GilHold {
  bool acquired = false;
  PyGILState_STATE state{};
  GilHold() {
    if (!PyGILState_Check()) {
      state = PyGILState_Ensure();
      acquired = true;
    }
  }
  ~GilHold() {
    if (acquired) PyGILState_Release(state);
  }
};

// ---- which files are dyngrad's own (Note [Call sites]) ----
std::string g_skip_dir;
std::string g_user_dir;  // inside g_skip_dir but written as user code (the benchmark workloads)
std::string g_api_dir;   // the shared torch-facing layer: anomaly mode's stack ends before its frames

// A small direct-mapped cache: filename object -> "inside dyngrad?". Each entry holds a reference to its filename,
// so a cached pointer can never be reused by another string.
struct FileVerdict {
  PyObject* filename = nullptr;
  bool internal = false;
};
constexpr size_t kFileCacheSize = 64;
FileVerdict g_file_cache[kFileCacheSize];

bool starts_with(const char* s, Py_ssize_t n, const std::string& prefix) {
  return (size_t)n >= prefix.size() && std::memcmp(s, prefix.data(), prefix.size()) == 0;
}

bool is_internal_file(PyObject* filename) {
  if (g_skip_dir.empty() || filename == nullptr) return false;
  FileVerdict& slot = g_file_cache[((uintptr_t)filename >> 4) % kFileCacheSize];
  if (slot.filename == filename) return slot.internal;
  Py_ssize_t n = 0;
  const char* s = PyUnicode_AsUTF8AndSize(filename, &n);
  bool internal = false;
  if (s == nullptr)
    PyErr_Clear();
  else
    internal = starts_with(s, n, g_skip_dir) && (g_user_dir.empty() || !starts_with(s, n, g_user_dir));
  Py_INCREF(filename);
  Py_XDECREF(slot.filename);
  slot.filename = filename;
  slot.internal = internal;
  return internal;
}

// A deep stack of dyngrad frames (a model built from nested library modules) is walked this far at most; user
// code is rarely more than four or five dyngrad frames away from an op.
constexpr int kMaxFramesWalked = 16;

// traceback.format_stack(f), for anomaly mode, where f is the innermost frame outside the shared API layer (so
// the stack ends at the line that called the op, as the reference engine's does): a new list of str, or null.
PyObject* format_stack() {
  static PyObject* fn = nullptr;  // kept for the life of the process
  if (fn == nullptr) {
    PyObject* module = PyImport_ImportModule("traceback");
    if (module == nullptr) {
      PyErr_Clear();
      return nullptr;
    }
    fn = PyObject_GetAttrString(module, "format_stack");
    Py_DECREF(module);
    if (fn == nullptr) {
      PyErr_Clear();
      return nullptr;
    }
  }
  PyFrameObject* frame = PyEval_GetFrame();  // borrowed
  Py_XINCREF(frame);
  while (frame != nullptr && !g_api_dir.empty()) {
    PyCodeObject* c = PyFrame_GetCode(frame);  // new reference
    const char* name = PyUnicode_AsUTF8(c->co_filename);
    bool in_api = name != nullptr && std::strncmp(name, g_api_dir.c_str(), g_api_dir.size()) == 0;
    Py_DECREF(c);
    if (name == nullptr) PyErr_Clear();
    if (!in_api) break;
    PyFrameObject* back = PyFrame_GetBack(frame);  // new reference
    if (back == nullptr) break;
    Py_DECREF(frame);
    frame = back;
  }
  PyObject* lines = frame != nullptr ? PyObject_CallFunctionObjArgs(fn, (PyObject*)frame, nullptr)
                                     : PyObject_CallObject(fn, nullptr);
  Py_XDECREF(frame);
  if (lines == nullptr) PyErr_Clear();
  return lines;
}

std::string join_traceback(PyObject* lines) {
  std::string out;
  Py_ssize_t n = PyList_Check(lines) ? PyList_GET_SIZE(lines) : 0;
  for (Py_ssize_t i = 0; i < n; ++i) {
    const char* s = PyUnicode_AsUTF8(PyList_GET_ITEM(lines, i));
    if (s == nullptr) {
      PyErr_Clear();
      continue;
    }
    out += s;
  }
  return out;
}

// ---- the graph-growth registry ----
std::mutex g_registry_mutex;
std::unordered_map<Node*, uint64_t> g_registry;  // tracked live node -> the step it was created in
uint64_t g_step = 0;

}  // namespace

void set_skip_dir(const std::string& dir, const std::string& user_dir, const std::string& api_dir) {
  g_skip_dir = dir;
  g_user_dir = user_dir;
  g_api_dir = api_dir;
  for (FileVerdict& slot : g_file_cache) {
    Py_XDECREF(slot.filename);
    slot = FileVerdict{};
  }
}

// ---- CallSite ----
CallSite::~CallSite() {
  if ((code == nullptr && traceback == nullptr) || !Py_IsInitialized()) return;  // at exit: let it go
  GilHold gil;
  Py_XDECREF(code);
  Py_XDECREF(traceback);
}

void CallSite::capture() {
  if (!PyGILState_Check()) return;  // an op run from a thread without the GIL has no Python caller to record
  if (g_record_call_sites) {
    PyFrameObject* frame = PyEval_GetFrame();  // borrowed
    Py_XINCREF(frame);
    PyCodeObject* chosen = nullptr;
    for (int depth = 0; frame != nullptr && depth < kMaxFramesWalked; ++depth) {
      PyCodeObject* c = PyFrame_GetCode(frame);  // new reference
      bool user = !is_internal_file(c->co_filename);
      if (user || chosen == nullptr) {  // the first user frame, else the innermost frame
        Py_XDECREF(chosen);
        chosen = c;
#if PY_VERSION_HEX >= 0x030B0000
        lasti = PyFrame_GetLasti(frame);
#else
        line = PyFrame_GetLineNumber(frame);
#endif
      } else {
        Py_DECREF(c);
      }
      if (user) break;
      PyFrameObject* back = PyFrame_GetBack(frame);  // new reference
      Py_DECREF(frame);
      frame = back;
    }
    Py_XDECREF(frame);
    code = (PyObject*)chosen;
  }
  if (g_anomaly_mode) traceback = format_stack();
}

std::string CallSite::file() const {
  if (code == nullptr) return "";
  GilHold gil;
  const char* s = PyUnicode_AsUTF8(((PyCodeObject*)code)->co_filename);
  if (s == nullptr) {
    PyErr_Clear();
    return "";
  }
  return s;
}

int CallSite::lineno() {
  if (code == nullptr) return -1;
#if PY_VERSION_HEX >= 0x030B0000
  if (line < 0 && lasti >= 0) {
    GilHold gil;
    line = PyCode_Addr2Line((PyCodeObject*)code, lasti);
  }
#endif
  return line;
}

std::string CallSite::function() const {
  if (code == nullptr) return "";
  GilHold gil;
#if PY_VERSION_HEX >= 0x030B0000
  PyObject* name = ((PyCodeObject*)code)->co_qualname;
#else
  PyObject* name = ((PyCodeObject*)code)->co_name;
#endif
  const char* s = PyUnicode_AsUTF8(name);
  if (s == nullptr) {
    PyErr_Clear();
    return "";
  }
  return s;
}

std::string CallSite::describe() {
  if (code == nullptr) return "";
  return str_cat(file(), ":", lineno());
}

// ---- nodes ----
void note_node_created(Node& node) {
  if (g_record_call_sites || g_anomaly_mode) node.call_site.capture();
  if (g_track_nodes) {
    std::lock_guard<std::mutex> lock(g_registry_mutex);
    g_registry.emplace(&node, g_step);
    node.tracked = true;
  }
}

void note_node_destroyed(Node& node) {
  std::lock_guard<std::mutex> lock(g_registry_mutex);
  g_registry.erase(&node);
}

std::string created_at(Node& node) {
  std::string where = node.call_site.describe();
  std::string out = where.empty() ? "" : str_cat(" (", node.name(), " was created at ", where, ")");
  if (node.call_site.traceback != nullptr) {
    GilHold gil;
    out += str_cat("\nTraceback of the forward call that created ", node.name(), " (recorded by anomaly mode):\n",
                   join_traceback(node.call_site.traceback));
  }
  return out;
}

// ---- anomaly mode ----
namespace {
template <typename T>
void count_non_finite(const TensorImpl& g, int64_t& nans, int64_t& infs) {
  const T* p = g.data<T>();
  for (int64_t i = 0; i < g.numel; ++i) {
    if (std::isnan(p[i])) ++nans;
    else if (std::isinf(p[i])) ++infs;
  }
}

// a complex element is NaN if either part is, else Inf if either part is (numpy's isnan/isinf, the reference's)
template <typename C>
void count_non_finite_complex(const TensorImpl& g, int64_t& nans, int64_t& infs) {
  const C* p = g.data<C>();
  for (int64_t i = 0; i < g.numel; ++i) {
    if (std::isnan(p[i].real()) || std::isnan(p[i].imag())) ++nans;
    else if (std::isinf(p[i].real()) || std::isinf(p[i].imag())) ++infs;
  }
}
}  // namespace

void check_gradients_finite(Node& node, const std::vector<Tensor>& grads) {
  for (size_t i = 0; i < grads.size(); ++i) {
    const Tensor& g = grads[i];
    if (!g || !(is_floating(g->dtype) || is_complex(g->dtype))) continue;
    Tensor c = g->is_contiguous() ? g : contiguous_copy(g, g->dtype);
    int64_t nans = 0, infs = 0;
    if (is_complex(c->dtype)) {
      DG_DISPATCH_COMPLEX(c->dtype, C, count_non_finite_complex<C>(*c, nans, infs));
    } else if (c->dtype == DType::Float64) {
      count_non_finite<double>(*c, nans, infs);
    } else {
      count_non_finite<float>(*c, nans, infs);
    }
    if (nans == 0 && infs == 0) continue;
    std::string where = node.call_site.describe();
    std::string what = nans > 0 ? (infs > 0 ? "NaN and Inf" : "NaN") : "Inf";
    std::string msg = str_cat("anomaly detection: ", node.name(), " returned a gradient containing ", what,
                              " for its input ", i, " (shape ", shape_str(g->shape), ": ", nans, " NaN, ", infs,
                              " Inf of ", g->numel, " values).");
    if (!where.empty()) msg += str_cat(" ", node.name(), " was created at ", where, ".");
    if (node.call_site.traceback != nullptr) {
      GilHold gil;
      msg += str_cat("\nTraceback of the forward call that created ", node.name(), " (recorded by anomaly mode):\n",
                     join_traceback(node.call_site.traceback));
    }
    throw RuntimeError(msg);
  }
}

// ---- the graph-growth registry ----
void note_backward() {
  {
    std::lock_guard<std::mutex> lock(g_registry_mutex);
    ++g_step;
  }
  if (g_backward_observer) g_backward_observer();
}

int64_t tracked_node_count() {
  std::lock_guard<std::mutex> lock(g_registry_mutex);
  return (int64_t)g_registry.size();
}

std::vector<std::shared_ptr<Node>> bridging_nodes() {
  std::vector<std::shared_ptr<Node>> out;
  std::lock_guard<std::mutex> lock(g_registry_mutex);
  for (auto& [node, step] : g_registry) {
    for (const Edge& e : node->next_edges) {
      if (!e.fn) continue;
      auto it = g_registry.find(e.fn.get());  // leaves' AccumulateGrad sinks are never registered
      if (it == g_registry.end() || it->second >= step) continue;
      if (auto alive = node->weak_from_this().lock()) out.push_back(std::move(alive));
      break;
    }
  }
  return out;
}

void set_track_nodes(bool on) {
  std::lock_guard<std::mutex> lock(g_registry_mutex);
  g_track_nodes = on;
  if (!on) g_registry.clear();
}

}  // namespace dyngrad
