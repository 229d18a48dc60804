"""`python -m racecheck`: the same command line as the `racecheck` script."""

from racecheck.cli import main

raise SystemExit(main())
