"""How one claim's rows are shared among the endpoints that have due work (pure).

Round-robin, oldest-due endpoint first: every endpoint gets one row before
any gets a second, and none gets more than the room its max_in_flight leaves.
So a backlog of a million rows behind one endpoint takes one share of a
claim, not the whole of it.
"""

from __future__ import annotations

from collections.abc import Sequence


def fair_shares(*, limit: int, rooms: Sequence[tuple[str, int]]) -> dict[str, int]:
    """Rows to take per endpoint; `rooms` is (endpoint, room) oldest due first."""
    shares: dict[str, int] = {}
    left = max(0, limit)
    open_rooms = [(e, r) for e, r in rooms if r > 0]
    level = 0
    while left and open_rooms:
        level += 1
        still_open = []
        for endpoint_id, room in open_rooms:
            if not left:
                break
            shares[endpoint_id] = level
            left -= 1
            if room > level:
                still_open.append((endpoint_id, room))
        open_rooms = still_open
    return shares
