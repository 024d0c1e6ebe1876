"""A failed handler's traceback as the attempt log keeps it: bounded and redacted.

Recorded once per failed attempt (the nack writes it with the attempt row, nothing on success)
and shown collapsed in the console with the innermost frame's `file:line` in view. The text goes
through the log redaction (core.redaction: secrets, e-mails, phones, CPFs, wherever they occur
in a message or a source line) and is cut to `MAX_CHARS`, keeping its head and its tail (the
innermost frames and the exception are at the end). Frames carry no local variables.
"""

from __future__ import annotations

import re
import traceback
from dataclasses import dataclass

from core.redaction import redact_text

MAX_CHARS = 8000
HEAD_CHARS = 600  # the outermost frames kept when the middle is cut
_FRAME = re.compile(r'^\s*File "(?P<file>[^"]+)", line (?P<line>\d+), in (?P<function>.+)$', re.M)


def capture(exc: BaseException) -> str:
    """The redacted, bounded traceback of a raised exception ('' when it was never raised: a
    timeout the watchdog made up has no frames)."""
    if exc.__traceback__ is None:
        return ""
    try:
        text = "".join(traceback.format_exception(exc))
    except Exception:  # a broken __str__ or source file: the error text is recorded anyway
        return ""
    return bounded(redact_text(text))


def bounded(text: str, limit: int = MAX_CHARS) -> str:
    """`text` when short enough, else its head and tail around a note of what was cut."""
    if len(text) <= limit:
        return text
    cut = len(text) - limit
    return f"{text[:HEAD_CHARS]}\n  ... {cut} characters cut ...\n{text[HEAD_CHARS + cut :]}"


@dataclass(frozen=True)
class Frame:
    file: str
    line: int
    function: str

    @property
    def where(self) -> str:
        """'handlers.py:42': the file's last path part and the line."""
        return f"{self.file.rsplit('/', 1)[-1]}:{self.line}"


def last_frame(text: str | None) -> Frame | None:
    """The innermost frame of a recorded traceback (the last `File "...", line N` line)."""
    frames = _FRAME.findall(text or "")
    if not frames:
        return None
    file, line, function = frames[-1]
    return Frame(file, int(line), function.strip())
