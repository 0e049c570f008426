"""tools/code_lines.py counts code, not docstrings, comments or blanks."""
import runpy

from .cli import ROOT

SOURCE = '''"""Module docstring,
two lines."""


class A:
    """Class docstring."""
    x = (1,  # a comment
         2)
    # only a comment
    def f(self):
        """One line."""
        "a string statement after the first is code"
        return 'not a """docstring"""'
'''


def test_counts_only_code_lines():
    # class, x = (1, / 2), def, the second string, return
    code_lines = runpy.run_path(f'{ROOT}/tools/code_lines.py')['code_lines']
    assert code_lines(SOURCE) == 6
