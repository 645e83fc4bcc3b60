"""The command line (convert, verify, batch, inspect, explain) and its renderings."""


def entry() -> None:
    """The program's entry point (``onnx-slice-tools``, ``python -m onnx_slice_tools``).  This
    module imports nothing, so a Ctrl-C while the command line's modules load ends the process
    with 130 and no traceback; :func:`.main.run` handles it from there on."""
    import sys
    try:
        from .main import run
    except KeyboardInterrupt:
        sys.exit(130)
    run()
