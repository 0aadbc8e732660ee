"""Which claimed job is sent next: one lane per endpoint, taken round-robin.

Lives on the send loop's thread and touches no database. Claimed jobs wait
here; each free send slot goes to the next endpoint in turn, not the next job
in the batch, so a slow endpoint's queue never holds up the others'.

A lane may send when:
- its head is a probe (the breaker's one trial send: always), or
- its endpoint is not held (breaker seen open), it has fewer than its
  max_in_flight sends out, and, once a send to it has failed, it has nothing
  out and every failure is recorded: a failing endpoint gets one request at a
  time, each after the database has counted the last failure and left the
  breaker closed (if it opened, the dispatcher holds the endpoint first).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from deliveries.dispatch.jobs import Job


@dataclass
class Lane:
    cap: int
    queue: deque[Job] = field(default_factory=deque)
    in_flight: int = 0
    failing: bool = False
    unrecorded: int = 0  # failures sent back that the database has not counted yet

    def sendable(self, *, held: bool) -> int:
        """How many of its queued jobs could start now."""
        if not self.queue:
            return 0
        if self.queue[0].is_probe:
            return 1
        if held:
            return 0
        if self.failing:
            return 1 if not (self.in_flight or self.unrecorded) else 0
        return max(0, min(len(self.queue), self.cap - self.in_flight))


class Lanes:
    def __init__(self) -> None:
        self._lanes: dict[str, Lane] = {}
        self._turn: deque[str] = deque()  # endpoints with queued jobs, next first
        self._held: frozenset[str] = frozenset()
        self.in_flight = 0
        self.queued = 0

    def add(self, jobs: Iterable[Job]) -> list[Job]:
        """Queue claimed jobs; returns those of held endpoints (never queued)."""
        refused = []
        for job in jobs:
            if job.endpoint_id in self._held and not job.is_probe:
                refused.append(job)
                continue
            lane = self._lane(job)
            if job.is_probe:
                lane.queue.appendleft(job)  # the probe decides the breaker: first
            else:
                lane.queue.append(job)
            self.queued += 1
        return refused

    def take(
        self, slots: int, *, late: Callable[[Job], bool] | None = None
    ) -> tuple[list[Job], list[Job]]:
        """Up to `slots` jobs to start now, one endpoint at a time in turn, and
        the jobs met at the head of a lane that are `late` (never started)."""
        taken: list[Job] = []
        dropped: list[Job] = []
        idle_turns = 0
        while len(taken) < slots and self._turn and idle_turns < len(self._turn):
            endpoint_id = self._turn[0]
            self._turn.rotate(-1)
            lane = self._lanes[endpoint_id]
            if not lane.sendable(held=endpoint_id in self._held):
                idle_turns += 1
                continue
            idle_turns = 0
            job = lane.queue.popleft()
            self.queued -= 1
            if late is not None and late(job):
                dropped.append(job)
            else:
                taken.append(job)
                lane.in_flight += 1
                self.in_flight += 1
            if not lane.queue:
                self._turn.remove(endpoint_id)
                self._forget_if_idle(endpoint_id)
        return taken, dropped

    def finished(self, job: Job, *, failed: bool) -> None:
        """A send ended: failed=True makes its lane send one at a time."""
        lane = self._lanes[job.endpoint_id]
        lane.in_flight -= 1
        self.in_flight -= 1
        if failed:
            lane.failing = True
            lane.unrecorded += 1
        else:
            lane.failing = False
        self._forget_if_idle(job.endpoint_id)

    def recorded(self, failures: dict[str, int]) -> None:
        """The database counted these failures (per endpoint)."""
        for endpoint_id, count in failures.items():
            lane = self._lanes.get(endpoint_id)
            if lane is not None:
                lane.unrecorded = max(0, lane.unrecorded - count)
                self._forget_if_idle(endpoint_id)

    def hold(self, endpoint_ids: frozenset[str]) -> list[Job]:
        """Endpoints seen open from now on; returns their queued jobs but probes."""
        self._held = endpoint_ids
        returned = []
        for endpoint_id in endpoint_ids:
            lane = self._lanes.get(endpoint_id)
            if lane is None:
                continue
            keep = deque(j for j in lane.queue if j.is_probe)
            returned += [j for j in lane.queue if not j.is_probe]
            lane.queue = keep
            if not keep and endpoint_id in self._turn:
                self._turn.remove(endpoint_id)
            self._forget_if_idle(endpoint_id)
        self.queued -= len(returned)
        return returned

    def drain(self) -> list[Job]:
        """Every queued job (the dispatcher is stopping)."""
        returned = [job for lane in self._lanes.values() for job in lane.queue]
        for lane in self._lanes.values():
            lane.queue.clear()
        self._turn.clear()
        self.queued = 0
        for endpoint_id in list(self._lanes):
            self._forget_if_idle(endpoint_id)
        return returned

    @property
    def ready(self) -> int:
        """Queued jobs that could start as soon as a send slot frees up."""
        return sum(
            lane.sendable(held=e in self._held) for e, lane in self._lanes.items()
        )

    def _lane(self, job: Job) -> Lane:
        lane = self._lanes.get(job.endpoint_id)
        if lane is None:
            lane = self._lanes[job.endpoint_id] = Lane(cap=job.max_in_flight)
        lane.cap = job.max_in_flight  # the newest claim knows the newest setting
        if not lane.queue:
            self._turn.append(job.endpoint_id)
        return lane

    def _forget_if_idle(self, endpoint_id: str) -> None:
        # A lane with nothing queued, out or unrecorded has nothing to remember:
        # a later success or failure starts it afresh.
        lane = self._lanes[endpoint_id]
        if not (lane.queue or lane.in_flight or lane.unrecorded or lane.failing):
            del self._lanes[endpoint_id]
