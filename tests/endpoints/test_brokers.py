"""Broker URLs, targets and the operator's host policy (endpoints/brokers.py):
pure functions, no settings, no database."""

from __future__ import annotations

import pytest

from endpoints import brokers
from endpoints.destinations import DestinationRefused


@pytest.mark.parametrize(
    ("kind", "url", "clean", "port", "tls"),
    [
        (
            "rabbitmq",
            "amqp://mq.example.com",
            "amqp://mq.example.com:5672",
            5672,
            False,
        ),
        (
            "rabbitmq",
            "amqps://MQ.Example.com/v%2Fh",
            "amqps://mq.example.com:5671/v%2Fh",
            5671,
            True,
        ),
        ("nats", "nats://bus.example.com", "nats://bus.example.com:4222", 4222, False),
        (
            "nats",
            "tls://bus.example.com:4443",
            "tls://bus.example.com:4443",
            4443,
            True,
        ),
        (
            "redis",
            "redis://r.example.com/2",
            "redis://r.example.com:6379/2",
            6379,
            False,
        ),
        ("redis", "rediss://r.example.com", "rediss://r.example.com:6379", 6379, True),
        ("mqtt", "mqtt://m.example.com", "mqtt://m.example.com:1883", 1883, False),
        ("mqtt", "mqtts://m.example.com", "mqtts://m.example.com:8883", 8883, True),
        ("rabbitmq", "amqp://[::1]:5673", "amqp://[::1]:5673", 5673, False),
    ],
)
def test_a_broker_url_is_split_into_a_clean_url_and_its_parts(
    kind, url, clean, port, tls
):
    parts = brokers.broker_url_split(kind, url)
    assert (parts.url, parts.port, parts.tls, parts.credentials) == (
        clean,
        port,
        tls,
        "",
    )


def test_credentials_are_split_off_and_never_in_the_clean_url():
    parts = brokers.broker_url_split(
        "rabbitmq", "amqp://app:s%40cr%3At@mq.example.com/prod"
    )
    assert parts.url == "amqp://mq.example.com:5672/prod"
    assert "s%40cr" not in parts.url and "app" not in parts.url
    assert parts.credentials == "app:s%40cr%3At"
    assert brokers.credentials_split(parts.credentials) == ("app", "s@cr:t")
    assert parts.path == "prod"
    assert (
        brokers.broker_url_join(parts.url, parts.credentials)
        == "amqp://app:s%40cr%3At@mq.example.com:5672/prod"
    )
    assert "s%40cr" not in repr(parts)


@pytest.mark.parametrize(
    ("kind", "url", "words"),
    [
        ("rabbitmq", "http://mq.example.com", "amqp://"),
        ("nats", "amqp://mq.example.com", "nats://"),
        ("redis", "redis://r.example.com/db", "database number"),
        ("redis", "redis://r.example.com?db=1", "query"),
        ("nats", "nats://n.example.com/subject", "no path"),
        ("mqtt", "mqtt://", "no host"),
        ("mqtt", "mqtt://m.example.com:0", "port 0"),
        ("mqtt", "mqtt://m.example.com:99999", "not valid"),
        ("rabbitmq", "amqp://mq.example.com\n", "control"),
        ("http", "amqp://mq.example.com", "not a broker kind"),
    ],
)
def test_a_bad_broker_url_is_refused_with_words_and_without_the_url(kind, url, words):
    with pytest.raises(DestinationRefused) as refused:
        brokers.broker_url_split(kind, url.replace("://", "://u:hunter2@", 1))
    assert words in refused.value.reason
    assert "hunter2" not in refused.value.reason


@pytest.mark.parametrize(
    ("kind", "target", "errors"),
    [
        ("rabbitmq", {"exchange": "orders", "routing_key": "paid"}, set()),
        ("rabbitmq", {"exchange": "", "routing_key": "a-queue"}, set()),
        ("rabbitmq", {"exchange": "", "routing_key": ""}, {"routing_key"}),
        ("rabbitmq", {"exchange": "x" * 256, "routing_key": "k"}, {"exchange"}),
        ("rabbitmq", {"exchange": 3, "routing_key": "k"}, {"exchange"}),
        ("nats", {"subject": "orders.paid"}, set()),
        ("nats", {"subject": "orders.*"}, {"subject"}),
        ("nats", {"subject": "orders..paid"}, {"subject"}),
        ("nats", {"subject": "a b"}, {"subject"}),
        ("nats", {}, {"subject"}),
        ("redis", {"stream": "orders", "maxlen": 1000}, set()),
        ("redis", {"stream": "orders", "maxlen": None}, set()),
        ("redis", {"stream": "orders", "maxlen": 0}, {"maxlen"}),
        ("redis", {"stream": "orders", "maxlen": True}, {"maxlen"}),
        ("redis", {"stream": ""}, {"stream"}),
        ("mqtt", {"topic": "shop/orders/paid"}, set()),
        ("mqtt", {"topic": "shop/+/paid"}, {"topic"}),
        ("mqtt", {"topic": "shop/#"}, {"topic"}),
        ("mqtt", {"topic": "a\x00b"}, {"topic"}),
        ("mqtt", {"topic": "t", "subject": "s"}, {"subject"}),
        ("ftp", {}, {"kind"}),
    ],
)
def test_targets_are_checked_field_by_field(kind, target, errors):
    assert set(brokers.target_errors(kind, target)) == errors


