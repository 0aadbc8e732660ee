"""The Authentication page's form: how an HTTP endpoint proves who is sending
(none, Basic or OAuth2 client credentials) and its client certificate (a PEM
chain and key, or a PKCS#12 file) with an optional CA bundle.

It turns what was typed into the `auth` and `tls` values of CONTRACT section 9
and leaves every check to endpoints/client_credentials.py, whose errors it
puts next to the fields. Secrets are write-only: no widget here renders a
value back, so a typed password, key or PKCS#12 password never reaches the
page again, even when the form is shown again with an error.
"""

from __future__ import annotations

import base64

from django import forms

from endpoints import client_certificates as certificates
from endpoints.client_credentials import BASIC, OAUTH2, UNCHANGED, auth_shown

AUTH_TYPES = [
    ("", "None"),
    (BASIC, "HTTP Basic"),
    (OAUTH2, "OAuth2 client credentials"),
]
AUTH_FIELDS = {
    BASIC: ("username", "password"),
    OAUTH2: ("token_url", "client_id", "client_secret", "scope", "audience"),
}
TLS_FIELDS = ("client_cert", "client_key", "pkcs12", "pkcs12_password", "ca_bundle")
# Where an error of endpoints/client_credentials.py goes: (part, its key) to
# a field of this form; the part's own errors (an empty key) to its first field.
ERROR_FIELDS = {
    ("auth", ""): "auth_type",
    ("auth", "type"): "auth_type",
    ("tls", ""): "client_cert",
    ("tls", "password"): "pkcs12_password",
}
RETYPE = "Not saved: give it again. What was typed here is never sent back to the page."
CHOOSE_AGAIN = "Not saved: choose the file again."


class WriteOnlyTextarea(forms.Textarea):
    """A textarea that never renders a value: what is typed in it may be a key."""

    def format_value(self, value):
        return None


def _secret(label: str, **kwargs) -> forms.CharField:
    # strip=False: spaces at either end of a password are part of it.
    return forms.CharField(
        label=label,
        required=False,
        strip=False,
        widget=forms.PasswordInput(render_value=False, attrs={"autocomplete": "off"}),
        **kwargs,
    )


def _pem(label: str, help_text: str) -> forms.CharField:
    return forms.CharField(
        label=label,
        required=False,
        widget=WriteOnlyTextarea(
            attrs={
                "rows": 4,
                "spellcheck": "false",
                "autocomplete": "off",
                "placeholder": "-----BEGIN …-----",
            }
        ),
        help_text=help_text,
    )


