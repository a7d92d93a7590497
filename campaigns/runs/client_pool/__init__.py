"""Client pools: one run's copies spread over client hosts.

The run's driver keeps its one loop, its lease and every database write; each client host
runs `manage.py client --host NAME` (a Celery worker on the queue client.NAME) and, for a run,
a serve task that copies the share the driver hands it through the same copy pool and engine
code as the driver's own threads. Driver and clients talk through the broker's Redis
(campaigns.runs.client_pool.channel): clients connect out only, as collectors do.
"""
