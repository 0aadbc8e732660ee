"""Whom a merchant's events go to: the merchant and its active endpoints.

A publish needs them before it can fan out. Read from the database they cost
a round trip per publish, so each process keeps the last ones it read
(`cached=True`), each with a fingerprint PostgreSQL computed from the rows
(the merchant's and its active endpoints', whole). The statement that writes
the events checks in the same round trip that the fingerprint still holds
(`guard_sql`) and writes nothing if not; the publisher then reads afresh and
writes again (`AudienceChanged`). So a cached audience is never trusted: an
endpoint created, disabled or re-subscribed in any process, or in the
caller's own transaction, is seen by the next publish, with no TTL and no
invalidation messages. SQLite (development) has no md5() and reads every time.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace

from django.db import connection

from endpoints.models import Endpoint, Merchant
from relayproject.lib import citus, dbfeatures, rowsql
from relayproject.lib.ttlcache import TtlCache

MAX_ENTRIES = 10_000  # merchants cached per process; bounds memory


@dataclass
class Audience:
    """A merchant and its active endpoints: whom its events may go to.

    fingerprint is set when it came from the cache: a write must check it
    (guard_sql) before trusting the endpoints.
    """

    merchant: Merchant
    endpoints: list[Endpoint] = field(default_factory=list)
    fingerprint: str | None = None


class AudienceChanged(Exception):
    """A cached audience no longer matches the database; nothing was written."""


def _fingerprint(merchant: str, *, pinned: bool = False) -> str:
    # The rows' text, whole: any column that changes changes it. Endpoints in
    # id order, as `audiences` lists them. Pinned (Citus): the endpoints'
    # merchant is a parameter, not the merchant row's column, so the
    # statement runs on that merchant's shard (a reference table's row
    # correlated with a distributed table is a join Citus refuses).
    of = "%s" if pinned else f"{merchant}.id"
    return (
        f"md5({merchant}::text || coalesce((SELECT string_agg(fe::text, ',' "
        "ORDER BY fe.id) FROM endpoints_endpoint fe "
        f"WHERE fe.merchant_id = {of} AND fe.is_active), ''))"
    )


def guard_sql(expected: Mapping[int, str]) -> tuple[str, list]:
    """A boolean SQL expression: every merchant id in `expected` still has that
    fingerprint (as the statement that contains it sees the rows)."""
    if citus.on():
        # Citus: one merchant's shard per condition (drafts_write writes one
        # merchant per statement there).
        parts, params = [], []
        for merchant_id, fingerprint in expected.items():
            parts.append(
                f"(SELECT {_fingerprint('gm', pinned=True)} FROM endpoints_merchant gm "
                "WHERE gm.id = %s) IS NOT DISTINCT FROM %s"
            )
            params += [merchant_id, merchant_id, fingerprint]
        return " AND ".join(parts), params
    if len(expected) == 1:
        # Every in-process and single API publish: PostgreSQL plans this
        # scalar subquery in a fifth of the time of the join below (0.12
        # against 0.65 ms), which counts in a publish of about a millisecond.
        ((merchant_id, fingerprint),) = expected.items()
        sql = (
            f"(SELECT {_fingerprint('gm')} FROM endpoints_merchant gm "
            "WHERE gm.id = %s) IS NOT DISTINCT FROM %s"
        )
        return sql, [merchant_id, fingerprint]
    sql = (
        "(SELECT count(*) = %s FROM endpoints_merchant gm JOIN "
        "unnest(%s::bigint[], %s::text[]) AS gx(id, fp) ON gm.id = gx.id "
        f"WHERE {_fingerprint('gm')} = gx.fp)"
    )
    return sql, [len(expected), list(expected), list(expected.values())]


class _Cache:
    """merchant id -> Audience (with its fingerprint), slug -> merchant id.

    No time limit: the guard checks every cached audience when it is used.
    The Audience objects are read-only. A slug moved to another merchant is
    caught by the guard, as the slug is part of the merchant's row.
    """

    def __init__(self) -> None:
        self.by_id: TtlCache[int, Audience] = TtlCache(
            ttl=None, max_entries=MAX_ENTRIES
        )
        self.ids: TtlCache[str, int] = TtlCache(ttl=None, max_entries=MAX_ENTRIES)

    def get(self, *, slug: str | None = None, merchant_id: int | None = None):
        if slug is not None:
            merchant_id = self.ids.get(slug)
        return self.by_id.get(merchant_id) if merchant_id is not None else None

    def put(self, audience: Audience) -> None:
        self.by_id.put(audience.merchant.pk, audience)
        self.ids.put(audience.merchant.slug, audience.merchant.pk)

    def clear(self) -> None:
        self.by_id.clear()
        self.ids.clear()


cache = _Cache()


def audiences(
    *,
    slugs: Iterable[str] = (),
    merchant_ids: Iterable[int] = (),
    cached: bool = False,
) -> dict[str, Audience]:
    """Merchants by slug (named by slug or id) with their active endpoints.

    One query, or none when every one is cached (cached=True; then the
    writer must check each fingerprint). An unknown merchant is absent.
    Endpoints are whole rows, so whatever a fan-out rule needs is there.
    """
    slugs, merchant_ids = list(slugs), list(merchant_ids)
    found: dict[str, Audience] = {}
    if cached and dbfeatures.row_fingerprints():
        slugs, merchant_ids = _from_cache(slugs, merchant_ids, found)
    if slugs or merchant_ids:
        read, _ = _audiences(slugs, merchant_ids, lock="")
        found.update(read)
    return found


def _from_cache(
    slugs: list[str], merchant_ids: list[int], found: dict[str, Audience]
) -> tuple[list[str], list[int]]:
    # Fills found from the cache; answers the slugs and ids still to be read.
    def missing(names: list, kind: str) -> list:
        left = []
        for name in names:
            hit = cache.get(**{kind: name})
            # A switched-off merchant is refused as read, so always read: the
            # guard checks a cached audience only once a write is tried, and
            # a refusal tries none (endpoints/switched_off.py).
            if hit is None or not hit.merchant.is_active:
                left.append(name)
            else:
                found[hit.merchant.slug] = hit
        return left

    return missing(slugs, "slug"), missing(merchant_ids, "merchant_id")


def audience_locked(*, slug: str, lock: str) -> tuple[Audience | None, bool]:
    """audiences() of one slug, and in the same round trip (PostgreSQL, in a
    transaction) pg_try_advisory_xact_lock(hashtext(lock)): whether it was got.

    The lock is only tried when the merchant exists.
    """
    found, got = _audiences([slug], [], lock=lock)
    return found.get(slug), got


_SLUG_AT = [f.attname for f in Merchant._meta.concrete_fields].index("slug")


def _audiences(
    slugs: list[str], merchant_ids: list[int], *, lock: str
) -> tuple[dict[str, Audience], bool]:
    # On PostgreSQL each row also carries its merchant's fingerprint, so what
    # was read can be cached and checked later.
    fingerprinted = dbfeatures.row_fingerprints()
    if fingerprinted and citus.on():
        return _audiences_by_shard(slugs, merchant_ids, lock=lock)
    sql = (
        f"SELECT {_fingerprint('m') if fingerprinted else 'NULL'}, "
        f"{rowsql.columns(Merchant, 'm')}, {rowsql.columns(Endpoint, 'e')} "
        "FROM endpoints_merchant m LEFT JOIN endpoints_endpoint e "
        "ON e.merchant_id = m.id AND e.is_active "
        f"WHERE m.slug IN ({rowsql.placeholders(slugs)}) "
        f"OR m.id IN ({rowsql.placeholders(merchant_ids)}) "
        "ORDER BY m.id, e.id"
    )
    params: list = [*slugs, *merchant_ids]
    if lock:
        # A volatile CTE runs once, when the first row asks for it.
        sql = (
            "WITH lk AS (SELECT pg_try_advisory_xact_lock(hashtext(%s)) AS got) "
            + sql.replace("SELECT ", "SELECT (SELECT got FROM lk), ", 1)
        )
        params.insert(0, lock)
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        rows = cursor.fetchall()
    got = bool(rows and rows[0][0]) if lock else False
    return _found(rows, skip=2 if lock else 1, fingerprinted=fingerprinted), got


def _audiences_by_shard(
    slugs: list[str], merchant_ids: list[int], *, lock: str
) -> tuple[dict[str, Audience], bool]:
    """_audiences on Citus: the merchants' ids from the reference table, the
    lock on the coordinator, then one single-shard read per merchant."""
    rows, got = [], False
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT id FROM endpoints_merchant "
            f"WHERE slug IN ({rowsql.placeholders(slugs)}) "
            f"OR id IN ({rowsql.placeholders(merchant_ids)}) ORDER BY id",
            [*slugs, *merchant_ids],
        )
        ids = [pk for (pk,) in cursor.fetchall()]
        if lock and ids:  # tried only when the merchant exists, as above
            cursor.execute("SELECT pg_try_advisory_xact_lock(hashtext(%s))", [lock])
            got = cursor.fetchone()[0]
        for pk in ids:
            cursor.execute(
                f"SELECT {_fingerprint('m', pinned=True)}, "
                f"{rowsql.columns(Merchant, 'm')}, {rowsql.columns(Endpoint, 'e')} "
                "FROM endpoints_merchant m LEFT JOIN endpoints_endpoint e "
                "ON e.merchant_id = m.id AND e.is_active AND e.merchant_id = %s "
                "WHERE m.id = %s ORDER BY e.id",
                [pk, pk, pk],
            )
            rows += cursor.fetchall()
    return _found(rows, skip=1, fingerprinted=True), got


def _found(rows: list, *, skip: int, fingerprinted: bool) -> dict[str, Audience]:
    width = len(Merchant._meta.concrete_fields)
    found: dict[str, Audience] = {}
    prints: dict[str, str] = {}
    for row in rows:
        fingerprint, row = row[skip - 1], row[skip:]
        slug = row[_SLUG_AT]
        if slug not in found:
            found[slug] = Audience(rowsql.from_row(Merchant, row[:width]))
            prints[slug] = fingerprint
        if row[width] is not None:
            found[slug].endpoints.append(rowsql.from_row(Endpoint, row[width:]))
    if fingerprinted:
        for slug, audience in found.items():
            cache.put(replace(audience, fingerprint=prints[slug]))
    return found
