"""Who is emailed when delivery fails, and re-enabling an endpoint with its
held deliveries."""

from __future__ import annotations

from django.contrib import messages
from django.core.exceptions import ValidationError
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect

from deliveries.notifications import services
from deliveries.notifications.announce import notification_settings
from deliveries.notifications.mail import recipients_of
from endpoints.portal.access import READ, WRITE, Access, portal_view
from endpoints.portal.forms import NotificationsForm
from endpoints.portal.views.common import page


@portal_view(methods=READ + WRITE)
def notifications(request: HttpRequest, access: Access) -> HttpResponse:
    current = notification_settings(merchant_id=access.merchant.pk)
    initial = {
        "email_failing": current.email_failing,
        "email_disabled": current.email_disabled,
        "email_enabled": current.email_enabled,
        "extra_emails": "\n".join(current.extra_emails),
    }
    form = NotificationsForm(
        request.POST if request.method == "POST" else None, initial=initial
    )
    if request.method == "POST" and form.is_valid():
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
    return page(
        request,
        access,
        "notifications.html",
        {"form": form, "owners": recipients_of(merchant_id=access.merchant.pk)},
        status=400 if request.method == "POST" else 200,
    )


@portal_view(methods=WRITE)
def endpoint_reenable(request: HttpRequest, access: Access) -> HttpResponse:
    """Enable, and send the held deliveries now rather than at their retry time."""
    count = services.endpoint_reenable(endpoint=access.endpoint, retry_held=True)
    messages.success(
        request,
        f"Endpoint enabled; {count} held "
        f"{'delivery is' if count == 1 else 'deliveries are'} being sent now.",
    )
    return redirect("portal:endpoint_detail", access.merchant.slug, access.endpoint.pk)
