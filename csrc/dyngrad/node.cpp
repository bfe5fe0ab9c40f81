// node.cpp: saving tensors, recording history, leaf accumulation and iterative graph destruction.
#include "node.h"

#include <atomic>

#include "cycles.h"
#include "derivatives.h"
#include "errors.h"
#include "grad_mode.h"
#include "ops.h"
#include "saved.h"

namespace dyngrad {

// ---- op names, generated from ops.def ----
static const char* kOpNames[] = {
#define DG_OP(name, display, saves, signature, hot) #name,
#include "ops.def"
};
static const char* kOpDisplayNames[] = {
#define DG_OP(name, display, saves, signature, hot) #display,
#include "ops.def"
};
const char* op_name(OpKind k) { return kOpNames[(int)k]; }
const char* op_display_name(OpKind k) { return kOpDisplayNames[(int)k]; }

// ---- saved field names, generated from ops.def and saved.h ----
template <class S>
static std::vector<const char*> saved_field_names() {
  std::vector<const char*> names;
  typename S::Stored().each([&](const char* name, const auto&) { names.push_back(name); });
  return names;
}
std::vector<const char*> op_saved_fields(OpKind k) {
  using Names = std::vector<const char*> (*)();
  static const Names kNames[] = {
#define DG_OP(name, display, saves, signature, hot) &saved_field_names<saves>,
#include "ops.def"
  };
  return kNames[(int)k]();
}

// ---- grad mode ----
// initial-exec TLS: one instruction per access instead of a __tls_get_addr call (a few bytes of static TLS).
static thread_local bool tl_grad_enabled __attribute__((tls_model("initial-exec"))) = true;
bool GradMode::is_enabled() { return tl_grad_enabled; }
void GradMode::set_enabled(bool enabled) { tl_grad_enabled = enabled; }
bool grad_enabled() { return tl_grad_enabled; }

// ---- saved tensors (Note [Saved tensor versions], Note [Saving an output]) ----
static thread_local std::shared_ptr<PackHook> tl_pack_hook;
void set_pack_hook(std::shared_ptr<PackHook> hook) { tl_pack_hook = std::move(hook); }
const std::shared_ptr<PackHook>& pack_hook() { return tl_pack_hook; }

// A saved output keeps its forward-AD tangents (Note [Dual tensors]): a backward formula reading it then
// propagates them, which is forward-over-reverse (hvp). The tangents are kept detached: a tangent recorded in
// grad mode has a history reaching this node (exp's tangent is t * out), which would close a reference cycle.
static Tensor alias_with_tangents(const Tensor& t) {
  Tensor a = alias(t);
  for (const auto& [level, tangent] : t->tangents) a->tangents.emplace_back(level, alias_with_tangents(tangent));
  return a;
}

void SavedTensor::save(const Tensor& t, bool is_output_of_node) {
  was_saved = true;
  is_output = is_output_of_node;
  saved_version = t->version();
  if (tl_pack_hook) {  // Note [Saved tensor hooks]; copy the hook: it may reset itself while running
    std::shared_ptr<PackHook> hook = tl_pack_hook;
    GradModeGuard no_grad(false);  // as torch: the ops a pack hook runs record nothing, so they pack nothing
    packed = (*hook)(is_output_of_node ? alias_with_tangents(t) : t);  // an output's alias: no cycle
    return;
  }
  data = is_output_of_node ? alias_with_tangents(t) : t;
}

Tensor SavedTensor::unpack(Node& owner) const {
  if (packed) {
    Tensor t = packed->unpack();
    if (is_output && GradMode::is_enabled()) {
      t = alias_with_tangents(t);
      t->requires_grad = true;
      t->grad_fn = owner.shared_from_this();
    }
    return t;
  }
  if (!data) {
    if (was_saved) throw RuntimeError(err_backward_twice(owner.name()) + created_at(owner));
    return nullptr;
  }
  if (data->version() != saved_version)
    throw RuntimeError(err_saved_modified(shape_str(data->shape), owner.name(), data->version(), saved_version) +
                       created_at(owner));
  if (is_output && GradMode::is_enabled()) {
    Tensor t = alias_with_tangents(data);
    t->requires_grad = true;
    t->grad_fn = owner.shared_from_this();
    return t;
  }
  return data;
}

// ---- nodes ----
static std::atomic<uint64_t> g_next_sequence_nr{0};
static std::atomic<int64_t> g_live_nodes{0};
int64_t live_node_count() { return g_live_nodes.load(); }
uint64_t next_sequence_nr() { return g_next_sequence_nr.load(std::memory_order_relaxed); }

Node::Node() : sequence_nr(g_next_sequence_nr.fetch_add(1, std::memory_order_relaxed)) {
  g_live_nodes.fetch_add(1, std::memory_order_relaxed);
}

Node::~Node() {
  g_live_nodes.fetch_sub(1, std::memory_order_relaxed);
  if (tracked) note_node_destroyed(*this);
  for (auto& e : next_edges)
    if (e.fn) release_node_iteratively(std::move(e.fn));
}

static thread_local std::vector<std::shared_ptr<Node>> tl_dying;
static thread_local bool tl_draining __attribute__((tls_model("initial-exec"))) = false;

void release_node_iteratively(std::shared_ptr<Node>&& node) {
  if (!node) return;
  if (node.use_count() != 1) {  // someone else still holds it: nothing dies here
    node.reset();
    return;
  }
  tl_dying.push_back(std::move(node));
  if (tl_draining) return;  // an outer call is draining the queue
  tl_draining = true;
  while (!tl_dying.empty()) {
    std::shared_ptr<Node> n = std::move(tl_dying.back());
    tl_dying.pop_back();
    n.reset();  // its destructor queues its own edges and saved histories
  }
  tl_draining = false;
}

std::string OpNode::name() const {
  if (!display_name.empty()) return display_name;  // Note [Display names] (node.h)
  return std::string(op_display_name(kind)) + "Backward";
}

std::vector<Tensor> OpNode::apply(std::vector<Tensor>& grads) {
  // Only a node that saved tensors needs them back: SumBackward and friends run again, as in torch, so the error
  // names the node whose saved tensors were actually freed.
  if (released && !saved_tensors().empty()) throw RuntimeError(err_backward_twice(name()) + created_at(*this));
  return run_derivative(*this, grads);
}

bool OpNode::apply_in_place(std::vector<Tensor>& grads) { return run_derivative_in_place(*this, grads); }

// ---- leaves ----
AccumulateGrad::AccumulateGrad(Tensor v) : variable(std::move(v)) {
  input_meta.push_back({variable->shape, variable->dtype});
}

std::vector<Tensor> AccumulateGrad::apply(std::vector<Tensor>& grads) {
  Tensor g = std::move(grads[0]);  // (the leaf's hooks ran in the engine: Note [Hooks that change hooks])
  if (g) accumulate_grad(variable, std::move(g));
  return {};
}

void accumulate_grad(const Tensor& variable, Tensor g) {
  if (!variable->grad) {
    if (GradMode::is_enabled()) {
      variable->grad = g;  // create_graph: keep the history of the gradient
    } else if (g.use_count() == 1 && g->storage.use_count() == 1 && g->is_contiguous() && !g->grad_fn) {
      variable->grad = g;  // nobody else can see this buffer: steal it
    } else {
      variable->grad = contiguous_copy(g, g->dtype);
    }
  } else if (GradMode::is_enabled()) {
    variable->grad = add(variable->grad, g);
  } else {
    Tensor acc = variable->grad;
    if (acc->grad_fn || !is_writable(*acc)) {  // (a .grad set to an expanded or read-only tensor: a fresh buffer)
      variable->grad = add(acc, g);
    } else {
      copy_into(acc, add(acc, g));
      acc->bump_version();
    }
  }
  note_grad_assigned(variable);  // create_graph: the gradient's graph may hold `variable` (Note [Cycles through C++])
  run_post_accumulate_hooks(variable);
}

// Note [Hooks that change hooks] (engine.h): the list is copied first, so a hook may add or remove hooks.
void run_post_accumulate_hooks(const Tensor& variable) {
  if (variable->post_accumulate_hooks.empty()) return;
  auto hooks = variable->post_accumulate_hooks;
  for (auto& [id, hook] : hooks) hook(variable);
}

// ---- recording history ----
bool any_requires_grad(std::initializer_list<const Tensor*> inputs) {
  if (!tl_grad_enabled) return false;
  for (const Tensor* t : inputs)
    if (t && *t && (*t)->requires_grad) return true;
  return false;
}

bool any_requires_grad(const std::vector<Tensor>& inputs) {
  if (!tl_grad_enabled) return false;
  for (const Tensor& t : inputs)
    if (t && t->requires_grad) return true;
  return false;
}

std::shared_ptr<Node> grad_accumulator(const Tensor& t) {
  std::shared_ptr<Node> acc = t->grad_accumulator.lock();
  if (!acc) {
    acc = std::make_shared<AccumulateGrad>(t);
    t->grad_accumulator = acc;
  }
  return acc;
}

Edge gradient_edge(const Tensor& t) {
  if (t->grad_fn) return Edge{t->grad_fn, t->output_nr};
  if (t->requires_grad) return Edge{grad_accumulator(t), 0};
  return Edge{};
}

void collect_next_edges(Node& node, const std::vector<const Tensor*>& inputs) {
  node.next_edges.reserve(inputs.size());
  node.input_meta.reserve(inputs.size());
  for (const Tensor* t : inputs) {
    if (t && *t && (*t)->requires_grad) {
      node.next_edges.push_back(gradient_edge(*t));
      node.input_meta.push_back({(*t)->shape, (*t)->dtype});
    } else {
      node.next_edges.push_back(Edge{});
      node.input_meta.push_back({t && *t ? (*t)->shape : Shape{}, t && *t ? (*t)->dtype : DType::Float32});
    }
  }
}

void set_history(const Tensor& out, std::shared_ptr<Node> node, uint32_t output_nr) {
  out->requires_grad = true;
  out->grad_fn = std::move(node);
  out->output_nr = output_nr;
}

}  // namespace dyngrad
