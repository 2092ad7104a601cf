"""Input and output files (front end; decides nothing): inputs read within a bound, outputs
checked before any work and written atomically.

* :func:`read_regular_file` / :func:`check_regular_file`: the one way an input file is read --
  a regular file only (a FIFO, a device, a socket or a folder refused before a byte is read, so
  nothing ever blocks), its size from ``fstat`` checked against a limit before reading;
  :func:`loads_unique`, JSON that refuses duplicate keys (every JSON document the tools read);
  :func:`file_kind`, what a file handed to the wrong command is (a panel, a certificate, a GGUF
  model, a key), for the one line that refuses it.

* :func:`check_output_file` / :func:`check_output_folder`: pre-flight checks of an output named
  on the command line or given to the API (a folder where a file is wanted, a non-regular
  file, an unwritable place: one line, exit 2, before any work).  **Outputs never destroy
  inputs**: an output that is an input of the same command (:func:`same_file`), a key file
  (:func:`key_file_kind`), or -- without ``force`` -- any existing file is refused the same way.
* :class:`OutputFiles`: the files of one run, each staged beside its target and renamed into
  place together (``fsync`` before the rename, the folder after it), or all removed when the
  run fails; :class:`OutputWriteError` is a write that failed (one line, exit 2).
* removing an earlier run's outputs (a forced run): :mod:`softrank_cert.util.removal`;
* :func:`replace_atomically`, :func:`write_text_atomic`, :func:`write_json_atomic`: one file
  replaced the same way; :func:`canonical_dump`, the stable JSON text of every certificate,
  report and manifest.  (Figures: :func:`softrank_cert.plumbing.plotting.save_figure_atomic`.)
"""

from __future__ import annotations

import errno
import os
import stat
import tempfile
from pathlib import Path
from typing import Any
from collections.abc import Callable, Mapping

from ..errors import InvalidInputError, OutputWriteError


def canonical_dump(document: object) -> str:
    """Readable, stable JSON text for certificates and reports (keys sorted, 1-space indent)."""
    import json

    return json.dumps(document, indent=1, sort_keys=True, ensure_ascii=False) + "\n"


# --------------------------------------------------------------------------------------
# Input files: regular files only, sizes checked before reading
# --------------------------------------------------------------------------------------

def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device")):
        if test(mode):
            return name
    return "not a regular file"


def _refuse_special(path: str | os.PathLike[str], mode: int, what: str) -> None:
    if not stat.S_ISREG(mode):
        raise InvalidInputError(f"{what} {os.fspath(path)}: is {_kind(mode)}, not a regular file")


def check_regular_file(path: str | os.PathLike[str], what: str = "file") -> int:
    """The size in bytes of the regular file at ``path`` (symlinks followed), from ``os.stat``
    alone: a missing file, a FIFO, a device, a socket or a folder is refused with one line
    (InvalidInputError, exit 2) without opening it."""
    try:
        info = os.stat(path)
    except OSError as exc:
        raise InvalidInputError(f"cannot read {what} {os.fspath(path)}: {exc.strerror or exc}") from None
    _refuse_special(path, info.st_mode, what)
    return info.st_size


