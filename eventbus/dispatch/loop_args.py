"""The command-line options every worker loop shares (`drain_events`, `deliver_webhooks`)."""

from __future__ import annotations

from argparse import ArgumentParser, ArgumentTypeError
from collections.abc import Mapping
from typing import Any, TypedDict


class LoopOptions(TypedDict):
    """The parsed loop arguments, as the workers' options take them (`WorkerOptions(**...)`)."""

    batch_size: int
    poll_interval: float
    once: bool
    max_events: int | None
    listen: bool


def positive_int(value: str) -> int:
    """argparse type: an integer of at least 1."""
    number = int(value)
    if number < 1:
        raise ArgumentTypeError(f"must be at least 1, got {number}")
    return number


def threads(value: str) -> int | None:
    """argparse type: `auto` (None) or an integer of at least 1."""
    if value.strip().lower() == "auto":
        return None
    try:
        return positive_int(value)
    except ValueError:
        raise ArgumentTypeError(
            f"must be 'auto' or a whole number of at least 1, got {value!r}"
        ) from None


def positive_float(value: str) -> float:
    """argparse type: a number greater than 0."""
    number = float(value)
    if number <= 0:
        raise ArgumentTypeError(f"must be greater than 0, got {number}")
    return number


def add_loop_arguments(parser: ArgumentParser) -> None:
    """The worker-loop options shared by drain_events and deliver_webhooks."""
    parser.add_argument(
        "--batch-size",
        type=positive_int,
        default=100,
        help="Deliveries claimed per statement (default 100).",
    )
    parser.add_argument(
        "--poll-interval",
        type=positive_float,
        default=1.0,
        help="Seconds to wait when idle; NOTIFY wakes earlier (default 1).",
    )
    parser.add_argument("--once", action="store_true", help="Process what is due now, then exit.")
    parser.add_argument(
        "--max-events",
        type=positive_int,
        default=None,
        help="Exit after processing this many deliveries (each event of a batch counts).",
    )
    parser.add_argument(
        "--no-listen", action="store_true", help="Do not LISTEN for wake-ups; poll only."
    )


def loop_options(options: Mapping[str, Any]) -> LoopOptions:
    """The loop arguments `add_loop_arguments` declared, from a command's parsed options."""
    return LoopOptions(
        batch_size=options["batch_size"],
        poll_interval=options["poll_interval"],
        once=options["once"],
        max_events=options["max_events"],
        listen=not options["no_listen"],
    )
