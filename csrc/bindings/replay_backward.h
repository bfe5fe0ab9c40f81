// replay_backward.h: the planned backward of a static replay (Note [The backward as a recorded program] in
// replay_backward.cpp). capture_bind.cpp's loop asks it whether a run may take the plan, and runs it in place of the
// recorded _run_backward step.
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common.h"
#include "dyngrad/node.h"

namespace dyngrad {

struct BackwardPlan;

// A slot's tensor during a run (null when it holds none).
using SlotReader = std::function<const Tensor*(int64_t slot)>;

// (slot, plan entry) of each output with history that gets a released grad_fn after the backward: per program,
// since variants that share a prefix share its steps' plans but not their outputs.
using PlanHeads = std::vector<std::pair<int64_t, int64_t>>;

// Note [Saved state no step returns] (replay_backward.cpp): a step before the backward whose node a plan's entry
// takes its saved state from: the entries, the slots it reads that required grad when recorded, its outputs that
// had history. Per step (no entries: none).
struct HarvestStep {
  std::vector<int64_t> entries, flip, outs;  // the live entries it makes; slots it reads; its outputs with history
};
using PlanHarvests = std::vector<HarvestStep>;

// Around such a step in the loop (in place of grad mode off): its inputs that had history require grad while it
// runs, so it makes the node it made when recorded; afterwards the plan keeps that node and the output has none.
class PlanHarvest {
 public:
  PlanHarvest(BackwardPlan& plan, const HarvestStep& step, const SlotReader& slot);
  ~PlanHarvest();
  PlanHarvest(const PlanHarvest&) = delete;
  PlanHarvest& operator=(const PlanHarvest&) = delete;

 private:
  BackwardPlan& plan_;
  const HarvestStep& step_;
  const SlotReader& slot_;
  std::vector<Tensor> flipped_;
};

// Drops the nodes PlanHarvest kept for the backward (a run that ended before it, by an exception).
void plan_drop_harvested(BackwardPlan& plan);

// Why a recorded program cannot run this plan at all (empty: it can), given its steps' kinds: `outs` per step its
// `out` (a slot, -1, -2, -3 None, -4 a value, -5 a sequence of tensors into `seq_outs`), `reads` per step the slots
// it reads, `backward` the index of the _run_backward step the plan is of, `exported` per slot whether Python reads
// it after the run. Fills `heads` and `harvests`.
std::string plan_fits(BackwardPlan& plan, const std::vector<int64_t>& outs,
                      const std::vector<std::vector<int64_t>>& seq_outs, const std::vector<std::vector<int64_t>>& reads,
                      const std::vector<std::string>& names, size_t backward, const std::vector<char>& exported,
                      PlanHeads& heads, PlanHarvests& harvests);
// Whether this run may take the plan: the state it was recorded under holds (same leaves requiring grad, no hooks,
// no anomaly mode, saved-tensor hooks or forward-AD levels, grad mode on). Read at the start of a run.
bool plan_usable(const BackwardPlan& plan, const SlotReader& slot);
// Every slot the plan reads its tensors from at a run (saved tensors, live steps' outputs, roots, leaves).
std::vector<int64_t> plan_read_slots(const BackwardPlan& plan);
// Whether the slot's tensor had history when planned (a step whose output it is made a node).
bool plan_has_history(const BackwardPlan& plan, int64_t slot);
// Runs the backward: formulas, sums and leaf accumulation in the engine's order, from the slots' tensors.
void plan_run(BackwardPlan& plan, const PlanHeads& heads, const SlotReader& slot);
// Gives each output with history (heads) a released grad_fn of its node's name (the end of plan_run).
void plan_set_heads(const BackwardPlan& plan, const PlanHeads& heads, const SlotReader& slot);

// Note [Scalar replay] (capture_bind.cpp): the plan run on one-element float32 values. producer(slot, kind, a, b):
// the op kind and forward input slots of the step whose output is `slot` (b -1 for one input), false if none.
struct ScalarBackward;
using ScalarProducer = std::function<bool(int64_t slot, OpKind& kind, int64_t& a, int64_t& b)>;
// null when the plan has a node these formulas do not cover, a given root gradient, or a node no step made
std::shared_ptr<ScalarBackward> plan_scalar(const BackwardPlan& plan, const ScalarProducer& producer);
// regs: per slot its value; slot: the leaves' tensors
void scalar_backward_run(const BackwardPlan& plan, ScalarBackward& sb, const std::vector<float>& regs,
                         const SlotReader& slot);

// A run that took the plan leaves its program after the backward (a guard missed: Python reads every slot from
// here, a sibling variant's steps or the catch-up's): every tensor that had history gets a released grad_fn of its
// node's name, not only those this program's outputs and later steps read.
void plan_departed(const BackwardPlan& plan, const SlotReader& slot);

std::shared_ptr<BackwardPlan> plan_of(py::handle obj);  // null unless obj is a _BackwardPlan
void bind_replay_backward(py::module_& m);

}  // namespace dyngrad
