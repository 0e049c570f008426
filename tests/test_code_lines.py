"""tools/code_lines.py counts code, not docstrings, comments or blanks."""
from .tool_scripts import load_tool

code_lines = load_tool('code_lines.py').code_lines

SOURCE = '''"""Module docstring,
two lines."""
import os  # a comment


class A:
    """Class docstring."""

    x = (1,
         2)

    def f(self):
        """One line."""
        # only a comment
        return 'not a """docstring"""'
'''


def test_counts_only_code_lines():
    # import, class, x = (1, / 2), def, return
    assert code_lines(SOURCE) == 6


def test_a_string_statement_after_the_first_is_code():
    assert code_lines('def f():\n    """doc"""\n    "not a docstring"\n') \
        == 2
