// replay_backward.cpp: the backward of a static replay as a recorded program (issue 20, docs/compile.md).
//
// Note [The backward as a recorded program]: a static replay (capture_bind.cpp's loop) used to re-run every op as
// eager mode does: each forward op made a graph node with its edges and saved tensors, and the recorded
// _run_backward step walked that graph (engine.cpp: claim and count the nodes, a ready stack, pending sums). The
// graph is the same at every replay of a variant, so its walk is planned once instead, while recording, just before
// the recorded call's own backward runs (_C._plan_backward, from capture.py's recorder):
//   - the nodes are put in the order engine.cpp would run them: the same dependency count from the roots and the
//     same last-in-first-out ready stack, so every gradient is summed in the same order (the same bits);
//   - each node becomes a template: a node of the same kind holding the non-tensor fields it saved (dims, slopes,
//     a matmul's layout flags), its input_meta and, for each saved tensor, the slot that tensor came from (an input
//     of the op, the node's own output, or a view of a slot's memory made inside the step, rebuilt at each
//     replay). Its edges point at the plan's sink node: formulas only ask needs_input_grad, and a slice that writes
//     its gradient in place writes into the sink's pending slot, which holds the target's sum for that call;
//   - each edge becomes a target: another planned node's pending gradient, a leaf's slot, or nothing.
// A replay that takes the plan runs the forward's tensor steps with grad mode off (no node, no edge, no saved
// tensor), then, in place of _run_backward, fills each template's saved tensors from the slots, runs the same
// formula (run_derivative), sums and casts each gradient as the engine does (validate_gradient,
// accumulate_pending: the same kernels, in place where the engine adds in place) and accumulates into the leaves'
// .grad with AccumulateGrad's own code (accumulate_grad). The templates drop the tensors as each node runs, as the
// engine releases a node.
//
// It must never be silently wrong, so a plan is made only for what it covers, and otherwise the replay runs as it
// did (the recorded _run_backward over the graph the forward builds):
//   - when planning (_plan_backward): a plain backward (no retain_graph, create_graph, inputs= or autograd.grad),
//     every node an ops.def primitive's node of one output (no custom Function), not released, made by a step of the
//     program (a slot's grad_fn, or a node a step made inside itself), no tensor hooks, retain_grad or node
//     pre-hooks on it, no argument or external with history (a closed-over non-leaf), every saved tensor held
//     unpacked (no saved-tensor hooks), unmodified since it was saved (the version counter) and found in a slot (or
//     a view of a slot's memory the step made inside itself), no forward-AD tangents, no edge to a second output,
//     every leaf a slot's tensor without hooks, and a node that offers to write its gradient in place (a slice:
//     Note [Gradients written in place]) has one input;
//   - when the program is built (plan_fits): every step before the backward runs in the C++ loop and cannot hand
//     back to Python once a step that made a node has run (a tensor step, or one whose result is None and can be
//     nothing else: setters, grad-mode switches, checks), no hook registration or retain_grad step anywhere, and no
//     step after the backward, nor an output, reads a tensor that had history unless it is a planned node's output
//     that saved tensors (below);
//   - at every replay (plan_usable): the program's inputs (arguments, externals) require grad and are leaves as
//     when recorded, no leaf has gained a hook, anomaly mode, saved-tensor hooks and forward-AD levels are off, and
//     grad mode is on. A run decides at its start; a step that hands back to Python before any step that made a
//     node has run turns the plan off for the rest of that run (capture_bind.cpp).
// Why a node made inside a step, or one an in-place op left behind, is safe to plan: the plan reads nothing of the
// forward but the slots' tensors, and the steps that compute them are the recorded ones; the version check while
// planning proved that nothing the node saved was written between its save and the backward, and a replay runs the
// same writes.
// An output that had history gets, after the planned backward, a grad_fn of its own node's name that is already
// released (PlannedNode): eager mode's grad_fn would be released too, and a second backward through it raises the
// same ERR_BACKWARD_TWICE (which is why only a node that saved tensors qualifies: eager mode raises at it too). It
// has no next_functions. Which outputs get one is the program's (PlanHeads): variants that share a prefix share its
// backward step and so its plan, but not their outputs. A run that leaves its variant after a planned backward (a
// value guard missed: a sibling variant or the catch-up's Python reads the slots from there) gives every tensor
// that had history one (plan_departed); there, a tensor whose node saved nothing raises on a second backward where
// eager mode would run that node again. The reference engine keeps its backward; both give the same numbers.
//
// Note [Saved state no step returns]: some primitives save a tensor that is a by-product of their kernel and that
// no step returns: attention's per-row logsumexp, rnn_layer's gate workspace, max-pooling's flat positions (take's
// node, made inside the pooling step). No slot holds it, and a forward run without a graph never computes it where
// the plan could find it. Such an entry is *live*: at each planned replay its step runs with grad mode on, and the
// step's inputs that had history when recorded (those that required grad) require grad again while it runs, so the
// step makes the very node it made when recorded, with the same needs_input_grad and so the same saved fields (the
// step's leaves already require grad as recorded: plan_usable). The plan keeps that node (PlanHarvest), and the
// output loses it, so the rest of the forward runs as without a graph. At the entry's turn in the backward its
// template adopts everything the node saved (tensors and values alike: a dropout seed is the replay's, not the
// recording's) and runs its formula as for any entry. It costs one node and its edges per live step, against the
// forward's kernels. Results are eager mode's bitwise: the step runs eager mode's code path (with its graph), and
// the formula reads what eager mode's node would read. A node
// made inside a step (a 3-d matmul's operand copied to 2-d, take's node inside max-pooling) is found by the edges
// that lead to it from the grad_fn of the step's output, recorded when planned.
#include "replay_backward.h"

#include <algorithm>
#include <cstring>
#include <ctime>
#include <map>
#include <unordered_map>
#include <unordered_set>

#include "dyngrad/debug.h"
#include "dyngrad/derivatives.h"
#include "dyngrad/engine.h"
#include "dyngrad/errors.h"
#include "dyngrad/forward_ad.h"
#include "dyngrad/grad_mode.h"
#include "dyngrad/kernels/scalar.h"
#include "dyngrad/saved.h"
#include "dyngrad/kernels/kernels.h"
#include "replay_fuse.h"

