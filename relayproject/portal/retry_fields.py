"""The endpoint form's retry policy: max attempts, the schedule of delays and
the per-attempt timeout (issue 42 item 6). The form only parses what was
typed; the operator's bounds are checked by the service
(endpoints/retry_policy.py), whose errors name the bound and land next to
these fields because they share the service's names."""

from __future__ import annotations

import math

from django import forms
from django.conf import settings
from django.core.exceptions import ValidationError

from endpoints.retry_policy import FIELDS, MAX_SCHEDULE_LENGTH


class ScheduleField(forms.CharField):
    """ "5, 30, 300" -> [5.0, 30.0, 300.0]; empty -> None (the default backoff)."""

    def to_python(self, value):
        text = super().to_python(value)
        delays = []
        for word in text.replace(",", " ").split():
            try:
                delay = float(word)
            except ValueError:
                delay = math.nan
            # float() also reads "inf" and "nan", which are no delay.
            if not math.isfinite(delay) or delay <= 0:
                raise ValidationError(f"Not a delay in seconds above 0: {word!r}.")
            delays.append(delay)
        if len(delays) > MAX_SCHEDULE_LENGTH:
            raise ValidationError(
                f"At most {MAX_SCHEDULE_LENGTH} delays (the last one repeats)."
            )
        return delays or None


def form_fields(merchant=None) -> dict[str, forms.Field]:
    """The three fields, their help naming the defaults and bounds as they are
    now (settings may change without a restart in tests and on reload)."""
    limit, longest = (
        settings.RETRY_MAX_ATTEMPTS_LIMIT,
        settings.HTTP_TIMEOUT_MAX_SECONDS,
    )
    attempts_default = _default_words(
        getattr(merchant, "max_attempts", None), settings.MAX_ATTEMPTS
    )
    timeout_default = _default_words(
        getattr(merchant, "timeout_seconds", None), settings.HTTP_TIMEOUT_SECONDS
    )
    own_schedule = getattr(merchant, "retry_schedule", None)
    schedule_default = (
        f"your account default ({schedule_text(own_schedule)})"
        if own_schedule
        else "the relay's backoff, longer after each failure"
    )
    return {
        "max_attempts": forms.IntegerField(
            label="Max attempts",
            required=False,
            widget=forms.NumberInput(attrs={"min": 1, "max": limit}),
            help_text=f"From 1 to {limit}. Empty: {attempts_default}.",
        ),
        "retry_schedule": ScheduleField(
            label="Retry schedule (seconds)",
            required=False,
            widget=forms.TextInput(attrs={"placeholder": "e.g. 5, 30, 300, 3600"}),
            help_text=(
                "Waits before each retry, comma separated; the last one repeats "
                "until the attempts run out. All the waits together may span at "
                f"most {duration_words(settings.RETRY_MAX_WINDOW_SECONDS)}. "
                f"Empty: {schedule_default}."
            ),
        ),
        "timeout_seconds": forms.FloatField(
            label="Timeout per attempt (seconds)",
            required=False,
            widget=forms.NumberInput(attrs={"min": 1, "max": longest, "step": "any"}),
            help_text=f"From 1 to {longest:g}. Empty: {timeout_default}.",
        ),
    }


def duration_words(seconds: float) -> str:
    """604800 -> "604800 s (7 days)": the bound's own figure, and one a person reads."""
    for unit, size in (("day", 86400), ("hour", 3600), ("minute", 60)):
        if seconds >= size and seconds % size == 0:
            count = int(seconds // size)
            return f"{seconds:g} s ({count} {unit}{'s' if count > 1 else ''})"
    return f"{seconds:g} s"


def _default_words(merchant_value, relay_value) -> str:
    if merchant_value is not None:
        return f"your account default, {merchant_value:g}"
    return f"the relay's default, {relay_value:g}"


def schedule_text(schedule) -> str:
    return ", ".join(f"{delay:g}" for delay in schedule or ())


def initial_for(endpoint) -> dict:
    return {
        "max_attempts": endpoint.max_attempts,
        "retry_schedule": schedule_text(endpoint.retry_schedule),
        "timeout_seconds": endpoint.timeout_seconds,
    }


def service_kwargs(form: forms.Form) -> dict:
    """The values to save: those posted. A field absent from the post (a
    form from before these fields, a script) keeps what the endpoint has; an
    empty one clears it, back to the default."""
    return {
        name: form.cleaned_data[name]
        for name in FIELDS
        if name in form.data and name in form.cleaned_data
    }
