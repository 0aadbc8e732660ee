"""An HTTP endpoint's Authentication page: Basic or OAuth2 auth, and a client
certificate with an optional CA bundle (issue 42 items 1 and 2).

Owners change them. Developers see what is set, read-only; viewers do not
reach the page (a write URL, like the signing secret's rotate page) and see
the same state, without secrets, on the endpoint's page. A broker endpoint
has no such page.
"""

from __future__ import annotations

import logging

from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect

from endpoints import brokers
from endpoints.client_credentials import UNCHANGED, credentials_apply, credentials_clean
from endpoints.models import Endpoint
from relayproject.lib.clock import utcnow
from relayproject.portal.access import READ, WRITE, Access, forbidden_page, portal_view
from relayproject.portal.credentials_forms import CredentialsForm, RemoveForm
from relayproject.portal.present import credentials_state
from relayproject.portal.views.common import page

logger = logging.getLogger("relayproject.portal")

CHANGED_MEANWHILE = (
    "Someone changed this endpoint's URL, authentication or certificate while "
    "you were editing: nothing was saved. What is set now is shown above; "
    "check it and save again."
)
REMOVED = {
    "auth": "Authentication removed: the relay sends no Authorization header of "
    "its own to this endpoint now.",
    "tls": "Client certificate and CA bundle removed: the receiver is checked "
    "against the public CAs and no client certificate is offered.",
}


@portal_view(methods=READ + WRITE)
def endpoint_credentials(request: HttpRequest, access: Access) -> HttpResponse:
    endpoint = access.endpoint
    if endpoint.kind != brokers.HTTP:
        raise Http404("A broker endpoint takes no authentication or certificate.")
    if request.method == "POST" and not access.is_owner:
        return forbidden_page(request, access)
    form = None
    if access.is_owner:
        if "remove" in request.POST:
            return _remove(request, access)
        posted = request.method == "POST"
        form = CredentialsForm(
            request.POST if posted else None,
            request.FILES if posted else None,
            endpoint=endpoint,
        )
        if posted and form.is_valid() and _save(request, access, form):
            return redirect(
                "portal:endpoint_credentials", access.merchant.slug, endpoint.pk
            )
    failed = request.method == "POST"
    response = page(
        request,
        access,
        "endpoint_credentials.html",
        {"form": form, **credentials_state(endpoint, now=utcnow())},
        status=400 if failed else 200,
    )
    response["Cache-Control"] = "no-store"  # a form that takes keys
    return response


def _save(request: HttpRequest, access: Access, form: CredentialsForm) -> bool:
    """Both parts checked before either is written; errors next to fields."""
    endpoint = access.endpoint
    auth, tls = form.auth_value(), form.tls_value()
    if auth is UNCHANGED and tls is UNCHANGED:
        messages.info(request, "Nothing was changed.")
        return True
    changes, errors = credentials_clean(
        endpoint=endpoint,
        kind=endpoint.kind,
        headers=endpoint.headers,
        auth=auth,
        tls=tls,
    )
    if errors:
        form.add_credentials_errors(errors)
        return False
    kept = endpoint.tls_client_cert
    if kept and changes.get("tls_client_cert") == kept:
        # The same certificate kept (only its CA bundle changed): its expiry
        # warning, already raised, is not raised again.
        changes["tls_expiry_warned_for"] = endpoint.tls_expiry_warned_for
    if not _write(endpoint, changes):
        form.add_error(None, CHANGED_MEANWHILE)
        return False
    _log(access, auth=auth, tls=tls)
    messages.success(request, "Saved: sends that start from now on use it.")
    return True


def _remove(request: HttpRequest, access: Access) -> HttpResponse:
    endpoint = access.endpoint
    form = RemoveForm(request.POST)
    back = redirect("portal:endpoint_credentials", access.merchant.slug, endpoint.pk)
    if not form.is_valid():
        return back
    part = form.cleaned_data["remove"]
    changes, errors = credentials_clean(
        endpoint=endpoint,
        kind=endpoint.kind,
        headers=endpoint.headers,
        **{part: None},
    )
    if errors or not _write(endpoint, changes):
        messages.error(request, CHANGED_MEANWHILE)
        return back
    _log(access, **{part: None})
    messages.success(request, REMOVED[part])
    return back


def _write(endpoint: Endpoint, changes: dict) -> bool:
    """Write the checked columns unless the credentials or the URL changed
    since the page read them (the checks, https included, were against
    those): one conditional UPDATE, so the checks, which resolve the token
    URL's host, run outside any transaction."""
    seen, url = endpoint.credentials_version, endpoint.url
    fields = credentials_apply(endpoint, changes)
    written = Endpoint.objects.filter(
        pk=endpoint.pk, credentials_version=seen, url=url
    ).update(**{name: getattr(endpoint, name) for name in fields}, updated_at=utcnow())
    if not written:
        endpoint.refresh_from_db()
    return bool(written)


def _log(access: Access, *, auth=UNCHANGED, tls=UNCHANGED) -> None:
    """The audit line: who changed which part, and to what kind; no value."""

    def said(value) -> str:
        if value is UNCHANGED:
            return "kept"
        if not value:
            return "removed"
        return value.get("type", "set")

    logger.info(
        "endpoint credentials changed by=%s endpoint_id=%s auth=%s tls=%s",
        access.who,
        access.endpoint.pk,
        said(auth),
        said(tls),
    )
