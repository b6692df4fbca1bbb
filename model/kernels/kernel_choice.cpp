#include "model/kernels/kernel_choice.h"

#include <atomic>

namespace tinylm {
namespace {
std::atomic<Kernels> choice{Kernels::kFused};
}  // namespace

Kernels kernel_choice() { return choice.load(std::memory_order_relaxed); }
void set_kernel_choice(Kernels c) { choice.store(c, std::memory_order_relaxed); }

}  // namespace tinylm
