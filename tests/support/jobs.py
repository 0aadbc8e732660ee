"""A dispatcher Job with plausible values, for tests of what the send loop does with one."""

from __future__ import annotations

import dataclasses
from datetime import timedelta

from deliveries.dispatch.jobs import Job
from relayproject.lib.clock import utcnow

PUBLISH = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"


def a_job(**changes) -> Job:
    job = Job(
        delivery_id="dlv_1",
        event_id="evt_1",
        endpoint_id="ep_1",
        url="https://user:pw@hooks.example.com:8443/in/x?token=s3cret#frag",
        body=b'{"data": {"card": "4242"}}',
        secrets=["whsec_c2VjcmV0"],
        attempt_count=2,
        budget_start=0,
        max_attempts=3,
        rate_limit_per_second=None,
        max_in_flight=32,
        is_probe=False,
        lease_until=utcnow() + timedelta(seconds=60),
        merchant_id=7,
        traceparent=PUBLISH,
    )
    return dataclasses.replace(job, **changes)
