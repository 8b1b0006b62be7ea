"""PostgreSQL for tests: a throwaway database on a shared server, or a private server to break.

* ``temporary_database(admin_url)`` creates ``<prefix>_<random>`` on an existing server and drops it
  afterwards; it never touches any other database.
* ``PrivatePostgres`` runs its own server (``initdb`` + ``pg_ctl``) in a temporary directory on a
  free port, with its unix socket in that directory, so a test can stop it (``stop("immediate")``
  is a crash as far as clients can tell) and start it again without going near the machine's
  shared server. PostgreSQL refuses to run as root; as root the helper runs the server as the
  ``postgres`` user on a directory it owns.
"""

from __future__ import annotations

import os
import pwd
import secrets
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

DEFAULT_ADMIN_URL = "postgresql+psycopg://postgres@127.0.0.1:5432/test"
_BIN_DIRS = ("/usr/lib/postgresql/17/bin", "/usr/lib/postgresql/16/bin", "/usr/lib/postgresql/15/bin")


def find_pg_bin() -> Path | None:
    """The directory holding ``initdb`` and ``pg_ctl``, or None when PostgreSQL is not installed."""
    env = os.environ.get("PG_BIN")
    candidates = [env] if env else []
    on_path = shutil.which("pg_ctl")
    candidates += [*_BIN_DIRS, str(Path(on_path).parent) if on_path else ""]
    for d in candidates:
        if d and (Path(d) / "initdb").is_file() and (Path(d) / "pg_ctl").is_file():
            return Path(d)
    return None


def _psycopg_dsn(url: str) -> str:
    from sqlalchemy.engine import make_url

    u = make_url(url)
    parts = [f"host={u.host or '127.0.0.1'}", f"port={u.port or 5432}", f"user={u.username or 'postgres'}"]
    if u.password:
        parts.append(f"password={u.password}")
    parts.append(f"dbname={u.database or 'postgres'}")
    return " ".join(parts)


def server_available(url: str = DEFAULT_ADMIN_URL, timeout: int = 3) -> bool:
    import psycopg

    try:
        with psycopg.connect(_psycopg_dsn(url), connect_timeout=timeout):
            return True
    except psycopg.Error:
        return False


@contextmanager
def temporary_database(admin_url: str = DEFAULT_ADMIN_URL, prefix: str = "audit_test") -> Iterator[str]:
    """Yield the URL of a new, empty database on the server at ``admin_url``; drop it afterwards."""
    import psycopg
    from sqlalchemy.engine import make_url

    name = f"{prefix}_{secrets.token_hex(6)}"
    with psycopg.connect(_psycopg_dsn(admin_url), autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        yield make_url(admin_url).set(database=name).render_as_string(hide_password=False)
    finally:
        with psycopg.connect(_psycopg_dsn(admin_url), autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class PrivatePostgres:
    """A private PostgreSQL server for fault injection. Use as a context manager."""

    def __init__(self, *, bin_dir: Path | None = None, port: int | None = None) -> None:
        found = bin_dir or find_pg_bin()
        if found is None:
            raise RuntimeError("PostgreSQL server binaries (initdb, pg_ctl) not found; set PG_BIN")
        self.bin_dir = found
        self.port = port or free_port()
        self.root = Path(tempfile.mkdtemp(prefix="kc-pg-"))
        self.data_dir = self.root / "data"
        self.log_file = self.root / "server.log"
        self._as_user: list[str] = []
        if os.geteuid() == 0:
            pg = pwd.getpwnam("postgres")
            os.chown(self.root, pg.pw_uid, pg.pw_gid)
            self._as_user = ["runuser", "-u", "postgres", "--"]
        try:
            self._initdb()
        except BaseException:
            shutil.rmtree(self.root, ignore_errors=True)
            raise

    @property
    def url(self) -> str:
        return self.database_url("postgres")

    def database_url(self, database: str) -> str:
        return f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/{database}"

    def _run(self, *args: str, timeout: float = 60) -> None:
        cmd = [*self._as_user, *args]
        done = subprocess.run(
            cmd, capture_output=True, text=True, timeout=timeout, cwd=self.root, check=False
        )
        if done.returncode != 0:
            log = self.log_file.read_text()[-2000:] if self.log_file.exists() else ""
            raise RuntimeError(
                f"{Path(args[0]).name} failed ({done.returncode}): {done.stderr.strip()}\n{log}"
            )

    def _initdb(self) -> None:
        self._run(
            str(self.bin_dir / "initdb"),
            "-D", str(self.data_dir),
            "-U", "postgres",
            "-A", "trust",
            "-E", "UTF8",
            "--no-sync",
            "--no-instructions",
        )  # fmt: skip

    def start(self) -> None:
        options = f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1 -c fsync=on"
        self._run(
            str(self.bin_dir / "pg_ctl"), "-D", str(self.data_dir), "-l", str(self.log_file),
            "-o", options, "-w", "-t", "60", "start",
        )  # fmt: skip

    def stop(self, mode: str = "fast") -> None:
        """``mode="immediate"`` kills the server without a checkpoint: clients see a crash."""
        self._run(str(self.bin_dir / "pg_ctl"), "-D", str(self.data_dir), "-m", mode, "-w", "stop")

    def running(self) -> bool:
        return (self.data_dir / "postmaster.pid").exists()

    def __enter__(self) -> PrivatePostgres:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        try:
            if self.running():
                self.stop("immediate")
        finally:
            shutil.rmtree(self.root, ignore_errors=True)
