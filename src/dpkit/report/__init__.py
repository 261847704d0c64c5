"""HTML reports: a release, or a ledger's dataset with its burn-down and its queries as run.

Entry points: :func:`release_html` (also ``Release.to_html()``, which this package registers
through :func:`dpkit.core.record.register_html` when imported), :func:`ledger_report`,
:func:`session_report` (a session's releases, with or without a ledger), and
``dpkit report LEDGER DATASET`` on the command line. Charts need matplotlib
(``pip install 'dpkit[plot]'``). A report is a single HTML file with its charts inline (PNG
data URIs), no script, and a Content-Security-Policy that forbids scripts and network access;
every user-supplied text in it is escaped.
"""

from __future__ import annotations

from dpkit.core.record import register_html
from dpkit.report.ledger import ledger_report
from dpkit.report.release import Truth, release_html, release_section
from dpkit.report.session import session_report

__all__ = ["release_html", "release_section", "ledger_report", "session_report", "Truth"]

register_html(release_html, section=release_section)
