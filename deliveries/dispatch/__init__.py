"""The delivery engine: claim due rows, send them, record what happened.

The vocabulary it shares with the rest of the house lives in the core, which
never imports this package: the statuses and error kinds
(deliveries/models.py), what an answer means (deliveries/retry.py), the
request's headers (deliveries/request.py), the /metrics counters
(deliveries/ops/counters.py).

Read in this order:

- ``dispatcher.py``  the database thread: claim -> hand over -> record;
                     ``run()``, ``stop()``.
- ``recorder.py``    its other half, one object: outcomes recorded in batches
                     (in one statement, else one by one so one bad outcome
                     cannot sink the flush), unsent rows given back.
- ``writer.py``      where the recorder's flushes run: a thread and database
                     connection of their own, one flush at a time, so a
                     slow flush never delays a claim.
- ``outage.py``      the database errors ridden out, and the one retry.
- ``sendloop.py``    the asyncio send loop on its own thread, up to
                     ``concurrency`` sends in flight; no database.
- ``outgoing.py``    the request a send puts on the wire, signed at send
                     time, and the headers its attempt records.
- ``lanes.py``       which queued job goes next: a lane per endpoint,
                     round-robin, one at a time once an endpoint fails.
- ``claiming.py``    every locking query (fair SKIP LOCKED claims under the
                     merchants' and endpoints' max_in_flight, leases,
                     release), nothing else. No claim takes a pull
                     endpoint's rows (its consumer leases them,
                     deliveries/pull/), and those leases are no sends: they
                     take none of a merchant's max_in_flight.
- ``single_claims.py`` claims of one row each: a breaker's probe, an
                     endpoint's verification challenge.
- ``due.py``         what a claim reads first: endpoints with due work and
                     room, merchants in turn, and their live claims.
- ``claim_sql.py``   the claim's PostgreSQL statements, written so their
                     plans cannot drift with the statistics.
- ``load_sql.py``    the reads after them (live claims, job rows) written
                     once, not compiled by the ORM on every claim.
- ``prepared.py``    the hot statements prepared once per session.
- ``shares.py``      how a claim's rows are shared among merchants, then
                     endpoints (pure).
- ``lease.py``       how long a claim is held by default, and why.
- ``session.py``     the dispatcher's database session limits.
- ``jobs.py``        claimed rows -> Jobs: everything one send needs, read once.
- ``gate.py``        which endpoints are held back (breakers seen open).
- ``transport.py``   one HTTP request -> SendResult; writes nothing.
- ``http1.py``       its HTTP/1.1 connection: the answer parsed and bounded.
- ``pool.py``        its keep-alive connections, dialled to checked addresses.
- ``tunnel.py``      through the egress proxy (RELAY_EGRESS_PROXY), when set:
                     CONNECT to the checked address; its failures spend no
                     attempt.
- ``resolver.py``    the destination policy at send time: resolve, check, pin.
- ``outcomes.py``    record a flush of results, fenced by the lease.
- ``delivery_update.py`` the flush's delivery rows: each verdict's columns,
                     one fenced UPDATE.
- ``backend.py``     what the database can do (SQLite runs one dispatcher):
                     one question per concern, so no vendor test elsewhere.
- ``wakeup.py``      how an idle dispatcher waits (LISTEN/NOTIFY or a timer).
- ``maintenance.py`` periodic work besides sending (endpoint statistics, the
                     gauges /metrics serves, day partitions of the history
                     tables made ahead, pull endpoints' expired leases and
                     listen sessions: deliveries/pull/expiry.py).
- ``heartbeat.py``   one row per dispatcher, beaten from a thread of its own;
                     tells the send loop, judges the others.
- ``rescue.py``      dispatchers declared dead by their heartbeat's age, and
                     their rows released to the others at once.
"""
