/*
 * latch.h - the Latch C ABI, version 1 (LATCH_ABI_VERSION).
 *
 * Latch's hot paths (token estimation, unit-suffix budgeting, episode scoring)
 * exported as plain C from a shared library (ours: liblatch_core.so /
 * liblatch_core.dylib / latch_core.dll, installed in the `latch/_lib/` package
 * folder). Latch loads ANY shared library implementing this header through
 * cffi in ABI mode (`latch.estimators.cabi.load(path)`, or the `cabi` estimator
 * plugin with env LATCH_CABI_LIBRARY=/path/to/lib): a third party ships a
 * native tokenizer by implementing at least `latch_abi_version` and
 * `latch_estimate_utf8`; every other function is optional for them.
 * Full guide: docs/c-abi.md.
 *
 * Versioning: `latch_abi_version()` returns LATCH_ABI_VERSION of the header the
 *   library was built against. A loader refuses a library whose version it
 *   does not know. Version 1 never changes; any incompatible change (a new
 *   argument, a changed meaning) bumps the version, adding functions does not.
 *
 * Ownership: the caller allocates every buffer, input and output, and keeps it
 *   alive for the duration of the call. The library never allocates memory the
 *   caller must free, never keeps a pointer after returning, and never writes
 *   outside the output buffers described below.
 *
 * Thread safety: every function is pure and reentrant (no global mutable state,
 *   no locks); any number of threads may call any function concurrently. (Our
 *   library may itself estimate texts of 512 Ki characters or more on a few
 *   helper threads; every part is done before returning, and a helper started
 *   late exits without touching the caller's memory.)
 *
 * Errors: every function except `latch_abi_version` and `latch_strerror`
 *   returns LATCH_OK (0) or a negative LATCH_E_* code; on error the outputs
 *   are left unspecified except where noted. Nothing aborts or throws across
 *   the boundary (out of memory is LATCH_E_NOMEM).
 *
 * Units: token counts are estimated tokens (int64); lengths are element
 *   counts (bytes for UTF-8, code points for UTF-32); indices are 0-based.
 */
#ifndef LATCH_H
#define LATCH_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(_WIN32)
#define LATCH_API __declspec(dllexport)
#elif defined(__GNUC__)
#define LATCH_API __attribute__((visibility("default")))
#else
#define LATCH_API
#endif

#define LATCH_ABI_VERSION 1

#define LATCH_OK 0
#define LATCH_E_NULL (-1)     /* a required pointer is NULL (a NULL text with length 0 is fine) */
#define LATCH_E_PROFILE (-2)  /* unknown estimator profile name */
#define LATCH_E_ENCODING (-3) /* malformed UTF-8, or a UTF-32 value above 0x10FFFF */
#define LATCH_E_RANGE (-4)    /* an index array points outside its id array */
#define LATCH_E_NOMEM (-5)    /* out of memory (internal scratch) */

/* LATCH_ABI_VERSION of the header this library implements. */
LATCH_API uint32_t latch_abi_version(void);

/* A static, NUL-terminated English description of `code` (never NULL). */
LATCH_API const char *latch_strerror(int code);

/* The profile names this library knows, comma-separated ("openai,anthropic,cjk,o200k"). Static. */
LATCH_API const char *latch_profiles(void);

/*
 * Estimated tokens of `len` bytes of UTF-8 under `profile` (NUL-terminated name).
 * Encoded surrogate code points (ED A0 80..ED BF BF, Python's "surrogatepass")
 * are accepted and counted like any code point. On LATCH_E_ENCODING,
 * `*out_tokens` is set to the byte offset of the first malformed sequence.
 */
LATCH_API int latch_estimate_utf8(const char *text, size_t len, const char *profile, int64_t *out_tokens);

/* Estimated tokens of `len` code points (each <= 0x10FFFF; surrogates allowed). */
LATCH_API int latch_estimate_utf32(const uint32_t *text, size_t len, const char *profile, int64_t *out_tokens);

/*
 * Batch form of latch_estimate_utf8: text i is data[offsets[i] : offsets[i+1]],
 * `offsets` has n + 1 non-decreasing entries, `out_tokens` has n entries.
 * On LATCH_E_ENCODING, out_tokens[0] is set to the index of the bad text.
 */
LATCH_API int latch_estimate_utf8_batch(const char *data, const int64_t *offsets, size_t n, const char *profile,
                                        int64_t *out_tokens);

/*
 * Start index of the largest suffix of whole units whose tokens fit `budget`.
 * `prefix_sums` has `len` = n + 1 running sums (prefix_sums[0] == 0,
 * prefix_sums[i] = tokens of units 0..i-1, non-decreasing). Writes the minimal
 * i with prefix_sums[n] - prefix_sums[i] <= budget, capped at n - 1 (a single
 * oversized unit is kept whole), or 0 when n <= 0. O(log n).
 */
LATCH_API int latch_suffix_start(const int64_t *prefix_sums, size_t len, int64_t budget, int64_t *out_start);

/*
 * Top-k episodes. Episode i (0 <= i < n) owns term_ids[term_indptr[i] :
 * term_indptr[i+1]] and file_ids[file_indptr[i] : file_indptr[i+1]] (CSR;
 * both indptr arrays have n + 1 entries), markers[i] (bitmask: 1 passed
 * validation, 2 failed validation, 4 reground, 8 mutation, 16 evidence,
 * 32 failure) and last_seq[i]. Score (exact integers):
 *   1000 * |terms & query_terms| + 2500 * |files & current_files|
 *   + marker weights (300, 800, 600, 400, 500, 700 by bit)
 *   + floor(1000 * last_seq / max(now_seq, 1)).
 * Writes up to k indices, best first (score desc, then last_seq desc, then
 * index desc), to `out_indices` (caller allocates min(k, n) entries) and
 * their number to `*out_count`. LATCH_E_RANGE when a non-empty slice leaves
 * its id array.
 */
LATCH_API int latch_score_episodes(const int64_t *term_indptr, const int64_t *term_ids, size_t term_ids_len,
                                   const int64_t *file_indptr, const int64_t *file_ids, size_t file_ids_len,
                                   const int64_t *markers, const int64_t *last_seq, size_t n,
                                   const int64_t *query_terms, size_t n_query, const int64_t *current_files,
                                   size_t n_files, int64_t now_seq, size_t k, int64_t *out_indices,
                                   size_t *out_count);

#ifdef __cplusplus
}
#endif

#endif /* LATCH_H */
