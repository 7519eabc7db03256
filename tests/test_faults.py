"""Fault injection: killed writers, merges and pushes, stale locks, a full or read-only
disk, missing and corrupt objects. In every case each write reported as successful
is still there afterwards, and git and `gitmem doctor` accept the result."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import ROOT, git, gitmem, make_repo
from gitmem import Store

# --- helpers -----------------------------------------------------------------------


def run_py(code: str, *args: str) -> subprocess.Popen:
    """A Python process in its own process group (so SIGKILL reaches git children too)."""
    return subprocess.Popen([sys.executable, "-c", code, *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True,
                            env={**os.environ, "PYTHONPATH": str(ROOT)})


def kill_after(p: subprocess.Popen, seconds: float) -> list:
    """SIGKILL the whole process group after ``seconds``; the lines it printed before."""
    time.sleep(seconds)
    try:
        os.killpg(p.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    out, _ = p.communicate()
    # A write is acknowledged by a whole line. print() hands its pieces to a buffer that
    # reaches the pipe whenever it fills, so a kill can leave half a line ("main" without
    # its id): that write was never acknowledged.
    complete = out[: out.rfind("\n") + 1]
    return [line.split() for line in complete.splitlines() if line.strip()]


def assert_intact(path, branch: str = "main") -> None:
    git(path, "fsck", "--strict", "--no-dangling")
    result = gitmem(path, "--branch", branch, "doctor", "--json", check=False)
    assert json.loads(result.stdout)["ok"], result.stdout
    assert "Traceback" not in result.stderr


def assert_clean_failure(result: subprocess.CompletedProcess, *words: str) -> None:
    """Exit 1 with one `Error:` line naming the problem, never a traceback."""
    assert result.returncode == 1, (result.stdout, result.stderr)
    assert "Traceback" not in result.stderr, result.stderr
    assert result.stderr.startswith("Error: ") and len(result.stderr.strip().splitlines()) == 1, result.stderr
    for word in words:
        assert word in result.stderr, result.stderr


def tip(path, ref: str = "refs/memory/main") -> str:
    return git(path, "rev-parse", "--verify", "--quiet", ref, check=False).strip()


def loose_object(path: Path, oid: str) -> Path:
    return path / ".git" / "objects" / oid[:2] / oid[2:]


# --- SIGKILL at random points ----------------------------------------------------------

MIXED_WRITER = """
import random, sys
from gitmem import Store
store = Store.open(sys.argv[1])
rng = random.Random(int(sys.argv[2]))
live = []
for i in range(100000):
    op = rng.choice(["add", "add", "edit", "supersede", "retract"]) if live else "add"
    if op == "add":
        w = store.add("fact", f"fact {sys.argv[2]}-{i}", source="test")
        live.append(w.memory.id)
        print("add", w.memory.id, flush=True)
    elif op == "edit":
        target = rng.choice(live)
        store.edit(target, text=f"edited {i}", source="test")
        print("edit", target, i, flush=True)
    elif op == "supersede":
        old = live.pop(rng.randrange(len(live)))
        w = store.supersede(old, f"replacement {i}", source="test")
        live.append(w.memory.id)
        print("supersede", old, w.memory.id, flush=True)
    else:
        old = live.pop(rng.randrange(len(live)))
        store.retract(old, reason="no longer true", source="test")
        print("retract", old, flush=True)
