"""A throwaway PostgreSQL server for tests and benchmarks: initdb in a temporary directory, a free port.

PostgreSQL refuses to run as root, so under root the cluster belongs to the `postgres` system user
(Debian's package makes it) or `nobody`, and runs as that user (`runuser`). The socket and the data
live in the temporary directory; the server listens on loopback only and trusts local connections.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import psycopg

from engram_index.errors import StorageError


def find_binaries() -> Path | None:
    """The directory of initdb and postgres: $PG_BIN, the PATH, or Debian's versioned directories (newest)."""
    env = os.environ.get("PG_BIN")
    if env:
        return Path(env)
    found = shutil.which("initdb")
    if found:
        return Path(found).parent
    versions = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(Path(p).parts[-3]))
    return Path(versions[-1]).parent if versions else None


def _free_port() -> int:
    """A loopback port nobody listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class PostgresServer:
    """One running throwaway cluster; `database()` makes a fresh, empty database in it."""

    def __init__(self, binaries: Path | None = None) -> None:
        """Create and start the cluster (StorageError, with initdb's or the server's words, when it cannot)."""
        found = binaries or find_binaries()
        if found is None:
            raise StorageError("no PostgreSQL server binaries (initdb): install Debian's postgresql or set PG_BIN")
        self.bin = found
        self.root = Path(tempfile.mkdtemp(prefix="engram-pg-"))
        self.data = self.root / "data"
        self.port = _free_port()
        self._user: str | None = None
        if os.geteuid() == 0:
            self._user = "postgres" if _has_user("postgres") else "nobody"
            entry = pwd.getpwnam(self._user)
            os.chown(self.root, entry.pw_uid, entry.pw_gid)
        self._count = 0
        self._run([str(self.bin / "initdb"), "-D", str(self.data), "-U", "postgres", "--auth=trust",
                   "--encoding=UTF8", "--locale=C", "--no-sync"])
        self.start()
        self.url = f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def _run(self, argv: list[str]) -> None:
        """Run a server tool as the cluster's user; its output in the error when it fails."""
        if self._user is not None:
            argv = ["runuser", "-u", self._user, "--", *argv]
        try:
            done = subprocess.run(argv, capture_output=True, text=True, cwd=self.root)
        except OSError as exc:
            raise StorageError(f"cannot run {argv[0]}: {exc}") from exc
        if done.returncode != 0:
            log = self.root / "server.log"
            tail = log.read_text()[-2000:] if log.exists() else ""
            tool = next(Path(a).name for a in argv if a.startswith(str(self.bin)))
            raise StorageError(f"{tool} failed:"
                               f" {done.stderr.strip() or done.stdout.strip()} {tail}")

    def database(self) -> str:
        """A new empty database's URL."""
        self._count += 1
        name = f"t{os.getpid()}_{self._count}"
        with psycopg.connect(self.url, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}" TEMPLATE template0 ENCODING \'UTF8\' LOCALE \'C\'')
        return f"postgresql://postgres@127.0.0.1:{self.port}/{name}"

    def restart(self, down_s: float = 0.0) -> None:
        """Stop the server (fast: connections are cut), wait `down_s`, start it again on the same port."""
        self.stop()
        time.sleep(down_s)
        self.start()

    def start(self) -> None:
        """Start the server on its port (fsync off: a test server's durability is not under test)."""
        self._run([str(self.bin / "pg_ctl"), "-D", str(self.data), "-l", str(self.root / "server.log"), "-w",
                   "-t", "60", "-o", f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1"
                   " -c fsync=off -c max_connections=200", "start"])

    def stop(self) -> None:
        """Stop the server (its files stay until close)."""
        self._run([str(self.bin / "pg_ctl"), "-D", str(self.data), "-m", "fast", "-w", "stop"])

    def close(self) -> None:
        """Stop the server and delete its files."""
        try:
            self.stop()
        except StorageError:
            pass  # already stopped
        shutil.rmtree(self.root, ignore_errors=True)


def _has_user(name: str) -> bool:
    """Whether the system has this user."""
    try:
        pwd.getpwnam(name)
    except KeyError:
        return False
    return True
