"""Scripts under ``tools/`` loaded as modules, so tests call their ``main``
in this process (saves a Python start-up with all of OpenMMLab's imports)."""
import importlib.util
import os.path as osp

ROOT = osp.dirname(osp.dirname(osp.abspath(__file__)))


def load_tool(relpath: str):
    """``tools/<relpath>`` as a fresh module."""
    name = 'tool_' + relpath[:-len('.py')].replace('/', '_')
    spec = importlib.util.spec_from_file_location(
        name, osp.join(ROOT, 'tools', relpath))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def export_cli(argv, capsys) -> str:
    """``tools/export_backbone.py``'s main on ``argv``; returns what it
    printed."""
    module = load_tool('export_backbone.py')
    capsys.readouterr()
    module.main(argv)
    return capsys.readouterr().out
