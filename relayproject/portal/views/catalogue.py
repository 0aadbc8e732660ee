"""The event-type catalogue, and sending a catalogue example to one endpoint."""

from __future__ import annotations

import json

from django.db.models import Q
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect

from deliveries.publish.validation import EventsRefused
from deliveries.services import event_publish
from endpoints.catalogue import merchant_types
from endpoints.selectors import endpoints_of_merchant
from relayproject.lib.limits import LimitExceeded
from relayproject.portal.access import READ, WRITE, Access, portal_view
from relayproject.portal.forms import ExampleForm
from relayproject.portal.views.common import page

SEARCH_MAX_CHARS = 100
SEND_TO_MAX = 20  # endpoints offered under "Send its example to"


@portal_view()
def catalogue(request: HttpRequest, access: Access) -> HttpResponse:
    """The catalogue, searchable by name or description, each type with a
    way to send its example to one of the merchant's active endpoints."""
    q = request.GET.get("q", "").strip()[:SEARCH_MAX_CHARS]
    rows = merchant_types().order_by("deprecated", "name")
    if q:
        rows = rows.filter(Q(name__icontains=q) | Q(description__icontains=q))
    types = [
        {
            "type": t,
            "schema": json.dumps(t.schema, indent=2) if t.schema else "",
            "example": json.dumps(t.example, indent=2) if t.example is not None else "",
        }
        for t in rows
    ]
    send_to = []
    if access.can_edit:
        send_to = list(
            endpoints_of_merchant(merchant_id=access.merchant.pk).filter(
                is_active=True
            )[:SEND_TO_MAX]
        )
    return page(
        request,
        access,
        "catalogue.html",
        {"types": types, "q": q, "send_to": send_to},
    )


@portal_view(methods=READ + WRITE)
def endpoint_example(request: HttpRequest, access: Access) -> HttpResponse:
    """Any catalogue type with its example (edited first if wanted), to this endpoint only."""
    types = list(merchant_types().order_by("name"))
    examples = {
        t.name: json.dumps(t.example if t.example is not None else {}, indent=2)
        for t in types
    }
    form = ExampleForm(
        request.POST if request.method == "POST" else None,
        types=types,
        initial=ExampleForm.initial_for(types, request.GET.get("type")),
    )
    if request.method == "POST" and form.is_valid():
        try:
            event = event_publish(
                merchant=access.merchant,
                type=form.cleaned_data["event_type"],
                data=form.cleaned_data["data"],
                ordering_key=form.cleaned_data["ordering_key"],
                endpoint_ids=[access.endpoint.pk],
                rate_limited=True,
            )
        except EventsRefused as exc:
            form.add_schema_problems([(loc, msg) for _, loc, msg in exc.errors])
        except LimitExceeded as exc:
            form.add_error(None, exc.detail)
        else:
            if event.created_deliveries:
                delivery = event.created_deliveries[0]
                return redirect(
                    "portal:delivery_detail", access.merchant.slug, delivery.pk
                )
            form.add_error(None, "Nothing was sent: the endpoint is disabled.")
    return page(
        request,
        access,
        "endpoint_example.html",
        {"form": form, "examples": examples, "has_types": bool(types)},
        status=400 if request.method == "POST" else 200,
    )
