"""Shared CLI plumbing: one-line errors with documented exit codes, never a traceback."""

from __future__ import annotations

import argparse
import errno
import os
import signal
import sys
import tempfile
import threading
from pathlib import Path, PurePosixPath
from typing import Any, Callable, NoReturn

from ..errors import EXIT_INTERNAL, EXIT_INVALID_INPUT, InvalidInputError, SoftrankError
from ..plumbing.plotting import PLOT_SUFFIXES


class OneLineParser(argparse.ArgumentParser):
    """argparse that reports a usage error on one line and exits 2 (with ``--json`` on the
    command line, also the JSON error document on stdout)."""

    def error(self, message: str) -> NoReturn:
        line = f"{message} (see --help)"
        if wants_json():
            print_json_error(self.prog, line, EXIT_INVALID_INPUT)
        self.exit(EXIT_INVALID_INPUT, f"{self.prog}: error: {line}\n")


#: The command line being parsed (set by :func:`parse_command_line`): ``--json`` in it makes
#: usage errors JSON too.
_ARGV: list[str] | None = None


def wants_json(argv: list[str] | None = None) -> bool:
    """Whether ``--json`` was given on the command line (before parsing has finished)."""
    argv = argv if argv is not None else (_ARGV if _ARGV is not None else sys.argv[1:])
    return "--json" in argv[: argv.index("--")] if "--" in argv else "--json" in argv


def parse_command_line(parser: argparse.ArgumentParser, argv: list[str] | None = None) -> argparse.Namespace:
    """``parser.parse_args(argv)``, with usage errors as JSON too when ``--json`` is given."""
    global _ARGV
    _ARGV = list(sys.argv[1:] if argv is None else argv)
    try:
        return parser.parse_args(_ARGV)
    finally:
        _ARGV = None


def command_name(prog: str) -> str:
    """``"softrank bracket"`` -> ``"bracket"``, ``"softrank-verify"`` -> ``"verify"``."""
    last = prog.split()[-1]
    return last[len("softrank-"):] if last.startswith("softrank-") else last


def print_json_error(prog: str, message: str, exit_code: int) -> None:
    """The JSON error document (``{"error": {"message", "exit_code"}}``) on stdout."""
    from ..plumbing.reports import dumps, error_document

    try:
        print(dumps(error_document(command_name(prog), message, exit_code)), flush=True)
    except (BrokenPipeError, OSError):  # stdout is gone: the stderr line is all there is
        pass


def make_parser(prog: str, description: str, epilog: str) -> OneLineParser:
    return OneLineParser(prog=prog, description=description, epilog=epilog,
                         formatter_class=argparse.RawDescriptionHelpFormatter)


#: OSError numbers that are about the machine (disk full, quota, read-only, permissions): exit 2.
_ENVIRONMENT_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES, errno.EPERM, errno.EFBIG})


def _raise_interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


def _interrupt_on_sigterm() -> Any:
    """Make SIGTERM (``kill``, batch schedulers before their SIGKILL) the same clean interruption
    as Ctrl-C: campaigns record "interrupted", stop their workers and exit 130.  Returns the
    previous handler (None when not in the main thread, where no handler can be set)."""
    if threading.current_thread() is not threading.main_thread():
        return None
    return signal.signal(signal.SIGTERM, _raise_interrupt)


def run_main(prog: str, body: Callable[[], int], *, json_errors: bool = False) -> NoReturn:
    """Run ``body`` and exit with its code; errors become one line on stderr.

    SoftrankError -> its exit code; invalid memory requests -> 2; anything else is a bug:
    one line and exit 4 (set SOFTRANK_DEBUG=1 to see the traceback); Ctrl-C or SIGTERM -> 130.  With ``json_errors``
    (the command's ``--json``) a failure also prints the JSON error document on stdout
    (:func:`softrank_cert.plumbing.reports.error_document`); exit codes are the same.
    """
    message: str | None = None
    previous = _interrupt_on_sigterm()
    try:
        code = body()
    except SoftrankError as exc:
        message, code = f"error: {exc}", exc.exit_code
    except MemoryError:
        message, code = "error: out of memory for this input", EXIT_INVALID_INPUT
    except BrokenPipeError:  # the reader went away (e.g. `| head`): nothing left to say
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        code = 141
    except OSError as exc:
        if exc.errno not in _ENVIRONMENT_ERRNOS:
            if os.environ.get("SOFTRANK_DEBUG"):
                raise
            message = (f"internal error: {type(exc).__name__}: {' '.join(str(exc).split())[:300]} "
                       "(set SOFTRANK_DEBUG=1 for a traceback)")
            code = EXIT_INTERNAL
        else:  # a full disk, a read-only or forbidden place: the environment, not a bug
            where = f" ({exc.filename})" if exc.filename else ""
            message, code = f"error: {exc.strerror or exc}{where}", EXIT_INVALID_INPUT
    except KeyboardInterrupt:
        message, code = "interrupted", 130
    except Exception as exc:  # a bug: still one line, unless debugging
        if os.environ.get("SOFTRANK_DEBUG"):
            raise
        message = (f"internal error: {type(exc).__name__}: {' '.join(str(exc).split())[:300]} "
                   "(set SOFTRANK_DEBUG=1 for a traceback)")
        code = EXIT_INTERNAL
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
    if message is not None:
        print(f"{prog}: {message}", file=sys.stderr)
        if json_errors:
            print_json_error(prog, message.removeprefix("error: "), code)
    sys.exit(code)