namespace dyngrad {

namespace {

// What a template's edges point at (BackwardPlan::sink). Never run.
struct PlannedInput final : Node {
  std::string name() const override { return "PlannedInput"; }
  std::vector<Tensor> apply(std::vector<Tensor>&) override {
    throw std::logic_error("a planned backward's sink node was run");
  }
};

// The grad_fn an output with history gets after a planned backward: eager mode's would be released.
struct PlannedNode final : Node {
  std::string recorded_name;
  explicit PlannedNode(std::string n) : recorded_name(std::move(n)) { released = true; }
  std::string name() const override { return recorded_name; }
  std::vector<Tensor> apply(std::vector<Tensor>&) override {
    throw RuntimeError(err_backward_twice(recorded_name) + created_at(*this));
  }
};

template <OpKind K>
std::shared_ptr<OpNode> clone_template(OpNode& recorded) {
  auto& from = static_cast<OpNodeOf<K>&>(recorded);  // make_op_node<K> pairs K with its struct (saved.h)
  auto node = std::make_shared<OpNodeOf<K>>(K);
  node->saved = from.saved;
  node->saved.each([](const char*, auto& field) {
    if constexpr (std::is_same_v<std::decay_t<decltype(field)>, SavedTensor>) field.release();
  });
  return node;
}
// A template's (and a PlannedNode's) call site is the recorded node's: errors name the user's line (under the GIL).
void copy_site(CallSite& to, const CallSite& from) {
  PyObject* old = (PyObject*)to.code;
  to.code = from.code;
  Py_XINCREF((PyObject*)to.code);
  Py_XDECREF(old);
  to.lasti = from.lasti;
  to.line = from.line;
}

using Cloner = std::shared_ptr<OpNode> (*)(OpNode&);
const Cloner kCloners[] = {
#define DG_OP(name, display, saves, signature, hot) &clone_template<OpKind::name>,
#include "dyngrad/ops.def"
};

// Note [Saved state no step returns]: a live entry's template takes everything the replay's own node saved
// (tensors and values: attention's seed, an rnn's workspace), then drops the tensors once its formula ran.
template <OpKind K>
void adopt_saved(OpNode& to, OpNode& from) {
  static_cast<OpNodeOf<K>&>(to).saved = static_cast<OpNodeOf<K>&>(from).saved;
}
template <OpKind K>
void release_saved(OpNode& node) {
  static_cast<OpNodeOf<K>&>(node).saved.each([](const char*, auto& field) {
    if constexpr (std::is_same_v<std::decay_t<decltype(field)>, SavedTensor>) field.release();
  });
}
using Adopter = void (*)(OpNode&, OpNode&);
const Adopter kAdopters[] = {
#define DG_OP(name, display, saves, signature, hot) &adopt_saved<OpKind::name>,
#include "dyngrad/ops.def"
};
using Releaser = void (*)(OpNode&);
const Releaser kReleasers[] = {
#define DG_OP(name, display, saves, signature, hot) &release_saved<OpKind::name>,
#include "dyngrad/ops.def"
};

}  // namespace

struct BackwardPlan {
  // A saved tensor: a slot's tensor, or a view a step made of one inside itself (a matmul's operand reshaped to
  // 2-d): the same view of the slot's storage, `offset` elements after the slot tensor's own.
  struct Fill {
    SavedTensor* field;
    int64_t slot;
    bool view = false;
    int64_t offset = 0;
    Shape shape, strides;
  };
  struct Target {
    int64_t entry = -1;  // the entry (node or leaf) the gradient goes to; -1: none
  };
  struct Entry {
    std::shared_ptr<OpNode> node;                         // null for a leaf
    int64_t slot = -1;                                    // a node's output slot, a leaf's tensor slot
    std::vector<Fill> fills;                              // each saved tensor of the template and where it is
    std::vector<Target> targets;                          // per input of the node
    bool saves = false;
    // Note [Saved state no step returns]: the node saved a tensor no slot holds (attention's logsumexp, an rnn's
    // workspace, max-pooling's positions); the replay's step makes its node and `node` adopts what it saved
    bool live = false;
    int64_t anchor = -1;           // the slot whose grad_fn the node is, or leads to: the step's output
    std::vector<uint32_t> path;    // the edges from that grad_fn to the node (empty: the grad_fn itself)
    std::shared_ptr<OpNode> harvested;  // that node, from its step to this entry's turn in the backward
  };
  std::vector<Entry> entries;  // in the engine's order
  struct Root {
    int64_t entry, slot, grad_slot;  // grad_slot -1: ones
  };
  std::vector<Root> roots;
  std::vector<std::pair<int64_t, bool>> inputs;  // the program's input slots and whether each required grad
  std::unordered_set<int64_t> history;           // the slots whose tensor had history when planned
  std::unordered_map<int64_t, std::string> history_name;  // ... and their grad_fn's name
  std::unordered_map<int64_t, int64_t> storage_class;     // per slot, the same number for slots sharing a storage
  std::vector<Tensor> pending;                   // per entry, during a run
  // Note [A reshape's gradient written into its slice's window]: per entry, the slice entry its reshape's gradient
  // is written through into (-1: none)
  std::vector<int64_t> into_slice;
  // What the templates' edges point at: formulas only ask needs_input_grad, and a slice's in-place gradient
  // (Note [Gradients written in place]) writes into its pending slot, which holds the target's sum meanwhile.
  std::shared_ptr<Node> sink;
};

std::shared_ptr<BackwardPlan> plan_of(py::handle obj) {
  if (!py::isinstance<BackwardPlan>(obj)) return nullptr;
  return obj.cast<std::shared_ptr<BackwardPlan>>();
}

namespace {

// Whether two tensors are the same elements of the same memory (a saved alias and a slot's tensor).
bool same_view(const Tensor& a, const Tensor& b) {
  return a->storage == b->storage && a->offset == b->offset && a->shape == b->shape && a->strides == b->strides &&
         a->dtype == b->dtype;
}

// The plan of the backward from `roots` over the graph as it is now, or the reason there is none.
std::variant<std::shared_ptr<BackwardPlan>, std::string> make_plan(
    const std::vector<std::pair<int64_t, Tensor>>& slot_tensors, const std::vector<int64_t>& input_slots,
    const std::vector<int64_t>& root_slots, const std::vector<int64_t>& grad_slots) {
  auto plan = std::make_shared<BackwardPlan>();
  plan->sink = std::make_shared<PlannedInput>();
  std::unordered_map<const TensorImpl*, int64_t> slot_of;  // the first slot holding each tensor
  std::unordered_map<const Node*, int64_t> output_of;      // node -> the slot of the tensor it is grad_fn of
  std::unordered_map<int64_t, Tensor> tensor_at;
  std::unordered_map<const Storage*, int64_t> storages;
  for (const auto& [slot, t] : slot_tensors) {
    slot_of.emplace(t.get(), slot);
    tensor_at[slot] = t;
    plan->storage_class[slot] = storages.emplace(t->storage.get(), (int64_t)storages.size()).first->second;
    if (t->grad_fn) {
      plan->history.insert(slot);
      plan->history_name.emplace(slot, t->grad_fn->name());
      if (t->output_nr != 0) return std::string("a tensor in a slot is output ") + std::to_string(t->output_nr) +
                                    " of " + t->grad_fn->name();
      auto [it, fresh] = output_of.emplace(t->grad_fn.get(), slot);
      // (one tensor in two slots, a step returned its input; or an in-place op's result, an alias of its input)
      if (!fresh && !same_view(tensor_at[it->second], t))
        return str_cat(t->grad_fn->name(), " is the grad_fn of two different tensors");
    }
  }
  for (int64_t slot : input_slots) {
    auto it = tensor_at.find(slot);
    if (it == tensor_at.end()) continue;
    if (it->second->grad_fn) return str_cat("input slot ", slot, " has history (", it->second->grad_fn->name(), ")");
    plan->inputs.push_back({slot, it->second->requires_grad});
  }
  // 1. the dependency counts, as engine.cpp's phase 1
  std::vector<Edge> root_edges;
  for (int64_t slot : root_slots) {
    auto it = tensor_at.find(slot);
    if (it == tensor_at.end()) return std::string("a root is not a slot's tensor");
    Edge e = gradient_edge(it->second);
    if (!e.valid()) return std::string("a root does not require grad");
    root_edges.push_back(e);
  }
  std::unordered_map<Node*, int64_t> deps;
  std::vector<Node*> stack;
  for (const Edge& e : root_edges)
    if (deps.emplace(e.fn.get(), 0).second) stack.push_back(e.fn.get());
  while (!stack.empty()) {
    Node* node = stack.back();
    stack.pop_back();
    for (const Edge& next : node->next_edges) {
      if (!next.fn) continue;
      auto [it, fresh] = deps.emplace(next.fn.get(), 0);
      if (fresh) stack.push_back(next.fn.get());
      it->second += 1;
    }
  }
  // 2. the order of phase 2: a node runs once every gradient it receives has arrived
  std::unordered_map<Node*, int64_t> entry_of;
  std::vector<Node*> order, ready;
  std::unordered_set<Node*> queued;
  for (const Edge& e : root_edges)
    if (deps[e.fn.get()] == 0 && queued.insert(e.fn.get()).second) ready.push_back(e.fn.get());
  while (!ready.empty()) {
    Node* node = ready.back();
    ready.pop_back();
    entry_of[node] = (int64_t)order.size();
    order.push_back(node);
    for (const Edge& next : node->next_edges)
      if (next.fn && --deps[next.fn.get()] == 0) ready.push_back(next.fn.get());
  }
  if (order.size() != deps.size()) return std::string("the graph's dependency counts do not close");
  // 3. each node's template, saved slots and targets
  // Note [Saved state no step returns]: how each node is reached from the grad_fn of a slot's tensor through nodes
  // no slot's tensor has (so made inside that tensor's step)
  std::unordered_map<Node*, std::pair<int64_t, std::vector<uint32_t>>> reach;
  for (Node* node : order) {
    if (auto out = output_of.find(node); out != output_of.end()) reach[node] = {out->second, {}};
    if (auto from = reach.find(node); from != reach.end())
      for (size_t i = 0; i < node->next_edges.size(); ++i) {
        Node* next = node->next_edges[i].fn.get();
        if (!next || output_of.count(next) || reach.count(next) || !dynamic_cast<OpNode*>(next)) continue;
        auto path = from->second.second;
        path.push_back((uint32_t)i);
        reach[next] = {from->second.first, std::move(path)};
      }
  }
  for (Node* node : order) {
    BackwardPlan::Entry entry;
    if (!node->pre_hooks.empty() || !node->retained.empty() || !node->node_pre_hooks.empty())
      return str_cat(node->name(), " has hooks or retain_grad");
    if (auto* acc = dynamic_cast<AccumulateGrad*>(node)) {
      auto it = slot_of.find(acc->variable.get());
      if (it == slot_of.end()) return std::string("a leaf requiring grad is not a slot's tensor");
      if (!acc->variable->hooks.empty() || !acc->variable->post_accumulate_hooks.empty())
        return std::string("a leaf has hooks");
      entry.slot = it->second;
      plan->entries.push_back(std::move(entry));
      continue;
    }
    auto* op = dynamic_cast<OpNode*>(node);
    if (!op) return str_cat(node->name(), " is not the node of an ops.def primitive");
    if (op->num_outputs() != 1) return str_cat(node->name(), " has several outputs");
    if (op->released) return str_cat(node->name(), " was released");
    // A node no slot's tensor has as grad_fn was made inside a step (a composite's inner op) or left behind by an
    // in-place op that rebased its output: it is planned like the others as long as all it saved is in slots.
    auto out = output_of.find(node);
    entry.slot = out == output_of.end() ? -1 : out->second;
    entry.node = kCloners[(int)op->kind](*op);
    OpNode& t = *entry.node;
    if (t.tracked) {  // the graph-growth registry (debug.h) is for graphs, not for a plan's templates
      note_node_destroyed(t);
      t.tracked = false;
    }
    t.input_meta = op->input_meta;
    t.display_name = op->display_name;
    copy_site(t.call_site, op->call_site);
    const Tensor* output = entry.slot >= 0 ? &tensor_at[entry.slot] : nullptr;
    std::vector<SavedField> from = op->saved_fields(), to = t.saved_fields();
    for (size_t f = 0; f < from.size(); ++f) {
      const SavedTensor* s = from[f].tensor;
      if (!s || !s->was_saved) continue;
      if (s->packed) return str_cat(node->name(), " saved a tensor through saved-tensor hooks");
      if (!s->data) return str_cat(node->name(), "'s saved tensors were freed");
      if (s->data->version() != s->saved_version) return str_cat(node->name(), "'s saved ", from[f].name,
                                                                  " was modified in place");
      if (!s->data->tangents.empty()) return std::string("a saved tensor has forward-AD tangents");
      int64_t slot = -1;
      if (s->is_output) {
        if (output && same_view(s->data, *output)) slot = entry.slot;
      } else if (auto it = slot_of.find(s->data.get()); it != slot_of.end()) {
        slot = it->second;
      } else {  // an alias a step made inside itself (a contiguous() of a contiguous weight): the same bytes
        for (const auto& [other, t] : slot_tensors)
          if (same_view(s->data, t)) {
            slot = other;
            break;
          }
      }
      BackwardPlan::Fill fill{const_cast<SavedTensor*>(to[f].tensor), slot};
      if (slot < 0 && !s->is_output) {  // another view of a slot's memory: made again from it at each replay
        for (const auto& [other, t] : slot_tensors)
          if (t->storage == s->data->storage && t->dtype == s->data->dtype) {
            fill = {fill.field, other, true, s->data->offset - t->offset, s->data->shape, s->data->strides};
            slot = other;
            break;
          }
      }
      if (slot < 0) {
        // Note [Saved state no step returns]: taken from the node the step makes again at each replay
        auto r = reach.find(node);
        if (r == reach.end())
          return str_cat(node->name(), "'s saved ", from[f].name, " is not a slot's tensor, and its node is not ",
                         "reached from a slot's");
        entry.live = true;
        entry.anchor = r->second.first;
        entry.path = r->second.second;
        entry.saves = true;
        continue;
      }
      entry.fills.push_back(std::move(fill));
      entry.saves = true;
    }
    if (entry.live) entry.fills.clear();
    t.next_edges.clear();
    for (const Edge& e : op->next_edges) t.next_edges.push_back(e.fn ? Edge{plan->sink, 0} : Edge{});
    plan->entries.push_back(std::move(entry));
  }
  // targets, once every entry has its index
  for (size_t k = 0; k < order.size(); ++k)
    for (const Edge& e : order[k]->next_edges) {
      BackwardPlan::Target target;
      if (e.fn) {
        if (e.input_nr != 0) return std::string("an edge reaches a node's second output");
        target.entry = entry_of.at(e.fn.get());
      }
      plan->entries[k].targets.push_back(target);
    }
  for (size_t r = 0; r < root_edges.size(); ++r)
    plan->roots.push_back({entry_of.at(root_edges[r].fn.get()), root_slots[r],
                           r < grad_slots.size() ? grad_slots[r] : -1});
  plan->pending.resize(plan->entries.size());
  // Note [A reshape's gradient written into its slice's window]
  plan->into_slice.assign(plan->entries.size(), -1);
  if (replay_fusion_on()) {
    std::vector<int64_t> sources(plan->entries.size(), 0);
    for (const auto& e : plan->entries)
      for (const auto& t : e.targets)
        if (t.entry >= 0) sources[t.entry] += 1;
    for (const auto& r : plan->roots) sources[r.entry] += 1000;
    for (size_t k = 0; k < plan->entries.size(); ++k) {
      const auto& e = plan->entries[k];
      if (!e.node || e.live || e.node->kind != OpKind::reshape || e.targets.size() != 1) continue;
      const int64_t j = e.targets[0].entry;
      if (j <= (int64_t)k || sources[j] != 1) continue;
      const auto& sl = plan->entries[j];
      if (!sl.node || sl.live || sl.node->kind != OpKind::slice || sl.targets.size() != 1 || sl.targets[0].entry < 0)
        continue;
      const int64_t t = sl.targets[0].entry;
      bool between = false;  // an entry between the two that adds into the slice's target: keep the sums' order
      for (int64_t m = (int64_t)k + 1; m < j && !between; ++m)
        for (const auto& tt : plan->entries[m].targets) between = between || tt.entry == t;
      if (!between) plan->into_slice[k] = j;
    }
  }
  return plan;
}

// Note [A reshape's gradient written into its slice's window]: a value cut into pieces and reshaped (the query, key
// and value of attention: a chunk of the qkv product, reshaped to heads and transposed) gets back, per piece, a
// gradient in the heads' layout. ReshapeBackward makes it contiguous (a copy: a transposed gradient cannot be
// viewed in the piece's shape), then the slice's in-place formula (Note [Gradients written in place]) copies that
// into its window of the whole gradient: two copies of each piece. Where the reshape's gradient goes only to that
// slice, which sends it only to its input, and no entry between them adds into that input, the planned backward
// writes the reshape's incoming gradient straight into the window, viewed in the gradient's shape: the window's
// clearing and the copy (or the add into a sum already there) of slice_backward_in_place, and the same values
// elementwise, so the same bits. The slice then has nothing pending and is skipped. Where the window cannot be
// viewed in the gradient's shape, or any of the slice formula's own conditions fails, both run as before.
bool view_strides_of(const Shape& shape, const Shape& strides, const Shape& to, Shape& out) {
  // the strides of `to` over the memory of (shape, strides), if it is a view of it (dims merged or split where
  // their memory is uniform), as torch's computeStride
  out.assign(to.size(), 0);
  int64_t numel = 1;
  for (int64_t d : shape) numel *= d;
  if (numel == 0) return false;
  int64_t view_d = (int64_t)to.size() - 1;
  int64_t chunk_base_stride = strides.empty() ? 1 : strides.back();
  int64_t tensor_numel = 1, view_numel = 1;
  for (int64_t d = (int64_t)shape.size() - 1; d >= 0; --d) {
    tensor_numel *= shape[d];
    if (d == 0 || (shape[d - 1] != 1 && strides[d - 1] != tensor_numel * chunk_base_stride)) {
      while (view_d >= 0 && (view_numel < tensor_numel || to[view_d] == 1)) {
        out[view_d] = view_numel * chunk_base_stride;
        view_numel *= to[view_d];
        --view_d;
      }
      if (view_numel != tensor_numel) return false;
      if (d > 0) {
        chunk_base_stride = strides[d - 1];
        tensor_numel = 1;
        view_numel = 1;
      }
    }
  }
  return view_d == -1;
}

// At the reshape entry k with incoming gradient g: true when written into its slice's window (above).
bool reshape_into_slice(BackwardPlan& plan, size_t k, const Tensor& g) {
  const auto& e = plan.entries[k];
  const auto& sl = plan.entries[plan.into_slice[k]];
  const InputMeta& reshaped = e.node->input_meta[0];  // the piece's shape: what ReshapeBackward would make
  const InputMeta& meta = sl.node->input_meta[0];     // the whole value's
  const auto& s = static_cast<OpNodeOf<OpKind::slice>&>(*sl.node).saved;
  if (!g || !g->tangents.empty() || g->is_contiguous() || g->dtype != reshaped.dtype || g->dtype != meta.dtype ||
      !is_floating(g->dtype) || reshaped.shape.size() != meta.shape.size() || s.dim < 0 ||
      s.dim >= (int64_t)meta.shape.size())
    return false;
  int64_t numel = 1;
  for (int64_t d : reshaped.shape) numel *= d;
  if (numel != g->numel) return false;
  Shape window_shape = meta.shape;
  window_shape[s.dim] = reshaped.shape[s.dim];
  if (window_shape != reshaped.shape) return false;
  Tensor& cur = plan.pending[sl.targets[0].entry];
  if (cur && (cur->shape != meta.shape || cur->dtype != meta.dtype || !cur->tangents.empty())) return false;
  // the window's strides, then its view in g's shape, before anything is written
  const bool fresh = !cur;
  const Shape whole_strides = contiguous_strides(meta.shape);  // (the sum is made contiguous below if it is not)
  Shape window_strides = whole_strides;
  window_strides[s.dim] *= s.step;
  // both in the finest shape that refines the window's and g's (the heads split out of a merged dim: (s, b, h*dh)
  // against (s, b*h, dh) is (s, b, h, dh)), each a view of its memory
  Shape common;
  for (int64_t i = (int64_t)window_shape.size() - 1, j = (int64_t)g->ndim() - 1, a = 1, b = 1; i >= 0 || j >= 0;) {
    if (a == 1 && i >= 0) a = window_shape[i--];
    if (b == 1 && j >= 0) b = g->shape[j--];
    if (a == b) {
      common.push_back(a);
      a = b = 1;
    } else if (b > 1 && a % b == 0) {
      common.push_back(b);
      a /= b;
      b = 1;
    } else if (a > 1 && b % a == 0) {
      common.push_back(a);
      b /= a;
      a = 1;
    } else {
      return false;
    }
  }
  std::reverse(common.begin(), common.end());
  Shape window_common, g_common;
  if (!view_strides_of(window_shape, window_strides, common, window_common) ||
      !view_strides_of(g->shape, g->strides, common, g_common))
    return false;
  if (fresh) {  // slice_backward_in_place's clearing: the rest of each block, or all of it
    cur = zeros_outside_window(meta, s.dim, s.start, s.step, window_shape[s.dim]);
  } else if (!owned_buffer(cur)) {
    cur = contiguous_copy(cur, cur->dtype);
  }
  Tensor window = make_view(cur, common, window_common, cur->offset + s.start * cur->strides[s.dim]);
  Tensor from = make_view(g, common, g_common, g->offset);
  if (fresh) copy_into(window, from);
  else add_into_kernel(window, from);
  return true;
}

}  // namespace

std::string plan_fits(BackwardPlan& plan, const std::vector<int64_t>& outs,
                      const std::vector<std::vector<int64_t>>& seq_outs, const std::vector<std::vector<int64_t>>& reads,
                      const std::vector<std::string>& names, size_t backward, const std::vector<char>& exported,
                      PlanHeads& out_heads, PlanHarvests& out_harvests) {
  // (the _C functions bound as returning void, in-place updates among them: BatchNorm's running statistics)
  static const std::unordered_set<std::string> kNoneOnly = {
      "_set_grad_enabled", "grad.set", "validate", "set_grad_enabled", "assign_inplace", "copy_", "fill_", "zero_",
      "_sgd_step", "_adam_step", "_adagrad_step", "_rmsprop_step"};
  bool made_node = false;
  for (size_t i = 0; i < outs.size(); ++i) {
    const std::string& name = names[i];
    if (name.find("hook") != std::string::npos || name == "retain_grad")
      return str_cat("step ", i, " (", name, ") registers a hook or retains a gradient");
    if (i >= backward) continue;
    const int64_t out = outs[i];
    if (out == -2 || out == -1) return str_cat("step ", i, " (", name, ") before the backward goes back to Python");
    if (out >= 0 && plan.history.count(out)) made_node = true;
    for (int64_t slot : seq_outs[i])
      if (plan.history.count(slot)) made_node = true;
    // (grad mode, the default dtype and the slots' dtypes follow from the entry guard and the recorded steps: a
    // value that reads only them cannot miss)
    static const std::unordered_set<std::string> kCannotMiss = {"is_grad_enabled", "_get_default_dtype",
                                                                "result_type", "promote_types"};
    if (made_node && out == -4 && !kCannotMiss.count(name))
      return str_cat("step ", i, " (", name, ") is a value guard after the forward began");
    if (made_node && out == -3 && !kNoneOnly.count(name))
      return str_cat("step ", i, " (", name, ") returned None and might return something else");
  }
  std::unordered_map<int64_t, int64_t> entry_at;
  for (size_t k = 0; k < plan.entries.size(); ++k)
    if (plan.entries[k].node && plan.entries[k].slot >= 0) entry_at[plan.entries[k].slot] = (int64_t)k;
  std::unordered_set<int64_t> heads;
  auto need_head = [&](int64_t slot) -> std::string {
    if (!plan.history.count(slot) || heads.count(slot)) return "";
    auto it = entry_at.find(slot);
    if (it == entry_at.end() || !plan.entries[it->second].saves)
      return str_cat("slot ", slot, " had history and is read after the backward");
    heads.insert(slot);
    out_heads.push_back({slot, it->second});
    return "";
  };
  out_heads.clear();
  // steps whose result does not depend on their input's history: eager mode's gives the same as the plan's
  static const std::unordered_set<std::string> kReadsValues = {"detach", "item", "_numpy_view"};
  for (size_t i = backward + 1; i < reads.size(); ++i)
    if (!kReadsValues.count(names[i]))
      for (int64_t slot : reads[i])
        if (std::string why = need_head(slot); !why.empty()) return why;
  for (size_t slot = 0; slot < exported.size(); ++slot)
    if (exported[slot])
      if (std::string why = need_head((int64_t)slot); !why.empty()) return why;
  // Note [Saved state no step returns]: the step that makes each live entry's node, the slots it reads that had
  // history (required grad) when recorded, which it must see requiring grad again to make the same nodes, and its
  // outputs that had history, which lose their node once it ran
  out_harvests.assign(backward, HarvestStep{});
  for (size_t k = 0; k < plan.entries.size(); ++k) {
    const BackwardPlan::Entry& e = plan.entries[k];
    if (!e.live) continue;
    size_t at = SIZE_MAX;
    for (size_t i = 0; i < backward && at == SIZE_MAX; ++i)
      if (outs[i] == e.anchor || std::count(seq_outs[i].begin(), seq_outs[i].end(), e.anchor)) at = i;
    if (at == SIZE_MAX)
      return str_cat(e.node->name(), " saved a tensor no slot holds, and no step before the backward made it");
    // an in-place step (its output is its input's memory) would see its input turned into a leaf requiring grad
    for (int64_t slot : reads[at])
      if (plan.storage_class.count(slot) && plan.storage_class.count(e.anchor) &&
          plan.storage_class.at(slot) == plan.storage_class.at(e.anchor))
        return str_cat("step ", at, " (", names[at], ") made ", e.node->name(), ", whose saved state no slot holds, ",
                       "in its input's memory");
    HarvestStep& h = out_harvests[at];
    if (h.entries.empty()) {
      for (int64_t slot : reads[at])
        if (plan.history.count(slot)) h.flip.push_back(slot);
      if (outs[at] >= 0 && plan.history.count(outs[at])) h.outs.push_back(outs[at]);
      for (int64_t slot : seq_outs[at])
        if (plan.history.count(slot)) h.outs.push_back(slot);
    }
    h.entries.push_back((int64_t)k);
  }
  return "";
}

PlanHarvest::PlanHarvest(BackwardPlan& plan, const HarvestStep& step, const SlotReader& slot)
    : plan_(plan), step_(step), slot_(slot) {
  for (int64_t s : step.flip)
    if (const Tensor* t = slot(s); t && *t && !(*t)->requires_grad && !(*t)->grad_fn) {
      (*t)->requires_grad = true;
      flipped_.push_back(*t);
    }
}

PlanHarvest::~PlanHarvest() {
  for (const Tensor& t : flipped_) t->requires_grad = false;
  for (int64_t k : step_.entries) {
    BackwardPlan::Entry& e = plan_.entries[k];
    e.harvested.reset();
    const Tensor* out = slot_(e.anchor);
    if (!out || !*out || (*out)->output_nr != 0) continue;  // (the step raised, or made another graph: plan_run raises)
    std::shared_ptr<Node> node = (*out)->grad_fn;
    for (uint32_t i : e.path)
      node = node && i < node->next_edges.size() ? node->next_edges[i].fn : nullptr;
    auto op = std::dynamic_pointer_cast<OpNode>(node);
    if (op && op->kind == e.node->kind) e.harvested = std::move(op);
  }
  for (int64_t s : step_.outs)  // the rest of the forward runs as without a graph: the outputs have none
    if (const Tensor* out = slot_(s); out && *out && (*out)->grad_fn) {
      (*out)->grad_fn.reset();
      (*out)->requires_grad = false;
      (*out)->output_nr = 0;
    }
}

void plan_drop_harvested(BackwardPlan& plan) {
  for (auto& e : plan.entries)
    if (e.live) e.harvested.reset();
}

std::vector<int64_t> plan_read_slots(const BackwardPlan& plan) {
  std::vector<int64_t> out;
  for (const auto& e : plan.entries) {
    for (const auto& fill : e.fills) out.push_back(fill.slot);
    if (e.live) out.push_back(e.anchor);
    if (!e.node) out.push_back(e.slot);
  }
  for (const auto& r : plan.roots) {
    out.push_back(r.slot);
    if (r.grad_slot >= 0) out.push_back(r.grad_slot);
  }
  for (const auto& [slot, requires_grad] : plan.inputs) out.push_back(slot);
  return out;
}

bool plan_has_history(const BackwardPlan& plan, int64_t slot) { return plan.history.count(slot) != 0; }

bool plan_usable(const BackwardPlan& plan, const SlotReader& slot) {
  if (g_anomaly_mode || pack_hook() || forward_ad::active() || !GradMode::is_enabled()) return false;
  for (const auto& [s, requires_grad] : plan.inputs) {
    const Tensor* t = slot(s);
    if (!t || (*t)->grad_fn || (*t)->requires_grad != requires_grad) return false;
    if (requires_grad && (!(*t)->hooks.empty() || !(*t)->post_accumulate_hooks.empty())) return false;
  }
  return true;
}

// Fill's view of slot tensor t, checked to lie inside t's storage.
static Tensor view_of(const Tensor& t, const BackwardPlan::Fill& fill) {
  const int64_t offset = t->offset + fill.offset;
  int64_t last = offset;
  bool empty = false;
  for (size_t d = 0; d < fill.shape.size(); ++d) {
    if (fill.shape[d] == 0) empty = true;
    if (fill.strides[d] < 0) throw std::logic_error("a planned backward's saved view has a negative stride");
    last += (fill.shape[d] - 1) * fill.strides[d];
  }
  if (!empty && (offset < 0 || (size_t)(last + 1) * t->itemsize() > t->storage->nbytes))
    throw std::logic_error("a planned backward's saved view does not fit in its slot's storage");
  return make_view(t, fill.shape, fill.strides, offset);
}

// _C._plan_profile(on): while on, plan_run adds each entry's CPU time (its formula, the sums of its gradients, a
// leaf's accumulation) to a table by node name, for bench/ profiles of a static step's backward. Off: one branch per
// entry. Times are the calling thread's CPU time (the pool's workers are not counted).
namespace {
bool g_plan_profile = false;
std::map<std::string, std::pair<double, int64_t>> g_plan_times;  // name -> (seconds, entries run)
double thread_seconds() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}
struct EntryTimer {
  const BackwardPlan::Entry* e;
  double t0 = 0;
  explicit EntryTimer(const BackwardPlan::Entry& entry) : e(g_plan_profile ? &entry : nullptr) {
    if (e) t0 = thread_seconds();
  }
  ~EntryTimer() {
    if (!e) return;
    auto& slot = g_plan_times[e->node ? e->node->name() : std::string("AccumulateGrad")];
    slot.first += thread_seconds() - t0;
    slot.second += 1;
  }
};
}  // namespace

