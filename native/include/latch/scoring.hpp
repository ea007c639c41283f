// Episode scoring with top-k selection (spec: "Episodes"). Pure C++17, no Python.
//
// Reference: latch/hotpaths/_py.py `score_episodes`. Fixed-point integer score:
//   score = W_TERM * |terms ∩ query| + W_FILE * |files ∩ current_files|
//         + sum(MARKER_WEIGHTS[b] for each bit b set in markers)
//         + floor(W_RECENCY * last_seq / max(now_seq, 1))
// Best first: score desc, then last_seq desc, then index desc. Scores are exact
// 128-bit integers, so no input overflows.
#pragma once

#include <cstddef>
#include <cstdint>

namespace latch {

constexpr std::int64_t kWeightTerm = 1000;
constexpr std::int64_t kWeightFile = 2500;
constexpr std::int64_t kWeightRecency = 1000;
constexpr int kMarkerCount = 6;
// validation_passed, validation_failed, reground, mutation, evidence, failure
constexpr std::int64_t kMarkerWeights[kMarkerCount] = {300, 800, 600, 400, 500, 700};

// Episode i owns term_ids[term_indptr[i] : term_indptr[i+1]] (CSR); a slice
// whose end is not after its start is empty. indptr arrays have n + 1 entries.
struct Episodes {
    const std::int64_t* term_indptr;
    const std::int64_t* term_ids;
    std::size_t term_ids_len;
    const std::int64_t* file_indptr;
    const std::int64_t* file_ids;
    std::size_t file_ids_len;
    const std::int64_t* markers;   // n bitmasks over the marker bits above
    const std::int64_t* last_seq;  // n
    std::size_t n;
};

enum class ScoreStatus { ok, term_indptr_out_of_range, file_indptr_out_of_range };

// Writes the indices of the best min(k, n) episodes, best first, to `out`
// (caller allocates min(k, n) entries) and their number to `*out_count`.
// Pure and reentrant; allocates only internal scratch (std::bad_alloc on OOM).
ScoreStatus score_episodes(const Episodes& eps, const std::int64_t* query_terms, std::size_t n_query,
                           const std::int64_t* current_files, std::size_t n_files, std::int64_t now_seq,
                           std::size_t k, std::int64_t* out, std::size_t* out_count);

}  // namespace latch
