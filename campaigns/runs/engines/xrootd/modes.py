"""Which copy modes XRootD's client can give between two URLs, and the CopyProcess mode it asks.

XrdCl's third-party copy is the destination door pulling from the source (`ofs.tpc` on the
doors), between two root:// (or xroot://) URLs only; anything else it can copy, a root:// door
and a local file or two TLS doors, it streams through this process. A campaign's mode asks:
"pull" is xrdcp's `--tpc only` (a third-party copy or a failure), "streamed" its default (the
bytes through the client, even between two doors that could pull), "auto" `--tpc first` (a
third-party copy where the doors can, else streamed). Push does not exist in XRootD's protocol.
"""

from __future__ import annotations

from collections.abc import Iterable
from urllib.parse import urlsplit

TPC_SCHEMES = frozenset({"root", "xroot"})
SCHEMES = TPC_SCHEMES | {"roots", "xroots", "file"}
# The campaign's mode -> CopyProcess's `thirdparty`.
THIRD_PARTY = {"auto": "first", "pull": "only", "streamed": "none"}
# What a copy records as its mode, in the words gfal2's copies use.
TPC_MODE, STREAMED_MODE = "3rd pull", "streamed"


def _scheme(url: str) -> str:
    return urlsplit(url).scheme.lower()


def possible_modes(source: str, destination: str) -> frozenset[str]:
    """The modes asked ("auto", "pull", "streamed") XrdCl can give from `source` to `destination`."""
    if _scheme(source) not in SCHEMES or _scheme(destination) not in SCHEMES:
        return frozenset()
    if _scheme(source) in TPC_SCHEMES and _scheme(destination) in TPC_SCHEMES:
        return frozenset(THIRD_PARTY)
    return frozenset({"auto", "streamed"})


def mode_error(modes: Iterable[str], pairs: Iterable[tuple[str, str]]) -> str | None:
    """Why these endpoint pairs cannot be copied by XRootD's client in these modes; None when they can."""
    asked = sorted(set(modes))
    for source, destination in pairs:
        possible = possible_modes(source, destination)
        if not possible:
            return (
                f"XRootD's client copies root://, roots:// and file:// URLs, not {source} to {destination}: "
                "choose the gfal2 engine for these endpoints."
            )
        for mode in asked:
            if mode not in possible:
                return (
                    f"XRootD's client cannot copy {source} to {destination} in {mode} mode: it can "
                    f"{', '.join(sorted(possible))} there (a third-party copy is a root:// door pulling from another)."
                )
    return None
