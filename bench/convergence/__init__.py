"""B1 (convergence) and B2 (memory), on one fleet of ReplicaSet pods over many fake nodes.

B1: cost patches per second, from controller start until every pod carries its final
cost, against two baselines on the same apiserver with the same UID-tested JSON Patches
and the same concurrency: a raw asyncio loop that only sends them, and a bare client that
first streams every pod and keeps its watch open meanwhile (watching_client.py), the
least any watching controller costs. Redundant writes and writes after a restart are
counted from the apiserver's audit log; CPU seconds per 1,000 pod events from /proc.

B2: the controller's and the webhook's peak RSS while they hold that fleet, against the
physical floor (floor.py): the interpreter with our imports and nothing held, plus the
encoded bytes of every record the view keeps.
"""
