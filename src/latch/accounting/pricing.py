"""Dollar cost of model requests, from the prices `genai-prices <https://github.com/pydantic/genai-prices>`_ ships.

One pricing rule for every report: ``latch replay`` and ``latch report`` price what the transcript's requests
really cost (the provider's own usage), ``latch bench`` prices what each engine's views would cost, and
``latch run`` prices each request it makes. Units: tokens in, US dollars out (:class:`~decimal.Decimal`,
exact; reports round them).

**Offline.** The price table is the snapshot bundled inside the installed ``genai-prices`` wheel
(``genai_prices.data``). This module builds its own :class:`genai_prices.data_snapshot.DataSnapshot` from that
data and never starts ``genai_prices.UpdatePrices`` (the package's only network path), so nothing is
downloaded at run time, and an updater started by someone else in the same process changes nothing here:
a price is a function of the installed package version.

**Kept prices.** Each lookup and each price is computed once per process, and the CLI keeps them for the next
command in ``cache/genai-prices.json`` under the Latch data folder (:func:`use_price_cache`; keyed by the
genai-prices version), so a command that prices requests it priced before does not import genai-prices at all.

**Usage semantics.** Latch's :class:`~latch.events.Usage` is normalized to Anthropic's: ``input_tokens`` is the
*uncached* input and ``cache_read_tokens`` / ``cache_write_tokens`` are disjoint from it. genai-prices counts
``input_tokens`` as the whole prompt (cache reads and writes included), so a request is priced with
``input = uncached + cache_read + cache_write``. A cache field the transcript does not report (``None``) counts
as 0 (no caching assumed: every such token is billed as uncached input). A request whose uncached input or
output is unknown, or whose model genai-prices does not know, is *unpriced* (``None``, shown as
"unpriced"): never a made-up number.

**Provider rules modelled** (as genai-prices' data encodes them; ``tests/host/test_cost.py`` checks each against the
bundled table):

* *Anthropic* (``claude-*``; explicit ``cache_control`` breakpoints): cache reads cost 0.1x the input rate,
  5-minute cache writes 1.25x (claude-sonnet-4-5: $3 input, $0.30 read, $3.75 write per million tokens).
  Latch's usage has one ``cache_write_tokens`` count, priced as 5-minute writes; 1-hour writes (2x) are not
  distinguished. Sonnet 4.5's long-context tier (all tokens at the higher rate once the prompt exceeds
  200,000 tokens) applies as genai-prices' tiers say.
* *OpenAI* (``gpt-*``, ``o*``; automatic caching): cached input at the model's cached rate (gpt-5: $1.25
  input, $0.125 cached; gpt-4o: $2.50 and $1.25), no write premium: the table has no cache-write price, so
  any tokens reported as written are billed at the input rate.
* *Gemini* (``gemini-*``; implicit caching): cached input at the cached rate (gemini-2.5-flash: $0.30 input,
  $0.03 cached), no write premium; explicit context-cache storage (per hour) is not a request cost and is
  not modelled. Gemini 2.5 Pro's 200,000-token tier applies as genai-prices' tiers say.
* Any other provider genai-prices knows (DeepSeek, Mistral, xAI, ...) follows its table the same way; a
  time-of-day price (DeepSeek's off-peak hours) uses the request's timestamp.

The provider is inferred from the model id (genai-prices' match rules), or given (``provider``: a
genai-prices provider id such as ``anthropic``, ``openai``, ``google``; a ``PROVIDER/MODEL`` id such as
``anthropic/claude-sonnet-4-5`` names it too). Latch's own provider-plugin names ``openai-compatible`` and
the like are not price providers: :func:`price_provider` maps them to ``None`` (infer from the model), and
``openai-responses`` to ``openai``.

**Cache-aware view cost** (:func:`view_cost`, used by ``latch bench``): a view's prompt of ``P`` tokens whose
first ``C`` tokens are shared with the previous request of the same engine is billed as ``C`` cache reads
plus ``P - C`` tokens at the cache-write rate where the model's table has one (Anthropic: the rest of the
prompt is written, as Latch's Anthropic adapter places a breakpoint at its end) or at the uncached input
rate (OpenAI, Gemini), plus the transcript's output tokens. Not modelled: cache lifetimes (a replay has
no wall-clock gaps; every shared prefix counts as a hit), the providers' minimum cacheable prompt (1,024
tokens) and OpenAI's 128-token cache granularity.
"""

