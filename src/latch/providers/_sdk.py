"""Shared pieces of the SDK-backed providers (:mod:`.openai.sdk`, :mod:`.openai.responses_sdk`, :mod:`.anthropic.sdk`).

* :func:`api_key_from_env`: the API key, only ever from an environment variable;
* :func:`create_kwargs`: a request body as keyword arguments of an SDK ``create`` method (keys the
  method does not name go in ``extra_body``, so the server receives the body unchanged);
* :func:`sdk_error`: an SDK exception as one :class:`~.base.ProviderError` line (or a
  :class:`~.base.ProviderOverflow` for context length exceeded), with the API key redacted;
* :func:`overflow_numbers`: ``(prompt_tokens, limit_tokens)`` of a context-length-exceeded error.
"""

from __future__ import annotations

import inspect
import os
import re
from collections.abc import Callable, Mapping
from typing import Any, Self

from ..lazyre import lazy_compile
from .base import ProviderError, ProviderOverflow

__all__ = [
    "Secret",
    "api_key_from_env",
    "check_options",
    "create_kwargs",
    "sdk_error",
    "overflow_numbers",
    "is_overflow",
    "RETRYABLE",
    "ResponseLimits",
    "ResponseLimitExceeded",
    "DEFAULT_RESPONSE_TIMEOUT",
    "DEFAULT_IDLE_TIMEOUT",
]

DEFAULT_RESPONSE_TIMEOUT = 600.0
"""Seconds one model response may take in all (the request, the SDK's retries and the whole stream)."""
DEFAULT_IDLE_TIMEOUT = 120.0
"""Seconds a response may send nothing (before its headers or between two reads of its stream)."""


class SDKProvider:
    """What the official-SDK providers share: :meth:`from_options` (the plugin host's constructor) and their repr
    (model, base URL and the key's variable name, never the key)."""

    model: str
    base_url: str | None
    api_key_env: str | None  # None: a provider that sends no key (a local server)

    @classmethod
    def from_options(
        cls,
        model: str,
        *,
        base_url: str | None = None,
        api_key_env: str | None = None,
        timeout: float = 600.0,
        max_retries: int = 4,
    ) -> Self:
        """The provider for ``model`` (see the class docstring); :class:`ProviderError` for a missing key
        or a bad option."""
        return cls(
            model,
            base_url=base_url,
            api_key_env=api_key_env,  # type: ignore[call-arg]
            timeout=timeout,
            max_retries=max_retries,
        )

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(model={self.model!r}, base_url={self.base_url!r}, api_key_env={self.api_key_env!r})"
        )


class ResponseLimitExceeded(Exception):
    """A response passed its deadline or its idle timeout (:class:`ResponseLimits`; one line saying which)."""


