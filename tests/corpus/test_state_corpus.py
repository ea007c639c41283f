"""Derived canonical state of every corpus transcript, with counts checked by hand against the raw files.

How each count was checked (FORMATS.md names the fields):

* Aider: one aider run is one session and an item is the file's last run (what ``import_file`` takes).
* monochromatic (Aider), its last run (lines 2608-3732, the 19th ``# aider chat started at``): 8 applied
  SEARCH/REPLACE blocks (one call each: 4 ``Applied edit to`` lines, the others passed in a partly failed
  batch) over 3 paths (CONVENTIONS.md, iterables.union.unit.test.ts, iterables.intersection.ts), 5 blocks
  that ``failed to match`` (5 reports): two on CONVENTIONS.md and one on iterables.intersection.ts (one
  streak, closed by an applied edit of iterables.intersection.ts), then two single failures each followed by
  a success. (The earlier runs' two failures on iterable.filter.ts and their 22 applied blocks over 4 more
  paths are other sessions.)
* mozgoslav (Aider), its last run (from line 3352): the file's 3 ``Applied edit to`` lines are all in it
  (aider took a diagram line as a file name: kept as is).
* bastion (Claude Code): one Read and one Edit of skills-lock.json, three Bash calls (git push,
  sha256sum, git commit), no ``is_error``.
* claude-reliability (Claude Code): mutations = cargo init, 1 Edit, 6 Writes, 1 Write of Justfile, three
  ``rm`` commands and ``just format`` (13); validations = cargo test, two cargo llvm-cov, just check, just
  lint (5, all passed, stale after just format); files = 17 paths (3 of them Read); last TodoWrite has 9 items.
* edgerunner (Codex): 46 exec cells call apply_patch, 5 of them end ``Script failed`` with ``apply_patch
  verification failed`` (41 applied = the 41 ``patch_apply_end`` events) + 10 ``cargo fmt --all`` runs
  without ``--check`` = 51 mutations; 23 exec_command runs of cargo/npm checks (4 finished after a
  ``wait``), 14 with error output (rustc/rustfmt/tsc/npm), 9 clean; 14 cells returned ``Script running``
  and all were waited, 7 ``SESSION_ID=`` sessions of which 4 ended (Ctrl-C or no session id after
  write_stdin), leaving 3 running; 20 paths read with sed -n/cat, 42 named by applied patches, 54 in all.
* basic_gui_mode (OpenHands): mkdir + two str_replace_editor creates; ``python3 -m http.server`` returned
  exit code -1 with "no new output after 30 seconds": still running at the end.
* ctf (SWE-agent legacy): ``create printenv.pl`` and ``edit 1:1`` on the open file; the rest is curl.
* marshmallow (SWE-agent): open setup.py, create + insert + rm reproduce.py, open + edit fields.py.
* astropy-12907 (mini-SWE-agent; a Python script over ``messages[].tool_calls`` and the ``tool`` messages'
  ``extra.returncode``/``raw_output``, no latch): 64 bash commands. Reads: separable.py by cat and 5 ``sed -n``
  (6), core.py by 3 ``sed -n``, test_separable.py by ``sed -n`` and cat, patch.txt by the two ``cat patch.txt``
  (greps are searches, not reads) = 4 files, all read; writes: the one ``sed -i`` of separable.py and ``git diff >
  patch.txt`` = 2 files, 2 mutations (the pip installs and ``setup.py build_ext`` are not guessed); no check
  (``python -c`` scripts only); 15 non-zero exits in 7 lineages by error: ``No module named …`` ×7 (erfa ×5,
  numpy, astropy.table._column_mixins), ``cannot import name … (unknown location)`` ×3, and one each of the
  relative import, pip's ``Could not find a version … erfa``, the ``_compiler`` ImportError, numpy's missing
  ``product`` and ``is a built-in module``; none closed by a later success of the same command, so all active.
* spotter 8463c716 (Claude Code 2.1.39; raw counts by scripts over the JSONL that do not use latch, parallel
  results included): mutations = 5 Writes + 22 Edits over 11 paths, no Bash mutator (npm install, mix
  deps.get, git commit are not guessed) (27); validations = 11 ``mix test`` (one in the background as task
  ``be613ab``, closed by its ``TaskOutput`` poll with ``<exit_code>0``), 4 ``mix compile``, 2 ``npx vitest
  run`` (17) over 6 requirements; ``mix credo`` and ``mise run`` are not checks; 13 ``is_error`` form 12
  lineages (two ``Assertion with =~ failed`` share one), 5 open (Skill, git add, node assets/build.js,
  python3 -c, git push); files = 28 paths, 25 observed (one a ``tail`` of the task output); two pieces of
  evidence are current (``mix test`` and ``mix test …session_live_test.exs`` passed at lines 1405 and 1423,
  after the last edit at 1394).
* its sub-agent agent-a7be2f0: 7 Reads of 6 paths plus find/grep/ls (no checks); two lineages, both open:
  ``Sibling tool call errored`` of find and the EISDIR Read of test/support.
* its compaction agent agent-acompact-f46190: meta lines, the summary prompt and one text answer: nothing.
* entire-image (Claude Code 2.1.29; the chain through the dangling parent of line 121 bridged): mutations =
  1 Write + 18 Edits over 11 paths (19); validations = 4 ``go build`` + 1 ``go test`` (5 runs, 4
  requirements, all passed, stale); one ``File does not exist`` Read lineage, open; files = 12, all observed
  (geminicli/hooks.go read only at line 34); 5 TaskCreate items, all completed by TaskUpdate = 5 actions.
* gemini-cli entire_session (JSON document; a script over ``messages[].toolCalls[]`` that does not use
  latch): 1 write_file (docs/blue.md) and 2 read_file of docs/color.md; of the 6 run_shell_command calls
  (ls, git status ×2, rm, echo >>, git add; all ``Exit Code: 0``) ``rm docs/blue.md`` and ``echo … >>
  docs/color.md`` change files = 2 files, 1 read, 2 written, 3 mutations; none is a check, so no
  validations, processes or failures; every call ``status: success``.
* gemini-cli vibecodingtracker_session.json: 3 read_file (README.md, README.zh-CN.md, README.zh-TW.md),
  then 4 write_file (those three + CONTRIBUTING.md) = 4 files, 3 read, 4 written, 4 mutations.
* gemini-cli vibecodingtracker_session.jsonl (messages upserted by id as Gemini CLI's loader does: 11
  messages from 18 message lines): 7 read_file of 7 paths, 1 write_file and the later ``replace`` of
  GEMINI.md = 8 files, 7 read, 1 written, 2 mutations; the 3 ``update_topic`` calls are not file, shell
  or plan tools.
* lantern_events (Copilot CLI 1.0.78; a Python script over the raw lines that does not import latch): 15
  events, 2 ``tool.execution_start`` of ``view`` (both ``src/orders.py``) and 2 ``tool.execution_complete``
  with ``success: false`` and the same ``error.message`` (``"path": Required``), linked by ``toolCallId``:
  one failure lineage (two occurrences; ``view`` is Copilot's read tool), active (no later ``view``
  succeeds); no file is read or written (both views failed), no shell command, check, process or plan: every other count is 0.
* goose/lantern_sessions.db (Goose 1.45.0; one entry per session, ``#<sessions.id>``; a Python script
  with ``sqlite3`` over ``messages.content_json`` in ``id`` order, ``mode=ro&immutable=1``, no latch):
  no call uses the developer tools (``shell``, ``write``, ``edit``) or ``todo__todo_write``; every tool call failed or touched no file (``read``/``average_item_price`` are ``Tool ... not found``
  errors, ``read_image`` of a missing file, ``load`` of unknown sources), so files, checks, processes and
  plans are 0; failure lineages = distinct (tool, error text with numbers and quoted names normalized):
  ``_1`` 1 (average_item_price), ``_2`` 2 (read, read_image), ``_3`` 1 (the two ``load`` errors for
  'src/orders.py' and 'gdrive' share one; the later argument-less ``load`` succeeds but names no source,
  so it closes nothing), ``_4`` 1 (read); all active.
* opencode/lantern_opencode.db (OpenCode 1.18.13; one entry per session, ``#<session.id>``; a Python
  script with ``sqlite3`` over ``part.data`` per message in ``(time_created, id)`` order,
  ``mode=ro&immutable=1``, no latch): the only tool part is one ``write`` (``completed``) in
  ``ses_031541…``, a mutation of ``src/orders.py`` (``state.input.filePath``, OpenCode's camelCase key, in
  ``PATH_KEYS``): 1 file, written, not read; no part has ``state.status == "error"``,
  no shell, check, process or plan. The three sessions share the workspace ``/work`` and the file
  imports in one transaction, so the workspace generation (mutations of the workspace) is 1 in each.
"""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner
from corpus_support import CorpusItem, corpus_items, import_item, importable_corpus_items, item_id, item_name