def read_regular_file(path: str | os.PathLike[str], limit: int, what: str = "file",
                      too_large: type[InvalidInputError] = InvalidInputError) -> bytes:
    """The bytes of the regular file at ``path``, at most ``limit`` of them.

    Contract: a path that is not a regular file is refused by :func:`check_regular_file` before
    it is opened, and again on the opened descriptor (opened with ``O_NONBLOCK``, so a file
    swapped for a FIFO in between cannot block); a file whose ``fstat`` size exceeds ``limit``
    is refused (``too_large``) before a byte is read; the read stops after ``limit + 1`` bytes
    should the file grow meanwhile.  Cost: at most ``limit + 1`` bytes read, in 16 MiB pieces."""
    check_regular_file(path, what)
    shown = os.fspath(path)
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise InvalidInputError(f"cannot read {what} {shown}: {exc.strerror or exc}") from None
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(fd)
        _refuse_special(path, info.st_mode, what)
        if info.st_size > limit:
            raise too_large(f"{what} {shown}: {info.st_size} bytes, more than the limit of {limit} bytes")
        chunks, size = [], 0
        try:
            while size <= limit:
                chunk = handle.read(min(limit + 1 - size, 16 << 20))
                if not chunk:
                    break
                chunks.append(chunk)
                size += len(chunk)
        except OSError as exc:
            raise InvalidInputError(f"cannot read {what} {shown}: {exc.strerror or exc}") from None
    if size > limit:
        raise too_large(f"{what} {shown}: more than the limit of {limit} bytes")
    return b"".join(chunks)


def unique_object_pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result = dict(pairs)
    if len(result) != len(pairs):
        seen: set[str] = set()
        duplicate = next(key for key, _ in pairs if key in seen or seen.add(key))  # type: ignore[func-returns-value]
        raise ValueError(f"duplicate JSON key {duplicate!r}")
    return result


def loads_unique(text: str | bytes) -> Any:
    """``json.loads`` that refuses an object with a duplicate key (ValueError naming it), so that
    no reader silently takes the last of two values."""
    import json

    return json.loads(text, object_pairs_hook=unique_object_pairs)


#: Leading bytes of the binary files a user may hand to the wrong command, and what each is.
_MAGIC_KINDS = ((b"PK\x03\x04", "a .npz file (a panel or operator file)"), (b"GGUF", "a GGUF model file"),
                (b"\x93NUMPY", "a .npy array file"))
#: A JSON file larger than this is not parsed to say what it is (the message stays generic).
_KIND_JSON_BYTES = 64 << 20


def file_kind(path: str | os.PathLike[str]) -> str | None:
    """What the regular file at ``path`` is, from its content, for a refusal that names it (only
    on an error path): ``"a .npz file (a panel or operator file)"``, ``"a GGUF model file"``,
    ``"a .npy array file"``, ``"a softrank certificate"``, ``"a key file"``, ``"a 'F' document"``
    (a JSON object declaring the format F), or None when it is none of these or cannot be read.
    Cost: 8 bytes, and at most 64 MiB of a JSON file (a larger one is not looked into)."""
    try:
        check_regular_file(path)
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
        with os.fdopen(fd, "rb") as handle:
            head = handle.read(8) if stat.S_ISREG(os.fstat(fd).st_mode) else b""
    except (InvalidInputError, OSError):
        return None
    for magic, kind in _MAGIC_KINDS:
        if head.startswith(magic):
            return kind
    try:
        raw = read_regular_file(path, _KIND_JSON_BYTES, "file")
    except InvalidInputError:
        return None
    try:
        document = loads_unique(raw)
    except (ValueError, UnicodeDecodeError, RecursionError):
        return None
    if not isinstance(document, dict):
        return None
    if any(field in document for field, _ in _KEY_FIELDS):
        return "a key file"
    fmt = document.get("format")
    if fmt == "softrank-certificate":
        return "a softrank certificate"
    return f"a {fmt!r} document" if isinstance(fmt, str) else None


# --------------------------------------------------------------------------------------
# Checked before any work
# --------------------------------------------------------------------------------------

def _is_folder_spec(text: str) -> bool:
    return text.endswith(("/", os.sep)) or Path(text).is_dir()


