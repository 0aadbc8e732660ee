"""Portal forms. Field checks beyond types live in the services; views copy their
message_dict onto the matching fields."""

from __future__ import annotations

import re

from django import forms
from django.core.exceptions import ValidationError

STATUS_CHOICES = [
    ("", "any status"),
    ("pending", "pending"),
    ("delivering", "delivering"),
    ("succeeded", "succeeded"),
    ("dead", "dead"),
]


def split_types(value: str) -> list[str]:
    return [t for t in re.split(r"[\s,]+", value or "") if t]


class EndpointForm(forms.Form):
    url = forms.CharField(
        label="URL",
        max_length=2000,
        help_text="Where we POST events. Checked against the destination policy.",
        widget=forms.URLInput(attrs={"placeholder": "https://example.com/webhooks"}),
    )
    description = forms.CharField(required=False, max_length=500)
    known_event_types = forms.MultipleChoiceField(
        label="Event types seen",
        required=False,
        widget=forms.CheckboxSelectMultiple,
    )
    event_types = forms.CharField(
        label="Other event types",
        required=False,
        help_text=(
            "Comma or space separated; 'payment.*' matches every payment. type. "
            "Nothing picked here or above means every type."
        ),
    )
    max_attempts = forms.IntegerField(
        required=False, help_text="Empty: the relay default."
    )
    rate_limit_per_second = forms.FloatField(
        label="Rate limit (per second)", required=False, help_text="Empty: no limit."
    )

    def __init__(self, *args, seen_types: list[str], **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.fields["known_event_types"].choices = [(t, t) for t in seen_types]
        if not seen_types:
            self.fields["known_event_types"].widget = forms.MultipleHiddenInput()

    @classmethod
    def initial_for(cls, endpoint, seen_types: list[str]) -> dict:
        known = [t for t in endpoint.event_types if t in seen_types]
        other = [t for t in endpoint.event_types if t not in seen_types]
        return {
            "url": endpoint.url,
            "description": endpoint.description,
            "known_event_types": known,
            "event_types": ", ".join(other),
            "max_attempts": endpoint.max_attempts,
            "rate_limit_per_second": endpoint.rate_limit_per_second,
        }

    def service_kwargs(self) -> dict:
        data = self.cleaned_data
        return {
            "url": data["url"],
            "description": data["description"],
            "event_types": list(data["known_event_types"])
            + split_types(data["event_types"]),
            "max_attempts": data["max_attempts"],
            "rate_limit_per_second": data["rate_limit_per_second"],
        }

    def add_service_errors(self, error: ValidationError) -> None:
        for field, messages in error.message_dict.items():
            target = field if field in self.fields else None
            for message in messages:
                self.add_error(target, message)


class DeliveryFilterForm(forms.Form):
    status = forms.ChoiceField(choices=STATUS_CHOICES, required=False)
    event_type = forms.CharField(required=False, max_length=255)
    since = forms.DateTimeField(
        required=False,
        label="Since (UTC)",
        widget=forms.DateTimeInput(attrs={"type": "datetime-local"}),
    )
    until = forms.DateTimeField(
        required=False,
        label="Until (UTC)",
        widget=forms.DateTimeInput(attrs={"type": "datetime-local"}),
    )
    cursor = forms.CharField(required=False, widget=forms.HiddenInput, max_length=40)


class RecoverForm(forms.Form):
    since = forms.DateTimeField(
        label="Failed since (UTC)",
        widget=forms.DateTimeInput(attrs={"type": "datetime-local"}),
    )
    confirm = forms.BooleanField(required=False, widget=forms.HiddenInput)
