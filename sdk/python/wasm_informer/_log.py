"""Leveled logging into the host's log, tagged with the plugin's name."""

from __future__ import annotations

from typing import Any, Dict

from wit_world.imports import log as _log

_LEVELS: Dict[str, _log.Level] = {
    "trace": _log.Level.TRACE,
    "debug": _log.Level.DEBUG,
    "info": _log.Level.INFO,
    "warn": _log.Level.WARN,
    "error": _log.Level.ERROR,
}


def log(level: str, message: Any) -> None:
    """Writes one message to the host log; level is trace|debug|info|warn|error."""
    _log.log(_LEVELS[level], str(message))


def trace(message: Any) -> None:
    """Logs at trace level."""
    _log.log(_log.Level.TRACE, str(message))


def debug(message: Any) -> None:
    """Logs at debug level."""
    _log.log(_log.Level.DEBUG, str(message))


def info(message: Any) -> None:
    """Logs at info level."""
    _log.log(_log.Level.INFO, str(message))


def warn(message: Any) -> None:
    """Logs at warn level."""
    _log.log(_log.Level.WARN, str(message))


def error(message: Any) -> None:
    """Logs at error level."""
    _log.log(_log.Level.ERROR, str(message))
