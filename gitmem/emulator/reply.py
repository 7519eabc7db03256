"""The emulator's answers: deterministic retrieval from the prompt, never invention.

The context builder renders team memory as ``<memory id="..." type="...">escaped text</memory>``
elements and the repository guide as markdown. The reply lists the memory items that best match the
question (lexical overlap, weighted by rarity in the prompt), each cited as ``[id]``; if no memory
matches, the best guide sections; and it always says first that it is the emulator, so no one
mistakes it for a model's answer.

When a request offers tools, the emulator is a *scripted agent* (:func:`respond`), so a real client
(Claude Code, an SDK tool loop) runs its whole tool loop offline. From the prompt it plans, in this
order: ``remember`` for "remember that ...", ``check_proposal`` for "should we ...", ``Read`` for
"read <file>", ``recall`` for any other question. It calls each planned tool that is offered (named
exactly, or ``<prefix>__<name>`` as ``mcp__gitmem__recall``; a tool only listed as deferred is
first loaded with ``ToolSearch``), one ``tool_use`` per response, then answers from the tool
results, citing memory ids. Same conversation, same tool calls, same ids.
"""

from __future__ import annotations

import hashlib
import html
import json
import math
import os
import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from ..text import plural

BANNER = "(gitmem emulator: answer retrieved from the prompt, no model was called)"
MAX_MEMORIES = 3
MAX_SECTIONS = 2
SNIPPET_CHARS = 400

_MEMORY = re.compile(r"<memory\b([^>]*)>(.*?)</memory>", re.S)
_ATTR = re.compile(r'([A-Za-z_][\w-]*)="([^"]*)"')
_QUESTION = re.compile(r"<question>(.*?)</question>", re.S)
_REMINDER = re.compile(r"<system-reminder>.*?</system-reminder>", re.S)
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
        return [b["text"] for b in blocks
                if isinstance(b, Mapping) and b.get("type") == "text" and isinstance(b.get("text"), str)]
    return []


def question_of(body: Mapping[str, Any]) -> str:
    """The last user message's text, without memory elements; a ``<question>`` element wins."""
    for message in reversed(body.get("messages") or []):
        if isinstance(message, Mapping) and message.get("role") == "user":
            text = "\n".join(_texts(message.get("content")))
            asked = _QUESTION.findall(text)
            if asked:
                return html.unescape(asked[-1]).strip()
            return html.unescape(_MEMORY.sub(" ", _REMINDER.sub(" ", text))).strip()
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
    seen = set()
    for in_system, text in texts:
        for match in _MEMORY.finditer(text):
            attrs = dict(_ATTR.findall(match.group(1)))
            if attrs.get("id") and attrs["id"] in seen:  # injected twice (a hook and the context builder)
                continue
            seen.add(attrs.get("id"))
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


# --- the scripted agent: tool_use when tools are offered ---------------------------------

_REMEMBER = re.compile(r"\bremember(?:\s+that)?\s+(.+?)\s*(?:$|\n)", re.I | re.S)
_SHOULD = re.compile(r"\bshould we\s+(.+?)\s*(?:[?.!]|$)", re.I)
_READ = re.compile(r"\bread\s+(?:the\s+file\s+)?[`'\"]?([\w./~-]*\w\.\w+)[`'\"]?", re.I)
_ASKS = re.compile(r"^\s*(?:how|what|where|why|which|who|when|does|do|is|are|can|could|will)\b|\?\s*$", re.I)
_CWD = re.compile(r"Primary working directory:\s*(\S+)")
_DEFERRED = re.compile(r"deferred tools are now available via ToolSearch.*?:\n(.*?)</system-reminder>", re.S)
_CONVENTION = re.compile(r"\b(?:always|never|must|convention)\b", re.I)
_DECISION = re.compile(r"\b(?:decided|decision|we chose|we use|we picked)\b", re.I)
MAX_RESULTS = 3


@dataclass(frozen=True)
class Step:
    """One tool call the scripted agent plans for a prompt (``tool`` is gitmem's or Claude Code's name)."""

    tool: str
    input: Mapping[str, Any]


def _user_prompt(message: Mapping[str, Any]) -> str:
    """A user message's own text: its text blocks without system reminders (tool results are not text)."""
    texts = _texts(message.get("content"))
    return html.unescape(_REMINDER.sub(" ", "\n".join(texts))).strip()


