"""The memory model: validation names the problem, YAML round-trips safely."""

from __future__ import annotations

import random
import time

import pytest
import yaml

from gitmem.errors import InvalidMemory
from gitmem.model import (
    ID_RE, MAX_TEXT_BYTES, TYPES, Author, Memory, check_path, dump_yaml, load_yaml, matches, matching_ids, memory_path,
    new_id, normalize_id, short_ids, validate,
)


def mem(**kw) -> Memory:
    base = dict(id=new_id(), type="decision", text="Use pygit2", author=Author("A", "a@x", "human"),
                source="cli", created="2026-12-02T10:00:00Z")
    base.update(kw)
    return Memory(**base)


def test_ids_are_short_unique_and_sort_by_time():
    ids = [new_id(now_ms=1_700_000_000_000 + i) for i in range(200)]
    assert all(ID_RE.match(i) for i in ids)
    assert ids == sorted(ids)
    assert len(set(new_id(now_ms=5) for _ in range(1000))) == 1000


def test_short_ids_are_unique_and_short_among_100000_ids_written_within_one_second(monkeypatch):
    start = 1_800_000_000_000
    # Random tails, one second: drawn without repeats, as 50 ids a millisecond with 30 random bits collide once
    # in about a thousand runs (this test failed so in CI), and two clones' equal ids are not what it is about.
    tails = random.Random(7).sample(range(2**30), 50_000)
    on_many_clones = [new_id(now_ms=start + n % 1000, tail=t) for n, t in enumerate(tails)]
    # Same-millisecond ids: consecutive tails. The clock stands still, as on a fast machine: on a loaded one the
    # 50,000 spread over many milliseconds, each a fresh random tail, and more short forms clashed (98,916 < 99,000).
    now = time.time()  # not a time to come: the process's last id would hold later tests' ids to it
    monkeypatch.setattr(time, "time", lambda: now)
    in_one_process = [new_id() for _ in range(50_000)]
    ids = on_many_clones + in_one_process
    assert len(set(ids)) == 100_000
    short = short_ids(ids)
    assert len(set(short.values())) == 100_000
    by_length: dict = {}
    for i, s in short.items():
        assert len(s) >= 4 and i.endswith(s)
        by_length.setdefault(len(s), []).append(s)
    for length, forms in by_length.items():  # no other id ends with a short form: it names its id alone
        tails = {}
        for i in ids:
            tails[i[-length:]] = tails.get(i[-length:], 0) + 1
        assert all(tails[f] == 1 for f in forms)
    assert sum(len(v) for k, v in by_length.items() if k <= 5) >= 99_000  # ids written together share 8+ leading chars


def test_a_short_id_resolves_to_its_id_whatever_the_case():
    ids = [new_id(now_ms=1_800_000_000_000) for _ in range(50)]
    short = short_ids(ids)
    for i in ids:
        assert matching_ids(short[i], ids) == [i]
        assert matching_ids(short[i].upper(), ids) == [i]
        assert matching_ids(i.upper(), ids) == [i]
    assert matching_ids(ids[0][:12], ids) == sorted(x for x in ids if x.startswith(ids[0][:12]))  # prefixes still work
    assert normalize_id("0M-J3K-IL-O") == "0mj3k110"  # Crockford: i and l read as 1, o as 0, hyphens ignored


@pytest.mark.parametrize("type_", TYPES)
def test_every_type_round_trips_through_yaml(type_):
    extra = {"reason": "too slow"} if type_ == "rejection" else {}
    if type_ == "file":
        extra["paths"] = ("src/app.py",)
    m = mem(type=type_, text="line one\nline two", tags=("a", "b"), **extra)
    data = dump_yaml(m)
    assert load_yaml(data) == m
    parsed = yaml.safe_load(data)
    assert list(parsed)[:3] == ["schema", "id", "type"]
    assert parsed["author"] == {"name": "A", "email": "a@x", "kind": "human"}
    assert "text: |" in data.decode()  # multi-line text is a readable block


