"""Many writers at once, and writers killed mid-write: nothing reported as written is lost."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time

from conftest import ROOT, git, gitmem
from gitmem import Store

WRITER = """
import sys
from gitmem import Store
store = Store.open(sys.argv[1])
for i in range(int(sys.argv[3])):
    w = store.add("fact", f"writer {sys.argv[2]} fact {i}", source="test")
    print(w.memory.id, flush=True)
"""


def spawn(repo, name, count):
    return subprocess.Popen([sys.executable, "-c", WRITER, str(repo), name, str(count)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": str(ROOT)})


def test_eight_processes_times_fifty_adds_lose_nothing(repo):
    procs = [spawn(repo, str(n), 50) for n in range(8)]
    reported = []
    for p in procs:
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0, err
        reported += out.split()
    assert len(reported) == 400
    stored = Store.open(str(repo)).memories()
    assert set(stored) == set(reported)
    assert len(git(repo, "rev-list", "refs/memory/main").split()) == 400
    git(repo, "fsck", "--strict", "--no-dangling")


def test_writer_killed_at_random_points_leaves_a_valid_ref(repo):
    rng = random.Random(7)
    reported = []
    for round_ in range(6):
        p = spawn(repo, f"k{round_}", 1000)
        first = p.stdout.readline()  # the writer is writing (start-up time is not what this tests)
        time.sleep(rng.uniform(0.0, 0.8))
        p.send_signal(signal.SIGKILL)
        out, _ = p.communicate()
        reported += (first + out).split()  # ids printed only after the ref moved
    assert reported, "the writers never got to write"
    git(repo, "fsck", "--strict", "--no-dangling")
    doctor = json.loads(gitmem(repo, "doctor", "--json", check=False).stdout)
    assert doctor["ok"], doctor
    stored = Store.open(str(repo)).memories()
    assert set(reported) <= set(stored)
