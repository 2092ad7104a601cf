"""What a worker hands back: plain data as JSON bytes, read where the key is without unpickling.

A task that runs in another process (a ``--jobs`` worker, a Dask worker) sends its result as one
byte string, a *frame*: a JSON header line (the solver seconds and, for a task that raised, its
:class:`Failure`) and the JSON text of the result.  The process that signs reads that frame with
:func:`json.loads` and nothing else (:func:`read_frame`): no pickle stream a worker sends is ever
loaded there, so a worker cannot run code in it, whatever it sends.  The certificates inside are
then re-verified by that process's kernel, from the very bytes it writes
(:func:`~softrank_cert.plumbing.campaign.recheck_from_worker`).

The JSON is plain data with a few tags, so that results keep their Python types: a tuple is
``{"$tuple": [...]}``, bytes ``{"$bytes": BASE64}``, a path ``{"$path": STR}``, a float that JSON
cannot spell ``{"$float": "inf" | "-inf" | "nan"}``, a dict with keys that are not strings (or
that look like tags) ``{"$dict": [[KEY, VALUE], ...]}``, and a dataclass instance
``{"$data": "module.Class", "fields": {...}}``.  A dataclass is rebuilt only when its class is
one the reader names (``returns``); its constructor gets plain values.  Anything else (an
unknown tag, a class not named, NaN spelled the JavaScript way, nesting too deep, more than
:data:`MAX_RESULT_BYTES`) is a :class:`WireError`.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path, PurePath
from typing import Any

from ..errors import EXIT_INTERNAL, WireError

#: The largest frame the signing process reads from one worker (a certificate of a 2048-wide
#: operator at full rank is about 70 MiB of base64); a longer one is a failure of that task.
MAX_RESULT_BYTES = 1 << 30
#: The longest failure message kept from a worker (it is one line of a report).
MAX_MESSAGE = 2000


@dataclass(frozen=True)
class Failure:
    """An exception of a task, as a plain value (its class name, one line, an exit code)."""

    kind: str
    message: str
    exit_code: int


def _name(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def _plain(value: Any) -> Any:
    """``value`` as JSON data with the module docstring's tags (TypeError for anything else)."""
    import numpy as np

    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, (int, np.integer)) and not isinstance(value, np.bool_):
        return int(value)
    if isinstance(value, np.bool_):
        return bool(value)
    if isinstance(value, (float, np.floating)):
        return float(value) if math.isfinite(value) else {"$float": str(float(value))}
    if isinstance(value, list):
        return [_plain(item) for item in value]
    if isinstance(value, tuple):
        return {"$tuple": [_plain(item) for item in value]}
    if isinstance(value, (bytes, bytearray)):
        return {"$bytes": base64.b64encode(value).decode("ascii")}
    if isinstance(value, PurePath):
        return {"$path": str(value)}
    if isinstance(value, dict):
        if all(isinstance(key, str) and not key.startswith("$") for key in value):
            return {key: _plain(item) for key, item in value.items()}
        return {"$dict": [[_plain(key), _plain(item)] for key, item in value.items()]}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {"$data": _name(type(value)),
                "fields": {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value) if f.init}}
    raise TypeError(f"a {type(value).__name__} cannot be sent back from a worker (plain data only)")


def encode(value: Any) -> bytes:
    """The JSON bytes of ``value`` (plain data, tuples, bytes, paths, dataclasses: see the module)."""
    return json.dumps(_plain(value), separators=(",", ":"), allow_nan=False).encode("utf-8")


def _key(value: Any) -> Any:
    if isinstance(value, (list, dict)):
        raise WireError("a dict key that is a list or a dict")
    return value


def _restore(value: Any, returns: dict[str, type]) -> Any:
    if isinstance(value, list):
        return [_restore(item, returns) for item in value]
    if not isinstance(value, dict):
        return value
    tags = [key for key in value if key.startswith("$")]
    if not tags:
        return {key: _restore(item, returns) for key, item in value.items()}
    return _tagged(tags[0], value, returns)


def _tagged(tag: str, value: dict[str, Any], returns: dict[str, type]) -> Any:
    body = value[tag]
    if tag == "$data" and set(value) == {"$data", "fields"}:
        return _dataclass(body, value["fields"], returns)
    if len(value) != 1:
        raise WireError(f"a {tag} tag with other keys beside it")
    if tag == "$tuple" and isinstance(body, list):
        return tuple(_restore(item, returns) for item in body)
    if tag == "$bytes" and isinstance(body, str):
        try:
            return base64.b64decode(body, validate=True)
        except binascii.Error:
            raise WireError("bytes that are not base64") from None
    if tag == "$path" and isinstance(body, str):
        return Path(body)
    if tag == "$float" and body in ("inf", "-inf", "nan"):
        return float(body)
    if tag == "$dict" and isinstance(body, list) and all(isinstance(p, list) and len(p) == 2 for p in body):
        return {_key(_restore(k, returns)): _restore(v, returns) for k, v in body}
    raise WireError(f"an unknown or malformed tag {tag[:40]!r}")


