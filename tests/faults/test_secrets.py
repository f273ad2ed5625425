"""Secrets stay secret: a planted password or token never appears in logs, records, errors or JSON output; record
files are private; SSH host keys are verified unless the user turns that off by name.

The planted secret is a random string, so a match anywhere is a leak, not a coincidence.
"""

from __future__ import annotations

import dataclasses
import json
import os
import secrets
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from dispatch.errors import ConfigError, Unavailable
from dispatch.records.postgres import PostgresRecords, redact
from dispatch.settings import decode

SRC = Path(os.environ.get("DISPATCH_TEST_SRC", Path(__file__).resolve().parents[2] / "src"))
DSN_HOST = "127.0.0.1"
PG_DB = os.environ.get("DISPATCH_TEST_POSTGRES_DB", "dispatch_test")


def planted() -> str:
    return f"s3cr3t-{secrets.token_hex(8)}"


def supervise(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "dispatch.supervise", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=dict(os.environ, PYTHONPATH=str(SRC)),
    )


# ----- settings errors -----------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class WithSecret:
    user: str = "ada"
    password: str | None = dataclasses.field(default=None, metadata={"secret": True})
    port: int = 22

    def __post_init__(self) -> None:
        if self.password is not None and len(self.password) > 64:
            raise ValueError(f"password {self.password!r} is too long")


@pytest.mark.parametrize(
    "make",
    [
        lambda s: {"password": 12345, "port": "x"},  # a wrong type: the error must not echo the (int) value
        lambda s: {"password": s * 5},  # __post_init__ echoes it
        lambda s: {"password": [s]},
        lambda s: {"password": {"nested": s}},
    ],
)
def test_settings_errors_never_echo_a_secret_field(make: Any) -> None:
    secret = planted()
    value = make(secret)
    with pytest.raises(ConfigError) as info:
        decode(WithSecret, value)
    text = str(info.value) + repr(info.value.message)
    assert secret not in text
    if value.get("password") == 12345:
        assert "12345" not in text
    assert info.value.path in ("password", "port", "")


def test_bad_settings_json_is_not_echoed() -> None:
    secret = planted()
    r = supervise("--adapter", "memory", "--settings", '{"cluster": "' + secret, "--store", ":memory:")
    assert r.returncode == 2, r.stderr
    assert "settings" in r.stderr and "not valid JSON" in r.stderr
    assert secret not in r.stdout + r.stderr


# ----- the record store -------------------------------------------------------------------------------------------


def test_redact_hides_passwords_in_both_dsn_forms() -> None:
    secret = planted()
    assert secret not in redact(f"postgresql://u:{secret}@h:5432/db")
    assert secret not in redact(f"host=h password={secret} dbname=db")
    assert secret not in redact(f"host=h PASSWORD = {secret} dbname=db")


def test_unreachable_postgres_error_hides_the_password() -> None:
    secret = planted()
    for dsn in (f"postgresql://postgres:{secret}@{DSN_HOST}:1/{PG_DB}", f"host={DSN_HOST} port=1 password={secret}"):
        with pytest.raises(Unavailable) as info:
            PostgresRecords(dsn, connect_timeout=2)
        assert secret not in str(info.value)
        assert "cannot connect to PostgreSQL" in str(info.value)


def test_supervisor_process_never_prints_the_dsn_password() -> None:
    secret = planted()
    r = supervise("--adapter", "memory", "--store", f"postgresql://postgres:{secret}@{DSN_HOST}:1/{PG_DB}")
    assert r.returncode == 6, r.stdout + r.stderr  # Exit.UNAVAILABLE
    assert secret not in r.stdout + r.stderr
    assert "cannot connect" in r.stderr


@pytest.mark.postgres
def test_a_supervisor_with_a_password_in_its_dsn_leaks_it_nowhere(tmp_path: Path) -> None:
    """trust auth ignores the password, so the DSN connects: run cycles on a job, then grep every output."""
    import dispatch
    from dispatch.spec import JobSpec

    secret = planted()
    schema = f"sec_{secrets.token_hex(4)}"
    dsn = f"postgresql://postgres:{secret}@{DSN_HOST}:5432/{PG_DB}"
    try:
        store = PostgresRecords(dsn, schema=schema)
    except Unavailable as exc:
        pytest.fail(f"{exc}\nstart PostgreSQL (scripts/postgres-up.sh) or set DISPATCH_TEST_POSTGRES")
    try:
        cluster = dispatch.open("memory", dispatch.Config(adapter={"cluster": schema}, records=store, name="memory"))
        job_id = cluster.submit(JobSpec(command=("true",), name="secret-test"))
        r = supervise(
            "--adapter", "memory", "--settings", json.dumps({"cluster": schema}), "--store", dsn,
            "--schema", schema, "--cluster", "memory", "--poll", "0.5", "--until", "2", "--trace-calls",
        )  # fmt: skip
        assert r.returncode == 0, r.stderr
        assert '"cycle"' in r.stdout
        blob = r.stdout + r.stderr
        blob += json.dumps([j.to_json() for j in store.jobs(active_only=False)])
        blob += json.dumps([e.to_json() for e in store.events(job_id)])
        assert secret not in blob
    finally:
        store.drop()
        store.close()


def test_the_supervisor_creates_its_sqlite_store_private(tmp_path: Path) -> None:
    path = tmp_path / "state" / "records.db"
    path.parent.mkdir()
    r = supervise("--adapter", "memory", "--store", str(path), "--poll", "0.5", "--until", "0.5")
    assert r.returncode == 0, r.stderr
    mode = stat.S_IMODE(path.stat().st_mode)
    assert mode == 0o600, oct(mode)


# ----- the dispatch command ---------------------------------------------------------------------------------------


def dispatch_cli(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DISPATCH_", "XDG_"))}
    env.update(
        PYTHONPATH=str(SRC), XDG_CONFIG_HOME=str(home / "config"), XDG_STATE_HOME=str(home / "state"), NO_COLOR="1"
    )
    return subprocess.run(
        [sys.executable, "-c", "import sys; from dispatch.cli.main import main; sys.exit(main())", *args],
        env=env,
        cwd=home,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_the_cli_never_prints_a_configured_token(tmp_path: Path) -> None:
    secret = planted()
    config = tmp_path / "config" / "dispatch" / "config.toml"
    config.parent.mkdir(parents=True)
    config.write_text(
        'default = "kf"\n'
        "[clusters.kf]\n"
        'adapter = "kubeflow"\n'
        "[clusters.kf.settings]\n"
        'server = "https://127.0.0.1:1"\n'
        f'token = "{secret}"\n'
        "[clusters.bad]\n"
        'adapter = "kubeflow"\n'
        "[clusters.bad.settings]\n"
        f'token = ["{secret}"]\n'
    )
    outputs = []
    for args in (
        ("clusters", "--json"),
        ("clusters",),
        ("preflight", "--json"),
        ("capabilities", "--json"),
        ("status", "--json"),
        ("--cluster", "bad", "status", "--json"),
        ("--cluster", "bad", "preflight", "--json"),
    ):
        p = dispatch_cli(tmp_path, *args)
        outputs.append(f"{args}: rc {p.returncode}\n{p.stdout}\n{p.stderr}")
    blob = "\n".join(outputs)
    assert secret not in blob, blob
    assert "<redacted>" in outputs[0], outputs[0]
    records = tmp_path / "state" / "dispatch" / "records.db"
    if records.exists():
        assert secret.encode() not in records.read_bytes()
