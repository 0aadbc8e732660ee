"""How the staff console shows endpoint values: whole ms, percentages, words.

Pure helpers shared by the endpoint and endpoint-health admins (and the
delivery lists); they return HTML-safe strings for list columns. A list
draws 50 rows, so what a row costs is kept to string formatting: no
template render and no resolver walk per row (QuickRows, row_url).
"""

from __future__ import annotations

from datetime import datetime
from functools import lru_cache
from urllib.parse import urlsplit

from django.contrib import admin, messages
from django.contrib.admin import helpers
from django.urls import get_script_prefix, reverse
from django.utils.html import format_html, format_html_join
from django.utils.http import urlencode
from django.utils.safestring import SafeString, mark_safe
from django.utils.translation import gettext as _

from endpoints.models import EndpointHealth, Merchant
from endpoints.words import pause_why, reason_last_error

_ID = "0rowid0"  # stands for a row's id in a URL reversed once


@lru_cache(maxsize=256)
def _url_pattern(name: str, prefix: str, arity: int) -> str:
    return reverse(name, args=[_ID] * arity)


def row_url(name: str, *ids: str) -> str:
    """reverse(name, args=ids), reversed once per URL name (and script prefix)
    for ids made of letters, digits and "_", which a URL takes as they are."""
    if not all(i.isascii() and i.replace("_", "").isalnum() for i in ids):
        return reverse(name, args=ids)
    url = _url_pattern(name, get_script_prefix(), len(ids))
    for i in ids:
        url = url.replace(_ID, i, 1)
    return url


class QuickRows:
    """A ModelAdmin mixin: the row's action checkbox as one format_html, and
    the bulk actions in the order staff use them, "Delete" last.

    Django renders it through the form widget templates, a template render
    per row: a quarter of the delivery list's time in a profile at 1 M rows.
    The HTML is the same (tests/deliveries/admin/test_admin_pages.py compares them).
    """

    def changelist_view(self, request, extra_context=None):
        # "Dead letters", not Django's "Select dead letter to change": staff
        # come to these lists to read them.
        extra_context = {
            "title": self.model._meta.verbose_name_plural.capitalize(),
            **(extra_context or {}),
        }
        return super().changelist_view(request, extra_context)

    def get_actions(self, request):
        # Django puts "Delete selected" first, where a hurried pick lands.
        actions = super().get_actions(request)
        delete = actions.pop("delete_selected", None)
        if delete is not None:
            actions["delete_selected"] = delete
        return actions

    @admin.display(description=mark_safe('<input type="checkbox" id="action-toggle">'))
    def action_checkbox(self, obj) -> SafeString:
        label = format_html(_("Select this object for an action - {}"), str(obj))
        return format_html(
            '<input type="checkbox" name="{}" value="{}" class="action-select" '
            'aria-label="{}">',
            helpers.ACTION_CHECKBOX_NAME,
            str(obj.pk),
            label,
        )


def cut(text: str, size: str = "") -> SafeString:
    """A long value cut with an ellipsis by CSS; the whole of it in the tooltip."""
    return format_html('<span class="cut {}" title="{}">{}</span>', size, text, text)


URL_SHOWN_CHARS = 24


def middle_cut(text: str, keep: int = URL_SHOWN_CHARS) -> str:
    """A URL with its host whole and its path's middle replaced by "…" past
    `keep` characters of path.

    URLs of one receiver share their start: cut at the end, two endpoints on
    one host read the same; cut inside the host, staff cannot tell where it
    goes. The host and the path's end tell them apart.
    """
    parts = urlsplit(text)
    origin = f"{parts.scheme}://{parts.netloc}" if parts.netloc else ""
    rest = text[len(origin) :]
    if len(rest) <= keep:
        return text
    tail = keep * 2 // 3
    head = keep - tail - 1
    return f"{origin}{rest[:head]}…{rest[-tail:]}"


