"""The estimator calibration set: deterministic text windows tagged by category.

Real categories come from the transcripts in ``../shared/corpus`` (read in place, never copied):
``json`` (raw transcript records), ``tool_output`` (tool results), ``code`` (file contents,
edits, patches, fenced code), ``prose`` (assistant/user text, reasoning summaries, instructions),
``logs`` (aider console lines), ``cyrillic`` (any extracted text that is mostly Cyrillic).
Generated categories need no corpus: ``cjk``, ``emoji``, ``hex``, ``uuid``, ``base64``, ``ids``
(seeded :class:`random.Random`, so every run builds the same strings).

Each category's texts are joined with ``"\\n"`` into one stream and cut into windows of
``WINDOW_SIZES`` characters at evenly spaced offsets (``phase`` shifts them; 0 is the set the
tests assert on, the fit uses other phases).
"""

from __future__ import annotations

import base64
import json
import random
import re
from collections.abc import Iterable, Iterator
from pathlib import Path

from ..records import dataclass

WINDOW_SIZES = (64, 256, 1024, 4096)
WINDOWS_PER_SIZE = {64: 300, 256: 200, 1024: 80, 4096: 30}
REAL_CATEGORIES = ("json", "tool_output", "code", "prose", "logs", "cyrillic")
GENERATED_CATEGORIES = ("cjk", "emoji", "hex", "uuid", "base64", "ids")


@dataclass(frozen=True)
class Window:
    """One calibration window: ``text`` cut at character ``offset`` of its ``category`` stream, ``size`` characters requested."""

    category: str
    size: int  # characters requested (the stream may be shorter)
    offset: int  # character offset in the category stream
    text: str


# Last path component (JSON key) of a string leaf -> category.
_KEY_CATEGORY = {
    "stdout": "tool_output",
    "stderr": "tool_output",
    "observation": "tool_output",
    "output": "tool_output",
    "content": "tool_output",  # tool_result blocks, OpenHands observations, SWE-agent history
    "new_string": "code",
    "old_string": "code",
    "newString": "code",
    "oldString": "code",
    "originalFile": "code",
    "unified_diff": "code",
    "translated_ipython_code": "code",
    "new_content": "code",
    "input": "code",
    "arguments": "code",
    "action": "code",
    "text": "prose",
    "thinking": "prose",
    "thought": "prose",
    "response": "prose",
    "message": "prose",
    "developer_instructions": "prose",
    "prompt": "prose",
}
# Key paths whose string is file content even though the key is "content".
_CODE_PARENTS = ("/file/content", "/input/content", "/args/content", "/toolUseResult/content")
_CYRILLIC = re.compile(r"[\u0400-\u04ff]")
_LETTER = re.compile(r"[^\W\d_]")


def _is_cyrillic(text: str) -> bool:
    letters = len(_LETTER.findall(text))
    return letters > 0 and 10 * len(_CYRILLIC.findall(text)) >= 3 * letters


def _leaves(value: object, path: str) -> Iterator[tuple[str, str]]:
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _leaves(v, f"{path}/{k}")
    elif isinstance(value, list):
        for v in value:
            yield from _leaves(v, path + "[]")
    elif isinstance(value, str) and len(value) >= 32:
        yield path, value


def _leaf_category(path: str) -> str | None:
    if path.endswith(_CODE_PARENTS):
        return "code"
    key = path.rsplit("/", 1)[-1].removesuffix("[]")
    if key == "encrypted_content":
        return None  # opaque ciphertext (base64 is a generated category)
    if "/changes/" in path and key == "content":
        return "code"
    return _KEY_CATEGORY.get(key)


def _aider_texts(text: str) -> Iterator[tuple[str, str]]:
    fence = False
    for line in text.splitlines():
        if line.startswith("```"):
            fence = not fence
            yield "code", line
        elif fence:
            yield "code", line
        elif line.startswith(">"):
            yield "logs", line
        else:
            yield "prose", line


def corpus_texts(corpus: Path, names: Iterable[str] | None = None) -> dict[str, list[str]]:
    """Texts per real category, in a fixed order (files sorted by path); ``names``: only these files (paths
    relative to ``corpus``), else every transcript under it."""
    out: dict[str, list[str]] = {c: [] for c in REAL_CATEGORIES}
    seen: set[str] = set()

    def add(category: str, text: str) -> None:
        if text in seen:  # Claude Code repeats tool results under toolUseResult
            return
        seen.add(text)
        out["cyrillic" if _is_cyrillic(text) else category].append(text)

    wanted = None if names is None else {corpus / n for n in names}
    for path in sorted(
        p
        for p in corpus.rglob("*")
        if p.is_file() and p.suffix in (".jsonl", ".json", ".traj", ".md") and (wanted is None or p in wanted)
    ):
        if path.name in ("README.md", "FORMATS.md"):
            continue
        raw = path.read_text(encoding="utf-8-sig")
        if path.suffix == ".md":
            for category, line in _aider_texts(raw):
                add(category, line)
            continue
        out["json"].append(raw)
        if path.suffix == ".jsonl":
            records = [json.loads(line) for line in raw.splitlines() if line.strip()]
        else:
            records = [json.loads(raw)]
        for record in records:
            for leaf_path, text in _leaves(record, ""):
                leaf_category = _leaf_category(leaf_path)
                if leaf_category:
                    add(leaf_category, text)
    return out


