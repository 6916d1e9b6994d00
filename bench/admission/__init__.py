"""B3: admission latency of the placement webhook (`schedpolicy webhook`), and of the same
placement compiled into a MutatingAdmissionPolicy.

Under load: 100 pod creates per second while the controller converges B1's fleet (its
costs cleared first) in the same cluster. Creates are timed one by one from the
apiserver's audit log (create_latency.py); the webhook's p50/p99 come from its own
histogram (buckets down to 0.5 ms) and from the apiserver's.

Burst: five Deployments scaled from 0 to `burst_replicas` each at once. Reported: the
share of webhook calls in each bucket of the apiserver's
`apiserver_admission_webhook_admission_duration_seconds`, its fail-open count, and the
created pods that lack their `schedpolicy.io/hints` annotation.

Each admission path is a lane (paths.py): no admission, the compiled policy, our webhook,
and webhooks that decide nothing (null_webhook.py, go_null_webhook/), for what the machine
itself allows. The acceptance's lanes are taken once more in turn, over several rounds
(in_turn.py). What each admission policy costs per create, by the apiserver's own
histogram and in process with the apiserver's own patcher (map_cost/), is policy_cost.py.
"""
