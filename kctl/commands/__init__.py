"""Command-line interface: one Typer sub-app per command group (parse, call a library API, render)."""
