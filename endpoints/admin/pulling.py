"""Pull endpoints and listen sessions in the staff console: what stands
where an endpoint that is sent to shows its URL and breaker, since nothing
is sent to one (deliveries/pull/). A session is ended, never paused or
disabled: ending it (its messages dead, listen_ended) is the portal's, the
API's and the dispatchers' (deliveries/pull/sessions.py), which this app
may not import."""

from __future__ import annotations

from django.conf import settings
from django.contrib import admin

from endpoints import brokers
from endpoints.admin.present import utc
from endpoints.models import Endpoint, EndpointHealth


def destination_words(endpoint) -> str:
    """What stands for a pull endpoint's URL, which it has none of: "" for
    an endpoint that has one."""
    if endpoint.kind != brokers.PULL:
        return ""
    return "listen session (pulled)" if endpoint.listen_session else "pulled (no URL)"


def pull_label(endpoint) -> str:
    """A pull endpoint's one-word state for the list's state column."""
    if endpoint.listen_session:
        return "Listen session, live" if endpoint.is_active else "Listen session, ended"
    return "Pulled" if endpoint.is_active else "Disabled"


def pull_words(endpoint, health: EndpointHealth | None) -> str:
    """A pull endpoint's state where an endpoint that is sent to shows its
    breaker: nothing is sent, so no breaker applies. A listen session's
    life (live until its expiry unless pulled, or ended) comes first."""
    pulled = getattr(health, "last_pulled_at", None)
    last = f"last pulled {utc(pulled)}" if pulled else "never pulled"
    if endpoint.listen_session and not endpoint.is_active:
        return f"listen session, ended {utc(endpoint.disabled_at)}; {last}"
    if endpoint.listen_session:
        ends = utc(getattr(health, "session_expires_at", None))
        return f"listen session, live: ends {ends} unless pulled; {last}"
    if not endpoint.is_active:
        return f"disabled: a pull answers nothing; {last}"
    return f"nothing is sent, its consumer pulls; {last}"


class PullFields:
    """The endpoint page's pull fields (a mixin of EndpointAdmin)."""

    @admin.display(description="pulling")
    def pull_state(self, endpoint: Endpoint) -> str:
        if endpoint.kind != brokers.PULL:
            return "- (not a pull endpoint)"
        return pull_words(endpoint, endpoint.health)

    @admin.display(description="visibility timeout")
    def visibility_timeout_shown(self, endpoint: Endpoint) -> str:
        if endpoint.kind != brokers.PULL:
            return "- (not a pull endpoint)"
        if endpoint.visibility_timeout_seconds is not None:
            return f"{endpoint.visibility_timeout_seconds} s (set for this endpoint)"
        seconds = settings.PULL_VISIBILITY_TIMEOUT_SECONDS
        return f"{seconds} s (the PULL_VISIBILITY_TIMEOUT_SECONDS setting)"