class ResponseLimits:
    """The deadline (``deadline_seconds``, the whole response: request, retries, stream) and the idle timeout
    (``idle_seconds``, no bytes received) of every response of one provider, enforced in its HTTP transport
    (:meth:`transport`): each socket read waits at most the idle timeout or what is left of the deadline, every
    received chunk checks the deadline, and a retry the SDK would start past the deadline is refused. A stream
    that never ends, or trickles forever, raises :class:`ResponseLimitExceeded` (the provider turns it into a
    :class:`~.base.ProviderError`). Change the two attributes at any time; each response reads them when it
    starts (:meth:`begin`)."""

    def __init__(self, deadline_seconds: float = DEFAULT_RESPONSE_TIMEOUT, idle_seconds: float = DEFAULT_IDLE_TIMEOUT):
        self.deadline_seconds, self.idle_seconds = deadline_seconds, idle_seconds
        self._until: float | None = None
        self._deadline = self._idle = 0.0

    def begin(self) -> None:
        """A response starts now."""
        import time

        for name, value in (("response timeout", self.deadline_seconds), ("idle timeout", self.idle_seconds)):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
                raise ProviderError(f"the {name} must be a positive number of seconds, got {value!r}")
        self._deadline, self._idle = float(self.deadline_seconds), float(self.idle_seconds)
        self._until = time.monotonic() + self._deadline

    def end(self) -> None:
        self._until = None

    def remaining(self) -> float | None:
        """Seconds left before the deadline (``None`` outside a response)."""
        import time

        return None if self._until is None else self._until - time.monotonic()

    def deadline_passed(self) -> ResponseLimitExceeded:
        return ResponseLimitExceeded(
            f"the response took longer than its deadline of {self._deadline:g} s "
            "(--response-timeout, [provider] response_timeout)"
        )

    def idle_passed(self) -> ResponseLimitExceeded:
        return ResponseLimitExceeded(
            f"the server sent nothing for {self._idle:g} s (stream idle timeout: "
            "--idle-timeout, [provider] idle_timeout)"
        )

    def transport(self) -> Any:
        """An ``httpx2`` transport (the SDKs' HTTP client) enforcing these limits."""
        import httpx2

        limits = self

        class BoundedStream(httpx2.SyncByteStream):
            def __init__(self, inner: Any, read: float):
                self.inner, self.read = inner, read

            def __iter__(self) -> Any:
                chunks = iter(self.inner)
                while True:
                    try:
                        chunk = next(chunks)
                    except StopIteration:
                        return
                    except httpx2.ReadTimeout:
                        left = limits.remaining()
                        raise (
                            limits.deadline_passed() if left is not None and left <= 0.05 else limits.idle_passed()
                        ) from None
                    left = limits.remaining()
                    if left is not None and left <= 0:
                        raise limits.deadline_passed()
                    yield chunk

            def close(self) -> None:
                close = getattr(self.inner, "close", None)
                if close is not None:
                    close()

        class BoundedTransport(httpx2.BaseTransport):
            def __init__(self) -> None:
                self.inner = httpx2.HTTPTransport()

            def handle_request(self, request: Any) -> Any:
                left = limits.remaining()
                if left is not None and left <= 0:  # the SDK would retry past the deadline: refused, not retried
                    raise limits.deadline_passed()
                timeout = dict(request.extensions.get("timeout") or {})
                reads = [t for t in (timeout.get("read"), limits._idle or None, left) if t is not None]
                if reads:
                    timeout["read"] = max(0.01, min(reads))
                    request.extensions["timeout"] = timeout
                try:
                    response = self.inner.handle_request(request)
                except httpx2.ReadTimeout:
                    left = limits.remaining()
                    if left is not None and left <= 0.05:
                        raise limits.deadline_passed() from None
                    raise
                response.stream = BoundedStream(response.stream, timeout.get("read") or 0.0)
                return response

            def close(self) -> None:
                self.inner.close()

        return BoundedTransport()


REDACTED = "[redacted]"


class Secret:
    """A string that never shows itself: ``repr``/``str`` are ``[redacted]``; ``.value`` holds it."""

    __slots__ = ("value",)

    def __init__(self, value: str | None):
        self.value = value

    def __repr__(self) -> str:
        return REDACTED

    __str__ = __repr__

    def redact(self, text: str) -> str:
        """``text`` with every occurrence of the secret replaced by ``[redacted]``."""
        return text.replace(self.value, REDACTED) if self.value else text


def api_key_from_env(provider: str, variable: str, *, required: bool) -> Secret:
    """The API key in the environment variable ``variable`` (a :class:`Secret`; ``.value`` is ``None``
    when the variable is unset or empty and ``required`` is false).

    Missing and required: :class:`ProviderError` naming the variable (never a value).
    """
    value = os.environ.get(variable, "").strip()
    if not value and required:
        raise ProviderError(
            f"{provider}: no API key: the environment variable {variable} is not set "
            f"(keys are read only from the environment)",
            provider=provider,
        )
    return Secret(value or None)


def check_options(provider: str, model: Any, timeout: Any, max_retries: Any) -> None:
    """:class:`ProviderError` for an empty model id, a non-positive ``timeout`` (seconds) or a
    negative / non-integer ``max_retries``."""
    if not isinstance(model, str) or not model.strip():
        raise ProviderError(f"{provider}: the model must be a non-empty string, got {model!r}", provider=provider)
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not timeout > 0:
        raise ProviderError(
            f"{provider}: timeout must be a positive number of seconds, got {timeout!r}", provider=provider
        )
    if isinstance(max_retries, bool) or not isinstance(max_retries, int) or max_retries < 0:
        raise ProviderError(
            f"{provider}: max_retries must be a non-negative integer, got {max_retries!r}", provider=provider
        )


