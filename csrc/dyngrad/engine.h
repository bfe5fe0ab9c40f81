// engine.h: the backward pass. Iterative, by dependency counts (never recursion), as PyTorch's engine:
//   1. count how many gradients each node reachable from the roots will receive;
//   2. run a node once all of them have arrived (summed: Note [Gradient accumulation]), then hand its outputs on.
// Note [Unbroadcast]: formulas ignore broadcasting; the engine sums each gradient to the shape (and casts it to
// the dtype) of the input it is for, recorded in Node::input_meta.
// Note [Grad mode during backward]: backward runs with grad mode = create_graph, so with create_graph=True the
// formulas (written in differentiable ops) record the backward pass itself and gradients of gradients work.
// Note [One backward at a time]: a node's deps/pending fields belong to the backward that claimed it in phase 1;
// a second backward reaching a claimed node (another thread sharing the graph) is refused with a clear error
// instead of corrupting the counts. Claims are released when the backward ends, normally or by an exception.
// Note [Final callbacks]: code running inside a backward (a hook) may queue a callback that runs once every node
// has run, before backward() returns (torch's Variable._execution_engine.queue_callback). Data-parallel training
// uses it to wait for the gradient all-reduces that its hooks started. Callbacks run in the order queued, with the
// grad mode of the caller of backward(); one may queue another. A backward started inside a hook has its own
// list. If the backward fails, its callbacks are dropped unrun.
// Note [Hooks that change hooks]: a hook may register or remove hooks while backward runs (its own
// handle.remove() is the one-shot-hook pattern; a hook may also retain_grad() or hook another tensor). Before a
// node runs, its hooks run in torch's order: the tensor hooks of its outputs (a leaf's hooks, for an
// AccumulateGrad), retain_grad, then the node's pre-hooks. Each list is copied when it is reached, so this pass
// runs the hooks the list held at that moment (one removed meanwhile still runs, one added does not) and later
// lists and passes see the change, which is what torch does. A hook must return None or a gradient of the same
// shape and dtype (Note [Hook results] in node.h).
#pragma once
#include <functional>
#include <vector>

#include "node.h"

namespace dyngrad {

struct BackwardOptions {
  bool retain_graph = false;
  bool create_graph = false;
  // accumulate=true: backward() adds into leaves' .grad. false: autograd.grad() returns the gradients of
  // `inputs` and touches no .grad.
  bool accumulate = true;
  bool allow_unused = false;
};

// Note [Gradient accumulation] (engine.cpp): whether nobody but the pending slot holding t can see its buffer, so
// that a gradient may be added into it in place (the engine's sums, and Note [Gradients written in place]).
bool owned_buffer(const Tensor& t);
// Note [Gradient accumulation]: adds gradient g into a pending slot `cur` (empty: takes g), as the engine does; the
// planned backward of a static replay (bindings/replay_backward.cpp) sums with it too, so its bits are the engine's.
void accumulate_pending(Tensor& cur, Tensor g);
// Note [Unbroadcast]: g summed to meta's shape and cast to its dtype; `node` and `i` name it in the error.
Tensor validate_gradient(Tensor g, const InputMeta& meta, const Node& node, size_t i);

// Returns one gradient per entry of `inputs` (null where unused), empty when inputs is empty.
// Note [Final callbacks]. RuntimeError when no backward is running on this thread.
void queue_callback(std::function<void()> fn);

std::vector<Tensor> run_backward(const std::vector<Tensor>& roots, const std::vector<Tensor>& root_grads,
                                 const std::vector<Tensor>& inputs, const BackwardOptions& options);

// The vector-Jacobian product of a graph a formula has just recorded: the gradients of `inputs` (null where unused
// or not requiring grad) given `cotangents` for `outputs` (null: none), running only the nodes between them that
// were made since next_sequence_nr() was `first_node` (a formula's graph, which no backward has claimed); older
// nodes cannot lead to the inputs and are not run (their gradients are dropped). The nodes behind the inputs never run: their gradients are read off at the inputs' edges. With grad mode
// on it records, so the result is differentiable again, through the inputs' own histories. No hooks, no
// callbacks. Note [Derivatives of fused backwards] in derivatives.cpp.
std::vector<Tensor> vjp(const std::vector<Tensor>& outputs, const std::vector<Tensor>& cotangents,
                        const std::vector<Tensor>& inputs, uint64_t first_node);

}  // namespace dyngrad
