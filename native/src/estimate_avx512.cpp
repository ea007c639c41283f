// AVX-512 kernel for pure-ASCII stretches of the token estimator (x86-64 with AVX-512 BW, CD,
// VBMI, VBMI2, VPOPCNTDQ and GFNI, e.g. Ice Lake and later, Zen 4; chosen at run time, see
// estimate_ascii.cpp; CPUs with AVX2 and BMI2 only take estimate_avx2.cpp, every other the scalar
// walker).
//
// The reference walks pieces one by one (_py._pieces). Here text is cut into 64-byte blocks
// and every block becomes 64-bit masks (bit i = byte i). Every character belongs to exactly
// one piece (an absorbed space, a joined PUNCT and a CTRL character are pieces of their own),
// so a piece's length is the distance from its start to the next start.
//
//   1. classify: one mask per character class for each block of a chunk (up to 64 blocks): a
//      byte of class bits per character (one VPERMI2B), each 8x8 bit matrix transposed by
//      GFNI, then 8 blocks' masks transposed into one array per class;
//   2. pieces: the starts of all pieces (B) and four bit planes of each piece's type, for 8
//      blocks at once (one block per 64-bit lane; the neighbouring blocks' masks, for "previous
//      character" and "next character", are the same arrays one lane off, by VALIGNQ). Facts
//      that depend on what follows ("a NEWLINE follows in this whitespace run", "a different
//      character follows in this PUNCT run") use carry propagation (r + s clears the ones of a
//      run above each seed) on bit-reversed masks of a block and the next one;
//   3. prices: per two blocks (when their pieces fit one vector, else one block at a time),
//      VPCOMPRESSB packs the start offsets of each block's pieces and VPERMB moves the second
//      block's up behind the first's (VPEXPANDB would do it in one instruction but costs several
//      times as much on Zen 4), VPERMI2B picks their types (a byte per character, from the
//      blocks' four planes by GFNI), and VPERMI2B looks up f[type][min(length, 16)] (two byte
//      tables: low and high byte);
//   4. bigrams: the class of every adjacent byte pair (two bit planes of the BIGRAM table,
//      VPERMI2B, in step 1), counted with VPOPCNTQ over the pairs inside sub-words (step 2).
//
// Exact scalar paths cover the rare cases: pieces longer than 16 characters (the table prices
// 16, the rest is added), and whitespace or PUNCT runs longer than 64, which are handed back to
// the scalar walker.
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))

#include <immintrin.h>

#include <cstring>
#include <initializer_list>

#include "estimate_kernel.hpp"

#define LATCH_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512cd,avx512vbmi,avx512vbmi2,avx512vpopcntdq,gfni,bmi,bmi2,popcnt,lzcnt")))

