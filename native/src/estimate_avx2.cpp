// AVX2 kernel for pure-ASCII stretches of the token estimator (x86-64 with AVX2, BMI1, BMI2 and
// POPCNT, e.g. Haswell and later, Zen 1 and later; chosen at run time when the CPU lacks the
// AVX-512 kernel's sets, see estimate_ascii.cpp).
//
// The same piece algebra as the AVX-512 kernel (read its header first), over 64-byte blocks (bit i
// of a block's masks is byte i), in chunks of 16 blocks: each step runs over the whole chunk before
// the next starts, its results in small per-block arrays (entry 0: the block before the chunk).
//
//   1. classify (the chunk's blocks and the one after it): AVX2 compares give the class masks of
//      32 bytes at a time (VPMOVMSKB), two halves to a block; the bigram class of every adjacent
//      byte pair is a table lookup (seven VPSHUFB of 16-byte slices, chosen by a VPBLENDVB tree on
//      the index's high bits);
//   2. pieces: the starts of all pieces (B) and four bit planes of their types, from the block and
//      its neighbours, four blocks at a time: lane k of a 256-bit vector is block j + k's 64-bit
//      mask, loaded from the arrays at entry j (the neighbours: at j - 1 and j + 1), so one
//      instruction serves four blocks. "A NEWLINE follows in this whitespace run" and "a different
//      character follows in this PUNCT run" spread back from each seed through its run by six
//      doubling shifts (a run reaching the block's end takes a seed from the next block's first run
//      as its bit 63; the AVX-512 kernel adds bit-reversed masks instead: without GFNI a reversal
//      costs more);
//   3. prices: the offsets of each block's starts in order (a table of the set bits of each byte
//      of B; a loop of its own), then block by block, 32 pieces per step: a piece's length is the
//      distance from its start to the next, its type (times 16) comes from the four planes (VPSHUFB
//      of the planes' bytes, a bit test), and f[type][min(length, 16)] from two 192-byte tables, low
//      and high byte (twelve VPSHUFB and a VPBLENDVB tree each), summed by VPSADBW; pieces over 16
//      characters and the piece open across a block boundary are priced exactly on a scalar path;
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

// Where f[type][n] (n = 1..16) is in the kernel's byte tables: type * 16 XOR n, as in the AVX-512
// kernel (n = 16 is slot 0 of the partner row type ^ 1; no piece is empty), so below 192.
constexpr int slot(int t, int n) { return (t * 16) ^ n; }

// Step 1's constants: range starts and widths (in_range), single characters, bit masks, and the
// bit of each byte value % 8.
enum Konst { K_LOWER, K_UPPER, K_DIGIT, K_PRINT, K_TAB, K_W25, K_W9, K_W93, K_W4, K_SPACE, K_LF, K_CR, K_7C, K_03,
             K_BIT, N_K };

// Per-profile weights laid out for the kernel (built once per profile).
struct Avx2Weights {
    // Low and high byte of f at slot(type, n), in 16-byte slices, each twice (both 128-bit lanes).
    alignas(32) std::uint8_t f_lo[12][32];
    alignas(32) std::uint8_t f_hi[12][32];
    std::int64_t f[192];
    std::int64_t bigram_step[4];  // bigram[0] and bigram[c] - bigram[0] (c = 1..3)
    // BIGRAM's two bit planes (fill_bigram_planes) in 16-byte slices, each twice.
    alignas(32) std::uint8_t plane[2][8][32];
    // Step 1's byte constants, read from memory (as immediates the compiler rebuilt them for every block).
    alignas(32) std::uint8_t k[N_K][32];
    std::uint64_t positions[256];  // the offsets of the set bits of a byte, one byte each, lowest first
    const int* w;
    bool usable;  // every f fits 0..65535
};

