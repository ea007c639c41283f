#include "latch/scoring.hpp"

#include <algorithm>
#include <vector>

namespace latch {
namespace {

using wide_t = __int128;

// Open-addressing set of int64 ids (membership only), sized to a load <= 1/2.
class IdSet {
public:
    IdSet(const std::int64_t* ids, std::size_t n) {
        std::size_t cap = 8;
        while (cap < 2 * n) {
            cap <<= 1;
        }
        mask_ = cap - 1;
        keys_.assign(cap, 0);
        used_.assign(cap, 0);
        for (std::size_t i = 0; i < n; ++i) {
            std::size_t h = slot(ids[i]);
            while (used_[h] && keys_[h] != ids[i]) {
                h = (h + 1) & mask_;
            }
            keys_[h] = ids[i];
            used_[h] = 1;
        }
        empty_ = n == 0;
    }

    bool contains(std::int64_t id) const {
        std::size_t h = slot(id);
        while (used_[h]) {
            if (keys_[h] == id) {
                return true;
            }
            h = (h + 1) & mask_;
        }
        return false;
    }

    // Number of j in [lo, hi) with ids[j] in the set (duplicates count each time).
    std::int64_t overlap(const std::int64_t* ids, std::int64_t lo, std::int64_t hi) const {
        std::int64_t c = 0;
        if (empty_) {
            return 0;
        }
        for (std::int64_t j = lo; j < hi; ++j) {
            c += contains(ids[j]);
        }
        return c;
    }

private:
    std::size_t slot(std::int64_t id) const {
        return static_cast<std::size_t>((static_cast<std::uint64_t>(id) * 0x9E3779B97F4A7C15ull) >> 32) & mask_;
    }

    std::vector<std::int64_t> keys_;
    std::vector<unsigned char> used_;
    std::size_t mask_ = 0;
    bool empty_ = true;
};

// Floor division by a positive divisor (Python's //).
wide_t floor_div(wide_t a, wide_t d) {
    wide_t q = a / d;
    if (a % d != 0 && a < 0) {
        --q;
    }
    return q;
}

bool slices_in_range(const std::int64_t* indptr, std::size_t n, std::size_t len) {
    for (std::size_t i = 0; i < n; ++i) {
        const std::int64_t lo = indptr[i];
        const std::int64_t hi = indptr[i + 1];
        if (lo < hi && (lo < 0 || static_cast<std::uint64_t>(hi) > len)) {
            return false;
        }
    }
    return true;
}

struct Keyed {
    wide_t score;
    std::int64_t seq;
    std::int64_t index;
};

bool better(const Keyed& a, const Keyed& b) {
    if (a.score != b.score) {
        return a.score > b.score;
    }
    if (a.seq != b.seq) {
        return a.seq > b.seq;
    }
    return a.index > b.index;
}

}  // namespace

ScoreStatus score_episodes(const Episodes& eps, const std::int64_t* query_terms, std::size_t n_query,
                           const std::int64_t* current_files, std::size_t n_files, std::int64_t now_seq,
                           std::size_t k, std::int64_t* out, std::size_t* out_count) {
    *out_count = 0;
    if (!slices_in_range(eps.term_indptr, eps.n, eps.term_ids_len)) {
        return ScoreStatus::term_indptr_out_of_range;
    }
    if (!slices_in_range(eps.file_indptr, eps.n, eps.file_ids_len)) {
        return ScoreStatus::file_indptr_out_of_range;
    }
    const IdSet query(query_terms, n_query);
    const IdSet files(current_files, n_files);
    const wide_t denom = now_seq > 1 ? now_seq : 1;

    std::vector<Keyed> keyed(eps.n);
    for (std::size_t i = 0; i < eps.n; ++i) {
        wide_t s = static_cast<wide_t>(kWeightTerm) *
                   query.overlap(eps.term_ids, eps.term_indptr[i], eps.term_indptr[i + 1]);
        s += static_cast<wide_t>(kWeightFile) * files.overlap(eps.file_ids, eps.file_indptr[i], eps.file_indptr[i + 1]);
        const std::int64_t m = eps.markers[i];
        for (int b = 0; b < kMarkerCount; ++b) {
            if ((m >> b) & 1) {
                s += kMarkerWeights[b];
            }
        }
        s += floor_div(static_cast<wide_t>(kWeightRecency) * eps.last_seq[i], denom);
        keyed[i] = Keyed{s, eps.last_seq[i], static_cast<std::int64_t>(i)};
    }
    const std::size_t take = std::min(k, eps.n);
    if (take < eps.n) {
        std::nth_element(keyed.begin(), keyed.begin() + static_cast<std::ptrdiff_t>(take), keyed.end(), better);
    }
    std::sort(keyed.begin(), keyed.begin() + static_cast<std::ptrdiff_t>(take), better);
    for (std::size_t i = 0; i < take; ++i) {
        out[i] = keyed[i].index;
    }
    *out_count = take;
    return ScoreStatus::ok;
}

}  // namespace latch
