"""Staff console for merchants, endpoints, their health and API keys.

Endpoints and keys are changed through services (actions here), never by
editing rows: the services validate destinations and keep the breaker exact.
"""

from __future__ import annotations

from django.conf import settings
from django.contrib import admin
from django.db.models import F
from django.urls import reverse
from django.utils.html import format_html, format_html_join
from django.utils.http import urlencode

from endpoints import broker_fields, brokers, quotas
from endpoints.admin.credentials import SHOWN as CREDENTIALS_SHOWN
from endpoints.admin.credentials import CredentialsOnPage
from endpoints.admin.forms import EventTypeForm, MerchantForm
from endpoints.admin.memberships import MembershipGrantsLogged, MembershipInline
from endpoints.admin.ordering import OrderingActions
from endpoints.admin.present import (
    MerchantOnlyFilter,
    QuickRows,
    breaker_words,
    deliveries_links,
    log_and_tell,
    ms,
    percent,
    response_header,
    url_cut,
)
from endpoints.admin.pulling import (
    PullFields,
    destination_words,
    pull_label,
    pull_words,
)
from endpoints.admin.verification import VerificationActions
from endpoints.catalogue import is_reserved as catalogue_is_reserved
from endpoints.catalogue import merchant_types
from endpoints.models import (
    Endpoint,
    EndpointHealth,
    EndpointSecret,
    EventType,
    Merchant,
)
from endpoints.probes import endpoint_breaker_open, endpoint_breaker_reset
from endpoints.quotas import quotas_in_force
from endpoints.services import (
    endpoint_auto_disable_exempt,
    endpoint_disable,
    endpoint_enable,
)
from endpoints.words import state_label


@admin.register(Merchant)
class MerchantAdmin(MembershipGrantsLogged, admin.ModelAdmin):
    form = MerchantForm
    list_display = (
        "slug",
        "name",
        "is_active",
        "sends_at_once",
        "created_at",
        "endpoints_link",
    )
    list_filter = ("is_active",)
    search_fields = ("slug", "name")
    # The overrides are fields of the form; these show what is enforced.
    readonly_fields = ("sends_at_once", "quotas_shown", "broker_hosts_shown")
    inlines = (MembershipInline,)

    @admin.display(description="quotas in force")
    def quotas_shown(self, merchant: Merchant) -> str:
        return format_html(
            "<ul>{}</ul>",
            format_html_join("", "<li><b>{}</b>: {}</li>", quotas_in_force(merchant)),
        )

    @admin.display(description="broker hosts (in force)")
    def broker_hosts_shown(self, merchant: Merchant) -> str:
        hosts = broker_fields.broker_hosts_in_force(merchant)
        source = (
            "set for this merchant"
            if merchant.broker_hosts is not None
            else "the RELAY_BROKER_HOSTS setting"
        )
        if not broker_fields.kinds_offered():
            return "none: broker destinations are turned off (RELAY_BROKER_KINDS)"
        if not hosts:
            return f"none: no broker endpoint may be used ({source})"
        return f"{', '.join(hosts)} ({source})"

    @admin.display(description="sends at once (in force)")
    def sends_at_once(self, merchant: Merchant) -> str:
        if merchant.max_in_flight is None:
            source = "the MERCHANT_MAX_IN_FLIGHT setting"
        else:
            source = "set for this merchant"
        return f"{quotas.max_in_flight(merchant)} ({source})"

    @admin.display(description="endpoints")
    def endpoints_link(self, merchant: Merchant) -> str:
        url = reverse("admin:endpoints_endpoint_changelist")
        return format_html(
            '<a href="{}?{}">endpoints</a>',
            url,
            urlencode({"merchant__id__exact": merchant.pk}),
        )


class EndpointSecretInline(admin.TabularInline):
    model = EndpointSecret
    extra = 0
    can_delete = False
    fields = readonly_fields = ("masked", "created_at", "expires_at")

    def has_add_permission(self, request, obj=None) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False


