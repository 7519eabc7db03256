"""How counts read in human output (JSON keeps its numbers), and JSON output a terminal only shows."""

from __future__ import annotations

import json

from gitmem.text import inert_json, plural


def test_a_count_takes_the_singular_for_one_and_the_plural_otherwise():
    assert [plural(n, "memory") for n in (0, 1, 2)] == ["0 memories", "1 memory", "2 memories"]
    assert [plural(n, "memory branch") for n in (1, 2)] == ["1 memory branch", "2 memory branches"]
    assert [plural(n, "secret") for n in (1, 3)] == ["1 secret", "3 secrets"]
    assert plural(2, "key") == "2 keys" and plural(2, "pass") == "2 passes" and plural(2, "box") == "2 boxes"


def test_json_escapes_every_control_a_terminal_acts_on_and_gives_back_the_exact_text():
    controls = [chr(c) for c in (*range(0x20), *range(0x7f, 0xa0), 0x61c, 0x200e, 0x200f, *range(0x2028, 0x202f),
                                 *range(0x2066, 0x206a))]
    for c in controls:
        out = inert_json({"text": f"a{c}b", c: [c]}, indent=2)
        assert out.isascii() and json.loads(out) == {"text": f"a{c}b", c: [c]}, repr(c)
    readable = "café 東京 🚀 مرحبا"
    assert inert_json(readable) == f'"{readable}"'
