"""Where things live: the project root, ``../shared``, caches and outputs.

Paths are resolved from the installed package (``rag/`` sits in the project root), so notebooks
opened from ``notebooks/`` and the runner, whose working directory is the root, agree. Environment
variables override the defaults so an offline reader can point at their own folders.

One convention for every path parameter (notebooks, profiles, CLI), applied by :func:`resolve`: an
absolute path is used as it is; ``../shared/<rest>`` names ``<rest>`` in the shared data folder,
which is ``$RAG_SHARED_DIR`` when set (so a clone without ``../shared`` works, and a set variable
always wins over a ``../shared`` that happens to exist); any other relative path is relative to the
project root. :func:`display` writes paths back the same way.
"""

from __future__ import annotations

import os
from pathlib import Path

#: Environment variable naming the read-only shared data folder (default ``../shared``).
SHARED_ENV = "RAG_SHARED_DIR"
#: Environment variable naming the cache folder (default ``<root>/.cache``).
CACHE_ENV = "RAG_CACHE_DIR"
#: Environment variable naming a local folder of ``<arxiv_id>.pdf`` consulted before the network.
MIRROR_ENV = "RAG_PDF_MIRROR"


def project_root() -> Path:
    """The repository root (the folder holding ``pyproject.toml``)."""
    return Path(__file__).resolve().parent.parent


#: The prefix by which a path parameter names the shared data folder.
SHARED_PREFIX = "../shared"


def resolve(path: str | os.PathLike[str]) -> Path:
    """Resolve a path parameter: absolute as is, ``../shared/…`` in :func:`shared_dir`, any other
    relative path against the project root (see the module docstring)."""
    p = Path(path).expanduser()
    if p.is_absolute():
        return p
    if p.parts[:2] == ("..", "shared"):
        return shared_dir().joinpath(*p.parts[2:])
    return project_root() / p


def shared_dir() -> Path:
    """The read-only shared data folder (``$RAG_SHARED_DIR`` or ``../shared``)."""
    env = os.environ.get(SHARED_ENV)
    return Path(env).expanduser().resolve() if env else (project_root().parent / "shared").resolve()


def cache_dir(*parts: str) -> Path:
    """A folder under the cache root, created on demand."""
    env = os.environ.get(CACHE_ENV)
    root = Path(env).expanduser() if env else project_root() / ".cache"
    d = root.joinpath(*parts)
    d.mkdir(parents=True, exist_ok=True)
    return d


def default_mirror() -> Path | None:
    """The PDF mirror folder: ``$RAG_PDF_MIRROR``, else ``<shared>/corpus/pdfs`` if it exists."""
    env = os.environ.get(MIRROR_ENV)
    if env:
        return Path(env).expanduser().resolve()
    p = shared_dir() / "corpus" / "pdfs"
    return p if p.is_dir() else None


def display(path: str | os.PathLike[str]) -> str:
    """A path as it may be shown in a published report: relative to the root, never absolute.

    Paths outside the project are shown relative to the shared folder or by name only, so rendered
    notebooks never carry a local absolute path.
    """
    p = Path(path).resolve()
    for base, label in ((project_root(), "."), (shared_dir(), "../shared")):
        try:
            rel = p.relative_to(base)
        except ValueError:
            continue
        return label if str(rel) == "." else f"{label}/{rel}" if label != "." else str(rel)
    return f"<outside>/{p.name}"
