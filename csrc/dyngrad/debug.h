// debug.h: what the engine records to explain itself: the Python line that created each node, anomaly mode, and
// the registry behind the graph-growth warning. Mirrored by python/dyngrad/reference/debug.py.
//
// Note [Call sites]: every OpNode (and custom-Function node) remembers the user's Python line that created it, so
// that errors raised later in backward ("backward twice", "saved tensor modified") can say where the node came
// from. The capture has to cost little more than nothing, since it runs once per op: it keeps an owned reference
// to the frame's code object and the offset of the current instruction, and turns them into "file:line" only
// when someone asks (an error, node.call_site). Frames inside the dyngrad package itself (nn layers,
// functional helpers) are skipped, so a Linear layer's node points at the user's `self.fc(x)` line, not at
// linear.py. Switch it off with dyngrad.autograd.set_record_call_sites(False).
//
// Note [Anomaly mode]: with anomaly mode on, each node also keeps the full formatted Python stack of its forward
// call, and the engine checks every gradient a node returns for NaN/Inf, raising an error that names the node,
// its call site and that stack. Slow, as in torch: a debugging tool.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

struct _object;  // PyObject, without including Python.h in every file

namespace dyngrad {

struct Node;
struct TensorImpl;

struct CallSite {
  _object* code = nullptr;       // owned PyCodeObject* of the user's frame, or null if none was recorded
  int lasti = -1;                // byte offset of the instruction that was running in that frame
  int line = -1;                 // resolved line (lazily; eagerly on Python < 3.11)
  _object* traceback = nullptr;  // owned list of str (traceback.format_stack()), anomaly mode only

  CallSite() = default;
  CallSite(const CallSite&) = delete;
  CallSite& operator=(const CallSite&) = delete;
  ~CallSite();

  bool empty() const { return code == nullptr; }
  void capture();                         // records the innermost user frame (needs the GIL; no-op without it)
  std::string file() const;               // "" if none
  int lineno();                           // -1 if none
  std::string function() const;           // the code object's name
  std::string describe();                 // "path/model.py:42", or "" if none
};

// ---- switches (process-wide; read on every op, so plain globals) ----
extern bool g_record_call_sites;  // default on (Note [Call sites])
extern bool g_anomaly_mode;       // default off (Note [Anomaly mode])
extern bool g_track_nodes;        // default off: the graph-growth registry (set with set_track_nodes)
// Frames whose file starts with `dir` are dyngrad's own, except those under `user_dir` (written as user code).
void set_skip_dir(const std::string& dir, const std::string& user_dir, const std::string& api_dir);

// Called by every new OpNode / custom-Function node: call site, anomaly stack, growth registry.
void note_node_created(Node& node);
// Called by ~Node for a node that note_node_created put in the registry.
void note_node_destroyed(Node& node);

// " (MulBackward was created at model.py:42)", plus the forward stack in anomaly mode; "" if nothing recorded.
std::string created_at(Node& node);

// Anomaly mode: raises if a gradient returned by `node` (one per input) holds NaN or Inf.
void check_gradients_finite(Node& node, const std::vector<std::shared_ptr<TensorImpl>>& grads);

// ---- the graph-growth registry (dyngrad.autograd.warn_graph_growth) ----
// A "step" is one backward() call: the engine calls note_backward() at the start of each, which starts a new step
// and runs the observer the bindings installed (a Python callable; its exceptions propagate out of backward()).
extern std::function<void()> g_backward_observer;
void note_backward();
void set_track_nodes(bool on);  // off also empties the registry
int64_t tracked_node_count();
// Live tracked nodes created in a later step than a (non-leaf) node they point to: what keeps old graphs alive.
std::vector<std::shared_ptr<Node>> bridging_nodes();

}  // namespace dyngrad
