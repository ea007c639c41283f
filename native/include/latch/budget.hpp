// Unit-suffix budgeting (spec: "Bounded materialization", item 3). Pure C++17, no Python.
//
// Reference: latch/hotpaths/_py.py `suffix_start`. The search is Python's
// bisect_left loop verbatim (same midpoints), so both backends return the same
// index for every input, sorted or not.
#pragma once

#include <cstddef>
#include <cstdint>

namespace latch {

// A signed 128-bit integer: targets `total - budget` never overflow.
using wide_t = __int128;

// bisect_left over [lo, hi) with `get(i) -> wide_t`, exactly as CPython's bisect.
template <class Get>
std::size_t bisect_left(Get&& get, std::size_t lo, std::size_t hi, wide_t x) {
    while (lo < hi) {
        const std::size_t mid = lo + (hi - lo) / 2;
        if (get(mid) < x) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    return lo;
}

// Start index of the largest suffix of whole units fitting `budget` tokens.
// `len` = n + 1 running prefix sums (prefix[0] == 0, prefix[i] = tokens of
// units 0..i-1). Returns the minimal i with prefix[n] - prefix[i] <= budget,
// capped at n - 1 (one oversized unit is kept whole); 0 when n <= 0. O(log n).
template <class Get>
std::int64_t suffix_start_with(Get&& get, std::size_t len, wide_t budget) {
    if (len < 2) {
        return 0;
    }
    const std::size_t n = len - 1;
    const wide_t target = get(n) - budget;
    const std::size_t i = bisect_left(get, 0, len, target);
    return static_cast<std::int64_t>(i < n - 1 ? i : n - 1);
}

std::int64_t suffix_start(const std::int64_t* prefix_sums, std::size_t len, wide_t budget) noexcept;

}  // namespace latch