def _probe_writable(folder: Path, option: str, text: str, probed: set[Path] | None) -> None:
    """The nearest existing ancestor of ``folder`` must be a folder in which we can create files
    (checked by creating and removing an empty temporary file there)."""
    ancestor = folder if str(folder) else Path(".")
    while not ancestor.exists() and not ancestor.is_symlink() and ancestor != ancestor.parent:
        ancestor = ancestor.parent
    if probed is not None and ancestor in probed:
        return
    if not ancestor.is_dir():
        raise InvalidInputError(f"{option} {text}: {ancestor} is not a folder")
    try:
        fd, probe = tempfile.mkstemp(prefix=".softrank-write-test-", dir=ancestor)
    except OSError as exc:
        raise InvalidInputError(f"{option} {text}: cannot write in {ancestor} ({exc.strerror or exc})") from None
    os.close(fd)
    os.unlink(probe)
    if probed is not None:
        probed.add(ancestor)


def same_file(a: str | os.PathLike[str], b: str | os.PathLike[str]) -> bool:
    """Whether ``a`` and ``b`` name one file: the same path once symlinks and ``..`` are resolved
    (also for a file not yet created), or, both existing, the same file on the disk
    (``os.path.samefile``: a hard link, a bind mount)."""
    if os.path.realpath(a) == os.path.realpath(b):
        return True
    try:
        return os.path.samefile(a, b)
    except OSError:  # one of them does not exist (or cannot be looked at): not the same file
        return False


#: The top-level fields that make a JSON file a key file: ``softrank keygen``'s private key and its ``.pub``.
_KEY_FIELDS = (("privateKeyMultibase", "a private key file"), ("publicKeyMultibase", "a public key file"))
#: A key file is a few hundred bytes: a larger file is not looked into.
_KEY_FILE_PROBE_BYTES = 1 << 16


def key_file_kind(path: str | os.PathLike[str]) -> str | None:
    """``"a private key file"`` or ``"a public key file"`` when ``path`` is an existing regular
    file of at most 64 KiB holding a JSON object with the top-level field of one
    (``privateKeyMultibase``, ``publicKeyMultibase``), else None.  Cost: at most 64 KiB read."""
    try:
        document = loads_unique(read_regular_file(path, _KEY_FILE_PROBE_BYTES, "output file"))
    except (InvalidInputError, ValueError, UnicodeDecodeError, RecursionError):
        return None
    if not isinstance(document, dict):
        return None
    return next((kind for field, kind in _KEY_FIELDS if field in document), None)


def check_not_input(path: str | os.PathLike[str], option: str,
                    inputs: Mapping[str, str | os.PathLike[str] | None] | None) -> None:
    """Refuse (one line, exit 2) an output ``path`` that names one of the command's ``inputs``
    (what -> path; None = not given), or an existing file inside an input that is a folder,
    whatever ``--force`` says."""
    for what, source in (inputs or {}).items():
        if source is None:
            continue
        named = what if os.fspath(source) in what else f"{what} {os.fspath(source)}"
        if same_file(path, source):
            raise InvalidInputError(f"{option} {os.fspath(path)} would overwrite the {named}; name another output file")
        if os.path.isdir(source) and os.path.lexists(path) and \
                os.path.realpath(path).startswith(os.path.join(os.path.realpath(source), "")):
            raise InvalidInputError(f"{option} {os.fspath(path)} would overwrite a file of the {named}; "
                                    "name another output file")


def check_replaceable(path: str | os.PathLike[str], option: str, *, force: bool) -> None:
    """Refuse (one line, exit 2) to replace the existing file ``path``: a key file always (a
    private key cannot be made again), any other file unless ``force`` (``--force``)."""
    if not os.path.lexists(path):
        return
    kind = key_file_kind(path)
    if kind is not None:
        raise InvalidInputError(f"{option} {os.fspath(path)}: is {kind}; a key file is never replaced, "
                                "--force or not: name another output file")
    if not force:
        raise InvalidInputError(f"{option} {os.fspath(path)}: exists; give --force to replace it, "
                                "or name another output file")


