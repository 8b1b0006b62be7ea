"""The audit store: every attempted transition, controller event and operation, in SQL.

* ``AuditWriter`` — the ``AuditSink`` for the controller: batched, never blocking, spooling to
  local disk while the database is away (``writer``, ``spool``, ``backends``).
* ``OperationLog`` — start and finish the operations that cause transitions (``operations``).
* ``upgrade_database`` — create or upgrade the schema in place (``migrate``, ``migrations/``).
* ``build_report`` / ``render_text`` / ``render_html`` — the reports (``reports``, ``views``, ``html``).
* ``schema`` is the single source of truth; ``python -m kafka_controller.audit.ddl`` writes ``sql/``.

Names are loaded lazily, so importing one submodule does not pull in Alembic and the rest.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "AuditWriter": "writer",
    "AuditWriterStats": "writer",
    "OperationLog": "operations",
    "AuditStoreError": "engine",
    "create_audit_engine": "engine",
    "upgrade_database": "migrate",
    "downgrade_database": "migrate",
    "build_report": "reports",
    "render_text": "reports",
    "render_html": "html",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{module}"), name)
