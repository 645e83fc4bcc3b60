#!/usr/bin/env python
"""Convert and verify every model under a folder: the batch job, as a script to adapt.

    python scripts/batch_convert.py models/ -o converted/ [--jobs 2] [--force]

It does what ``onnx-slice-tools batch`` does, through the Python API
(``onnx_slice_tools.cli.batch.batch_convert``); change ``on_result`` to hook in your own
bookkeeping.  Exit code: 0 all converted, 1 a rewrite or verification failed, 2 an unusable model.
"""

from __future__ import annotations

import argparse
import sys

from onnx_slice_tools.cli.batch import batch_convert


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("input_dir")
    ap.add_argument("-o", "--output", required=True)
    ap.add_argument("--jobs", type=int, default=None)
    ap.add_argument("--force", action="store_true")
    args = ap.parse_args(argv)

    def on_result(entry: dict) -> None:
        detail = entry.get("error") or f"{entry.get('rewritten')}/{entry.get('strided_slice_nodes')} rewritten"
        print(f"{entry['status']:>9}  {entry['input']}: {detail}", flush=True)

    report = batch_convert(args.input_dir, args.output, jobs=args.jobs, force=args.force, on_result=on_result)
    print(f"{report.counts()} in {report.seconds:.1f} s; report: {args.output}/report.json")
    return report.exit_code


if __name__ == "__main__":
    sys.exit(main())
