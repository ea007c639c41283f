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

// The stop words of at most 8 characters packed and sorted (all of them today), and the longer ones.
struct StopSet {
    std::vector<std::uint64_t> packed;
    std::vector<std::string> longer;

    StopSet() {
        for (std::size_t i = 0; i < kStopWordCount; ++i) {
            const std::size_t n = std::strlen(kStopWords[i]);
            if (n <= 8) {
                packed.push_back(pack(kStopWords[i], n));
            } else {
                longer.emplace_back(kStopWords[i], n);
            }
        }
        std::sort(packed.begin(), packed.end());
    }
};

const StopSet& stop_set() {
    static const StopSet set;
    return set;
}

}  // namespace

bool is_stop_word(const char* word, std::size_t n) {
    const StopSet& set = stop_set();
    if (n <= 8) {
        return std::binary_search(set.packed.begin(), set.packed.end(), pack(word, n));
    }
    for (const std::string& w : set.longer) {
        if (w.size() == n && std::memcmp(w.data(), word, n) == 0) {
            return true;
        }
    }
    return false;
}

}  // namespace latch
