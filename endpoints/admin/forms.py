"""The staff console's forms: the event type form with the API's checks, the
merchant form's broker host list, and JSON bounded in depth (its parser,
encoder and the admin's templates recurse)."""

from __future__ import annotations

from collections.abc import Callable

from django import forms
from django.conf import settings
from django.forms.fields import InvalidJSONInput

from endpoints import retry_policy
from endpoints.brokers import patterns_errors
from endpoints.catalogue import fields_errors as catalogue_field_errors
from endpoints.models import EventType, Merchant
from relayproject.lib.jsonlimits import depth_message, json_depth


class BoundedJSONField(forms.JSONField):
    """Django's JSON field, refusing (never crashing on) JSON nested deeper than
    max_depth(): its parser, encoder and the admin's templates all recurse."""

    def __init__(self, *, max_depth: Callable[[], int], **kwargs) -> None:
        self.max_depth = max_depth
        super().__init__(**kwargs)

    def _too_deep(self, value: object) -> bool:
        limit = self.max_depth()
        return json_depth(value, stop_above=limit) > limit

    def to_python(self, value):
        try:
            converted = super().to_python(value)
        except RecursionError:
            converted = None
        else:
            if not self._too_deep(converted):
                return converted
        raise forms.ValidationError(depth_message(self.max_depth()))

    def bound_data(self, data, initial):
        # Shown back as the text typed, so a refused value is never re-encoded.
        try:
            value = super().bound_data(data, initial)
        except RecursionError:
            return InvalidJSONInput(data)
        return InvalidJSONInput(data) if self._too_deep(value) else value


def _event_depth() -> int:
    return settings.MAX_EVENT_DEPTH


def _schema_depth() -> int:
    # As deep as the API's parser lets a body be (relayproject/api.py).
    return 2 * settings.MAX_EVENT_DEPTH + 3


class EventTypeForm(forms.ModelForm):
    """The same checks as the API: a valid JSON Schema, an example that matches it."""

    schema = BoundedJSONField(max_depth=_schema_depth, required=False)
    example = BoundedJSONField(max_depth=_event_depth, required=False)

    class Meta:
        model = EventType
        fields = ("name", "description", "schema", "example", "deprecated")

    def clean(self):
        cleaned = super().clean()
        errors = catalogue_field_errors(
            name=cleaned.get("name"),
            description=cleaned.get("description"),
            schema=cleaned.get("schema"),
            example=cleaned.get("example"),
        )
        for field, problems in errors.items():
            for problem in problems:
                self.add_error(field, problem)
        return cleaned


class MerchantForm(forms.ModelForm):
    """A merchant's overrides; its broker host list is checked as the
    dispatcher reads it (endpoints/brokers.py), the error beside the field."""

    broker_hosts = BoundedJSONField(
        max_depth=_event_depth,
        required=False,
        help_text=Merchant._meta.get_field("broker_hosts").help_text,
    )

    class Meta:
        model = Merchant
        # Every field, as the admin's default form: a list here would become
        # the page's (ModelAdmin reads the form's fields).
        fields = "__all__"  # noqa: DJ007

    def clean_broker_hosts(self):
        hosts = self.cleaned_data.get("broker_hosts")
        if hosts is not None and (problem := patterns_errors(hosts)):
            raise forms.ValidationError(f"{problem[:1].upper()}{problem[1:]}.")
        return hosts

    def clean(self):
        """The retry defaults against the operator's bounds, as the API
        checks them (endpoints/retry_policy.py), each error beside its field."""
        cleaned = super().clean()
        given = {
            field: cleaned.get(field)
            for field in retry_policy.FIELDS
            if field in self.changed_data and field not in self.errors
        }
        if given:
            existing = self.instance if self.instance.pk else None
            found = retry_policy.merchant_defaults_errors(existing, given)
            for field, messages in found.items():
                self.add_error(field, messages)
        return cleaned
