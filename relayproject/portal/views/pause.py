"""*Try now*: a merchant ends a pause (an open breaker) without waiting out
its cooldown. The next delivery becomes the breaker's probe at once; the
breaker still sends one probe, whoever clicks and however many dispatchers run.
"""

from __future__ import annotations

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect

from deliveries import replay
from endpoints.models import EndpointHealth
from relayproject.lib.clock import utcnow
from relayproject.portal.access import WRITE, Access, portal_view

TRIED = (
    "Trying now: the next delivery goes to the endpoint within seconds as a "
    "test of whether sending resumes. If it succeeds, the rest follow; if it "
    "fails, the endpoint stays paused, with a longer wait before the next "
    "automatic try."
)
PROBING = (
    "Not tried again: a test delivery is already deciding whether sending "
    "resumes. Wait for its answer."
)
NOT_PAUSED = "Not tried: the endpoint is not paused, so its deliveries are not held."


@portal_view(methods=WRITE)
def endpoint_try_now(request: HttpRequest, access: Access) -> HttpResponse:
    endpoint = access.endpoint
    if replay.endpoint_try_now(endpoint=endpoint, now=utcnow()):
        messages.success(request, TRIED)
    else:
        state = (
            EndpointHealth.objects.filter(endpoint_id=endpoint.pk)
            .values_list("breaker_state", flat=True)
            .first()
        )
        probing = state == EndpointHealth.State.HALF_OPEN
        (messages.warning if probing else messages.info)(
            request, PROBING if probing else NOT_PAUSED
        )
    back = request.POST.get("next_delivery", "")
    if back.replace("_", "").replace("-", "").isalnum():
        # From a delivery's page: back to it, once the portal has checked it
        # is this merchant's (the delivery page's own access check).
        return redirect("portal:delivery_detail", access.merchant.slug, back)
    return redirect("portal:endpoint_detail", access.merchant.slug, endpoint.pk)
