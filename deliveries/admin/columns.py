"""How the staff console shows a delivery: list columns and page fields.

Times carry seconds and UTC (the project's DATETIME_FORMAT), milliseconds
are whole, long values are cut in lists (full on the page), and a pending
row says why it is not moving (deliveries.ops.held). Lists select_related
``endpoint__merchant`` and ``endpoint__health`` and prefetch ``event``, so
no column costs a query per row.
"""

from __future__ import annotations

import json

from django.contrib import admin
from django.urls import reverse
from django.utils.html import format_html, format_html_join
from django.utils.http import urlencode
from django.utils.safestring import mark_safe

from deliveries import signing, words
from deliveries.models import Attempt, Delivery
from deliveries.ops.held import delivery_held
from deliveries.retry import is_success
from endpoints.admin.present import cut, ms, row_url, url_cut
from relayproject.lib.clock import utcnow

RESPONSE_EXCERPT_CHARS = 200
REQUEST_BODY_SHOWN_CHARS = 20_000  # the page stays light for a large event
REPLAYABLE = Delivery.Status.FINISHED
# Constants, no value in them: an attempt without response headers, and one of
# a verification, whose answer's headers are never kept.
_NO_HEADERS = {
    False: "<tr><td>none</td></tr>",
    True: "<tr><td>not kept (the answer to a verification challenge)</td></tr>",
}


def _result(code: int | None, error: str) -> str:
    """The last answer in the relay's words: "HTTP 503 Service Unavailable",
    "Connection refused" (deliveries/words.py)."""
    if is_success(code):
        return f"HTTP {code}"
    return words.last_error_words(last_error=error, status_code=code) or "-"


class AttemptInline(admin.TabularInline):
    model = Attempt
    extra = 0
    can_delete = False
    show_change_link = False
    fields = readonly_fields = (
        "number",
        "started_at",
        "outcome",
        "status_code",
        "duration",
        "error_words",
        "response_excerpt",
        "sent_record",
        "worker_id",
    )
    ordering = ("number",)

    def has_add_permission(self, request, obj=None) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    @admin.display(description="ms")
    def duration(self, attempt: Attempt) -> str:
        return ms(attempt.response_ms)

    @admin.display(description="error")
    def error_words(self, attempt: Attempt) -> str:
        said = words.error_words(
            error_kind=attempt.error_kind,
            error_message=attempt.error_message,
            status_code=attempt.status_code,
        )
        if not attempt.error_kind:
            return said or "-"
        # The API's code too, as code: staff match it to what the API returned.
        return format_html('{}<code class="sub">{}</code>', said, attempt.error_kind)

    @admin.display(description="request and response headers")
    def sent_record(self, attempt: Attempt) -> str:
        """The attempt's own record: URL and headers as sent (secrets as
        fingerprints), and the response headers. Never rebuilt."""
        if attempt.request_url is None:
            return "not recorded (made before attempts kept their requests)"
        rows = format_html_join(
            "", "<tr><th>{}</th><td>{}</td></tr>", attempt.request_headers or []
        )
        if not attempt.request_url.startswith(("http://", "https://")):
            # A broker endpoint's (deliveries/dispatch/brokers/): the headers
            # went as message headers, and the broker's answer, which has no
            # headers, is the response excerpt.
            return format_html(
                '<details class="attempt-record"><summary>Published to {}</summary>'
                '<table class="headers">{}</table></details>',
                attempt.request_url,
                rows,
            )
        answer = format_html_join(
            "", "<tr><th>{}</th><td>{}</td></tr>", attempt.response_headers or []
        )
        return format_html(
            '<details class="attempt-record"><summary>POST {}</summary>'
            '<table class="headers">{}</table><p>Response headers:</p>'
            '<table class="headers">{}</table></details>',
            attempt.request_url,
            rows,
            answer
            or mark_safe(_NO_HEADERS[words.answer_not_kept(attempt.response_body)]),
        )

    @admin.display(description="response (excerpt)")
    def response_excerpt(self, attempt: Attempt) -> str:
        body = attempt.response_body
        if len(body) <= RESPONSE_EXCERPT_CHARS:
            return body
        return body[:RESPONSE_EXCERPT_CHARS] + "…"


