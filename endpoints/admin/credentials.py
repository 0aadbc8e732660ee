"""The endpoint page's auth and client certificate: shown without secrets,
set by staff through write-only fields (endpoints/client_credentials.py
checks them, as for the API; each error sits beside its field).

The form's fields are named apart from the model's (set_*, upload_*), so the
admin never copies one onto the row: the change goes through
services.endpoint_update, which writes only the credential columns.
"""

from __future__ import annotations

import base64
from datetime import timedelta

from django import forms
from django.contrib import admin
from django.utils.html import format_html

from endpoints import brokers, client_certificates, client_credentials, services
from endpoints.models import Endpoint
from relayproject.lib.clock import utcnow

AUTH_CHOICES = (
    ("", "none"),
    ("basic", "HTTP Basic"),
    ("oauth2", "OAuth2 client credentials"),
)
_AUTH_PARTS = ("username", "token_url", "client_id", "scope", "audience")
AUTH_FIELDS = (
    "set_auth_type",
    *(f"set_{part}" for part in _AUTH_PARTS[:1]),
    "set_password",
    *(f"set_{part}" for part in _AUTH_PARTS[1:3]),
    "set_client_secret",
    *(f"set_{part}" for part in _AUTH_PARTS[3:]),
)
TLS_FIELDS = (
    "upload_client_cert",
    "upload_client_key",
    "upload_pkcs12",
    "pkcs12_password",
    "remove_client_cert",
    "upload_ca_bundle",
    "remove_ca_bundle",
)
FORM_FIELDS = (*AUTH_FIELDS, *TLS_FIELDS)
SHOWN = ("client_auth", "client_certificate")
# Where an error of endpoints/client_credentials.py is shown on this form.
_ERROR_FIELDS = {
    "auth": "set_auth_type",
    "headers": "set_auth_type",
    "auth.type": "set_auth_type",
    **{f"auth.{part}": f"set_{part}" for part in _AUTH_PARTS},
    "auth.password": "set_password",
    "auth.client_secret": "set_client_secret",
    "tls.client_cert": "upload_client_cert",
    "tls.client_key": "upload_client_key",
    "tls.pkcs12": "upload_pkcs12",
    "tls.password": "pkcs12_password",
    "tls.ca_bundle": "upload_ca_bundle",
}
_LIMITS = {
    "upload_client_cert": client_certificates.CHAIN_MAX_BYTES,
    "upload_client_key": client_certificates.KEY_MAX_BYTES,
    "upload_pkcs12": client_certificates.PKCS12_MAX_BYTES,
    "upload_ca_bundle": client_certificates.BUNDLE_MAX_BYTES,
}
_SECRET = forms.PasswordInput(render_value=False)  # never sent back to the page
# The page is shown again only when nothing was saved (a save redirects), and a
# browser sends neither a typed secret nor a chosen file back: say so there.
RETYPE = "Not saved: type it again (what was typed is never sent back to the page)."
CHOOSE_AGAIN = "Not saved: choose the file again."


