"""One token counter for the whole project: the emulator, ``count_tokens``, the context builder, the bill.

Claude's tokenizer is not public, so every count here is an **estimate**. The real API counts with
the real tokenizer (``POST /v1/messages/count_tokens``,
https://platform.claude.com/docs/en/build-with-claude/token-counting, which itself says its count
"should be considered an estimate"). How far this counter is from Claude's tokenizer is measured by
``bench/tokens.py`` against ``ctok`` (an offline reconstruction of Claude's tokenizer, reported
exact on 2.3 million recorded ``count_tokens`` answers) on a mixed corpus of English prose, code,
YAML, non-Latin text and the demo's guide: see :data:`ESTIMATE_NOTE` for the figures callers print.

Two tokenizer families, because Claude's models use two (the models pages: Claude Haiku 5.5 "uses
the same newer tokenizer as Claude 4.7 and later models, so the same text counts as about 30% more
tokens than on Claude Haiku 4.5"):

- ``"v3"``: Claude 3 through Opus 4.6, Sonnet 4.5/4.6 and Haiku 4.5 (the default);
- ``"v4.7"``: Opus 4.7 and later, Sonnet 5 and later, Haiku 5.5, Fable.

What callers may rely on:

- deterministic and pure: the same text and family always give the same count, on every platform;
- a text's count is its pieces' costs added up and rounded line by line, so a prompt's count is the
  sum of its blocks' counts (the emulator's cache arithmetic depends on this), and texts joined at a
  line break count the sum of their counts (the context builder's memory blocks depend on this);
- :func:`truncate_to_tokens` returns a prefix whose count never exceeds the budget.

Pieces (like a BPE pre-tokenizer): an ASCII word with its leading space, a run of other letters,
a group of up to 3 digits, one punctuation character, a whitespace run. Each piece costs a
fractional number of tokens from a per-family table (:data:`PIECE_COSTS`), fitted by non-negative
least squares to ctok's counts on the corpus in ``bench/data/tokens_corpus.json``
(``bench/data/build_tokens_corpus.py`` rebuilds it).
"""

from __future__ import annotations

import json
import re
from functools import lru_cache, reduce
from operator import add
from typing import Any, Dict, Iterator, List, Mapping, NamedTuple, Optional

__all__ = [
    "count_tokens",
    "truncate_to_tokens",
    "PromptBlock",
    "prompt_blocks",
    "block_tokens",
    "count_request_tokens",
    "MESSAGE_OVERHEAD_TOKENS",
    "IMAGE_TOKENS",
    "FAMILIES",
    "DEFAULT_FAMILY",
    "ESTIMATE_NOTE",
    "ESTIMATE_ERROR",
    "tool_use_system_tokens",
]

DEFAULT_FAMILY = "v3"
FAMILIES = ("v3", "v4.7")

#: Measured by ``bench/tokens.py`` (this counter vs ctok 1.3.0 on ``bench/data/tokens_corpus.json``):
#: the whole corpus within ``total`` percent, each kind of text (prose, code, YAML, non-Latin, the
#: demo guide) within ``kind`` percent, a single text within ``text`` percent (over or under).
#: ``over`` is the largest overcount of any single text: the emulator's margin at the minimum
#: cacheable length (it must not cache a prefix the API would find too short).
ESTIMATE_ERROR = {"total": 1.0, "kind": 5.0, "text": 11.0, "over": 5.0}  # measured: 0.1, 4.1, 10.2, 4.7

#: One line to print wherever a token count or a cost computed from one is shown.
ESTIMATE_NOTE = (
    "token counts are estimates of Claude's tokenizer: within 1% in total and 5% per kind of text "
    "(prose, code, YAML, non-Latin) on bench/tokens.py's corpus, up to 11% on a single text; "
    "the real API's usage, and so the bill, can differ by that much"
)

# Per-message framing (role markers), charged on the message's first block.
MESSAGE_OVERHEAD_TOKENS = 5
# A request's own framing and a system prompt's, calibrated so the token-counting page's examples
# come out as published (14, 403, 88: see tests/test_emulator.py).
REQUEST_OVERHEAD_TOKENS = 0
SYSTEM_OVERHEAD_TOKENS = 0
#: Per tool definition: the API renders a tool more compactly than this counter counts its name,
#: description and JSON schema; sized so the docs' tool example counts 403.
TOOL_OVERHEAD_TOKENS = -16
#: With ``thinking`` enabled the API adds a hidden prompt too (a count with thinking on is higher
#: than the same count with it off); sized so the docs' thinking example counts 88.
THINKING_SYSTEM_TOKENS = 14
# An image's real cost is about width*height/750 (≤ ~1600 for the API's resized images:
# https://platform.claude.com/docs/en/build-with-claude/vision); without decoding we charge the cap.
IMAGE_TOKENS = 1600

