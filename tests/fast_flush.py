"""The end of a transactional test (``django_db(transaction=True)``) empties the tables with DELETE, not
TRUNCATE.

pytest-django ends such a test with Django's ``flush``: one ``TRUNCATE`` of every table, then the
``post_migrate`` signal, which makes the content types, the permissions and the operator group again.
On PostgreSQL a TRUNCATE gives every table and index a new file (and drops the old ones' buffers): ~1 s
for this project's tables on this machine, and the permissions and content types made again after it
another ~0.5 s — per test, and the suite has a few hundred such tests. The tables of a test are nearly
empty: DELETE of every table in the same one transaction (foreign keys are deferred to its commit, as
Django creates them on PostgreSQL) takes ~50 ms, and keeping the content-type and permission rows —
exactly the rows ``post_migrate`` would make again, under the same ids — leaves it nothing to insert
but the operator group. Every other table is emptied as before; the next test starts from the same
rows it started from with TRUNCATE (sequences are not reset by either, unless a test asks for
``reset_sequences``, which keeps Django's TRUNCATE ... RESTART IDENTITY).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

# made by post_migrate from the models alone (django.contrib.contenttypes / auth): the same rows again
KEPT = frozenset({"django_content_type", "auth_permission"})


@contextmanager
def delete_instead_of_truncate() -> Iterator[None]:
    from django.db.backends.postgresql.operations import DatabaseOperations

    truncate = DatabaseOperations.sql_flush

    def sql_flush(self, style, tables, *, reset_sequences=False, allow_cascade=False):
        if reset_sequences or allow_cascade or not tables:
            return truncate(self, style, tables, reset_sequences=reset_sequences, allow_cascade=allow_cascade)
        deletes = [
            f"{style.SQL_KEYWORD('DELETE FROM')} {style.SQL_FIELD(self.quote_name(t))};"
            for t in tables
            if t not in KEPT
        ]
        return [f"{style.SQL_KEYWORD('SET CONSTRAINTS ALL DEFERRED')};", *deletes]

    DatabaseOperations.sql_flush = sql_flush
    try:
        yield
    finally:
        DatabaseOperations.sql_flush = truncate