def check_output_file(text: str | os.PathLike[str], option: str, *, suffixes: tuple[str, ...] | None = None,
                      probed: set[Path] | None = None, force: bool = False,
                      inputs: Mapping[str, str | os.PathLike[str] | None] | None = None) -> Path:
    """Pre-flight check of an output *file* named on the command line, before any work.

    Refused with one line (InvalidInputError, exit 2): a name ending in ``/`` or naming an
    existing folder, an existing target that is not a regular file (e.g. ``/dev/null``), a
    suffix outside ``suffixes``, an output that is one of the command's ``inputs``
    (:func:`check_not_input`), an existing key file, any other existing file unless ``force``
    (:func:`check_replaceable`), and a location where no file can be created.  Missing parent
    folders are fine (they are created when the file is written).
    """
    text = os.fspath(text)
    path = Path(text)
    if _is_folder_spec(text):
        raise InvalidInputError(f"{option} {text}: is a folder; name a file")
    if suffixes is not None and path.suffix.lower() not in suffixes:
        got = f"'{path.suffix}'" if path.suffix else "no suffix"
        raise InvalidInputError(f"{option} {text}: unsupported file type ({got}); use {', '.join(suffixes)}")
    if path.exists() and not path.is_file():
        raise InvalidInputError(f"{option} {text}: exists and is not a regular file")
    check_not_input(path, option, inputs)
    check_replaceable(path, option, force=force)
    _probe_writable(path.parent, option, text, probed)
    return path


def check_output_folder(text: str | os.PathLike[str], option: str, *, probed: set[Path] | None = None) -> Path:
    """Pre-flight check of an output *folder* (existing or to be created): see :func:`check_output_file`."""
    text = os.fspath(text)
    path = Path(text)
    if path.exists() and not path.is_dir():
        raise InvalidInputError(f"{option} {text}: is a file, not a folder")
    _probe_writable(path, option, text, probed)
    return path


def check_folder_unused(path: str | os.PathLike[str], option: str, *, force: bool) -> None:
    """Refuse (one line, exit 2) an output folder whose files are named only once the work is
    done (a page's figures, an audit's evidence) when it already holds something, unless
    ``force``: what is in it might be replaced."""
    try:
        used = os.path.isdir(path) and any(os.scandir(path))
    except OSError:
        used = False
    if used and not force:
        raise InvalidInputError(f"{option} {os.fspath(path)}: the folder holds files already; give --force to "
                                "replace what this run writes there, or name another output")


# --------------------------------------------------------------------------------------
# Written together at the end, atomically and durably
# --------------------------------------------------------------------------------------

def _published_mode() -> int:
    """The mode of an ordinary new file: 0666 less the umask (0644 with the usual umask 022)."""
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask


