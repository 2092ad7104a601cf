"""Shared CLI plumbing: one-line errors with documented exit codes, never a traceback; the
parser, the options several commands share, tables.

What the studies and the API share with the commands is in :mod:`softrank_cert.plumbing`
(output files and atomic writes in ``files``, progress in ``progress``, escaping of untrusted
text in ``escaping``, certificate paths in ``certificate_files``): nothing outside
``softrank_cert.cli`` imports the CLI.
"""

from __future__ import annotations

import argparse
import errno
import os
import signal
import sys
import threading
from pathlib import Path
from typing import Any, Literal, NoReturn
from collections.abc import Callable

from ..errors import EXIT_INTERNAL, EXIT_INVALID_INPUT, InvalidInputError, SoftrankError, debugging, describe
from ..util.escaping import safe_text


class OneLineParser(argparse.ArgumentParser):
    """argparse that reports a usage error on one line and exits 2 (with ``--json`` on the
    command line, also the JSON error document on stdout).

    An option this parser does not know is named first, with the closest known ones
    (``--epss 0.25`` -> ``unrecognized option --epss (did you mean --eps?)``), even where
    argparse would have complained about something else (``required: --eps``)."""

    def error(self, message: str) -> NoReturn:
        message = self.unknown_option_message() or message
        line = f"{message} (see --help)"
        if wants_json():
            print_json_error(self.prog, line, EXIT_INVALID_INPUT)
        self.exit(EXIT_INVALID_INPUT, f"{self.prog}: error: {line}\n")


    def unknown_option_message(self, argv: list[str] | None = None) -> str | None:
        """``unrecognized option --epss (did you mean --eps?)`` for the first option-like word of
        the command line that is no option of this parser (nor an unambiguous abbreviation of
        one), or None.  Words after ``--`` and negative numbers are values, not options."""
        import difflib

        words = argv if argv is not None else (_ARGV if _ARGV is not None else sys.argv[1:])
        words = words[: words.index("--")] if "--" in words else words
        known = [option for option in self._option_string_actions if option.startswith("--")]
        commands = {}
        for action in self._actions:
            if isinstance(action, argparse._SubParsersAction):
                commands = action.choices
        for index, word in enumerate(words):
            if word in commands:  # the rest of the line is the command's
                return commands[word].unknown_option_message(words[index + 1:])
            if not word.startswith("--") or len(word) < 3:
                continue
            name = word.split("=", 1)[0]
            if name in self._option_string_actions or (self.allow_abbrev and any(o.startswith(name) for o in known)):
                continue
            close = difflib.get_close_matches(name, [o for o in known if o != "--help"], n=2,
                                              cutoff=0.6)
            hint = f" (did you mean {' or '.join(close)}?)" if close else ""
            return f"unrecognized option {name}{hint}"
        return None


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
        args = parser.parse_args(_ARGV)
        args.argv = _ARGV  # the command line as given (a campaign names it with --resume when interrupted)
        return args
    finally:
        _ARGV = None


def command_name(prog: str) -> str:
    """``"softrank bracket"`` -> ``"bracket"``, ``"softrank-verify"`` -> ``"verify"``."""
    last = prog.split()[-1]
    return last[len("softrank-"):] if last.startswith("softrank-") else last


def print_json_error(prog: str, message: str, exit_code: int) -> None:
    """The JSON error document (``{"error": {"message", "exit_code"}}``) on stdout."""
    from ..plumbing.json_contract import dumps, error_document

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


#: What the one line of an unexpected exception adds.
DEBUG_HINT = "(set SOFTRANK_DEBUG=1 for a traceback)"


def run_main(prog: str, body: Callable[[], int], *, json_errors: bool = False) -> NoReturn:
    """Run ``body`` and exit with its code; errors become one line on stderr.

    SoftrankError -> its exit code; invalid memory requests -> 2; anything else is a bug:
    one line and exit 4 (set SOFTRANK_DEBUG=1 to see the traceback); Ctrl-C or SIGTERM -> 130.  With ``json_errors``
    (the command's ``--json``) a failure also prints the JSON error document on stdout
    (:func:`softrank_cert.plumbing.json_contract.error_document`); exit codes are the same.
    """
    message: str | None = None
    previous = _interrupt_on_sigterm()
    try:
        code = body()
    except SoftrankError as exc:
        message, code = f"error: {exc}", exc.exit_code
    except MemoryError as exc:
        message, code = f"error: {describe(exc)}", EXIT_INVALID_INPUT
    except BrokenPipeError:  # the reader went away (e.g. `| head`): nothing left to say
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        code = 141
    except OSError as exc:
        if exc.errno not in _ENVIRONMENT_ERRNOS:
            if debugging():
                raise
            message, code = f"{describe(exc)} {DEBUG_HINT}", EXIT_INTERNAL
        else:  # a full disk, a read-only or forbidden place: the environment, not a bug
            where = f" ({exc.filename})" if exc.filename else ""
            message, code = f"error: {exc.strerror or exc}{where}", EXIT_INVALID_INPUT
    except KeyboardInterrupt as exc:  # a campaign's CampaignInterrupted names its --resume command
        message, code = str(exc) or "interrupted", 130
    except Exception as exc:  # a bug: still one line, unless debugging
        if debugging():
            raise
        message, code = f"{describe(exc)} {DEBUG_HINT}", EXIT_INTERNAL
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
    if message is not None:
        print(f"{prog}: {message}", file=sys.stderr)
        if json_errors:
            print_json_error(prog, message.removeprefix("error: "), code)
    sys.exit(code)


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

