"""tools/code_lines.py counts code, not docstrings, comments or blanks."""
from .tool_scripts import load_tool

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
    assert load_tool('code_lines.py').code_lines(SOURCE) == 6
