"""The emulator's answers: deterministic retrieval from the prompt, never invention.

The context builder renders team memory as ``<memory id="..." type="...">escaped text</memory>``
elements and the repository guide as markdown. The reply lists the memory items that best match the
question (lexical overlap, weighted by rarity in the prompt), each cited as ``[id]``; if no memory
matches, the best guide sections; and it always says first that it is the emulator, so no one
mistakes it for a model's answer.
"""

from __future__ import annotations

import html
import math
import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

BANNER = "(gitmem emulator: answer retrieved from the prompt, no model was called)"
MAX_MEMORIES = 3
MAX_SECTIONS = 2
SNIPPET_CHARS = 400

_MEMORY = re.compile(r"<memory\b([^>]*)>(.*?)</memory>", re.S)
_ATTR = re.compile(r'([A-Za-z_][\w-]*)="([^"]*)"')
_QUESTION = re.compile(r"<question>(.*?)</question>", re.S)
_HEADING = re.compile(r"^#{1,6}\s+\S.*$", re.M)
_WORD = re.compile(r"[a-z0-9]+")
_STOP = frozenset(
    "the a an and or of to in on for with is are was were be been it its this that these those what "
    "which who whom how why when where do does did we our you your they their i me my can could should "
    "would will shall may might must not no yes from by at as about into than then there here any all "
    "some use used using so if else".split()
)


@dataclass(frozen=True)
class Item:
    """A retrievable piece of the prompt: a memory element or a guide section."""

    kind: str  # "memory" or "section"
    text: str
    id: Optional[str] = None
    type: Optional[str] = None
    title: Optional[str] = None


@lru_cache(maxsize=4096)
def _bag(text: str) -> frozenset:
    """The distinct terms of a text; cached because the guide repeats in every request."""
    return frozenset(_terms(text))


def _terms(text: str) -> List[str]:
    out = []
    for word in _WORD.findall(text.lower()):
        if len(word) < 3 or word in _STOP:
            continue
        if len(word) > 4 and word.endswith("s") and not word.endswith("ss"):
            word = word[:-1]
        out.append(word)
    return out


def _texts(blocks: Any) -> List[str]:
    if isinstance(blocks, str):
        return [blocks]
    if isinstance(blocks, list):
        return [b["text"] for b in blocks if isinstance(b, Mapping) and b.get("type") == "text" and isinstance(b.get("text"), str)]
    return []


def question_of(body: Mapping[str, Any]) -> str:
    """The last user message's text, without memory elements; a ``<question>`` element wins."""
    for message in reversed(body.get("messages") or []):
        if isinstance(message, Mapping) and message.get("role") == "user":
            text = "\n".join(_texts(message.get("content")))
            asked = _QUESTION.findall(text)
            if asked:
                return html.unescape(asked[-1]).strip()
            return html.unescape(_MEMORY.sub(" ", text)).strip()
    return ""


@lru_cache(maxsize=64)
def _sections(text: str) -> Tuple[Item, ...]:
    """Markdown sections of a system text (cached: the guide repeats in every request)."""
    starts = [m.start() for m in _HEADING.finditer(text)]
    if not starts or starts[0] != 0:
        starts.insert(0, 0)
    items = []
    for begin, end in zip(starts, starts[1:] + [len(text)]):
        chunk = text[begin:end].strip()
        if not chunk:
            continue
        first, _, rest = chunk.partition("\n")
        if first.startswith("#"):
            items.append(Item("section", rest.strip() or first, title=first.lstrip("#").strip()))
        else:
            items.append(Item("section", chunk))
    return tuple(items)


def items_of(body: Mapping[str, Any]) -> List[Item]:
    """Memory elements from system and messages, then guide sections from the system text."""
    memories: List[Item] = []
    sections: List[Item] = []
    texts = [(True, t) for t in _texts(body.get("system"))]
    for message in body.get("messages") or []:
        if isinstance(message, Mapping):
            texts.extend((False, t) for t in _texts(message.get("content")))
    for in_system, text in texts:
        for match in _MEMORY.finditer(text):
            attrs = dict(_ATTR.findall(match.group(1)))
            memories.append(Item("memory", html.unescape(match.group(2)).strip(),
                                 id=attrs.get("id"), type=attrs.get("type")))
        if in_system:
            rest = _MEMORY.sub("", text)
            sections.extend(_sections(rest))
    return memories + sections


def _rank(items: Sequence[Item], question: str) -> List[Item]:
    wanted = set(_terms(question))
    if not wanted or not items:
        return []
    bags = [_bag(item.text) | _bag(item.title or "") | _bag(item.type or "") for item in items]
    df: Dict[str, int] = {t: sum(1 for bag in bags if t in bag) for t in wanted}
    n = len(items)
    scored = []
    for position, (item, bag) in enumerate(zip(items, bags)):
        score = sum(math.log(1 + n / df[t]) for t in wanted if t in bag)
        if score > 0:
            scored.append((-score, position, item))
    scored.sort(key=lambda s: (s[0], s[1]))
    return [item for _, _, item in scored]


def _snippet(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= SNIPPET_CHARS else flat[: SNIPPET_CHARS - 3].rstrip() + "..."


def answer(body: Mapping[str, Any]) -> str:
    """The reply text for a request body (before ``max_tokens`` truncation)."""
    question = question_of(body)
    items = items_of(body)
    ranked = _rank(items, question)
    memories = [item for item in ranked if item.kind == "memory"][:MAX_MEMORIES]
    lines = [BANNER, ""]
    if memories:
        lines.append("From the team's memory:")
        for item in memories:
            kind = f" ({item.type})" if item.type else ""
            lines.append(f"- [{item.id or 'no-id'}]{kind} {_snippet(item.text)}")
        return "\n".join(lines)
    sections = [item for item in ranked if item.kind == "section"][:MAX_SECTIONS]
    if sections:
        lines.append("No team memory matches the question; from the guide:")
        for item in sections:
            lines.append(f"- {item.title or 'Guide'}: {_snippet(item.text)}")
        return "\n".join(lines)
    lines.append("Nothing in the prompt matches the question.")
    return "\n".join(lines)
