"""Taking an event in: from a request (or an in-process call) to rows on disk.

Read in this order:

- ``ingest.py``      the API's publish: parse, check, write; single and batch.
- ``validation.py``  an event's payload against its event type's schema.
- ``sanitize.py``    what PostgreSQL cannot store (NUL characters), refused early.
- ``fanout.py``      which endpoints an event goes to (the audience).
- ``outbox.py``      the one statement that writes an event and its deliveries.
- ``rate.py``        each merchant's publish bucket, taken just before the write.

The in-process publish service (``deliveries.services``) writes through the
same outbox statement, inside the caller's transaction.
"""
