"""Admin and portal sessions end after SESSION_IDLE_SECONDS without a request.

Django's own expiry is fixed at sign-in unless every request saves the
session; here each session records when it was last used: at sign-in
(user_logged_in, connected in endpoints/apps.py) and at the start of a
portal-link session (endpoints.portal_links.session_start), so a session
never used after it began idles out too; then on a request once a quarter
of the limit has passed since the mark (at most once a minute,
TOUCH_SECONDS, so a busy page does not write the session table on every
request). A quarter, not the whole limit: a user active at any pace under
the limit keeps a mark at most a quarter old, so a poll every 15 s at a
60 s limit never finds the session idle. A request that finds it idle longer
than the limit signs it out before any view or the admin sees who it was.
Each touch also re-saves the session, which moves its cookie's and row's
expiry forward.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from django.conf import settings
from django.contrib import messages
from django.http import HttpRequest, HttpResponse

from relayproject.lib.clock import SystemClock

logger = logging.getLogger("relayproject.lib.sessions")

LAST_SEEN_KEY = "relay_last_seen"
TOUCH_SECONDS = 60


def session_seen(session, *, now: float | None = None) -> None:
    """Mark the session used now (unix seconds): where its idle time starts."""
    if now is None:
        now = IdleSessionMiddleware.clock.now().timestamp()
    session[LAST_SEEN_KEY] = now


def seen_on_login(sender, request=None, user=None, **kwargs) -> None:
    """user_logged_in: a fresh sign-in starts its idle time at once."""
    if request is not None and hasattr(request, "session"):
        session_seen(request.session)


def _duration(seconds: int) -> str:
    if seconds % 3600 == 0:
        hours = seconds // 3600
        return f"{hours} hour{'s' if hours != 1 else ''}"
    minutes = round(seconds / 60)
    return f"{minutes} minute{'s' if minutes != 1 else ''}"


class IdleSessionMiddleware:
    """After SessionMiddleware and MessageMiddleware; before anything reads
    `request.user`."""

    # The seam for tests: anything with now() -> datetime (tests.support.fakes.FakeClock).
    clock = SystemClock()

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        # No cookie, no session to load (API calls, probes, first visits).
        if settings.SESSION_COOKIE_NAME in request.COOKIES:
            self._check(request)
        return self.get_response(request)

    def _check(self, request: HttpRequest) -> None:
        session = request.session
        if session.is_empty():
            return
        now = self.clock.now().timestamp()
        idle_limit = settings.SESSION_IDLE_SECONDS
        last_seen = session.get(LAST_SEEN_KEY)
        if last_seen is not None and now - last_seen > idle_limit:
            logger.info(
                "session signed out after %d s idle (limit %d s) user_id=%s "
                "portal_link=%s",
                now - last_seen,
                idle_limit,
                session.get("_auth_user_id", "-"),
                (session.get("portal_link") or {}).get("link_id", "-"),
            )
            session.flush()
            messages.info(
                request,
                f"You were signed out after {_duration(idle_limit)} without "
                "activity; sign in again to go on.",
                fail_silently=True,
            )
            return
        if last_seen is None or now - last_seen >= min(TOUCH_SECONDS, idle_limit / 4):
            session_seen(session, now=now)
