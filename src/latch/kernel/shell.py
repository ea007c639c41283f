"""Shell command analysis for derivation: which parts validate, mutate or read.

A command line (``str``, or an argv list such as Codex's ``["bash", "-lc",
"..."]``) is split into *segments* at ``&&``, ``||``, ``;``, ``|``, ``&`` and
newlines (quotes respected, heredoc bodies skipped). Each segment is classified:

* ``validate``  a test/build/lint/type-check command (pytest, cargo test, npm test,
  go test, make, tox, mvn, gradle, ...): proves an exact requirement;
* ``mutate``    a possible change to the workspace (rm, mv, cp, sed -i, git checkout,
  formatters without ``--check``, output redirection to a file); ``paths`` may be
  empty when the changed files are unknown;
* ``read``      cat/head/tail/nl/sed -n of named files (a file observation);
* ``other``     anything else (never a mutation: unknown programs are not guessed).

Everything here is pure string analysis; nothing is executed.
"""

from __future__ import annotations

import functools
import re
import shlex

from ..lazyre import lazy_compile
from ..records import dataclass

__all__ = ["Segment", "command_text", "split_segments", "classify_command"]

_SEPARATORS = {"&&", "||", ";", "|", "\n", "&", "(", ")", ";;", "|&", ";&"}
_WRITE_REDIRECTS = {">", ">>", "&>", "&>>", ">|"}
_OTHER_REDIRECTS = {"<", "<<", "<<<", ">&", "<&", "<>"}
_HEREDOC_RE = lazy_compile(r"<<-?\s*(['\"]?)([A-Za-z_][A-Za-z0-9_]*)\1([^\n]*)\n(?:[^\n]*\n)+?[ \t]*\2[ \t]*(?=\n|$)")
"""A heredoc: its opening line, then its body line by line (as few lines as reach a line that is the delimiter).
The body is read a line at a time (a character run, then its newline), never a character at a time."""
_WRAPPERS = {"sudo", "time", "env", "nohup", "command", "exec", "nice", "stdbuf", "xargs"}
_RUNNERS = {
    ("uv", "run"),
    ("poetry", "run"),
    ("pipenv", "run"),
    ("pdm", "run"),
    ("hatch", "run"),
    ("rye", "run"),
    ("bundle", "exec"),
    ("npm", "exec"),
    ("pnpm", "exec"),
    ("yarn", "exec"),
    ("conda", "run"),
}

_VALIDATOR_PROGS = {
    "pytest",
    "py.test",
    "tox",
    "nox",
    "jest",
    "vitest",
    "mocha",
    "ava",
    "karma",
    "rspec",
    "phpunit",
    "ctest",
    "mypy",
    "pyright",
    "flake8",
    "pylint",
    "tsc",
    "eslint",
    "ninja",
    "mvn",
    "mvnw",
    "gradle",
    "gradlew",
    "nextest",
    "cargo-nextest",
    "golangci-lint",
    "shellcheck",
    "trial",
}
_VALIDATOR_SUBCOMMANDS = {
    "cargo": {"test", "build", "check", "clippy", "nextest", "bench", "llvm-cov", "tarpaulin", "miri"},
    "go": {"test", "build", "vet"},
    "dotnet": {"test", "build"},
    "swift": {"test", "build"},
    "deno": {"test", "check", "lint"},
    "mix": {"test", "compile"},
    "bazel": {"test", "build"},
    "bazelisk": {"test", "build"},
    "rake": {"test", "spec"},
    "ruff": {"check"},
    "zig": {"build", "test"},
    "cabal": {"test", "build"},
    "stack": {"test", "build"},
    "sbt": {"test", "compile"},
    "lein": {"test"},
    "bun": {"test"},
}
_SCRIPT_RUNNERS = {"npm", "pnpm", "yarn", "bun"}
_TASK_RUNNERS = {"make", "gmake", "just"}
_FIX_TARGETS = ("fmt", "format", "fix", "lint-fix", "lint:fix", "autoformat")
_SCRIPT_PREFIXES = ("test", "build", "lint", "typecheck", "type-check", "check", "ci", "verify", "e2e")
_PYTHON_MODULES = {"pytest", "unittest", "tox", "nox", "mypy", "pyflakes", "flake8", "pylint", "compileall", "pyright"}
_CHECK_FLAGS = {"--check", "--check-only", "--diff", "-l", "--list-different", "--dry-run"}
_FORMATTERS = {"black", "isort", "rustfmt", "prettier", "gofmt", "clang-format", "autopep8", "yapf"}

