"""The local stack's data folder (``.tickwork/`` or ``--data-dir``): private to its user, held by one stack.

The folder holds every tenant's signing secret in clear (``tables.json``, ``journal.jsonl``), the default
tenant's token and the handlers' logs. It is created 0700 and every file the stack writes in it 0600, from
the first byte: each is created with that mode (the umask can only take bits away) and its descriptor is then
set to exactly that mode, so there is no moment when another user could open it. A folder that already
exists and is open to other users, or belongs to another user, is left as it is, with a warning.

Two stacks on one folder would both restore it, both plan its jobs and deliver every webhook twice. A stack
takes an exclusive ``flock`` on ``lock`` in the folder for the life of its process, before it reads or
deletes anything; the kernel lets go of it however the process ends, so a ``kill -9`` leaves no stale lock.
The holder writes its pid and port into the file, for the refusal of a second start to name.
"""

from __future__ import annotations

import fcntl
import json
import os
import shlex
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

DIRECTORY_MODE = 0o700
FILE_MODE = 0o600
LOCK_FILE = "lock"


class DataDirInUse(Exception):
    """Another process holds the folder's lock; ``pid`` and ``port`` as it wrote them, if it had yet."""

    def __init__(self, directory: Path, pid: int | None, port: int | None):
        self.directory = directory
        self.pid = pid
        self.port = port
        holder = f" (pid {pid}, port {port})" if pid is not None else ""
        super().__init__(
            f"{directory} is in use by another tickwork local{holder}; stop it or use --data-dir"
        )


def private_directory(path: Path) -> None:
    """``path`` as a folder; if it is created here, it is 0700 whatever the umask (its parents, made as
    usual, are not the stack's)."""
    if path.is_dir():
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.mkdir(path, DIRECTORY_MODE)
    except FileExistsError:
        return
    # Created at most 0700: the umask only takes bits away, which this gives back to the owner alone.
    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except PermissionError:  # a umask that takes the owner's read bit leaves nothing to open it with
        os.chmod(path, DIRECTORY_MODE)
        return
    try:
        os.fchmod(descriptor, DIRECTORY_MODE)
    finally:
        os.close(descriptor)


def private_open(path: Path, flags: int) -> int:
    """A descriptor of ``path`` opened with ``flags`` (``os.O_CREAT`` added), the file 0600 from its first
    byte whatever the umask; an existing regular file with a wider mode is narrowed too (not a device or a
    pipe, say a ``--log-file /dev/stderr``)."""
    descriptor = os.open(path, flags | os.O_CREAT, FILE_MODE)
    try:
        found = os.fstat(descriptor)
        if stat.S_ISREG(found.st_mode) and stat.S_IMODE(found.st_mode) != FILE_MODE:
            os.fchmod(descriptor, FILE_MODE)
    except BaseException:
        os.close(descriptor)
        raise
    return descriptor


def write_private(path: Path, text: str) -> None:
    """Replace the content of ``path`` with ``text``, the file 0600 (see ``private_open``)."""
    with os.fdopen(private_open(path, os.O_WRONLY | os.O_TRUNC), "w", encoding="utf-8") as written:
        written.write(text)


def exposure(path: Path) -> str | None:
    """The warning for an existing folder that other users may open or that is not this user's, or None."""
    try:
        found = path.stat()
    except FileNotFoundError:
        return None
    name = shlex.quote(str(path))
    if found.st_uid != os.getuid():
        return (
            f"warning: {path} belongs to another user (uid {found.st_uid}), who can read its tokens and"
            f" secrets: use a folder of your own with --data-dir"
        )
    mode = stat.S_IMODE(found.st_mode)
    if not mode & 0o077:
        return None
    if mode & 0o044:
        what = "readable by"
    elif mode & 0o022:
        what = "writable by"
    else:
        what = "open to"
    return f"warning: {path} is {what} other users (mode {mode:04o}): chmod 700 {name}"


@dataclass
class DataDirLock:
    """The open lock file: the lock lasts as long as it stays open (at the latest, the process)."""

    directory: Path
    descriptor: int

    def release(self) -> None:
        if self.descriptor >= 0:
            os.close(self.descriptor)  # closing the last descriptor of the file lets go of its flock
            self.descriptor = -1


def claim(directory: Path, *, port: int, out: TextIO) -> DataDirLock:
    """Take ``directory`` for this process before anything reads or deletes in it: warn on ``out`` if it
    already existed open to other users, create it 0700 if not, and lock it. Raises ``DataDirInUse``, having
    changed nothing, when another process holds it."""
    warning = exposure(directory)
    private_directory(directory)
    descriptor = private_open(directory / LOCK_FILE, os.O_RDWR | os.O_CLOEXEC)
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        pid, held_port = holder(descriptor)
        os.close(descriptor)
        raise DataDirInUse(directory.absolute(), pid, held_port) from None
    except BaseException:
        os.close(descriptor)
        raise
    os.ftruncate(descriptor, 0)
    os.pwrite(descriptor, json.dumps({"pid": os.getpid(), "port": port}).encode() + b"\n", 0)
    if warning is not None:
        out.write(warning + "\n")
        out.flush()
    return DataDirLock(directory, descriptor)


def holder(descriptor: int) -> tuple[int | None, int | None]:
    """The pid and port the lock's holder wrote, or Nones if it has not written them yet."""
    try:
        written = json.loads(os.pread(descriptor, 256, 0))
        return int(written["pid"]), int(written["port"])
    except (ValueError, KeyError, TypeError):
        return None, None
