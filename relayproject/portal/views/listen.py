"""Listen sessions (deliveries/pull/sessions.py): the merchant's live
sessions, which every role may see; owners and developers start and end
them here. A session started here is shown once, with its signing secret
and the `listen` command that attaches to it, then never again."""

from __future__ import annotations

import logging

from django.conf import settings
from django.contrib import messages
from django.core.exceptions import ValidationError
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect

from deliveries.pull.sessions import session_end, session_start
from endpoints.models import Endpoint
from endpoints.selectors import secrets_of_endpoint
from relayproject.lib.clock import utcnow
from relayproject.lib.limits import LimitExceeded
from relayproject.portal import pulling
from relayproject.portal.access import WRITE, Access, portal_view
from relayproject.portal.forms import ListenStartForm
from relayproject.portal.views.common import page

logger = logging.getLogger("relayproject.portal")

# The session key that carries a session just started to the next page
# view, once: its secret is shown then, and never again.
STARTED_KEY = "portal-listen-started"


def live_sessions(merchant_id: int) -> list[Endpoint]:
    return list(
        Endpoint.objects.filter(
            merchant_id=merchant_id, listen_session=True, is_active=True
        )
        .select_related("health")
        .order_by("-created_at", "-id")
    )


def _page(
    request: HttpRequest,
    access: Access,
    form: ListenStartForm,
    *,
    started: dict | None = None,
    status: int = 200,
) -> HttpResponse:
    merchant = access.merchant
    response = page(
        request,
        access,
        "listen.html",
        {
            "sessions": live_sessions(merchant.pk),
            "form": form,
            "started": started,
            "idle_seconds": settings.LISTEN_IDLE_SECONDS,
            "own_command": pulling.listen_command(merchant_slug=merchant.slug),
            "now": utcnow(),
        },
        status=status,
    )
    if started:
        response["Cache-Control"] = "no-store"  # the page holds a secret
    return response


def _started(request: HttpRequest, access: Access) -> dict | None:
    """The session this visitor just started, with its secret, once."""
    endpoint_id = request.session.pop(STARTED_KEY, None)
    if not endpoint_id or not access.can_edit:
        return None
    endpoint = Endpoint.objects.filter(
        merchant=access.merchant, pk=endpoint_id, listen_session=True
    ).first()
    if endpoint is None:
        return None
    live = secrets_of_endpoint(endpoint=endpoint, now=utcnow())
    return {
        "endpoint": endpoint,
        "secret": live[0].secret if live else "",
        "command": pulling.listen_command(
            merchant_slug=access.merchant.slug, session_id=endpoint.pk
        ),
    }


@portal_view()
def listen_sessions(request: HttpRequest, access: Access) -> HttpResponse:
    return _page(request, access, ListenStartForm(), started=_started(request, access))


@portal_view(methods=WRITE)
def listen_session_start(request: HttpRequest, access: Access) -> HttpResponse:
    form = ListenStartForm(request.POST)
    if not form.is_valid():
        return _page(request, access, form, status=400)
    try:
        endpoint = session_start(
            merchant=access.merchant,
            event_types=form.event_types_asked(),
            description=form.cleaned_data["description"],
            now=utcnow(),
        )
    except ValidationError as exc:
        for key, problems in exc.message_dict.items():
            name = key if key in form.fields else None
            for problem in problems:
                form.add_error(name, problem)
        return _page(request, access, form, status=400)
    except LimitExceeded as exc:
        form.add_error(None, exc.detail)
        return _page(request, access, form, status=400)
    logger.info(
        "listen session started by=%s merchant=%s endpoint_id=%s",
        access.who,
        access.merchant.slug,
        endpoint.pk,
    )
    request.session[STARTED_KEY] = endpoint.pk
    messages.success(
        request,
        f"Listen session {endpoint.pk} started. Run its command below within "
        f"{settings.LISTEN_IDLE_SECONDS} s: a session nothing pulls for that "
        "long ends by itself.",
    )
    return redirect("portal:listen_sessions", access.merchant.slug)


@portal_view(methods=WRITE)
def listen_session_end(request: HttpRequest, access: Access) -> HttpResponse:
    endpoint = access.endpoint
    if not endpoint.listen_session:
        raise Http404("No such listen session")
    dead = session_end(endpoint=endpoint, why="portal", now=utcnow())
    if not endpoint.is_active:
        messages.info(request, f"Listen session {endpoint.pk} had ended already.")
    else:
        logger.info(
            "listen session ended by=%s merchant=%s endpoint_id=%s dead=%d",
            access.who,
            access.merchant.slug,
            endpoint.pk,
            dead,
        )
        unfinished = (
            f" {dead} unfinished message{' went' if dead == 1 else 's went'} dead."
            if dead
            else ""
        )
        messages.success(
            request,
            f"Listen session {endpoint.pk} ended: its command gets no more "
            f"messages.{unfinished}",
        )
    if request.POST.get("next") == "endpoint":
        return redirect("portal:endpoint_detail", access.merchant.slug, endpoint.pk)
    return redirect("portal:listen_sessions", access.merchant.slug)


def session_refusal(request: HttpRequest, access: Access) -> HttpResponse | None:
    """A listen session is ended, never disabled or enabled: its end is for
    good (its messages went dead). A redirect saying so, or None."""
    if not access.endpoint.listen_session:
        return None
    messages.error(
        request,
        "A listen session is not disabled or enabled: end it, and start a new "
        "one on the Listen page when you need one.",
    )
    return redirect("portal:endpoint_detail", access.merchant.slug, access.endpoint.pk)
