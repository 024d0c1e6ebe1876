"""The integration API's shared machinery: API key authentication, scopes, the error shape,
throttling, cursor pagination, idempotency keys and the OpenAPI wiring. Apps add endpoints."""
