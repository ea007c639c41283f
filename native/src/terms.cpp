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

// latch.hotpaths.PATH_EXTENSIONS in its source order (tests/parity/test_path_runs_parity.py compares them).
const char* const kPathExtensions[] = {
    "py", "pyi", "ipynb", "rs", "go", "c", "h", "cc", "cpp", "cxx", "hpp", "hh", "cs", "java", "kt", "kts", "scala",
    "swift", "m", "mm", "rb", "php", "pl", "lua", "r", "jl", "dart", "ex", "exs", "erl", "hs", "ml", "clj", "js",
    "mjs", "cjs", "jsx", "ts", "tsx", "vue", "svelte", "css", "scss", "sass", "less", "html", "htm", "xml", "svg",
    "json", "jsonl", "yaml", "yml", "toml", "ini", "cfg", "conf", "env", "lock", "md", "rst", "txt", "csv", "tsv",
    "sql", "sh", "bash", "zsh", "fish", "ps1", "bat", "gradle", "cmake", "mk", "proto", "graphql", "tf", "nix",
    "dockerfile", "patch", "diff", "log", "traj", "pem", "wasm", "sol", "zig", "nim", "v", "sv", "vhd",
};
const std::size_t kPathExtensionCount = sizeof(kPathExtensions) / sizeof(kPathExtensions[0]);

// latch.hotpaths.MUTATING_COMMANDS, TEST_COMMANDS and READ_COMMANDS in their source order
// (tests/parity/test_command_classes_parity.py compares them).
const char* const kMutatingCommands[] = {"*** Begin Patch", "apply_patch", "sed -i", "git apply"};
const std::size_t kMutatingCommandCount = sizeof(kMutatingCommands) / sizeof(kMutatingCommands[0]);
const char* const kTestCommands[] = {
    "pytest", "py.test", "unittest", "tox", "nox", "jest", "vitest", "mocha", "ctest", "phpunit", "rspec", "mypy",
    "pyright", "ruff", "flake8", "pylint", "eslint", "tsc", "cargo test", "cargo check", "cargo clippy",
    "cargo build", "cargo nextest", "go test", "go vet", "go build", "npm test", "npm lint", "npm typecheck",
    "npm build", "npm run test", "npm run lint", "npm run typecheck", "npm run build", "yarn test", "yarn lint",
    "yarn typecheck", "yarn build", "yarn run test", "yarn run lint", "yarn run typecheck", "yarn run build",
    "pnpm test", "pnpm lint", "pnpm typecheck", "pnpm build", "pnpm run test", "pnpm run lint",
    "pnpm run typecheck", "pnpm run build", "bun test", "bun lint", "bun typecheck", "bun build", "bun run test",
    "bun run lint", "bun run typecheck", "bun run build", "make test", "make check", "mvn test", "mvn verify",
    "gradle test", "gradle check", "gradlew test", "gradlew check", "dotnet test", "swift test", "zig build test",
};
const std::size_t kTestCommandCount = sizeof(kTestCommands) / sizeof(kTestCommands[0]);
const char* const kReadCommands[] = {
    "cat", "head", "tail", "sed -n", "rg", "grep", "ls", "find", "nl", "wc", "less", "tree",
};
const std::size_t kReadCommandCount = sizeof(kReadCommands) / sizeof(kReadCommands[0]);

namespace {

// A word of at most 8 characters packed into 8 bytes (zero padded).
std::uint64_t pack(const char* word, std::size_t n) {
    std::uint64_t v = 0;
    std::memcpy(&v, word, n);
    return v;
}

// A set of words: those of at most 8 characters packed in an open-addressing table, the longer ones in a list. A
// word longer than every word of the set (most identifiers, against the stop words) is ruled out by its length alone.
struct WordSet {
    static constexpr std::size_t kSlots = 512;  // a power of two, far above twice the words of either set below
    std::uint64_t packed[kSlots] = {};         // 0: empty (no word packs to 0)
    std::vector<std::string> longer;
    std::size_t max_length = 0;

    static std::size_t slot(std::uint64_t v) { return static_cast<std::size_t>((v * 0x9E3779B97F4A7C15ULL) >> 55); }

    WordSet(const char* const* words, std::size_t count) {
        for (std::size_t i = 0; i < count; ++i) {
            const std::size_t n = std::strlen(words[i]);
            max_length = std::max(max_length, n);
            if (n <= 8) {
                const std::uint64_t v = pack(words[i], n);
                std::size_t j = slot(v);
                while (packed[j] != 0 && packed[j] != v) {
                    j = (j + 1) & (kSlots - 1);
                }
                packed[j] = v;
            } else {
                longer.emplace_back(words[i], n);
            }
        }
    }

