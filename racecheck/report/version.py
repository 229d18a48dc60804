"""racecheck's installed version, for `--version` and SARIF's tool."""

from __future__ import annotations


def installed_version() -> str:
    """racecheck's installed version ("0+unknown" when run from an uninstalled tree);
    looked up only when asked for (start-up time)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("racecheck")
    except PackageNotFoundError:
        return "0+unknown"
