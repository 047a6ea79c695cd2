"""Errors that reach the user as one clear line (the CLI prints them, no traceback)."""

from __future__ import annotations


class SiaError(Exception):
    """Base class of every error caused by the user's input (files, options, configs).

    The message says what is wrong, where (file, row, column, option) and how to fix it.
    """


class TraceError(SiaError):
    """A trace file (or a table in memory) breaks the trace contract."""


class ConfigError(SiaError):
    """A command-line option or an experiment config is invalid."""