_MUTATOR_PROGS = {
    "rm",
    "mv",
    "cp",
    "touch",
    "mkdir",
    "rmdir",
    "ln",
    "chmod",
    "chown",
    "truncate",
    "install",
    "unzip",
    "patch",
    "tee",
    "dd",
    "rsync",
    "shred",
    "unlink",
}
_GIT_MUTATING = {
    "apply",
    "checkout",
    "restore",
    "reset",
    "stash",
    "merge",
    "rebase",
    "pull",
    "mv",
    "rm",
    "clean",
    "cherry-pick",
    "revert",
    "am",
    "switch",
}
_READERS = {"cat", "head", "tail", "nl", "less", "more", "bat"}
_VALUE_FLAGS = {"-n", "-c", "--lines", "--bytes", "-m", "-e", "-f", "--expression", "--file"}


@dataclass(frozen=True, slots=True)
class Segment:
    """One simple command: ``kind`` (validate/mutate/read/other), its ``text`` and touched ``paths``."""

    kind: str
    text: str
    paths: tuple[str, ...] = ()


def command_text(command: object) -> str | None:
    """The script of a shell tool's ``command``/``cmd`` argument (``str`` or argv list), else ``None``.

    ``["bash", "-lc", SCRIPT]`` yields ``SCRIPT``; other argv lists are joined with shell quoting.
    """
    if isinstance(command, str):
        return command
    if isinstance(command, (list, tuple)) and command and all(isinstance(x, str) for x in command):
        if (
            len(command) >= 3
            and _basename(command[0]) in {"bash", "sh", "zsh", "dash"}
            and command[1].startswith("-")
            and "c" in command[1]
        ):
            script: str = command[2]
            return script
        return shlex.join(command)
    return None


_PYTHON_RE = lazy_compile(r"python[0-9.]*")
_ASSIGNMENT_RE = lazy_compile(r"[A-Za-z_][A-Za-z0-9_]*=.*")
_DURATION_RE = lazy_compile(r"[0-9.]+[smhd]?")


def _basename(word: str) -> str:
    name = word.rsplit("/", 1)[-1]
    if name.startswith("python") and _PYTHON_RE.fullmatch(name):
        return "python"
    return name


_WORD_CHARS = "A-Za-z0-9_~\\-./*?=\\[\\]{}:,+@%^!"
_PLAIN_SCRIPT_RE = lazy_compile(f"[{_WORD_CHARS}();<>|& \\t\\r\\n]*")
_PLAIN_TOKEN_RE = lazy_compile(f"[{_WORD_CHARS}]+|[();<>|&]+|\\n")


def _tokens(script: str) -> list[str] | None:
    """The words and operators of ``script`` as :func:`_shlex_tokens` reads them (``None``: unbalanced quotes).

    A script of plain characters only (ASCII word characters, the operators ``();<>|&``, spaces, tabs and
    newlines: no quote, escape, comment or expansion) is read without the lexer: a run of word characters is a
    word, a run of operator characters one operator, each newline its own token, exactly as the lexer does."""
    if _PLAIN_SCRIPT_RE.fullmatch(script):
        return _PLAIN_TOKEN_RE.findall(script)
    return _shlex_tokens(script)


def _shlex_tokens(script: str) -> list[str] | None:
    """``script`` read by :class:`shlex.shlex` (POSIX, operators apart, newlines kept as tokens)."""
    lex = shlex.shlex(script, posix=True, punctuation_chars=True)
    lex.whitespace = " \t\r"
    lex.wordchars += "[]{}:,+@%^!"
    try:
        return list(lex)
    except ValueError:  # unbalanced quotes: fall back to a rough split
        return None


def _without_heredocs(script: str) -> str:
    """``script`` with each heredoc's body dropped (its opening line kept as ``<< DELIMITER`` and the rest of it)."""
    if "<<" not in script:
        return script
    return _HEREDOC_RE.sub(lambda m: "<< " + m.group(2) + m.group(3), script)


def split_segments(script: str) -> list[tuple[list[str], list[str]]]:
    """Split ``script`` into simple commands: ``(words, write_redirect_targets)`` each."""
    return _split_plain(_without_heredocs(script))


