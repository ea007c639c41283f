"""The text-class suite: deterministic texts per script and per text shape.

:func:`class_texts` builds, from a seeded :class:`random.Random` (the same strings on every run), texts
for every class in :data:`SCRIPT_CLASSES` (writing systems: a few real common words of the script mixed
with pseudo-words drawn from its letters, punctuation and spacing of the script) and :data:`SHAPE_CLASSES`
(machine text: punctuation noise, regexes, minified code, escaped JSON, encodings, digests, tables, runs,
numbers, shell, stack traces). :func:`class_windows` cuts them into windows of 64-4,096 characters
(:data:`CLASS_WINDOWS_PER_SIZE`); :func:`corpus_file_windows` does the same for every UTF-8 text file of a
corpus folder, one class per file (``file:<path under the corpus>``), so a new corpus file needs no code.

Pseudo-words are harder for a BPE vocabulary than real prose (fewer merges), so an estimator that is
never under the exact count here is conservative on real text of the script too; over-count ratios on
the generated script classes are an upper bound of what real prose shows.
"""

from __future__ import annotations

import base64
import json
import random
import urllib.parse
import uuid
from collections.abc import Callable
from pathlib import Path

from .calibration import Window

__all__ = [
    "SCRIPT_CLASSES",
    "SHAPE_CLASSES",
    "DEGENERATE_CLASSES",
    "CLASS_WINDOWS_PER_SIZE",
    "class_texts",
    "class_windows",
    "corpus_file_windows",
]

CLASS_WINDOWS_PER_SIZE = {64: 60, 256: 40, 1024: 16, 4096: 6}
"""Windows per size (characters) and class: 122 windows, about 55,000 characters per class."""