def generated_texts(seed: int = 2024) -> dict[str, list[str]]:
    """Texts per generated category (deterministic for a seed)."""
    rng = random.Random(seed)

    def cjk() -> list[str]:
        han_common = (
            "的一是不了人我在有他这中大来上个国到说们为子和你地出道也时年得就那要下以生会自着去之过家学对可她"
            "里后小么心多天而能好都然没日于起还发成事只作当想看文无开手十用主行方又如前所本见经头面公同三已老"
            "从动两长知民样现分将外但身些与高意进把法此实回二理美点月明其种声全工己话儿者向情部正名定女问力机"
            "给等几很业最间新什打便位因重被走电四第门相次东政海口使教西再平真听世气信北少关并内加化由却代军产"
            "入先山五太水万市眼体别处总才场师书比住员九笑性通目华报立马命张活难神数件安表原车白应路期叫死常提"
            "感金何更反合放做系计或司利受光王果亲界及今京务制解各任至清物台象记边共风战干接它许八特觉望直服毛"
            "林题建南度统色字请交爱让认算论百吃义科怎元社术结六功指思非流每青管夫连远资队跟带花快条院变联言权"
            "往展该领传近留红治决周保达办运武半候七必城父强步完革深区即求品士转量空甚众技轻程告江语英基派满式"
            "李息写呢识极令黄德收脸钱党倒未持取设始版双历越史商千片容研像找友孩站广改议形委早房音火际则首单据"
            "导影失拿网香似斯专石若兵弟谁校读志飞观争究包组造落视济喜离虽坏兴"
        )
        han = [
            chr(rng.randrange(0x4E00, 0xA000)) if rng.random() < 0.3 else rng.choice(han_common) for _ in range(40000)
        ]
        texts, i = [], 0
        while i < len(han):
            k = rng.randrange(4, 30)
            texts.append("".join(han[i : i + k]) + rng.choice("，。、！？：；"))
            i += k
        kana = [
            chr(rng.randrange(0x3041, 0x3097)) if rng.random() < 0.7 else chr(rng.randrange(0x30A1, 0x30FB))
            for _ in range(6000)
        ]
        texts += ["".join(kana[j : j + 20]) + "。" for j in range(0, len(kana), 20)]
        hangul = [chr(rng.randrange(0xAC00, 0xD7A4)) for _ in range(6000)]
        texts += [
            " ".join("".join(hangul[j + m : j + m + 3]) for m in range(0, 15, 3)) + "."
            for j in range(0, len(hangul), 15)
        ]
        rng.shuffle(texts)
        return ["".join(texts[j : j + 8]) for j in range(0, len(texts), 8)]

    def emoji() -> list[str]:
        words = "ok ship it done fix bug test pass fail lgtm nice wow great".split()
        tones = [chr(c) for c in range(0x1F3FB, 0x1F400)]
        out = []
        for _ in range(3000):
            parts = []
            for _ in range(rng.randrange(1, 8)):
                r = rng.random()
                if r < 0.5:
                    parts.append(chr(rng.randrange(0x1F300, 0x1FAFF)))
                elif r < 0.65:
                    parts.append(chr(rng.randrange(0x1F44A, 0x1F450)) + rng.choice(tones))
                elif r < 0.75:
                    parts.append(chr(rng.randrange(0x1F468, 0x1F46A)) + "\u200d" + chr(rng.randrange(0x1F466, 0x1F46A)))
                elif r < 0.85:
                    parts.append(chr(rng.randrange(0x1F1E6, 0x1F200)) + chr(rng.randrange(0x1F1E6, 0x1F200)))
                elif r < 0.92:
                    parts.append(chr(rng.randrange(0x2600, 0x27C0)) + "\ufe0f")
                else:
                    parts.append(rng.choice(words))
            out.append(rng.choice(("", " ")).join(parts))
        return out

    def hexdigests() -> list[str]:
        out = []
        for _ in range(3000):
            n = rng.choice((16, 20, 32, 40, 64))
            h = rng.randbytes(n // 2 if n == 16 else n).hex()[: n if n != 20 else 40]
            out.append(rng.choice(("{}", "commit {}", "sha256:{}", '"{}",', "{}  src/main.rs")).format(h))
        return out

    def uuids() -> list[str]:
        out = []
        for _ in range(3000):
            b = rng.randbytes(16).hex()
            u = f"{b[:8]}-{b[8:12]}-4{b[13:16]}-{rng.choice('89ab')}{b[17:20]}-{b[20:32]}"
            out.append(
                rng.choice(('"id": "{}",', "{}", "uuid={}", '"{}"')).format(u.upper() if rng.random() < 0.1 else u)
            )
        return out

    def b64() -> list[str]:
        out = []
        for _ in range(400):
            data = rng.randbytes(rng.randrange(16, 1200))
            enc = base64.urlsafe_b64encode(data) if rng.random() < 0.3 else base64.b64encode(data)
            s = enc.decode()
            if rng.random() < 0.4:
                s = "\n".join(s[j : j + 76] for j in range(0, len(s), 76))
            out.append(s)
        return out

    def ids() -> list[str]:
        alnum = "abcdefghijklmnopqrstuvwxyz0123456789"
        nano = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-"
        out = []
        for _ in range(3000):
            r = rng.random()
            if r < 0.4:
                s = rng.choice(("req_", "msg_", "toolu_", "call_", "")) + "".join(
                    rng.choice(alnum) for _ in range(rng.randrange(8, 28))
                )
            elif r < 0.7:
                s = "".join(rng.choice(nano) for _ in range(rng.randrange(10, 32)))
            else:
                s = f"{rng.randrange(1, 10 ** rng.randrange(1, 12))}.{rng.randrange(0, 1000)}"
            out.append(s)
        return out

    return {"cjk": cjk(), "emoji": emoji(), "hex": hexdigests(), "uuid": uuids(), "base64": b64(), "ids": ids()}


def windows(texts: dict[str, list[str]], phase: float = 0.0) -> list[Window]:
    """Windows of every category: ``WINDOWS_PER_SIZE[s]`` windows of ``s`` characters each."""
    out: list[Window] = []
    for category, parts in texts.items():
        stream = "\n".join(parts)
        for size in WINDOW_SIZES:
            span = max(len(stream) - size, 0)
            count = WINDOWS_PER_SIZE[size]
            offsets = sorted({int(span * (i + phase) / count) for i in range(count)})
            out.extend(Window(category, size, o, stream[o : o + size]) for o in offsets)
    return out


def calibration_set(corpus: Path | None, phase: float = 0.0, names: Iterable[str] | None = None) -> list[Window]:
    """Generated windows, plus the corpus windows when ``corpus`` is given (of the files ``names`` only, when
    given: :func:`corpus_texts`)."""
    texts = generated_texts()
    if corpus is not None:
        texts = {**corpus_texts(corpus, names), **texts}
    return windows(texts, phase)


@dataclass(frozen=True)
class CategoryStats:
    """Estimate/exact ratios of one category's windows (``exact`` = tokens of the reference)."""

    category: str
    windows: int
    under: int  # windows whose estimate is below the exact count
    min_ratio: float
    p50_ratio: float
    max_ratio: float
    aggregate_ratio: float  # sum of estimates / sum of exact counts


def distribution(wins: list[Window], estimates: list[int], exact: list[int]) -> list[CategoryStats]:
    """Per-category statistics, in first-seen category order (windows with 0 exact tokens skipped)."""
    by_cat: dict[str, list[tuple[int, int]]] = {}
    for w, e, x in zip(wins, estimates, exact, strict=True):
        if x > 0:
            by_cat.setdefault(w.category, []).append((int(e), int(x)))
    out = []
    for cat, pairs in by_cat.items():
        ratios = sorted(e / x for e, x in pairs)
        out.append(
            CategoryStats(
                cat,
                len(pairs),
                sum(1 for e, x in pairs if e < x),
                ratios[0],
                ratios[len(ratios) // 2],
                ratios[-1],
                sum(e for e, _ in pairs) / sum(x for _, x in pairs),
            )
        )
    return out


def format_table(stats: list[CategoryStats]) -> str:
    """The distribution as a fixed-width text table."""
    lines = [f"{'category':12} {'windows':>7} {'under':>5} {'min':>6} {'p50':>6} {'max':>6} {'aggregate':>9}"]
    for s in stats:
        lines.append(
            f"{s.category:12} {s.windows:7d} {s.under:5d} {s.min_ratio:6.3f} {s.p50_ratio:6.3f} "
            f"{s.max_ratio:6.3f} {s.aggregate_ratio:9.3f}"
        )
    return "\n".join(lines)
