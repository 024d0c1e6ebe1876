"""The webhook endpoints of the integration API (`/api/v1/webhooks/...`)."""
