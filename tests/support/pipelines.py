"""Pipeline test data: seed 004's example definition."""

from __future__ import annotations

from typing import Any


def seed_example(url: str, **notify: Any) -> dict[str, Any]:
    """Seed 004's order.post example: notify an ERP, then set-status."""
    return {
        "nodes": [
            {"id": "start", "type": "start"},
            {
                "id": "notify",
                "type": "http-request",
                "config": {
                    "method": "POST",
                    "url": url,
                    "body": {"number": "{{orderNumber}}", "total": "{{order.totalAmount}}"},
                },
                "onError": "abort",
                **notify,
            },
            {
                "id": "ok",
                "type": "set-status",
                "config": {
                    "statusTag": "success",
                    "name": "Integrado ao ERP",
                    "phase": "order.post",
                },
            },
        ],
        "edges": [
            {"from": "start", "to": "notify"},
            {"from": "notify", "to": "ok", "branch": "success"},
        ],
    }


def emit_definition(event_type: str, **config: Any) -> dict[str, Any]:
    """A definition whose one node (`again`) emits `event_type` with the trigger's `n`."""
    return {
        "nodes": [
            {"id": "start", "type": "start"},
            {
                "id": "again",
                "type": "emit-event",
                "config": {"eventType": event_type, "payload": {"n": "{{ payload.n }}"}, **config},
            },
        ],
        "edges": [{"from": "start", "to": "again"}],
    }


# Templates a hostile tenant could write to stall a web process (issue 39), each refused by the
# bounded sandbox: the API tests and bench/template_limits.py send them.
DOS_TEMPLATES = {
    "power": "{{ 7**3000000 }}",
    "string-repetition": "{{ 'a'*10**8 }}",
    "nested-ranges": "{% for i in range(5000) %}{% for j in range(5000) %}x"
    "{% endfor %}{% endfor %}",
    "triple-nesting": "{% for i in range(100) %}{% for j in range(100) %}{% for k in range(100) %}"
    "{{ k }}{% endfor %}{% endfor %}{% endfor %}",
    "deep-nesting": "{{" + "(" * 3000 + "1" + ")" * 3000 + "}}",
    "huge-literal": "{{ " + "9" * 5000 + " }}",
    "doubling": "{% set x = 'a'*1000 %}" + "{% set x = x ~ x %}" * 40,
}


# The author's text: "nodes" before "edges", their own layout (jsonb would sort and re-indent).
AUTHORED = """{
  "nodes": [
    {"id": "start", "type": "start"},
    {"id": "notify", "type": "http-request",
     "config": {"url": "https://erp.example.com/orders/{{orderNumber}}", "method": "POST"}},
    {"id": "ok", "type": "set-status", "config": {"statusTag": "success"}}
  ],
  "edges": [
    {"from": "start", "to": "notify"},
    {"from": "notify", "to": "ok", "branch": "success"}
  ]
}"""