class EndpointCredentialsForm(forms.ModelForm):
    """Auth and client certificate, write-only. A secret left blank keeps the
    stored one (same type; for OAuth2 the same token URL). The certificate and
    key, and the CA bundle, are replaced apart: what is not uploaded or
    removed stays."""

    set_auth_type = forms.ChoiceField(
        label="Set auth type",
        choices=AUTH_CHOICES,
        required=False,
        help_text="Only the fields of the type chosen are used; none removes the auth.",
    )
    set_username = forms.CharField(label="Basic username", required=False)
    set_password = forms.CharField(
        label="Basic password",
        required=False,
        widget=_SECRET,
        help_text="Write-only; blank keeps the stored one.",
    )
    set_token_url = forms.CharField(
        label="OAuth2 token URL",
        required=False,
        # The admin's wide text box: a token URL is longer than the default one.
        widget=forms.TextInput(attrs={"class": "vTextField"}),
        help_text="The relay asks it for a token with the client credentials "
        "grant and sends the token as Authorization: Bearer.",
    )
    set_client_id = forms.CharField(label="OAuth2 client id", required=False)
    set_client_secret = forms.CharField(
        label="OAuth2 client secret",
        required=False,
        widget=_SECRET,
        help_text="Write-only; blank keeps the stored one for the same token URL.",
    )
    set_scope = forms.CharField(
        label="OAuth2 scope", required=False, help_text="Optional; space separated."
    )
    set_audience = forms.CharField(
        label="OAuth2 audience", required=False, help_text="Optional."
    )
    upload_client_cert = forms.FileField(
        label="Client certificate chain (PEM)",
        required=False,
        help_text="For a receiver that asks for a client certificate (mutual "
        "TLS): the certificate first, then any intermediates. Upload its key "
        "with it.",
    )
    upload_client_key = forms.FileField(
        label="Client private key (PEM)",
        required=False,
        help_text="Unencrypted (no passphrase). Write-only: stored encrypted, "
        "never shown.",
    )
    upload_pkcs12 = forms.FileField(
        label="Or a PKCS#12 file (.p12, .pfx)",
        required=False,
        help_text="Instead of the chain and key: certificate, chain and key in "
        "one file.",
    )
    pkcs12_password = forms.CharField(
        label="PKCS#12 password",
        required=False,
        widget=_SECRET,
        help_text="If the file has one; it opens the file and is not stored.",
    )
    remove_client_cert = forms.BooleanField(
        label="Remove the client certificate and its key", required=False
    )
    upload_ca_bundle = forms.FileField(
        label="CA bundle (PEM)",
        required=False,
        help_text="For a receiver with a private CA: its certificate is checked "
        "against these CAs instead of the system's.",
    )
    remove_ca_bundle = forms.BooleanField(
        label="Remove the CA bundle",
        required=False,
        help_text="The receiver is then checked against the system's CAs.",
    )

    class Meta:
        model = Endpoint
        fields = ()

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        stored = self.instance.auth_settings or {}
        self.fields["set_auth_type"].initial = self.instance.auth_type
        for part in _AUTH_PARTS:
            self.fields[f"set_{part}"].initial = stored.get(part, "")
        self.auth = client_credentials.UNCHANGED
        self.tls = client_credentials.UNCHANGED
        # "Blank keeps the stored one" is true only where one is stored.
        if self.instance.auth_type != "basic":
            self.fields["set_password"].help_text = "Write-only."
        if self.instance.auth_type != "oauth2":
            self.fields["set_client_secret"].help_text = "Write-only."
        for name in ("set_password", "set_client_secret", "pkcs12_password"):
            if self.is_bound and self.data.get(name):
                self.fields[name].help_text = RETYPE
        for name in _LIMITS:
            if self.is_bound and self.files.get(name):
                self.fields[name].help_text = CHOOSE_AGAIN

    def clean(self):
        cleaned = super().clean()
        if self.errors:
            return cleaned
        if any(name in self.changed_data for name in AUTH_FIELDS):
            self.auth = self._auth_given(cleaned)
        if any(name in self.changed_data for name in TLS_FIELDS):
            self.tls = self._tls_given(cleaned)
        if self.errors or (self.auth, self.tls) == (client_credentials.UNCHANGED,) * 2:
            return cleaned
        _, errors = client_credentials.credentials_clean(
            endpoint=self.instance,
            kind=self.instance.kind,
            headers=self.instance.headers,
            auth=self.auth,
            tls=self.tls,
        )
        for key, messages in errors.items():
            self.add_error(_ERROR_FIELDS.get(key), messages)
        return cleaned

    def _auth_given(self, cleaned: dict) -> dict | None:
        auth_type = cleaned.get("set_auth_type")
        if not auth_type:
            return None
        parts = ("username", "password")
        if auth_type == "oauth2":
            parts = ("token_url", "client_id", "client_secret", "scope", "audience")
        given = {part: cleaned.get(f"set_{part}") for part in parts}
        # A blank secret is left out: the stored one is kept where it may be.
        return {"type": auth_type} | {k: v for k, v in given.items() if v}

    def _tls_given(self, cleaned: dict) -> dict:
        text = {name: self._upload(cleaned, name) for name in _LIMITS}
        if self.errors:
            return {}
        endpoint = self.instance
        value: dict = {}
        if text["upload_pkcs12"] is not None:
            value["pkcs12"] = text["upload_pkcs12"]
            value["password"] = cleaned.get("pkcs12_password") or None
        if text["upload_client_cert"] is not None or text["upload_client_key"]:
            value["client_cert"] = text["upload_client_cert"]
            value["client_key"] = text["upload_client_key"]
        if not value and not cleaned.get("remove_client_cert"):
            if endpoint.tls_client_cert:  # kept: sent again, never shown
                value |= {
                    "client_cert": endpoint.tls_client_cert,
                    "client_key": endpoint.tls_client_key,
                }
        if text["upload_ca_bundle"] is not None:
            value["ca_bundle"] = text["upload_ca_bundle"]
        elif endpoint.tls_ca_bundle and not cleaned.get("remove_ca_bundle"):
            value["ca_bundle"] = endpoint.tls_ca_bundle
        return value

    def _upload(self, cleaned: dict, name: str) -> str | None:
        """An uploaded file's text (a PKCS#12 file's base64), read no further
        than its limit; None when none was uploaded."""
        upload = cleaned.get(name)
        if not upload:
            return None
        data = upload.read(_LIMITS[name] + 1)
        if len(data) > _LIMITS[name]:
            self.add_error(name, f"At most {_LIMITS[name] // 1024} KiB.")
            return None
        if name == "upload_pkcs12":
            return base64.b64encode(data).decode("ascii")
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError:
            self.add_error(name, "Not PEM text: upload the .pem file.")
            return None


