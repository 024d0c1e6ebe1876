"""`/api/v1/pipelines...` and `POST /api/v1/orders`, scoped to the API key's organization.

Reads need `pipelines:read` (or `pipelines:write`, which implies it); writes `pipelines:write`;
creating an order `orders:write`. Another tenant's ids are 404s. A definition that does not
validate is a 400 whose fields name the node: `definition.<node id>` (or `definition`).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

from drf_spectacular.utils import OpenApiExample, OpenApiParameter, OpenApiResponse
from rest_framework import serializers, status
from rest_framework.exceptions import Throttled
from rest_framework.response import Response

from core.api import idempotency
from core.api.errors import InvalidState, error_body
from core.api.permissions import WriteImpliesRead
from core.api.schema import ErrorSerializer, errors, ok, request_example, write_implies_read
from core.api.views import ApiView, found_or_404
from core.replica.routing import replica_view
from eventbus.store.errors import EmitRateLimited, EventValidationError
from pipelines import selectors, services
from pipelines.api import examples
from pipelines.api.serializers import (
    ExecutionFilterSerializer,
    ExecutionListSerializer,
    OrderCreateSerializer,
    OrderSerializer,
    PipelineInputSerializer,
    PipelineListSerializer,
    PipelineSerializer,
    PipelineUpdateSerializer,
)
from pipelines.definition import DefinitionError
from pipelines.models import Pipeline
from pipelines.scopes import ORDERS_WRITE, PIPELINES_READ, PIPELINES_WRITE

ViewMethod = TypeVar("ViewMethod", bound=Callable[..., Response])
SEED_EXAMPLE = request_example("Notify an ERP, then set the status", examples.CREATE_REQUEST)
NOT_FOUND = "No such pipeline in this organization."
IDEMPOTENCY_SCOPE = "orders.create"
IDEMPOTENCY_PARAMETER = OpenApiParameter(
    idempotency.HEADER,
    str,
    OpenApiParameter.HEADER,
    required=False,
    description="Retry safely: the same key and body within 24 h replays the first response "
    "(with `Idempotent-Replayed: true`); the same key with another body is a 409. A 422 or "
    "409 is not stored: a corrected retry with the same key runs.",
)
ORDER_FIELDS = (
    "id",
    "number",
    "status",
    "total_cents",
    "currency",
    "items",
    "status_tag",
    "status_name",
    "phase",
    "confirmed_at",
)
PRE_FAILED = OpenApiResponse(
    ErrorSerializer,
    "`pipeline_failed`: the order.pre pipeline failed; `fields` names the step "
    "(`pipeline.<node id>`). Nothing was written.",
    examples=[OpenApiExample("pipeline_failed", value=examples.PRE_FAILED)],
)


operation = write_implies_read(PIPELINES_READ, PIPELINES_WRITE, tag="pipelines")


class PipelineView(ApiView):
    permission_classes = [WriteImpliesRead]
    write_scope = PIPELINES_WRITE  # a key that may change these may read them
    required_scopes = {"GET": PIPELINES_READ, "POST": PIPELINES_WRITE, "PATCH": PIPELINES_WRITE}

    def pipeline(self, request: Any, pipeline_id: uuid.UUID) -> Pipeline:
        found = selectors.pipeline_get(self.client(request).organization_id, pipeline_id)
        return found_or_404(found, "No such pipeline in this organization.")


@contextmanager
def definition_errors() -> Iterator[None]:
    """Service refusals as API errors: 400 by field (a definition's by node), 409 conflicts."""
    try:
        yield
    except DefinitionError as exc:
        fields: dict[str, list[str]] = {}
        for problem in exc.problems:
            key = f"definition.{problem.node}" if problem.node else "definition"
            fields.setdefault(key, []).append(problem.message)
        raise serializers.ValidationError(fields) from None
    except services.PipelineConflict as exc:
        raise InvalidState(str(exc)) from None
    except services.InvalidTrigger as exc:
        raise serializers.ValidationError({"trigger": [str(exc)]}) from None


class PipelinesView(PipelineView):
    @operation(
        name="list",
        summary="List pipelines",
        description="The organization's pipelines, oldest first: trigger, enabled flag and "
        "definition.",
        scope=PIPELINES_READ,
        responses={200: ok(PipelineListSerializer, examples.PIPELINES), **errors(403)},
    )
    @replica_view
    def get(self, request: Any) -> Response:
        rows = selectors.pipeline_list(self.client(request).organization_id)
        return Response(PipelineListSerializer({"results": rows}).data)

    @operation(
        name="create",
        summary="Create a pipeline",
        description="Creates a pipeline on a trigger (`order.pre`, `order.post` or "
        "`event.<type>`). The definition is validated: one `start`, edges between existing "
        "nodes, no cycles, `success`/`failure` branches only out of nodes that can fail, known "
        "node types and configs; each problem is reported on `definition.<node id>`. At most "
        "one enabled pipeline per trigger (409 otherwise).",
        scope=PIPELINES_WRITE,
        request=PipelineInputSerializer,
        examples=[SEED_EXAMPLE],
        responses={
            201: ok(PipelineSerializer, examples.PIPELINE),
            **errors(
                400,
                403,
                409,
                413,
                415,
                e409="another enabled pipeline of this organization runs on order.post: "
                "disable it first",
            ),
        },
    )
    def post(self, request: Any) -> Response:
        data = self.validated(PipelineInputSerializer, request.data)
        with definition_errors():
            pipeline = services.pipeline_create(
                organization=self.client(request).organization_id,
                actor=self.client(request).actor,
                **data,
            )
        return Response(PipelineSerializer(pipeline).data, status=status.HTTP_201_CREATED)


class PipelineDetailView(PipelineView):
    @operation(
        name="retrieve",
        summary="Get a pipeline",
        description="One pipeline: its trigger, whether it is enabled, and its definition "
        "(nodes and edges).",
        scope=PIPELINES_READ,
        responses={
            200: ok(PipelineSerializer, examples.PIPELINE),
            **errors(403, 404, e404=NOT_FOUND),
        },
    )
    def get(self, request: Any, pipeline_id: uuid.UUID) -> Response:
        return Response(PipelineSerializer(self.pipeline(request, pipeline_id)).data)

    @operation(
        name="update",
        summary="Update a pipeline",
        description="Changes the name, trigger, definition or enabled flag; fields left out "
        "stay. A new definition is validated like on create.",
        scope=PIPELINES_WRITE,
        request=PipelineUpdateSerializer,
        examples=[request_example("Switch it off", examples.UPDATE_REQUEST)],
        responses={
            200: ok(PipelineSerializer, examples.DISABLED),
            **errors(
                400,
                403,
                404,
                409,
                413,
                415,
                e404=NOT_FOUND,
                e409="another enabled pipeline of this organization runs on order.post: "
                "disable it first",
            ),
        },
    )
    def patch(self, request: Any, pipeline_id: uuid.UUID) -> Response:
        pipeline = self.pipeline(request, pipeline_id)
        data = self.validated(PipelineUpdateSerializer, request.data, partial=True)
        with definition_errors():
            services.pipeline_update(pipeline, actor=self.client(request).actor, **data)
        return Response(PipelineSerializer(pipeline).data)


class PipelineExecutionsView(PipelineView):
    @operation(
        name="executions_list",
        summary="List a pipeline's executions",
        description="Newest first: trigger event, status (`RUNNING`, `SUCCEEDED`, `FAILED`), "
        "attempts, the failed node and error, and per step its status, attempts, duration, a "
        "bounded excerpt of its input and output, and its error.",
        scope=PIPELINES_READ,
        parameters=[ExecutionFilterSerializer],
        responses={
            200: ok(ExecutionListSerializer, examples.EXECUTIONS),
            **errors(400, 403, 404, e404=NOT_FOUND),
        },
    )
    @replica_view
    def get(self, request: Any, pipeline_id: uuid.UUID) -> Response:
        query = self.validated(ExecutionFilterSerializer, request.query_params.dict())
        pipeline = self.pipeline(request, pipeline_id)
        rows = selectors.execution_list(
            pipeline, status=query.get("status"), limit=query.get("limit", 50)
        )
        return Response(ExecutionListSerializer({"results": rows}).data)


class SeedPipelineExecutionsView(PipelineExecutionsView):
    @operation(
        name="executions_list_seed",
        summary="List a pipeline's executions (unversioned path)",
        description="The same as `GET /api/v1/pipelines/{pipeline_id}/executions`, at the "
        "unversioned path that integrations written against the outbox API use.",
        scope=PIPELINES_READ,
        parameters=[ExecutionFilterSerializer],
        responses={
            200: ok(ExecutionListSerializer, examples.EXECUTIONS),
            **errors(400, 403, 404, e404=NOT_FOUND),
        },
    )
    def get(self, request: Any, pipeline_id: uuid.UUID) -> Response:
        return super().get(request, pipeline_id)


class OrdersView(ApiView):
    required_scopes = {"POST": ORDERS_WRITE}

    @operation(
        name="create",
        tag="orders",
        summary="Create (confirm) an order",
        description="The order flow: validates the order, runs the organization's "
        "enabled `order.pre` pipeline in the request, then writes the order, its "
        "`order.confirmed` event (a fat event: totals, external codes, items) and the events "
        "order.pre's `emit-event` nodes produced (each with `causation_id` = the "
        "order.confirmed event) in one transaction. A failing order.pre is a 422 naming the "
        "step, and nothing is written. A number already confirmed is a 409. Send an "
        "`Idempotency-Key` to retry safely.",
        scope=ORDERS_WRITE,
        request=OrderCreateSerializer,
        examples=[request_example("Two T-shirts", examples.ORDER_REQUEST)],
        parameters=[IDEMPOTENCY_PARAMETER],
        responses={
            201: ok(OrderSerializer, examples.ORDER),
            422: PRE_FAILED,
            **errors(400, 403, 409, 413, 415, e409="order 'A-1042' is already confirmed"),
        },
    )
    def post(self, request: Any) -> Response:
        data = self.validated(OrderCreateSerializer, request.data)
        key = idempotency.key_from(request)
        try:
            if key is None:
                return Response(_create_order(request, data), status=status.HTTP_201_CREATED)
            outcome = idempotency.run_once(
                organization_id=self.client(request).organization_id,
                scope=IDEMPOTENCY_SCOPE,
                key=key,
                request_hash=idempotency.body_hash(request.data),
                work=lambda: (status.HTTP_201_CREATED, _create_order(request, data)),
            )
        except services.OrderExists as exc:
            raise InvalidState(str(exc)) from None
        except services.PreFailed as exc:  # raised inside the work: the key is rolled back too
            message = f"The order.pre pipeline failed at step {exc.node!r}; nothing was written."
            body = error_body("pipeline_failed", message, {f"pipeline.{exc.node}": [str(exc)]})
            return Response(body, status=422)
        except EmitRateLimited as exc:  # order.pre's emits are counted at the pipeline door
            raise Throttled(wait=exc.retry_after, detail=f"{exc} Nothing was written.") from None
        except EventValidationError as exc:  # e.g. order.pre emits a type closed to pipelines
            message = f"The order.pre pipeline's events were refused; nothing was written: {exc}"
            return Response(error_body("pipeline_failed", message), status=422)
        response = Response(outcome.body, status=outcome.status)
        if outcome.replayed:
            response[idempotency.REPLAYED_HEADER] = "true"
        return response


def _create_order(request: Any, data: dict[str, Any]) -> dict[str, Any]:
    """Create the order from validated input; its API representation."""
    data = dict(data)
    customer = data.pop("customer", None) or {}
    fields = {
        "customer_name": customer.get("name", ""),
        "customer_email": customer.get("email", ""),
        "customer_phone": customer.get("phone", ""),
        "shipping_address": data.pop("shipping_address", ""),
    }
    order, execution = services.order_create(
        organization=request.auth.organization,  # the key's, never the body's
        fields=fields,
        **data,
    )
    result = {
        **{name: getattr(order, name) for name in ORDER_FIELDS},
        "pre_execution_id": execution.id if execution else None,
    }
    return dict(OrderSerializer(result).data)
