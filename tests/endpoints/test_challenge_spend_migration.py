"""Migration endpoints 0019: a challenge asked before wrong pastes were
counted (and before answers to it stopped being kept) is spent for pasting;
endpoints not awaiting verification are left as they were."""

from __future__ import annotations

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from endpoints.models import Endpoint
from endpoints.verification import WRONG_ANSWERS_LIMIT
from tests.support import factories

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

BEFORE = [("endpoints", "0018_merchant_is_active_help")]


def migrate(targets) -> None:
    executor = MigrationExecutor(connection)
    executor.migrate(targets or executor.loader.graph.leaf_nodes())


def test_challenges_awaiting_before_the_limit_are_spent_for_pasting():
    awaiting = factories.endpoint()
    verified = factories.endpoint()
    Endpoint.objects.filter(pk=awaiting.pk).update(awaiting_verification=True)
    try:
        migrate(BEFORE)
    finally:
        migrate(None)

    counts = dict(Endpoint.objects.values_list("pk", "verification_wrong_answers"))
    assert counts == {awaiting.pk: WRONG_ANSWERS_LIMIT, verified.pk: 0}
