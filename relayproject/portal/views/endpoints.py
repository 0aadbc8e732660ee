"""Endpoint list, create, detail, edit, disable/enable and delete."""

from __future__ import annotations

import json

from django.conf import settings
from django.contrib import messages
from django.core.exceptions import ValidationError
from django.db import transaction
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect

from deliveries import words
from deliveries.notifications.selectors import (
    endpoint_condition,
    failing_first,
    is_failing,
)
from deliveries.selectors import endpoint_unfinished
from endpoints import brokers, quotas, services
from endpoints.catalogue import catalogue_names, merchant_types
from endpoints.filtering import filter_errors, filter_matches
from endpoints.matching import subscribes_to
from endpoints.retry_policy import policy_in_force, schedule_words
from endpoints.selectors import endpoints_of_merchant, secrets_of_endpoint
from endpoints.words import breaker_words, degraded_words, state_label
from relayproject.demo import demo_enabled, demo_endpoint_url
from relayproject.lib.clock import utcnow
from relayproject.lib.limits import LimitExceeded
from relayproject.portal import endpoint_kinds, pulling
from relayproject.portal.access import READ, WRITE, Access, portal_view
from relayproject.portal.endpoint_form import EndpointForm
from relayproject.portal.present import (
    HEADERS_CARRIED,
    credentials_state,
    credentials_words,
    target_words,
    type_groups,
)
from relayproject.portal.selectors import event_types_seen, events_recent
from relayproject.portal.views.common import page
from relayproject.portal.views.listen import session_refusal

BOTH = READ + WRITE


def _seen_types(access: Access) -> list[str]:
    """The catalogue and the types this merchant has published; never relay.*,
    the relay's own types, which are not for subscribing."""
    seen = event_types_seen(merchant_id=access.merchant.pk)
    names = set(catalogue_names()) | {t for t in seen if not t.startswith("relay.")}
    return sorted(names)


def _picker(form: EndpointForm) -> list:
    """The event-type checkboxes grouped, with each type's description."""
    described = {
        t.name: (t.description, t.deprecated)
        for t in merchant_types().only("name", "description", "deprecated")
    }
    names = [value for value, _ in form.fields["known_event_types"].choices]
    checked = [str(v) for v in form["known_event_types"].value() or ()]
    return type_groups(names, described=described, checked=checked)


PREVIEW_WORDS = {
    "sent": "would be sent",
    "not_subscribed": "not subscribed",
    "filtered": "filtered out",
}


def preview_verdict(*, event_types: list[str], wanted, type: str, data) -> str:
    """What the endpoint, as the form stands, would do with one event: "sent"
    only when it both subscribes to the type and the filter lets it through."""
    if not subscribes_to(event_types, type):
        return "not_subscribed"
    return "sent" if filter_matches(wanted, type=type, data=data) else "filtered"


def _filter_preview(access: Access, form: EndpointForm) -> list | None:
    """The last events of this merchant, each with what the endpoint would do."""
    if not form.is_valid():
        return None
    wanted = form.cleaned_data["filter"]
    if filter_errors(wanted):
        form.add_error("filter", filter_errors(wanted))
        return None
    types = form.service_kwargs()["event_types"]
    rows = []
    for event in events_recent(merchant_id=access.merchant.pk):
        verdict = preview_verdict(
            event_types=types, wanted=wanted, type=event.type, data=event.data
        )
        rows.append((event, verdict, PREVIEW_WORDS[verdict]))
    return rows


@portal_view()
def endpoint_list(request: HttpRequest, access: Access) -> HttpResponse:
    # An ended listen session only waits to be deleted, counted by no quota:
    # the Listen page and its deliveries' pages still reach it.
    endpoints = (
        endpoints_of_merchant(merchant_id=access.merchant.pk)
        .select_related("watch")
        .exclude(listen_session=True, is_active=False)
    )
    below = settings.DEGRADED_SUCCESS_RATE
    rows = []
    for endpoint in failing_first(endpoints):
        health = getattr(endpoint, "health", None)
        rows.append(
            (
                endpoint,
                breaker_words(health, active=endpoint.is_active),
                is_failing(endpoint),
                state_label(health, active=endpoint.is_active, degraded_below=below),
                degraded_words(health, below=below) if endpoint.is_active else "",
                target_words(endpoint.kind, endpoint.target),
            )
        )
    limit = quotas.max_endpoints(access.merchant)
    return page(
        request, access, "endpoint_list.html", {"rows": rows, "endpoint_limit": limit}
    )


def _save(request: HttpRequest, access: Access, form: EndpointForm, save) -> bool:
    """Run the service; its field errors go next to the fields and nothing is written."""
    if not form.is_valid():
        return False
    try:
        with transaction.atomic():
            save(**form.service_kwargs())
    except ValidationError as exc:
        form.add_service_errors(exc)
        return False
    except LimitExceeded as exc:
        form.add_error(None, exc.detail)
        return False
    return True


