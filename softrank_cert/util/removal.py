"""An earlier run's outputs removed by a forced run (front end; decides nothing).

* :func:`remove_outputs`: only what the command recognises as its own, never a key file or an
  input, each output renamed into one hidden folder that is then deleted, so that no reader sees
  a part of one;
* :func:`remove_leftovers`: what an interrupted removal left; :func:`is_removal_leftover`, the
  name the folder walkers skip.
"""

from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path
from typing import Any
from collections.abc import Callable, Mapping

from ..errors import InvalidInputError, OutputWriteError
from .files import fsync_folder, key_file_kind, rename_entry, same_file


#: The prefix of the hidden folder :func:`remove_outputs` moves what it removes into; the folder
#: walkers skip such folders (:func:`is_removal_leftover`).
REMOVED_PREFIX = ".softrank-removed-"


def is_removal_leftover(name: str) -> bool:
    """Whether a file or folder name is one :func:`remove_outputs` moves what it removes into
    (``.softrank-removed-*``): what lies below such a folder is never read as a result."""
    return name.startswith(REMOVED_PREFIX)


def remove_outputs(folder: Path, names: list[str], *, is_output: Callable[[Path], bool],
                   inputs: Mapping[str, str | os.PathLike[str] | None] | None = None,
                   option: str = "--force") -> None:
    """Remove the earlier outputs ``folder/NAME`` (files or folders, in the order given) that a
    forced run replaces, so that no reader sees a part of one: each is renamed (atomic) into one
    new hidden folder ``folder/.softrank-removed-*``, which is then deleted, with any such folder
    an interrupted removal left behind (:func:`remove_leftovers`).

    Looked into first (symlinks not followed), and refused with one line naming the file (exit 2,
    nothing removed): a target that is a symlink or a mount point; one of ``inputs`` that is a
    target or lies in one; a key file (:func:`key_file_kind`); any file that ``is_output(path)``
    does not recognise as an output of the command.  A rename that fails puts the ones done back;
    a deletion cut short (Ctrl-C) is finished before the interrupt goes on; a failure raises
    :class:`OutputWriteError`."""
    folder = Path(folder)
    targets = [folder / name for name in names if os.path.lexists(folder / name)]
    for target in targets:
        _check_removable(target, is_output, inputs or {}, option)
    try:
        remove_leftovers(folder)
        if targets:
            trash = _move_aside(folder, targets)
            try:
                _delete_folder(trash)
            finally:  # a no-op once done; finishes a deletion that an interrupt (Ctrl-C) cut short
                _delete_folder(trash)
    except OSError as exc:
        raise OutputWriteError(folder, exc) from None


def remove_leftovers(folder: Path) -> None:
    """Delete the folders ``folder/.softrank-removed-*`` that an interrupted :func:`remove_outputs`
    left (only real folders: a file or a symlink of that name is left alone; one that another run
    deletes meanwhile is no error).  A failure raises :class:`OutputWriteError`."""
    try:
        for leftover in Path(folder).glob(REMOVED_PREFIX + "*"):
            _delete_folder(leftover)
    except OSError as exc:
        raise OutputWriteError(Path(folder), exc) from None


def _files_below(path: Path) -> list[Path]:
    """``path`` itself when it is not a folder, else every non-folder entry below it (files,
    symlinks, special files), symlinks not followed."""
    if not stat.S_ISDIR(os.lstat(path).st_mode):
        return [path]
    found: list[Path] = []
    with os.scandir(path) as entries:
        for entry in entries:
            if entry.is_dir(follow_symlinks=False):
                found.extend(_files_below(Path(entry.path)))
            else:
                found.append(Path(entry.path))
    return found


def _check_removable(target: Path, is_output: Callable[[Path], bool],
                     inputs: Mapping[str, str | os.PathLike[str] | None], option: str) -> None:
    if os.path.islink(target) or os.path.ismount(target):
        what = "a symbolic link" if os.path.islink(target) else "a mount point"
        raise InvalidInputError(f"{option}: {target} is {what}; it is not removed (remove or move it yourself)")
    for what, path in inputs.items():
        if path is not None and (same_file(path, target) or
                                 os.path.realpath(path).startswith(os.path.realpath(target) + os.sep)):
            raise InvalidInputError(f"{option}: {target} holds the {what} {path}; it is not removed")
    try:
        files = _files_below(target)
    except OSError as exc:
        raise InvalidInputError(f"{option}: cannot look into {target} ({exc.strerror or exc}); "
                                "nothing is removed") from None
    for path in files:
        kind = key_file_kind(path)
        if kind is not None:
            raise InvalidInputError(f"{option}: {path} is {kind}; a key file is never removed: move it elsewhere")
        if not is_output(path):
            raise InvalidInputError(f"{option}: {path} is not an output of this command; it is not removed: "
                                    "move it elsewhere")


def _move_aside(folder: Path, targets: list[Path]) -> Path:
    """A new hidden folder ``folder/.softrank-removed-*`` holding ``targets`` (renamed into it);
    when a rename fails (or is interrupted) the ones done are renamed back before raising.  A
    target that another run removed meanwhile is skipped."""
    trash = Path(tempfile.mkdtemp(prefix=REMOVED_PREFIX, dir=folder))
    moved: list[Path] = []
    try:
        for target in targets:
            if _rename_into(target, trash):
                moved.append(target)
    except BaseException:
        for target in reversed(moved):
            try:
                rename_entry(trash / target.name, target)
            except OSError:  # another run deleted it, or wrote a newer one there, meanwhile: left aside
                pass
        try:
            trash.rmdir()  # empty now, unless something could not be put back: then left for the next run
        except OSError:
            pass
        raise
    fsync_folder(folder)
    return trash


def _rename_into(target: Path, trash: Path) -> bool:
    """Rename ``target`` into ``trash``; False when it is gone already (another run removed it).
    Should another run's :func:`remove_leftovers` have deleted ``trash`` itself, it is made again
    and the rename tried once more."""
    try:
        rename_entry(target, trash / target.name)
    except FileNotFoundError:
        if not os.path.lexists(target):
            return False
        trash.mkdir(exist_ok=True)
        rename_entry(target, trash / target.name)
    return True


def _ignore_missing(_function: Any, _path: str, exc_info: Any) -> None:
    if not isinstance(exc_info[1], FileNotFoundError):
        raise exc_info[1]


def _delete_folder(path: Path) -> None:
    """Delete the folder ``path`` and what it holds; nothing when it is gone or is not a real
    folder (a file or a symlink); an entry another process deletes meanwhile is no error."""
    import shutil

    try:
        if not stat.S_ISDIR(os.lstat(path).st_mode):
            return
    except FileNotFoundError:
        return
    shutil.rmtree(path, onerror=_ignore_missing)
