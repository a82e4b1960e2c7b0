"""Kernels that can start in parallel: a private connection file and a retried start.

Papermill picks a kernel's five ZMQ ports by binding port 0 and releasing it, then writes them to a
connection file in the shared Jupyter runtime folder; when several kernels start at once another
process can take a port between the release and the kernel's own bind, and the kernel dies before
it answers (papermill issue #511, "Address already in use" / "Kernel died before replying to
kernel_info"). :class:`IsolatedKernelManager` removes the race and covers what remains:

* the kernel talks over IPC sockets (``transport="ipc"``) that live in a folder of its own, with
  its connection file beside them, so no two kernels can ever share a port or a file name;
* a start counts only once the kernel has answered ``kernel_info``; a start that fails is cleaned
  up and retried with a fresh folder (tenacity, exponential back-off, :data:`START_ATTEMPTS`).

Pass it to papermill as ``kernel_manager_class=IsolatedKernelManager`` (an nbclient engine
argument); ``rag sweep`` does so for every cell.
"""

from __future__ import annotations

import logging
import shutil
import tempfile
from pathlib import Path
from typing import Any

from jupyter_client.manager import AsyncKernelManager
from tenacity import AsyncRetrying, before_sleep_log, stop_after_attempt, wait_exponential

log = logging.getLogger(__name__)

#: Attempts at starting one kernel before the cell fails.
START_ATTEMPTS = 4
#: Seconds a started kernel has to answer ``kernel_info`` before the start counts as failed.
READY_TIMEOUT_S = 60.0


class IsolatedKernelManager(AsyncKernelManager):
    """An ``AsyncKernelManager`` whose kernel gets its own IPC sockets and a retried start."""

    def _isolate(self) -> None:
        """Point transport, socket prefix and connection file into a fresh private folder."""
        # unix socket paths are limited to ~107 bytes: keep the folder short, under the temp dir
        self._private_dir = Path(tempfile.mkdtemp(prefix="rk-"))
        self.transport = "ipc"
        self.ip = str(self._private_dir / "k")
        self.connection_file = str(self._private_dir / "kernel.json")
        for port in ("shell_port", "iopub_port", "stdin_port", "hb_port", "control_port"):
            setattr(self, port, 0)
        self._connection_file_written = False

    async def _start_once(self, **kw: Any) -> None:
        """Start the kernel and wait until it answers; a kernel that does not is shut down."""
        self._isolate()
        await super().start_kernel(**kw)
        client = self.client()
        try:
            client.start_channels()
            await client.wait_for_ready(timeout=READY_TIMEOUT_S)
        except BaseException:
            client.stop_channels()
            await self._discard()
            raise
        client.stop_channels()

    async def _discard(self) -> None:
        """Stop a half-started kernel and remove its folder, so the next attempt starts clean."""
        try:
            if self.has_kernel:
                await self.shutdown_kernel(now=True)
        except Exception:  # noqa: BLE001 - the kernel may already be gone; cleanup goes on
            log.debug("kernel already gone", exc_info=True)
        await self.cleanup_resources()
        shutil.rmtree(getattr(self, "_private_dir", ""), ignore_errors=True)

    async def start_kernel(self, **kw: Any) -> None:  # type: ignore[override]
        """Start the kernel; retry a failed start up to :data:`START_ATTEMPTS` times."""
        async for attempt in AsyncRetrying(
            stop=stop_after_attempt(START_ATTEMPTS),
            wait=wait_exponential(multiplier=0.5, max=8),
            before_sleep=before_sleep_log(log, logging.WARNING),
            reraise=True,
        ):
            with attempt:
                self.start_attempts = attempt.retry_state.attempt_number
                await self._start_once(**kw)

    async def _async_cleanup_resources(self, restart: bool = False) -> None:
        """Remove the connection file and sockets, then the private folder (not on a restart)."""
        await super()._async_cleanup_resources(restart=restart)
        if not restart and getattr(self, "_private_dir", None):
            shutil.rmtree(self._private_dir, ignore_errors=True)

    # shutdown_kernel calls the private coroutine, nbclient the public name: both remove the folder
    cleanup_resources = _async_cleanup_resources  # type: ignore[assignment]