class CredentialsOnPage:
    """A ModelAdmin mixin: the endpoint page's auth and certificate section."""

    form = EndpointCredentialsForm

    def credentials_fieldset(self, request, endpoint: Endpoint | None) -> tuple:
        editable = (
            endpoint is not None
            and endpoint.kind == brokers.HTTP
            and self.has_change_permission(request, endpoint)
        )
        fields = FORM_FIELDS if editable else ()
        # A box that removes nothing would only raise the question what it does.
        if endpoint is not None and not endpoint.tls_client_cert:
            fields = tuple(name for name in fields if name != "remove_client_cert")
        if endpoint is not None and not endpoint.tls_ca_bundle:
            fields = tuple(name for name in fields if name != "remove_ca_bundle")
        return (
            "Auth and client certificate (HTTP endpoints; secrets are write-only)",
            {"fields": (*SHOWN, *fields)},
        )

    def save_model(self, request, obj, form, change) -> None:
        # Every other field of this page is read-only: only credentials change.
        if (form.auth, form.tls) == (client_credentials.UNCHANGED,) * 2:
            return
        changes = {
            name: value
            for name, value in (("auth", form.auth), ("tls", form.tls))
            if value is not client_credentials.UNCHANGED
        }
        services.endpoint_update(
            endpoint=obj,
            **changes,
            by=f"staff:{request.user.get_username()}",
            now=utcnow(),
        )

    @admin.display(description="auth in use")
    def client_auth(self, endpoint: Endpoint) -> str:
        shown = client_credentials.auth_shown(endpoint)
        if shown is None:
            return "none"
        if shown["type"] == "basic":
            return format_html(
                "HTTP Basic as {} (password set, write-only)", shown["username"]
            )
        return format_html(
            "OAuth2 client credentials: token URL {}, client id {}, scope {}, "
            "audience {} (client secret set, write-only)",
            shown["token_url"],
            shown["client_id"],
            shown["scope"] or "none",
            shown["audience"] or "none",
        )

    @admin.display(description="client certificate in use")
    def client_certificate(self, endpoint: Endpoint) -> str:
        now = utcnow()
        shown = client_credentials.tls_shown(endpoint, now=now)
        if shown is None:
            return "none; the receiver is checked against the system's CAs"
        bundle = "its own CA bundle" if shown["ca_bundle"] else "the system's CAs"
        if shown["subject"] is None:
            return f"none; the receiver is checked against {bundle}"
        state = (
            "EXPIRED: receivers that check it refuse the handshake"
            if shown["expired"]
            else f"EXPIRING {_time_left(shown['not_after'] - now)}: upload a new "
            "one before then"
            if shown["expires_soon"]
            else "valid"
        )
        return format_html(
            "{} (key set, write-only); expires {} UTC, {}; the receiver is "
            "checked against {}",
            shown["subject"],
            shown["not_after"].strftime("%Y-%m-%d %H:%M"),
            state,
            bundle,
        )


def _time_left(left: timedelta) -> str:
    if left < timedelta(days=1):
        return "in less than a day"
    days = round(left / timedelta(days=1))
    return f"in about {days} day{'s' if days != 1 else ''}"
