"""Portal forms (the endpoint form is endpoint_form.py). Field checks beyond
types live in the services; views copy their message_dict onto the matching
fields."""

from __future__ import annotations

import json
import re
from datetime import datetime, timedelta

from django import forms
from django.conf import settings
from django.core.exceptions import ValidationError

from endpoints.matching import is_valid_subscription
from relayproject.lib.jsonlimits import depth_message

STATUS_CHOICES = [
    ("", "any status"),
    ("pending", "pending"),
    ("delivering", "delivering"),
    ("succeeded", "succeeded"),
    ("dead", "dead"),
    ("waiting", "waiting in order"),
]


# Typed as text, read as UTC (TIME_ZONE): a datetime-local input shows the
# browser's own format (03/07/2026, 02:00 PM), which a "(UTC)" label belies.
UTC_FORMATS = [
    "%Y-%m-%d %H:%M",
    "%Y-%m-%dT%H:%M",
    "%Y-%m-%d %H:%M:%S",
    "%Y-%m-%dT%H:%M:%S",
    "%Y-%m-%d",
]


def utc_field(label: str, *, required: bool = True) -> forms.DateTimeField:
    return forms.DateTimeField(
        label=label,
        required=required,
        input_formats=UTC_FORMATS,
        widget=forms.DateTimeInput(
            format="%Y-%m-%d %H:%M",
            attrs={"placeholder": "YYYY-MM-DD HH:MM", "autocomplete": "off"},
        ),
        help_text="Year-month-day and 24-hour time, in UTC.",
    )


def split_types(value: str) -> list[str]:
    return [t for t in re.split(r"[\s,]+", value or "") if t]


class DeliveryFilterForm(forms.Form):
    q = forms.CharField(
        label="Event or delivery id",
        required=False,
        max_length=40,
        widget=forms.TextInput(attrs={"placeholder": "evt_… or dlv_…"}),
    )
    status = forms.ChoiceField(choices=STATUS_CHOICES, required=False)
    event_type = forms.CharField(
        required=False,
        max_length=255,
        widget=forms.TextInput(attrs={"placeholder": "order.* or order.paid"}),
    )
    since = utc_field("Since (UTC)", required=False)
    until = utc_field("Until (UTC)", required=False)
    cursor = forms.CharField(required=False, widget=forms.HiddenInput, max_length=40)
    before = forms.CharField(required=False, widget=forms.HiddenInput, max_length=40)

    def clean_event_type(self):
        value = self.cleaned_data["event_type"].strip()
        if value and not is_valid_subscription(value):
            raise ValidationError("An event type, or a prefix pattern like order.*.")
        return value

    def clean(self):
        cleaned = super().clean()
        since, until = cleaned.get("since"), cleaned.get("until")
        if since and until and since >= until:
            self.add_error("until", "Until must be later than since.")
        return cleaned


class RecoverForm(forms.Form):
    since = utc_field("Failed since (UTC)")
    confirm = forms.BooleanField(required=False, widget=forms.HiddenInput)


