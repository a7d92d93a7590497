"""The xrootd engine's options (Campaign.engine_options of an xrootd campaign): how XrdCl moves
a streamed copy's bytes. One schema for the model's check, the campaign form and the API.

Parallel streams are the campaign's own `streams` (one fact, one field): XrdCl's substreams
per connection to a door. A third-party copy's bytes go between the doors, so these shape
streamed copies only; the destination door's `ofs.tpc` settings shape a third-party one.
"""

from __future__ import annotations

from dataclasses import dataclass

from django import forms

# XrdCl's own defaults (xrdcp's): 8 MiB chunks, 4 of them in flight per copy.
DEFAULT_CHUNK_SIZE = 8 << 20
DEFAULT_PARALLEL_CHUNKS = 4


class XRootDOptionsForm(forms.Form):
    chunk_size = forms.IntegerField(
        label="Chunk size (bytes)", min_value=64 << 10, max_value=1 << 30, required=False,
        help_text="Bytes XrdCl reads and writes per request of a streamed copy (xrdcp's XRD_CPCHUNKSIZE). "
        "Empty: 8 MiB.",
    )  # fmt: skip
    parallel_chunks = forms.IntegerField(
        label="Parallel chunks", min_value=1, max_value=64, required=False,
        help_text="Chunks in flight per streamed copy (xrdcp's XRD_CPPARALLELCHUNKS). Empty: 4.",
    )  # fmt: skip
    xrate = forms.IntegerField(
        label="Rate limit (bytes/s)", min_value=0, max_value=1 << 40, required=False,
        help_text="The most bytes a second one streamed copy may move (xrdcp's --xrate). Empty or 0: no limit.",
    )  # fmt: skip

    def as_options(self) -> dict:
        data = self.cleaned_data
        return {
            "chunk_size": data.get("chunk_size") or DEFAULT_CHUNK_SIZE,
            "parallel_chunks": data.get("parallel_chunks") or DEFAULT_PARALLEL_CHUNKS,
            "xrate": data.get("xrate") or 0,
        }


@dataclass(frozen=True, slots=True)
class XRootDOptions:
    chunk_size: int = DEFAULT_CHUNK_SIZE
    parallel_chunks: int = DEFAULT_PARALLEL_CHUNKS
    xrate: int = 0

    @classmethod
    def from_engine_options(cls, options: dict) -> XRootDOptions:
        """A run's frozen engine options (RunSpec.engine_options), defaults where one is missing."""
        return cls(
            int(options.get("chunk_size") or DEFAULT_CHUNK_SIZE),
            int(options.get("parallel_chunks") or DEFAULT_PARALLEL_CHUNKS),
            int(options.get("xrate") or 0),
        )