_PARAMS: dict[Any, frozenset[str]] = {}


def _params(create: Callable[..., Any]) -> frozenset[str]:
    key = getattr(create, "__func__", create)
    names = _PARAMS.get(key)
    if names is None:
        names = frozenset(p for p in inspect.signature(create).parameters if p != "self")
        _PARAMS[key] = names
    return names


def create_kwargs(create: Callable[..., Any], body: Mapping[str, Any], **fixed: Any) -> dict[str, Any]:
    """Keyword arguments for the SDK method ``create`` carrying ``body``, then ``fixed`` (which win).

    Keys of ``body`` that ``create`` does not name go in ``extra_body`` (merged into the JSON the
    SDK sends), so a body key the SDK does not know still reaches the server, unchanged.
    """
    known = _params(create)
    kwargs: dict[str, Any] = {}
    extra: dict[str, Any] = {}
    for k, v in body.items():
        if k in fixed:
            continue
        (kwargs if k in known and k not in ("extra_body", "extra_headers", "extra_query", "timeout") else extra)[k] = v
    kwargs.update(fixed)
    if extra:
        kwargs["extra_body"] = extra
    return kwargs


RETRYABLE = frozenset({408, 409, 429})  # and every status >= 500: what the SDKs retry

_INT = r"(\d[\d,]*)"
_OVERFLOW_PATTERNS: tuple[tuple[re.Pattern[str], str], ...] = (
    # Anthropic: "prompt is too long: 208310 tokens > 200000 maximum"
    (lazy_compile(rf"prompt is too long:\s*{_INT}\s*tokens\s*>\s*{_INT}", re.I), "pl"),
    # Anthropic: "input length and `max_tokens` exceed context limit: 197626 + 21333 > 200000"
    (lazy_compile(rf"exceed context limit:\s*{_INT}\s*\+\s*{_INT}\s*>\s*{_INT}", re.I), "p_l"),
    # llama.cpp server: "request (4476 tokens) exceeds the available context size (4096 tokens)"
    (lazy_compile(rf"request \({_INT} tokens\) exceeds the available context size \({_INT} tokens\)", re.I), "pl"),
)
_LIMIT = lazy_compile(rf"maximum context length is {_INT} tokens", re.I)
_PROMPT = (  # OpenAI and llama-cpp-python wordings after "maximum context length is N tokens"
    lazy_compile(rf"resulted in {_INT} tokens", re.I),
    lazy_compile(rf"{_INT} in the messages", re.I),
    lazy_compile(rf"{_INT} in your prompt", re.I),
    lazy_compile(rf"requested {_INT} tokens", re.I),
)
_OVERFLOW_WORDS = lazy_compile(
    r"context[_ ]length[_ ]exceeded|exceeds? the (available )?context (size|window)|"
    r"maximum context length|prompt is too long|exceed context limit|"
    r"context window exceeded|input exceeds the context window",
    re.I,
)
_OVERFLOW_CODES = frozenset(
    {
        "context_length_exceeded",
        "exceed_context_size_error",
        "context_window_exceeded",
        "model_context_window_exceeded",
        "request_too_large_for_context",
    }
)


def _num(text: str) -> int:
    return int(text.replace(",", ""))


def is_overflow(message: str, error: Mapping[str, Any] | None = None) -> bool:
    """Whether an error (its message and the provider's error object) says the context length was exceeded."""
    error = error or {}
    codes = {str(error.get(k)) for k in ("code", "type") if error.get(k) is not None}
    return bool(codes & _OVERFLOW_CODES) or bool(_OVERFLOW_WORDS.search(message))


