"""How counts read in human output (JSON keeps its numbers)."""

from __future__ import annotations

from gitmem.text import plural


def test_a_count_takes_the_singular_for_one_and_the_plural_otherwise():
    assert [plural(n, "memory") for n in (0, 1, 2)] == ["0 memories", "1 memory", "2 memories"]
    assert [plural(n, "memory branch") for n in (1, 2)] == ["1 memory branch", "2 memory branches"]
    assert [plural(n, "secret") for n in (1, 3)] == ["1 secret", "3 secrets"]
    assert plural(2, "key") == "2 keys" and plural(2, "pass") == "2 passes" and plural(2, "box") == "2 boxes"
