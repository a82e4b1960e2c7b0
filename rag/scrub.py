"""One scrubber for everything shown or published: secrets and absolute local paths out of text.

Published reports (:mod:`rag.report.publish`) and the service's error messages and logs
(:mod:`rag.serve.guard`) both pass through :func:`scrub`, which replaces

* secrets: values passed in ``secrets``, the value of every ``*_API_KEY`` / ``*_TOKEN`` /
  ``*_SECRET`` environment variable (8+ characters) and provider key shapes → ``***``;
* known local roots, wherever a path starts (also right after ``/``, ``=`` or a colour code):
  the project root (a path under it becomes relative, the root alone ``.``), the shared folder →
  ``../shared``, the venv → ``<venv>``, the temp folder → ``<tmp>``, ``$RAG_CACHE_DIR`` →
  ``<cache>``, home → ``~``;
* any other absolute path of two or more segments, or under ``/root``, ``/home``, ``/work`` or
  ``/Users`` → ``<path>``. URLs (``scheme://host/...``) and base64 data (runs of 64+ base64
  characters mixing cases and digits, as in embedded images) are left alone, so a ``/`` inside an
  image is never taken for a path.

Every replacement is counted by kind in a :class:`ScrubReport` (never the replaced values).
"""

from __future__ import annotations

import os
import re
import sys
import tempfile
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from rag import paths

#: What every secret is replaced by.
REDACTED = "***"
#: What an absolute path outside the known roots is replaced by.
PATH_PLACEHOLDER = "<path>"
#: Key shapes of the providers this project talks to (OpenAI, Anthropic, Groq, Hugging Face).
KEY_PATTERNS: dict[str, re.Pattern[str]] = {
    "anthropic_key": re.compile(r"sk-ant-[A-Za-z0-9_\-]{10,}"),
    "openai_key": re.compile(r"sk-(?:proj-|svcacct-)?[A-Za-z0-9_\-]{20,}"),
    "groq_key": re.compile(r"gsk_[A-Za-z0-9]{20,}"),
    "hf_token": re.compile(r"hf_[A-Za-z0-9]{30,}"),
}
#: Environment variables whose names end so hold secrets, wherever their values appear.
SECRET_SUFFIXES = ("_API_KEY", "_TOKEN", "_SECRET")
#: ANSI escape sequences (colour codes in tracebacks), raw or as they appear JSON-escaped in text.
ANSI = re.compile(r"(?:\x1b|\\u001b|\\x1b|\\033)\[[0-9;?]*[A-Za-z]")
#: A raw ANSI control sequence (CSI), as a terminal receives it.
ANSI_RAW = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]")
#: Top folders whose paths are machine-specific even with one segment (``/root``, ``/work``).
MACHINE_ROOTS = ("root", "home", "work", "Users")

#: Labels put in place of a root: the rest of a path after one is already relative (scrubbing twice
#: changes nothing).
LABELS = ("<tmp>", "<venv>", "<cache>", PATH_PLACEHOLDER)
#: A path starts where no word, dotted name, ``~``, ``+``, ``-``, URL scheme (``x:``, ``x:/``) or
#: label precedes.
_START = r"(?<![\w.~+\-:])(?<!:/)" + "".join(rf"(?<!{re.escape(label)})" for label in LABELS)
_ABS_PATH = r"(?:/[\w.\-+@~]+)+/?"
#: Base64 runs: long, and mixing upper case, lower case and digits (paths rarely do all three).
_BASE64 = re.compile(r"[A-Za-z0-9+/]{64,}={0,2}")


@dataclass
class ScrubReport:
    """What was replaced, by kind (never the replaced values themselves)."""

    counts: Counter = field(default_factory=Counter)

    def __bool__(self) -> bool:
        return sum(self.counts.values()) > 0

    def merge(self, other: ScrubReport) -> None:
        self.counts.update(other.counts)

    def to_dict(self) -> dict[str, int]:
        return dict(sorted(self.counts.items()))


def known_roots() -> tuple[tuple[str, str, str], ...]:
    """(absolute root, label, kind) of the local folders with a readable label, longest first."""
    env = os.environ
    return _known_roots(
        env.get(paths.SHARED_ENV), env.get(paths.CACHE_ENV), env.get("HOME"),
        tempfile.gettempdir(), sys.prefix,
    )  # fmt: skip