void plan_run(BackwardPlan& plan, const PlanHeads& heads, const SlotReader& slot) {
  note_backward();  // a new step for the graph-growth warning, as run_backward
  auto tensor = [&](int64_t s) -> const Tensor& {
    const Tensor* t = slot(s);
    if (!t) throw std::logic_error(str_cat("a planned backward found no tensor in slot ", s));
    return *t;
  };
  struct Clear {  // the templates and the pending sums hold no tensor once the run ends, however it ends
    BackwardPlan& p;
    ~Clear() {
      for (auto& e : p.entries) {
        for (auto& fill : e.fills) fill.field->release();
        if (e.live) {
          kReleasers[(int)e.node->kind](*e.node);
          e.harvested.reset();
        }
      }
      for (auto& g : p.pending) g.reset();
    }
  } clear{plan};
  GradModeGuard no_grad(false);  // Note [Grad mode during backward]: create_graph is false
  for (const auto& root : plan.roots) {
    const Tensor& r = tensor(root.slot);
    Tensor g;
    if (root.grad_slot >= 0) {
      g = tensor(root.grad_slot);
      if (g->shape != r->shape)
        throw RuntimeError(str_cat("backward(): the gradient has shape ", shape_str(g->shape),
                                   " but the output it is for has shape ", shape_str(r->shape), "."));
    } else {
      g = full(r->shape, 1.0, r->dtype);
    }
    accumulate_pending(plan.pending[root.entry], std::move(g));
  }
  std::vector<Tensor> grads(1);
  for (size_t k = 0; k < plan.entries.size(); ++k) {
    BackwardPlan::Entry& e = plan.entries[k];
    EntryTimer timer(e);
    Tensor g = std::move(plan.pending[k]);
    if (!e.node) {  // a leaf: AccumulateGrad
      if (g) {
        const Tensor& leaf = tensor(e.slot);
        if (leaf->grad_fn || !leaf->requires_grad || !leaf->hooks.empty())
          throw std::logic_error("a planned backward's leaf changed during the replay");
        accumulate_grad(leaf, std::move(g));
      }
      continue;
    }
    if (!g) continue;
    if (e.live) {  // Note [Saved state no step returns]
      if (!e.harvested)
        throw std::logic_error(str_cat("a planned backward found no node of ", e.node->name(), " made by its step"));
      kAdopters[(int)e.node->kind](*e.node, *e.harvested);
      e.harvested.reset();
    }
    if (plan.into_slice[k] >= 0 && reshape_into_slice(plan, k, g)) continue;  // (a reshape saves nothing)
    for (auto& fill : e.fills) {
      const Tensor& t = tensor(fill.slot);
      fill.field->data = fill.view ? view_of(t, fill) : t;
      fill.field->saved_version = t->version();
    }
    grads[0] = std::move(g);
    if (e.targets.size() == 1 && e.targets[0].entry >= 0) {
      // Note [Gradients written in place]: asked as the engine asks every node (no create_graph, no anomaly
      // mode; only a slice offers), into the target's sum, lent to the sink's pending slot for the call
      Tensor& lent = plan.sink->pending_slot(0);
      lent = std::move(plan.pending[e.targets[0].entry]);
      bool done = false;
      try {
        done = run_derivative_in_place(*e.node, grads);
      } catch (...) {
        plan.pending[e.targets[0].entry] = std::move(lent);
        throw;
      }
      plan.pending[e.targets[0].entry] = std::move(lent);
      if (done) {
        for (auto& fill : e.fills) fill.field->release();
        if (e.live) kReleasers[(int)e.node->kind](*e.node);
        continue;
      }
    }
    std::vector<Tensor> outputs = run_derivative(*e.node, grads);
    for (auto& fill : e.fills) fill.field->release();
    if (e.live) kReleasers[(int)e.node->kind](*e.node);
    for (size_t i = 0; i < e.targets.size(); ++i) {
      const int64_t to = e.targets[i].entry;
      if (to < 0 || i >= outputs.size() || !outputs[i]) continue;
      Tensor v = validate_gradient(std::move(outputs[i]), e.node->input_meta[i], *e.node, i);
      accumulate_pending(plan.pending[to], std::move(v));
    }
  }
  plan_set_heads(plan, heads, slot);
}