# script -> (real common words, letter ranges for pseudo-words, word separator, sentence end)
_SCRIPTS: dict[str, tuple[str, list[tuple[int, int]], str, str]] = {
    "latin_diacritics": (
        "être déjà où français niño año über straße können façade crème brûlée naïve "
        "coöperate São Paulo ação coração łódź żółw český příliš žluťoučký kůň ångström "
        "søster æble ğüşöçı İstanbul",
        [(0xC0, 0xFF), (0x100, 0x17F), (0x61, 0x7A)],
        " ",
        ". ",
    ),
    "cyrillic": (
        "и в не на я что тот быть с он а весь это как она по но они к у ты из мы за вы так же от "
        "сказать этот который мочь человек о один ещё бы такой только себя своё какой когда уже "
        "для вот кто да говорить год знать мой до или если время рука нет самый ни стать большой",
        [(0x430, 0x44F), (0x410, 0x42F)],
        " ",
        ". ",
    ),
    "greek": (
        "και το να του η της με που είναι στο δεν για την θα από τα στη ένα τον μου σε οι αυτό "
        "όταν πολύ ήταν τους μας έχει ότι αλλά κάτι εγώ εσύ γιατί λόγος άνθρωπος",
        [(0x3B1, 0x3C9), (0x391, 0x3A9), (0x3AC, 0x3AF)],
        " ",
        ". ",
    ),
    "arabic": (
        "في من على أن إلى هذا التي الذي عن مع كان هذه ما لا قد كل بين بعد ذلك عند إن هو هي "
        "الله يوم الناس العالم الحياة البرمجة الحاسوب الملف الخطأ الدالة المستخدم النظام",
        [(0x628, 0x64A), (0x621, 0x627)],
        " ",
        "، ",
    ),
    "hebrew": (
        "של את על הוא לא זה עם כל גם אני היא אבל מה יש או רק כי אם הם אז עוד היה בין "
        "שלום תודה מחשב קובץ שגיאה פונקציה משתמש מערכת",
        [(0x5D0, 0x5EA)],
        " ",
        ". ",
    ),
    "persian": (
        "است در به از که این را با برای آن یک خود تا می شود کرد شده بود های هم نیز دیگر "
        "فایل خطا برنامه کاربر سیستم پیام زبان فارسی",
        [(0x628, 0x64A), (0x67E, 0x67E), (0x686, 0x686), (0x6A9, 0x6A9), (0x6AF, 0x6AF), (0x6CC, 0x6CC)],
        " ",
        "، ",
    ),
    "devanagari": (
        "और के है में की को से एक यह का पर हैं भी कि था लिए नहीं तो ही या हो किया कर भारत हिंदी भाषा फ़ाइल त्रुटि उपयोगकर्ता प्रणाली",
        [(0x915, 0x939), (0x93E, 0x94D)],
        " ",
        "। ",
    ),
    "bengali": (
        "এবং একটি এই তার করে হয় থেকে জন্য সঙ্গে কিন্তু আমি তুমি বাংলা ভাষা ফাইল ত্রুটি ব্যবহারকারী",
        [(0x995, 0x9B9), (0x9BE, 0x9CD)],
        " ",
        "। ",
    ),
    "tamil": (
        "ஒரு மற்றும் இது அந்த என்று இல்லை நான் நீ தமிழ் மொழி கோப்பு பிழை பயனர் அமைப்பு",
        [(0xB95, 0xBB9), (0xBBE, 0xBCD)],
        " ",
        ". ",
    ),
    "thai": (
        "และ ที่ ของ ใน เป็น มี ได้ ไม่ จะ ให้ กับ การ นี้ ว่า ภาษาไทย ไฟล์ ข้อผิดพลาด ผู้ใช้ ระบบ",
        [(0xE01, 0xE2E), (0xE30, 0xE3A), (0xE40, 0xE4C)],
        "",
        " ",
    ),
    "khmer": (
        "និង នៅ ជា មាន ដែល បាន ទៅ ពី ភាសាខ្មែរ ឯកសារ កំហុស អ្នកប្រើ ប្រព័ន្ធ",
        [(0x1780, 0x17A2), (0x17B6, 0x17D2)],
        "",
        "។ ",
    ),
    "han_simplified": (
        "的一是不了人我在有他这中大来上个国到说们为子和你地出道也时年得就那要下以生会自着去之过家学对可"
        "文件错误用户系统程序数据函数变量请检查配置服务器网络",
        [(0x4E00, 0x9FFF)],
        "",
        "。",
    ),
    "han_traditional": (
        "的一是不了人我在有他這中大來上個國到說們為子和你地出道也時年得就那要下以生會自著去之過家學對可"
        "檔案錯誤使用者系統程式資料函數變數請檢查設定伺服器網路",
        [(0x4E00, 0x9FFF)],
        "",
        "。",
    ),
    "japanese": (
        "これは日本語のテキストです。ファイルが見つかりません。ユーザーの設定を確認してください。"
        "東京 大阪 今日 明日 私 あなた 彼女 プログラム エラー 関数 変数",
        [(0x3041, 0x3096), (0x30A1, 0x30FA), (0x4E00, 0x9FFF)],
        "",
        "。",
    ),
    "hangul": (
        "그리고 하지만 그러나 이것은 한국어 문장입니다 파일을 찾을 수 없습니다 사용자 설정 확인 "
        "오류 함수 변수 서버 네트워크 오늘 내일",
        [(0xAC00, 0xD7A3)],
        " ",
        ". ",
    ),
}

SCRIPT_CLASSES = (*_SCRIPTS, "emoji", "math_symbols", "box_drawing", "fullwidth")
SHAPE_CLASSES = (
    "ascii_punctuation",
    "regex",
    "minified_js",
    "minified_css",
    "json_escaped",
    "json_escaped_twice",
    "url_encoded",
    "base64",
    "base85",
    "hex_dump",
    "uuid_digest",
    "ascii_art",
    "markdown_table",
    "repeated_char",
    "digit_runs",
    "csv_floats",
    "shell_oneliner",
    "stack_trace",
)
DEGENERATE_CLASSES = ("repeated_char", "ascii_art")
"""Degenerate repetition: exempt from the 1.5x tightness goal (never from 0 under)."""


def _script(rng: random.Random, words: str, ranges: list[tuple[int, int]], sep: str, end: str) -> list[str]:
    real = words.split()
    letters = [chr(c) for lo, hi in ranges for c in range(lo, hi + 1)]
    out = []
    for _ in range(400):
        sentence = []
        for _ in range(rng.randrange(4, 16)):
            if rng.random() < 0.6:
                sentence.append(rng.choice(real))
            else:
                sentence.append("".join(rng.choice(letters) for _ in range(rng.randrange(2, 9))))
        out.append(sep.join(sentence) + end)
    return ["".join(out[i : i + 5]) for i in range(0, len(out), 5)]


