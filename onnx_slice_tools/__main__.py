import gc
import sys

from .cli.main import main

code = main()
gc.freeze()  # the process ends here: the collector's last pass need not scan what the command built
sys.exit(code)