@pytest.mark.parametrize("change, field", [
    ({"type": "idea"}, "type"),
    ({"text": "   "}, "text"),
    ({"text": "x" * (MAX_TEXT_BYTES + 1)}, "text"),
    ({"text": "bad \udcff utf-8"}, "text"),
    ({"type": "rejection"}, "reason"),
    ({"status": "deleted"}, "status"),
    ({"paths": ("../etc/passwd",)}, "paths"),
    ({"paths": ("/abs",)}, "paths"),
    ({"tags": ("has space",)}, "tags"),
    ({"author": Author("A", "a@x", "robot")}, "author.kind"),
    ({"id": "../../x"}, "id"),
    ({"source": "bad\nsource"}, "source"),
    ({"type": "file"}, "paths"),
])
def test_invalid_memories_name_the_problem(change, field):
    with pytest.raises(InvalidMemory) as err:
        validate(mem(**change))
    assert err.value.field == field


def test_blobs_of_one_author_share_it_and_a_bad_author_is_refused_every_time():
    """A store's memories share a few authors: one object each, checked once; what is refused stays refused."""
    first, second = load_yaml(dump_yaml(mem(text="one"))), load_yaml(dump_yaml(mem(text="two")))
    assert first.author is second.author and first.author == Author("A", "a@x", "human")
    for _ in range(2):
        with pytest.raises(InvalidMemory) as err:
            load_yaml(dump_yaml(mem(author=Author("A <a@x>", "a@x", "human"))))
        assert err.value.field == "author"
        with pytest.raises(InvalidMemory) as err:
            validate(mem(author=Author("A", "a@x", "robot")))
        assert err.value.field == "author.kind"
    data = yaml.safe_load(dump_yaml(mem()))
    data["author"]["name"] = ["not", "text"]  # unhashable: named, not a TypeError
    with pytest.raises(InvalidMemory, match="author.name"):
        Memory.from_dict(data)


def test_unknown_type_error_lists_the_valid_choices():
    with pytest.raises(InvalidMemory, match="valid: decision, rejection"):
        validate(mem(type="idea"))


@pytest.mark.parametrize("blob, problem", [
    (b"\xff\xfe", "UTF-8"),
    (b"a: [unclosed", "YAML"),
    (b"!!python/object:os.system {}", "YAML"),
    (b"- a list\n", "mapping"),
    (b"x" * 70000, "limit"),
])
def test_load_rejects_hostile_or_broken_blobs(blob, problem):
    with pytest.raises(InvalidMemory, match=problem):
        load_yaml(blob)


def test_a_key_written_twice_is_refused_so_a_reviewer_reads_what_gitmem_reads():
    """PyYAML keeps a repeated key's last value: a planted blob could show one text in review and mean another."""
    lines = dump_yaml(mem(text="Keep the queue in Postgres")).decode().splitlines(keepends=True)
    planted = "".join(lines + ["text: Move the queue to Redis\n"]).encode()
    with pytest.raises(InvalidMemory, match="duplicate key 'text'"):
        load_yaml(planted)
    twice = "".join(line + ("  name: Someone Else\n" if line.startswith("  name:") else "") for line in lines)
    with pytest.raises(InvalidMemory, match="duplicate key 'name'"):  # in a nested mapping too
        load_yaml(twice.encode())


def test_load_rejects_wrong_field_types():
    good = yaml.safe_load(dump_yaml(mem()))
    good["tags"] = "not-a-list"
    with pytest.raises(InvalidMemory, match="tags"):
        Memory.from_dict(good)


def test_paths_are_normalised_and_kept_inside():
    assert check_path("./src//app.py") == "src/app.py"
    for bad in ("..", "a/../../b", "/etc", "C:/x", "a\x00b", ""):
        with pytest.raises(InvalidMemory):
            check_path(bad)


def test_a_new_path_names_a_work_tree_file_yet_a_stored_one_in_git_still_validates():
    from gitmem.model import check_new_path, validate

    assert check_new_path("./src//.gitignore") == "src/.gitignore"
    for bad in (".git/config", "sub/.Git/HEAD", ".git"):
        with pytest.raises(InvalidMemory, match="inside .git"):
            check_new_path(bad)
    validate(mem(paths=(".git/config",)))  # written before new paths were held to it: still loads


def test_a_path_filter_is_read_as_a_stored_path_is_written():
    m = mem(paths=("src/pay/refunds.py",))
    for typed in ("src/pay/refunds.py", "./src/pay/refunds.py", "src//pay/", "src/./pay", "./src", "src\\pay"):
        assert matches(m, path=typed), typed
    for typed in ("../src/pay/refunds.py", "/src/pay", "src/../../src", "", "src/pa"):  # outside, absolute: nothing
        assert not matches(m, path=typed), typed


