// What the vectorized kernels of the token estimator share (estimate_avx512.cpp, estimate_avx2.cpp):
// the kernel piece types and the exact units of a piece of any length.
#pragma once

#include <cstddef>
#include <cstdint>

#include "estimate_impl.hpp"

namespace latch {
namespace detail {

// Piece types as the kernels number them (at most 12: four bit planes, 16 table slots each).
enum PieceType {
    T_LOWER, T_CAPITAL, T_PUNCT, T_NEWLINE, T_SPACE, T_JOIN, T_ABSORBED, T_CAPS, T_DIGIT, T_NLPUNCT, T_CTRL, T_SAME,
    N_TYPES
};

// Exact units of a piece of `n` characters (any n) of kernel type `t` whose first byte is `first`.
inline std::int64_t piece_cost(const int* w, int t, std::size_t n, std::uint8_t first = 0) {
    using namespace tables;
    switch (t) {
        case T_LOWER: return run_cost(w, OFF_WORD_LOWER, n);
        case T_CAPITAL: return run_cost(w, OFF_WORD_CAPITAL, n);
        case T_CAPS: return run_cost(w, OFF_WORD_CAPS, n);
        case T_PUNCT: return run_cost(w, OFF_PUNCT, n);
        case T_SAME: return n <= 16 ? run_cost(w, OFF_PUNCT_SAME, n) : same_run_cost(w, n, first);
        case T_NEWLINE: return run_cost(w, OFF_NEWLINE, n);
        case T_NLPUNCT: return run_cost(w, OFF_NEWLINE_PUNCT, n);
        case T_SPACE: return run_cost(w, OFF_SPACE, n);
        case T_DIGIT: return static_cast<std::int64_t>(w[OFF_DIGIT]) * static_cast<std::int64_t>((n + 2) / 3);
        case T_JOIN: return static_cast<std::int64_t>(w[OFF_PUNCT_JOIN]) * static_cast<std::int64_t>(n);
        case T_CTRL: return static_cast<std::int64_t>(w[OFF_CHAR + CTRL]) * static_cast<std::int64_t>(n);
        default: return 0;  // T_ABSORBED
    }
}

// The bigram class of every pair of ASCII letters (a, b) as two bit planes of 128 bytes: bit (b+1) % 8
// of byte (a+1) * 4 + (b+1) / 8 of plane c is bit c of BIGRAM[a * 26 + b] (a, b = 0..25 for a..z), so
// the byte of a letter pair (x, y), either case, is (x & 31) * 4 + (y & 31) / 8 and its bit y % 8.
inline void fill_bigram_planes(std::uint8_t (*plane)[128]) {
    for (int a = 0; a < 26; ++a) {
        for (int b = 0; b < 26; ++b) {
            const int cls = tables::BIGRAM[a * 26 + b];
            for (int c = 0; c < 2; ++c) {
                if ((cls >> c) & 1) {
                    plane[c][(a + 1) * 4 + (b + 1) / 8] |= static_cast<std::uint8_t>(1u << ((b + 1) % 8));
                }
            }
        }
    }
}

}  // namespace detail
}  // namespace latch