#: The pricing page's "Tool use system prompt token count": with ``tools``, the API adds a hidden
#: system prompt of 346 tokens for ``tool_choice`` ``auto`` or ``none`` and 313 for ``any`` or
#: ``tool`` (the figures it gives for the Claude 4 models; the emulator uses them for every model).
TOOL_USE_SYSTEM_TOKENS = {"auto": 346, "none": 346, "any": 313, "tool": 313}

#: Tokens per piece, per family (see the module docstring). ``word`` + ``letter`` x length for an
#: ASCII word (+ ``capital`` if it starts upper-case); per character for CJK (kanji, kana),
#: Hangul, Cyrillic (and accented Latin), Greek and other letters; ``digits`` per group of up to
#: three; ``punct`` per punctuation character; ``space`` per whitespace character inside a line,
#: ``indent`` per space or tab after a newline.
PIECE_COSTS: Dict[str, Dict[str, float]] = {
    "v3": {"word": 0.549, "letter": 0.136, "capital": 0.329, "cjk": 0.992, "hangul": 1.290,
           "cyrillic": 0.370, "greek": 0.629, "other": 0.700, "digits": 1.631, "punct": 0.517,
           "space": 0.614, "newline": 1.0, "indent": 0.321},
    "v4.7": {"word": 0.245, "letter": 0.292, "capital": 1.415, "cjk": 1.001, "hangul": 1.397,
             "cyrillic": 0.418, "greek": 0.680, "other": 0.775, "digits": 1.161, "punct": 0.694,
             "space": 0.743, "newline": 1.0, "indent": 0.274},
}

_PIECE = re.compile(
    r"(?P<word> ?[A-Za-z]+)"
    r"|(?P<letters> ?[^\W\d_]+)"
    r"|(?P<digits>\d{1,3})"
    r"|(?P<newlines>[ \t]*\n[\s]*)"
    r"|(?P<space>\s+)"
    r"|(?P<punct>[^\w\s])",
)


def _letter_kind(ch: str) -> str:
    o = ord(ch)
    if o < 0x80:
        return "letter"
    if 0xAC00 <= o <= 0xD7AF:
        return "hangul"
    if 0x2E80 <= o <= 0x9FFF or 0x3040 <= o <= 0x30FF or 0xF900 <= o <= 0xFAFF:
        return "cjk"
    if 0x0370 <= o <= 0x03FF:
        return "greek"
    if 0x0400 <= o <= 0x052F or 0xC0 <= o <= 0x24F:
        return "cyrillic"
    return "other"


def _piece_cost(kind: str, piece: str, costs: Mapping[str, float]) -> float:
    if kind == "word":
        body = piece.lstrip(" ")
        return costs["word"] + costs["letter"] * len(body) + (costs["capital"] if body[0].isupper() else 0.0)
    if kind == "letters":
        body = piece.lstrip(" ")
        return costs["word"] + sum(costs[_letter_kind(ch)] for ch in body)
    if kind == "digits":
        return costs["digits"]
    if kind == "newlines":
        newlines = piece.count("\n")
        return costs["newline"] * newlines + costs["indent"] * (len(piece) - newlines)
    if kind == "space":
        return costs["space"] * len(piece)
    return costs["punct"]


def _costs(family: str) -> Mapping[str, float]:
    try:
        return PIECE_COSTS[family]
    except KeyError:
        raise ValueError(f"unknown tokenizer family {family!r} (known: {', '.join(FAMILIES)})") from None


def _pieces(text: str) -> Iterator[tuple]:
    for match in _PIECE.finditer(text):
        yield match.lastgroup, match.group(0), match.start(), match.end()


def _round(total: float) -> int:
    return int(total + 0.5)


@lru_cache(maxsize=4096)
def count_tokens(text: str, family: str = DEFAULT_FAMILY) -> int:
    """Estimated number of Claude tokens in ``text`` for a tokenizer ``family`` (0 for "").

    Rounded line by line (each line with the newline that ends it), so texts joined at a line
    break count the sum of their counts: ``count_tokens(a + "\n" + b) == count_tokens(a + "\n") +
    count_tokens(b)`` whenever ``b`` starts with no whitespace, and a newline costs exactly 1.
    """
    known = _known(family)
    if "\n" not in text:  # one line: its pieces' costs, added in order in C (a memory element, a question)
        return _round(reduce(add, map(known.__getitem__, _PIECES.findall(text)), 0.0))
    total, line = 0, 0.0
    for match in _PIECE.finditer(text):
        line += known[match.group()]
        if match.lastgroup == "newlines":
            total, line = total + _round(line), 0.0
    return total + _round(line)