def test_layout_fans_out_on_the_random_tail():
    m = mem()
    assert memory_path(m) == f"decision/{m.id[-2]}/{m.id[-1]}/{m.id}.yaml"


def test_ids_made_in_one_process_sort_in_the_order_they_were_made():
    from gitmem.model import new_id

    ids = [new_id() for _ in range(5000)]  # many share a millisecond
    assert ids == sorted(ids) and len(set(ids)) == len(ids)


def test_since_takes_dates_and_ages():
    from gitmem.model import parse_since

    now = 1_800_000_000
    assert parse_since("3d", now) == now - 3 * 86400
    assert parse_since("2 hours ago", now) == now - 7200
    assert parse_since("1w", now) == now - 7 * 86400
    assert parse_since("2026-12-01", now) == 1796083200
    assert parse_since("2026-12-01T10:00Z", now) == 1796083200 + 36000
    with pytest.raises(ValueError):
        parse_since("yesterday-ish", now)


# --- gitmem's own YAML, read without the YAML machinery ----------------------------------

from hypothesis import HealthCheck, assume, example, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from gitmem.model import load_own_yaml, safe_load  # noqa: E402

# Words and characters that mean something to YAML, mixed with ordinary text in any script.
_TRICKY = st.sampled_from(["yes", "No", "null", "~", "0x1f", "0b11", "012", "1.5", "1e3", "12:30", "2026-12-04",
                           ": ", " #", "#", "'", "''", '"', "- ", "|", ">", "&a", "*a", "!tag", "%", "@", "`", "{",
                           "[", "]", ",", "?", "\t", "\n", "\n\n", "  ", " ", "\r", "\x85", "\u2028", "\ufeff",
                           "é", "日本", "Ω", "ſ", "-", ".", "x"])
_TEXT = st.lists(_TRICKY | st.text(min_size=1, max_size=6), min_size=1, max_size=10).map("".join)


def _safe(text):
    try:
        return safe_load(text)
    except yaml.YAMLError:
        return "unreadable"


#: Texts past the dumper's width of 100, which it wraps over lines (at single spaces only).
_LONG = st.lists(_TRICKY | st.text(min_size=1, max_size=12), min_size=12, max_size=40).map(" ".join)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=_TEXT | _LONG, title=st.none() | _TEXT, tags=st.lists(_TEXT, max_size=2), reason=st.none() | _LONG)
def test_gitmem_yaml_read_directly_reads_as_the_safe_loader_reads_it(text, title, tags, reason):
    try:
        stored = dump_yaml(mem(text=text, title=title, tags=tuple(tags), reason=reason)).decode("utf-8")
    except InvalidMemory:
        assume(False)
    fast = load_own_yaml(stored)
    assert fast is None or fast == _safe(stored)


_ATOMS = ["yes", "No", "null", "~", "0x1f", "0b11", "012", "123", "1.5", "1e3", "12:30", "2026-12-04", "01k742shdetr2700",
          "word", "two words", "a: b", "a:b", "a #b", "a#b", "end:", "x'y", "'", "''", "it''s", '"q"', "- x", "|", ">",
          "&a", "*a", "!t", "%", "@a", "`", "{a}", "[a]", "a,b", "?", "\t", " ", "  lead", "trail ", "é", "日本", "ſ",
          "\x85", "\u2028", "\ufeff", "\x00", ".", "-", "x"]
_VALUE = st.sampled_from(_ATOMS) | st.lists(st.sampled_from(_ATOMS) | st.text(max_size=3), max_size=4).map("".join)


