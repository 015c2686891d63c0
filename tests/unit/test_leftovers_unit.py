"""Containers a killed run left on the engine are removed by the next run, and only those.

Against the shared engine: containers labelled like the smoke containers of a run, owned by a
process that has ended, by this (running) process, and by another running process; the next
`reclaim` removes only the first. End to end, a nightly killed (SIGKILL) during its smoke test
leaves its smoke container running; the next nightly removes it.

Here: the tests that need no engine or registry; those that do are in tests/integration/test_leftovers.py.
"""

from __future__ import annotations

import subprocess
import sys


from accel_images.builder.leftovers import owner_gone, owner_token


def ended_process_token() -> str:
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    token = owner_token(process.pid)
    process.wait()
    return token


def test_an_ended_owner_is_gone_and_a_running_one_is_not() -> None:
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        assert owner_gone(owner_token()) is False
        assert owner_gone(owner_token(sleeper.pid)) is False
        assert owner_gone(ended_process_token()) is True
        assert owner_gone("elsewhere.example:1:1") is None           # another host's: unknown here
        host, pid, _ = owner_token().rsplit(":", 2)
        assert owner_gone(f"{host}:{pid}:1") is True                  # the PID was reused by a later process
        assert owner_gone("garbage") is None
    finally:
        sleeper.kill()
        sleeper.wait()
