"""Write examples/invoice-rounding.claude.jsonl: a realistic Claude Code session written for Latch.

The session (a developer fixing a rounding bug in a small invoicing library, then adding a
feature) is authored here, not copied from anywhere. It uses the Claude Code JSONL shapes
described in ../shared/corpus/FORMATS.md: one content block per assistant line with the usage
repeated, tool_use/tool_result pairs, a thinking block, a failing and a passing test run, an
edit, a TodoWrite plan and an interrupted call. Run: ``python tools/make_example.py``.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from pathlib import Path

OUT = Path(__file__).resolve().parents[1] / "examples" / "invoice-rounding.claude.jsonl"
SESSION = "5b1f0c2e-7d4a-4c1e-9a53-2f6e8d1b0a77"
CWD = "/home/user/invoicing"
T0 = datetime(2026, 11, 2, 9, 14, 5, tzinfo=timezone.utc)

MONEY_PY = '''"""Money helpers for invoices."""
from decimal import Decimal


def to_cents(amount: float) -> int:
    """Convert an amount in euros to integer cents."""
    return int(amount * 100)


def line_total(unit_price: float, quantity: int, vat_rate: float) -> int:
    """Total of one invoice line in cents, VAT included."""
    net = to_cents(unit_price) * quantity
    return net + int(net * vat_rate)


def invoice_total(lines: list[tuple[float, int, float]]) -> int:
    return sum(line_total(p, q, v) for p, q, v in lines)
'''

MONEY_FIXED = '''"""Money helpers for invoices."""
from decimal import ROUND_HALF_UP, Decimal


def to_cents(amount: float | str | Decimal) -> int:
    """Convert an amount in euros to integer cents, rounding half up."""
    cents = (Decimal(str(amount)) * 100).quantize(Decimal("1"), rounding=ROUND_HALF_UP)
    return int(cents)


def line_total(unit_price: float | str | Decimal, quantity: int, vat_rate: float | str | Decimal) -> int:
    """Total of one invoice line in cents, VAT included, VAT rounded half up per line."""
    net = to_cents(unit_price) * quantity
    vat = (Decimal(net) * Decimal(str(vat_rate))).quantize(Decimal("1"), rounding=ROUND_HALF_UP)
    return net + int(vat)


def invoice_total(lines: list[tuple[float, int, float]]) -> int:
    return sum(line_total(p, q, v) for p, q, v in lines)
'''

TEST_PY = '''from invoicing.money import invoice_total, line_total, to_cents


def test_to_cents_rounds_half_up():
    assert to_cents(19.99) == 1999
    assert to_cents(0.285) == 29


def test_line_total_with_vat():
    assert line_total(19.99, 3, 0.21) == 7256


def test_invoice_total():
    lines = [(19.99, 3, 0.21), (4.10, 1, 0.09)]
    assert invoice_total(lines) == 7256 + 447
'''

PYTEST_FAIL = '''============================= test session starts ==============================
platform linux -- Python 3.12.3, pytest-8.3.2, pluggy-1.5.0
rootdir: /home/user/invoicing
collected 3 items

tests/test_money.py FFF                                                  [100%]

=================================== FAILURES ===================================
_________________________ test_to_cents_rounds_half_up _________________________

    def test_to_cents_rounds_half_up():
>       assert to_cents(19.99) == 1999
E       assert 1998 == 1999
E        +  where 1998 = to_cents(19.99)

tests/test_money.py:5: AssertionError
___________________________ test_line_total_with_vat ___________________________

    def test_line_total_with_vat():
>       assert line_total(19.99, 3, 0.21) == 7256
E       assert 7252 == 7256
E        +  where 7252 = line_total(19.99, 3, 0.21)

tests/test_money.py:9: AssertionError
_______________________________ test_invoice_total _______________________________

    def test_invoice_total():
        lines = [(19.99, 3, 0.21), (4.10, 1, 0.09)]
>       assert invoice_total(lines) == 7256 + 447
E       assert 7698 == 7703

tests/test_money.py:14: AssertionError
=========================== short test summary info ============================
FAILED tests/test_money.py::test_to_cents_rounds_half_up - assert 1998 == 1999
FAILED tests/test_money.py::test_line_total_with_vat - assert 7252 == 7256
FAILED tests/test_money.py::test_invoice_total - assert 7698 == 7703
============================== 3 failed in 0.04s ===============================
'''

PYTEST_PASS = '''============================= test session starts ==============================
platform linux -- Python 3.12.3, pytest-8.3.2, pluggy-1.5.0
rootdir: /home/user/invoicing
collected {n} items

tests/test_money.py {dots}                                                  [100%]

============================== {n} passed in 0.03s ===============================
'''

CSV_PY = '''"""Export invoices as CSV for the accounting system."""
import csv
import io

from .money import line_total

HEADER = ["invoice", "line", "unit_price_cents", "quantity", "vat_rate", "total_cents"]


def export_csv(invoices: dict[str, list[tuple[float, int, float]]]) -> str:
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\\n")
    writer.writerow(HEADER)
    for number, lines in sorted(invoices.items()):
        for i, (price, qty, vat) in enumerate(lines, 1):
            writer.writerow([number, i, round(price * 100), qty, vat, line_total(price, qty, vat)])
    return buf.getvalue()
'''


class Writer:
    def __init__(self) -> None:
        self.lines: list[dict] = []
        self.t = T0
        self.parent: str | None = None
        self.n = 0
        self.req = 0
        self.tool = 0
        self.cache = 11800

    def _uuid(self) -> str:
        self.n += 1
        return f"00000000-0000-4000-8000-{self.n:012d}"

    def _tick(self, seconds: float) -> str:
        self.t += timedelta(seconds=seconds)
        return self.t.isoformat(timespec="milliseconds").replace("+00:00", "Z")

    def _envelope(self, kind: str, seconds: float) -> dict:
        uid = self._uuid()
        rec = {"parentUuid": self.parent, "isSidechain": False, "userType": "external", "cwd": CWD,
               "sessionId": SESSION, "version": "2.1.40", "gitBranch": "fix/vat-rounding", "type": kind,
               "uuid": uid, "timestamp": self._tick(seconds)}
        self.parent = uid
        return rec

    def user(self, text: str, seconds: float = 20) -> None:
        rec = self._envelope("user", seconds)
        rec["message"] = {"role": "user", "content": text}
        rec["promptId"] = f"p-{self.n}"
        self.lines.append(rec)

    def assistant(self, blocks: list[dict], out_tokens: int) -> list[str]:
        """One API response, one line per block, usage repeated on each line (never sum it)."""
        self.req += 1
        new_input = 40 + 7 * len(json.dumps(blocks)) // 30
        usage = {"input_tokens": 6, "cache_read_input_tokens": self.cache, "cache_creation_input_tokens": new_input,
                 "output_tokens": out_tokens, "service_tier": "standard"}
        self.cache += new_input + out_tokens
        ids = []
        for b in blocks:
            if b["type"] == "tool_use":
                self.tool += 1
                b["id"] = f"toolu_01Ex{self.tool:04d}"
                ids.append(b["id"])
            rec = self._envelope("assistant", 2.5)
            rec["requestId"] = f"req_011Ex{self.req:04d}"
            rec["message"] = {"id": f"msg_01Ex{self.req:04d}", "type": "message", "role": "assistant",
                              "model": "claude-sonnet-4-5", "content": [b],
                              "stop_reason": "tool_use" if ids else "end_turn", "stop_sequence": None, "usage": usage}
            self.lines.append(rec)
        return ids

    def result(self, tool_id: str, content: str, result: dict, is_error: bool = False, seconds: float = 1.5) -> None:
        rec = self._envelope("user", seconds)
        block = {"tool_use_id": tool_id, "type": "tool_result", "content": content}
        if is_error:
            block["is_error"] = True
        rec["message"] = {"role": "user", "content": [block]}
        rec["toolUseResult"] = result
        self.lines.append(rec)

    def text(self, text: str, out: int = 120) -> None:
        self.assistant([{"type": "text", "text": text}], out)

    def bash(self, command: str, description: str, output: str, code: int = 0, lead: str | None = None) -> None:
        blocks = [{"type": "text", "text": lead}] if lead else []
        blocks.append({"type": "tool_use", "name": "Bash", "input": {"command": command, "description": description}})
        (tid,) = self.assistant(blocks, 90)
        content = output if code == 0 else f"Exit code {code}\n{output}"
        self.result(tid, content, {"stdout": output, "stderr": "", "interrupted": False, "isImage": False}, is_error=code != 0)

    def read(self, path: str, body: str, lead: str | None = None) -> None:
        blocks = [{"type": "text", "text": lead}] if lead else []
        blocks.append({"type": "tool_use", "name": "Read", "input": {"file_path": f"{CWD}/{path}"}})
        (tid,) = self.assistant(blocks, 70)
        numbered = "\n".join(f"{i:>6}\u2192{line}" for i, line in enumerate(body.splitlines(), 1))
        self.result(tid, numbered, {"type": "text", "file": {"filePath": f"{CWD}/{path}", "content": body,
                                                             "numLines": body.count("\n"), "startLine": 1,
                                                             "totalLines": body.count("\n")}})

    def write(self, path: str, body: str, lead: str) -> None:
        (tid,) = self.assistant([{"type": "text", "text": lead},
                                 {"type": "tool_use", "name": "Write", "input": {"file_path": f"{CWD}/{path}", "content": body}}], 400)
        self.result(tid, f"The file {CWD}/{path} has been updated successfully.",
                    {"type": "update", "filePath": f"{CWD}/{path}", "content": body, "structuredPatch": []})

    def edit(self, path: str, old: str, new: str, lead: str | None = None) -> None:
        blocks = [{"type": "text", "text": lead}] if lead else []
        blocks.append({"type": "tool_use", "name": "Edit",
                       "input": {"file_path": f"{CWD}/{path}", "old_string": old, "new_string": new}})
        (tid,) = self.assistant(blocks, 160)
        self.result(tid, f"The file {CWD}/{path} has been updated. Here's the result of running `cat -n` on a snippet of the edited file:\n"
                    + "\n".join(f"{i:>6}\u2192{line}" for i, line in enumerate(new.splitlines(), 10)),
                    {"filePath": f"{CWD}/{path}", "oldString": old, "newString": new, "originalFile": "",
                     "structuredPatch": [], "userModified": False, "replaceAll": False})

    def todo(self, items: list[tuple[str, str]]) -> None:
        todos = [{"content": c, "status": s, "activeForm": c} for c, s in items]
        (tid,) = self.assistant([{"type": "tool_use", "name": "TodoWrite", "input": {"todos": todos}}], 120)
        self.result(tid, "Todos have been modified successfully. Ensure that you continue to use the todo list to track your progress. Please proceed with the current tasks if applicable",
                    {"oldTodos": [], "newTodos": todos})


def build() -> list[dict]:
    w = Writer()
    w.lines.append({"type": "permission-mode", "permissionMode": "default", "sessionId": SESSION})
    w.user("The invoice totals are off by a cent or two compared to what accounting computes by hand. "
           "Customers noticed on invoice INV-2041. Can you find out why and fix it? Tests are in tests/test_money.py. "
           "Constraint: amounts must stay integer cents everywhere, no floats in the public API results.")
    w.assistant([{"type": "thinking", "thinking": "", "signature": "RXhhbXBsZSBzaWduYXR1cmU="},
                 {"type": "text", "text": "Let me look at the money helpers and run the tests first."}], 60)
    w.todo([("Reproduce the rounding error with the tests", "in_progress"),
            ("Fix cent conversion and VAT rounding", "pending"),
            ("Add CSV export for accounting", "pending")])
    w.read("src/invoicing/money.py", MONEY_PY)
    w.read("tests/test_money.py", TEST_PY)
    w.bash("python -m pytest tests/test_money.py -q", "Run the money tests", PYTEST_FAIL, code=1,
           lead="Running the tests to see the failures.")
    w.text("All three tests fail, and the first one shows the root cause: `to_cents(19.99)` returns 1998. "
           "`19.99 * 100` is `1998.9999999999998` in binary floating point and `int()` truncates toward zero, so "
           "every price whose cents are not exactly representable loses a cent. The VAT is truncated the same way "
           "with `int(net * vat_rate)`, which is why INV-2041 is off by more than one cent.\n\n"
           "Fix: go through `Decimal(str(amount))` and round half up to whole cents, and round the VAT per line "
           "with `ROUND_HALF_UP` as well (that is what accounting does by hand, per line).", 260)
    w.write("src/invoicing/money.py", MONEY_FIXED, "I'll rewrite the module with Decimal arithmetic.")
    w.bash("python -m pytest tests/test_money.py -q", "Re-run the money tests",
           PYTEST_PASS.format(n=3, dots="..."), lead="Re-running the tests.")
    w.todo([("Reproduce the rounding error with the tests", "completed"),
            ("Fix cent conversion and VAT rounding", "completed"),
            ("Add CSV export for accounting", "pending")])
    w.text("Fixed. `to_cents` now converts through `Decimal(str(amount))` and rounds half up, and VAT is rounded "
           "half up per line. All 3 tests pass. INV-2041 (3 × 19.99 at 21% VAT plus 4.10 at 9%) now totals 7,703 "
           "cents, matching accounting.", 150)
    w.user("Great. Decision: we round VAT per line, not per invoice, keep that. Now accounting wants a CSV export: "
           "one row per invoice line with invoice number, line number, unit price in cents, quantity, VAT rate and "
           "the line total in cents. Put it in src/invoicing/export.py.")
    w.bash("ls src/invoicing tests", "List the package", "src/invoicing:\n__init__.py\nmoney.py\n\ntests:\ntest_money.py\n")
    w.write("src/invoicing/export.py", CSV_PY, "Creating the export module.")
    w.edit("tests/test_money.py", "def test_invoice_total():",
           "def test_export_csv_rows():\n    from invoicing.export import export_csv\n    out = export_csv({\"INV-2041\": [(19.99, 3, 0.21)]})\n"
           "    assert out.splitlines()[1] == \"INV-2041,1,1999,3,0.21,7256\"\n\n\ndef test_invoice_total():",
           lead="Adding a test for the export.")
    w.bash("python -m pytest -q", "Run all tests", "F...\n=================================== FAILURES ===================================\n"
           "____________________________ test_export_csv_rows ____________________________\n\n"
           "    def test_export_csv_rows():\n>       assert out.splitlines()[1] == \"INV-2041,1,1999,3,0.21,7256\"\n"
           "E       AssertionError: assert 'INV-2041,1,1999.0,3,0.21,7256' == 'INV-2041,1,1999,3,0.21,7256'\n\n"
           "tests/test_money.py:18: AssertionError\n1 failed, 3 passed in 0.05s\n", code=1)
    w.text("The export writes `round(price * 100)`, which is a float-derived value again and prints as `1999.0` on "
           "this path. That also violates the integer-cents constraint. I'll reuse `to_cents` instead.", 120)
    w.edit("src/invoicing/export.py", "round(price * 100)", "to_cents(price)")
    w.edit("src/invoicing/export.py", "from .money import line_total", "from .money import line_total, to_cents")
    w.bash("python -m pytest -q", "Run all tests", PYTEST_PASS.format(n=4, dots="...."))
    w.text("The CSV export is in `src/invoicing/export.py`, uses integer cents throughout via `to_cents`, and has a "
           "test. All 4 tests pass.", 90)
    w.user("One more: run the linter before we commit.")
    w.bash("ruff check src tests", "Lint", "src/invoicing/money.py:2:21: F401 [*] `decimal.Decimal` imported but unused\n"
           "Found 1 error.\n[*] 1 fixable with the `--fix` option.\n", code=1)
    w.text("Ruff flags an unused import, but that is wrong: `Decimal` is used in `to_cents`. Let me check the file "
           "on disk; maybe the write did not land as expected.", 80)
    w.bash("grep -n Decimal src/invoicing/money.py", "Check Decimal usage",
           "2:from decimal import ROUND_HALF_UP, Decimal\n6:def to_cents(amount: float | str | Decimal) -> int:\n"
           "8:    cents = (Decimal(str(amount)) * 100).quantize(Decimal(\"1\"), rounding=ROUND_HALF_UP)\n")
    w.text("`Decimal` is used on lines 6 and 8, so the F401 report came from a stale ruff cache. Clearing it.", 60)
    w.bash("ruff clean && ruff check src tests", "Lint without cache", "All checks passed!\n")
    w.text("Lint is clean (the earlier F401 was a stale cache). Ready to commit: the rounding fix in `money.py` and "
           "the CSV export in `export.py`, 4 tests passing.", 70)
    w.user("Commit it with a good message and push the branch.")
    (tid,) = w.assistant([{"type": "tool_use", "name": "Bash",
                           "input": {"command": "git add -A && git commit -m 'Round cents and VAT half up per line; add CSV export' && git push -u origin fix/vat-rounding",
                                     "description": "Commit and push"}}], 80)
    w.result(tid, "The user doesn't want to proceed with this tool use. The tool use was rejected (eg. if it was a file edit, the new_string was NOT written to the file). STOP what you are doing and wait for the user to tell you how to proceed.",
             {}, is_error=True)
    w.user("[Request interrupted by user for tool use]")
    w.user("Don't push yet, only commit. CI is down today.")
    w.bash("git add -A && git commit -q -m 'Round cents and VAT half up per line; add CSV export' && git log --oneline -1",
           "Commit only", "9c41e2a Round cents and VAT half up per line; add CSV export\n")
    w.text("Committed as 9c41e2a on `fix/vat-rounding`, not pushed.", 40)
    return w.lines


def main() -> None:
    OUT.parent.mkdir(parents=True, exist_ok=True)
    lines = build()
    OUT.write_text("".join(json.dumps(rec, ensure_ascii=False, separators=(",", ":")) + "\n" for rec in lines), encoding="utf-8")
    print(f"wrote {OUT} ({len(lines)} lines)")


if __name__ == "__main__":
    main()
