// Latin-1 estimator entry (the vectorized ASCII path goes here).
#include "estimate_impl.hpp"

namespace latch {
namespace detail {

std::int64_t units_latin1(const std::uint8_t* text, std::size_t len, const int* w) noexcept {
    return units_latin1_scalar(text, len, 0, len, w);
}

}  // namespace detail
}  // namespace latch