class _Known(Dict[str, float]):
    """piece -> its cost in one family, filled as pieces are met: the same words recur across memories,
    and this is the counter's hot loop. A piece's kind is the group it matches alone (an alternative
    that fails on a text fails on each of its prefixes too, so the one that matched is the first that
    matches the piece whole)."""

    def __init__(self, family: str):
        super().__init__()
        self.costs = _costs(family)

    def __missing__(self, piece: str) -> float:
        if len(self) > 100_000:  # bounded: a server counts many texts
            self.clear()
        kind = _PIECE.fullmatch(piece).lastgroup  # type: ignore[union-attr]  # a piece of _PIECE's
        cost = self[piece] = _piece_cost(kind, piece, self.costs)  # type: ignore[arg-type]  # a named group
        return cost


def _known(family: str) -> _Known:
    known = _KNOWN.get(family)
    if known is None:
        known = _KNOWN[family] = _Known(family)
    return known


_KNOWN: Dict[str, _Known] = {}
#: :data:`_PIECE` without its names, so ``findall`` hands back the pieces themselves.
_PIECES = re.compile(re.sub(r"\(\?P<\w+>", "(?:", _PIECE.pattern))


def truncate_to_tokens(text: str, max_tokens: int, family: str = DEFAULT_FAMILY) -> str:
    """The longest prefix of ``text``, cut at a piece boundary, that counts at most ``max_tokens``.

    Used by the emulator to honour ``max_tokens`` (the reply then stops with ``stop_reason:
    "max_tokens"``).
    """
    if max_tokens <= 0:
        return ""
    costs = _costs(family)
    done, line = 0, 0.0
    for kind, piece, start, _end in _pieces(text):
        cost = _piece_cost(kind, piece, costs)
        if done + _round(line + cost) > max_tokens:
            return text[:start]
        line += cost
        if kind == "newlines":
            done, line = done + _round(line), 0.0
    return text


def tool_use_system_tokens(body: Mapping[str, Any]) -> int:
    """The hidden tool-use system prompt a request with ``tools`` pays for (0 without tools)."""
    if not body.get("tools"):
        return 0
    choice = body.get("tool_choice")
    kind = choice.get("type", "auto") if isinstance(choice, Mapping) else "auto"
    return TOOL_USE_SYSTEM_TOKENS.get(kind, TOOL_USE_SYSTEM_TOKENS["auto"])


class PromptBlock(NamedTuple):
    """One cacheable unit of a request, in the order the API processes them: tools, system, messages.

    ``block`` is the block as sent (a string message content or string system prompt becomes a text
    block); ``path`` is the API's name for its position (``tools.0``, ``system.1``,
    ``messages.2.content.0``), used in error messages; ``tokens`` includes any framing charged on it.
    ``earlier_thinking`` marks a thinking block of an earlier assistant turn (free, see
    :func:`prompt_blocks`), which some models strip from the prompt altogether. ``role`` is the role of the
    message a ``messages`` block belongs to (empty for tools and system).
    """

    section: str
    path: str
    block: Mapping[str, Any]
    tokens: int
    earlier_thinking: bool = False
    role: str = ""

    @property
    def cache_control(self) -> Optional[Mapping[str, Any]]:
        value = self.block.get("cache_control") if isinstance(self.block, Mapping) else None
        return value if value is not None else None


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _without_cache_control(block: Mapping[str, Any]) -> dict:
    return {k: v for k, v in block.items() if k != "cache_control"}


def block_tokens(block: Any, family: str = DEFAULT_FAMILY) -> int:
    """Tokens of one content block, tool definition or system block, without the framing :func:`prompt_blocks` adds."""
    if not isinstance(block, Mapping):
        return count_tokens(str(block), family)
    kind = block.get("type")
    if kind == "text" and isinstance(block.get("text"), str):
        return count_tokens(block["text"], family)
    if kind == "image":
        return IMAGE_TOKENS
    if kind == "tool_result":
        content = block.get("content")
        if isinstance(content, str):
            return count_tokens(content, family) + 2
        if isinstance(content, list):
            return sum(block_tokens(part, family) for part in content) + 2
        return 2
    if kind == "document" and isinstance(block.get("source"), Mapping) and block["source"].get("type") == "text":
        return count_tokens(str(block["source"].get("data", "")), family)
    if "input_schema" in block and "name" in block:  # a tool definition: name, description, schema
        return (count_tokens(str(block["name"]), family) + count_tokens(str(block.get("description", "")), family)
                + count_tokens(_canonical(block["input_schema"]), family))
    # tool_use, thinking, anything else: its JSON without the marker.
    return count_tokens(_canonical(_without_cache_control(block)), family)


