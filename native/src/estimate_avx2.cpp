// AVX2 kernel for pure-ASCII stretches of the token estimator (x86-64 with AVX2, BMI1, BMI2 and
// POPCNT, e.g. Haswell and later, Zen 1 and later; chosen at run time when the CPU lacks the
// AVX-512 kernel's sets, see estimate_ascii.cpp).
//
// The same piece algebra as the AVX-512 kernel (read its header first), one 64-byte block at a
// time: bit i of a block's masks is byte i.
//
//   1. classify: AVX2 compares give the class masks of 32 bytes at a time (VPMOVMSKB), two halves
//      to a block; the bigram class of every adjacent byte pair is a 128-byte table lookup (eight
//      VPSHUFB of 16-byte slices, chosen by a VPBLENDVB tree on the index's high bits);
//   2. pieces: the starts of all pieces (B) and four bit planes of their types, in plain 64-bit
//      integer logic from the block and its neighbours (one block back and one ahead, classified
//      one block early). "A NEWLINE follows in this whitespace run" and "a different character
//      follows in this PUNCT run" propagate a carry over the bit-reversed block and next block
//      (only when the two blocks hold such a seed at all);
//   3. prices: the type planes spread into a byte per character (VPSHUFB, VPCMPEQB), then one
//      step per piece: TZCNT and BLSR walk the starts, a piece's length is the distance from its
//      start to the next, and f[type][min(length, 16)] comes from a table (exact units past 16 on
//      a rare path);
//   4. bigrams: POPCNT of the pairs inside sub-words, per bigram class.
//
// No PEXT or PDEP: Zen 1 and Zen 2 run them in microcode. Runs that fill a whole block after the
// one they end in (whitespace or PUNCT runs of more than 64 characters) are handed back to the
// scalar walker, as the AVX-512 kernel does.
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))

#include <immintrin.h>

#include <cstring>
#include <initializer_list>

#include "estimate_kernel.hpp"

#define LATCH_AVX2 __attribute__((target("avx2,bmi,bmi2,popcnt")))