def canonical_dump(document: object) -> str:
    """Readable, stable JSON text for certificates and reports (keys sorted, 1-space indent)."""
    import json

    return json.dumps(document, indent=1, sort_keys=True, ensure_ascii=False) + "\n"


def comma_items(text: str, convert: Callable[[str], Any] = str) -> list[Any]:
    """``convert`` of every non-blank item of the comma-separated ``text``, stripped
    (``" 8, 16,,32"`` -> ``["8", "16", "32"]``): the one splitter of the comma-list options."""
    return [convert(part.strip()) for part in str(text).split(",") if part.strip()]


def int_list(text: str) -> list[int]:
    """argparse type for comma-separated integers such as ``64,128,256``."""
    import argparse

    try:
        values = comma_items(text, int)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}") from None
    if not values:
        raise argparse.ArgumentTypeError("expected at least one integer")
    return values


# --------------------------------------------------------------------------------------
# Sub-commands and the options several of them share
# --------------------------------------------------------------------------------------

def add_command(sub: Any, name: str, *, help: str, description: str, epilog: str) -> argparse.ArgumentParser:
    """The parser of ``softrank NAME`` (``help`` in the command list; ``epilog``, the examples and
    exit codes, shown as written)."""
    return sub.add_parser(name, help=help, description=description, epilog=epilog,
                          formatter_class=argparse.RawDescriptionHelpFormatter)


def add_campaign_options(p: Any, *, resume: bool = True) -> None:
    """``--resume`` and ``--max-memory`` (bracket, budgets)."""
    if resume:
        p.add_argument("--resume", action="store_true",
                       help="keep the results of an earlier run of the same campaign that still check, compute the rest "
                            "(bracket: the certificates in --out; budgets, audit: the campaign manifest beside --out, "
                            "written by runs with --resume)")
    p.add_argument("--max-memory", metavar="SIZE",
                   help="memory the tasks running at one time may use, e.g. 12G or 800M (K/M/G = 1024^1/2/3 bytes; "
                        "default 75%% of this machine): a task estimated larger is refused, tasks that do not fit "
                        "together wait")


def campaign_memory(args: Any) -> int | None:
    """``--max-memory`` in bytes (default :func:`~softrank_cert.plumbing.memory.default_max_memory`, a
    safe share of this machine; within the address-space limit that every worker inherits).
    On a Dask cluster: as given, else None (the scheduler's smallest worker memory limit)."""
    from ..plumbing.memory import WORKER_BASE_BYTES, address_space_headroom, default_max_memory, parse_size

    given = parse_size(args.max_memory) if getattr(args, "max_memory", None) else None
    if getattr(args, "scheduler", None):
        return given
    limit = given if given is not None else default_max_memory()
    headroom = address_space_headroom()
    if headroom is not None:
        limit = min(limit, int(0.9 * headroom) + WORKER_BASE_BYTES)
    return limit


def add_parallel_options(p: Any) -> None:
    """``--jobs N`` and ``--scheduler ADDRESS`` (shared by bracket, audit and supports)."""
    how = p.add_mutually_exclusive_group()
    how.add_argument("--jobs", type=int, default=1, metavar="N",
                     help="operators solved at a time in worker processes (default 1; 0 = one per CPU)")
    how.add_argument("--scheduler", metavar="tcp://HOST:PORT",
                     help="run the tasks on this Dask distributed scheduler (softrank-cert installed on its workers)")