class ExampleForm(forms.Form):
    event_type = forms.ChoiceField(label="Event type")
    data = forms.CharField(
        label="Data (JSON)",
        widget=forms.Textarea(attrs={"rows": 12, "spellcheck": "false"}),
        help_text="The example of the type; edit it before sending if you like.",
    )
    ordering_key = forms.CharField(
        label="Ordering key",
        required=False,
        strip=False,
        widget=forms.TextInput(attrs={"placeholder": "e.g. order_123"}),
        help_text=(
            "Optional. On an ordered endpoint, events with the same key are "
            "sent one at a time, in publish order."
        ),
    )

    def __init__(self, *args, types: list, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.fields["event_type"].choices = [
            (t.name, f"{t.name} (deprecated)" if t.deprecated else t.name)
            for t in types
        ]

    @staticmethod
    def initial_for(types: list, wanted: str | None) -> dict:
        chosen = next((t for t in types if t.name == wanted), None)
        chosen = chosen or (types[0] if types else None)
        if chosen is None:
            return {}
        example = chosen.example if chosen.example is not None else {}
        return {"event_type": chosen.name, "data": json.dumps(example, indent=2)}

    def clean_data(self):
        """Parsed only: what the data must satisfy is deliveries.publish.validation's
        to say, when the view publishes it."""
        try:
            return json.loads(self.cleaned_data["data"])
        except ValueError as exc:
            raise ValidationError(f"Not JSON: {exc}.") from None
        except RecursionError:
            # Python's parser gives up near a thousand levels, far past any limit.
            raise ValidationError(depth_message(settings.MAX_EVENT_DEPTH)) from None

    def add_schema_problems(self, problems) -> None:
        """(["data", *path], message) pairs, as deliveries.publish.validation names them;
        a problem with the type goes beside the type."""
        for loc, message in problems:
            if loc[:1] == ["type"]:
                self.add_error("event_type", message)
                continue
            if loc[:1] == ["ordering_key"]:
                self.add_error("ordering_key", message)
                continue
            where = "/".join(str(x) for x in loc[1:]) or "the top level"
            self.add_error("data", f"At {where}: {message}")


class VerifyForm(forms.Form):
    challenge = forms.CharField(
        label="Challenge from your receiver's log",
        max_length=1024,
        help_text="The value of data.challenge in the relay.endpoint.verification "
        'request your receiver got (it starts with "vrfy_").',
        widget=forms.TextInput(attrs={"autocomplete": "off", "spellcheck": "false"}),
    )


def overlap_words(seconds: int) -> str:
    """A rotation overlap as a person says it: "1 hour", "24 hours", "2 days"."""
    for unit, size in (("day", 86400), ("hour", 3600), ("minute", 60)):
        count, rest = divmod(seconds, size)
        # One day reads "24 hours", as the default overlap has always been put.
        if not rest and count and (unit != "day" or count > 1):
            return f"{count} {unit}{'s' if count != 1 else ''}"
    return f"{seconds} seconds"


class RotateForm(forms.Form):
    """How long the previous secret keeps signing: at once, or one of a few
    overlaps, the relay's default (SECRET_ROTATION_OVERLAP_SECONDS) among
    them and chosen unless changed."""

    overlap_seconds = forms.TypedChoiceField(
        label="When the current secret stops signing",
        coerce=int,
        # Left out (a form posted without it), the relay's default.
        required=False,
        empty_value=None,
        widget=forms.RadioSelect,
    )

    OVERLAPS = (0, 3600, 86400, 2 * 86400, 7 * 86400)

    def __init__(self, *args, now: datetime, default: int, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.default = default
        choices = []
        for seconds in sorted({*self.OVERLAPS, default}):
            marked = " (the default)" if seconds == default else ""
            if seconds == 0:
                label = (
                    f"At once{marked}: only the new secret signs from now on. "
                    "For a leaked secret: a receiver that checks signatures "
                    "refuses every request until it has the new one."
                )
            else:
                until = now + timedelta(seconds=seconds)
                label = (
                    f"After {overlap_words(seconds)}{marked}: both secrets sign "
                    f"until {until:%Y-%m-%d %H:%M} UTC, then only the new one."
                )
            choices.append((seconds, label))
        self.fields["overlap_seconds"].choices = choices
        self.fields["overlap_seconds"].initial = default

    def overlap_asked(self) -> int | None:
        """The overlap to ask the service for; None for the default, which the
        service reads from the setting (whatever the operator made it)."""
        chosen = self.cleaned_data["overlap_seconds"]
        return None if chosen in (None, self.default) else chosen


class ListenStartForm(forms.Form):
    """A listen session started in the portal: which events it gets. The
    service (deliveries.pull.sessions.session_start) checks the types."""

    event_types = forms.CharField(
        label="Event types",
        required=False,
        max_length=2000,
        widget=forms.TextInput(attrs={"placeholder": "order.* payment.captured"}),
        help_text=(
            "Comma or space separated; 'order.*' matches every type that starts "
            "with 'order.'. Empty: every type."
        ),
    )
    description = forms.CharField(
        label="Description",
        required=False,
        max_length=500,
        widget=forms.TextInput(attrs={"placeholder": "e.g. Ana's laptop"}),
        help_text="Tells it apart in the list. Empty: listen session.",
    )

    def event_types_asked(self) -> list[str]:
        return split_types(self.cleaned_data["event_types"])
