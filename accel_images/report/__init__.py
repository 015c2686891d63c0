"""Run reports from one list of records: JSON for machines, Markdown and a static HTML grid
(templates/report.html.j2) for people, JUnit XML for CI (reports.py).

May import: build (failure causes), vendors, model, and the shared leaves.
"""