void plan_set_heads(const BackwardPlan& plan, const PlanHeads& heads, const SlotReader& slot) {
  for (const auto& [s, k] : heads) {  // outputs with history: a released grad_fn of their node's name
    const Tensor* t = slot(s);
    if (!t) throw std::logic_error(str_cat("a planned backward found no tensor in slot ", s));
    if ((*t)->grad_fn) continue;
    auto head = std::make_shared<PlannedNode>(plan.entries[k].node->name());
    copy_site(head->call_site, plan.entries[k].node->call_site);
    set_history(*t, std::move(head));
  }
}

// Note [Scalar replay] (capture_bind.cpp): the plan's backward on floats. Per entry, in the plan's order, the same
// formula as derivatives.cpp's on one float32 element (Note [One-element kernels]: the kernels' bits), the same sums
// in the same order (accumulate_pending's add), and the leaves' .grad through accumulate_grad itself, from a
// fresh one-element tensor (the buffer eager mode's gradient would be: nobody else holds it).
struct ScalarBackward {
  enum class Kind : char { leaf, add, sub, mul, div, neg, tanh, sigmoid, exp, relu, sum };
  struct Op {
    Kind kind = Kind::leaf;
    int64_t slot = -1, a = -1, b = -1;  // the node's output slot (a leaf's tensor), its forward inputs
    int64_t t0 = -1, t1 = -1;           // the entries its gradients go to (-1: none)
  };
  std::vector<Op> ops;  // per plan entry
  std::vector<int64_t> roots;
  std::vector<float> pending;
  std::vector<char> has;
};

