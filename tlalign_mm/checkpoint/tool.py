"""One line, not a traceback, when a tool refuses a file."""
import os
import sys

from .load import CheckpointError


def run_tool(main, *args, **kwargs):
    """Call ``main``; a refused checkpoint or a missing file ends the
    process with exit status 1 and one ``error:`` line on stderr. With
    ``--debug`` on the command line (removed before ``main`` parses it) or
    ``TLALIGN_DEBUG=1``, the traceback is shown instead."""
    debug = '--debug' in sys.argv or os.environ.get('TLALIGN_DEBUG') == '1'
    sys.argv = [a for a in sys.argv if a != '--debug']
    try:
        return main(*args, **kwargs)
    except (CheckpointError, FileNotFoundError) as error:
        if debug:
            raise
        print(f'error: {error}', file=sys.stderr)
        raise SystemExit(1)
