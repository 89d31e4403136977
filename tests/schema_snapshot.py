"""A catalog snapshot of a database's user-visible schema, for migration tests.

Compared with ``==`` before/after migrations; it lists schemas, extensions,
tables (with row-level security flags) and columns, constraints, indexes,
functions, policies, triggers, comments and privileges (excluding system
schemas), so any leftover, missing or different object shows up in the diff.
"""

from __future__ import annotations

import psycopg

_QUERIES = {
    "schemas": """
        SELECT nspname FROM pg_namespace
         WHERE nspname NOT LIKE 'pg\\_%' AND nspname <> 'information_schema' ORDER BY 1""",
    "extensions": "SELECT extname, extnamespace::regnamespace::text FROM pg_extension ORDER BY 1",
    "tables": """
        SELECT relnamespace::regnamespace::text, relname, relkind, relrowsecurity, relforcerowsecurity,
               reloptions::text
          FROM pg_class
         WHERE relnamespace::regnamespace::text NOT IN ('pg_catalog', 'information_schema', 'pg_toast')
           AND relkind IN ('r', 'p', 'v', 'm', 'S', 'f')
         ORDER BY 1, 2""",
    "columns": """
        SELECT table_schema, table_name, column_name, data_type, udt_name, is_nullable,
               column_default, is_generated, generation_expression
          FROM information_schema.columns
         WHERE table_schema NOT IN ('pg_catalog', 'information_schema')
         ORDER BY 1, 2, ordinal_position""",
    "vector_types": """
        SELECT c.relnamespace::regnamespace::text, c.relname, a.attname,
               format_type(a.atttypid, a.atttypmod)
          FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid
         WHERE c.relnamespace::regnamespace::text NOT IN ('pg_catalog', 'information_schema', 'pg_toast')
           AND a.attnum > 0 AND NOT a.attisdropped ORDER BY 1, 2, 3""",
    "constraints": """
        SELECT conrelid::regclass::text, conname, pg_get_constraintdef(oid)
          FROM pg_constraint
         WHERE connamespace::regnamespace::text NOT IN ('pg_catalog', 'information_schema')
         ORDER BY 1, 2""",
    "indexes": """
        SELECT schemaname, indexname, indexdef FROM pg_indexes
         WHERE schemaname NOT IN ('pg_catalog', 'information_schema') ORDER BY 1, 2""",
    "functions": """
        SELECT p.oid::regprocedure::text, pg_get_functiondef(p.oid)
          FROM pg_proc p
         WHERE p.pronamespace::regnamespace::text NOT IN ('pg_catalog', 'information_schema')
           AND NOT EXISTS (SELECT 1 FROM pg_depend d
                            WHERE d.objid = p.oid AND d.deptype = 'e')
         ORDER BY 1""",
    "policies": "SELECT schemaname, tablename, policyname, qual FROM pg_policies ORDER BY 1, 2, 3",
    "triggers": """
        SELECT tgrelid::regclass::text, tgname FROM pg_trigger WHERE NOT tgisinternal ORDER BY 1, 2""",
    # Comments on anything user-made (objects of extensions excluded; the
    # extension's own comment is kept), named stably by pg_describe_object.
    "comments": """
        SELECT pg_describe_object(d.classoid, d.objoid, d.objsubid), d.description
          FROM pg_description d
         WHERE d.objoid >= 16384
           AND NOT EXISTS (SELECT 1 FROM pg_depend e
                            WHERE e.classid = d.classoid AND e.objid = d.objoid AND e.deptype = 'e')
         ORDER BY 1""",
    "privileges": """
        SELECT 'schema', nspname, nspacl::text FROM pg_namespace
         WHERE nspname NOT LIKE 'pg\\_%' AND nspname <> 'information_schema'
        UNION ALL
        SELECT 'relation', oid::regclass::text, relacl::text FROM pg_class
         WHERE relnamespace::regnamespace::text NOT IN ('pg_catalog', 'information_schema', 'pg_toast')
        UNION ALL
        SELECT 'function', p.oid::regprocedure::text, p.proacl::text FROM pg_proc p
         WHERE p.pronamespace::regnamespace::text NOT IN ('pg_catalog', 'information_schema')
           AND NOT EXISTS (SELECT 1 FROM pg_depend d WHERE d.objid = p.oid AND d.deptype = 'e')
         ORDER BY 1, 2""",
}


def snapshot(url: str) -> dict[str, list[tuple]]:
    """Catalog facts of the database at ``url`` (libpq or SQLAlchemy form)."""
    libpq = url.replace("postgresql+psycopg://", "postgresql://")
    with psycopg.connect(libpq) as conn:
        return {name: conn.execute(sql).fetchall() for name, sql in _QUERIES.items()}
