"""What a notebook shows of the lab: its records, tables and figures, not the machinery behind them.

In a Jupyter kernel, every stderr write becomes a red box under the cell: tqdm's warning that
``ipywidgets`` is missing (carrying the local path of tqdm), text progress bars ("Loading weights"),
the blank strip a closed bar leaves. :func:`quiet_methods` makes each public method of a lab class
run with ``sys.stderr`` set aside, so a cell shows what the method returns; progress still shows as
a widget where ``ipywidgets`` is installed (``tqdm.auto`` draws widgets with display messages, not
on stderr), and what was set aside is logged at debug level (logger ``rag.lab.notebook``).

A bad argument raises :class:`rag.serve.desk.ToolInputError` (a :class:`~rag.errors.ConfigError`)
whose message names the value and the fix; :func:`show_errors_briefly` has the kernel show such
errors as that message alone, not behind the frames of the lab's own code. Outside a Jupyter
kernel (scripts, the CLI, tests) both do nothing.
"""

from __future__ import annotations

import contextlib
import functools
import io
import logging
import sys
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

log = logging.getLogger(__name__)

T = TypeVar("T", bound=type)


def kernel_shell() -> Any | None:
    """The IPython shell of a Jupyter kernel this process runs, else None (IPython unimported)."""
    ipython = sys.modules.get("IPython")
    shell = ipython.get_ipython() if ipython is not None else None
    return shell if getattr(shell, "kernel", None) is not None else None


@contextlib.contextmanager
def stderr_aside() -> Iterator[None]:
    """In a Jupyter kernel, hold what is written to ``sys.stderr`` (and log it at debug level)."""
    if kernel_shell() is None:
        yield
        return
    held = io.StringIO()
    try:
        with contextlib.redirect_stderr(held):
            yield
    finally:
        if held.getvalue().strip():
            log.debug("set aside from stderr: %s", held.getvalue().strip())


def quiet_methods(cls: T) -> T:
    """Class decorator: every public method (and ``__init__``) runs inside :func:`stderr_aside`."""
    for name, fn in list(vars(cls).items()):
        if callable(fn) and (name == "__init__" or not name.startswith("_")):
            setattr(cls, name, _quiet(fn))
    return cls


def _quiet(fn: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(fn)
    def call(*args: Any, **kwargs: Any) -> Any:
        with stderr_aside():
            return fn(*args, **kwargs)

    return call


def _brief(shell: Any, etype: type, value: BaseException, tb: Any, tb_offset: Any = None) -> list:
    stb = [f"{etype.__name__}: {value}"]
    shell._showtraceback(etype, value, stb)  # the kernel's hook that publishes an error output
    return stb


def show_errors_briefly() -> None:
    """In a Jupyter kernel with no custom exception handler of its own, show an input error
    (:class:`~rag.errors.ConfigError`, :class:`~rag.errors.RetrievalError`) as ``Name: message``:
    its message names the bad value and the fix, and its frames are the lab's own."""
    shell = kernel_shell()
    if shell is None or shell.custom_exceptions:
        return
    from rag.errors import ConfigError, RetrievalError

    shell.set_custom_exc((ConfigError, RetrievalError), _brief)
