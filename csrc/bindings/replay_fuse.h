// replay_fuse.h: passes over a recorded static program that run a group of its steps as one (Note [Fused steps] in
// replay_fuse.cpp). capture_bind.cpp's loop asks, at each step, whether a fused group starts there.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common.h"
#include "replay_backward.h"

namespace dyngrad {

struct FusePlan;

// What the pass reads of one recorded step (capture_bind.cpp's ReplayProgram::Step).
struct FuseStepInfo {
  PyObject* fn;                            // the function called (borrowed)
  const std::string* name;                 // the _C function's name
  const std::vector<int64_t>* slots;       // per argument: its slot, or -1 for a constant
  const std::vector<py::object>* consts;   // per argument: the constant where slots[k] is -1
  int64_t out;                             // the slot of a tensor result, or the loop's codes (-3: None, ...)
  bool core;                               // the loop calls the core function itself (every argument a slot)
};

// The groups of `steps` that run fused, or null (none, or fusion off: _C._set_replay_fusion(False) or
// DYNGRAD_COMPILE_FUSE=0). reads: per step every slot it reads (sequences included); outputs: the slots the call
// returns; plan_step: the index of the planned _run_backward (SIZE_MAX: no plan; no group before it then).
// plan_reads: the slots the planned backward reads (plan_read_slots).
std::shared_ptr<FusePlan> fuse_build(const std::vector<FuseStepInfo>& steps,
                                     const std::vector<std::vector<int64_t>>& reads,
                                     const std::vector<int64_t>& outputs, size_t plan_step,
                                     const std::vector<int64_t>& plan_reads);
// At step i: runs the group that starts there and returns the index of its last step, or SIZE_MAX when none starts
// there or this run's tensors do not allow it (the loop runs step i as recorded).
// `values`: the run's C++ slot values (Note [Slots in C++]), where an earlier group's results may be made; store:
// gives a group's tensor result its slot as the loop gives a core call's.
using SlotStore = std::function<void(int64_t slot, Tensor t)>;
size_t fuse_run(FusePlan& f, size_t i, std::vector<Tensor>& values, const SlotReader& slot, const SlotStore& store);
// A run that leaves the loop for Python (a miss): the results the fused groups that ran did not make are made now
// into `values` (per slot), equal to what the recorded steps would have returned.
void fuse_restore(FusePlan& f, std::vector<Tensor>& values, const SlotReader& slot);
void fuse_end_run(FusePlan& f);  // a run ended: forget which groups ran
int64_t fuse_groups(const FusePlan* f);
int64_t fuse_runs(const FusePlan* f);  // how many times a group ran fused

bool replay_fusion_on();  // _C._set_replay_fusion's setting and DYNGRAD_COMPILE_FUSE (Note [Fused steps])
void bind_replay_fuse(py::module_& m);

}  // namespace dyngrad
