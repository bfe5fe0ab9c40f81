// cycles.h: where a reference cycle through C++ objects can close (Note [Cycles through C++]).
//
// Note [Cycles through C++]: Python's gc sees only references between Python objects. Three kinds of cycle pass
// through references held by our C++ objects, where it cannot look:
//   - a hook closure that holds a tensor whose graph reaches the hooked tensor (TensorImpl::hooks, Node::pre_hooks);
//   - a gradient with history (create_graph) whose graph saves or accumulates into its own tensor (TensorImpl::grad);
//   - a custom Function whose ctx holds one of its outputs (the node's Python objects).
// Each of these references is noted here, when it is made, as a suspect: the object holding it. The collector in
// csrc/bindings/cycles_bind.cpp (run when Python's gc collects its oldest generation, and by backward() once many
// suspects have piled up) finds every object, C++ or Python, reachable from the live suspects, counts the
// references among them (trial deletion, as CPython's gc does) and breaks the cycles that nothing outside holds,
// by dropping exactly those three kinds of reference from the garbage. Plain graphs are acyclic: an op's node
// points only at older nodes and saves outputs as history-free aliases (Note [Saving an output]).
#pragma once
#include <memory>
#include <vector>

#include "node.h"

namespace dyngrad {

void note_cycle_suspect(const Tensor& t);
void note_cycle_suspect(const std::shared_ptr<Node>& n);
// After `t->grad` was set: the gradient's history may reach `t` itself.
inline void note_grad_assigned(const Tensor& t) {
  if (t->grad && t->grad->grad_fn) note_cycle_suspect(t);
}

// Strong references to the suspects still alive (the dead ones are forgotten); resets the count below.
void live_cycle_suspects(std::vector<Tensor>& tensors, std::vector<std::shared_ptr<Node>>& nodes);
// Suspects noted since the last live_cycle_suspects().
size_t cycle_suspects_noted_since_scan();

}  // namespace dyngrad
