"""A sweep's step table as chart series, either way round: throughput against concurrency, one
line per setting of the other knobs, or against a swept knob (streams, TCP buffer, mode), one
line per concurrency. Tokyo plotted gridFTP streams against clients both ways; so does a run."""

from __future__ import annotations

from campaigns import sweeps


def series(steps: list[dict], x: str, axes: list[str]) -> list[dict]:
    """One line per combination of the dimensions other than `x`, its points in x order."""
    others = [d for d in ["concurrency", *axes] if d != x]
    lines: dict[tuple, list[dict]] = {}
    for s in steps:
        if s.get("throughput_bps") is None or s.get(x) is None:
            continue
        lines.setdefault(tuple(s.get(d) for d in others), []).append(
            {"x": s[x], "y": s["throughput_bps"], "step": s["step"]}
        )
    return [
        {"label": " · ".join(f"{sweeps.AXIS_LABELS.get(d, d)} {sweeps.value_text(d, v)}"
                              for d, v in zip(others, key, strict=True)),
         "points": sorted(points, key=lambda p: (str(type(p["x"])), p["x"]))}
        for key, points in sorted(lines.items(), key=lambda item: [str(v) for v in item[0]])
    ]  # fmt: skip


def chart(steps: list[dict], axes: list[str]) -> dict:
    """The steps chart's data: the table, and with a sweep its series by each dimension."""
    if not axes:
        return {"steps": steps, "axes": []}
    return {"steps": steps, "axes": axes, "by": {x: series(steps, x, axes) for x in ["concurrency", *axes]}}