namespace latch {
namespace detail {
namespace {

using namespace tables;

constexpr int kRow = 32;  // f[type * kRow + n]: n = 0..16 (n = 0, no piece: 0 units)

// Per-profile weights laid out for the kernel (built once per profile).
struct Avx2Weights {
    std::int64_t f[N_TYPES * kRow];  // units of a piece of n <= 16 characters
    std::int64_t bigram_step[4];     // bigram[0] and bigram[c] - bigram[0] (c = 1..3)
    // BIGRAM's two bit planes (fill_bigram_planes) in 16-byte slices, each twice (both 128-bit lanes).
    alignas(32) std::uint8_t plane[2][8][32];
    const int* w;
};

void build_weights(Avx2Weights* kw, const int* w) {
    std::memset(kw, 0, sizeof(*kw));
    kw->w = w;
    for (int t = 0; t < N_TYPES; ++t) {
        for (int n = 1; n <= 16; ++n) {
            kw->f[t * kRow + n] = piece_cost(w, t, static_cast<std::size_t>(n));
        }
    }
    for (int i = 0; i < 4; ++i) {
        kw->bigram_step[i] = i == 0 ? w[OFF_BIGRAM] : static_cast<std::int64_t>(w[OFF_BIGRAM + i]) - w[OFF_BIGRAM];
    }
    std::uint8_t planes[2][128] = {};
    fill_bigram_planes(planes);
    for (int c = 0; c < 2; ++c) {
        for (int k = 0; k < 8; ++k) {
            std::memcpy(kw->plane[c][k], planes[c] + 16 * k, 16);
            std::memcpy(kw->plane[c][k] + 16, planes[c] + 16 * k, 16);
        }
    }
}

const Avx2Weights& weights_for(const int* w) {
    struct All {
        Avx2Weights kw[N_PROFILES];
        All() {
            for (int p = 0; p < N_PROFILES; ++p) {
                build_weights(&kw[p], PROFILE_WEIGHTS[p]);
            }
        }
    };
    static const All all;  // thread-safe static init
    for (int p = 0; p < N_PROFILES; ++p) {
        if (all.kw[p].w == w) {
            return all.kw[p];
        }
    }
    return all.kw[0];  // unreachable: w always comes from PROFILE_WEIGHTS
}

// The class masks of one block (bit i = byte i): L a-z, U A-Z, D 0-9, P PUNCT, WS SPACE or NEWLINE,
// N NEWLINE, SP the space character, EQ the byte equals the one before it, BG0 and BG1 the bigram
// class bits of (byte i - 1, byte i) as if both were letters.
struct Block {
    std::uint64_t L, U, D, P, WS, N, SP, EQ, BG0, BG1;
};

LATCH_AVX2 inline __m256i in_range(__m256i x, char lo, char hi) {
    const __m256i d = _mm256_sub_epi8(x, _mm256_set1_epi8(lo));
    return _mm256_cmpeq_epi8(_mm256_min_epu8(d, _mm256_set1_epi8(static_cast<char>(hi - lo))), d);
}

LATCH_AVX2 inline std::uint64_t bits(__m256i m) {
    return static_cast<std::uint32_t>(_mm256_movemask_epi8(m));
}

LATCH_AVX2 inline __m256i slice(const std::uint8_t* t, __m256i idx) {
    return _mm256_shuffle_epi8(_mm256_load_si256(reinterpret_cast<const __m256i*>(t)), idx);
}

// Byte idx (0..127) of the 128-byte table whose 16-byte slices are t[0..7].
LATCH_AVX2 inline __m256i lookup128(const std::uint8_t (*t)[32], __m256i idx, __m256i b4, __m256i b5, __m256i b6) {
    const __m256i r01 = _mm256_blendv_epi8(slice(t[0], idx), slice(t[1], idx), b4);
    const __m256i r23 = _mm256_blendv_epi8(slice(t[2], idx), slice(t[3], idx), b4);
    const __m256i r45 = _mm256_blendv_epi8(slice(t[4], idx), slice(t[5], idx), b4);
    const __m256i r67 = _mm256_blendv_epi8(slice(t[6], idx), slice(t[7], idx), b4);
    return _mm256_blendv_epi8(_mm256_blendv_epi8(r01, r23, b5), _mm256_blendv_epi8(r45, r67, b5), b6);
}

// Step 1 for the 32 bytes at x (xp = x - 1): the masks as bits `shift`..`shift` + 31 of b; returns
// the bytes >= 0x80.
LATCH_AVX2 inline std::uint64_t classify32(const Avx2Weights& kw, const std::uint8_t* x, const std::uint8_t* xp,
                                           Block& b, int shift) {
    const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x));
    const __m256i vp = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xp));
    const __m256i L = in_range(v, 'a', 'z'), U = in_range(v, 'A', 'Z'), D = in_range(v, '0', '9');
    const __m256i printable = in_range(v, '!', '~');
    const __m256i sp = _mm256_cmpeq_epi8(v, _mm256_set1_epi8(' '));
    const __m256i ws = _mm256_or_si256(sp, in_range(v, '\t', '\r'));  // \t \n \v \f \r
    const __m256i nl = _mm256_or_si256(_mm256_cmpeq_epi8(v, _mm256_set1_epi8('\n')),
                                       _mm256_cmpeq_epi8(v, _mm256_set1_epi8('\r')));
    const __m256i punct = _mm256_andnot_si256(_mm256_or_si256(_mm256_or_si256(L, U), D), printable);
    b.L |= bits(L) << shift;
    b.U |= bits(U) << shift;
    b.D |= bits(D) << shift;
    b.P |= bits(punct) << shift;
    b.WS |= bits(ws) << shift;
    b.N |= bits(nl) << shift;
    b.SP |= bits(sp) << shift;
    b.EQ |= bits(_mm256_cmpeq_epi8(v, vp)) << shift;
    // Bigram class bits: byte (prev & 31) * 4 + (byte & 31) / 8 of the planes, bit byte % 8.
    const __m256i idx = _mm256_or_si256(_mm256_and_si256(_mm256_slli_epi16(vp, 2), _mm256_set1_epi8(0x7C)),
                                        _mm256_and_si256(_mm256_srli_epi16(v, 3), _mm256_set1_epi8(0x03)));
    const __m256i b4 = _mm256_slli_epi16(idx, 3), b5 = _mm256_slli_epi16(idx, 2), b6 = _mm256_slli_epi16(idx, 1);
    const __m256i bit = _mm256_shuffle_epi8(
        _mm256_setr_epi8(1, 2, 4, 8, 16, 32, 64, -128, 1, 2, 4, 8, 16, 32, 64, -128, 1, 2, 4, 8, 16, 32, 64, -128, 1, 2,
                         4, 8, 16, 32, 64, -128),
        v);
    const __m256i c0 = lookup128(kw.plane[0], idx, b4, b5, b6), c1 = lookup128(kw.plane[1], idx, b4, b5, b6);
    b.BG0 |= bits(_mm256_cmpeq_epi8(_mm256_and_si256(c0, bit), bit)) << shift;
    b.BG1 |= bits(_mm256_cmpeq_epi8(_mm256_and_si256(c1, bit), bit)) << shift;
    return bits(v) << shift;
}

