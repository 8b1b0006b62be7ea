"""The audit as a web app, mounted in Airflow's API server by the plugin (``fastapi_apps``).

JSON under ``/api`` (operations, one operation's transitions, reconciliation runs and findings, the
whole report) and two HTML pages (``/``: charts, operations, findings; ``/operations/{id}``). The
report, the operations and the index page take ``cluster_id`` (ZooKeeper's ``/cluster/id``) for a
store several clusters audit to; without it they show every cluster, as before. Every
route depends on Airflow's own authentication (``requires_access_view``): a mounted sub-app gets no
auth from the API server, so it must ask for it. Pages are server-rendered with escaped values and
inline SVG charts (``audit.html``): no scripts, nothing fetched from elsewhere.
"""

from __future__ import annotations

import threading
from collections.abc import Awaitable, Callable
from html import escape
from typing import TYPE_CHECKING, Any, TypeVar, cast
from urllib.parse import urlencode

import orjson

from kafka_controller.airflow.audit_target import web_audit_url
from kafka_controller.airflow.connections import DEFAULT_AUDIT_CONN_ID
from kafka_controller.audit.engine import AuditStoreError, create_audit_engine

if TYPE_CHECKING:
    from fastapi import FastAPI, Request
    from sqlalchemy import Engine
    from starlette.responses import Response
    from starlette.types import Receive, Scope, Send

URL_PREFIX = "/kafka-controller"
EngineFactory = Callable[[], "Engine"]
#: A FastAPI dependency that authenticates and authorizes a request (raising when it may not pass).
AuthDependency = Callable[..., object]
T = TypeVar("T")


def airflow_auth() -> AuthDependency:
    """The dependency that makes Airflow authenticate and authorize each request."""
    from airflow.api_fastapi.auth.managers.models.resource_details import AccessView
    from airflow.api_fastapi.core_api.security import requires_access_view

    return requires_access_view(AccessView.PLUGINS)


#: Airflow's public login route: it sends the browser on to the auth manager's own login page.
AIRFLOW_LOGIN = "/api/v2/auth/login"


def redirect_browsers_to_login(app: FastAPI) -> None:
    """An unauthenticated browser (a request that accepts ``text/html``) is sent to Airflow's login
    page, which brings it back here afterwards (``next``); API clients keep their 401 JSON.

    Airflow's own UI does the same in its front end; a server-rendered page has no front end, and a
    bare ``{"detail": "Not authenticated"}`` tells a person nothing about where to log in."""
    from fastapi.exception_handlers import http_exception_handler
    from fastapi.responses import RedirectResponse
    from starlette.exceptions import HTTPException as StarletteHTTPException

    async def login_for_browsers(request: Request, error: Exception) -> Response:
        # registered for StarletteHTTPException alone; Starlette types every handler for Exception
        exc = cast(StarletteHTTPException, error)
        if exc.status_code == 401 and "text/html" in request.headers.get("accept", ""):
            mount = str(request.scope.get("root_path", ""))
            server = mount[: -len(URL_PREFIX)] if mount.endswith(URL_PREFIX) else mount
            here = request.url.path + (f"?{request.url.query}" if request.url.query else "")
            return RedirectResponse(f"{server}{AIRFLOW_LOGIN}?{urlencode({'next': here})}", status_code=307)
        return await http_exception_handler(request, exc)

    app.add_exception_handler(StarletteHTTPException, login_for_browsers)


def hook_engine(conn_id: str = DEFAULT_AUDIT_CONN_ID) -> EngineFactory:
    """Engine of the audit store, opened on first use: from the plugin's ``[kafka_controller]
    audit_url``, an ``AIRFLOW_CONN_*`` variable, or the api-server's metadata DB (``audit_target``);
    never through the task SDK, which the api-server must not use."""
    lock = threading.Lock()
    engine: list[Engine] = []

    def get() -> Engine:
        with lock:
            if not engine:
                url = web_audit_url(conn_id)
                if url is None:
                    raise AuditStoreError(
                        f"no audit store configured: set [kafka_controller] audit_url in airflow.cfg "
                        f"or add the connection {conn_id!r}"
                    )
                engine.append(create_audit_engine(url))
            return engine[0]

    return get