    bool contains(const char* word, std::size_t n) const {
        if (n > max_length) {
            return false;
        }
        if (n <= 8) {
            const std::uint64_t v = pack(word, n);
            for (std::size_t j = slot(v); packed[j] != 0; j = (j + 1) & (kSlots - 1)) {
                if (packed[j] == v) {
                    return true;
                }
            }
            return false;
        }
        for (const std::string& w : longer) {
            if (w.size() == n && std::memcmp(w.data(), word, n) == 0) {
                return true;
            }
        }
        return false;
    }
};

const WordSet kStopSet(kStopWords, kStopWordCount);
// The path extensions (every one at most 8 characters but `dockerfile`).
const WordSet kExtensionSet(kPathExtensions, kPathExtensionCount);

// The ASCII characters Unicode whitespace holds (\t-\r, 0x1C-0x20), by byte.
constexpr ByteTable ascii_space_chars() {
    ByteTable t{};
    for (int c = 0; c < 256; ++c) {
        t.v[c] = (c >= '\t' && c <= '\r') || (c >= 0x1C && c <= 0x20);
    }
    return t;
}
constexpr ByteTable kAsciiSpace = ascii_space_chars();

// What may come right before a read word: `"`, whitespace, `;`, `&`, `|`, `(`.
constexpr ByteTable read_prefix_chars() {
    ByteTable t = ascii_space_chars();
    t.v[static_cast<unsigned char>('"')] = true;
    t.v[static_cast<unsigned char>(';')] = true;
    t.v[static_cast<unsigned char>('&')] = true;
    t.v[static_cast<unsigned char>('|')] = true;
    t.v[static_cast<unsigned char>('(')] = true;
    return t;
}
constexpr ByteTable kReadPrefix = read_prefix_chars();

// One command word and where it may stand.
struct CommandWord {
    std::string text;
    unsigned bit;
    bool word_before;   // a word boundary before it (else: the read prefix, or nothing for `*** Begin Patch`)
    bool read_before;   // the text's start or a read prefix character before it
    bool space_after;   // whitespace right after it (else a word boundary, or nothing for `*** Begin Patch`)
    bool word_after;
};

// The command words by first byte.
struct CommandWords {
    std::vector<CommandWord> by_first[256];

    void add(const char* w, unsigned bit, bool word_before, bool read_before, bool space_after, bool word_after) {
        by_first[static_cast<unsigned char>(w[0])].push_back(
            CommandWord{w, bit, word_before, read_before, space_after, word_after});
    }

    CommandWords() {
        for (std::size_t i = 0; i < kMutatingCommandCount; ++i) {
            const bool bounded = kMutatingCommands[i][0] != '*';  // `*** Begin Patch` stands anywhere
            add(kMutatingCommands[i], kCommandMutating, bounded, false, false, bounded);
        }
        for (std::size_t i = 0; i < kTestCommandCount; ++i) {
            add(kTestCommands[i], kCommandTest, true, false, false, true);
        }
        for (std::size_t i = 0; i < kReadCommandCount; ++i) {
            add(kReadCommands[i], kCommandRead, false, true, true, false);
        }
    }
};

const CommandWords kCommandWords;

}  // namespace

unsigned ascii_command_classes(const unsigned char* text, std::size_t n) {
    constexpr unsigned kAll = kCommandMutating | kCommandTest | kCommandRead;
    unsigned found = 0;
    for (std::size_t i = 0; i < n && found != kAll; ++i) {
        const bool word_before = i == 0 || !kAsciiWordChar.v[text[i - 1]];
        if (!word_before && text[i] != '*') {
            continue;  // inside a word: only `*** Begin Patch` may start here (every other word needs a boundary)
        }
        const std::vector<CommandWord>& words = kCommandWords.by_first[text[i]];
        if (words.empty()) {
            continue;
        }
        const bool read_before = i == 0 || kReadPrefix.v[text[i - 1]];
        for (const CommandWord& w : words) {
            const std::size_t end = i + w.text.size();
            if ((found & w.bit) || end > n || (w.word_before && !word_before) || (w.read_before && !read_before) ||
                std::memcmp(text + i, w.text.data(), w.text.size()) != 0) {
                continue;
            }
            if (w.space_after ? end < n && kAsciiSpace.v[text[end]]
                              : !w.word_after || end == n || !kAsciiWordChar.v[text[end]]) {
                found |= w.bit;
            }
        }
    }
    return found;
}

bool is_stop_word(const char* word, std::size_t n) { return kStopSet.contains(word, n); }


bool is_path_extension(const unsigned char* word, std::size_t n) {
    if (n == 0 || n > kExtensionSet.max_length) {
        return false;
    }
    char lower[16];
    for (std::size_t j = 0; j < n; ++j) {
        const unsigned char c = word[j];
        lower[j] = static_cast<char>(c >= 'A' && c <= 'Z' ? c | 32 : c);
    }
    return kExtensionSet.contains(lower, n);
}

}  // namespace latch
