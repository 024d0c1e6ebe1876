"""`python3 -m dev COMMAND [ARGS...]`: see dev.cli."""

from __future__ import annotations

import sys

from dev.bootstrap import check_python
from dev.console import DevError, say


def run() -> int:
    """Check the interpreter first: the rest of the package needs Python 3.11 to import."""
    try:
        check_python()
    except DevError as exc:
        say(f"error: {exc}")
        return 1
    from dev.cli import main

    return main()


sys.exit(run())
