"""Files written atomically: a temporary file in the destination's folder, given the
permissions a new file gets, then renamed into place."""

from __future__ import annotations

import os
import shutil
import tempfile

__all__ = ["default_mode", "replace_into"]


def default_mode(path: str, is_dir: bool = False) -> None:
    """Give a file made by ``tempfile`` (mode 0600) the permissions a new file gets (0666,
    or 0777 for a folder, less the umask), before it is renamed into place."""
    mask = os.umask(0)
    os.umask(mask)
    os.chmod(path, (0o777 if is_dir else 0o666) & ~mask)


def replace_into(tmp: str, out: str, is_dir: bool) -> None:
    """Rename ``tmp`` onto ``out`` (a folder: the old one moved aside first, removed after)."""
    default_mode(tmp, is_dir)
    if not is_dir or not os.path.exists(out):
        os.replace(tmp, out)
        return
    old = tempfile.mkdtemp(prefix=".kernelpath-old-", dir=os.path.dirname(os.path.abspath(out)))
    os.rmdir(old)
    os.replace(out, old)
    os.replace(tmp, out)
    shutil.rmtree(old, ignore_errors=True)
