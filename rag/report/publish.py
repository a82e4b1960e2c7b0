"""Publishing safety: nothing secret or machine-specific reaches a rendered report.

Rendered notebooks and HTML are published (committed, blogged), so before the runner writes them it
scrubs API-key-shaped strings, the value of every ``*_API_KEY`` / ``*_TOKEN`` environment variable,
and absolute local paths (project root → ``.``, the shared folder → ``../shared``, home → ``~``).
Every replacement is counted and reported in ``run.json``; ``strict=True`` refuses instead.

JSON files (notebooks, ``run.json``) are scrubbed string by string — parsed, replaced inside each
value, serialised again — never as raw JSON text, where a path pattern would swallow the backslash
that escapes the quote after an absolute-path parameter and corrupt the file. Terminal colour codes
(ANSI escapes, as in every traceback of a failed notebook) count as a boundary before a path.
:func:`publish_file` writes only the scrubbed copy, so the runner executes notebooks in a staging
folder and nothing unscrubbed ever reaches the outputs, even from a failed or interrupted run.
"""

from __future__ import annotations

import json
import os
import re
import sys
import tempfile
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rag import paths
from rag.errors import PublishError

#: Key shapes of the providers this project talks to (OpenAI, Anthropic, Groq, Hugging Face).
KEY_PATTERNS: dict[str, re.Pattern[str]] = {
    "anthropic_key": re.compile(r"sk-ant-[A-Za-z0-9_\-]{10,}"),
    "openai_key": re.compile(r"sk-(?:proj-|svcacct-)?[A-Za-z0-9_\-]{20,}"),
    "groq_key": re.compile(r"gsk_[A-Za-z0-9]{20,}"),
    "hf_token": re.compile(r"hf_[A-Za-z0-9]{30,}"),
}
#: Environment variables whose values are secrets wherever they appear.
SECRET_ENV = re.compile(r".*(_API_KEY|_TOKEN|_SECRET)$")
#: Absolute paths under these roots are machine-specific even outside the project.
_NOT_AFTER = r"(?<![\w.~+/=\-])"
_GENERIC_PATH = re.compile(
    _NOT_AFTER
    + r"/(?:root|home/[A-Za-z0-9_.\-]+|work|Users/[A-Za-z0-9_.\-]+)(?![\w.\-])(?:/[^\s\"'<>)\]]*)?"
)

REDACTED = "[REDACTED]"
#: ANSI escape sequences (colour codes in tracebacks), raw or as they appear JSON-escaped in text.
ANSI = re.compile(r"(?:\x1b|\\u001b|\\x1b|\\033)\[[0-9;?]*[A-Za-z]")


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


def _path_replacements() -> list[tuple[str, str, str]]:
    """(absolute prefix, replacement, kind), longest prefix first so nested roots win."""
    pairs = [
        (str(paths.project_root()), ".", "project_path"),
        (str(paths.shared_dir()), "../shared", "shared_path"),
        (str(Path(sys.prefix)), "<venv>", "venv_path"),
        (str(Path(tempfile.gettempdir())), "<tmp>", "tmp_path"),
        (str(Path.home()), "~", "home_path"),
    ]
    cache_env = os.environ.get(paths.CACHE_ENV)
    if cache_env:
        pairs.append((str(Path(cache_env).expanduser().resolve()), "<cache>", "cache_path"))
    pairs = [(p, r, k) for p, r, k in pairs if p not in ("/", "")]
    return sorted(pairs, key=lambda t: len(t[0]), reverse=True)


def secret_values(env: Mapping[str, str] | None = None) -> list[str]:
    """Values of secret-looking environment variables (8+ characters, to avoid false hits)."""
    env = os.environ if env is None else env
    return sorted(
        {v for k, v in env.items() if SECRET_ENV.match(k) and len(v) >= 8}, key=len, reverse=True
    )


