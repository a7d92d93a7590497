"""Steps that ended before FTS put their link limit in force.

StorageOps sets a step's concurrency on FTS's links (min_active = max_active), but FTS's
scheduler obeys the optimizer's value for a link, which the optimizer takes from that range only
at its next pass (OptimizerInterval, 60 s by default; 20 s on the FTS 3.14.4 checked here). A
step whose files are all handed out before that pass runs under the previous step's limit: on
that FTS, a 64-MiB step of 4 with 12 files never had more than 3 copies in flight (1.56 on
average). Its figures are then the previous concurrency's, whatever the step is called.

A step is read so when its run went through FTS with link limits managed by StorageOps, the step
never reached its concurrency (RunStep.measured_from, from FTS's own start times, is unset), it
had at least that many files to copy (a step given fewer cannot fill its slots, whatever FTS
does), and none of its copies ran at the target.
"""

from __future__ import annotations

from campaigns.models import Run, RunStep
from campaigns.results import concurrency

# FTS's own default OptimizerInterval: what the sentence quotes, as the instance's is not known here.
DEFAULT_OPTIMIZER_INTERVAL = 60


def managed_by_storageops(snapshot: dict) -> bool:
    """The run went through an FTS instance whose links StorageOps pinned per step (as its
    snapshot froze it)."""
    return bool((snapshot.get("fts") or {}).get("manage_link_limits"))


def not_in_force(run: Run, steps: list[dict]) -> dict | None:
    """{"steps": [...], "measure_files": n} for the steps that ended before FTS put their link
    limit in force; None when there are none (or the run did not pin FTS's links)."""
    if not managed_by_storageops(run.snapshot or {}):
        return None
    steps_of = RunStep.objects.filter(run=run).values_list("index", "measured_from")
    finished = dict(steps_of.filter(ended_at__isnull=False))
    if run.finished_at is not None:
        # The last step has no end of its own: the run's end is its end.
        finished.update(steps_of.filter(ended_at__isnull=True))
    by_index = {s["step"]: s for s in steps}
    found = []
    for s in steps:
        mean, peak, off = concurrency.achieved(s)
        target = s.get("concurrency")
        files = (s.get("files_ok") or 0) + (s.get("files_failed") or 0)
        if s["step"] not in finished or finished[s["step"]] is not None:
            continue
        if not off or mean is None or peak is None or not target or peak >= target or files < target:
            continue
        before = by_index.get(s["step"] - 1)
        found.append(
            {"step": s["step"], "concurrency": target, "achieved_mean": mean, "achieved_max": peak, "files": files,
             "previous": before.get("concurrency") if before else None}
        )  # fmt: skip
    if not found:
        return None
    options = ((run.snapshot or {}).get("parameters") or {}).get("engine_options") or {}
    return {"steps": found, "measure_files": options.get("measure_files") or 0}


def sentence(lag: dict) -> str:
    """The verdict's Link limit row: which steps ran under an earlier limit, and what to change."""
    steps = "; ".join(
        f"×{f['concurrency']} had at most {f['achieved_max']} in flight ({f['achieved_mean']:.2f} on average"
        + (f", ×{f['previous']}'s limit still in force" if f.get("previous") else "")
        + f") over its {f['files']} files"
        for f in lag["steps"]
    )
    remedy = (
        "set the campaign's FTS option \"Files measured at the step's concurrency\" (measure_files): each step "
        "then gets that many files more and is measured from when FTS runs it at its concurrency"
        if not lag.get("measure_files")
        else "give each step more files (measure_files), enough to outlast an optimizer pass"
    )
    return (
        f"Link limit not yet in force: {steps}. FTS applies a link's limit only at its optimizer's next pass "
        f"(OptimizerInterval, {DEFAULT_OPTIMIZER_INTERVAL} s by default), and the step's files were all handed out "
        f"before it: its figures are those of a lower concurrency. To measure it, {remedy}, or shorten the "
        "instance's OptimizerInterval."
    )
