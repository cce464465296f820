"""`python -m cone` is `cone`."""

import sys

from cone.cli import main

sys.exit(main())
