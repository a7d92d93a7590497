"""A report as one self-contained HTML file: the template filled in, the dashboard's stylesheet
and scripts inlined, the charts' documents embedded as JSON. Inline script is fine in a file
opened from disk; the dashboard's pages keep their strict Content-Security-Policy, and the
report is served as a download, never as a page of the dashboard's origin."""

from __future__ import annotations

from django.template.loader import render_to_string

from campaigns.reports import assets

TEMPLATES = {
    "run": "campaigns/report_run.html",
    "comparison": "campaigns/report_comparison.html",
    "history": "campaigns/report_history.html",
}


def render_html(context: dict) -> str:
    return render_to_string(
        TEMPLATES[context["kind"]],
        {**context, "inline_styles": assets.stylesheets(), "inline_scripts": assets.scripts()},
    )


def filename(context: dict, suffix: str) -> str:
    if context["kind"] == "history":
        return f"storageops-report-history-campaign-{context['campaign'].pk}.{suffix}"
    ids = "-".join(str(r["id"]) for r in context["provenance"]["runs"])
    return f"storageops-report-{context['kind']}-{ids}.{suffix}"