def plan(prompt: str, cwd: Optional[str] = None) -> List[Step]:
    """The tool calls a prompt asks for, in order (pure: the same prompt, the same plan)."""
    steps: List[Step] = []
    remembered = _REMEMBER.search(prompt)
    if remembered:
        text = remembered.group(1).strip().rstrip(".")
        kind = "convention" if _CONVENTION.search(text) else "decision" if _DECISION.search(text) else "fact"
        steps.append(Step("remember", {"type": kind, "text": text[:1].upper() + text[1:]}))
    proposed = _SHOULD.search(prompt)
    if proposed:
        steps.append(Step("check_proposal", {"proposal": proposed.group(1).strip()}))
    read = _READ.search(prompt)
    if read:
        path = read.group(1)
        if cwd and not os.path.isabs(path):
            path = os.path.join(cwd, path)
        steps.append(Step("Read", {"file_path": path}))
    if not steps and _ASKS.search(prompt):
        steps.append(Step("recall", {"query": prompt.strip()}))
    return steps


def _tool_names(body: Mapping[str, Any]) -> List[str]:
    return [t["name"] for t in body.get("tools") or [] if isinstance(t, Mapping) and isinstance(t.get("name"), str)]


def _resolve(tool: str, names: Sequence[str]) -> Optional[str]:
    """The offered name of ``tool``: itself, or ``<prefix>__<tool>`` for MCP tools."""
    if tool in names:
        return tool
    return next((n for n in names if n.endswith("__" + tool)), None)


def _all_text(body: Mapping[str, Any]) -> str:
    parts = _texts(body.get("system"))
    for message in body.get("messages") or []:
        if isinstance(message, Mapping):
            parts.extend(_texts(message.get("content")))
    return "\n".join(parts)


def _result_text(block: Mapping[str, Any]) -> str:
    """A tool result's text, without the system reminders a client appends to it."""
    content = block.get("content")
    text = "\n".join(_texts(content)) if isinstance(content, list) else content if isinstance(content, str) else ""
    return _REMINDER.sub("", text).strip()


def _json_in(text: str) -> Any:
    """The JSON value a tool result starts with (MCP tools answer JSON text), or None."""
    start = text.find("{")
    if start < 0:
        return None
    try:
        return json.JSONDecoder().raw_decode(text[start:])[0]
    except ValueError:
        return None


def _turn(body: Mapping[str, Any]) -> Tuple[str, List[Tuple[dict, Optional[dict]]]]:
    """The latest prompt, and the tool calls made since (each with its result, when it came)."""
    messages = [m for m in body.get("messages") or [] if isinstance(m, Mapping)]
    start, prompt = 0, ""
    for i in range(len(messages) - 1, -1, -1):
        if messages[i].get("role") == "user":
            text = _user_prompt(messages[i])
            if text:
                start, prompt = i, text
                break
    calls: List[Tuple[dict, Optional[dict]]] = []
    results: Dict[str, dict] = {}
    for message in messages[start + 1:]:
        content = message.get("content")
        if not isinstance(content, list):
            continue
        for block in content:
            if not isinstance(block, Mapping):
                continue
            if message.get("role") == "assistant" and block.get("type") == "tool_use":
                calls.append((dict(block), None))
            elif message.get("role") == "user" and block.get("type") == "tool_result":
                results[str(block.get("tool_use_id"))] = dict(block)
    return prompt, [(call, results.get(str(call.get("id")))) for call, _ in calls]


def _tool_use(name: str, tool_input: Mapping[str, Any], prompt: str, n: int) -> dict:
    digest = hashlib.sha256(f"{prompt}|{n}|{name}".encode("utf-8")).hexdigest()[:24]
    return {"type": "tool_use", "id": f"toolu_emu{digest}", "name": name, "input": dict(tool_input)}


