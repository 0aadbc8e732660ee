"""Pull endpoints (kind "pull"): deliveries held for a consumer that fetches
them over the REST API, instead of a dispatcher sending them.

A pull endpoint's delivery is the same row, in the same states, as any other
(a new way to send, never a new queue): pending until a consumer leases it
(leasing.py: delivering, claimed_by "pull", under a lease of the endpoint's
visibility timeout), then succeeded on an ack or pending again (a retry) or
dead on a nack (acks.py). A lease that runs out is a spent attempt,
`lease_expired`, noticed by the dispatchers (expiry.py) or by the next pull.
The dispatchers' claim never takes a pull endpoint's rows.

Listen sessions (sessions.py) are pull endpoints made for one run of the
client library's `listen` command.
"""