void build_weights(Avx2Weights* kw, const int* w) {
    static_assert(N_TYPES * 16 <= 192, "slot() must stay below 192 (12 slices)");
    std::memset(kw, 0, sizeof(*kw));
    kw->w = w;
    kw->usable = true;
    for (int t = 0; t < N_TYPES; ++t) {
        for (int n = 1; n <= 16; ++n) {
            const std::int64_t v = piece_cost(w, t, static_cast<std::size_t>(n));
            kw->usable = kw->usable && v >= 0 && v <= 65535;
            const int i = slot(t, n);
            kw->f[i] = v;
            kw->f_lo[i / 16][i % 16] = kw->f_lo[i / 16][i % 16 + 16] = static_cast<std::uint8_t>(v & 0xFF);
            kw->f_hi[i / 16][i % 16] = kw->f_hi[i / 16][i % 16 + 16] = static_cast<std::uint8_t>((v >> 8) & 0xFF);
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
    const std::uint8_t konst[N_K] = {
        'a', 'A', '0', '!', '\t', 25, 9, '~' - '!', '\r' - '\t', ' ', '\n', '\r', 0x7C, 0x03, 0};
    for (int i = 0; i < N_K; ++i) {
        for (int j = 0; j < 32; ++j) {
            kw->k[i][j] = i == K_BIT ? static_cast<std::uint8_t>(1u << (j % 8)) : konst[i];
        }
    }
    for (int byte = 0; byte < 256; ++byte) {
        int k = 0;
        for (int bit = 0; bit < 8; ++bit) {
            if ((byte >> bit) & 1) {
                kw->positions[byte] |= static_cast<std::uint64_t>(bit) << (8 * k++);
            }
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
// class bits of (byte i - 1, byte i) as if both were letters, C any other character (CTRL, DEL).
struct Block {
    std::uint64_t L, U, D, P, WS, N, SP, EQ, BG0, BG1, C;
};

LATCH_AVX2 inline __m256i konst(const Avx2Weights& kw, Konst i) {
    return _mm256_load_si256(reinterpret_cast<const __m256i*>(kw.k[i]));
}

// The bytes of x in lo .. lo + width.
LATCH_AVX2 inline __m256i in_range(const Avx2Weights& kw, __m256i x, Konst lo, Konst width) {
    const __m256i d = _mm256_sub_epi8(x, konst(kw, lo));
    return _mm256_cmpeq_epi8(_mm256_min_epu8(d, konst(kw, width)), d);
}

LATCH_AVX2 inline std::uint64_t bits(__m256i m) {
    return static_cast<std::uint32_t>(_mm256_movemask_epi8(m));
}

LATCH_AVX2 inline __m256i slice(const std::uint8_t* t, __m256i idx) {
    return _mm256_shuffle_epi8(_mm256_load_si256(reinterpret_cast<const __m256i*>(t)), idx);
}

// Byte idx (0..111) of the 128-byte table whose 16-byte slices are t[0..7] (slice 7, idx 112..127,
// holds the rows of no letter: those lanes read slice 6 instead).
LATCH_AVX2 inline __m256i lookup112(const std::uint8_t (*t)[32], __m256i idx, __m256i b4, __m256i b5, __m256i b6) {
    const __m256i r01 = _mm256_blendv_epi8(slice(t[0], idx), slice(t[1], idx), b4);
    const __m256i r23 = _mm256_blendv_epi8(slice(t[2], idx), slice(t[3], idx), b4);
    const __m256i r45 = _mm256_blendv_epi8(slice(t[4], idx), slice(t[5], idx), b4);
    return _mm256_blendv_epi8(_mm256_blendv_epi8(r01, r23, b5), _mm256_blendv_epi8(r45, slice(t[6], idx), b5), b6);
}

// Step 1 for the 32 bytes at x (xp = x - 1): the masks as bits `shift`..`shift` + 31 of b; returns
// the bytes >= 0x80.
LATCH_AVX2 inline std::uint64_t classify32(const Avx2Weights& kw, const std::uint8_t* x, const std::uint8_t* xp,
                                           Block& b, int shift) {
    const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x));
    const __m256i vp = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xp));
    const __m256i L = in_range(kw, v, K_LOWER, K_W25), U = in_range(kw, v, K_UPPER, K_W25);
    const __m256i D = in_range(kw, v, K_DIGIT, K_W9);
    const __m256i printable = in_range(kw, v, K_PRINT, K_W93);
    const __m256i sp = _mm256_cmpeq_epi8(v, konst(kw, K_SPACE));
    const __m256i ws = _mm256_or_si256(sp, in_range(kw, v, K_TAB, K_W4));  // \t \n \v \f \r
    const __m256i nl = _mm256_or_si256(_mm256_cmpeq_epi8(v, konst(kw, K_LF)), _mm256_cmpeq_epi8(v, konst(kw, K_CR)));
    const __m256i punct = _mm256_andnot_si256(_mm256_or_si256(_mm256_or_si256(L, U), D), printable);
    b.L |= bits(L) << shift;
    b.U |= bits(U) << shift;
    b.D |= bits(D) << shift;
    b.P |= bits(punct) << shift;
    b.WS |= bits(ws) << shift;
    b.N |= bits(nl) << shift;
    b.SP |= bits(sp) << shift;
    b.C |= (~bits(_mm256_or_si256(printable, ws)) & 0xFFFFFFFFull) << shift;
    b.EQ |= bits(_mm256_cmpeq_epi8(v, vp)) << shift;
    // Bigram class bits: byte (prev & 31) * 4 + (byte & 31) / 8 of the planes, bit byte % 8.
    const __m256i idx = _mm256_or_si256(_mm256_and_si256(_mm256_slli_epi16(vp, 2), konst(kw, K_7C)),
                                        _mm256_and_si256(_mm256_srli_epi16(v, 3), konst(kw, K_03)));
    const __m256i b4 = _mm256_slli_epi16(idx, 3), b5 = _mm256_slli_epi16(idx, 2), b6 = _mm256_slli_epi16(idx, 1);
    const __m256i bit = _mm256_shuffle_epi8(konst(kw, K_BIT), v);
    // Only pairs of letters (idx 4..107) count: lookup112 is enough.
    const __m256i c0 = lookup112(kw.plane[0], idx, b4, b5, b6), c1 = lookup112(kw.plane[1], idx, b4, b5, b6);
    b.BG0 |= bits(_mm256_cmpeq_epi8(_mm256_and_si256(c0, bit), bit)) << shift;
    b.BG1 |= bits(_mm256_cmpeq_epi8(_mm256_and_si256(c1, bit), bit)) << shift;
    return bits(v) << shift;
}

inline std::uint64_t valid_bits(std::size_t avail) { return avail >= 64 ? ~0ull : (1ull << avail) - 1; }

// Step 1 for the block at `at` (bytes past len are zero); returns its bytes >= 0x80.
LATCH_AVX2 inline std::uint64_t classify(const Avx2Weights& kw, const std::uint8_t* text, std::size_t len,
                                         std::size_t at, Block& b) {
    b = Block{};
    // x: the block's 64 bytes (zeros past len), x[-1] the byte before (any value at 0: no character
    // before the text joins the first). Fixed-size copies near the ends, no call to copy.
    alignas(32) std::uint8_t buf[160];
    const std::uint8_t* x = text + at;
    if (at == 0 || at + 64 > len) {
        if (len >= 64) {  // buf[32..96) the first 64 bytes or the text's last 64, zeros after
            const std::size_t from = at == 0 ? 0 : len - 64;
            std::memcpy(buf + 32, text + from, 64);
            std::memset(buf + 96, 0, 64);
            buf[31] = 0;
            x = buf + 32 + (at - from);
        } else {
            std::memset(buf, 0, sizeof(buf));
            buf[31] = at > 0 ? text[at - 1] : 0;
            std::memcpy(buf + 32, text + at, len - at);
            x = buf + 32;
        }
    }
    return classify32(kw, x, x - 1, b, 0) | classify32(kw, x + 32, x + 31, b, 32);
}

inline void keep(Block& b, std::uint64_t valid) {
    for (std::uint64_t* m : {&b.L, &b.U, &b.D, &b.P, &b.WS, &b.N, &b.SP, &b.EQ, &b.BG0, &b.BG1, &b.C}) {
        *m &= valid;
    }
}

// Step 2 runs on four blocks at once: lane k of a vector is block j + k's 64-bit mask, loaded from
// per-class arrays of consecutive blocks, so the block before (j - 1 + k) and after (j + 1 + k) are
// the same arrays one entry off.
enum Mask { M_L, M_U, M_D, M_P, M_WS, M_N, M_SP, M_EQ, M_BG0, M_BG1, M_C, M_LA, N_MASKS };

using V = __m256i;

LATCH_AVX2 inline V vand(V a, V b) { return _mm256_and_si256(a, b); }
LATCH_AVX2 inline V vor(V a, V b) { return _mm256_or_si256(a, b); }
LATCH_AVX2 inline V vandn(V a, V b) { return _mm256_andnot_si256(b, a); }  // a & ~b
// The previous character's bit (xp: the block before) and the next character's (xn: the block after).
LATCH_AVX2 inline V shl1(V x, V xp) { return vor(_mm256_slli_epi64(x, 1), _mm256_srli_epi64(xp, 63)); }
LATCH_AVX2 inline V shr1(V x, V xn) { return vor(_mm256_srli_epi64(x, 1), _mm256_slli_epi64(xn, 63)); }

// The characters of each `run` of a block that have a seed at or after them in the same run,
// looking into the next block (rn, sn). Seeds lie in runs. A run that reaches the block's end takes
// a seed from the next block's first run as a seed at bit 63. Doubling: x[i] says a seed lies in
// [i, i + 2^k) with the run unbroken up to it, m[i] that [i, i + 2^k) lies in one run.
LATCH_AVX2 inline V seed_at_or_after(V r, V s, V rn, V sn) {
    const V lead = vandn(rn, _mm256_add_epi64(rn, _mm256_set1_epi64x(1)));  // the next block's first run
    const V no_seed = _mm256_cmpeq_epi64(vand(sn, lead), _mm256_setzero_si256());
    V x = vor(s, vandn(vand(r, _mm256_set1_epi64x(static_cast<long long>(1ull << 63))), no_seed));
    V m = r;
    x = vor(x, vand(m, _mm256_srli_epi64(x, 1)));
    m = vand(m, _mm256_srli_epi64(m, 1));
    x = vor(x, vand(m, _mm256_srli_epi64(x, 2)));
    m = vand(m, _mm256_srli_epi64(m, 2));
    x = vor(x, vand(m, _mm256_srli_epi64(x, 4)));
    m = vand(m, _mm256_srli_epi64(m, 4));
    x = vor(x, vand(m, _mm256_srli_epi64(x, 8)));
    m = vand(m, _mm256_srli_epi64(m, 8));
    x = vor(x, vand(m, _mm256_srli_epi64(x, 16)));
    m = vand(m, _mm256_srli_epi64(m, 16));
    return vor(x, vand(m, _mm256_srli_epi64(x, 32)));
}

// Step 2's results per block: the starts of all pieces (B), four bit planes of their types (see
// PieceType), the letter pairs inside sub-words (Q0) and those of bigram class 1, 2, 3 (Q1..Q3).
enum Out { O_B, O_T0, O_T1, O_T2, O_T3, O_Q0, O_Q1, O_Q2, O_Q3, N_OUTS };

// Blocks per chunk: classified first, then step 2 four at a time, then priced one by one.
constexpr int kChunk = 16;
static_assert(kChunk % 4 == 0 && kChunk + 4 <= 32, "four blocks per step; long-run flags are bits of an unsigned");
// Entry j of a per-block array is the chunk's block j - 1 (entry 0: the block before the chunk);
// step 2 reads up to entry kChunk + 4.
constexpr int kEntries = kChunk + 5;

// Entries j .. j + 3 of mask c.
LATCH_AVX2 inline V load4(const std::uint64_t (*m)[kEntries], int c, int j) {
    return _mm256_loadu_si256(reinterpret_cast<const V*>(&m[c][j]));
}

LATCH_AVX2 inline void store4(std::uint64_t (*out)[kEntries], int o, int j, V v) {
    _mm256_storeu_si256(reinterpret_cast<V*>(&out[o][j]), v);
}

// Step 2 for the chunk's blocks j .. j + 3 (array entries): the masks in m[class][entry] (M_LA: the
// stretch's successor's bit, when it is a LETTER), nl_carry lane 0 the NEWLINE-part mask of block j - 1
// (updated to that of block j + 3). Returns bit k set when block j + k ends in a whitespace or PUNCT
// run that fills the next block.
LATCH_AVX2 inline unsigned pieces4(const std::uint64_t (*m)[kEntries], std::uint64_t (*out)[kEntries], int j,
                                   V& nl_carry) {
    const V aL = load4(m, M_L, j), aU = load4(m, M_U, j), aD = load4(m, M_D, j);
    const V aP = load4(m, M_P, j), aWS = load4(m, M_WS, j);
    const V pL = load4(m, M_L, j - 1), pU = load4(m, M_U, j - 1), pD = load4(m, M_D, j - 1);
    const V pP = load4(m, M_P, j - 1), pWS = load4(m, M_WS, j - 1);
    const V nL = load4(m, M_L, j + 1), nU = load4(m, M_U, j + 1), nP = load4(m, M_P, j + 1);
    const V nWS = load4(m, M_WS, j + 1);
    const V ones = _mm256_set1_epi64x(-1), zero = _mm256_setzero_si256();
    const V long_run = vor(vand(_mm256_cmpgt_epi64(zero, aWS), _mm256_cmpeq_epi64(nWS, ones)),
                           vand(_mm256_cmpgt_epi64(zero, aP), _mm256_cmpeq_epi64(nP, ones)));
    const V A = vor(aL, aU), Ap = vor(pL, pU), An = vor(nL, nU);
    const V next_wa = shr1(vor(A, load4(m, M_LA, j)), vor(An, load4(m, M_LA, j + 1)));
    const V next_j = vor(next_wa, shr1(aP, nP));

    // Words: sub-word starts; the type is decided at the start.
    const V prev_a = shl1(A, Ap);
    const V part_start = vandn(A, prev_a);
    const V next_l = shr1(aL, nL);
    const V s_capital = vand(aU, next_l);
    const V s_caps = vand(vandn(aU, next_l), vor(part_start, shl1(aL, pL)));
    const V s_lower = vand(aL, part_start);

    // Digits and punctuation.
    const V s_digit = vandn(aD, shl1(aD, pD));
    const V prev_p = shl1(aP, pP);
    const V p_start = vandn(aP, prev_p);
    const V p_end = vandn(aP, shr1(aP, nP));
    const V s_join = vand(vand(p_start, p_end), next_wa);
    const V neq = vandn(vand(aP, prev_p), load4(m, M_EQ, j));
    const V neq_n = vandn(vand(nP, shl1(nP, aP)), load4(m, M_EQ, j + 1));
    const V mixed = seed_at_or_after(aP, neq, nP, neq_n);
    const V s_same = vandn(p_start, vor(p_end, mixed));
    const V s_punct = vandn(p_start, vor(s_join, s_same));

    // Whitespace: the NEWLINE part (a NEWLINE at or after, in the run), then the space part.
    const V nl = seed_at_or_after(aWS, load4(m, M_N, j), nWS, load4(m, M_N, j + 1));
    const V nl_rot = _mm256_permute4x64_epi64(nl, 0x93);  // lanes 3, 0, 1, 2
    const V nl_prev = shl1(nl, _mm256_blend_epi32(nl_rot, nl_carry, 0x03));
    nl_carry = nl_rot;
    const V ws_start = vandn(aWS, shl1(aWS, pWS));
    const V ws_end = vandn(aWS, shr1(aWS, nWS));
    const V s_absorbed = vand(vand(ws_end, load4(m, M_SP, j)), next_j);
    const V sp_part = vandn(aWS, nl);
    const V s_space = vandn(vor(vand(ws_start, sp_part), vand(sp_part, nl_prev)), s_absorbed);
    const V nl_start = vand(ws_start, nl);
    const V s_newline = vandn(nl_start, prev_p);
    const V s_nlpunct = vand(nl_start, prev_p);
    const V C = load4(m, M_C, j);

    const V starts_a =
        vor(vor(vor(s_lower, s_capital), vor(s_punct, s_newline)), vor(vor(s_space, s_join), s_absorbed));
    const V starts_b = vor(vor(vor(s_caps, s_digit), vor(s_nlpunct, C)), s_same);
    store4(out, O_B, j, vor(starts_a, starts_b));
    store4(out, O_T0, j, vor(vor(vor(s_capital, s_newline), vor(s_join, s_caps)), vor(s_nlpunct, s_same)));
    store4(out, O_T1, j, vor(vor(vor(s_punct, s_newline), vor(s_absorbed, s_caps)), vor(C, s_same)));
    store4(out, O_T2, j, vor(vor(s_space, s_join), vor(s_absorbed, s_caps)));
    store4(out, O_T3, j, vor(vor(s_digit, s_nlpunct), vor(C, s_same)));
    const V pairs = vandn(vand(A, prev_a), vor(vor(s_capital, s_caps), s_lower));
    const V bg0 = load4(m, M_BG0, j), bg1 = load4(m, M_BG1, j);
    store4(out, O_Q0, j, pairs);
    store4(out, O_Q1, j, vandn(vand(pairs, bg0), bg1));
    store4(out, O_Q2, j, vandn(vand(pairs, bg1), bg0));
    store4(out, O_Q3, j, vand(vand(pairs, bg0), bg1));
    return static_cast<unsigned>(_mm256_movemask_pd(_mm256_castsi256_pd(long_run)));
}

// A block's pieces for step 3.
struct Pieces {
    std::uint64_t B;
    std::uint64_t plane[4];  // the bit planes of the piece types (see PieceType)
};

LATCH_AVX2 inline __m256i slice16(const std::uint8_t (*t)[32], int k, __m256i lo4) {
    return _mm256_shuffle_epi8(_mm256_load_si256(reinterpret_cast<const __m256i*>(t[k])), lo4);
}

// Byte idx (0..191) of the 192-byte table whose 16-byte slices are t[0..11].
LATCH_AVX2 inline __m256i lookup192(const std::uint8_t (*t)[32], __m256i idx) {
    const __m256i lo4 = _mm256_and_si256(idx, _mm256_set1_epi8(0x0F));
    const __m256i b4 = _mm256_slli_epi16(idx, 3), b5 = _mm256_slli_epi16(idx, 2), b6 = _mm256_slli_epi16(idx, 1);
    const __m256i r01 = _mm256_blendv_epi8(slice16(t, 0, lo4), slice16(t, 1, lo4), b4);
    const __m256i r23 = _mm256_blendv_epi8(slice16(t, 2, lo4), slice16(t, 3, lo4), b4);
    const __m256i r45 = _mm256_blendv_epi8(slice16(t, 4, lo4), slice16(t, 5, lo4), b4);
    const __m256i r67 = _mm256_blendv_epi8(slice16(t, 6, lo4), slice16(t, 7, lo4), b4);
    const __m256i r89 = _mm256_blendv_epi8(slice16(t, 8, lo4), slice16(t, 9, lo4), b4);
    const __m256i rab = _mm256_blendv_epi8(slice16(t, 10, lo4), slice16(t, 11, lo4), b4);
    const __m256i r0_7 = _mm256_blendv_epi8(_mm256_blendv_epi8(r01, r23, b5), _mm256_blendv_epi8(r45, r67, b5), b6);
    return _mm256_blendv_epi8(r0_7, _mm256_blendv_epi8(r89, rab, b5), idx);  // bit 7
}

// The type (times 16) of the piece starting at each of 32 offsets `at` (0..63) of the block, from its planes.
LATCH_AVX2 inline __m256i types_at(const Pieces& o, __m256i at) {
    const __m256i byte = _mm256_and_si256(_mm256_srli_epi16(at, 3), _mm256_set1_epi8(0x07));
    const __m256i bit = _mm256_shuffle_epi8(
        _mm256_setr_epi8(1, 2, 4, 8, 16, 32, 64, -128, 1, 2, 4, 8, 16, 32, 64, -128, 1, 2, 4, 8, 16, 32, 64, -128, 1, 2,
                         4, 8, 16, 32, 64, -128),
        _mm256_and_si256(at, _mm256_set1_epi8(0x07)));
    __m256i t = _mm256_setzero_si256();
    for (int j = 0; j < 4; ++j) {
        const __m256i pb = _mm256_shuffle_epi8(_mm256_set1_epi64x(static_cast<long long>(o.plane[j])), byte);
        t = _mm256_or_si256(t, _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(pb, bit), bit),
                                                _mm256_set1_epi8(static_cast<char>(16 << j))));
    }
    return t;
}