@lru_cache(maxsize=16)
def _known_roots(
    shared_env: str | None, cache_env: str | None, home_env: str | None, tmp: str, prefix: str
) -> tuple[tuple[str, str, str], ...]:
    # the arguments are what the roots depend on: a changed variable is a new cache entry
    pairs = [
        (str(paths.project_root()), ".", "project_path"),
        (str(paths.shared_dir()), "../shared", "shared_path"),
        (str(Path(prefix)), "<venv>", "venv_path"),
        (tmp, "<tmp>", "tmp_path"),
        (str(Path(tmp).resolve()), "<tmp>", "tmp_path"),
        (str(Path.home()), "~", "home_path"),
    ]
    if cache_env:
        pairs.append((str(Path(cache_env).expanduser().resolve()), "<cache>", "cache_path"))
    unique = {p: (p, r, k) for p, r, k in pairs if p not in ("/", "")}
    return tuple(sorted(unique.values(), key=lambda t: len(t[0]), reverse=True))


def secret_values(env: Mapping[str, str] | None = None) -> list[str]:
    """Values of secret-looking environment variables (8+ characters, to avoid false hits)."""
    env = os.environ if env is None else env
    values = {env[k] for k in env if k.endswith(SECRET_SUFFIXES)}
    return sorted((v for v in values if len(v) >= 8), key=len, reverse=True)


def strip_ansi(text: str) -> str:
    """``text`` without terminal control sequences (colour codes)."""
    return ANSI_RAW.sub("", text)


@lru_cache(maxsize=8)
def _path_pattern(roots: tuple[tuple[str, str, str], ...]) -> re.Pattern[str]:
    alternatives = "|".join(re.escape(root) for root, _, _ in roots)
    known = rf"(?P<root>{alternatives})(?:(?P<slash>/)|(?![\w.\-]))" if alternatives else "(?!)"
    return re.compile(rf"{_START}(?:{known}|(?P<path>{_ABS_PATH}))")


def _is_base64(run: str) -> bool:
    return (
        any(c.isupper() for c in run) and any(c.islower() for c in run)
        and any(c.isdigit() for c in run)
    )  # fmt: skip


def scrub(
    text: str, env: Mapping[str, str] | None = None, secrets: Iterable[str] = ()
) -> tuple[str, ScrubReport]:
    """Return ``text`` with secrets and absolute local paths replaced, and what was replaced.

    Args:
        text: any text (a message, a log line, one string of a notebook, a rendered page).
        env: environment whose secret-looking variables are scrubbed (default ``os.environ``).
        secrets: further values to scrub (e.g. the service's API key).

    The text between ANSI escape sequences is scrubbed piece by piece, so a colour code right
    before a path (``\\x1b[0;32m/home/...``) does not hide the path.
    """
    report = ScrubReport()
    pieces = ANSI.split(text)
    if len(pieces) == 1:
        return _scrub_plain(text, env, tuple(secrets), report), report
    codes = ANSI.findall(text)
    out = []
    for i, piece in enumerate(pieces):
        out.append(_scrub_plain(piece, env, tuple(secrets), report))
        if i < len(codes):
            out.append(codes[i])
    return "".join(out), report


def _scrub_plain(
    text: str, env: Mapping[str, str] | None, secrets: tuple[str, ...], report: ScrubReport
) -> str:
    for value in secrets:
        n = text.count(value) if value else 0
        if n:
            text = text.replace(value, REDACTED)
            report.counts["secret"] += n
    for value in secret_values(env):
        n = text.count(value)
        if n:
            text = text.replace(value, REDACTED)
            report.counts["env_secret"] += n
    for kind, pattern in KEY_PATTERNS.items():
        text, n = pattern.subn(REDACTED, text)
        if n:
            report.counts[kind] += n
    roots = known_roots()
    labels = {root: (label, kind) for root, label, kind in roots}
    pattern = _path_pattern(roots)

    def replace(m: re.Match[str], in_base64: bool) -> str:
        if m.group("root") is not None:
            label, kind = labels[m.group("root")]
            report.counts[kind] += 1
            if m.group("slash"):
                return "" if label == "." else label + "/"
            return label
        path = m.group("path")
        segments = path.strip("/").split("/")
        if in_base64 or (len(segments) < 2 and segments[0] not in MACHINE_ROOTS):
            return path
        report.counts["other_abs_path"] += 1
        return PATH_PLACEHOLDER

    out, last = [], 0
    for run in _BASE64.finditer(text):
        if not _is_base64(run.group()):
            continue
        out.append(pattern.sub(lambda m: replace(m, False), text[last : run.start()]))
        out.append(pattern.sub(lambda m: replace(m, True), run.group()))
        last = run.end()
    out.append(pattern.sub(lambda m: replace(m, False), text[last:]))
    return "".join(out)
