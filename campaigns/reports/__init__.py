"""Reports an operator can hand on: one self-contained HTML file (and its PDF) per run.

`content` gathers what a report shows through the readers the pages use (never the transfer
rows), `assets` inlines the dashboard's own stylesheet, Chart.js and charts.js so the file opens
offline, `render` puts them together, `pdf` prints that file with the system's Chromium.
"""