// The kernel type of the piece starting at offset i of the block.
inline unsigned type_at(const Pieces& o, unsigned i) {
    return static_cast<unsigned>((o.plane[0] >> i & 1) | (o.plane[1] >> i & 1) << 1 | (o.plane[2] >> i & 1) << 2 |
                                 (o.plane[3] >> i & 1) << 3);
}

// Units of a piece of type t and n >= 1 characters starting with byte `first`.
inline std::int64_t price(const Avx2Weights& kw, unsigned t, std::size_t n, std::uint8_t first) {
    return n <= 16 ? kw.f[slot(static_cast<int>(t), static_cast<int>(n))]
                   : piece_cost(kw.w, static_cast<int>(t), n, first);
}

// What step 3 carries from block to block and adds up.
struct PriceAcc {
    std::size_t open_start;  // the piece still open at the block boundary
    unsigned open_type;
    std::int64_t units;      // pieces priced one by one
    __m256i sum_lo, sum_hi;  // the table's low and high bytes, per qword
};

// The offsets of B's bits into starts (at least 72 bytes), lowest first; returns how many.
LATCH_AVX2 inline unsigned list_starts(const Avx2Weights& kw, std::uint64_t B, std::uint8_t* starts) {
    unsigned cnt = 0;
    for (int k = 0; k < 8; ++k) {
        const unsigned byte = static_cast<unsigned>(B >> (8 * k)) & 0xFF;
        const std::uint64_t offs = kw.positions[byte] + 0x0808080808080808ull * static_cast<unsigned>(k);
        std::memcpy(starts + cnt, &offs, 8);
        cnt += static_cast<unsigned>(_mm_popcnt_u32(byte));
    }
    return cnt;
}

