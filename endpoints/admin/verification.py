"""The endpoint admin's verification column and its one action: staff with
`endpoints.mark_endpoint_verified` (or superusers) may vouch for an endpoint
awaiting verification. It is not an owner's power: it shows no challenge and
pastes none; it is logged in the admin log and the application log."""

from __future__ import annotations

import logging

from django.contrib import admin, messages

from endpoints import verification
from endpoints.admin.present import log_and_tell
from endpoints.models import Endpoint
from relayproject.lib.clock import utcnow

logger = logging.getLogger(__name__)
MARK_VERIFIED_PERMISSION = "endpoints.mark_endpoint_verified"
STATE_WORDS = {
    "awaiting": "waiting for verification",
    "verified": "verified",
    "not_required": "not required",
}


class VerificationActions:
    @admin.action(
        description="Mark verified (without its challenge)",
        permissions=["mark_verified"],
    )
    def mark_verified(self, request, queryset) -> None:
        """Their held deliveries are due at once, in publish order."""
        endpoints = [
            e
            for e in self._endpoints(queryset)
            if verification.endpoint_mark_verified(
                endpoint=e, by=f"staff:{request.user}", now=utcnow()
            )
        ]
        for endpoint in endpoints:
            logger.info(
                "endpoint marked verified by=staff:%s endpoint_id=%s",
                request.user,
                endpoint.pk,
            )
        if endpoints:
            log_and_tell(self, request, endpoints, "Marked verified by staff")
        else:
            self.message_user(
                request, "None of them was awaiting verification.", messages.INFO
            )

    def has_mark_verified_permission(self, request) -> bool:
        # Its own permission: "change endpoint" is not enough to vouch for one.
        return request.user.has_perm(MARK_VERIFIED_PERMISSION)

    @admin.display(description="verification", ordering="awaiting_verification")
    def verification_state(self, endpoint: Endpoint) -> str:
        return STATE_WORDS[verification.state(endpoint)]
