"""A private OpenSSH server on a loopback port, for tests that reach "remote" hosts through ``ssh``.

Its own host key, client key and ``authorized_keys`` in a temporary directory; ``sshd -D -e -f CONFIG
-p PORT`` in the foreground (no system service, no change to the host's ssh configuration; only
Debian's privilege separation directory is made when missing, as the package's unit would). It must
run as root (sshd's privilege separation); logins are key-only, for the user running the test.
"""

from __future__ import annotations

import contextlib
import getpass
import os
import shlex
import socket
import subprocess
import time
from pathlib import Path

SSHD = "/usr/sbin/sshd"
#: sshd refuses to start as root without its privilege separation directory.
PRIVSEP_DIR = Path("/run/sshd")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class PrivateSshd:
    """``start()`` returns once a login works; ``ssh_prefix`` is the client command line a
    ``command`` lifecycle template starts with (``{host}`` follows it)."""

    def __init__(self, directory: Path) -> None:
        self.dir = directory
        self.port = 0
        self.proc: subprocess.Popen[bytes] | None = None
        self.log = directory / "sshd.log"
        self.key = directory / "client_ed25519"

    def _keygen(self, path: Path) -> None:
        subprocess.run(
            ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "kc-test", "-f", str(path)],
            check=True, stdin=subprocess.DEVNULL, timeout=30,
        )  # fmt: skip

    def _config(self) -> Path:
        config = self.dir / "sshd_config"
        config.write_text(
            "\n".join(
                [
                    "ListenAddress 127.0.0.1",
                    f"HostKey {self.dir / 'host_ed25519'}",
                    f"PidFile {self.dir / 'sshd.pid'}",
                    f"AuthorizedKeysFile {self.dir / 'authorized_keys'}",
                    "PubkeyAuthentication yes",
                    "PasswordAuthentication no",
                    "KbdInteractiveAuthentication no",
                    "UsePAM no",
                    "PermitRootLogin prohibit-password",
                    "StrictModes no",
                    f"AllowUsers {getpass.getuser()}",
                    "LogLevel INFO",
                ]
            )
            + "\n"
        )
        return config

    @property
    def ssh_prefix(self) -> str:
        """``ssh`` with this server's port and key, never prompting, never writing known_hosts."""
        return shlex.join(
            [
                "ssh", "-p", str(self.port), "-i", str(self.key),
                "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null",
                "-o", "BatchMode=yes", "-o", "IdentitiesOnly=yes", "-o", "LogLevel=ERROR",
                "-o", "ConnectTimeout=10",
            ]
        )  # fmt: skip

    def run(self, *remote: str, timeout: float = 30.0) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*shlex.split(self.ssh_prefix), "127.0.0.1", *remote],
            capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL,
        )  # fmt: skip

    def start(self, timeout: float = 60.0) -> PrivateSshd:
        self.dir.mkdir(parents=True, exist_ok=True)
        self._keygen(self.dir / "host_ed25519")
        self._keygen(self.key)
        (self.dir / "authorized_keys").write_text(Path(f"{self.key}.pub").read_text())
        os.chmod(self.dir / "authorized_keys", 0o600)
        if os.geteuid() == 0:
            PRIVSEP_DIR.mkdir(mode=0o755, exist_ok=True)
        config = self._config()
        for _ in range(3):  # another program may take the free port before sshd binds it
            self.port = _free_port()
            with self.log.open("ab") as log:
                self.proc = subprocess.Popen(
                    [SSHD, "-D", "-e", "-f", str(config), "-p", str(self.port)],
                    stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                    start_new_session=True,
                )  # fmt: skip
            deadline = time.monotonic() + timeout
            while self.proc.poll() is None and time.monotonic() < deadline:
                if self.run("true", timeout=15).returncode == 0:
                    return self
                time.sleep(0.2)  # polling a login, deadline above
            self.close()
        raise AssertionError(f"sshd did not accept a login: {self.log.read_text()[-2000:]}")

    def logins(self) -> int:
        """Logins sshd accepted so far (its own log): proof that commands went through ssh."""
        return self.log.read_text(errors="replace").count("Accepted publickey for ")

    def close(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(10)
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait(10)
