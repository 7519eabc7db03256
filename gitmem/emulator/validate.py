"""Request validation for the emulator, with the API's error types and (where known) its messages.

Error shape (https://platform.claude.com/docs/en/api/errors): HTTP status plus
``{"type": "error", "error": {"type": ..., "message": ...}, "request_id": ...}``. Messages quoted
from the API where it is known verbatim: the breakpoint limit ("A maximum of 4 blocks with
`cache_control` may be provided. Found 5.") and the TTL order ("a ttl='1h' cache_control block must
not come after a ttl='5m' cache_control block. Note that blocks are processed in the following
order: `tools`, `system`, `messages`."); the others follow the API's ``field.path: problem`` style.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any, List, Mapping, NamedTuple, Optional, Tuple

from ..pricing import ModelPrice, PriceTable
from ..serving import LONE_SURROGATE, lone_surrogate
from ..tokens import PromptBlock, block_tokens, prompt_blocks
from .cache import Breakpoint, prefix_keys

ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    405: "invalid_request_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    529: "overloaded_error",
}

MAX_BREAKPOINTS = 4

_CONTENT_TYPES = {
    "text", "image", "document", "tool_use", "tool_result", "thinking", "redacted_thinking",
    "search_result", "server_tool_use", "web_search_tool_result",
}
_UNCACHEABLE = {"thinking", "redacted_thinking"}

#: The top-level fields a ``POST /v1/messages`` body may have; any other is 400 "<field>: Extra inputs are
#: not permitted", as the API answers. From the installed anthropic SDK 2.17.0: the keys of
#: ``MessageCreateParamsStreaming`` in ``anthropic/types/message_create_params.py`` and
#: ``anthropic/types/beta/message_create_params.py``, less ``betas``, ``user_profile_id`` and ``workspace_id``
#: (the SDK sends those as the anthropic-beta, anthropic-user-profile-id and anthropic-workspace-id headers).
#: Beta-only fields are accepted whatever the anthropic-beta header says: refusing them would break a client
#: over a header the emulator has no other use for. ``temperature``, ``top_k``, ``top_p`` and ``output_format``
#: are not in 2.17.0's types but are in 0.121.0's (the beta ``output_format``), and clients built on older SDKs
#: send them (gitmem's own backend sends ``temperature`` in ``extra_body``).
MESSAGE_FIELDS = frozenset({
    "max_tokens", "messages", "model", "cache_control", "container", "diagnostics", "inference_geo", "metadata",
    "output_config", "service_tier", "speed", "stop_sequences", "stream", "system", "thinking", "tool_choice",
    "tools",
    # beta only
    "billing_policy", "compaction", "context_management", "fallback_credit_token", "fallbacks", "mcp_servers",
    "thread",
    # SDK 0.121.0
    "temperature", "top_k", "top_p", "output_format",
})
#: The same for ``POST /v1/messages/count_tokens``, from ``MessageCountTokensParams`` in
#: ``anthropic/types/message_count_tokens_params.py`` and ``anthropic/types/beta/message_count_tokens_params.py``
#: (2.17.0, less the same three headers; 0.121.0's beta type adds ``output_format``). No ``max_tokens``:
#: the API refuses it here.
COUNT_FIELDS = frozenset({
    "messages", "model", "cache_control", "output_config", "speed", "system", "thinking", "tool_choice", "tools",
    # beta only
    "billing_policy", "compaction", "context_management", "mcp_servers",
    # SDK 0.121.0
    "output_format",
})


class ApiError(Exception):
    """An error response: HTTP ``status``, the API's error ``type``, a one-line ``message``."""

    def __init__(self, status: int, message: str, error_type: Optional[str] = None):
        self.status = status
        self.error_type = error_type or ERROR_TYPES.get(status, "api_error")
        self.message = message
        super().__init__(f"{status} {self.error_type}: {message}")


def invalid(message: str) -> ApiError:
    return ApiError(400, message)


@dataclass(frozen=True)
class ParsedRequest:
    """A validated body, flattened for the cache: its prefix units (:func:`_prefix_units`), their keys, the breakpoints."""

    body: Mapping[str, Any]
    model: ModelPrice
    blocks: Tuple[PromptBlock, ...]
    keys: Tuple[str, ...]
    breakpoints: Tuple[Breakpoint, ...]

    @property
    def input_tokens(self) -> int:
        return sum(block.tokens for block in self.blocks)


