"""Publishing safety: nothing secret or machine-specific reaches a rendered report.

Rendered notebooks and HTML are published (committed, blogged), so before the runner writes them it
scrubs API-key-shaped strings, the value of every ``*_API_KEY`` / ``*_TOKEN`` environment variable,
and absolute local paths (project root → ``.``, the shared folder → ``../shared``, home → ``~``).
Every replacement is counted and reported in ``run.json``; ``strict=True`` refuses instead.
"""

from __future__ import annotations

import os
import re
import sys
import tempfile
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

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
    """Return ``text`` with secrets and absolute local paths replaced, and what was replaced."""
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


def scrub_file(
    path: Path, *, strict: bool = False, env: Mapping[str, str] | None = None
) -> ScrubReport:
    """Scrub a text file in place; with ``strict`` raise :class:`PublishError` instead of fixing."""
    text = path.read_text(encoding="utf-8")
    clean, report = scrub(text, env)
    if report and strict:
        raise PublishError(
            f"{paths.display(path)} would publish {report.to_dict()}; remove the secret or "
            "absolute path from the notebook output, or run without --strict to scrub it"
        )
    if clean != text:
        path.write_text(clean, encoding="utf-8")
    return report
