// Latin-1 driver: pure-ASCII stretches go to the AVX-512 kernel when the CPU has it; every
// other run (non-ASCII characters, and runs the kernel hands back) goes to the scalar walker.
// Each call starts at a run boundary, so the pieces the two see never overlap.
#include "estimate_impl.hpp"

namespace latch {
namespace detail {

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
bool avx512_kernel_supported() noexcept;
bool avx512_kernel_usable(const int* w) noexcept;  // the profile's piece prices fit the kernel's int16 table
std::int64_t units_ascii_avx512(const std::uint8_t* text, std::size_t len, std::size_t from, const int* w,
                                std::size_t* stop);
#define LATCH_HAVE_KERNEL 1
#endif

namespace {

#ifdef LATCH_HAVE_KERNEL
const bool kKernel = avx512_kernel_supported();
#endif

}  // namespace

bool ascii_kernel_active() noexcept {
#ifdef LATCH_HAVE_KERNEL
    return kKernel;
#else
    return false;
#endif
}

std::int64_t units_latin1(const std::uint8_t* text, std::size_t len, const int* w) noexcept {
#ifdef LATCH_HAVE_KERNEL
    if (kKernel && avx512_kernel_usable(w)) {
        std::int64_t units = 0;
        std::size_t pos = 0;
        while (pos < len) {
            std::size_t run = pos;
            if (text[pos] < 0x80) {
                units += units_ascii_avx512(text, len, pos, w, &run);  // stops at a run start
                if (run == len) {
                    break;
                }
            }
            units += units_latin1_scalar(text, len, run, run + 1, w, &pos);  // exactly one run
        }
        return units;
    }
#endif
    return units_latin1_scalar(text, len, 0, len, w, nullptr);
}

}  // namespace detail
}  // namespace latch
