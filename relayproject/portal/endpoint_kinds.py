"""The endpoint form's destination kinds (endpoints/brokers.py): which kinds
a merchant is offered, the fields each broker kind adds, and how they become
the service's url (with credentials) and target. A pull endpoint has no
destination at all (pull_fields.py).

A broker URL on the form never carries credentials: the URL is shown back on
the edit form, a password never is, so the user and password have fields of
their own and are joined to the URL only on the way to the service.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from urllib.parse import quote

from django import forms

from endpoints import broker_fields, brokers
from relayproject.portal import pull_fields

# Shown under the broker URL, for the kind chosen: the schemes, what a path
# means, and an example.
URL_HELP = {
    brokers.RABBITMQ: (
        "amqp:// or amqps:// (TLS), the virtual host as its path, as in "
        "amqps://mq.example.com/orders; no path: the virtual host /."
    ),
    brokers.NATS: "nats:// or tls:// (TLS), a host and port only.",
    brokers.REDIS: (
        "redis:// or rediss:// (TLS), the database number as its path, as in "
        "rediss://cache.example.com:6380/2; no path: database 0."
    ),
    brokers.MQTT: "mqtt:// or mqtts:// (TLS), a host and port only.",
}
URL_PLACEHOLDER = {
    brokers.RABBITMQ: "amqps://mq.example.com:5671/orders",
    brokers.NATS: "tls://nats.example.com:4222",
    brokers.REDIS: "rediss://cache.example.com:6380/0",
    brokers.MQTT: "mqtts://mqtt.example.com:8883",
}
# The operator's patterns named in the help, up to this many.
HOSTS_SHOWN = 8

CREDENTIAL_FIELDS = ("broker_url", "broker_user", "broker_password")


def offered_kinds(merchant) -> list[str]:
    """HTTP, then the broker kinds the operator offers while a broker host may
    be used (else none could be saved), then pull, which calls nothing and
    so is offered everywhere."""
    if not broker_fields.broker_hosts_in_force(merchant):
        return [brokers.HTTP, brokers.PULL]
    return [brokers.HTTP, *broker_fields.kinds_offered(), brokers.PULL]


def chosen_kind(value: object, offered: Sequence[str]) -> str:
    """The kind asked for when it is offered, else HTTP (the default)."""
    return value if isinstance(value, str) and value in offered else brokers.HTTP


def kind_fields(kind: str) -> tuple[str, ...]:
    """The form fields that only `kind` has."""
    if kind == brokers.HTTP:
        return ("url", "test_receiver", "permanent_statuses")
    if kind == brokers.PULL:
        return ("visibility_timeout_seconds",)
    return (*CREDENTIAL_FIELDS, *brokers.TARGET_FIELDS[kind])


def form_fields(
    *, kinds: Sequence[str], chosen: str, merchant
) -> dict[str, forms.Field]:
    """The fields the broker kinds and pull among `kinds` need (none for HTTP
    alone)."""
    fields: dict[str, forms.Field] = {}
    if brokers.PULL in kinds:
        fields["visibility_timeout_seconds"] = pull_fields.visibility_field()
    shown = [k for k in kinds if k in brokers.BROKER_KINDS]
    if not shown:
        return fields
    hosts = broker_fields.broker_hosts_in_force(merchant)
    allowed = ", ".join(hosts[:HOSTS_SHOWN]) + (
        ", …" if len(hosts) > HOSTS_SHOWN else ""
    )
    url = BrokerURLField(
        label="Broker URL",
        required=False,
        max_length=2000,
        widget=forms.TextInput(
            attrs={
                "placeholder": URL_PLACEHOLDER.get(chosen, URL_PLACEHOLDER[shown[0]]),
                "autocomplete": "off",
                "spellcheck": "false",
                **{f"data-placeholder-{k}": URL_PLACEHOLDER[k] for k in shown},
            }
        ),
    )
    # One help per kind; the template shows the chosen kind's (portal.js
    # swaps them when the picker changes).
    url.kind_helps = [
        (k, f"{URL_HELP[k]} Allowed broker hosts: {allowed}.") for k in shown
    ]
    fields |= {
        "broker_url": url,
        "broker_user": forms.CharField(
            label="User",
            required=False,
            max_length=255,
            strip=False,
            widget=forms.TextInput(
                attrs={"autocomplete": "off", "spellcheck": "false"}
            ),
            help_text="Empty: connect without a user.",
        ),
        "broker_password": forms.CharField(
            label="Password",
            required=False,
            max_length=1024,
            strip=False,
            # Never rendered back; "new-password" keeps the browser from
            # filling in the portal login's saved password.
            widget=forms.PasswordInput(
                render_value=False, attrs={"autocomplete": "new-password"}
            ),
            help_text="Write-only: stored encrypted, never shown again.",
        ),
    }
    for kind in shown:
        fields.update(_target_fields(kind))
    return fields


def _target_fields(kind: str) -> dict[str, forms.Field]:
    def text(label: str, help_text: str, placeholder: str) -> forms.CharField:
        return forms.CharField(
            label=label,
            required=False,
            max_length=brokers.NAME_LIMIT,
            help_text=help_text,
            widget=forms.TextInput(
                attrs={"placeholder": placeholder, "spellcheck": "false"}
            ),
        )

    if kind == brokers.RABBITMQ:
        return {
            "exchange": text(
                "Exchange",
                "Empty: the default exchange, which hands each message to the "
                "queue the routing key names.",
                "orders",
            ),
            "routing_key": text(
                "Routing key",
                "Published mandatory: a message no queue takes is a failed "
                "attempt, never dropped in silence.",
                "order.paid",
            ),
        }
    if kind == brokers.NATS:
        return {
            "subject": text(
                "Subject",
                "A JetStream stream must capture it: a publish counts once "
                "JetStream acknowledges it.",
                "orders.events",
            )
        }
    if kind == brokers.REDIS:
        return {
            "stream": text(
                "Stream key",
                "Each event is added with XADD: the body in field body, the "
                "headers as fields of their own.",
                "orders:events",
            ),
            "maxlen": forms.IntegerField(
                label="Keep about this many entries",
                required=False,
                min_value=1,
                max_value=brokers.MAXLEN_LIMIT,
                help_text=(
                    "Trims the stream with MAXLEN ~, which may keep a few more. "
                    "Empty: never trimmed."
                ),
            ),
        }
    return {
        "topic": text(
            "Topic",
            "Published at QoS 1: a publish counts once the broker answers PUBACK.",
            "shop/orders",
        )
    }


def without_credentials(url: str) -> str:
    """url with whatever sits before an "@" in its host part cut out (a
    user and password), scheme or none; anything else as typed."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        scheme, rest = "", url
    end = min((i for i in map(rest.find, "/?#") if i >= 0), default=len(rest))
    if "@" not in rest[:end]:
        return url
    return scheme + sep + rest[:end].rsplit("@", 1)[1] + rest[end:]


