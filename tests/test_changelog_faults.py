"""The changelog's exactly-once under faults: a stalled or restarted broker, two writers on one
topic, a full disk. Each fault test runs its own embedded broker (the session's is shared)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from statekit.atomic import VersionedJsonFile
from statekit.errors import DiskFull


# --- a full disk ------------------------------------------------------------------------
@pytest.fixture()
def tiny_fs(tmp_path):
    """A 64 KiB tmpfs mounted on a folder of ``tmp_path`` (the tests run as root on Linux);
    ``fill()`` takes all its space, ``free()`` gives it back."""
    mount = tmp_path / "tiny"
    mount.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mount)],
                          capture_output=True, text=True)
    if done.returncode:
        pytest.skip(f"cannot mount a small tmpfs here (needs root): {done.stderr.strip()}")
    filler = mount / "filler"

    class Tiny:
        path = mount

        @staticmethod
        def fill() -> None:
            with open(filler, "ab", buffering=0) as out, pytest.raises(OSError):
                while True:
                    out.write(b"\0" * 4096)

        @staticmethod
        def free() -> None:
            filler.unlink(missing_ok=True)

    try:
        yield Tiny
    finally:
        subprocess.run(["umount", "-l", str(mount)], capture_output=True)


@pytest.mark.timeout(30)
def test_a_full_disk_names_the_file_the_bytes_and_keeps_the_old_file(tiny_fs):
    ledger = VersionedJsonFile(tiny_fs.path / "_statekit" / "ledger.json", "example", 1)
    ledger.write({"last_batch": 3})
    tiny_fs.fill()
    with pytest.raises(DiskFull) as info:
        ledger.write({"last_batch": 4, "pad": "x" * 5000})
    err = info.value
    assert isinstance(err, OSError) and err.errno == 28
    assert err.folder == str(tiny_fs.path / "_statekit")
    assert err.needed > 5000 and err.free is not None and err.free < err.needed
    assert f"{err.needed:,} bytes" in str(err) and str(tiny_fs.path / "_statekit") in str(err)
    assert ledger.read() == {"last_batch": 3}  # nothing lost
    assert os.listdir(tiny_fs.path / "_statekit") == ["ledger.json"]  # no temp file left
    tiny_fs.free()  # following the message: free space, run again
    ledger.write({"last_batch": 4})
    assert ledger.read() == {"last_batch": 4}


@pytest.mark.timeout(30)
def test_a_folder_that_cannot_be_created_on_a_full_disk_is_named(tiny_fs):
    tiny_fs.fill()
    target = Path(tiny_fs.path) / "a" / "b" / "file.json"
    with pytest.raises(DiskFull, match=r"no space left to write .*file\.json"):
        VersionedJsonFile(target, "example", 1).write({"x": 1})
