"""Management commands that need a migrated database say so in one sentence instead of a traceback.

Without DATABASE_URL the gateway uses SQLite ./db.sqlite3. Running e.g. `create_api_key` before
`migrate` (or with another shell's DATABASE_URL) used to create an empty db.sqlite3 and end in a long
`OperationalError: no such table` traceback. `DatabaseCommand` checks first: the database exists and
answers, and every migration is applied; otherwise a CommandError names the database and the fix.
"""

from __future__ import annotations

from pathlib import Path

from django.core.management.base import BaseCommand, CommandError
from django.db import DEFAULT_DB_ALIAS, DatabaseError, connections
from django.db.migrations.executor import MigrationExecutor


def describe_database(alias: str = DEFAULT_DB_ALIAS) -> str:
    """The database in words, without its password: 'SQLite /path/db.sqlite3' or 'postgresql://u@h:p/n'."""
    settings = connections[alias].settings_dict
    vendor = connections[alias].vendor
    if vendor == "sqlite":
        return f"SQLite {settings['NAME']}"
    user = f"{settings.get('USER')}@" if settings.get("USER") else ""
    port = f":{settings['PORT']}" if settings.get("PORT") else ""
    return f"{vendor}://{user}{settings.get('HOST') or 'localhost'}{port}/{settings.get('NAME')}"


def database_problem(alias: str = DEFAULT_DB_ALIAS) -> str | None:
    """Why commands cannot use the database yet (one sentence), or None when it is migrated."""
    connection = connections[alias]
    where = describe_database(alias)
    if _using_default(alias):
        where += " (DATABASE_URL is unset: the default is sqlite:///db.sqlite3)"
    if connection.vendor == "sqlite":
        name = str(connection.settings_dict["NAME"])
        if name != ":memory:" and not name.startswith("file:") and not Path(name).exists():
            return (
                f"no database at {where}: run `python manage.py migrate` first, "
                "or set DATABASE_URL to the database you migrated"
            )
    try:
        executor = MigrationExecutor(connection)
        plan = executor.migration_plan(executor.loader.graph.leaf_nodes())
    except DatabaseError as exc:
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        return f"cannot use the database {where}: {reason}"
    if plan:
        first = plan[0][0]
        return (
            f"the database {where} is not migrated ({len(plan)} migration(s) to apply, "
            f"starting with {first.app_label}.{first.name}): run `python manage.py migrate` first"
        )
    return None


def _using_default(alias: str) -> bool:
    import os

    return alias == DEFAULT_DB_ALIAS and not os.environ.get("DATABASE_URL")


class DatabaseCommand(BaseCommand):
    """A command that reads or writes the gateway's tables: refuses early, in one sentence, when it can't."""

    def execute(self, *args, **options):
        problem = database_problem(options.get("database") or DEFAULT_DB_ALIAS)
        if problem:
            raise CommandError(problem)
        return super().execute(*args, **options)