def scrub(text: str, env: Mapping[str, str] | None = None) -> tuple[str, ScrubReport]:
    """Return ``text`` with secrets and absolute local paths replaced, and what was replaced.

    The text between ANSI escape sequences is scrubbed piece by piece, so a colour code right
    before a path (``\x1b[0;32m/home/...``) does not hide the path from the patterns.
    """
    report = ScrubReport()
    pieces = ANSI.split(text)
    if len(pieces) > 1:
        codes = ANSI.findall(text)
        out = []
        for i, piece in enumerate(pieces):
            clean, r = _scrub_plain(piece, env)
            report.merge(r)
            out.append(clean)
            if i < len(codes):
                out.append(codes[i])
        return "".join(out), report
    return _scrub_plain(text, env)


def _scrub_plain(text: str, env: Mapping[str, str] | None) -> tuple[str, ScrubReport]:
    report = ScrubReport()
    for value in secret_values(env):
        n = text.count(value)
        if n:
            text = text.replace(value, REDACTED)
            report.counts["env_secret"] += n
    for kind, pattern in KEY_PATTERNS.items():
        text, n = pattern.subn(REDACTED, text)
        if n:
            report.counts[kind] += n
    for prefix, repl, kind in _path_replacements():
        # Only whole path prefixes: not inside base64 image data or a longer path segment.
        pattern = re.compile(_NOT_AFTER + re.escape(prefix) + r"(?![\w.\-])")
        text, n = pattern.subn(repl.replace("\\", "\\\\"), text)
        if n:
            report.counts[kind] += n
    text, n = _GENERIC_PATH.subn("<local-path>", text)
    if n:
        report.counts["other_abs_path"] += n
    return text, report


def scrub_json(value: Any, env: Mapping[str, str] | None = None) -> tuple[Any, ScrubReport]:
    """A parsed JSON value with every string (keys included) scrubbed, and what was replaced."""
    report = ScrubReport()

    def walk(v: Any) -> Any:
        if isinstance(v, str):
            clean, r = scrub(v, env)
            report.merge(r)
            return clean
        if isinstance(v, list):
            return [walk(x) for x in v]
        if isinstance(v, dict):
            return {walk(k): walk(x) for k, x in v.items()}
        return v

    return walk(value), report


def scrub_text_of(
    path: Path, text: str, env: Mapping[str, str] | None = None
) -> tuple[str, ScrubReport]:
    """Scrub a file's text: string by string for ``.ipynb`` / ``.json``, as plain text otherwise.

    A notebook is serialised as nbformat writes it (indent 1, sorted keys, UTF-8), so a clean
    notebook keeps its bytes and a scrubbed one stays valid.
    """
    if path.suffix not in (".ipynb", ".json"):
        return scrub(text, env)
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        # A file cut short by a kill: no JSON to walk, so scrub the text (it is not published
        # as a notebook anyway; the runner only stages it).
        return scrub(text, env)
    clean, report = scrub_json(data, env)
    if not report:
        return text, report
    if path.suffix == ".ipynb":
        return json.dumps(clean, indent=1, sort_keys=True, ensure_ascii=False) + "\n", report
    return json.dumps(clean, indent=2, sort_keys=True, ensure_ascii=False) + "\n", report


def publish_file(
    src: Path, dst: Path, *, strict: bool = False, env: Mapping[str, str] | None = None
) -> ScrubReport:
    """Write a scrubbed copy of ``src`` to ``dst`` (atomically); ``src`` is left as it is.

    With ``strict`` raise :class:`PublishError` instead, and write nothing.
    """
    text = src.read_text(encoding="utf-8", errors="replace")
    clean, report = scrub_text_of(dst, text, env)
    if report and strict:
        raise PublishError(
            f"{paths.display(dst)} would publish {report.to_dict()}; remove the secret or "
            "absolute path from the notebook output, or run without --strict to scrub it"
        )
    if src == dst and clean == text:
        return report
    dst.parent.mkdir(parents=True, exist_ok=True)
    tmp = dst.with_name(f".{dst.name}.publishing")
    tmp.write_text(clean, encoding="utf-8")
    os.replace(tmp, dst)
    return report


def scrub_file(
    path: Path, *, strict: bool = False, env: Mapping[str, str] | None = None
) -> ScrubReport:
    """Scrub a text file in place; with ``strict`` raise :class:`PublishError` instead of fixing."""
    return publish_file(path, path, strict=strict, env=env)