std::shared_ptr<ScalarBackward> plan_scalar(const BackwardPlan& plan, const ScalarProducer& producer) {
  auto sb = std::make_shared<ScalarBackward>();
  using Kind = ScalarBackward::Kind;
  for (const auto& r : plan.roots) {
    if (r.grad_slot >= 0) return nullptr;  // a root gradient given: a tensor the program reads (not planned here)
    sb->roots.push_back(r.entry);
  }
  for (const auto& e : plan.entries) {
    ScalarBackward::Op op;
    op.slot = e.slot;
    if (!e.node) {  // a leaf
      if (e.slot < 0) return nullptr;
      sb->ops.push_back(op);
      continue;
    }
    Kind kind;
    size_t inputs = 1;
    switch (e.node->kind) {
      case OpKind::add: kind = Kind::add; inputs = 2; break;
      case OpKind::sub: kind = Kind::sub; inputs = 2; break;
      case OpKind::mul: kind = Kind::mul; inputs = 2; break;
      case OpKind::div: kind = Kind::div; inputs = 2; break;
      case OpKind::relu: kind = Kind::relu; break;
      case OpKind::neg: kind = Kind::neg; break;
      case OpKind::tanh: kind = Kind::tanh; break;
      case OpKind::sigmoid: kind = Kind::sigmoid; break;
      case OpKind::exp: kind = Kind::exp; break;
      case OpKind::sum: kind = Kind::sum; break;
      default: return nullptr;
    }
    OpKind made;
    if (e.slot < 0 || !producer(e.slot, made, op.a, op.b) || made != e.node->kind) return nullptr;
    if (e.targets.size() != inputs || e.node->input_meta.size() != inputs) return nullptr;
    for (const auto& m : e.node->input_meta)
      if (m.dtype != DType::Float32) return nullptr;
    op.kind = kind;
    op.t0 = e.targets[0].entry;
    op.t1 = inputs == 2 ? e.targets[1].entry : -1;
    sb->ops.push_back(op);
  }
  sb->pending.assign(sb->ops.size(), 0.0f);
  sb->has.assign(sb->ops.size(), 0);
  return sb;
}