def url_cut(url: str) -> SafeString:
    """A URL cut in its path's middle, its host whole; the whole of it on hover.
    The host is one unbroken piece; the path may wrap after its slashes."""
    shown = middle_cut(url)
    parts = urlsplit(url)
    origin = f"{parts.scheme}://{parts.netloc}" if parts.netloc else ""
    path = format_html_join(
        mark_safe("/<wbr>"),
        "{}",
        ((piece,) for piece in shown[len(origin) :].split("/")),
    )
    # A broker URL's user (its password shown as ***) may wrap after its "@":
    # the host itself stays whole.
    user, at, host = origin.rpartition("@")
    hosts = (
        format_html(
            '<span class="host">{}@</span><wbr><span class="host">{}</span>', user, host
        )
        if at
        else format_html('<span class="host">{}</span>', origin)
    )
    return format_html('<span class="url-cut" title="{}">{}{}</span>', url, hosts, path)


def ms(value: float | None) -> str:
    return "-" if value is None else f"{value:,.0f}"


def response_header(quantile: str) -> SafeString:
    """A list column of the receiver's response time: "response p95 ms", on two
    lines (the pipeline's publish-to-delivery figures are another thing)."""
    return format_html("response<br>{} ms", quantile)


def percent(rate: float | None) -> str:
    if rate is None:
        return "-"
    # 99.96 % must not read as 100 %: one decimal below a whole 100.
    return "100 %" if rate >= 1 else f"{min(rate * 100, 99.9):.1f} %"


def utc(value: datetime | None) -> str:
    return "-" if value is None else value.strftime("%Y-%m-%d %H:%M:%S UTC")


def breaker_words(health: EndpointHealth) -> str:
    """E.g. "paused since 2026-12-03 14:02:05 UTC after 10 failures in a row
    (last: HTTP 500 Internal Server Error); next try at ...": the portal's
    vocabulary (endpoints/words.py), with dates and seconds for staff."""
    failures = health.consecutive_failures
    plural = "" if failures == 1 else "s"
    last = reason_last_error(health.breaker_reason)
    if failures:
        why = f" after {failures} failure{plural} in a row"
        why += f" (last: {last})" if last else ""
    else:
        # Paused by hand (the stored reason says by whom), or a failed test
        # delivery's reason, in words.
        why = pause_why(health.breaker_reason)
    if health.breaker_state == EndpointHealth.State.OPEN:
        return (
            f"paused since {utc(health.opened_at)}{why}; next try at "
            f"{utc(health.next_probe_at)}"
        )
    if health.breaker_state == EndpointHealth.State.HALF_OPEN:
        return f"testing: one delivery decides whether sending resumes (paused{why})"
    if failures:
        return (
            f"sending, {failures} failure{plural} in a row "
            f"(pauses at {health.failure_threshold})"
        )
    return "sending"


# The relay's own merchant (relay.operational, which sends the operational
# events) has a dot in its slug, which no merchant the API or the admin
# accepts can have.
RELAY_OWN = " (the relay's own)"


class _MarksRelayOwn:
    def field_choices(self, field, request, model_admin):
        choices = super().field_choices(field, request, model_admin)
        own = set(
            Merchant.objects.filter(slug__contains=".").values_list("pk", flat=True)
        )
        marked = [
            (pk, f"{label}{RELAY_OWN}" if pk in own else label) for pk, label in choices
        ]
        return sorted(marked, key=lambda choice: choice[0] in own)


class MerchantFilter(_MarksRelayOwn, admin.RelatedFieldListFilter):
    """The merchant filter, the relay's own merchant marked and listed last."""


class MerchantOnlyFilter(_MarksRelayOwn, admin.RelatedOnlyFieldListFilter):
    """The same, of the merchants that have rows in the list."""


def deliveries_links(endpoint_id: str) -> SafeString:
    query = urlencode({"endpoint__id__exact": endpoint_id})
    return format_html(
        '<a href="{}?{}">dead letters</a> · <a href="{}?{}">deliveries</a>',
        row_url("admin:deliveries_deadletter_changelist"),
        query,
        row_url("admin:deliveries_delivery_changelist"),
        query,
    )


def log_and_tell(model_admin, request, endpoints, message: str) -> None:
    """An action's admin log entry per endpoint, and one message for staff."""
    for endpoint in endpoints:
        model_admin.log_change(request, endpoint, message)
    model_admin.message_user(
        request, f"{message}: {', '.join(e.pk for e in endpoints)}.", messages.SUCCESS
    )
