"""Prompt-cache logic of the emulator, pure: keys, lookback, TTLs, and the usage arithmetic.

Rules, from https://platform.claude.com/docs/en/build-with-claude/prompt-caching (paraphrased;
re-checked 2026-12-02 where the search corpus had the page, otherwise as the issue's "Facts to build
on" record them):

- An entry is keyed on the exact prefix up to and including a block marked with ``cache_control``:
  model, then tools, system and messages in that order. Keys are cumulative, so a change anywhere
  before a breakpoint gives a different key.
- "Caches are isolated between organizations", and on the Claude API (since 5 February 2026) between
  workspaces: the keys are seeded with the caller's workspace, which the emulator, having no
  workspaces, takes from the hashed API key (``app.workspace_of``), so one key never reads another
  key's entries.
- From each breakpoint the service also checks earlier block boundaries for a hit: it "checks at
  most 20 positions per breakpoint, counting the breakpoint itself as the first", so an entry
  exactly 20 blocks back "is one position outside the window, so there is no cache hit". The
  longest hit wins. A position is a block, except that "a run of consecutive tool_use blocks counts
  as one position, and so does a run of consecutive tool_result blocks" (:func:`lookback_positions`).
- ``{"type": "ephemeral"}`` lives 5 minutes, ``{"type": "ephemeral", "ttl": "1h"}`` one hour; a hit
  refreshes the entry at no extra cost (the pricing page's column is "Cache hits & refreshes").
  A hit refreshes the entry with the TTL it was written with: the docs say nothing of a 5-minute
  entry becoming a 1-hour one when a later request marks it ``1h``, so the emulator takes the
  conservative side and keeps it at 5 minutes.
- A prefix shorter than the model's minimum cacheable length is processed without caching, even
  when marked: the request succeeds with ``cache_creation_input_tokens`` 0. The caller passes
  the minimum it wants enforced: the emulator passes the model's minimum plus the token counter's
  measured overcount margin (``app.cacheable_minimum``), so it never caches a prefix the API would
  find too short.
- "A cache entry only becomes available after the first response begins": a request that arrived (see
  :meth:`PromptCache.arrive`) before an entry was written does not see it. The emulator's response begins as soon
  as its entry is written, so "written" stands for "the response began".
- With mixed TTLs: A = tokens up to the highest cache hit (0 if none), B = tokens up to the last 1h
  breakpoint after A (A if none), C = tokens up to the last breakpoint; read = A, 1h write = B - A,
  5m write = C - B, and ``input_tokens`` = total - max(A, C).

Callers pass time in (``now``) so this module never reads a clock. Entries are written at
breakpoints only, as on the real service.
"""

from __future__ import annotations

import hashlib
import threading
from dataclasses import dataclass, replace
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

TTL_SECONDS = {"5m": 300.0, "1h": 3600.0}
LOOKBACK_BLOCKS = 20
#: Block types whose consecutive runs count as one lookback position.
RUN_TYPES = ("tool_use", "tool_result")


@dataclass(frozen=True)
class Breakpoint:
    """A ``cache_control`` marker: the prefix ends after block ``index`` (0-based)."""

    index: int
    ttl: str = "5m"


@dataclass(frozen=True)
class Entry:
    """A live cache entry: the prefix hash, its length in tokens, and when it expires.

    ``generation`` counts the writes of this process's cache up to this one (0 for an entry loaded from a state
    file): only requests that arrived at that generation or later see it.
    """

    key: str
    tokens: int
    ttl: str
    written_at: float
    expires_at: float
    hits: int = 0
    generation: int = 0

    def to_dict(self, now: float) -> dict:
        return {
            "key": self.key,
            "tokens": self.tokens,
            "ttl": self.ttl,
            "written_at": self.written_at,
            "expires_at": self.expires_at,
            "expires_in": max(0.0, self.expires_at - now),
            "hits": self.hits,
        }


@dataclass(frozen=True)
class Outcome:
    """How one request met the cache: the usage numbers and which block boundaries were touched."""

    input_tokens: int
    cache_read_input_tokens: int
    ephemeral_5m_input_tokens: int
    ephemeral_1h_input_tokens: int
    hit_index: Optional[int]
    written: Tuple[int, ...]
    below_minimum: Tuple[int, ...]

    @property
    def cache_creation_input_tokens(self) -> int:
        return self.ephemeral_5m_input_tokens + self.ephemeral_1h_input_tokens


def prefix_keys(seed: str, canonical_blocks: Sequence[str]) -> List[str]:
    """Cumulative hashes: key ``i`` covers ``seed`` and blocks ``0..i``, nothing else."""
    digest = hashlib.sha256(seed.encode("utf-8")).hexdigest()
    keys = []
    for canonical in canonical_blocks:
        digest = hashlib.sha256((digest + "\x00" + canonical).encode("utf-8")).hexdigest()
        keys.append(digest)
    return keys


def lookback_positions(block_types: Sequence[Optional[str]]) -> List[int]:
    """The lookback position of each block: one per block, but one per run of tool_use or tool_result blocks.

    The caching docs: "a run of consecutive tool_use blocks counts as one position, and so does a run
    of consecutive tool_result blocks, so a turn with many parallel tool calls doesn't push the
    previous request's entry out of the window on its own."
    """
    positions: List[int] = []
    for index, kind in enumerate(block_types):
        same_run = index > 0 and kind in RUN_TYPES and block_types[index - 1] == kind
        positions.append(positions[-1] if same_run else (positions[-1] + 1 if positions else 0))
    return positions


def cumulative(tokens: Sequence[int]) -> List[int]:
    total, out = 0, []
    for n in tokens:
        total += n
        out.append(total)
    return out