// Step 3 for the pieces between starts base .. base + 32 of the block at `at` (`cnt` in all; the
// bytes after them are read but not used): each from the tables, pieces over 16 characters exactly.
LATCH_AVX2 __attribute__((always_inline)) inline void price32(const Avx2Weights& kw, const std::uint8_t* text,
                                                              std::size_t at, const Pieces& o,
                                                              const std::uint8_t* starts, unsigned cnt,
                                                              unsigned base, PriceAcc& acc) {
    const __m256i iota = _mm256_setr_epi8(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21,
                                          22, 23, 24, 25, 26, 27, 28, 29, 30, 31);
    const __m256i zero = _mm256_setzero_si256();
    const __m256i s0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(starts + base));
    const __m256i s1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(starts + base + 1));
    const __m256i length = _mm256_sub_epi8(s1, s0);  // 1..63 in the pieces' lanes
    const __m256i closed = _mm256_cmpgt_epi8(_mm256_set1_epi8(static_cast<char>(cnt - 1 - base)), iota);
    const __m256i types = types_at(o, s0);
    // The table index of each closed piece; every other lane reads an absorbed space's entry (0).
    const __m256i idx = _mm256_blendv_epi8(_mm256_set1_epi8(static_cast<char>(slot(T_ABSORBED, 1))),
                                           _mm256_xor_si256(types, _mm256_min_epu8(length, _mm256_set1_epi8(16))),
                                           closed);
    acc.sum_lo = _mm256_add_epi64(acc.sum_lo, _mm256_sad_epu8(lookup192(kw.f_lo, idx), zero));
    acc.sum_hi = _mm256_add_epi64(acc.sum_hi, _mm256_sad_epu8(lookup192(kw.f_hi, idx), zero));
    // Pieces over 16 characters: the table priced 16 of them.
    const unsigned longer = static_cast<unsigned>(
        _mm256_movemask_epi8(_mm256_and_si256(closed, _mm256_cmpgt_epi8(length, _mm256_set1_epi8(16)))));
    if (__builtin_expect(longer != 0, 0)) {
        alignas(32) std::uint8_t ts[32];
        _mm256_store_si256(reinterpret_cast<__m256i*>(ts), types);
        for (unsigned q = longer; q != 0; q &= q - 1) {
            const unsigned i = static_cast<unsigned>(__builtin_ctz(q));
            const int t = ts[i] >> 4;
            const std::size_t n = static_cast<std::size_t>(starts[base + i + 1] - starts[base + i]);
            acc.units += piece_cost(kw.w, t, n, text[at + starts[base + i]]) - kw.f[slot(t, 16)];
        }
    }
}

