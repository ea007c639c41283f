// The C ABI (latch.h) over the C++ core. Nothing throws across the boundary.
#include "latch/latch.h"

#include <cstring>
#include <new>

#include "latch/budget.hpp"
#include "latch/estimate.hpp"
#include "latch/scoring.hpp"

namespace {

// latch::kProfileNames joined by commas (tests/test_cabi.py checks it against PROFILES).
constexpr const char kProfileList[] = "openai,anthropic,cjk,o200k";

int profile_of(const char* name, latch::Profile* out) {
    if (name == nullptr) {
        return LATCH_E_NULL;
    }
    return latch::parse_profile(name, std::strlen(name), out) ? LATCH_OK : LATCH_E_PROFILE;
}

}  // namespace

extern "C" {

uint32_t latch_abi_version(void) { return LATCH_ABI_VERSION; }

const char* latch_strerror(int code) {
    switch (code) {
        case LATCH_OK: return "ok";
        case LATCH_E_NULL: return "a required pointer is NULL";
        case LATCH_E_PROFILE: return "unknown estimator profile";
        case LATCH_E_ENCODING: return "malformed text (invalid UTF-8, or a UTF-32 value above 0x10FFFF)";
        case LATCH_E_RANGE: return "an index array points outside its id array";
        case LATCH_E_NOMEM: return "out of memory";
        default: return "unknown error code";
    }
}

const char* latch_profiles(void) { return kProfileList; }

int latch_estimate_utf8(const char* text, size_t len, const char* profile, int64_t* out_tokens) {
    latch::Profile p;
    if (out_tokens == nullptr || (text == nullptr && len != 0)) {
        return LATCH_E_NULL;
    }
    if (const int rc = profile_of(profile, &p); rc != LATCH_OK) {
        return rc;
    }
    std::size_t bad = 0;
    try {
        if (!latch::estimate_utf8(text, len, p, out_tokens, &bad)) {
            *out_tokens = static_cast<int64_t>(bad);
            return LATCH_E_ENCODING;
        }
    } catch (const std::bad_alloc&) {
        return LATCH_E_NOMEM;
    }
    return LATCH_OK;
}

int latch_estimate_utf32(const uint32_t* text, size_t len, const char* profile, int64_t* out_tokens) {
    latch::Profile p;
    if (out_tokens == nullptr || (text == nullptr && len != 0)) {
        return LATCH_E_NULL;
    }
    if (const int rc = profile_of(profile, &p); rc != LATCH_OK) {
        return rc;
    }
    for (size_t i = 0; i < len; ++i) {
        if (text[i] > 0x10FFFF) {
            return LATCH_E_ENCODING;
        }
    }
    *out_tokens = latch::estimate_ucs4(text, len, p);
    return LATCH_OK;
}

int latch_estimate_utf8_batch(const char* data, const int64_t* offsets, size_t n, const char* profile,
                              int64_t* out_tokens) {
    latch::Profile p;
    if (offsets == nullptr || (out_tokens == nullptr && n != 0)) {
        return LATCH_E_NULL;
    }
    if (const int rc = profile_of(profile, &p); rc != LATCH_OK) {
        return rc;
    }
    for (size_t i = 0; i < n; ++i) {
        const int64_t lo = offsets[i];
        const int64_t hi = offsets[i + 1];
        if (lo < 0 || hi < lo) {
            return LATCH_E_RANGE;
        }
        if (data == nullptr && hi != lo) {
            return LATCH_E_NULL;
        }
        std::size_t bad = 0;
        try {
            if (!latch::estimate_utf8(data + lo, static_cast<size_t>(hi - lo), p, &out_tokens[i], &bad)) {
                out_tokens[0] = static_cast<int64_t>(i);
                return LATCH_E_ENCODING;
            }
        } catch (const std::bad_alloc&) {
            return LATCH_E_NOMEM;
        }
    }
    return LATCH_OK;
}

int latch_suffix_start(const int64_t* prefix_sums, size_t len, int64_t budget, int64_t* out_start) {
    if (out_start == nullptr || (prefix_sums == nullptr && len != 0)) {
        return LATCH_E_NULL;
    }
    *out_start = latch::suffix_start(prefix_sums, len, budget);
    return LATCH_OK;
}

int latch_score_episodes(const int64_t* term_indptr, const int64_t* term_ids, size_t term_ids_len,
                         const int64_t* file_indptr, const int64_t* file_ids, size_t file_ids_len,
                         const int64_t* markers, const int64_t* last_seq, size_t n, const int64_t* query_terms,
                         size_t n_query, const int64_t* current_files, size_t n_files, int64_t now_seq, size_t k,
                         int64_t* out_indices, size_t* out_count) {
    if (term_indptr == nullptr || file_indptr == nullptr || out_count == nullptr ||
        (term_ids == nullptr && term_ids_len != 0) || (file_ids == nullptr && file_ids_len != 0) ||
        (n != 0 && (markers == nullptr || last_seq == nullptr || (k != 0 && out_indices == nullptr))) ||
        (query_terms == nullptr && n_query != 0) || (current_files == nullptr && n_files != 0)) {
        return LATCH_E_NULL;
    }
    const latch::Episodes eps{term_indptr, term_ids, term_ids_len, file_indptr, file_ids, file_ids_len,
                              markers,     last_seq, n};
    try {
        const latch::ScoreStatus st = latch::score_episodes(eps, query_terms, n_query, current_files, n_files,
                                                            now_seq, k, out_indices, out_count);
        return st == latch::ScoreStatus::ok ? LATCH_OK : LATCH_E_RANGE;
    } catch (const std::bad_alloc&) {
        return LATCH_E_NOMEM;
    }
}

}  // extern "C"