from latch.cli import _load_commands, cli
from latch.hotpaths import estimate_tokens
from latch.importers import builtin_importers
from latch.kernel import canonical_state
from latch.kernel.ledger import clear_cache
from latch.store import EventStore

pytestmark = pytest.mark.corpus

#         files observed written mutations generation runs reqs passed failed lineages active procs running actions
EXPECTED = {
    "aider/monochromatic.aider.chat.history.md": (3, 0, 3, 8, 8, 0, 0, 0, 0, 3, 0, 0, 0, 0),
    "aider/mozgoslav.aider.chat.history.md": (3, 0, 3, 3, 3, 0, 0, 0, 0, 0, 0, 0, 0, 0),
    "claude-code/bastion_claude-session.jsonl": (1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0),
    "claude-code/claude-reliability_python-to-rust-port.jsonl": (17, 3, 17, 13, 13, 5, 5, 5, 0, 0, 0, 0, 0, 9),
    "claude-code/8463c716-a2ea-4c14-9efa-87158ebd9f20.jsonl": (28, 25, 11, 27, 27, 17, 6, 5, 1, 12, 5, 1, 0, 0),
    "claude-code/8463c716-a2ea-4c14-9efa-87158ebd9f20/subagents/agent-a7be2f0.jsonl": (
        6,
        6,
        0,
        0,
        0,
        0,
        0,
        0,
        0,
        2,
        2,
        0,
        0,
        0,
    ),
    "claude-code/8463c716-a2ea-4c14-9efa-87158ebd9f20/subagents/agent-acompact-f46190.jsonl": (
        0,
        0,
        0,
        0,
        0,
        0,
        0,
        0,
        0,
        0,
        0,
        0,
        0,
        0,
    ),
    "claude-code/entire-image_session.jsonl": (12, 12, 11, 19, 19, 5, 4, 4, 0, 1, 1, 0, 0, 5),
    "codex/edgerunner_codex-session.jsonl": (54, 20, 42, 51, 51, 23, 7, 4, 3, 19, 2, 21, 3, 5),
    "copilot-cli/lantern_events.jsonl": (0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 0, 0, 0),
    "openhands/basic_gui_mode.json": (3, 0, 3, 3, 3, 0, 0, 0, 0, 0, 0, 1, 1, 0),
    "swe-agent/ctf_i_got_id_demo.traj": (1, 0, 1, 2, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0),
    "swe-agent/marshmallow-1867_function_calling.traj": (3, 2, 2, 4, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0),
    "mini-swe-agent/astropy-12907.traj.json": (4, 4, 2, 2, 2, 0, 0, 0, 0, 7, 7, 0, 0, 0),
    "gemini-cli/entire_session.json": (2, 1, 2, 3, 3, 0, 0, 0, 0, 0, 0, 0, 0, 0),
    "gemini-cli/vibecodingtracker_session.json": (4, 3, 4, 4, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0),
    "gemini-cli/vibecodingtracker_session.jsonl": (8, 7, 1, 2, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0),
    "goose/lantern_sessions.db#20260805_1": (0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 0, 0, 0),
    "goose/lantern_sessions.db#20260805_2": (0, 0, 0, 0, 0, 0, 0, 0, 0, 2, 2, 0, 0, 0),
    "goose/lantern_sessions.db#20260805_3": (0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 0, 0, 0),
    "goose/lantern_sessions.db#20260805_4": (0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 0, 0, 0),
    "opencode/lantern_opencode.db#ses_03156b771ffeANj3CiDnYkqmmr": (0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0),
    "opencode/lantern_opencode.db#ses_031559a74ffe4reBgr5U6MnTO4": (0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0),
    "opencode/lantern_opencode.db#ses_031541bf9ffeMiy2LOFii47rch": (1, 0, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0),
}

