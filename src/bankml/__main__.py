"""`python -m bankml` is the `bankml` command."""

import sys

from .cli import main

sys.exit(main())