def _emoji(rng: random.Random) -> list[str]:
    tones = [chr(c) for c in range(0x1F3FB, 0x1F400)]
    out = []
    for _ in range(600):
        parts = []
        for _ in range(rng.randrange(2, 10)):
            r = rng.random()
            if r < 0.3:
                parts.append(chr(rng.randrange(0x1F600, 0x1F650)))
            elif r < 0.5:  # ZWJ family / profession sequences
                parts.append("\u200d".join(chr(rng.randrange(0x1F466, 0x1F46A)) for _ in range(rng.randrange(2, 5))))
            elif r < 0.65:  # skin tones
                parts.append(chr(rng.randrange(0x1F44A, 0x1F450)) + rng.choice(tones))
            elif r < 0.8:  # flags (regional indicator pairs) and subdivision tags
                parts.append(chr(rng.randrange(0x1F1E6, 0x1F200)) + chr(rng.randrange(0x1F1E6, 0x1F200)))
            elif r < 0.9:
                parts.append(chr(rng.randrange(0x2600, 0x27C0)) + "\ufe0f")
            else:
                parts.append("\U0001f3f4\U000e0067\U000e0062\U000e0073\U000e0063\U000e0074\U000e007f")  # Scotland
        out.append(rng.choice(("", " ", " ok ")).join(parts))
    return out


def _pick_ranges(rng: random.Random, ranges: list[tuple[int, int]], n: int, sep: str = "") -> str:
    return sep.join(chr(rng.randrange(lo, hi + 1)) for lo, hi in (rng.choice(ranges) for _ in range(n)))


def _math(rng: random.Random) -> list[str]:
    ops = "∀∃∄∅∆∇∈∉∋∏∑−∓∗√∝∞∠∧∨∩∪∫∬∮∴∵≈≠≡≤≥⊂⊃⊆⊇⊕⊗⊥⋅⌈⌉⌊⌋ℕℤℚℝℂαβγδεζηθλμπσφψω"
    out = []
    for _ in range(400):
        terms = [
            f"{rng.choice(ops)}{rng.choice('xyznkij')}{rng.choice(['', '²', '³', 'ᵢ', '₀'])}"
            for _ in range(rng.randrange(3, 12))
        ]
        out.append(" ".join(terms) + " " + _pick_ranges(rng, [(0x2200, 0x22FF), (0x1D400, 0x1D4FF)], 6))
    return out


def _box(rng: random.Random) -> list[str]:
    out = []
    for _ in range(150):
        w = rng.randrange(8, 60)
        rows = ["┌" + "─" * w + "┐"]
        for _ in range(rng.randrange(1, 6)):
            cells = _pick_ranges(rng, [(0x2500, 0x257F), (0x2580, 0x259F)], rng.randrange(1, w))
            rows.append("│" + cells.ljust(w) + "│")
        rows.append("└" + "─" * w + "┘")
        out.append("\n".join(rows))
    return out


def _fullwidth(rng: random.Random) -> list[str]:
    return [
        _pick_ranges(rng, [(0xFF01, 0xFF5E), (0xFF61, 0xFF9F), (0x3000, 0x3000)], rng.randrange(10, 80))
        for _ in range(500)
    ]


def _punct(rng: random.Random) -> list[str]:
    chars = "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~"
    return ["".join(rng.choice(chars) for _ in range(rng.randrange(20, 400))) for _ in range(200)]


def _regex(rng: random.Random) -> list[str]:
    pool = [
        r"^[a-zA-Z0-9._%+-]+@[a-zA-Z0-9.-]+\.[a-zA-Z]{2,}$",
        r"(?:\d{1,3}\.){3}\d{1,3}",
        r"^(?=.*[A-Z])(?=.*\d)(?=.*[!@#$%^&*])[\w!@#$%^&*]{8,}$",
        r"\b(?:https?|ftp)://[^\s/$.?#].[^\s]*\b",
        r"(?P<year>\d{4})-(?P<month>0[1-9]|1[0-2])-(?P<day>[0-2]\d|3[01])",
        r"[^\x00-\x7F]+|\\u[0-9a-fA-F]{4}",
        r"^\s*#\s*include\s*[<\"]([^>\"]+)[>\"]",
        r"(?<!\\)(?:\\\\)*\$\{([^}]+)\}",
        r"^[-+]?\d*\.?\d+([eE][-+]?\d+)?$",
    ]
    out = []
    for _ in range(400):
        r = rng.choice(pool)
        if rng.random() < 0.5:
            r = r.replace("a-z", rng.choice(["a-f", "a-z", "g-m"])) + rng.choice(["", "|" + rng.choice(pool)])
        out.append(r)
    return ["\n".join(out[i : i + 10]) for i in range(0, len(out), 10)]


