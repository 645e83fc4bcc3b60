"""The command line (convert, verify, batch, inspect, explain) and its renderings."""


def entry() -> None:
    """The program's entry point (``onnx-slice-tools``, ``python -m onnx_slice_tools``).  This
    module imports nothing, so a Ctrl-C while the command line's modules load ends the process
    with 130 and no traceback; :func:`.main.run` handles it from there on.  Before any import:
    numpy's BLAS set to one thread (:func:`.startup.one_blas_thread`)."""
    import sys
    try:
        from .startup import one_blas_thread
        one_blas_thread()
        from .main import run
    except KeyboardInterrupt:
        sys.exit(130)
    run()
