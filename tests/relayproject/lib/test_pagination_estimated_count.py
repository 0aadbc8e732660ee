"""Big changelists count exactly up to a cap, then trust the planner's estimate."""

from __future__ import annotations

import pytest
from django.core.paginator import Paginator
from django.db import connection

from deliveries.models import Attempt, Delivery
from relayproject.lib.clock import utcnow
from relayproject.lib.pagination import EstimatedCountPaginator
from tests.support import factories, seed

pytestmark = pytest.mark.django_db


class SmallCap(EstimatedCountPaginator):
    CAP = 5


@pytest.fixture
def rows():
    endpoint = factories.endpoint()
    for _ in range(8):
        seed.delivery(endpoint, status="succeeded", created_at=utcnow())


def test_counts_exactly_up_to_the_cap(rows, django_assert_num_queries):
    four = list(Delivery.objects.values_list("pk", flat=True)[:4])
    paginator = SmallCap(Delivery.objects.filter(pk__in=four), 2)
    with django_assert_num_queries(1):
        assert paginator.count == 4


@pytest.mark.both_backends
def test_beyond_the_cap_never_answers_fewer_than_the_cap(rows):
    count = SmallCap(Delivery.objects.order_by("-id"), 2).count
    if connection.vendor == "postgresql":
        assert count >= 6  # the planner's estimate, at least what was seen
    else:
        assert count == 8


@pytest.mark.postgres
def test_beyond_the_cap_on_postgresql_asks_the_planner(rows):
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE deliveries_delivery")
    # Partitions the statistics have not seen add a guess of their own.
    assert 8 <= SmallCap(Delivery.objects.all(), 2).count <= 50


def test_attempts_sort_without_joining_deliveries():
    sql = str(Attempt.objects.all().query)
    assert "JOIN" not in sql and "delivery_id" in sql


class ShallowDeep(EstimatedCountPaginator):
    DEEP = 2


@pytest.mark.both_backends
def test_a_deep_page_has_the_rows_a_plain_offset_gives(rows, django_assert_num_queries):
    ordered = Delivery.objects.select_related("endpoint").order_by("-id")
    expected = [
        [d.pk for d in Paginator(ordered, 3).page(n).object_list] for n in (1, 2, 3)
    ]
    paginator = ShallowDeep(ordered, 3)
    paginator.count  # noqa: B018 (counted once, as the changelist does)

    pages = [[d.pk for d in paginator.page(n).object_list] for n in (1, 2, 3)]

    assert pages == expected and len(pages[2]) == 2  # 8 rows: 3 + 3 + 2
    with django_assert_num_queries(2):  # the page's ids, then its rows
        assert [d.endpoint.pk for d in paginator.page(2).object_list]
