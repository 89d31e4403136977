"""The ``hrag`` command line.

``core`` is the application (its root command, how every failure ends, what
the commands share), ``output`` what they print, ``user_commands`` and
``operator_commands`` the commands themselves.
"""

from __future__ import annotations

import sys

from . import operator_commands, user_commands  # noqa: F401 - importing them registers their commands
from .core import EXIT_INTERRUPTED, app, clear_errors, report_interrupt

# --help lists a user's commands first, then an operator's (stable: each module's order is kept).
app.registered_commands.sort(key=lambda command: command.callback.__module__ != user_commands.__name__)


def main() -> None:
    try:
        app()
    except KeyboardInterrupt:  # Ctrl-C outside a command (while typer sets up): still one line
        report_interrupt()
        sys.exit(EXIT_INTERRUPTED)


__all__ = ["app", "clear_errors", "main"]
