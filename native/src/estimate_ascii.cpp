// Drivers: pure-ASCII stretches go to a vectorized kernel when the CPU has one (AVX-512 first,
// else AVX2); every other run (non-ASCII characters, and runs the kernel hands back) goes to the
// scalar walker. Each call starts at a run boundary, so the pieces the two see never overlap.
#include <cstdlib>
#include <cstring>
#include <new>
#include <vector>

#include "estimate_impl.hpp"

namespace latch {
namespace detail {

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
bool avx512_kernel_supported() noexcept;
// The kernel's table for `w` when the profile's piece prices fit its int16 table, else null.
const void* avx512_kernel_weights(const int* w) noexcept;
std::int64_t units_ascii_avx512(const std::uint8_t* text, std::size_t len, std::size_t from, const void* kernel,
                                std::size_t* stop);
bool avx2_kernel_supported() noexcept;
const void* avx2_kernel_weights(const int* w) noexcept;
std::int64_t units_ascii_avx2(const std::uint8_t* text, std::size_t len, std::size_t from, const void* kernel,
                              std::size_t* stop);
#define LATCH_HAVE_KERNEL 1
#endif

namespace {

enum class Kernel { scalar, avx2, avx512 };

#ifdef LATCH_HAVE_KERNEL
// LATCH_NATIVE_KERNEL=scalar: the scalar walker even where the CPU could run a kernel (it is what
// every other CPU runs; the parity tests run it this way). LATCH_NATIVE_KERNEL=avx2: the AVX2 kernel
// even where the CPU has the AVX-512 one (so one machine tests both).
Kernel choose_kernel() noexcept {
    const char* v = std::getenv("LATCH_NATIVE_KERNEL");
    if (v != nullptr && std::strcmp(v, "scalar") == 0) {
        return Kernel::scalar;
    }
    if ((v == nullptr || std::strcmp(v, "avx2") != 0) && avx512_kernel_supported()) {
        return Kernel::avx512;
    }
    return avx2_kernel_supported() ? Kernel::avx2 : Kernel::scalar;
}

const Kernel kKernel = choose_kernel();

// The kernel's units of the ASCII stretch at `from` (see units_ascii_avx512).
std::int64_t units_ascii(const std::uint8_t* text, std::size_t len, std::size_t from, const void* kernel,
                         std::size_t* stop) {
    return kKernel == Kernel::avx512 ? units_ascii_avx512(text, len, from, kernel, stop)
                                     : units_ascii_avx2(text, len, from, kernel, stop);
}
#else
const Kernel kKernel = Kernel::scalar;
#endif

}  // namespace

bool ascii_kernel_active() noexcept { return kKernel != Kernel::scalar; }

}  // namespace detail

const char* estimator_kernel() noexcept {
    switch (detail::kKernel) {
        case detail::Kernel::avx512: return "avx512";
        case detail::Kernel::avx2: return "avx2";
        default: return "scalar";
    }
}

namespace detail {

const void* ascii_kernel_for(const int* w) noexcept {
#ifdef LATCH_HAVE_KERNEL
    switch (kKernel) {
        case Kernel::avx512: return avx512_kernel_weights(w);
        case Kernel::avx2: return avx2_kernel_weights(w);
        default: return nullptr;
    }
#else
    (void)w;
    return nullptr;
#endif
}

std::int64_t units_latin1(const std::uint8_t* text, std::size_t len, const int* w) noexcept {
    return units_latin1(text, len, w, ascii_kernel_for(w));
}

std::int64_t units_latin1(const std::uint8_t* text, std::size_t len, const int* w, const void* kernel) noexcept {
#ifdef LATCH_HAVE_KERNEL
    if (kernel != nullptr) {
        std::int64_t units = 0;
        std::size_t pos = 0;
        while (pos < len) {
            std::size_t run = pos;
            if (text[pos] < 0x80) {
                units += units_ascii(text, len, pos, kernel, &run);  // stops at a run start
                if (run == len) {
                    break;
                }
            }
            units += units_latin1_scalar(text, len, run, run + 1, w, &pos);  // exactly one run
        }
        return units;
    }
#else
    (void)kernel;
#endif
    return units_latin1_scalar(text, len, 0, len, w, nullptr);
}

#ifdef LATCH_HAVE_KERNEL
namespace {

// Stretches shorter than this stay with the walker (narrowing would cost more than it saves).
constexpr std::size_t kNarrowMin = 64;

// A latin-1 stand-in for a non-ASCII code point: the kernel only asks whether the character
// after a stretch is a LETTER, and whether the one before it is ASCII.
std::uint8_t stand_in(std::uint32_t cp) {
    static const std::uint8_t letter = [] {
        for (int b = 0x80; b < 0x100; ++b) {
            if (is_letter(latin1_classes()[b])) {
                return static_cast<std::uint8_t>(b);
            }
        }
        return std::uint8_t{0};
    }();
    static const std::uint8_t other = [] {
        for (int b = 0x80; b < 0x100; ++b) {
            if (!is_letter(latin1_classes()[b])) {
                return static_cast<std::uint8_t>(b);
            }
        }
        return std::uint8_t{0};
    }();
    return is_letter(class_of(cp)) ? letter : other;
}

template <class CharT>
std::int64_t units_wide_kernel(const CharT* text, std::size_t len, const int* w, const void* kernel) {
    const Walker<WideText<CharT>> walker{{text}, len, w};
    // text[lo, hi) as bytes: the ASCII stretch that ends at `end`, and its neighbours.
    std::vector<std::uint8_t> narrow;
    std::size_t lo = 0, hi = 0, end = 0;
    std::int64_t units = 0;
    std::size_t pos = 0;
    while (pos < len) {
        std::size_t run = pos;
        if (text[pos] < 0x80) {
            if (pos >= end || pos < lo) {  // a new stretch
                end = pos;
                while (end < len && text[end] < 0x80) {
                    ++end;
                }
                if (end - pos < kNarrowMin) {
                    units += walker.units(pos, end, &pos);  // whole runs; the last may go past `end`
                    continue;
                }
                lo = pos > 0 ? pos - 1 : 0;
                hi = end < len ? end + 1 : end;
                narrow.resize(hi - lo);
                for (std::size_t i = lo; i < hi; ++i) {
                    narrow[i - lo] = text[i] < 0x80 ? static_cast<std::uint8_t>(text[i]) : stand_in(text[i]);
                }
            }
            std::size_t stop = 0;
            units += units_ascii(narrow.data(), narrow.size(), pos - lo, kernel, &stop);
            run = lo + stop;
            if (run == len) {
                break;
            }
        }
        units += walker.units(run, run + 1, &pos);  // exactly one run
    }
    return units;
}

template <class CharT>
std::int64_t units_wide_any(const CharT* text, std::size_t len, const int* w) noexcept {
    if (const void* kernel = ascii_kernel_for(w)) {
        try {
            return units_wide_kernel(text, len, w, kernel);
        } catch (const std::bad_alloc&) {  // no scratch memory: the walker needs none
        }
    }
    return Walker<WideText<CharT>>{{text}, len, w}.units(0, len);
}

}  // namespace

std::int64_t units_wide(const std::uint16_t* text, std::size_t len, const int* w) noexcept {
    return units_wide_any(text, len, w);
}

std::int64_t units_wide(const std::uint32_t* text, std::size_t len, const int* w) noexcept {
    return units_wide_any(text, len, w);
}
#else
std::int64_t units_wide(const std::uint16_t* text, std::size_t len, const int* w) noexcept {
    return Walker<WideText<std::uint16_t>>{{text}, len, w}.units(0, len);
}

std::int64_t units_wide(const std::uint32_t* text, std::size_t len, const int* w) noexcept {
    return Walker<WideText<std::uint32_t>>{{text}, len, w}.units(0, len);
}
#endif

}  // namespace detail
}  // namespace latch
