"""'Recover failed since...': a dry run shows the count, a second POST confirms."""

from __future__ import annotations

from datetime import timedelta

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect

from deliveries.replay import deliveries_recover
from relayproject.lib.clock import utcnow
from relayproject.portal.access import READ, WRITE, Access, portal_view
from relayproject.portal.forms import RecoverForm
from relayproject.portal.views.common import page

PRESETS = (
    ("Last hour", timedelta(hours=1)),
    ("Last 24 hours", timedelta(days=1)),
    ("Last 7 days", timedelta(days=7)),
)


def presets(now) -> list[tuple[str, str]]:
    """One-click windows: each posts its "since" to the count step."""
    return [(label, (now - ago).strftime("%Y-%m-%d %H:%M")) for label, ago in PRESETS]


@portal_view(methods=READ + WRITE)
def endpoint_recover(request: HttpRequest, access: Access) -> HttpResponse:
    endpoint = access.endpoint
    if request.method != "POST":
        since = (utcnow() - timedelta(days=1)).strftime("%Y-%m-%d %H:%M")
        form = RecoverForm(initial={"since": since})
        return page(
            request,
            access,
            "endpoint_recover.html",
            {"form": form, "presets": presets(utcnow())},
        )
    form = RecoverForm(request.POST)
    if not form.is_valid():
        return page(
            request,
            access,
            "endpoint_recover.html",
            {"form": form, "presets": presets(utcnow())},
            status=400,
        )
    since = form.cleaned_data["since"]
    if not form.cleaned_data["confirm"]:
        count = deliveries_recover(
            endpoint=endpoint, since=since, dry_run=True, now=utcnow()
        )
        confirm = RecoverForm(initial={"since": form.data["since"], "confirm": True})
        return page(
            request,
            access,
            "endpoint_recover.html",
            {"form": confirm, "count": count, "since": since, "preview": True},
        )
    count = deliveries_recover(endpoint=endpoint, since=since, now=utcnow())
    messages.success(
        request,
        f"{count} dead deliver{'y is' if count == 1 else 'ies are'} pending again.",
    )
    return redirect("portal:endpoint_deliveries", access.merchant.slug, endpoint.pk)