inline std::uint64_t valid_bits(std::size_t avail) { return avail >= 64 ? ~0ull : (1ull << avail) - 1; }

// Step 1 for the block at `at` (bytes past len are zero); returns its bytes >= 0x80.
LATCH_AVX2 inline std::uint64_t classify(const Avx2Weights& kw, const std::uint8_t* text, std::size_t len,
                                         std::size_t at, Block& b) {
    b = Block{};
    if (at > 0 && at + 64 <= len) {
        return classify32(kw, text + at, text + at - 1, b, 0) | classify32(kw, text + at + 32, text + at + 31, b, 32);
    }
    alignas(32) std::uint8_t buf[96] = {};  // buf[31] the byte before the block, buf[32..] the block
    if (at > 0) {
        buf[31] = text[at - 1];
    }
    std::memcpy(buf + 32, text + at, len - at < 64 ? len - at : 64);
    return classify32(kw, buf + 32, buf + 31, b, 0) | classify32(kw, buf + 64, buf + 63, b, 32);
}

inline void keep(Block& b, std::uint64_t valid) {
    for (std::uint64_t* m : {&b.L, &b.U, &b.D, &b.P, &b.WS, &b.N, &b.SP, &b.EQ, &b.BG0, &b.BG1}) {
        *m &= valid;
    }
}

inline std::uint64_t shl1(std::uint64_t x, std::uint64_t xp) { return x << 1 | xp >> 63; }  // previous character's bit
inline std::uint64_t shr1(std::uint64_t x, std::uint64_t xn) { return x >> 1 | xn << 63; }  // next character's bit

inline std::uint64_t reverse64(std::uint64_t x) {
    x = __builtin_bswap64(x);
    x = (x >> 4 & 0x0F0F0F0F0F0F0F0Full) | (x & 0x0F0F0F0F0F0F0F0Full) << 4;
    x = (x >> 2 & 0x3333333333333333ull) | (x & 0x3333333333333333ull) << 2;
    return (x >> 1 & 0x5555555555555555ull) | (x & 0x5555555555555555ull) << 1;
}