# pieces of evidence still current at the end (no edit after the check): checked in the docstring
CURRENT_EVIDENCE = {"claude-code/8463c716-a2ea-4c14-9efa-87158ebd9f20.jsonl": 2}


def counts(s) -> tuple[int, ...]:
    return (
        len(s.files),
        sum(1 for f in s.files if f["reads"]),
        sum(1 for f in s.files if f["writes"]),
        s.mutations,
        s.generation,
        s.validation_runs,
        len(s.evidence),
        sum(o["status"] == "passed" for o in s.evidence),
        sum(o["status"] == "failed" for o in s.evidence),
        len(s.failures),
        sum(f["active"] for f in s.failures),
        len(s.processes),
        sum(p["running"] for p in s.processes),
        len(s.actions),
    )


def imported(tmp_path, item):
    """A corpus item (a file, or one session of a container: ``corpus_support.corpus_items``) in a new store."""
    importers = builtin_importers()
    store = EventStore(tmp_path / "corpus.db")
    # finished sessions: their open tail (Aider's last turn with its edit results) is part of the counts
    try:
        sid = import_item(store, item, importers)
    except BaseException:
        store.close()
        raise
    return store, sid


def test_every_hand_checked_count_names_a_corpus_item(corpus_dir):
    """The hand counts cover the files they were checked on; a corpus file added later needs none (its item is
    held to the consistency checks below) and an entry whose file is gone fails here."""
    assert set(EXPECTED) <= {item_name(i) for i in importable_corpus_items()}


