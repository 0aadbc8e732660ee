"""python manage.py citus_distribute: distribute the relay's tables on Citus.

Run it once after `migrate` on a Citus coordinator (DATABASE_URL names the
coordinator); running it again changes nothing. On plain PostgreSQL or
SQLite it says so and does nothing. What goes where: relayproject/lib/citus.py.
"""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError
from django.db import transaction

from relayproject.lib import citus


class Command(BaseCommand):
    help = "Distribute the relay's tables by merchant on a Citus cluster (idempotent)."

    def add_arguments(self, parser) -> None:
        parser.add_argument(
            "--shard-count",
            type=int,
            default=None,
            help="shards per distributed table (default: the cluster's "
            "citus.shard_count, 32); set once, when the tables are distributed",
        )

    def handle(self, *args, **options) -> None:
        cluster = citus.cluster()
        if cluster is None:
            self.stdout.write(
                "Not a Citus database (no citus extension): nothing to distribute."
            )
            return
        if cluster.workers == 0:
            raise CommandError("the Citus coordinator has no active worker node")
        with transaction.atomic():
            done = citus.distribute(shard_count=options["shard_count"])
        for table in done.reference:
            self.stdout.write(f"reference table: {table}")
        for table in done.distributed:
            self.stdout.write(f"distributed by {citus.COLUMN}: {table}")
        for key in done.dropped_keys:
            self.stdout.write(f"foreign key dropped (local table): {key}")
        if not done.changed:
            self.stdout.write("Already distributed: nothing to do.")
        cluster = citus.cluster()
        self.stdout.write(
            f"Citus {cluster.version}, {cluster.workers} worker(s): "
            f"{cluster.distributed} distributed and {cluster.reference} reference "
            "tables."
        )
