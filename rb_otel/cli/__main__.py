"""``python -m rb_otel.cli``: the ``rb-otel`` command."""

import sys

from rb_otel.cli.main import main

sys.exit(main())
