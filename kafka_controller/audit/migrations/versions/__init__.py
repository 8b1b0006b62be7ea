"""Alembic revisions, oldest first: 0001 the base tables, 0002 the report views."""
