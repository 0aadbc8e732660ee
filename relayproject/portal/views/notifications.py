"""Who is emailed when delivery fails, and re-enabling an endpoint with its
held deliveries. Only owners see and change who besides them is emailed, and
only owners see the owners' addresses."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django.conf import settings
from django.contrib import messages
from django.core.exceptions import ValidationError
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect

from deliveries import words
from deliveries.notifications import addresses, services
from deliveries.notifications.announce import notification_settings
from deliveries.notifications.mail import owner_addresses
from deliveries.notifications.models import NotificationAddress
from deliveries.selectors import endpoint_unfinished
from endpoints import brokers
from relayproject.lib.clock import utcnow
from relayproject.portal.access import READ, WRITE, Access, portal_view
from relayproject.portal.notification_forms import (
    ONLY_OWNERS,
    AddressAskForm,
    NotificationsForm,
)
from relayproject.portal.views.common import page
from relayproject.portal.views.listen import session_refusal


def _initial(access: Access) -> dict:
    current = notification_settings(merchant_id=access.merchant.pk)
    listed = addresses.listed_addresses(merchant_id=access.merchant.pk)
    return {
        "email_failing": current.email_failing,
        "email_disabled": current.email_disabled,
        "email_enabled": current.email_enabled,
        "extra_emails": "\n".join(a.email for a in listed) if access.is_owner else "",
    }


def _form(access: Access, data=None) -> NotificationsForm:
    return NotificationsForm(data, initial=_initial(access), owner=access.is_owner)


@dataclass(frozen=True)
class AddressRow:
    email: str
    confirmed_at: datetime | None
    asked_at: datetime | None
    link_open: bool  # its last confirmation's link still works
    can_ask: bool  # a confirmation may be sent now


def _rows(listed: list[NotificationAddress], now: datetime) -> list[AddressRow]:
    return [
        AddressRow(
            email=a.email,
            confirmed_at=a.confirmed_at,
            asked_at=a.asked_at,
            link_open=a.token_expires_at is not None and a.token_expires_at > now,
            can_ask=not a.confirmed
            and (a.asked_at is None or now - a.asked_at >= addresses.ASK_EVERY),
        )
        for a in listed
    ]


def _page(request, access: Access, form: NotificationsForm, *, status: int = 200):
    merchant_id = access.merchant.pk
    owners = owner_addresses(merchant_id=merchant_id)
    listed = addresses.listed_addresses(merchant_id=merchant_id)
    context = {
        "form": form,
        "owner_count": len(owners),
        "extra_count": len(listed),
        "confirmed_count": sum(a.confirmed for a in listed),
        "per_day": settings.RELAY_NOTIFICATION_MAIL_PER_DAY,
    }
    if access.is_owner:  # the addresses themselves: owners only
        context.update(owners=owners, addresses=_rows(listed, utcnow()))
    return page(request, access, "notifications.html", context, status=status)


def _tell(request: HttpRequest, ask: addresses.Ask) -> None:
    """What became of one confirmation, in words that say what happens next."""
    to = ask.email
    if ask.outcome == addresses.SENT:
        days = addresses.CONFIRM_TTL.days
        messages.success(
            request,
            f"A confirmation was sent to {to}. It gets notifications once its "
            f"owner opens the link (valid for {days} days).",
        )
    elif ask.outcome == addresses.TOO_SOON:
        messages.warning(
            request,
            f"No confirmation sent to {to}: one was sent less than a day ago. "
            f"It can be sent again after {ask.again_at:%Y-%m-%d %H:%M} UTC.",
        )
    elif ask.outcome == addresses.NO_ALLOWANCE:
        messages.warning(
            request,
            f"No confirmation sent to {to}: this merchant's "
            f"{settings.RELAY_NOTIFICATION_MAIL_PER_DAY} emails for today "
            "(UTC) are spent. Send it again tomorrow.",
        )
    elif ask.outcome == addresses.FAILED:
        messages.error(
            request,
            f"The confirmation to {to} could not be sent: the mail server did "
            "not take it. Send it again later.",
        )
    else:
        messages.info(request, f"{to} is not waiting for a confirmation.")


@portal_view()
def notifications(request: HttpRequest, access: Access) -> HttpResponse:
    """Who is emailed, for every role; editors get the form, which posts to
    notification_settings (a write URL of its own, so viewers never reach it)."""
    return _page(request, access, _form(access))


@portal_view(methods=READ + WRITE)
def notification_settings_edit(request: HttpRequest, access: Access) -> HttpResponse:
    """Save the form; or, with `ask`, send one listed address its confirmation
    again. Developers change the kinds only: addresses are refused beside the
    field, whatever the page showed them."""
    if request.method != "POST":
        return _page(request, access, _form(access))
    if "ask" in request.POST:
        return _ask_again(request, access)
    form = _form(access, request.POST)
    if form.is_valid():
        try:
            saved = services.notification_settings_update(
                merchant=access.merchant, **form.service_kwargs(), now=utcnow()
            )
        except ValidationError as exc:
            for field, errors in exc.message_dict.items():
                for error in errors:
                    form.add_error(field, error)
        else:
            messages.success(request, "Notification settings saved.")
            for ask in saved.asked:
                _tell(request, ask)
            return redirect("portal:notifications", access.merchant.slug)
    return _page(request, access, form, status=400)


def _ask_again(request: HttpRequest, access: Access) -> HttpResponse:
    """An owner's "send the confirmation again"; refused beside the field for others."""
    ask = AddressAskForm(request.POST)
    if not access.is_owner or not ask.is_valid():
        form = _form(access, _initial(access))  # bound: it can carry an error
        form.is_valid()
        form.add_error(
            "extra_emails",
            ONLY_OWNERS if not access.is_owner else "Not one of the listed addresses.",
        )
        return _page(request, access, form, status=400)
    outcome = addresses.confirmation_ask(
        merchant_id=access.merchant.pk,
        email=addresses.normalised(ask.cleaned_data["ask"]),
        now=utcnow(),
    )
    _tell(request, outcome)
    return redirect("portal:notifications", access.merchant.slug)


@portal_view(methods=WRITE)
def endpoint_reenable(request: HttpRequest, access: Access) -> HttpResponse:
    """Enable, and send the held deliveries now rather than at their retry time."""
    if refused := session_refusal(request, access):
        return refused
    services.endpoint_reenable(endpoint=access.endpoint, retry_held=True, now=utcnow())
    # Said from the rows as they are after it, not from what it meant to do.
    left = endpoint_unfinished(endpoint_id=access.endpoint.pk, now=utcnow())
    if access.endpoint.kind == brokers.PULL:
        said = words.pull_enable_message(due=left.due, later=left.later)
    else:
        said = words.reenable_message(
            due=left.due,
            in_flight=left.in_flight,
            rate_limit=access.endpoint.rate_limit_per_second,
        )
    messages.success(request, said)
    return redirect("portal:endpoint_detail", access.merchant.slug, access.endpoint.pk)
