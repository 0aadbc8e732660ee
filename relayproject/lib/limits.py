"""A quota said no: what every face shows when a limit refuses a request.

Raised by services before they write anything (endpoints per merchant,
deliveries per request, the publish rate). The API answers problem+json (422,
or 429 with Retry-After when waiting helps), the portal a form error; both
show `detail`, which names the setting, so the person who hit a limit knows
which one and what it is.
"""

from __future__ import annotations


class LimitExceeded(Exception):
    """setting: the limit's name (MAX_ENDPOINTS_PER_MERCHANT, ...); limit: its
    value in force; retry_after: seconds until a retry can pass, or None when
    the same request will never pass (it must change)."""

    def __init__(
        self,
        *,
        setting: str,
        limit: float,
        detail: str,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(detail)
        self.setting = setting
        self.limit = limit
        self.detail = detail
        self.retry_after = retry_after

    @property
    def status(self) -> int:
        return 422 if self.retry_after is None else 429
