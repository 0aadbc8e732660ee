"""Who is emailed when delivery fails, and re-enabling an endpoint with its
held deliveries."""

from __future__ import annotations

from django.contrib import messages
from django.core.exceptions import ValidationError
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect

from deliveries import words
from deliveries.notifications import services
from deliveries.notifications.announce import notification_settings
from deliveries.notifications.mail import owner_addresses
from deliveries.selectors import endpoint_unfinished
from relayproject.lib.clock import utcnow
from relayproject.portal.access import READ, WRITE, Access, portal_view
from relayproject.portal.forms import NotificationsForm
from relayproject.portal.views.common import page


def _initial(access: Access) -> dict:
    current = notification_settings(merchant_id=access.merchant.pk)
    return {
        "email_failing": current.email_failing,
        "email_disabled": current.email_disabled,
        "email_enabled": current.email_enabled,
        "extra_emails": "\n".join(current.extra_emails),
    }


def _page(request, access: Access, form: NotificationsForm, *, status: int = 200):
    return page(
        request,
        access,
        "notifications.html",
        {"form": form, "owners": owner_addresses(merchant_id=access.merchant.pk)},
        status=status,
    )


@portal_view()
def notifications(request: HttpRequest, access: Access) -> HttpResponse:
    """Who is emailed, for every role; editors get the form, which posts to
    notification_settings (a write URL of its own, so viewers never reach it)."""
    return _page(request, access, NotificationsForm(initial=_initial(access)))


@portal_view(methods=READ + WRITE)
def notification_settings_edit(request: HttpRequest, access: Access) -> HttpResponse:
    if request.method != "POST":
        return _page(request, access, NotificationsForm(initial=_initial(access)))
    form = NotificationsForm(request.POST, initial=_initial(access))
    if form.is_valid():
        try:
            services.notification_settings_update(
                merchant=access.merchant, **form.service_kwargs()
            )
        except ValidationError as exc:
            for field, errors in exc.message_dict.items():
                for error in errors:
                    form.add_error(field, error)
        else:
            messages.success(request, "Notification settings saved.")
            return redirect("portal:notifications", access.merchant.slug)
    return _page(request, access, form, status=400)


@portal_view(methods=WRITE)
def endpoint_reenable(request: HttpRequest, access: Access) -> HttpResponse:
    """Enable, and send the held deliveries now rather than at their retry time."""
    services.endpoint_reenable(endpoint=access.endpoint, retry_held=True, now=utcnow())
    # Said from the rows as they are after it, not from what it meant to do.
    left = endpoint_unfinished(endpoint_id=access.endpoint.pk, now=utcnow())
    messages.success(
        request,
        words.reenable_message(
            due=left.due,
            in_flight=left.in_flight,
            rate_limit=access.endpoint.rate_limit_per_second,
        ),
    )
    return redirect("portal:endpoint_detail", access.merchant.slug, access.endpoint.pk)
