"""``python -m gradsched``."""

import sys

from gradsched.cli import main

sys.exit(main())
