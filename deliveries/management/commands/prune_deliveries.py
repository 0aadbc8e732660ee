"""python manage.py prune_deliveries --older-than DAYS [--dry-run] [--include-dead]"""

from __future__ import annotations

from datetime import timedelta

from django.core.management.base import BaseCommand, CommandError

from deliveries.history.partitions import LockBusy
from deliveries.history.retention import BATCH_SIZE, deliveries_prune
from relayproject.lib.clock import utcnow


class Command(BaseCommand):
    help = (
        "Delete succeeded deliveries finished more than DAYS ago, their attempts "
        "and the events left without deliveries. Pending and in-flight deliveries "
        "are never touched; dead letters only with --include-dead. On PostgreSQL "
        "whole days are dropped: the cutoff is the start of the UTC day DAYS ago."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument("--older-than", type=float, required=True, metavar="DAYS")
        parser.add_argument(
            "--dry-run", action="store_true", help="count, delete nothing"
        )
        parser.add_argument(
            "--include-dead", action="store_true", help="dead letters too"
        )
        parser.add_argument("--batch-size", type=int, default=BATCH_SIZE)

    def handle(self, *args, **options) -> None:
        if options["older_than"] < 0:
            raise CommandError("--older-than must be 0 or more days")
        before = utcnow() - timedelta(days=options["older_than"])
        try:
            result = deliveries_prune(
                before=before,
                include_dead=options["include_dead"],
                dry_run=options["dry_run"],
                batch_size=max(1, options["batch_size"]),
            )
        except LockBusy as exc:
            raise CommandError(
                "the history tables stayed locked (a long transaction?); the days "
                f"dropped so far are gone, run it again later: {exc}"
            ) from exc
        verb = "would delete" if options["dry_run"] else "deleted"
        figures = ", ".join(
            f"{'about ' if name in result.estimated else ''}"
            f"{getattr(result, name)} {name}"
            for name in ("deliveries", "attempts", "events")
        )
        days = f"; dropped {result.partitions} partitions" if result.partitions else ""
        notes = "".join(f"; {note}" for note in result.notes)
        self.stdout.write(
            f"{verb} {figures} (finished before "
            f"{result.before:%Y-%m-%d %H:%M} UTC{days}{notes})"
        )
