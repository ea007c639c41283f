// AVX-512 kernel for pure-ASCII stretches of the token estimator (x86-64 with AVX-512 BW,
// VBMI, VBMI2 and GFNI, e.g. Ice Lake and later, Zen 4; chosen at run time, see
// estimate_ascii.cpp; every other CPU uses the scalar walker).
//
// The reference walks pieces one by one (_py._pieces). Here 64 bytes at a time become
// bitmasks (bit i = byte i): one per character class, then B, the first character of every
// piece, and four bit planes of the piece's type at that character. Every character belongs
// to exactly one piece (an absorbed space, a joined PUNCT and a CTRL character are pieces of
// their own), so a piece's length is the distance to the next start: VPCOMPRESSB packs the
// start offsets and types, and VPERMI2W looks up f[type][min(len, 16)] for all of them.
// Run-level decisions use carry propagation (a + b spreads a seed along a run of ones) and,
// for "a NEWLINE follows in this whitespace run", the same trick on bit-reversed masks over
// this block and the next. Rare cases take exact scalar paths: pieces longer than 16, PUNCT
// runs of one repeated character (priced as PUNCT, corrected at their end), and whitespace
// runs longer than 64 (handed back to the scalar walker).
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))

#include <immintrin.h>

#include <cstring>

#include "estimate_impl.hpp"

#define LATCH_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512vbmi,avx512vbmi2,gfni,bmi,bmi2,popcnt,lzcnt")))

