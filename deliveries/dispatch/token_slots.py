"""Slots for OAuth2 token fetches (endpoint_auth.py): at most `per_tenant`
in flight per merchant, and `total` per dispatcher.

A fetch outlives the send that started it (later sends of its endpoint
share it), so without a bound per merchant one whose token servers never
answer would hold every slot, and every other merchant's fetches would wait
until their sends ran out of time. A fetch that could not start says whose
slots were busy (busy_words): its token server was never asked.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Hashable

TENANT = "tenant"  # the merchant's own slots were all held
RELAY = "relay"  # the dispatcher's were


class SlotsBusy(Exception):
    """No slot came within the time given; .which names whose were busy."""

    def __init__(self, which: str) -> None:
        super().__init__(which)
        self.which = which


class _TenantSlots:
    """One merchant's slots; dropped when nobody holds or waits for one."""

    def __init__(self, size: int) -> None:
        self.slots = asyncio.Semaphore(size)
        self.users = 0


class TokenSlots:
    """The fetch slots of one AuthorizingSender, on its event loop."""

    def __init__(self, *, total: int, per_tenant: int) -> None:
        self.total = total
        self.per_tenant = per_tenant
        self._relay: asyncio.Semaphore | None = None  # made on the loop
        self._tenants: dict[Hashable, _TenantSlots] = {}
        self._waiting: dict[Hashable, str] = {}  # fetch key -> whose slot

    def waiting_for(self, key: Hashable) -> str | None:
        """TENANT or RELAY while key's fetch waits for a slot, else None."""
        return self._waiting.get(key)

    @contextlib.asynccontextmanager
    async def held(
        self, key: Hashable, tenant: Hashable, timeout: float
    ) -> AsyncIterator[None]:
        """One of tenant's slots and one of the dispatcher's, held for the
        block; SlotsBusy when they do not both come within timeout."""
        if self._relay is None:
            self._relay = asyncio.Semaphore(self.total)
        mine = self._tenants.get(tenant)
        if mine is None:
            mine = self._tenants[tenant] = _TenantSlots(self.per_tenant)
        mine.users += 1
        held: list[asyncio.Semaphore] = []
        try:
            try:
                # The merchant's first: a merchant past its bound waits
                # without holding one of the dispatcher's.
                async with asyncio.timeout(timeout):
                    for which, slots in ((TENANT, mine.slots), (RELAY, self._relay)):
                        self._waiting[key] = which
                        await slots.acquire()
                        held.append(slots)
            except TimeoutError:
                raise SlotsBusy(self._waiting[key]) from None
            finally:
                self._waiting.pop(key, None)
            yield
        finally:
            for slots in held:
                slots.release()
            mine.users -= 1
            if not mine.users and self._tenants.get(tenant) is mine:
                del self._tenants[tenant]

    def busy_words(self, which: str, *, host: str, waited: float) -> str:
        """A fetch that could not start, in words for the attempt."""
        if which == TENANT:
            whose = (
                f"this merchant's {self.per_tenant} token fetches allowed at "
                "once were all in flight to token servers that had not answered"
            )
        else:
            whose = (
                f"all {self.total} of the relay's token fetch slots were busy "
                "with other fetches"
            )
        return (
            f"no access token within {waited:.3g} s: {whose}, so the token "
            f"server {host} was not asked"
        )