def _as_blocks(content: Any) -> List[Any]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    if isinstance(content, list):
        return content
    return []


def _earlier_turn(messages: List[Any], m: int) -> bool:
    """Whether assistant message ``m`` is an earlier turn: a later user message says more than
    ``tool_result`` (a tool-use loop still in progress keeps its thinking)."""
    for later in messages[m + 1:]:
        if isinstance(later, Mapping) and later.get("role") == "user":
            blocks = _as_blocks(later.get("content"))
            if any(not (isinstance(b, Mapping) and b.get("type") == "tool_result") for b in blocks):
                return True
    return False


def prompt_blocks(body: Mapping[str, Any], family: str = DEFAULT_FAMILY) -> List[PromptBlock]:
    """Flatten a Messages API body into its prefix blocks, tools -> system -> messages.

    The order is the one the API uses for prompt-cache prefixes and breakpoint checks
    (https://platform.claude.com/docs/en/build-with-claude/prompt-caching: "the cache prefix is
    built in the order tools, system, messages"). Malformed parts are skipped, not rejected: request
    validation is the emulator's job, this only counts.

    Framing the API adds is charged on the first block it belongs to: the request's own framing on
    the first block, the hidden tool-use system prompt (:func:`tool_use_system_tokens`) on the
    first tool, a system prompt's framing on its first block, a message's on its first block.
    Thinking blocks of earlier assistant turns cost nothing: the token-counting docs say thinking
    blocks from previous assistant turns "are ignored and do not count toward your input tokens".
    """
    blocks: List[PromptBlock] = []
    thinking_on = isinstance(body.get("thinking"), Mapping) and body["thinking"].get("type") not in (None, "disabled")
    extra = REQUEST_OVERHEAD_TOKENS + (THINKING_SYSTEM_TOKENS if thinking_on else 0)
    tools = body.get("tools")
    if isinstance(tools, list):
        hidden = tool_use_system_tokens(body)
        for i, tool in enumerate(tools):
            tokens = max(1, block_tokens(tool, family) + TOOL_OVERHEAD_TOKENS) + (hidden if i == 0 else 0) + extra
            extra = 0
            blocks.append(PromptBlock("tools", f"tools.{i}", tool if isinstance(tool, Mapping) else {}, tokens))
    system = body.get("system")
    for i, block in enumerate(_as_blocks(system)):
        path = "system" if isinstance(system, str) else f"system.{i}"
        tokens = block_tokens(block, family) + (SYSTEM_OVERHEAD_TOKENS if i == 0 else 0) + extra
        extra = 0
        blocks.append(PromptBlock("system", path, block if isinstance(block, Mapping) else {}, tokens))
    messages = body.get("messages")
    if isinstance(messages, list):
        for m, message in enumerate(messages):
            if not isinstance(message, Mapping):
                continue
            content = message.get("content")
            earlier = message.get("role") == "assistant" and _earlier_turn(messages, m)
            for i, block in enumerate(_as_blocks(content)):
                path = f"messages.{m}.content" if isinstance(content, str) else f"messages.{m}.content.{i}"
                thinking = isinstance(block, Mapping) and block.get("type") in ("thinking", "redacted_thinking")
                tokens = 0 if thinking and earlier else block_tokens(block, family)
                tokens += (MESSAGE_OVERHEAD_TOKENS if i == 0 else 0) + extra
                extra = 0
                blocks.append(PromptBlock("messages", path, block if isinstance(block, Mapping) else {}, tokens,
                                          thinking and earlier, str(message.get("role", ""))))
    return blocks


def count_request_tokens(body: Mapping[str, Any], family: str = DEFAULT_FAMILY) -> int:
    """Input tokens of a whole request (tools + system + messages), as the emulator bills them.

    Equal to ``sum(b.tokens for b in prompt_blocks(body))``: what ``POST /v1/messages/count_tokens``
    returns, and what ``input_tokens + cache_creation_input_tokens + cache_read_input_tokens`` adds
    up to on the emulator. Includes the hidden tool-use system prompt when ``tools`` are present.
    """
    return sum(block.tokens for block in prompt_blocks(body, family))
