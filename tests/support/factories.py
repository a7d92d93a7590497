"""Small factories for the domain objects tests need (fixed values, no randomness)."""

from __future__ import annotations

from campaigns.models import Backend, Campaign, Endpoint


def backend(name: str = "xrootd-disk", **fields) -> Backend:
    return Backend.objects.get_or_create(name=name, defaults={"access_layer": "xrootd", **fields})[0]


def endpoint(name: str, url: str, backend_name: str = "xrootd-disk", **fields) -> Endpoint:
    return Endpoint.objects.create(name=name, url=url, backend=backend(backend_name), **fields)


def campaign(name: str, sources: list[Endpoint], destinations: list[Endpoint], **fields) -> Campaign:
    defaults = {"file_count": 10, "file_size": 1000, "concurrency_steps": [2], "checksum_mode": "none"}
    defaults.update(fields)
    obj = Campaign(name=name, **defaults)
    obj.save()
    obj.sources.set(sources)
    obj.destinations.set(destinations)
    return obj


def mock_campaign(name: str = "mock", dst_query: str = "time=0", src_query: str = "", **fields) -> Campaign:
    src = endpoint(f"{name}-src", "mock://src.test/data/" + (f"?{src_query}" if src_query else ""))
    dst = endpoint(f"{name}-dst", f"mock://dst.test/data/?{dst_query}")
    return campaign(name, [src], [dst], **fields)


def half_failing_campaign(name: str = "half", **fields) -> Campaign:
    """Destinations taken in turn: even indices go to a good one, odd ones to one whose copies
    time out after 1 s (errno 110: failed, category transfer_timeout; with time=0 in its query
    the mock plugin would let them succeed)."""
    src = endpoint(f"{name}-src", "mock://src.test/data/")
    good = endpoint(f"{name}-good", "mock://good.test/data/?time=0")
    bad = endpoint(f"{name}-bad", "mock://bad.test/data/?transfer_errno=110")
    return campaign(name, [src], [good, bad], **fields)
