// Internals of the token estimator shared by estimate.cpp, estimate_ascii.cpp and the kernels
// (estimate_avx512.cpp, estimate_avx2.cpp): the generated tables, the reference's piece walk, the
// kernels' entry.
#pragma once

#include <cstddef>
#include <cstdint>

#include "latch/estimate.hpp"

namespace latch {
namespace tables {
#include "cp_class_table.inc"
}  // namespace tables

namespace detail {

using wide_units = __int128;

inline int class_of(std::uint32_t cp) noexcept { return tables::STAGE2[tables::STAGE1[cp >> 8] * 256 + (cp & 255)]; }

// Class of code points 0..255 (256 entries).
const std::uint8_t* latin1_classes() noexcept;

// ceil(units * num / (den * UNIT)) for the profile's scale.
std::int64_t tokens_from_units(std::int64_t units, Profile p) noexcept;

// run(off, n) of the reference.
inline std::int64_t run_cost(const int* w, int off, std::size_t n) noexcept {
    return n <= 16 ? w[off + n] : w[off + 16] + static_cast<std::int64_t>(n - 16) * w[off + 17];
}

// A narrow letter (LETTER, LATIN, GREEK, HEBREW, ARABIC): its word run table, else -1.
inline int narrow_run(int k) noexcept { return tables::NARROW_RUN[k]; }
inline bool is_letter(int k) noexcept { return tables::NARROW_RUN[k] >= 0; }
// A run of n > 16 copies of the PUNCT `cp`: the table's 16, then the character's own floor.
inline std::int64_t same_run_cost(const int* w, std::size_t n, std::uint32_t cp) noexcept {
    return w[tables::OFF_PUNCT_SAME + 16] + static_cast<std::int64_t>(n - 16) * w[tables::OFF_SAME_SLOPE + cp];
}
inline bool is_word(int k) noexcept { return k == tables::LOWER || k == tables::UPPER || is_letter(k); }
inline bool joins_space(int k) noexcept { return is_word(k) || k == tables::PUNCT; }
inline bool is_ws(int k) noexcept { return k == tables::SPACE || k == tables::NEWLINE; }

// The reference's piece walk over any text, with `src.cls(i)` (class of code point i) and
// `src.cp(i)` (code point i). Step for step the loops of _py._pieces / _py._units.
template <class Src>
struct Walker {
    Src src;
    std::size_t n;  // text length (lookahead never passes it)
    const int* w;

    int cls(std::size_t i) const { return src.cls(i); }

    // Units of the pieces starting in [from, to); `from` must start a run (0, or the
    // position after a run of another kind). The last run may end after `to`;
    // `*end` receives where it ended.
    std::int64_t units(std::size_t from, std::size_t to, std::size_t* end = nullptr) const {
        using namespace tables;
        std::int64_t u = 0;
        std::size_t i = from;
        while (i < to) {
            const int k = cls(i);
            std::size_t j = i + 1;
            if (is_word(k)) {
                if constexpr (Src::kBytes) {
                    u += byte_word_run(i, &j);
                } else {
                    while (j < n && is_word(cls(j))) {
                        ++j;
                    }
                    u += word_run(i, j);
                }
            } else if (k == DIGIT) {
                while (j < n && cls(j) == DIGIT) {
                    ++j;
                }
                u += static_cast<std::int64_t>(w[OFF_DIGIT]) * static_cast<std::int64_t>((j - i + 2) / 3);
            } else if (k == PUNCT) {
                bool same = true;
                while (j < n && cls(j) == PUNCT) {
                    same = same && src.cp(j) == src.cp(i);
                    ++j;
                }
                if (j - i == 1 && j < n && is_word(cls(j))) {
                    u += w[OFF_PUNCT_JOIN];
                } else if (same && j - i > 16) {
                    u += same_run_cost(w, j - i, src.cp(i));
                } else {
                    u += run_cost(w, same && j - i >= 2 ? OFF_PUNCT_SAME : OFF_PUNCT, j - i);
                }
            } else if (is_ws(k)) {
                std::size_t after_nl = k == NEWLINE ? i + 1 : i;  // one past the last NEWLINE so far
                while (j < n && is_ws(cls(j))) {
                    if (cls(j) == NEWLINE) {
                        after_nl = j + 1;
                    }
                    ++j;
                }
                if (after_nl > i) {
                    const bool after_punct = i > 0 && cls(i - 1) == PUNCT;
                    u += run_cost(w, after_punct ? OFF_NEWLINE_PUNCT : OFF_NEWLINE, after_nl - i);
                }
                std::size_t h = j - after_nl;
                if (h != 0 && src.cp(j - 1) == 0x20 && j < n && joins_space(cls(j))) {
                    --h;
                }
                if (h != 0) {
                    u += run_cost(w, OFF_SPACE, h);
                }
            } else {
                u += w[OFF_CHAR + k];
            }
            i = j;
        }
        if (end != nullptr) {
            *end = i;
        }
        return u;
    }