def parse_json(raw: bytes) -> Mapping[str, Any]:
    try:
        body = json.loads(raw.decode("utf-8") or "null")
    except (UnicodeDecodeError, ValueError, RecursionError):  # (nested past the parser's depth)
        raise invalid("There was an error parsing the body of your request: it is not valid JSON.") from None
    if not isinstance(body, dict):
        raise invalid("The request body must be a JSON object.")
    if lone_surrogate(body):
        raise invalid(LONE_SURROGATE)
    return body


def _check_cache_control(value: Any, field: str) -> str:
    """The TTL of a valid marker; ``field`` is its path, e.g. ``system.1.cache_control``."""
    if not isinstance(value, Mapping):
        raise invalid(f"{field}: Input should be an object")
    if value.get("type") != "ephemeral":
        raise invalid(f"{field}.type: Input should be 'ephemeral'")
    ttl = value.get("ttl", "5m")
    if ttl not in ("5m", "1h"):
        raise invalid(f"{field}.ttl: Input should be '5m' or '1h'")
    extra = sorted(set(value) - {"type", "ttl"})
    if extra:
        raise invalid(f"{field}.{extra[0]}: Extra inputs are not permitted")
    return ttl


#: The API's 400 for a message whose text is all whitespace, in its words (observed, with request ids, in
#: anthropics/claude-code#23440; whitespace beside non-blank text in the same message passes).
BLANK_TEXT = "messages: text content blocks must contain non-whitespace text"


def _check_text_block(block: Any, path: str, blank: str) -> None:
    """``blank`` names the field in the empty-text error: the API says ``messages`` for any message block
    (anthropics/claude-code#59812: "messages: text content blocks must be non-empty")."""
    if not isinstance(block, Mapping) or block.get("type") != "text":
        raise invalid(f"{path}.type: Input should be 'text'")
    if not isinstance(block.get("text"), str):
        raise invalid(f"{path}.text: Field required")
    if not block["text"]:
        raise invalid(f"{blank}: text content blocks must be non-empty")


def _check_messages(messages: Any) -> None:
    if not isinstance(messages, list):
        raise invalid("messages: Input should be a valid list")
    if not messages:
        raise invalid("messages: at least one message is required")
    for m, message in enumerate(messages):
        path = f"messages.{m}"
        if not isinstance(message, Mapping):
            raise invalid(f"{path}: Input should be an object")
        if message.get("role") not in ("user", "assistant"):
            raise invalid(f"{path}.role: Input should be 'user' or 'assistant'")
        content = message.get("content")
        last_assistant = m == len(messages) - 1 and message["role"] == "assistant"
        if isinstance(content, str):
            if not content and not last_assistant:
                raise invalid(f"{path}: all messages must have non-empty content except for the optional final assistant message")
            if content and not content.strip() and not last_assistant:
                raise invalid(BLANK_TEXT)
            continue
        if not isinstance(content, list):
            raise invalid(f"{path}.content: Input should be a valid string or list of content blocks")
        if not content and not last_assistant:
            raise invalid(f"{path}: all messages must have non-empty content except for the optional final assistant message")
        for i, block in enumerate(content):
            bpath = f"{path}.content.{i}"
            if not isinstance(block, Mapping) or "type" not in block:
                raise invalid(f"{bpath}.type: Field required")
            if block["type"] not in _CONTENT_TYPES:
                raise invalid(f"{bpath}.type: Input tag {block['type']!r} does not match any of the expected content block types")
            if block["type"] == "text":
                _check_text_block(block, bpath, "messages")
        if not last_assistant and all(b["type"] == "text" for b in content) and not any(b["text"].strip() for b in content):
            raise invalid(BLANK_TEXT)
    _check_tool_pairs(messages)


def _ids_of(message: Mapping[str, Any], kind: str, key: str) -> List[Any]:
    content = message.get("content")
    return [b.get(key) for b in content if b.get("type") == kind] if isinstance(content, list) else []


