"""Endpoint ownership verification in the portal: its state, pasting the
challenge from the receiver's log, and asking for a new one."""

from __future__ import annotations

import logging

from django.conf import settings
from django.contrib import messages
from django.core.exceptions import ValidationError
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect

from endpoints import verification
from relayproject.lib.clock import utcnow
from relayproject.portal.access import READ, WRITE, Access, portal_view
from relayproject.portal.forms import VerifyForm
from relayproject.portal.views.common import page

logger = logging.getLogger("relayproject.portal")


@portal_view(methods=READ + WRITE)
def endpoint_verification(request: HttpRequest, access: Access) -> HttpResponse:
    """GET: the state and the paste form; POST: verify with the pasted challenge
    (a wrong one is shown under its field and changes nothing)."""
    endpoint = access.endpoint
    form = VerifyForm(request.POST if request.method == "POST" else None)
    if request.method == "POST" and form.is_valid():
        try:
            verification.endpoint_verify(
                endpoint=endpoint,
                challenge=form.cleaned_data["challenge"],
                by=f"merchant:{access.who}",
                now=utcnow(),
            )
        except ValidationError as exc:
            for message in exc.message_dict.get("challenge", exc.messages):
                form.add_error("challenge", message)
            # The paste spent a try: the page says what is left now.
            endpoint.refresh_from_db(fields=["verification_wrong_answers"])
        except verification.NotAwaiting as exc:
            messages.info(request, str(exc))
            return redirect("portal:endpoint_detail", access.merchant.slug, endpoint.pk)
        else:
            logger.info(
                "endpoint verified by=%s endpoint_id=%s how=pasted",
                access.who,
                endpoint.pk,
            )
            messages.success(
                request,
                "Endpoint verified: its waiting deliveries are due now, in the "
                "order they were published.",
            )
            return redirect("portal:endpoint_detail", access.merchant.slug, endpoint.pk)
    return page(
        request,
        access,
        "endpoint_verification.html",
        {
            "form": form,
            "state": verification.state(endpoint),
            "tries_left": verification.tries_left(endpoint),
            "tries": verification.WRONG_ANSWERS_LIMIT,
            "retry_seconds": settings.VERIFICATION_RETRY_SECONDS,
        },
        status=400 if request.method == "POST" else 200,
    )


@portal_view(methods=WRITE)
def endpoint_verification_retry(request: HttpRequest, access: Access) -> HttpResponse:
    """A fresh challenge, sent by the next dispatcher; the old one stops counting."""
    try:
        verification.verification_retry(endpoint=access.endpoint, now=utcnow())
    except (verification.TooSoon, verification.NotAwaiting) as exc:
        messages.error(request, getattr(exc, "detail", str(exc)))
    else:
        messages.success(
            request, "A new challenge is on its way; the previous one no longer counts."
        )
    return redirect(
        "portal:endpoint_verification", access.merchant.slug, access.endpoint.pk
    )
