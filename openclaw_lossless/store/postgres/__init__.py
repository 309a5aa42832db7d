"""The PostgreSQL + pgvector store: several sidecars sharing one memory (``store/api.py`` names its calls).

Only this package imports psycopg, psycopg_pool and pgvector: the SQLite store, the default, needs none of them.
"""
