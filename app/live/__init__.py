"""Live push: events published through Redis pub/sub (``bus``) and streamed to browsers as
server-sent events (``stream``)."""
