"""Staff console for events, deliveries and dead letters.

Declarative lists; the few views that act (replay, replay all dead of an
endpoint, the pipeline page) live in deliveries/admin/views.py. Every list
reads its foreign keys with list_select_related and skips the full-table count.
"""

from __future__ import annotations

from django.contrib import admin
from django.db.models import Q
from django.urls import path

from deliveries import words
from deliveries.admin import views as admin_views
from deliveries.admin.columns import (
    REPLAYABLE,
    AttemptInline,
    DeliveryColumns,
    EndpointFilter,
    page_fields,
)
from deliveries.models import DeadLetter, Delivery, DispatcherHeartbeat, Event
from deliveries.ops.held import delivery_held
from deliveries.templatetags.relay_words import breakable
from endpoints.admin.present import MerchantFilter, QuickRows
from relayproject.lib.clock import utcnow
from relayproject.lib.pagination import EstimatedCountPaginator


class DeliveryInline(admin.TabularInline):
    model = Delivery
    extra = 0
    can_delete = False
    show_change_link = True
    fields = readonly_fields = (
        "endpoint",
        "status",
        "attempt_count",
        "last_status_code",
        "last_error",
        "succeeded_at",
        "dead_at",
    )

    def get_queryset(self, request):
        return super().get_queryset(request).select_related("endpoint")

    def has_add_permission(self, request, obj=None) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False


@admin.register(Event)
class EventAdmin(QuickRows, admin.ModelAdmin):
    list_display = ("id", "type_column", "merchant", "created_at")
    list_select_related = ("merchant",)
    # Merchants are few: listing them all is cheap, where "only those with
    # events" would read every event.
    list_filter = (("merchant", MerchantFilter), "created_at")
    search_fields = ("=id", "=type")
    show_full_result_count = False
    paginator = EstimatedCountPaginator
    list_per_page = 50  # as the delivery lists: half the default's rendering
    ordering = ("-id",)  # ids are time-ordered: the primary key index sorts them
    inlines = (DeliveryInline,)
    readonly_fields = (
        "id",
        "merchant",
        "type",
        "data",
        "created_at",
        "idempotency_scope",
        "idempotency_key",
    )
    exclude = ("request_fingerprint",)

    @admin.display(description="type", ordering="type")
    def type_column(self, event: Event) -> str:
        # Long types wrap after their dots, so the list fits beside its filters.
        return breakable(event.type)

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False


class ReplayableAdmin(QuickRows, DeliveryColumns, admin.ModelAdmin):
    """What the delivery list and the dead-letter list share: columns, search, replay."""

    # endpoint__health: the held reason reads it, without a query per row.
    # The rows' events come in one query of their own (get_queryset): a join
    # of the day-partitioned events to the day-partitioned deliveries took
    # longer to plan than to run (33 ms against 5 at 1 M rows, under load).
    list_select_related = ("endpoint__merchant", "endpoint__health")
    search_help_text = (
        "A delivery id (dlv_…), event id (evt_…), endpoint id (ep_…), part of an "
        "endpoint's URL or description, or a merchant slug."
    )
    show_full_result_count = False
    paginator = EstimatedCountPaginator
    list_per_page = 50
    actions = ("replay_selected",)
    inlines = (AttemptInline,)
    change_form_template = "admin/deliveries/delivery_change_form.html"
    readonly_fields = page_fields(None)

    def get_fields(self, request, obj=None):
        return page_fields(obj)

    # Staff permissions are the ones on Delivery for both lists, so giving
    # someone "change delivery" is what lets them replay, wherever they are.
    def _has(self, request, action: str) -> bool:
        return request.user.has_perm(f"deliveries.{action}_delivery")

    def has_view_permission(self, request, obj=None) -> bool:
        return self._has(request, "view") or self._has(request, "change")

    def has_change_permission(self, request, obj=None) -> bool:
        return self._has(request, "change")

    def has_delete_permission(self, request, obj=None) -> bool:
        return self._has(request, "delete")

    def has_module_permission(self, request) -> bool:
        return self.has_view_permission(request)

    def has_add_permission(self, request) -> bool:
        return False

    def get_queryset(self, request):
        return super().get_queryset(request).prefetch_related("event")

    def get_search_results(self, request, queryset, search_term):
        # One indexed condition per kind of id instead of an OR across three
        # tables, which would scan every delivery.
        term = search_term.strip()
        if not term:
            return queryset, False
        if term.startswith("dlv_"):
            return queryset.filter(pk=term), False
        if term.startswith("evt_"):
            return queryset.filter(event_id=term), False
        if term.startswith("ep_"):
            return queryset.filter(endpoint_id=term), False
        from endpoints.models import Endpoint

        endpoint_ids = Endpoint.objects.filter(
            Q(url__icontains=term)
            | Q(description__icontains=term)
            | Q(merchant__slug__iexact=term)
        ).values("pk")
        return queryset.filter(endpoint_id__in=endpoint_ids), False

    def get_urls(self):
        return [
            path(
                "<path:object_id>/replay/",
                self.admin_site.admin_view(admin_views.ReplayView.as_view(admin=self)),
                name=f"{self.opts.app_label}_{self.opts.model_name}_replay",
            ),
            path(
                "<path:object_id>/retry-now/",
                self.admin_site.admin_view(
                    admin_views.RetryNowView.as_view(admin=self)
                ),
                name=f"{self.opts.app_label}_{self.opts.model_name}_retry_now",
            ),
            *super().get_urls(),
        ]

    @admin.action(description="Replay selected deliveries", permissions=["change"])
    def replay_selected(self, request, queryset) -> None:
        admin_views.replay_many(self, request, queryset)

    def get_list_display(self, request):
        columns = super().get_list_display(request)
        if self.has_change_permission(request):
            return columns
        return tuple(c for c in columns if c != "replay_button")

    def change_view(self, request, object_id, form_url="", extra_context=None):
        extra_context = extra_context or {}
        extra_context["can_replay"] = self.has_change_permission(request)
        extra_context["replay_statuses"] = REPLAYABLE
        delivery = Delivery.objects.select_related("endpoint__health").filter(
            pk=object_id
        )
        delivery = delivery.first()
        extra_context["replay_warning"] = words.replay_lane_warning(
            ordering_key=delivery.ordering_key if delivery is not None else ""
        )
        if delivery is not None and delivery.status == Delivery.Status.PENDING:
            extra_context["retry_refusal"] = words.retry_now_refusal(
                delivery_held(delivery=delivery, now=utcnow())
            )
        # Every field is read-only: state changes go through Replay alone.
        extra_context["show_save"] = extra_context["show_save_and_continue"] = False
        extra_context["show_save_and_add_another"] = False
        return super().change_view(request, object_id, form_url, extra_context)


