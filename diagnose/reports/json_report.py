"""`--format json`: the versioned schema (schema_version 2, diagnose/data/report.schema.json),
findings in ranked order; `diagnose schema` prints that schema."""
from __future__ import annotations

import json


def render(data: dict) -> str:
    return json.dumps(data, indent=2, ensure_ascii=False, default=str) + "\n"


def schema_text() -> str:
    from importlib.resources import files       # only `diagnose schema` reads it (~2 ms to import)
    return files("diagnose").joinpath("data", "report.schema.json").read_text(encoding="utf-8")


def schema_app(args: list[str], prog_name: str) -> None:
    import typer
    app = typer.Typer(add_completion=False, rich_markup_mode=None, pretty_exceptions_enable=False,
                      context_settings={"help_option_names": ["-h", "--help"]})

    @app.command(help="Print the JSON Schema (draft 2020-12) that every `--format json` report follows.")
    def schema() -> None:
        import sys
        sys.stdout.write(schema_text())

    app(args=args, prog_name=prog_name)
