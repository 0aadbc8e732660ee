"""Rows that belong to one merchant and carry its id: the distribution key.

On Citus (docs/pages/operations/scaling.md) these tables are distributed by
merchant_id, so a statement that names the merchant runs on one shard and
one that does not fans out to all of them. The database's primary key
includes merchant_id (migration endpoints 0013); Django keeps `id` as the
model's pk, so every ORM lookup by pk still works, and this base makes the
ORM's own writes name the merchant:

- save() of an existing row updates WHERE pk = ... AND merchant_id = ...
  (Citus refuses an UPDATE that sets the distribution column unless the
  WHERE pins it to the same value, and Django's save() sets every column);
- a row made without merchant_id takes its endpoint's. The hot paths
  (publish, the claim, the record) always pass it; the lookup is for the
  admin, the command line and the tests, where one more query costs nothing.
"""

from __future__ import annotations

from django.db import models

from relayproject.lib import citus


def endpoint_merchants(endpoint_ids) -> dict[str, int]:
    from endpoints.models import Endpoint

    return dict(
        Endpoint.objects.filter(pk__in=set(endpoint_ids)).values_list(
            "pk", "merchant_id"
        )
    )


def fill_merchants(rows) -> None:
    """Give each row without a merchant_id its endpoint's, in one query. A row
    is a model instance or a dict of its fields by attname (the dispatcher
    writes attempts from dicts, deliveries/dispatch/attempt_insert.py)."""
    if rows and isinstance(rows[0], dict):
        missing = [
            r for r in rows if r.get("merchant_id") is None and "endpoint_id" in r
        ]
        if missing:
            merchants = endpoint_merchants(r["endpoint_id"] for r in missing)
            for r in missing:
                r["merchant_id"] = merchants.get(r["endpoint_id"])
        return
    missing = [
        row for row in rows if row.merchant_id is None and hasattr(row, "endpoint_id")
    ]
    if not missing:
        return
    merchants = endpoint_merchants(row.endpoint_id for row in missing)
    for row in missing:
        row.merchant_id = merchants.get(row.endpoint_id)


class MerchantKeyedQuerySet(models.QuerySet):
    def bulk_create(self, objs, *args, **kwargs):
        objs = list(objs)
        fill_merchants(objs)
        return super().bulk_create(objs, *args, **kwargs)


class MerchantKeyed(models.Model):
    """A row of a table distributed by merchant_id (see the module doc)."""

    objects = MerchantKeyedQuerySet.as_manager()

    class Meta:
        abstract = True

    def save(self, *args, **kwargs):
        fill_merchants([self])
        super().save(*args, **kwargs)

    def _do_update(self, base_qs, using, pk_val, values, update_fields, forced_update):
        # Django's own hook for the UPDATE of save(): pin it to the shard.
        return super()._do_update(
            base_qs.filter(merchant_id=self.merchant_id),
            using,
            pk_val,
            values,
            update_fields,
            forced_update,
        )


class _SameMerchant:
    """A relation between two merchant-keyed rows whose joins also say the
    two merchant_ids are equal.

    True by construction (a row's merchant is its endpoint's), so on one
    PostgreSQL or SQLite it changes no answer; on Citus it makes the ORM's
    joins (the admin's, the selectors', Django's own) join on the
    distribution column, which Citus runs on each shard, instead of a join
    it refuses or runs by moving rows between nodes. Django's hook for this
    is get_extra_restriction: a condition added to the join's ON clause.
    Migrations see a plain ForeignKey (deconstruct): the schema is the same.
    """

    def get_extra_restriction(self, alias, related_alias):
        # alias: the related (pointed-at) row's table; related_alias: ours.
        # Either is None when Django moves the join into a subquery: no
        # condition there, the plain key join is all it needs.
        if alias is None or related_alias is None:
            return None
        from django.db.models.expressions import Col
        from django.db.models.lookups import Exact

        mine = self.model._meta.get_field("merchant")
        theirs = self.related_model._meta.get_field("merchant")
        return Exact(Col(alias, theirs), Col(related_alias, mine))


class MerchantForeignKey(_SameMerchant, models.ForeignKey):
    def deconstruct(self):
        name, _, args, kwargs = super().deconstruct()
        return name, "django.db.models.ForeignKey", args, kwargs


class MerchantOneToOneField(_SameMerchant, models.OneToOneField):
    def deconstruct(self):
        name, _, args, kwargs = super().deconstruct()
        return name, "django.db.models.OneToOneField", args, kwargs


def pinned(queryset, pk):
    """`queryset` narrowed, on Citus, to the merchant of the row whose pk is
    `pk` (read first, without a lock): a locking read there must name its
    shard. Unchanged on one PostgreSQL or SQLite, at no cost."""
    if not citus.on():
        return queryset
    merchant_id = (
        queryset.model._base_manager.filter(pk=pk)
        .values_list("merchant_id", flat=True)
        .first()
    )
    return queryset.filter(merchant_id=merchant_id)


def per_merchant(queryset) -> list:
    """[queryset], or on Citus one queryset per merchant that has such rows
    (read without a lock): a batch that locks its rows must name one shard
    there. Unchanged on one PostgreSQL or SQLite, at no cost."""
    if not citus.on():
        return [queryset]
    merchants = queryset.order_by().values_list("merchant_id", flat=True).distinct()
    return [queryset.filter(merchant_id=m) for m in list(merchants)]


def on_shard(queryset, merchant_id: int | None):
    """`queryset` narrowed to one merchant's rows (its shard on Citus); as it is
    for a caller that does not know the merchant (correct, every shard)."""
    return queryset if merchant_id is None else queryset.filter(merchant_id=merchant_id)
