#include "latch/terms.hpp"

#include <algorithm>
#include <cstring>
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

// A word of at most 8 characters packed into 8 bytes (zero padded); every stop word that a term can
// equal (letters only) fits, so a term longer than 8 characters is never a stop word.
std::uint64_t pack(const char* word, std::size_t n) {
    std::uint64_t v = 0;
    std::memcpy(&v, word, n);
    return v;
}

std::vector<std::uint64_t> packed_stop_words() {
    std::vector<std::uint64_t> out;
    for (std::size_t i = 0; i < kStopWordCount; ++i) {
        const std::size_t n = std::strlen(kStopWords[i]);
        if (n <= 8) {
            out.push_back(pack(kStopWords[i], n));
        }
    }
    std::sort(out.begin(), out.end());
    return out;
}

}  // namespace

bool is_stop_word(const char* word, std::size_t n) {
    if (n > 8) {
        for (std::size_t i = 0; i < kStopWordCount; ++i) {  // none today: kept exact if one is added
            if (std::strlen(kStopWords[i]) == n && std::memcmp(kStopWords[i], word, n) == 0) {
                return true;
            }
        }
        return false;
    }
    static const std::vector<std::uint64_t> packed = packed_stop_words();
    return std::binary_search(packed.begin(), packed.end(), pack(word, n));
}

}  // namespace latch
