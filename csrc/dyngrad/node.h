// node.h: the recorded graph. A Node is the backward of one forward call (grad_fn); its next_edges point at the
// nodes that produced its inputs. Leaves end in AccumulateGrad sinks.
//
// Note [Saved tensor versions]: a SavedTensor records the storage version when it is saved. Unpacking it in
// backward checks that version again, so an in-place write between forward and backward is an error that names
// the node and both versions (ERR_SAVED_MODIFIED) instead of a silently wrong gradient.
//
// Note [Saving an output]: a node that saves its own output (exp, tanh, sigmoid, softmax...) must not hold that
// tensor itself: the tensor holds the node as grad_fn, which would be a cycle. It keeps a history-free alias and,
// when unpacked, re-attaches this node as grad_fn (so create_graph differentiates through it correctly).
//
// Note [Releasing the graph]: after a node runs in backward without retain_graph, it drops its saved tensors and
// marks itself released; running it again raises ERR_BACKWARD_TWICE.
//
// Note [Hook results]: a tensor hook or node pre-hook that returns a gradient must return one of the shape and dtype
// it was given (torch's "hook has changed the type of value"): the engine would otherwise hand a leaf an int64 or
// float64 .grad, or a formula a gradient of the wrong shape. Checked where the hook is called (bindings).
//
// Note [Saved tensor hooks]: while torch.autograd.graph.saved_tensors_hooks(pack, unpack) is active on a thread,
// every SavedTensor::save on that thread hands the tensor to the pack hook and keeps only what it returned (a
// PackedSaved); unpack() calls the unpack hook to get the tensor back. The hooks are Python callables, so the
// interface lives here and the implementation in the bindings (autograd_bind.cpp). A packed tensor is not version
// checked (the hooks may have copied it anywhere, as in torch) and is invisible to the cycle collector. The pack
// hook runs with grad mode off, as torch's: the ops it runs record no node, so they save (and pack) nothing; before,
// a hook using an op that saves packed again inside itself (RecursionError). A hook that turns grad mode back on
// recurses, as in torch.
//
// Note [Iterative graph destruction]: a chain of a million nodes must not be destroyed by a million nested
// destructors. Dying nodes hand their edges and saved tensors' histories to a thread-local queue that the
// outermost destructor drains in a loop (a saved tensor's destructor queues its grad_fn, so a node's saved fields,
// whatever its op, need no code of their own here).
#pragma once
#include <algorithm>
#include <atomic>
#include <functional>
#include <cstdint>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "debug.h"
#include "tensor.h"

namespace dyngrad {

enum class OpKind : uint16_t {
#define DG_OP(name, display, saves, signature, hot) name,
#include "ops.def"
  COUNT
};
const char* op_name(OpKind k);          // "mul"
const char* op_display_name(OpKind k);  // "Mul"
// The field names of the saved struct op k's ops.def line names, in declared order (saved.h): _C.op_saved_fields()
std::vector<const char*> op_saved_fields(OpKind k);

// A node pre-hook: gets the node's incoming gradients, one per output, and may replace them in place.
using NodePreHook = std::function<void(std::vector<Tensor>& grads)>;

struct Edge {
  std::shared_ptr<Node> fn;
  uint32_t input_nr = 0;  // which of fn's outputs this gradient is for
  bool valid() const { return fn != nullptr; }
};

// What the gradient flowing to one forward input must look like: the engine sums and casts to it.
struct InputMeta {
  Shape shape;
  DType dtype;
};

// What a pack hook returned (Note [Saved tensor hooks]); unpack() calls the unpack hook on it.
struct PackedSaved {
  virtual ~PackedSaved() = default;
  virtual Tensor unpack() const = 0;
};
using PackHook = std::function<std::shared_ptr<PackedSaved>(const Tensor&)>;
// The pack hook of this thread (null: none). Set by saved_tensors_hooks in Python.
void set_pack_hook(std::shared_ptr<PackHook> hook);
const std::shared_ptr<PackHook>& pack_hook();

struct SavedTensor {
  Tensor data;  // null when nothing saved (or released) or when packed
  std::shared_ptr<PackedSaved> packed;  // Note [Saved tensor hooks]
  uint64_t saved_version = 0;
  bool is_output = false;
  bool was_saved = false;

  void save(const Tensor& t, bool is_output_of_node);
  // Checks the version (Note [Saved tensor versions]) and the release (Note [Releasing the graph]); null if
  // nothing was saved.
  Tensor unpack(Node& owner) const;
  void release() {
    data.reset();
    packed.reset();
  }
};

// One field of what a node saved, by name (Note [Named saved state] in saved.h): a tensor, or a value (None for
// an absent optional). For introspection (Node._saved_fields() in Python) and tests; formulas read fields
// directly.
using SavedValue = std::variant<std::monostate, bool, int64_t, double, Dims>;
struct SavedField {
  const char* name;
  const SavedTensor* tensor;  // null for a non-tensor field
  SavedValue value;
};

struct Node : std::enable_shared_from_this<Node> {
  std::vector<Edge> next_edges;       // one per forward input
  std::vector<InputMeta> input_meta;  // one per forward input
  uint64_t sequence_nr = 0;
  bool released = false;
  bool tracked = false;  // in the graph-growth registry (debug.h)
  bool cycle_suspect = false;  // in the registry of Note [Cycles through C++] (cycles.h)
  CallSite call_site;    // the Python line that created it (Note [Call sites] in debug.h)
  // Note [Display names]: a composite op of the shared layer (mse_loss, addcmul, `2 - x`) renames the node of its
  // last primitive after the op the user called (MseLossBackward); empty: the node's own name. OpNode and the
  // custom Function node read it in name(), so errors and repr show the same name.
  std::string display_name;
  // Tensor hooks of non-leaf outputs and retain_grad(), keyed by output_nr: run on the summed incoming gradient.
  std::vector<std::pair<uint32_t, std::pair<int64_t, GradHook>>> pre_hooks;
  std::vector<std::pair<uint32_t, std::weak_ptr<TensorImpl>>> retained;
  // grad_fn.register_prehook(fn): sees every output's gradient (null where none arrived) and may replace them; runs
  // after the tensor hooks and retain_grad, as in torch. Note [Hooks that change hooks] in engine.h.
  std::vector<std::pair<int64_t, NodePreHook>> node_pre_hooks;