def _check_tool_pairs(messages: List[Mapping[str, Any]]) -> None:
    """Each tool_use answered by a tool_result in the next (user) message, and each tool_result answering one
    in the message before: the API's two errors, in its words."""
    for m, message in enumerate(messages):
        if message["role"] == "assistant" and m + 1 < len(messages):
            answered = set(_ids_of(messages[m + 1], "tool_result", "tool_use_id"))
            missing = [i for i in _ids_of(message, "tool_use", "id") if i not in answered]
            if missing:
                raise invalid(f"messages.{m + 1}: `tool_use` ids were found without `tool_result` blocks immediately "
                              f"after: {', '.join(map(str, missing))}. Each `tool_use` block must have a "
                              "corresponding `tool_result` block in the next message.")
        if message["role"] == "user":
            asked = set(_ids_of(messages[m - 1], "tool_use", "id")) if m else set()
            stray = [i for i in _ids_of(message, "tool_result", "tool_use_id") if i not in asked]
            if stray:
                raise invalid(f"messages.{m}.content: unexpected `tool_use_id` found in `tool_result` blocks: "
                              f"{', '.join(map(str, stray))}. Each `tool_result` block must have a corresponding "
                              "`tool_use` block in the previous message.")


def _check_scalars(body: Mapping[str, Any], model: ModelPrice, for_count: bool) -> None:
    if not for_count:
        max_tokens = body.get("max_tokens")
        if max_tokens is None:
            raise invalid("max_tokens: Field required")
        if isinstance(max_tokens, bool) or not isinstance(max_tokens, int):
            raise invalid("max_tokens: Input should be a valid integer")
        if max_tokens < 0:
            raise invalid("max_tokens: Input should be greater than or equal to 0")
        if max_tokens == 0:
            # Pre-warming: the prompt is processed (and cached) with no output. The caching page's
            # "Limitations" list: rejected with stream: true, extended thinking (thinking.type:
            # "enabled"; adaptive thinking is not on the list), structured outputs, and a tool_choice
            # of {"type": "tool", ...} or {"type": "any"}.
            thinking = body.get("thinking")
            choice = body.get("tool_choice")
            if body.get("stream"):
                raise invalid("max_tokens: 0 cannot be used with streaming")
            if isinstance(thinking, Mapping) and thinking.get("type") == "enabled":
                raise invalid("max_tokens: 0 cannot be used with extended thinking")
            config = body.get("output_config")
            if body.get("output_format") is not None or (isinstance(config, Mapping) and config.get("format")):
                raise invalid("max_tokens: 0 cannot be used with structured outputs")
            if isinstance(choice, Mapping) and choice.get("type") in ("any", "tool"):
                raise invalid("max_tokens: 0 cannot be used with a tool_choice that forces tool use")
        if max_tokens > model.max_output_tokens:
            raise invalid(
                f"max_tokens: {max_tokens} > {model.max_output_tokens}, which is the maximum allowed "
                f"number of output tokens for {model.id}"
            )
        _check_thinking(body, max_tokens)
        temperature = body.get("temperature")
        if temperature is not None and (not isinstance(temperature, (int, float)) or not 0 <= temperature <= 1):
            raise invalid("temperature: Input should be a number between 0 and 1")
        stops = body.get("stop_sequences")
        if stops is not None and (not isinstance(stops, list) or not all(isinstance(s, str) for s in stops)):
            raise invalid("stop_sequences: Input should be a valid list of strings")
    system = body.get("system")
    if system is not None and not isinstance(system, str):
        if not isinstance(system, list):
            raise invalid("system: Input should be a valid string or list of text blocks")
        for i, block in enumerate(system):
            _check_text_block(block, f"system.{i}", f"system.{i}.text")
    tools = body.get("tools")
    if tools is not None:
        if not isinstance(tools, list):
            raise invalid("tools: Input should be a valid list")
        for i, tool in enumerate(tools):
            if not isinstance(tool, Mapping) or not isinstance(tool.get("name"), str):
                raise invalid(f"tools.{i}.name: Field required")
        names = [t["name"] for t in tools]
        if len(set(names)) < len(names):
            raise invalid("tools: Tool names must be unique.")
    _check_tool_choice(body.get("tool_choice"), [t["name"] for t in tools or []])