from __future__ import annotations

import atexit
import json
import os
from collections.abc import Iterable
from dataclasses import field
from datetime import UTC, datetime
from decimal import Decimal
from functools import cache
from pathlib import Path
from typing import Any

from .. import installed
from ..cache_files import read_cache_file, write_cache_file
from ..events import Usage
from ..records import dataclass

__all__ = [
    "RequestCost",
    "CostTotals",
    "price",
    "price_usage",
    "view_cost",
    "writes_cache",
    "price_provider",
    "parse_timestamp",
    "usd",
    "format_usd",
    "total",
    "cost_dict",
    "UNPRICED",
    "use_price_cache",
    "save_price_cache",
    "warm_up",
    "PRICE_CACHE_ENTRIES",
    "CacheRewrites",
    "cache_rewrites",
    "REWRITE_READ_SHARE",
]

UNPRICED = "unpriced"
"""How a report shows a request or total without a price."""

_NOT_PRICE_PROVIDERS = frozenset(
    {"openai-compatible", "scripted", "replay", "llama-cpp", "ollama", "vllm", "lm-studio", "local"}
)
_PRICE_ALIASES = {"openai-responses": "openai"}  # a Latch provider plugin priced as the price provider it calls


@dataclass(frozen=True)
class RequestCost:
    """The price of one request: ``usd`` in total (``input_usd + output_usd``), the genai-prices ``model_id``
    and ``provider`` id it was priced as, and the tokens billed per kind (``uncached``, ``cache_read``,
    ``cache_write``, ``output``)."""

    usd: Decimal
    input_usd: Decimal
    output_usd: Decimal
    model_id: str
    provider: str
    uncached: int
    cache_read: int
    cache_write: int
    output: int


def _offline_package() -> None:
    """Register ``genai_prices`` without running its ``__init__`` (unless something imported it already): its data,
    types and snapshot modules (all this module uses) then import as usual, without the network updater that
    ``__init__`` imports (``genai_prices.update_prices``: ``httpx2`` and ``asyncio``, about a third of the package's
    import time, and the package's only use of ``httpx2``, which Latch never starts). The first name looked up on the
    package that it does not have yet (``calc_price``, ``__version__``, ...) runs ``__init__`` then, so another user
    of ``genai_prices`` in the same process finds the whole package; without ``httpx2`` that lookup raises
    ``AttributeError``."""
    import importlib.util
    import sys

    if "genai_prices" in sys.modules:
        return
    spec = importlib.util.find_spec("genai_prices")
    if spec is None or spec.loader is None:  # pragma: no cover - a dependency of latch
        raise ModuleNotFoundError("genai-prices is not installed", name="genai_prices")
    package = importlib.util.module_from_spec(spec)
    loader = spec.loader
    initialized = False

    def whole_package(name: str) -> Any:
        nonlocal initialized
        if not initialized:
            initialized = True
            try:
                loader.exec_module(package)
            except ImportError:  # no httpx2: the package stays as Latch uses it
                pass
            if name in vars(package):
                return vars(package)[name]
        raise AttributeError(f"module 'genai_prices' has no attribute {name!r}")

    package.__getattr__ = whole_package  # type: ignore[method-assign]
    sys.modules["genai_prices"] = package


@cache
def _snapshot() -> Any:
    """The bundled price snapshot (see the module docstring: never an auto-updated one)."""
    _offline_package()
    from genai_prices.data import providers
    from genai_prices.data_snapshot import DataSnapshot

    return DataSnapshot(providers=providers, from_auto_update=False)


def warm_up() -> None:
    """Load the price table now (genai-prices and its bundled data: about half a second), e.g. in a server that
    forks many pricing processes; later lookups in this process or its forks find it loaded."""
    _snapshot()
    _prices_version()


def price_provider(name: str | None) -> str | None:
    """The genai-prices provider id for ``name`` (a Latch provider plugin or a price provider); ``None`` when
    the provider should be inferred from the model (no name, or a local/compatible server)."""
    if not name or name.lower() in _NOT_PRICE_PROVIDERS:
        return None
    return _PRICE_ALIASES.get(name.lower(), name.lower())


