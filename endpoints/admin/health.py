"""Endpoint health in the staff console: one dense row per endpoint.

Percentiles in whole milliseconds, success as a percentage, the breaker in
words; sortable by p95 and by success (failure rate), filtered to slow or to
breakers that are not closed. The numbers behind the words are on each
row's page.
"""

from __future__ import annotations

from django.contrib import admin
from django.db.models import F
from django.urls import reverse
from django.utils.html import format_html
from django.utils.safestring import mark_safe

from endpoints import brokers
from endpoints.admin.model_admins import EndpointActions
from endpoints.admin.present import (
    breaker_words,
    deliveries_links,
    ms,
    percent,
    response_header,
    url_cut,
)
from endpoints.admin.present import utc as utc_text
from endpoints.admin.pulling import destination_words, pull_words
from endpoints.models import Endpoint, EndpointHealth


class BreakerFilter(admin.SimpleListFilter):
    title = "sending"
    parameter_name = "breaker"  # kept: links and bookmarks use it

    def lookups(self, request, model_admin):
        return (("open", "paused or testing"), ("closed", "sending"))

    def queryset(self, request, queryset):
        if self.value() == "open":
            return queryset.exclude(breaker_state=EndpointHealth.State.CLOSED)
        if self.value() == "closed":
            return queryset.filter(breaker_state=EndpointHealth.State.CLOSED)
        return queryset


class SlowFilter(admin.SimpleListFilter):
    title = "latency"
    parameter_name = "slow"

    def lookups(self, request, model_admin):
        return (("yes", "slow (p95 over 2 s)"), ("no", "not slow"))

    def queryset(self, request, queryset):
        if self.value() in ("yes", "no"):
            return queryset.filter(is_slow=self.value() == "yes")
        return queryset


@admin.register(EndpointHealth)
class EndpointHealthAdmin(EndpointActions, admin.ModelAdmin):
    list_display = (
        "endpoint_column",
        "breaker",
        "p50",
        "p95",
        "p99",
        "success",
        "samples",
        "links",
    )
    list_display_links = None  # the endpoint column links to the health page
    list_select_related = ("endpoint__merchant",)
    list_filter = (BreakerFilter, SlowFilter)
    search_fields = (
        "=endpoint__id",
        "endpoint__url",
        "endpoint__description",
        "endpoint__merchant__slug",
    )
    search_help_text = "An id (ep_…), part of a URL or description, or a merchant slug."
    ordering = (F("p95_ms").desc(nulls_last=True), "endpoint_id")
    show_full_result_count = False
    fields = readonly_fields = (
        "endpoint_link",
        "breaker",
        "consecutive_failures",
        "failure_threshold",
        "cooldown",
        "opened",
        "next_probe",
        "last_success",
        "last_failure",
        "latency",
        "success",
        "sample_count",
        "slow",
        "refreshed",
    )

    def _endpoints(self, queryset) -> list[Endpoint]:
        return [health.endpoint for health in queryset.select_related("endpoint")]

    def has_add_permission(self, request) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False

    def get_queryset(self, request):
        return super().get_queryset(request).select_related("endpoint__merchant")

    # -- list columns -------------------------------------------------------

    @admin.display(description="endpoint", ordering="endpoint__url")
    def endpoint_column(self, h: EndpointHealth) -> str:
        return format_html(
            '<a href="{}">{}</a>{}<span class="sub">{} · {}</span>',
            reverse("admin:endpoints_endpointhealth_change", args=[h.pk]),
            h.endpoint_id,
            "" if h.endpoint.is_active else mark_safe(" <strong>disabled</strong>"),
            h.endpoint.merchant.slug,
            destination_words(h.endpoint) or url_cut(h.endpoint.url),
        )

    @admin.display(description="sending", ordering="breaker_state")
    def breaker(self, h: EndpointHealth) -> str:
        if h.endpoint.kind == brokers.PULL:
            return pull_words(h.endpoint, h)  # never sent to: no breaker
        words = breaker_words(h)
        if h.breaker_state == EndpointHealth.State.CLOSED:
            return words
        return format_html('<span class="held hold">{}</span>', words)

    @admin.display(
        description=response_header("p50"),
        ordering=F("p50_ms").desc(nulls_last=True),
    )
    def p50(self, h: EndpointHealth) -> str:
        return ms(h.p50_ms)

    @admin.display(
        description=response_header("p95"),
        ordering=F("p95_ms").desc(nulls_last=True),
    )
    def p95(self, h: EndpointHealth) -> str:
        text = ms(h.p95_ms)
        return format_html("<strong>{}</strong>", text) if h.is_slow else text

    @admin.display(
        description=response_header("p99"),
        ordering=F("p99_ms").desc(nulls_last=True),
    )
    def p99(self, h: EndpointHealth) -> str:
        return ms(h.p99_ms)

    # Ascending success is descending failure rate: the worst first.
    @admin.display(description="success 24 h", ordering=F("success_rate").asc())
    def success(self, h: EndpointHealth) -> str:
        return percent(h.success_rate)

    @admin.display(description="attempts 24 h", ordering="sample_count")
    def samples(self, h: EndpointHealth) -> str:
        return f"{h.sample_count:,}"

    @admin.display(description="rows")
    def links(self, h: EndpointHealth) -> str:
        return deliveries_links(h.endpoint_id)

    # -- the page -----------------------------------------------------------

    @admin.display(description="endpoint")
    def endpoint_link(self, h: EndpointHealth) -> str:
        return format_html(
            '<a href="{}">{}</a> {} ({})<br>{}',
            reverse("admin:endpoints_endpoint_change", args=[h.endpoint_id]),
            h.endpoint_id,
            destination_words(h.endpoint) or h.endpoint.url,
            h.endpoint.merchant.slug,
            deliveries_links(h.endpoint_id),
        )

    @admin.display(description="cooldown")
    def cooldown(self, h: EndpointHealth) -> str:
        return f"{h.cooldown_seconds:.0f} s"

    @admin.display(description="opened at")
    def opened(self, h: EndpointHealth) -> str:
        return utc_text(h.opened_at)

    @admin.display(description="next probe at")
    def next_probe(self, h: EndpointHealth) -> str:
        return utc_text(h.next_probe_at)

    @admin.display(description="last success")
    def last_success(self, h: EndpointHealth) -> str:
        return utc_text(h.last_success_at)

    @admin.display(description="last failure")
    def last_failure(self, h: EndpointHealth) -> str:
        return utc_text(h.last_failure_at)

    @admin.display(description="response time, 24 h (a pull's: lease to ack)")
    def latency(self, h: EndpointHealth) -> str:
        return f"p50 {ms(h.p50_ms)} ms · p95 {ms(h.p95_ms)} ms · p99 {ms(h.p99_ms)} ms"

    @admin.display(description="slow", boolean=True)
    def slow(self, h: EndpointHealth) -> bool:
        return h.is_slow

    @admin.display(description="statistics refreshed")
    def refreshed(self, h: EndpointHealth) -> str:
        return utc_text(h.stats_refreshed_at)
