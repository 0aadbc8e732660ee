"""The dispatcher's maintenance step beats while sends are in flight, not only when idle."""

from __future__ import annotations

import threading
from io import StringIO

import pytest
from django.core.management import call_command

from deliveries.dispatch.heartbeat import Heartbeat
from deliveries.dispatch.maintenance import Maintenance
from deliveries.models import DispatcherHeartbeat
from deliveries.services import event_publish
from tests import factories
from tests.deliveries.dispatch.test_dispatcher import make_dispatcher
from tests.fakes import Reply

pytestmark = pytest.mark.django_db(transaction=True)


def test_maintenance_runs_while_a_send_is_in_flight(receiver):
    in_flight = threading.Event()
    beat_while_sending = threading.Event()
    released_by_beat = []

    def respond(_request):
        in_flight.set()
        # The receiver holds the send open until maintenance has run; a
        # dispatcher that maintains only when idle never lets it go.
        released_by_beat.append(beat_while_sending.wait(timeout=5))
        return Reply()

    def step(now):
        if in_flight.is_set():
            beat_while_sending.set()

    receiver.respond = respond
    endpoint = factories.endpoint(url=receiver.url)
    event_publish(merchant=endpoint.merchant, type="a", data={})

    make_dispatcher(maintenance=Maintenance(Heartbeat(worker_id="w1"), step)).run(
        drain=True
    )

    assert released_by_beat == [True]
    assert DispatcherHeartbeat.objects.filter(worker_id="w1").exists()


def test_run_dispatcher_leaves_no_heartbeat_after_a_clean_stop():
    factories.endpoint()
    call_command(
        "run_dispatcher", "--drain", "--worker-id", "w-clean", stdout=StringIO()
    )
    assert not DispatcherHeartbeat.objects.exists()
