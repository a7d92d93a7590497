"""Which copy modes gfal2 can give between two URLs, and the mode it must report for each.

gfal2 picks the copy path from the URLs' schemes, whatever a campaign asks: between two
root:// doors its XRootD plugin always runs a third-party copy ("3rd pull", the destination
pulls; it has no option to turn that off in 2.21), between two GridFTP doors the GridFTP plugin
always runs its third-party copy ("3rd push"), and between two protocols or with a local file
nothing but a stream through the client is possible. Only HTTP gives every mode on request. A
campaign asking for a mode its endpoints cannot give is refused when it is saved
(`campaign_mode_error`), and a copy that reports another mode than the one asked is failed
(`mode_mismatch`): a campaign measures the mode it asked for, or says it could not.

"streamed" between two root:// doors is StorageOps' own stream through the copying process
(`client.Gfal2Copier`): gfal2 opens the source and the destination and the bytes pass through
this process, so a client's interface carries its copies' bytes.
"""

from __future__ import annotations

from collections.abc import Iterable
from urllib.parse import urlsplit

ROOT = frozenset({"root", "roots", "xroot", "xroots"})
HTTP = frozenset({"http", "https", "dav", "davs"})
GRIDFTP = frozenset({"gsiftp"})
LOCAL = frozenset({"file"})
_FAMILIES = (ROOT, HTTP, GRIDFTP, LOCAL)

# The mode asked -> what gfal2's TRANSFER:TYPE event says when it ran that mode.
REPORTED = {"pull": "3rd pull", "push": "3rd push", "streamed": "streamed"}

# Same protocol on both sides: the modes gfal2 (and StorageOps' root:// stream) can give.
_SAME_PROTOCOL = {ROOT: frozenset({"pull", "streamed"}), HTTP: frozenset({"pull", "push", "streamed"}),
                  GRIDFTP: frozenset({"push"}), LOCAL: frozenset({"streamed"})}  # fmt: skip
_LABELS = {ROOT: "root://", HTTP: "http(s)/dav(s)://", GRIDFTP: "gsiftp://", LOCAL: "file://"}


def _family(url: str) -> frozenset[str] | None:
    scheme = urlsplit(url).scheme.lower()
    return next((family for family in _FAMILIES if scheme in family), None)


def possible_modes(source: str, destination: str) -> frozenset[str] | None:
    """The modes asked for ("pull", "push", "streamed") gfal2 can give from `source` to
    `destination`; None where StorageOps knows no rule (another plugin, e.g. mock://)."""
    src, dst = _family(source), _family(destination)
    if src is None or dst is None:
        return None
    if src is dst:
        return _SAME_PROTOCOL[src]
    return frozenset({"streamed"})  # no third-party copy between two protocols or with a local file


def streams_itself(mode: str, source: str, destination: str) -> bool:
    """True where StorageOps streams the copy itself: gfal2 would run a TPC between root:// doors."""
    return mode == "streamed" and _family(source) is ROOT and _family(destination) is ROOT


def mode_error(modes: Iterable[str], pairs: Iterable[tuple[str, str]]) -> str | None:
    """Why these endpoint pairs (source URL, destination URL) cannot be copied in these modes;
    None when they can. "auto" is whatever gfal2 picks and always possible."""
    asked = sorted({m for m in modes if m in REPORTED})
    for source, destination in pairs:
        possible = possible_modes(source, destination)
        if possible is None:
            continue
        for mode in asked:
            if mode not in possible:
                sides = f"{_LABELS[_family(source)]} to {_LABELS[_family(destination)]}"
                return (
                    f"gfal2 cannot copy {sides} in {mode} mode ({source} to {destination}): it can "
                    f"{', '.join(sorted(possible))} there. Choose one of those, or auto."
                )
    return None


def mode_mismatch(asked: str, reported: str) -> str | None:
    """The failure message of a copy gfal2 reported running in another mode than asked; None
    when it is the mode asked, when "auto" was asked, or when the plugin reports none (mock)."""
    expected = REPORTED.get(asked)
    if expected is None or not reported or reported == expected:
        return None
    return f"asked for a {asked} copy, gfal2 ran it as {reported}: not the mode the campaign measures"
