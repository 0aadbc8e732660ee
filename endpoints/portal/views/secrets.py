"""Signing secrets: reveal on request (logged) and rotate with an overlap."""

from __future__ import annotations

import logging
from datetime import timedelta

from django.conf import settings
from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect

from endpoints import services
from endpoints.portal.access import READ, WRITE, Access, portal_view
from endpoints.portal.present import breaker_words
from endpoints.portal.selectors import secrets_live
from endpoints.portal.views.common import page
from relayproject.clock import utcnow

logger = logging.getLogger("endpoints.portal")


@portal_view(methods=WRITE)
def secret_reveal(request: HttpRequest, access: Access) -> HttpResponse:
    """Shows the live secrets in this response only; never in a URL or a log."""
    logger.info(
        "signing secret revealed user_id=%s endpoint_id=%s",
        request.user.pk,
        access.endpoint.pk,
    )
    response = page(
        request,
        access,
        "endpoint_detail.html",
        {
            "secrets": secrets_live(endpoint=access.endpoint, now=utcnow()),
            "revealed": True,
            "breaker": breaker_words(getattr(access.endpoint, "health", None)),
        },
    )
    response["Cache-Control"] = "no-store"
    return response


@portal_view(methods=READ + WRITE)
def secret_rotate(request: HttpRequest, access: Access) -> HttpResponse:
    if request.method == "POST":
        _, previous_expires_at = services.endpoint_rotate_secret(
            endpoint=access.endpoint
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
            "secrets": secrets_live(endpoint=access.endpoint, now=utcnow()),
            "overlap_hours": overlap.total_seconds() / 3600,
            "expires_at": utcnow() + overlap,
        },
    )