class EndpointFilter(admin.SimpleListFilter):
    """Filter by endpoint without listing every endpoint in the sidebar.

    The links from endpoint pages and the analysis set `endpoint__id__exact`;
    the sidebar shows only the endpoint chosen, so a console with thousands
    of endpoints reads none of them to draw it.
    """

    title = "endpoint"
    parameter_name = "endpoint__id__exact"

    def lookups(self, request, model_admin):
        chosen = self.value()
        return [(chosen, chosen)] if chosen else []

    def has_output(self) -> bool:
        return bool(self.value())

    def queryset(self, request, queryset):
        if self.value():
            return queryset.filter(endpoint_id=self.value())
        return queryset


class DeliveryColumns:
    """Display methods for ModelAdmins of Delivery (the list and the dead letters)."""

    @admin.display(description="delivery", ordering="pk")
    def delivery_column(self, delivery: Delivery) -> str:
        """The id, linking to the page, and the time that matters in this list."""
        when_label, when = "created", delivery.created_at
        if self.opts.model_name == "deadletter":
            when_label, when = "dead", delivery.dead_at
        url = row_url(
            f"admin:{self.opts.app_label}_{self.opts.model_name}_change", delivery.pk
        )
        # Its ordered lane's word, short: a column of its own would widen
        # the lists past 1280 px.
        lane = ""
        if delivery.out_of_order:
            lane = "Replayed out of order"
        elif delivery.ordering_key and delivery.status == Delivery.Status.DEAD:
            lane = "Skipped in order"
        return format_html(
            '<a href="{}">{}</a><span class="sub">{} {}</span>{}',
            url,
            delivery.pk,
            when_label,
            when.strftime("%Y-%m-%d %H:%M:%S UTC") if when else "-",
            format_html('<span class="sub lane">{}</span>', lane) if lane else "",
        )

    @admin.display(description="state", ordering="status")
    def state(self, delivery: Delivery) -> str:
        held = delivery_held(delivery=delivery, now=utcnow())
        if held is None:
            return delivery.get_status_display()
        return format_html(
            '{}<span class="held{}">{}</span>',
            delivery.get_status_display(),
            " hold" if held.is_hold else "",
            held.text,
        )

    @admin.display(description="why not moving")
    def held(self, delivery: Delivery) -> str:
        held = delivery_held(delivery=delivery, now=utcnow())
        return "- (finished)" if held is None else held.text

    @admin.display(description="event type", ordering="event__type")
    def event_type(self, delivery: Delivery) -> str:
        return cut(delivery.event.type, "narrow")

    @admin.display(description="endpoint")
    def endpoint_column(self, delivery: Delivery) -> str:
        return format_html(
            '{}<span class="sub">{}</span>',
            url_cut(delivery.endpoint.url),
            delivery.endpoint.merchant.slug,
        )

    @admin.display(description="last result")
    def last_result(self, delivery: Delivery) -> str:
        return cut(_result(delivery.last_status_code, delivery.last_error))

    @admin.display(description="attempts", ordering="attempt_count")
    def attempts(self, delivery: Delivery) -> str:
        return str(delivery.attempt_count)

    @admin.display(description="event")
    def event_link(self, delivery: Delivery) -> str:
        url = reverse("admin:deliveries_event_change", args=[delivery.event_id])
        return format_html('<a href="{}">{}</a>', url, delivery.event_id)

    @admin.display(description="endpoint")
    def endpoint_link(self, delivery: Delivery) -> str:
        url = reverse("admin:endpoints_endpoint_change", args=[delivery.endpoint_id])
        return format_html(
            '<a href="{}">{}</a> {} ({})',
            url,
            delivery.endpoint_id,
            delivery.endpoint.url,
            delivery.endpoint.merchant.slug,
        )

    @admin.display(description="order")
    def lane(self, delivery: Delivery) -> str:
        """Its ordered lane (deliveries/lanes.py): skipped, replayed out of it."""
        note = words.lane_note(
            status=delivery.status,
            ordering_key=delivery.ordering_key,
            out_of_order=delivery.out_of_order,
        )
        if note or not delivery.ordering_key:
            return note
        return f"In order: ordering key {delivery.ordering_key!r}"

    @admin.display(description="why it stopped")
    def stop_reason(self, delivery: Delivery) -> str:
        return words.stop_reason(
            status=delivery.status,
            attempts=list(delivery.attempts.all()),
            attempts_used=delivery.attempts_in_budget,
        )

    @admin.display(description="attempts")
    def attempt_budget(self, delivery: Delivery) -> str:
        line = f"{delivery.attempt_count} made"
        if delivery.budget_start:
            # A replay starts the budget afresh; an egress proxy's failure
            # is never counted in it.
            line += f", {delivery.attempts_in_budget} counted towards max attempts"
        return line

    @admin.display(description="last result")
    def last_result_full(self, delivery: Delivery) -> str:
        result = _result(delivery.last_status_code, delivery.last_error)
        if delivery.last_response_ms is None:
            return result
        return f"{result} in {ms(delivery.last_response_ms)} ms"

    @admin.display(description="request body as sent")
    def request_body(self, delivery: Delivery) -> str:
        event = delivery.event
        body = signing.serialize_body(
            event_id=event.pk,
            event_type=event.type,
            created_at=event.created_at,
            data=event.data,
        )
        pretty = json.dumps(json.loads(body), indent=2, ensure_ascii=False)
        more = ""
        if len(pretty) > REQUEST_BODY_SHOWN_CHARS:
            more = f"\n… ({len(pretty) - REQUEST_BODY_SHOWN_CHARS:,} more characters)"
            pretty = pretty[:REQUEST_BODY_SHOWN_CHARS]
        return format_html(
            '<pre class="request-body">{}{}</pre><span class="sub">{} bytes, '
            "sent compact; shown indented</span>",
            pretty,
            more,
            f"{len(body):,}",
        )

    @admin.display(description="replay")
    def replay_button(self, delivery: Delivery) -> str:
        if delivery.status not in REPLAYABLE:
            return "-"
        url = row_url("admin:deliveries_delivery_replay", delivery.pk)
        # formaction posts the surrounding changelist form, which carries the
        # CSRF token; a form cannot be nested inside it.
        return format_html(
            '<button type="submit" class="button replay-button" formmethod="post" '
            'formaction="{}?{}">Replay</button>',
            url,
            urlencode({"next": self._changelist_url()}),
        )

    def _changelist_url(self) -> str:
        return row_url(f"admin:{self.opts.app_label}_{self.opts.model_name}_changelist")


def page_fields(delivery: Delivery | None) -> tuple[str, ...]:
    """The delivery page's fields: only those that mean something in its state."""
    fields = ["id", "event_link", "endpoint_link", "status"]
    finished = delivery is not None and delivery.status in REPLAYABLE
    if not finished:
        fields += ["held", "next_attempt_at"]
    if delivery is not None and delivery.status == Delivery.Status.WAITING:
        fields.remove("next_attempt_at")  # set when its lane's turn comes
    if delivery is not None and delivery.status == Delivery.Status.DELIVERING:
        fields += ["claimed_by", "claimed_until"]
    fields += ["attempt_budget", "last_attempt_at", "last_result_full", "created_at"]
    if delivery is None or delivery.succeeded_at:
        fields.append("succeeded_at")
    if delivery is None or delivery.dead_at:
        fields.append("dead_at")
    if delivery is None or delivery.status == Delivery.Status.DEAD:
        fields.insert(fields.index("status") + 1, "stop_reason")
    if delivery is None or delivery.ordering_key or delivery.out_of_order:
        fields.insert(fields.index("status") + 1, "lane")
    return (*fields, "request_body")