def _ident(rng: random.Random) -> str:
    return rng.choice("abcdefghijklmnopqrstuvwxyz_$") + "".join(
        rng.choice("abcdefghijklmnopqrstuvwxyz0123456789") for _ in range(rng.randrange(0, 3))
    )


def _minjs(rng: random.Random) -> list[str]:
    out = []
    for _ in range(150):
        parts = []
        for _ in range(rng.randrange(10, 40)):
            a, b, c = _ident(rng), _ident(rng), _ident(rng)
            parts.append(
                rng.choice(
                    [
                        f"var {a}={b}.{c}({rng.randrange(100)});",
                        f"function {a}({b},{c}){{return {b}&&{c}[{b}]||null}}",
                        f"{a}.prototype.{b}=function(){{this.{c}=!0}};",
                        f'if(!{a}){{throw new Error("{b}")}}',
                        f"for(var {a}=0;{a}<{b}.length;{a}++){c}.push({b}[{a}]);",
                        f"{a}=({b},{c})=>{b}+{c};",
                        f'{a}["{b}"]={{{c}:{rng.randrange(1000)},x:[1,2,3]}};',
                    ]
                )
            )
        out.append("".join(parts))
    return out


def _mincss(rng: random.Random) -> list[str]:
    props = [
        "margin:0",
        "padding:4px 8px",
        "color:#%06x",
        "display:flex",
        "font-size:%dpx",
        "z-index:%d",
        "background:url(data:image/png;base64,iVBORw0KGgo=)",
        "transition:all .3s ease-in-out",
        "border:1px solid rgba(0,0,0,.%d)",
        "width:calc(100%% - %dpx)",
    ]
    out = []
    for _ in range(150):
        rules = []
        for _ in range(rng.randrange(10, 40)):
            sel = rng.choice([".", "#", ""]) + _ident(rng) + rng.choice(["", ":hover", ">li", " a", "::before"])
            body = ";".join(
                (p % rng.randrange(1 << 24)) if "%" in p else p for p in rng.sample(props, rng.randrange(1, 5))
            )
            rules.append(f"{sel}{{{body}}}")
        out.append("".join(rules))
    return out


def _records(rng: random.Random) -> list[dict[str, object]]:
    return [
        {
            "id": str(uuid.UUID(int=rng.getrandbits(128))),
            "name": _ident(rng) * 2,
            "count": rng.randrange(10**6),
            "path": "/home/user/src/" + _ident(rng) + ".py",
            "text": 'line one\nline "two"\ttab \\ back',
            "ok": rng.random() < 0.5,
        }
        for _ in range(rng.randrange(2, 8))
    ]


def _json_once(rng: random.Random) -> list[str]:
    return [json.dumps(json.dumps(_records(rng))) for _ in range(150)]


def _json_twice(rng: random.Random) -> list[str]:
    return [json.dumps(json.dumps(json.dumps(_records(rng)))) for _ in range(100)]


def _urlenc(rng: random.Random) -> list[str]:
    out = []
    for _ in range(300):
        q = {
            "q": " ".join(_ident(rng) for _ in range(4)) + " ünïcødé & more",
            "redirect": "https://example.com/a?b=c&d=e",
            "id": str(rng.randrange(10**9)),
        }
        out.append("https://example.com/search?" + urllib.parse.urlencode(q))
        out.append(
            urllib.parse.quote(
                "/".join(_ident(rng) for _ in range(5)) + " " + chr(rng.randrange(0x400, 0x4FF)), safe=""
            )
        )
    return out


def _b64(rng: random.Random) -> list[str]:
    return [base64.b64encode(rng.randbytes(rng.randrange(30, 900))).decode() for _ in range(150)]


def _b85(rng: random.Random) -> list[str]:
    return [base64.b85encode(rng.randbytes(rng.randrange(30, 900))).decode() for _ in range(150)]


def _hexdump(rng: random.Random) -> list[str]:
    out = []
    for _ in range(80):
        lines = []
        for off in range(0, 16 * rng.randrange(4, 20), 16):
            data = rng.randbytes(16)
            text = "".join(chr(b) if 32 <= b < 127 else "." for b in data)
            lines.append(f"{off:08x}  {data[:8].hex(' ')}  {data[8:].hex(' ')}  |{text}|")
        out.append("\n".join(lines))
    return out


