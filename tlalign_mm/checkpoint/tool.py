"""One line, not a traceback, when a tool refuses a file."""
import contextlib
import os
import pickle
import sys

from tlalign_mm.core.options import OptionError

from .load import CheckpointError


@contextlib.contextmanager
def one_line_errors(debug: bool = False):
    """A refused checkpoint or data file (a CIFAR batch), a missing file, a
    directory where a file is written, or a bad TL-Align option, raised
    inside ends the process with exit status 1 and one ``error:`` line on
    stderr; with ``debug`` or ``TLALIGN_DEBUG=1``, the traceback."""
    try:
        yield
    except (CheckpointError, FileNotFoundError, IsADirectoryError,
            OptionError, pickle.UnpicklingError) as error:
        if debug or os.environ.get('TLALIGN_DEBUG') == '1':
            raise
        print(f'error: {error}', file=sys.stderr)
        raise SystemExit(1) from None


def run_tool(main, *args, **kwargs):
    """Call ``main`` under :func:`one_line_errors`; ``--debug`` on the
    command line (removed before ``main`` parses it) shows the traceback."""
    debug = '--debug' in sys.argv
    sys.argv = [a for a in sys.argv if a != '--debug']
    with one_line_errors(debug):
        return main(*args, **kwargs)
