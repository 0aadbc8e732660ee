"""python manage.py run_dispatcher: parse options, wire a Dispatcher, run it."""

from __future__ import annotations

import logging
import queue
import signal
from dataclasses import asdict

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from deliveries.dispatch.brokers import KindSender
from deliveries.dispatch.dispatcher import Dispatcher
from deliveries.dispatch.endpoint_auth import (
    TOKEN_BODY_LIMIT,
    AuthorizingSender,
    token_fetch_limit,
)
from deliveries.dispatch.heartbeat import Heartbeat
from deliveries.dispatch.lease import default_lease_seconds, start_margin
from deliveries.dispatch.maintenance import (
    GaugeRefresher,
    Maintenance,
    PartitionKeeper,
    PullUpkeep,
    StatsRefresher,
)
from deliveries.dispatch.sendloop import DEADLINE_GRACE_SECONDS
from deliveries.dispatch.session import limit_dispatcher_sessions
from deliveries.dispatch.transport import AsyncSender, open_files_allow
from deliveries.dispatch.wakeup import make_waker
from deliveries.notifications.step import OperationalCheck
from deliveries.pull.leasing import PULLED_BY
from relayproject.lib import dbfeatures
from relayproject.lib.clock import SystemClock
from relayproject.lib.collector import collector_settle
from relayproject.lib.logs import log_process_bind
from relayproject.lib.tracing import tracing_flush

logger = logging.getLogger("deliveries.dispatch")