    // A word run [i, j): parts of one narrow-letter class, and ASCII parts.
    std::int64_t word_run(std::size_t i, std::size_t j) const {
        std::int64_t u = 0;
        std::size_t p = i;
        while (p < j) {
            std::size_t q = p + 1;
            const int kp = cls(p);
            if (is_letter(kp)) {
                while (q < j && cls(q) == kp) {
                    ++q;
                }
                u += run_cost(w, narrow_run(kp), q - p);
            } else {
                while (q < j && !is_letter(cls(q))) {
                    ++q;
                }
                u += ascii_subwords(p, q);
            }
            p = q;
        }
        return u;
    }

    // Sub-words of the ASCII letter part [a, b): _py._ascii_subwords plus the bigram charges.
    std::int64_t ascii_subwords(std::size_t a, std::size_t b) const {
        using namespace tables;
        std::int64_t u = 0;
        std::size_t p = a;
        while (p < b) {
            std::size_t q = p;
            while (q < b && cls(q) == UPPER) {
                ++q;
            }
            int off;
            std::size_t r;
            if (q - p >= 2 || q == b) {
                if (q < b) {  // the last capital starts the next sub-word ("HTTP|Server")
                    --q;
                }
                off = OFF_WORD_CAPS;
                r = q;
            } else {
                r = q;
                while (r < b && cls(r) == LOWER) {
                    ++r;
                }
                off = q > p ? OFF_WORD_CAPITAL : OFF_WORD_LOWER;
            }
            u += run_cost(w, off, r - p) + bigrams(p, r);
            p = r;
        }
        return u;
    }

    // word_run over the whole word run starting at i, in one pass over its characters (texts of one
    // byte per character: `src.text` and `src.table`); `*end` receives where the run ended.
    std::int64_t byte_word_run(std::size_t i, std::size_t* end) const {
        using namespace tables;
        const std::uint8_t* s = src.text;
        const std::uint8_t* t = src.table;
        std::int64_t u = 0;
        std::size_t p = i;
        int k = t[s[p]];
        for (;;) {
            if (k == LOWER || k == UPPER) {
                u += byte_ascii_part(p, &p);
            } else {  // a narrow letter: the run of its class
                std::size_t q = p + 1;
                while (q < n && t[s[q]] == k) {
                    ++q;
                }
                u += run_cost(w, narrow_run(k), q - p);
                p = q;
            }
            if (p >= n) {
                break;
            }
            k = t[s[p]];
            if (!is_word(k)) {
                break;
            }
        }
        *end = p;
        return u;
    }

