"""The notifications page's form: which emails, and (owners only) to whom else."""

from __future__ import annotations

import re

from django import forms
from django.core.exceptions import ValidationError

ONLY_OWNERS = "Only the merchant's owners can add or remove addresses."


class _Withheld(forms.HiddenInput):
    """A field a role may not use: rendered without a value, even the one it posted."""

    def format_value(self, value) -> None:
        return None


class NotificationsForm(forms.Form):
    email_failing = forms.BooleanField(
        required=False,
        label="Email when an endpoint starts failing",
        help_text="The relay paused it after failures in a row, or it has not "
        "succeeded for half, then 90%, of the time after which it is disabled.",
    )
    email_disabled = forms.BooleanField(
        required=False, label="Email when an endpoint is disabled"
    )
    email_enabled = forms.BooleanField(
        required=False, label="Email when an endpoint is enabled again"
    )
    extra_emails = forms.CharField(
        required=False,
        label="Also send to",
        widget=forms.Textarea(attrs={"rows": 3, "placeholder": "ops@example.com"}),
        help_text="One address per line, besides the merchant's owners (at most "
        "10). Each new one is sent a confirmation and gets nothing else until "
        "it is confirmed.",
    )

    def __init__(self, *args, owner: bool, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.owner = owner
        if not owner:
            # Others neither see the list nor change it: the field stays only
            # so that a value posted anyway is refused beside it.
            self.fields["extra_emails"].widget = _Withheld()

    def clean_extra_emails(self) -> str:
        value = self.cleaned_data["extra_emails"] or ""
        if not self.owner and value.strip():
            raise ValidationError(ONLY_OWNERS)
        return value

    def service_kwargs(self) -> dict:
        """For the service: extra_emails is None (unchanged) unless an owner posts."""
        data = dict(self.cleaned_data)
        data["extra_emails"] = (
            [a for a in re.split(r"[\s,;]+", data["extra_emails"]) if a]
            if self.owner
            else None
        )
        return data


class AddressAskForm(forms.Form):
    """An owner's "send the confirmation again" for one listed address."""

    ask = forms.EmailField()