class Command(BaseCommand):
    help = "Claim due deliveries and send them; run as many as you like."
    # True when this command is the process (manage.py run_dispatcher), not a
    # call_command inside someone else's: only then is the collector ours.
    owns_process = False

    def run_from_argv(self, argv) -> None:
        self.owns_process = True
        super().run_from_argv(argv)

    def add_arguments(self, parser) -> None:
        mode = parser.add_mutually_exclusive_group()
        mode.add_argument("--once", action="store_true", help="one batch, then exit")
        mode.add_argument("--drain", action="store_true", help="until nothing is due")
        parser.add_argument("--batch-size", type=int, default=settings.BATCH_SIZE)
        parser.add_argument(
            "--concurrency", type=int, default=settings.DISPATCHER_CONCURRENCY
        )
        parser.add_argument("--worker-id", default=settings.WORKER_ID)
        parser.add_argument("--lease-seconds", type=float, default=None)

    def handle(self, *args, **options) -> None:
        if options["worker_id"] == PULLED_BY:
            # The claimed_by of every pull lease (deliveries/pull/leasing.py):
            # a dispatcher under it would take those leases for its own.
            raise CommandError(f"--worker-id {PULLED_BY!r} is reserved for pull leases")
        batch_size = max(1, options["batch_size"])
        concurrency = max(1, options["concurrency"])
        # The longest attempt an endpoint's own timeout_seconds may ask for
        # (bounded by HTTP_TIMEOUT_MAX_SECONDS): the lease and the start
        # margin are reckoned with it, so such a send cannot outlive its lease.
        longest = max(settings.HTTP_TIMEOUT_SECONDS, settings.HTTP_TIMEOUT_MAX_SECONDS)
        lease = (
            options["lease_seconds"]
            or settings.CLAIM_LEASE_SECONDS
            or default_lease_seconds(
                batch_size=batch_size,
                concurrency=concurrency,
                timeout=settings.HTTP_TIMEOUT_SECONDS,
                longest=longest,
            )
        )
        # Every log line of this process, from either thread, names the worker.
        log_process_bind(worker=options["worker_id"])
        files, wanted = open_files_allow(concurrency=concurrency)
        if files < wanted:
            logger.warning(
                "only %d files may be open (hard limit), %d sends in flight want "
                "about %d: sends past it fail as connection errors; raise the "
                "limit (ulimit -Hn, LimitNOFILE) or lower --concurrency",
                files,
                concurrency,
                wanted,
            )
        # Before the first query: every session of this process gets the limits.
        limit_dispatcher_sessions()
        # One token fetch per send slot at least: a fetch outlives its send,
        # and fewer would queue sends behind other merchants' fetches.
        token_fetches = token_fetch_limit(concurrency)
        dead_after = settings.DISPATCHER_DEAD_AFTER_SECONDS
        liveness: queue.SimpleQueue = queue.SimpleQueue()
        clock = SystemClock()  # one clock: the loop compares the beats' with its own
        heartbeat = Heartbeat(
            clock=clock,
            worker_id=options["worker_id"],
            dead_after=dead_after,
            lease_seconds=lease,
            liveness=liveness,
        )
        dispatcher = Dispatcher(
            clock=clock,
            worker_id=options["worker_id"],
            # HTTP endpoints by AsyncSender, broker kinds by their own
            # senders (deliveries/dispatch/brokers/), loaded on first use.
            sender=KindSender(
                # Endpoints with auth get their Authorization here; OAuth2
                # tokens come through a sender of their own, under the same
                # destination policy and proxy as the receivers.
                http=AuthorizingSender(
                    http=AsyncSender(
                        timeout=settings.HTTP_TIMEOUT_SECONDS,
                        body_limit=settings.RESPONSE_BODY_LIMIT_BYTES,
                        allow_private=settings.RELAY_ALLOW_PRIVATE_DESTINATIONS,
                        # One socket per send slot: a lower limit would queue
                        # sends inside the sender, their deadline running
                        # while they wait.
                        limit=concurrency,
                        monotonic=clock.monotonic,
                        proxy=settings.RELAY_EGRESS_PROXY,
                    ),
                    tokens=AsyncSender(
                        timeout=settings.HTTP_TIMEOUT_SECONDS,
                        body_limit=TOKEN_BODY_LIMIT,
                        allow_private=settings.RELAY_ALLOW_PRIVATE_DESTINATIONS,
                        limit=token_fetches,
                        monotonic=clock.monotonic,
                        proxy=settings.RELAY_EGRESS_PROXY,
                    ),
                    monotonic=clock.monotonic,
                    token_fetches=token_fetches,
                ),
                timeout=settings.HTTP_TIMEOUT_SECONDS,
                allow_private=settings.RELAY_ALLOW_PRIVATE_DESTINATIONS,
                monotonic=clock.monotonic,
            ),
            batch_size=batch_size,
            concurrency=concurrency,
            lease_seconds=lease,
            timeout=settings.HTTP_TIMEOUT_SECONDS,
            poll_interval=settings.POLL_INTERVAL_SECONDS,
            waker=make_waker(),
            maintenance=Maintenance(
                GaugeRefresher(clock=clock),
                StatsRefresher(clock=clock),
                PartitionKeeper(clock=clock),
                PullUpkeep(clock=clock),
                OperationalCheck(),
            ),
            liveness=liveness,
            # Hold sends only where another dispatcher could take over this
            # one's rows; a lone dispatcher never holds its sends.
            hold_after=dead_after / 2
            if dbfeatures.shared_by_many_processes()
            else None,
            start_margin=start_margin(
                lease_seconds=lease, timeout=longest, grace=DEADLINE_GRACE_SECONDS
            ),
        )
        for signum in (signal.SIGTERM, signal.SIGINT):
            signal.signal(signum, lambda *_: dispatcher.stop())
        if self.owns_process:
            # Everything the process keeps is loaded: out of the collector's way.
            collector_settle()
        heartbeat.start()
        try:
            if options["once"]:
                try:
                    dispatcher.run_once()
                finally:
                    dispatcher.close()
            else:
                dispatcher.run(drain=options["drain"])
        finally:
            heartbeat.stop()
            tracing_flush()
        summary = (
            f"dispatcher {options['worker_id']} stopped: {dispatcher.stats.line()}"
        )
        if settings.LOG_FORMAT == "json":
            # One format per stream: a log pipeline parses every line.
            logger.info(summary, extra=asdict(dispatcher.stats))
        else:
            self.stdout.write(summary)