    // ascii_subwords over the ASCII letter part starting at p (LOWER or UPPER), its sub-words
    // found and their bigrams charged in one pass; `*end` receives where the part ended.
    std::int64_t byte_ascii_part(std::size_t p, std::size_t* end) const {
        using namespace tables;
        const std::uint8_t* s = src.text;
        const std::uint8_t* t = src.table;
        std::int64_t u = 0;
        for (;;) {  // p starts a sub-word
            std::size_t r = p + 1;
            std::int64_t bg = 0;
            int off = OFF_WORD_LOWER;
            if (t[s[p]] == UPPER) {
                while (r < n && t[s[r]] == UPPER) {
                    bg += pair(s[r - 1], s[r]);
                    ++r;
                }
                const bool lower_next = r < n && t[s[r]] == LOWER;
                if (!lower_next) {  // capitals to the end of the part
                    u += run_cost(w, OFF_WORD_CAPS, r - p) + bg;
                    p = r;
                    break;
                }
                if (r - p >= 2) {  // the last capital starts the next sub-word ("HTTP|Server")
                    --r;
                    u += run_cost(w, OFF_WORD_CAPS, r - p) + bg - pair(s[r - 1], s[r]);
                    p = r;
                    continue;
                }
                off = OFF_WORD_CAPITAL;
            }
            while (r < n && t[s[r]] == LOWER) {
                bg += pair(s[r - 1], s[r]);
                ++r;
            }
            u += run_cost(w, off, r - p) + bg;
            p = r;
            if (r >= n || t[s[r]] != UPPER) {
                break;
            }
        }
        *end = p;
        return u;
    }

    // The bigram charge of the ASCII letters x then y.
    std::int64_t pair(std::uint32_t x, std::uint32_t y) const {
        return w[tables::OFF_BIGRAM + tables::BIGRAM[((x | 32) - 97) * 26 + ((y | 32) - 97)]];
    }

    // Bigram charges of the adjacent letter pairs inside the ASCII sub-word [a, b).
    std::int64_t bigrams(std::size_t a, std::size_t b) const {
        std::int64_t u = 0;
        for (std::size_t m = a; m + 1 < b; ++m) {
            const std::uint32_t x = (src.cp(m) | 32) - 97;
            const std::uint32_t y = (src.cp(m + 1) | 32) - 97;
            u += w[tables::OFF_BIGRAM + tables::BIGRAM[x * 26 + y]];
        }
        return u;
    }
};

// Latin-1 text: one byte per character, classes from latin1_classes().
struct Latin1Text {
    static constexpr bool kBytes = true;
    const std::uint8_t* text;
    const std::uint8_t* table;
    int cls(std::size_t i) const { return table[text[i]]; }
    std::uint32_t cp(std::size_t i) const { return text[i]; }
};

template <class CharT>
struct WideText {
    static constexpr bool kBytes = false;
    const CharT* text;
    int cls(std::size_t i) const { return class_of(text[i]); }
    std::uint32_t cp(std::size_t i) const { return text[i]; }
};

// Units of the pieces of latin-1 text starting in [from, to) (scalar walker; `from` starts a
// run); `*end` (optional) receives where the last run ended.
std::int64_t units_latin1_scalar(const std::uint8_t* text, std::size_t len, std::size_t from, std::size_t to,
                                 const int* w, std::size_t* end) noexcept;

// Units of a whole latin-1 text (a vectorized kernel over ASCII stretches when the CPU has one).
std::int64_t units_latin1(const std::uint8_t* text, std::size_t len, const int* w) noexcept;
// The same with `kernel` = ascii_kernel_for(w), looked up once for many texts.
std::int64_t units_latin1(const std::uint8_t* text, std::size_t len, const int* w, const void* kernel) noexcept;

// The active kernel's table for the weights `w` (one of PROFILE_WEIGHTS), or null when this CPU
// has no kernel or the weights do not fit it.
const void* ascii_kernel_for(const int* w) noexcept;

// Units of a whole UCS-2 / UCS-4 text (long ASCII stretches narrowed into bytes for the
// kernel when the CPU has it). Scratch memory; std::bad_alloc falls back to the walker.
std::int64_t units_wide(const std::uint16_t* text, std::size_t len, const int* w) noexcept;
std::int64_t units_wide(const std::uint32_t* text, std::size_t len, const int* w) noexcept;

// Whether units_latin1 uses a vectorized kernel (AVX-512 or AVX2) on this CPU.
bool ascii_kernel_active() noexcept;

}  // namespace detail
}  // namespace latch
