"""The event type form of the staff console: the API's checks, and JSON
bounded in depth (its parser, encoder and the admin's templates recurse)."""

from __future__ import annotations

from collections.abc import Callable

from django import forms
from django.conf import settings
from django.forms.fields import InvalidJSONInput

from endpoints.catalogue import fields_errors as catalogue_field_errors
from endpoints.models import EventType
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