def create_app(engine: EngineFactory | None = None, *, auth: AuthDependency | None = None) -> FastAPI:
    """The FastAPI app. ``auth`` is a dependency (default: Airflow's); ``engine`` yields the engine."""
    from fastapi import Depends, FastAPI, HTTPException, Query
    from fastapi.responses import HTMLResponse

    # Imported on use: the audit store's queries load SQLAlchemy's schema and alembic (the 'audit'
    # extra), which only the api-server serving this app needs, not every process loading the plugin.
    from kafka_controller.airflow import audit_queries as q

    get_engine = engine or hook_engine()
    dependencies = [Depends(auth if auth is not None else airflow_auth())]
    app = FastAPI(
        title="Kafka controller audit",
        dependencies=dependencies,
        docs_url="/docs",
        openapi_url="/openapi.json",
    )
    redirect_browsers_to_login(app)

    def _guard(fn: Callable[[], T]) -> T:
        try:
            return fn()
        except AuditStoreError as e:
            raise HTTPException(status_code=503, detail=str(e)) from None

    @app.get("/api/operations")
    def operations(
        limit: int = Query(100, ge=1, le=q.MAX_LIMIT),
        since_ms: int | None = None,
        kind: str | None = None,
        dag_id: str | None = None,
        dry_runs: bool = False,
        cluster_id: str | None = None,
    ) -> list[dict[str, Any]]:
        return _guard(
            lambda: q.list_operations(
                get_engine(),
                limit=limit,
                since_ms=since_ms,
                kind=kind,
                dag_id=dag_id,
                dry_runs=dry_runs,
                cluster_id=cluster_id,
            )
        )

    @app.get("/api/operations/{operation_id}")
    def operation(operation_id: str) -> dict[str, Any]:
        row = _guard(lambda: q.get_operation(get_engine(), operation_id))
        if row is None:
            raise HTTPException(status_code=404, detail=f"no operation {operation_id}")
        return row

    @app.get("/api/operations/{operation_id}/transitions")
    def transitions(
        operation_id: str, limit: int = Query(1000, ge=1, le=q.MAX_LIMIT)
    ) -> list[dict[str, Any]]:
        if _guard(lambda: q.get_operation(get_engine(), operation_id)) is None:
            raise HTTPException(status_code=404, detail=f"no operation {operation_id}")
        return _guard(lambda: q.operation_transitions(get_engine(), operation_id, limit=limit))

    @app.get("/api/reconciliation/runs")
    def runs(limit: int = Query(50, ge=1, le=q.MAX_LIMIT)) -> list[dict[str, Any]]:
        return _guard(lambda: q.reconciliation_runs_rows(get_engine(), limit=limit))

    @app.get("/api/reconciliation/findings")
    def findings(
        run_id: str | None = None, limit: int = Query(1000, ge=1, le=q.MAX_LIMIT)
    ) -> list[dict[str, Any]]:
        return _guard(lambda: q.reconciliation_findings_rows(get_engine(), run_id=run_id, limit=limit))

    @app.get("/api/report")
    def report(
        since_ms: int | None = None,
        operation_id: str | None = None,
        limit: int = Query(100, ge=1, le=1000),
        dry_runs: bool = False,
        cluster_id: str | None = None,
    ) -> dict[str, Any]:
        # Imported on use: the audit's report loads SQLAlchemy's schema and alembic (the 'audit'
        # extra), which only the api-server serving this app needs.
        from kafka_controller.audit.reports import build_report

        return _guard(
            lambda: build_report(
                get_engine(),
                since_ms=since_ms,
                operation_id=operation_id,
                limit=limit,
                dry_runs=dry_runs,
                cluster_id=cluster_id,
            )
        )

    @app.get("/", response_class=HTMLResponse)
    def index(since_ms: int | None = None, dry_runs: bool = False, cluster_id: str | None = None) -> str:
        # Imported on use: the audit's report loads SQLAlchemy's schema and alembic (the 'audit'
        # extra), which only the api-server serving this app needs.
        from kafka_controller.audit.html import render_html
        from kafka_controller.audit.reports import build_report

        def page() -> str:
            eng = get_engine()
            report = build_report(eng, since_ms=since_ms, limit=50, dry_runs=dry_runs, cluster_id=cluster_id)
            doc = render_html(report)
            ops = q.list_operations(
                eng, limit=50, since_ms=since_ms, dry_runs=dry_runs, cluster_id=cluster_id
            )
            here = {"cluster_id": cluster_id} if cluster_id else {}
            toggle = (
                f'<a href="?{escape(urlencode(here))}">real operations only</a>'
                if dry_runs
                else f'<a href="?{escape(urlencode({**here, "dry_runs": "true"}))}">include dry runs</a>'
            )
            extra = [
                *_cluster_nav(report.get("clusters") or [], cluster_id, dry_runs),
                "<h2>Operations (latest 50)</h2>",
                f"<nav>{toggle}</nav>",
                _operations_table(ops),
                *_findings_section(eng, cluster_id),
            ]
            return doc.replace("</body>", "".join(extra) + "</body>")

        return str(_guard(page))

    @app.get("/operations/{operation_id}", response_class=HTMLResponse)
    def operation_page(operation_id: str) -> str:
        def page() -> str | None:
            eng = get_engine()
            op = q.get_operation(eng, operation_id)
            if op is None:
                return None
            return _operation_document(op, q.operation_transitions(eng, operation_id, limit=5000))

        html = _guard(page)
        if html is None:
            raise HTTPException(status_code=404, detail=f"no operation {operation_id}")
        return str(html)

    return app


