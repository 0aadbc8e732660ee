"""The delivery engine: claim due rows, send them, record what happened.

Read in this order:

- ``dispatcher.py``  the loop: claim -> send -> record; ``run()``, ``stop()``.
- ``claiming.py``    every locking query (SKIP LOCKED claims, leases, probes,
                     release), and nothing else.
- ``jobs.py``        claimed rows -> Jobs: everything one send needs, read once.
- ``gate.py``        whether a claimed job may be sent now (breakers seen open).
- ``transport.py``   one HTTP request -> SendResult; writes nothing.
- ``errors.py``      the error kinds an attempt can end with.
- ``outcomes.py``    record a flush of results, fenced by the lease.
- ``counters.py``    the /metrics counters, summed across processes.
- ``wakeup.py``      how an idle dispatcher waits (LISTEN/NOTIFY or a timer).
- ``maintenance.py`` periodic work besides sending (endpoint statistics).
"""
