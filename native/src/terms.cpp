#include "latch/terms.hpp"

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

namespace latch {

// latch.hotpaths.STOP_WORDS in its source order (tests/parity/test_terms_parity.py compares the sets).
const char* const kStopWords[] = {
    "the", "and", "for", "with", "this", "that", "you", "are", "was", "were", "from", "have", "has", "had", "not",
    "but", "can", "will", "what", "all", "any", "its", "our", "out", "use", "into", "then", "than", "some", "just",
    "also", "been", "there", "their", "they", "them", "which", "when", "where", "would", "should", "could", "about",
    "after", "before", "more", "most", "other", "such", "only", "over", "very", "your", "yours", "let", "lets",
    "here", "how", "why", "who", "whom", "does", "did", "done", "doing", "get", "got", "make", "made", "need",
    "needs", "want", "like", "one", "two", "now", "new", "yes", "okay", "please", "thanks", "thank", "i'm", "it's",
    "don't", "can't", "we're", "you're",
};
const std::size_t kStopWordCount = sizeof(kStopWords) / sizeof(kStopWords[0]);

namespace {

// A word of at most 8 characters packed into 8 bytes (zero padded).
std::uint64_t pack(const char* word, std::size_t n) {
    std::uint64_t v = 0;
    std::memcpy(&v, word, n);
    return v;
}

// The stop words of at most 8 characters packed (all of them today) in an open-addressing set, and the
// longer ones. A word longer than every stop word (most identifiers) is ruled out by its length alone.
struct StopSet {
    static constexpr std::size_t kSlots = 512;  // a power of two, far above twice the stop words
    std::uint64_t packed[kSlots] = {};         // 0: empty (no stop word packs to 0)
    std::vector<std::string> longer;
    std::size_t max_length = 0;

    static std::size_t slot(std::uint64_t v) { return static_cast<std::size_t>((v * 0x9E3779B97F4A7C15ULL) >> 55); }

    StopSet() {
        for (std::size_t i = 0; i < kStopWordCount; ++i) {
            const std::size_t n = std::strlen(kStopWords[i]);
            max_length = std::max(max_length, n);
            if (n <= 8) {
                const std::uint64_t v = pack(kStopWords[i], n);
                std::size_t j = slot(v);
                while (packed[j] != 0 && packed[j] != v) {
                    j = (j + 1) & (kSlots - 1);
                }
                packed[j] = v;
            } else {
                longer.emplace_back(kStopWords[i], n);
            }
        }
    }
};

const StopSet kStopSet;

}  // namespace

bool is_stop_word(const char* word, std::size_t n) {
    const StopSet& set = kStopSet;
    if (n > set.max_length) {
        return false;
    }
    if (n <= 8) {
        const std::uint64_t v = pack(word, n);
        for (std::size_t j = StopSet::slot(v); set.packed[j] != 0; j = (j + 1) & (StopSet::kSlots - 1)) {
            if (set.packed[j] == v) {
                return true;
            }
        }
        return false;
    }
    for (const std::string& w : set.longer) {
        if (w.size() == n && std::memcmp(w.data(), word, n) == 0) {
            return true;
        }
    }
    return false;
}

}  // namespace latch
