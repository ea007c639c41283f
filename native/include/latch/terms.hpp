// Lexical terms of ASCII text for the episode index (spec: "Episodes"). Pure C++17, no Python.
//
// Reference: latch/hotpaths/_py.py `ascii_terms`, the regex \b[^\W\d_]\w{2,31}\b (re.ASCII) over the
// lower-cased text, minus the stop words. With word characters [A-Za-z0-9_], that regex matches exactly
// the maximal runs of word characters that start with a letter and hold 3 to 32 characters (inside a
// run there is no word boundary, so a longer run yields nothing), in text order.
#pragma once

#include <cstddef>
#include <cstdint>

namespace latch {

// The stop words (lower case), the same set as latch.hotpaths.STOP_WORDS.
extern const char* const kStopWords[];
extern const std::size_t kStopWordCount;

// Whether the `n` lower-case ASCII letters/digits at `word` are a stop word.
bool is_stop_word(const char* word, std::size_t n);

struct ByteTable {
    bool v[256];
};

constexpr ByteTable ascii_word_chars() {
    ByteTable t{};
    for (int c = 0; c < 256; ++c) {
        t.v[c] = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
    }
    return t;
}

// The ASCII word characters [A-Za-z0-9_], by byte.
inline constexpr ByteTable kAsciiWordChar = ascii_word_chars();

inline bool is_ascii_word_char(unsigned char c) { return kAsciiWordChar.v[c]; }

// Calls emit(word, length) for each term of the ASCII text `text[0:n]`, in text order, with the term
// lower-cased at `word` (valid only during the call).
template <class Emit>
void for_each_ascii_term(const unsigned char* text, std::size_t n, Emit&& emit) {
    char lower[32];
    std::size_t i = 0;
    while (i < n) {
        if (!is_ascii_word_char(text[i])) {
            ++i;
            continue;
        }
        const std::size_t start = i;
        while (i < n && is_ascii_word_char(text[i])) {
            ++i;
        }
        const std::size_t len = i - start;
        const unsigned char first = text[start] | 32;
        if (len < 3 || len > 32 || first < 'a' || first > 'z') {
            continue;
        }
        for (std::size_t j = 0; j < len; ++j) {
            const unsigned char c = text[start + j];
            lower[j] = static_cast<char>(c >= 'A' && c <= 'Z' ? c | 32 : c);
        }
        if (!is_stop_word(lower, len)) {
            emit(lower, len);
        }
    }
}

}  // namespace latch
