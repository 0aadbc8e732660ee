"""How the endpoint form (endpoint_form.py) lays its fields out: those of
every kind, the groups only some kinds have (the picker's, and what shapes
a send beside a pull endpoint, which has none of it), and the fields folded
under *Advanced*, unfolded when one holds a value or an error."""

from __future__ import annotations

from endpoints import brokers
from relayproject.portal import endpoint_kinds, pull_fields


class EndpointFormLayout:
    """A mixin of EndpointForm: reads its fields, kinds and chosen kind."""

    # Shown folded under "Advanced": most endpoints never set them.
    ADVANCED = (
        "max_attempts",
        "retry_schedule",
        "timeout_seconds",
        "permanent_statuses",
        "rate_limit_per_second",
        "filter",
        "remove_headers",
        "headers",
        "max_in_flight",
        "ordered",
        "signing",
    )

    @property
    def _of_some_kinds(self) -> set[str]:
        """The fields only some kinds have (the picker's groups, and what
        shapes a send beside a pull endpoint)."""
        names = {"kind"}
        for kind in self.kinds:
            names.update(endpoint_kinds.kind_fields(kind))
        if brokers.PULL in self.kinds:
            names.update(pull_fields.SEND_FIELDS)
        return names & (set(self.fields) | {"kind"})

    @staticmethod
    def _fields_of(kind: str) -> set[str]:
        """The fields of only some kinds that `kind` has."""
        names = set(endpoint_kinds.kind_fields(kind))
        if pull_fields.sends(kind):
            names.update(pull_fields.SEND_FIELDS)
        return names

    @property
    def basic_fields(self) -> list:
        skip = self._of_some_kinds.union(self.ADVANCED)
        return [f for f in self if f.name not in skip]

    @property
    def kind_groups(self) -> list[endpoint_kinds.KindGroup]:
        return endpoint_kinds.kind_groups(
            self, kinds=self.kinds, chosen=self.kind_chosen
        )

    @property
    def advanced_fields(self) -> list:
        # In ADVANCED's order: the retry fields together, whatever the
        # order they were added in.
        return [self[name] for name in self.ADVANCED if name in self.fields]

    @property
    def pull_only(self) -> bool:
        """A pull endpoint's edit form: nothing of a send is on it."""
        return not any(pull_fields.sends(k) for k in self.kinds)

    @property
    def advanced_rows(self) -> list[tuple]:
        """(field, the kinds it is for, joined by spaces, or "" for every
        kind; whether it shows for the chosen kind), in ADVANCED's order."""
        some = self._of_some_kinds
        rows = []
        for field in self.advanced_fields:
            if field.name not in some:
                rows.append((field, "", True))
                continue
            kinds = [k for k in self.kinds if field.name in self._fields_of(k)]
            rows.append((field, " ".join(kinds), self.kind_chosen in kinds))
        return rows

    @property
    def advanced_open(self) -> bool:
        """Unfolded when one of them has an error or a value: nothing set or
        wrong is hidden."""
        ignored = self._of_some_kinds - self._fields_of(self.kind_chosen)
        for field in self.advanced_fields:
            if field.name in ignored:
                continue
            value = field.value()
            # A choice left at its default (signing "v1") is not a value set.
            default = self.fields[field.name].initial
            if field.errors or (value not in (None, "", [], False, default)):
                return True
        return False