def _uuid_digest(rng: random.Random) -> list[str]:
    out = []
    for _ in range(1500):
        r = rng.random()
        if r < 0.4:
            out.append(str(uuid.UUID(int=rng.getrandbits(128))))
        elif r < 0.7:
            out.append(rng.randbytes(32).hex())
        elif r < 0.85:
            out.append("sha256:" + rng.randbytes(32).hex())
        else:
            out.append(rng.randbytes(20).hex()[: rng.choice((7, 12, 40))])
    return [" ".join(out[i : i + 6]) for i in range(0, len(out), 6)]


def _ascii_art(rng: random.Random) -> list[str]:
    out = []
    for _ in range(120):
        w = rng.randrange(10, 70)
        rows = ["+" + "-" * w + "+"]
        for _ in range(rng.randrange(1, 8)):
            rows.append("|" + rng.choice(["", " " * rng.randrange(w), "#" * rng.randrange(w)]).ljust(w) + "|")
        rows.append("+" + "=" * w + "+")
        out.append(
            "\n".join(rows) + "\n" + rng.choice(["/\\_/\\", "( o.o )", "> ^ <", "~~~~", "****"]) * rng.randrange(1, 6)
        )
    return out


def _markdown_table(rng: random.Random) -> list[str]:
    out = []
    for _ in range(100):
        cols = rng.randrange(2, 7)
        rows = [
            "| " + " | ".join(_ident(rng).upper() for _ in range(cols)) + " |",
            "|" + "|".join(rng.choice(["---", ":---:", "---:"]) for _ in range(cols)) + "|",
        ]
        for _ in range(rng.randrange(2, 12)):
            rows.append(
                "| "
                + " | ".join(
                    rng.choice([_ident(rng), str(rng.randrange(10**5)), f"{rng.random():.3f}", "`code`", "**bold**"])
                    for _ in range(cols)
                )
                + " |"
            )
        out.append("\n".join(rows))
    return out


def _repeated(rng: random.Random) -> list[str]:
    chars = "x a = - _ * # . ~ 0 9 \t / \\ 中 é ─".split(" ") + [" ", "\n"]
    return [rng.choice(chars) * rng.randrange(20, 3000) + rng.choice(["", "\n", " end"]) for _ in range(60)]


def _digits(rng: random.Random) -> list[str]:
    return [
        "".join(rng.choice("0123456789") for _ in range(rng.randrange(5, 300))) + rng.choice([" ", "\n", ", "])
        for _ in range(300)
    ]


def _csv(rng: random.Random) -> list[str]:
    out = []
    for _ in range(80):
        cols = rng.randrange(3, 10)
        rows = [",".join(f"col_{i}" for i in range(cols))]
        for _ in range(rng.randrange(5, 30)):
            rows.append(
                ",".join(
                    f"{rng.uniform(-1e4, 1e4):.{rng.randrange(1, 9)}f}" if rng.random() < 0.8 else f"{rng.random():.6e}"
                    for _ in range(cols)
                )
            )
        out.append("\n".join(rows))
    return out


def _shell(rng: random.Random) -> list[str]:
    pool = [
        "find . -name '*.py' -print0 | xargs -0 grep -nE 'TODO|FIXME' | sort -u | head -n 50",
        'for f in $(ls *.log); do gzip -9 "$f" && mv "$f.gz" /var/backups/; done',
        "awk -F, 'NR>1{s+=$3} END{printf \"%.2f\\n\", s/(NR-1)}' data.csv",
        "docker run --rm -it -v \"$PWD\":/src -w /src -e CI=1 python:3.12-slim bash -lc 'pip install -e . && pytest -q'",
        "git log --oneline --graph --decorate --all | grep -v Merge | sed -n '1,40p'",
        "curl -sSL -H 'Accept: application/json' \"https://api.example.com/v1/items?page=${PAGE:-1}\" | jq '.items[] | {id, name}'",
        "tar -czf \"backup-$(date +%Y%m%d-%H%M%S).tar.gz\" --exclude='./node_modules' --exclude='*.pyc' .",
        "ps aux --sort=-%mem | awk 'NR<=10{print $2, $4, $11}' && kill -9 $(pgrep -f 'python worker.py')",
    ]
    return [
        "\n".join(rng.choice(pool).replace("50", str(rng.randrange(1, 999))) for _ in range(rng.randrange(2, 8)))
        for _ in range(150)
    ]


