import sys

from perfconsole.core.cli.main import main

sys.exit(main())