def overflow_numbers(message: str, error: Mapping[str, Any] | None = None) -> tuple[int | None, int | None]:
    """``(prompt_tokens, limit_tokens)`` of a context-length-exceeded error, each ``None`` when not stated.

    Read from llama.cpp's ``n_prompt_tokens`` / ``n_ctx`` fields of the error object, else from the
    message: OpenAI ("maximum context length is N tokens ... resulted in M tokens"), llama-cpp-python
    ("... you requested T tokens (P in the messages, C in the completion)"), llama.cpp ("request (P
    tokens) exceeds the available context size (N tokens)") and Anthropic ("prompt is too long: P
    tokens > N maximum"; "exceed context limit: P + C > N").
    """
    error = error or {}
    prompt, limit = error.get("n_prompt_tokens"), error.get("n_ctx")
    prompt = prompt if isinstance(prompt, int) and not isinstance(prompt, bool) else None
    limit = limit if isinstance(limit, int) and not isinstance(limit, bool) else None
    for pattern, shape in _OVERFLOW_PATTERNS:
        m = pattern.search(message)
        if m:
            if shape == "pl":
                return prompt if prompt is not None else _num(m[1]), limit if limit is not None else _num(m[2])
            return prompt if prompt is not None else _num(m[1]), limit if limit is not None else _num(m[3])
    m = _LIMIT.search(message)
    if m and limit is None:
        limit = _num(m[1])
    if prompt is None:
        for pattern in _PROMPT:
            m = pattern.search(message)
            if m:
                prompt = _num(m[1])
                break
    return prompt, limit


def _inner_error(body: Any) -> Any:
    """The provider's error object: ``body["error"]`` when the body wraps one (OpenAI, Anthropic, llama.cpp)."""
    if isinstance(body, Mapping) and isinstance(body.get("error"), Mapping):
        return body["error"]
    return body


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


def _endpoint(exc: BaseException) -> str:
    """The URL the failed request went to, without its query string or credentials (``""`` when unknown)."""
    url = getattr(getattr(exc, "request", None), "url", None)
    if url is None:
        return ""
    text = str(url).split("?", 1)[0]
    scheme, sep, rest = text.partition("://")
    if sep and "@" in rest.split("/", 1)[0]:
        rest = rest.split("@", 1)[1]
    return _one_line(scheme + sep + rest)


def sdk_error(provider: str, exc: BaseException, key: Secret, *, max_retries: int) -> ProviderError:
    """One :class:`ProviderError` line for an SDK exception (raise it outside the ``except`` block, so
    it carries no ``__context__``: the SDK's exception holds the request, headers included).

    ``"<provider>: HTTP <status>: <the provider's message>"``, plus ``(gave up after N retries)``
    when the status is one the SDK retries; ``"<provider>: connection failed|timed out (<url>): <reason>"``
    without a response (the URL without its query string or credentials); ``"<provider>: error in the response stream: <message>"`` for an error
    event after the stream started (``status`` ``None``; not retried). Context length exceeded is a :class:`ProviderOverflow` with the numbers.
    The API key is redacted from the text.
    """
    status = getattr(exc, "status_code", None)
    status = status if isinstance(status, int) else None
    error = _inner_error(getattr(exc, "body", None))
    if isinstance(error, Mapping) and isinstance(error.get("message"), str) and error["message"].strip():
        message = error["message"]
    elif isinstance(error, str) and error.strip():
        message = error
    else:
        message = getattr(exc, "message", None) or str(exc) or type(exc).__name__
    name = type(exc).__name__
    if status is None and ("Timeout" in name or "Connection" in name):
        cause = exc.__cause__ or exc.__context__
        reason = f"{message} ({type(cause).__name__}: {cause})" if cause is not None and str(cause) else message
        what = "timed out" if "Timeout" in name else "connection failed"
        where = _endpoint(exc)
        text = (
            f"{provider}: {what}"
            + (f" ({where})" if where else "")
            + f": {_one_line(reason)} (gave up after {max_retries} retries)"
        )
        return ProviderError(key.redact(text), provider=provider)
    mapping = error if isinstance(error, Mapping) else None
    if status is None or status < 400:  # an error event inside a stream that started with 200
        status = None
        message = f"error in the response stream: {message}"
    head = f"{provider}: HTTP {status}: " if status is not None else f"{provider}: "
    text = key.redact(head + _one_line(message))
    if is_overflow(message, mapping):
        prompt, limit = overflow_numbers(message, mapping)
        return ProviderOverflow(text, provider=provider, status=status, prompt_tokens=prompt, limit_tokens=limit)
    if status is not None and (status in RETRYABLE or status >= 500) and max_retries:
        text += f" (gave up after {max_retries} retries)"
    return ProviderError(text, provider=provider, status=status)