@cache
def _lookup(model: str, provider: str | None) -> tuple[Any, Any] | None:
    snap = _snapshot()
    tries = [(model, provider)]
    head, sep, rest = model.partition("/")
    if sep and rest and provider is None:
        tries.append((rest, head))  # anthropic/claude-sonnet-4-5
    for ref, prov in tries:
        try:
            return snap.find_provider_model(ref, None, prov, None)  # type: ignore[no-any-return]
        except LookupError:
            continue
    return None


def _model_price(model: str, provider: str | None) -> tuple[Any, Any] | None:
    return _lookup(model, price_provider(provider))


PRICE_CACHE_ENTRIES = 20_000
"""The most prices :func:`use_price_cache`'s file keeps (the oldest go first): about 2 MB."""

_cache_file: Path | None = None
_memo: dict[str, dict[str, Any]] | None = None
_fresh: dict[str, dict[str, Any]] = {"models": {}, "prices": {}}  # found by this process, not in the file yet
_exit_hook = False


def use_price_cache(path: str | os.PathLike[str] | None) -> None:
    """Keep what this process priced in the JSON file ``path`` (``None``: in this process only, the default; the CLI
    passes ``cache/genai-prices.json`` under the Latch data folder), so a later process prices the same request
    again without importing genai-prices (about half a second: pydantic, httpx and the whole table) or running its
    unit machinery (about 0.4 ms a request): the same ``RequestCost``, since a price is a function of the installed
    genai-prices version (the file is keyed by it), the model and provider looked up, the token counts and, for a
    model whose table has date or time-of-day conditions, the request's UTC date or instant. The file is written
    when the process exits (:func:`save_price_cache`), merged with what other processes wrote meanwhile; a file
    that cannot be read or written is ignored (prices are then computed as without it)."""
    global _cache_file, _memo, _exit_hook
    _cache_file, _memo = (Path(path) if path is not None else None), None
    if _cache_file is not None and not _exit_hook:
        atexit.register(save_price_cache)
        _exit_hook = True


@cache
def _prices_version() -> str:
    return installed.version("genai-prices") or "unknown"  # a dependency of latch: always installed


def _read_cache_file() -> dict[str, dict[str, Any]]:
    empty: dict[str, dict[str, Any]] = {"models": {}, "prices": {}}
    if _cache_file is None:
        return empty
    doc = read_cache_file(_cache_file)
    if doc.get("genai_prices") != _prices_version():
        return empty
    models, prices = doc.get("models"), doc.get("prices")
    return {"models": models, "prices": prices} if isinstance(models, dict) and isinstance(prices, dict) else empty


def _cached() -> dict[str, dict[str, Any]]:
    global _memo
    if _memo is None:
        _memo = _read_cache_file()
        for kind in ("models", "prices"):
            _memo[kind].update(_fresh[kind])
    return _memo


def _remember(kind: str, key: str, value: Any) -> None:
    for table in (_cached()[kind], _fresh[kind]):
        table[key] = value
        if len(table) > 2 * PRICE_CACHE_ENTRIES:  # a long bench run: keep the newest, memory stays bounded
            for old in list(table)[:PRICE_CACHE_ENTRIES]:
                del table[old]


def save_price_cache() -> None:
    """Write what this process priced to the :func:`use_price_cache` file (merged with the file as it is now; at
    most :data:`PRICE_CACHE_ENTRIES` prices, the newest; its folder is created). Nothing without a file or without
    anything new; never raises for a file system error."""
    if _cache_file is None or not (_fresh["models"] or _fresh["prices"]):
        return
    doc = _read_cache_file()
    for kind in ("models", "prices"):
        doc[kind].update(_fresh[kind])
    prices = doc["prices"]
    if len(prices) > PRICE_CACHE_ENTRIES:
        doc["prices"] = dict(list(prices.items())[-PRICE_CACHE_ENTRIES:])
    if write_cache_file(_cache_file, json.dumps({"genai_prices": _prices_version(), **doc})):
        for kind in ("models", "prices"):
            _fresh[kind].clear()


def _time_dependence(info: Any) -> str:
    """How ``info``'s (a genai-prices ``ModelInfo``) price depends on the request's time: ``"none"``, ``"date"``
    (start-date conditions: the UTC date decides) or ``"time"`` (anything else, e.g. off-peak hours)."""
    prices = getattr(info, "prices", None)
    if not isinstance(prices, list):
        return "none"
    if all(type(getattr(c, "constraint", None)).__name__ in ("NoneType", "StartDateConstraint") for c in prices):
        return "date"
    return "time"


