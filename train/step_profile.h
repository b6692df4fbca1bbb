#pragma once
// Where a training step's time goes: LibTorch's own profiler (Kineto, CPU) over a few
// steps, every operator's self time (its time less its children's) summed into categories.
// An operator's category is that of the innermost tinylm scope around it (RECORD_USER_SCOPE
// "tinylm::norm" and the like, in the modules); a backward operator takes the category of
// the forward operator that made its autograd node (matched by sequence number); anything
// else goes by its own name. Not a timer for tests: it reports, it does not judge.

#include <functional>
#include <string>
#include <vector>

namespace tinylm {

// The categories, in report order. The scopes in the code are "tinylm::" + one of them.
const std::vector<std::string>& profile_categories();

struct ProfiledOp {
  std::string name;      // "aten::mm"
  std::string category;  // one of profile_categories()
  double ms = 0.0;       // self time per step
  int64_t calls = 0;     // per step
};

struct StepProfile {
  std::vector<std::pair<std::string, double>> categories;  // ms per step, every category
  std::vector<ProfiledOp> ops;                             // by self time, largest first
  double total_ms = 0.0;  // per step: the operators' time (the sum of the categories)
  double wall_ms = 0.0;   // per step: the wall time under the profiler, which adds its own cost
};

// Runs `step` `steps` times under the profiler (after one unprofiled warm-up).
StepProfile profile_steps(const std::function<void()>& step, int steps);

// The category an operator without a scope falls in, by its name.
std::string category_of_op(const std::string& name);

}  // namespace tinylm
