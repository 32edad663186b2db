import sys

from dynscope.commands import main

sys.exit(main())