namespace latch {
namespace detail {
namespace {

using namespace tables;

// Piece types as the kernel numbers them (at most 11: four bit planes, 17 table slots each).
enum PieceType {
    T_LOWER, T_CAPITAL, T_PUNCT, T_NEWLINE, T_SPACE, T_JOIN, T_ABSORBED, T_CAPS, T_DIGIT, T_NLPUNCT, T_CTRL,
    N_TYPES
};
constexpr int kSlots = 17;  // f[type][n] for n = 0..16

// Per-profile weights laid out for the kernel (built once per profile).
struct KernelWeights {
    alignas(64) std::int16_t f[192];  // f[type * 17 + n]: units of a piece of n <= 16 characters
    std::int64_t bigram[4];
    alignas(64) std::uint8_t bigram_plane[2][128];  // bit planes of BIGRAM: byte a*4 + b/8, bit b%8
    const int* w;
    bool usable;  // every f fits int16
};

// Exact units of a piece of `n` characters (any n) of kernel type `t`.
std::int64_t piece_cost(const int* w, int t, std::size_t n) {
    switch (t) {
        case T_LOWER: return run_cost(w, OFF_WORD_LOWER, n);
        case T_CAPITAL: return run_cost(w, OFF_WORD_CAPITAL, n);
        case T_CAPS: return run_cost(w, OFF_WORD_CAPS, n);
        case T_PUNCT: return run_cost(w, OFF_PUNCT, n);
        case T_NEWLINE: return run_cost(w, OFF_NEWLINE, n);
        case T_NLPUNCT: return run_cost(w, OFF_NEWLINE_PUNCT, n);
        case T_SPACE: return run_cost(w, OFF_SPACE, n);
        case T_DIGIT: return static_cast<std::int64_t>(w[OFF_DIGIT]) * static_cast<std::int64_t>((n + 2) / 3);
        case T_JOIN: return static_cast<std::int64_t>(w[OFF_PUNCT_JOIN]) * static_cast<std::int64_t>(n);
        case T_CTRL: return static_cast<std::int64_t>(w[OFF_CHAR + CTRL]) * static_cast<std::int64_t>(n);
        default: return 0;  // T_ABSORBED
    }
}

void build_weights(KernelWeights* kw, const int* w) {
    std::memset(kw, 0, sizeof(*kw));
    kw->w = w;
    kw->usable = true;
    for (int t = 0; t < N_TYPES; ++t) {
        for (int n = 1; n < kSlots; ++n) {
            const std::int64_t v = piece_cost(w, t, static_cast<std::size_t>(n));
            kw->usable = kw->usable && v >= -32768 && v <= 32767;
            kw->f[t * kSlots + n] = static_cast<std::int16_t>(v);
        }
    }
    for (int i = 0; i < 4; ++i) {
        kw->bigram[i] = w[OFF_BIGRAM + i];
    }
    for (int a = 0; a < 26; ++a) {
        for (int b = 0; b < 26; ++b) {
            const int cls = BIGRAM[a * 26 + b];
            for (int plane = 0; plane < 2; ++plane) {
                if ((cls >> plane) & 1) {
                    kw->bigram_plane[plane][a * 4 + b / 8] |= static_cast<std::uint8_t>(1u << (b % 8));
                }
            }
        }
    }
}

const KernelWeights& weights_for(const int* w) {
    // One table per profile, built on first use (thread-safe static init).
    struct All {
        KernelWeights kw[N_PROFILES];
        All() {
            for (int p = 0; p < N_PROFILES; ++p) {
                build_weights(&kw[p], PROFILE_WEIGHTS[p]);
            }
        }
    };
    static const All all;
    for (int p = 0; p < N_PROFILES; ++p) {
        if (all.kw[p].w == w) {
            return all.kw[p];
        }
    }
    return all.kw[0];  // unreachable: w always comes from PROFILE_WEIGHTS
}

struct Classes {
    std::uint64_t L, U, D, P, S, N, SP20, C;
};

LATCH_AVX512 inline __mmask64 in_range(__m512i x, char lo, char hi) {
    return _mm512_cmple_epu8_mask(_mm512_sub_epi8(x, _mm512_set1_epi8(lo)), _mm512_set1_epi8(static_cast<char>(hi - lo)));
}

// Classes of 64 ASCII bytes; bits outside `valid` are 0.
LATCH_AVX512 inline Classes classify(__m512i x, std::uint64_t valid) {
    Classes c;
    const std::uint64_t ctl_ws = _cvtmask64_u64(in_range(x, 9, 13));  // \t \n \v \f \r
    c.L = _cvtmask64_u64(in_range(x, 'a', 'z')) & valid;
    c.U = _cvtmask64_u64(in_range(x, 'A', 'Z')) & valid;
    c.D = _cvtmask64_u64(in_range(x, '0', '9')) & valid;
    c.SP20 = _cvtmask64_u64(_mm512_cmpeq_epi8_mask(x, _mm512_set1_epi8(' '))) & valid;
    c.N = (_cvtmask64_u64(_mm512_cmpeq_epi8_mask(x, _mm512_set1_epi8('\n'))) |
           _cvtmask64_u64(_mm512_cmpeq_epi8_mask(x, _mm512_set1_epi8('\r')))) & valid;
    c.S = (c.SP20 | ctl_ws) & ~c.N & valid;
    c.C = ((_cvtmask64_u64(_mm512_cmplt_epu8_mask(x, _mm512_set1_epi8(0x20))) & ~ctl_ws) |
           _cvtmask64_u64(_mm512_cmpeq_epi8_mask(x, _mm512_set1_epi8(0x7F)))) & valid;
    c.P = valid & ~(c.L | c.U | c.D | c.S | c.N | c.C);
    return c;
}

// Spread each seed upward along its run of ones in `run` (seeds must lie in `run`).
// `carry` links consecutive blocks.
LATCH_AVX512 inline std::uint64_t fill(std::uint64_t seeds, std::uint64_t run, unsigned char* carry) {
    unsigned long long sum;
    *carry = _addcarry_u64(*carry, run, seeds, &sum);
    return (run & ~sum) | seeds;
}

// 128-bit bit reversal of (hi:lo) via GFNI (bits within bytes) and a byte shuffle.
LATCH_AVX512 inline void reverse128(std::uint64_t lo, std::uint64_t hi, std::uint64_t* rlo, std::uint64_t* rhi) {
    const __m128i v = _mm_set_epi64x(static_cast<long long>(hi), static_cast<long long>(lo));
    const __m128i bits = _mm_gf2p8affine_epi64_epi8(v, _mm_set1_epi64x(0x8040201008040201LL), 0);
    const __m128i r = _mm_shuffle_epi8(bits, _mm_set_epi8(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15));
    *rlo = static_cast<std::uint64_t>(_mm_cvtsi128_si64(r));
    *rhi = static_cast<std::uint64_t>(_mm_extract_epi64(r, 1));
}

inline std::uint64_t valid_bits(std::size_t avail) { return avail >= 64 ? ~0ull : (1ull << avail) - 1; }

}  // namespace

bool avx512_kernel_usable(const int* w) noexcept { return weights_for(w).usable; }

// Masks of one block that the second pass needs.
struct BlockMasks {
    std::uint64_t starts;     // B: first character of every piece
    std::uint64_t plane[4];   // bit planes of the type of the piece starting there
    std::uint64_t pairs;      // letters whose predecessor is in the same ASCII sub-word
};

// Units of the pure-ASCII stretch text[from, end) (end = len or a non-ASCII character); `from`
// starts a run. Stops early at the start of a whitespace run longer than 64 characters and
// reports it in *stop (the caller walks that run); otherwise *stop = end.
//
// Works in chunks of up to 32 blocks: pass 1 turns bytes into piece masks (carries between
// blocks are single bits), pass 2 prices the pieces and bigrams; short independent loops keep
// the out-of-order core busy and the register pressure low.
LATCH_AVX512 std::int64_t units_ascii_avx512(const std::uint8_t* text, std::size_t len, std::size_t from,
                                             std::size_t end, const int* w, std::size_t* stop) {
    const KernelWeights& kw = weights_for(w);
    // The character after the stretch: a LETTER joins a preceding single PUNCT or space.
    const bool la_word = end < len && class_of(text[end]) == LETTER;
    auto prev = [](std::uint64_t x, std::uint64_t p) { return (x << 1) | p; };
    auto next = [](std::uint64_t x, std::uint64_t n) { return (x >> 1) | (n << 63); };

    // Pass-1 state: the previous character's classes (one bit each), fill carry, last start.
    std::uint64_t pA = 0, pL = 0, pP = 0, pD = 0, pWS = 0, pNL = 0;
    if (from > 0 && text[from - 1] < 0x80) {
        const int k = latin1_classes()[text[from - 1]];
        pA = k == LOWER || k == UPPER;
        pL = k == LOWER;
        pP = k == PUNCT;
        pD = k == DIGIT;
        pWS = k == SPACE || k == NEWLINE;
    }
    unsigned char mix_carry = 0;
    std::size_t last_start = from;
    // Pass-2 state: the piece still open at the block boundary (absolute start, kernel type).
    std::size_t open_start = from;
    int open_type = T_ABSORBED;  // a zero-length placeholder before the first piece
    std::int64_t units = 0;
    std::uint64_t n_bigram[4] = {};
    __m512i acc = _mm512_setzero_si512();  // 16 x int32 partial sums of f, flushed every chunk

    const __m512i iota = _mm512_set_epi8(63, 62, 61, 60, 59, 58, 57, 56, 55, 54, 53, 52, 51, 50, 49, 48, 47, 46, 45,
                                         44, 43, 42, 41, 40, 39, 38, 37, 36, 35, 34, 33, 32, 31, 30, 29, 28, 27, 26,
                                         25, 24, 23, 22, 21, 20, 19, 18, 17, 16, 15, 14, 13, 12, 11, 10, 9, 8, 7, 6,
                                         5, 4, 3, 2, 1, 0);
    const __m512i shift1 = _mm512_set_epi8(62, 61, 60, 59, 58, 57, 56, 55, 54, 53, 52, 51, 50, 49, 48, 47, 46, 45,
                                           44, 43, 42, 41, 40, 39, 38, 37, 36, 35, 34, 33, 32, 31, 30, 29, 28, 27, 26,
                                           25, 24, 23, 22, 21, 20, 19, 18, 17, 16, 15, 14, 13, 12, 11, 10, 9, 8, 7, 6,
                                           5, 4, 3, 2, 1, 0, 0);
    const __m512i up1w = _mm512_set_epi16(30, 29, 28, 27, 26, 25, 24, 23, 22, 21, 20, 19, 18, 17, 16, 15, 14, 13,
                                          12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0, 0);

    constexpr int kChunk = 32;
    BlockMasks blk[kChunk];
    std::size_t base = from;
    std::uint64_t vcur = valid_bits(end - base);
    Classes cur = classify(_mm512_maskz_loadu_epi8(static_cast<__mmask64>(vcur), text + base), vcur);
    *stop = end;
    bool stopped = false;

    while (base < end && !stopped) {
        // ---- pass 1: piece masks of up to kChunk blocks --------------------------------------
        const std::size_t chunk_base = base;
        int nb = 0;
        while (nb < kChunk && base < end) {
            const std::size_t nbase = base + 64;
            const std::uint64_t vnxt = nbase < end ? valid_bits(end - nbase) : 0;
            const Classes nxt =
                classify(_mm512_maskz_loadu_epi8(static_cast<__mmask64>(vnxt), text + (vnxt ? nbase : base)), vnxt);
            std::uint64_t la_cur = 0, la_nxt = 0;  // the stretch's successor, when it is a LETTER
            if (la_word) {
                if (end - base < 64) {
                    la_cur = 1ull << (end - base);
                } else if (end - nbase < 64) {
                    la_nxt = 1ull << (end - nbase);
                }
            }
            const std::uint64_t A = cur.L | cur.U, An = nxt.L | nxt.U;
            const std::uint64_t WS = cur.S | cur.N, WSn = nxt.S | nxt.N;
            const std::uint64_t nextWA = next(A | la_cur, An | la_nxt);
            const std::uint64_t nextJ = next(A | la_cur | cur.P, An | la_nxt | nxt.P);

            // Words: sub-word starts; the type is decided at the start.
            const std::uint64_t prevA = prev(A, pA);
            const std::uint64_t part_start = A & ~prevA;
            const std::uint64_t nextL = next(cur.L, nxt.L);
            const std::uint64_t s_capital = cur.U & nextL;
            const std::uint64_t s_caps = cur.U & ~nextL & (part_start | prev(cur.L, pL));
            const std::uint64_t s_lower = cur.L & part_start;

            // Digits and punctuation.
            const std::uint64_t s_digit = cur.D & ~prev(cur.D, pD);
            const std::uint64_t prevP = prev(cur.P, pP);
            const std::uint64_t p_start = cur.P & ~prevP;
            const std::uint64_t p_end = cur.P & ~next(cur.P, nxt.P);
            const std::uint64_t s_join = p_start & p_end & nextWA;
            std::uint64_t same_end = 0;
            if (cur.P & prevP) {  // PUNCT runs of 2+: do all their characters repeat the first?
                const __m512i xcur = _mm512_maskz_loadu_epi8(static_cast<__mmask64>(vcur), text + base);
                const __m512i xprev =
                    base > 0 ? _mm512_maskz_loadu_epi8(static_cast<__mmask64>((vcur << 1) | 1), text + base - 1)
                             : _mm512_maskz_permutexvar_epi8(static_cast<__mmask64>(~1ull), shift1, xcur);
                const std::uint64_t eq = _cvtmask64_u64(_mm512_cmpeq_epi8_mask(xcur, xprev));
                const std::uint64_t mixed = fill(cur.P & prevP & ~eq, cur.P, &mix_carry);
                same_end = p_end & ~p_start & ~mixed;
            } else {
                mix_carry = 0;
            }

            // Whitespace: the NEWLINE part is every character with a NEWLINE at or after it in
            // its run (a carry-propagation fill on bit-reversed masks of this block and the next).
            std::uint64_t limit = ~0ull;
            if ((WS >> 63) && WSn == ~0ull) {  // a whitespace run longer than 64: walk it in scalar
                const std::uint64_t non_ws = ~WS & vcur;
                const unsigned s = non_ws ? 64 - static_cast<unsigned>(_lzcnt_u64(non_ws)) : 0;
                limit = valid_bits(s);
                *stop = base + s;
                stopped = true;
            }
            std::uint64_t nl_type = 0;
            if (cur.N | nxt.N) {
                std::uint64_t r_lo, r_hi, rn_lo, rn_hi, unused;
                reverse128(WS, WSn, &r_lo, &r_hi);
                reverse128(cur.N, nxt.N, &rn_lo, &rn_hi);
                unsigned long long f_lo, f_hi;
                _addcarry_u64(_addcarry_u64(0, r_lo, rn_lo, &f_lo), r_hi, rn_hi, &f_hi);
                reverse128((r_lo & ~f_lo) | rn_lo, (r_hi & ~f_hi) | rn_hi, &nl_type, &unused);
            }
            const std::uint64_t ws_start = WS & ~prev(WS, pWS);
            const std::uint64_t s_absorbed = WS & ~next(WS, WSn) & cur.SP20 & nextJ;
            const std::uint64_t s_space =
                ((ws_start & ~nl_type) | (WS & ~nl_type & prev(nl_type, pNL))) & ~s_absorbed;
            const std::uint64_t s_newline = ws_start & nl_type & ~prevP;
            const std::uint64_t s_nlpunct = ws_start & nl_type & prevP;
            const std::uint64_t s_punct = p_start & ~s_join;

            std::uint64_t B = s_lower | s_capital | s_punct | s_newline | s_space | s_join | s_absorbed | s_caps |
                              s_digit | s_nlpunct | cur.C;
            if (stopped) {
                B = (B & limit) | (limit + 1);  // close the pieces before the long run at its start
            }
            BlockMasks& m = blk[nb++];
            m.starts = B;
            m.plane[0] = s_capital | s_newline | s_join | s_caps | s_nlpunct;  // see PieceType
            m.plane[1] = s_punct | s_newline | s_absorbed | s_caps | cur.C;
            m.plane[2] = s_space | s_join | s_absorbed | s_caps;
            m.plane[3] = s_digit | s_nlpunct | cur.C;
            m.pairs = A & prevA & ~(s_capital | s_caps | s_lower) & limit;

            // PUNCT runs of one repeated character: priced as PUNCT in pass 2, corrected here.
            for (std::uint64_t k = same_end & limit; k; k &= k - 1) {
                const unsigned i = static_cast<unsigned>(_tzcnt_u64(k));
                const std::uint64_t below = B & (i == 63 ? ~0ull : (2ull << i) - 1);
                const std::size_t s0 = below ? base + 63 - static_cast<unsigned>(_lzcnt_u64(below)) : last_start;
                const std::size_t n = base + i - s0 + 1;
                units += run_cost(w, OFF_PUNCT_SAME, n) - run_cost(w, OFF_PUNCT, n);
            }
            if (stopped) {
                break;
            }
            if (B) {
                last_start = base + 63 - static_cast<unsigned>(_lzcnt_u64(B));
            }
            pA = A >> 63;
            pL = cur.L >> 63;
            pP = cur.P >> 63;
            pD = cur.D >> 63;
            pWS = WS >> 63;
            pNL = nl_type >> 63;
            base = nbase;
            cur = nxt;
            vcur = vnxt;
        }

        // ---- pass 2: piece lengths and prices, bigrams ----------------------------------------
        const __m512i f0a = _mm512_load_si512(kw.f), f0b = _mm512_load_si512(kw.f + 32);
        const __m512i f1a = _mm512_load_si512(kw.f + 64), f1b = _mm512_load_si512(kw.f + 96);
        const __m512i f2a = _mm512_load_si512(kw.f + 128), f2b = _mm512_load_si512(kw.f + 160);
        for (int bi = 0; bi < nb; ++bi) {
            const BlockMasks& m = blk[bi];
            const std::size_t b0 = chunk_base + 64 * static_cast<std::size_t>(bi);
            const std::uint64_t B = m.starts;
            if (B) {
                __m512i tcode = _mm512_maskz_mov_epi8(static_cast<__mmask64>(m.plane[0]), _mm512_set1_epi8(1));
                tcode = _mm512_mask_add_epi8(tcode, static_cast<__mmask64>(m.plane[1]), tcode, _mm512_set1_epi8(2));
                tcode = _mm512_mask_add_epi8(tcode, static_cast<__mmask64>(m.plane[2]), tcode, _mm512_set1_epi8(4));
                tcode = _mm512_mask_add_epi8(tcode, static_cast<__mmask64>(m.plane[3]), tcode, _mm512_set1_epi8(8));
                const __m512i starts8 = _mm512_maskz_compress_epi8(static_cast<__mmask64>(B), iota);
                const __m512i types8 = _mm512_maskz_compress_epi8(static_cast<__mmask64>(B), tcode);
                const unsigned count = static_cast<unsigned>(_mm_popcnt_u64(B));
                const long long rel = static_cast<long long>(open_start) - static_cast<long long>(b0);
                short prev_start = static_cast<short>(rel < -1000 ? -1000 : rel);
                short prev_type = static_cast<short>(open_type);
                for (unsigned half = 0; half * 32 < count; ++half) {
                    const __m512i st = _mm512_cvtepu8_epi16(half ? _mm512_extracti64x4_epi64(starts8, 1)
                                                                 : _mm512_castsi512_si256(starts8));
                    const __m512i ty = _mm512_cvtepu8_epi16(half ? _mm512_extracti64x4_epi64(types8, 1)
                                                                 : _mm512_castsi512_si256(types8));
                    const __m512i pst = _mm512_mask_set1_epi16(_mm512_permutexvar_epi16(up1w, st), 1, prev_start);
                    const __m512i pty = _mm512_mask_set1_epi16(_mm512_permutexvar_epi16(up1w, ty), 1, prev_type);
                    const unsigned lanes = count - half * 32 < 32 ? count - half * 32 : 32;
                    const __mmask32 valid = static_cast<__mmask32>(lanes == 32 ? ~0u : (1u << lanes) - 1);
                    const __m512i length = _mm512_sub_epi16(st, pst);
                    const __mmask32 longer = _mm512_mask_cmpgt_epi16_mask(valid, length, _mm512_set1_epi16(16));
                    const __m512i code = _mm512_add_epi16(_mm512_add_epi16(_mm512_slli_epi16(pty, 4), pty),
                                                          _mm512_min_epi16(length, _mm512_set1_epi16(16)));
                    __m512i f = _mm512_permutex2var_epi16(f0a, code, f0b);
                    f = _mm512_mask_blend_epi16(_mm512_cmpge_epi16_mask(code, _mm512_set1_epi16(64)), f,
                                                _mm512_permutex2var_epi16(f1a, code, f1b));
                    f = _mm512_mask_blend_epi16(_mm512_cmpge_epi16_mask(code, _mm512_set1_epi16(128)), f,
                                                _mm512_permutex2var_epi16(f2a, code, f2b));
                    acc = _mm512_add_epi32(acc,
                                           _mm512_madd_epi16(_mm512_maskz_mov_epi16(valid, f), _mm512_set1_epi16(1)));
                    if (longer) {  // pieces over 16 characters: the table priced 16 of them
                        alignas(64) std::int16_t ls[32], ps[32], ts[32];
                        _mm512_store_si512(ls, length);
                        _mm512_store_si512(ps, pst);
                        _mm512_store_si512(ts, pty);
                        for (std::uint32_t k = longer; k; k &= k - 1) {
                            const unsigned j = static_cast<unsigned>(_tzcnt_u32(k));
                            const std::size_t s0 =
                                (half == 0 && j == 0) ? open_start : b0 + static_cast<std::size_t>(ps[j]);
                            const std::size_t n = b0 + static_cast<std::size_t>(ps[j] + ls[j]) - s0;
                            units += piece_cost(w, ts[j], n) - piece_cost(w, ts[j], 16);
                        }
                    }
                    if (lanes == 32 && count > 32) {  // the second half continues from lane 31
                        alignas(64) std::int16_t last[32];
                        _mm512_store_si512(last, st);
                        prev_start = last[31];
                        _mm512_store_si512(last, ty);
                        prev_type = last[31];
                    }
                }
                const unsigned top = 63 - static_cast<unsigned>(_lzcnt_u64(B));
                open_start = b0 + top;
                open_type = static_cast<int>(((m.plane[0] >> top) & 1) | ((m.plane[1] >> top) & 1) << 1 |
                                             ((m.plane[2] >> top) & 1) << 2 | ((m.plane[3] >> top) & 1) << 3);
            }
            if (m.pairs) {  // bigram class of (previous letter, letter) from two bit planes of BIGRAM
                const __m512i cur_bytes =
                    _mm512_maskz_loadu_epi8(static_cast<__mmask64>(m.pairs | m.pairs >> 1), text + b0);
                const __m512i prev_bytes =  // pairs never include bit 0 at the start of the text
                    b0 > 0 ? _mm512_maskz_loadu_epi8(static_cast<__mmask64>(m.pairs), text + b0 - 1)
                           : _mm512_maskz_permutexvar_epi8(static_cast<__mmask64>(~1ull), shift1, cur_bytes);
                const __m512i case_bit = _mm512_set1_epi8(0x20);
                const __m512i a = _mm512_sub_epi8(_mm512_or_si512(prev_bytes, case_bit), _mm512_set1_epi8('a'));
                const __m512i b = _mm512_sub_epi8(_mm512_or_si512(cur_bytes, case_bit), _mm512_set1_epi8('a'));
                const __m512i a2 = _mm512_add_epi8(a, a);
                const __m512i idx = _mm512_add_epi8(_mm512_add_epi8(a2, a2),
                                                    _mm512_and_si512(_mm512_srli_epi16(b, 3), _mm512_set1_epi8(0x1F)));
                const __m512i pow2 =
                    _mm512_broadcast_i32x4(_mm_set_epi8(0, 0, 0, 0, 0, 0, 0, 0, -128, 64, 32, 16, 8, 4, 2, 1));
                const __m512i bit = _mm512_shuffle_epi8(pow2, _mm512_and_si512(b, _mm512_set1_epi8(7)));
                const std::uint64_t k0 = _cvtmask64_u64(_mm512_test_epi8_mask(
                    _mm512_permutex2var_epi8(_mm512_load_si512(kw.bigram_plane[0]), idx,
                                             _mm512_load_si512(kw.bigram_plane[0] + 64)), bit));
                const std::uint64_t k1 = _cvtmask64_u64(_mm512_test_epi8_mask(
                    _mm512_permutex2var_epi8(_mm512_load_si512(kw.bigram_plane[1]), idx,
                                             _mm512_load_si512(kw.bigram_plane[1] + 64)), bit));
                const std::uint64_t pr = m.pairs;
                const std::uint64_t c1n = static_cast<std::uint64_t>(_mm_popcnt_u64(pr & k0 & ~k1));
                const std::uint64_t c2n = static_cast<std::uint64_t>(_mm_popcnt_u64(pr & ~k0 & k1));
                const std::uint64_t c3n = static_cast<std::uint64_t>(_mm_popcnt_u64(pr & k0 & k1));
                n_bigram[1] += c1n;
                n_bigram[2] += c2n;
                n_bigram[3] += c3n;
                n_bigram[0] += static_cast<std::uint64_t>(_mm_popcnt_u64(pr)) - c1n - c2n - c3n;
            }
        }
        units += _mm512_reduce_add_epi32(acc);  // <= 32 blocks x 4 pieces x 32767 per lane: no overflow
        acc = _mm512_setzero_si512();
    }
    if (!stopped) {  // close the last piece at the end of the stretch
        units += piece_cost(w, open_type, end - open_start);
    }
    for (int i = 0; i < 4; ++i) {
        units += static_cast<std::int64_t>(n_bigram[i]) * kw.bigram[i];
    }
    return units;
}

bool avx512_kernel_supported() noexcept {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vbmi") &&
           __builtin_cpu_supports("avx512vbmi2") && __builtin_cpu_supports("gfni") &&
           __builtin_cpu_supports("bmi2") && __builtin_cpu_supports("popcnt");
}

}  // namespace detail
}  // namespace latch

#endif