def _stack(rng: random.Random) -> list[str]:
    out = []
    for _ in range(120):
        if rng.random() < 0.5:
            lines = ["Traceback (most recent call last):"]
            for _ in range(rng.randrange(3, 12)):
                lines += [
                    f'  File "/usr/lib/python3.11/site-packages/{_ident(rng)}/{_ident(rng)}.py", line '
                    f"{rng.randrange(1, 3000)}, in {_ident(rng)}_{_ident(rng)}",
                    f"    return self.{_ident(rng)}(*args, **kwargs)",
                ]
            lines.append(
                f"{rng.choice(['KeyError', 'ValueError', 'TypeError'])}: '{_ident(rng)}' object has no attribute"
            )
        else:
            lines = [f'Exception in thread "main" java.lang.NullPointerException: Cannot invoke "{_ident(rng)}()"']
            for _ in range(rng.randrange(3, 15)):
                lines.append(
                    f"\tat com.example.{_ident(rng)}.{_ident(rng).capitalize()}Service.{_ident(rng)}"
                    f"({_ident(rng).capitalize()}.java:{rng.randrange(1, 900)})"
                )
        out.append("\n".join(lines))
    return out


_SHAPES: dict[str, Callable[[random.Random], list[str]]] = {
    "emoji": _emoji,
    "math_symbols": _math,
    "box_drawing": _box,
    "fullwidth": _fullwidth,
    "ascii_punctuation": _punct,
    "regex": _regex,
    "minified_js": _minjs,
    "minified_css": _mincss,
    "json_escaped": _json_once,
    "json_escaped_twice": _json_twice,
    "url_encoded": _urlenc,
    "base64": _b64,
    "base85": _b85,
    "hex_dump": _hexdump,
    "uuid_digest": _uuid_digest,
    "ascii_art": _ascii_art,
    "markdown_table": _markdown_table,
    "repeated_char": _repeated,
    "digit_runs": _digits,
    "csv_floats": _csv,
    "shell_oneliner": _shell,
    "stack_trace": _stack,
}


def class_texts(seed: int = 11) -> dict[str, list[str]]:
    """Texts per class (every name of :data:`SCRIPT_CLASSES` and :data:`SHAPE_CLASSES`, in that order),
    the same for the same ``seed``."""
    out: dict[str, list[str]] = {}
    for name in (*SCRIPT_CLASSES, *SHAPE_CLASSES):
        rng = random.Random(f"{seed}:{name}")
        out[name] = _script(rng, *_SCRIPTS[name]) if name in _SCRIPTS else _SHAPES[name](rng)
    return out


def _cut(category: str, stream: str, phase: float) -> list[Window]:
    out: list[Window] = []
    for size, count in CLASS_WINDOWS_PER_SIZE.items():
        span = max(len(stream) - size, 0)
        offsets = sorted({int(span * (i + phase) / count) for i in range(count)})
        out.extend(Window(category, size, o, stream[o : o + size]) for o in offsets)
    return [w for w in out if w.text]


def class_windows(texts: dict[str, list[str]] | None = None, phase: float = 0.0) -> list[Window]:
    """Windows of 64, 256, 1,024 and 4,096 characters of every class (texts joined with ``"\\n"``)."""
    texts = class_texts() if texts is None else texts
    return [w for name, parts in texts.items() for w in _cut(name, "\n".join(parts), phase)]


def corpus_file_windows(corpus: Path, phase: float = 0.0) -> list[Window]:
    """Windows of every UTF-8 text file under ``corpus`` (sorted by path; ``README.md`` and ``FORMATS.md``
    skipped), one class ``file:<relative path>`` each. Files that are not UTF-8 text (SQLite stores) are
    skipped: their transcripts reach the suite through the calibration set's extracted categories."""
    out = []
    for path in sorted(p for p in corpus.rglob("*") if p.is_file() and p.name not in ("README.md", "FORMATS.md")):
        try:
            text = path.read_text(encoding="utf-8-sig")
        except (UnicodeDecodeError, ValueError):
            continue
        if "\x00" in text:
            continue
        out.extend(_cut(f"file:{path.relative_to(corpus).as_posix()}", text, phase))
    return out
