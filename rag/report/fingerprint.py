"""What an executed notebook depends on, hashed into one key, so ``rag report`` can skip it.

Like make, the runner re-executes a notebook only when one of its inputs changed since the run
that produced its outputs; unlike make, it compares contents, not file times. A notebook's key is
a sha256 over:

* its resolved parameters (JSON, sorted keys) and the notebook file's bytes;
* the package's code (:func:`code_version`: every ``rag/**/*.py``) and its report templates;
* the project's data files by content (:data:`PROJECT_INPUTS`: ``data/`` and the committed scale
  benchmark 03 reads), and the shared data folder by its resolved location and each file's path,
  size and modification time (97 MB of PDFs are not re-read to decide whether to skip);
* the Python version and the recorded package versions;
* the *names* of the provider API keys that are set (a set key adds the API rows), never values;
* the key of the notebook before it in the run, so a change upstream re-executes everything
  downstream;
* the cache's identity (:func:`cache_id`): a random id created once in the cache folder. The
  repository commits ``outputs/default/run.json`` with its keys, so without it a fresh clone
  would find every key matching and execute nothing; with it, a new (or emptied) cache
  re-executes everything, while a second run beside the same cache skips.

Only the final digest is stored (``run.json``), so no path, key value or cache id is published.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import secrets
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from rag import paths
from rag.llm.settings import KEY_ENV

#: Project files (relative to the root) whose content every notebook may read: the pinned
#: manifest, and the committed index benchmark that 03 plots.
PROJECT_INPUTS = ("data", "outputs/bench/scale.json")
#: Non-Python files under ``rag/`` that shape the rendered pages (relative to ``rag/``).
TEMPLATES = ("report/templates",)
#: The file under the cache root that holds the cache's random identity.
CACHE_ID_FILE = "cache-id"


def code_version(root: Path | None = None) -> str:
    """sha256 over every ``rag/**/*.py`` (path and content): any code change re-runs the cells.

    Uncommitted edits count too: they are what the kernels import.
    """
    root = root or paths.project_root() / "rag"
    h = hashlib.sha256()
    for f in sorted(root.rglob("*.py")):
        h.update(f.relative_to(root).as_posix().encode() + b"\0" + f.read_bytes() + b"\0")
    return h.hexdigest()[:16]


def _files(path: Path) -> list[Path]:
    if path.is_file():
        return [path]
    return sorted(f for f in path.rglob("*") if f.is_file()) if path.is_dir() else []


def content_version(rels: tuple[str, ...], root: Path | None = None) -> str:
    """sha256 over the relative path and bytes of every file under ``rels`` (absent ones count)."""
    root = root or paths.project_root()
    h = hashlib.sha256()
    for rel in rels:
        files = _files(root / rel)
        h.update(f"{rel}:{len(files)}\0".encode())
        for f in files:
            h.update(f.relative_to(root).as_posix().encode() + b"\0" + f.read_bytes() + b"\0")
    return h.hexdigest()


def shared_version(folder: Path | None = None) -> str:
    """sha256 over the shared folder's resolved location and each file's path, size and mtime."""
    folder = folder or paths.shared_dir()
    h = hashlib.sha256(str(folder.resolve()).encode() + b"\0")
    for f in _files(folder):
        st = f.stat()
        h.update(f"{f.relative_to(folder).as_posix()}\0{st.st_size}\0{st.st_mtime_ns}\0".encode())
    mirror = paths.default_mirror()
    h.update(b"mirror\0" + (str(mirror) if mirror else "").encode())
    return h.hexdigest()


def key_names(environ: Mapping[str, str] | None = None) -> list[str]:
    """Names of the provider API-key variables that are set (non-empty), as the LLM layer reads
    them (:func:`rag.llm.settings.keys_from_env`); the values are never looked at beyond that."""
    env = os.environ if environ is None else environ
    return sorted(v for v in KEY_ENV.values() if env.get(v, "").strip())


def cache_id() -> str:
    """The cache folder's identity: a random id written once to ``<cache root>/cache-id``.

    Created atomically: the id is written to a private file, then hard-linked to its name, which
    fails if another process got there first; then everyone reads the one that won.
    """
    root = paths.cache_dir()
    target = root / CACHE_ID_FILE
    if not target.exists():
        tmp = root / f".{CACHE_ID_FILE}.{os.getpid()}.{secrets.token_hex(4)}"
        tmp.write_text(secrets.token_hex(16) + "\n", encoding="utf-8")
        try:
            os.link(tmp, target)
        except FileExistsError:
            pass
        except OSError:  # a file system without hard links: exclusive create, then write
            try:
                fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
            except FileExistsError:
                pass
            else:
                with os.fdopen(fd, "w", encoding="utf-8") as f:
                    f.write(tmp.read_text(encoding="utf-8"))
        finally:
            tmp.unlink(missing_ok=True)
    return target.read_text(encoding="utf-8").strip()


def run_inputs(packages: Mapping[str, str]) -> dict[str, Any]:
    """The inputs shared by every notebook of one run (computed once per run, in well under 1 s).

    Args:
        packages: the recorded package versions (``rag.report.runner.package_versions()``).
    """
    return {
        "code": code_version(),
        "templates": content_version(TEMPLATES, paths.project_root() / "rag"),
        "project_data": content_version(PROJECT_INPUTS),
        "shared_data": shared_version(),
        "python": platform.python_version(),
        "packages": dict(packages),
        "api_keys_set": key_names(),
        "cache": cache_id(),
    }


def notebook_key(
    inputs: Mapping[str, Any], parameters: Mapping[str, Any], notebook: Path, upstream: str
) -> str:
    """The key of one notebook: its parameters and bytes, the run's inputs and the upstream key."""
    h = hashlib.sha256()
    for part in (
        json.dumps(dict(inputs), sort_keys=True, default=str),
        json.dumps(dict(parameters), sort_keys=True, default=str),
        hashlib.sha256(notebook.read_bytes()).hexdigest(),
        upstream,
    ):
        h.update(part.encode() + b"\0")
    return h.hexdigest()
