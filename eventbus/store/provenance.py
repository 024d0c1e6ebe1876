"""Who produced an event, and what caused it: set by the bus on every emit, never by the caller's
payload or metadata.

Every event's metadata holds `provenance`, one of

- `{"door": "api", "producer": "api_key:<prefix>"}`: an integrator, through `POST /api/v1/events`;
- `{"door": "pipeline", "producer": "pipeline:<id>", "execution_id": "<id>"}`: a pipeline's
  `emit-event` node;
- `{"door": "app", "producer": "app:<label>", "component": "<module or consumer:<name>>"}`: the
  platform's own code (a handler run names its consumer);
- `{"door": "app", "producer": "system", "component": "cron:<job>"}`: a scheduled job,

and, for an event a handler emitted, `causation_depth`: one more than the event it handled
(`causation_id` names that event; absent, the depth is 0). Past `EVENTBUS_MAX_CAUSATION_DEPTH`
an emit is refused (`CausationTooDeep`). An emit of a type declared `continues=True` while
handling an event of the same type (a paginated job's next page) stays at its cause's depth.
`pipelines` lists the pipelines that emitted an event of the chain: an `event.<type>` pipeline
never runs for an event its own chain produced (pipelines.handlers).

The caller's doors are given explicitly (`Provenance.api_key`, `Provenance.pipeline`); the
app's are inferred, so no code needs to say who it is.
"""

from __future__ import annotations

import contextvars
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from eventbus.store import catalog

PROVENANCE_KEY = "provenance"
DEPTH_KEY = "causation_depth"
PIPELINES_KEY = "pipelines"
# Metadata keys only the bus writes: a caller's value for them is replaced.
BUS_KEYS = (PROVENANCE_KEY, DEPTH_KEY, PIPELINES_KEY)
SYSTEM = "system"
# Frames of these packages are the mechanism, not the producer: the producer is below them.
_MECHANISM = ("eventbus.", "django.", "contextlib", "core.db")


@dataclass(frozen=True, slots=True)
class Provenance:
    """Who produced an event (see the module docstring)."""

    door: str
    producer: str
    detail: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def api_key(cls, prefix: str) -> Provenance:
        return cls(catalog.API, f"api_key:{prefix}")

    @classmethod
    def pipeline(cls, pipeline_id: object, execution_id: object) -> Provenance:
        return cls(catalog.PIPELINE, f"pipeline:{pipeline_id}", {"execution_id": str(execution_id)})

    @classmethod
    def system(cls, component: str) -> Provenance:
        return cls(catalog.APP, SYSTEM, {"component": component})

    @classmethod
    def app(cls, label: str, component: str) -> Provenance:
        return cls(catalog.APP, f"app:{label}", {"component": component})

    @property
    def pipeline_id(self) -> str | None:
        kind, _, ident = self.producer.partition(":")
        return ident if kind == "pipeline" else None

    def as_metadata(self) -> dict[str, str]:
        return {"door": self.door, "producer": self.producer, **self.detail}


@dataclass(frozen=True, slots=True)
class Cause:
    """The event a handler run is handling: what its emits are caused by."""

    event_type: str
    depth: int
    pipelines: tuple[str, ...]


class Causing(Protocol):
    """What a handler run handles (an eventbus.Event): read only when the handler emits."""

    @property
    def event_type(self) -> str: ...

    @property
    def metadata(self) -> dict[str, Any]: ...


# The event a handler run handles. Its metadata is decoded only if the handler emits.
_cause: contextvars.ContextVar[Causing | None] = contextvars.ContextVar(
    "eventbus_cause", default=None
)


def cause_of(metadata: Mapping[str, Any] | None, event_type: str) -> Cause:
    """The cause an event is to whatever its handlers emit."""
    meta = metadata or {}
    depth = meta.get(DEPTH_KEY, 0)
    pipelines = meta.get(PIPELINES_KEY) or ()
    return Cause(
        event_type,
        depth if isinstance(depth, int) and not isinstance(depth, bool) else 0,
        tuple(str(p) for p in pipelines) if isinstance(pipelines, list | tuple) else (),
    )


class handling:
    """Bind the event a handler run handles (the drain enters one per delivery; a context
    manager class, not a generator: it costs one contextvar set and reset)."""

    __slots__ = ("_cause", "_token")

    def __init__(self, event: Causing) -> None:
        self._cause = event

    def __enter__(self) -> None:
        self._token = _cause.set(self._cause)

    def __exit__(self, *exc_info: object) -> None:
        _cause.reset(self._token)


def current_cause() -> Cause | None:
    event = _cause.get()
    return None if event is None else cause_of(event.metadata, event.event_type)


def inferred(source: str | None) -> Provenance:
    """The app's own provenance: a scheduled job is the `system`; otherwise the app whose module
    called emit (the first frame outside the bus's mechanism), with the consumer as the
    component during a handler run."""
    if source and source.startswith("cron:"):
        return Provenance.system(source)
    module = _calling_module()
    label = module.partition(".")[0] or "unknown"
    if source and source.startswith("consumer:"):
        return Provenance.app(label, source)
    return Provenance.app(label, module)


def _calling_module() -> str:
    frame = sys._getframe(1)
    while frame is not None:
        name = str(frame.f_globals.get("__name__", ""))
        if not name.startswith(_MECHANISM) and name != "eventbus":
            return name
        frame = frame.f_back  # type: ignore[assignment]
    return ""


def chain(provenance: Provenance, event_type: str, limit: int) -> tuple[int, tuple[str, ...]]:
    """The depth and the pipelines of an event emitted now, or CausationTooDeep."""
    cause = current_cause()
    pipelines: tuple[str, ...] = ()
    if cause is None:
        depth = 0
    else:
        same_page = cause.event_type == event_type and catalog.continues(event_type)
        depth = cause.depth if same_page and provenance.door == catalog.APP else cause.depth + 1
        pipelines = cause.pipelines
    if depth > limit:
        from eventbus.store.errors import CausationTooDeep

        raise CausationTooDeep(event_type, depth=depth, limit=limit)
    own = provenance.pipeline_id
    if own is not None and own not in pipelines:
        pipelines = (*pipelines, own)
    return depth, pipelines