def _fsync_file(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_folder(folder: Path) -> None:
    """Make a rename in ``folder`` durable (best effort: not every file system allows it)."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


class OutputFiles:
    """The files of one run, written together: each is first written to a temporary file beside
    its target; :meth:`commit` renames them all into place.  If the run fails before that (an
    exception inside the ``with`` block, or in a later ``stage``), every temporary file and every
    folder it created are removed, so a failed run leaves no partial report behind.

    Files get the usual mode (0666 less the umask: 0644), not ``mkstemp``'s 0600.
    """

    def __init__(self) -> None:
        self._staged: list[tuple[Path, Path]] = []
        self._made: list[Path] = []

    def _mkdirs(self, folder: Path) -> None:
        missing = []
        while not folder.exists() and folder != folder.parent:
            missing.append(folder)
            folder = folder.parent
        for item in reversed(missing):
            item.mkdir()
            self._made.append(item)

    def stage(self, path: Path, write: Callable[[str], object], suffix: str = ".tmp") -> None:
        """Write ``path``'s future content with ``write(temporary_path)`` (renamed at commit).

        A write that fails (a full disk, a folder that became unwritable) raises
        :class:`OutputWriteError` (one line, exit 2) after removing what it had written."""
        path = Path(path)
        try:
            self._mkdirs(path.parent if str(path.parent) else Path("."))
            fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=suffix, dir=path.parent)
            os.close(fd)
        except OSError as exc:
            raise OutputWriteError(path, exc) from None
        self._staged.append((Path(tmp), path))
        try:
            write(tmp)
            os.chmod(tmp, _published_mode())
        except OSError as exc:
            raise OutputWriteError(path, exc) from None

    def stage_text(self, path: Path, text: str) -> None:
        self.stage(path, lambda tmp: Path(tmp).write_text(text, encoding="utf-8"))

    def stage_json(self, path: Path, document: object) -> None:
        self.stage_text(path, canonical_dump(document))

    def stage_figure(self, fig: Any, path: Path, *, dpi: int | None = None) -> None:
        """A matplotlib figure in the format its suffix names (.png, .pdf or .svg; PNG when it
        has none: :func:`softrank_cert.util.figure_formats.save_figure`, ``dpi`` for PNG); closes it."""
        import matplotlib.pyplot as plt

        from .figure_formats import DPI, save_figure

        path = Path(path)
        try:
            self.stage(path, lambda tmp: save_figure(fig, tmp, name=path, dpi=dpi or DPI), path.suffix or ".png")
        finally:
            plt.close(fig)

    def commit(self) -> None:
        """Flush every staged file to the disk (``fsync``), then rename each into place and
        flush the folders: after a crash or a power cut a target is its old or its new content,
        never a torn file.  A failure raises :class:`OutputWriteError` (exit 2)."""
        folders: set[Path] = set()
        for tmp, path in self._staged:
            try:
                _fsync_file(tmp)
            except OSError as exc:
                raise OutputWriteError(path, exc) from None
        done = 0
        for tmp, path in self._staged:
            try:
                os.replace(tmp, path)
            except OSError as exc:
                del self._staged[:done]
                raise OutputWriteError(path, exc) from None
            done += 1
            folders.add(path.parent if str(path.parent) else Path("."))
        self._staged.clear()
        self._made.clear()
        for folder in folders:
            fsync_folder(folder)

    def rollback(self) -> None:
        for tmp, _path in self._staged:
            tmp.unlink(missing_ok=True)
        self._staged.clear()
        for folder in reversed(self._made):
            try:
                folder.rmdir()
            except OSError:  # not empty any more (something else wrote there): leave it
                pass
        self._made.clear()

    def __enter__(self) -> OutputFiles:
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if exc_type is None:
            try:
                self.commit()
            except BaseException:
                self.rollback()
                raise
        else:
            self.rollback()


def rename_entry(source: Path, target: Path) -> None:
    """Rename the file or folder ``source`` to ``target`` (one atomic rename in one file system),
    never over an existing entry: an existing ``target`` raises :class:`FileExistsError` and
    nothing moves.  With :class:`OutputFiles` the one place that renames in this package: a
    forced run's removal moves earlier outputs aside and, should that fail, puts them back
    (:mod:`softrank_cert.util.removal`), and neither may destroy what another run wrote since."""
    if os.path.lexists(target):
        raise FileExistsError(errno.EEXIST, "an entry of this name exists", str(target))
    os.replace(source, target)


def replace_atomically(path: Path, write: Callable[[str], object], suffix: str = ".tmp") -> None:
    """Create ``path`` by ``write(temporary_path)`` in the same folder, then a rename: a reader
    never sees a partial file, and a failure leaves no temporary file (or new folder) behind.
    The file gets the usual mode (0644 with umask 022)."""
    with OutputFiles() as outputs:
        outputs.stage(path, write, suffix)


def write_text_atomic(path: Path, text: str) -> None:
    """Write UTF-8 ``text`` to ``path`` atomically (see :func:`replace_atomically`)."""
    replace_atomically(path, lambda tmp: Path(tmp).write_text(text, encoding="utf-8"))


def write_json_atomic(path: Path, document: dict[str, Any]) -> None:
    """Write JSON to ``path`` via a temporary file and rename: never a partial file."""
    write_text_atomic(Path(path), canonical_dump(document))