def _priced_as(model: str, provider: str | None) -> dict[str, Any] | None:
    """What the lookup of ``model`` (``provider``: a price provider id or ``None``) finds: ``None`` (no price), else
    ``{"model_id", "provider_id", "time"}`` (``time``: :func:`_time_dependence`), from the price cache when there."""
    key = f"{provider or ''}|{model}"
    models = _cached()["models"]
    if key not in models:
        found = _lookup(model, provider)
        _remember(
            "models",
            key,
            None
            if found is None
            else {"model_id": found[1].id, "provider_id": found[0].id, "time": _time_dependence(found[1])},
        )
    entry = models[key]
    return entry if isinstance(entry, dict) else None


def _when_key(entry: dict[str, Any], at: datetime) -> str:
    """The part of the request time ``at`` that ``entry``'s price depends on (see :func:`_time_dependence`)."""
    if entry.get("time") == "none":
        return ""
    utc = at.astimezone(UTC) if at.tzinfo is not None else at
    return utc.date().isoformat() if entry.get("time") == "date" else utc.isoformat()


def writes_cache(model: str | None, provider: str | None = None, at: datetime | None = None) -> bool | None:
    """Whether ``model``'s table bills cache writes at their own rate (Anthropic: ``True``; OpenAI, Gemini:
    ``False``); ``None`` when the model has no price."""
    if not model:
        return None
    entry = _priced_as(model, price_provider(provider))
    if entry is None:
        return None
    when = at or datetime.now(tz=UTC)
    key = f"writes|{entry['provider_id']}|{entry['model_id']}|{_when_key(entry, when)}"
    prices = _cached()["prices"]
    if key not in prices:
        found = _model_price(model, provider)
        if found is None:  # pragma: no cover - the lookup above found it
            return None
        _remember("prices", key, getattr(found[1].get_prices(when), "cache_write_mtok", None) is not None)
    return bool(prices[key])


def price(
    *,
    model: str | None,
    uncached: int,
    cache_read: int = 0,
    cache_write: int = 0,
    output: int = 0,
    provider: str | None = None,
    at: datetime | None = None,
) -> RequestCost | None:
    """The price of one request of ``model`` that billed ``uncached`` input tokens, ``cache_read`` and
    ``cache_write`` tokens (disjoint from ``uncached``) and ``output`` tokens, at time ``at`` (default: now;
    a price that depends on the date or the time of day uses it). ``None`` when the model (or ``provider``)
    has no price. Raises ``ValueError`` for a negative count."""
    if min(uncached, cache_read, cache_write, output) < 0:
        raise ValueError(
            f"token counts must be non-negative (uncached {uncached}, cache read {cache_read}, "
            f"cache write {cache_write}, output {output})"
        )
    if not model:
        return None
    entry = _priced_as(model, price_provider(provider))
    if entry is None:
        return None
    when = at or datetime.now(tz=UTC)
    key = (
        f"{entry['provider_id']}|{entry['model_id']}|{uncached}|{cache_read}|{cache_write}|{output}|"
        f"{_when_key(entry, when)}"
    )
    prices = _cached()["prices"]
    if key not in prices:
        _remember("prices", key, _calc(model, provider, uncached, cache_read, cache_write, output, when))
    got = prices[key]
    if not isinstance(got, list):
        return None
    return RequestCost(
        Decimal(got[0]),
        Decimal(got[1]),
        Decimal(got[2]),
        entry["model_id"],
        entry["provider_id"],
        uncached,
        cache_read,
        cache_write,
        output,
    )


def _calc(
    model: str, provider: str | None, uncached: int, cache_read: int, cache_write: int, output: int, when: datetime
) -> list[str] | None:
    """genai-prices' ``[total, input, output]`` dollars (decimal strings) of one request, ``None`` when its table
    cannot price these counts."""
    found = _model_price(model, provider)
    if found is None:  # pragma: no cover - the lookup of price() found it
        return None
    prov, info = found
    from genai_prices.types import Usage as PriceUsage

    usage = PriceUsage(
        input_tokens=uncached + cache_read + cache_write,
        cache_read_tokens=cache_read,
        cache_write_tokens=cache_write,
        output_tokens=output,
    )
    try:
        calc = info.calc_price(usage, prov, genai_request_timestamp=when)
    except (LookupError, ValueError):  # a table entry genai-prices cannot apply to these counts
        return None
    return [str(calc.total_price), str(calc.input_price), str(calc.output_price)]