def test_a_clean_target_keeps_only_the_kinds_fields():
    assert brokers.target_clean("redis", {"stream": "s", "maxlen": None, "x": 1}) == {
        "stream": "s"
    }
    assert brokers.target_clean("rabbitmq", {"exchange": "", "routing_key": "q"}) == {
        "exchange": "",
        "routing_key": "q",
    }


@pytest.mark.parametrize(
    ("host", "port", "patterns", "allowed"),
    [
        ("mq.example.com", 5672, ["mq.example.com"], True),
        ("mq.example.com", 5672, ["MQ.EXAMPLE.COM."], True),
        ("mq.example.com", 5672, ["mq.example.com:5671"], False),
        ("mq.example.com", 5671, ["mq.example.com:5671"], True),
        ("mq.example.com", 5672, ["mq.example.com:*"], True),
        ("a.bus.example.com", 4222, ["*.bus.example.com"], True),
        ("bus.example.com", 4222, ["*.bus.example.com"], False),
        ("evilbus.example.com", 4222, ["*.bus.example.com"], False),
        ("mq.example.com.evil.net", 5672, ["mq.example.com"], False),
        ("127.0.0.1", 5672, ["127.0.0.1"], True),
        ("127.0.0.1", 5672, ["*.0.0.1"], False),
        ("::1", 5672, ["[::1]:5672"], True),
        ("xn--bcher-kva.example", 5672, ["bücher.example"], True),
        ("mq.example.com", 5672, [], False),
    ],
)
def test_host_patterns_match_one_meaning_of_a_host(host, port, patterns, allowed):
    assert brokers.host_allowed(host, port, patterns) is allowed


def _resolve_to(*addresses):
    return lambda host, port: list(addresses)


def test_no_listed_hosts_means_no_broker_destination():
    with pytest.raises(DestinationRefused, match="not enabled"):
        brokers.check_broker_host(
            "mq.example.com", 5672, patterns=[], allow_private=True
        )


def test_an_unlisted_host_is_refused_before_any_lookup():
    looked_up = []
    with pytest.raises(DestinationRefused, match="not one the operator allows"):
        brokers.check_broker_host(
            "other.example.com",
            5672,
            patterns=["mq.example.com"],
            allow_private=False,
            resolve=lambda host, port: looked_up.append(host) or ["93.184.216.34"],
        )
    assert looked_up == []


def test_a_listed_name_pointing_at_a_private_address_is_refused():
    # The operator listed a name; its DNS (which a merchant may control) must
    # not carry a send to an internal address nobody listed.
    for address in ("127.0.0.1", "10.0.0.5", "169.254.169.254", "::1"):
        with pytest.raises(DestinationRefused, match="private or loopback"):
            brokers.check_broker_host(
                "mq.example.com",
                5672,
                patterns=["mq.example.com"],
                allow_private=False,
                resolve=_resolve_to("93.184.216.34", address),
            )


def test_a_private_address_passes_only_where_the_address_itself_is_listed():
    patterns = ["mq.internal", "10.0.0.5:5672"]
    assert brokers.check_broker_host(
        "mq.internal",
        5672,
        patterns=patterns,
        allow_private=False,
        resolve=_resolve_to("10.0.0.5"),
    ) == ["10.0.0.5"]
    with pytest.raises(DestinationRefused):
        brokers.check_broker_host(
            "mq.internal",
            5673,
            patterns=["mq.internal:*", "10.0.0.5:5672"],
            allow_private=False,
            resolve=_resolve_to("10.0.0.5"),
        )
    assert brokers.check_broker_host(
        "mq.internal",
        5672,
        patterns=["mq.internal"],
        allow_private=True,
        resolve=_resolve_to("10.0.0.9"),
    ) == ["10.0.0.9"]


def test_a_public_address_of_a_listed_name_passes():
    assert brokers.check_broker_host(
        "mq.example.com",
        5672,
        patterns=["mq.example.com"],
        allow_private=False,
        resolve=_resolve_to("93.184.216.34"),
    ) == ["93.184.216.34"]


@pytest.mark.parametrize(
    ("patterns", "ok"),
    [
        (["mq.example.com", "mq.example.com:5671", "*.bus.example.com:*"], True),
        (["127.0.0.1:5672", "[::1]:5672"], True),
        ("mq.example.com", False),
        ([""], False),
        (["mq.example.com:70000"], False),
        (["mq.*.example.com"], False),
        (["a b"], False),
        ([3], False),
    ],
)
def test_staff_host_lists_are_checked(patterns, ok):
    assert (brokers.patterns_errors(patterns) == "") is ok
