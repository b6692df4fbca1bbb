#pragma once
// `tinylm train --nproc N`: N ranks of one job on this machine, each a copy of this binary
// with torchrun's environment. The launcher hosts their store itself (as torchrun's agent
// does, TORCHELASTIC_USE_AGENT_STORE), so that the store outlives any rank and the survivors
// can say which one was lost. It forwards SIGINT and SIGTERM to every rank (they checkpoint
// and stop together), and once one rank fails it gives the others dist_timeout_s to notice
// and stop before it kills them: no rank is left running. The ranks die with it too
// (PR_SET_PDEATHSIG), should it be killed itself.
// What it does not do: start ranks on other machines (that is torchrun's job).

#include <string>
#include <vector>

namespace tinylm {

// `rank_args`: the command line each rank runs, argv[0] first (it is executed as this
// binary). Returns the exit status for the launcher: 0 when every rank finished, 130 when
// they were interrupted, 1 when any failed.
int launch_local_ranks(int nproc, const std::vector<std::string>& rank_args, double dist_timeout_s);

// This process's command line, from /proc/self/cmdline.
std::vector<std::string> own_command_line();

}  // namespace tinylm