def price_usage(
    usage: Usage | None, model: str | None = None, *, provider: str | None = None, at: datetime | None = None
) -> RequestCost | None:
    """The price of a request from the provider's reported ``usage`` (its own ``model`` unless ``model`` is
    given). ``None`` (unpriced) without usage, when its uncached input or output is unknown, or when the model
    has no price; unknown cache fields count as 0 (see the module docstring)."""
    if usage is None or usage.input_tokens is None or usage.output_tokens is None:
        return None
    return price(
        model=model or usage.model,
        uncached=usage.input_tokens,
        cache_read=usage.cache_read_tokens or 0,
        cache_write=usage.cache_write_tokens or 0,
        output=usage.output_tokens,
        provider=provider,
        at=at,
    )


def view_cost(
    prompt_tokens: int,
    common_prefix_tokens: int,
    output_tokens: int | None,
    model: str | None,
    *,
    provider: str | None = None,
    at: datetime | None = None,
) -> RequestCost | None:
    """What a view of ``prompt_tokens`` would cost, cache-aware: the ``common_prefix_tokens`` it shares with
    the previous request of the same engine at the cache-read rate, the rest at the cache-write rate where
    the model's table has one (Anthropic) or else at the uncached rate (OpenAI, Gemini), plus
    ``output_tokens`` (the transcript's; ``None`` counts 0). ``None`` when the model has no price. Raises
    ``ValueError`` when the prefix is negative or longer than the prompt."""
    if not 0 <= common_prefix_tokens <= prompt_tokens:
        raise ValueError(f"common prefix {common_prefix_tokens} must be within the prompt (0..{prompt_tokens})")
    rest = prompt_tokens - common_prefix_tokens
    writes = writes_cache(model, provider, at)
    if writes is None:
        return None
    return price(
        model=model,
        uncached=0 if writes else rest,
        cache_read=common_prefix_tokens,
        cache_write=rest if writes else 0,
        output=output_tokens or 0,
        provider=provider,
        at=at,
    )


def parse_timestamp(ts: str | None) -> datetime | None:
    """An event timestamp (ISO 8601; a trailing ``Z`` is UTC; naive means UTC) as an aware datetime, else
    ``None`` (missing or unparsable)."""
    if not ts:
        return None
    try:
        t = datetime.fromisoformat(ts.replace("Z", "+00:00"))
    except ValueError:
        return None
    return t if t.tzinfo is not None else t.replace(tzinfo=UTC)


def usd(value: Decimal | None) -> float | None:
    """A dollar amount for JSON: a float rounded to 8 decimals (a hundredth of a micro-dollar), or ``None``."""
    return None if value is None else round(float(value), 8)


def format_usd(value: Decimal | float | None) -> str:
    """``$12.35`` from a dollar up, four significant digits below (``$0.004751``, ``$0.01100``), eight decimals
    below a ten-thousandth; :data:`UNPRICED` for ``None``."""
    if value is None:
        return UNPRICED
    v = float(value)
    if v == 0:
        return "$0.00"
    if abs(v) >= 1:
        return f"${v:,.2f}"
    return f"${v:#.4g}" if abs(v) >= 0.0001 else f"${v:.8f}"


