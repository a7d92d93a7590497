"""The shared cache keeps one redis client per connection pool (storageops.redis_cache), and
still does what Django's Redis cache does, from several threads at once, on the real Redis."""

from __future__ import annotations

import threading
import uuid

from django.core.cache import caches

from storageops.redis_cache import PooledClientRedisCacheClient


def test_one_client_per_pool_and_every_operation_as_before():
    cache = caches["shared"]
    assert isinstance(cache._cache, PooledClientRedisCacheClient)
    assert cache._cache.get_client(write=True) is cache._cache.get_client("any", write=False)
    key = f"redis-cache-{uuid.uuid4().hex}"
    assert cache.get(key) is None and cache.add(key, {"a": 1}, 30) and not cache.add(key, 2, 30)
    assert cache.get(key) == {"a": 1}
    cache.set_many({key: (3,), f"{key}:2": None}, 30)
    assert cache.get_many([key, f"{key}:2"]) == {key: (3,), f"{key}:2": None}
    cache.delete_many([key, f"{key}:2"])
    assert cache.get(key) is None


def test_threads_share_it_safely():
    cache = caches["shared"]
    key = f"redis-cache-threads-{uuid.uuid4().hex}"
    errors: list[BaseException] = []

    def work(n: int) -> None:
        try:
            for i in range(200):
                cache.set(f"{key}:{n}", i, 30)
                assert cache.get(f"{key}:{n}") == i
        except BaseException as exc:  # noqa: BLE001 -- reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors, errors
    cache.delete_many([f"{key}:{n}" for n in range(8)])
