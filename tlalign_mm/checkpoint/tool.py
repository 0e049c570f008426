"""One line, not a traceback, when a tool refuses a file."""
import contextlib
import os
import pickle
import sys

from PIL.Image import DecompressionBombError

from tlalign_mm.core.options import OptionError

from .load import CheckpointError


@contextlib.contextmanager
def one_line_errors(debug: bool = False):
    """A refused checkpoint or data file (a CIFAR batch, an image past a
    dataset's pixel bound), a missing file, a directory where a file is
    written, or a bad TL-Align option, raised inside ends the process with
    exit status 1 and one ``error:`` line on stderr (one raised in a
    DataLoader worker arrives with the worker's traceback in its message:
    its last line); with ``debug`` or ``TLALIGN_DEBUG=1``, the
    traceback."""
    try:
        yield
    except (CheckpointError, DecompressionBombError, FileNotFoundError,
            IsADirectoryError, OptionError,
            pickle.UnpicklingError) as error:
        if debug or os.environ.get('TLALIGN_DEBUG') == '1':
            raise
        message = str(error)
        if message.startswith('Caught ') and '\nOriginal Traceback' in message:
            # torch's ExceptionWrapper: the original error is the last line
            message = message.rstrip().splitlines()[-1].split(': ', 1)[-1]
        print(f'error: {message}', file=sys.stderr)
        raise SystemExit(1) from None