@dataclass
class CostTotals:
    """Totals over requests (:meth:`add` each): ``requests``, ``priced`` and ``unpriced`` counts, tokens billed by
    kind over the priced requests, and ``usd`` (``None`` until a request is priced). ``models`` maps each
    genai-prices model id to its own totals (not nested further)."""

    requests: int = 0
    priced: int = 0
    unpriced: int = 0
    uncached: int = 0
    cache_read: int = 0
    cache_write: int = 0
    output: int = 0
    usd: Decimal | None = None
    models: dict[str, CostTotals] = field(default_factory=dict)

    def add(self, cost: RequestCost | None, *, by_model: bool = True) -> None:
        """Count one request and its ``cost`` (``None``: unpriced)."""
        self.requests += 1
        if cost is None:
            self.unpriced += 1
            return
        self.priced += 1
        self.uncached += cost.uncached
        self.cache_read += cost.cache_read
        self.cache_write += cost.cache_write
        self.output += cost.output
        self.usd = (self.usd or Decimal(0)) + cost.usd
        if by_model:
            self.models.setdefault(cost.model_id, CostTotals()).add(cost, by_model=False)

    @property
    def input_tokens(self) -> int:
        """Prompt tokens of the priced requests: uncached + cache read + cache write."""
        return self.uncached + self.cache_read + self.cache_write

    @property
    def cache_read_share(self) -> float | None:
        """Cache reads over all prompt tokens of the priced requests (0..1), ``None`` when there are none."""
        return self.cache_read / self.input_tokens if self.input_tokens else None

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready: counts, tokens by kind, ``usd`` (float or ``None``), ``cache_read_share`` and, at the top
        level, ``models`` (model id → the same fields)."""
        out: dict[str, Any] = {
            "requests": self.requests,
            "priced_requests": self.priced,
            "unpriced_requests": self.unpriced,
            "uncached_input_tokens": self.uncached,
            "cache_read_tokens": self.cache_read,
            "cache_write_tokens": self.cache_write,
            "output_tokens": self.output,
            "usd": usd(self.usd),
            "cache_read_share": round(self.cache_read_share, 4) if self.cache_read_share is not None else None,
        }
        if self.models:
            out["models"] = {m: t.as_dict() for m, t in sorted(self.models.items())}
        return out


def total(costs: Iterable[RequestCost | None]) -> CostTotals:
    """:class:`CostTotals` of ``costs``."""
    t = CostTotals()
    for c in costs:
        t.add(c)
    return t


def cost_dict(cost: RequestCost | None) -> dict[str, Any] | None:
    """JSON-ready ``{"usd", "input_usd", "output_usd", "model_id", "provider"}`` of one request, or ``None``."""
    if cost is None:
        return None
    return {
        "usd": usd(cost.usd),
        "input_usd": usd(cost.input_usd),
        "output_usd": usd(cost.output_usd),
        "model_id": cost.model_id,
        "provider": cost.provider,
    }


REWRITE_READ_SHARE = 0.5
"""A request whose cache read is below this share of what the provider's cache held after the previous request
rewrote the cached prefix (:func:`cache_rewrites`)."""


@dataclass(frozen=True, slots=True)
class CacheRewrites:
    """Full-prefix cache rewrites of a run of requests (:func:`cache_rewrites`): ``requests`` with both cache
    figures reported, the 1-based numbers of the ``rewrites``, their cache-write tokens and all cache-write
    tokens; ``share`` is the rewrites' part of all cache writes (``None`` when nothing was written)."""

    requests: int
    rewrites: tuple[int, ...]
    rewrite_write_tokens: int
    write_tokens: int

    @property
    def share(self) -> float | None:
        return self.rewrite_write_tokens / self.write_tokens if self.write_tokens else None

    def as_dict(self) -> dict[str, Any]:
        share = self.share
        return {
            "requests": self.requests,
            "rewrites": list(self.rewrites),
            "rewrite_write_tokens": self.rewrite_write_tokens,
            "write_tokens": self.write_tokens,
            "share": round(share, 4) if share is not None else None,
        }


def cache_rewrites(usages: Iterable[Usage | None]) -> CacheRewrites:
    """The requests of one conversation (in order, ``None`` for a request without usage) that rewrote the
    provider's cached prefix instead of reading it: after the first request with cache figures, a request whose
    ``cache_read_tokens`` is below :data:`REWRITE_READ_SHARE` of what the cache held after the previous one (its
    cache read plus its cache write) lost that prefix (the cache entry expired, or the prefix changed) and paid
    to write it again; its ``cache_write_tokens`` are rewrite waste. A provider that does not report cache writes
    (``cache_write_tokens`` ``None``) gives no figures; such requests are skipped. Hit rate hides this: a session
    can read 97% of its input from cache while two rewrites carry half of its cache-write dollars.
    """
    held: int | None = None
    counted = written = wasted = 0
    rewrites: list[int] = []
    for n, u in enumerate(usages, 1):
        if u is None or u.cache_read_tokens is None or u.cache_write_tokens is None:
            continue
        counted += 1
        written += u.cache_write_tokens
        if held and u.cache_read_tokens < REWRITE_READ_SHARE * held and u.cache_write_tokens > 0:
            rewrites.append(n)
            wasted += u.cache_write_tokens
        held = u.cache_read_tokens + u.cache_write_tokens
    return CacheRewrites(counted, tuple(rewrites), wasted, written)