_OPERATION_FIELDS = (
    "kind",
    "status",
    "dry_run",
    "requester",
    "reason",
    "cluster_id",
    "principal",
    "client_id",
    "client_address",
    "started_ms",
    "finished_ms",
    "airflow_dag_id",
    "airflow_run_id",
    "airflow_task_id",
    "error",
)


def _operation_document(op: dict[str, Any], rows: list[dict[str, Any]]) -> str:
    """One operation: what was asked (fields, parameters), what came of it (result), and the
    transitions it caused or, for a dry run, planned."""
    # Imported on use: the audit's pages load SQLAlchemy's schema and alembic (the 'audit'
    # extra), which only the api-server serving this app needs, not every process loading the plugin.
    from kafka_controller.audit.html import document, table

    fields = {k: op.get(k) for k in _OPERATION_FIELDS}
    if op.get("started_ms") is not None and op.get("finished_ms") is not None:
        fields["duration_ms"] = op["finished_ms"] - op["started_ms"]
    body = ['<nav><a href="../">&larr; all operations</a></nav>']
    if op.get("dry_run"):
        body.append(
            '<p class="plan">Dry run: nothing was changed. The transitions below are what the real '
            "run would make, as the controller planned them on a copy of the cluster.</p>"
        )
    if op.get("status") == "failed":
        body.append(f'<p class="warn">Failed: {escape(str(op.get("error") or "no error recorded"))}</p>')
    body += [
        table([{k: v for k, v in fields.items() if v is not None}]),
        "<h2>Result</h2>",
        _result_html(op.get("result")),
        "<h2>Parameters</h2>",
        f"<pre>{escape(_json(op.get('parameters')))}</pre>",
        f"<h2>Transitions: {len(rows)}{' planned' if op.get('dry_run') else ''}</h2>",
        table(rows),
    ]
    return document(f"Operation {op['operation_id']}", body)


def _result_html(result: Any) -> str:
    """Headline figures first (a drill's election and recovery, counts), then the whole result."""
    # Imported on use: the audit's pages load SQLAlchemy's schema and alembic (the 'audit'
    # extra), which only the api-server serving this app needs, not every process loading the plugin.
    from kafka_controller.audit.html import table

    if result is None:
        return (
            '<p class="note">No result recorded (the operation is running, failed, or predates results).</p>'
        )
    if not isinstance(result, dict):
        return f"<pre>{escape(_json(result))}</pre>"
    headline = {
        k: (_json(v) if isinstance(v, dict | list) else v)
        for k, v in result.items()
        if not isinstance(v, list) or len(v) <= 5
    }
    return (
        table([headline])
        + f"<details><summary>All of it (JSON)</summary><pre>{escape(_json(result))}</pre></details>"
    )


