"""Helpers of the privacy tests: everything stored, as text to search.

- ``database_dump(url)``: every row of every table;
- ``redis_dump(client, prefix)``: every key under the prefix with its value, whatever its type.
"""

from __future__ import annotations

from sqlalchemy import create_engine, inspect, text


def database_dump(url: str) -> str:
    engine = create_engine(url)
    parts = []
    with engine.connect() as conn:
        for table in inspect(conn).get_table_names():
            for row in conn.execute(text(f'SELECT * FROM "{table}"')):
                parts.append(f"{table}: {tuple(row)!r}")
    engine.dispose()
    return "\n".join(parts)


def redis_dump(client, prefix: str) -> str:
    parts = []
    for key in client.scan_iter(match=f"{prefix}*", count=1000):
        kind = client.type(key)
        if kind == "string":
            value = client.get(key)
        elif kind == "hash":
            value = client.hgetall(key)
        elif kind == "zset":
            value = client.zrange(key, 0, -1, withscores=True)
        elif kind == "list":
            value = client.lrange(key, 0, -1)
        elif kind == "set":
            value = client.smembers(key)
        elif kind == "stream":
            value = client.xrange(key)
        else:
            value = kind
        parts.append(f"{key}: {value!r}")
    return "\n".join(parts)
