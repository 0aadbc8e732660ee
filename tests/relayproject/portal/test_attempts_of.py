"""Where attempts are listed they read "3 of 10", against the round's budget."""

from __future__ import annotations

import pytest
from django.urls import reverse

from deliveries.models import Delivery
from deliveries.templatetags.relay_console import attempts_of


@pytest.mark.parametrize(
    ("count", "budget_start", "max_attempts", "merchant_default", "words"),
    [
        (0, 0, None, None, "0 of 10"),
        (3, 0, None, None, "3 of 10"),
        (3, 0, 2, None, "3 of 2"),
        (5, 4, 3, None, "1 of 3 (5 in all)"),  # replayed: a fresh budget
        # The merchant's default, where the endpoint sets none (its own wins).
        (3, 0, None, 6, "3 of 6"),
        (3, 0, 2, 6, "3 of 2"),
    ],
)
def test_attempts_in_words(
    settings, count, budget_start, max_attempts, merchant_default, words
):
    settings.MAX_ATTEMPTS = 10
    from endpoints.models import Endpoint, Merchant

    delivery = Delivery(
        endpoint=Endpoint(
            max_attempts=max_attempts,
            merchant=Merchant(max_attempts=merchant_default),
        ),
        attempt_count=count,
        budget_start=budget_start,
    )
    assert attempts_of(delivery) == words


def test_the_delivery_log_says_attempt_of_budget(client, world, settings):
    settings.MAX_ATTEMPTS = 10
    client.force_login(world.owner)
    html = client.get(
        reverse("portal:delivery_list", args=[world.mine.merchant.slug])
    ).content.decode()
    assert '<td data-label="Attempts">1 of 10</td>' in html