"""


def test_a_writer_killed_during_adds_edits_supersedes_and_retracts_loses_nothing_reported(repo):
    rng = random.Random(11)
    reported = []
    for round_ in range(6):
        reported += kill_after(run_py(MIXED_WRITER, str(repo), str(round_)), rng.uniform(0.5, 1.5))
    assert len(reported) > 10, "the writer never got going"
    assert_intact(repo)
    stored = Store.open(str(repo)).memories()
    edited = {}
    for op, *rest in reported:
        if op == "add":
            assert rest[0] in stored
        elif op == "edit":
            edited[rest[0]] = int(rest[1])
        elif op == "supersede":
            assert stored[rest[0]].status == "superseded" and stored[rest[0]].superseded_by == rest[1]
            assert stored[rest[1]].supersedes == rest[0]
        else:
            assert stored[rest[0]].status == "retracted"
    # The last reported edit of each memory is stored, or a later one whose acknowledgement the
    # kill cut off (the write landed, its line was never printed whole): never an earlier one.
    for memory_id, last in edited.items():
        assert stored[memory_id].text.startswith("edited ") and int(stored[memory_id].text[7:]) >= last


FIRST_WRITER = """
import os, sys, time
from gitmem import Store
while not os.path.exists(sys.argv[2]):
    time.sleep(0.001)
for b in range(int(sys.argv[3])):
    w = Store.open(sys.argv[1], branch=f"race{b}").add("fact", f"first write {sys.argv[4]}", source="test")
    print(f"race{b}", w.memory.id, flush=True)
"""


def test_first_writes_racing_to_create_a_branch_memory_ref_all_land(repo, tmp_path):
    """libgit2 checks a non-forced ref create before taking the lock; the store must not rely on it."""
    go = tmp_path / "go"
    procs = [run_py(FIRST_WRITER, str(repo), str(go), "12", str(n)) for n in range(8)]
    time.sleep(1.0)  # let every process import and wait at the line
    go.touch()
    reported = []
    for p in procs:
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
        reported += [line.split() for line in out.splitlines()]
    assert len(reported) == 8 * 12
    for b in range(12):
        stored = Store.open(str(repo), branch=f"race{b}").memories()
        assert {i for branch, i in reported if branch == f"race{b}"} == set(stored)
        assert len(git(repo, "rev-list", f"refs/memory/race{b}").split()) == 8
    git(repo, "fsck", "--strict", "--no-dangling")


MERGER = """
import sys
from gitmem import Store
from gitmem.merge import merge_into
main = Store.open(sys.argv[1], branch="main")
side = Store.open(sys.argv[1], branch="side")
for i in range(100000):
    ours = main.add("fact", f"main {sys.argv[2]}-{i}", source="test")
    print("main", ours.memory.id, flush=True)
    theirs = side.add("fact", f"side {sys.argv[2]}-{i}", source="test")
    print("side", theirs.memory.id, flush=True)
    merge_into(main, side.own_tip(), source="test")
    print("merged", theirs.memory.id, flush=True)
"""


def test_a_merge_killed_at_random_points_leaves_both_refs_valid_and_complete(repo):
    rng = random.Random(5)
    reported = []
    for round_ in range(6):
        reported += kill_after(run_py(MERGER, str(repo), str(round_)), rng.uniform(0.6, 1.6))
    assert any(op == "merged" for op, _ in reported), "no merge completed before the kills"
    assert_intact(repo, "main")
    assert_intact(repo, "side")
    on_main = Store.open(str(repo), branch="main").memories()
    on_side = Store.open(str(repo), branch="side").memories()
    for op, memory_id in reported:
        assert memory_id in (on_side if op == "side" else on_main), (op, memory_id)
    assert len(git(repo, "rev-list", "--merges", "refs/memory/main").split()) >= 1


PUSHER = """
import sys
from gitmem import Store
from gitmem.remote import push
store = Store.open(sys.argv[1])
for i in range(100000):
    w = store.add("fact", f"pushed {sys.argv[2]}-{i}", source="test")
    print("added", w.memory.id, flush=True)
    [result] = push(store, "origin", interactive=False)
    assert result.status == "pushed", result
    print("pushed", w.memory.id, flush=True)