void scalar_backward_run(const BackwardPlan& plan, ScalarBackward& sb, const std::vector<float>& regs,
                         const SlotReader& slot) {
  using Kind = ScalarBackward::Kind;
  note_backward();  // a new step for the graph-growth warning, as run_backward
  GradModeGuard no_grad(false);
  std::fill(sb.has.begin(), sb.has.end(), 0);
  auto add_to = [&](int64_t to, float v) {  // accumulate_pending: the first gradient, then add's sums in order
    if (to < 0) return;
    if (!sb.has[to]) {
      sb.pending[to] = v;
      sb.has[to] = 1;
    } else {
      scalar_binary_f32(BinaryKind::Add, sb.pending[to], v, sb.pending[to]);
    }
  };
  for (int64_t r : sb.roots) add_to(r, 1.0f);  // full(shape, 1.0)
  float v = 0;
  for (size_t k = 0; k < sb.ops.size(); ++k) {
    if (!sb.has[k]) continue;
    const ScalarBackward::Op& op = sb.ops[k];
    const float g = sb.pending[k];
    switch (op.kind) {
      case Kind::leaf: {
        const Tensor* leaf = slot(op.slot);
        if (!leaf || (*leaf)->grad_fn || !(*leaf)->requires_grad || !(*leaf)->hooks.empty())
          throw std::logic_error("a planned backward's leaf changed during the replay");
        Tensor t = empty((*leaf)->shape, DType::Float32);
        t->data<float>()[0] = g;
        accumulate_grad(*leaf, std::move(t));
        break;
      }
      case Kind::add: add_to(op.t0, g); add_to(op.t1, g); break;  // {grad, grad}
      case Kind::sub:
        add_to(op.t0, g);
        if (op.t1 >= 0) { scalar_unary_f32(UnaryKind::Neg, g, v); add_to(op.t1, v); }
        break;
      case Kind::mul:  // {grad * b, grad * a}
        if (op.t0 >= 0) { scalar_binary_f32(BinaryKind::Mul, g, regs[op.b], v); add_to(op.t0, v); }
        if (op.t1 >= 0) { scalar_binary_f32(BinaryKind::Mul, g, regs[op.a], v); add_to(op.t1, v); }
        break;
      case Kind::div:  // {grad / b, -(grad * ((a / b) / b))}
        if (op.t0 >= 0) { scalar_binary_f32(BinaryKind::Div, g, regs[op.b], v); add_to(op.t0, v); }
        if (op.t1 >= 0) {
          scalar_binary_f32(BinaryKind::Div, regs[op.a], regs[op.b], v);
          scalar_binary_f32(BinaryKind::Div, v, regs[op.b], v);
          scalar_binary_f32(BinaryKind::Mul, g, v, v);
          scalar_unary_f32(UnaryKind::Neg, v, v);
          add_to(op.t1, v);
        }
        break;
      case Kind::relu:  // threshold_backward(grad, out)
        scalar_unary_grad_f32(UnaryKind::ReluMask, g, regs[op.slot], v);
        add_to(op.t0, v);
        break;
      case Kind::neg: scalar_unary_f32(UnaryKind::Neg, g, v); add_to(op.t0, v); break;
      case Kind::tanh: scalar_unary_grad_f32(UnaryKind::TanhGradFromOut, g, regs[op.slot], v); add_to(op.t0, v); break;
      case Kind::sigmoid:
        scalar_unary_grad_f32(UnaryKind::SigmoidGradFromOut, g, regs[op.slot], v);
        add_to(op.t0, v);
        break;
      case Kind::exp: scalar_binary_f32(BinaryKind::Mul, g, regs[op.slot], v); add_to(op.t0, v); break;
      case Kind::sum: add_to(op.t0, g); break;  // expand: the same value
    }
  }
}

