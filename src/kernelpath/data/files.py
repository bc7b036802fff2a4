"""Files written atomically: a temporary file in the destination's folder, given the
permissions a new file gets, then renamed into place."""

from __future__ import annotations

import errno
import os
import shutil
import tempfile

__all__ = ["default_mode", "replace_into"]

#: How often a folder's replacement is tried while other writers race for it.
REPLACE_ATTEMPTS = 100


def default_mode(path: str, is_dir: bool = False) -> None:
    """Give a file made by ``tempfile`` (mode 0600) the permissions a new file gets (0666,
    or 0777 for a folder, less the umask), before it is renamed into place."""
    mask = os.umask(0)
    os.umask(mask)
    os.chmod(path, (0o777 if is_dir else 0o666) & ~mask)


def replace_into(tmp: str, out: str, is_dir: bool) -> None:
    """Rename ``tmp`` onto ``out`` (a folder: the old one moved aside first, removed after).

    Writers of the same folder may race (threads or processes): a rename that finds
    ``out`` there again, or finds it gone when moving it aside, tries again; the last
    writer's folder stays.
    """
    default_mode(tmp, is_dir)
    if not is_dir:
        os.replace(tmp, out)
        return
    folder = os.path.dirname(os.path.abspath(out))
    aside: list[str] = []
    try:
        for _ in range(REPLACE_ATTEMPTS):
            try:
                os.replace(tmp, out)  # out absent (or an empty folder)
                return
            except OSError as exc:
                if exc.errno not in (errno.ENOTEMPTY, errno.EEXIST):
                    raise
            old = tempfile.mkdtemp(prefix=".kernelpath-old-", dir=folder)
            os.rmdir(old)
            try:
                os.replace(out, old)
            except FileNotFoundError:  # another writer moved it aside: try again
                continue
            aside.append(old)
        raise OSError(f"{out}: could not replace it in {REPLACE_ATTEMPTS} attempts")
    finally:
        for old in aside:
            shutil.rmtree(old, ignore_errors=True)