"""


def test_a_push_killed_at_random_points_leaves_local_and_remote_valid(tmp_path):
    bare = tmp_path / "remote.git"
    git(tmp_path, "init", "-q", "--bare", str(bare))
    clone = make_repo(tmp_path / "clone")
    git(clone, "remote", "add", "origin", str(bare))
    rng = random.Random(3)
    reported = []
    for round_ in range(6):
        reported += kill_after(run_py(PUSHER, str(clone), str(round_)), rng.uniform(0.8, 2.0))
        lock = bare / "refs" / "memory" / "main.lock"
        if lock.exists():  # a killed receive-pack leaves its lock: git's own rule, not gitmem's
            lock.unlink()
    assert any(op == "pushed" for op, _ in reported), "no push completed before the kills"
    assert_intact(clone)
    git(bare, "fsck", "--strict", "--no-dangling")
    local = Store.open(str(clone)).memories()
    remote = Store(Store.open(str(bare)).repo, "main").memories()
    for op, memory_id in reported:
        assert memory_id in local
        if op == "pushed":
            assert memory_id in remote
    gitmem(clone, "push")  # the next push catches up
    assert set(Store(Store.open(str(bare)).repo, "main").memories()) == set(local)


# --- stale locks ---------------------------------------------------------------------

HOLDER = """
import sys, time
f = open(sys.argv[1], "w")  # as git and libgit2 do: the lock stays open until renamed
print("holding", flush=True)
time.sleep(600)
"""


def lock_path(repo) -> Path:
    return Path(repo) / ".git" / "refs" / "memory" / "main.lock"


def hold_lock(repo) -> subprocess.Popen:
    p = run_py(HOLDER, str(lock_path(repo)))
    assert p.stdout.readline().strip() == "holding"
    return p


def backdate(path: Path, seconds: float = 120) -> None:
    old = time.time() - seconds
    os.utime(path, (old, old))


def test_a_write_on_a_locked_ref_gives_up_after_a_bounded_wait_with_a_clear_message(repo, monkeypatch):
    from gitmem import refs

    monkeypatch.setattr(refs, "STALE_LOCK_SECONDS", 1.0)  # the same bound, shorter (the CLI runs in-process)
    first = json.loads(gitmem(repo, "add", "fact", "before the lock", "--json").stdout)["id"]
    before = tip(repo)
    holder = hold_lock(repo)  # a live owner: never taken over (a dead one's is, see test_trust)
    try:
        backdate(lock_path(repo))
        result = gitmem(repo, "add", "fact", "blocked by the lock", check=False)
    finally:
        os.killpg(holder.pid, signal.SIGKILL)
        holder.communicate()
    assert_clean_failure(result, "refs/memory/main is locked", "main.lock", f"held open by pid {holder.pid}")
    assert tip(repo) == before
    lock_path(repo).unlink()
    assert set(Store.open(str(repo)).memories()) == {first}


def test_doctor_fix_keeps_a_lock_whose_owner_is_alive_and_removes_it_once_the_owner_is_dead(repo):
    first = json.loads(gitmem(repo, "add", "fact", "written before", "--json").stdout)["id"]
    holder = hold_lock(repo)
    try:
        backdate(lock_path(repo))
        report = json.loads(gitmem(repo, "doctor", "--json", check=False).stdout)
        [warning] = [p for p in report["problems"] if p["where"].endswith("main.lock")]
        assert f"held open by pid {holder.pid}" in warning["message"]
        result = gitmem(repo, "doctor", "--fix", check=False)
        assert_clean_failure(result, f"held open by pid {holder.pid}")
        assert lock_path(repo).exists()
    finally:
        os.killpg(holder.pid, signal.SIGKILL)
        holder.communicate()
    assert lock_path(repo).exists(), "a dead process leaves its lock behind"
    result = gitmem(repo, "doctor", "--fix")
    assert "removed stale lock" in result.stdout and not lock_path(repo).exists()
    second = json.loads(gitmem(repo, "add", "fact", "written after", "--json").stdout)["id"]
    assert set(Store.open(str(repo)).memories()) == {first, second}
    assert_intact(repo)


def test_doctor_fix_leaves_a_fresh_lock_alone_because_a_write_may_be_in_progress(repo):
    gitmem(repo, "add", "fact", "something")
    lock_path(repo).touch()
    result = gitmem(repo, "doctor", "--fix", check=False)
    assert_clean_failure(result, "a write may be in progress")
    assert lock_path(repo).exists()


def test_doctor_without_fix_reports_a_stale_lock_and_changes_nothing(repo):
    gitmem(repo, "add", "fact", "something")
    lock_path(repo).touch()
    backdate(lock_path(repo))
    result = gitmem(repo, "doctor")
    assert "stale lock file" in result.stdout and "doctor --fix" in result.stdout
    assert lock_path(repo).exists()


# --- full disk and read-only repository (a real small tmpfs) ------------------------------


@pytest.fixture
def tmpfs(tmp_path):
    """A 4 MiB tmpfs of its own; needs root (permissions alone do not stop root)."""
    mount = tmp_path / "fs"
    mount.mkdir()
    if os.geteuid() != 0:
        pytest.skip("needs root to mount a tmpfs (as a non-root user chmod would do, but root ignores it)")
    result = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(mount)],
                            capture_output=True, text=True)
    if result.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {result.stderr.strip()}")
    yield mount
    subprocess.run(["umount", "-l", str(mount)], check=False)


def no_temp_objects(repo: Path) -> bool:
    objects = repo / ".git" / "objects"
    return not [p for p in objects.rglob("*") if p.is_file() and "tmp" in p.name]


def test_a_read_only_repository_refuses_writes_cleanly_and_keeps_what_was_written(tmpfs):
    repo = make_repo(tmpfs / "repo")
    written = [json.loads(gitmem(repo, "add", "fact", f"fact {i}", "--json").stdout)["id"] for i in range(3)]
    before = tip(repo)
    subprocess.run(["mount", "-o", "remount,ro", str(tmpfs)], check=True)
    try:
        result = gitmem(repo, "add", "fact", "cannot be written", check=False)
        assert_clean_failure(result, "could not write memory objects", "Read-only file system")
        assert tip(repo) == before
        listed = json.loads(gitmem(repo, "list", "--json").stdout)["memories"]  # reads still work
        assert [m["id"] for m in listed] == written
    finally:
        subprocess.run(["mount", "-o", "remount,rw", str(tmpfs)], check=True)
    assert_intact(repo)
    assert set(Store.open(str(repo)).memories()) == set(written)


def test_a_full_disk_fails_the_write_cleanly_with_nothing_half_written(tmpfs):
    repo = make_repo(tmpfs / "repo")
    written = [json.loads(gitmem(repo, "add", "fact", f"fact {i}", "--json").stdout)["id"] for i in range(3)]
    before = tip(repo)
    filler = tmpfs / "filler"
    with open(filler, "wb", buffering=0) as f:  # unbuffered: a short last write leaves nothing for close to flush
        try:
            while True:
                f.write(b"\0" * 65536)
        except OSError:
            pass
    for i in range(3):  # every write fails the same way; none leaves debris
        result = gitmem(repo, "add", "fact", f"no room {i} " + "x" * 4000, check=False)
        assert_clean_failure(result, "could not write memory objects", "No space left on device")
    assert tip(repo) == before
    assert no_temp_objects(repo)
    filler.unlink()
    written.append(json.loads(gitmem(repo, "add", "fact", "room again", "--json").stdout)["id"])
    assert_intact(repo)
    assert set(Store.open(str(repo)).memories()) == set(written)


# --- missing and corrupt objects ----------------------------------------------------------


def five_writes(repo):
    """Five adds through the CLI: [(memory id, commit, blob id)]."""
    out = []
    for i in range(5):
        w = json.loads(gitmem(repo, "add", "fact", f"fact number {i}", "--json").stdout)
        path = f"fact/{w['id'][-2]}/{w['id'][-1]}/{w['id']}.yaml"
        out.append((w["id"], w["commit"], git(repo, "rev-parse", f"{w['commit']}:{path}").strip(), path))
    return out


def test_a_missing_blob_is_found_and_recovery_keeps_every_readable_memory(repo):
    writes = five_writes(repo)
    lost_id, _, lost_blob, lost_path = writes[2]
    loose_object(repo, lost_blob).unlink()

    report = gitmem(repo, "doctor", "--json", check=False)
    assert report.returncode == 1 and "Traceback" not in report.stderr
    [problem] = [p for p in json.loads(report.stdout)["problems"] if p["level"] == "error"]
    assert f"object {lost_blob} is missing" in problem["message"]
    assert writes[1][1][:10] in problem["message"] and "doctor --recover" in problem["message"]
    assert tip(repo) == writes[-1][1], "doctor changes nothing without --recover"

    recovered = json.loads(gitmem(repo, "doctor", "--recover", "--json").stdout)
    assert recovered["ok"]
    r = recovered["recovered"]
    assert (r["damaged"], r["good"]) == (writes[-1][1], writes[1][1])
    assert r["lost"] == [lost_path]
    assert sorted(r["kept"]) == sorted(w[3] for w in writes[3:])
    assert set(Store.open(str(repo)).memories()) == {w[0] for w in writes} - {lost_id}
    git(repo, "fsck", "--strict", "--no-dangling", "--no-reflogs")  # the reflog keeps the damaged tips
    assert "recover" in git(repo, "log", "-1", "--format=%B", "refs/memory/main")


def test_a_corrupt_tip_commit_is_found_and_recovery_returns_to_the_one_before(repo):
    writes = five_writes(repo)
    damaged = loose_object(repo, writes[-1][1])
    damaged.chmod(0o644)
    damaged.write_bytes(b"x\x9c not a zlib stream at all")

    report = gitmem(repo, "doctor", check=False)
    assert report.returncode == 1 and "Traceback" not in report.stderr
    assert "history is damaged" in report.stdout and writes[-2][1][:10] in report.stdout
    listed = gitmem(repo, "list", check=False)
    assert_clean_failure(listed)

    result = gitmem(repo, "doctor", "--recover")
    assert "lost (unreadable): /" in result.stdout
    assert tip(repo) == writes[-2][1]
    assert set(Store.open(str(repo)).memories()) == {w[0] for w in writes[:4]}
    gitmem(repo, "add", "fact", "life goes on")
    assert json.loads(gitmem(repo, "doctor", "--json").stdout)["ok"]


def test_a_truncated_loose_blob_is_an_error_not_a_hang_and_recovery_keeps_the_rest(repo):
    # libgit2 1.9 inflates a loose object whose zlib stream ends early forever (libgit2#7342)
    writes = five_writes(repo)
    lost_id, _, lost_blob, lost_path = writes[2]
    cut = loose_object(repo, lost_blob)
    cut.chmod(0o644)
    cut.write_bytes(cut.read_bytes()[:20])

    for command in (["list"], ["show", lost_id], ["search", "fact"], ["log"]):
        assert_clean_failure(gitmem(repo, *command, check=False, timeout=60), lost_blob, "truncated")
    report = gitmem(repo, "doctor", "--json", check=False, timeout=60)
    [problem] = [p for p in json.loads(report.stdout)["problems"] if p["level"] == "error"]
    assert f"object {lost_blob} is unreadable" in problem["message"] and "truncated" in problem["message"]

    recovered = json.loads(gitmem(repo, "doctor", "--recover", "--json", timeout=60).stdout)
    assert recovered["recovered"]["lost"] == [lost_path]
    assert set(Store.open(str(repo)).memories()) == {w[0] for w in writes} - {lost_id}
    assert json.loads(gitmem(repo, "doctor", "--json", timeout=60).stdout)["ok"]


def test_recover_refuses_when_history_is_intact(repo):
    five_writes(repo)
    before = tip(repo)
    assert_clean_failure(gitmem(repo, "doctor", "--recover", check=False), "nothing to recover")
    assert tip(repo) == before