def _cluster_nav(clusters: list[str | None], current: str | None, dry_runs: bool) -> list[str]:
    """Links to each cluster's view when the store holds more than one."""
    known = [c for c in clusters if c is not None]
    if len(known) < 2 and not current:
        return []
    flag = {"dry_runs": "true"} if dry_runs else {}
    links = [f'<a href="?{escape(urlencode(flag))}">all clusters</a>'] + [
        f'<a href="?{escape(urlencode({"cluster_id": c, **flag}))}">{escape(c)}</a>' for c in known
    ]
    shown = f"cluster {escape(current)}" if current else f"all {len(known)} clusters together"
    return [
        f'<p class="note">This store holds {len(known)} clusters; showing {shown}.</p>',
        f"<nav>{' | '.join(links)}</nav>",
    ]


def _findings_section(engine: Engine, cluster_id: str | None = None) -> list[str]:
    """Findings of the latest completed reconciliation, and a warning naming any later run that
    did not complete (its failure must not hide the findings before it)."""
    # Imported on use: the audit store's queries load SQLAlchemy's schema and alembic (the 'audit'
    # extra), which only the api-server serving this app needs, not every process loading the plugin.
    from kafka_controller.airflow import audit_queries as q
    from kafka_controller.audit.html import table
    from kafka_controller.audit.reports import format_ms

    latest, later = q.latest_completed_run(engine, cluster_id)
    out = ["<h2>Reconciliation findings (latest completed run)</h2>"]
    for run in later:
        what = "is still running" if run["status"] == "running" else f"did not complete ({run['status']})"
        detail = f": {run['detail']}" if run.get("detail") else ""
        out.append(
            f'<p class="warn">A later run, {escape(str(run["run_id"]))} started '
            f"{escape(format_ms(run['started_ms']))}, {escape(what)}{escape(detail[:500])}</p>"
        )
    if latest is None:
        out.append('<p class="note">No reconciliation run has completed yet.</p>')
        return out
    rows = q.reconciliation_findings_rows(engine, run_id=latest["run_id"], limit=200)
    out.append(
        f'<p class="note">Run {escape(str(latest["run_id"]))}, finished '
        f"{escape(format_ms(latest['finished_ms']))}: {latest.get('findings_count') or 0} findings over "
        f"{latest.get('partitions_checked') or 0} partitions checked.</p>"
    )
    out.append(table(rows))
    return out


def _operations_table(rows: list[dict[str, Any]]) -> str:
    """Operations with a link to each one's page (every value escaped)."""
    # Imported on use: the audit's pages load SQLAlchemy's schema and alembic (the 'audit'
    # extra), which only the api-server serving this app needs, not every process loading the plugin.
    from kafka_controller.audit.reports import format_value

    if not rows:
        return '<p class="note">No operations recorded.</p>'
    cols = [c for c in rows[0] if c not in ("parameters", "result")]
    head = "".join(f"<th>{escape(c)}</th>" for c in cols)
    body = []
    for r in rows:
        cells = []
        for c in cols:
            text = escape(format_value(c, r[c]))
            if c == "operation_id":
                text = f'<a href="operations/{escape(str(r[c]), quote=True)}">{text}</a>'
            cells.append(f"<td>{text}</td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    return f"<table><tr>{head}</tr>{''.join(body)}</table>"


def _json(value: Any) -> str:
    return orjson.dumps(value, option=orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS).decode()


class LazyApp:
    """An ASGI app that builds the FastAPI app on its first request, so loading the plugin in
    schedulers and workers does not import FastAPI or open the audit store."""

    def __init__(self, factory: Callable[[], FastAPI]) -> None:
        self._factory = factory
        self._app: FastAPI | None = None
        self._lock = threading.Lock()

    def __call__(self, scope: Scope, receive: Receive, send: Send) -> Awaitable[None]:
        app = self._app
        if app is None:
            with self._lock:
                if self._app is None:
                    self._app = self._factory()
                app = self._app
        return app(scope, receive, send)
