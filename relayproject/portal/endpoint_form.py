"""The endpoint form (create and edit): its fields, the ones folded under
*Advanced*, the built-in test receiver as a choice beside the URL, and the
destination kinds (endpoint_kinds.py): a picker on the create form, and the
fields of each kind, of which only the chosen kind's are read (a pull
endpoint's: its visibility timeout, and none of those that shape a send)."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence

from django import forms
from django.conf import settings
from django.core.exceptions import ValidationError

from endpoints import brokers, signing_default, signing_keys
from endpoints.custom_headers import normalised
from endpoints.filtering import MAX_DEPTH
from relayproject.portal import endpoint_kinds, pull_fields, retry_fields
from relayproject.portal.endpoint_form_layout import EndpointFormLayout
from relayproject.portal.forms import split_types


class EndpointForm(EndpointFormLayout, forms.Form):
    kind = forms.ChoiceField(
        label="Send events to",
        required=False,
        widget=forms.RadioSelect,
        error_messages={"invalid_choice": "This kind of destination is not offered."},
    )
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
        widget=forms.Textarea(attrs={"rows": 3, "placeholder": "X-Api-Key: …"}),
        help_text=(
            "One 'Name: value' per line, up to 20; sent with every delivery. "
            "For Basic or OAuth2 use the endpoint's Authentication tab."
        ),
    )
    max_in_flight = forms.IntegerField(
        label="Sent at once, at most",
        required=False,
        help_text=(
            "Deliveries sent at once to this endpoint. Empty: the relay's default."
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
    signing = forms.ChoiceField(
        label="Signatures",
        choices=[(s, signing_keys.SCHEME_LABELS[s]) for s in signing_keys.SCHEMES],
        initial=signing_keys.V1,
        required=False,  # a form posted without it keeps what the endpoint has
        help_text="v1a needs no shared secret: your receiver checks it with the "
        "endpoint's public key, shown on its page and in the merchant's key set.",
    )

    def __init__(
        self,
        *args,
        seen_types: list[str],
        existing_headers: dict[str, str] | None = None,
        offer_test_receiver: bool = False,
        kinds: Sequence[str] = (brokers.HTTP,),
        kind: str = brokers.HTTP,
        merchant=None,
        stored_user: str | None = None,
        password_set: bool = False,
        **kwargs,
    ) -> None:
        """kinds: those the picker offers (the endpoint's own alone on an edit);
        kind: the one whose fields are shown and read; stored_user and
        password_set: what an edited broker endpoint has (None: no credentials)."""
        super().__init__(*args, **kwargs)
        self.kinds = list(kinds)
        self.kind_chosen = kind
        self.stored_user = stored_user
        self.password_set = password_set
        if len(self.kinds) > 1:
            self.fields["kind"].choices = [
                (k, brokers.KIND_LABELS[k]) for k in self.kinds
            ]
        else:
            del self.fields["kind"]
        if brokers.HTTP not in self.kinds:
            for name in endpoint_kinds.kind_fields(brokers.HTTP):
                del self.fields[name]
        self.fields.update(
            endpoint_kinds.form_fields(kinds=self.kinds, chosen=kind, merchant=merchant)
        )
        self.fields.update(retry_fields.form_fields(merchant))
        if self.pull_only:
            for name in pull_fields.SEND_FIELDS:
                del self.fields[name]
            self.fields["ordered"].help_text = pull_fields.PULL_ORDER_HELP
        if merchant is not None:
            # A new endpoint shows the scheme it takes if left alone (an edit's
            # initial is the endpoint's own, from initial_for).
            scheme = signing_default.scheme_for_new_endpoint(merchant)
            self.fields["signing"].initial = scheme
            self.fields["signing"].help_text += (
                f" New endpoints sign with {scheme} unless another is picked: "
                f"{signing_default.default_source(merchant)}."
            )
        if password_set:
            self.fields["broker_password"].help_text = (
                "A password is set; leave empty to keep it. It is kept while the "
                "broker's scheme, host and port stay the same: another broker "
                "needs it typed again."
            )
        if self.is_bound and self.data.get("broker_password"):
            # A bound form is shown again only when it was not saved.
            self.fields["broker_password"].help_text = (
                "Not saved: type the password again. A typed password is never "
                "sent back to the page."
            )
        if offer_test_receiver and "url" in self.fields:
            # Either the URL or the test receiver: clean() asks for one.
            self.fields["url"].required = False
        else:
            self.fields.pop("test_receiver", None)
        # Header values are write-only: the form knows them to keep them, and
        # only names ever reach the page.
        self.existing_headers = dict(existing_headers or {})
        if "headers" not in self.fields:
            pass  # a pull endpoint's form: nothing of a send
        elif self.existing_headers:
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
        if "headers" in self.fields and any(
            k in brokers.BROKER_KINDS for k in self.kinds
        ):
            self.fields[
                "headers"
            ].help_text += " A broker gets them as message headers."
        # The defaults and the policy as they are now, not at import time.
        if "url" in self.fields and not settings.RELAY_ALLOW_PRIVATE_DESTINATIONS:
            self.fields["url"].help_text = (
                "Where we POST events. Addresses on private networks (loopback, "
                "10.x, 192.168.x, cloud metadata) are refused."
            )
        if "max_in_flight" in self.fields:
            self.fields["max_in_flight"].help_text = (
                "Deliveries sent at once to this endpoint. Empty: the relay's "
                f"default, {settings.ENDPOINT_MAX_IN_FLIGHT}."
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
            **retry_fields.initial_for(endpoint),
            "rate_limit_per_second": endpoint.rate_limit_per_second,
            "filter": json.dumps(endpoint.filter, indent=2) if endpoint.filter else "",
            "max_in_flight": endpoint.max_in_flight,
            "permanent_statuses": ", ".join(
                str(s) for s in endpoint.permanent_statuses or ()
            ),
            "ordered": endpoint.ordered,
            "signing": endpoint.signing,
            **endpoint_kinds.initial_for(endpoint),
        }

    @classmethod
    def picked(cls, data, **kwargs) -> EndpointForm:
        """The form as typed, unbound so no error shows yet: after the kind
        picker's own button (no script), with the picked kind's fields."""
        bound = cls(data, **kwargs)
        initial = {
            name: field.widget.value_from_datadict(data, {}, bound.add_prefix(name))
            for name, field in bound.fields.items()
            if name != "broker_password"
        }
        return cls(initial=initial, **kwargs)

    def clean(self):
        data = super().clean()
        # The other kinds' fields are on the page for the picker's script
        # only: what they hold is neither checked nor read.
        mine = self._fields_of(self.kind_chosen)
        for name in self._of_some_kinds - mine - {"kind"}:
            self.errors.pop(name, None)
            data.pop(name, None)
        if self.kind_chosen in brokers.BROKER_KINDS:
            for name, message in endpoint_kinds.broker_errors(
                data, stored_user=self.stored_user, password_set=self.password_set
            ).items():
                if name not in self.errors:
                    self.add_error(name, message)
        elif "test_receiver" in self.fields:
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
        kind = self.kind_chosen
        if kind == brokers.PULL:
            return {
                **pull_fields.pull_kwargs(data),
                **self._common_kwargs(),
            }
        if kind == brokers.HTTP:
            destination = {
                "url": data["url"],
                "permanent_statuses": data["permanent_statuses"],
            }
        else:
            destination = endpoint_kinds.broker_kwargs(
                kind, data, stored_user=self.stored_user
            )
        return {
            **destination,
            **self._common_kwargs(),
            "rate_limit_per_second": data["rate_limit_per_second"],
            "headers": self._headers_kept_and_written(),
            "max_in_flight": data["max_in_flight"],
        }

    def _common_kwargs(self) -> dict:
        """What every kind takes (the retry fields a pull endpoint has: all
        but the timeout, which the form dropped for it)."""
        data = self.cleaned_data
        return {
            "description": data["description"],
            "event_types": list(data["known_event_types"])
            + split_types(data["event_types"]),
            **retry_fields.service_kwargs(self),
            "filter": data["filter"],
            "ordered": data["ordered"],
            **({"signing": data["signing"]} if data["signing"] else {}),
        }

    def add_service_errors(self, error: ValidationError) -> None:
        for key, messages in error.message_dict.items():
            name = endpoint_kinds.field_of_error(key, kind=self.kind_chosen)
            for message in messages:
                self.add_error(name if name in self.fields else None, message)