// The characters of each `run` of a block that have a seed at or after them in the same run,
// looking into the next block (rn, sn). Seeds lie in runs. Reversed, the block and the next one
// are a 128-bit number with the next block in the low half, and a carry from each seed clears the
// run before it.
inline std::uint64_t seed_at_or_after(std::uint64_t r, std::uint64_t s, std::uint64_t rn, std::uint64_t sn) {
    if ((s | sn) == 0) {
        return 0;
    }
    using u128 = unsigned __int128;
    const u128 rr = static_cast<u128>(reverse64(r)) << 64 | reverse64(rn);
    const u128 ss = static_cast<u128>(reverse64(s)) << 64 | reverse64(sn);
    const std::uint64_t hi = static_cast<std::uint64_t>((rr + ss) >> 64);
    return (r & ~reverse64(hi)) | s;
}

// Step 2's inputs besides the masks: the block's characters, and the stretch's successor's bit
// (when it is a LETTER) in this block and in the next.
struct Ends {
    std::uint64_t valid, LA, LAn;
};

struct Pieces {
    std::uint64_t B, pairs, nl;
    std::uint64_t plane[4];  // the bit planes of the piece types (see PieceType)
    bool long_run;           // the block ends in a whitespace or PUNCT run that fills the next block
};

// Step 2 for block a (p the block before, n the one after, nl_before p's NEWLINE-part mask).
inline Pieces pieces(const Block& p, const Block& a, const Block& n, std::uint64_t nl_before, const Ends& e) {
    Pieces o;
    o.long_run = ((a.WS >> 63) != 0 && n.WS == ~0ull) || ((a.P >> 63) != 0 && n.P == ~0ull);
    const std::uint64_t A = a.L | a.U, Ap = p.L | p.U, An = n.L | n.U;
    const std::uint64_t next_wa = shr1(A | e.LA, An | e.LAn);
    const std::uint64_t next_j = next_wa | shr1(a.P, n.P);

    // Words: sub-word starts; the type is decided at the start.
    const std::uint64_t prev_a = shl1(A, Ap);
    const std::uint64_t part_start = A & ~prev_a;
    const std::uint64_t next_l = shr1(a.L, n.L);
    const std::uint64_t s_capital = a.U & next_l;
    const std::uint64_t s_caps = a.U & ~next_l & (part_start | shl1(a.L, p.L));
    const std::uint64_t s_lower = a.L & part_start;

    // Digits and punctuation.
    const std::uint64_t s_digit = a.D & ~shl1(a.D, p.D);
    const std::uint64_t prev_p = shl1(a.P, p.P);
    const std::uint64_t p_start = a.P & ~prev_p;
    const std::uint64_t p_end = a.P & ~shr1(a.P, n.P);
    const std::uint64_t s_join = p_start & p_end & next_wa;
    const std::uint64_t neq = a.P & prev_p & ~a.EQ;
    const std::uint64_t neq_n = n.P & shl1(n.P, a.P) & ~n.EQ;
    const std::uint64_t mixed = seed_at_or_after(a.P, neq, n.P, neq_n);
    const std::uint64_t s_same = p_start & ~(p_end | mixed);
    const std::uint64_t s_punct = p_start & ~(s_join | s_same);

    // Whitespace: the NEWLINE part (a NEWLINE at or after, in the run), then the space part.
    const std::uint64_t nl = seed_at_or_after(a.WS, a.N, n.WS, n.N);
    const std::uint64_t nl_prev = shl1(nl, nl_before);
    const std::uint64_t ws_start = a.WS & ~shl1(a.WS, p.WS);
    const std::uint64_t ws_end = a.WS & ~shr1(a.WS, n.WS);
    const std::uint64_t s_absorbed = ws_end & a.SP & next_j;
    const std::uint64_t sp_part = a.WS & ~nl;
    const std::uint64_t s_space = ~s_absorbed & ((ws_start & sp_part) | (sp_part & nl_prev));
    const std::uint64_t nl_start = ws_start & nl;
    const std::uint64_t s_newline = nl_start & ~prev_p;
    const std::uint64_t s_nlpunct = nl_start & prev_p;
    const std::uint64_t C = e.valid & ~(A | a.D | a.P | a.WS);

    o.nl = nl;
    o.B = s_lower | s_capital | s_punct | s_newline | s_space | s_join | s_absorbed | s_caps | s_digit | s_nlpunct | C |
          s_same;
    o.plane[0] = s_capital | s_newline | s_join | s_caps | s_nlpunct | s_same;
    o.plane[1] = s_punct | s_newline | s_absorbed | s_caps | C | s_same;
    o.plane[2] = s_space | s_join | s_absorbed | s_caps;
    o.plane[3] = s_digit | s_nlpunct | C | s_same;
    o.pairs = A & prev_a & ~(s_capital | s_caps | s_lower);
    return o;
}