namespace latch {
namespace detail {
namespace {

using namespace tables;

constexpr int kSlots = 16;
// Where f[type][n] (n = 1..16) is in the kernel's table: type * 16 + n for n < 16, and slot 0 of the
// type's partner (type ^ 1) for n = 16 (no piece is empty). So the index is type * 16 XOR n, one
// operation from the type (times 16) and the length capped at 16.
constexpr int slot(int t, int n) { return (t * kSlots) ^ n; }
static_assert(N_TYPES % 2 == 0 && N_TYPES * kSlots <= 192,
              "an index type * 16 ^ n must stay below 192 (three 64-byte tables) and in the type's pair of rows");

// Per-profile weights laid out for the kernel (built once per profile).
struct KernelWeights {
    alignas(64) std::uint8_t f_lo[192];  // low and high byte of f[type * 16 + n - 1], the units
    alignas(64) std::uint8_t f_hi[192];  // of a piece of n <= 16 characters
    std::uint16_t f[192];
    std::int64_t bigram[4];
    alignas(64) std::int64_t bigram_step[4];  // bigram[0] and bigram[c] - bigram[0] (c = 1..3), in int32
    alignas(64) std::uint8_t bigram_plane[2][128];  // bit planes of BIGRAM: byte (a+1)*4 + (b+1)/8, bit (b+1)%8
    alignas(64) std::uint8_t flags[128];  // class bits 0-6 of each ASCII byte (bit c = class c of ChunkMasks)
    const int* w;
    bool usable;  // every f fits 0..65535
};

void build_weights(KernelWeights* kw, const int* w) {
    std::memset(kw, 0, sizeof(*kw));
    kw->w = w;
    kw->usable = true;
    for (int t = 0; t < N_TYPES; ++t) {
        for (int n = 1; n <= kSlots; ++n) {
            const std::int64_t v = piece_cost(w, t, static_cast<std::size_t>(n));
            kw->usable = kw->usable && v >= 0 && v <= 65535;
            const int i = slot(t, n);
            kw->f[i] = static_cast<std::uint16_t>(v);
            kw->f_lo[i] = static_cast<std::uint8_t>(v & 0xFF);
            kw->f_hi[i] = static_cast<std::uint8_t>((v >> 8) & 0xFF);
        }
    }
    for (int i = 0; i < 4; ++i) {
        kw->bigram[i] = w[OFF_BIGRAM + i];
    }
    for (int i = 0; i < 4; ++i) {
        const std::int64_t step = i == 0 ? kw->bigram[0] : kw->bigram[i] - kw->bigram[0];
        kw->usable = kw->usable && step >= INT32_MIN && step <= INT32_MAX;  // a VPMULDQ operand
        kw->bigram_step[i] = step;
    }
    for (int x = 0; x < 128; ++x) {
        const int k = latin1_classes()[x];
        kw->flags[x] = static_cast<std::uint8_t>((k == LOWER) << 0 | (k == UPPER) << 1 | (k == DIGIT) << 2 |
                                                 (k == PUNCT) << 3 | (k == SPACE || k == NEWLINE) << 4 |
                                                 (k == NEWLINE) << 5 | (x == ' ') << 6);
    }
    fill_bigram_planes(kw->bigram_plane);
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

// Units of a piece of kernel type t and n >= 1 characters starting with byte `first`, from the
// table when n <= 16.
std::int64_t price(const KernelWeights& kw, int t, std::size_t n, std::uint8_t first) {
    return n <= 16 ? kw.f[slot(t, n)] : piece_cost(kw.w, t, n, first);
}

constexpr int kChunk = 64;           // blocks per chunk (long_runs has a bit per block)
constexpr int kArr = kChunk + 16;    // [0] previous block, [1..nb] chunk, [nb+1] lookahead, zero padding

// Per-block masks of one chunk, one array per class (index = block, see kArr).
struct ChunkMasks {
    // Class masks in the order of step 1's class bits: L a-z, U A-Z, D 0-9, P PUNCT, WS SPACE or
    // NEWLINE, N NEWLINE, SP the space character; then EQ, the byte equals the byte before it (a
    // compare's mask, stored as it is). Step 2
    // reads every block's masks from where step 1 stored them (whole 64-byte stores), so a short
    // text's loads take their data straight from those stores.
    alignas(64) std::uint64_t L[kArr], U[kArr], D[kArr], P[kArr], WS[kArr], N[kArr], SP[kArr], EQ[kArr];
    alignas(64) std::uint64_t rec[kArr][8];  // step 1's class masks per block (qword c = class c), before the transpose
    alignas(64) std::uint64_t BG0[kArr], BG1[kArr];  // bigram class bits of (byte i-1, byte i)
    // Outputs of step 2.
    alignas(64) std::uint64_t B[kArr], pairs[kArr], NL[kArr];
    alignas(64) std::uint64_t last_type[kArr];  // type of the block's last piece (the one still open at its end)
    alignas(64) std::uint64_t plane[kArr][4];  // the four bit planes of the piece types of each block
};

LATCH_AVX512 inline __mmask64 in_range(__m512i x, char lo, char hi) {
    return _mm512_cmple_epu8_mask(_mm512_sub_epi8(x, _mm512_set1_epi8(lo)), _mm512_set1_epi8(static_cast<char>(hi - lo)));
}

inline std::uint64_t valid_bits(std::size_t avail) { return avail >= 64 ? ~0ull : (1ull << avail) - 1; }

// Step 1 for block j of the chunk: the 64 bytes at `at`. Full blocks (all 64 bytes belong to
// the stretch) take a specialized path: a constant `valid` keeps the masks out of k-registers.
// Step 1's tables and constants, loaded once per chunk.
struct Step1Tables {
    __m512i flags_lo, flags_hi, bg0_lo, bg0_hi, bg1_lo, bg1_hi, idx_mask;
};

template <bool Full>
LATCH_AVX512 inline void classify_block(ChunkMasks& m, int j, const Step1Tables& tb, const std::uint8_t* text,
                                        std::size_t len, std::size_t at, std::uint64_t valid_in, __m512i& seen) {
    const std::uint64_t valid = Full ? ~0ull : valid_in;
    const bool whole = Full || at + 64 <= len;  // plain loads: much cheaper than masked ones
    const __m512i x = whole ? _mm512_loadu_si512(text + at)
                            : _mm512_maskz_loadu_epi8(static_cast<__mmask64>(valid), text + at);
    seen = _mm512_or_si512(seen, x);
    const __m512i prev_byte = at > 0 ? (whole ? _mm512_loadu_si512(text + at - 1)
                                              : _mm512_maskz_loadu_epi8(static_cast<__mmask64>(valid << 1 | 1),
                                                                        text + at - 1))
                                     : _mm512_maskz_permutexvar_epi8(
        static_cast<__mmask64>(~1ull), _mm512_set_epi8(62, 61, 60, 59, 58, 57, 56, 55, 54, 53, 52, 51, 50, 49, 48, 47,
                                                       46, 45, 44, 43, 42, 41, 40, 39, 38, 37, 36, 35, 34, 33, 32, 31,
                                                       30, 29, 28, 27, 26, 25, 24, 23, 22, 21, 20, 19, 18, 17, 16, 15,
                                                       14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0, 0), x);
    // The class masks: a byte of class bits per character (kw.flags), each 8x8 bit matrix
    // (8 characters x 8 classes) transposed by GFNI, then byte c of every qword gathered into qword c.
    const __m512i rev = _mm512_broadcast_i32x4(_mm_set_epi8(8, 9, 10, 11, 12, 13, 14, 15, 0, 1, 2, 3, 4, 5, 6, 7));
    const __m512i xr = _mm512_shuffle_epi8(x, rev);  // characters in reverse order within each qword
    const __m512i classes = _mm512_permutex2var_epi8(tb.flags_lo, xr, tb.flags_hi);
    const __m512i t = _mm512_gf2p8affine_epi64_epi8(_mm512_set1_epi64(0x8040201008040201LL), classes, 0);
    const __m512i gather = _mm512_set_epi8(63, 55, 47, 39, 31, 23, 15, 7, 62, 54, 46, 38, 30, 22, 14, 6,
                                           61, 53, 45, 37, 29, 21, 13, 5, 60, 52, 44, 36, 28, 20, 12, 4,
                                           59, 51, 43, 35, 27, 19, 11, 3, 58, 50, 42, 34, 26, 18, 10, 2,
                                           57, 49, 41, 33, 25, 17, 9, 1, 56, 48, 40, 32, 24, 16, 8, 0);
    const __m512i rec = _mm512_permutexvar_epi8(gather, t);
    _mm512_store_si512(m.rec[j], Full ? rec : _mm512_and_si512(rec, _mm512_set1_epi64(static_cast<long long>(valid))));
    m.EQ[j] = _cvtmask64_u64(_mm512_mask_cmpeq_epi8_mask(static_cast<__mmask64>(valid), x, prev_byte));

    // Bigram class of every (previous byte, byte) as if both were letters (step 2 keeps the
    // pairs inside sub-words): a letter's low five bits are its place in the alphabet plus one
    // (either case), so the BIGRAM plane byte is (prev & 31) * 4 + (byte & 31) / 8, its bit byte % 8
    // (bits shifted in from the neighbouring byte land in bits 0-1 or 7, masked or ignored).
    const __m512i idx = _mm512_ternarylogic_epi64(_mm512_slli_epi16(prev_byte, 2), _mm512_srli_epi16(x, 3),
                                                  tb.idx_mask, 0xE4);
    const __m512i bit = _mm512_shuffle_epi8(
        _mm512_broadcast_i32x4(_mm_set_epi8(-128, 64, 32, 16, 8, 4, 2, 1, -128, 64, 32, 16, 8, 4, 2, 1)), x);
    m.BG0[j] = _cvtmask64_u64(_mm512_test_epi8_mask(
        _mm512_permutex2var_epi8(tb.bg0_lo, idx, tb.bg0_hi),
        bit));
    m.BG1[j] = _cvtmask64_u64(_mm512_test_epi8_mask(
        _mm512_permutex2var_epi8(tb.bg1_lo, idx, tb.bg1_hi),
        bit));
}

// Bit reversal of each 64-bit lane: GFNI reverses the bits of every byte, a shuffle the bytes.
LATCH_AVX512 inline __m512i reverse64(__m512i v) {
    const __m512i bits = _mm512_gf2p8affine_epi64_epi8(v, _mm512_set1_epi64(0x8040201008040201LL), 0);
    return _mm512_shuffle_epi8(bits, _mm512_broadcast_i32x4(_mm_set_epi8(8, 9, 10, 11, 12, 13, 14, 15, 0, 1, 2, 3,
                                                                         4, 5, 6, 7)));
}

// For each lane (block k, next block k+1): the characters of each `run` of block k that have
// a seed at or after them in the same run, looking into block k+1. Seeds lie in runs.
LATCH_AVX512 inline __m512i seed_at_or_after(__m512i run, __m512i seeds, __m512i run_n, __m512i seeds_n) {
    // Reversed, the pair (k, k+1) is a 128-bit number with block k+1 in the low half.
    const __m512i r_hi = reverse64(run), s_hi = reverse64(seeds);
    const __m512i r_lo = reverse64(run_n), s_lo = reverse64(seeds_n);
    const __m512i lo = _mm512_add_epi64(r_lo, s_lo);
    const __mmask8 carry = _mm512_cmplt_epu64_mask(lo, r_lo);
    const __m512i hi = _mm512_mask_add_epi64(_mm512_add_epi64(r_hi, s_hi), carry, _mm512_add_epi64(r_hi, s_hi),
                                             _mm512_set1_epi64(1));
    return reverse64(_mm512_or_si512(_mm512_andnot_si512(hi, r_hi), s_hi));
}

LATCH_AVX512 inline __m512i ld(const std::uint64_t* p) { return _mm512_loadu_si512(p); }
// One VPSHLDQ / VPSHRDQ each (a shift of the 128-bit pair of a block and its neighbour).
LATCH_AVX512 inline __m512i shl1(__m512i x, __m512i xp) {  // previous character's bit, across blocks
    return _mm512_shldi_epi64(x, xp, 1);
}
LATCH_AVX512 inline __m512i shr1(__m512i x, __m512i xn) {  // next character's bit, across blocks
    return _mm512_shrdi_epi64(x, xn, 1);
}

// What step 2 needs to know of the chunk besides its masks.
struct ChunkEnds {
    std::int64_t end;  // the stretch's end, relative to the chunk's first byte
    std::int64_t la_block;  // the block holding the stretch's successor when it is a LETTER, else -1
    std::uint64_t la_bit;   // and its bit there
};

// Blocks j..j+7 of a class array (a) and the same one block back (p) and forward (n). Every load
// is of a whole 64-byte store of step 1 (block 0 is one qword).
struct Lanes {
    __m512i a, p, n;
};
LATCH_AVX512 inline Lanes lanes(const std::uint64_t* arr, int j) {
    const __m512i a = ld(arr + j);
    const __m512i before = j == 1 ? _mm512_set1_epi64(static_cast<long long>(arr[0])) : ld(arr + j - 8);
    return {a, _mm512_alignr_epi64(a, before, 7), _mm512_alignr_epi64(ld(arr + j + 8), a, 1)};
}

// Step 2 for blocks j..j+7 (lanes); `nl_before` holds the NEWLINE-part mask of block j-1 in lane 7.
// Sets bit k of *long_runs when block j+k ends inside a whitespace or PUNCT run that also
// fills block j+k+1 (longer than 64 characters).
template <bool Inside>
LATCH_AVX512 inline __m512i pieces8(ChunkMasks& m, int j, __m512i nl_before, std::uint64_t* long_runs,
                                    const ChunkEnds& ce) {
    const Lanes l = lanes(m.L, j), u = lanes(m.U, j), d = lanes(m.D, j), p = lanes(m.P, j), ws = lanes(m.WS, j);
    const Lanes nn = lanes(m.N, j), eq = lanes(m.EQ, j);
    const __m512i L = l.a, Lp = l.p, Ln = l.n;
    const __m512i U = u.a, Up = u.p, Un = u.n;
    const __m512i D = d.a, Dp = d.p;
    const __m512i P = p.a, Pp = p.p, Pn = p.n, Pnn_prev = P;
    const __m512i WS = ws.a, WSp = ws.p, WSn = ws.n;
    const __m512i N = nn.a, Nn = nn.n;
    const __m512i block = _mm512_add_epi64(_mm512_set_epi64(7, 6, 5, 4, 3, 2, 1, 0), _mm512_set1_epi64(j));
    // Inside (see pieces_chunk): no block here holds the successor, and every character is valid.
    const __m512i la_block = _mm512_set1_epi64(ce.la_block), la_bit = _mm512_set1_epi64(static_cast<long long>(ce.la_bit));
    const __m512i LA = Inside ? _mm512_setzero_si512()
                              : _mm512_maskz_mov_epi64(_mm512_cmpeq_epi64_mask(block, la_block), la_bit);
    const __m512i LAn = Inside ? _mm512_setzero_si512()
                               : _mm512_maskz_mov_epi64(
                                     _mm512_cmpeq_epi64_mask(_mm512_add_epi64(block, _mm512_set1_epi64(1)), la_block), la_bit);
    // The characters of each block (all but the last block's tail): CTRL is every other one.
    const __m512i avail = _mm512_min_epi64(
        _mm512_max_epi64(_mm512_sub_epi64(_mm512_set1_epi64(ce.end + 64), _mm512_slli_epi64(block, 6)), _mm512_setzero_si512()),
        _mm512_set1_epi64(64));
    const __m512i valid = Inside ? _mm512_set1_epi64(-1)
                                 : _mm512_srlv_epi64(_mm512_set1_epi64(-1), _mm512_sub_epi64(_mm512_set1_epi64(64), avail));
    const __m512i A = _mm512_or_si512(L, U), Ap = _mm512_or_si512(Lp, Up), An = _mm512_or_si512(Ln, Un);
    const __m512i ones = _mm512_set1_epi64(-1);
    const __mmask8 long_run =
        _mm512_mask_cmpeq_epi64_mask(_mm512_cmplt_epi64_mask(WS, _mm512_setzero_si512()), WSn, ones) |
        _mm512_mask_cmpeq_epi64_mask(_mm512_cmplt_epi64_mask(P, _mm512_setzero_si512()), Pn, ones);
    *long_runs |= static_cast<std::uint64_t>(long_run) << (j - 1);

    const __m512i next_wa = shr1(_mm512_or_si512(A, LA), _mm512_or_si512(An, LAn));
    const __m512i next_j = _mm512_or_si512(next_wa, shr1(P, Pn));

    // Words: sub-word starts; the type is decided at the start.
    const __m512i prev_a = shl1(A, Ap);
    const __m512i part_start = _mm512_andnot_si512(prev_a, A);
    const __m512i next_l = shr1(L, Ln);
    const __m512i s_capital = _mm512_and_si512(U, next_l);
    const __m512i s_caps = _mm512_and_si512(_mm512_andnot_si512(next_l, U), _mm512_or_si512(part_start, shl1(L, Lp)));
    const __m512i s_lower = _mm512_and_si512(L, part_start);

    // Digits and punctuation.
    const __m512i s_digit = _mm512_andnot_si512(shl1(D, Dp), D);
    const __m512i prev_p = shl1(P, Pp);
    const __m512i p_start = _mm512_andnot_si512(prev_p, P);
    const __m512i p_end = _mm512_andnot_si512(shr1(P, Pn), P);
    const __m512i s_join = _mm512_and_si512(_mm512_and_si512(p_start, p_end), next_wa);
    const __m512i neq = _mm512_andnot_si512(eq.a, _mm512_and_si512(P, prev_p));
    const __m512i neq_n = _mm512_andnot_si512(eq.n, _mm512_and_si512(Pn, shl1(Pn, Pnn_prev)));
    const __m512i mixed = seed_at_or_after(P, neq, Pn, neq_n);
    const __m512i s_same = _mm512_andnot_si512(_mm512_or_si512(p_end, mixed), p_start);
    const __m512i s_punct = _mm512_andnot_si512(_mm512_or_si512(s_join, s_same), p_start);

    // Whitespace: the NEWLINE part (a NEWLINE at or after, in the run), then the space part.
    const __m512i nl = seed_at_or_after(WS, N, WSn, Nn);
    const __m512i nl_prev = shl1(nl, _mm512_alignr_epi64(nl, nl_before, 7));
    const __m512i ws_start = _mm512_andnot_si512(shl1(WS, WSp), WS);
    const __m512i ws_end = _mm512_andnot_si512(shr1(WS, WSn), WS);
    const __m512i s_absorbed = _mm512_and_si512(_mm512_and_si512(ws_end, ld(m.SP + j)), next_j);
    const __m512i sp_part = _mm512_andnot_si512(nl, WS);
    const __m512i s_space = _mm512_andnot_si512(
        s_absorbed, _mm512_or_si512(_mm512_and_si512(ws_start, sp_part), _mm512_and_si512(sp_part, nl_prev)));
    const __m512i nl_start = _mm512_and_si512(ws_start, nl);
    const __m512i s_newline = _mm512_andnot_si512(prev_p, nl_start);
    const __m512i s_nlpunct = _mm512_and_si512(prev_p, nl_start);
    const __m512i C = _mm512_andnot_si512(_mm512_or_si512(_mm512_or_si512(A, D), _mm512_or_si512(P, WS)), valid);

    _mm512_storeu_si512(m.NL + j, nl);
    const __m512i B = _mm512_or_si512(
        _mm512_or_si512(_mm512_or_si512(s_lower, s_capital), _mm512_or_si512(s_punct, s_newline)),
        _mm512_or_si512(_mm512_or_si512(_mm512_or_si512(s_space, s_join), _mm512_or_si512(s_absorbed, s_caps)),
                        _mm512_or_si512(_mm512_or_si512(s_digit, s_nlpunct), _mm512_or_si512(C, s_same))));
    _mm512_storeu_si512(m.B + j, B);
    // Bit planes of the type (see PieceType).
    const __m512i p0 = _mm512_or_si512(_mm512_or_si512(_mm512_or_si512(s_capital, s_newline), _mm512_or_si512(s_join, s_caps)),
                                       _mm512_or_si512(s_nlpunct, s_same));
    const __m512i p1 = _mm512_or_si512(_mm512_or_si512(_mm512_or_si512(s_punct, s_newline), _mm512_or_si512(s_absorbed, s_caps)),
                                       _mm512_or_si512(C, s_same));
    const __m512i p2 = _mm512_or_si512(_mm512_or_si512(s_space, s_join), _mm512_or_si512(s_absorbed, s_caps));
    const __m512i p3 = _mm512_or_si512(_mm512_or_si512(s_digit, s_nlpunct), _mm512_or_si512(C, s_same));
    const __m512i last = _mm512_sub_epi64(_mm512_set1_epi64(63), _mm512_lzcnt_epi64(B));  // no start: all ones
    const __m512i one = _mm512_set1_epi64(1);
    _mm512_storeu_si512(
        m.last_type + j,
        _mm512_or_si512(
            _mm512_or_si512(_mm512_and_si512(_mm512_srlv_epi64(p0, last), one),
                            _mm512_slli_epi64(_mm512_and_si512(_mm512_srlv_epi64(p1, last), one), 1)),
            _mm512_or_si512(_mm512_slli_epi64(_mm512_and_si512(_mm512_srlv_epi64(p2, last), one), 2),
                            _mm512_slli_epi64(_mm512_and_si512(_mm512_srlv_epi64(p3, last), one), 3))));
    // Per block: its four planes side by side (a 4x8 transpose of qwords).
    const __m512i a01 = _mm512_unpacklo_epi64(p0, p1), b01 = _mm512_unpackhi_epi64(p0, p1);
    const __m512i a23 = _mm512_unpacklo_epi64(p2, p3), b23 = _mm512_unpackhi_epi64(p2, p3);
    const __m512i e = _mm512_shuffle_i64x2(a01, a23, _MM_SHUFFLE(1, 0, 1, 0));
    const __m512i f = _mm512_shuffle_i64x2(b01, b23, _MM_SHUFFLE(1, 0, 1, 0));
    const __m512i g = _mm512_shuffle_i64x2(a01, a23, _MM_SHUFFLE(3, 2, 3, 2));
    const __m512i h = _mm512_shuffle_i64x2(b01, b23, _MM_SHUFFLE(3, 2, 3, 2));
    _mm512_storeu_si512(m.plane[j], _mm512_shuffle_i64x2(e, f, _MM_SHUFFLE(2, 0, 2, 0)));
    _mm512_storeu_si512(m.plane[j + 2], _mm512_shuffle_i64x2(e, f, _MM_SHUFFLE(3, 1, 3, 1)));
    _mm512_storeu_si512(m.plane[j + 4], _mm512_shuffle_i64x2(g, h, _MM_SHUFFLE(2, 0, 2, 0)));
    _mm512_storeu_si512(m.plane[j + 6], _mm512_shuffle_i64x2(g, h, _MM_SHUFFLE(3, 1, 3, 1)));
    _mm512_storeu_si512(m.pairs + j, _mm512_andnot_si512(_mm512_or_si512(_mm512_or_si512(s_capital, s_caps), s_lower),
                                                         _mm512_and_si512(A, prev_a)));
    return nl;
}

}  // namespace

const void* avx512_kernel_weights(const int* w) noexcept {
    const KernelWeights& kw = weights_for(w);
    return kw.usable ? &kw : nullptr;
}

// out[c][j + b] = rec[b][c] for b = 0..7, c = 0..6 (class 7 is always zero: not stored).
LATCH_AVX512 __attribute__((always_inline)) inline void transpose8(const std::uint64_t (*rec)[8], std::uint64_t* const* out, int j) {
    __m512i r[8], t[8], u[8];
    for (int b = 0; b < 8; ++b) {
        r[b] = _mm512_load_si512(rec[b]);
    }
    for (int b = 0; b < 8; b += 2) {
        t[b] = _mm512_unpacklo_epi64(r[b], r[b + 1]);      // (b.0 b+1.0) (b.2 b+1.2) ...
        t[b + 1] = _mm512_unpackhi_epi64(r[b], r[b + 1]);  // (b.1 b+1.1) (b.3 b+1.3) ...
    }
    const __m512i even = _mm512_set_epi64(13, 12, 5, 4, 9, 8, 1, 0), odd = _mm512_set_epi64(15, 14, 7, 6, 11, 10, 3, 2);
    for (int h = 0; h < 8; h += 4) {
        for (int q = 0; q < 2; ++q) {
            u[h + q] = _mm512_permutex2var_epi64(t[h + q], even, t[h + q + 2]);      // classes q, q + 4
            u[h + q + 2] = _mm512_permutex2var_epi64(t[h + q], odd, t[h + q + 2]);  // classes q + 2, q + 6
        }
    }
    for (int c = 0; c < 4; ++c) {
        _mm512_storeu_si512(out[c] + j, _mm512_shuffle_i64x2(u[c], u[c + 4], _MM_SHUFFLE(1, 0, 1, 0)));
        if (c + 4 < 7) {
            _mm512_storeu_si512(out[c + 4] + j, _mm512_shuffle_i64x2(u[c], u[c + 4], _MM_SHUFFLE(3, 2, 3, 2)));
        }
    }
}

// Each step is its own function so that each gets the whole register file for its constants.
#define LATCH_STEP LATCH_AVX512 __attribute__((noinline))

// Step 1: classify blocks 1..nb of the chunk at `base` and the lookahead block nb+1. Returns
// whether any of those bytes is not ASCII (then `end` was not the stretch's end: classify again).
LATCH_STEP bool classify_chunk(ChunkMasks& m, const KernelWeights& kw, const std::uint8_t* text, std::size_t len,
                               std::size_t base, std::size_t end, int nb) {
    __m512i idx_mask = _mm512_set1_epi8(0x7C);
    __asm__("" : "+v"(idx_mask));  // a value the compiler cannot rebuild for every block (it did: two instructions)
    const Step1Tables tb{_mm512_load_si512(kw.flags), _mm512_load_si512(kw.flags + 64),
                         _mm512_load_si512(kw.bigram_plane[0]), _mm512_load_si512(kw.bigram_plane[0] + 64),
                         _mm512_load_si512(kw.bigram_plane[1]), _mm512_load_si512(kw.bigram_plane[1] + 64),
                         idx_mask};
    __m512i seen = _mm512_setzero_si512();
    for (int j = 1; j <= nb + 1; ++j) {
        const std::size_t at = base + 64 * static_cast<std::size_t>(j - 1);
        if (at + 64 <= end) {
            classify_block<true>(m, j, tb, text, len, at, ~0ull, seen);
        } else if (at < end) {
            classify_block<false>(m, j, tb, text, len, at, valid_bits(end - at), seen);
        } else {  // the lookahead block past the stretch's end: no characters
            _mm512_store_si512(m.rec[j], _mm512_setzero_si512());
            m.EQ[j] = 0;
        }
    }
    // The class masks of 8 blocks at a time into the class arrays (an 8x8 transpose of qwords).
    for (int j = nb + 2; j < ((nb + 1 + 7) & ~7) + 1; ++j) {
        _mm512_store_si512(m.rec[j], _mm512_setzero_si512());
        m.EQ[j] = 0;
    }
    std::uint64_t* const out[8] = {m.L, m.U, m.D, m.P, m.WS, m.N, m.SP, m.EQ};
    for (int j = 1; j <= nb + 1; j += 8) {
        transpose8(m.rec + j, out, j);
    }
    // Step 2's last step of 8 (blocks jl..jl+7) also reads blocks jl+8..jl+15: none when not transposed.
    const int jl = 1 + 8 * ((nb - 1) / 8);
    if (jl + 8 > nb + 1) {
        for (std::uint64_t* arr : out) {
            _mm512_storeu_si512(arr + jl + 8, _mm512_setzero_si512());
        }
    }
    return _mm512_movepi8_mask(seen) != 0;
}

// Step 2 for blocks 1..nb; returns the blocks that end inside a run longer than 64 (bit j-1).
LATCH_STEP std::uint64_t pieces_chunk(ChunkMasks& m, int nb, std::uint64_t* nl_before, const ChunkEnds& ce) {
    std::uint64_t long_runs = 0;
    __m512i nl = _mm512_set1_epi64(static_cast<long long>(*nl_before));
    // Inside a long stretch: the chunk's 64 blocks and the lookahead block are full, so the stretch's
    // successor is past them (no LA bit, every character valid).
    const bool inside = nb == kChunk && ce.end >= 64 * static_cast<std::int64_t>(nb + 1);
    for (int j = 1; j <= nb; j += 8) {
        nl = inside ? pieces8<true>(m, j, nl, &long_runs, ce) : pieces8<false>(m, j, nl, &long_runs, ce);
    }
    *nl_before = m.NL[nb];
    return long_runs & (nb >= 64 ? ~0ull : (1ull << nb) - 1);
}

// What step 3 carries from block to block and adds up.
struct PriceState {
    std::size_t open_start;  // the piece still open at the block boundary
    int open_type;
    std::int64_t units;  // bigram charges included
};

// Step 3's state within a chunk: the open piece, the units of pieces over 16 characters and of
// pieces closed at a step's first start, and the table's sums (low and high bytes, per qword).
struct PriceAcc {
    std::size_t open_start;
    int open_type;
    std::int64_t units;
    __m512i sum_lo, sum_hi;
};

// The pieces that close in blocks j and j + 1 (starts B0, B1; 64 at most together): one vector
// holds the start offsets of both blocks (0..127 from block j's first byte), so the piece
// from block j's last start to block j + 1's first is priced in the vector too.
LATCH_AVX512 __attribute__((always_inline)) inline void price_two(const ChunkMasks& m, const KernelWeights& kw,
                                                                  const std::uint8_t* text, std::size_t at, int j,
                                                                  std::uint64_t B0, std::uint64_t B1,
                                                                  const __m512i (&f)[6], PriceAcc& acc) {
    const __m512i iota = _mm512_set_epi8(63, 62, 61, 60, 59, 58, 57, 56, 55, 54, 53, 52, 51, 50, 49, 48, 47, 46, 45,
                                         44, 43, 42, 41, 40, 39, 38, 37, 36, 35, 34, 33, 32, 31, 30, 29, 28, 27, 26,
                                         25, 24, 23, 22, 21, 20, 19, 18, 17, 16, 15, 14, 13, 12, 11, 10, 9, 8, 7, 6,
                                         5, 4, 3, 2, 1, 0);
    const __m512i up1 = _mm512_set_epi8(62, 61, 60, 59, 58, 57, 56, 55, 54, 53, 52, 51, 50, 49, 48, 47, 46, 45, 44,
                                        43, 42, 41, 40, 39, 38, 37, 36, 35, 34, 33, 32, 31, 30, 29, 28, 27, 26, 25,
                                        24, 23, 22, 21, 20, 19, 18, 17, 16, 15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4,
                                        3, 2, 1, 0, 0);
    // Byte g of plane p (block j: bytes 0..31 of the two blocks' planes, block j + 1: 32..63) to
    // byte 3 - p of qword g, for GFNI's transpose into bits 4 + p.
    const __m512i arrange0 = _mm512_set_epi8(0, 0, 0, 0, 7, 15, 23, 31, 0, 0, 0, 0, 6, 14, 22, 30, 0, 0, 0, 0, 5, 13, 21,
                                             29, 0, 0, 0, 0, 4, 12, 20, 28, 0, 0, 0, 0, 3, 11, 19, 27, 0, 0, 0, 0, 2, 10,
                                             18, 26, 0, 0, 0, 0, 1, 9, 17, 25, 0, 0, 0, 0, 0, 8, 16, 24);
    const __m512i arrange1 = _mm512_add_epi8(arrange0, _mm512_set1_epi8(32));
    const __m512i transpose = _mm512_set1_epi64(0x8040201008040201LL);
    const __m512i zero = _mm512_setzero_si512();
    // Block j's starts in lanes 0..a-1, then block j + 1's; zero in every lane after the last start.
    const __m512i s0 = _mm512_maskz_compress_epi8(static_cast<__mmask64>(B0), iota);
    const __m512i s1 = _mm512_maskz_compress_epi8(static_cast<__mmask64>(B1), _mm512_add_epi8(iota, _mm512_set1_epi8(64)));
    // s1 moved up by a lanes: lanes below a read s1's lanes 64 - a and up, which are zero (a + b <= 64).
    const __m512i starts = _mm512_or_si512(
        s0, _mm512_permutexvar_epi8(_mm512_sub_epi8(iota, _mm512_set1_epi8(static_cast<char>(_mm_popcnt_u64(B0)))), s1));
    // Lane i >= 1: the piece from start i-1 to start i, of 1..127 characters. Lane 0 and the lanes
    // from the last start on have a length <= 0 (as a signed byte): no piece.
    const __m512i prev = _mm512_permutexvar_epi8(up1, starts);
    const __m512i length = _mm512_sub_epi8(starts, prev);
    const __mmask64 closed = _mm512_cmpgt_epi8_mask(length, zero);
    // The type of the piece starting at each character of the two blocks, times 16.
    const __m512i planes = _mm512_loadu_si512(m.plane[j]);
    const __mmask64 qbytes = 0x0F0F0F0F0F0F0F0Full;
    const __m512i types0 =
        _mm512_gf2p8affine_epi64_epi8(transpose, _mm512_maskz_permutexvar_epi8(qbytes, arrange0, planes), 0);
    const __m512i types1 =
        _mm512_gf2p8affine_epi64_epi8(transpose, _mm512_maskz_permutexvar_epi8(qbytes, arrange1, planes), 0);
    const __m512i ptypes = _mm512_permutex2var_epi8(types0, prev, types1);
    // The table index of each closed piece; every other lane reads an absorbed space's entry (0).
    const __m512i idx = _mm512_mask_mov_epi8(_mm512_set1_epi8(slot(T_ABSORBED, 1)), closed,
                                             _mm512_xor_si512(ptypes, _mm512_min_epu8(length, _mm512_set1_epi8(16))));
    const __mmask64 high = _mm512_movepi8_mask(idx);  // idx >= 128
    const __m512i lo = _mm512_mask_blend_epi8(high, _mm512_permutex2var_epi8(f[0], idx, f[1]), _mm512_permutexvar_epi8(idx, f[2]));
    const __m512i hi = _mm512_mask_blend_epi8(high, _mm512_permutex2var_epi8(f[3], idx, f[4]), _mm512_permutexvar_epi8(idx, f[5]));
    acc.sum_lo = _mm512_add_epi64(acc.sum_lo, _mm512_sad_epu8(lo, zero));
    acc.sum_hi = _mm512_add_epi64(acc.sum_hi, _mm512_sad_epu8(hi, zero));
    if ((B0 | B1) == 0) {
        return;
    }
    const unsigned first = B0 ? static_cast<unsigned>(_tzcnt_u64(B0)) : 64 + static_cast<unsigned>(_tzcnt_u64(B1));
    if (at + first > acc.open_start) {  // the piece open since an earlier step closes here
        acc.units += price(kw, acc.open_type, at + first - acc.open_start, text[acc.open_start]);
    }
    // Pieces over 16 characters (17..127 here): the table priced 16 of them.
    const __mmask64 longer = _mm512_cmpgt_epi8_mask(length, _mm512_set1_epi8(16));
    if (!_kortestz_mask64_u8(longer, longer)) {
        alignas(64) std::uint8_t ls[64], ts[64], ss[64];
        _mm512_store_si512(ls, length);
        _mm512_store_si512(ts, ptypes);
        _mm512_store_si512(ss, starts);
        for (std::uint64_t q = _cvtmask64_u64(longer); q; q &= q - 1) {
            const unsigned i = static_cast<unsigned>(_tzcnt_u64(q));  // >= 1: the piece starts at ss[i - 1]
            const int t = ts[i] >> 4;
            acc.units += piece_cost(kw.w, t, ls[i], text[at + ss[i - 1]]) - piece_cost(kw.w, t, 16);
        }
    }
    acc.open_start = B1 ? at + 127 - static_cast<unsigned>(_lzcnt_u64(B1)) : at + 63 - static_cast<unsigned>(_lzcnt_u64(B0));
    acc.open_type = static_cast<int>(m.last_type[B1 ? j + 1 : j]);
}

// Steps 3 and 4 for blocks 1..last of the chunk at `base`.
LATCH_STEP void price_chunk(const ChunkMasks& m, const KernelWeights& kw, const std::uint8_t* text, std::size_t base,
                            int last, PriceState& st) {
    const __m512i f[6] = {_mm512_load_si512(kw.f_lo), _mm512_load_si512(kw.f_lo + 64), _mm512_load_si512(kw.f_lo + 128),
                          _mm512_load_si512(kw.f_hi), _mm512_load_si512(kw.f_hi + 64), _mm512_load_si512(kw.f_hi + 128)};
    const __m512i zero = _mm512_setzero_si512();
    PriceAcc acc{st.open_start, st.open_type, 0, zero, zero};
    // Two blocks per step when their starts fit one vector (64 at most), else one by one.
    for (int j = 1; j <= last; j += 2) {
        const std::size_t at = base + 64 * static_cast<std::size_t>(j - 1);
        const std::uint64_t B0 = m.B[j], B1 = j + 1 <= last ? m.B[j + 1] : 0;
        if (_mm_popcnt_u64(B0) + _mm_popcnt_u64(B1) <= 64) {
            price_two(m, kw, text, at, j, B0, B1, f, acc);
        } else {
            price_two(m, kw, text, at, j, B0, 0, f, acc);
            price_two(m, kw, text, at + 64, j + 1, B1, 0, f, acc);
        }
    }
    // Bigrams of the pairs inside sub-words, 8 blocks per step.
    __m512i n_pairs = zero, n1 = zero, n2 = zero, n3 = zero;
    for (int j = 1; j <= last; j += 8) {
        const __mmask8 lanes = static_cast<__mmask8>(last - j >= 7 ? 0xFF : (1u << (last - j + 1)) - 1);
        const __m512i pr = _mm512_maskz_loadu_epi64(lanes, m.pairs + j);
        const __m512i k0 = _mm512_loadu_si512(m.BG0 + j), k1 = _mm512_loadu_si512(m.BG1 + j);
        n_pairs = _mm512_add_epi64(n_pairs, _mm512_popcnt_epi64(pr));
        n1 = _mm512_add_epi64(n1, _mm512_popcnt_epi64(_mm512_and_si512(pr, _mm512_andnot_si512(k1, k0))));
        n2 = _mm512_add_epi64(n2, _mm512_popcnt_epi64(_mm512_and_si512(pr, _mm512_andnot_si512(k0, k1))));
        n3 = _mm512_add_epi64(n3, _mm512_popcnt_epi64(_mm512_and_si512(pr, _mm512_and_si512(k0, k1))));
    }
    st.open_start = acc.open_start;
    st.open_type = acc.open_type;
    // Every pair is charged bigram[0], a pair of class c >= 1 bigram[c] - bigram[0] more (the counts
    // per lane are at most 64 per step, so the products are exact); one reduction for all.
    __m512i total = _mm512_add_epi64(acc.sum_lo, _mm512_slli_epi64(acc.sum_hi, 8));
    total = _mm512_add_epi64(total, _mm512_mul_epi32(n_pairs, _mm512_set1_epi64(kw.bigram_step[0])));
    total = _mm512_add_epi64(total, _mm512_mul_epi32(n1, _mm512_set1_epi64(kw.bigram_step[1])));
    total = _mm512_add_epi64(total, _mm512_mul_epi32(n2, _mm512_set1_epi64(kw.bigram_step[2])));
    total = _mm512_add_epi64(total, _mm512_mul_epi32(n3, _mm512_set1_epi64(kw.bigram_step[3])));
    st.units += acc.units + _mm512_reduce_add_epi64(total);
}

// First byte >= 0x80 in [from, to), or `to`.
LATCH_AVX512 inline std::size_t ascii_end(const std::uint8_t* text, std::size_t from, std::size_t to) {
    for (std::size_t i = from; i < to; i += 64) {
        const __m512i x = i + 64 <= to ? _mm512_loadu_si512(text + i)
                                       : _mm512_maskz_loadu_epi8(static_cast<__mmask64>(valid_bits(to - i)), text + i);
        const std::uint64_t high = _cvtmask64_u64(_mm512_movepi8_mask(x));
        if (high) {
            return i + _tzcnt_u64(high);
        }
    }
    return to;
}

// Units of the pure-ASCII stretch that starts at `from` (a run start) and ends at the first
// non-ASCII byte or at `len`. Sets *stop to where it stopped: the stretch's end, or the start
// of a whitespace or PUNCT run longer than 64 characters (the caller walks that run).
LATCH_AVX512 std::int64_t units_ascii_avx512(const std::uint8_t* text, std::size_t len, std::size_t from,
                                             const void* kernel, std::size_t* stop) {
    const KernelWeights& kw = *static_cast<const KernelWeights*>(kernel);
    std::size_t end = len;  // the stretch's end once found; until then len
    bool la_word = false;   // the stretch's successor is a LETTER (it joins a PUNCT or space)
    ChunkMasks m;  // every entry is written before it is read
    // Block 0: the character before `from` as its bit 63 (none at a stretch's start).
    const int k_before = from > 0 && text[from - 1] < 0x80 ? latin1_classes()[text[from - 1]] : -1;
    const std::uint64_t top = 1ull << 63;
    m.L[0] = k_before == LOWER ? top : 0;
    m.U[0] = k_before == UPPER ? top : 0;
    m.D[0] = k_before == DIGIT ? top : 0;
    m.P[0] = k_before == PUNCT ? top : 0;
    m.WS[0] = k_before == SPACE || k_before == NEWLINE ? top : 0;
    m.N[0] = k_before == NEWLINE ? top : 0;
    std::uint64_t nl_before = 0;  // NEWLINE-part mask of the block before the chunk
    PriceState st{from, T_ABSORBED, 0};  // a zero-length placeholder piece first

    std::size_t base = from;  // first byte of the chunk
    *stop = len;
    while (base < end) {
        // Classify as if the stretch went on to `len`; when the chunk's window (its blocks and the
        // lookahead block) holds a non-ASCII byte, the stretch ends there: classify again.
        int nb = static_cast<int>((end - base + 63) / 64 < kChunk ? (end - base + 63) / 64 : kChunk);
        if (classify_chunk(m, kw, text, len, base, end, nb)) {
            const std::size_t window = base + 64 * (kChunk + 1) < len ? base + 64 * (kChunk + 1) : len;
            end = ascii_end(text, base, window);
            la_word = is_letter(class_of(text[end]));
            nb = static_cast<int>((end - base + 63) / 64 < kChunk ? (end - base + 63) / 64 : kChunk);
            if (nb > 0) {
                classify_chunk(m, kw, text, len, base, end, nb);
            }
        }
        *stop = end;
        const std::size_t la = end - base;  // where the successor is, relative to the chunk
        const ChunkEnds ce{static_cast<std::int64_t>(end - base),
                           la_word && la / 64 <= static_cast<std::size_t>(nb) ? static_cast<std::int64_t>(la / 64 + 1) : -1,
                           1ull << (la % 64)};
        const std::uint64_t long_runs = pieces_chunk(m, nb, &nl_before, ce);
        int last = nb;
        if (long_runs) {  // stop at the long run's start; the scalar walker prices it
            const int j = 1 + static_cast<int>(_tzcnt_u64(long_runs));
            const std::size_t at = base + 64 * static_cast<std::size_t>(j - 1);
            const std::uint64_t ws = m.WS[j];
            const std::uint64_t other = ~((ws >> 63) ? ws : m.P[j]) & valid_bits(end - at);
            const unsigned s = other ? 64 - static_cast<unsigned>(_lzcnt_u64(other)) : 0;
            const std::uint64_t below = valid_bits(s);
            m.B[j] = (m.B[j] & below) | (below + 1);  // the long run's start closes the piece before
            m.pairs[j] &= below;
            *stop = at + s;
            last = j;
        }
        price_chunk(m, kw, text, base, last, st);
        if (*stop != end) {
            break;
        }
        // The chunk's last block becomes block 0 of the next chunk.
        m.L[0] = m.L[nb], m.U[0] = m.U[nb], m.D[0] = m.D[nb], m.P[0] = m.P[nb];
        m.WS[0] = m.WS[nb], m.N[0] = m.N[nb], m.SP[0] = m.SP[nb];
        base += 64 * static_cast<std::size_t>(nb);
    }
    if (*stop == end) {  // the last piece closes at the end of the stretch
        st.units += price(kw, st.open_type, end - st.open_start, text[st.open_start]);
    }
    return st.units;
}

bool avx512_kernel_supported() noexcept {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512cd") &&
           __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vbmi") &&
           __builtin_cpu_supports("avx512vbmi2") && __builtin_cpu_supports("avx512vpopcntdq") &&
           __builtin_cpu_supports("gfni") &&
           __builtin_cpu_supports("bmi2") && __builtin_cpu_supports("popcnt");
}

}  // namespace detail
}  // namespace latch

#endif
