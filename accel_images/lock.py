"""One nightly at a time per state directory.

Two nightlies on one host would build into the same contexts and race each other's
promotions. An advisory `flock` on a file in the state directory keeps them apart; the
kernel drops it when the holder exits, however it exits, so a crash leaves no stale lock.
The holder writes its PID into the file, so a refused run can say who is in the way.
"""

from __future__ import annotations

import fcntl
import os
import time
from contextlib import contextmanager
from pathlib import Path
from collections.abc import Callable, Iterator

from accel_images.errors import AccelError, InputError

POLL_S = 0.2


class LockBusy(AccelError):
    """Another run holds the lock. Exit code 75 (EX_TEMPFAIL): try again later."""

    exit_code = 75


@contextmanager
def held(path: Path, wait_s: float = 0, *, what: str = "nightly", poll_s: float = POLL_S,
         clock: Callable[[], float] = time.monotonic, sleep: Callable[[float], None] = time.sleep) -> Iterator[Path]:
    """Hold an exclusive lock on `path` for the `with` block, waiting up to `wait_s` for it.

    Raises LockBusy naming the holder's PID when it stays taken; released on exit, also
    after an exception.
    """
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        # O_NOFOLLOW: a link planted at the lock's name is refused, not written through.
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o644)
    except OSError as err:
        raise InputError(f"cannot open the lock file: {err.strerror}", file=str(path),
                         hint="it must be a plain file in a writable directory") from None
    try:
        _acquire(fd, path, wait_s, what, poll_s, clock, sleep)
        try:
            _write_holder(fd, path)
            yield path
        finally:
            try:
                os.ftruncate(fd, 0)
            except OSError:
                pass  # the PID left behind names a process that has ended: harmless, and not worth hiding why we stop
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


def _write_holder(fd: int, path: Path) -> None:
    """The holder's PID into the lock file. A file system that cannot take these few bytes (full: ENOSPC,
    or over quota) cannot take the run's contexts, logs and reports either: one line now, not a traceback."""
    try:
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
    except OSError as err:
        raise InputError(f"cannot write the lock file: {err.strerror}", file=str(path),
                         hint="free space on its file system, or choose another --state-dir") from None


def _acquire(fd: int, path: Path, wait_s: float, what: str, poll_s: float,
             clock: Callable[[], float], sleep: Callable[[float], None]) -> None:
    deadline = clock() + max(0.0, wait_s)
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            remaining = deadline - clock()
            if remaining <= 0:
                raise _busy(fd, path, wait_s, what) from None
            sleep(min(poll_s, remaining))


def _busy(fd: int, path: Path, wait_s: float, what: str) -> LockBusy:
    holder = holder_pid(fd)
    who = f"PID {holder}" if holder else "another process"
    waited = f" after waiting {wait_s:g} s" if wait_s > 0 else ""
    return LockBusy(f"another {what} ({who}) holds {path}{waited}",
                    hint="wait for it to finish, or pass --lock-wait SECONDS")


def holder_pid(fd: int) -> int | None:
    """The PID the holder wrote, if it has written it yet."""
    try:
        text = os.pread(fd, 32, 0).decode().strip()
    except (OSError, UnicodeDecodeError):
        return None
    return int(text) if text.isdigit() else None
