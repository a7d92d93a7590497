"""A report printed to PDF by the system's Chromium, so the charts in the PDF are the ones the
HTML file draws (the same Chart.js and charts.js, the same data)."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path

from django.conf import settings

TIMEOUT_SECONDS = 60
# Time Chromium's clock may run ahead for the page's scripts before it prints (charts drawn).
SCRIPT_BUDGET_MS = 10_000
# The width between an A4 landscape page's 10-mm margins (the report's @page), in CSS pixels:
# Chart.js sizes its charts for the window, which is the printed page's width.
PAGE_WINDOW = "1047,740"


class PdfUnavailable(Exception):
    """No Chromium to print with, or it failed: the caller answers 503 with this message."""


def chromium() -> str | None:
    configured = getattr(settings, "STORAGEOPS_CHROMIUM", "")
    if configured:
        return configured if Path(configured).is_file() else None
    return shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")


def print_pdf(html: str, timeout: float = TIMEOUT_SECONDS) -> bytes:
    """The HTML report as PDF bytes. The file is written to a private temporary folder and opened
    from file://: the report needs no network, and Chromium gets an argument list, no shell."""
    binary = chromium()
    if binary is None:
        raise PdfUnavailable(
            "PDF reports need Chromium on the web server, and none was found: install it (Debian: apt install "
            "chromium) or set STORAGEOPS_CHROMIUM; the HTML report works without it."
        )
    with tempfile.TemporaryDirectory(prefix="storageops-report-") as folder:
        page, pdf = Path(folder) / "report.html", Path(folder) / "report.pdf"
        page.write_text(html, encoding="utf-8")
        command = [
            binary, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
            "--disable-background-networking", "--disable-component-update", "--no-first-run",
            f"--user-data-dir={folder}/profile", f"--virtual-time-budget={SCRIPT_BUDGET_MS}",
            f"--window-size={PAGE_WINDOW}", "--hide-scrollbars", "--no-pdf-header-footer",
            f"--print-to-pdf={pdf}", page.as_uri(),
        ]  # fmt: skip
        try:
            done = subprocess.run(command, capture_output=True, timeout=timeout, check=False)
        except subprocess.TimeoutExpired as exc:
            raise PdfUnavailable(f"Chromium took more than {timeout:g} s to print the report.") from exc
        if not pdf.is_file() or pdf.stat().st_size == 0:
            tail = done.stderr.decode(errors="replace").strip().splitlines()[-3:]
            raise PdfUnavailable(f"Chromium printed no PDF (exit {done.returncode}): {' '.join(tail)}")
        return pdf.read_bytes()