def parse_eps_list(text: str) -> list[str]:
    """``--eps`` as exact decimal strings sorted by value (repeats and non-decimals refused, exit 2)."""
    from ..api import parse_eps
    from ..errors import InvalidToleranceError

    try:
        return parse_eps(text)
    except InvalidToleranceError as exc:
        if "listed twice" in str(exc):
            raise InvalidInputError(f"--eps lists a tolerance twice: {text}") from None
        raise


def certificate_path(out: Path, name: str) -> Path:
    """``out/NAME.json`` with the panel name's '/' as sub-folders; refuses names that escape ``out``."""
    parts = PurePosixPath(name).parts
    if not parts or any(part in ("", ".", "..") or part.startswith("/") for part in parts):
        raise InvalidInputError(f"operator name {name!r} cannot be used as a file name")
    return out.joinpath(*parts[:-1], parts[-1] + ".json")


def progress_bar(enabled: bool = True):
    """A rich progress bar on stderr (hidden when stderr is not a terminal)."""
    import sys

    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

    return Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                    TimeRemainingColumn(), console=Console(stderr=True), transient=True,
                    disable=not (enabled and sys.stderr.isatty()))


#: What ``--budget-seconds`` defaults to (the driver's
#: :func:`~softrank_cert.solvers.bracket.default_budget_seconds`; written out here so that
#: ``--help`` does not import the solvers -- ``tests/test_api.py`` checks that they agree).
DEFAULT_BUDGET_HELP = ("default: 16 s x (m N / 128^2)^0.7, between 4 and 600 s: 4 s at 32 x 32, about 6 s at 64 x 64, "
                       "16 s at 128 x 128, 42 s at 256 x 256, 111 s at 512 x 512")


def budget_help(what: str) -> str:
    """Help text of a ``--budget-seconds`` option: ``what`` it bounds, then the default."""
    return f"{what} ({DEFAULT_BUDGET_HELP}; the best verified ends found by then are kept)"


def plain_text(text: str) -> str:
    """Untrusted text for a plain line on a terminal or in a log: control and format characters
    become visible escapes (no terminal injection)."""
    import unicodedata

    return "".join(ch if unicodedata.category(ch)[0] != "C" else ascii(ch)[1:-1] for ch in text)


class OperatorProgress:
    """Progress of a run over operators, on stderr.

    On a terminal (and with ``bar``): a rich bar over the operators whose text shows the current
    operator and, where the solver reports it, its search stage (``stage_callback``).  When
    stderr is not a terminal (a log file, CI): one line per finished operator
    (:meth:`finished`), since a bar would not be seen there.
    """

    def __init__(self, prog: str, total: int | None, *, bar: bool = True, lines: bool = True,
                 label: str = "operators") -> None:
        self.prog, self.total, self.label = prog, total, label
        self.tty = sys.stderr.isatty()
        self.lines = lines and not self.tty
        self._count = 0
        self._bar = None
        if bar and self.tty:
            from rich.console import Console
            from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn,
                                       TimeRemainingColumn)

            self._bar = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                                 TimeElapsedColumn(), TimeRemainingColumn(), TextColumn("{task.fields[stage]}"),
                                 console=Console(stderr=True), transient=True)
            self._task = self._bar.add_task(label, total=total, stage="")

    def __enter__(self) -> "OperatorProgress":
        if self._bar is not None:
            self._bar.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._bar is not None:
            self._bar.__exit__(*exc)

    def stage(self, name: str, stage: str, elapsed: float, budget: float) -> None:
        """Show that operator ``name`` is in search ``stage`` (bar only)."""
        if self._bar is not None:
            digits = 1 if budget < 10 else 0
            budget_text = "" if budget == float("inf") else f"/{budget:.{digits}f}"
            self._bar.update(self._task, description=safe_text(name),
                             stage=safe_text(f"{stage} ({elapsed:.{digits}f}{budget_text} s)"))

    def stage_callback(self, name: str) -> Callable[[str, float, float], None] | None:
        """A ``progress(stage, elapsed, budget)`` callback for the bracket driver (None without a bar)."""
        if self._bar is None:
            return None
        return lambda stage, elapsed, budget: self.stage(name, stage, elapsed, budget)

    def advance(self, name: str | None = None) -> None:
        """Count one more finished operator on the bar (completion order)."""
        if self._bar is not None:
            self._bar.update(self._task, advance=1, stage="", total=self.total,
                             **({"description": safe_text(name)} if name is not None else {}))

    def finished(self, name: str, summary: str = "") -> None:
        """One line for a finished operator when stderr is not a terminal."""
        self._count += 1
        if self.lines:
            total = f"/{self.total}" if self.total is not None else ""
            text = f"{self.prog}: [{self._count}{total}] {plain_text(name)}" + (f": {plain_text(summary)}" if summary else "")
            print(text, file=sys.stderr, flush=True)