class BrokerURLField(forms.CharField):
    """A broker URL that is shown back without the user and password a
    person may have typed into it (the form refuses them there)."""

    def bound_data(self, data, initial):
        value = super().bound_data(data, initial)
        return without_credentials(value) if isinstance(value, str) else value


def credentials_of(user: str, password: str) -> str:
    """ "user:password" percent-encoded, as a URL carries them ("" for none)."""
    if not password:
        return quote(user, safe="")
    return f"{quote(user, safe='')}:{quote(password, safe='')}"


def target_of(kind: str, data: Mapping[str, object]) -> dict[str, object]:
    """The target the service is given: the kind's fields as typed (a blank
    RabbitMQ exchange is the default exchange; a blank maxlen, no trimming)."""
    target: dict[str, object] = {}
    for name in brokers.TARGET_FIELDS[kind]:
        value = data.get(name)
        if value is None or (value == "" and kind != brokers.RABBITMQ):
            continue
        target[name] = value
    return target


def initial_for(endpoint) -> dict[str, object]:
    """An edited broker endpoint's fields as stored: its clean URL, target and
    user, never its password; a pull endpoint's visibility timeout."""
    if endpoint.kind == brokers.HTTP:
        return {}
    if endpoint.kind == brokers.PULL:
        return {"visibility_timeout_seconds": endpoint.visibility_timeout_seconds}
    initial: dict[str, object] = {"broker_url": endpoint.url, **(endpoint.target or {})}
    if endpoint.broker_credentials:
        user, _ = brokers.credentials_split(endpoint.broker_credentials)
        initial["broker_user"] = user
    return initial


