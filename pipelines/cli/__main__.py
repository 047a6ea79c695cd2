"""`python -m sia.pipelines.cli`: the `sia` command line, as the console script runs it."""

import sys

from sia.pipelines.cli import main

sys.exit(main())
