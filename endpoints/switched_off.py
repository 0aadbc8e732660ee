"""A merchant staff switched off (Merchant.is_active false): nothing acts for it.

Each path that could act for a merchant stops at its own door:

- the API (endpoints.apikeys): every call of the merchant's own keys is a
  403, and so is every write that names it (publish, endpoints, replay,
  portal links) with a platform key; platform keys may still read it, so
  staff tooling can look;
- the publish (deliveries.services.drafts_prepare): in-process event_publish
  raises MerchantSwitchedOff as the API's publish does, writing nothing;
- the claim (deliveries/dispatch/claim_sql.py, the breaker probes, the
  verification challenges) passes its endpoints by, as it does a disabled
  endpoint's: due deliveries stay pending, spending no attempt, and go out
  once it is switched on again; sends already claimed finish;
- the portal (relayproject/portal/access.py) lets nobody in.
"""

from __future__ import annotations

from endpoints.models import Merchant


class MerchantSwitchedOff(Exception):
    """Raised for anything asked of a switched-off merchant; the API answers
    403 with its message. index: the refused event's place in a batch."""

    def __init__(self, slug: str, index: int = 0) -> None:
        super().__init__(
            f"Merchant {slug!r} is switched off by staff: its API keys are "
            "refused, no key may publish or change anything for it, and its "
            "deliveries are held until it is switched on again."
        )
        self.slug = slug
        self.index = index


def merchant_check_on(merchant: Merchant, *, index: int = 0) -> None:
    """Raise MerchantSwitchedOff unless the merchant is switched on."""
    if not merchant.is_active:
        raise MerchantSwitchedOff(merchant.slug, index)