def _dataclass(name: Any, fields: Any, returns: dict[str, type]) -> Any:
    cls = returns.get(name) if isinstance(name, str) else None
    if cls is None:
        raise WireError(f"a {str(name)[:80]!r} object, which this task does not return")
    known = {f.name for f in dataclasses.fields(cls) if f.init}
    if not isinstance(fields, dict) or not set(fields) <= known:
        raise WireError(f"a {cls.__name__} with fields it does not have")
    try:
        return cls(**{key: _restore(item, returns) for key, item in fields.items()})
    except (TypeError, ValueError) as exc:
        raise WireError(f"a {cls.__name__} that cannot be built: {' '.join(str(exc).split())[:200]}") from None


def _refuse_constant(name: str) -> Any:
    raise WireError(f"{name} is not JSON (a float that JSON cannot spell comes tagged)")


def decode(raw: bytes, returns: Sequence[type] = ()) -> Any:
    """The value that :func:`encode` wrote, read with :func:`json.loads` (never a pickle).

    ``returns``: the dataclasses the value may hold (others are refused).  Raises
    :class:`WireError` for anything else."""
    try:
        text = bytes(raw).decode("utf-8")
        return _restore(json.loads(text, parse_constant=_refuse_constant), {_name(c): c for c in returns})
    except WireError:
        raise
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise WireError(f"not JSON data ({type(exc).__name__})") from None


def frame(result: Any, seconds: float) -> bytes:
    """A worker's answer: the header line (seconds, a :class:`Failure` or null) and the result's
    JSON.  A result that is not plain data becomes the task's failure (a bug, exit 4)."""
    body = b""
    if not isinstance(result, Failure):
        try:
            body = encode(result)
        except (TypeError, ValueError, RecursionError) as exc:
            result = Failure(type(exc).__name__, f"in a worker: result not transferable: "
                             f"{' '.join(str(exc).split())[:200]}", EXIT_INTERNAL)
    failure = dataclasses.asdict(result) if isinstance(result, Failure) else None
    seconds = seconds if math.isfinite(seconds) else 0.0
    header = json.dumps({"seconds": seconds, "failure": failure}, allow_nan=False).encode("utf-8")
    return header + b"\n" + (b"" if failure else body)


def failure_kind(raw: bytes) -> str | None:
    """The failure kind a frame reports (None: a result, or no readable header)."""
    try:
        header = json.loads(raw.partition(b"\n")[0].decode("utf-8"))
        kind = header["failure"]["kind"]
    except (UnicodeDecodeError, ValueError, RecursionError, TypeError, KeyError, AttributeError):
        return None
    return kind if isinstance(kind, str) else None


def _failure(value: Any) -> Failure:
    if not (isinstance(value, dict) and set(value) == {"kind", "message", "exit_code"}):
        raise WireError("a failure that is not {kind, message, exit_code}")
    kind, message, code = value["kind"], value["message"], value["exit_code"]
    if not (isinstance(kind, str) and isinstance(message, str) and type(code) is int and 1 <= code <= 255):
        raise WireError("a failure with fields of the wrong types")
    return Failure(kind[:100], " ".join(message.split())[:MAX_MESSAGE], code)


def read_frame(raw: bytes, returns: Sequence[type] = ()) -> tuple[Any, float]:
    """``(result or Failure, seconds)`` of a worker's frame (:func:`frame`), read with json only.

    Seconds that are not a finite non-negative number read as 0 (they are bookkeeping).  Raises
    :class:`WireError` for a frame that is not one."""
    if len(raw) > MAX_RESULT_BYTES:
        raise WireError(f"a result of {len(raw)} bytes, more than {MAX_RESULT_BYTES}")
    head, newline, body = bytes(raw).partition(b"\n")
    header = decode(head)
    if not newline or not isinstance(header, dict) or set(header) != {"seconds", "failure"}:
        raise WireError("no header line {seconds, failure}")
    seconds = header["seconds"]
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or not math.isfinite(seconds) or seconds < 0:
        seconds = 0.0
    if header["failure"] is not None:
        return _failure(header["failure"]), float(seconds)
    return decode(body, returns), float(seconds)