@st.composite
def _documents(draw):
    """Documents shaped like gitmem's YAML, in every form the direct reader accepts or refuses."""
    lines = []
    for key in draw(st.lists(st.sampled_from(["schema", "id", "text", "tags", "author", "source", "x_y"]), max_size=3)):
        form = draw(st.sampled_from(["plain", "quoted", "list", "author", "block", "bare", "wrapped"]))
        value = draw(_VALUE)
        if form == "plain":
            lines.append(f"{key}: {value}")
        elif form == "wrapped":  # a long scalar over lines, as the dumper wraps one, and shapes near it
            quote = draw(st.sampled_from(["", "'"]))
            lines.append(f"{key}: {quote}{value}" + draw(st.sampled_from(["", " ", "\t"])))
            for part in draw(st.lists(_VALUE, min_size=1, max_size=3)):
                lines.append(draw(st.sampled_from(["  ", "  ", "   ", " ", "", "  \t"])) + part
                             + draw(st.sampled_from(["", "", " "])))
            lines[-1] += quote
        elif form == "quoted":
            lines.append(f"{key}: '" + value.replace("'", draw(st.sampled_from(["''", "'"]))) + "'")
        elif form == "list":
            lines += [f"{key}:"] + [f"- {item}" for item in draw(st.lists(_VALUE, max_size=3))]
        elif form == "author":
            pairs = draw(st.lists(st.tuples(st.sampled_from(["name", "email", "kind"]), _VALUE), max_size=3))
            lines += [f"{key}:"] + [f"  {k}: {v}" for k, v in pairs]
        elif form == "block":
            lines.append(f"{key}: " + draw(st.sampled_from(["|", "|-", "|+", "|2-", ">"])))
            lines += [" " * draw(st.integers(0, 3)) + v for v in draw(st.lists(_VALUE, max_size=3))]
        else:
            lines.append(f"{key}:")
    return "\n".join(lines) + draw(st.sampled_from(["\n", "", "\n\n"]))


@settings(max_examples=1000, deadline=None)
@given(_documents())
@example("text: 'x'y'\n")
@example("id: 0x1f\ntags:\n- 0b11\n")
@example("tags:\n- yes\n- null\n")
@example("source: a: b\n")
@example("source: a #b\n")
@example("text: |2-\n   x\n")
@example("text: |-\n  a\n b\n")
@example("author:\n  name: x\n  name: y\n")
@example("schema: 012\n")
@example("text: 'a\n  b'\n")
@example("text: a\n  b\n")
@example("text: a\n  #b\n")
@example("text: a\n  - b\n")
@example("text: 'a \n  b'\n")
@example("text: 'a\n   b'\n")
@example("text: 'a\n\n  b'\n")
@example("text: 'it''\n  s'\n")
@example("text: 'a\n  b'\n  c\n")
@example("text: \n  b\n")
def test_a_blob_written_by_hand_is_read_directly_only_as_the_safe_loader_reads_it(document):
    fast = load_own_yaml(document)
    assert fast is None or fast == _safe(document)


def test_what_gitmem_writes_is_read_directly():
    """The fast path must apply to ordinary memories, or a cold start pays the full YAML cost."""
    for m in (mem(text="Queue jobs in Postgres with SKIP LOCKED", tags=("queue",), paths=("src/jobs.py",)),
              mem(type="rejection", text="Use Redis for the job queue", reason="ops won't run it: no new services"),
              mem(type="checkpoint", text="queue done\n\nnext: retries with backoff", next="add retries"),
              # Longer than the dumper's width, so wrapped over lines: quoted (": " in it) and plain.
              mem(type="rejection", text="Use MongoDB for orders: it was proposed for the flexible schema of the "
                  "order documents that the partners send us", reason="We need multi-document transactions for "
                  "refunds and the team has no experience running it at our scale, nor the time to learn it now"),
              mem(text="We keep the orders in Postgres because the team knows it well and it carries the transactional "
                  "load of checkout and refunds and invoices without a second store to run")):
        stored = dump_yaml(m).decode("utf-8")
        assert load_own_yaml(stored) == safe_load(stored)


def test_a_text_only_its_redaction_makes_too_long_says_so(repo):
    """A placeholder can be longer than the secret it replaces: a text under the limit as given, over it
    once redacted, is refused with the reason, not with a size the user never wrote."""
    from gitmem import Store
    from gitmem.model import MAX_TEXT_BYTES

    line = "DB_PASSWORD=Sup3rFAKEVTJlvf!\n"
    text = line * (MAX_TEXT_BYTES // len(line) - 1)
    assert len(text.encode()) < MAX_TEXT_BYTES
    with pytest.raises(InvalidMemory, match=r"over the \d+-byte limit, once \d+ secrets? in it had been redacted"):
        Store.open(str(repo)).add("fact", text)


def test_a_summary_is_the_first_line_cut_at_a_newline_only():
    assert mem(text="first line\r\nsecond").summary == "first line"
    assert mem(text="tab\there \u2028 and the rest").summary == "tab\there \u2028 and the rest"
    assert mem(text="carriage\rreturn, then more").summary == "carriage\rreturn, then more"
    assert mem(text="x" * 100).summary == "x" * 69 + "..."
    assert mem(text="  \n  indented second\n", title=None).summary == "indented second"
