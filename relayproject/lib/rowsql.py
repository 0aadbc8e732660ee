"""Model rows in and out of hand-written PostgreSQL statements.

The hot paths (authentication, publishing) write a statement by hand so that
one round trip does the work of several ORM queries. The column lists still
come from the models, so a field another change adds is read and written
without anyone editing the SQL here.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from django.db import DEFAULT_DB_ALIAS, connection
from django.db.models import ForeignKey, Model
from django.db.models.base import ModelState


def columns(model: type[Model], alias: str) -> str:
    """`alias.col, ...` for every concrete field, in _meta order."""
    return ", ".join(f"{alias}.{f.column}" for f in model._meta.concrete_fields)


def placeholders(values: Sequence) -> str:
    """`IN (...)` contents for values; never empty, which SQL refuses."""
    return ", ".join(["%s"] * len(values)) or "NULL"


def _converters(model: type[Model]) -> list[tuple[list, object]]:
    # What the ORM would apply to each column (JSON text to objects, SQLite's
    # integers and strings to booleans and datetimes), computed once a model.
    cache = _CONVERTERS.setdefault(connection.vendor, {})
    if model not in cache:
        cache[model] = []
        for field in model._meta.concrete_fields:
            col = field.get_col(model._meta.db_table)
            found = connection.ops.get_db_converters(col)
            found += field.get_db_converters(connection)
            cache[model].append((found, col))
    return cache[model]


_CONVERTERS: dict[str, dict[type[Model], list]] = {}


def from_row(model: type[Model], values: Sequence) -> Model:
    """An instance from the values `columns(model, ...)` selected."""
    converted = []
    for (found, col), value in zip(_converters(model), values, strict=True):
        for convert in found:
            value = convert(value, col, connection)
        converted.append(value)
    names = [f.attname for f in model._meta.concrete_fields]
    return model.from_db(connection.alias, names, converted)


def built(model: type[Model], values: Mapping[str, object]) -> Model:
    """A row about to be written by a hand-written statement, as an instance:
    these attribute values, every other field at its default, marked saved.

    Made as unpickling makes one (`__new__`, then the attribute dict), because
    Model.__init__ costs 40-70 us a row and a batch of 500 events is 1,500
    rows. So no pre_init/post_init signals: only for models whose fields need
    none (no image or generic relation fields). Set a relation's object with
    its descriptor afterwards (`event.merchant = merchant`).
    """
    constant, made = _defaults(model)
    obj = model.__new__(model)
    obj._state = ModelState()
    obj._state.adding = False
    # The statements here go through django.db.connection, the default
    # database; reading connection.alias costs a thread-local lookup a row.
    obj._state.db = DEFAULT_DB_ALIAS
    attrs = obj.__dict__
    attrs.update(constant)
    for name, default in made:
        if name not in values:
            attrs[name] = default()
    attrs.update(values)
    return obj


def _defaults(model: type[Model]) -> tuple[dict, list]:
    # Plain defaults are shared; callable ones (ids, list, dict) are called
    # per row, so no two rows share a mutable value.
    if model not in _DEFAULTS:
        constant, made = {}, []
        for f in model._meta.concrete_fields:
            if f.has_default() and callable(f.default):
                made.append((f.attname, f.default))
            else:
                constant[f.attname] = f.get_default()
        _DEFAULTS[model] = (constant, made)
    return _DEFAULTS[model]


_DEFAULTS: dict[type[Model], tuple[dict, list]] = {}


# Values psycopg sends as they are; any other field's value goes through the
# field's own get_db_prep_save (a JSONField's, say).
_PLAIN = frozenset(
    {
        "AutoField",
        "BigAutoField",
        "BigIntegerField",
        "BooleanField",
        "CharField",
        "DateTimeField",
        "FloatField",
        "ForeignKey",
        "IntegerField",
        "PositiveBigIntegerField",
        "PositiveIntegerField",
        "PositiveSmallIntegerField",
        "SlugField",
        "SmallIntegerField",
        "TextField",
    }
)


def _plain(field) -> bool:
    # A foreign key's value is its target's: a key class of our own
    # (endpoints.merchant_keyed) has its own internal type but a plain value.
    if isinstance(field, ForeignKey):
        field = field.target_field
    return field.get_internal_type() in _PLAIN


def _insert_plan(model: type[Model]) -> list[tuple[str, str, str, object]]:
    # (attname, column, SQL type, field or None when psycopg takes the value
    # as it is), computed once a model: this runs on every publish.
    cache = _PLANS.setdefault(connection.vendor, {})
    if model not in cache:
        cache[model] = [
            (
                f.attname,
                f.column,
                f.db_type(connection),
                None if _plain(f) else f,
            )
            for f in model._meta.concrete_fields
        ]
    return cache[model]


_PLANS: dict[str, dict[type[Model], list]] = {}


def _array(values: list, cast: str) -> tuple[object, str]:
    """(the parameter, its SQL) for a column's values as an array.

    psycopg writes a list as an array literal, checking every item for
    characters to quote with a regular expression in Python: a tenth of a
    batch of 100 events (issue 21). Text that cannot hold the separator
    (ids) goes as one comma-joined string, JSON texts as one JSON array;
    anything else, a list.
    """
    if values and type(values[0]) is str:
        try:
            joined = ",".join(values)
        except TypeError:  # a None, or another type, among them
            return values, f"%s::{cast}[]"
        if cast == "jsonb":
            return f"[{joined}]", _JSON_ELEMENTS
        if joined.count(",") == len(values) - 1 and "" not in values:
            return joined, f"string_to_array(%s, ',')::{cast}[]"
    return values, f"%s::{cast}[]"


# The elements of one JSON array, in order, as jsonb[].
_JSON_ELEMENTS = (
    "ARRAY(SELECT j.e FROM jsonb_array_elements(%s::jsonb) "
    "WITH ORDINALITY AS j(e, n) ORDER BY j.n)"
)


def insert_rows(
    instances: Sequence[Model],
    *,
    prepared: Mapping[str, list] | None = None,
    by_row: frozenset[str] = frozenset(),
) -> tuple[str, list]:
    """`INSERT INTO table (...) SELECT ... FROM unnest(...)` for unsaved
    instances of one model, with its params, whatever fields the model has.

    prepared: database-ready values by attname, one per instance, instead of
    the instances' own. The primary key, a column whose value differs between
    rows and one named in by_row are arrays unnested; one the same in every
    row is one parameter. One statement writes any number of rows, and its
    parameter count does not grow with them. A by_row value is `u.<attname>`
    in a WHERE the caller adds.
    """
    model = type(instances[0])
    prepared = prepared or {}
    by_row = by_row | {model._meta.pk.attname}
    names, exprs, params = [], [], []
    arrays, array_params = [], []
    for name, column, cast, field in _insert_plan(model):
        names.append(column)
        if name in prepared:
            values = prepared[name]
        elif field is None:
            values = [obj.__dict__[name] for obj in instances]
        else:
            values = [
                field.get_db_prep_save(obj.__dict__[name], connection)
                for obj in instances
            ]
        first = values[0]
        if name in by_row or values.count(first) != len(values):
            sent, array = _array(values, cast)
            arrays.append((array, name))
            array_params.append(sent)
            exprs.append(f"u.{name}")
        else:
            exprs.append(f"%s::{cast}")
            params.append(first)
    unnest = ", ".join(cast for cast, _ in arrays)
    aliases = ", ".join(name for _, name in arrays)
    sql = (
        f"INSERT INTO {model._meta.db_table} ({', '.join(names)}) "
        f"SELECT {', '.join(exprs)} FROM unnest({unnest}) AS u({aliases})"
    )
    # Scalars come first in the text (the SELECT list), then the arrays.
    return sql, params + array_params
