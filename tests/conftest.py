"""Shared fixtures: databases (SQLite in a temp dir, and the real PostgreSQL on 127.0.0.1) and
a CLI runner bound to a private $REGTRIAGE_HOME."""

from __future__ import annotations

import os
import uuid
from pathlib import Path

import pytest

PG_URL = os.environ.get("REGTRIAGE_TEST_PG", "postgresql+psycopg://postgres@127.0.0.1:5432/test")
REPO = Path(__file__).resolve().parent.parent
CORPUS = Path(os.environ.get("REGTRIAGE_CORPUS", REPO.parent / "shared" / "corpus"))
BUNDLED_CORPUS = REPO / "tests" / "data" / "corpus"


def _pg_available() -> str | None:
    try:
        import psycopg

        with psycopg.connect(PG_URL.replace("postgresql+psycopg", "postgresql"), connect_timeout=3):
            return None
    except Exception as exc:  # noqa: BLE001
        return f"PostgreSQL not reachable at {PG_URL}: {exc}"


@pytest.fixture(scope="session")
def pg_server():
    reason = _pg_available()
    if reason:
        if os.environ.get("CI") or os.environ.get("REGTRIAGE_REQUIRE_PG"):
            pytest.fail(reason)
        pytest.skip(reason)
    return PG_URL


@pytest.fixture
def pg_url(pg_server):
    """A fresh schema in the real PostgreSQL, dropped afterwards."""
    import psycopg

    schema = f"rt_{uuid.uuid4().hex[:12]}"
    plain = pg_server.replace("postgresql+psycopg", "postgresql")
    with psycopg.connect(plain, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')
    sep = "&" if "?" in pg_server else "?"
    yield f"{pg_server}{sep}options=-csearch_path%3D{schema}"
    with psycopg.connect(plain, autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA "{schema}" CASCADE')


@pytest.fixture
def sqlite_url(tmp_path):
    return f"sqlite:///{tmp_path / 'regtriage.sqlite3'}"


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def db_url(request, tmp_path):
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'regtriage.sqlite3'}"
    return request.getfixturevalue("pg_url")


@pytest.fixture
def store(db_url):
    from storage.store import Store

    s = Store(db_url)
    yield s
    s.close()


@pytest.fixture
def home(tmp_path, monkeypatch):
    h = tmp_path / "home"
    monkeypatch.setenv("REGTRIAGE_HOME", str(h))
    monkeypatch.delenv("REGTRIAGE_DB", raising=False)
    monkeypatch.delenv("REGTRIAGE_CONFIG", raising=False)
    monkeypatch.chdir(tmp_path)
    return h


@pytest.fixture
def cli(home):
    """Run the click app in-process: cli("ingest", path, "--json") -> Result."""
    from click.testing import CliRunner

    from bot.cli.main import main

    runner = CliRunner()

    def run(*args, db: str | None = None):
        argv = (["--db", db] if db else []) + [str(a) for a in args]
        return runner.invoke(main, argv, catch_exceptions=False)

    return run


@pytest.fixture
def corpus_dir():
    for candidate in (CORPUS, BUNDLED_CORPUS):
        if (candidate / "seeds").is_dir():
            return candidate
    pytest.skip("no labelled corpus found")


@pytest.fixture
def new_record(store):
    """Insert a bare regression record into ``store`` (for the tables that reference one):
    ``new_record(status="confirmed")`` -> its id."""
    from sqlalchemy import insert

    import storage.tracker_schema as ts
    from storage.store import utcnow

    def make(**fields) -> int:
        now = utcnow()
        row = {"title": "a regression", "status": "reported", "hardware": {}, "config": {}, "numbers": {},
               "evidence": {}, "overrides": {}, "created_at": now, "updated_at": now, **fields}
        with store.engine.begin() as conn:
            return conn.execute(insert(ts.regressions).values(**row)).inserted_primary_key[0]

    return make
