"""The endpoints side of the staff console (Django admin), in reading order.

- model_admins: merchants, endpoints (with their actions), event types.
- memberships: who may act for a merchant, and the log of grants.
- health: the endpoint-health list (breaker state, success rate, latency).
- keys: API keys, created and revoked from the console.
- present: small formatting helpers the console's columns share.

Importing the package registers every ModelAdmin, which is all Django's
admin autodiscovery needs.
"""

from endpoints.admin import health, keys, model_admins  # noqa: F401 - registers them