// Step 3 for the block at `at`, from its `cnt` starts: the piece open before it closes
// at its first start, then every piece between two of its starts (at most 63: two steps of 32, not a
// loop, so the compiler keeps the tables where they are), and its last piece stays open. (The chunk's
// starts are listed in a loop of their own before pricing: list_starts' 8-byte stores cannot forward to
// the 32-byte loads here, and the two loops apart keep their values in registers.)
LATCH_AVX2 inline void price_block(const Avx2Weights& kw, const std::uint8_t* text, std::size_t at, const Pieces& o,
                                   const std::uint8_t* starts, unsigned cnt, PriceAcc& acc) {
    if (cnt == 0) {
        return;
    }
    const std::size_t first = at + starts[0];
    if (first > acc.open_start) {
        acc.units += price(kw, acc.open_type, first - acc.open_start, text[acc.open_start]);
    }
    if (cnt > 1) {
        price32(kw, text, at, o, starts, cnt, 0, acc);
        if (__builtin_expect(cnt > 33, 0)) {
            price32(kw, text, at, o, starts, cnt, 32, acc);
        }
    }
    const unsigned last = starts[cnt - 1];
    acc.open_start = at + last;
    acc.open_type = type_at(o, last);
}

// The stretch being priced: its text, and its end once a byte >= 0x80 was seen.
struct Stretch {
    const std::uint8_t* text;
    std::size_t len;
    std::size_t end;  // until then len
    bool la_word;     // the stretch's successor is a LETTER (it joins a PUNCT or space)
};