class CredentialsForm(forms.Form):
    auth_type = forms.ChoiceField(
        label="Type",
        choices=AUTH_TYPES,
        required=False,
        widget=forms.RadioSelect,
    )
    username = forms.CharField(label="Username", required=False)
    password = _secret("Password")
    token_url = forms.CharField(
        label="Token URL",
        required=False,
        widget=forms.URLInput(attrs={"placeholder": "https://auth.example.com/token"}),
        help_text="The relay asks it for a token with the client credentials "
        "grant and sends the token as Authorization: Bearer.",
    )
    client_id = forms.CharField(label="Client id", required=False)
    client_secret = _secret("Client secret")
    scope = forms.CharField(
        label="Scope", required=False, help_text="Optional; space separated."
    )
    audience = forms.CharField(label="Audience", required=False, help_text="Optional.")
    client_cert = _pem(
        "Certificate chain (PEM)",
        "The client certificate first, then any intermediates.",
    )
    client_key = _pem("Private key (PEM)", "Unencrypted; stored encrypted.")
    pkcs12 = forms.FileField(
        label="PKCS#12 file (.p12, .pfx)",
        required=False,
        help_text="Instead of the PEM chain and key: certificate, chain and key "
        "in one file.",
    )
    pkcs12_password = _secret("PKCS#12 password", help_text="If the file has one.")
    ca_bundle = _pem(
        "CA bundle (PEM), optional",
        "Your receiver's certificate is checked against these CAs instead of "
        "the public ones, for a receiver with a private CA. Verification is "
        "never turned off.",
    )
    remove_ca_bundle = forms.BooleanField(
        label="Remove the CA bundle: check the receiver against the public CAs",
        required=False,
    )

    def __init__(self, *args, endpoint, **kwargs) -> None:
        self.endpoint = endpoint
        shown = auth_shown(endpoint) or {}
        initial = {"auth_type": shown.get("type", "")}
        initial |= {k: v for k, v in shown.items() if k != "type" and v}
        super().__init__(*args, initial=initial, **kwargs)
        stored_type = endpoint.auth_type
        if stored_type == BASIC:
            self.fields[
                "password"
            ].help_text = "A password is set; leave empty to keep it."
        elif stored_type == OAUTH2:
            self.fields["client_secret"].help_text = (
                "A client secret is set; leave empty to keep it while the token "
                "URL stays the same."
            )
        if not endpoint.tls_ca_bundle:
            del self.fields["remove_ca_bundle"]
        else:
            self.fields[
                "ca_bundle"
            ].help_text += (
                " One is set: paste another to replace it, or leave empty to keep it."
            )
        if self.is_bound:
            # Shown again only when not saved: a typed secret must be typed again.
            for name in ("password", "client_secret", "pkcs12_password", *TLS_FIELDS):
                typed = self.data.get(name) or self.files.get(name)
                if typed and name in self.fields:
                    self.fields[name].help_text = (
                        CHOOSE_AGAIN if name in self.files else RETYPE
                    )

    @property
    def auth_groups(self) -> list[tuple[str, list]]:
        """The fields of each auth type, for the page to show the chosen one."""
        return [(kind, [self[n] for n in names]) for kind, names in AUTH_FIELDS.items()]

    def clean_pkcs12(self) -> str | None:
        upload = self.cleaned_data.get("pkcs12")
        if not upload:
            return None
        if upload.size > certificates.PKCS12_MAX_BYTES:
            raise forms.ValidationError(
                f"At most {certificates.PKCS12_MAX_BYTES // 1024} KiB."
            )
        return base64.b64encode(upload.read()).decode("ascii")

    def clean(self):
        data = super().clean()
        if data.get("pkcs12_password") and not data.get("pkcs12"):
            self.add_error(
                "pkcs12_password",
                "Choose the PKCS#12 file this password opens; a PEM key is given "
                "unencrypted, without a password.",
            )
        if data.get("remove_ca_bundle") and data.get("ca_bundle"):
            self.add_error(
                "remove_ca_bundle",
                "Paste a new CA bundle or remove the one set, not both.",
            )
        return data

    def auth_value(self):
        """The auth value to set, or UNCHANGED when it says what is stored."""
        data = self.cleaned_data
        auth_type = data["auth_type"]
        if not auth_type:
            return None if self.endpoint.auth_type else UNCHANGED
        secret_name = "password" if auth_type == BASIC else "client_secret"
        value = {"type": auth_type}
        for name in AUTH_FIELDS[auth_type]:
            typed = data.get(name)
            # A secret left empty keeps the stored one; scope and audience
            # are optional. The rest is given even when empty ("Required").
            if typed or name not in (secret_name, "scope", "audience"):
                value[name] = typed
        if secret_name not in value and value == self._shown_auth():
            return UNCHANGED
        return value

    def _shown_auth(self) -> dict:
        shown = auth_shown(self.endpoint) or {}
        return {k: v for k, v in shown.items() if v}

    def tls_value(self):
        """The tls value to set (replaced whole: what is not given again is
        taken from what is stored), or UNCHANGED when nothing was given."""
        data = self.cleaned_data
        stored = self.endpoint
        identity_given = any(
            data.get(n) for n in ("client_cert", "client_key", "pkcs12")
        )
        given = {n: data.get(n) for n in TLS_FIELDS if data.get(n)}
        if not given and not data.get("remove_ca_bundle"):
            return UNCHANGED
        value: dict[str, str] = {}
        if identity_given:
            for name in ("client_cert", "client_key", "pkcs12"):
                if name in given:
                    value[name] = given[name]
            if "pkcs12_password" in given:
                value["password"] = given["pkcs12_password"]
        elif stored.tls_client_cert:
            # The stored pair, kept together: only the CA bundle changes.
            value["client_cert"] = stored.tls_client_cert
            value["client_key"] = stored.tls_client_key
        if "ca_bundle" in given:
            value["ca_bundle"] = given["ca_bundle"]
        elif stored.tls_ca_bundle and not data.get("remove_ca_bundle"):
            value["ca_bundle"] = stored.tls_ca_bundle
        return value or None

    def add_credentials_errors(self, errors: dict[str, list[str]]) -> None:
        """Errors keyed as the services nest them ("auth.token_url") next to
        their fields; one no field owns goes above the form."""
        for key, messages in errors.items():
            part, _, name = key.partition(".")
            field = ERROR_FIELDS.get((part, name), name)
            for message in messages:
                self.add_error(field if field in self.fields else None, message)


class RemoveForm(forms.Form):
    """The Remove buttons: which part goes."""

    remove = forms.ChoiceField(choices=[("auth", "auth"), ("tls", "tls")])