  // Backward bookkeeping, used only by the run_backward that owns the node (Note [One backward at a time]).
  std::atomic<uint64_t> task_owner{0};
  int64_t deps = 0;
  // Gradients summed as they arrive, one slot per output: the first inline (most nodes have one output), the
  // rest in a vector.
  Tensor pending0;
  std::vector<Tensor> pending_rest;
  Tensor& pending_slot(uint32_t i) {
    if (i == 0) return pending0;
    if (pending_rest.size() < i) pending_rest.resize(i);
    return pending_rest[i - 1];
  }

  Node();
  virtual ~Node();
  virtual std::string name() const = 0;
  virtual uint32_t num_outputs() const { return 1; }
  // grads: one per output (may be null for an output that received none). Returns one gradient per input
  // (null where the input needs none).
  virtual std::vector<Tensor> apply(std::vector<Tensor>& grads) = 0;
  // Note [Gradients written in place]: a node may offer to write the gradient of its input into the pending
  // buffer of the node it flows to, instead of returning it (the same numbers, without a full-size temporary).
  // True if it did; the engine then hands nothing on. Asked only when the backward builds no graph (no
  // create_graph, no anomaly mode). Only a slice offers (derivatives.cpp, Note [Slice gradients in place]).
  virtual bool apply_in_place(std::vector<Tensor>& grads) { return false; }
  virtual void release_saved() { released = true; }
  // The tensors the forward saved (their data is null once released), and every saved field by name.
  virtual std::vector<const SavedTensor*> saved_tensors() const { return {}; }
  virtual std::vector<SavedField> saved_fields() const { return {}; }
  // The Python objects this node holds (a custom Function's ctx), for the cycle collector (Note [Cycles through
  // C++]); it drops them when the node is garbage. `visit` gets each as a PyObject*.
  virtual void visit_python_objects(void (*visit)(void* object, void* arg), void* arg) const {}
  virtual void clear_python_objects() {}
  bool needs_input_grad(size_t i) const { return i < next_edges.size() && next_edges[i].valid(); }
};

// The node of a primitive op in ops.def: its kind picks its name and formula (derivatives.cpp). What it saves
// is in the derived SavedOpNode<S> of saved.h, S being the struct of named fields its ops.def line names.
struct OpNode : Node {
  const OpKind kind;
  uint32_t outputs = 1;  // layer_norm_backward and rnn_layer_backward have several (record_outputs, ops_common.h)

  std::string name() const override;
  uint32_t num_outputs() const override { return outputs; }
  std::vector<Tensor> apply(std::vector<Tensor>& grads) override;
  bool apply_in_place(std::vector<Tensor>& grads) override;

 protected:
  explicit OpNode(OpKind k) : kind(k) { note_node_created(*this); }
};

// The sink of a leaf that requires grad: adds the gradient into .grad (the leaf's hooks ran in the engine: Note
// [Hooks that change hooks]), then runs the leaf's post-accumulate-grad hooks.
struct AccumulateGrad final : Node {
  Tensor variable;
  explicit AccumulateGrad(Tensor v);
  std::string name() const override { return "AccumulateGrad"; }
  std::vector<Tensor> apply(std::vector<Tensor>& grads) override;
};

// What AccumulateGrad::apply does with a gradient that arrived (not null): into variable's .grad, then its
// post-accumulate-grad hooks. Also the leaves' step of a planned backward (bindings/replay_backward.cpp).
void accumulate_grad(const Tensor& variable, Tensor g);

// The post-accumulate-grad hooks of leaf `variable`, after its .grad was updated.
void run_post_accumulate_hooks(const Tensor& variable);

// ---- recording history ----
bool grad_enabled();
// True if grad mode is on and any input requires grad.
bool any_requires_grad(std::initializer_list<const Tensor*> inputs);
bool any_requires_grad(const std::vector<Tensor>& inputs);
// The edge a gradient for `t` flows into: (grad_fn, output_nr), its AccumulateGrad, or invalid.
Edge gradient_edge(const Tensor& t);
std::shared_ptr<Node> grad_accumulator(const Tensor& t);
// Connects node's next_edges/input_meta to inputs (null entries are non-differentiable inputs).
void collect_next_edges(Node& node, const std::vector<const Tensor*>& inputs);
// Makes `out` the output_nr-th output of node.
void set_history(const Tensor& out, std::shared_ptr<Node> node, uint32_t output_nr = 0);

// Note [Iterative graph destruction]
void release_node_iteratively(std::shared_ptr<Node>&& node);

// Debug counters (issue: leaks): live nodes and live storages.
int64_t live_node_count();
// The sequence_nr the next node will get: every node made after this call has one at least as large.
uint64_t next_sequence_nr();

}  // namespace dyngrad
