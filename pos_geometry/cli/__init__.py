"""The ``pos-geometry`` command line.

Commands: ``plot``, ``atlas``, ``analyze``, ``info``, ``reproduce``, ``hidden``, ``intervene``, ``sweep``, ``card`` and ``compare``;
one module per group (:mod:`~pos_geometry.cli.figures`, :mod:`~pos_geometry.cli.tables`,
:mod:`~pos_geometry.cli.reproduce`, :mod:`~pos_geometry.cli.hidden`, :mod:`~pos_geometry.cli.sweep`,
:mod:`~pos_geometry.cli.card`, :mod:`~pos_geometry.cli.compare`), what
they share in :mod:`~pos_geometry.cli._common`.

The CLI only parses arguments and calls the public API; every number it prints comes from
the same functions as in Python. Heavy libraries (torch, scipy, plotly) are imported inside the
commands, so ``pos-geometry --help`` answers at once. Progress goes to stderr (never into
``--json``/``--csv`` output). A :class:`~pos_geometry.errors.PosGeometryError`, or an ``OSError``
while writing, is printed as one line and exits with status 1 (``--debug`` shows the traceback);
so is any other exception, as an internal error to report: no input shows a traceback without
``--debug``. Usage errors exit with status 2.
"""

from __future__ import annotations

import inspect
import os
import sys
from collections.abc import Callable

import click
import typer
from typer.core import TyperGroup

from pos_geometry.cli import (
    card,
    compare,
    fetch,
    figures,
    hidden,
    intervene,
    models,
    reproduce,
    sweep,
    tables,
)
from pos_geometry.cli._common import STATE

__all__ = ["app", "main"]

_GLOBAL_FLAGS = ("--quiet", "-q", "--debug")


class _Group(TyperGroup):
    """The command group, which also takes its flags after the command's name: ``pos-geometry analyze gpt2
    --quiet`` is ``pos-geometry --quiet analyze gpt2`` (the flags take no value, and no command has its own)."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        end = args.index("--") if "--" in args else len(args)
        flags = [a for a in args[:end] if a in _GLOBAL_FLAGS]
        rest = [a for a in args[:end] if a not in _GLOBAL_FLAGS] + args[end:]
        return super().parse_args(ctx, flags + rest)


app = typer.Typer(
    cls=_Group,
    name="pos-geometry",
    help="The geometry of positional embeddings in pretrained transformers.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def _version(value: bool) -> None:
    if value:
        from pos_geometry._version import __version__

        typer.echo(f"pos-geometry {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    debug: bool = typer.Option(False, "--debug", help="Show the full traceback of errors."),
    quiet: bool = typer.Option(
        False, "--quiet", "-q", help="No progress bars (they are shown only on a terminal anyway)."
    ),
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Print the version and exit."
    ),
) -> None:
    """The geometry of positional embeddings in pretrained transformers."""
    STATE["debug"] = debug
    from pos_geometry import _progress

    _progress.set_quiet(quiet)


def version() -> None:
    """Print the version (the same as pos-geometry --version)."""
    from pos_geometry._version import __version__

    typer.echo(f"pos-geometry {__version__}")


def _help(func: Callable[..., None]) -> str:
    """``func``'s docstring with each paragraph on one line: typer keeps single line breaks inside a
    paragraph, which break sentences wherever the terminal is narrower or wider than the source."""
    paragraphs = inspect.cleandoc(func.__doc__ or "").split("\n\n")
    return "\n\n".join(" ".join(line.strip() for line in p.splitlines()) for p in paragraphs)


for _command in (
    figures.plot, figures.atlas, tables.analyze, tables.info, models.models, fetch.fetch, reproduce.reproduce,
    hidden.hidden, intervene.intervene, sweep.sweep, card.card, compare.compare, version,
):  # fmt: skip
    app.command(help=_help(_command))(_command)


def _openmp_wait_policy() -> None:
    """Ask OpenMP for passive waiting when the machine is already busy, unless ``OMP_WAIT_POLICY`` is set.

    OpenMP threads that spin while they wait for work take the cores from the processes beside them and
    from each other: on 2 cores, two ``analyze`` runs of GPT-2 at once took 59 s each (7 s alone); with
    passive waiting 22 s. On an idle machine spinning is about 10% faster, so the policy is chosen only when
    the 1-minute load average is already at least half the cores. torch reads it when it is first imported,
    which the commands do after this. Only the process entry points call it (``pos-geometry``, ``python -m
    pos_geometry``): importing the package changes nothing, and ``app`` run in-process leaves the
    environment alone.
    """
    if "OMP_WAIT_POLICY" in os.environ or "torch" in sys.modules:
        return
    try:
        busy = os.getloadavg()[0] >= 0.5 * (os.cpu_count() or 1)
    except OSError:  # no load average on this platform
        return
    if busy:
        os.environ["OMP_WAIT_POLICY"] = "PASSIVE"


def main() -> None:
    """Console-script entry point."""
    _openmp_wait_policy()
    app()