class PromptCache:
    """The entries of one emulator, every workspace's (their keys differ by seed), safe to share between threads."""

    def __init__(self) -> None:
        self._entries: Dict[str, Entry] = {}
        self._lock = threading.Lock()
        self._generation = 0

    def arrive(self) -> int:
        """Stamp a request as it arrives: :meth:`apply` with this stamp sees only entries written before it."""
        with self._lock:
            return self._generation

    def _live(self, key: str, now: float) -> Optional[Entry]:
        entry = self._entries.get(key)
        if entry is not None and now >= entry.expires_at:
            del self._entries[key]
            return None
        return entry

    def entries(self, now: float) -> List[Entry]:
        """Live entries, oldest write first."""
        with self._lock:
            for key in [k for k, e in self._entries.items() if now >= e.expires_at]:
                del self._entries[key]
            return sorted(self._entries.values(), key=lambda e: (e.written_at, e.tokens))

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()

    def to_list(self, now: float) -> List[dict]:
        """The live entries as plain data (for a state file)."""
        return [{k: v for k, v in entry.to_dict(now).items() if k != "expires_in"} for entry in self.entries(now)]

    def load(self, rows: Sequence[Mapping[str, Any]], now: float) -> None:
        """Replace the entries with saved ones, dropping the expired and the malformed."""
        entries = {}
        for row in rows:
            try:
                entry = Entry(key=str(row["key"]), tokens=int(row["tokens"]), ttl=str(row["ttl"]),
                              written_at=float(row["written_at"]), expires_at=float(row["expires_at"]),
                              hits=int(row.get("hits", 0)))
            except (KeyError, TypeError, ValueError):
                continue
            if entry.ttl in TTL_SECONDS and now < entry.expires_at:
                entries[entry.key] = entry
        with self._lock:
            self._entries = entries

    def find_hit(self, keys: Sequence[str], breakpoints: Sequence[Breakpoint], now: float,
                 positions: Optional[Sequence[int]] = None, arrived: Optional[int] = None) -> Optional[int]:
        """The highest block index with a live entry among the 20 positions of some breakpoint.

        The positions are the breakpoint's own and the 19 before it; ``positions`` gives each block's
        (:func:`lookback_positions`), one per block when omitted. With ``arrived`` (:meth:`arrive`), entries
        written after the request arrived are not there for it.
        """
        pos = list(range(len(keys))) if positions is None else positions
        hit: Optional[int] = None
        for bp in breakpoints:
            for index in range(bp.index, -1, -1):
                if pos[index] <= pos[bp.index] - LOOKBACK_BLOCKS or (hit is not None and index <= hit):
                    break
                entry = self._live(keys[index], now)
                if entry is not None and (arrived is None or entry.generation <= arrived):
                    hit = index
                    break
        return hit

    def apply(
        self,
        keys: Sequence[str],
        tokens: Sequence[int],
        breakpoints: Sequence[Breakpoint],
        min_tokens: int,
        now: float,
        positions: Optional[Sequence[int]] = None,
        arrived: Optional[int] = None,
    ) -> Outcome:
        """Serve one request: find the hit, refresh it, write entries after it, return the usage.

        ``keys`` and ``tokens`` are per block (see :func:`prefix_keys`); ``breakpoints`` are
        validated already (at most 4, sorted, no 1h after 5m); ``positions`` are the blocks'
        lookback positions (:func:`lookback_positions`); ``arrived`` the request's stamp (:meth:`arrive`).
        """
        upto = cumulative(tokens)
        total = upto[-1] if upto else 0
        with self._lock:
            hit = self.find_hit(keys, breakpoints, now, positions, arrived)
            read = upto[hit] if hit is not None else 0
            if hit is not None:
                self._refresh(keys, hit, breakpoints, now)
            after = [bp for bp in breakpoints if hit is None or bp.index > hit]
            cacheable = [bp for bp in after if upto[bp.index] >= min_tokens]
            below = tuple(bp.index for bp in after if upto[bp.index] < min_tokens)
            end = read
            write_1h = write_5m = 0
            if cacheable:
                one_hour = [bp for bp in cacheable if bp.ttl == "1h"]
                b = upto[one_hour[-1].index] if one_hour else read
                end = upto[cacheable[-1].index]
                write_1h, write_5m = b - read, end - b
                self._generation += 1
                for bp in cacheable:
                    self._entries[keys[bp.index]] = Entry(
                        key=keys[bp.index],
                        tokens=upto[bp.index],
                        ttl=bp.ttl,
                        written_at=now,
                        expires_at=now + TTL_SECONDS[bp.ttl],
                        generation=self._generation,
                    )
        return Outcome(
            input_tokens=total - end,
            cache_read_input_tokens=read,
            ephemeral_5m_input_tokens=write_5m,
            ephemeral_1h_input_tokens=write_1h,
            hit_index=hit,
            written=tuple(bp.index for bp in cacheable),
            below_minimum=below,
        )

    def _refresh(self, keys: Sequence[str], hit: int, breakpoints: Sequence[Breakpoint], now: float) -> None:
        """Restart the TTL of the hit entry and of every live entry this request's prefix reused.

        Each entry keeps the TTL it was written with, whatever this request marks (undocumented,
        so the conservative choice: a 5m entry hit by a ``1h`` marker stays a 5m entry).
        """
        marked = {bp.index for bp in breakpoints if bp.index <= hit}
        for index in marked | {hit}:
            entry = self._live(keys[index], now)
            if entry is None:
                continue
            self._entries[keys[index]] = replace(
                entry, expires_at=now + TTL_SECONDS[entry.ttl], hits=entry.hits + (index == hit)
            )
