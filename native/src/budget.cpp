#include "latch/budget.hpp"

namespace latch {

std::int64_t suffix_start(const std::int64_t* prefix_sums, std::size_t len, wide_t budget) noexcept {
    return suffix_start_with([prefix_sums](std::size_t i) { return static_cast<wide_t>(prefix_sums[i]); }, len,
                             budget);
}

}  // namespace latch