def brackets_summary(brackets: list[Any], seconds: float | None = None) -> str:
    """``eps 0.1 [5, 7], 0.25 3 (resolved) in 4.0 s`` for brackets with ``eps``, ``lower.k``, ``upper.r``."""
    ends = ", ".join(f"{b.eps} {b.lower.k} (resolved)" if b.lower.k == b.upper.r else f"{b.eps} [{b.lower.k}, {b.upper.r}]"
                     for b in brackets)
    return f"eps {ends}" + (f" in {seconds:.1f} s" if seconds is not None else "")


def stdout_console():
    """Console for tables: the terminal's width; when piped, ``$COLUMNS`` if it is set, else a wide
    fixed width (no folded names)."""
    import sys

    from rich.console import Console

    if sys.stdout.isatty():
        return Console()
    columns = os.environ.get("COLUMNS", "")
    return Console(width=int(columns) if columns.isdigit() and int(columns) >= 40 else 200)


def expand_json_paths(paths: list[str]) -> list[str]:
    """Files as given; folders replaced by the ``*.json`` files below them (in natural order:
    ``L0H2`` before ``L0H10``), except a campaign's manifest (``softrank-campaign.json``,
    which is not a certificate)."""
    from ..plumbing.campaign import MANIFEST_NAME
    from ..plumbing.operators_npz import natural_key

    out: list[str] = []
    for item in paths:
        path = Path(item)
        if path.is_dir():
            out.extend(sorted((str(p) for p in path.rglob("*.json") if p.name != MANIFEST_NAME), key=natural_key))
        else:
            out.append(item)
    return out


# --------------------------------------------------------------------------------------
# Tables that stay readable at 80 columns
# --------------------------------------------------------------------------------------

def common_name_prefix(names: list[str]) -> str:
    """The longest run of whole ``/``-separated leading segments shared by every name, with its
    trailing ``/`` (never a whole name): ``minilm/apache2/w32/`` for ``minilm/apache2/w32/L0H3``, ..."""
    split = [name.split("/") for name in names]
    if not split:
        return ""
    shared: list[str] = []
    for parts in zip(*(s[:-1] for s in split)):
        if any(part != parts[0] for part in parts):
            break
        shared.append(parts[0])
    return "/".join(shared) + "/" if shared else ""


def name_table(title: str, names: list[str], columns: list[str], *, name_column: str = "operator",
               right: tuple[str, ...] = ()) -> tuple[Any, Callable[[str], str]]:
    """A rich table with ``columns`` (in order) whose ``name_column`` is never cut.

    With two or more distinct names, their common ``/``-prefix moves into the title and the
    column shows the rest (a lone name is shown whole).  The name column gets the width of its
    longest entry and does not wrap; the other columns fold (wrap, never an ellipsis), so rich
    narrows those when the table is too wide for the terminal (e.g. 80 columns).  Columns in
    ``right`` are right-justified.  Returns ``(table, shown)``: ``shown(name)`` is the text for
    the name column (escaped for rich).
    """
    from rich.table import Table
    from rich.text import Text

    prefix = common_name_prefix(names) if len(set(names)) > 1 else ""
    shown = {name: safe_text(name[len(prefix):]) for name in names}
    if prefix:
        title = f"{title}\n{name_column}s under {safe_text(prefix)}"
    table = Table(title=title)
    width = max([len(name_column), *(Text.from_markup(text).cell_len for text in shown.values())])
    for column in columns:
        justify = "right" if column in right else "left"
        if column == name_column:
            table.add_column(column, justify=justify, width=width, no_wrap=True, overflow="fold")
        else:
            table.add_column(column, justify=justify, overflow="fold")
    return table, lambda name: shown.get(name, safe_text(name))


# --------------------------------------------------------------------------------------
# Output files: checked before any work, written together at the end
# --------------------------------------------------------------------------------------

#: Figure formats of every ``--plot`` option (``PLOT_SUFFIXES``, from ``softrank_cert.plumbing.plotting``):
#: matplotlib writes each without extra packages and the suffix of the file name chooses.
#: What every ``--plot`` option's help says about the formats.
PLOT_HELP = "PNG, PDF or SVG as the file name's suffix says (.png, .pdf, .svg)"


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


