"""Portal forms. Field checks beyond types live in the services; views copy their
message_dict onto the matching fields."""

from __future__ import annotations

import json
import re

from django import forms
from django.conf import settings
from django.core.exceptions import ValidationError

from endpoints.custom_headers import normalised
from endpoints.filtering import MAX_DEPTH
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


def split_types(value: str) -> list[str]:
    return [t for t in re.split(r"[\s,]+", value or "") if t]


class EndpointForm(forms.Form):
    url = forms.CharField(
        label="URL",
        max_length=2000,
        help_text="Where we POST events.",
        widget=forms.URLInput(attrs={"placeholder": "https://example.com/webhooks"}),
    )
    description = forms.CharField(required=False, max_length=500)
    known_event_types = forms.MultipleChoiceField(
        label="Event types",
        required=False,
        widget=forms.CheckboxSelectMultiple,
    )
    event_types = forms.CharField(
        label="Other event types or patterns",
        required=False,
        help_text=(
            "Comma or space separated; 'payment.*' matches every type that starts "
            "with 'payment.'. Leave empty to receive every type."
        ),
    )
    max_attempts = forms.IntegerField(
        required=False,
        help_text="Empty: the relay's default.",
    )
    rate_limit_per_second = forms.FloatField(
        label="Rate limit (per second)", required=False, help_text="Empty: no limit."
    )
    filter = forms.CharField(
        label="Payload filter (JSON)",
        required=False,
        widget=forms.Textarea(
            attrs={"rows": 4, "placeholder": '{"data": {"amount": {"$gte": 100}}}'}
        ),
        help_text=(
            "Only events that match are sent. Empty: every subscribed event. "
            "Operators: $eq $ne $in $nin $exists $gt $gte $lt $lte $and $or $not."
        ),
    )
    remove_headers = forms.MultipleChoiceField(
        label="Custom headers set",
        required=False,
        widget=forms.CheckboxSelectMultiple,
        help_text=(
            "Values are never shown again once saved. Tick a header to remove "
            "it; the others keep their values."
        ),
    )
    headers = forms.CharField(
        label="Custom headers",
        required=False,
        widget=forms.Textarea(
            attrs={"rows": 3, "placeholder": "Authorization: Bearer …"}
        ),
        help_text="One 'Name: value' per line, up to 20; sent with every request.",
    )
    max_in_flight = forms.IntegerField(
        label="Sent at once, at most",
        required=False,
        help_text=(
            "Requests sent at once to this endpoint. Empty: the relay's default."
        ),
    )

    permanent_statuses = forms.CharField(
        label="Stop retrying on",
        required=False,
        widget=forms.TextInput(attrs={"placeholder": "e.g. 400, 422"}),
        help_text=(
            "HTTP statuses that end a delivery at once, comma separated. Empty: "
            "every answer that is not 2xx is retried; 410 Gone always stops and "
            "disables the endpoint."
        ),
    )
    ordered = forms.BooleanField(
        label="Ordered: events with the same ordering key, one at a time",
        required=False,
        help_text=(
            "Events that share an ordering_key are sent in publish order, each "
            "after the previous one succeeded or went dead (a dead one does not "
            "block the rest). Applies to events published from now on."
        ),
    )

    def __init__(
        self,
        *args,
        seen_types: list[str],
        existing_headers: dict[str, str] | None = None,
        **kwargs,
    ) -> None:
        super().__init__(*args, **kwargs)
        # Header values are write-only: the form knows them to keep them, and
        # only names ever reach the page.
        self.existing_headers = dict(existing_headers or {})
        if self.existing_headers:
            self.fields["remove_headers"].choices = [
                (name, f"{name}: value set") for name in self.existing_headers
            ]
            self.fields["headers"].label = "Add or replace custom headers"
            self.fields["headers"].help_text = (
                "One 'Name: value' per line; a header set above keeps its value "
                "unless written here again. Up to 20 in all."
            )
        else:
            del self.fields["remove_headers"]
        # The defaults and the policy as they are now, not at import time.
        if not settings.RELAY_ALLOW_PRIVATE_DESTINATIONS:
            self.fields["url"].help_text = (
                "Where we POST events. Addresses on private networks (loopback, "
                "10.x, 192.168.x, cloud metadata) are refused."
            )
        self.fields[
            "max_attempts"
        ].help_text = f"Empty: the relay's default, {settings.MAX_ATTEMPTS}."
        self.fields["max_in_flight"].help_text = (
            "Requests sent at once to this endpoint. Empty: the relay's default, "
            f"{settings.ENDPOINT_MAX_IN_FLIGHT}."
        )
        self.fields["known_event_types"].choices = [(t, t) for t in seen_types]
        if seen_types:
            self.fields["event_types"].help_text = (
                "Comma or space separated; 'payment.*' matches every type that "
                "starts with 'payment.'. Pick nothing here or in the list above "
                "to receive every type."
            )
        else:
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
            "filter": json.dumps(endpoint.filter, indent=2) if endpoint.filter else "",
            "max_in_flight": endpoint.max_in_flight,
            "permanent_statuses": ", ".join(
                str(s) for s in endpoint.permanent_statuses or ()
            ),
            "ordered": endpoint.ordered,
        }

    def clean_filter(self):
        text = self.cleaned_data["filter"].strip()
        if not text:
            return None
        try:
            return json.loads(text)
        except ValueError as exc:
            raise ValidationError(f"Not JSON: {exc}.") from None
        except RecursionError:
            raise ValidationError(
                f"A filter nests at most {MAX_DEPTH} fields deep."
            ) from None

    def clean_permanent_statuses(self):
        statuses = []
        for word in self.cleaned_data["permanent_statuses"].replace(",", " ").split():
            if not word.isascii() or not word.isdigit():
                raise ValidationError(f"Not a status code: {word!r}.")
            statuses.append(int(word))
        return statuses

    def clean_headers(self):
        headers: dict[str, str] = {}
        # Only CR/LF end a line: splitlines() would also split on \x85 or
        # \u2028, hiding a character the value check must name.
        lines = re.split(r"\r\n|\r|\n", self.cleaned_data["headers"])
        for number, line in enumerate(lines, 1):
            if not line.strip():
                continue
            name, colon, value = line.partition(":")
            if not colon:
                raise ValidationError(f"Line {number}: write it as 'Name: value'.")
            if name.strip() in headers:
                raise ValidationError(f"Line {number}: {name.strip()} is given twice.")
            headers[name.strip()] = value.strip()
        return headers

    def _headers_kept_and_written(self) -> dict[str, str]:
        """The headers set before, less those ticked for removal or written
        again (names ignore case), then the ones written."""
        written = self.cleaned_data["headers"]
        dropped = set(self.cleaned_data.get("remove_headers") or [])
        replaced = {normalised(name) for name in written}
        kept = {
            name: value
            for name, value in self.existing_headers.items()
            if name not in dropped and normalised(name) not in replaced
        }
        return {**kept, **written}

    def service_kwargs(self) -> dict:
        data = self.cleaned_data
        return {
            "url": data["url"],
            "description": data["description"],
            "event_types": list(data["known_event_types"])
            + split_types(data["event_types"]),
            "max_attempts": data["max_attempts"],
            "rate_limit_per_second": data["rate_limit_per_second"],
            "filter": data["filter"],
            "headers": self._headers_kept_and_written(),
            "max_in_flight": data["max_in_flight"],
            "permanent_statuses": data["permanent_statuses"],
            "ordered": data["ordered"],
        }

    def add_service_errors(self, error: ValidationError) -> None:
        for field, messages in error.message_dict.items():
            target = field if field in self.fields else None
            for message in messages:
                self.add_error(target, message)


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
    since = forms.DateTimeField(
        label="Failed since (UTC)",
        widget=forms.DateTimeInput(attrs={"type": "datetime-local"}),
    )
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