def _check_thinking(body: Mapping[str, Any], max_tokens: int) -> None:
    """Extended thinking's documented limits: "budget_tokens must be set to a value less than max_tokens"
    (and at least 1,024), and a tool_choice that forces tool use ("any" or a named tool) is refused with it."""
    thinking = body.get("thinking")
    if not isinstance(thinking, Mapping) or thinking.get("type") != "enabled":
        return
    budget = thinking.get("budget_tokens")
    if isinstance(budget, bool) or not isinstance(budget, int):
        raise invalid("thinking.enabled.budget_tokens: Field required")
    if budget < 1024:
        raise invalid("thinking.enabled.budget_tokens: Input should be greater than or equal to 1024")
    if max_tokens and budget >= max_tokens:
        raise invalid("`max_tokens` must be greater than `thinking.budget_tokens`")
    choice = body.get("tool_choice")
    if isinstance(choice, Mapping) and choice.get("type") in ("any", "tool"):
        raise invalid("Thinking may not be enabled when tool_choice forces tool use.")


def _check_tool_choice(choice: Any, tools: List[str]) -> None:
    if choice is None:
        return
    if not isinstance(choice, Mapping) or choice.get("type") not in ("auto", "any", "tool", "none"):
        raise invalid("tool_choice.type: Input should be 'auto', 'any', 'tool' or 'none'")
    if choice["type"] in ("any", "tool") and not tools:
        raise invalid("tool_choice: tool_choice may only be specified while providing tools.")
    if choice["type"] == "tool" and choice.get("name") not in tools:
        raise invalid(f"tool_choice.name: Tool {choice.get('name')!r} not found in the request's tools.")


class _Marker(NamedTuple):
    """A ``cache_control`` as sent: the prefix unit it ends, the marked block's path and type."""

    unit: int
    value: Any
    path: str
    kind: Any


def _prefix_units(blocks: List[PromptBlock], family: str) -> Tuple[List[PromptBlock], List[_Marker]]:
    """The prefix as the cache sees it, and the request's block-level markers, in prefix order.

    Each block is a unit, except a tool_result whose ``content`` is a list: each part is a unit of its own, still of
    type tool_result (a run of tool_result blocks is one lookback position), so a marker on a part ends the prefix
    right after that part. The SDK types give those parts a ``cache_control`` documented as "Create a cache control
    breakpoint at this content block", and the caching page keys a prefix "up to and including the block designated
    with cache_control". A unit's key never holds a marker, so moving one between a part and its tool_result keeps
    the keys. The tool_result's framing is charged on its first part, so the units add up to the same tokens.
    """
    units: List[PromptBlock] = []
    markers: List[_Marker] = []
    for block in blocks:
        parts = block.block.get("content") if block.block.get("type") == "tool_result" else None
        if isinstance(parts, list) and parts:
            head = {k: v for k, v in block.block.items() if k not in ("content", "cache_control")}
            sizes = [block_tokens(part, family) for part in parts]
            sizes[0] += block.tokens - sum(sizes)
            for j, (part, size) in enumerate(zip(parts, sizes)):
                part = part if isinstance(part, Mapping) else {}
                if part.get("cache_control") is not None:
                    markers.append(_Marker(len(units), part["cache_control"], f"{block.path}.content.{j}", part.get("type")))
                own = {k: v for k, v in part.items() if k != "cache_control"}
                units.append(block._replace(path=f"{block.path}.content.{j}", block={**head, "part": j, "content": [own]},
                                            tokens=size))
        else:
            units.append(block)
        if block.block.get("cache_control") is not None:
            markers.append(_Marker(len(units) - 1, block.block["cache_control"], block.path, block.block.get("type")))
    return units, markers


