"""The endpoint form (create and edit): its fields, the ones folded under
*Advanced*, and the built-in test receiver as a choice beside the URL."""

from __future__ import annotations

import json
import re

from django import forms
from django.conf import settings
from django.core.exceptions import ValidationError

from endpoints.custom_headers import normalised
from endpoints.filtering import MAX_DEPTH
from relayproject.portal.forms import split_types


class EndpointForm(forms.Form):
    url = forms.CharField(
        label="URL",
        max_length=2000,
        help_text="Where we POST events.",
        widget=forms.URLInput(attrs={"placeholder": "https://example.com/webhooks"}),
    )
    test_receiver = forms.BooleanField(
        label="Send to the built-in test receiver instead of a URL",
        required=False,
        help_text=(
            "No receiver yet? The relay's test receiver verifies each signature "
            "and shows what it got; point the endpoint at your own URL later."
        ),
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
        offer_test_receiver: bool = False,
        **kwargs,
    ) -> None:
        super().__init__(*args, **kwargs)
        if offer_test_receiver:
            # Either the URL or the test receiver: clean() asks for one.
            self.fields["url"].required = False
        else:
            del self.fields["test_receiver"]
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

    # Shown folded under "Advanced": most endpoints never set them.
    ADVANCED = (
        "max_attempts",
        "rate_limit_per_second",
        "filter",
        "remove_headers",
        "headers",
        "max_in_flight",
        "permanent_statuses",
        "ordered",
    )

    @property
    def basic_fields(self) -> list:
        return [f for f in self if f.name not in self.ADVANCED]

    @property
    def advanced_fields(self) -> list:
        return [f for f in self if f.name in self.ADVANCED]

    @property
    def advanced_open(self) -> bool:
        """Unfolded when one of them has an error or a value: nothing set or
        wrong is hidden."""
        for field in self.advanced_fields:
            value = field.value()
            if field.errors or (value not in (None, "", [], False)):
                return True
        return False

    def clean(self):
        data = super().clean()
        if "test_receiver" in self.fields:
            if data.get("test_receiver"):
                data["url"] = ""  # the view points it at the receiver
            elif not data.get("url") and "url" not in self.errors:
                self.add_error(
                    "url",
                    "Enter the URL to send to, or tick the built-in test receiver.",
                )
        return data

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
