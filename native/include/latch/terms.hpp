// Lexical terms of ASCII text for the episode index (spec: "Episodes"). Pure C++17, no Python.
//
// Reference: latch/hotpaths/_py.py `ascii_terms`, the regex \b[^\W\d_]\w{2,31}\b (re.ASCII) over the
// lower-cased text, minus the stop words. With word characters [A-Za-z0-9_], that regex matches exactly
// the maximal runs of word characters that start with a letter and hold 3 to 32 characters (inside a
// run there is no word boundary, so a longer run yields nothing), in text order.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

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

// The file extensions a path hint ends a name with (lower case), the same list as
// latch.hotpaths.PATH_EXTENSIONS.
extern const char* const kPathExtensions[];
extern const std::size_t kPathExtensionCount;

// Whether the `n` ASCII letters/digits/underscores at `word`, lower-cased, are a path extension.
bool is_path_extension(const unsigned char* word, std::size_t n);

constexpr ByteTable ascii_path_run_chars() {
    ByteTable t = ascii_word_chars();
    t.v[static_cast<unsigned char>('.')] = true;
    t.v[static_cast<unsigned char>('@')] = true;
    t.v[static_cast<unsigned char>('+')] = true;
    t.v[static_cast<unsigned char>('~')] = true;
    t.v[static_cast<unsigned char>('/')] = true;
    t.v[static_cast<unsigned char>('-')] = true;
    return t;
}

// The characters a path can hold: [A-Za-z0-9_.@+~/-], by byte.
inline constexpr ByteTable kAsciiPathRunChar = ascii_path_run_chars();

// Calls emit(start, end) for each maximal run of path characters in the ASCII text `text[0:n]` that holds a
// path hint, in text order: a `/`, or a `.` followed by a path extension (any case) that the run's next
// character (a word character or `/`) does not continue. (Reference: latch/hotpaths/_py.py
// `ascii_path_runs`.) After a `.`, the maximal run of word characters is the only extension candidate: an
// extension is word characters and must not be followed by one; one followed by `/` leaves a `/` in the run.
// Only `/` and `.` can start a hint, so the scan steps from one to the next (memchr) and reads a run's other
// characters only around a hint.
template <class Emit>
void for_each_ascii_path_run(const unsigned char* text, std::size_t n, Emit&& emit) {
    const auto next = [&](unsigned char c, std::size_t from) -> std::size_t {
        const void* at = from < n ? std::memchr(text + from, c, n - from) : nullptr;
        return at == nullptr ? n : static_cast<std::size_t>(static_cast<const unsigned char*>(at) - text);
    };
    std::size_t slash = next('/', 0);
    std::size_t dot = next('.', 0);
    std::size_t p = 0;
    while (true) {
        if (slash < p) {
            slash = next('/', p);
        }
        if (dot < p) {
            dot = next('.', p);
        }
        p = slash < dot ? slash : dot;
        if (p >= n) {
            return;
        }
        if (text[p] == '.') {
            std::size_t j = p + 1;
            while (j < n && kAsciiWordChar.v[text[j]]) {
                ++j;
            }
            if (j == p + 1 || !is_path_extension(text + p + 1, j - p - 1)) {
                p = j;  // no hint here; the characters up to j are word characters (no hint starts there)
                continue;
            }
        }
        std::size_t start = p;
        while (start > 0 && kAsciiPathRunChar.v[text[start - 1]]) {
            --start;
        }
        std::size_t end = p + 1;
        while (end < n && kAsciiPathRunChar.v[text[end]]) {
            ++end;
        }
        emit(start, end);
        p = end;
    }
}

// The command words a tool call's text is searched for (spec: "Episodes", "Markers"), the same lists as
// latch.hotpaths.MUTATING_COMMANDS, TEST_COMMANDS and READ_COMMANDS.
extern const char* const kMutatingCommands[];
extern const std::size_t kMutatingCommandCount;
extern const char* const kTestCommands[];
extern const std::size_t kTestCommandCount;
extern const char* const kReadCommands[];
extern const std::size_t kReadCommandCount;

// Bits of ascii_command_classes.
constexpr unsigned kCommandMutating = 1;
constexpr unsigned kCommandTest = 2;
constexpr unsigned kCommandRead = 4;

// Which command words the ASCII text `text[0:n]` holds, as kCommand* bits (reference: latch/hotpaths/_py.py
// `ascii_command_classes`): a mutating word (`*** Begin Patch` anywhere, the others between word boundaries),
// a test word between word boundaries, a read word at the start or after `"`, whitespace, `;`, `&`, `|` or `(`,
// followed by whitespace (the ASCII characters Unicode whitespace holds: \t-\r and 0x1C-0x20).
unsigned ascii_command_classes(const unsigned char* text, std::size_t n);

}  // namespace latch
