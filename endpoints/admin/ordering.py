"""The endpoint admin's two ordering actions: send an endpoint the events that
share an ordering key one at a time, in publish order, or not (deliveries/
lanes.py). Read at publish, so either applies to events published after;
rows already waiting in a lane still go one at a time. Logged in the admin
log like every action."""

from __future__ import annotations

from django.contrib import admin

from endpoints.admin.present import log_and_tell
from endpoints.services import endpoint_update
from relayproject.lib.clock import utcnow


class OrderingActions:
    @admin.action(
        description="Send in order (events sharing an ordering key)",
        permissions=["change"],
    )
    def make_ordered(self, request, queryset) -> None:
        self._set_ordered(request, queryset, ordered=True)

    @admin.action(description="Send unordered", permissions=["change"])
    def make_unordered(self, request, queryset) -> None:
        self._set_ordered(request, queryset, ordered=False)

    def _set_ordered(self, request, queryset, *, ordered: bool) -> None:
        endpoints = self._endpoints(queryset)
        for endpoint in endpoints:
            endpoint_update(
                endpoint=endpoint,
                ordered=ordered,
                by=f"staff:{request.user}",
                now=utcnow(),
            )
        log_and_tell(self, request, endpoints, "Ordered" if ordered else "Unordered")
