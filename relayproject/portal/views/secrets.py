"""Signing secrets: reveal on request (logged) and rotate with an overlap."""

from __future__ import annotations

import logging

from django.conf import settings
from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.urls import reverse

from endpoints import secret_rotation
from endpoints.selectors import secrets_of_endpoint
from relayproject.lib.clock import utcnow
from relayproject.portal.access import READ, WRITE, Access, portal_view
from relayproject.portal.forms import RotateForm
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
    now = utcnow()
    form = RotateForm(
        request.POST if request.method == "POST" else None,
        now=now,
        default=settings.SECRET_ROTATION_OVERLAP_SECONDS,
    )
    if request.method == "POST" and form.is_valid():
        _, previous_expires_at = secret_rotation.endpoint_rotate_secret(
            endpoint=access.endpoint, now=now, overlap_seconds=form.overlap_asked()
        )
        if previous_expires_at <= now:
            said = (
                "The previous one has stopped signing: requests from now on "
                "carry only the new secret's signature."
            )
        else:
            said = (
                "The previous one keeps signing until "
                f"{previous_expires_at:%Y-%m-%d %H:%M} UTC."
            )
        messages.success(request, f"New secret created. {said}")
        return redirect(
            "portal:endpoint_detail", access.merchant.slug, access.endpoint.pk
        )
    return page(
        request,
        access,
        "secret_rotate.html",
        {
            "form": form,
            "secrets": secrets_of_endpoint(endpoint=access.endpoint, now=now),
        },
    )