void plan_departed(const BackwardPlan& plan, const SlotReader& slot) {
  for (int64_t s : plan.history) {
    const Tensor* t = slot(s);
    if (!t || !*t || (*t)->grad_fn) continue;
    set_history(*t, std::make_shared<PlannedNode>(plan.history_name.at(s)));
  }
}

void bind_replay_backward(py::module_& m) {
  py::class_<BackwardPlan, std::shared_ptr<BackwardPlan>>(m, "_BackwardPlan")
      .def("__len__", [](const BackwardPlan& p) { return p.entries.size(); })
      // Note [A reshape's gradient written into its slice's window]: how many reshape entries write through
      .def_property_readonly("reshapes_into_slices", [](const BackwardPlan& p) {
        return std::count_if(p.into_slice.begin(), p.into_slice.end(), [](int64_t j) { return j >= 0; });
      });
  // Note [The backward as a recorded program]: the plan of the backward from the roots, or a str: why none.
  // slots: (slot, tensor) for every tensor the recording has a slot for; inputs: the arguments' and externals'.
  m.def("_plan_backward", [](const std::vector<std::pair<int64_t, Tensor>>& slots, const std::vector<int64_t>& inputs,
                             const std::vector<int64_t>& roots, const std::vector<int64_t>& grads) -> py::object {
    auto plan = make_plan(slots, inputs, roots, grads);
    if (auto* why = std::get_if<std::string>(&plan)) return py::str(*why);
    return py::cast(std::get<std::shared_ptr<BackwardPlan>>(plan));
  }, py::arg("slots"), py::arg("inputs"), py::arg("roots"), py::arg("grads"));
  // (bench/ profiles) turns plan_run's per-entry timing on or off; returns the table so far {name: (seconds,
  // entries)} and clears it
  m.def("_plan_profile", [](bool on) {
    g_plan_profile = on;
    py::dict out;
    for (const auto& [name, v] : g_plan_times) out[py::str(name)] = py::make_tuple(v.first, v.second);
    g_plan_times.clear();
    return out;
  }, py::arg("on"));
}

}  // namespace dyngrad
