"""CLI commands of this area, added to the `tierdesk` group by app.cli."""

commands: list = []