// 0xFF in byte i where bit i of m is set (i = 0..31).
LATCH_AVX2 inline __m256i spread(std::uint64_t m) {
    const __m256i bytes = _mm256_shuffle_epi8(
        _mm256_set1_epi32(static_cast<int>(static_cast<std::uint32_t>(m))),
        _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3));
    const __m256i bit = _mm256_setr_epi8(1, 2, 4, 8, 16, 32, 64, -128, 1, 2, 4, 8, 16, 32, 64, -128, 1, 2, 4, 8, 16, 32,
                                         64, -128, 1, 2, 4, 8, 16, 32, 64, -128);
    return _mm256_cmpeq_epi8(_mm256_and_si256(bytes, bit), bit);
}

// The type of the piece starting at each character of the block, times 16 (a byte each).
LATCH_AVX2 inline void types_of(const Pieces& o, std::uint8_t* out) {
    for (int h = 0; h < 2; ++h) {
        const int s = 32 * h;
        const __m256i t = _mm256_or_si256(
            _mm256_or_si256(_mm256_and_si256(spread(o.plane[0] >> s), _mm256_set1_epi8(16)),
                            _mm256_and_si256(spread(o.plane[1] >> s), _mm256_set1_epi8(32))),
            _mm256_or_si256(_mm256_and_si256(spread(o.plane[2] >> s), _mm256_set1_epi8(64)),
                            _mm256_and_si256(spread(o.plane[3] >> s), _mm256_set1_epi8(-128))));
        _mm256_store_si256(reinterpret_cast<__m256i*>(out + s), t);
    }
}

// Units of a piece of more than 16 characters over what the table priced (its first 16).
__attribute__((noinline, cold)) std::int64_t long_piece(const Avx2Weights& kw, unsigned t16, std::size_t n,
                                                        std::uint8_t first) {
    return piece_cost(kw.w, static_cast<int>(t16 >> 4), n, first) - kw.f[t16 * 2 + 16];
}

}  // namespace

const void* avx2_kernel_weights(const int* w) noexcept { return &weights_for(w); }

