"""API reads computed once per moment and shared by every client that asks in it.

During a data challenge every dashboard, script and exporter of the site polls the same few
reads (the live run, its transfers, the lists of runs and campaigns) as the run page's viewers
poll its progress. What they are sent depends on the data alone: the role is checked before a
view runs (its permission classes), and the JSON names no user. So such a read is computed once
per moment and that rendering answers every client that asks meanwhile, with an ETag (304 to a
client who has it). The moment:

- a live run's reads: the run's progress figures and the clock's second, as the page's partials
  (campaigns.web.shared_partials): a change of the run is seen at once;
- a list: the version of the tables it shows (a sequence each statement that changes them moves
  on: migration campaigns 0032) and the clock's second. A change of those tables is seen at
  once (a client asking while another computes the new moment waits for it, rather than be
  answered the one before); anything else a row shows (a baseline's watch, say) is at most a
  second old.

A read inside a transaction (it may see rows not committed) is never shared, nor a run that
is not live, nor what is not a plain JSON GET (the browsable API names its user). The key
carries the whole absolute URL (host, path, query: filters, pages, cursors) and the media type;
the cache is the shared one, whose keys carry the database (storageops.shared_cache).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable

from django.db import connection
from django.http import HttpResponse
from rest_framework.request import Request
from rest_framework.response import Response

from campaigns.models import Run
from campaigns.web import live_snapshot, shared_partials
from storageops import conditional, row_lookups

LISTS = ("runs", "campaigns")  # the sequences of migration campaigns 0032
LIST_MOMENT = "list:"


def live_run_moment(pk: object) -> str | None:
    """The moment of the live run `pk` (its progress figures, one small statement); None if it
    is not live or not a run."""
    try:
        number = int(str(pk))
    except ValueError:
        return None
    if not 0 < number < 2**63:
        return None  # no such run; the view says so (a bigint's range: the database would refuse it)
    run = row_lookups.some_fields(Run, number, ("id", *shared_partials.PROGRESS_FIELDS))
    return shared_partials.progress_key(run) if run is not None and run.is_live else None


def list_moment(name: str) -> str:
    """The moment of a list: its tables' version and the clock's second."""
    if name not in LISTS:
        raise ValueError(f"no version is kept for the list {name!r}")
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT last_value FROM storageops_list_version_{name}")  # noqa: S608 -- a name of LISTS
        (version,) = cursor.fetchone()
    return f"{LIST_MOMENT}{name}:{version}:{live_snapshot.tick()}"


def shared(
    request: Request, view, moment: Callable[[], str | None], compute: Callable[[], Response]
) -> Response | HttpResponse:
    """`compute()`'s answer, shared by every client asking for the same URL at the same
    `moment()`; computed for this request alone where it may not be shared."""
    renderer = getattr(request, "accepted_renderer", None)
    if request.method != "GET" or renderer is None or renderer.format != "json" or connection.in_atomic_block:
        return compute()
    now = moment()
    if now is None:
        return compute()
    media_type = request.accepted_media_type

    def rendered() -> tuple[int, bytes]:
        response = compute()
        return response.status_code, renderer.render(response.data, media_type, view.get_renderer_context())

    # A list's client may have just changed it: it waits for the new moment another computes.
    # Hashed: a URL may be long or hold what a cache key should not (a cursor, a hostile query).
    asked = f"{request.build_absolute_uri()} {media_type}".encode()
    part = f"api:{hashlib.blake2b(asked, digest_size=16).hexdigest()}"
    status, body = live_snapshot.once(part, now, rendered, previous_meanwhile=not now.startswith(LIST_MOMENT))
    if status != 200:
        return compute()  # a read that did not raise answers 200; anything else is not shared
    content_type = f"{renderer.media_type}; charset={renderer.charset}" if renderer.charset else renderer.media_type
    return conditional.answer(request, body, content_type)