// Step 1 for the block at `at` (< st.end), its masks cut at the stretch's end.
LATCH_AVX2 __attribute__((always_inline)) inline void load_block(const Avx2Weights& kw, Stretch& st, std::size_t at,
                                                                 Block& b) {
    const std::uint64_t high = classify(kw, st.text, st.len, at, b);
    if (high != 0) {
        st.end = at + static_cast<std::size_t>(__builtin_ctzll(high));
        st.la_word = is_letter(latin1_classes()[st.text[st.end]]);
    }
    if (st.end - at < 64) {
        keep(b, valid_bits(st.end - at));  // bytes past the end (or zero padding) are not characters
    }
}

// Step 1 for the chunk whose block 0 is at `at0`: array entries `first` .. kChunk + 1 (entry j is the
// block at at0 + 64 (j - 1)). Blocks at or past the stretch's end are zero, and so are the entries
// step 2 reads past them. Returns how many of the chunk's blocks start before the end.
LATCH_AVX2 int classify_chunk(const Avx2Weights& kw, Stretch& st, std::size_t at0, int first,
                              std::uint64_t (*m)[kEntries]) {
    for (int j = first; j <= kChunk + 1; ++j) {
        const std::size_t at = at0 + 64 * static_cast<std::size_t>(j - 1);
        if (at >= st.end) {
            for (int z = j; z < kEntries && z <= j + 4; ++z) {
                for (int c = 0; c < N_MASKS; ++c) {
                    m[c][z] = 0;
                }
            }
            break;
        }
        Block b;
        load_block(kw, st, at, b);
        const std::uint64_t masks[N_MASKS] = {b.L, b.U, b.D, b.P, b.WS, b.N, b.SP, b.EQ, b.BG0, b.BG1, b.C, 0};
        for (int c = 0; c < N_MASKS; ++c) {
            m[c][j] = masks[c];
        }
    }
    const std::size_t to_end = st.end - at0;  // >= 1
    if (st.la_word && to_end < 64 * static_cast<std::size_t>(kChunk + 1)) {
        m[M_LA][to_end / 64 + 1] |= 1ull << (to_end % 64);
    }
    return to_end >= 64 * static_cast<std::size_t>(kChunk) ? kChunk : static_cast<int>((to_end + 63) / 64);
}

}  // namespace