def _split_plain(script: str) -> list[tuple[list[str], list[str]]]:
    """:func:`split_segments` of a script without heredoc bodies (:func:`_without_heredocs`)."""
    tokens = _tokens(script)
    if tokens is None:
        return [(part.split(), []) for part in re.split(r"&&|\|\||[;|&\n]", script) if part.split()]
    segments: list[tuple[list[str], list[str]]] = []
    words: list[str] = []
    targets: list[str] = []
    i = 0
    while i < len(tokens):
        tok = tokens[i]
        if tok in _SEPARATORS:
            if words:
                segments.append((words, targets))
            words, targets = [], []
        elif tok in _WRITE_REDIRECTS or tok in _OTHER_REDIRECTS:
            if words and words[-1].isdigit():
                words.pop()  # file-descriptor number of "2>" and friends
            if i + 1 < len(tokens) and tokens[i + 1] not in _SEPARATORS:
                i += 1
                if tok in _WRITE_REDIRECTS:
                    targets.append(tokens[i])
        else:
            words.append(tok)
        i += 1
    if words:
        segments.append((words, targets))
    return segments


def _strip_wrappers(words: list[str]) -> list[str]:
    i = 0
    while i < len(words):
        w = words[i]
        if _ASSIGNMENT_RE.fullmatch(w) or _basename(w) in _WRAPPERS:
            i += 1
        elif _basename(w) == "timeout":
            i += 1
            while i < len(words) and (words[i].startswith("-") or _DURATION_RE.fullmatch(words[i])):
                i += 1
        elif i + 1 < len(words) and (_basename(w), words[i + 1]) in _RUNNERS:
            i += 2
        elif _basename(w) == "npx":
            i += 1
            while i < len(words) and words[i].startswith("-"):
                i += 1
        else:
            break
    return words[i:]


def _positionals(args: list[str]) -> list[str]:
    out: list[str] = []
    skip = False
    after_dashdash = False
    for a in args:
        if skip:
            skip = False
            continue
        if after_dashdash:
            out.append(a)
        elif a == "--":
            after_dashdash = True
        elif a.startswith("-") and len(a) > 1:
            if a in _VALUE_FLAGS:
                skip = True
        else:
            out.append(a)
    return out


def _script_name(prog: str, args: list[str]) -> str:
    """The npm-style script or make/just target an invocation runs (``""`` for the default)."""
    if prog in _SCRIPT_RUNNERS:
        sub = args[0] if args else ""
        return args[1] if sub in ("run", "run-script") and len(args) > 1 else sub
    pos = [a for a in _positionals(args) if "=" not in a]
    return pos[0] if pos else ""


def _is_validation(prog: str, args: list[str]) -> bool:
    sub = args[0] if args else ""
    if prog in _VALIDATOR_PROGS:
        return prog not in ("eslint",) or "--fix" not in args
    if prog in _VALIDATOR_SUBCOMMANDS and sub in _VALIDATOR_SUBCOMMANDS[prog]:
        return not (prog == "ruff" and "--fix" in args)
    if prog in _SCRIPT_RUNNERS:
        script = _script_name(prog, args)
        return sub in ("test", "t") or (script.startswith(_SCRIPT_PREFIXES) and not script.endswith(_FIX_TARGETS))
    if prog in _TASK_RUNNERS:
        target = _script_name(prog, args)
        if target.endswith(_FIX_TARGETS):
            return False
        return prog != "just" or target.startswith(_SCRIPT_PREFIXES)
    if prog == "python" and len(args) >= 2 and args[0] == "-m":
        return args[1] in _PYTHON_MODULES
    if prog == "cargo" and sub == "fmt" or prog in _FORMATTERS or (prog == "ruff" and sub == "format"):
        return any(a in _CHECK_FLAGS for a in args)
    return False


