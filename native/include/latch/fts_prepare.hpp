// FTS5 text preparation of the event store's index. Pure C++17, no Python.
//
// Reference: latch/store/fts.py `_prepare_text_py` (the same bytes for every valid UTF-8 text;
// tests/parity/test_fts_prepare_parity.py). Every pattern of the reference is ASCII (letters, digits, '.',
// '+', '#'), and in UTF-8 a byte below 0x80 is always that ASCII character, so the passes below scan bytes:
//   1. a dot that starts a word (`.NET`, `.env`) gets the glued token first: ` \uE02ENET .NET`;
//   2. a word that ends in `++` or `#` (`C++`, `C#`) gets the glued token first: `C\uE02B\uE02B C++`;
//   3. every CJK/kana/hangul code point and every symbol of the fixed table stands alone (` 数 `);
//   4. the dotted terms of the original text (`node.js` -> `node\uE02Ejs`, sub-runs of at most 8 parts) follow
//      after a newline, each once, in order of appearance.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace latch {

// Whether code point `cp` stands alone in the prepared text (fts.py _STANDALONE).
bool fts_standalone(std::uint32_t cp);

// The prepared text of the valid UTF-8 `text[0:n]` into `out` (replaced). Returns false, leaving `out`
// empty, when the prepared text is `text` itself (nothing to glue, split or add).
bool fts_prepare(const unsigned char* text, std::size_t n, std::string& out);

}  // namespace latch
