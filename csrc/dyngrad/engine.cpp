// engine.cpp: backward(). Mirrors python/dyngrad/reference/engine.py.
#include "engine.h"

#include <unordered_map>
#include <unordered_set>

#include "cycles.h"
#include "debug.h"
#include "errors.h"
#include "forward_ad.h"
#include "grad_mode.h"
#include "kernels/kernels.h"
#include "ops.h"

namespace dyngrad {

namespace {

std::atomic<uint64_t> g_next_task_id{1};

void accumulate_into(Node* node, uint32_t slot, Tensor g) { accumulate_pending(node->pending_slot(slot), std::move(g)); }

// The nodes one backward has claimed; all are released (fields reset) when it ends.
struct GraphTask {
  uint64_t id = g_next_task_id.fetch_add(1);
  std::vector<Node*> claimed;

  // true if newly claimed, false if this task already had it
  bool claim(Node* node) {
    uint64_t expected = 0;
    if (node->task_owner.compare_exchange_strong(expected, id)) {
      claimed.push_back(node);
      node->deps = 0;
      return true;
    }
    if (expected == id) return false;
    throw RuntimeError(str_cat("backward() reached ", node->name(),
                               ", which another backward() is running through right now (a graph shared between "
                               "threads, or backward() called from a hook). Backpropagate shared graphs one at a "
                               "time, with retain_graph=True, or give each thread its own graph."));
  }
  ~GraphTask() {
    for (Node* n : claimed) {
      n->pending0.reset();
      n->pending_rest.clear();
      n->deps = 0;
      n->task_owner.store(0);
    }
  }
};

// Note [Constant gradients under create_graph]: a primitive's formula is written with differentiable ops, so with
// create_graph its gradient is in the new graph whenever it depends on something that requires grad. It can come
// out constant: a piecewise-linear op's mask (relu6, hardtanh, leaky_relu, threshold, the shrinks, pools, reflect
// and replicate pads, a conv with a constant weight) times an incoming gradient that is itself constant. torch's
// backward functions take the forward input as an argument, so there the gradient still requires grad and a
// second grad gives zeros; here the second grad would raise "does not require grad". Such a gradient is therefore
// given a grad_fn whose derivative for the input it flows to is zero (ZeroDerivative, one edge). Only for ops.def
// primitives: a custom Function's backward may be computed on the host, where a constant gradient does not mean
// a zero second derivative (that must stay an error, not a silent 0). Where torch's own formula is constant too
// (x * 3, sum) the second grad gives the true zeros instead of torch's error.
struct ZeroDerivative final : Node {
  std::string of;
  ZeroDerivative(const Edge& edge, const InputMeta& meta, std::string made_by) : of(std::move(made_by)) {
    next_edges.push_back(edge);
    input_meta.push_back(meta);
    note_node_created(*this);
  }
  std::string name() const override { return of + "Backward"; }
  std::vector<Tensor> apply(std::vector<Tensor>&) override { return {zeros(input_meta[0].shape, input_meta[0].dtype)}; }
};

Tensor with_zero_derivative(const Tensor& g, const Edge& edge, const InputMeta& meta, const Node& made_by) {
  Tensor linked = alias(g);
  set_history(linked, std::make_shared<ZeroDerivative>(edge, meta, made_by.name()));
  forward_ad::copy_tangents(linked, g);   // the same value: a dual incoming gradient keeps its tangents (jvp of a vjp)
  return linked;
}

// Note [Hooks that change hooks]: the tensor hooks of the node's outputs, then retain_grad. Every list is copied
// before it runs: a hook may add or remove hooks (a push_back into the vector being iterated moved it away).
// `leaf_hooks`: false for a leaf whose gradient autograd.grad / backward(inputs=) does not ask for (torch does not
// run its AccumulateGrad at all).
void run_tensor_pre_hooks(Node* node, std::vector<Tensor>& grads, bool create_graph, bool leaf_hooks) {
  if (leaf_hooks && node->next_edges.empty() && grads[0])  // a sink: a leaf's AccumulateGrad runs the leaf's hooks
    if (auto* acc = dynamic_cast<AccumulateGrad*>(node); acc && !acc->variable->hooks.empty()) {
      std::vector<std::pair<int64_t, GradHook>> hooks = acc->variable->hooks;
      for (auto& [id, hook] : hooks) {
        Tensor replaced = hook(grads[0]);
        if (replaced) grads[0] = std::move(replaced);
      }
    }
  if (!node->pre_hooks.empty()) {
    auto hooks = node->pre_hooks;
    for (auto& [output_nr, hook] : hooks) {
      if (output_nr >= grads.size() || !grads[output_nr]) continue;
      Tensor replaced = hook.second(grads[output_nr]);
      if (replaced) grads[output_nr] = std::move(replaced);
    }
  }
  if (!node->retained.empty()) {
    auto retained = node->retained;
    for (auto& [output_nr, weak] : retained) {
      Tensor t = weak.lock();
      if (!t || output_nr >= grads.size() || !grads[output_nr]) continue;
      Tensor g = create_graph ? grads[output_nr] : contiguous_copy(grads[output_nr], grads[output_nr]->dtype);
      t->grad = t->grad ? add(t->grad, g) : g;
      note_grad_assigned(t);
    }
  }
}

void run_node_pre_hooks(Node* node, std::vector<Tensor>& grads) {
  auto hooks = node->node_pre_hooks;
  for (auto& [id, hook] : hooks) hook(grads);
}

// Note [Final callbacks]: the list of the innermost backward running on this thread.
thread_local std::vector<std::function<void()>>* tl_final_callbacks = nullptr;

struct FinalCallbacksScope {
  std::vector<std::function<void()>> callbacks;
  std::vector<std::function<void()>>* outer = tl_final_callbacks;
  FinalCallbacksScope() { tl_final_callbacks = &callbacks; }
  ~FinalCallbacksScope() { tl_final_callbacks = outer; }
  void run() {
    for (size_t i = 0; i < callbacks.size(); ++i) {  // by index: a callback may queue another
      std::function<void()> fn = std::move(callbacks[i]);
      fn();
    }
    callbacks.clear();
  }
};

}  // namespace

// Note [Gradient accumulation]: several consumers of one value each send it a gradient; they are summed in the
// node's pending slot before the node runs. When the slot holds a buffer nobody else can see (owned_buffer) and
// no graph of the backward is being built, the next gradient is added into it in place: the same k_add per
// element as add(), so the same bits, without a new allocation per consumer (an LSTM's gates have 4 consumers
// per step, an input sliced per time step has one per step). The reference engine has no such path: its sums
// are the same numbers.
// When the slot's buffer is shared but the arriving one is not (a residual add hands one gradient to both its
// inputs, so the stream's slot first holds that shared tensor, and the block's own gradient then arrives fresh),
// the sum goes into the arriving buffer instead: cur + g and g + cur are the same bits (IEEE addition commutes), so
// this is add()'s result without its new buffer.
void accumulate_pending(Tensor& cur, Tensor g) {
  if (!cur) {
    cur = std::move(g);
    return;
  }
  const bool in_place = !GradMode::is_enabled() && cur->dtype == g->dtype && cur->shape == g->shape &&
                        cur->tangents.empty() && g->tangents.empty();  // forward-AD tangents need the op
  if (in_place && owned_buffer(cur)) {
    add_into_kernel(cur, g);
  } else if (in_place && owned_buffer(g)) {
    add_into_kernel(g, cur);
    cur = std::move(g);
  } else {
    cur = add(cur, g);
  }
}

// Note [Unbroadcast]: make the gradient match the input it is for.
Tensor validate_gradient(Tensor g, const InputMeta& meta, const Node& node, size_t i) {
  if (g->shape != meta.shape) {
    try {
      g = sum_to(g, meta.shape);
    } catch (const std::exception&) {
      throw RuntimeError(str_cat(node.name(), " returned an invalid gradient for input ", i, ": got shape ",
                                 shape_str(g->shape), ", expected shape ", shape_str(meta.shape), "."));
    }
  }
  if (g->dtype != meta.dtype && is_differentiable(meta.dtype)) g = to_dtype(g, meta.dtype);  // complex to real: its real part (torch)
  return g;
}

bool owned_buffer(const Tensor& t) {
  return t.use_count() == 1 && t->storage.use_count() == 1 && !t->grad_fn && !t->requires_grad && t->offset == 0 &&
         is_floating(t->dtype) && t->is_contiguous() && !t->storage->read_only &&
         (size_t)t->numel * t->itemsize() == t->storage->nbytes;
}

void queue_callback(std::function<void()> fn) {
  if (!tl_final_callbacks)
    throw RuntimeError("queue_callback: final callbacks can only be queued while a backward pass runs (from a hook).");
  tl_final_callbacks->push_back(std::move(fn));
}

std::vector<Tensor> run_backward(const std::vector<Tensor>& roots, const std::vector<Tensor>& root_grads,
                                 const std::vector<Tensor>& inputs, const BackwardOptions& options) {
  note_backward();  // a new step for the graph-growth warning (debug.h)

  // 0. where the roots' gradients enter the graph
  std::vector<Edge> root_edges;
  std::vector<Tensor> root_values;
  for (size_t i = 0; i < roots.size(); ++i) {
    const Tensor& root = roots[i];
    Edge e = gradient_edge(root);
    if (!e.valid()) throw RuntimeError(err_no_grad_fn());
    Tensor g = i < root_grads.size() ? root_grads[i] : nullptr;
    if (!g) {
      if (root->numel != 1) throw RuntimeError(err_nonscalar_backward(shape_str(root->shape)));
      if (is_complex(root->dtype)) throw RuntimeError(err_complex_backward(dtype_name(root->dtype)));
      g = full(root->shape, 1.0, root->dtype);
    } else if (g->shape != root->shape) {
      throw RuntimeError(str_cat("backward(): the gradient has shape ", shape_str(g->shape),
                                 " but the output it is for has shape ", shape_str(root->shape), "."));
    }
    root_edges.push_back(e);
    root_values.push_back(g);
  }

  // 1. count how many gradients each node will receive (PyTorch's compute_dependencies)
  GraphTask task;
  std::vector<Node*> stack;
  for (const Edge& e : root_edges)
    if (task.claim(e.fn.get())) stack.push_back(e.fn.get());
  while (!stack.empty()) {
    Node* node = stack.back();
    stack.pop_back();
    for (const Edge& next : node->next_edges) {
      if (!next.fn) continue;
      if (task.claim(next.fn.get())) stack.push_back(next.fn.get());
      next.fn->deps += 1;
    }
  }

  // autograd.grad(): where the gradients of `inputs` will be read off
  std::vector<Tensor> captured(inputs.size());
  std::unordered_map<Node*, std::vector<std::pair<uint32_t, size_t>>> captures;
  std::vector<std::shared_ptr<Node>> keep_alive;  // accumulators made just for this call
  for (size_t i = 0; i < inputs.size(); ++i) {
    Edge e = gradient_edge(inputs[i]);
    if (!e.valid()) throw RuntimeError(str_cat("grad(): input ", i, " does not require grad."));
    keep_alive.push_back(e.fn);
    captures[e.fn.get()].push_back({e.input_nr, i});
  }

  // 2. run a node once all its gradients have arrived
  FinalCallbacksScope final_callbacks;
  {
    GradModeGuard grad_mode(options.create_graph);  // Note [Grad mode during backward]
    std::vector<Node*> ready;
    for (size_t i = 0; i < root_edges.size(); ++i)
      accumulate_into(root_edges[i].fn.get(), root_edges[i].input_nr, root_values[i]);
    for (const Edge& e : root_edges) {
      Node* node = e.fn.get();
      if (node->deps == 0) {
        node->deps = -1;  // queued once even if several roots share the node
        ready.push_back(node);
      }
    }

    std::vector<Tensor> grads;  // reused for every node: no allocation per node
    while (!ready.empty()) {
      Node* node = ready.back();
      ready.pop_back();
      grads.clear();
      grads.resize(node->num_outputs());
      if (!grads.empty()) grads[0] = std::move(node->pending0);
      for (size_t i = 1; i < grads.size() && i <= node->pending_rest.size(); ++i)
        grads[i] = std::move(node->pending_rest[i - 1]);

      bool any_grad = false;
      for (auto& g : grads) any_grad = any_grad || (g != nullptr);
      auto cap = captures.empty() ? captures.end() : captures.find(node);
      // Note [Hooks that change hooks]
      run_tensor_pre_hooks(node, grads, options.create_graph, options.accumulate || cap != captures.end());
      if (cap != captures.end())
        for (auto& [output_nr, idx] : cap->second) captured[idx] = grads[output_nr];
      if (any_grad && !node->node_pre_hooks.empty()) run_node_pre_hooks(node, grads);
      any_grad = false;
      for (auto& g : grads) any_grad = any_grad || (g != nullptr);
      bool skip = !options.accumulate && dynamic_cast<AccumulateGrad*>(node) != nullptr;
      std::vector<Tensor> outputs;
      // Note [Gradients written in place] (node.h): no graph of this backward is built, so a node may
      bool done = any_grad && !skip && !options.create_graph && !g_anomaly_mode && node->apply_in_place(grads);
      if (any_grad && !skip && !done) outputs = node->apply(grads);
      if (g_anomaly_mode) {  // Note [Anomaly mode]: only the gradients that flow on, as torch and the reference
        std::vector<Tensor> flowing(outputs.size());  // engine (BCE's gradient for its target at p = 0 is inf)
        for (size_t i = 0; i < outputs.size() && i < node->next_edges.size(); ++i)
          if (node->next_edges[i].fn) flowing[i] = outputs[i];
        check_gradients_finite(*node, flowing);
      }
      if (!options.retain_graph) node->release_saved();

      for (size_t i = 0; i < node->next_edges.size(); ++i) {
        const Edge& next = node->next_edges[i];
        if (!next.fn) continue;
        if (i < outputs.size() && outputs[i]) {
          Tensor g = validate_gradient(std::move(outputs[i]), node->input_meta[i], *node, i);
          if (options.create_graph && !g->requires_grad && dynamic_cast<OpNode*>(node))
            g = with_zero_derivative(g, next, node->input_meta[i], *node);  // Note [Constant gradients under ...]
          accumulate_into(next.fn.get(), next.input_nr, std::move(g));
        }
        if (--next.fn->deps == 0) ready.push_back(next.fn.get());
      }
    }

  }  // grad mode restored: callbacks run in the caller's
  if (!inputs.empty() && !options.allow_unused) {
    for (size_t i = 0; i < inputs.size(); ++i)
      if (!captured[i])
        throw RuntimeError(str_cat("grad(): input ", i,
                                   " was not used to compute the outputs (or no gradient reached it). Pass "
                                   "allow_unused=True if this is expected."));
  }
  final_callbacks.run();  // Note [Final callbacks]
  return captured;
}

std::vector<Tensor> vjp(const std::vector<Tensor>& outputs, const std::vector<Tensor>& cotangents,
                        const std::vector<Tensor>& inputs, uint64_t first_node) {
  std::vector<Tensor> captured(inputs.size());
  std::unordered_map<Node*, std::vector<std::pair<uint32_t, size_t>>> boundary;  // node -> (output_nr, input)
  for (size_t i = 0; i < inputs.size(); ++i)
    if (inputs[i] && inputs[i]->requires_grad) {
      Edge e = gradient_edge(inputs[i]);
      boundary[e.fn.get()].push_back({e.input_nr, i});
    }
  auto capture = [&](Node* node, uint32_t nr, const Tensor& g) {
    bool found = false;
    for (auto& [output_nr, i] : boundary[node])
      if (output_nr == nr) {
        captured[i] = captured[i] ? add(captured[i], g) : g;
        found = true;
      }
    if (!found) throw std::logic_error("vjp: the graph reaches an input's node through an edge of no input");
  };
  // A node older than first_node is a dead end: its inputs are older still, so no path through it reaches the
  // (fresh) inputs, and its gradient is dropped. A formula's graph meets such nodes where it multiplies by a tensor
  // with an outer history (Note [Tangents by transposition]: <J^T u, t> with a tangent t recorded through the
  // parameters, as an LSTM's input projection's is).
  auto fresh = [&](Node* node) { return node->sequence_nr >= first_node; };
  // 1. count the gradients each node between the outputs and the inputs will receive
  std::unordered_map<Node*, int64_t> deps;
  std::unordered_map<Node*, std::vector<Tensor>> pending;
  std::vector<Node*> stack;
  std::vector<std::pair<Edge, Tensor>> roots;
  for (size_t j = 0; j < outputs.size(); ++j) {
    if (!outputs[j] || !outputs[j]->requires_grad || j >= cotangents.size() || !cotangents[j]) continue;
    Edge e = gradient_edge(outputs[j]);
    roots.push_back({e, cotangents[j]});
    if (boundary.count(e.fn.get())) continue;  // an output that is an input
    if (!fresh(e.fn.get())) {
      roots.pop_back();
      continue;
    }
    if (deps.emplace(e.fn.get(), 0).second) stack.push_back(e.fn.get());
  }
  while (!stack.empty()) {
    Node* node = stack.back();
    stack.pop_back();
    for (const Edge& next : node->next_edges) {
      if (!next.fn || boundary.count(next.fn.get()) || !fresh(next.fn.get())) continue;
      auto [it, fresh] = deps.emplace(next.fn.get(), 0);
      if (fresh) stack.push_back(next.fn.get());
      it->second += 1;
    }
  }
  // 2. run each node once its gradients have arrived (in grad mode as the caller's: it records when that records)
  auto deliver = [&](Node* node, uint32_t nr, Tensor g) {
    if (boundary.count(node)) return capture(node, nr, g);
    std::vector<Tensor>& slots = pending[node];
    if (slots.size() < node->num_outputs()) slots.resize(node->num_outputs());
    slots[nr] = slots[nr] ? add(slots[nr], g) : std::move(g);
  };
  for (auto& [e, g] : roots) deliver(e.fn.get(), e.input_nr, g);
  std::vector<Node*> ready;
  for (auto& [node, count] : deps)
    if (count == 0) ready.push_back(node);
  const bool recording = GradMode::is_enabled();
  while (!ready.empty()) {
    Node* node = ready.back();
    ready.pop_back();
    std::vector<Tensor> grads = std::move(pending[node]);
    grads.resize(node->num_outputs());
    bool any_grad = false;
    for (auto& g : grads) any_grad = any_grad || g != nullptr;
    std::vector<Tensor> results;
    if (any_grad) results = node->apply(grads);
    if (g_anomaly_mode) check_gradients_finite(*node, results);  // Note [Anomaly mode]
    if (!recording) node->release_saved();  // recording: the result's graph may differentiate through these nodes
    for (size_t i = 0; i < node->next_edges.size(); ++i) {
      const Edge& next = node->next_edges[i];
      if (!next.fn || (!boundary.count(next.fn.get()) && !fresh(next.fn.get()))) continue;
      if (i < results.size() && results[i])
        deliver(next.fn.get(), next.input_nr, validate_gradient(std::move(results[i]), node->input_meta[i], *node, i));
      if (!boundary.count(next.fn.get()) && --deps[next.fn.get()] == 0) ready.push_back(next.fn.get());
    }
  }
  return captured;  // (each in its input's shape and dtype: validate_gradient made it so on the way)
}

}  // namespace dyngrad
