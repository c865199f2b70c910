"""Files that hold secrets, readable by their owner only.

The data folder holds the SQLite database (integration and subscriber
credentials, sealed or not, API key hashes, every message), ``secret.key``
and the Development API key: Herald creates the folder 0700 and those files
0600. The mode is set with ``chmod`` after creation, so the process's umask
(often 022) does not loosen it. SQLite creates its ``-wal`` and ``-shm``
files with the mode of the database file, so they follow. Folders and files
that exist already are left as the operator made them.
"""

from __future__ import annotations

import os
from pathlib import Path

PRIVATE_DIR_MODE = 0o700
PRIVATE_FILE_MODE = 0o600


def make_private_dir(path: Path) -> None:
    """Create ``path`` (and its missing parents) with mode 0700; an existing folder is left as it is."""
    missing: list[Path] = []
    current = path
    while not current.exists():
        missing.append(current)
        if current.parent == current:
            break
        current = current.parent
    for folder in reversed(missing):
        try:
            folder.mkdir(mode=PRIVATE_DIR_MODE)
        except FileExistsError:
            continue  # made meanwhile by another process, with its own mode
        folder.chmod(PRIVATE_DIR_MODE)


def create_private_file(path: Path) -> bool:
    """Create ``path`` empty with mode 0600 unless it exists; True when it was created here."""
    try:
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, PRIVATE_FILE_MODE)
    except FileExistsError:
        return False
    try:
        os.fchmod(descriptor, PRIVATE_FILE_MODE)
    finally:
        os.close(descriptor)
    return True