def check_output_file(text: str | os.PathLike[str], option: str, *, suffixes: tuple[str, ...] | None = None,
                      probed: set[Path] | None = None) -> Path:
    """Pre-flight check of an output *file* named on the command line, before any work.

    Refused with one line (InvalidInputError, exit 2): a name ending in ``/`` or naming an
    existing folder, an existing target that is not a regular file (e.g. ``/dev/null``), a
    suffix outside ``suffixes``, and a location where no file can be created.  Missing parent
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
    _probe_writable(path.parent, option, text, probed)
    return path


def check_plot_file(text: str | os.PathLike[str] | None, option: str = "--plot", *,
                    probed: set[Path] | None = None) -> Path | None:
    """A ``--plot`` file (None when not given): :func:`check_output_file` with the figure
    suffixes (.png, .pdf, .svg; anything else: one line, exit 2, before any work)."""
    if text is None:
        return None
    return check_output_file(text, option, suffixes=PLOT_SUFFIXES, probed=probed)


def check_output_folder(text: str | os.PathLike[str], option: str, *, probed: set[Path] | None = None) -> Path:
    """Pre-flight check of an output *folder* (existing or to be created): see :func:`check_output_file`."""
    text = os.fspath(text)
    path = Path(text)
    if path.exists() and not path.is_dir():
        raise InvalidInputError(f"{option} {text}: is a file, not a folder")
    _probe_writable(path, option, text, probed)
    return path


def check_distinct_outputs(outputs: dict[str, Path | None], inputs: dict[str, Path] | None = None) -> None:
    """No two output options may name the same file, and no output may overwrite an input
    (option -> path; None = not given)."""
    def key(path: Path) -> Path:
        return Path(os.path.realpath(path))

    seen: dict[Path, str] = {}
    for option, path in outputs.items():
        if path is None:
            continue
        if key(path) in seen:
            raise InvalidInputError(f"{seen[key(path)]} and {option} name the same file {path}")
        seen[key(path)] = option
    for what, path in (inputs or {}).items():
        if key(path) in seen:
            raise InvalidInputError(f"{seen[key(path)]} {path} would overwrite the {what}")


def _published_mode() -> int:
    """The mode of an ordinary new file: 0666 less the umask (0644 with the usual umask 022)."""
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask


class OutputWriteError(InvalidInputError):
    """An output file could not be written (a full disk, an unwritable folder): one line, exit 2;
    nothing partial is left (the temporary file is removed, the target keeps its old content)."""

    def __init__(self, path: Path, exc: OSError) -> None:
        super().__init__(f"cannot write {path}: {exc.strerror or exc}")
        self.errno = exc.errno


def _fsync_file(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _fsync_folder(folder: Path) -> None:
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

    def stage(self, path: Path, write: Callable[[str], None], suffix: str = ".tmp") -> None:
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
        has none: :func:`softrank_cert.plumbing.plotting.save_figure`, ``dpi`` for PNG); closes it."""
        import matplotlib.pyplot as plt

        from ..plumbing.plotting import DPI, save_figure

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
            _fsync_folder(folder)

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

    def __enter__(self) -> "OutputFiles":
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


def safe_text(text: str) -> str:
    """Untrusted text (operator ids, method names) for a rich table: control and format
    characters become visible escapes (no terminal injection) and ``[`` is escaped (no markup)."""
    import unicodedata

    from rich.markup import escape

    shown = "".join(ch if unicodedata.category(ch)[0] != "C" else ascii(ch)[1:-1] for ch in text)
    return escape(shown)


def replace_atomically(path: Path, write: Callable[[str], None], suffix: str = ".tmp") -> None:
    """Create ``path`` by ``write(temporary_path)`` in the same folder, then a rename: a reader
    never sees a partial file, and a failure leaves no temporary file (or new folder) behind.
    The file gets the usual mode (0644 with umask 022)."""
    with OutputFiles() as outputs:
        outputs.stage(path, write, suffix)


def write_text_atomic(path: Path, text: str) -> None:
    """Write UTF-8 ``text`` to ``path`` atomically (see :func:`replace_atomically`)."""
    replace_atomically(path, lambda tmp: Path(tmp).write_text(text, encoding="utf-8"))


def save_figure_atomic(fig: Any, path: Path) -> None:
    """Save a matplotlib figure atomically in the format its suffix names (PNG by default), then
    close it."""
    with OutputFiles() as outputs:
        outputs.stage_figure(fig, path)
