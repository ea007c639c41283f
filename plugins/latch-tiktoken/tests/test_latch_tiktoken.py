"""latch-tiktoken: exact cl100k counts offline, selected for cl100k models only."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

from latch_tiktoken import CL100K_LEADS, TiktokenEstimator, is_cl100k_model, latch_select_estimator

from latch.estimators import HeuristicEstimator


def test_exact_counts():
    est = TiktokenEstimator()
    # OpenAI cookbook example: "tiktoken is great!" -> [83, 1609, 5963, 374, 2294, 0] in cl100k_base.
    assert est.encoding.encode("tiktoken is great!") == [83, 1609, 5963, 374, 2294, 0]
    assert est.estimate("tiktoken is great!") == 6
    assert est.estimate("") == 0
    assert est.estimate("<|endoftext|>") > 1  # special-token text is ordinary text, never an error
    assert list(est.estimate_batch(["tiktoken is great!", "", "hello world"])) == [6, 0, 2]


def test_images_use_the_openai_heuristic():
    est = TiktokenEstimator()
    heuristic = HeuristicEstimator("openai")
    assert est.image_tokens(1024, 1024) == heuristic.image_tokens(1024, 1024) == 765  # 85 + 170 * 4 tiles
    assert est.image_tokens(None, None) == heuristic.image_tokens(None, None)


def test_selected_for_cl100k_models_only():
    assert is_cl100k_model("gpt-4") and is_cl100k_model("gpt-4-0613") and is_cl100k_model("openai/gpt-3.5-turbo")
    assert is_cl100k_model("text-embedding-3-small")
    assert not is_cl100k_model("gpt-4o")  # o200k_base
    assert not is_cl100k_model("claude-sonnet-4") and not is_cl100k_model(None)
    assert isinstance(latch_select_estimator("gpt-4-turbo"), TiktokenEstimator)
    assert latch_select_estimator("gpt-4o") is None


def test_no_model_latch_prices_as_o200k_is_cl100k_for_tiktoken():
    # is_cl100k_model answers such a model without importing tiktoken (a replay of a Codex session never does), and
    # selecting the o200k estimator imports no tokenizer
    from tiktoken.model import MODEL_PREFIX_TO_ENCODING, MODEL_TO_ENCODING, encoding_name_for_model

    from latch.estimators import profile_for_model

    names = [*MODEL_TO_ENCODING, *(prefix + "x" for prefix in MODEL_PREFIX_TO_ENCODING)]
    assert [n for n in names if profile_for_model(n) == "o200k" and encoding_name_for_model(n) == "cl100k_base"] == []
    code = (
        "import sys; from latch_tiktoken import is_cl100k_model as f; from latch_tiktoken.o200k import "
        "latch_select_estimator as o200k; print(f('gpt-5.1-codex'), o200k('gpt-5.1-codex').name, "
        "'tiktoken' in sys.modules, 'quicktok' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False", "o200k", "False", "False"]  # quicktok loads at the first count


def test_a_model_named_unlike_any_cl100k_model_is_answered_without_tiktoken():
    from tiktoken.model import MODEL_PREFIX_TO_ENCODING, MODEL_TO_ENCODING

    cl100k = [
        k for table in (MODEL_TO_ENCODING, MODEL_PREFIX_TO_ENCODING) for k, v in table.items() if v == "cl100k_base"
    ]
    assert cl100k and [k for k in cl100k if not k.startswith(CL100K_LEADS)] == []  # tiktoken's names and prefixes
    code = (
        "import sys; from latch_tiktoken import is_cl100k_model as f, latch_select_estimator as s; "
        "print(f('claude-sonnet-4-5'), s('gemini-2.5-pro'), f('openai/ft:gpt-4:me'), 'tiktoken' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False", "None", "True", "True"]  # only the last name needed tiktoken's table
    code = "import sys; from latch_tiktoken import is_cl100k_model as f; print(f('claude-sonnet-4-5'), 'tiktoken' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False", "False"]


def test_through_the_plugin_host(monkeypatch):
    from latch import plugins

    monkeypatch.setenv("LATCH_LOAD_PLUGINS", "tiktoken")
    plugins.reset_plugin_manager()
    try:
        assert plugins.registered_estimators()["tiktoken"] is TiktokenEstimator
        assert isinstance(plugins.select_estimator("gpt-4"), TiktokenEstimator)
        assert isinstance(plugins.select_estimator("gpt-4o"), HeuristicEstimator)
    finally:
        plugins.reset_plugin_manager()


def test_no_network_needed(tmp_path):
    """A fresh process with sockets disabled and an empty tiktoken cache still counts."""
    code = textwrap.dedent("""
        import socket
        def refuse(*a, **k):
            raise OSError("network disabled in this test")
        socket.socket = refuse
        socket.create_connection = refuse
        from latch_tiktoken import TiktokenEstimator
        print(TiktokenEstimator().estimate("tiktoken is great!"))
    """)
    env = {**os.environ, "TIKTOKEN_CACHE_DIR": str(tmp_path / "empty-cache")}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "6"


def test_long_runs_are_counted_piecewise_in_linear_time():
    from latch_tiktoken import LONG_RUN, TiktokenEstimator

    est = TiktokenEstimator()
    enc = est.encoding
    normal = "def f(x):\n    return x + 1\n" * 500  # no long run: exact
    assert est.estimate(normal) == len(enc.encode(normal, disallowed_special=()))
    blob = "QUJD" * 250_000  # a 1,000,000-character base64-like run
    pieces = [blob[i : i + LONG_RUN] for i in range(0, len(blob), LONG_RUN)]
    expected = sum(len(enc.encode(p, disallowed_special=())) for p in pieces)
    text = "header " + blob + " trailer"
    assert est.estimate(text) == len(enc.encode("header ", disallowed_special=())) + expected + len(
        enc.encode(" trailer", disallowed_special=())
    )
    assert list(est.estimate_batch([normal, text])) == [est.estimate(normal), est.estimate(text)]
