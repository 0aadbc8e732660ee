"""The delivery engine: claim due rows, send them, record what happened.

Read in this order:

- ``dispatcher.py``  the loop: claim -> send -> record; ``run()``, ``stop()``.
- ``claiming.py``    every locking query (SKIP LOCKED claims, leases, probes,
                     release), and nothing else.
- ``jobs.py``        claimed rows -> Jobs: everything one send needs, read once.
- ``gate.py``        whether a claimed job may be sent now (breakers seen open).
- ``transport.py``   one HTTP request -> SendResult (aiohttp); writes nothing.
- ``resolver.py``    the destination policy at send time: resolve, check, pin.
- ``errors.py``      the error kinds an attempt can end with.
- ``outcomes.py``    record a flush of results, fenced by the lease.
- ``recording.py``   one outcome the database refuses cannot sink its flush.
- ``counters.py``    the /metrics counters, summed across processes.
- ``wakeup.py``      how an idle dispatcher waits (LISTEN/NOTIFY or a timer).
- ``maintenance.py`` periodic work besides sending (endpoint statistics, day
                     partitions of the history tables made ahead).
"""