def _breakpoints(body: Mapping[str, Any], blocks: List[PromptBlock], markers: List[_Marker]) -> Tuple[Breakpoint, ...]:
    """The breakpoints of ``markers`` over the units ``blocks`` (:func:`_prefix_units`), one per unit: two markers
    ending one unit (a tool_result's and its last part's) count twice toward the limit but write one entry, with the
    first one's TTL (the longer, as the TTL order leaves it)."""
    marked: List[Tuple[int, str, str]] = []
    for marker in markers:
        if marker.kind in _UNCACHEABLE:
            raise invalid(f"{marker.path}.cache_control: {marker.kind} blocks cannot be marked with cache_control")
        field = f"{marker.path}.cache_control"
        marked.append((marker.unit, _check_cache_control(marker.value, field), field))
    automatic = body.get("cache_control")
    if automatic is not None:
        # Automatic caching: the top-level marker applies to the last cacheable block. If that
        # block carries its own marker with another TTL, the API answers 400 (the caching docs:
        # the two must agree); with the same TTL they are one breakpoint. "Empty text blocks cannot be
        # cached": an empty final assistant message (a prefill of "") is passed over, as thinking is
        # ("the system silently walks backwards to find the nearest eligible block").
        ttl = _check_cache_control(automatic, "cache_control")
        cacheable = [i for i, b in enumerate(blocks)
                     if b.block.get("type") not in _UNCACHEABLE and b.block.get("text") != ""]
        own = [(i, t, f) for i, t, f in marked if cacheable and i == cacheable[-1]]
        if own and own[0][1] != ttl:
            raise invalid(
                f"cache_control.ttl: the top-level cache_control (ttl='{ttl}') conflicts with the "
                f"ttl='{own[0][1]}' of the last cacheable block ({own[0][2]})"
            )
        if cacheable and not own:
            marked.append((cacheable[-1], ttl, "cache_control"))
            marked.sort()
    if len(marked) > MAX_BREAKPOINTS:
        raise invalid(f"A maximum of {MAX_BREAKPOINTS} blocks with `cache_control` may be provided. Found {len(marked)}.")
    seen_5m = False
    for _, ttl, field in marked:
        if ttl == "1h" and seen_5m:
            raise invalid(
                f"{field}.ttl: a ttl='1h' cache_control block must not come after a ttl='5m' "
                "cache_control block. Note that blocks are processed in the following order: "
                "`tools`, `system`, `messages`."
            )
        seen_5m = seen_5m or ttl == "5m"
    first = {index: ttl for index, ttl, _ in reversed(marked)}
    return tuple(Breakpoint(index, ttl) for index, ttl in sorted(first.items()))


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


#: Models whose effort defaults to ``medium``; every other model's default is ``high``. The effort page
#: (https://platform.claude.com/docs/en/build-with-claude/effort, read 2026-12-05): "Most Claude models
#: default to high effort ...; Claude Opus 5.5 and Claude Haiku 5.5 default to medium."
_MEDIUM_EFFORT_DEFAULT = ("claude-opus-5-5", "claude-haiku-5-5")


def default_effort(model_id: str) -> str:
    """The effort a model uses when ``output_config.effort`` is omitted."""
    return "medium" if model_id in _MEDIUM_EFFORT_DEFAULT else "high"


#: Opus and Sonnet models before Opus 4.5 and Sonnet 4.6 that the emulator serves (the older ones are retired).
_EARLIER_OPUS_SONNET = ("claude-sonnet-4-5-20250929",)


def strips_earlier_thinking(model_id: str) -> bool:
    """Whether the model drops the thinking blocks of earlier turns from the prompt. The caching page's table "What
    invalidates the cache": "On Opus 4.5+ and Sonnet 4.6+, thinking blocks are preserved by default ... On earlier
    Opus/Sonnet models and all Haiku models, all previously-cached thinking blocks are stripped from context"."""
    return "haiku" in model_id or model_id in _EARLIER_OPUS_SONNET


def _citations_on(blocks: List[PromptBlock]) -> bool:
    """Whether any document block (also inside a tool_result) has ``citations: {"enabled": true}``."""
    parts = [b.block for b in blocks]
    parts += [part for b in blocks if b.block.get("type") == "tool_result" and isinstance(b.block.get("content"), list)
              for part in b.block["content"] if isinstance(part, Mapping)]
    return any(part.get("type") == "document" and isinstance(part.get("citations"), Mapping)
               and part["citations"].get("enabled") is True for part in parts)