// Units of the pure-ASCII stretch that starts at `from` (a run start) and ends at the first
// non-ASCII byte or at `len`. Sets *stop to where it stopped: the stretch's end, or the start
// of a whitespace or PUNCT run longer than 64 characters (the caller walks that run).
LATCH_AVX2 std::int64_t units_ascii_avx2(const std::uint8_t* text, std::size_t len, std::size_t from,
                                         const void* kernel, std::size_t* stop) {
    const Avx2Weights& kw = *static_cast<const Avx2Weights*>(kernel);
    std::size_t end = len;  // the stretch's end once found; until then len
    bool la_word = false;   // the stretch's successor is a LETTER (it joins a PUNCT or space)
    // A block's bytes >= 0x80 end the stretch: its masks keep the characters before.
    auto settle = [&](std::size_t at, std::uint64_t high, Block& b) {
        if (high != 0) {
            end = at + static_cast<std::size_t>(__builtin_ctzll(high));
            la_word = is_letter(latin1_classes()[text[end]]);
            keep(b, valid_bits(end - at));
        }
    };
    // p: the block before (only the character before `from`, as its bit 63), a: this one, n: the next.
    Block p{}, a, n;
    const int k_before = from > 0 && text[from - 1] < 0x80 ? latin1_classes()[text[from - 1]] : -1;
    const std::uint64_t top = 1ull << 63;
    p.L = k_before == LOWER ? top : 0;
    p.U = k_before == UPPER ? top : 0;
    p.D = k_before == DIGIT ? top : 0;
    p.P = k_before == PUNCT ? top : 0;
    p.WS = k_before == SPACE || k_before == NEWLINE ? top : 0;
    std::size_t at = from;
    settle(at, classify(kw, text, len, at, a), a);
    if (end - at < 64) {
        keep(a, valid_bits(end - at));  // bytes past len (zero) are not characters
    }
    std::uint64_t nl_before = 0;  // the NEWLINE-part mask of block p
    std::size_t open_start = from;  // the piece still open (a zero-length placeholder first)
    unsigned open_t16 = 0;
    std::int64_t units = 0;
    std::int64_t n_pairs = 0, n1 = 0, n2 = 0, n3 = 0;
    alignas(32) std::uint8_t types[64];
    *stop = len;
    for (;;) {
        const std::size_t next = at + 64;
        if (next < end) {
            settle(next, classify(kw, text, len, next, n), n);
            if (end - next < 64) {
                keep(n, valid_bits(end - next));
            }
        } else {
            n = Block{};
        }
        const std::size_t rel = end - at;  // >= 1
        const Ends e{valid_bits(rel), la_word && rel < 64 ? 1ull << rel : 0,
                     la_word && rel >= 64 && rel < 128 ? 1ull << (rel - 64) : 0};
        Pieces o = pieces(p, a, n, nl_before, e);
        std::size_t stop_at = end;
        if (o.long_run) {  // stop at the long run's start; the scalar walker prices it
            const std::uint64_t other = ~((a.WS >> 63) ? a.WS : a.P) & e.valid;
            const unsigned s = other ? 64 - static_cast<unsigned>(__builtin_clzll(other)) : 0;
            const std::uint64_t below = valid_bits(s);
            o.B = (o.B & below) | (below + 1);  // the long run's start closes the piece before
            o.pairs &= below;
            stop_at = at + s;
        }
        types_of(o, types);
        for (std::uint64_t b = o.B; b != 0; b = _blsr_u64(b)) {
            const unsigned i = static_cast<unsigned>(_tzcnt_u64(b));
            const std::size_t n_chars = at + i - open_start;
            units += kw.f[open_t16 * 2 + (n_chars < 16 ? n_chars : 16)];
            if (__builtin_expect(n_chars > 16, 0)) {
                units += long_piece(kw, open_t16, n_chars, text[open_start]);
            }
            open_start = at + i;
            open_t16 = types[i];
        }
        n_pairs += _mm_popcnt_u64(o.pairs);
        n1 += _mm_popcnt_u64(o.pairs & a.BG0 & ~a.BG1);
        n2 += _mm_popcnt_u64(o.pairs & ~a.BG0 & a.BG1);
        n3 += _mm_popcnt_u64(o.pairs & a.BG0 & a.BG1);
        if (stop_at != end) {
            *stop = stop_at;
            break;
        }
        if (next >= end) {
            *stop = end;
            // The last piece closes at the end of the stretch.
            const std::size_t n_chars = end - open_start;
            units += kw.f[open_t16 * 2 + (n_chars < 16 ? n_chars : 16)];
            if (n_chars > 16) {
                units += long_piece(kw, open_t16, n_chars, text[open_start]);
            }
            break;
        }
        nl_before = o.nl;
        p = a;
        a = n;
        at = next;
    }
    // Every pair is charged bigram[0], a pair of class c >= 1 bigram[c] - bigram[0] more.
    return units + n_pairs * kw.bigram_step[0] + n1 * kw.bigram_step[1] + n2 * kw.bigram_step[2] +
           n3 * kw.bigram_step[3];
}

bool avx2_kernel_supported() noexcept {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("bmi") && __builtin_cpu_supports("bmi2") &&
           __builtin_cpu_supports("popcnt");
}

}  // namespace detail
}  // namespace latch

#endif
