"""Signing secrets: reveal on request (logged) and rotate with an overlap."""

from __future__ import annotations

import logging
from datetime import timedelta

from django.conf import settings
from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.urls import reverse

from endpoints import services
from endpoints.selectors import secrets_of_endpoint
from relayproject.lib.clock import utcnow
from relayproject.portal.access import READ, WRITE, Access, portal_view
from relayproject.portal.views.common import page
from relayproject.portal.views.endpoints import reveal_key

logger = logging.getLogger("relayproject.portal")


@portal_view(methods=WRITE)
def secret_reveal(request: HttpRequest, access: Access) -> HttpResponse:
    """Post/redirect/get: the next view of the endpoint shows the secrets, once.

    The secret itself is never in a URL, a message or a log line.
    """
    logger.info(
        "signing secret revealed by=%s endpoint_id=%s",
        access.who,
        access.endpoint.pk,
    )
    request.session[reveal_key(access.endpoint.pk)] = True
    url = reverse(
        "portal:endpoint_detail", args=[access.merchant.slug, access.endpoint.pk]
    )
    return redirect(f"{url}#secret")


@portal_view(methods=READ + WRITE)
def secret_rotate(request: HttpRequest, access: Access) -> HttpResponse:
    if request.method == "POST":
        _, previous_expires_at = services.endpoint_rotate_secret(
            endpoint=access.endpoint, now=utcnow()
        )
        messages.success(
            request,
            "New secret created. The previous one keeps signing until "
            f"{previous_expires_at:%Y-%m-%d %H:%M} UTC.",
        )
        return redirect(
            "portal:endpoint_detail", access.merchant.slug, access.endpoint.pk
        )
    overlap = timedelta(seconds=settings.SECRET_ROTATION_OVERLAP_SECONDS)
    return page(
        request,
        access,
        "secret_rotate.html",
        {
            "secrets": secrets_of_endpoint(endpoint=access.endpoint, now=utcnow()),
            "overlap_hours": overlap.total_seconds() / 3600,
            "expires_at": utcnow() + overlap,
        },
    )
