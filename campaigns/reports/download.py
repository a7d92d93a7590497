"""A report as the web page and the API serve it: a download, HTML or PDF, or a 503 that says
why the PDF cannot be made."""

from __future__ import annotations

from django.http import HttpResponse

from campaigns.reports import pdf, render
from storageops.api.errors import error_response


def response(context: dict, as_pdf: bool, api: bool = False) -> HttpResponse:
    """The report as a download; `api`: a failure is answered in the API's JSON error shape."""
    html = render.render_html(context)
    if not as_pdf:
        answer = HttpResponse(html, content_type="text/html; charset=utf-8")
        suffix = "html"
    else:
        try:
            answer = HttpResponse(pdf.print_pdf(html), content_type="application/pdf")
        except pdf.PdfUnavailable as exc:
            if api:
                return error_response(503, str(exc))
            return HttpResponse(f"{exc}\n", status=503, content_type="text/plain; charset=utf-8")
        suffix = "pdf"
    # A download, never a page of the dashboard: its inline scripts are for the file opened from disk.
    answer["Content-Disposition"] = f'attachment; filename="{render.filename(context, suffix)}"'
    answer["Cache-Control"] = "private, no-store"
    return answer
