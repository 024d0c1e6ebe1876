"""The command-line options every worker loop shares (`drain_events`, `deliver_webhooks`)."""

from __future__ import annotations

from argparse import ArgumentParser, ArgumentTypeError


def positive_int(value: str) -> int:
    """argparse type: an integer of at least 1."""
    number = int(value)
    if number < 1:
        raise ArgumentTypeError(f"must be at least 1, got {number}")
    return number


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
        help="Exit after processing this many deliveries.",
    )
    parser.add_argument(
        "--no-listen", action="store_true", help="Do not LISTEN for wake-ups; poll only."
    )
