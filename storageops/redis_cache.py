"""Django's Redis cache with one client object per connection pool, not one per operation.

Django's RedisCacheClient makes a new ``redis.Redis`` for every get, set or add; redis-py's
constructor builds its table of ~170 response callbacks each time. The run page's and the
API's shared reads make a few cache calls a request, and those constructions were 0.65 ms of a
5-ms page (benchmarks/request_profile.py --top). A ``redis.Redis`` is safe to share between
threads (each command takes a connection from the pool), so one is kept per pool.
"""

from __future__ import annotations

import threading

from django.core.cache.backends.redis import RedisCache, RedisCacheClient


class PooledClientRedisCacheClient(RedisCacheClient):
    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._clients: dict[int, object] = {}
        self._clients_lock = threading.Lock()

    def get_client(self, key=None, *, write=False):
        pool = self._get_connection_pool(write)
        client = self._clients.get(id(pool))
        if client is None:
            with self._clients_lock:
                client = self._clients.setdefault(id(pool), self._client(connection_pool=pool))
        return client


class SharedRedisCache(RedisCache):
    """The "shared" cache's backend (settings.CACHES)."""

    def __init__(self, server, params) -> None:
        super().__init__(server, params)
        self._class = PooledClientRedisCacheClient