def _create_form(request: HttpRequest, access: Access) -> EndpointForm:
    """The create form, with the kind picked (?kind= or the form's own) and
    the kinds this merchant is offered; after the picker's own button, the
    form as typed with the picked kind's fields and no errors yet."""
    kinds = endpoint_kinds.offered_kinds(access.merchant)
    asked = request.POST if request.method == "POST" else request.GET
    options = {
        "seen_types": _seen_types(access),
        "offer_test_receiver": demo_enabled(),
        "kinds": kinds,
        "kind": endpoint_kinds.chosen_kind(asked.get("kind"), kinds),
        "merchant": access.merchant,
    }
    if "pick_kind" in request.POST:
        return EndpointForm.picked(request.POST, **options)
    return EndpointForm(
        request.POST if request.method == "POST" else None,
        initial={"kind": options["kind"]},
        **options,
    )


@portal_view(methods=BOTH)
def endpoint_create(request: HttpRequest, access: Access) -> HttpResponse:
    form = _create_form(request, access)
    picking = "pick_kind" in request.POST
    created = {}

    def save(**fields):
        if not form.cleaned_data.get("test_receiver"):
            created["endpoint"] = services.endpoint_create(
                merchant=access.merchant, **fields, now=utcnow()
            )
            return
        # The test receiver's URL names the endpoint's own id, known once it
        # exists; everything else typed in the form is kept.
        base = settings.RELAY_BASE_URL
        fields["url"] = demo_endpoint_url(base, "new")
        endpoint = services.endpoint_create(
            merchant=access.merchant, **fields, now=utcnow()
        )
        created["endpoint"] = services.endpoint_update(
            endpoint=endpoint, url=demo_endpoint_url(base, endpoint.pk), now=utcnow()
        )

    preview = None
    if "preview" in request.POST:
        preview = _filter_preview(access, form)
    elif (
        not picking and request.method == "POST" and _save(request, access, form, save)
    ):
        endpoint = created["endpoint"]
        waits = (
            " It receives nothing until it is verified: answer the "
            "relay.endpoint.verification request it is about to get with its "
            "challenge, or paste the challenge on its verification page."
            if endpoint.awaiting_verification
            else ""
        )
        if form.cleaned_data.get("test_receiver"):
            waits += (
                " It points at the built-in test receiver: send it a test ping, "
                "then open the receiver to see what arrived."
            )
        messages.success(request, f"Endpoint {endpoint.pk} created.{waits}")
        return redirect("portal:endpoint_detail", access.merchant.slug, endpoint.pk)
    failed = request.method == "POST" and preview is None and not picking
    return page(
        request,
        access,
        "endpoint_form.html",
        {
            "form": form,
            "creating": True,
            "preview": preview,
            "type_groups": _picker(form),
        },
        status=400 if failed else 200,
    )


@portal_view(methods=WRITE)
def endpoint_create_test(request: HttpRequest, access: Access) -> HttpResponse:
    """An endpoint pointed at the built-in test receiver (where it is routed),
    so a merchant can send a test before their own receiver exists."""
    if not demo_enabled():
        raise Http404("The built-in test receiver is not enabled here.")
    base = settings.RELAY_BASE_URL
    try:
        with transaction.atomic():
            # Its URL names its own id, known once it exists.
            endpoint = services.endpoint_create(
                merchant=access.merchant,
                url=demo_endpoint_url(base, "new"),
                description="The built-in test receiver",
                now=utcnow(),
            )
            services.endpoint_update(
                endpoint=endpoint,
                url=demo_endpoint_url(base, endpoint.pk),
                now=utcnow(),
            )
    except ValidationError as exc:
        words = "; ".join(m for ms in exc.message_dict.values() for m in ms)
        messages.error(request, f"No test endpoint was made: {words}")
        return redirect("portal:endpoint_create", access.merchant.slug)
    messages.success(
        request,
        f"Endpoint {endpoint.pk} created, pointed at the built-in test receiver: "
        "send it a test ping, then open the receiver to see what arrived.",
    )
    return redirect("portal:endpoint_detail", access.merchant.slug, endpoint.pk)


