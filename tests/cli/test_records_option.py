"""``--records`` names the records setting of ``dispatch supervise``; ``--store``, its old spelling, still works
for one release with a note on stderr."""

from __future__ import annotations

from dispatch.cli.exitcodes import Exit

from .conftest import Env

NOTE = "--store is deprecated, use --records"


def test_records_opens_the_given_store_without_a_note(cli: Env) -> None:
    where = cli.home / "given.db"
    p = cli.run("supervise", "--once", "--records", str(where))
    assert p.returncode == 0, p.stderr
    assert where.exists() and NOTE not in p.stderr


def test_store_still_opens_the_given_store_with_a_note(cli: Env) -> None:
    where = cli.home / "old.db"
    p = cli.run("supervise", "--once", "--store", str(where))
    assert p.returncode == 0, p.stderr
    assert where.exists() and NOTE in p.stderr
    assert "--store" not in cli.run("supervise", "--help").stdout  # hidden: the help teaches one name


def test_records_and_store_that_differ_are_a_usage_error(cli: Env) -> None:
    p = cli.run("supervise", "--once", "--records", str(cli.home / "a.db"), "--store", str(cli.home / "b.db"))
    assert p.returncode == Exit.USAGE, (p.stdout, p.stderr)
    assert "--records and --store (its old spelling) differ" in p.stderr and "Traceback" not in p.stderr
    assert not (cli.home / "a.db").exists() and not (cli.home / "b.db").exists()
