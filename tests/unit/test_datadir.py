"""The local stack's data folder: 0700, its files 0600 whatever the umask, and one stack at a time."""

from __future__ import annotations

import io
import json
import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from tickwork_local.datadir import (
    LOCK_FILE,
    DataDirInUse,
    claim,
    exposure,
    private_directory,
    private_open,
    write_private,
)
from tickwork_local.journal import JOURNAL_FILE, Journal


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@contextmanager
def umask(value: int) -> Iterator[None]:
    previous = os.umask(value)
    try:
        yield
    finally:
        os.umask(previous)


@pytest.mark.parametrize("mask", [0o000, 0o002, 0o022, 0o077, 0o277])
def test_the_folder_is_0700_and_its_files_0600_whatever_the_umask(tmp_path: Path, mask: int) -> None:
    # Given a umask that leaves everything open, or takes some of the owner's own bits
    folder = tmp_path / "parent" / ".tickwork"
    with umask(mask):
        # When the folder and its files are created
        private_directory(folder)
        write_private(folder / "default-token", "tw_local_x")
        with os.fdopen(private_open(folder / "tickwork.log", os.O_WRONLY | os.O_APPEND), "a") as log:
            log.write("line\n")
        Journal(folder, lambda table, key: None).close()
    # Then the folder is the owner's alone, and so is every file in it
    assert mode(folder) == 0o700
    assert {path.name: mode(path) for path in folder.iterdir()} == {
        "default-token": 0o600,
        "tickwork.log": 0o600,
        JOURNAL_FILE: 0o600,
    }
    assert (folder / "default-token").read_text() == "tw_local_x"


def test_a_file_left_wider_by_an_older_version_is_narrowed_when_opened(tmp_path: Path) -> None:
    log = tmp_path / "tickwork.log"
    log.write_text("old\n")
    log.chmod(0o644)
    os.close(private_open(log, os.O_WRONLY | os.O_APPEND))
    assert mode(log) == 0o600
    assert log.read_text() == "old\n"


def test_an_existing_folder_keeps_its_mode(tmp_path: Path) -> None:
    folder = tmp_path / "data"
    folder.mkdir()
    folder.chmod(0o755)
    private_directory(folder)
    assert mode(folder) == 0o755


@pytest.mark.parametrize(
    ("folder_mode", "warning"),
    [
        (0o700, None),
        (0o500, None),
        (0o755, "warning: {dir} is readable by other users (mode 0755): chmod 700 {dir}"),
        (0o740, "warning: {dir} is readable by other users (mode 0740): chmod 700 {dir}"),
        (0o703, "warning: {dir} is writable by other users (mode 0703): chmod 700 {dir}"),
        (0o711, "warning: {dir} is open to other users (mode 0711): chmod 700 {dir}"),
    ],
)
def test_a_folder_open_to_other_users_is_named_with_its_fix(
    tmp_path: Path, folder_mode: int, warning: str | None
) -> None:
    folder = tmp_path / "data"
    folder.mkdir()
    folder.chmod(folder_mode)
    try:
        expected = warning.format(dir=folder) if warning else None
        assert exposure(folder) == expected
    finally:
        folder.chmod(0o700)


def test_a_folder_not_there_yet_needs_no_warning(tmp_path: Path) -> None:
    assert exposure(tmp_path / "absent") is None


def test_claiming_a_new_folder_creates_it_private_and_writes_the_holder(tmp_path: Path) -> None:
    folder = tmp_path / ".tickwork"
    out = io.StringIO()
    with umask(0):
        held = claim(folder, port=8123, out=out)
    try:
        assert out.getvalue() == ""
        assert mode(folder) == 0o700
        assert mode(folder / LOCK_FILE) == 0o600
        assert json.loads((folder / LOCK_FILE).read_text()) == {"pid": os.getpid(), "port": 8123}
    finally:
        held.release()


def test_claiming_a_wide_folder_warns_once_on_the_output_and_goes_on(tmp_path: Path) -> None:
    folder = tmp_path / "data"
    folder.mkdir()
    folder.chmod(0o755)
    out = io.StringIO()
    held = claim(folder, port=8000, out=out)
    try:
        warning = f"warning: {folder} is readable by other users (mode 0755): chmod 700 {folder}"
        assert out.getvalue() == warning + "\n"
        assert mode(folder) == 0o755
    finally:
        held.release()


def test_a_second_claim_is_refused_naming_the_folder_and_the_holder_until_the_first_lets_go(
    tmp_path: Path,
) -> None:
    # Given a folder held by a stack on port 8000 (flock: another open of the file conflicts, even here)
    folder = tmp_path / "data"
    first = claim(folder, port=8000, out=io.StringIO())
    # When another start claims it
    out = io.StringIO()
    with pytest.raises(DataDirInUse) as refused:
        claim(folder, port=8001, out=out)
    # Then it is refused with the holder's pid and port, and the lock file still names the holder
    assert str(refused.value) == (
        f"{folder.absolute()} is in use by another tickwork local (pid {os.getpid()}, port 8000);"
        " stop it or use --data-dir"
    )
    assert json.loads((folder / LOCK_FILE).read_text())["port"] == 8000
    assert out.getvalue() == ""
    # And once the holder lets go, the next claim takes it
    first.release()
    second = claim(folder, port=8001, out=io.StringIO())
    second.release()
    assert json.loads((folder / LOCK_FILE).read_text())["port"] == 8001


def test_a_holder_that_has_not_written_yet_is_refused_without_a_pid(tmp_path: Path) -> None:
    import fcntl

    folder = tmp_path / "data"
    folder.mkdir(mode=0o700)
    descriptor = os.open(folder / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        with pytest.raises(DataDirInUse, match=r"in use by another tickwork local; stop it") as refused:
            claim(folder, port=8001, out=io.StringIO())
        assert (refused.value.pid, refused.value.port) == (None, None)
    finally:
        os.close(descriptor)