def _mutated_paths(prog: str, args: list[str]) -> tuple[bool, list[str]]:
    """``(is_mutation, paths)`` for one simple command."""
    pos = _positionals(args)
    if prog in _MUTATOR_PROGS:
        if prog == "tee" and not pos:
            return False, []
        if prog in ("cp", "ln", "install", "rsync"):
            return True, pos[-1:]
        if prog in ("chmod", "chown"):
            return True, pos[1:]
        if prog in ("unzip", "patch", "dd"):
            return True, []
        return True, pos
    if prog == "perl" and any(re.fullmatch(r"-[a-zA-Z]*i[a-zA-Z.]*", a) for a in args):
        files: list[str] = []
        skip = False
        for a in args:  # perl -pi -e 'SCRIPT' FILES: the word after -e is the script
            if skip:
                skip = False
            elif a in ("-e", "-E"):
                skip = True
            elif not a.startswith("-"):
                files.append(a)
        return True, files
    if prog == "sed" and any(re.fullmatch(r"-[a-zA-Z]*i.*|--in-place.*", a) for a in args):
        scripted = any(a in ("-e", "-f", "--expression", "--file") for a in args)
        return True, pos if scripted else pos[1:]
    if prog == "git" and args and args[0] in _GIT_MUTATING:
        return True, _positionals(args[1:]) if args[0] in ("mv", "rm") else []
    formatter = (
        prog in _FORMATTERS or (prog == "cargo" and args[:1] == ["fmt"]) or (prog == "ruff" and args[:1] == ["format"])
    )
    if formatter and not any(a in _CHECK_FLAGS for a in args):
        if prog == "prettier" and "--write" not in args and "-w" not in args:
            return False, []
        if prog in ("gofmt", "clang-format") and "-w" not in args and "-i" not in args:
            return False, []
        files = [p for p in pos if p not in ("fmt", "format")]
        return True, files if prog not in ("cargo",) else []
    if (prog in ("eslint",) or (prog == "ruff" and args[:1] == ["check"])) and "--fix" in args:
        return True, []
    if prog in _SCRIPT_RUNNERS | _TASK_RUNNERS and _script_name(prog, args).endswith(_FIX_TARGETS):
        return True, []
    if prog == "cargo" and args[:1] and args[0] in ("init", "new", "add", "remove"):
        return True, []
    return False, []


def _read_paths(prog: str, args: list[str]) -> list[str]:
    if prog in _READERS:
        return [p for p in _positionals(args) if not re.fullmatch(r"[+-]?\d+", p)]
    if prog == "sed" and "-n" in args:
        pos = _positionals([a for a in args if a != "-n"])
        return pos[1:]
    return []


def _clean_paths(paths: list[str]) -> tuple[str, ...]:
    out = []
    for p in paths:
        if not p or p.startswith(("/dev/", "/proc/")) or any(c in p for c in "*?$`{}"):
            continue
        if p not in out:
            out.append(p)
    return tuple(out)


CLASSIFIED_SCRIPTS = 1024
"""Scripts whose classification is kept (the newest used): a shell call is classified when it is made and again
when its result arrives, and agents rerun the same commands."""


def classify_command(script: str) -> list[Segment]:
    """Classify every simple command of ``script`` (see the module docstring), in order (a new list; the
    segments are frozen)."""
    return list(_classified(script))


@functools.lru_cache(maxsize=CLASSIFIED_SCRIPTS)
def _classified(script: str) -> tuple[Segment, ...]:
    return _classified_plain(_without_heredocs(script))


@functools.lru_cache(maxsize=CLASSIFIED_SCRIPTS)
def _classified_plain(script: str) -> tuple[Segment, ...]:
    """:func:`_classified` of a script without heredoc bodies: kept apart, so scripts that differ only in their
    heredocs' bodies (``python3 - <<'EOF' ... EOF``) are classified once."""
    out: list[Segment] = []
    for words, targets in _split_plain(script):
        words = _strip_wrappers(words)
        text = shlex.join(words)
        if not words:
            if targets:
                out.append(Segment("mutate", ">", _clean_paths(targets)))
            continue
        prog, args = _basename(words[0]), words[1:]
        written = [t for t in targets if t != "/dev/null"]
        if _is_validation(prog, args):
            out.append(Segment("validate", text))
            continue
        mutates, paths = _mutated_paths(prog, args)
        if mutates or written:
            # a mutation whose files are unknown touches the whole workspace (paths empty)
            out.append(Segment("mutate", text, () if mutates and not paths else _clean_paths(paths + written)))
            continue
        reads = _read_paths(prog, args)
        out.append(Segment("read", text, _clean_paths(reads)) if reads else Segment("other", text))
    return tuple(out)
