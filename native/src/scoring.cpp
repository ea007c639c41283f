#include "latch/scoring.hpp"

#include <algorithm>
#include <vector>

namespace latch {
namespace {

using wide_t = __int128;

// Membership of int64 ids: a bitmap over [min, max] when that range is small (the usual case:
// term and file ids are dense indices), else open addressing at a load <= 1/2.
class IdSet {
public:
    IdSet(const std::int64_t* ids, std::size_t n) : empty_(n == 0) {
        if (n == 0) {
            return;
        }
        lo_ = *std::min_element(ids, ids + n);
        const std::int64_t hi = *std::max_element(ids, ids + n);
        const std::uint64_t span = static_cast<std::uint64_t>(hi) - static_cast<std::uint64_t>(lo_);
        if (span < (std::uint64_t{1} << 22)) {
            bits_.assign(span / 64 + 1, 0);
            for (std::size_t i = 0; i < n; ++i) {
                const std::uint64_t off = static_cast<std::uint64_t>(ids[i]) - static_cast<std::uint64_t>(lo_);
                bits_[off / 64] |= std::uint64_t{1} << (off % 64);
            }
            span_ = span;
            return;
        }
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
    }

    bool contains(std::int64_t id) const {
        if (!bits_.empty()) {
            const std::uint64_t off = static_cast<std::uint64_t>(id) - static_cast<std::uint64_t>(lo_);
            return off <= span_ && ((bits_[off / 64] >> (off % 64)) & 1);
        }
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
        if (!bits_.empty()) {  // the common case, branch-free per id
            const std::uint64_t base = static_cast<std::uint64_t>(lo_);
            for (std::int64_t j = lo; j < hi; ++j) {
                const std::uint64_t off = static_cast<std::uint64_t>(ids[j]) - base;
                const std::uint64_t word = off <= span_ ? bits_[off / 64] : 0;
                c += static_cast<std::int64_t>((word >> (off % 64)) & 1);
            }
            return c;
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

    bool empty_;
    std::int64_t lo_ = 0;
    std::uint64_t span_ = 0;
    std::vector<std::uint64_t> bits_;
    std::vector<std::int64_t> keys_;
    std::vector<unsigned char> used_;
    std::size_t mask_ = 0;
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
    const std::int64_t denom = now_seq > 1 ? now_seq : 1;
    // floor(1000 * last_seq / denom): in int64 when the product cannot overflow, else in 128 bits.
    constexpr std::int64_t kSafe = (std::int64_t{1} << 62) / kWeightRecency;
    auto recency = [denom](std::int64_t seq) -> wide_t {
        if (seq > -kSafe && seq < kSafe) {
            const std::int64_t x = kWeightRecency * seq;
            std::int64_t q = x / denom;
            q -= (x % denom != 0 && x < 0);
            return q;
        }
        return floor_div(static_cast<wide_t>(kWeightRecency) * seq, denom);
    };

    std::int64_t marker_sum[64];
    for (int m = 0; m < 64; ++m) {
        marker_sum[m] = 0;
        for (int b = 0; b < kMarkerCount; ++b) {
            marker_sum[m] += ((m >> b) & 1) * kMarkerWeights[b];
        }
    }

    // The best `take` so far in a heap whose top is the worst of them.
    const std::size_t take = std::min(k, eps.n);
    std::vector<Keyed> heap;
    heap.reserve(take);
    // With `better` as the heap's less-than, its front is the worst episode kept.
    for (std::size_t i = 0; i < eps.n && take > 0; ++i) {
        wide_t s = static_cast<wide_t>(kWeightTerm) *
                   query.overlap(eps.term_ids, eps.term_indptr[i], eps.term_indptr[i + 1]);
        s += static_cast<wide_t>(kWeightFile) * files.overlap(eps.file_ids, eps.file_indptr[i], eps.file_indptr[i + 1]);
        s += marker_sum[eps.markers[i] & 63];  // bits 0..5 (two's complement for negative masks)
        s += recency(eps.last_seq[i]);
        const Keyed cand{s, eps.last_seq[i], static_cast<std::int64_t>(i)};
        if (heap.size() < take) {
            heap.push_back(cand);
            std::push_heap(heap.begin(), heap.end(), better);
        } else if (better(cand, heap.front())) {
            std::pop_heap(heap.begin(), heap.end(), better);
            heap.back() = cand;
            std::push_heap(heap.begin(), heap.end(), better);
        }
    }
    std::sort(heap.begin(), heap.end(), better);
    for (std::size_t i = 0; i < heap.size(); ++i) {
        out[i] = heap[i].index;
    }
    *out_count = take;
    return ScoreStatus::ok;
}

}  // namespace latch
