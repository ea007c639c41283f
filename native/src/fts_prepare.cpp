#include "latch/fts_prepare.hpp"

#include <algorithm>
#include <cstring>
#include <string>
#include <unordered_set>
#include <vector>

namespace latch {

namespace {

struct Range {
    std::uint32_t lo, hi;
};

// fts.py _STANDALONE (_CJK_RANGES + _SYMBOL_RANGES), overlapping ranges merged, sorted
// (tests/parity/test_fts_prepare_parity.py checks every boundary against the reference).
constexpr Range kStandalone[] = {
    {0xA6, 0xA6}, {0xA9, 0xA9}, {0xAE, 0xAE}, {0xB0, 0xB0}, {0x482, 0x482}, {0x58D, 0x58E},
    {0x60E, 0x60F}, {0x6DE, 0x6DE}, {0x6E9, 0x6E9}, {0x6FD, 0x6FE}, {0x7F6, 0x7F6}, {0x9FA, 0x9FA},
    {0xB70, 0xB70}, {0xBF3, 0xBF8}, {0xBFA, 0xBFA}, {0xC7F, 0xC7F}, {0xD4F, 0xD4F}, {0xD79, 0xD79},
    {0xF01, 0xF03}, {0xF13, 0xF13}, {0xF15, 0xF17}, {0xF1A, 0xF1F}, {0xF34, 0xF34}, {0xF36, 0xF36},
    {0xF38, 0xF38}, {0xFBE, 0xFC5}, {0xFC7, 0xFCF}, {0xFD5, 0xFD8}, {0x109E, 0x109F}, {0x1390, 0x1399},
    {0x1940, 0x1940}, {0x19DE, 0x19FF}, {0x1B61, 0x1B6A}, {0x1B74, 0x1B7C}, {0x2100, 0x2101}, {0x2103, 0x2106},
    {0x2108, 0x2109}, {0x2114, 0x2114}, {0x2116, 0x2117}, {0x211E, 0x2123}, {0x2125, 0x2125}, {0x2127, 0x2127},
    {0x2129, 0x2129}, {0x212E, 0x212E}, {0x213A, 0x213B}, {0x214A, 0x214A}, {0x214C, 0x214D}, {0x214F, 0x214F},
    {0x218A, 0x218B}, {0x2195, 0x2199}, {0x219C, 0x219F}, {0x21A1, 0x21A2}, {0x21A4, 0x21A5}, {0x21A7, 0x21AD},
    {0x21AF, 0x21CD}, {0x21D0, 0x21D1}, {0x21D3, 0x21D3}, {0x21D5, 0x21F3}, {0x2300, 0x2307}, {0x230C, 0x231F},
    {0x2322, 0x2328}, {0x232B, 0x237B}, {0x237D, 0x239A}, {0x23B4, 0x23DB}, {0x23E2, 0x244A}, {0x249C, 0x24E9},
    {0x2500, 0x25B6}, {0x25B8, 0x25C0}, {0x25C2, 0x25F7}, {0x2600, 0x266E}, {0x2670, 0x2767}, {0x2794, 0x27BF},
    {0x2800, 0x28FF}, {0x2B00, 0x2B2F}, {0x2B45, 0x2B46}, {0x2B4D, 0x2BFF}, {0x2CE5, 0x2CEA}, {0x2E50, 0x2E51},
    {0x2E80, 0x2FFB}, {0x3004, 0x3004}, {0x3012, 0x3013}, {0x3020, 0x3020}, {0x3036, 0x3037}, {0x303E, 0x312F},
    {0x3190, 0x321E}, {0x322A, 0x3247}, {0x3250, 0x3250}, {0x3260, 0x327F}, {0x328A, 0x32B0}, {0x32C0, 0x9FFF},
    {0xA490, 0xA4C6}, {0xA828, 0xA82B}, {0xA836, 0xA837}, {0xA839, 0xA839}, {0xA960, 0xA97F}, {0xAA77, 0xAA79},
    {0xAC00, 0xD7AF}, {0xF900, 0xFAFF}, {0xFD40, 0xFD4F}, {0xFDCF, 0xFDCF}, {0xFDFD, 0xFDFF}, {0xFFE4, 0xFFE4},
    {0xFFE8, 0xFFE8}, {0xFFED, 0xFFEE}, {0xFFFC, 0xFFFD}, {0x10137, 0x1013F}, {0x10179, 0x10189}, {0x1018C, 0x101FC},
    {0x10877, 0x10878}, {0x10AC8, 0x10AC8}, {0x1173F, 0x1173F}, {0x11FD5, 0x11FDC}, {0x11FE1, 0x11FF1}, {0x16B3C, 0x16B3F},
    {0x16B45, 0x16B45}, {0x1BC9C, 0x1BC9C}, {0x1CF50, 0x1D164}, {0x1D16A, 0x1D16C}, {0x1D183, 0x1D184}, {0x1D18C, 0x1D1A9},
    {0x1D1AE, 0x1D241}, {0x1D245, 0x1D245}, {0x1D300, 0x1D356}, {0x1D800, 0x1D9FF}, {0x1DA37, 0x1DA3A}, {0x1DA6D, 0x1DA74},
    {0x1DA76, 0x1DA83}, {0x1DA85, 0x1DA86}, {0x1E14F, 0x1E14F}, {0x1ECAC, 0x1ECAC}, {0x1ED2E, 0x1ED2E}, {0x1F000, 0x1F0F5},
    {0x1F10D, 0x1FBCA}, {0x20000, 0x3134F}
};

struct AlnumTable {
    bool v[256];
};

constexpr AlnumTable alnum_table() {
    AlnumTable t{};
    for (int c = 0; c < 256; ++c) {
        t.v[c] = (c >= '0' && c <= '9') || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z');
    }
    return t;
}

constexpr AlnumTable kAlnum = alnum_table();

inline bool is_alnum(unsigned char c) { return kAlnum.v[c]; }

constexpr bool is_letter(unsigned char c) { return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z'); }

// U+E02E, U+E02B, U+E023 (private use: token characters of the index's tokenizer) in UTF-8.
constexpr char kGlueDot[] = "\xEE\x80\xAE";
constexpr char kGluePlus[] = "\xEE\x80\xAB";
constexpr char kGlueHash[] = "\xEE\x80\xA3";

std::size_t alnum_run(const unsigned char* s, std::size_t i, std::size_t n) {
    while (i < n && is_alnum(s[i])) {
        ++i;
    }
    return i;
}

// Pass 1 (fts.py _DOT_RE): `.WORD` where the dot follows no letter, digit or dot and WORD starts with a letter.
bool glue_dots(const unsigned char* s, std::size_t n, std::string& out) {
    bool changed = false;
    std::size_t copied = 0;
    for (const void* p = std::memchr(s, '.', n); p != nullptr;) {
        const std::size_t i = static_cast<std::size_t>(static_cast<const unsigned char*>(p) - s);
        std::size_t next = i + 1;
        if ((i == 0 || !(is_alnum(s[i - 1]) || s[i - 1] == '.')) && i + 1 < n && is_letter(s[i + 1])) {
            const std::size_t j = alnum_run(s, i + 1, n);
            if (!changed) {
                out.reserve(n + 64);
                changed = true;
            }
            out.append(reinterpret_cast<const char*>(s) + copied, i - copied);
            out += ' ';
            out += kGlueDot;
            out.append(reinterpret_cast<const char*>(s) + i + 1, j - i - 1);
            out += " .";
            out.append(reinterpret_cast<const char*>(s) + i + 1, j - i - 1);
            copied = j;
            next = j;
        }
        p = next < n ? std::memchr(s + next, '.', n - next) : nullptr;
    }
    if (changed) {
        out.append(reinterpret_cast<const char*>(s) + copied, n - copied);
    }
    return changed;
}

inline bool ends_suffix(unsigned char c) { return !(is_alnum(c) || c == '+' || c == '#'); }

// Pass 2 (fts.py _SUFFIX_RE): WORD++ or WORD# where WORD starts with a letter after no letter or digit, and no
// letter, digit, '+' or '#' follows.
bool glue_suffixes(const unsigned char* s, std::size_t n, std::string& out) {
    // Every match ends in '#' or '+': jump to each, then look back over the letters and digits before it (a
    // maximal run, so no letter or digit precedes it: the pattern's lookbehind).
    bool changed = false;
    std::size_t copied = 0;
    std::size_t j = 0;
    std::size_t next_plus = 0;  // the first '+' at or after j (n: none), kept until j passes it
    std::size_t next_hash = 0;
    auto find = [s, n](std::size_t from, unsigned char mark) {
        const void* p = from < n ? std::memchr(s + from, mark, n - from) : nullptr;
        return p == nullptr ? n : static_cast<std::size_t>(static_cast<const unsigned char*>(p) - s);
    };
    next_plus = find(0, '+');
    next_hash = find(0, '#');
    while (j < n) {
        if (next_plus < j) {
            next_plus = find(j, '+');
        }
        if (next_hash < j) {
            next_hash = find(j, '#');
        }
        j = std::min(next_plus, next_hash);
        if (j >= n) {
            break;
        }
        const unsigned char c = s[j];
        if (j == 0 || !is_alnum(s[j - 1])) {
            ++j;
            continue;
        }
        std::size_t i = j;
        while (i > copied && is_alnum(s[i - 1])) {
            --i;
        }
        std::size_t suffix = 0;
        if (is_letter(s[i]) && (i == 0 || !is_alnum(s[i - 1]))) {
            if (j + 1 < n && c == '+' && s[j + 1] == '+' && (j + 2 == n || ends_suffix(s[j + 2]))) {
                suffix = 2;
            } else if (c == '#' && (j + 1 == n || ends_suffix(s[j + 1]))) {
                suffix = 1;
            }
        }
        if (suffix == 0) {
            ++j;
            continue;
        }
        if (!changed) {
            out.reserve(n + 64);
            changed = true;
        }
        const char* w = reinterpret_cast<const char*>(s) + i;
        out.append(reinterpret_cast<const char*>(s) + copied, i - copied);
        out.append(w, j - i);
        for (std::size_t k = 0; k < suffix; ++k) {
            out += c == '#' ? kGlueHash : kGluePlus;
        }
        out += ' ';
        out.append(w, j - i + suffix);
        j = copied = j + suffix;
    }
    if (changed) {
        out.append(reinterpret_cast<const char*>(s) + copied, n - copied);
    }
    return changed;
}

// Pass 3 (fts.py _prepare_v1): a space either side of every standalone code point. `s` is valid UTF-8.
bool split_standalone(const unsigned char* s, std::size_t n, std::string& out) {
    bool changed = false;
    std::size_t copied = 0;
    std::size_t i = 0;
    while (i < n) {
        const unsigned char c = s[i];
        if (c < 0x80) {
            ++i;
            continue;
        }
        std::uint32_t cp;
        std::size_t len;
        if (c < 0xE0) {
            cp = ((c & 0x1Fu) << 6) | (s[i + 1] & 0x3Fu);
            len = 2;
        } else if (c < 0xF0) {
            cp = ((c & 0x0Fu) << 12) | ((s[i + 1] & 0x3Fu) << 6) | (s[i + 2] & 0x3Fu);
            len = 3;
        } else {
            cp = ((c & 0x07u) << 18) | ((s[i + 1] & 0x3Fu) << 12) | ((s[i + 2] & 0x3Fu) << 6) | (s[i + 3] & 0x3Fu);
            len = 4;
        }
        if (i + len > n) {  // not reached for valid UTF-8
            break;
        }
        if (fts_standalone(cp)) {
            if (!changed) {
                out.reserve(n + n / 2 + 16);
                changed = true;
            }
            out.append(reinterpret_cast<const char*>(s) + copied, i - copied);
            out += ' ';
            out.append(reinterpret_cast<const char*>(s) + i, len);
            out += ' ';
            copied = i + len;
        }
        i += len;
    }
    if (changed) {
        out.append(reinterpret_cast<const char*>(s) + copied, n - copied);
    }
    return changed;
}

// The terms already written to a dotted-terms text, by their place in it: open addressing over (offset, length)
// pairs (length 0: an empty slot), so adding a term allocates nothing once the table has grown.
class SeenTerms {
public:
    void reset() {
        if (count_ != 0 || slots_.size() != kFirst) {
            slots_.assign(kFirst, Slot{});
            count_ = 0;
        }
    }

    // Records the term at text[off, off + len) unless an equal one is there; whether it was new.
    bool insert(const std::string& text, std::size_t off, std::size_t len) {
        if ((count_ + 1) * 2 > slots_.size()) {
            grow(text);
        }
        const char* t = text.data() + off;
        const std::size_t mask = slots_.size() - 1;
        for (std::size_t h = hash(t, len) & mask;; h = (h + 1) & mask) {
            Slot& slot = slots_[h];
            if (slot.len == 0) {
                slot = Slot{off, len};
                ++count_;
                return true;
            }
            if (slot.len == len && std::memcmp(text.data() + slot.off, t, len) == 0) {
                return false;
            }
        }
    }

private:
    struct Slot {
        std::size_t off = 0, len = 0;
    };
    static constexpr std::size_t kFirst = 64;

    static std::size_t hash(const char* t, std::size_t len) {
        std::uint64_t h = 1469598103934665603ull;  // FNV-1a
        for (std::size_t i = 0; i < len; ++i) {
            h = (h ^ static_cast<unsigned char>(t[i])) * 1099511628211ull;
        }
        return static_cast<std::size_t>(h ^ (h >> 29));
    }

    void grow(const std::string& text) {
        std::vector<Slot> old(slots_.size() * 2);
        old.swap(slots_);
        const std::size_t mask = slots_.size() - 1;
        for (const Slot& slot : old) {
            if (slot.len != 0) {
                std::size_t h = hash(text.data() + slot.off, slot.len) & mask;
                while (slots_[h].len != 0) {
                    h = (h + 1) & mask;
                }
                slots_[h] = slot;
            }
        }
    }

    std::vector<Slot> slots_ = std::vector<Slot>(kFirst);
    std::size_t count_ = 0;
};

constexpr std::size_t kMaxDottedParts = 8;  // fts.py MAX_DOTTED_PARTS

// Pass 4 (fts.py _DOTTED_RE, _dotted_terms): runs of letters and digits joined by single dots, after and
// before no letter or digit; each term's sub-runs of two or more parts (of its first 8), dots as U+E02E.
void dotted_terms(const unsigned char* s, std::size_t n, std::string& extra, SeenTerms& seen) {
    seen.reset();
    std::pair<std::size_t, std::size_t> parts[kMaxDottedParts];
    std::size_t used = 0;
    // each sub-run written at the end of `extra` (after a space), and taken back when it is there already
    auto emit_terms = [&]() {
        for (std::size_t a = 0; a + 1 < used; ++a) {
            for (std::size_t b = a + 2; b <= used; ++b) {
                const std::size_t mark = extra.size();
                if (mark != 0) {
                    extra += ' ';
                }
                const std::size_t off = extra.size();
                for (std::size_t q = a; q < b; ++q) {
                    if (q > a) {
                        extra += kGlueDot;
                    }
                    extra.append(reinterpret_cast<const char*>(s) + parts[q].first, parts[q].second - parts[q].first);
                }
                if (!seen.insert(extra, off, extra.size() - off)) {
                    extra.resize(mark);
                }
            }
        }
    };
    // Every term holds a dot with a letter or digit either side: jump to each, then look back to its run's start.
    std::size_t done = 0;  // the text before it is scanned
    for (const void* p = std::memchr(s, '.', n); p != nullptr;) {
        const std::size_t d = static_cast<std::size_t>(static_cast<const unsigned char*>(p) - s);
        std::size_t next = d + 1;
        if (d > done && d + 1 < n && is_alnum(s[d - 1]) && is_alnum(s[d + 1])) {
            std::size_t start = d - 1;
            while (start > 0 && is_alnum(s[start - 1])) {
                --start;
            }
            std::size_t k = d;
            parts[0] = {start, d};
            used = 1;
            while (k + 1 < n && s[k] == '.' && is_alnum(s[k + 1])) {
                const std::size_t e = alnum_run(s, k + 1, n);
                if (used < kMaxDottedParts) {
                    parts[used++] = {k + 1, e};
                }
                k = e;
            }
            done = next = k;
            emit_terms();
        }
        p = next < n ? std::memchr(s + next, '.', n - next) : nullptr;
    }
}

// Working strings of one thread's preparations, kept between calls (one that grew past 1 MiB is let go).
struct Scratch {
    std::string a, b, split, extra;
    SeenTerms seen;

    void trim() {
        for (std::string* t : {&a, &b, &split, &extra}) {
            t->clear();
            if (t->capacity() > (std::size_t{1} << 20)) {
                std::string().swap(*t);
            }
        }
    }
};

}  // namespace

bool fts_standalone(std::uint32_t cp) {
    if (cp < 0xA6) {
        return false;
    }
    const Range* end = kStandalone + sizeof(kStandalone) / sizeof(kStandalone[0]);
    const Range* r = std::upper_bound(kStandalone, end, cp, [](std::uint32_t v, const Range& x) { return v < x.lo; });
    return r != kStandalone && cp <= (r - 1)->hi;
}

bool fts_prepare(const unsigned char* text, std::size_t n, std::string& out) {
    out.clear();
    thread_local Scratch scratch;
    struct Trim {
        Scratch& s;
        ~Trim() { s.trim(); }
    } trim{scratch};
    const bool has_dot = std::memchr(text, '.', n) != nullptr;
    std::string& a = scratch.a;
    std::string& b = scratch.b;
    const unsigned char* cur = text;
    std::size_t len = n;
    if (has_dot && glue_dots(cur, len, a)) {
        cur = reinterpret_cast<const unsigned char*>(a.data());
        len = a.size();
    }
    if ((std::memchr(cur, '#', len) != nullptr || std::memchr(cur, '+', len) != nullptr) &&
        glue_suffixes(cur, len, b)) {
        cur = reinterpret_cast<const unsigned char*>(b.data());
        len = b.size();
    }
    // The glue passes add only private-use characters, none of them standalone: an ASCII text has none.
    unsigned char high = 0;
    for (std::size_t i = 0; i < n; ++i) {
        high |= text[i];
    }
    const bool ascii = high < 0x80;
    std::string& split = scratch.split;
    if (!ascii && split_standalone(cur, len, split)) {
        out.swap(split);
    } else if (cur != text) {
        out.assign(reinterpret_cast<const char*>(cur), len);
    }
    std::string& extra = scratch.extra;
    if (has_dot) {
        dotted_terms(text, n, extra, scratch.seen);
    }
    if (extra.empty()) {
        return !out.empty() || cur != text;
    }
    if (out.empty() && cur == text) {
        out.assign(reinterpret_cast<const char*>(text), n);
    }
    out += '\n';
    out += extra;
    return true;
}

}  // namespace latch