const void* avx2_kernel_weights(const int* w) noexcept {
    const Avx2Weights& kw = weights_for(w);
    return kw.usable ? &kw : nullptr;
}

// Units of the pure-ASCII stretch that starts at `from` (a run start) and ends at the first
// non-ASCII byte or at `len`. Sets *stop to where it stopped: the stretch's end, or the start
// of a whitespace or PUNCT run longer than 64 characters (the caller walks that run).
LATCH_AVX2 std::int64_t units_ascii_avx2(const std::uint8_t* text, std::size_t len, std::size_t from,
                                         const void* kernel, std::size_t* stop) {
    const Avx2Weights& kw = *static_cast<const Avx2Weights*>(kernel);
    Stretch st{text, len, len, false};
    // Per-block masks (entry 0: the block before the chunk; before the first chunk only the character
    // before `from`, as its bit 63) and step 2's results.
    alignas(32) std::uint64_t m[N_MASKS][kEntries];
    alignas(32) std::uint64_t out[N_OUTS][kEntries];
    for (int c = 0; c < N_MASKS; ++c) {
        m[c][0] = 0;
    }
    const int k_before = from > 0 && text[from - 1] < 0x80 ? latin1_classes()[text[from - 1]] : -1;
    const std::uint64_t top = 1ull << 63;
    m[M_L][0] = k_before == LOWER ? top : 0;
    m[M_U][0] = k_before == UPPER ? top : 0;
    m[M_D][0] = k_before == DIGIT ? top : 0;
    m[M_P][0] = k_before == PUNCT ? top : 0;
    m[M_WS][0] = k_before == SPACE || k_before == NEWLINE ? top : 0;
    V nl_carry = _mm256_setzero_si256();  // lane 0: the NEWLINE-part mask of the block before
    PriceAcc acc;
    acc.open_start = from;  // a zero-length placeholder piece first
    acc.open_type = T_ABSORBED;
    acc.units = 0;
    acc.sum_lo = acc.sum_hi = _mm256_setzero_si256();
    alignas(32) std::uint8_t starts[kChunk + 1][96];  // each block's start offsets (list_starts)
    unsigned counts[kChunk + 1];
    std::int64_t n_pairs = 0, n1 = 0, n2 = 0, n3 = 0;
    std::size_t at0 = from;
    int first = 1;
    for (;;) {
        const int nb = classify_chunk(kw, st, at0, first, m);
        unsigned long_runs = 0;
        for (int j = 1; j <= nb; j += 4) {
            long_runs |= pieces4(m, out, j, nl_carry) << j;
        }
        for (int j = 1; j <= nb; ++j) {
            counts[j] = list_starts(kw, out[O_B][j], starts[j]);
        }
        for (int j = 1; j <= nb; ++j) {
            const std::size_t at = at0 + 64 * static_cast<std::size_t>(j - 1);
            Pieces o{out[O_B][j], {out[O_T0][j], out[O_T1][j], out[O_T2][j], out[O_T3][j]}};
            std::uint64_t q0 = out[O_Q0][j], q1 = out[O_Q1][j], q2 = out[O_Q2][j], q3 = out[O_Q3][j];
            std::size_t long_at = 0;  // where a long run starts (0: none)
            if ((long_runs >> j) & 1) {  // stop at the long run's start; the scalar walker prices it
                const std::uint64_t ws = m[M_WS][j];
                const std::uint64_t other = ~((ws >> 63) ? ws : m[M_P][j]) & valid_bits(st.end - at);
                const unsigned s = other ? 64 - static_cast<unsigned>(__builtin_clzll(other)) : 0;
                const std::uint64_t below = valid_bits(s);
                o.B = (o.B & below) | (below + 1);  // the long run's start closes the piece before
                q0 &= below;
                q1 &= below;
                q2 &= below;
                q3 &= below;
                long_at = at + s + 1;
                counts[j] = list_starts(kw, o.B, starts[j]);
            }
            price_block(kw, text, at, o, starts[j], counts[j], acc);
            n_pairs += _mm_popcnt_u64(q0);
            n1 += _mm_popcnt_u64(q1);
            n2 += _mm_popcnt_u64(q2);
            n3 += _mm_popcnt_u64(q3);
            if (long_at != 0) {
                *stop = long_at - 1;
                goto done;
            }
            if (at + 64 >= st.end) {
                *stop = st.end;
                // The last piece closes at the end of the stretch.
                acc.units += price(kw, acc.open_type, st.end - acc.open_start, text[acc.open_start]);
                goto done;
            }
        }
        // The chunk's last block and the one after become entries 0 and 1 of the next chunk.
        for (int c = 0; c < N_MASKS; ++c) {
            m[c][0] = m[c][kChunk];
            m[c][1] = m[c][kChunk + 1];
        }
        at0 += 64 * static_cast<std::size_t>(kChunk);
        first = 2;
    }
done:
    // Every pair is charged bigram[0], a pair of class c >= 1 bigram[c] - bigram[0] more.
    const __m256i sum = _mm256_add_epi64(acc.sum_lo, _mm256_slli_epi64(acc.sum_hi, 8));
    alignas(32) std::int64_t lanes[4];
    _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), sum);
    return acc.units + lanes[0] + lanes[1] + lanes[2] + lanes[3] + n_pairs * kw.bigram_step[0] +
           n1 * kw.bigram_step[1] + n2 * kw.bigram_step[2] + n3 * kw.bigram_step[3];
}

bool avx2_kernel_supported() noexcept {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("bmi") && __builtin_cpu_supports("bmi2") &&
           __builtin_cpu_supports("popcnt");
}

}  // namespace detail
}  // namespace latch

#endif
