from workbench.cli import entry

entry()
