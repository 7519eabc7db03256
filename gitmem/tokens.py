"""One token counter for the whole project: the emulator, ``count_tokens``, the context builder, the bill.

This is an *approximation* of Claude's tokenizer, which is not public. The real API counts with the
real tokenizer (``POST /v1/messages/count_tokens``,
https://platform.claude.com/docs/en/build-with-claude/token-counting); numbers from the real API will
differ by a few percent. What callers may rely on:

- deterministic and pure: the same text always gives the same count, on every platform;
- additive over pieces: a text's count is the sum of its pieces' counts, so the count of a prompt
  prefix is the sum of its blocks' counts (the emulator's cache arithmetic depends on this);
- roughly 1 token per 3.5-4 characters of English prose, 1 per CJK character, 1 per short digit run.

Pieces (like a BPE pre-tokenizer): a word with its leading space costs 1 token per 5 ASCII letters;
non-ASCII letters cost 1 each; digits 1 per group of up to 3; punctuation 1 per character (runs of the
same character, e.g. ``----`` or ``````, 1 per 4); newline runs 1; other whitespace runs 1 per 4.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Iterator, List, Mapping, Optional

__all__ = [
    "count_tokens",
    "truncate_to_tokens",
    "PromptBlock",
    "prompt_blocks",
    "count_request_tokens",
    "MESSAGE_OVERHEAD_TOKENS",
    "IMAGE_TOKENS",
]

# Per-message framing (role markers), charged on the message's first block.
MESSAGE_OVERHEAD_TOKENS = 3
# An image's real cost is about width*height/750 (≤ ~1600 for the API's resized images:
# https://platform.claude.com/docs/en/build-with-claude/vision); without decoding we charge the cap.
IMAGE_TOKENS = 1600

# ASCII letters per token inside a word: gives ~3.8 characters per token on English prose.
_WORD_CHUNK = 5

_PIECE = re.compile(
    r"(?P<word> ?[A-Za-z]+)"
    r"|(?P<letters> ?[^\W\d_]+)"
    r"|(?P<digits>\d{1,3})"
    r"|(?P<newlines>[ \t]*\n[\s]*)"
    r"|(?P<space>\s+)"
    r"|(?P<punct>([^\w\s])\7*)",
)


def _piece_tokens(kind: str, piece: str) -> int:
    if kind == "word":
        return max(1, math.ceil(len(piece.lstrip(" ")) / _WORD_CHUNK))
    if kind in ("space", "punct"):
        return math.ceil(len(piece) / 4)
    if kind == "letters":
        # Accented Latin or CJK: one token per non-ASCII letter, ASCII letters as in words.
        body = piece.lstrip(" ")
        ascii_letters = sum(1 for ch in body if ch < "\x80")
        return max(1, (len(body) - ascii_letters) + math.ceil(ascii_letters / _WORD_CHUNK))
    return 1  # digits (≤3), a newline run


def _pieces(text: str) -> Iterator[tuple]:
    for match in _PIECE.finditer(text):
        yield match.lastgroup, match.group(0), match.start(), match.end()


@lru_cache(maxsize=4096)
def count_tokens(text: str) -> int:
    """Approximate number of Claude tokens in ``text`` (0 for the empty string)."""
    return sum(_piece_tokens(kind, piece) for kind, piece, _, _ in _pieces(text))


def truncate_to_tokens(text: str, max_tokens: int) -> str:
    """The longest prefix of ``text`` that counts at most ``max_tokens`` tokens.

    Used by the emulator to honour ``max_tokens`` (the reply then stops with ``stop_reason:
    "max_tokens"``). A long word may be cut inside, as a real tokenizer would.
    """
    if max_tokens <= 0:
        return ""
    used = 0
    for kind, piece, start, _end in _pieces(text):
        cost = _piece_tokens(kind, piece)
        if used + cost > max_tokens:
            room = max_tokens - used
            if kind == "word" and room > 0:
                lead = 1 if piece.startswith(" ") else 0
                return text[: start + lead + _WORD_CHUNK * room]
            return text[:start]
        used += cost
    return text


@dataclass(frozen=True)
class PromptBlock:
    """One cacheable unit of a request, in the order the API processes them: tools, system, messages.

    ``block`` is the block as sent (a string message content or string system prompt becomes a text
    block); ``path`` is the API's name for its position (``tools.0``, ``system.1``,
    ``messages.2.content.0``), used in error messages; ``tokens`` includes any framing charged on it.
    """

    section: str
    path: str
    block: Mapping[str, Any]
    tokens: int

    @property
    def cache_control(self) -> Optional[Mapping[str, Any]]:
        value = self.block.get("cache_control") if isinstance(self.block, Mapping) else None
        return value if value is not None else None


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _without_cache_control(block: Mapping[str, Any]) -> dict:
    return {k: v for k, v in block.items() if k != "cache_control"}


def _block_tokens(block: Any) -> int:
    """Tokens of one content block, tool definition or system block."""
    if not isinstance(block, Mapping):
        return count_tokens(str(block))
    kind = block.get("type")
    if kind == "text" and isinstance(block.get("text"), str):
        return count_tokens(block["text"])
    if kind == "image":
        return IMAGE_TOKENS
    if kind == "tool_result":
        content = block.get("content")
        if isinstance(content, str):
            return count_tokens(content) + 2
        if isinstance(content, list):
            return sum(_block_tokens(part) for part in content) + 2
        return 2
    if kind == "document" and isinstance(block.get("source"), Mapping) and block["source"].get("type") == "text":
        return count_tokens(str(block["source"].get("data", "")))
    # tool_use, tool definitions, thinking, anything else: its JSON without the marker.
    return count_tokens(_canonical(_without_cache_control(block)))


def _as_blocks(content: Any) -> List[Any]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    if isinstance(content, list):
        return content
    return []


def prompt_blocks(body: Mapping[str, Any]) -> List[PromptBlock]:
    """Flatten a Messages API body into its prefix blocks, tools -> system -> messages.

    The order is the one the API uses for prompt-cache prefixes and breakpoint checks
    (https://platform.claude.com/docs/en/build-with-claude/prompt-caching: "the cache prefix is
    built in the order tools, system, messages"). Malformed parts are skipped, not rejected: request
    validation is the emulator's job, this only counts.
    """
    blocks: List[PromptBlock] = []
    tools = body.get("tools")
    if isinstance(tools, list):
        for i, tool in enumerate(tools):
            blocks.append(PromptBlock("tools", f"tools.{i}", tool if isinstance(tool, Mapping) else {}, _block_tokens(tool)))
    system = body.get("system")
    for i, block in enumerate(_as_blocks(system)):
        path = "system" if isinstance(system, str) else f"system.{i}"
        blocks.append(PromptBlock("system", path, block if isinstance(block, Mapping) else {}, _block_tokens(block)))
    messages = body.get("messages")
    if isinstance(messages, list):
        for m, message in enumerate(messages):
            if not isinstance(message, Mapping):
                continue
            content = message.get("content")
            for i, block in enumerate(_as_blocks(content)):
                path = f"messages.{m}.content" if isinstance(content, str) else f"messages.{m}.content.{i}"
                tokens = _block_tokens(block) + (MESSAGE_OVERHEAD_TOKENS if i == 0 else 0)
                blocks.append(PromptBlock("messages", path, block if isinstance(block, Mapping) else {}, tokens))
    return blocks


def count_request_tokens(body: Mapping[str, Any]) -> int:
    """Input tokens of a whole request (tools + system + messages), as the emulator bills them.

    Equal to ``sum(b.tokens for b in prompt_blocks(body))``: what ``POST /v1/messages/count_tokens``
    returns, and what ``input_tokens + cache_creation_input_tokens + cache_read_input_tokens`` adds
    up to on the emulator. The real API adds a hidden tool-use system prompt when tools are present;
    this approximation does not.
    """
    return sum(block.tokens for block in prompt_blocks(body))
