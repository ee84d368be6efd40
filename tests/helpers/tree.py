"""A folder's every file and sub-folder with its bytes' hash: to check that a read-only
operation (describe, inspect, a restart check) wrote nothing into a checkpoint."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path


def tree_digest(root: str | os.PathLike) -> dict[str, tuple]:
    """Every folder and file under ``root`` (hidden ones too): name → size and SHA-1."""
    root = Path(root)
    digest: dict[str, tuple] = {}
    for folder, dirs, files in os.walk(root):
        for name in dirs:
            digest[os.path.relpath(os.path.join(folder, name), root) + "/"] = ("dir",)
        for name in files:
            path = os.path.join(folder, name)
            with open(path, "rb") as src:
                data = src.read()
            digest[os.path.relpath(path, root)] = (len(data), hashlib.sha1(data).hexdigest())
    return digest
