// Conservative token estimator (spec: "Bounded materialization"). Pure C++17, no Python.
//
// Reference: latch/hotpaths/_py.py `estimate_tokens` (its docstring is the definition);
// counts are identical for every profile and every code-point sequence, lone
// surrogates included.
#pragma once

#include <cstddef>
#include <cstdint>

namespace latch {

enum class Profile : std::uint8_t { openai = 0, anthropic = 1, cjk = 2, o200k = 3 };
constexpr int kProfileCount = 4;
extern const char* const kProfileNames[kProfileCount];

// Profile by name ("openai", "anthropic", "cjk", "o200k"); false when unknown.
bool parse_profile(const char* name, std::size_t len, Profile* out) noexcept;

// Tokens of a code-point sequence stored with 1, 2 or 4 bytes per code point
// (CPython's PEP 393 kinds; latin1 = code points 0..255). Pure and reentrant.
std::int64_t estimate_latin1(const std::uint8_t* text, std::size_t len, Profile profile) noexcept;
std::int64_t estimate_ucs2(const std::uint16_t* text, std::size_t len, Profile profile) noexcept;
// Every value must be <= 0x10FFFF (callers validate foreign input).
std::int64_t estimate_ucs4(const std::uint32_t* text, std::size_t len, Profile profile) noexcept;

// A text as stored by its owner: `len` code points of `width` bytes each (1 = latin-1, 2 = UCS-2,
// 4 = UCS-4; CPython's PEP 393 kinds).
struct TextView {
    const void* data;
    std::size_t len;
    unsigned width;
};

// Tokens of one text / of each of `n` texts into out[0..n). Texts of 512 Ki characters or more,
// and batches that large in total, are shared out across threads (exactly: see estimate.cpp).
std::int64_t estimate_view(const TextView& text, Profile profile) noexcept;
void estimate_batch(const TextView* texts, std::size_t n, Profile profile, std::int64_t* out) noexcept;

// How this process estimates pure-ASCII stretches: "avx512" (the AVX-512 kernel; the CPU has every
// instruction set it uses), "avx2" (the AVX2 kernel: a CPU with AVX2 and BMI2 but not the AVX-512
// set, or LATCH_NATIVE_KERNEL=avx2) or "scalar" (the reference's piece walk; any other CPU, or
// LATCH_NATIVE_KERNEL=scalar in the environment when the library loaded). Same counts either way.
const char* estimator_kernel() noexcept;

// Tokens of UTF-8 bytes. Encoded surrogates (ED A0 80..ED BF BF, as Python's
// "surrogatepass" writes them) count as those code points. Returns false and
// sets `*error_offset` to the first bad byte on any other malformed sequence.
// Non-ASCII input is decoded into scratch memory (std::bad_alloc on exhaustion).
bool estimate_utf8(const char* text, std::size_t len, Profile profile, std::int64_t* out,
                   std::size_t* error_offset);

}  // namespace latch