@portal_view(methods=BOTH)
def endpoint_edit(request: HttpRequest, access: Access) -> HttpResponse:
    seen = _seen_types(access)
    endpoint = access.endpoint
    stored_user, password_set = endpoint_kinds.stored_credentials(endpoint)
    form = EndpointForm(
        request.POST if request.method == "POST" else None,
        seen_types=seen,
        initial=EndpointForm.initial_for(endpoint, seen),
        existing_headers=endpoint.headers,
        # Its own kind only: another kind is another endpoint.
        kinds=[endpoint.kind],
        kind=endpoint.kind,
        merchant=access.merchant,
        stored_user=stored_user,
        password_set=password_set,
    )

    def save(**fields):
        # Moving an endpoint that sends credentials is for those who may set
        # them (the Authentication page is owners' only): else a developer
        # could point it at a server of their own and read them. The service
        # checks the row as it is when written, not as this page read it.
        services.endpoint_update(
            endpoint=endpoint,
            **fields,
            may_move_credentials=access.is_owner,
            now=utcnow(),
        )

    preview = None
    if "preview" in request.POST:
        preview = _filter_preview(access, form)
    elif request.method == "POST" and _save(request, access, form, save):
        messages.success(request, "Endpoint saved.")
        return redirect("portal:endpoint_detail", access.merchant.slug, endpoint.pk)
    endpoint.refresh_from_db()
    status = 400 if request.method == "POST" and preview is None else 200
    return page(
        request,
        access,
        "endpoint_form.html",
        {
            "form": form,
            "creating": False,
            "preview": preview,
            "type_groups": _picker(form),
        },
        status=status,
    )


@portal_view()
def endpoint_detail(request: HttpRequest, access: Access) -> HttpResponse:
    endpoint = access.endpoint
    # Reveal is a POST that redirects here; the flag it leaves is used once,
    # so a reload or the back button shows the masked secret again.
    revealed = access.can_edit and request.session.pop(reveal_key(endpoint.pk), False)
    live = secrets_of_endpoint(endpoint=endpoint, now=utcnow())
    response = page(
        request,
        access,
        "endpoint_detail.html",
        {
            "secrets": live,
            "revealed": revealed,
            # The current (newest) secret fills the snippets once revealed.
            "snippet_secret": live[0].secret if revealed and live else "whsec_…",
            "breaker": breaker_words(
                getattr(endpoint, "health", None), active=endpoint.is_active
            ),
            "condition": endpoint_condition(endpoint=endpoint, now=utcnow()),
            "defaults": {"max_in_flight": settings.ENDPOINT_MAX_IN_FLIGHT},
            # The retry policy in force, and where each part of it comes from.
            "policy": (policy := policy_in_force(endpoint)),
            "schedule_words": schedule_words(policy.retry_schedule),
            # The relay-wide ones too: they stop this endpoint's deliveries.
            "permanent_statuses": sorted(
                set(endpoint.permanent_statuses or ())
                | set(settings.PERMANENT_FAILURE_STATUSES)
            ),
            "filter_json": json.dumps(endpoint.filter, indent=2)
            if endpoint.filter
            else "",
            "target": target_words(endpoint.kind, endpoint.target),
            "credentials": credentials_words(endpoint.broker_credentials or ""),
            "headers_carried": HEADERS_CARRIED.get(endpoint.kind, ""),
            **credentials_state(endpoint, now=utcnow()),
            **pulling.pull_context(endpoint),
        },
    )
    if revealed:
        response["Cache-Control"] = "no-store"
    return response


def enable_message(endpoint) -> str:
    """What "Enable" did, from the endpoint's rows after it."""
    left = endpoint_unfinished(endpoint_id=endpoint.pk, now=utcnow())
    if endpoint.kind == brokers.PULL:
        return words.pull_enable_message(due=left.due, later=left.later)
    return words.enable_message(due=left.due, later=left.later)


def reveal_key(endpoint_id: str) -> str:
    return f"portal-reveal:{endpoint_id}"


@portal_view(methods=WRITE)
def endpoint_toggle(request: HttpRequest, access: Access) -> HttpResponse:
    if refused := session_refusal(request, access):
        return refused
    endpoint = access.endpoint
    if endpoint.is_active:
        services.endpoint_disable(
            endpoint=endpoint,
            reason=f"disabled in the portal by {request.user}",
            by=f"merchant:{request.user}",
        )
        messages.success(
            request,
            "Endpoint disabled: its consumer gets nothing from it."
            if endpoint.kind == brokers.PULL
            else "Endpoint disabled: nothing is sent to it.",
        )
    else:
        services.endpoint_enable(endpoint=endpoint)
        messages.success(request, enable_message(endpoint))
    return redirect("portal:endpoint_detail", access.merchant.slug, endpoint.pk)


@portal_view(methods=BOTH)
def endpoint_delete(request: HttpRequest, access: Access) -> HttpResponse:
    if request.method == "POST":
        endpoint_id, url = access.endpoint.pk, access.endpoint.url
        services.endpoint_delete(endpoint=access.endpoint)
        said = f"Endpoint {endpoint_id} ({url}) deleted." if url else ""
        messages.success(request, said or f"Endpoint {endpoint_id} deleted.")
        return redirect("portal:endpoint_list", access.merchant.slug)
    return page(request, access, "endpoint_delete.html")
