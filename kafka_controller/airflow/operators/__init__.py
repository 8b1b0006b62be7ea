"""Operators: thin and templated; each records an ``operations`` row around its work."""