@admin.register(Delivery)
class DeliveryAdmin(ReplayableAdmin):
    list_display = (
        "delivery_column",
        "state",
        "event_type",
        "endpoint_column",
        "last_result",
        "replay_button",
    )  # attempts are on the page; the state says when the next one is
    list_display_links = None  # the delivery column links to the page
    list_filter = (
        "status",
        ("endpoint__merchant", MerchantFilter),
        EndpointFilter,
        "created_at",
    )
    search_fields = ("=id",)  # the search itself is get_search_results
    ordering = ("-id",)  # time-ordered ids: the primary key index sorts them

    def get_urls(self):
        return [
            path(
                "pipeline/",
                self.admin_site.admin_view(
                    admin_views.PipelineView.as_view(admin=self)
                ),
                name="deliveries_pipeline",
            ),
            *super().get_urls(),
        ]


@admin.register(DeadLetter)
class DeadLetterAdmin(ReplayableAdmin):
    list_display = (
        "delivery_column",
        "endpoint_column",
        "event_type",
        "last_result",
        "replay_button",
    )  # attempts per endpoint are in the analysis above, per row on its page
    list_display_links = None  # the delivery column links to the page
    list_filter = (
        ("endpoint__merchant", MerchantFilter),
        EndpointFilter,
        "dead_at",
    )
    search_fields = ("=id",)
    ordering = ("-dead_at", "-id")  # the partial dead_at index serves it
    change_list_template = "admin/deliveries/deadletter/change_list.html"

    def get_queryset(self, request):
        return super().get_queryset(request).filter(status=Delivery.Status.DEAD)

    def get_urls(self):
        return [
            path(
                "endpoint/<str:endpoint_id>/replay/",
                self.admin_site.admin_view(
                    admin_views.ReplayEndpointDeadView.as_view(admin=self)
                ),
                name="deliveries_deadletter_replay_endpoint",
            ),
            *super().get_urls(),
        ]

    def changelist_view(self, request, extra_context=None):
        # The window is ours, not a filter: take it out before the changelist
        # reads the query string, or it would refuse it as an unknown field.
        window, request.GET = admin_views.pop_window(request.GET)
        extra_context = extra_context or {}
        extra_context.update(
            admin_views.analysis_context(window=window, now=utcnow(), query=request.GET)
        )
        return super().changelist_view(request, extra_context)


@admin.register(DispatcherHeartbeat)
class DispatcherHeartbeatAdmin(admin.ModelAdmin):
    """The dispatchers' heartbeats; deleting a stale row dismisses its alert."""

    list_display = (
        "worker_id",
        "hostname",
        "pid",
        "started_at",
        "last_seen_at",
        "declared_dead_at",
        "deaths",
        "released",
    )
    ordering = ("-last_seen_at",)
    readonly_fields = list_display

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False