def next_call(body: Mapping[str, Any]) -> Optional[dict]:
    """The scripted agent's next ``tool_use`` block for this conversation, or None: answer now."""
    names = _tool_names(body)
    if not names:
        return None
    prompt, calls = _turn(body)
    if not prompt:
        return None
    done = {str(call.get("name")) for call, result in calls}
    cwd = _CWD.search(_all_text(body))
    deferred_lists = _DEFERRED.findall(_all_text(body))
    deferred = {line.strip() for text in deferred_lists for line in text.splitlines() if line.strip()}
    searched = {str((call.get("input") or {}).get("query", "")) for call, _ in calls if call.get("name") == "ToolSearch"}
    for n, step in enumerate(plan(prompt, cwd.group(1) if cwd else None)):
        name = _resolve(step.tool, names)
        if name is None:
            hidden = _resolve(step.tool, sorted(deferred))
            query = f"select:{hidden}"
            if hidden and "ToolSearch" in names and query not in searched:
                return _tool_use("ToolSearch", {"query": query}, prompt, n)
            continue
        if name not in done:
            return _tool_use(name, step.input, prompt, n)
    return None


def _summary(call: Mapping[str, Any], result: Optional[Mapping[str, Any]]) -> List[str]:
    """What a tool result says, as lines citing memory ids."""
    name = str(call.get("name", ""))
    base = name.rsplit("__", 1)[-1]
    if base == "ToolSearch":
        return []
    if result is None:
        return [f"- {name}: no result came back"]
    text = _result_text(result)
    if result.get("is_error"):
        return [f"- {name} failed: {_snippet(text)}"]
    data = _json_in(text)
    if base == "check_proposal" and isinstance(data, Mapping):
        found = [r for r in data.get("rejections") or [] if isinstance(r, Mapping)]
        if not found:
            return [f"- {name}: no earlier rejection matches \"{call.get('input', {}).get('proposal', '')}\"."]
        return [f"- Already rejected [{r.get('id')}]: {_snippet(str(r.get('proposal', '')))}; because "
                f"{_snippet(str(r.get('reason', '')))} ({r.get('author')}, {str(r.get('when', ''))[:10]})."
                for r in found[:MAX_RESULTS]]
    if base == "recall" and isinstance(data, Mapping):
        found = [m for m in data.get("memories") or [] if isinstance(m, Mapping)]
        if not found:
            return [f"- {name}: no memory matches."]
        return [f"- [{m.get('id')}] ({m.get('type')}) {_snippet(str(m.get('text', '')))}" for m in found[:MAX_RESULTS]]
    if base == "remember" and isinstance(data, Mapping) and data.get("id"):
        text = _snippet(str(call.get("input", {}).get("text", "")))
        return [f"- Remembered as [{data['id']}] on {data.get('ref', 'memory')}: {text}"]
    if base == "Read":
        lines = text.splitlines()
        first = next((line for line in lines if line.strip()), "")
        return [f"- Read {call.get('input', {}).get('file_path')}: {plural(len(lines), 'line')}, starting {_snippet(first)!r}."]
    return [f"- {name}: {_snippet(text)}"]


def final_answer(body: Mapping[str, Any]) -> Optional[str]:
    """The answer after the scripted tool calls: their results, then matching memory in the prompt."""
    prompt, calls = _turn(body)
    if not calls:
        return None
    lines = [BANNER, "", "From the tools:"]
    for call, result in calls:
        lines.extend(_summary(call, result))
    cited = set(re.findall(r"\[([0-9a-z]{16})\]", "\n".join(lines)))
    memories = [item for item in _rank(items_of(body), prompt) if item.kind == "memory" and item.id not in cited]
    if memories:
        lines += ["", "From the team's memory in the prompt:"]
        for item in memories[:MAX_MEMORIES]:
            kind = f" ({item.type})" if item.type else ""
            lines.append(f"- [{item.id or 'no-id'}]{kind} {_snippet(item.text)}")
    return "\n".join(lines)


def tool_use_tokens(block: Mapping[str, Any]) -> int:
    """Output tokens of a tool_use block: its name and its input as JSON (the shared counter)."""
    from ..tokens import count_tokens

    return count_tokens(str(block.get("name", ""))) + count_tokens(json.dumps(block.get("input", {}), ensure_ascii=False))


def respond(body: Mapping[str, Any]) -> List[dict]:
    """The reply's content blocks: the scripted agent's next tool call, or the text answer."""
    call = next_call(body)
    if call is not None and tool_use_tokens(call) <= int(body.get("max_tokens") or 0):
        return [call]
    return [{"type": "text", "text": final_answer(body) or answer(body)}]
