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


def across_runs(runs: list[tuple[str, bool, object, list[dict]]], x: str) -> list[dict]:
    """Compared runs' steps against any parameter `x`: each run's (label, disturbed, spec, steps).

    Where some run sweeps `x` (or `x` is the concurrency), each run keeps its own lines, one per
    setting of its other swept knobs. Where every run holds `x` fixed (runs of campaigns that
    differ in streams, or in file size), the runs' steps are lined up across runs instead, one
    line per concurrency (and per setting of what they sweep): throughput against streams over
    several campaigns, Tokyo's way. A step's value of a knob the run did not sweep is the run's.
    """

    def filled(spec, steps: list[dict], axes: list[str]) -> list[dict]:
        return [{**s, **{a: s.get(a, getattr(spec, a, None)) for a in {x, *axes} - {"concurrency"}}} for s in steps]

    within = x == "concurrency" or any(x in spec.swept_axes for _, _, spec, _ in runs)
    if within:
        lines = []
        for label, disturbed, spec, steps in runs:
            for line in series(filled(spec, steps, spec.swept_axes), x, [a for a in spec.swept_axes if a != x]):
                name = f"{label} · {line['label']}" if line["label"] else label
                lines.append({**line, "label": name, "disturbed": disturbed})
        return lines
    axes = sorted({a for _, _, spec, _ in runs for a in spec.swept_axes}, key=sweeps.AXES.index)
    rows = [row for _, _, spec, steps in runs for row in filled(spec, steps, axes)]
    return [{**line, "disturbed": False} for line in series(rows, x, axes)]