class EndpointActions(QuickRows):
    """Breaker and enable/disable actions, shared by the endpoint and health lists
    (with QuickRows' row checkbox).

    Each list says how its selected rows map to endpoints with `_endpoints`.
    """

    @admin.action(description="Resume sending (end the pause)", permissions=["change"])
    def reset_breaker(self, request, queryset) -> None:
        endpoints = self._endpoints(queryset)
        for endpoint in endpoints:
            endpoint_breaker_reset(endpoint_id=endpoint.pk)
        log_and_tell(self, request, endpoints, "Sending resumed (pause ended)")

    @admin.action(description="Pause sending", permissions=["change"])
    def open_breaker(self, request, queryset) -> None:
        endpoints = self._endpoints(queryset)
        for endpoint in endpoints:
            endpoint_breaker_open(
                endpoint_id=endpoint.pk, reason=f"paused by staff ({request.user})"
            )
        log_and_tell(self, request, endpoints, "Paused by staff")

    @admin.action(description="Disable endpoint", permissions=["change"])
    def disable_endpoint(self, request, queryset) -> None:
        endpoints = self._endpoints(queryset)
        for endpoint in endpoints:
            endpoint_disable(
                endpoint=endpoint,
                reason=f"disabled by staff ({request.user})",
                by=f"staff:{request.user}",
            )
        log_and_tell(self, request, endpoints, "Disabled")

    @admin.action(description="Enable endpoint", permissions=["change"])
    def enable_endpoint(self, request, queryset) -> None:
        endpoints = self._endpoints(queryset)
        for endpoint in endpoints:
            endpoint_enable(endpoint=endpoint)
        log_and_tell(self, request, endpoints, "Enabled")

    @admin.action(description="Exempt from auto-disable", permissions=["change"])
    def exempt_from_auto_disable(self, request, queryset) -> None:
        endpoints = self._endpoints(queryset)
        endpoint_auto_disable_exempt(endpoints=endpoints, exempt=True)
        log_and_tell(self, request, endpoints, "Exempted from auto-disable")

    @admin.action(description="Allow auto-disable again", permissions=["change"])
    def allow_auto_disable(self, request, queryset) -> None:
        endpoints = self._endpoints(queryset)
        endpoint_auto_disable_exempt(endpoints=endpoints, exempt=False)
        log_and_tell(self, request, endpoints, "Auto-disable allowed")

    actions = (
        "reset_breaker",
        "open_breaker",
        "disable_endpoint",
        "enable_endpoint",
        "exempt_from_auto_disable",
        "allow_auto_disable",
    )


