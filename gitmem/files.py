"""Files gitmem writes beside the code (hooks, exports, agents' configuration): whole or not at all, and
never where a link planted in the repository points.

A clone's files are anyone's who can push to it. A committed symbolic link at a temporary file's name, at
the file, or at a folder on its way would otherwise turn a write into one outside the repository: over a
user's shell profile, say, made executable by a hook's install.
"""

from __future__ import annotations

import os
import shlex
import stat
from typing import Optional

from .errors import GitmemError

__all__ = ["inside", "replace_file", "writable"]


def inside(path: str, root: str) -> str:
    """Where ``path`` leads (through links, its folders' too), refused unless that is within ``root`` and
    outside any ``.git`` folder there. Git's own files are no project file's: a clone's AGENTS.md linked to
    ``.git/config`` would send the repository's credentials to the model as the guide, and an export written
    through it would leave git unable to read its config (or a hook running memory text as shell)."""
    real, top = os.path.realpath(path), os.path.realpath(root)
    parts = os.path.relpath(real, top).split(os.sep)
    if parts[0] == os.pardir:
        raise GitmemError(f"{os.path.relpath(path, root)} leads to {real}, outside the repository: "
                          "not read or written")
    if any(part.casefold() == ".git" for part in parts):
        raise GitmemError(f"{os.path.relpath(path, root)} leads to {real}, inside git's own folder, not the work "
                          "tree: not read or written")
    return real


def writable(path: str, root: Optional[str] = None, *, follow: bool = True) -> None:
    """Refuse a file its owner made read-only (``chmod 444``), or one this user may not write: a rename over
    it would succeed all the same (only the folder's permissions count), so the file's own say is asked here.
    ``root``: the folder the message names the file from."""
    try:
        mode = os.stat(path, follow_symlinks=follow).st_mode
    except FileNotFoundError:
        return
    except OSError as e:
        raise GitmemError(f"cannot read {path}: {e.strerror or e}") from None
    if not mode & stat.S_IWUSR or not os.access(path, os.W_OK, follow_symlinks=follow):
        name = os.path.relpath(path, root) if root else path
        raise GitmemError(f"{name} is read-only; left as it is (`chmod u+w {shlex.quote(name)}` lets gitmem "
                          "update it)")


def replace_file(path: str, content: str, *, follow: bool = True, within: Optional[str] = None,
                 mode: Optional[int] = None) -> str:
    """Replace the file at ``path`` with ``content`` (a crash leaves the old one) and return where it wrote.

    ``follow``: through a symbolic link to the file it names, which stays a link (teams link AGENTS.md to
    CLAUDE.md: replacing the link would split them); else the link itself is replaced. ``within``: the
    folder the file must lead into. ``mode``: the new file's permissions (default: the old file's, else
    the umask's). The temporary file beside it is created new, never opened through what is there. A file
    made read-only is refused (:func:`writable`)."""
    target = inside(path, within) if within is not None else os.path.realpath(path) if follow else path
    writable(target, os.path.realpath(within) if within is not None else None, follow=follow)
    folder = os.path.dirname(target) or "."
    os.makedirs(folder, exist_ok=True)
    if mode is None:
        try:
            mode = stat.S_IMODE(os.stat(target).st_mode)
        except FileNotFoundError:
            pass
    tmp = os.path.join(folder, f".{os.path.basename(target)}.{os.urandom(6).hex()}.gitmem-tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o666)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as f:
            f.write(content)
        if mode is not None:
            os.chmod(tmp, mode)
        os.replace(tmp, target)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    return target
