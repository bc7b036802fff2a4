"""Files written atomically: a temporary file in the destination's folder, given the
permissions a new file gets, then renamed into place. The temporary names carry the host,
its PID namespace and the process id, so that the next writer in a folder removes what a
killed process (SIGKILL runs no handler) left there, and only that. And the folder of a
scratch file (``scratch_folder``): the one the user named, checked, never another."""

from __future__ import annotations

import errno
import os
import re
import shutil
import socket
import stat
import tempfile
from typing import Any

__all__ = [
    "TEMP_VARIABLES",
    "scratch_folder",
    "check_destination",
    "check_source",
    "default_mode",
    "replace_into",
    "temporary",
    "remove_stale",
]


def check_source(
    path: str, name: str = "path", not_regular: type[ValueError] = ValueError
) -> os.stat_result:
    """Refuse, naming ``name``, an input path that is missing or is not a regular file (a
    folder, a FIFO, whose reading would block, a socket or a device: ``not_regular``).
    Returns its ``os.stat``.

    Raises
    ------
    ValueError
    """
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise ValueError(f"{name}: no such file {path!r}") from None
    except OSError as exc:
        raise ValueError(f"{name}: cannot read {path!r}: {exc.strerror}") from None
    if not stat.S_ISREG(st.st_mode):
        raise not_regular(f"{name}: {path!r} is {_kind(st.st_mode)}, not a regular file")
    return st


#: The environment variables that name the folder of temporary files, in the order Python's
#: ``tempfile`` reads them.
TEMP_VARIABLES = ("TMPDIR", "TEMP", "TMP")


def scratch_folder(directory: Any, what: str, name: str = "directory") -> str:
    """The folder a scratch file (``what``, for messages) is written in: ``directory``
    (named ``name``) when given, else the first of ``TEMP_VARIABLES`` set, else
    ``tempfile``'s default. A folder named but not usable (missing, not a folder, not
    writable) is refused with a ``ValueError`` naming where it came from: ``tempfile``
    would silently write somewhere else."""
    if directory is not None:
        if not isinstance(directory, (str, os.PathLike)):
            raise TypeError(f"{name} must be a path or None, got {type(directory).__name__}")
        where, source = os.fspath(directory), name
    else:
        named = [(v, os.environ[v]) for v in TEMP_VARIABLES if os.environ.get(v)]
        if not named:
            return tempfile.gettempdir()
        source, where = named[0]
    try:
        mode = os.stat(where).st_mode
    except OSError as exc:
        raise ValueError(
            f"{source}={where!r}: {exc.strerror or 'cannot be read'}; {what} is written in "
            f"that folder: create it, or point {source} to a folder with room"
        ) from None
    if not stat.S_ISDIR(mode):
        raise ValueError(
            f"{source}={where!r} is {_kind(mode)}, not a folder; {what} is written in that "
            f"folder: point {source} to a folder with room"
        )
    if not os.access(where, os.W_OK | os.X_OK):
        raise ValueError(
            f"{source}={where!r}: this process cannot write in that folder, where {what} "
            f"is written: point {source} to a folder it can write in"
        )
    return where


def _kind(mode: int) -> str:
    """What a file mode says the path is, for messages."""
    if stat.S_ISDIR(mode):
        return "a folder"
    if stat.S_ISREG(mode):
        return "a regular file"
    if stat.S_ISLNK(mode):
        return "a symbolic link"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    return "not a regular file"


def check_destination(out: str, name: str = "path", directory: bool = False) -> None:
    """Refuse, before any work, a destination that a rename would wrongly replace: only a
    missing path or a regular file (``directory``: a folder, e.g. a zarr array) is
    replaced. A symbolic link (the rename would replace the link, not what it points to),
    a FIFO, a socket or a device node is refused naming ``name``; so is a folder where
    a file is written (and the other way round).

    Raises
    ------
    ValueError
        ``out`` exists and is not what the writer replaces.
    """
    try:
        st = os.lstat(out)
    except FileNotFoundError:
        return
    except OSError as exc:
        raise ValueError(f"{name}: cannot write {out!r}: {exc.strerror}") from None
    mode = st.st_mode
    if stat.S_ISLNK(mode):
        raise ValueError(
            f"{name}: {out!r} is a symbolic link; writing would replace the link with a "
            f"file. Give the path it points to ({os.path.realpath(out)!r}) or another path"
        )
    if directory and stat.S_ISDIR(mode):
        return
    if not directory and stat.S_ISREG(mode):
        return
    kind = _kind(mode)
    want = "a folder (or a missing path)" if directory else "a regular file (or a missing path)"
    raise ValueError(f"{name}: {out!r} is {kind}; only {want} is replaced. Give another path")


def _host() -> str:
    """This host's name, and its PID namespace where the system has one: containers that
    share a volume may share a host name, and a process id is only meaningful in its own
    namespace (another namespace's live writer would look gone)."""
    host = re.sub(r"[^A-Za-z0-9]", "_", socket.gethostname()) or "host"
    try:
        ns = os.readlink("/proc/self/ns/pid")  # "pid:[4026531836]"
    except OSError:
        return host
    return f"{host}_ns{re.sub(r'[^0-9]', '', ns) or 0}"


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # it exists (another user's process)
        return True
    return True


def remove_stale(folder: str) -> None:
    """Remove the temporary files and folders (``temporary``) that processes of this host
    which are gone left in ``folder``. Others' (live processes, other hosts) stay."""
    pattern = re.compile(rf"^\.kernelpath-(?:old-)?{re.escape(_host())}-(\d+)-")
    try:
        names = os.listdir(folder)
    except OSError:
        return
    for name in names:
        match = pattern.match(name)
        if match is None or _alive(int(match.group(1))):
            continue
        path = os.path.join(folder, name)
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path, ignore_errors=True)
        else:
            try:
                os.unlink(path)
            except OSError:
                pass


def temporary(folder: str, suffix: str = "", directory: bool = False, kind: str = "") -> str:
    """A new temporary file (empty, closed) or folder in ``folder``, named
    ``.kernelpath-[kind-]<host>-<pid>-...``, once the stale ones there are removed."""
    remove_stale(folder)
    prefix = f".kernelpath-{kind + '-' if kind else ''}{_host()}-{os.getpid()}-"
    if directory:
        return tempfile.mkdtemp(prefix=prefix, dir=folder)
    fd, path = tempfile.mkstemp(prefix=prefix, suffix=suffix, dir=folder)
    os.close(fd)
    return path


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
            old = temporary(folder, directory=True, kind="old")
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