@admin.register(Endpoint)
class EndpointAdmin(
    CredentialsOnPage,
    VerificationActions,
    OrderingActions,
    PullFields,
    EndpointActions,
    admin.ModelAdmin,
):
    # The page's own buttons post to the list's actions (same permission
    # checks, same log entries): see endpoint_change_form.html.
    change_form_template = "admin/endpoints/endpoint_change_form.html"

    def change_view(self, request, object_id, form_url="", extra_context=None):
        endpoint = self.get_object(request, object_id)
        extra_context = extra_context or {}
        if endpoint is not None:
            extra_context["page_actions"] = self.page_actions(request, endpoint)
        return super().change_view(request, object_id, form_url, extra_context)

    def page_actions(self, request, endpoint: Endpoint) -> list[tuple[str, str, bool]]:
        """(action, label, is it a danger) that apply to this endpoint now: no
        pause for a pull endpoint, which is never sent to; no disable or
        enable for a listen session, which ends instead (its consumer's
        DELETE, the portal, or the relay once it idles)."""
        paused = endpoint.health.breaker_state != EndpointHealth.State.CLOSED
        wanted = [("mark_verified", False)] if endpoint.awaiting_verification else []
        if endpoint.kind != brokers.PULL:
            wanted.append(("reset_breaker" if paused else "open_breaker", False))
        if not endpoint.listen_session:
            active = endpoint.is_active
            wanted.append(
                ("disable_endpoint", True) if active else ("enable_endpoint", False)
            )
        allowed = self.get_actions(request)
        return [
            (name, allowed[name][2], danger)
            for name, danger in wanted
            if name in allowed
        ]

    list_display = (  # "Disabled" is a state: no column of its own for is_active
        "id",
        "url_cut",
        "merchant",
        "breaker_state",
        "p95_ms",
        "deliveries_links",
    )
    actions = (
        *EndpointActions.actions,
        "mark_verified",
        "make_ordered",
        "make_unordered",
    )
    list_select_related = ("merchant", "health")
    list_filter = (
        "kind",
        "listen_session",
        "is_active",
        "awaiting_verification",
        "ordered",
        "auto_disable_exempt",
        ("merchant", MerchantOnlyFilter),
    )
    search_fields = ("=id", "url", "description", "merchant__slug")
    search_help_text = "An id (ep_…), part of a URL or description, or a merchant slug."
    show_full_result_count = False
    inlines = (EndpointSecretInline,)
    shown = (
        "id",
        "merchant",
        "kind",
        "url_shown",
        "target_shown",
        "credentials_shown",
        "pull_state",
        "visibility_timeout_shown",
        "description",
        "event_types",
        "is_active",
        "disabled_reason",
        "disabled_at",
        "disabled_by",
        "auto_disable_exempt",
        "verification_state",
        "verified_at",
        "verified_by",
        "verification_requested_at",
        "max_attempts",
        "retry_schedule",
        "timeout_seconds",
        "rate_limit_per_second",
        "max_in_flight",
        "permanent_statuses",
        "ordered",
        "signing",
        "signing_public_key",  # the private key: write-only, never shown
        "created_at",
        "updated_at",
        "health_summary",
        "deliveries_links",
    )
    # Every field is read-only but the write-only credentials: the services
    # change an endpoint, through actions and the credentials section.
    readonly_fields = (*shown, *CREDENTIALS_SHOWN)

    def get_fieldsets(self, request, obj=None):
        return ((None, {"fields": self.shown}), self.credentials_fieldset(request, obj))

    def _endpoints(self, queryset) -> list[Endpoint]:
        return list(queryset)

    def get_queryset(self, request):
        return super().get_queryset(request).select_related("merchant", "health")

    def has_add_permission(self, request) -> bool:
        return False

    @admin.display(description="url", ordering="url")
    def url_cut(self, endpoint: Endpoint) -> str:
        shown = destination_words(endpoint) or url_cut(self.url_shown(endpoint))
        if not endpoint.description:
            return shown
        return format_html('{}<span class="sub">{}</span>', shown, endpoint.description)

    @admin.display(description="url")
    def url_shown(self, endpoint: Endpoint) -> str:
        """As the API answers it: a broker's password as *** (never in clear)."""
        return brokers.broker_url_shown(endpoint.url, endpoint.broker_credentials)

    @admin.display(description="target")
    def target_shown(self, endpoint: Endpoint) -> str:
        if endpoint.kind == brokers.HTTP:
            return "none (an HTTP endpoint posts to its URL)"
        if endpoint.kind == brokers.PULL:
            return "none (nothing is sent: its consumer pulls its messages)"
        return "; ".join(
            f"{name}: {value!r}" for name, value in endpoint.target.items()
        )

    @admin.display(description="broker credentials")
    def credentials_shown(self, endpoint: Endpoint) -> str:
        if endpoint.broker_credentials:
            return "set (write-only: the URL shows the password as ***)"
        return "none"

    @admin.display(description="state", ordering="health__breaker_state")
    def breaker_state(self, endpoint: Endpoint) -> str:
        if endpoint.kind == brokers.PULL:
            return pull_label(endpoint)
        if endpoint.is_active and endpoint.awaiting_verification:
            return "Waiting for verification"  # nothing but its challenge is sent
        return state_label(
            endpoint.health,
            active=endpoint.is_active,
            degraded_below=settings.DEGRADED_SUCCESS_RATE,
        ).text

    @admin.display(
        description=response_header("p95"),
        ordering=F("health__p95_ms").desc(nulls_last=True),
    )
    def p95_ms(self, endpoint: Endpoint) -> str:
        return ms(endpoint.health.p95_ms)

    @admin.display(description="health")
    def health_summary(self, endpoint: Endpoint) -> str:
        h = endpoint.health
        pulled = endpoint.kind == brokers.PULL
        return format_html(
            '<a href="{}">{}</a>; {} p50 {} / p95 {} / p99 {} ms '
            "over {} attempts in 24 h; success {}{}",
            reverse("admin:endpoints_endpointhealth_change", args=[h.pk]),
            pull_words(endpoint, h) if pulled else breaker_words(h),
            "lease to ack or nack" if pulled else "receiver response time",
            ms(h.p50_ms),
            ms(h.p95_ms),
            ms(h.p99_ms),
            h.sample_count,
            percent(h.success_rate),
            "; SLOW" if h.is_slow else "",
        )

    @admin.display(description="deliveries")
    def deliveries_links(self, endpoint: Endpoint) -> str:
        return deliveries_links(endpoint.pk)


def reserved_pks():
    return EventType.objects.exclude(pk__in=merchant_types().values("pk")).values("pk")


@admin.register(EventType)
class EventTypeAdmin(admin.ModelAdmin):
    form = EventTypeForm
    list_display = ("name", "deprecated", "has_schema", "updated_at")
    list_filter = ("deprecated",)
    search_fields = ("name", "description")

    @admin.display(boolean=True, description="schema")
    def has_schema(self, event_type: EventType) -> bool:
        return event_type.schema is not None

    # The relay's own relay.* types are written by the relay (see
    # deliveries/notifications/catalogue.py): staff read them, never edit them.
    def has_change_permission(self, request, obj=None) -> bool:
        reserved = obj is not None and catalogue_is_reserved(obj.name)
        return not reserved and super().has_change_permission(request, obj)

    def has_delete_permission(self, request, obj=None) -> bool:
        reserved = obj is not None and catalogue_is_reserved(obj.name)
        return not reserved and super().has_delete_permission(request, obj)

    def delete_queryset(self, request, queryset) -> None:
        # "Delete selected" on a page that includes relay.* rows leaves those.
        super().delete_queryset(request, queryset.exclude(pk__in=reserved_pks()))