def cache_key_material(body: Mapping[str, Any], blocks: List[PromptBlock], model_id: str = "") -> List[str]:
    """What each block contributes to the cumulative cache key.

    The ``cache_control`` marker itself is not part of the key (moving a breakpoint must still hit
    an earlier prefix, which is what lookback is for). ``tool_choice``, ``thinking``, the effort
    (``output_config.effort``) and the request's images are mixed into the first message block: the
    caching docs' table "What invalidates the cache" lists tool choice, thinking parameters, effort and
    "adding/removing images anywhere in the prompt" as invalidating the message blocks (not tools or
    system). So an image added *after* a breakpoint still misses the message cache. The speed
    (``speed: "fast"``), the structured-output format (``output_config.format``) and whether citations
    are on are mixed into the first system block (else the first message block): the table has
    switching speed invalidate the system and message caches, and "Enabling/disabling citations
    modifies the system prompt" (tools cache kept, system and messages lost), and the
    structured-outputs page has a changed format "invalidate any prompt cache for that conversation
    thread" (its schema is read as part of the system prompt). An effort equal to the model's default
    (:func:`default_effort`) is left out: the table says "Setting effort explicitly to the model's default is
    equivalent to omitting it and does not invalidate." A thinking block of an earlier turn that the model strips
    (:func:`strips_earlier_thinking`) is no longer the block the tool loop cached, so every key from it on changes.
    A message block carries its message's role: the same words from the assistant are another prompt, while the
    boundary between two messages of one role is not part of the key ("Consecutive user or assistant turns in your
    request will be combined into a single turn").
    """
    images = [_canonical(b.block) for b in blocks if b.block.get("type") == "image"]
    images += [_canonical(part) for b in blocks if b.block.get("type") == "tool_result"
               and isinstance(b.block.get("content"), list)
               for part in b.block["content"] if isinstance(part, Mapping) and part.get("type") == "image"]
    config: Mapping[str, Any] = body["output_config"] if isinstance(body.get("output_config"), Mapping) else {}
    effort = config.get("effort") if config.get("effort") != default_effort(model_id) else None
    output = {"speed": body.get("speed"), "format": config.get("format"),
              **({"citations": True} if _citations_on(blocks) else {})}
    material = []
    first_message = first_system = True
    stripped = strips_earlier_thinking(model_id)
    for block in blocks:
        text = _canonical({k: v for k, v in block.block.items() if k != "cache_control"})
        if block.earlier_thinking and stripped:
            text = _canonical({"type": block.block.get("type"), "stripped": True})
        if block.section in ("system", "messages") and first_system:
            first_system = False
            if any(output.values()):
                text = _canonical(output) + text
        if block.section == "messages" and first_message:
            first_message = False
            images_key = hashlib.sha256("\x00".join(images).encode("utf-8")).hexdigest() if images else None
            # {"type": "auto"} is what no tool_choice means: naming the default changes no choice
            choice = None if body.get("tool_choice") == {"type": "auto"} else body.get("tool_choice")
            text = _canonical({"tool_choice": choice, "thinking": body.get("thinking"), "images": images_key,
                               **({"effort": effort} if effort else {})}) + text
        material.append(f"{block.section}:{block.role}:{text}")
    return material


def parse_request(body: Mapping[str, Any], table: PriceTable, for_count: bool = False,
                  workspace: str = "") -> ParsedRequest:
    """Validate a ``/v1/messages`` (or ``count_tokens``) body; raise :class:`ApiError` if invalid.

    ``workspace`` (:func:`gitmem.emulator.app.workspace_of`) seeds the prefix keys, so no two workspaces
    share a cache entry."""
    model_id = body.get("model")
    if model_id is None:
        raise invalid("model: Field required")
    if not isinstance(model_id, str):
        raise invalid("model: Input should be a valid string")
    if "messages" not in body:
        raise invalid("messages: Field required")
    extra = next((name for name in body if name not in (COUNT_FIELDS if for_count else MESSAGE_FIELDS)), None)
    if extra is not None:
        raise invalid(f"{extra}: Extra inputs are not permitted")
    _check_messages(body["messages"])
    model = table.find(model_id)
    if model is None or model.retired:
        # Model deprecations: "Retired: The model is no longer available for use. Requests to
        # retired models will fail." The API answers 404 not_found_error "model: <id>", as for an
        # unknown model.
        raise ApiError(404, f"model: {model_id}")
    _check_scalars(body, model, for_count)
    blocks, markers = _prefix_units(prompt_blocks(body, model.tokenizer), model.tokenizer)
    breakpoints = _breakpoints(body, blocks, markers)
    total = sum(block.tokens for block in blocks)
    if total > model.context_window:
        raise invalid(f"prompt is too long: {total} tokens > {model.context_window} maximum")
    keys = prefix_keys(f"workspace:{workspace}\x00model:{model.id}", cache_key_material(body, blocks, model.id))
    return ParsedRequest(body=body, model=model, blocks=tuple(blocks), keys=tuple(keys), breakpoints=breakpoints)
