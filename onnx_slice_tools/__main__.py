import gc
import sys

from .cli import main

code = main()
gc.freeze()  # the process ends here: the collector's last pass need not scan what the command built
sys.exit(code)
