"""How one claim's rows are shared among merchants, then endpoints (pure).

Round-robin at both levels, oldest due first: every merchant with due work
gets one row before any gets a second, and within a merchant's share every
endpoint gets one before any of its others gets a second. Nobody gets more
than the room its cap leaves (the merchant's max_in_flight, the endpoint's).
So a merchant with 600 endpoints takes one merchant's share of a claim, and a
backlog of a million rows behind one endpoint one endpoint's share of it.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import TypeVar

K = TypeVar("K", bound=Hashable)


def fair_shares(*, limit: int, rooms: Sequence[tuple[K, int]]) -> dict[K, int]:
    """Round-robin: rows to take per key; `rooms` is (key, room) oldest due first."""
    shares: dict[K, int] = {}
    left = max(0, limit)
    open_rooms = [(k, r) for k, r in rooms if r > 0]
    level = 0
    while left and open_rooms:
        level += 1
        still_open = []
        for key, room in open_rooms:
            if not left:
                break
            shares[key] = level
            left -= 1
            if room > level:
                still_open.append((key, room))
        open_rooms = still_open
    return shares


def merchant_shares(
    *,
    limit: int,
    merchants: Sequence[tuple[Hashable, int, Sequence[tuple[str, int]]]],
) -> dict[str, int]:
    """Rows to take per endpoint. `merchants` is (merchant, room, endpoints),
    oldest due first, each merchant's endpoints as (endpoint, room) oldest due
    first. A merchant can use no more than its endpoints' rooms together."""
    per_merchant = fair_shares(
        limit=limit,
        rooms=[
            (merchant, min(room, sum(max(0, r) for _, r in endpoints)))
            for merchant, room, endpoints in merchants
        ],
    )
    shares: dict[str, int] = {}
    for merchant, _, endpoints in merchants:
        shares.update(fair_shares(limit=per_merchant.get(merchant, 0), rooms=endpoints))
    return shares
