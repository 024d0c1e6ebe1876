"""The CRM API (DRF): mounted at /api/v1/ by deskcomm/api_urls.py."""