def broker_errors(
    data: Mapping[str, object], *, stored_user: str | None, password_set: bool
) -> dict[str, str]:
    """What the form itself refuses of a broker kind's fields (the service
    judges the rest: the URL's scheme and host, the target)."""
    errors: dict[str, str] = {}
    url = str(data.get("broker_url") or "").strip()
    if not url:
        errors["broker_url"] = "Enter the broker's URL."
    elif without_credentials(url) != url:
        # Said without the URL: it holds a password.
        errors["broker_url"] = (
            "Give the user and password in their own fields below, not in the "
            "URL: a URL is shown again, a password never is."
        )
    user = data.get("broker_user") or ""
    if stored_user is None or data.get("broker_password") or user == stored_user:
        return errors
    if not user:
        # The service keeps stored credentials for a URL without any.
        errors["broker_user"] = (
            "The user and password set stay while the broker does: this form "
            "cannot remove them (a new endpoint can go without)."
        )
    elif password_set:
        errors["broker_password"] = (
            "Type the password again to change the user: the one set is never "
            "sent back to this page."
        )
    return errors


def broker_kwargs(
    kind: str, data: Mapping[str, object], *, stored_user: str | None
) -> dict[str, object]:
    """The service's kind, url and target for a broker kind. With no password
    typed and the same user, the URL goes without credentials, so the service
    keeps the ones set (while the broker's scheme, host and port stay)."""
    url = str(data["broker_url"]).strip()
    user = str(data.get("broker_user") or "")
    password = str(data.get("broker_password") or "")
    keep = stored_user is not None and not password and user == stored_user
    if not keep:
        url = brokers.broker_url_join(url, credentials_of(user, password))
    return {"kind": kind, "url": url, "target": target_of(kind, data)}


def stored_credentials(endpoint) -> tuple[str | None, bool]:
    """(user, whether a password is set) of an endpoint's broker credentials;
    (None, False) when it has none."""
    if not endpoint.broker_credentials:
        return None, False
    user, password = brokers.credentials_split(endpoint.broker_credentials)
    return user, bool(password)


@dataclass(frozen=True)
class KindGroup:
    """Fields only some kinds have, shown while one of `kinds` is chosen."""

    kinds: tuple[str, ...]
    fields: list
    shown: bool
    note: str = ""


def kind_groups(form, *, kinds: Sequence[str], chosen: str) -> list[KindGroup]:
    """The form's fields of each kind, in groups: every offered kind's is on
    the page (portal.js shows the one picked), the chosen kind's shown."""
    groups = []
    if brokers.HTTP in kinds:
        fields = [form[n] for n in ("url", "test_receiver") if n in form.fields]
        groups.append(KindGroup((brokers.HTTP,), fields, chosen == brokers.HTTP))
    on_brokers = tuple(k for k in kinds if k in brokers.BROKER_KINDS)
    if on_brokers:
        fields = [form[n] for n in CREDENTIAL_FIELDS]
        groups.append(KindGroup(on_brokers, fields, chosen in on_brokers))
    for kind in on_brokers:
        fields = [form[n] for n in brokers.TARGET_FIELDS[kind]]
        groups.append(KindGroup((kind,), fields, chosen == kind))
    if brokers.PULL in kinds:
        fields = [form["visibility_timeout_seconds"]]
        groups.append(
            KindGroup(
                (brokers.PULL,), fields, chosen == brokers.PULL, pull_fields.PULL_NOTE
            )
        )
    return groups


def field_of_error(key: str, *, kind: str) -> str:
    """The form field a service error key names: "target.routing_key" is the
    routing key's, a broker kind's "url" the broker URL's."""
    name = key.removeprefix("target.")
    return "broker_url" if name == "url" and kind in brokers.BROKER_KINDS else name