@pytest.mark.parametrize("item", corpus_items(), ids=item_id)
def test_derived_state_counts(item, corpus_dir, tmp_path):
    store, sid = imported(tmp_path, item)
    try:
        s = canonical_state(store, sid)
        got = counts(s)
        (
            files,
            observed,
            written,
            mutations,
            generation,
            runs,
            reqs,
            passed,
            failed,
            lineages,
            active,
            procs,
            running,
            _,
        ) = got
        assert observed <= files and written <= files and mutations <= generation
        assert passed + failed <= reqs and active <= lineages and running <= procs
        assert written == 0 or mutations > 0
        if item_name(item) in EXPECTED:
            assert got == EXPECTED[item_name(item)]
        # sessions end with edits after their last check, except where the docstring says otherwise
        assert sum(o["current"] for o in s.evidence) == CURRENT_EVIDENCE.get(item_name(item), 0)
    finally:
        store.close()


@pytest.mark.parametrize("item", corpus_items(), ids=item_id)
def test_incremental_state_equals_a_rebuild(item, corpus_dir, tmp_path):
    path = item.path
    store, sid = imported(tmp_path, item)
    try:
        seqs = [ev.seq for ev in store.events(sid)]
        sample = sorted(set(seqs[:: max(1, len(seqs) // 12)] + [seqs[-1]]))
        forward = [canonical_state(store, sid, seq).to_json() for seq in sample]
        for seq, expected in zip(sample, forward, strict=False):
            clear_cache()
            assert canonical_state(store, sid, seq).to_json() == expected, f"{path.name} at seq {seq}"
    finally:
        store.close()


def test_codex_session_verdict_and_cli(corpus_dir, tmp_path):
    path = corpus_dir / "codex" / "edgerunner_codex-session.jsonl"
    store, sid = imported(tmp_path, CorpusItem(path))
    s = canonical_state(store, sid)
    store.close()
    assert not s.certification["certified"]
    assert s.certification["reasons"][-3:] == [f"managed process session:{n} is running" for n in (95469, 85147, 89726)]
    # the view: 7 stale evidence lines, a verdict naming the stale passes (not the processes), no file
    lines = s.render(8_000, estimate_tokens).splitlines()
    # the goal is the user's first instruction, the latest one follows it ("Goal: (not set)" before)
    assert lines[:2] == [
        "Canonical state",
        "Goal: https://superteam.fun/earn/listing/trading-tools-and-agents for "
        "this hackathon i want to build a tradaing tool or agent which is extremely fast what should "
        "i build, give some suggestion, explore the docs give best ideas to build on top of give tech",
    ]
    assert lines[2:4] == [
        "Latest user instruction: help me apply for the agentic engineering grant by Superteam",
        "Validation evidence:",
    ]
    lines = lines[:2] + lines[3:]  # the line numbers below are those of the state before the instruction line
    assert sum("(STALE: the workspace changed since)" in line for line in lines) == 7
    assert lines[11] == (
        "- not certified: "
        + "; ".join(
            f"{c}: passed, but the workspace changed since"
            for c in (
                "cargo fmt --all -- --check",
                "cargo clippy --workspace --all-targets -- -D warnings",
                "cargo test --workspace",
            )
        )
    )
    # the 3 running processes are listed (one names a config file on its command line); files are otherwise
    # named only in the working set, newest first, within the state budget
    running = lines.index("Background processes running:")
    assert [line.split("]")[0] for line in lines[running + 1 : running + 4]] == [
        f"- [session:{n}" for n in (95469, 85147, 89726)
    ]
    working = lines.index("Working set: files (newest first):")
    assert not any(f["path"] in line for f in s.files for line in lines[:running] + lines[running + 4 : working])
    assert lines[working + 1].startswith("- ") and "Working set: commands run (newest first):" in lines
    assert [(f["tool"], f["signature"]) for f in s.failures if f["active"]] == [
        ("exec_command", "npm error audit endpoint returned an error"),
        ("exec_command", "aborted by user after <n>.<n>s"),
    ]
    _load_commands()
    db = str(tmp_path / "corpus.db")
    text = CliRunner().invoke(cli, ["--db", db, "state", sid])
    assert text.exit_code == 0, text.output
    assert (
        "files 54 (20 observed, 42 written) · mutations 51 · generation 51 · validations 23 runs, 7 requirements "
        "(0 current) · failures 19 lineages (2 active) · processes 21 (3 running)"
    ) in text.output
    data = json.loads(CliRunner().invoke(cli, ["--db", db, "state", sid, "--json"]).output)
    assert (data["revision"], data["generation"], len(data["files"])) == (s.revision, 51, 54)
