"""Code lines of Python files: lines holding code, without docstrings,
comments or blank lines (how docs/ and the issues count a module's size).

    python tools/code_lines.py tlalign_mm/checkpoint/*.py \
        tlalign_mm/engine/*.py tlalign_mm/downstream/*.py
"""
import argparse
import ast
import io
import tokenize

_SKIP = (tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT,
         tokenize.DEDENT, tokenize.ENDMARKER)


def code_lines(source: str) -> int:
    """The number of lines of ``source`` that hold code."""
    docstrings = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef,
                             ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(
                    first.value, ast.Constant) and isinstance(
                        first.value.value, str):
                docstrings.update(range(first.lineno, first.end_lineno + 1))
    lines = set()
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type not in _SKIP:
            lines.update(range(token.start[0], token.end[0] + 1))
    return len(lines - docstrings)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('files', nargs='+')
    total = 0
    for path in parser.parse_args().files:
        with open(path) as f:
            count = code_lines(f.read())
        total += count
        print(f'{count:6d} {path}')
    print(f'{total:6d} total')


if __name__ == '__main__':
    main()