def add_command(sub: Any, name: str, *, epilog: str) -> argparse.ArgumentParser:
    """The parser of ``softrank NAME`` (its line in the command list and its description:
    ``cli.commands``; ``epilog``, the examples and exit codes, shown as written)."""
    from .commands import COMMANDS

    command = COMMANDS[name]
    return sub.add_parser(name, help=command.line, description=command.description, epilog=epilog,
                          formatter_class=argparse.RawDescriptionHelpFormatter)


def add_quiet_option(p: Any) -> None:
    """``--quiet`` of a command that computes (its progress: ``softrank_cert.util.progress``)."""
    p.add_argument("--quiet", action="store_true",
                   help="no progress on stderr (no bar on a terminal, no stage lines in a log); errors are still "
                        "one line on stderr")


def add_json_options(p: Any, json_help: str) -> None:
    """``--json`` (``json_help``: what it prints on stdout) and ``--quiet`` (:func:`add_quiet_option`)."""
    p.add_argument("--json", action="store_true", help=json_help)
    add_quiet_option(p)


#: The capture inputs' metavars (``--model``: argparse's own, MODEL).
_CAPTURE_METAVARS = {"--model": None, "--hf": "DIR", "--gguf": "FILE", "--text": "FILE", "--image": "FILE"}
#: Help of ``--image``.
IMAGE_HELP = "an image for a vision model (PNG/JPEG)"


def add_capture_options(p: Any, helps: dict[str, str], widths_help: str) -> None:
    """The inputs of a model capture (panel, survey): one of ``--model``/``--hf``/``--gguf``, one of
    ``--text``/``--image`` (``helps``: option -> help, in their ``--help`` order), then ``--widths``
    (``widths_help``), ``--layers`` and ``--heads``."""
    source = p.add_mutually_exclusive_group(required=True)
    document = p.add_mutually_exclusive_group(required=True)
    for option, help in helps.items():
        group = document if option in ("--text", "--image") else source
        group.add_argument(option, metavar=_CAPTURE_METAVARS[option], help=help)
    p.add_argument("--widths", type=int_list, metavar="W1,W2,...", help=widths_help)
    p.add_argument("--layers", type=int_list, metavar="L1,L2,...", help="default: all layers")
    p.add_argument("--heads", type=int_list, metavar="H1,H2,...", help="default: all heads")


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
    """``--max-memory`` in bytes (default :func:`~softrank_cert.util.memory.default_max_memory`, a
    safe share of this machine; within the address-space limit that every worker inherits).
    On a Dask cluster: as given, else None (the scheduler's smallest worker memory limit)."""
    from ..util.memory import WORKER_BASE_BYTES, address_space_headroom, default_max_memory, parse_size

    given = parse_size(args.max_memory) if getattr(args, "max_memory", None) else None
    if getattr(args, "scheduler", None):
        return given
    limit = given if given is not None else default_max_memory()
    headroom = address_space_headroom()
    if headroom is not None:
        limit = min(limit, int(0.9 * headroom) + WORKER_BASE_BYTES)
    return limit


def given_memory(args: Any) -> int | None:
    """The ``--max-memory`` the user gave, in bytes (None: not given), with which a task's kernel
    checks may use what it leaves beside the task (:func:`~softrank_cert.util.memory.task_check_cap`):
    on this machine at most :func:`campaign_memory` (the address-space limit) and the safe share of
    its memory (:func:`~softrank_cert.util.memory.default_max_memory`), so that an over-stated value
    neither lets a check run the machine out of memory nor makes a task's estimate exceed its limit."""
    from ..util.memory import default_max_memory

    if not getattr(args, "max_memory", None):
        return None
    limit = campaign_memory(args)
    if limit is None or getattr(args, "scheduler", None):
        return limit
    return min(limit, default_max_memory())


def add_campaign_run_options(p: Any, json_help: str) -> None:
    """The options of a command that runs a campaign, in their order in ``--help``: ``--jobs`` /
    ``--scheduler`` (:func:`add_parallel_options`), ``--resume`` and ``--max-memory``
    (:func:`add_campaign_options`), ``--force``, ``--json`` (``json_help``) and ``--quiet``."""
    add_parallel_options(p)
    add_campaign_options(p)
    add_force_option(p)
    add_json_options(p, json_help)


def add_parallel_options(p: Any) -> None:
    """``--jobs N`` and ``--scheduler ADDRESS`` (shared by bracket, audit and supports)."""
    how = p.add_mutually_exclusive_group()
    how.add_argument("--jobs", type=int, default=1, metavar="N",
                     help="operators solved at a time in worker processes (default 1; 0 = one per CPU)")
    how.add_argument("--scheduler", metavar="tls://HOST:PORT",
                     help="run the tasks on this Dask scheduler (softrank-cert installed on its workers; TLS and "
                          "who is trusted: docs/campaigns.md)")


