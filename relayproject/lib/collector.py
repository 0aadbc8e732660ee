"""Python's cycle collector, set for a process that lives long after start-up.

A dispatcher or a gunicorn worker starts by building some 100,000 objects
that live as long as the process: modules, classes, models, the URL map,
settings. Python's collector walks all of them in every full collection, and
with its default first threshold (700 new container objects) it collects
the youngest generation every twenty or so deliveries. Measured on a dispatcher
draining 20,000 deliveries to an instant receiver (issue 21, bench/RESULTS.md,
eleventh pass): 0.72-0.95 s of its 5.5-7.0 s of CPU went to the collector,
about half of that in full collections; a batch publish of 100 spent 0.6-1.0
ms of its 5.5-9 in it. Settled, the collector takes 2-3 % of the dispatcher.

collector_settle, called once the process has everything it keeps loaded:
- collects once, then freezes what is left (gc.freeze): the start-up objects
  move to a generation the collector never walks. They are still freed by
  reference counting; only a cycle among them would stay, and a start-up
  object lives as long as the process anyway.
- raises the first threshold to FIRST_THRESHOLD, so the youngest generation
  is collected after that many new objects, not 700. A delivery's objects
  mostly die by reference counting long before; cycles (an exception and its
  traceback, a finished future) wait a little longer to be freed, a bounded
  amount of memory.

Only a process's owner calls it: `run_dispatcher` started as a command (not
call_command inside someone else's process) and gunicorn's worker hook
(gunicorn.conf.py).
"""

from __future__ import annotations

import gc

FIRST_THRESHOLD = 10_000


def collector_settle() -> None:
    """Collect, freeze what survives, and collect the young less often."""
    gc.collect()
    gc.freeze()
    _, middle, oldest = gc.get_threshold()
    gc.set_threshold(FIRST_THRESHOLD, middle, oldest)