#: The default search bound (the driver's :func:`~softrank_cert.solvers.work.default_work`, whose
#: wall time on the calibration machine is
#: :func:`~softrank_cert.solvers.bracket.default_budget_seconds`; written out here so that
#: ``--help`` does not import the solvers -- ``tests/test_api.py`` checks that they agree).
DEFAULT_BUDGET_HELP = ("default: a fixed amount of work, the same ends on a busy machine, which takes 16 s x "
                       "(m N / 128^2)^0.7 on a quiet one, between 4 and 600 s: 4 s at 32 x 32, about 6 s at 64 x 64, "
                       "16 s at 128 x 128, 42 s at 256 x 256, 111 s at 512 x 512")
#: Help of ``--work``.
WORK_HELP = ("search work per operator in work units (one unit: about a million floating-point operations of the "
             "solvers, counted by formula, never timed), all tolerances together; default 112000 at 128 x 128, "
             "about 1.56 million at 512 x 512 (the work of the default budget); the same --work gives the same "
             "ends however busy the machine")


def budget_help(what: str) -> str:
    """Help text of a ``--budget-seconds`` option: ``what`` it bounds, then the default."""
    return (f"{what}: a wall-time cap (then the ends may depend on how busy the machine is; 'inf': no cap). "
            f"Alone it replaces the work bound; with --work, whichever runs out first ({DEFAULT_BUDGET_HELP}; "
            f"the best verified ends found by then are kept)")


def add_budget_options(p: Any, what: str) -> None:
    """``--work N`` and ``--budget-seconds S`` of a command that runs the solvers."""
    p.add_argument("--work", type=float, metavar="N", help=WORK_HELP)
    p.add_argument("--budget-seconds", type=float, metavar="S", help=budget_help(what))


#: Help of ``--device`` (the choices of :data:`softrank_cert.solvers.device.DEVICE_CHOICES`).
DEVICE_HELP = ("where the untrusted search runs: numpy (the default), cpu (torch on the CPU; numpy when torch is not "
               "installed), cuda or cuda:N (torch on a CUDA device; refused without one), auto (cuda when there is "
               "one, else numpy); the kernel decides every end on the CPU either way, and the certificate records "
               "the device (docs/solvers.md, 'Devices')")


def add_device_option(p: Any) -> None:
    """``--device`` of a command that runs the solvers."""
    p.add_argument("--device", metavar="DEVICE", help=DEVICE_HELP)


def stdout_console():
    """Console for tables: the terminal's width; when piped, ``$COLUMNS`` if it is set, else a wide
    fixed width (no folded names)."""
    import sys

    from rich.console import Console

    if sys.stdout.isatty():
        return Console()
    columns = os.environ.get("COLUMNS", "")
    return Console(width=int(columns) if columns.isdigit() and int(columns) >= 40 else 200)


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
        justify: Literal["left", "right"] = "right" if column in right else "left"
        if column == name_column:
            table.add_column(column, justify=justify, width=width, no_wrap=True, overflow="fold")
        else:
            table.add_column(column, justify=justify, overflow="fold")
    return table, lambda name: shown.get(name, safe_text(name))


# --------------------------------------------------------------------------------------
# Output options (the checks and the atomic writes: softrank_cert.util.files)
# --------------------------------------------------------------------------------------

#: What every ``--plot`` option's help says about the figure formats (``PLOT_SUFFIXES`` of
#: ``softrank_cert.plumbing.plotting``: matplotlib writes each without extra packages).
PLOT_HELP = "PNG, PDF or SVG as the file name's suffix says (.png, .pdf, .svg)"


def check_distinct_outputs(outputs: dict[str, Path | None], inputs: dict[str, Path] | None = None) -> None:
    """No two output options may name the same file, and no output may overwrite an input
    (option -> path; None = not given): compared by :func:`~softrank_cert.util.files.same_file`."""
    from ..util.files import check_not_input, same_file

    given = [(option, path) for option, path in outputs.items() if path is not None]
    for i, (option, path) in enumerate(given):
        for earlier, other in given[:i]:
            if same_file(path, other):
                raise InvalidInputError(f"{earlier} and {option} name the same file {path}")
        check_not_input(path, option, inputs)


#: What every ``--force`` option's help says.
FORCE_HELP = ("replace output files that exist already (never an input of this command, nor a key file: those are "
              "refused with or without --force)")


def add_force_option(p: Any, help: str = FORCE_HELP) -> None:
    """``--force``: outputs that exist are replaced (else refused before any work, exit 2)."""
    p.add_argument("--force", action="store_true", help=help)


def key_inputs(key: str | None) -> dict[str, Path]:
    """The inputs ``--key FILE`` brings, which no output may replace: the private key and ``FILE.pub``."""
    return {"--key file": Path(key), "--key's public key file": Path(f"{key}.pub")} if key else {}
